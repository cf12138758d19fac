//! `GET /jobs/<id>/tty`: a human attached to a job's terminal over a
//! WebSocket. docs/http.md documents the wire; in short:
//!
//! - The request passes the guards of every endpoint (Host, Origin, the
//!   bearer token) and is then upgraded (RFC 6455 over hyper's upgrade;
//!   frames by `tokio-tungstenite`). `?since=<offset>` (default 0) is the
//!   first output byte wanted; `?takeover=1` replaces an attached writer.
//! - Server → client: **binary** frames are the job's output, raw bytes,
//!   from `since` on (replayed from the window, then live), with no byte
//!   skipped or repeated, so a client that reconnects with
//!   `since` = the bytes it received loses and duplicates nothing.
//!   **Text** frames: `{"gap": {"from", "to"}}` when bytes `[from, to)` are
//!   no longer held (never skipped silently); `{"exit": result}` once the job
//!   ended (the result as `POST /exec`'s `exit` event shows it, plus
//!   `result_owner` and, when the owner took it already,
//!   `result_delivered_elsewhere: true` — attaching never takes delivery);
//!   `{"error": text}` when something the client sent was refused.
//! - Client → server: **binary** frames go to the job's input; **text**
//!   frames are `{"resize": {"cols", "rows"}}`.
//! - Closes: 1000 after the exit frame (or when the job is gone), 1001 at
//!   server shutdown, 4001 when another attach took over.
//! - Refusals before the upgrade: 400 (a pipe job, a bad query, not a
//!   WebSocket request), 403 (secret redaction is on: raw bytes cannot be
//!   redacted), 404 (no such job), 409 (another writer is attached),
//!   416 (`since` past the output written so far).
//!
//! Everything about the job goes through `jobs`' verbs: `follow_raw` for
//! the output and the end, `write_stdin` for input, `attach_writer` for the
//! one-writer rule. This module only frames them.
//!
//! # One connection, one task
//! The upgraded connection is served by one task: a writer half that owns
//! the socket's sink and sends what the output and control paths queue
//! (bounded), the output path (`follow_raw` → frames), and the input path
//! (frames → `write_stdin`), raced against the lease's revocation and
//! shutdown. Input runs beside output, not between its frames, so a
//! program that does not read its input never stalls its output.
//!
//! This is the one follower that does not go through `Jobs::stream`: it
//! reads raw bytes (`follow_raw`, with gaps, not `Event`s), its end is one
//! of four (the job's, the lease's revocation, shutdown, or the client's
//! close frame), and it has no keep-alive or client-gone policy to apply
//! (a terminal attach never owns the job, so nothing is torn down or
//! retained when it goes). Folding those into `Jobs::stream` would give
//! that verb a second event type and three cases no other front-end has.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use super::files::parse_query;
use super::state::HttpState;
use crate::jobs::result::{Fields, JobResult};
use crate::jobs::{AttachError, JobEnd, JobId, Jobs, RawEvent, RawFollowError, WriterLease};
use crate::net::body::Body;
use crate::net::reply::{HttpReply, status};
use crate::protocol::version::{LATEST, Revision};

/// The most output bytes one binary frame carries.
pub const MAX_CHUNK: u64 = 64 * 1024;
/// The largest message a client may send (input or a resize).
pub const MAX_MESSAGE: usize = 64 * 1024;
/// Frames queued for the socket beyond the one being written.
const QUEUED_FRAMES: usize = 4;
/// How long a closing connection may take to send what was queued.
const CLOSE_FLUSH: Duration = Duration::from_secs(5);
/// The close code of a connection another attach took over.
pub const TAKEN_OVER: u16 = 4001;

