//! `/process.Process/<Method>`: envd's processes are our jobs,
//! through `jobs::Jobs` verbs only. docs/envd.md has the mapping; the
//! rules that matter:
//!
//! - **A process is a job.** `Start` reads its request's fields into a
//!   `jobs::LaunchRequest` (the argv, `env`, `cwd`, the tag as its label, a
//!   terminal for a PTY, `Connect-Timeout-Ms` as its deadline) and validates
//!   it as every front-end does, so the rules, the cwd policy, identity,
//!   limits, queue and breaker are the same. MCP's `list_jobs`, `status`, `output`, `kill` see
//!   it, its tag as its label. Its envd **pid is the OS pid** of the job's
//!   process (its process group id), as envd's is.
//! - **Owner: the stream** (`Owner::JobStream`). `Start` and `Connect` stream
//!   the job (`Jobs::stream` over `Jobs::follow`, raw bytes; keep-alives
//!   after the request's interval of quiet) and whichever stream is attached
//!   when it ends delivers its end event, once. A client that goes away does
//!   **not** end the job (envd: "the command is not killed"; the SDK's
//!   `disconnect()` relies on it): the job runs on, its output retained in
//!   its window, and `Connect` (by pid or tag) replays the window from its
//!   first held byte, then follows live, then delivers the end — also for
//!   a job that ended while nobody was attached (envd keeps only the exit,
//!   30 s). A job that ended detached and that no `Connect` collects within
//!   [`RETAIN_DETACHED`] is removed: the stream's client-gone policy
//!   (`ClientGone::Retain`), applied by `jobs`.
//! - **Signals reach the group.** `SendSignal` is `Jobs::signal` with the
//!   one signal (`SIGKILL` waits for the group's verified death); envd
//!   signals only the leader.
//! - `List` shows the running jobs started here. Selectors name only jobs
//!   started here (a job started over MCP is MCP's).
//! - Input: `SendInput`/`StreamInput` write with `Jobs::write_stdin`
//!   (`stdin` or `pty`, whichever the job has), `CloseStdin` closes it,
//!   `Update` resizes a terminal with `Jobs::resize`.

use std::collections::HashSet;
use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::Request;
use hyper::body::Incoming;
use init::{Program, Signal};
use tokio::sync::mpsc;

use super::EnvdState;
use super::connect::{self, Code, ConnectError, EnvelopeReader, Envelopes, Meta, Shape};
use super::proto::{
    DataEvent, Empty, EndEvent, EventResponse, ListResponse, ProcessConfig, ProcessEvent,
    ProcessInfo, ProcessSelector, Selected, SendInputRequest, SendSignalRequest, SignalName,
    StartEvent, StartRequest, StreamInputEnvelope, UpdateRequest,
};
use crate::jobs::{
    ClientGone, Event, JobId, JobPhase, JobSignalError, KeepAlive, LaunchError, LaunchRequest,
    Launched, Owner, Plan, StdinError, Stream, Streamed, Streaming, TerminalError, TerminalSize,
};
use crate::net::reply::HttpReply;
use crate::protocol::version::{LATEST, Revision};
use crate::tools::{ToolError, execute};

/// The most output bytes one data event carries.
pub const MAX_CHUNK: u64 = 64 * 1024;
/// How long a job that ended with no stream attached keeps its end and its
/// output for a `Connect` (envd keeps only the exit, for 30 s).
pub const RETAIN_DETACHED: Duration = Duration::from_secs(600);
/// How long `SendSignal` waits for the group's death after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// How long it waits after SIGTERM (the answer is the same either way: the
/// signal was sent; a group that outlives it is still running).
const TERM_WAIT: Duration = Duration::from_secs(1);

/// What `List` shows of a process started here.
#[derive(Debug, Clone)]
pub(super) struct Started {
    config: ProcessConfig,
    tag: Option<String>,
}

