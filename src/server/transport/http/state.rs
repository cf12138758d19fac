//! What every request handler shares: the app, the listener settings, the
//! table of HTTP sessions and the count of requests in flight.
//!
//! An HTTP session ([`SessionEntry`], named by `Mcp-Session-Id`) carries one
//! [`McpSession`] and the bookkeeping of its use: it is never expired while
//! a request of it is in flight ([`Busy`]). A request counts as in flight
//! (the floor's [`InFlight`]) until hyper has dropped its response body, so
//! shutdown can wait for every response to be written.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::StatusCode;
use tokio_util::sync::CancellationToken;

use super::HttpSettings;
use super::settings::Origins;
use crate::net::gate::Gate;
use crate::net::http::{InFlight, Mount};
use crate::server::app::App;
use crate::server::session::McpSession;

/// The entry of one `Mcp-Session-Id`: the MCP session it carries and its use
/// (for expiry). "Session" is always the MCP session; this is its HTTP handle.
pub(super) struct SessionEntry {
    pub(super) session: Arc<McpSession>,
    /// Requests of this session in flight (not expired while any is).
    busy: AtomicUsize,
    last_used: Mutex<Instant>,
}

impl SessionEntry {
    /// A new entry carrying `session`, used now.
    pub(super) fn new(session: Arc<McpSession>) -> Arc<SessionEntry> {
        Arc::new(SessionEntry {
            session,
            busy: AtomicUsize::new(0),
            last_used: Mutex::new(Instant::now()),
        })
    }
}

/// What every request handler shares.
pub(super) struct HttpState {
    pub(super) app: Arc<App>,
    /// The main listener's settings; `None` when only metrics listen.
    pub(super) settings: Option<HttpSettings>,
    pub(super) shutdown: CancellationToken,
    pub(super) sessions: Mutex<HashMap<String, Arc<SessionEntry>>>,
    /// The MCP session that serves every 2026-07-28 request (stateless: it
    /// holds only their calls in flight, never a revision or a client).
    pub(super) stateless: Arc<McpSession>,
    pub(super) started: Instant,
    /// Requests in flight, whose responses are not fully handed to hyper
    /// (the floor counts them).
    pub(super) in_flight: InFlight,
    /// Another front-end's route on the main listener (sandboxd's `/v1/`).
    pub(super) mount: Option<Mount>,
    /// The main listener's gate (`None` when only metrics listen).
    pub(super) gate: Option<Gate>,
    /// The metrics listener's gate: no token; `on` its bound address.
    pub(super) metrics_gate: Gate,
}

impl HttpState {
    /// The state of listeners serving `app` until `shutdown`.
    pub(super) fn new(
        app: Arc<App>,
        settings: Option<HttpSettings>,
        mount: Option<Mount>,
        shutdown: &CancellationToken,
        in_flight: &InFlight,
    ) -> Arc<HttpState> {
        let origins = settings.as_ref().map_or_else(
            || super::settings::origins(&app.config).unwrap_or(Origins::Default),
            |s| s.origins.clone(),
        );
        let metrics_gate = Gate::new(
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            None,
            Arc::new(origins),
            None,
        );
        Arc::new(HttpState {
            gate: settings.as_ref().map(|s| s.gate(s.addr)),
            metrics_gate,
            stateless: McpSession::new(Arc::clone(&app), shutdown, "http"),
            app,
            settings,
            shutdown: shutdown.clone(),
            sessions: Mutex::default(),
            started: Instant::now(),
            in_flight: in_flight.clone(),
            mount,
        })
    }

    /// The session a request names: `Err` is the reply (`400` missing,
    /// `404` unknown or ended).
    pub(super) fn session_of(
        &self,
        headers: &hyper::HeaderMap,
    ) -> Result<Arc<SessionEntry>, (StatusCode, &'static str)> {
        let Some(id) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) else {
            return Err((
                StatusCode::BAD_REQUEST,
                "Mcp-Session-Id is required after initialize",
            ));
        };
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or((StatusCode::NOT_FOUND, "unknown or ended session"))
    }
}

impl HttpState {
    /// Enters a new session under `id`. At `MCP_EXEC_HTTP_MAX_SESSIONS`
    /// the least recently used session with no request in flight ends to
    /// make room (its client gets `404` next and initializes again, as for
    /// an expired one); `false` when every session is busy (then the caller
    /// refuses the new one).
    pub(super) fn admit_session(&self, id: String, entry: Arc<SessionEntry>) -> bool {
        let max = self.app.config.http_max_sessions.max(1);
        let mut sessions = lock(&self.sessions);
        if sessions.len() >= max {
            let oldest = sessions
                .iter()
                .filter(|(_, e)| e.busy.load(Ordering::Acquire) == 0)
                .min_by_key(|(_, e)| *lock(&e.last_used))
                .map(|(id, _)| id.clone());
            let Some(oldest) = oldest else {
                return false;
            };
            let ended = sessions.remove(&oldest);
            sessions.insert(id, entry);
            drop(sessions);
            if let Some(old) = ended {
                tracing::info!(
                    session = %oldest,
                    "HTTP session ended for a new one (MCP_EXEC_HTTP_MAX_SESSIONS)"
                );
                old.session.end();
            }
            return true;
        }
        sessions.insert(id, entry);
        true
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Ends sessions idle for `idle` with no request in flight.
pub(super) async fn expire_idle(state: Arc<HttpState>, idle: Duration) {
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

/// Marks a session used until dropped.
pub(super) struct Busy(Arc<SessionEntry>);

impl Busy {
    pub(super) fn new(entry: &Arc<SessionEntry>) -> Busy {
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

/// 128 random bits from the kernel, as 32 hex digits; `None` if the kernel
/// has none to give (then there must be no session).
pub(super) fn new_session_id() -> Option<String> {
    crate::random::bits_128().map(|bits| format!("{:032x}", bits))
}
