//! One MCP session: protocol state and dispatch, for any transport.
//!
//! A session owns protocol state only (SPEC §10): the negotiated revision,
//! its requests in flight (for cancellation) and their progress tickers.
//! Jobs are not the session's: they live in the process-wide job service,
//! so a job started here can be waited for from any other session.
//!
//! A transport gives the session one framed message at a time
//! ([`McpSession::on_line`]) together with the [`Outbox`] where that message's
//! response and notifications go; that pair is the whole transport
//! interface. Nothing below this module knows which transport called.
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
//!   [`BATCH_MEMBERS`] members (more: one `-32600` error, nothing run), and
//!   its answers together at most [`BATCH_BUDGET`] bytes; past that, each
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

/// How long a call may run on after its session ended before it is
/// answered `-32800` regardless (a call busy in a non-blocking step
/// finishes first).
const ANSWER_BACKSTOP: Duration = Duration::from_millis(500);

/// One MCP session (not an HTTP session, which carries one, nor a shell session).
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
    tasks: TaskTracker,
    /// Bytes of answers its job-starting calls may hold (see
    /// [`ANSWER_BUDGET`]).
    answers: Arc<Semaphore>,
    /// Held by the job-starting call whose turn it is to start (see
    /// [`FirstStep`]).
    starting: Arc<tokio::sync::Mutex<()>>,
    /// The transport's name, for metrics only (`stdio`, `http`).
    transport: &'static str,
}

/// Bytes of answers that one session's calls that may start a job
/// (`execute`) hold before their answers are queued in the outbox (whose
/// own budget takes over then). Such a call is admitted only while this
/// budget has [`ANSWER_FLOOR`] free, which it reserves; once its answer is
/// made it holds the answer's real size instead (taking only what is free:
/// an answer never waits for this budget, so none can deadlock another).
/// And the session's job-starting calls start one after another
/// ([`FirstStep`]), each after the outbox has room again, so each admission
/// sees the answers made until then.
///
/// So a client that stops reading makes the server hold the outbox, about
/// this budget of answers, and the answers of the calls admitted before
/// those were made: at most `ANSWER_BUDGET / ANSWER_FLOOR` = 200 of them,
/// each a job bounded as every job is (`MCP_EXEC_MAX_RUNNING`/`MAX_QUEUED`,
/// `max_output_bytes`). A client that reads gets a burst of up to 200
/// parallel blocking calls run in parallel. Why 200, not more: the server
/// cannot tell a burst of `sleep`s from a burst of big printers before
/// their jobs end, so that many answers may all be big at once (500 calls
/// of 200 kB each, unread, peak at 53 MiB here, 57 MiB as PID 1; the test
/// bound is 64 MiB). A fixed cap of 32 calls ran a burst of 200
/// `sleep 0.5` in seven rounds.
pub const ANSWER_BUDGET: usize = outbox::BUDGET;

/// What a job-starting call is assumed to hold until its answer is made
/// (about 41 KiB: 200 calls in flight at once before any answer).
pub const ANSWER_FLOOR: usize = ANSWER_BUDGET / 200;

/// The most members one JSON-RPC batch may have: past it the batch is
/// refused whole, unrun, with one error (with [`BATCH_BUDGET`], this bounds
/// the answer's error entries too).
pub const BATCH_MEMBERS: usize = 1000;

/// Bytes of answers one batch's array may hold: the outbox's budget, which a
/// single message may take whole.
pub const BATCH_BUDGET: usize = outbox::BUDGET;

/// What is left of one batch's [`BATCH_BUDGET`], shared by its members.
struct BatchBudget {
    left: std::sync::atomic::AtomicUsize,
    /// A member's answer did not fit: the members after it are not run.
    exceeded: std::sync::atomic::AtomicBool,
}

