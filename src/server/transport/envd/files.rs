//! `GET`/`POST /files?path=…` on the envd listener: the SDK's file read
//! (raw bytes) and write (multipart, or `application/octet-stream`).
//!
//! Not served yet: every request answers `501` with envd's error shape
//! `{"code", "message"}` (the `envdfs` branch replaces this module). The
//! extension point is [`handle`]: it gets the whole request, whatever its
//! method, after the auth rule.

use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use serde_json::json;

use super::EnvdState;
use super::connect::{JSON, Reply, typed};
use crate::server::transport::http::body::Body;

/// Serves `/files`.
pub(super) async fn handle(_state: &Arc<EnvdState>, _req: Request<Incoming>) -> Reply {
    let body = json!({"code": 501, "message": "/files is not served yet"});
    typed(
        StatusCode::NOT_IMPLEMENTED,
        JSON,
        Body::full(body.to_string()),
    )
}
