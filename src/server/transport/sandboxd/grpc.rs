//! `--sandboxd-grpc ADDR`: agent-sandbox's `process.v1.ProcessService`
//! (KEP-539.2 sandboxd, docs/sandboxd.md) over h2c — cleartext HTTP/2 with prior
//! knowledge, as `grpc.insecure_channel` speaks it — on hyper's HTTP/2
//! server. Every RPC is a mapping onto the verbs of `jobs::Jobs`:
//!
//! | RPC | verbs |
//! |---|---|
//! | `Execute` | `launch` (stdin closed) → `follow` until `Exit`: the whole output in one `ExecuteResponse` |
//! | `Start` | `launch` (stdin open; `pty` → a terminal job) → `InitEvent`, then `follow`'s output as `stdout`/`stderr`, then `ExitEvent` |
//! | `WriteStdin` | `write_stdin(id, input, false)`, or `write_stdin(id, [], true)` for `eof` |
//! | `SendSignal` | `signal(id, Plan::One(INT/TERM/KILL), 5 s)`: the group, death verified as `kill` does |
//! | `ResizeTTY` | `resize(id, cols, rows)` (`FAILED_PRECONDITION` for a pipe job) |
//!
//! The request's `ProcessConfig` (argv, env, cwd) and `pty` become a
//! `jobs::LaunchRequest`, validated as every front-end's (the rules, the
//! cwd policy, identity, limits and windows are `execute`'s); jobs are owned by their
//! stream (`Owner::JobStream`, like `POST /exec`): `list_jobs`, `status`,
//! `output` and `kill` see them, `wait` refuses them.
//!
//! # Mappings (docs/sandboxd.md)
//! - A job starts in the sandbox root (`--sandboxd-root`, checked at
//!   start-up: [`super::settings`]) when `cwd` is unset or empty, and a
//!   relative `cwd` is relative to the root; an absolute one is taken as
//!   it is. The working-directory policy then decides on the result, as
//!   for every `execute` (`PERMISSION_DENIED` outside it).
//! - `process_id` is the number of our job id: `job-7` is process 7 (ids
//!   count up from 1 per server, so they fit an `int32` for 2³¹−1 jobs;
//!   past that a launch answers `RESOURCE_EXHAUSTED`).
//! - A signal death's `exit_code` is `128+N` (as a shell reports it), not
//!   sandboxd's `-1`; the trailers say `x-mcp-exec-signal: SIGKILL`. Every
//!   exit also carries `x-mcp-exec-job-id`, and `x-mcp-exec-cause` when
//!   the server ended the job (`timeout`, `killed`, `shutdown`, `oom`…).
//! - `Execute` keeps the first `MCP_EXEC_MAX_OUTPUT_BYTES` of each stream;
//!   the trailers say `x-mcp-exec-stdout-bytes: <all written>` and, when
//!   some was left out, `x-mcp-exec-stdout-truncated: <bytes left out>`
//!   (likewise for stderr).
//! - `grpc-timeout` is the job's deadline (`timeout`): at it the job's
//!   group gets TERM, the grace, KILL, as any deadline does, and the call
//!   answers `DEADLINE_EXCEEDED`.
//! - A client that goes away (a reset stream, a closed connection) tears
//!   its job down (`Jobs::stream` with `ClientGone::TearDown`): TERM, the
//!   grace, KILL to the whole group, then removed — nothing else could
//!   collect it.
//! - Output is what every other front-end sees: UTF-8-sanitised (invalid
//!   bytes become U+FFFD) and redacted; a `Start` client too
//!   slow for the job's window misses the bytes the window dropped.
//!
//! Errors are gRPC statuses with a `grpc-message`: `INVALID_ARGUMENT` (a
//! bad request, an argument `execute` refuses), `NOT_FOUND` (an unknown
//! `process_id`), `FAILED_PRECONDITION` (stdin closed, no terminal, the
//! program could not start), `PERMISSION_DENIED` (the cwd policy, a signal
//! the kernel refused), `RESOURCE_EXHAUSTED` (the queue is full, the
//! breaker is open), `UNIMPLEMENTED` (another method or a compressed
//! message).

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response};
use init::Program;
use tokio_util::sync::CancellationToken;

