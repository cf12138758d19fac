//! envd's REST `/files` (notes/platform-protocols.md §2.3), as the `e2b`
//! SDK calls it — a mapping onto the one transfer pipeline,
//! [`crate::files::transfer`] (the atomic commit of
//! [`crate::files::commit`], streamed both ways, memory flat), as our own
//! `/files/<path>` is:
//!
//! | request | answer |
//! |---|---|
//! | `GET /files?path=<p>[&username=<u>]` (`Range: bytes=a-b`, one range) | the bytes (`200`, `206`); `404 {"code":404,"message":…}` |
//! | `POST /files?path=<p>` `multipart/form-data`, parts named `file` (filename = the path when `path` is absent: `write_files`) | `200 [{"name","type":"file","path"}, …]`, one per part |
//! | `POST /files?path=<p>` `application/octet-stream` (streamed) | the same array, one entry |
//!
//! Errors are `{"code": <status>, "message": "…"}` (envd's shape): `400`
//! malformed, `403` outside the cwd policy (§12.5), `404` missing, `409`
//! not a regular file, `415` a `Content-Encoding` other than identity,
//! `507` no space.
//!
//! # Differences from envd, on purpose
//! - `Content-Encoding: gzip` uploads (the SDK's `gzip=True`) are refused
//!   with `415` and a text that says to upload uncompressed; downloads are
//!   always sent uncompressed (the SDK accepts either).
//! - Files are written atomically (a temporary file renamed into place), so
//!   a reader never sees half a file; a replaced file keeps its owner and
//!   mode, a new one is 0644 and, as root, owned by its directory's owner
//!   (envd chowns to the request's user).
//! - `X-Metadata-*` headers are accepted and not stored.
//! - Relative paths resolve against the home of `username`, else the
//!   server's `$HOME`, else `/` ([`super::filesystem::absolute`]).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, StatusCode};

use super::super::file_http::send_file;
use super::connect::Reply;
use super::filesystem::{Names, absolute, home};
use crate::files::commit::{Options, Staged};
use crate::files::place::Place;
use crate::files::transfer::{Frames, Received, blocking, receive};
use crate::files::{FileError, Kind, path, read, tree};
use crate::net::body::Body;
use crate::net::query::{Plus, Query};
use crate::server::app::App;

/// The most `file` parts one multipart request may carry.
pub const MAX_PARTS: usize = 1000;
/// The most bytes a part's headers may take.
const MAX_PART_HEADERS: usize = 16 << 10;

/// `{"code": <status>, "message": …}` with that status.
pub fn error(code: StatusCode, message: &str) -> Reply {
    let body = serde_json::json!({"code": code.as_u16(), "message": message}).to_string();
    let mut r = hyper::Response::new(Body::full(body));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn file_error(e: &FileError) -> Reply {
    error(
        StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.message,
    )
}

/// A query value: `+` is a space, then percent-decoded (form encoding,
/// as Go's `URL.Query()` reads it); lossy UTF-8.
fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    Query::parse(query, Plus::Space).text(key)
}

/// The path a request names, absolute.
fn target(text: &str, user: Option<&str>) -> Result<PathBuf, FileError> {
    let names = Names::load();
    absolute(text, &home(&names, user)).map_err(|e| FileError::new(Kind::Invalid, e.message))
}

/// Routes `/files` (the listener has checked auth).
pub(super) async fn handle(state: &Arc<super::EnvdState>, req: Request<Incoming>) -> Reply {
    let app = &state.app;
    let query = req.uri().query().map(str::to_owned);
    let path = query_value(query.as_deref(), "path");
    let user = query_value(query.as_deref(), "username").filter(|u| !u.is_empty());
    match *req.method() {
        Method::GET => match path {
            Some(p) if !p.is_empty() => get(app, req, &p, user).await,
            _ => error(StatusCode::BAD_REQUEST, "GET /files needs ?path=<file>"),
        },
        Method::POST => post(app, req, path.filter(|p| !p.is_empty()), user).await,
        _ => {
            let mut r = error(StatusCode::METHOD_NOT_ALLOWED, "/files takes GET and POST");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST"));
            r
        }
    }
}

