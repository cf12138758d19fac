//! The Streamable HTTP transport (SPEC §11), on hyper's HTTP/1.1 server.
//!
//! - [`settings`]: the listener settings, validated at start-up (they fail
//!   closed: `main` exits 2 naming the bad one).
//! - [`guard`]: the checks every request passes first: `Host` (DNS
//!   rebinding), `Origin`, the bearer token.
//! - [`body`]: the response body: whole, or a stream fed by a task.
//! - [`exec`]: `POST /exec`, a job streamed as server-sent events (SPEC
//!   §11.2); unlike `/mcp`, a client that leaves cancels its job.
//! - [`files`]: `/files/<abs path>`: streamed file transfer and the file
//!   API (SPEC §13.2).
//!
//! # Requests and sessions
//! `POST /mcp` carries one JSON-RPC message (or, in a 2025-03-26 session, a
//! batch). `initialize` creates a [`Session`] — the same protocol code the
//! stdio transport uses — and names it in `Mcp-Session-Id`; every later
//! request must carry that header. Each POST gets an [`Outbox`](crate::server::outbox::Outbox) of its own:
//! the session queues that message's response (and its progress
//! notifications) there, and the handler turns what arrives into the HTTP
//! response: `202` when nothing answers (a notification, a response),
//! `application/json` with the one response, or `text/event-stream` with
//! the progress notifications and then the response when the request asked
//! for progress and the client accepts SSE.
//!
//! # Disconnects (SPEC §10)
//! When the client goes away, hyper drops the handler's future (JSON) or
//! the body (SSE); either drops the POST's `Inbox`, which closes the outbox,
//! and a call still waiting on it is *detached*: dropped where it waits,
//! before it claims anything (see `Session`), so its job and result stay
//! in the table. Only `notifications/cancelled` and `DELETE` cancel.
//!
//! # Bounds
//! Bodies up to `MCP_EXEC_MAX_LINE_BYTES` (`413` past it, and the rest is
//! never read: the connection closes), request heads up to
//! [`MAX_HEAD_BYTES`], at most `MCP_EXEC_HTTP_MAX_CONNECTIONS` connections
//! (accepting waits for a free slot), and [`HEADER_READ_TIMEOUT`] to send a
//! request's head. Sessions idle for `MCP_EXEC_HTTP_SESSION_IDLE` with no
//! request in flight end (implicitly: nothing of theirs is in flight).

pub mod body;
mod exec;
mod files;
pub mod guard;
pub mod settings;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::protocol::line::Line;
use crate::protocol::version::SUPPORTED;
use crate::server::outbox::{self, Message, Outgoing};
use crate::server::session::Session;
use crate::tools::App;
use body::Body;
pub use settings::Settings;

/// A client must send a request's head within this, or it is dropped
/// (SPEC §11: slow clients cannot pin connections).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A `/mcp` or `/exec` body must arrive within this after its head, or the
/// request gets `408` and the connection closes: hyper's header timeout
/// does not cover bodies, and a client that sent a head and then trickled
/// (or withheld) its body held its connection for good, so enough of them
/// locked every client out. Generous next to the header timeout: a body
/// may be as large as `MCP_EXEC_MAX_LINE_BYTES`.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest request head (request line and headers).
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// How long after the last byte of a response a finished request still
/// counts as in flight at shutdown: hyper may hold the tail in its write
/// buffer after it dropped the body.
const FLUSH_SLACK: Duration = Duration::from_millis(100);

/// Which listener a request came in on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Listener {
    /// The main one: MCP, health, token-protected metrics.
    Main,
    /// `--metrics-listen`: metrics and health, no token.
    Metrics,
}

/// One HTTP session: the protocol state and its use.
struct Entry {
    session: Arc<Session>,
    /// Requests of this session in flight (not expired while any is).
    busy: AtomicUsize,
    last_used: Mutex<Instant>,
}

/// What every request handler shares.
struct State {
    app: Arc<App>,
    settings: Option<Settings>,
    shutdown: CancellationToken,
    sessions: Mutex<HashMap<String, Arc<Entry>>>,
    started: Instant,
    /// Requests in flight, whose responses are not fully handed to hyper.
    active: watch::Sender<usize>,
}

/// The running listeners.
pub struct Http {
    state: Arc<State>,
}