use super::settings::{SandboxRoot, SandboxdGrpc};
use super::wire::{self, GrpcBody, GrpcStatus, ResponseSender, pb};
use crate::capture::StreamSpec;
use crate::jobs::result::JobResult;
use crate::jobs::{
    ClientGone, Event, Job, JobId, JobSignalError, LaunchError, LaunchRequest, Launched, Owner,
    Plan, StdinError, Stream, Streamed, Streaming, TerminalError, TerminalSize,
};
use crate::net::request::BodyError;
use crate::net::{
    self,
    accept::{self, Protocol},
    status::Code,
};
use crate::protocol::version::{LATEST, Revision};
use crate::server::app::App;
use crate::tools::ToolError;

/// The path prefix of every method.
const SERVICE: &str = "/process.v1.ProcessService/";
/// The most output one `Start` message carries.
const CHUNK: u64 = 64 * 1024;
/// How long `SendSignal` waits for the group's death after its signal
/// (the `kill` tool's default).
const SIGNAL_WAIT: Duration = Duration::from_secs(5);

/// Binds `settings`' address and serves `ProcessService` through the floor
/// until shutdown begins (open streams go on: the jobs' shutdown ends their
/// jobs, and each stream then says how its job ended); the bound address is
/// printed on stderr (`mcp-exec: listening for sandboxd gRPC on ADDR`: a
/// port of 0 picks a free one).
pub async fn start(
    settings: SandboxdGrpc,
    app: Arc<App>,
    shutdown: &CancellationToken,
) -> std::io::Result<()> {
    let socket = accept::bind(settings.auth.addr(), "sandboxd gRPC").await?;
    let floor = accept::Listener {
        stop: Some(shutdown.clone()),
        ..accept::Listener::new(
            "sandboxd-grpc",
            Protocol::Http2,
            app.config.listener_cap(),
            app.config.http_stall_timeout,
            settings.auth.has_token(),
        )
    };
    let settings = Arc::new(settings);
    accept::serve(socket, floor, move |conn| {
        let (app, settings, checked) = (
            Arc::clone(&app),
            Arc::clone(&settings),
            Arc::clone(&settings),
        );
        net::http::http2(
            conn,
            move |req| checked.auth.check(req.uri(), req.headers()).is_ok(),
            move |req| handle(Arc::clone(&app), Arc::clone(&settings), req),
        )
    });
    Ok(())
}

/// One request: read its message, answer `200 application/grpc` at once,
/// and run the RPC in a task that feeds the body and its trailers.
async fn handle(
    app: Arc<App>,
    settings: Arc<SandboxdGrpc>,
    req: Request<Incoming>,
) -> Response<GrpcBody> {
    let (body, reply) = wire::reply();
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    // The platform listeners' per-request rule: Host, Origin, and our
    // token when set.
    if let Err(refusal) = settings.auth.check(req.uri(), req.headers()) {
        let status = GrpcStatus::new(Code::from(refusal), refusal.message());
        tokio::spawn(reply.finish(Err(status)));
        return response;
    }
    let method = req
        .uri()
        .path()
        .strip_prefix(SERVICE)
        .unwrap_or_default()
        .to_owned();
    let deadline = net::timeout::grpc(req.headers());
    let post = req.method() == Method::POST;
    let message = net::request::read_whole(req.into_body(), wire::MAX_REQUEST).await;
    tokio::spawn(async move {
        let status = match (post, message) {
            (false, _) => Err(GrpcStatus::new(
                Code::Unimplemented,
                "gRPC methods are POST",
            )),
            (true, Err(BodyError::Late)) => Err(GrpcStatus::new(
                Code::DeadlineExceeded,
                format!(
                    "the request did not arrive within {} s (MCP_EXEC_HTTP_STALL_TIMEOUT)",
                    net::request::body_deadline().as_secs()
                ),
            )),
            (true, Err(e)) => Err(GrpcStatus::new(
                Code::ResourceExhausted,
                format!(
                    "reading the request (at most {} bytes): {}",
                    wire::MAX_REQUEST,
                    match e {
                        BodyError::Read(why) => why,
                        _ => "length limit exceeded".into(),
                    }
                ),
            )),
            (true, Ok(msg)) => {
                return rpc(&app, &settings.root, &method, &msg, deadline, reply).await;
            }
        };
        reply.finish(status).await;
    });
    response
}

