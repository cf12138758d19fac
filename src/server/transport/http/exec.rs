//! `POST /exec`: streaming execution outside MCP (SPEC §11.2).
//!
//! The body is `execute`'s arguments, parsed by the tool's own parser as the
//! latest revision sees them; the job goes through the same cwd policy and
//! job service. The response is `text/event-stream`:
//!
//! - `event: queued` `{"job_id"}`: first, only when the job waits for
//!   capacity;
//! - `event: started` `{"job_id","pid"}`;
//! - `event: stdout` / `event: stderr` `{"data","offset","bytes"}` (plus
//!   `"redacted"` when secrets were masked): raw offsets, redacted `data`
//!   (SPEC §12.6), consecutive output coalesced up to [`MAX_CHUNK`];
//! - `event: exit`: the terminal result without stream data (`job_id`,
//!   `state`, `label`, `exit_code`, `signal`, `signal_number`,
//!   `start_error`, `timed_out`, `cause`, `started_at`, `duration_ms`,
//!   `queued_ms`, each when it applies) plus `stdout_bytes` and
//!   `stderr_bytes`, the bytes each stream wrote in all; then the stream
//!   ends;
//! - `: keep-alive` every [`KEEP_ALIVE`].
//!
//! # Ownership
//! The job is submitted `owned_by_stream`: `list_jobs`, `status`, `output`
//! and `kill` see it, `wait` refuses it, `kill` never claims it. The stream
//! alone claims its result, once, after sending all its output. A client
//! that goes away cancels the job (TERM, grace, KILL, removed): nothing else
//! could collect it.
//!
//! Output bytes that the job's window dropped before the stream read them
//! (a slow client and a small `max_output_bytes`) are skipped: the next
//! event's `offset` shows the gap.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::body::Body;
use super::{Reply, State, read_body, status};
use crate::capture::{Redact, StreamSpec};
use crate::jobs::result::{JobResult, View};
use crate::jobs::{Claim, JobId, Pending, StdinSlot, Submitted};
use crate::policy::cwd::Refusal;
use crate::protocol::version::{LATEST, Revision};
use crate::tools::ToolError;
use crate::tools::execute;

/// The most output bytes one `stdout`/`stderr` event carries.
pub const MAX_CHUNK: u64 = 64 * 1024;
/// How often an idle stream gets a `: keep-alive` comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The terminal result as the `exit` event carries it.
#[derive(Serialize)]
struct Exit {
    #[serde(flatten)]
    result: JobResult,
    /// Bytes the job wrote to stdout in all.
    stdout_bytes: u64,
    /// Bytes the job wrote to stderr in all.
    stderr_bytes: u64,
}

/// `POST /exec`, after the guard (Host, Origin, token) let it through.
pub(super) async fn post(state: &Arc<State>, req: Request<Incoming>) -> Reply {
    let accepts_sse = req
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|a| {
            a.trim()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        });
    if !accepts_sse {
        return status(
            StatusCode::NOT_ACCEPTABLE,
            "Accept must allow text/event-stream",
        );
    }
    let (_parts, bytes) = match read_body(state, req).await {
        Ok(read) => read,
        Err(reply) => return reply,
    };
    let args = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => m,
        _ => {
            return bad(ToolError::invalid(
                "the body must be a JSON object of execute's arguments",
            ));
        }
    };
    let app = &state.app;
    let revision = Revision::negotiate(Some(LATEST));
    let req = match execute::parse(&args, &app.config, &app.job_policy, revision) {
        Ok(r) => r,
        Err(e) => return bad(e),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let cwd = match app.cwd.resolve(req.cwd.as_deref()) {
        Ok(cwd) => cwd,
        Err(Refusal::Outside(why)) => return bad(ToolError::CwdRefused(why)),
        Err(Refusal::Unusable(why)) => {
            // As `execute`: a terminal start error, delivered at once.
            let job = app.jobs.not_started(req.capture, req.label, why);
            let _ = tx.try_send(exit_event(&job, &view(state)));
            return stream(rx);
        }
    };
    let session = match req.session_use(&app.jobs) {
        Ok(s) => s,
        Err(e) => return bad(e),
    };
    let stdin_data = req.stdin.filter(|d| !d.is_empty()).map(String::into_bytes);
    let submitted = app.jobs.submit(crate::jobs::Launch {
        pending: Pending {
            spec: init::SpawnSpec {
                program: req.program,
                cwd,
                env: req.env,
                setup: req.setup,
            },
            stdin: stdin_data,
            // The stdin string is written and then stdin is closed.
            close_stdin: true,
            timeout: req.timeout,
            idle_timeout: req.idle_timeout,
            shell_session: session,
        },
        capture: req.capture,
        label: req.label,
        window: req.max_output_bytes,
        owned_by_stream: true,
    });
    let (id, stdin) = match submitted {
        Err(full) => {
            return unavailable(
                &ToolError::QueueFull {
                    running: full.running,
                    queued: full.queued,
                }
                .to_string(),
            );
        }
        Ok(Submitted::Failed { id }) => {
            let Claim::Delivered(job) = app.jobs.table().claim(id) else {
                return status(StatusCode::INTERNAL_SERVER_ERROR, "the job vanished");
            };
            // The breaker refuses (SPEC §12.7): the server cannot take jobs now.
            if let crate::jobs::JobState::NotStarted { error } = &job.state
                && error.contains("refusing")
            {
                return unavailable(error);
            }
            let _ = tx.try_send(exit_event(&job, &view(state)));
            return stream(rx);
        }
        Ok(Submitted::Queued { id }) => {
            let _ = tx.try_send(event("queued", &json!({ "job_id": id })));
            (id, None)
        }
        Ok(Submitted::Started {
            id,
            stdin,
            stdin_data,
            ..
        }) => (id, Some((stdin, stdin_data))),
    };
    tracing::info!(job = %id, "POST /exec: job submitted");
    let state = Arc::clone(state);
    tokio::spawn(async move {
        if let Some((slot, data)) = stdin {
            tokio::spawn(write_stdin(id, slot, data));
        }
        if follow(&state, id, &tx).await.is_err() {
            // The client went away: nothing else can collect the job.
            if !state.shutdown.is_cancelled() {
                tracing::info!(job = %id, "POST /exec: client gone, ending its job");
                state.app.jobs.teardown(id).await;
            }
        }
    });
    stream(rx)
}

