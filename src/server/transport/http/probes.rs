//! The operations endpoints: `/livez` (the process answers),
//! `/healthz` (whether it takes jobs: `503` while shutting down or while
//! the breaker is open) and `/metrics` (OpenMetrics text).
//!
//! They read the job service's counts and nothing of any session's; on the
//! metrics listener they need no token.

use hyper::StatusCode;
use serde_json::json;

use super::state::{HttpState, lock};
use crate::net::body::Body;
use crate::net::reply::{HttpReply, json, typed};

/// `GET /livez`: always `200 {"status":"ok"}`.
pub(super) fn live() -> HttpReply {
    json(StatusCode::OK, "{\"status\":\"ok\"}\n")
}

/// `GET /healthz`: status, version, uptime and job counts.
pub(super) fn health(state: &HttpState) -> HttpReply {
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
    json(code, format!("{body}\n"))
}

/// `GET /metrics`: the OpenMetrics exposition.
pub(super) fn metrics(state: &HttpState) -> HttpReply {
    let (running, queued) = state.app.jobs.counts();
    let text = crate::metrics::render(&crate::metrics::Snapshot {
        running,
        queued,
        awaiting_input: state.app.jobs.awaiting_input(),
        capacity: state.app.config.max_running,
        http_sessions: lock(&state.sessions).len(),
        breaker_open: state.app.jobs.breaker_open(),
        orphans_reaped: state.app.jobs.orphans_reaped(),
    });
    typed(
        StatusCode::OK,
        "application/openmetrics-text; version=1.0.0; charset=utf-8",
        Body::full(text),
    )
}