/// Runs method `method` (a job's `cwd` relative to `root`) and finishes
/// `reply`.
async fn rpc(
    app: &App,
    root: &SandboxRoot,
    method: &str,
    msg: &[u8],
    deadline: Option<Duration>,
    mut reply: ResponseSender,
) {
    let status = match method {
        "Execute" => match wire::decode::<pb::ExecuteRequest>(msg) {
            Ok(req) => execute(app, root, req, deadline, &mut reply).await,
            Err(e) => Err(e),
        },
        "Start" => match wire::decode::<pb::StartRequest>(msg) {
            Ok(req) => start_rpc(app, root, req, deadline, &mut reply).await,
            Err(e) => Err(e),
        },
        "WriteStdin" => match wire::decode::<pb::WriteStdinRequest>(msg) {
            Ok(req) => until_gone(&reply, write_stdin(app, req)).await,
            Err(e) => Err(e),
        },
        "SendSignal" => match wire::decode::<pb::SendSignalRequest>(msg) {
            Ok(req) => until_gone(&reply, send_signal(app, req)).await,
            Err(e) => Err(e),
        },
        "ResizeTTY" => match wire::decode::<pb::ResizeTtyRequest>(msg) {
            Ok(req) => resize(app, &req),
            Err(e) => Err(e),
        },
        other => Err(GrpcStatus::new(
            Code::Unimplemented,
            format!("unknown method {SERVICE}{other}"),
        )),
    };
    let status = match status {
        Ok(Some(msg)) => match reply.send_framed(msg).await {
            Ok(()) => Ok(()),
            Err(wire::Gone) => return,
        },
        Ok(None) => Ok(()),
        Err(e) => Err(e),
    };
    reply.finish(status).await;
}

/// A unary answer: its framed message, or none (a stream, or sent).
type Answer = Result<Option<bytes::Bytes>, GrpcStatus>;

/// A response message, framed.
fn answer(msg: &impl prost::Message) -> Answer {
    Ok(Some(wire::frame(msg)))
}

/// Runs a unary RPC's work until it ends or the client goes (then the work
/// is dropped: every verb it calls is cancel-safe).
async fn until_gone(reply: &ResponseSender, work: impl Future<Output = Answer>) -> Answer {
    tokio::select! {
        answer = work => answer,
        () = reply.gone() => Ok(None),
    }
}

/// The revision job results are rendered as: the latest (as `POST /exec`).
fn revision() -> Revision {
    Revision::negotiate(Some(LATEST))
}