/// Serves `/process.Process/<rpc>`.
pub(super) async fn handle(state: &Arc<EnvdState>, rpc: &str, req: Request<Incoming>) -> HttpReply {
    let shape = match rpc {
        "Start" | "Connect" => Shape::ServerStream,
        "StreamInput" => Shape::ClientStream,
        "List" | "SendInput" | "SendSignal" | "CloseStdin" | "Update" => Shape::Unary,
        _ => {
            return ConnectError::new(
                Code::Unimplemented,
                format!("process.Process/{rpc} is not a method"),
            )
            .unary();
        }
    };
    if let Some(reply) = connect::refusal(req.headers(), shape) {
        return reply;
    }
    let meta = match Meta::of(req.headers()) {
        Ok(m) => m,
        Err(e) if shape == Shape::Unary => return e.unary(),
        Err(e) => return Envelopes::failed(&e),
    };
    let limit = state.max_message();
    let body = req.into_body();
    match rpc {
        "Start" => match connect::stream_request(body, limit).await {
            Ok(msg) => start(state, msg, meta),
            Err(e) => Envelopes::failed(&e),
        },
        "Connect" => match connect::stream_request::<Selected>(body, limit).await {
            Ok(msg) => attach(state, msg.process.as_ref(), meta),
            Err(e) => Envelopes::failed(&e),
        },
        "StreamInput" => stream_input(state, EnvelopeReader::new(body, limit)).await,
        _ => {
            let answer = match rpc {
                "List" => Ok(connect::ok(&list(state))),
                "SendInput" => match connect::unary_request(body, limit).await {
                    Ok(m) => send_input(state, m).await,
                    Err(e) => Err(e),
                },
                "SendSignal" => match connect::unary_request(body, limit).await {
                    Ok(m) => send_signal(state, m).await,
                    Err(e) => Err(e),
                },
                "CloseStdin" => match connect::unary_request::<Selected>(body, limit).await {
                    Ok(m) => close_stdin(state, m.process.as_ref()).await,
                    Err(e) => Err(e),
                },
                _ => match connect::unary_request(body, limit).await {
                    Ok(m) => update(state, m),
                    Err(e) => Err(e),
                },
            };
            answer.unwrap_or_else(|e| e.unary())
        }
    }
}

/// The revision results render as (for the redaction view).
fn revision() -> Revision {
    Revision::negotiate(Some(LATEST))
}

/// The launch a `StartRequest` asks for, read from its fields: the argv
/// (`cmd` and `args`), `envs`, `cwd`, the tag as the label, `pty` as a
/// terminal (a size of 0 is proto3's unset: the default) and
/// `Connect-Timeout-Ms` as the job's deadline. The rules are the request's
/// (`LaunchRequest::validate`), as for every front-end.
fn request(msg: &StartRequest, config: &ProcessConfig, meta: Meta) -> LaunchRequest {
    let argv = std::iter::once(&config.cmd)
        .chain(&config.args)
        .map(OsString::from)
        .collect();
    let mut req = LaunchRequest::new(Program::Argv(argv));
    req.env = config
        .envs
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    req.cwd.clone_from(&config.cwd);
    req.label.clone_from(&msg.tag);
    req.timeout = meta.timeout.filter(|t| !t.is_zero());
    req.tty = msg.pty.map(|pty| {
        let size = pty.size.unwrap_or_default();
        let dim = |n: u32| Some(u64::from(n)).filter(|&n| n > 0);
        TerminalSize {
            cols: dim(size.cols),
            rows: dim(size.rows),
        }
    });
    req
}

