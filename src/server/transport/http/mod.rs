//! The Streamable HTTP transport (SPEC §11), on hyper's HTTP/1.1 server.
//! This module binds the listeners, accepts connections and routes each
//! request; the rest is split by concern:
//!
//! - [`settings`]: the listener settings, validated at start-up (they fail
//!   closed: `main` exits 2 naming the bad one).
//! - [`conns`]: the open connections, and which one to drop for a newcomer
//!   at `MCP_EXEC_HTTP_MAX_CONNECTIONS`.
//! - [`stall`]: the socket with a bound on writes that make no progress.
//! - [`guard`]: the checks every request passes first: `Host` (DNS
//!   rebinding, one header), `Origin`, the bearer token.
//! - [`state`]: what every handler shares: the HTTP sessions, the requests
//!   in flight.
//! - [`read`] and [`reply`]: reading a bounded request body; building
//!   responses (JSON, SSE, refusals).
//! - [`body`]: the response body: whole, or a stream fed by a task.
//! - [`mcp`]: `POST`/`DELETE /mcp`, the MCP endpoint, both eras.
//! - [`routing`]: the 2026-07-28 routing headers checked against the body.
//! - [`probes`]: `/livez`, `/healthz`, `/metrics`.
//! - [`exec`]: `POST /exec`, a job streamed as server-sent events (SPEC
//!   §11.2); unlike `/mcp`, a client that leaves cancels its job.
//! - [`files`]: `/files/<abs path>`: streamed file transfer and the file
//!   API (SPEC §13.2).
//! - [`tty`]: `GET /jobs/<id>/tty`, a human attached to a job's terminal
//!   over a WebSocket (SPEC §20).
//! - [`ports`]: `GET /ports`, and `/ports/<n>/…`, the preview proxy to a
//!   port listening in the container, WebSockets included (SPEC §22).
//!
//! # Disconnects (SPEC §10)
//! When the client goes away, hyper drops the handler's future (JSON) or
//! the body (SSE); either drops the POST's `Inbox`, which closes the outbox,
//! and a call still waiting on it is *detached*: dropped where it waits,
//! before it claims anything (see
//! [`McpSession`](crate::server::session::McpSession)), so its job and
//! result stay in the table. Only `notifications/cancelled` and `DELETE` cancel.
//! A 2026-07-28 request is the exception its revision defines: the closed
//! stream IS its cancellation (SPEC §19), so the call is cancelled, and a
//! blocking `execute` tears its job down.
//!
//! # Bounds
//! Bodies up to `MCP_EXEC_MAX_LINE_BYTES` (`413` past it, and the rest is
//! never read: the connection closes), request heads up to
//! [`MAX_HEAD_BYTES`], at most `MCP_EXEC_HTTP_MAX_CONNECTIONS` connections
//! per listener — the listener always accepts, and a newcomer past the limit
//! takes the slot of an idle connection that never showed the token, or is
//! answered `503` and closed ([`conns`]) — [`SILENT_TIMEOUT`] to send a
//! first byte, [`HEADER_READ_TIMEOUT`] to send a request's head, and
//! `MCP_EXEC_HTTP_STALL_TIMEOUT` for a write (or a `/files` body frame) to
//! make progress. Sessions idle for `MCP_EXEC_HTTP_SESSION_IDLE` with no
//! request in flight end (implicitly: nothing of theirs is in flight), and
//! past `MCP_EXEC_HTTP_MAX_SESSIONS` the least recently used idle one ends.

pub mod body;
mod conns;
mod exec;
mod files;
pub mod guard;
mod mcp;
mod ports;
mod probes;
mod read;
pub(in crate::server::transport) mod reply;
mod routing;
pub mod settings;
mod stall;
mod state;
pub(in crate::server::transport) mod transfer;
mod tty;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::sandboxd::{self, rest::SandboxdRest};
use crate::tools::App;
use conns::{Admission, ConnSlot, Conns};
use reply::{HttpReply, status};
pub use settings::HttpSettings;
use state::Active;
use state::{HttpSession, HttpState, lock};

/// A client must send a request's head within this, or it is dropped
/// (SPEC §11: slow clients cannot pin connections).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection that sends nothing at all within this is dropped: much
/// shorter than [`HEADER_READ_TIMEOUT`], since a client that connects sends
/// its request at once, and a silent connection only holds a slot.
pub const SILENT_TIMEOUT: Duration = Duration::from_secs(2);
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
    /// `--metrics-listen` (bound there): metrics and health, no token.
    Metrics(SocketAddr),
    /// `--sandboxd-rest` on an address of its own: sandboxd's `/v1/` only.
    Sandboxd,
}