/// The job a request asks for, read from its fields into the one
/// `LaunchRequest` and validated as every front-end's, owned by its stream;
/// its `cwd` is the root's ([`SandboxRoot::job_cwd`]), a `pty` size of 0
/// (proto3's unset) the default, `grpc-timeout` its deadline.
fn launch(
    app: &App,
    root: &SandboxRoot,
    config: Option<pb::ProcessConfig>,
    pty: Option<pb::Pty>,
    deadline: Option<Duration>,
) -> Result<crate::jobs::Launch, GrpcStatus> {
    let config = config.unwrap_or_default();
    if config.command.is_empty() {
        return Err(GrpcStatus::new(
            Code::InvalidArgument,
            "config.command must name the program (argv)",
        ));
    }
    if deadline.is_some_and(|d| d.is_zero()) {
        return Err(GrpcStatus::new(
            Code::DeadlineExceeded,
            "the deadline passed before the job started",
        ));
    }
    let cwd = root.job_cwd(config.cwd.as_deref());
    let argv = config.command.into_iter().map(OsString::from).collect();
    let mut req = LaunchRequest::new(Program::Argv(argv));
    req.env = config.env_vars.into_iter().collect();
    req.cwd = Some(cwd);
    req.tty = pty.map(|pty| {
        let dim = |n: u32| Some(u64::from(n)).filter(|&n| n > 0);
        TerminalSize {
            cols: dim(pty.cols),
            rows: dim(pty.rows),
        }
    });
    req.timeout = deadline;
    req.owner = Owner::JobStream;
    req.validate(&app.config, &app.job_policy)
        .map_err(|e| GrpcStatus::new(Code::InvalidArgument, ToolError::from(e).to_string()))
}

/// Launches `launch` (`jobs` closes its stdin when asked, once it runs).
fn submit(app: &App, launch: crate::jobs::Launch) -> Result<JobId, GrpcStatus> {
    match app.jobs.launch(launch) {
        Ok(Launched::Started { id, .. } | Launched::Queued { id }) => Ok(id),
        Ok(Launched::Ended(job)) => {
            let r = result(&job);
            Err(GrpcStatus::new(
                Code::FailedPrecondition,
                format!(
                    "the process could not start: {}",
                    r.status.start_error.unwrap_or_default()
                ),
            ))
        }
        Err(e) => Err(launch_error(e)),
    }
}

fn launch_error(e: LaunchError) -> GrpcStatus {
    match e {
        LaunchError::CwdRefused(why) => GrpcStatus::new(Code::PermissionDenied, why),
        e @ (LaunchError::QueueFull { .. } | LaunchError::BreakerOpen { .. }) => {
            GrpcStatus::new(Code::ResourceExhausted, e.to_string())
        }
        e @ LaunchError::ShellSession(_) => GrpcStatus::new(Code::InvalidArgument, e.to_string()),
        e @ LaunchError::DeliveredElsewhere(_) => GrpcStatus::new(Code::Internal, e.to_string()),
    }
}

/// Job `id` as process `process_id`, or `RESOURCE_EXHAUSTED` past `int32`.
fn process_id(id: JobId) -> Result<i32, GrpcStatus> {
    i32::try_from(id.0).map_err(|_| {
        GrpcStatus::new(
            Code::ResourceExhausted,
            format!("{id}: job ids past 2^31-1 do not fit sandboxd's int32 process_id"),
        )
    })
}

/// Our job for `process_id` (`NOT_FOUND` for none that could be ours).
fn job_of(process_id: i32) -> Result<JobId, GrpcStatus> {
    u64::try_from(process_id)
        .ok()
        .filter(|n| *n > 0)
        .map(JobId)
        .ok_or_else(|| not_found(process_id))
}

fn not_found(process_id: i32) -> GrpcStatus {
    GrpcStatus::new(Code::NotFound, format!("no process {process_id}"))
}

/// A delivered job rendered as the latest revision sees it, no streams.
fn result(job: &Job) -> JobResult {
    JobResult::with_streams(job, &StreamSpec::None, &StreamSpec::None, &view_none())
}

fn view_none() -> crate::jobs::result::View<'static> {
    crate::jobs::result::View {
        fields: crate::tools::context::fields(revision()),
        redact: None,
    }
}

