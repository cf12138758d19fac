//! Server-sent events: the one framer of an event of a `text/event-stream`
//! answer ([`super::reply::sse`] names the content type), for `POST
//! /exec`, `/files?watch` and `/mcp`.
//!
//! An event is `event: NAME\ndata: DATA\n\n`, one `data:` line: every
//! payload is one line of compact JSON (JSON escapes its line breaks), so
//! no event is ever split across `data:` lines.

use bytes::Bytes;
use serde::Serialize;

/// `event: NAME\ndata: DATA\n\n`; `data` is one line (no CR or LF).
pub fn event(name: &str, data: &[u8]) -> Bytes {
    debug_assert!(!data.iter().any(|b| matches!(b, b'\r' | b'\n')));
    let mut out = Vec::with_capacity(name.len() + data.len() + 16);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// [`event`] with `body` as compact JSON (`{}` if it cannot be encoded).
pub fn json(name: &str, body: &impl Serialize) -> Bytes {
    let data = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
    event(name, &data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_its_name_one_data_line_and_a_blank_line() {
        assert_eq!(
            &json("exit", &serde_json::json!({"a": "x\ny", "b": 1}))[..],
            b"event: exit\ndata: {\"a\":\"x\\ny\",\"b\":1}\n\n"
        );
        assert_eq!(
            &event("message", b"{}")[..],
            b"event: message\ndata: {}\n\n"
        );
    }
}
