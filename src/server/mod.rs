//! The stdio MCP session: one actor that reads requests, dispatches them,
//! and runs the shutdown sequence.
//!
//! # Tasks and ownership
//! - The session loop (this module) owns the in-flight table's writes (a
//!   request is registered before its task starts, so a cancel that follows
//!   its request on the wire always finds it) and the negotiated revision.
//! - Each `tools/call` runs in its own task: a blocking `execute`/`wait` never
//!   delays other requests; responses may come out of order.
//! - `initialize`, `ping`, `tools/list` and errors are answered inline.
//! - All output goes through one writer thread ([`io`]), whole lines only.
//!
//! # Shutdown (SPEC §2.5)
//! On stdin EOF or SIGTERM/SIGINT/SIGQUIT: stop reading; answer every
//! in-flight request that is blocked `-32800` (each call's cancel token is a
//! child of the shutdown token; a call that is not blocked completes, so a
//! request piped in just before EOF still gets its answer); run `Init::shutdown` on every job group; log the
//! survivors; flush stdout (bounded); return, and `main` exits 0.

pub mod io;
pub mod progress;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use init::Init;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::jobs::JobTable;
use crate::protocol::line::Line;
use crate::protocol::version::Revision;
use crate::protocol::{self, ErrorCode, Incoming, Outgoing, RequestId};
use crate::tools::{self, CallCtx, CallError};
use progress::Progress;

/// Everything the tools need.
pub struct App {
    /// The init layer.
    pub init: Init,
    /// The job table.
    pub jobs: Arc<JobTable>,
    /// Settings.
    pub config: Config,
}

/// Why the session ended.
#[derive(Debug)]
pub enum EndReason {
    /// stdin closed.
    Eof,
    /// A shutdown signal arrived.
    Signal(init::Signal),
}

type InFlight = Arc<Mutex<HashMap<RequestId, CancellationToken>>>;

struct Session {
    app: Arc<App>,
    out: mpsc::Sender<Outgoing>,
    in_flight: InFlight,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    revision: Arc<OnceLock<Revision>>,
}

/// How long a call may run on after shutdown began before it is answered
/// `-32800` regardless.
const ANSWER_BACKSTOP: Duration = Duration::from_millis(500);
/// How long in-flight requests get to write their `-32800` at shutdown.
const ANSWER_WAIT: Duration = Duration::from_secs(2);
/// How long the writer gets to flush at exit (the client may not be reading).
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// Runs the session until EOF or a shutdown signal, then shuts down.
pub async fn run(
    app: Arc<App>,
    mut events: mpsc::UnboundedReceiver<init::Event>,
) -> std::io::Result<EndReason> {
    let mut input = io::spawn_reader(app.config.max_line_bytes)?;
    let writer = io::spawn_writer()?;
    let session = Session {
        app: Arc::clone(&app),
        out: writer.tx.clone(),
        in_flight: Arc::default(),
        shutdown: CancellationToken::new(),
        tasks: TaskTracker::new(),
        revision: Arc::new(OnceLock::new()),
    };

    let reason = loop {
        tokio::select! {
            msg = input.recv() => match msg {
                Some(io::Input::Line(line)) => session.on_line(line).await,
                Some(io::Input::Eof) | None => break EndReason::Eof,
            },
            ev = events.recv() => match ev {
                Some(init::Event::Shutdown(sig)) => break EndReason::Signal(sig),
                Some(init::Event::Forwarded { signal, groups }) => {
                    tracing::info!(%signal, groups, "forwarded signal to job groups");
                }
                None => {}
            },
        }
    };
    match &reason {
        EndReason::Eof => tracing::info!("stdin closed: shutting down"),
        EndReason::Signal(s) => tracing::info!(signal = %s, "shutting down on signal"),
    }

    // 1. Answer everything in flight with -32800 while stdout is writable.
    session.shutdown.cancel();
    session.tasks.close();
    let _ = tokio::time::timeout(ANSWER_WAIT, session.tasks.wait()).await;

    // 2–4. TERM, grace, KILL; as PID 1 the kill(-1) sweep.
    let report = app
        .init
        .shutdown(app.jobs.pgids(), app.config.shutdown_grace)
        .await;
    // 5. Survivors.
    for s in &report.survived_term {
        tracing::warn!(survivor = %s, "outlived SIGTERM for the whole grace period and was sent SIGKILL");
    }
    for s in &report.survived_kill {
        tracing::warn!(survivor = %s, "still alive at exit");
    }

    drop(session);
    drop(writer.tx);
    let _ = tokio::time::timeout(FLUSH_WAIT, writer.done).await;
    Ok(reason)
}