impl BatchBudget {
    fn new() -> BatchBudget {
        BatchBudget {
            left: std::sync::atomic::AtomicUsize::new(BATCH_BUDGET),
            exceeded: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Takes `bytes` if they are left; otherwise marks the budget exceeded.
    fn take(&self, bytes: usize) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let taken = self
            .left
            .fetch_update(Relaxed, Relaxed, |left| left.checked_sub(bytes))
            .is_ok();
        if !taken {
            self.exceeded.store(true, Relaxed);
        }
        taken
    }

    fn exceeded(&self) -> bool {
        self.exceeded.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The answer of a member that was not run.
    fn not_run(id: Option<&RequestId>) -> String {
        let why = format!(
            "invalid request: this batch's answers reached the {BATCH_BUDGET} bytes one batch answer may hold, so this request was not run; send it again on its own or in a smaller batch"
        );
        protocol::error_line(id, ErrorCode::INVALID_REQUEST, &why)
    }

    /// The answer of a member whose answer of `bytes` did not fit.
    fn dropped(id: Option<&RequestId>, bytes: usize) -> String {
        let why = format!(
            "invalid request: the answer to this request ({bytes} bytes) does not fit in what is left of the {BATCH_BUDGET} bytes one batch answer may hold, so it was dropped; send it again on its own (a result that a `wait` or `kill` had claimed is put back for the next one)"
        );
        protocol::error_line(id, ErrorCode::INVALID_REQUEST, &why)
    }
}

/// A job-starting call's work, its first step taken while it holds its
/// session's turn to start. A tool starts its job in its first step (the
/// job service's submit is synchronous), so a session starts its jobs one
/// after another, as a shell does, and the next admission sees the answers
/// made meanwhile.
struct FirstStep<F> {
    call: F,
    turn: Option<OwnedMutexGuard<()>>,
}

impl<F: Future + Unpin> Future for FirstStep<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let step = Pin::new(&mut this.call).poll(cx);
        this.turn = None;
        step
    }
}

/// A call's response line, with its admission ticket (the answer bytes it
/// holds): the ticket is dropped only once the line is queued, so the
/// answers of a client that does not read stay within [`ANSWER_BUDGET`].
type Answer = (Message, Option<OwnedSemaphorePermit>);

/// A response: ready now, or produced by a call's task.
enum Reply {
    Now(String),
    Later(JoinHandle<Answer>),
}

/// One framed message, parsed once: a transport may ask it what it needs
/// to know before it picks the session (HTTP: whether it opens one, whether
/// its answer comes with progress), then hands it to
/// [`McpSession::on_inbound`], which does not parse it again.
pub struct Inbound(Parsed);

enum Parsed {
    /// A line past `MCP_EXEC_MAX_LINE_BYTES`, of this many bytes.
    TooLong(u64),
    /// Not JSON.
    Malformed(serde_json::Error),
    /// A JSON value: a message, a batch, or something invalid.
    Json(Value),
}

/// A single message's parts, as a transport may need to see them before
/// the session handles it (HTTP: to check its routing headers).
#[derive(Clone, Copy, Debug)]
pub struct Single<'a> {
    /// Its `id` (absent in a notification).
    pub id: Option<&'a Value>,
    /// Its `method`, if a string.
    pub method: Option<&'a str>,
    /// Its `params` (`null` when absent).
    pub params: &'a Value,
}

/// Whether a modern (2026-07-28) request may name `method`: the methods
/// [`McpSession`] answers in that revision. Anything else is `-32601`, which
/// the HTTP binding answers `404`.
pub fn modern_method(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "tools/call"
            // The Tasks extension (SEP-2663); `tasks/result` and
            // `tasks/list` do not exist in this era.
            | "tasks/get"
            | "tasks/update"
            | "tasks/cancel"
            | "subscriptions/listen"
    )
}

impl Inbound {
    /// Parses one framed line.
    pub fn parse(line: Line) -> Inbound {
        match line {
            Line::Complete(bytes) => Inbound::from_slice(&bytes),
            Line::TooLong { bytes } => Inbound(Parsed::TooLong(bytes)),
        }
    }

