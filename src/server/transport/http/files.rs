//! `/files/<abs path>`: file transfer and the file API over HTTP
//! (docs/files.md), after the guard (Host, Origin, token) let the request
//! through.
//!
//! | request | answer |
//! |---|---|
//! | `PUT` (body = the bytes; `X-Content-SHA256: <hex>` verified before the rename; `?overwrite=false`, `?mode=0644`, `?mkdirs`) | `201` created / `200` replaced or unchanged, `{path, bytes, sha256, unchanged}` |
//! | `GET` of a file (`Range: bytes=a-b`, one range) | the bytes: `200` with `Content-Length`, `206` with `Content-Range`, `416` past the end |
//! | `HEAD` of a file | the headers of `GET` (`Content-Length` = the size) |
//! | `GET` of a directory (`?limit=&after=`) | `{"entries":[{name, type, size, mode, mtime, target?}, …], "next"?}` sorted by name |
//! | `GET ?stat` | the entry of the path itself (a symlink not followed; `target`) |
//! | `GET` of a directory `?watch` (`&recursive`) | `text/event-stream` of its changes, until the client goes (below) |
//! | `POST ?mkdir` (`&parents`) | `201` and the new directory's entry |
//! | `DELETE` (`?recursive` for a directory) | `204` |
//! | `POST ?move=<abs dest>` (`&overwrite`) | `204`; atomic, no replacing without `overwrite` |
//!
//! Errors are `{"error": "…"}` naming the path: `400` malformed, `403`
//! outside the cwd policy (or refused by the kernel), `404` missing, `409`
//! exists / not empty / not a regular file, `422` sha256 mismatch, `507` no
//! space.
//!
//! # Memory stays flat, a stalled client holds nothing for long
//! A `PUT` body goes through the one transfer pipeline,
//! [`crate::files::transfer::receive()`] (chunks written and hashed side by
//! side, background syncs, never collected), and a `GET` is read by
//! [`crate::files::transfer::send()`]; both run on the file workers. A `PUT`
//! body frame must arrive within `MCP_EXEC_HTTP_STALL_TIMEOUT` of the
//! previous one, or the answer is `408`, the connection closes and the
//! temporary file is removed before the answer is sent; a `GET` whose
//! client stops reading fails its socket write after as long (`stall.rs`).
//!
//! # `?watch`: a directory's changes as SSE
//! The watch ([`crate::files::watch`]) is set up before the answer is
//! sent: a directory that cannot be watched is an ordinary error (`404`,
//! `403`, `409` not a directory, `413` too many directories). Then every
//! event is `event: <type>` with `data: {"type", "path", "is_dir"}` (and
//! `"from"` for a `move`), `type` one of `create`, `modify`, `delete`,
//! `move`; first `event: ready` `{"type":"ready","path","recursive"}` (the
//! watch is live: changes after it are reported); `event: resync`
//! `{"type":"resync"}` when events were lost (list the tree again); and,
//! when the watch ends on its own (the directory deleted or moved, too many
//! directories), `event: end` `{"type":"end","reason"}` and the end of the
//! stream. `: keep-alive` every [`super::exec::KEEP_ALIVE`]. At most
//! [`MAX_WATCH_STREAMS`] streams are open at once (`503` past that). A client that
//! goes away, or the server's shutdown, ends the watch and closes its
//! inotify descriptor. The events wait in a channel of [`WATCH_DEPTH`]:
//! a client that reads slower than changes happen makes the watch's bounded
//! queue overflow into a `resync`, never grows memory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, StatusCode};
use tokio::sync::mpsc;

use super::super::file_http::{json_reply, send_file};
use super::state::HttpState;
use crate::files::commit::{Options, Staged};
use crate::files::mode::{self, Form, ModeError};
use crate::files::place::Place;
use crate::files::transfer::{blocking, receive};
use crate::files::watch::{Limits, Watch, WatchEvent};
use crate::files::{self as files, FileError, path, read, tree};
use crate::net::query::{Plus, Query};
use crate::net::reply::{self, HttpReply, status};
use crate::net::sse;
use crate::policy::cwd::CwdPolicy;

/// The query of a `/files` (or `/jobs/<id>/tty`) request: a `+` is a plus.
pub(super) fn parse_query(q: Option<&str>) -> Query<'_> {
    Query::parse(q, Plus::Literal)
}

fn error(e: &FileError) -> HttpReply {
    status(
        StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &e.message,
    )
}

fn invalid(message: impl std::fmt::Display) -> HttpReply {
    status(StatusCode::BAD_REQUEST, &message.to_string())
}