/// `Start`: launch the job, then stream it.
fn start(state: &Arc<EnvdState>, msg: StartRequest, meta: Meta) -> HttpReply {
    let Some(config) = msg.process.clone().filter(|p| !p.cmd.is_empty()) else {
        return Envelopes::failed(&ConnectError::new(
            Code::InvalidArgument,
            "process.cmd is required",
        ));
    };
    let app = &state.app;
    let mut req = request(&msg, &config, meta);
    let tty = msg.pty.is_some();
    // envd: stdin absent or true keeps a pipe open; false is no stdin. A
    // terminal is always its input (closing it would send C-d).
    let close = !tty && msg.stdin == Some(false);
    req.close_stdin = close;
    req.owner = Owner::JobStream;
    // `jobs` closes stdin (when asked) once the job runs.
    let launch = match req.validate(&app.config, &app.job_policy) {
        Ok(launch) => launch,
        Err(e) => {
            let text = ToolError::from(e).to_string();
            return Envelopes::failed(&ConnectError::new(Code::InvalidArgument, text));
        }
    };
    let id = match app.jobs.launch(launch) {
        Ok(Launched::Started { id, .. } | Launched::Queued { id }) => id,
        Ok(Launched::Ended(job)) => {
            return Envelopes::failed(&not_started(&job.phase()));
        }
        Err(e @ (LaunchError::BreakerOpen { .. } | LaunchError::QueueFull { .. })) => {
            return Envelopes::failed(&ConnectError::new(
                Code::Unavailable,
                execute::launch_error(e).to_string(),
            ));
        }
        Err(e) => {
            return Envelopes::failed(&ConnectError::new(
                Code::InvalidArgument,
                execute::launch_error(e).to_string(),
            ));
        }
    };
    tracing::info!(job = %id, "envd Start: job submitted");
    let mut processes = state.processes();
    // What a removed job left here goes now (a retained job's keep time
    // ran out, or another front-end took it): the notes never outgrow the
    // table.
    processes.retain(|id, _| app.jobs.contains(*id));
    processes.insert(
        id,
        Started {
            config,
            tag: msg.tag,
        },
    );
    drop(processes);
    // Start's deadline is the job's (`timeout` above), not the stream's.
    stream(state, id, tty, meta.keepalive, None)
}

/// `Connect`: re-attach to a job started here, by pid or tag.
fn attach(state: &Arc<EnvdState>, selector: Option<&ProcessSelector>, meta: Meta) -> HttpReply {
    let id = match select(state, selector) {
        Ok(id) => id,
        Err(e) => return Envelopes::failed(&e),
    };
    let tty = state.app.jobs.is_tty(id).unwrap_or(false);
    stream(state, id, tty, meta.keepalive, meta.timeout)
}

/// The streaming answer of `Start` and `Connect`: the job's events from the
/// first byte its window holds, live, to its end.
fn stream(
    state: &Arc<EnvdState>,
    id: JobId,
    tty: bool,
    keepalive: Duration,
    deadline: Option<Duration>,
) -> HttpReply {
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    let state = Arc::clone(state);
    tokio::spawn(async move { frame(&state, id, tty, keepalive, deadline, &tx).await });
    Envelopes::reply(rx)
}

/// Frames the job's stream (`Jobs::stream`) as envelopes. A client that
/// goes away, or whose deadline passes, detaches: the job runs on, kept
/// [`RETAIN_DETACHED`] after its end for a `Connect` (`ClientGone::Retain`).
async fn frame(
    state: &EnvdState,
    id: JobId,
    tty: bool,
    keepalive: Duration,
    deadline: Option<Duration>,
    tx: &mpsc::Sender<Bytes>,
) {
    let view = state.app.view(revision());
    let jobs = &state.app.jobs;
    let mut stream = jobs.stream(
        id,
        jobs.follow(id, 0, MAX_CHUNK, view).raw_bytes(),
        tx.closed(),
        Streaming {
            keep_alive: Some(KeepAlive::WhenQuiet(keepalive)),
            deadline,
            on_gone: ClientGone::Retain(RETAIN_DETACHED),
            shutdown: Some(&state.shutdown),
        },
    );
    let mut started = false;
    loop {
        let event = match stream.next().await {
            Streamed::ClientGone => return,
            Streamed::Deadline => {
                let e = ConnectError::new(
                    Code::DeadlineExceeded,
                    "the stream's deadline passed (the process runs on)",
                );
                let _ = tx.send(connect::end(Some(&e))).await;
                return;
            }
            Streamed::KeepAlive => {
                if send(tx, ProcessEvent::Keepalive {}).await.is_err() {
                    return stream.left().await;
                }
                continue;
            }
            Streamed::Ended => {
                // Left the table without an end for us: another stream took
                // it, or the server is shutting down.
                let e = if state.shutdown.is_cancelled() {
                    ConnectError::new(Code::Unavailable, "the server is shutting down")
                } else {
                    ConnectError::new(
                        Code::Aborted,
                        "the process ended and another stream received its end",
                    )
                };
                let _ = tx.send(connect::end(Some(&e))).await;
                return;
            }
            Streamed::Event(Event::Queued) => continue,
            Streamed::Event(Event::Started { pid }) => {
                started = true;
                ProcessEvent::Start(StartEvent { pid: pid_of(pid) })
            }
            Streamed::Event(Event::Bytes { stream, data, .. }) => {
                ProcessEvent::Data(data_event(tty, stream, data))
            }
            Streamed::Event(Event::Output { stream, slice }) => {
                ProcessEvent::Data(data_event(tty, stream, slice.data.into_bytes()))
            }
            Streamed::Event(Event::Exit(job)) => {
                state.processes().remove(&id);
                let phase = job.phase();
                if !started && let JobPhase::NotStarted(_) = phase {
                    let _ = tx.send(connect::end(Some(&not_started(&phase)))).await;
                    return;
                }
                let end = ProcessEvent::End(end_event(&phase));
                if send(tx, end).await.is_ok() {
                    let _ = tx.send(connect::end(None)).await;
                }
                // Delivered: the end was written to the client's socket, or
                // the client left just then (as envd, nothing retries).
                return;
            }
        };
        if send(tx, event).await.is_err() {
            return stream.left().await;
        }
    }
}

