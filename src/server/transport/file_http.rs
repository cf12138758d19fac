//! The HTTP face of [`crate::files::transfer`], shared by every listener
//! that moves files (`/files`, sandboxd's `/v1/files`, envd's `/files`):
//! a hyper request body as [`Frames`], the parts of a `multipart/form-data`
//! body as [`Frames`] each ([`FormParts`], [`FilePart`], over the floor's
//! one parser, [`crate::net::multipart`]), and an opened file as a streamed
//! reply with one `Range` (`206`, `416`). Like [`crate::net::reply`] and
//! [`crate::net::body`], it is plumbing every HTTP listener shares, not the
//! `/files` front-end; it names no route.

use std::collections::VecDeque;
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
use crate::net::multipart::{Event, Multipart};
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

/// A `multipart/form-data` body's [`Event`]s, pulled: its frames through
/// the one parser.
pub struct FormParts<F> {
    body: F,
    parser: Multipart,
    queue: VecDeque<Event>,
    end: bool,
}

impl<F: Frames> FormParts<F> {
    /// The parts of `body`, delimited by `boundary`.
    pub fn new(body: F, boundary: &str) -> FormParts<F> {
        FormParts {
            body,
            parser: Multipart::new(boundary),
            queue: VecDeque::new(),
            end: false,
        }
    }

    /// The next event; `None` at the end of the body; `Err` when it is
    /// broken or malformed.
    pub async fn next(&mut self) -> Option<Result<Event, String>> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(Ok(e));
            }
            if self.end {
                return None;
            }
            match self.body.next().await {
                None => self.end = true,
                Some(Ok(data)) => match self.parser.feed(&data) {
                    Ok(events) => self.queue.extend(events),
                    Err(why) => return Some(Err(why)),
                },
                Some(Err(why)) => return Some(Err(why)),
            }
        }
    }

    /// Whether the closing delimiter was seen.
    pub fn finished(&self) -> bool {
        self.parser.finished()
    }

    /// Reads the rest of the body and drops it, unparsed.
    async fn drop_rest(&mut self) -> Result<(), String> {
        self.queue.clear();
        while !self.end {
            match self.body.next().await {
                None => self.end = true,
                Some(Ok(_)) => {}
                Some(Err(why)) => return Err(why),
            }
        }
        Ok(())
    }
}

/// The body of the part [`FormParts::next`] just began, as
/// [`transfer::receive()`] reads a body: its data, then `None` at its end —
/// so that each part goes through the one `PUT` pipeline.
pub struct Part<'a, F>(pub &'a mut FormParts<F>);

impl<F: Frames> Frames for Part<'_, F> {
    async fn next(&mut self) -> Option<Result<Bytes, String>> {
        match self.0.next().await {
            Some(Ok(Event::Data(d))) => Some(Ok(d)),
            Some(Ok(Event::PartEnd)) => None,
            Some(Ok(Event::Part { .. })) => Some(Err("a part began inside another".into())),
            Some(Err(why)) => Some(Err(why)),
            None => Some(Err("the multipart body ended inside a part".into())),
        }
    }
}

/// Where a [`FilePart`] is.
enum FileAt {
    /// Before the part named `file`: other parts are skipped.
    Before,
    /// In it: its bytes are handed on.
    In,
    /// After it: the rest of the body is read and dropped.
    After,
}

/// The first part named `file` of a form, as [`Frames`] (sandboxd's
/// `PUT /v1/files/{path}`): whatever precedes it is skipped, whatever
/// follows it is read and dropped unparsed.
pub struct FilePart<F> {
    parts: FormParts<F>,
    at: FileAt,
}

impl<F: Frames> FilePart<F> {
    /// The file part of `body`, delimited by `boundary`.
    pub fn new(body: F, boundary: &str) -> FilePart<F> {
        FilePart {
            parts: FormParts::new(body, boundary),
            at: FileAt::Before,
        }
    }
}