/// Binds the main listener (when `settings` is set) and the metrics
/// listener (when `metrics` is), and serves them until the process exits.
/// Their bound addresses are printed on stderr (`mcp-exec: listening for
/// HTTP on ADDR`, `… for metrics on ADDR`): a port of 0 picks a free one.
pub async fn start(
    settings: Option<Settings>,
    metrics: Option<SocketAddr>,
    app: Arc<App>,
    shutdown: &CancellationToken,
) -> std::io::Result<Http> {
    let addr = settings.as_ref().map(|s| s.addr);
    let max_connections = settings.as_ref().map_or(256, |s| s.max_connections);
    let idle = settings.as_ref().map(|s| s.session_idle);
    let state = Arc::new(State {
        app,
        settings,
        shutdown: shutdown.clone(),
        sessions: Mutex::default(),
        started: Instant::now(),
        active: watch::Sender::new(0),
    });
    for (addr, listener, what) in [
        (addr, Listener::Main, "HTTP"),
        (metrics, Listener::Metrics, "metrics"),
    ] {
        let Some(addr) = addr else { continue };
        let socket = TcpListener::bind(addr).await.map_err(|e| {
            std::io::Error::new(e.kind(), format!("binding {addr} for {what}: {e}"))
        })?;
        let bound = socket.local_addr()?;
        tracing::info!(%bound, "listening for {what}");
        eprintln!("mcp-exec: listening for {what} on {bound}");
        let limit = Arc::new(Semaphore::new(max_connections.max(1)));
        tokio::spawn(accept(socket, Arc::clone(&state), listener, limit));
    }
    if let Some(idle) = idle {
        tokio::spawn(expire_idle(Arc::clone(&state), idle));
    }
    Ok(Http { state })
}

impl Http {
    /// Waits up to `within` for every HTTP session's calls to finish and
    /// queue their responses.
    pub async fn settle(&self, within: Duration) {
        let sessions: Vec<Arc<Entry>> = lock(&self.state.sessions).values().cloned().collect();
        let _ = tokio::time::timeout(within, async {
            for entry in sessions {
                entry.session.settle(within).await;
            }
        })
        .await;
    }

    /// Waits up to `within` until no response is being written.
    pub async fn drained(&self, within: Duration) {
        let mut rx = self.state.active.subscribe();
        let _ = tokio::time::timeout(within, rx.wait_for(|n| *n == 0)).await;
        tokio::time::sleep(FLUSH_SLACK).await;
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Accepts connections while fewer than the limit are open.
async fn accept(socket: TcpListener, state: Arc<State>, listener: Listener, limit: Arc<Semaphore>) {
    loop {
        let Ok(permit) = Arc::clone(&limit).acquire_owned().await else {
            return;
        };
        let stream = match socket.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accepting an HTTP connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(Arc::clone(&state), listener, req));
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES);
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, "HTTP connection ended");
            }
            drop(permit);
        });
    }
}

