//! The Streamable HTTP transport (docs/http.md), on hyper's HTTP/1.1 server.
//! This module binds its listeners through the floor ([`crate::net`]) and
//! routes each request; the rest is split by concern:
//!
//! - [`settings`]: the listener settings, validated at start-up (they fail
//!   closed: `main` exits 2 naming the bad one).
//! - the checks every request passes first — `Host` (DNS rebinding, one
//!   header), `Origin`, the bearer token — are the floor's one gate
//!   ([`crate::net::gate`]); which paths are probes is its table.
//! - [`state`]: what every handler shares: the HTTP sessions, the requests
//!   in flight.
//! - [`read`]: reading a bounded request body; responses are built with
//!   the floor's [`crate::net::reply`] and [`crate::net::body`].
//! - [`mcp`]: `POST`/`DELETE /mcp`, the MCP endpoint, both eras.
//! - [`routing`]: the 2026-07-28 routing headers checked against the body.
//! - [`probes`]: `/livez`, `/healthz`, `/metrics`.
//! - [`exec`]: `POST /exec`, a job streamed as server-sent events; unlike
//!   `/mcp`, a client that leaves cancels its job.
//! - [`files`]: `/files/<abs path>`: streamed file transfer and the file
//!   API.
//! - [`tty`]: `GET /jobs/<id>/tty`, a human attached to a job's terminal
//!   over a WebSocket.
//! - [`ports`]: `GET /ports`, and `/ports/<n>/…`, the preview proxy to a
//!   port listening in the container, WebSockets included.
//!
//! # Disconnects
//! When the client goes away, hyper drops the handler's future (JSON) or
//! the body (SSE); either drops the POST's `Inbox`, which closes the outbox,
//! and a call still waiting on it is *detached*: dropped where it waits,
//! before it claims anything (see
//! [`McpSession`](crate::server::session::McpSession)), so its job and
//! result stay in the table. Only `notifications/cancelled` and `DELETE` cancel.
//! A 2026-07-28 request is the exception its revision defines: the closed
//! stream IS its cancellation, so the call is cancelled, and a
//! blocking `execute` tears its job down.
//!
//! # Bounds
//! Bodies up to `MCP_EXEC_MAX_LINE_BYTES` (`413` past it, and the rest is
//! never read: the connection closes). Every connection bound — the cap and
//! who is evicted at it, the first-byte and head deadlines, the write-stall
//! bound, the peer rule without a token — is the floor's
//! ([`crate::net`]), the same on every listener; `/files` bounds a stalled
//! body frame by `MCP_EXEC_HTTP_STALL_TIMEOUT` too. Sessions idle for `MCP_EXEC_HTTP_SESSION_IDLE` with no
//! request in flight end (implicitly: nothing of theirs is in flight), and
//! past `MCP_EXEC_HTTP_MAX_SESSIONS` the least recently used idle one ends.

mod exec;
mod files;
mod mcp;
mod ports;
mod probes;
mod read;
mod routing;
pub mod settings;
mod state;
mod tty;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, StatusCode};
use tokio_util::sync::CancellationToken;

use crate::net::reply::{HttpReply, status};
use crate::net::{
    self,
    accept::{self, Peers, Protocol},
    gate,
    http::{InFlight, Mount},
};
use crate::server::app::App;
pub use settings::HttpSettings;
use state::{HttpState, SessionEntry, lock};

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
}

/// The running listeners.
pub struct Http {
    state: Arc<HttpState>,
}

