//! Reading a request: what its `Accept` allows ([`Accepts`]), and its body,
//! bounded in size (`MCP_EXEC_MAX_LINE_BYTES`) and in time
//! ([`crate::net::request::body_deadline`]); a body past either bound is a refusal, and the
//! rest of it is never read.

use bytes::Bytes;

use hyper::body::Incoming;
use hyper::header;
use hyper::{Request, StatusCode};

use super::state::HttpState;
use crate::net::reply::{HttpReply, closing, status};
use crate::net::request::{BodyError, body_deadline, read_whole};

/// What the client's `Accept` allows.
pub(super) struct Accepts {
    /// `application/json` (or `*/*`, or no `Accept` at all).
    pub(super) json: bool,
    /// `text/event-stream`.
    pub(super) sse: bool,
}

impl Accepts {
    /// From the `Accept` headers; none at all allows JSON.
    pub(super) fn of(headers: &hyper::HeaderMap) -> Accepts {
        let accept = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(",")
            .to_ascii_lowercase();
        let accepts = |what: &str| accept.split(',').any(|a| a.trim().starts_with(what));
        Accepts {
            json: accept.is_empty() || accepts("application/json") || accepts("*/*"),
            sse: accepts("text/event-stream"),
        }
    }
}

/// Reads a `/mcp` or `/exec` body of at most `MCP_EXEC_MAX_LINE_BYTES`;
/// `Err` is the reply (`413` past the bound, without reading the rest).
pub(super) async fn read_body(
    state: &HttpState,
    req: Request<Incoming>,
) -> Result<(hyper::http::request::Parts, Bytes), HttpReply> {
    let max = state.app.config.max_line_bytes;
    let too_big = || {
        closing(status(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("the body exceeds MCP_EXEC_MAX_LINE_BYTES ({max})"),
        ))
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_big());
    }
    let (parts, incoming) = req.into_parts();
    let bytes = match read_whole(incoming, max).await {
        Ok(bytes) => bytes,
        Err(BodyError::TooLarge) => return Err(too_big()),
        Err(BodyError::Late) => {
            return Err(closing(status(
                StatusCode::REQUEST_TIMEOUT,
                &format!(
                    "the body did not arrive within {} s (MCP_EXEC_HTTP_STALL_TIMEOUT)",
                    body_deadline().as_secs()
                ),
            )));
        }
        Err(BodyError::Read(e)) => {
            return Err(status(
                StatusCode::BAD_REQUEST,
                &format!("reading the body: {e}"),
            ));
        }
    };
    Ok((parts, bytes))
}