/// Routes a `/files…` request.
pub(super) async fn handle(state: &Arc<HttpState>, req: Request<Incoming>) -> HttpReply {
    let raw = req.uri().path().strip_prefix("/files").unwrap_or("");
    let target = match path::from_url_path(raw) {
        Ok(p) => p,
        Err(e) => return invalid(e),
    };
    let query_text = req.uri().query().map(str::to_owned);
    let query = parse_query(query_text.as_deref());
    let app = Arc::clone(&state.app);
    match req.method().clone() {
        Method::PUT => put(app, req, target, &query).await,
        Method::GET if query.get("stat").is_some() => {
            match blocking(move || tree::stat(&Place::resolve(&app.cwd, &target, false)?)).await {
                Ok(entry) => json_reply(StatusCode::OK, &entry),
                Err(e) => error(&e),
            }
        }
        Method::GET if query.get("watch").is_some() => {
            watch(state, target, query.flag("recursive")).await
        }
        m @ (Method::GET | Method::HEAD) => {
            let range = req
                .headers()
                .get(header::RANGE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            get(app, target, &query, range, m == Method::HEAD).await
        }
        Method::POST if query.get("mkdir").is_some() => {
            let parents = query.flag("parents");
            let made = blocking(move || {
                tree::mkdir(&Place::resolve(&app.cwd, &target, parents)?, parents)
            });
            match made.await {
                Ok(entry) => json_reply(StatusCode::CREATED, &entry),
                Err(e) => error(&e),
            }
        }
        Method::POST if query.get("move").is_some() => {
            let dest = match path::from_url_path(query.get("move").unwrap_or("")) {
                Ok(d) => d,
                Err(e) => return invalid(format!("move: {e}")),
            };
            let overwrite = query.flag("overwrite");
            let moved = blocking(move || {
                let from = Place::resolve(&app.cwd, &target, false)?;
                let to = Place::resolve(&app.cwd, &dest, false)?;
                tree::rename(&from, &to, overwrite)
            });
            match moved.await {
                Ok(()) => no_content(),
                Err(e) => error(&e),
            }
        }
        Method::DELETE => {
            let recursive = query.flag("recursive");
            let deleted = blocking(move || {
                tree::delete(&Place::resolve(&app.cwd, &target, false)?, recursive)
            });
            match deleted.await {
                Ok(()) => no_content(),
                Err(e) => error(&e),
            }
        }
        Method::POST => invalid("POST /files needs ?mkdir or ?move=<abs dest>"),
        _ => {
            let mut r = status(
                StatusCode::METHOD_NOT_ALLOWED,
                "/files takes GET, HEAD, PUT, POST (?mkdir, ?move) and DELETE",
            );
            r.headers_mut().insert(
                header::ALLOW,
                HeaderValue::from_static("GET, HEAD, PUT, POST, DELETE"),
            );
            r
        }
    }
}

fn no_content() -> HttpReply {
    reply::empty(StatusCode::NO_CONTENT)
}

/// Events of a `?watch` stream in flight to hyper.
pub const WATCH_DEPTH: usize = 16;

/// How many `?watch` streams may be open at once. Each holds an inotify
/// instance, and the kernel's `fs.inotify.max_user_instances` (128 by
/// default) is shared with the jobs of the same user (a dev server's file
/// watcher), which watch streams must not starve.
pub const MAX_WATCH_STREAMS: usize = 16;

static WATCH_STREAMS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_WATCH_STREAMS);

/// `GET ?watch`: see the module doc.
async fn watch(state: &Arc<HttpState>, target: PathBuf, recursive: bool) -> HttpReply {
    let Ok(slot) = WATCH_STREAMS.try_acquire() else {
        return status(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("{MAX_WATCH_STREAMS} watch streams are open already; close one first"),
        );
    };
    let app = Arc::clone(&state.app);
    let opened = blocking(move || Watch::open(&app.cwd, &target, recursive, Limits::default()));
    let watch = match opened.await {
        Ok(w) => w,
        Err(e) => return error(&e),
    };
    tracing::debug!(root = ?watch.root(), recursive, dirs = watch.watched_dirs(), "GET /files?watch: watching");
    let shutdown = state.shutdown.clone();
    let (tx, rx) = mpsc::channel::<Bytes>(WATCH_DEPTH);
    let _ = tx.try_send(sse::json(
        "ready",
        &serde_json::json!({
            "type": "ready",
            "path": watch.root().to_string_lossy(),
            "recursive": recursive,
        }),
    ));
    tokio::spawn(async move {
        stream_watch(watch, tx, shutdown).await;
        drop(slot);
    });
    reply::sse(rx)
}

/// Frames a watch's events until the client goes, the watch ends, or the
/// server shuts down; the watch is dropped (its descriptor closed) then.
async fn stream_watch(
    mut watch: Watch,
    tx: mpsc::Sender<Bytes>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let mut keep_alive = tokio::time::interval(super::exec::KEEP_ALIVE);
    keep_alive.reset();
    loop {
        let bytes = tokio::select! {
            next = watch.next() => match next {
                Some(e) => render_watch(&e),
                None => {
                    let reason = watch.end_reason().unwrap_or("the watch ended");
                    let _ = tx
                        .send(sse::json("end", &serde_json::json!({"type": "end", "reason": reason})))
                        .await;
                    break;
                }
            },
            () = tx.closed() => break,
            () = shutdown.cancelled() => break,
            _ = keep_alive.tick() => Bytes::from_static(b": keep-alive\n\n"),
        };
        let sent = tokio::select! {
            sent = tx.send(bytes) => sent.is_ok(),
            () = shutdown.cancelled() => false,
        };
        if !sent {
            break;
        }
    }
    tracing::debug!(root = ?watch.root(), "GET /files?watch: ended");
}