/// How a job ended, on sandboxd's wire: its exit code (`128+N` for a
/// signal death) and the trailers that say the rest; `DEADLINE_EXCEEDED`
/// when its deadline (our `grpc-timeout`) ended it; `FAILED_PRECONDITION`
/// when it never started.
fn ended(job: &Job, reply: &mut ResponseSender) -> Result<i32, GrpcStatus> {
    let r = result(job);
    reply.meta("x-mcp-exec-job-id", r.status.job_id);
    if let Some(cause) = r.cause {
        reply.meta("x-mcp-exec-cause", cause);
    }
    for (stream, name) in [
        (Stream::Stdout, "x-mcp-exec-stdout-bytes"),
        (Stream::Stderr, "x-mcp-exec-stderr-bytes"),
    ] {
        reply.meta(name, job.total_bytes(stream));
    }
    let code = match r.status.signal_number {
        Some(n) => {
            let name = init::Signal::from_raw(n)
                .and_then(init::Signal::name)
                .map_or_else(|| n.to_string(), |s| format!("SIG{s}"));
            reply.meta("x-mcp-exec-signal", name);
            crate::jobs::result::signal_exit_code(n)
        }
        None => r.status.exit_code.unwrap_or(-1),
    };
    if r.timed_out == Some(true) && r.cause == Some("timeout") {
        return Err(GrpcStatus::new(
            Code::DeadlineExceeded,
            format!(
                "{}: the deadline passed; its process group was ended",
                r.status.job_id
            ),
        ));
    }
    if let Some(error) = r.status.start_error {
        return Err(GrpcStatus::new(
            Code::FailedPrecondition,
            format!("the process could not start: {error}"),
        ));
    }
    Ok(code)
}

/// Job `id`'s stream, as sandboxd streams a job: its raw bytes, no
/// keep-alives, no deadline of the stream's own (`grpc-timeout` is the
/// job's), and a client that goes away (`reply` gone) tears its job down —
/// even during the shutdown, which ends it anyway.
fn job_stream<'a>(
    app: &'a App,
    id: JobId,
    reply: &'a ResponseSender,
) -> crate::jobs::JobStream<'a> {
    app.jobs.stream(
        id,
        app.jobs
            .follow(id, 0, CHUNK, app.view(revision()))
            .raw_bytes(),
        reply.gone(),
        Streaming {
            keep_alive: None,
            deadline: None,
            on_gone: ClientGone::TearDown,
            shutdown: None,
        },
    )
}

/// What following a job to its end gave.
enum Followed {
    /// It ended: its result.
    Exit(Box<Job>),
    /// It left the table without a result (torn down at shutdown).
    Vanished,
    /// The client went away.
    Gone,
}

/// `Execute`: the job's whole output (up to the window per stream) and
/// its exit code in one message.
async fn execute(
    app: &App,
    root: &SandboxRoot,
    req: pb::ExecuteRequest,
    deadline: Option<Duration>,
    reply: &mut ResponseSender,
) -> Answer {
    let mut l = launch(app, root, req.config, None, deadline)?;
    l.close_stdin = true;
    // Nothing to write: stdin is closed at once (EOF, like `< /dev/null`).
    let id = submit(app, l)?;
    if let Err(e) = process_id(id) {
        app.jobs.teardown(id).await;
        return Err(e);
    }
    let cap = app.config.max_output_bytes;
    let mut kept: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
    let mut kept_raw = [0_u64; 2];
    let followed = {
        let mut stream = job_stream(app, id, reply);
        loop {
            match stream.next().await {
                Streamed::Ended => break Followed::Vanished,
                Streamed::Event(Event::Exit(job)) => break Followed::Exit(job),
                Streamed::Event(Event::Output { stream, slice }) => {
                    let i = usize::from(stream == Stream::Stderr);
                    let data = slice.data.as_bytes();
                    let room = cap.saturating_sub(kept[i].len());
                    if data.len() <= room {
                        kept[i].extend_from_slice(data);
                        kept_raw[i] += slice.bytes;
                    } else {
                        // The head of this chunk fits: its raw bytes are
                        // the data's (up to sanitising and redaction).
                        kept[i].extend_from_slice(&data[..room]);
                        kept_raw[i] += slice.bytes.min(room as u64);
                    }
                }
                Streamed::Event(Event::Bytes { stream, data, .. }) => {
                    let i = usize::from(stream == Stream::Stderr);
                    let room = cap.saturating_sub(kept[i].len());
                    let take = data.len().min(room);
                    kept[i].extend_from_slice(&data[..take]);
                    kept_raw[i] += take as u64;
                }
                Streamed::Event(Event::Queued | Event::Started { .. }) | Streamed::KeepAlive => {}
                Streamed::ClientGone | Streamed::Deadline => break Followed::Gone,
            }
        }
    };
    let job = match followed {
        Followed::Exit(job) => job,
        Followed::Vanished => {
            return Err(GrpcStatus::new(
                Code::Unavailable,
                format!("{id} was ended by the server's shutdown"),
            ));
        }
        // Torn down by the stream: nothing else could collect it.
        Followed::Gone => return Ok(None),
    };
    for (i, (stream, name)) in [
        (Stream::Stdout, "x-mcp-exec-stdout-truncated"),
        (Stream::Stderr, "x-mcp-exec-stderr-truncated"),
    ]
    .into_iter()
    .enumerate()
    {
        let left_out = job.total_bytes(stream).saturating_sub(kept_raw[i]);
        if left_out > 0 {
            reply.meta(name, left_out);
        }
    }
    let exit_code = ended(&job, reply)?;
    let [stdout, stderr] = kept;
    Ok(Some(wire::frame(&pb::ExecuteResponse {
        exit_code,
        stdout,
        stderr,
    })))
}