    /// Parses one message's bytes (an HTTP body).
    pub fn from_slice(bytes: &[u8]) -> Inbound {
        Inbound(match serde_json::from_slice(bytes) {
            Ok(v) => Parsed::Json(v),
            Err(e) => Parsed::Malformed(e),
        })
    }

    /// The message as a single object with an `id` (a request, or a
    /// malformed one that is answered); `None` for a batch, a notification
    /// or what did not parse.
    fn request(&self) -> Option<&serde_json::Map<String, Value>> {
        match &self.0 {
            Parsed::Json(Value::Object(m)) if m.contains_key("id") => Some(m),
            _ => None,
        }
    }

    /// The message as a single object: `None` for a batch or what did not
    /// parse.
    pub fn single(&self) -> Option<Single<'_>> {
        let Parsed::Json(Value::Object(m)) = &self.0 else {
            return None;
        };
        Some(Single {
            id: m.get("id"),
            method: m.get("method").and_then(Value::as_str),
            params: m.get("params").unwrap_or(&Value::Null),
        })
    }

    /// Whether it asks to be served statelessly (a per-request
    /// `_meta["io.modelcontextprotocol/protocolVersion"]`, 2026-07-28).
    pub fn is_per_request(&self) -> bool {
        self.single().is_some_and(|m| era::is_per_request(m.params))
    }

    /// Whether it is an `initialize` request: one that opens a session.
    pub fn opens_session(&self) -> bool {
        self.request()
            .is_some_and(|m| m.get("method").and_then(Value::as_str) == Some("initialize"))
    }

    /// Whether it is a request that asked for progress (a non-null
    /// `params._meta.progressToken`): its answer may come after
    /// notifications.
    pub fn wants_progress(&self) -> bool {
        self.request().is_some_and(|m| {
            m.get("params")
                .and_then(|p| p.get("_meta"))
                .and_then(|m| m.get("progressToken"))
                .is_some_and(|t| !t.is_null())
        })
    }
}

impl McpSession {
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
            tasks: TaskTracker::new(),
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

    /// Who this session's requests are, for the tasks they create (SPEC
    /// §19): the stdio process; over HTTP the listener's token, if it has
    /// one.
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
    /// cancelled and answer `-32800`; its jobs live on (SPEC §10).
    pub fn end(&self) {
        self.calls.cancel();
        self.tasks.close();
    }

