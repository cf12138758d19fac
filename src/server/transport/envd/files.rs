//! envd's REST `/files` (docs/envd.md, "Filesystem"), as the `e2b`
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
//! malformed, `403` outside the cwd policy, `404` missing, `409`
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

use std::path::PathBuf;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, StatusCode};

use super::super::file_http::{FormParts, Part, send_file};
use super::filesystem::{Names, absolute, home};
use crate::files::commit::{Options, Staged};
use crate::files::place::Place;
use crate::files::transfer::{Received, blocking, receive};
use crate::files::{FileError, Kind, read, tree};
use crate::net::body::Body;
use crate::net::multipart::{self, Event};
use crate::net::query::{Plus, Query};
use crate::net::reply::HttpReply;
use crate::server::app::App;

/// The most `file` parts one multipart request may carry.
pub const MAX_PARTS: usize = 1000;

/// `{"code": <status>, "message": …}` with that status.
pub fn error(code: StatusCode, message: &str) -> HttpReply {
    let body = serde_json::json!({"code": code.as_u16(), "message": message}).to_string();
    let mut r = hyper::Response::new(Body::full(body));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn file_error(e: &FileError) -> HttpReply {
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
pub(super) async fn handle(state: &Arc<super::EnvdState>, req: Request<Incoming>) -> HttpReply {
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

async fn get(
    app: &Arc<App>,
    req: Request<Incoming>,
    text: &str,
    user: Option<String>,
) -> HttpReply {
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

fn stalled(stall: std::time::Duration) -> HttpReply {
    closing(error(
        StatusCode::REQUEST_TIMEOUT,
        &format!(
            "the body stalled for {} s (MCP_EXEC_HTTP_STALL_TIMEOUT); the file being written was not committed",
            stall.as_secs_f64()
        ),
    ))
}

fn closing(mut r: HttpReply) -> HttpReply {
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
fn outcome(got: Received, stall: std::time::Duration) -> Result<WriteInfo, Box<HttpReply>> {
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
) -> HttpReply {
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
        let Some(boundary) = multipart::boundary(&content_type) else {
            return closing(error(
                StatusCode::BAD_REQUEST,
                "multipart/form-data without a boundary",
            ));
        };
        return form(app, body, stall, &boundary, path, user).await;
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

fn answer(files: &[WriteInfo]) -> HttpReply {
    let body = serde_json::to_vec(files).unwrap_or_default();
    let mut r = hyper::Response::new(Body::full(body));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

async fn form(
    app: &Arc<App>,
    body: Incoming,
    stall: std::time::Duration,
    boundary: &str,
    path: Option<String>,
    user: Option<String>,
) -> HttpReply {
    let mut parts = FormParts::new(body, boundary);
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
    if !parts.finished() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_read_as_clients_send_them() {
        assert_eq!(
            query_value(Some("path=%2Ftmp%2Fa+b.txt&username=user"), "path").as_deref(),
            Some("/tmp/a b.txt")
        );
        assert_eq!(query_value(Some("path=x"), "username"), None);
    }
}