/// The running listeners.
pub struct Http {
    state: Arc<HttpState>,
}

/// Binds the main listener (when `settings` is set) and the metrics
/// listener (when `metrics` is), and serves them until the process exits.
/// Their bound addresses are printed on stderr (`mcp-exec: listening for
/// HTTP on ADDR`, `… for metrics on ADDR`): a port of 0 picks a free one.
///
/// sandboxd's REST API (`sandboxd`, SPEC §21) gets a listener of its own,
/// or, on the address of the main one, the main one's `/v1/` paths.
pub async fn start(
    settings: Option<HttpSettings>,
    metrics: Option<SocketAddr>,
    sandboxd: Option<SandboxdRest>,
    app: Arc<App>,
    shutdown: &CancellationToken,
) -> std::io::Result<Http> {
    let addr = settings.as_ref().map(|s| s.addr);
    let max_connections = settings.as_ref().map_or(256, |s| s.max_connections);
    let idle = settings.as_ref().map(|s| s.session_idle);
    if settings.as_ref().is_some_and(|s| s.token.is_none()) {
        tracing::warn!(
            "HTTP serves without a token: any local process can drive the server \
             (set MCP_EXEC_HTTP_TOKEN_FILE or MCP_EXEC_HTTP_TOKEN)"
        );
    }
    if let Some(auth) = sandboxd.as_ref().map(|s| s.auth())
        && !auth.has_token()
    {
        tracing::warn!(
            listener = auth.platform().name(),
            "a platform listener serves without a token: anyone who can reach {} can write files \
             (SPEC §21; on a pod network a NetworkPolicy is the boundary)",
            auth.addr()
        );
    }
    // Shared with the main listener (the same address, not port 0, which
    // asks each for a free port): no socket of its own.
    let sandboxd_addr = sandboxd
        .as_ref()
        .map(|s| s.auth().addr())
        .filter(|a| a.port() == 0 || Some(*a) != addr);
    let shares = sandboxd.is_some() && sandboxd_addr.is_none();
    let state = HttpState::new(app, settings, sandboxd, shares, shutdown);
    for (addr, kind, what) in [
        (addr, 0, "HTTP"),
        (metrics, 1, "metrics"),
        (sandboxd_addr, 2, "sandboxd REST"),
    ] {
        let Some(addr) = addr else { continue };
        let socket = TcpListener::bind(addr).await.map_err(|e| {
            std::io::Error::new(e.kind(), format!("binding {addr} for {what}: {e}"))
        })?;
        let bound = socket.local_addr()?;
        tracing::info!(%bound, "listening for {what}");
        eprintln!("mcp-exec: listening for {what} on {bound}");
        let listener = match kind {
            0 => Listener::Main,
            1 => Listener::Metrics(bound),
            _ => Listener::Sandboxd,
        };
        let conns = Conns::new(max_connections);
        tokio::spawn(accept(socket, Arc::clone(&state), listener, conns));
    }
    if let Some(idle) = idle {
        tokio::spawn(state::expire_idle(Arc::clone(&state), idle));
    }
    Ok(Http { state })
}