/// One watch event as SSE.
fn render_watch(e: &WatchEvent) -> Bytes {
    match e {
        WatchEvent::Resync => sse::json("resync", &serde_json::json!({"type": "resync"})),
        WatchEvent::Change {
            kind,
            path,
            from,
            is_dir,
        } => {
            let mut body = serde_json::json!({
                "type": kind.name(),
                "path": path.to_string_lossy(),
                "is_dir": is_dir,
            });
            if let Some(from) = from {
                body["from"] = serde_json::json!(from.to_string_lossy());
            }
            sse::json(kind.name(), &body)
        }
    }
}

async fn put(
    app: Arc<crate::server::app::App>,
    req: Request<Incoming>,
    target: PathBuf,
    query: &Query<'_>,
) -> HttpReply {
    let expected = match req.headers().get("x-content-sha256") {
        None => None,
        Some(v) => match v.to_str().ok().and_then(files::parse_sha256) {
            Some(sha) => Some(sha),
            None => return invalid("X-Content-SHA256 must be 64 hex digits"),
        },
    };
    let mode = match query.text("mode") {
        None => None,
        Some(m) => match mode::parse_mode(&m, Form::Octal) {
            Ok(m) => Some(m),
            Err(ModeError::Malformed) => {
                return invalid(format!(
                    "mode must be octal permission bits like 0644, not {m:?}"
                ));
            }
            Err(e @ ModeError::SetId(_)) => return invalid(e),
        },
    };
    let opts = Options {
        mode,
        overwrite: query
            .get("overwrite")
            .is_none_or(|v| v != "false" && v != "0"),
    };
    let mkdirs = query.flag("mkdirs");
    let stall = app.config.http_stall_timeout;
    let mut body = req.into_body();
    let open = move || Staged::create(Place::resolve(&app.cwd, &target, mkdirs)?);
    let got = receive(&mut body, stall, open, expected, opts).await;
    let reply = match got.outcome {
        _ if got.stalled => stalled(stall),
        Ok(done) if done.created => json_reply(StatusCode::CREATED, &done),
        Ok(done) => json_reply(StatusCode::OK, &done),
        Err(e) => error(&e),
    };
    if got.complete {
        reply
    } else {
        reply::closing(reply)
    }
}

/// The `408` of a body that stalled.
fn stalled(stall: Duration) -> HttpReply {
    status(
        StatusCode::REQUEST_TIMEOUT,
        &format!(
            "the body stalled for {} s (MCP_EXEC_HTTP_STALL_TIMEOUT); nothing was written",
            stall.as_secs_f64()
        ),
    )
}

/// What a `GET`/`HEAD` found.
enum Found {
    Listing(tree::Listing),
    File(read::Opened, PathBuf),
}

async fn get(
    app: Arc<crate::server::app::App>,
    target: PathBuf,
    query: &Query<'_>,
    range: Option<String>,
    head: bool,
) -> HttpReply {
    let limit = match query.get("limit") {
        None => tree::DEFAULT_LIMIT,
        Some(l) => match l.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => return invalid("limit must be a positive integer"),
        },
    };
    let after = query.text("after");
    let found = blocking(move || open_for_get(&app.cwd, &target, limit, after)).await;
    match found {
        Err(e) => error(&e),
        Ok(Found::Listing(listing)) => json_reply(StatusCode::OK, &listing),
        Ok(Found::File(opened, path)) => send_file(opened, &path, range.as_deref(), head),
    }
}

fn open_for_get(
    policy: &CwdPolicy,
    target: &Path,
    limit: usize,
    after: Option<String>,
) -> Result<Found, FileError> {
    let place = Place::resolve(policy, target, false)?;
    let st = read::lstat(&place)?
        .ok_or_else(|| FileError::errno(rustix::io::Errno::NOENT, "reading", target))?;
    if tree::is_dir(&st) {
        let after = after.map(std::ffi::OsString::from);
        return tree::list(&place, limit, after.as_deref()).map(Found::Listing);
    }
    read::open(&place).map(|o| Found::File(o, target.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_flags_are_present_unless_false() {
        let q = parse_query(Some("mkdir&parents=1&overwrite=false&move=%2Ftmp%2Fx"));
        assert!(q.flag("mkdir") && q.flag("parents"));
        assert!(!q.flag("overwrite") && !q.flag("recursive"));
        assert_eq!(q.text("move").as_deref(), Some("/tmp/x"));
    }
}