async fn get(app: &Arc<App>, req: Request<Incoming>, text: &str, user: Option<String>) -> Reply {
    let range = req
        .headers()
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let app = Arc::clone(app);
    let text = text.to_owned();
    let opened = blocking(move || {
        let target = target(&text, user.as_deref())?;
        let place = Place::resolve(&app.cwd, &target, false)?;
        match read::lstat(&place)? {
            None => Err(FileError::new(
                Kind::NotFound,
                format!("path not found: {}", target.display()),
            )),
            Some(st) if tree::is_dir(&st) => Err(FileError::new(
                Kind::Invalid,
                format!("path is a directory: {}", target.display()),
            )),
            Some(_) => read::open(&place).map(|o| (o, target)),
        }
    })
    .await;
    match opened {
        Ok((opened, target)) => {
            let mut r = send_file(opened, &target, range.as_deref(), false);
            if !r.status().is_success() {
                // 416: envd's error shape.
                let code = r.status();
                r = error(
                    code,
                    &format!("range not satisfiable for {}", target.display()),
                );
            }
            r
        }
        Err(e) => file_error(&e),
    }
}

/// One written file, as the SDK's `WriteInfo.from_dict` reads it.
#[derive(Debug, serde::Serialize)]
struct WriteInfo {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    path: String,
}

fn written(path: &std::path::Path) -> WriteInfo {
    WriteInfo {
        name: path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        kind: "file",
        path: path.display().to_string(),
    }
}

fn stalled(stall: std::time::Duration) -> Reply {
    closing(error(
        StatusCode::REQUEST_TIMEOUT,
        &format!(
            "the body stalled for {} s (MCP_EXEC_HTTP_STALL_TIMEOUT); the file being written was not committed",
            stall.as_secs_f64()
        ),
    ))
}

fn closing(mut r: Reply) -> Reply {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

fn options() -> Options {
    Options {
        mode: None,
        overwrite: true,
    }
}

/// Stages the file at `target` (missing parents made, as envd does).
fn staged(
    app: &Arc<App>,
    target: PathBuf,
) -> impl FnOnce() -> Result<Staged, FileError> + Send + 'static {
    let app = Arc::clone(app);
    move || Staged::create(Place::resolve(&app.cwd, &target, true)?)
}

/// What one received file answers: its `WriteInfo`, or the whole reply.
fn outcome(got: Received, stall: std::time::Duration) -> Result<WriteInfo, Box<Reply>> {
    if got.stalled {
        return Err(Box::new(stalled(stall)));
    }
    match got.outcome {
        Ok(c) => Ok(written(std::path::Path::new(&c.path))),
        Err(e) if got.complete => Err(Box::new(file_error(&e))),
        // The rest of the body was never read.
        Err(e) => Err(Box::new(closing(file_error(&e)))),
    }
}

async fn post(
    app: &Arc<App>,
    req: Request<Incoming>,
    path: Option<String>,
    user: Option<String>,
) -> Reply {
    let headers = req.headers();
    if let Some(enc) = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .filter(|e| !e.trim().eq_ignore_ascii_case("identity"))
    {
        return closing(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &format!(
                "Content-Encoding {enc:?} is not supported by this envd (mcp-exec): upload uncompressed (files.write without gzip=True)"
            ),
        ));
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let stall = app.config.http_stall_timeout;
    let mut body = req.into_body();
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if media == "multipart/form-data" {
        let Some(boundary) = boundary_of(&content_type) else {
            return closing(error(
                StatusCode::BAD_REQUEST,
                "multipart/form-data without a boundary",
            ));
        };
        return multipart(app, &mut body, stall, &boundary, path, user).await;
    }
    if media != "application/octet-stream" {
        return closing(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &format!(
                "POST /files takes multipart/form-data or application/octet-stream, not {content_type:?}"
            ),
        ));
    }
    let Some(text) = path else {
        return closing(error(
            StatusCode::BAD_REQUEST,
            "an application/octet-stream upload needs ?path=<file>",
        ));
    };
    let target = match target(&text, user.as_deref()) {
        Ok(t) => t,
        Err(e) => return closing(file_error(&e)),
    };
    let got = receive(&mut body, stall, staged(app, target), None, options()).await;
    match outcome(got, stall) {
        Ok(w) => answer(&[w]),
        Err(reply) => *reply,
    }
}

fn answer(files: &[WriteInfo]) -> Reply {
    let body = serde_json::to_vec(files).unwrap_or_default();
    let mut r = hyper::Response::new(Body::full(body));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The `boundary` parameter of a multipart content type.
fn boundary_of(content_type: &str) -> Option<String> {
    content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_owned())
            .filter(|b| !b.is_empty() && b.len() <= 200)
    })
}