impl Http {
    /// Waits up to `within` for every HTTP session's calls to finish and
    /// queue their responses.
    pub async fn settle(&self, within: Duration) {
        let sessions: Vec<Arc<HttpSession>> =
            lock(&self.state.sessions).values().cloned().collect();
        let _ = tokio::time::timeout(within, async {
            self.state.stateless.settle(within).await;
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

/// Accepts every connection, at once: the table ([`conns`]) decides
/// whether it gets a slot (perhaps one taken from an idle unauthenticated
/// connection) or a `503` and a close. Never waiting here is what keeps the
/// kernel's backlog empty, so a token holder's SYN is always answered.
async fn accept(socket: TcpListener, state: Arc<HttpState>, listener: Listener, conns: Arc<Conns>) {
    let late = Arc::new(LateWaiters::default());
    loop {
        let stream = match socket.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accepting an HTTP connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Without TCP_NODELAY, Nagle holds a small response's last segment
        // until the client ACKs the previous one, and a client that delays
        // its ACKs (Linux: up to 40 ms) stalls every small answer that long.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "setting TCP_NODELAY");
        }
        // Whether its bytes are already here, without waiting: a token
        // holder's request usually is, and it must not be taken for silent.
        let heard = rustix::net::recv(
            &stream,
            &mut [0u8; 1][..],
            rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT,
        )
        .is_ok_and(|(n, _)| n > 0);
        match conns.admit(heard) {
            Admission::Admitted(slot) => {
                tokio::spawn(serve(stream, Arc::clone(&state), listener, Arc::new(slot)));
            }
            // A silent newcomer may only be slow to send (a token holder on a
            // loaded machine): it gets up to the grace a silent connection
            // has, then asks again as one that has sent bytes. A bounded
            // number wait at once; past that it is refused at once.
            // A bounded number wait at once: the newest newcomer displaces the
            // longest waiting one, so under a flood of silent connections each
            // still gets (waiters ÷ arrival rate) to send, never nothing.
            Admission::Full if !heard => {
                let (id, displaced) = late.enter();
                let (state, conns, late) =
                    (Arc::clone(&state), Arc::clone(&conns), Arc::clone(&late));
                tokio::spawn(async move {
                    let mut first = [0u8; 1];
                    let peeked = tokio::select! {
                        p = tokio::time::timeout(conns::GRACE, stream.peek(&mut first)) => Some(p),
                        () = displaced.cancelled() => None,
                    };
                    late.leave(id);
                    let heard = matches!(peeked, Some(Ok(Ok(n))) if n > 0);
                    match (heard, heard.then(|| conns.admit(true))) {
                        (true, Some(Admission::Admitted(slot))) => {
                            serve(stream, state, listener, Arc::new(slot)).await;
                        }
                        _ => refuse(&stream),
                    }
                });
            }
            Admission::Full => refuse(&stream),
        }
    }
}

/// How many silent newcomers past the limit may wait at once for their
/// first bytes ([`accept`]): each holds a descriptor for up to
/// [`conns::GRACE`].
const LATE_WAITERS: usize = 64;

/// The silent newcomers waiting for their first bytes, oldest first: at
/// most [`LATE_WAITERS`]; one more displaces the oldest (cancels its wait,
/// and it is refused as before).
#[derive(Default)]
struct LateWaiters(std::sync::Mutex<(u64, std::collections::VecDeque<(u64, CancellationToken)>)>);

impl LateWaiters {
    /// A new waiter: its id and the token cancelled if it is displaced.
    fn enter(&self) -> (u64, CancellationToken) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (next, waiting) = &mut *w;
        *next += 1;
        let id = *next;
        if waiting.len() >= LATE_WAITERS
            && let Some((_, oldest)) = waiting.pop_front()
        {
            oldest.cancel();
        }
        let token = CancellationToken::new();
        waiting.push_back((id, token.clone()));
        (id, token)
    }

    /// Waiter `id` is done (heard, timed out or displaced).
    fn leave(&self, id: u64) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        w.1.retain(|(i, _)| *i != id);
    }
}

/// The answer to a connection past the limit when no slot could be freed:
/// written without waiting (the socket's buffer is empty), then closed.
fn refuse(stream: &TcpStream) {
    let body = "{\"error\":\"every connection is in use (MCP_EXEC_HTTP_MAX_CONNECTIONS); \
                retry\"}\n";
    let full = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(full.as_bytes());
    crate::metrics::http_connection_dropped("refused");
}

/// Serves one connection: it must send a first byte within
/// [`SILENT_TIMEOUT`], then hyper serves it until it ends, times out, or
/// is evicted for a newcomer.
async fn serve(stream: TcpStream, state: Arc<HttpState>, listener: Listener, slot: Arc<ConnSlot>) {
    let evicted = slot.evicted().clone();
    // `peek`, not `readable()`: readiness may be reported before any byte
    // has arrived, and a silent connection must stay evictable first.
    let mut first = [0u8; 1];
    let first = tokio::select! {
        first = tokio::time::timeout(SILENT_TIMEOUT, stream.peek(&mut first)) => first,
        () = evicted.cancelled() => return,
    };
    match first {
        Ok(Ok(n)) if n > 0 => slot.heard(),
        // Closed before a byte, or an error.
        Ok(_) => return,
        Err(_) => {
            crate::metrics::http_connection_dropped("silent");
            return;
        }
    }
    let stall = state.app.config.http_stall_timeout;
    let service =
        service_fn(move |req| handle(Arc::clone(&state), listener, Arc::clone(&slot), req));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES);
    let io = stall::Stalls::new(TokioIo::new(stream), stall);
    tokio::select! {
        // A WebSocket (`/jobs/<id>/tty`) takes the connection over.
        served = builder.serve_connection(io, service).with_upgrades() => {
            if let Err(e) = served {
                tracing::debug!(error = %e, "HTTP connection ended");
            }
        }
        // Dropping the connection closes the socket.
        () = evicted.cancelled() => {}
    }
}