/// `GET /jobs/<id>/tty`, after the guard (Host, Origin, token).
pub(super) fn get(state: &Arc<HttpState>, mut req: Request<Incoming>, id: &str) -> HttpReply {
    let Some(id) = JobId::parse(id) else {
        return status(StatusCode::NOT_FOUND, "no such job");
    };
    let query = parse_query(req.uri().query());
    let since = match query.get("since").map(str::parse::<u64>) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            return status(
                StatusCode::BAD_REQUEST,
                "since must be a byte offset (a non-negative integer)",
            );
        }
    };
    let takeover = query.flag("takeover");
    let key = match websocket_key(req.headers()) {
        Ok(key) => key,
        Err(why) => {
            let mut r = status(StatusCode::BAD_REQUEST, why);
            r.headers_mut().insert(
                header::SEC_WEBSOCKET_VERSION,
                HeaderValue::from_static("13"),
            );
            return r;
        }
    };
    let app = &state.app;
    if app.view(Revision::negotiate(Some(LATEST))).redact.is_some() {
        return status(
            StatusCode::FORBIDDEN,
            "secret redaction is on (MCP_EXEC_REDACT): a terminal's raw bytes cannot be redacted, \
             so attaching is refused",
        );
    }
    match app.jobs.is_tty(id) {
        None => return status(StatusCode::NOT_FOUND, "no such job"),
        Some(false) => return status(StatusCode::BAD_REQUEST, &not_terminal(id)),
        Some(true) => {}
    }
    // Checked before the upgrade, so each refusal is an HTTP status; the
    // task follows the job again (the job may have gone meanwhile: then its
    // socket closes at once, 1000).
    match app.jobs.follow_raw(id, since, MAX_CHUNK, Fields::PartTwo) {
        Ok(_) => {}
        Err(RawFollowError::Unknown) => return status(StatusCode::NOT_FOUND, "no such job"),
        Err(RawFollowError::Ahead { total }) => {
            return status(
                StatusCode::RANGE_NOT_SATISFIABLE,
                &format!("since is past the output: {id} has written {total} bytes so far"),
            );
        }
    }
    let lease = match app.jobs.attach_writer(id, takeover) {
        Ok(lease) => lease,
        Err(AttachError::Unknown) => return status(StatusCode::NOT_FOUND, "no such job"),
        Err(AttachError::NotTerminal) => {
            return status(StatusCode::BAD_REQUEST, &not_terminal(id));
        }
        Err(AttachError::Busy) => {
            return status(
                StatusCode::CONFLICT,
                &format!(
                    "another terminal is attached to {id} (?takeover=1 takes it over, \
                     closing the other with code {TAKEN_OVER})"
                ),
            );
        }
    };
    let upgrade = hyper::upgrade::on(&mut req);
    let state = Arc::clone(state);
    tokio::spawn(async move {
        let upgraded = match upgrade.await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!(job = %id, error = %e, "tty: the upgrade failed");
                return;
            }
        };
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE));
        let ws =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config))
                .await;
        serve(&state, id, since, lease, ws).await;
    });
    let mut r = hyper::Response::new(Body::empty());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(accept) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    r
}

/// The `400` text for a pipe job.
fn not_terminal(id: JobId) -> String {
    format!("{id} runs on pipes, not a terminal: only a job started with tty can be attached")
}

/// The `Sec-WebSocket-Key` of a WebSocket opening handshake (RFC 6455
/// §4.2.1), or why the request is not one.
fn websocket_key(headers: &hyper::HeaderMap) -> Result<String, &'static str> {
    let has = |name: header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    if !has(header::UPGRADE, "websocket") || !has(header::CONNECTION, "upgrade") {
        return Err("this endpoint is a WebSocket: send Upgrade: websocket, Connection: Upgrade");
    }
    if !has(header::SEC_WEBSOCKET_VERSION, "13") {
        return Err("Sec-WebSocket-Version must be 13");
    }
    headers
        .get(header::SEC_WEBSOCKET_KEY)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .ok_or("Sec-WebSocket-Key is required")
}