/// `Start`: `InitEvent`, the output as it comes, `ExitEvent`.
async fn start_rpc(
    app: &App,
    root: &SandboxRoot,
    req: pb::StartRequest,
    deadline: Option<Duration>,
    reply: &mut ResponseSender,
) -> Answer {
    let mut l = launch(app, root, req.config, req.pty, deadline)?;
    l.close_stdin = false;
    let id = submit(app, l)?;
    let pid = match process_id(id) {
        Ok(pid) => pid,
        Err(e) => {
            app.jobs.teardown(id).await;
            return Err(e);
        }
    };
    tracing::info!(job = %id, "sandboxd Start: job submitted");
    let init = event(pb::start_response::Event::Init(pb::InitEvent {
        process_id: pid,
    }));
    let mut stream = job_stream(app, id, reply);
    let followed = match reply.send(&init).await {
        Err(wire::Gone) => {
            stream.left().await;
            Followed::Gone
        }
        Ok(()) => loop {
            let msg = match stream.next().await {
                Streamed::Ended => break Followed::Vanished,
                Streamed::Event(Event::Exit(job)) => break Followed::Exit(job),
                Streamed::Event(Event::Output { stream, slice }) => {
                    let data = slice.data.into_bytes();
                    event(match stream {
                        Stream::Stdout => pb::start_response::Event::Stdout(data),
                        Stream::Stderr => pb::start_response::Event::Stderr(data),
                    })
                }
                Streamed::Event(Event::Bytes { stream, data, .. }) => event(match stream {
                    Stream::Stdout => pb::start_response::Event::Stdout(data),
                    Stream::Stderr => pb::start_response::Event::Stderr(data),
                }),
                Streamed::Event(Event::Queued | Event::Started { .. }) | Streamed::KeepAlive => {
                    continue;
                }
                Streamed::ClientGone | Streamed::Deadline => break Followed::Gone,
            };
            if reply.send(&msg).await.is_err() {
                stream.left().await;
                break Followed::Gone;
            }
        },
    };
    drop(stream);
    match followed {
        Followed::Exit(job) => {
            let exit_code = ended(&job, reply)?;
            let exit = event(pb::start_response::Event::Exit(pb::ExitEvent { exit_code }));
            // A client gone by now has nothing left to hear.
            let _ = reply.send(&exit).await;
            Ok(None)
        }
        Followed::Vanished => Err(GrpcStatus::new(
            Code::Unavailable,
            format!("{id} was ended by the server's shutdown"),
        )),
        // Torn down by the stream: nothing else could collect it.
        Followed::Gone => Ok(None),
    }
}

