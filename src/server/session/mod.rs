//! One MCP session: protocol state and dispatch, for any transport.
//!
//! A session owns protocol state only: the negotiated revision,
//! its requests in flight (for cancellation) and their progress tickers.
//! Jobs are not the session's: they live in the process-wide job service,
//! so a job started here can be waited for from any other session.
//!
//! A transport gives the session one framed message at a time
//! ([`McpSession::on_line`]) together with the [`Outbox`] where that message's
//! response and notifications go; that pair is the whole transport
//! interface. Nothing below this module knows which transport called.
//!
//! # Modules, one concern each
//! - this file: the session's state ([`McpSession`]), a message's entry
//!   ([`McpSession::on_line`], [`McpSession::on_inbound`]), its end
//!   ([`McpSession::end`], [`McpSession::settle`]);
//! - `inbound`: a framed message classified, parsed once ([`Inbound`]);
//! - `route`: a notification or request routed (its era first), answered
//!   inline or started as a call;
//! - `batch`: a batch's members and its bounds;
//! - `admission`: a call's admission (the answer budget, one job-starting
//!   step at a time), its start, its task, its answer.
//!
//! # Requests
//! - `initialize`, `ping`, `tools/list` and errors are answered inline, in
//!   order; `tools/list` is a copy of a per-revision string built once.
//! - Each `tools/call` runs in its own task, registered as in flight before
//!   the task exists (so a cancel that follows it on the wire finds it): a
//!   blocking `execute`/`wait` never delays other requests, and responses
//!   may come out of order. The call's future yields its response; whoever
//!   awaits it (the call's task, or a batch's collector) sends it — one
//!   response value per request.
//! - A batch (2025-03-26 sessions only) is answered with one array of its
//!   responses in request order, once every member is answered. One batch
//!   cannot make the server build an unbounded answer: it has at most
//!   [`BATCH_MEMBERS`](batch::BATCH_MEMBERS) members (more: one `-32600` error, nothing run), and
//!   its answers together at most [`BATCH_BUDGET`](batch::BATCH_BUDGET) bytes; past that, each
//!   further member is answered with a `-32600` error saying so (a member
//!   not yet run is not run; a call that ran has its answer dropped, and
//!   what it claimed put back). Stdio and HTTP share this path.
//!
//! # Ending
//! When the server's shutdown token is cancelled, every call still in
//! flight answers `-32800` (each call's token is a child of the session's,
//! itself a child of the server's); a call that is not blocked then
//! completes normally, or is answered anyway after a short backstop.
//! [`McpSession::settle`] waits for the calls to finish.

mod admission;
mod batch;
mod inbound;
mod route;

use admission::ANSWER_BUDGET;
use inbound::Parsed;
pub use inbound::{Inbound, Single, modern_method};

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::discover;
use super::outbox::{self, Message, Outbox};
use super::progress;
use crate::protocol::era::{self, Client, Era};
use crate::protocol::line::Line;
use crate::protocol::version::Revision;
use crate::protocol::{self, ErrorCode, Incoming, RequestId};
use crate::server::app::App;
use crate::tools::{self, Call, CallError, ProgressText};

/// One MCP session: over stdio, or behind an `Mcp-Session-Id` (the HTTP
/// listener's `SessionEntry`). Not a shell session, nor a POSIX session.
pub struct McpSession {
    app: Arc<App>,
    revision: OnceLock<Revision>,
    /// What the first `initialize` declared (legacy requests' [`Client`]).
    client: OnceLock<Arc<Client>>,
    in_flight: Mutex<HashMap<RequestId, CancellationToken>>,
    /// Cancelled when the session ends explicitly; a child of the server's
    /// shutdown token.
    calls: CancellationToken,
    /// The server's shutdown token.
    shutdown: CancellationToken,
    /// The tokio tasks of its calls in flight (not MCP Tasks).
    running: TaskTracker,
    /// Bytes of answers its job-starting calls may hold (see
    /// [`ANSWER_BUDGET`]).
    answers: Arc<Semaphore>,
    /// Held by the job-starting call whose turn it is to start (see
    /// [`FirstStep`](admission::FirstStep)).
    starting: Arc<tokio::sync::Mutex<()>>,
    /// The transport's name, for metrics only (`stdio`, `http`).
    transport: &'static str,
}

/// A call's response line, with its admission ticket (the answer bytes it
/// holds): the ticket is dropped only once the line is queued, so the
/// answers of a client that does not read stay within [`ANSWER_BUDGET`].
pub(super) type Answer = (Message, Option<OwnedSemaphorePermit>);

/// A JSON-RPC response line: ready now, or produced by a call's task.
pub(super) enum RpcReply {
    Now(String),
    Later(JoinHandle<Answer>),
}