async fn send(tx: &mpsc::Sender<Bytes>, event: ProcessEvent) -> Result<(), ()> {
    tx.send(connect::message(&EventResponse { event }))
        .await
        .map_err(|_| ())
}

fn data_event(tty: bool, stream: Stream, data: Vec<u8>) -> DataEvent {
    match (tty, stream) {
        (true, _) => DataEvent::Pty(data),
        (false, Stream::Stdout) => DataEvent::Stdout(data),
        (false, Stream::Stderr) => DataEvent::Stderr(data),
    }
}

fn pid_of(pid: init::Pid) -> u32 {
    u32::try_from(pid.0).unwrap_or(0)
}

/// The end event of a job that ended: envd's fields as Go's `os/exec`
/// fills them, but a death by signal N is exit code 128 + N (envd: -1),
/// with the signal named in `status` as Go names it.
pub(super) fn end_event(phase: &JobPhase) -> EndEvent {
    match phase {
        JobPhase::Exited(code) => {
            let status = format!("exit status {code}");
            EndEvent {
                exit_code: *code,
                exited: true,
                error: (*code != 0).then(|| status.clone()),
                status,
            }
        }
        JobPhase::Signaled(signal) => {
            let status = format!("signal: {}", go_signal_name(*signal));
            EndEvent {
                exit_code: crate::jobs::result::signal_exit_code(signal.as_raw()),
                exited: false,
                error: Some(status.clone()),
                status,
            }
        }
        JobPhase::NotStarted(why) => EndEvent {
            exit_code: -1,
            exited: false,
            status: "not started".into(),
            error: Some(why.clone()),
        },
        JobPhase::Lost | JobPhase::Queued | JobPhase::Running => EndEvent {
            exit_code: -1,
            exited: false,
            status: "exit status unknown".into(),
            error: Some("the exit status was lost".into()),
        },
    }
}

/// Go's `syscall.Signal.String()` for the common signals (what envd's
/// `status` says), the number otherwise.
fn go_signal_name(signal: Signal) -> String {
    let name = match signal.as_raw() {
        1 => "hangup",
        2 => "interrupt",
        3 => "quit",
        4 => "illegal instruction",
        5 => "trace/breakpoint trap",
        6 => "aborted",
        7 => "bus error",
        8 => "floating point exception",
        9 => "killed",
        10 => "user defined signal 1",
        11 => "segmentation fault",
        12 => "user defined signal 2",
        13 => "broken pipe",
        14 => "alarm clock",
        15 => "terminated",
        n => return format!("signal {n}"),
    };
    name.into()
}

fn not_started(phase: &JobPhase) -> ConnectError {
    let why = match phase {
        JobPhase::NotStarted(why) => why.clone(),
        _ => "the process did not start".into(),
    };
    ConnectError::new(Code::InvalidArgument, why)
}

