//! The HTTP face of [`crate::files::transfer`], shared by every listener
//! that moves files (`/files`, sandboxd's `/v1/files`, envd's `/files`):
//! a hyper request body as [`Frames`], and an opened file as a streamed
//! reply with one `Range` (`206`, `416`). Like [`crate::net::reply`] and
//! [`crate::net::body`], it is plumbing every HTTP listener shares, not the
//! `/files` front-end; it names no route.

use std::ops::RangeInclusive;
use std::path::Path;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use serde::Serialize;
use tokio::sync::mpsc;

use crate::files::read;
use crate::files::transfer::{self, DEPTH, Frames};
use crate::net::body::Body;
use crate::net::reply::{self, HttpReply, status};

/// A request body, frame by frame (trailers skipped).
impl Frames for Incoming {
    async fn next(&mut self) -> Option<Result<Bytes, String>> {
        loop {
            match self.frame().await? {
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        return Some(Ok(data));
                    }
                }
                Err(e) => return Some(Err(format!("reading the body: {e}"))),
            }
        }
    }
}

/// `code` with `value` as JSON (and its newline).
pub(super) fn json_reply(code: StatusCode, value: &impl Serialize) -> HttpReply {
    let mut body = serde_json::to_vec(value).unwrap_or_default();
    body.push(b'\n');
    reply::json(code, body)
}

/// The one range of a `Range` header against a file of `size` bytes:
/// `Ok(None)` = the whole file (no header, or one this server does not
/// serve partially, like several ranges), `Err(())` = unsatisfiable.
pub fn parse_range(header: Option<&str>, size: u64) -> Result<Option<RangeInclusive<u64>>, ()> {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((first, last)) = spec.split_once('-') else {
        return Ok(None);
    };
    let (first, last) = (first.trim(), last.trim());
    let range = if first.is_empty() {
        // The last `n` bytes.
        let n: u64 = last.parse().map_err(|_| ())?;
        if n == 0 || size == 0 {
            return Err(());
        }
        size.saturating_sub(n)..=size - 1
    } else {
        let start: u64 = first.parse().map_err(|_| ())?;
        let end = if last.is_empty() {
            size.saturating_sub(1)
        } else {
            let end: u64 = last.parse().map_err(|_| ())?;
            if end < start {
                return Err(());
            }
            end.min(size.saturating_sub(1))
        };
        if start >= size {
            return Err(());
        }
        start..=end
    };
    Ok(Some(range))
}

/// The reply of a `GET` (or `HEAD`) of the opened file at `path`: all of it
/// (`200`), the one range of `range` (`206` with `Content-Range`), or `416`
/// past its end; the bytes streamed by [`transfer::send()`].
pub(super) fn send_file(
    opened: read::Opened,
    path: &Path,
    range: Option<&str>,
    head: bool,
) -> HttpReply {
    let size = opened.size;
    let (code, start, len) = match parse_range(range, size) {
        Ok(None) => (StatusCode::OK, 0, size),
        Ok(Some(r)) => (
            StatusCode::PARTIAL_CONTENT,
            *r.start(),
            r.end() - r.start() + 1,
        ),
        Err(()) => {
            let mut r = status(
                StatusCode::RANGE_NOT_SATISFIABLE,
                &format!(
                    "range {:?} is outside {path:?} ({size} bytes)",
                    range.unwrap_or("")
                ),
            );
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return r;
        }
    };
    let mut reply = if head || len == 0 {
        Response::new(Body::empty())
    } else {
        let (tx, rx) = mpsc::channel::<Bytes>(DEPTH);
        tokio::spawn(transfer::send(opened, start, len, tx));
        Response::new(Body::stream_sized(rx, len))
    };
    *reply.status_mut() = code;
    let h = reply.headers_mut();
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if code == StatusCode::PARTIAL_CONTENT
        && let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{}/{size}", start + len - 1))
    {
        h.insert(header::CONTENT_RANGE, v);
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_range_is_served_and_past_the_end_is_unsatisfiable() {
        assert_eq!(parse_range(None, 10), Ok(None));
        assert_eq!(parse_range(Some("bytes=0-3"), 10), Ok(Some(0..=3)));
        assert_eq!(parse_range(Some("bytes=4-"), 10), Ok(Some(4..=9)));
        assert_eq!(parse_range(Some("bytes=-3"), 10), Ok(Some(7..=9)));
        assert_eq!(parse_range(Some("bytes=5-100"), 10), Ok(Some(5..=9)));
        assert_eq!(parse_range(Some("bytes=-100"), 10), Ok(Some(0..=9)));
        assert_eq!(parse_range(Some("bytes=10-"), 10), Err(()));
        assert_eq!(parse_range(Some("bytes=5-2"), 10), Err(()));
        assert_eq!(parse_range(Some("bytes=0-"), 0), Err(()));
        // Several ranges: the whole file.
        assert_eq!(parse_range(Some("bytes=0-1,3-4"), 10), Ok(None));
        assert_eq!(parse_range(Some("items=0-1"), 10), Ok(None));
    }
}