type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Why an attached connection ends.
enum Ending {
    /// Close with this code and reason.
    Close(u16, &'static str),
    /// The client closed, or the socket failed: nothing more to send.
    ClientGone,
}

/// Serves one attached connection until the job ends, the client leaves,
/// another attach takes over or the server shuts down.
async fn serve(state: &HttpState, id: JobId, since: u64, lease: WriterLease, ws: Socket) {
    let (mut sink, mut stream) = ws.split();
    let (tx, mut rx) = mpsc::channel::<Message>(QUEUED_FRAMES);
    let jobs = &state.app.jobs;
    let writer = async {
        while let Some(m) = rx.recv().await {
            let closing = matches!(m, Message::Close(_));
            if sink.send(m).await.is_err() || closing {
                break;
            }
        }
    };
    let output = async {
        let Ok(mut follow) = jobs.follow_raw(id, since, MAX_CHUNK, Fields::PartTwo) else {
            return Ending::Close(1000, "the job is gone");
        };
        while let Some(event) = follow.next().await {
            let frame = match event {
                RawEvent::Output { data, .. } => Message::Binary(data.into()),
                RawEvent::Gap { from, to } => text(&json!({"gap": {"from": from, "to": to}})),
                RawEvent::End(end) => {
                    let _ = tx.send(text(&json!({ "exit": Exit::of(&end) }))).await;
                    return Ending::Close(1000, "the job ended");
                }
            };
            if tx.send(frame).await.is_err() {
                return Ending::ClientGone;
            }
        }
        Ending::Close(1000, "the job is gone")
    };
    let input = async {
        while let Some(Ok(message)) = stream.next().await {
            let refused = match message {
                Message::Binary(data) => jobs
                    .write_stdin(id, &data, false)
                    .await
                    .err()
                    .map(|e| format!("input: {e}")),
                Message::Text(t) => control(jobs, id, &t).err(),
                Message::Close(_) => break,
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => None,
            };
            if let Some(why) = refused
                && tx.send(text(&json!({ "error": why }))).await.is_err()
            {
                break;
            }
        }
        Ending::ClientGone
    };
    tokio::pin!(writer, output, input);
    let ending = tokio::select! {
        () = lease.revoked() => Ending::Close(TAKEN_OVER, "another terminal took over"),
        () = state.shutdown.cancelled() => Ending::Close(1001, "the server is shutting down"),
        e = &mut output => e,
        e = &mut input => e,
        () = &mut writer => Ending::ClientGone,
    };
    if let Ending::Close(code, reason) = ending {
        tracing::info!(job = %id, code, reason, "tty: closing");
        let close = Message::Close(Some(CloseFrame {
            code: CloseCode::from(code),
            reason: Utf8Bytes::from_static(reason),
        }));
        // The queue holds what was sent before the end (the exit frame);
        // the writer sends it and then the close, or gives up after a while.
        let _ = tokio::time::timeout(CLOSE_FLUSH, async {
            tokio::join!(tx.send(close), &mut writer)
        })
        .await;
    }
    drop(lease);
}

/// A client's text frame: `{"resize": {"cols", "rows"}}`.
fn control(jobs: &Jobs, id: JobId, text: &str) -> Result<(), String> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Control {
        resize: Size,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Size {
        cols: u16,
        rows: u16,
    }
    let c: Control = serde_json::from_str(text).map_err(|e| {
        format!("a text frame must be {{\"resize\": {{\"cols\": N, \"rows\": N}}}}: {e}")
    })?;
    jobs.resize(id, c.resize.cols, c.resize.rows)
        .map_err(|e| format!("resize: {e}"))
}

/// The `exit` frame's result.
#[derive(Serialize)]
struct Exit<'a> {
    #[serde(flatten)]
    result: &'a JobResult,
    /// Bytes the job wrote in all.
    stdout_bytes: u64,
    /// Who receives the result (`caller`, `stream`).
    result_owner: &'static str,
    /// The owner took the result already.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    result_delivered_elsewhere: bool,
}

impl Exit<'_> {
    fn of(end: &JobEnd) -> Exit<'_> {
        Exit {
            result: &end.result,
            stdout_bytes: end.stdout_bytes,
            result_owner: end.owner.name(),
            result_delivered_elsewhere: end.delivered,
        }
    }
}

fn text(value: &serde_json::Value) -> Message {
    Message::Text(value.to_string().into())
}