/// The body ended, or the form did, before its file part was read.
fn no_file_part(parts: &FormParts<impl Frames>) -> String {
    if parts.finished() {
        "the multipart body has no part named \"file\"".to_owned()
    } else {
        "the multipart body ended before its part named \"file\" did".to_owned()
    }
}

impl<F: Frames> Frames for FilePart<F> {
    async fn next(&mut self) -> Option<Result<Bytes, String>> {
        loop {
            match self.at {
                FileAt::Before => match self.parts.next().await {
                    Some(Ok(Event::Part { name, .. })) if name == "file" => self.at = FileAt::In,
                    Some(Ok(_)) => {}
                    Some(Err(why)) => return Some(Err(why)),
                    None => return Some(Err(no_file_part(&self.parts))),
                },
                FileAt::In => match self.parts.next().await {
                    Some(Ok(Event::Data(d))) => return Some(Ok(d)),
                    Some(Ok(Event::PartEnd)) => self.at = FileAt::After,
                    Some(Ok(Event::Part { .. })) => {
                        return Some(Err("a part began inside another".into()));
                    }
                    Some(Err(why)) => return Some(Err(why)),
                    None => return Some(Err(no_file_part(&self.parts))),
                },
                FileAt::After => return self.parts.drop_rest().await.err().map(Err),
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

    /// A body delivered in frames of `size` bytes.
    struct Chunks(Vec<Bytes>);

    impl Frames for Chunks {
        async fn next(&mut self) -> Option<Result<Bytes, String>> {
            (!self.0.is_empty()).then(|| Ok(self.0.remove(0)))
        }
    }

    fn chunks(body: &[u8], size: usize) -> Chunks {
        Chunks(body.chunks(size).map(Bytes::copy_from_slice).collect())
    }

    async fn file_of(body: &[u8], size: usize) -> Result<Vec<u8>, String> {
        let mut part = FilePart::new(chunks(body, size), "XyZ");
        let mut out = Vec::new();
        while let Some(data) = part.next().await {
            out.extend_from_slice(&data?);
        }
        Ok(out)
    }

    fn form(parts: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = Vec::new();
        for (name, data) in parts {
            b.extend_from_slice(
                format!(
                    "--XyZ\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"f\"\r\n\
                     Content-Type: application/octet-stream\r\n\r\n"
                )
                .as_bytes(),
            );
            b.extend_from_slice(data);
            b.extend_from_slice(b"\r\n");
        }
        b.extend_from_slice(b"--XyZ--\r\n");
        b
    }

    #[tokio::test]
    async fn the_file_part_comes_out_whole_whatever_the_framing() {
        // Bytes that look like a delimiter's start, CRLFs inside the data.
        let data: Vec<u8> = b"line\r\n--Xy not it\r\n-\r\n--XyY"
            .iter()
            .copied()
            .chain((0..3000u32).map(|i| (i % 251) as u8))
            .collect();
        let body = form(&[("other", b"skip me"), ("file", &data), ("after", b"x")]);
        for size in [1, 2, 3, 7, 64, 1000, body.len()] {
            assert_eq!(
                file_of(&body, size).await.unwrap(),
                data,
                "frames of {size}"
            );
        }
    }

    #[tokio::test]
    async fn an_empty_file_part_is_an_empty_file() {
        let body = form(&[("file", b"")]);
        for size in [1, 5, body.len()] {
            assert_eq!(file_of(&body, size).await.unwrap(), b"", "frames of {size}");
        }
    }

    #[tokio::test]
    async fn a_form_without_a_file_part_or_cut_short_is_refused() {
        let e = file_of(&form(&[("other", b"x")]), 4).await.unwrap_err();
        assert!(e.contains("no part named \"file\""), "{e}");
        let mut cut = form(&[("file", b"abcdef")]);
        cut.truncate(cut.len() - 15);
        let e = file_of(&cut, 4).await.unwrap_err();
        assert!(e.contains("ended before"), "{e}");
    }
}