/// A multipart body's events: its frames through the [`Multipart`] parser.
struct Parts<'a> {
    body: &'a mut Incoming,
    parser: Multipart,
    queue: VecDeque<Event>,
    end: bool,
}

impl Parts<'_> {
    /// The next event; `None` at the end of the body; `Err` when it is
    /// broken or malformed.
    async fn next(&mut self) -> Option<Result<Event, String>> {
        loop {
            if let Some(e) = self.queue.pop_front() {
                return Some(Ok(e));
            }
            if self.end {
                return None;
            }
            match Frames::next(self.body).await {
                None => self.end = true,
                Some(Ok(data)) => match self.parser.feed(&data) {
                    Ok(events) => self.queue.extend(events),
                    Err(why) => return Some(Err(why)),
                },
                Some(Err(why)) => return Some(Err(why)),
            }
        }
    }
}

/// One part's body as [`receive()`] reads it: its data, then `None` at its
/// end — so that each part goes through the one `PUT` pipeline.
struct Part<'a, 'b>(&'a mut Parts<'b>);

impl Frames for Part<'_, '_> {
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

async fn multipart(
    app: &Arc<App>,
    body: &mut Incoming,
    stall: std::time::Duration,
    boundary: &str,
    path: Option<String>,
    user: Option<String>,
) -> Reply {
    let mut parts = Parts {
        body,
        parser: Multipart::new(boundary),
        queue: VecDeque::new(),
        end: false,
    };
    let mut done: Vec<WriteInfo> = Vec::new();
    let mut files = 0usize;
    loop {
        let Ok(next) = tokio::time::timeout(stall, parts.next()).await else {
            return stalled(stall);
        };
        let (name, filename) = match next {
            None => break,
            Some(Err(why)) => return closing(error(StatusCode::BAD_REQUEST, &why)),
            Some(Ok(Event::Part { name, filename })) => (name, filename),
            // The body of a part not named `file`: skipped.
            Some(Ok(Event::Data(_) | Event::PartEnd)) => continue,
        };
        if name != "file" {
            continue;
        }
        files += 1;
        if files > MAX_PARTS {
            return closing(error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("more than {MAX_PARTS} files in one upload"),
            ));
        }
        let text = match (&path, filename) {
            (Some(p), _) if files == 1 => p.clone(),
            (_, Some(f)) if !f.is_empty() => f,
            _ => {
                return closing(error(
                    StatusCode::BAD_REQUEST,
                    "a file part needs a filename (its path) when ?path is not given",
                ));
            }
        };
        let target = match target(&text, user.as_deref()) {
            Ok(t) => t,
            Err(e) => return closing(file_error(&e)),
        };
        let got = receive(
            &mut Part(&mut parts),
            stall,
            staged(app, target),
            None,
            options(),
        )
        .await;
        match outcome(got, stall) {
            Ok(w) => done.push(w),
            Err(reply) => return closing(*reply),
        }
    }
    if !parts.parser.finished() {
        return error(
            StatusCode::BAD_REQUEST,
            "the multipart body ended before its closing boundary",
        );
    }
    if done.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "the multipart body has no part named \"file\"",
        );
    }
    answer(&done)
}

/// What the multipart parser found.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// A part begins: its `name` and `filename` from
    /// `Content-Disposition`.
    Part {
        /// The form field's name.
        name: String,
        /// The filename, decoded as browsers and httpx encode it.
        filename: Option<String>,
    },
    /// Bytes of the current part's body.
    Data(Bytes),
    /// The current part ended.
    PartEnd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the first delimiter (the preamble is skipped).
    Preamble,
    /// Just after a delimiter: `--` ends the body, CRLF starts a part.
    AfterDelimiter,
    /// A part's headers, up to the blank line.
    Headers,
    /// A part's body, up to the next delimiter.
    Body,
    /// After the closing delimiter (the epilogue is ignored).
    Done,
}

/// A streaming `multipart/form-data` parser (RFC 7578 / RFC 2046 §5.1):
/// fed frames as they come, it never holds more than a delimiter's length
/// of a part's body (plus one part's headers).
pub struct Multipart {
    /// `\r\n--<boundary>`.
    delimiter: Vec<u8>,
    buf: BytesMut,
    state: State,
}

