//! Building responses: the one place that names a content type for a
//! JSON or SSE answer, and the `{"error": …}` shape of every refusal.

use bytes::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use tokio::sync::mpsc;

use super::body::Body;

/// A response of an HTTP listener.
pub type HttpReply = Response<Body>;

/// `code` with `body` of type `content_type`.
pub fn typed(code: StatusCode, content_type: &'static str, body: Body) -> HttpReply {
    let mut r = Response::new(body);
    *r.status_mut() = code;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// `code` with a JSON body (already encoded, with its newline).
pub fn json(code: StatusCode, body: impl Into<Bytes>) -> HttpReply {
    typed(code, "application/json", Body::full(body))
}

/// `code` with `{"error": message}`.
pub fn status(code: StatusCode, message: &str) -> HttpReply {
    json(code, format!("{}\n", serde_json::json!({"error": message})))
}

/// `code` without a body (`202`, `204`).
pub fn empty(code: StatusCode) -> HttpReply {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = code;
    r
}

/// `200` `text/event-stream` of the events sent to `rx`, not to be cached.
pub fn sse(rx: mpsc::Receiver<Bytes>) -> HttpReply {
    let mut r = typed(StatusCode::OK, "text/event-stream", Body::stream(rx));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Reverse proxies (nginx) would otherwise buffer the events (2026-07-28
    // Streamable HTTP: SHOULD).
    r.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// `reply` with `Connection: close`: the rest of the request is never read,
/// so the connection cannot be reused.
pub fn closing(mut reply: HttpReply) -> HttpReply {
    reply
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    reply
}