/// Serves one request; the response counts as in flight until its body is
/// dropped.
async fn handle(
    state: Arc<HttpState>,
    listener: Listener,
    slot: Arc<ConnSlot>,
    req: Request<Incoming>,
) -> Result<HttpReply, Infallible> {
    let authorized = match (listener, &state.settings) {
        (Listener::Main, Some(s)) => guard::authorized(s, req.headers()),
        _ => false,
    };
    let active = Active::new(&state, slot.serving(authorized));
    let mut reply = route(&state, listener, req).await;
    reply.body_mut().hold(active);
    Ok(reply)
}

/// The `<id>` of `/jobs/<id>/tty`.
fn tty_job(path: &str) -> Option<&str> {
    path.strip_prefix("/jobs/")?.strip_suffix("/tty")
}

/// The guard, then the endpoint. The metrics listener serves the probes
/// only, without a token; on the main one the probes pass `Host` and
/// `Origin` but need no token, everything else needs it.
async fn route(state: &Arc<HttpState>, listener: Listener, req: Request<Incoming>) -> HttpReply {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    if let Err(why) = guard::one_host(req.headers()) {
        return status(StatusCode::BAD_REQUEST, why);
    }
    // sandboxd's paths, on its own listener or on the main one when they
    // share an address (SPEC §21); the platform rule is its auth.
    if let Some(rest) = &state.sandboxd
        && (listener == Listener::Sandboxd
            || (listener == Listener::Main
                && state.sandboxd_shares_main
                && (path == "/v1" || path.starts_with("/v1/"))))
    {
        return sandboxd::rest::handle(rest, &state.app, state.shutdown.is_cancelled(), req).await;
    }
    let settings = match (listener, &state.settings) {
        (Listener::Sandboxd, _) => return status(StatusCode::NOT_FOUND, "not found"),
        (Listener::Main, Some(s)) => s,
        // The main listener runs only with its settings.
        (Listener::Main, None) => return status(StatusCode::NOT_FOUND, "not found"),
        (Listener::Metrics(bound), _) => {
            // The same rebinding check as the main listener's: a page that
            // rebinds its name to a loopback metrics port must not read it.
            if let Err(why) = guard::host_on(bound, req.headers()) {
                return status(StatusCode::FORBIDDEN, why);
            }
            return match (method, path.as_str()) {
                (Method::GET, "/metrics") => probes::metrics(state),
                (Method::GET, "/healthz") => probes::health(state),
                (Method::GET, "/livez") => probes::live(),
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
        (&Method::GET, "/healthz") => return probes::health(state),
        (&Method::GET, "/livez") => return probes::live(),
        _ => {}
    }
    if let Err(why) = guard::authorization(settings, req.headers()) {
        let mut r = status(StatusCode::UNAUTHORIZED, why);
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    match (method, path.as_str()) {
        (Method::GET, "/metrics") => probes::metrics(state),
        (Method::POST, "/mcp") => mcp::post(state, req).await,
        (Method::DELETE, "/mcp") => mcp::delete(state, &req),
        (Method::POST, "/exec") => exec::post(state, req).await,
        (_, p) if p.starts_with("/files/") || p == "/files" => files::handle(state, req).await,
        (Method::GET, p) if let Some(id) = tty_job(p) => {
            let id = id.to_owned();
            tty::get(state, req, &id)
        }
        (Method::GET, "/ports") => ports::list(state).await,
        (_, p) if let Some(target) = ports::proxy_path(p) => match target {
            Ok((port, tail)) => {
                let tail = tail.to_owned();
                ports::proxy(state, req, port, &tail).await
            }
            Err(()) => status(
                StatusCode::NOT_FOUND,
                "a port is 1 to 65535: /ports/<n>/<path>",
            ),
        },
        (_, "/mcp") => mcp::not_allowed(),
        _ => status(StatusCode::NOT_FOUND, "not found"),
    }
}