impl McpSession {
    /// Marks call `id` in flight and gives its cancel token: cancelled by
    /// `notifications/cancelled` for it, or when the session ends.
    fn track(&self, id: &RequestId) -> CancellationToken {
        let cancel = self.calls.child_token();
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), cancel.clone());
        cancel
    }

    /// A new session of `app`, ended at the latest by `shutdown`;
    /// `transport` names the transport in metrics, and nowhere else.
    pub fn new(
        app: Arc<App>,
        shutdown: &CancellationToken,
        transport: &'static str,
    ) -> Arc<McpSession> {
        Arc::new(McpSession {
            app,
            revision: OnceLock::new(),
            client: OnceLock::new(),
            in_flight: Mutex::default(),
            calls: shutdown.child_token(),
            shutdown: shutdown.clone(),
            running: TaskTracker::new(),
            answers: Arc::new(Semaphore::new(ANSWER_BUDGET)),
            starting: Arc::default(),
            transport,
        })
    }

    /// The negotiated revision (2024-11-05 before `initialize`).
    pub fn revision(&self) -> Revision {
        self.revision
            .get()
            .copied()
            .unwrap_or(Revision::V2024_11_05)
    }

    /// Who this session's requests are, for the tasks they create
    /// (docs/tasks.md, "Who sees a task"): the stdio process; over HTTP the
    /// listener's token, if it has one.
    pub fn requestor(&self) -> crate::tasks::Requestor {
        use crate::tasks::Requestor;
        let config = &self.app.config;
        if self.transport == "stdio" {
            Requestor::Stdio
        } else if config.http_token.is_some() || config.http_token_file.is_some() {
            Requestor::HttpToken
        } else {
            Requestor::HttpOpen
        }
    }

    /// Whether `initialize` was answered.
    pub fn is_initialized(&self) -> bool {
        self.revision.get().is_some()
    }

    /// Ends the session explicitly (HTTP `DELETE`): its calls in flight are
    /// cancelled and answer `-32800`; its jobs live on (they are
    /// process-wide).
    pub fn end(&self) {
        self.calls.cancel();
        self.running.close();
    }

    /// Stops taking calls and waits up to `within` for those in flight to
    /// finish and queue their responses; returns whether they all did.
    pub async fn settle(&self, within: Duration) -> bool {
        self.running.close();
        tokio::time::timeout(within, self.running.wait())
            .await
            .is_ok()
    }

    /// Handles one framed message; its response (if any) and notifications
    /// go to `out`.
    pub async fn on_line(self: &Arc<Self>, line: Line, out: &Outbox) {
        self.on_inbound(Inbound::parse(line), out).await;
    }

    /// Handles one message already parsed (a transport that had to ask it
    /// something first, see [`Inbound`]); its response (if any) and
    /// notifications go to `out`.
    pub async fn on_inbound(self: &Arc<Self>, message: Inbound, out: &Outbox) {
        let value = match message.0 {
            Parsed::Json(v) => v,
            Parsed::TooLong(bytes) => {
                let msg = format!(
                    "parse error: line of {bytes} bytes exceeds MCP_EXEC_MAX_LINE_BYTES ({})",
                    self.app.config.max_line_bytes
                );
                out.send(protocol::error_line(None, ErrorCode::PARSE_ERROR, &msg))
                    .await;
                return;
            }
            Parsed::Malformed(e) => {
                let msg = format!("parse error: {e}");
                out.send(protocol::error_line(None, ErrorCode::PARSE_ERROR, &msg))
                    .await;
                return;
            }
        };
        if let Value::Array(items) = value {
            self.on_batch(items, out).await;
            return;
        }
        match self.on_message(Incoming::classify(value), out) {
            Some(RpcReply::Now(line)) => {
                out.send(line).await;
            }
            // The call's task sends its response itself.
            Some(RpcReply::Later(_)) | None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inbound(text: &str) -> Inbound {
        Inbound::from_slice(text.as_bytes())
    }

    #[test]
    fn only_an_initialize_request_with_an_id_opens_a_session() {
        assert!(inbound(r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#).opens_session());
        assert!(!inbound(r#"{"jsonrpc":"2.0","method":"initialize"}"#).opens_session());
        assert!(!inbound(r#"[{"jsonrpc":"2.0","id":1,"method":"initialize"}]"#).opens_session());
        assert!(!inbound(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).opens_session());
        assert!(!inbound("{not json").opens_session());
        assert!(!Inbound::parse(Line::TooLong { bytes: 9 }).opens_session());
    }

    #[test]
    fn a_request_wants_progress_only_with_a_non_null_progress_token() {
        let with = |meta: &str| {
            inbound(&format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"_meta":{meta}}}}}"#
            ))
            .wants_progress()
        };
        assert!(with(r#"{"progressToken":"p"}"#));
        assert!(with(r#"{"progressToken":0}"#));
        assert!(!with(r#"{"progressToken":null}"#));
        assert!(!with("{}"));
        let notification =
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"progressToken":"p"}}}"#;
        assert!(!inbound(notification).wants_progress());
    }
}