impl Session {
    async fn send(&self, line: String) {
        let _ = self.out.send(Outgoing::Line(line)).await;
    }

    async fn on_line(&self, line: Line) {
        let bytes = match line {
            Line::Complete(b) => b,
            Line::TooLong { bytes } => {
                let msg = format!(
                    "parse error: line of {bytes} bytes exceeds MCP_EXEC_MAX_LINE_BYTES ({})",
                    self.app.config.max_line_bytes
                );
                return self
                    .send(protocol::error_line(None, ErrorCode::PARSE_ERROR, &msg))
                    .await;
            }
        };
        let value: Value = match serde_json::from_slice(&bytes) {
            Ok(v) => v,
            Err(e) => {
                let msg = format!("parse error: {e}");
                return self
                    .send(protocol::error_line(None, ErrorCode::PARSE_ERROR, &msg))
                    .await;
            }
        };
        if let Value::Array(items) = value {
            let batches = self.revision.get().is_some_and(|r| r.accepts_batches());
            if !batches || items.is_empty() {
                let msg = if batches {
                    "invalid request: empty batch"
                } else {
                    "invalid request: batches are not accepted in this protocol revision"
                };
                return self
                    .send(protocol::error_line(None, ErrorCode::INVALID_REQUEST, msg))
                    .await;
            }
            // A batch is answered with one array of its responses, in request
            // order, once every request in it has been answered.
            let replies: Vec<Reply> = items
                .into_iter()
                .filter_map(|item| self.on_message(Incoming::classify(item), true))
                .collect();
            if replies.is_empty() {
                return;
            }
            let out = self.out.clone();
            self.tasks.spawn(async move {
                let mut lines = Vec::with_capacity(replies.len());
                for reply in replies {
                    lines.push(reply.message().await.into_line());
                }
                let _ = out
                    .send(Outgoing::Line(format!("[{}]", lines.join(","))))
                    .await;
            });
            return;
        }
        match self.on_message(Incoming::classify(value), false) {
            Some(Reply::Now(line)) => self.send(line).await,
            // A single call's task sends its own response.
            Some(Reply::Later(_)) | None => {}
        }
    }

    /// Handles one message; returns its response, if it gets one. Outside a
    /// batch, a `tools/call` task sends its response itself.
    fn on_message(&self, msg: Incoming, batch: bool) -> Option<Reply> {
        match msg {
            Incoming::Request { id, method, params } => {
                Some(self.on_request(id, method, params, batch))
            }
            Incoming::Notification { method, params } => {
                self.on_notification(&method, &params);
                None
            }
            Incoming::Response => None,
            Incoming::Invalid { id, message } => Some(Reply::Now(protocol::error_line(
                id.as_ref(),
                ErrorCode::INVALID_REQUEST,
                &message,
            ))),
        }
    }

    fn on_notification(&self, method: &str, params: &Value) {
        if method != "notifications/cancelled" {
            return; // notifications/initialized and unknown ones: nothing to do
        }
        let Some(id) = params.get("requestId").and_then(RequestId::from_value) else {
            return;
        };
        let token = self
            .in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned();
        if let Some(token) = token {
            tracing::debug!(request = %id, "cancel requested");
            token.cancel();
        }
    }