/// Binds the main listener (when `settings` is set) and the metrics
/// listener (when `metrics` is) through the floor, and serves them until
/// the process exits; their requests count in `in_flight`. Their bound
/// addresses are printed on stderr (`mcp-exec: listening for HTTP on ADDR`,
/// `… for metrics on ADDR`): a port of 0 picks a free one.
///
/// `mount` is another front-end's route on the main listener's address
/// (sandboxd's `/v1/`), mounted by the code that assembles the listeners.
pub async fn start(
    settings: Option<HttpSettings>,
    metrics: Option<SocketAddr>,
    mount: Option<Mount>,
    app: Arc<App>,
    shutdown: &CancellationToken,
    in_flight: &InFlight,
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
    let main_peers = match (&settings, &mount) {
        (Some(s), _) if s.token.is_none() => Peers::SameUid,
        (_, Some(m)) if !m.checks_token => Peers::Mark,
        _ => Peers::Any,
    };
    let state = HttpState::new(app, settings, mount, shutdown, in_flight);
    let stall = state.app.config.http_stall_timeout;
    let share = state.app.config.connection_share;
    for (addr, metrics) in [(addr, false), (metrics, true)] {
        let Some(addr) = addr else { continue };
        let socket = accept::bind(addr, if metrics { "metrics" } else { "HTTP" }).await?;
        let bound = socket.local_addr()?;
        let (listener, name, peers) = if metrics {
            // It serves no job and no file: anyone may read the probes.
            (Listener::Metrics(bound), "metrics", Peers::Any)
        } else {
            (Listener::Main, "mcp", main_peers)
        };
        let floor = accept::Listener {
            name,
            protocol: Protocol::Http1,
            max_connections: max_connections.min(share),
            stall,
            peers,
            stop: None,
            in_flight: Some(in_flight.clone()),
        };
        let state = Arc::clone(&state);
        accept::serve(socket, floor, move |conn| {
            let (state, foreign) = (Arc::clone(&state), conn.foreign);
            let checked = Arc::clone(&state);
            net::http::http1(
                conn,
                move |req| authorized(&checked, listener, req),
                move |req| route_owned(Arc::clone(&state), listener, foreign, req),
            )
        });
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
        let sessions: Vec<Arc<SessionEntry>> =
            lock(&self.state.sessions).values().cloned().collect();
        let _ = tokio::time::timeout(within, async {
            self.state.stateless.settle(within).await;
            for entry in sessions {
                entry.session.settle(within).await;
            }
        })
        .await;
    }

    /// Waits up to `within` until no response is being written on the
    /// listeners that count in its [`InFlight`].
    pub async fn drained(&self, within: Duration) {
        self.state.in_flight.drained(within).await;
        tokio::time::sleep(FLUSH_SLACK).await;
    }
}

/// [`route`] of an owned state (the floor's handler).
async fn route_owned(
    state: Arc<HttpState>,
    listener: Listener,
    foreign: Option<u32>,
    req: Request<Incoming>,
) -> HttpReply {
    route(&state, listener, foreign, req).await
}

/// Whether a request carries the main listener's token (always, when none
/// is set); on the other listeners none does.
fn authorized(state: &HttpState, listener: Listener, req: &Request<Incoming>) -> bool {
    match (listener, &state.gate) {
        (Listener::Main, Some(gate)) => gate.authorized(req.headers()),
        _ => false,
    }
}

/// The `<id>` of `/jobs/<id>/tty`.
fn tty_job(path: &str) -> Option<&str> {
    path.strip_prefix("/jobs/")?.strip_suffix("/tty")
}

/// The guard, then the endpoint. The metrics listener serves the probes
/// only, without a token; on the main one the probes pass `Host` and
/// `Origin` but need no token, everything else needs it.
async fn route(
    state: &Arc<HttpState>,
    listener: Listener,
    foreign: Option<u32>,
    req: Request<Incoming>,
) -> HttpReply {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    if let Err(why) = gate::one_host(req.headers()) {
        return status(StatusCode::BAD_REQUEST, why);
    }
    // Another front-end's route on this address (sandboxd's `/v1/`): it
    // passes its own gate.
    if listener == Listener::Main
        && let Some(mount) = state.mount.as_ref().filter(|m| m.covers(&path))
    {
        return mount.serve(req, foreign).await;
    }
    let (name, gate) = match (listener, &state.gate) {
        (Listener::Main, Some(gate)) => ("mcp", gate.clone()),
        // The main listener runs only with its settings.
        (Listener::Main, None) => return status(StatusCode::NOT_FOUND, "not found"),
        // The metrics listener checks no token: it serves its probes only.
        (Listener::Metrics(bound), _) => ("metrics", state.metrics_gate.on(bound)),
    };
    if let Err(refused) = gate.probe(req.uri(), req.headers()) {
        return status(refused.status(), refused.message());
    }
    if gate::is_probe(name, method.as_str(), path.as_str()) {
        return match path.as_str() {
            "/metrics" => probes::metrics(state),
            "/healthz" => probes::health(state),
            _ => probes::live(),
        };
    }
    if name == "metrics" {
        return status(StatusCode::NOT_FOUND, "not found");
    }
    if let Err(why) = gate.token(req.headers()) {
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