/// Ends sessions idle for `idle` with no request in flight.
async fn expire_idle(state: Arc<State>, idle: Duration) {
    let every = (idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
    let mut ticks = tokio::time::interval(every);
    loop {
        ticks.tick().await;
        lock(&state.sessions).retain(|id, e| {
            let keep = e.busy.load(Ordering::Acquire) > 0 || lock(&e.last_used).elapsed() < idle;
            if !keep {
                tracing::info!(session = %id, "HTTP session expired");
            }
            keep
        });
    }
}

/// Counts a request as in flight until dropped (it travels in the body).
pub struct Active(Arc<State>);

impl Active {
    fn new(state: &Arc<State>) -> Active {
        state.active.send_modify(|n| *n += 1);
        Active(Arc::clone(state))
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        self.0.active.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Marks a session used until dropped.
struct Busy(Arc<Entry>);

impl Busy {
    fn new(entry: &Arc<Entry>) -> Busy {
        entry.busy.fetch_add(1, Ordering::AcqRel);
        *lock(&entry.last_used) = Instant::now();
        Busy(Arc::clone(entry))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *lock(&self.0.last_used) = Instant::now();
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

type Reply = Response<Body>;

fn status(code: StatusCode, message: &str) -> Reply {
    let mut r = Response::new(Body::full(format!("{}\n", json!({"error": message}))));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn handle(
    state: Arc<State>,
    listener: Listener,
    req: Request<Incoming>,
) -> Result<Reply, Infallible> {
    let active = Active::new(&state);
    let mut reply = route(&state, listener, req).await;
    reply.body_mut().hold(active);
    Ok(reply)
}

async fn route(state: &Arc<State>, listener: Listener, req: Request<Incoming>) -> Reply {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    let settings = match (listener, &state.settings) {
        (Listener::Main, Some(s)) => s,
        _ => {
            return match (method, path.as_str()) {
                (Method::GET, "/metrics") => metrics(state),
                (Method::GET, "/healthz") => health(state),
                (Method::GET, "/livez") => live(),
                _ => status(StatusCode::NOT_FOUND, "not found"),
            };
        }
    };
    if let Err(why) = guard::host(settings, req.headers()) {
        return status(StatusCode::FORBIDDEN, why);
    }
    if let Err(why) = guard::origin(settings, req.headers()) {
        return status(StatusCode::FORBIDDEN, why);
    }
    match (&method, path.as_str()) {
        (&Method::GET, "/healthz") => return health(state),
        (&Method::GET, "/livez") => return live(),
        _ => {}
    }
    if !guard::authorized(settings, req.headers()) {
        let mut r = status(StatusCode::UNAUTHORIZED, "a bearer token is required");
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    match (method, path.as_str()) {
        (Method::GET, "/metrics") => metrics(state),
        (Method::POST, "/mcp") => post(state, req).await,
        (Method::DELETE, "/mcp") => delete(state, &req),
        (Method::POST, "/exec") => exec::post(state, req).await,
        (_, p) if p.starts_with("/files/") || p == "/files" => files::handle(state, req).await,
        (_, "/mcp") => {
            let mut r = status(
                StatusCode::METHOD_NOT_ALLOWED,
                "this server offers no stream on GET /mcp",
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
            r
        }
        _ => status(StatusCode::NOT_FOUND, "not found"),
    }
}

fn live() -> Reply {
    let mut r = Response::new(Body::full("{\"status\":\"ok\"}\n".to_owned()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn health(state: &State) -> Reply {
    let (running, queued) = state.app.jobs.counts();
    let (code, what) = if state.shutdown.is_cancelled() {
        (StatusCode::SERVICE_UNAVAILABLE, "shutting_down")
    } else if state.app.jobs.breaker_open() {
        (StatusCode::SERVICE_UNAVAILABLE, "degraded")
    } else {
        (StatusCode::OK, "ok")
    };
    let body = json!({
        "status": what,
        "version": env!("CARGO_PKG_VERSION"),
        "pid1": state.app.jobs.is_pid1(),
        "uptime_s": state.started.elapsed().as_secs(),
        "jobs": {"running": running, "queued": queued},
    });
    let mut r = Response::new(Body::full(format!("{body}\n")));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn metrics(state: &State) -> Reply {
    let (running, queued) = state.app.jobs.counts();
    let text = crate::metrics::render(&crate::metrics::Snapshot {
        running,
        queued,
        capacity: state.app.config.max_running,
        http_sessions: lock(&state.sessions).len(),
        breaker_open: state.app.jobs.breaker_open(),
        orphans_reaped: state.app.jobs.orphans_reaped(),
    });
    let mut r = Response::new(Body::full(text));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}

/// The session a request names: `Err` is the reply (`400` missing, `404`
/// unknown or ended).
fn session_of(
    state: &State,
    headers: &hyper::HeaderMap,
) -> Result<Arc<Entry>, (StatusCode, &'static str)> {
    let Some(id) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) else {
        return Err((
            StatusCode::BAD_REQUEST,
            "Mcp-Session-Id is required after initialize",
        ));
    };
    lock(&state.sessions)
        .get(id)
        .cloned()
        .ok_or((StatusCode::NOT_FOUND, "unknown or ended session"))
}

fn delete(state: &State, req: &Request<Incoming>) -> Reply {
    let entry = match session_of(state, req.headers()) {
        Ok(e) => e,
        Err((code, why)) => return status(code, why),
    };
    lock(&state.sessions).retain(|_, e| !Arc::ptr_eq(e, &entry));
    entry.session.end();
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::NO_CONTENT;
    r
}

/// Reads a `/mcp` or `/exec` body of at most `MCP_EXEC_MAX_LINE_BYTES`;
/// `Err` is the reply (`413` past the bound, without reading the rest).
async fn read_body(
    state: &State,
    req: Request<Incoming>,
) -> Result<(hyper::http::request::Parts, Bytes), Reply> {
    let max = state.app.config.max_line_bytes;
    let too_big = || {
        let mut r = status(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the body exceeds MCP_EXEC_MAX_LINE_BYTES ({max})"),
        );
        // The rest of the body is never read: the connection cannot be reused.
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_big());
    }
    let (parts, incoming) = req.into_parts();
    let collect = tokio::time::timeout(BODY_READ_TIMEOUT, Limited::new(incoming, max).collect());
    let Ok(collected) = collect.await else {
        let mut r = status(
            StatusCode::REQUEST_TIMEOUT,
            &format!(
                "the body did not arrive within {} s",
                BODY_READ_TIMEOUT.as_secs()
            ),
        );
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return Err(r);
    };
    let bytes = match collected {
        Ok(c) => c.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => return Err(too_big()),
        Err(e) => {
            return Err(status(
                StatusCode::BAD_REQUEST,
                &format!("reading the body: {e}"),
            ));
        }
    };
    Ok((parts, bytes))
}

async fn post(state: &Arc<State>, req: Request<Incoming>) -> Reply {
    let accept = req
        .headers()
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",")
        .to_ascii_lowercase();
    let accepts = |what: &str| accept.split(',').any(|a| a.trim().starts_with(what));
    if !accept.is_empty() && !accepts("application/json") && !accepts("*/*") {
        return status(
            StatusCode::NOT_ACCEPTABLE,
            "Accept must allow application/json",
        );
    }
    let sse = accepts("text/event-stream");
    let (parts, bytes) = match read_body(state, req).await {
        Ok(read) => read,
        Err(reply) => return reply,
    };
    let value: Option<Value> = serde_json::from_slice(&bytes).ok();
    let is_initialize = value.as_ref().is_some_and(|v| {
        v.get("method").and_then(Value::as_str) == Some("initialize") && v.get("id").is_some()
    });
    let wants_progress = value.as_ref().is_some_and(|v| {
        v.get("id").is_some()
            && v.get("params")
                .and_then(|p| p.get("_meta"))
                .and_then(|m| m.get("progressToken"))
                .is_some_and(|t| !t.is_null())
    });
    drop(value);

    let (entry, new_id) = if is_initialize {
        let Some(id) = new_session_id() else {
            return status(
                StatusCode::INTERNAL_SERVER_ERROR,
                "no randomness for a session id",
            );
        };
        let entry = Arc::new(Entry {
            session: Session::new(Arc::clone(&state.app), &state.shutdown, "http"),
            busy: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
        });
        (entry, Some(id))
    } else {
        let entry = match session_of(state, &parts.headers) {
            Ok(e) => e,
            Err((code, why)) => return status(code, why),
        };
        if let Some(v) = parts.headers.get("mcp-protocol-version") {
            let v = v.to_str().unwrap_or("");
            if !SUPPORTED.contains(&v) {
                return status(
                    StatusCode::BAD_REQUEST,
                    &format!("unsupported MCP-Protocol-Version {v:?}"),
                );
            }
            if entry.session.is_initialized() && entry.session.revision().as_str() != v {
                return status(
                    StatusCode::BAD_REQUEST,
                    "MCP-Protocol-Version differs from the session's revision",
                );
            }
        }
        (entry, None)
    };
    let busy = Busy::new(&entry);
    let (out, mut inbox) = outbox::new(outbox::BUDGET);
    entry
        .session
        .on_line(Line::Complete(bytes.to_vec()), &out)
        .await;
    drop(bytes);
    // Only the call's task holds the outbox now: when it is done (or when
    // nothing answers at all), the inbox ends.
    drop(out);
    if let Some(id) = &new_id {
        lock(&state.sessions).insert(id.clone(), Arc::clone(&entry));
        tracing::info!(session = %id, "HTTP session started");
    }
    let mut reply = if sse && wants_progress {
        let (tx, rx) = mpsc::channel::<Bytes>(4);
        tokio::spawn(async move {
            let _busy = busy;
            loop {
                let next = tokio::select! {
                    m = inbox.rx.recv() => m,
                    // The body is gone: the client went away.
                    () = tx.closed() => return,
                };
                let Some(Outgoing::Message(message, permit)) = next else {
                    return;
                };
                let last = !matches!(message, Message::Notification(_));
                let mut event = b"event: message\ndata: ".to_vec();
                if message.write_to(&mut event).is_err() {
                    return;
                }
                drop(message);
                event.extend_from_slice(b"\n\n");
                let sent = tx.send(Bytes::from(event)).await.is_ok();
                drop(permit);
                if !sent || last {
                    return;
                }
            }
        });
        let mut r = Response::new(Body::stream(rx));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        r
    } else {
        let answer = loop {
            match inbox.rx.recv().await {
                Some(Outgoing::Message(Message::Notification(_), _)) => {}
                Some(Outgoing::Message(message, _permit)) => {
                    let mut body = Vec::new();
                    if message.write_to(&mut body).is_err() {
                        return status(StatusCode::INTERNAL_SERVER_ERROR, "encoding the response");
                    }
                    body.push(b'\n');
                    break Some(body);
                }
                Some(Outgoing::Finish) | None => break None,
            }
        };
        drop(busy);
        match answer {
            Some(body) => {
                let mut r = Response::new(Body::full(body));
                r.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                r
            }
            None => {
                let mut r = Response::new(Body::empty());
                *r.status_mut() = StatusCode::ACCEPTED;
                r
            }
        }
    };
    if let Some(v) = new_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        reply.headers_mut().insert("mcp-session-id", v);
    }
    reply
}

/// 128 random bits from the kernel, as 32 hex digits; `None` if the kernel
/// has none to give (then there must be no session).
fn new_session_id() -> Option<String> {
    let mut raw = [0u8; 16];
    let mut filled = 0;
    while filled < raw.len() {
        match rustix::rand::getrandom(&mut raw[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                tracing::error!(error = %e, "getrandom failed");
                return None;
            }
        }
    }
    Some(raw.iter().map(|b| format!("{b:02x}")).collect())
}