impl Multipart {
    /// A parser for this boundary.
    pub fn new(boundary: &str) -> Multipart {
        let mut buf = BytesMut::new();
        // The first delimiter has no CRLF before it: supplying one makes
        // every delimiter look the same.
        buf.extend_from_slice(b"\r\n");
        Multipart {
            delimiter: format!("\r\n--{boundary}").into_bytes(),
            buf,
            state: State::Preamble,
        }
    }

    /// Whether the closing delimiter was seen.
    pub fn finished(&self) -> bool {
        self.state == State::Done
    }

    fn find(&self, needle: &[u8]) -> Option<usize> {
        let hay = &self.buf[..];
        if needle.is_empty() || hay.len() < needle.len() {
            return None;
        }
        let mut from = 0;
        while from + needle.len() <= hay.len() {
            let at = hay[from..=hay.len() - needle.len()]
                .iter()
                .position(|&b| b == needle[0])?;
            let at = from + at;
            if &hay[at..at + needle.len()] == needle {
                return Some(at);
            }
            from = at + 1;
        }
        None
    }

    /// Feeds the next bytes; answers what they complete.
    pub fn feed(&mut self, data: &[u8]) -> Result<Vec<Event>, String> {
        if self.state == State::Done {
            return Ok(Vec::new());
        }
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        loop {
            match self.state {
                State::Done => {
                    self.buf.clear();
                    return Ok(out);
                }
                State::Preamble => match self.find(&self.delimiter.clone()) {
                    Some(at) => {
                        let _ = self.buf.split_to(at + self.delimiter.len());
                        self.state = State::AfterDelimiter;
                    }
                    None => {
                        let keep = self.delimiter.len().min(self.buf.len());
                        let drop = self.buf.len() - keep;
                        let _ = self.buf.split_to(drop);
                        if self.buf.len() > MAX_PART_HEADERS {
                            return Err("no multipart boundary found".into());
                        }
                        return Ok(out);
                    }
                },
                State::AfterDelimiter => {
                    // Transport padding (spaces, tabs) may follow.
                    while self.buf.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
                        let _ = self.buf.split_to(1);
                    }
                    if self.buf.len() < 2 {
                        return Ok(out);
                    }
                    if self.buf.starts_with(b"--") {
                        self.state = State::Done;
                    } else if self.buf.starts_with(b"\r\n") {
                        let _ = self.buf.split_to(2);
                        self.state = State::Headers;
                    } else {
                        return Err("malformed multipart body: junk after a boundary".into());
                    }
                }
                State::Headers => match self.find(b"\r\n\r\n") {
                    Some(at) => {
                        let head = self.buf.split_to(at + 4);
                        out.push(part_of(&head[..at])?);
                        self.state = State::Body;
                    }
                    None if self.buf.starts_with(b"\r\n") => {
                        // A part without headers.
                        let _ = self.buf.split_to(2);
                        out.push(Event::Part {
                            name: String::new(),
                            filename: None,
                        });
                        self.state = State::Body;
                    }
                    None => {
                        if self.buf.len() > MAX_PART_HEADERS {
                            return Err(format!(
                                "a multipart part's headers exceed {MAX_PART_HEADERS} bytes"
                            ));
                        }
                        return Ok(out);
                    }
                },
                State::Body => match self.find(&self.delimiter.clone()) {
                    Some(at) => {
                        let data = self.buf.split_to(at).freeze();
                        if !data.is_empty() {
                            out.push(Event::Data(data));
                        }
                        let _ = self.buf.split_to(self.delimiter.len());
                        out.push(Event::PartEnd);
                        self.state = State::AfterDelimiter;
                    }
                    None => {
                        // All but what could begin a delimiter is the part's.
                        let keep = (self.delimiter.len() - 1).min(self.buf.len());
                        let n = self.buf.len() - keep;
                        if n > 0 {
                            out.push(Event::Data(self.buf.split_to(n).freeze()));
                        }
                        return Ok(out);
                    }
                },
            }
        }
    }
}

/// The `Part` event of a part's header block.
fn part_of(head: &[u8]) -> Result<Event, String> {
    let text = String::from_utf8_lossy(head);
    let mut name = String::new();
    let mut filename = None;
    for line in text.split("\r\n") {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if !k.trim().eq_ignore_ascii_case("content-disposition") {
            continue;
        }
        for (key, value) in disposition_params(v) {
            match key.to_ascii_lowercase().as_str() {
                "name" => name = value,
                "filename" => filename = Some(value),
                _ => {}
            }
        }
    }
    Ok(Event::Part { name, filename })
}

