//! `POST /exec`: streaming execution outside MCP (docs/http.md).
//!
//! The body is `execute`'s arguments, parsed by the tool's own parser as the
//! latest revision sees them; the job goes through the same cwd policy and
//! job service. The response is `text/event-stream`:
//!
//! - `event: queued` `{"job_id"}`: first, only when the job waits for
//!   capacity;
//! - `event: started` `{"job_id","pid"}`;
//! - `event: stdout` / `event: stderr` `{"data","offset","bytes"}` (plus
//!   `"redacted"` when secrets were masked): raw offsets, redacted `data`,
//!   consecutive output coalesced up to [`MAX_CHUNK`];
//! - `event: exit`: the terminal result without stream data (`job_id`,
//!   `state`, `label`, `exit_code`, `signal`, `signal_number`,
//!   `start_error`, `timed_out`, `cause`, `started_at`, `duration_ms`,
//!   `queued_ms`, each when it applies) plus `stdout_bytes` and
//!   `stderr_bytes`, the bytes each stream wrote in all; then the stream
//!   ends;
//! - `: keep-alive` every [`KEEP_ALIVE`].
//!
//! # Ownership
//! The job is launched owned by its stream (`jobs::Owner::JobStream`):
//! `list_jobs`, `status`, `output` and `kill` see it, `wait` refuses it,
//! `kill` never claims it. The stream alone claims its result, once, after
//! sending all its output: the events and keep-alives come from
//! `Jobs::stream`, this module only frames them. A client that goes away
//! cancels the job (`ClientGone::TearDown`: TERM, grace, KILL, removed):
//! nothing else could collect it.
//!
//! Output bytes that the job's window dropped before the stream read them
//! (a slow client and a small `max_output_bytes`) are skipped: the next
//! event's `offset` shows the gap.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::read::{Accepts, read_body};
use super::state::HttpState;
use crate::capture::StreamSpec;
use crate::jobs::result::{JobResult, View};
use crate::jobs::{
    ClientGone, Event, Job, JobId, KeepAlive, LaunchError, Launched, Owner, Stream, Streamed,
    Streaming,
};
use crate::net::reply::{HttpReply, sse, status};
use crate::net::sse::json as event;
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
pub(super) async fn post(state: &Arc<HttpState>, req: Request<Incoming>) -> HttpReply {
    let accepts_sse = Accepts::of(req.headers()).sse;
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
    let mut launch = match execute::parse(&args, &app.config, &app.job_policy, revision()) {
        Ok(r) => r.launch,
        Err(e) => return bad(e),
    };
    // The stdin string is written and then stdin is closed.
    launch.close_stdin = true;
    launch.owner = Owner::JobStream;
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    // `jobs` writes the stdin and closes it, once the job runs.
    let id = match app.jobs.launch(launch) {
        Ok(Launched::Started { id, .. } | Launched::Queued { id }) => id,
        Ok(Launched::Ended(job)) => {
            // As `execute`: a terminal start error, delivered at once.
            let _ = tx.try_send(exit_event(&job, &app.view(revision())));
            return sse(rx);
        }
        // The server cannot take jobs now: the breaker is open or the queue is full.
        Err(LaunchError::BreakerOpen { refusal, .. }) => return unavailable(&refusal),
        Err(e @ LaunchError::QueueFull { .. }) => {
            return unavailable(&execute::launch_error(e).to_string());
        }
        Err(LaunchError::DeliveredElsewhere(_)) => {
            return status(StatusCode::INTERNAL_SERVER_ERROR, "the job vanished");
        }
        Err(e) => return bad(execute::launch_error(e)),
    };
    tracing::info!(job = %id, "POST /exec: job submitted");
    let state = Arc::clone(state);
    tokio::spawn(async move { frame(&state, id, &tx).await });
    sse(rx)
}

/// The revision `POST /exec` renders results as: the latest.
fn revision() -> Revision {
    Revision::negotiate(Some(LATEST))
}

/// Frames the job's stream (`Jobs::stream`) as SSE until its `exit` (or
/// until it leaves the table some other way: teardown at shutdown), with a
/// keep-alive comment every [`KEEP_ALIVE`]. A client that goes away tears
/// the job down (`ClientGone::TearDown`): nothing else can collect it.
async fn frame(state: &HttpState, id: JobId, tx: &mpsc::Sender<Bytes>) {
    let view = state.app.view(revision());
    let jobs = &state.app.jobs;
    let mut stream = jobs.stream(
        id,
        jobs.follow(id, 0, MAX_CHUNK, view),
        tx.closed(),
        Streaming {
            keep_alive: Some(KeepAlive::Every(KEEP_ALIVE)),
            deadline: None,
            on_gone: ClientGone::TearDown,
            shutdown: Some(&state.shutdown),
        },
    );
    loop {
        let bytes = match stream.next().await {
            Streamed::Event(e) => render(id, e, &view),
            Streamed::KeepAlive => Bytes::from_static(b": keep-alive\n\n"),
            Streamed::Ended | Streamed::ClientGone | Streamed::Deadline => return,
        };
        if tx.send(bytes).await.is_err() {
            return stream.left().await;
        }
    }
}

/// One event, as SSE.
fn render(id: JobId, e: Event, view: &View<'_>) -> Bytes {
    match e {
        Event::Queued => event("queued", &json!({ "job_id": id })),
        Event::Started { pid } => event("started", &json!({"job_id": id, "pid": pid.0})),
        Event::Output { stream, slice } => {
            let mut body =
                json!({"data": slice.data, "offset": slice.offset, "bytes": slice.bytes});
            if let Some(n) = slice.redacted {
                body["redacted"] = json!(n);
            }
            event(stream.name(), &body)
        }
        // Not asked for (no `raw_bytes`): rendered as a slice would be.
        Event::Bytes {
            stream,
            offset,
            data,
        } => event(
            stream.name(),
            &json!({"data": String::from_utf8_lossy(&data), "offset": offset, "bytes": data.len()}),
        ),
        Event::Exit(job) => exit_event(&job, view),
    }
}

fn exit_event(job: &Job, view: &View<'_>) -> Bytes {
    let exit = Exit {
        result: JobResult::with_streams(job, &StreamSpec::None, &StreamSpec::None, view),
        stdout_bytes: job.total_bytes(Stream::Stdout),
        stderr_bytes: job.total_bytes(Stream::Stderr),
    };
    event("exit", &exit)
}

/// `400 {"error": "<the tool error text>"}`.
fn bad(e: ToolError) -> HttpReply {
    status(StatusCode::BAD_REQUEST, &e.to_string())
}

/// `503 {"error"}`: the queue is full or the breaker refuses.
fn unavailable(why: &str) -> HttpReply {
    status(StatusCode::SERVICE_UNAVAILABLE, why)
}