/// The job a selector names, among the jobs started here.
fn select(state: &EnvdState, selector: Option<&ProcessSelector>) -> Result<JobId, ConnectError> {
    let ours: HashSet<JobId> = state.processes().keys().copied().collect();
    let jobs = &state.app.jobs;
    match selector {
        Some(ProcessSelector { pid: Some(pid), .. }) => jobs
            .find(|l| ours.contains(&l.id) && l.pid.map(pid_of) == Some(*pid))
            .map(|l| l.id)
            .ok_or_else(|| {
                ConnectError::new(Code::NotFound, format!("process with pid {pid} not found"))
            }),
        Some(ProcessSelector { tag: Some(tag), .. }) => jobs
            .find(|l| ours.contains(&l.id) && l.label.as_deref() == Some(tag))
            .map(|l| l.id)
            .ok_or_else(|| {
                ConnectError::new(Code::NotFound, format!("process with tag {tag} not found"))
            }),
        _ => Err(ConnectError::new(
            Code::InvalidArgument,
            "process: a pid or a tag is required",
        )),
    }
}

/// `List`: the running processes started here.
fn list(state: &EnvdState) -> ListResponse {
    let started: Vec<(JobId, Started)> = state
        .processes()
        .iter()
        .map(|(id, s)| (*id, s.clone()))
        .collect();
    let mut processes = Vec::new();
    let mut gone = Vec::new();
    for (id, s) in started {
        match state.app.jobs.find(|l| l.id == id) {
            None => gone.push(id),
            Some(l) if l.phase == JobPhase::Running => processes.push(ProcessInfo {
                config: s.config,
                pid: l.pid.map_or(0, pid_of),
                tag: s.tag,
            }),
            Some(_) => {}
        }
    }
    let mut table = state.processes();
    for id in gone {
        table.remove(&id);
    }
    ListResponse { processes }
}

/// `SendInput`.
async fn send_input(state: &EnvdState, msg: SendInputRequest) -> Result<HttpReply, ConnectError> {
    let id = select(state, msg.process.as_ref())?;
    let data = msg
        .input
        .map(super::proto::ProcessInput::bytes)
        .unwrap_or_default();
    state
        .app
        .jobs
        .write_stdin(id, &data, false)
        .await
        .map_err(stdin_error)?;
    Ok(connect::ok(&Empty {}))
}

/// `CloseStdin`.
async fn close_stdin(
    state: &EnvdState,
    selector: Option<&ProcessSelector>,
) -> Result<HttpReply, ConnectError> {
    let id = select(state, selector)?;
    match state.app.jobs.write_stdin(id, &[], true).await {
        // Closing what is closed is done (envd answers the same).
        Ok(()) | Err(StdinError::Closed) => Ok(connect::ok(&Empty {})),
        Err(e) => Err(stdin_error(e)),
    }
}

fn stdin_error(e: StdinError) -> ConnectError {
    let code = match e {
        StdinError::Unknown => Code::NotFound,
        StdinError::Write { .. } => Code::Internal,
        StdinError::NotRunning | StdinError::Queued | StdinError::Closed => {
            Code::FailedPrecondition
        }
    };
    ConnectError::new(code, e.to_string())
}

/// `SendSignal`: the one signal to the job's whole group, verified.
async fn send_signal(state: &EnvdState, msg: SendSignalRequest) -> Result<HttpReply, ConnectError> {
    let (plan, wait) = match msg.signal {
        SignalName::Kill => (Plan::One(Signal::KILL), KILL_WAIT),
        SignalName::Term => (Plan::One(Signal::TERM), TERM_WAIT),
        other => {
            return Err(ConnectError::new(
                Code::Unimplemented,
                format!("invalid signal: {other:?}"),
            ));
        }
    };
    let id = select(state, msg.process.as_ref())?;
    match state.app.jobs.signal(id, plan, wait, |_| {}).await {
        Ok(_) => Ok(connect::ok(&Empty {})),
        Err(JobSignalError::Unknown(_)) => {
            Err(ConnectError::new(Code::NotFound, "the process is gone"))
        }
        Err(e @ JobSignalError::Failed(_)) => Err(ConnectError::new(
            Code::Internal,
            format!("error sending signal: {e}"),
        )),
    }
}