/// The `key=value` parameters of a `Content-Disposition` value; quoted
/// values are decoded as HTML5 forms and httpx encode them (`%22` for `"`,
/// `%0A`-style escapes for control characters, `\\` for `\`).
fn disposition_params(value: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let bytes = value.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && (bytes[i] == b';' || bytes[i] == b' ' || bytes[i] == b'\t') {
            i += 1;
        }
        let key_start = i;
        while i < bytes.len() && bytes[i] != b'=' && bytes[i] != b';' {
            i += 1;
        }
        let key = value[key_start..i].trim().to_owned();
        if i >= bytes.len() || bytes[i] == b';' {
            continue;
        }
        i += 1;
        let mut v = Vec::new();
        if bytes.get(i) == Some(&b'"') {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                if bytes[i] == b'\\' && i + 1 < bytes.len() {
                    i += 1;
                }
                v.push(bytes[i]);
                i += 1;
            }
            i += 1;
        } else {
            while i < bytes.len() && bytes[i] != b';' {
                v.push(bytes[i]);
                i += 1;
            }
        }
        let v = String::from_utf8_lossy(&v).trim().to_owned();
        out.push((key, unescape_form(&v)));
    }
    out
}

/// `%22` → `"` and `%XX` of a control character → it; anything else kept.
fn unescape_form(v: &str) -> String {
    let mut out = Vec::with_capacity(v.len());
    let b = v.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(decoded) = path::percent_decode(&v[i..i + 3])
            && let [c] = decoded[..]
            && (c == b'"' || c < 0x20)
        {
            out.push(c);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> Vec<u8> {
        b"preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/t/a \\\\b%22.txt\"\r\nContent-Type: application/octet-stream\r\n\r\nhello\r\n--Xy\r\n\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"rel/b.bin\"\r\n\r\n\x00\x01\r\n--XyZ--\r\nepilogue".to_vec()
    }

    /// The events of `body` fed in pieces of `size`, data joined per part.
    fn parse(body: &[u8], size: usize) -> Vec<(String, Option<String>, Vec<u8>)> {
        let mut p = Multipart::new("XyZ");
        let mut parts: Vec<(String, Option<String>, Vec<u8>)> = Vec::new();
        for chunk in body.chunks(size) {
            for e in p.feed(chunk).unwrap() {
                match e {
                    Event::Part { name, filename } => parts.push((name, filename, Vec::new())),
                    Event::Data(d) => parts.last_mut().unwrap().2.extend_from_slice(&d),
                    Event::PartEnd => {}
                }
            }
        }
        assert!(p.finished(), "closing boundary seen with pieces of {size}");
        parts
    }

    #[test]
    fn a_multipart_body_parses_the_same_whatever_its_frames() {
        let b = body();
        let want = parse(&b, b.len());
        assert_eq!(want.len(), 2);
        assert_eq!(want[0].0, "file");
        assert_eq!(want[0].1.as_deref(), Some("/t/a \\b\".txt"));
        assert_eq!(want[0].2, b"hello\r\n--Xy\r\n");
        assert_eq!(want[1].1.as_deref(), Some("rel/b.bin"));
        assert_eq!(want[1].2, b"\x00\x01");
        for size in 1..b.len() {
            assert_eq!(parse(&b, size), want, "pieces of {size}");
        }
    }

    #[test]
    fn a_multipart_body_without_its_closing_boundary_is_not_finished() {
        let mut p = Multipart::new("b");
        p.feed(b"--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc")
            .unwrap();
        assert!(!p.finished());
        assert!(Multipart::new("b").feed(b"--bjunk").is_err());
    }

    #[test]
    fn the_boundary_and_query_values_are_read_as_clients_send_them() {
        assert_eq!(
            boundary_of("multipart/form-data; boundary=\"ab cd\"").as_deref(),
            Some("ab cd")
        );
        assert_eq!(boundary_of("multipart/form-data").as_deref(), None);
        assert_eq!(
            query_value(Some("path=%2Ftmp%2Fa+b.txt&username=user"), "path").as_deref(),
            Some("/tmp/a b.txt")
        );
        assert_eq!(query_value(Some("path=x"), "username"), None);
    }
}