/// Writes the stdin string of a job that started at once, then closes
/// stdin (a queued job's is written by the job service when it starts).
async fn write_stdin(id: JobId, slot: StdinSlot, data: Option<Vec<u8>>) {
    let mut slot = slot.lock().await;
    if let (Some(tx), Some(data)) = (slot.as_mut(), data.as_deref())
        && let Err(e) = tx.write_all(data).await
    {
        tracing::info!(job = %id, error = %e, "POST /exec: writing stdin");
    }
    *slot = None;
}

/// The client went away.
struct Gone;

/// Sends the job's events until its `exit` (or until it leaves the table
/// some other way: teardown at shutdown). `Err` when the client is gone.
async fn follow(state: &State, id: JobId, tx: &mpsc::Sender<Bytes>) -> Result<(), Gone> {
    let table = state.app.jobs.table();
    let view = view(state);
    let mut started = false;
    let mut offsets = [0u64; 2];
    let mut keep_alive = tokio::time::interval(KEEP_ALIVE);
    keep_alive.reset();
    loop {
        let changed = table.changed();
        let output = table.output_changed();
        tokio::pin!(changed, output);
        changed.as_mut().enable();
        output.as_mut().enable();
        // One look at the job: its start, the next chunk of each stream.
        let seen = table.with(id, |j| {
            let redact = view.redact.map(|r| r as &dyn Redact);
            let pid = j.state.pgid();
            let terminal = j.state.is_terminal();
            let next = |w: &crate::capture::Window, from: u64| {
                if from >= w.total() {
                    return None;
                }
                let spec = |unaligned| StreamSpec::From {
                    from,
                    length: Some(MAX_CHUNK),
                    unaligned,
                };
                match w.slice_with(&spec(false), redact) {
                    // Only an incomplete character is left: wait for the
                    // rest, or, once terminal, send it as it is.
                    Some(s) if s.bytes == 0 && terminal => w.slice_with(&spec(true), redact),
                    other => other,
                }
            };
            let chunks = [next(&j.stdout, offsets[0]), next(&j.stderr, offsets[1])];
            (pid, terminal, chunks)
        });
        let Some((pid, terminal, chunks)) = seen else {
            // Torn down (server shutdown): no result to deliver.
            return Ok(());
        };
        if let (false, Some(pid)) = (started, pid) {
            started = true;
            send(tx, event("started", &json!({"job_id": id, "pid": pid.0}))).await?;
        }
        let mut progressed = false;
        for (i, chunk) in chunks.into_iter().enumerate() {
            let Some(s) = chunk else { continue };
            if s.bytes == 0 {
                continue;
            }
            offsets[i] = s.offset + s.bytes;
            progressed = true;
            let mut body = json!({"data": s.data, "offset": s.offset, "bytes": s.bytes});
            if let Some(n) = s.redacted {
                body["redacted"] = json!(n);
            }
            let name = if i == 0 { "stdout" } else { "stderr" };
            send(tx, event(name, &body)).await?;
        }
        if progressed {
            continue;
        }
        if terminal {
            match table.claim(id) {
                Claim::Delivered(job) => send(tx, exit_event(&job, &view)).await?,
                // Removed by a teardown: nothing to deliver.
                Claim::Unknown | Claim::Running => {}
            }
            return Ok(());
        }
        tokio::select! {
            () = &mut changed => {}
            () = &mut output => {}
            () = tx.closed() => return Err(Gone),
            _ = keep_alive.tick() => send(tx, Bytes::from_static(b": keep-alive\n\n")).await?,
        }
    }
}

async fn send(tx: &mpsc::Sender<Bytes>, bytes: Bytes) -> Result<(), Gone> {
    tx.send(bytes).await.map_err(|_| Gone)
}

fn view(state: &State) -> View<'_> {
    View {
        revision: Revision::negotiate(Some(LATEST)),
        redact: state.app.redact.as_ref().map(|r| r as &(dyn Redact + Sync)),
    }
}

/// `event: NAME\ndata: JSON\n\n`.
fn event(name: &str, body: &impl Serialize) -> Bytes {
    let json = serde_json::to_string(body).unwrap_or_else(|_| "{}".into());
    Bytes::from(format!("event: {name}\ndata: {json}\n\n"))
}

fn exit_event(job: &crate::jobs::Job, view: &View<'_>) -> Bytes {
    let exit = Exit {
        result: JobResult::with_streams(job, &StreamSpec::None, &StreamSpec::None, view),
        stdout_bytes: job.stdout.total(),
        stderr_bytes: job.stderr.total(),
    };
    event("exit", &exit)
}

fn stream(rx: mpsc::Receiver<Bytes>) -> Reply {
    let mut r = Response::new(Body::stream(rx));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// `400 {"error": "<the tool error text>"}`.
fn bad(e: ToolError) -> Reply {
    status(StatusCode::BAD_REQUEST, &e.to_string())
}

/// `503 {"error"}`: the queue is full or the breaker refuses.
fn unavailable(why: &str) -> Reply {
    status(StatusCode::SERVICE_UNAVAILABLE, why)
}