/// `StreamInput`: a start naming the process, then input, until the end.
async fn stream_input(state: &EnvdState, mut reader: EnvelopeReader) -> HttpReply {
    let mut id = None;
    loop {
        let msg = match reader.next::<StreamInputEnvelope>().await {
            Ok(Some(m)) => m.into_event(),
            Ok(None) => return Envelopes::single(&Empty {}),
            Err(e) => return Envelopes::failed(&e),
        };
        if let Some(start) = msg.start {
            match select(state, start.process.as_ref()) {
                Ok(found) => id = Some(found),
                Err(e) => return Envelopes::failed(&e),
            }
        } else if let Some(data) = msg.data {
            let Some(id) = id else {
                return Envelopes::failed(&ConnectError::new(
                    Code::FailedPrecondition,
                    "the first message must be start (which process)",
                ));
            };
            let bytes = data
                .input
                .map(super::proto::ProcessInput::bytes)
                .unwrap_or_default();
            if let Err(e) = state.app.jobs.write_stdin(id, &bytes, false).await {
                return Envelopes::failed(&stdin_error(e));
            }
        }
    }
}

/// `Update`: a terminal's new size (SIGWINCH to its foreground group).
fn update(state: &EnvdState, msg: UpdateRequest) -> Result<HttpReply, ConnectError> {
    let id = select(state, msg.process.as_ref())?;
    if let Some(size) = msg.pty.and_then(|p| p.size) {
        let cols = u16::try_from(size.cols).unwrap_or(u16::MAX);
        let rows = u16::try_from(size.rows).unwrap_or(u16::MAX);
        state.app.jobs.resize(id, cols, rows).map_err(|e| {
            let code = match e {
                TerminalError::Unknown => Code::NotFound,
                TerminalError::BadSize => Code::InvalidArgument,
                TerminalError::Failed(_) => Code::Internal,
                TerminalError::NotTerminal | TerminalError::Queued | TerminalError::NotRunning => {
                    Code::FailedPrecondition
                }
            };
            ConnectError::new(code, e.to_string())
        })?;
    }
    Ok(connect::ok(&Empty {}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_event_says_what_gos_os_exec_says_but_a_signal_death_is_128_plus_n() {
        let ok = end_event(&JobPhase::Exited(0));
        assert_eq!(
            (ok.exit_code, ok.exited, ok.status.as_str(), ok.error),
            (0, true, "exit status 0", None)
        );
        let three = end_event(&JobPhase::Exited(3));
        assert_eq!(three.error.as_deref(), Some("exit status 3"));
        let killed = end_event(&JobPhase::Signaled(Signal::KILL));
        assert_eq!(
            (killed.exit_code, killed.exited, killed.status.as_str()),
            (137, false, "signal: killed")
        );
        let term = end_event(&JobPhase::Signaled(Signal::TERM));
        assert_eq!(term.status, "signal: terminated");
    }

    #[test]
    fn a_start_request_becomes_a_launch_request() {
        let msg: StartRequest = serde_json::from_value(serde_json::json!({
            "process": {"cmd": "/bin/bash", "args": ["-l", "-c", "echo hi"], "envs": {"A": "1"}, "cwd": "/tmp"},
            "tag": "web", "pty": {"size": {"cols": 100, "rows": 0}}
        }))
        .unwrap();
        let meta = Meta {
            timeout: Some(Duration::from_millis(1500)),
            keepalive: connect::DEFAULT_KEEPALIVE,
        };
        let req = request(&msg, msg.process.as_ref().unwrap(), meta);
        let mut want = LaunchRequest::new(Program::Argv(
            ["/bin/bash", "-l", "-c", "echo hi"]
                .map(OsString::from)
                .to_vec(),
        ));
        want.env = vec![("A".into(), "1".into())];
        want.cwd = Some("/tmp".into());
        want.label = Some("web".into());
        want.timeout = Some(Duration::from_millis(1500));
        want.tty = Some(TerminalSize {
            cols: Some(100),
            rows: None,
        });
        assert_eq!(req, want);
    }
}