    fn on_request(&self, id: RequestId, method: String, params: Value, batch: bool) -> Reply {
        let line = match method.as_str() {
            "initialize" => {
                let requested = params.get("protocolVersion").and_then(Value::as_str);
                let negotiated = Revision::negotiate(requested);
                // The first initialize fixes the session's revision.
                let revision = *self.revision.get_or_init(|| negotiated);
                protocol::success_line(
                    &id,
                    &json!({
                        "protocolVersion": revision.as_str(),
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "mcp-exec", "version": env!("CARGO_PKG_VERSION")},
                    }),
                )
            }
            "ping" => protocol::success_line(&id, &json!({})),
            "tools/list" => {
                protocol::success_line(&id, &json!({"tools": tools::list(self.revision())}))
            }
            "tools/call" => return Reply::Later(self.start_call(id, params, !batch)),
            _ => protocol::error_line(
                Some(&id),
                ErrorCode::METHOD_NOT_FOUND,
                &format!("method not found: {method}"),
            ),
        };
        Reply::Now(line)
    }

    fn revision(&self) -> Revision {
        self.revision
            .get()
            .copied()
            .unwrap_or(Revision::V2024_11_05)
    }

    /// Registers the request as in flight (before its task exists, so a
    /// cancel that follows it on the wire finds it) and runs it in its own
    /// task, which yields the response line.
    fn start_call(
        &self,
        id: RequestId,
        params: Value,
        deliver: bool,
    ) -> JoinHandle<Option<Outgoing>> {
        // A child of the shutdown token: at shutdown every call stops at its
        // next blocking point and answers -32800, while a call that is not
        // blocked (a status, a spawn in progress) completes normally.
        let cancel = self.shutdown.child_token();
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), cancel.clone());
        let app = Arc::clone(&self.app);
        let out = self.out.clone();
        let in_flight = Arc::clone(&self.in_flight);
        let shutdown = self.shutdown.clone();
        let revision = self.revision();
        self.tasks.spawn(async move {
            let progress = Progress::default();
            let token = params.get("_meta").and_then(|m| m.get("progressToken")).cloned();
            let ctx = CallCtx { app: &app, cancel: &cancel, shutdown: &shutdown, progress: &progress };
            let call = tools::call(&ctx, &params, revision);
            let outcome = tokio::select! {
                biased;
                // Backstop: a call that does not reach a blocking point soon
                // after shutdown is answered anyway.
                () = async { shutdown.cancelled().await; tokio::time::sleep(ANSWER_BACKSTOP).await } => Err(CallError::Cancelled),
                r = async {
                    match token {
                        Some(t) if !t.is_null() => {
                            progress::with_ticker(call, &progress, t, app.config.progress_interval, &out).await
                        }
                        _ => call.await,
                    }
                } => r,
            };
            in_flight.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
            let message = match outcome {
                Ok(result) => Outgoing::Result { id, result },
                Err(CallError::Cancelled) => Outgoing::Line(protocol::error_line(
                    Some(&id),
                    ErrorCode::REQUEST_CANCELLED,
                    "request cancelled",
                )),
                Err(CallError::Protocol(code, msg)) => {
                    Outgoing::Line(protocol::error_line(Some(&id), code, &msg))
                }
            };
            if deliver {
                let _ = out.send(message).await;
                None
            } else {
                Some(message)
            }
        })
    }
}

/// A response: ready now, or produced by a request task (which sends it
/// itself unless the request is part of a batch).
enum Reply {
    Now(String),
    Later(JoinHandle<Option<Outgoing>>),
}

impl Reply {
    /// The response of a batch member (whose task does not send it itself).
    async fn message(self) -> Outgoing {
        let failed = |why: String| {
            Outgoing::Line(protocol::error_line(None, ErrorCode::INTERNAL_ERROR, &why))
        };
        match self {
            Reply::Now(line) => Outgoing::Line(line),
            Reply::Later(task) => match task.await {
                Ok(Some(message)) => message,
                Ok(None) => failed("request task sent its response itself".into()),
                Err(e) => failed(format!("request task failed: {e}")),
            },
        }
    }
}