    /// Stops taking calls and waits up to `within` for those in flight to
    /// finish and queue their responses; returns whether they all did.
    pub async fn settle(&self, within: Duration) -> bool {
        self.tasks.close();
        tokio::time::timeout(within, self.tasks.wait())
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
            Some(Reply::Now(line)) => {
                out.send(line).await;
            }
            // The call's task sends its response itself.
            Some(Reply::Later(_)) | None => {}
        }
    }

    async fn on_batch(self: &Arc<Self>, items: Vec<Value>, out: &Outbox) {
        let batches = self.revision.get().is_some_and(|r| r.accepts_batches());
        if !batches || items.is_empty() {
            let msg = if batches {
                "invalid request: empty batch"
            } else {
                "invalid request: batches are not accepted in this protocol revision"
            };
            out.send(protocol::error_line(None, ErrorCode::INVALID_REQUEST, msg))
                .await;
            return;
        }
        if items.len() > BATCH_MEMBERS {
            let msg = format!(
                "invalid request: a batch of {} members is more than the {BATCH_MEMBERS} one batch may have; nothing in it was run",
                items.len()
            );
            out.send(protocol::error_line(None, ErrorCode::INVALID_REQUEST, &msg))
                .await;
            return;
        }
        let budget = Arc::new(BatchBudget::new());
        let replies: Vec<Reply> = items
            .into_iter()
            .filter_map(|item| self.on_batch_member(Incoming::classify(item), out, &budget))
            .collect();
        if replies.is_empty() {
            return;
        }
        let out = out.clone();
        self.tasks.spawn(async move {
            let mut array = String::from("[");
            let mut tickets = Vec::new();
            for (i, reply) in replies.into_iter().enumerate() {
                if i > 0 {
                    array.push(',');
                }
                array.push_str(&match reply {
                    Reply::Now(line) => line,
                    // Its task already fitted its answer into the budget.
                    Reply::Later(task) => match task.await {
                        Ok((message, ticket)) => {
                            tickets.push(ticket);
                            message.into_line()
                        }
                        Err(e) => {
                            let why = format!("request task failed: {e}");
                            protocol::error_line(None, ErrorCode::INTERNAL_ERROR, &why)
                        }
                    },
                });
            }
            array.push(']');
            out.send(array).await;
            drop(tickets);
        });
    }

    /// A batch member: like [`McpSession::on_message`], but a call's response
    /// is collected instead of sent, and every answer must fit in what is
    /// left of the batch's `budget`. A call's task fits its own answer as
    /// soon as it is made, so an answer that does not fit is dropped there
    /// and never waits for the array.
    fn on_batch_member(
        self: &Arc<Self>,
        msg: Incoming,
        out: &Outbox,
        budget: &Arc<BatchBudget>,
    ) -> Option<Reply> {
        let id = match &msg {
            Incoming::Request { id, .. } => Some(id.clone()),
            Incoming::Invalid { id, .. } => id.clone(),
            Incoming::Notification { .. } | Incoming::Response => None,
        };
        if budget.exceeded() {
            return id.map(|id| Reply::Now(BatchBudget::not_run(Some(&id))));
        }
        match msg {
            Incoming::Request { id, method, params } if method == "tools/call" => {
                let era = match self.era_of(&id, &params) {
                    Ok(era) => era,
                    Err(line) => return Some(Reply::Now(line)),
                };
                let call = self.start_call(id.clone(), &params, era, out);
                let budget = Arc::clone(budget);
                Some(Reply::Later(self.tasks.spawn(async move {
                    let (message, ticket) = call.await;
                    let line = message
                        .into_line_within(|bytes| budget.take(bytes))
                        .unwrap_or_else(|bytes| BatchBudget::dropped(Some(&id), bytes));
                    (Message::Line(line), ticket)
                })))
            }
            other => match self.on_message(other, out)? {
                Reply::Now(line) if !budget.take(line.len()) => {
                    Some(Reply::Now(BatchBudget::dropped(id.as_ref(), line.len())))
                }
                reply => Some(reply),
            },
        }
    }

    /// Handles one message; returns its response, if it gets one now. A
    /// `tools/call` gets a task that sends its response.
    fn on_message(self: &Arc<Self>, msg: Incoming, out: &Outbox) -> Option<Reply> {
        match msg {
            Incoming::Request { id, method, params } => {
                Some(self.on_request(id, method, params, out))
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

    /// How a request with `params` is served (see [`Era::of`]); `Err` is
    /// its error line (`-32022`, `-32602`).
    fn era_of(&self, id: &RequestId, params: &Value) -> Result<Era, String> {
        Era::of(params, self.revision.get().copied(), || {
            self.client.get().cloned().unwrap_or_default()
        })
        .map_err(|e| match e.data() {
            Some(data) => protocol::error_line_with_data(Some(id), e.code(), &e.message(), &data),
            None => protocol::error_line(Some(id), e.code(), &e.message()),
        })
    }

    fn on_request(
        self: &Arc<Self>,
        id: RequestId,
        method: String,
        params: Value,
        out: &Outbox,
    ) -> Reply {
        let label = match method.as_str() {
            "initialize" => "initialize",
            "ping" => "ping",
            "server/discover" => "server/discover",
            "tools/list" => "tools/list",
            "tools/call" => "tools/call",
            "tasks/get" => "tasks/get",
            "tasks/result" => "tasks/result",
            "tasks/list" => "tasks/list",
            "tasks/cancel" => "tasks/cancel",
            "tasks/update" => "tasks/update",
            "subscriptions/listen" => "subscriptions/listen",
            _ => "other",
        };
        let era = match self.era_of(&id, &params) {
            Ok(era) => era,
            Err(line) => {
                crate::metrics::request(self.transport, label, "error");
                return Reply::Now(line);
            }
        };
        let revision = era.revision;
        let known = !revision.is_modern() || modern_method(&method);
        let line = match method.as_str() {
            _ if !known => {
                crate::metrics::request(self.transport, label, "error");
                return Reply::Now(protocol::error_line(
                    Some(&id),
                    ErrorCode::METHOD_NOT_FOUND,
                    &format!("method not found: {method}"),
                ));
            }
            // 2026-07-28 has no handshake: `initialize` is a legacy method.
            "initialize" if !era.per_request => {
                let requested = params.get("protocolVersion").and_then(Value::as_str);
                let negotiated = Revision::negotiate(requested);
                // The first initialize fixes the session's revision.
                let revision = *self.revision.get_or_init(|| negotiated);
                self.client
                    .get_or_init(|| Arc::new(Client::from_initialize(&params)));
                let mut capabilities = json!({"tools": {}});
                if revision.has_task_augmentation() {
                    capabilities["tasks"] = super::tasks::capability(self.requestor());
                }
                protocol::success_line(
                    &id,
                    &json!({
                        "protocolVersion": revision.as_str(),
                        "capabilities": capabilities,
                        "serverInfo": {"name": "mcp-exec", "version": env!("CARGO_PKG_VERSION")},
                    }),
                )
            }
            "tasks/get" | "tasks/list" | "tasks/cancel" | "tasks/result"
                if revision.has_task_augmentation()
                    && (method != "tasks/list" || self.requestor().identified()) =>
            {
                let requestor = self.requestor();
                let app = &self.app;
                match method.as_str() {
                    "tasks/get" => super::tasks::get(app, requestor, &id, &params),
                    "tasks/list" => super::tasks::list(app, requestor, &id, &params),
                    "tasks/cancel" => super::tasks::cancel(app, requestor, &id, &params),
                    _ => return self.task_result(id, params, None, out),
                }
            }
            // The extension's methods need the extension, declared on the
            // request itself (SEP-2663: -32021 otherwise).
            "tasks/get" | "tasks/update" | "tasks/cancel"
                if revision.is_modern() && !era.client.has_extension(super::tasks::EXTENSION) =>
            {
                crate::metrics::request(self.transport, label, "error");
                return Reply::Now(protocol::error_line_with_data(
                    Some(&id),
                    ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                    &format!(
                        "{method} needs the client capability extensions[\"{}\"] on the request",
                        super::tasks::EXTENSION
                    ),
                    &json!({"requiredCapabilities": {"extensions": {super::tasks::EXTENSION: {}}}}),
                ));
            }
            "tasks/get" | "tasks/update" | "tasks/cancel" if revision.is_modern() => {
                super::tasks::modern(&self.app, revision, self.requestor(), &method, &id, &params)
            }
            // Only a listen for task notifications (the Tasks extension): the
            // server has no other notifications to subscribe to, and any
            // other listen stays unknown, as before.
            "subscriptions/listen"
                if revision.is_modern()
                    && era.client.has_extension(super::tasks::EXTENSION)
                    && params["notifications"].get("taskIds").is_some() =>
            {
                return self.task_result(id, params, Some(revision), out);
            }
            "ping" if revision.has_ping() => protocol::success_line(&id, &json!({})),
            "server/discover" if revision.has_discover() => {
                protocol::success_line_raw(&id, discover::result_json(revision))
            }
            "tools/list" => protocol::success_line_raw(&id, tools::list_json(revision)),
            "tools/call" => {
                let call = self.start_call(id, &params, era, out);
                let out = out.clone();
                return Reply::Later(self.tasks.spawn(async move {
                    let (message, ticket) = call.await;
                    out.send(message).await;
                    drop(ticket);
                    (Message::Line(String::new()), None)
                }));
            }
            _ => {
                crate::metrics::request(self.transport, label, "error");
                return Reply::Now(protocol::error_line(
                    Some(&id),
                    ErrorCode::METHOD_NOT_FOUND,
                    &format!("method not found: {method}"),
                ));
            }
        };
        crate::metrics::request(self.transport, label, "ok");
        Reply::Now(line)
    }

    /// `tasks/result` (2025-11-25), which blocks until its task is
    /// terminal, or with `listen` (the request's modern revision)
    /// `subscriptions/listen`, which streams `notifications/tasks`: in a
    /// task of its own, cancellable like a call.
    fn task_result(
        self: &Arc<Self>,
        id: RequestId,
        params: Value,
        listen: Option<Revision>,
        out: &Outbox,
    ) -> Reply {
        let cancel = self.calls.child_token();
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), cancel.clone());
        let session = Arc::clone(self);
        let out = out.clone();
        Reply::Later(self.tasks.spawn(async move {
            let requestor = session.requestor();
            let app = &session.app;
            let answer = async {
                match listen {
                    Some(rev) => {
                        super::tasks::listen(app, rev, requestor, &id, &params, &out).await
                    }
                    None => super::tasks::result(app, requestor, &id, &params).await,
                }
            };
            let line = tokio::select! {
                line = answer => Some(line),
                () = cancel.cancelled() => Some(protocol::error_line(
                    Some(&id),
                    ErrorCode::REQUEST_CANCELLED,
                    "request cancelled",
                )),
                () = out.closed() => None,
            };
            session
                .in_flight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            let label = if listen.is_some() {
                "subscriptions/listen"
            } else {
                "tasks/result"
            };
            crate::metrics::request(session.transport, label, "ok");
            if let Some(line) = line {
                out.send(line).await;
            }
            (Message::Line(String::new()), None)
        }))
    }

    /// Resizes a job-starting call's ticket to its answer's `cost`: gives
    /// back what the answer does not need, takes what it needs more as far
    /// as the budget has it free (never waiting).
    fn hold_answer(&self, ticket: &mut OwnedSemaphorePermit, cost: usize) {
        let held = ticket.num_permits();
        if cost < held {
            drop(ticket.split(held - cost));
            return;
        }
        let more = (cost - held).min(self.answers.available_permits());
        if let Ok(more) = Arc::clone(&self.answers).try_acquire_many_owned(more as u32) {
            ticket.merge(more);
        }
    }

    /// Registers the call as in flight (before its task exists, so a cancel
    /// that follows it on the wire finds it) and returns the future that
    /// runs it and yields its response line. Progress notifications go to
    /// `out`.
    fn start_call(
        self: &Arc<Self>,
        id: RequestId,
        params: &Value,
        era: Era,
        out: &Outbox,
    ) -> impl Future<Output = Answer> + Send + 'static {
        let cancel = self.calls.child_token();
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), cancel.clone());
        let session = Arc::clone(self);
        let out = out.clone();
        let token = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| !t.is_null())
            .cloned();
        let params = params.clone();
        let requestor = self.requestor();
        let reach = super::tasks::Reach {
            out: out.clone(),
            token: token.clone(),
        };
        async move {
            let call = Call {
                host: Arc::clone(&session.app) as Arc<dyn tools::Host>,
                cancel: cancel.clone(),
                shutdown: session.shutdown.clone(),
                progress: ProgressText::default(),
                revision: era.revision,
                client: era.client,
            };
            let result_type = era.revision.is_modern();
            // A call starts its work only while its outbox has room, and a
            // call that may start a job only while the session's answers
            // leave room for one more (ANSWER_BUDGET): so the jobs and
            // answers that a client that does not read makes the server
            // hold are bounded, as well as its queued messages.
            let admitted = async {
                out.room().await;
                if !tools::starts_jobs(&params) {
                    return (None, None);
                }
                let turn = Arc::clone(&session.starting).lock_owned().await;
                // Again in its turn: the calls before it may have filled it.
                out.room().await;
                let ticket = Arc::clone(&session.answers)
                    .acquire_many_owned(ANSWER_FLOOR as u32)
                    .await
                    .ok();
                (ticket, Some(turn))
            };
            let mut ticket = None;
            let run = async {
                let turn;
                (ticket, turn) = tokio::select! {
                    t = admitted => t,
                    () = call.cancel.cancelled() => return Err(CallError::Cancelled),
                };
                let work = FirstStep {
                    call: Box::pin(super::tasks::dispatch(
                        &session.app,
                        &call,
                        &params,
                        requestor,
                        reach,
                    )),
                    turn,
                };
                match token {
                    Some(t) => {
                        let every = session.app.config.progress_interval;
                        progress::with_ticker(work, &call.progress, t, every, &out).await
                    }
                    None => work.await,
                }
            };
            let ended = session.calls.clone();
            // Backstop: a call that does not reach a blocking point soon
            // after its session ended is answered anyway. (A call cancelled
            // on its own, e.g. an `execute` tearing its job down, answers
            // when it is done.)
            let backstop = || async {
                ended.cancelled().await;
                tokio::time::sleep(ANSWER_BACKSTOP).await;
            };
            // A block: the call's future (which borrows `ticket`) ends with it.
            let outcome = {
                let mut run = std::pin::pin!(run);
                let mut outcome = tokio::select! {
                    biased;
                    () = backstop() => Some(Err(CallError::Cancelled)),
                    // Nobody can read the answer any more (an HTTP client went
                    // away): up to 2025-11-25 the call is detached, not
                    // cancelled (SPEC §10). It is dropped where it waits; tools
                    // claim a job's result only after their wait, so its job
                    // and result stay in the table.
                    () = out.closed() => None,
                    r = &mut run => Some(r),
                };
                // In 2026-07-28 the closed stream IS the cancellation (SPEC
                // §19): the call is cancelled as by `notifications/cancelled`
                // and runs to its end (a blocking `execute` tears its job down).
                if outcome.is_none() && call.revision.closed_stream_cancels() {
                    tracing::debug!(request = %id, "response stream closed: request cancelled");
                    call.cancel.cancel();
                    tokio::select! {
                        biased;
                        () = backstop() => {}
                        _ = &mut run => {}
                    }
                    outcome = Some(Err(CallError::Cancelled));
                }
                outcome
            };
            session
                .in_flight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            let outcome_label = match &outcome {
                Some(Ok(_)) => "ok",
                None => "detached",
                Some(Err(CallError::Cancelled)) => "cancelled",
                Some(Err(CallError::Protocol(..))) => "error",
            };
            crate::metrics::request(session.transport, "tools/call", outcome_label);
            let message = match outcome {
                Some(Ok(result)) => Message::Response {
                    result_type: result_type.then(|| result.result_type()),
                    id,
                    result,
                },
                None => {
                    tracing::debug!(request = %id, "call detached: its client is gone");
                    Message::Line(protocol::error_line(
                        Some(&id),
                        ErrorCode::REQUEST_CANCELLED,
                        "request detached",
                    ))
                }
                Some(Err(CallError::Cancelled)) => Message::Line(protocol::error_line(
                    Some(&id),
                    ErrorCode::REQUEST_CANCELLED,
                    "request cancelled",
                )),
                Some(Err(CallError::Protocol(code, msg))) => {
                    Message::Line(protocol::error_line(Some(&id), code, &msg))
                }
            };
            if let Some(t) = ticket.as_mut() {
                session.hold_answer(t, message.cost());
            }
            (message, ticket)
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