fn event(e: pb::start_response::Event) -> pb::StartResponse {
    pb::StartResponse { event: Some(e) }
}

/// `WriteStdin`: bytes, or `eof` (closes stdin).
async fn write_stdin(app: &App, req: pb::WriteStdinRequest) -> Answer {
    let id = job_of(req.process_id)?;
    let (data, close) = match req.payload {
        Some(pb::write_stdin_request::Payload::Input(data)) => (data, false),
        Some(pb::write_stdin_request::Payload::Eof(())) => (Vec::new(), true),
        None => {
            return Err(GrpcStatus::new(
                Code::InvalidArgument,
                "payload must be input or eof",
            ));
        }
    };
    match app.jobs.write_stdin(id, &data, close).await {
        Ok(()) => answer(&pb::WriteStdinResponse {}),
        Err(StdinError::Unknown) => Err(not_found(req.process_id)),
        Err(e) => Err(GrpcStatus::new(
            Code::FailedPrecondition,
            format!("process {}: {e}", req.process_id),
        )),
    }
}

/// `SendSignal`: INT, TERM or KILL to the job's group (a terminal job's
/// session), waiting up to [`SIGNAL_WAIT`] for its death as `kill` does;
/// how it ended reaches the job's owner (its `Start` stream's `ExitEvent`).
async fn send_signal(app: &App, req: pb::SendSignalRequest) -> Answer {
    let id = job_of(req.process_id)?;
    let signal = match pb::Signal::try_from(req.signal) {
        Ok(pb::Signal::Sigint) => init::Signal::INT,
        Ok(pb::Signal::Sigterm) => init::Signal::TERM,
        Ok(pb::Signal::Sigkill) => init::Signal::KILL,
        Ok(pb::Signal::Unspecified) | Err(_) => {
            return Err(GrpcStatus::new(
                Code::InvalidArgument,
                format!(
                    "signal {} is not one of SIGNAL_SIGINT, SIGNAL_SIGTERM, SIGNAL_SIGKILL",
                    req.signal
                ),
            ));
        }
    };
    match app
        .jobs
        .signal(id, Plan::One(signal), SIGNAL_WAIT, |_| {})
        .await
    {
        // Its result stays with its owner (a stream, or an MCP caller).
        Ok(_) => answer(&pb::SendSignalResponse {}),
        Err(JobSignalError::Unknown(_)) => Err(not_found(req.process_id)),
        Err(JobSignalError::Failed(e)) => Err(GrpcStatus::new(
            Code::PermissionDenied,
            format!("process {}: {e}", req.process_id),
        )),
    }
}

/// `ResizeTTY`: a terminal job's window size (SIGWINCH).
fn resize(app: &App, req: &pb::ResizeTtyRequest) -> Answer {
    let id = job_of(req.process_id)?;
    let dims = (u16::try_from(req.cols), u16::try_from(req.rows));
    let (Ok(cols), Ok(rows)) = dims else {
        return Err(GrpcStatus::new(
            Code::InvalidArgument,
            TerminalError::BadSize.to_string(),
        ));
    };
    match app.jobs.resize(id, cols, rows) {
        Ok(()) => answer(&pb::ResizeTtyResponse {}),
        Err(TerminalError::Unknown) => Err(not_found(req.process_id)),
        Err(e @ TerminalError::BadSize) => {
            Err(GrpcStatus::new(Code::InvalidArgument, e.to_string()))
        }
        Err(e @ TerminalError::Failed(_)) => Err(GrpcStatus::new(Code::Internal, e.to_string())),
        Err(e) => Err(GrpcStatus::new(
            Code::FailedPrecondition,
            format!("process {}: {e}", req.process_id),
        )),
    }
}
