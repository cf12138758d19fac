//! `/files/<abs path>`: file transfer and the file API over HTTP (SPEC
//! §13.2), after the guard (Host, Origin, token) let the request through.
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
//! # Memory stays flat
//! A `PUT` body is never collected: its frames are gathered into
//! [`WRITE_CHUNK`]s that go through a channel of [`DEPTH`] to a task that
//! writes and hashes them (the atomic commit of [`crate::files::commit`]):
//! the write and the SHA-256 of each chunk run side by side on the blocking
//! pool, each lane one chunk at a time and in order, and every
//! [`SYNC_EVERY`] bytes an `fdatasync` starts in the background, so that
//! the disk writes while the body arrives; the commit still `fsync`s the
//! whole file and checks the hash before the rename. A client that stops
//! or goes away drops the channel, and the temporary file is removed. A `GET` reads
//! [`READ_CHUNK`]-sized pieces into a channel as deep, which hyper
//! drains as the socket accepts them.
//!
//! # `?watch`: a directory's changes as SSE (SPEC §22)
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
//!
//! # A stalled client holds nothing for long (issue 20, item 6)
//! A `PUT` body frame must arrive within `MCP_EXEC_HTTP_STALL_TIMEOUT` of
//! the previous one, or the answer is `408`, the connection closes and the
//! temporary file is removed before the answer is sent; a `GET` whose client
//! stops reading fails its socket write after as long (`stall.rs`). And no
//! blocking-pool thread ever waits for a client: each chunk's disk work is a
//! blocking task of its own (its write, its hash), and the waiting between
//! chunks happens on the async side, so any number of stalled transfers leaves the
//! [`FILE_WORKERS`] to the file operations (a stalled transfer costs its
//! buffers and a descriptor).

use std::future::Future;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde::Serialize;
use tokio::sync::mpsc;

use super::state::HttpState;
use crate::files::commit::{Options, Staged};
use crate::files::place::Place;
use crate::files::watch::{Limits, Watch, WatchEvent};
use crate::files::{self as files, FileError, Kind, path, read, tree};
use crate::net::body::Body;
use crate::net::reply::{self, HttpReply, status};
use crate::policy::cwd::CwdPolicy;

/// Chunks in flight between the socket and the disk, either way.
pub const DEPTH: usize = 4;
/// How big a chunk read from the disk for a `GET` is: each is one
/// `pread`, one hand-off to the blocking pool and back, and one `writev`
/// to the socket, so the hand-offs (futex wake-ups, eventfd writes) are
/// paid once per MiB. With [`DEPTH`] in the channel, one in hyper's hands
/// and the pool of reused chunks, a download holds at most about 6 MiB of
/// buffers.
pub const READ_CHUNK: usize = 1 << 20;

/// How big a chunk written to the disk for a `PUT` is. hyper hands a body
/// over in frames of at most its read buffer (16 KiB here); they are
/// gathered into chunks this big, so that the blocking pool is woken, and
/// `write(2)` called, once per MiB rather than once per frame. With
/// [`DEPTH`] in the channel, one being gathered, one in each lane and the
/// pool of reused chunks, an upload holds at most about 8 MiB of buffers.
pub const WRITE_CHUNK: usize = 1 << 20;

/// The query of a `/files` request: `key` or `key=value` pairs, values
/// kept raw (percent-encoded) until used.
pub(super) struct Query<'a>(Vec<(&'a str, &'a str)>);

impl<'a> Query<'a> {
    pub(super) fn parse(q: Option<&'a str>) -> Query<'a> {
        Query(
            q.unwrap_or("")
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| p.split_once('=').unwrap_or((p, "")))
                .collect(),
        )
    }

    pub(super) fn get(&self, key: &str) -> Option<&'a str> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }

    /// A flag: present and not `false`/`0`.
    pub(super) fn flag(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| v != "false" && v != "0")
    }

    /// The value, percent-decoded (lossy UTF-8).
    fn text(&self, key: &str) -> Option<String> {
        self.get(key).map(|v| {
            String::from_utf8_lossy(&path::percent_decode(v).unwrap_or_default()).into_owned()
        })
    }
}

pub(in crate::server::transport) fn json_reply(
    code: StatusCode,
    value: &impl Serialize,
) -> HttpReply {
    let mut body = serde_json::to_vec(value).unwrap_or_default();
    body.push(b'\n');
    reply::json(code, body)
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

/// How many `/files` blocking tasks run at once: the disk work of every
/// request and every transfer's chunk shares them, so a flood of requests
/// cannot grow the blocking pool without bound, and — since no task waits
/// on a client — stalled transfers cannot take them all.
pub const FILE_WORKERS: usize = 16;

static WORKERS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(FILE_WORKERS);

/// Runs blocking file work on tokio's blocking pool, at most
/// [`FILE_WORKERS`] at a time.
pub(in crate::server::transport) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, FileError> + Send + 'static,
) -> Result<T, FileError> {
    let Ok(_worker) = WORKERS.acquire().await else {
        return Err(FileError::new(Kind::Io, "the file workers are closed"));
    };
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(FileError::new(Kind::Io, format!("file task failed: {e}"))))
}

/// Routes a `/files…` request.
pub(super) async fn handle(state: &Arc<HttpState>, req: Request<Incoming>) -> HttpReply {
    let raw = req.uri().path().strip_prefix("/files").unwrap_or("");
    let target = match path::from_url_path(raw) {
        Ok(p) => p,
        Err(e) => return invalid(e),
    };
    let query_text = req.uri().query().map(str::to_owned);
    let query = Query::parse(query_text.as_deref());
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
    let _ = tx.try_send(sse_event(
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
                        .send(sse_event("end", &serde_json::json!({"type": "end", "reason": reason})))
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
        WatchEvent::Resync => sse_event("resync", &serde_json::json!({"type": "resync"})),
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
            sse_event(kind.name(), &body)
        }
    }
}

/// `event: NAME\ndata: JSON\n\n`.
fn sse_event(name: &str, body: &serde_json::Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {body}\n\n"))
}

/// What the socket side hands the writing task.
enum Piece {
    Data(Bytes),
    /// The whole body arrived.
    End,
}

async fn put(
    app: Arc<crate::tools::App>,
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
        Some(m) => match crate::tools::upload::parse_mode(&m) {
            Some(m) => match crate::tools::upload::without_setid(m) {
                Ok(m) => Some(m),
                Err(why) => return invalid(why),
            },
            None => {
                return invalid(format!(
                    "mode must be octal permission bits like 0644, not {m:?}"
                ));
            }
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
pub(in crate::server::transport) fn stalled(stall: Duration) -> HttpReply {
    status(
        StatusCode::REQUEST_TIMEOUT,
        &format!(
            "the body stalled for {} s (MCP_EXEC_HTTP_STALL_TIMEOUT); nothing was written",
            stall.as_secs_f64()
        ),
    )
}

/// A request body as the data frames a `PUT` writes: the raw body
/// ([`Incoming`]) or one part of it (sandboxd's `multipart/form-data`).
pub(in crate::server::transport) trait Frames: Send {
    /// The next bytes; `None` at the end; `Err` (the client's fault, said
    /// as a `400`) for a broken body.
    fn next(&mut self) -> impl Future<Output = Option<Result<Bytes, String>>> + Send;
}

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

/// How a `PUT` body went.
pub(in crate::server::transport) struct Received {
    /// The commit, or why there was none.
    pub outcome: Result<files::commit::Committed, FileError>,
    /// The whole body was read (else the connection cannot be reused).
    pub complete: bool,
    /// A frame did not come within the stall timeout (answer `408`).
    pub stalled: bool,
}

/// Streams `body` into the file `open` stages, and commits it with
/// `expected` and `opts` (see the module doc: memory stays flat, a stalled
/// or vanished client leaves nothing). The one `PUT` pipeline, for
/// `/files` and sandboxd's `/v1/files`.
pub(in crate::server::transport) async fn receive<F: Frames>(
    body: &mut F,
    stall: Duration,
    open: impl FnOnce() -> Result<Staged, FileError> + Send + 'static,
    expected: Option<[u8; 32]>,
    opts: Options,
) -> Received {
    let (tx, rx) = mpsc::channel::<Piece>(DEPTH);
    // Chunks come back once written, to be filled again: buffers this big
    // are fresh mappings otherwise (the allocator maps anything over 128
    // KiB), each one page-faulted in and unmapped again.
    let (home, pool) = std::sync::mpsc::sync_channel::<BytesMut>(DEPTH + 1);
    let writer = tokio::spawn(write_pieces(open, rx, home, expected, opts));
    let mut complete = false;
    let mut stalled = false;
    let mut broken = None;
    let mut gathered = BytesMut::new();
    loop {
        let Ok(frame) = tokio::time::timeout(stall, body.next()).await else {
            stalled = true;
            break;
        };
        match frame {
            None => {
                complete = true;
                break;
            }
            Some(Ok(mut data)) => {
                let mut stopped = false;
                // Filled to exactly `WRITE_CHUNK` (a frame may straddle two
                // chunks), and handed over whole, not split off: a chunk
                // that grew past its capacity would be reallocated, and one
                // that shares its buffer with what is left could never come
                // back to the pool.
                while !data.is_empty() {
                    if gathered.capacity() == 0 {
                        gathered = match pool.try_recv() {
                            Ok(mut used) => {
                                used.clear();
                                used
                            }
                            Err(_) => BytesMut::with_capacity(WRITE_CHUNK),
                        };
                    }
                    let take = (WRITE_CHUNK - gathered.len().min(WRITE_CHUNK)).min(data.len());
                    gathered.extend_from_slice(&data[..take]);
                    data = data.slice(take..);
                    if gathered.len() < WRITE_CHUNK {
                        break;
                    }
                    let full = std::mem::take(&mut gathered).freeze();
                    if tx.send(Piece::Data(full)).await.is_err() {
                        stopped = true;
                        break;
                    }
                }
                if stopped {
                    // The writer stopped early: its error is the answer.
                    break;
                }
            }
            // The client went away or sent a broken body: the writer sees
            // the channel close without `End` and removes its file.
            Some(Err(why)) => {
                broken = Some(why);
                break;
            }
        }
    }
    if complete {
        if !gathered.is_empty() {
            let _ = tx.send(Piece::Data(gathered.freeze())).await;
        }
        let _ = tx.send(Piece::End).await;
    }
    drop(tx);
    // Awaited also after a stall, so the temporary file is gone before the
    // `408` is sent.
    let mut outcome = writer
        .await
        .unwrap_or_else(|e| Err(FileError::new(Kind::Io, format!("file task failed: {e}"))));
    if let (Some(why), Err(_)) = (broken, &outcome) {
        outcome = Err(FileError::new(
            Kind::Invalid,
            format!("{why}; nothing was written"),
        ));
    }
    Received {
        outcome,
        complete,
        stalled,
    }
}

/// Starts `f` on the blocking pool once one of the [`FILE_WORKERS`] is
/// free, without waiting for it to finish (the permit goes with it).
async fn start_blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, FileError> + Send + 'static,
) -> Result<tokio::task::JoinHandle<Result<T, FileError>>, FileError> {
    let Ok(worker) = WORKERS.acquire().await else {
        return Err(FileError::new(Kind::Io, "the file workers are closed"));
    };
    Ok(tokio::task::spawn_blocking(move || {
        let _worker = worker;
        f()
    }))
}

/// One thing a `PUT` does to every chunk in order (write it, hash it),
/// on the blocking pool: idle with its state, or busy with a chunk and
/// giving the state back when done. Two lanes run side by side, each one
/// chunk at a time.
enum Lane<T> {
    Idle(T),
    Busy(tokio::task::JoinHandle<Result<T, FileError>>),
    /// Only while being switched, or after a failure.
    Gone,
}

impl<T: Send + 'static> Lane<T> {
    /// The state, once the chunk in hand is done.
    async fn wait(&mut self) -> Result<T, FileError> {
        match std::mem::replace(self, Lane::Gone) {
            Lane::Idle(t) => Ok(t),
            Lane::Busy(task) => task.await.unwrap_or_else(|e| {
                Err(FileError::new(Kind::Io, format!("file task failed: {e}")))
            }),
            Lane::Gone => Err(FileError::new(Kind::Io, "a file task failed before")),
        }
    }

    /// After the chunk in hand, starts `f` on the next one.
    async fn then(
        &mut self,
        f: impl FnOnce(T) -> Result<T, FileError> + Send + 'static,
    ) -> Result<(), FileError> {
        let t = self.wait().await?;
        *self = Lane::Busy(start_blocking(move || f(t)).await?);
        Ok(())
    }
}

/// Gives a written and hashed chunk back to `home` to be filled again, by
/// whichever lane lets go of it last.
fn recycle(d: Bytes, home: &std::sync::mpsc::SyncSender<BytesMut>) {
    if let Ok(used) = d.try_into_mut() {
        let _ = home.try_send(used);
    }
}

/// Written bytes after which a `PUT` starts an `fdatasync` of what it has
/// written (when none is running yet), so that the disk writes while the
/// body still arrives and the commit's `fsync` finds little left to do.
pub const SYNC_EVERY: u64 = 64 << 20;

/// The writing task of a `PUT`: waits for chunks on the async side and
/// hands each to two lanes — the write, and the SHA-256 — that run on
/// the blocking pool side by side (see the module doc), and syncs every
/// [`SYNC_EVERY`] bytes in the background.
async fn write_pieces(
    open: impl FnOnce() -> Result<Staged, FileError> + Send + 'static,
    mut rx: mpsc::Receiver<Piece>,
    home: std::sync::mpsc::SyncSender<BytesMut>,
    expected: Option<[u8; 32]>,
    opts: Options,
) -> Result<files::commit::Committed, FileError> {
    use sha2::Digest;
    let staged = blocking(open).await?;
    let syncer = Arc::new(staged.sync_handle()?);
    let mut writing = Lane::Idle(staged);
    let mut hashing = Lane::Idle(sha2::Sha256::new());
    let mut syncing: Option<tokio::task::JoinHandle<Result<(), FileError>>> = None;
    let mut unsynced = 0u64;
    loop {
        match rx.recv().await {
            Some(Piece::Data(d)) => {
                unsynced += d.len() as u64;
                let (h, d2, home2) = (home.clone(), d.clone(), home.clone());
                hashing
                    .then(move |mut sha| {
                        sha.update(&d2);
                        recycle(d2, &home2);
                        Ok(sha)
                    })
                    .await?;
                writing
                    .then(move |mut staged| {
                        staged.append(&d)?;
                        recycle(d, &h);
                        Ok(staged)
                    })
                    .await?;
                if unsynced >= SYNC_EVERY && syncing.as_ref().is_none_or(|s| s.is_finished()) {
                    unsynced = 0;
                    let file = Arc::clone(&syncer);
                    // A failure shows again at the commit's `fsync`.
                    syncing = Some(
                        start_blocking(move || {
                            let _ = file.sync_data();
                            Ok(())
                        })
                        .await?,
                    );
                }
            }
            Some(Piece::End) => {
                let sha = hashing.wait().await?;
                let staged = writing.wait().await?;
                if let Some(s) = syncing {
                    let _ = s.await;
                }
                drop(syncer);
                let got: [u8; 32] = sha.finalize().into();
                return blocking(move || staged.commit_hashed(got, expected, opts)).await;
            }
            None => {
                // Dropped on the blocking side: removing the temporary
                // file is a syscall.
                let staged = writing.wait().await;
                return blocking(move || {
                    drop(staged);
                    Err(FileError::new(
                        Kind::Invalid,
                        "the body ended early; nothing was written",
                    ))
                })
                .await;
            }
        }
    }
}

/// What a `GET`/`HEAD` found.
enum Found {
    Listing(tree::Listing),
    File(read::Opened, PathBuf),
}

async fn get(
    app: Arc<crate::tools::App>,
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

pub(in crate::server::transport) fn send_file(
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
        tokio::spawn(stream_file(opened, start, len, tx));
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

/// A chunk of a GET that goes back to its pool when hyper has sent it and
/// drops it (see [`put`] for why buffers are reused).
struct Recycled {
    buf: Vec<u8>,
    len: usize,
    home: std::sync::mpsc::SyncSender<Vec<u8>>,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len.min(self.buf.len())]
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        // A full pool, or a reader that has finished: the buffer is freed.
        let _ = self.home.try_send(std::mem::take(&mut self.buf));
    }
}

/// Reads `len` bytes from `start` into `tx`, a chunk at a time (each read
/// a blocking task of its own: waiting for the client holds no thread),
/// until done or the client is gone. A file that shrank meanwhile ends the
/// stream early: hyper then closes the connection (fewer bytes than
/// announced).
async fn stream_file(opened: read::Opened, start: u64, len: u64, tx: mpsc::Sender<Bytes>) {
    use std::os::unix::fs::FileExt;
    let (home, pool) = std::sync::mpsc::sync_channel::<Vec<u8>>(DEPTH + 1);
    let opened = Arc::new(opened);
    let mut at = start;
    let end = start + len;
    let mut sent = 0u64;
    while at < end {
        let want = usize::try_from((end - at).min(READ_CHUNK as u64)).unwrap_or(READ_CHUNK);
        let mut buf = pool.try_recv().unwrap_or_default();
        let file = Arc::clone(&opened);
        let read = blocking(move || {
            buf.resize(want, 0);
            loop {
                match file.file.read_at(&mut buf, at) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(FileError::new(Kind::Io, format!("reading: {e}")));
                    }
                    Ok(n) => return Ok((buf, n)),
                }
            }
        });
        let (buf, n) = match read.await {
            Ok((_, 0)) => break,
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(error = %e.message, "reading a file for GET /files");
                break;
            }
        };
        let chunk = Recycled {
            buf,
            len: n,
            home: home.clone(),
        };
        if tx.send(Bytes::from_owner(chunk)).await.is_err() {
            break;
        }
        at += n as u64;
        sent += n as u64;
    }
    crate::metrics::transfer_bytes(true, sent);
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

    #[test]
    fn query_flags_are_present_unless_false() {
        let q = Query::parse(Some("mkdir&parents=1&overwrite=false&move=%2Ftmp%2Fx"));
        assert!(q.flag("mkdir") && q.flag("parents"));
        assert!(!q.flag("overwrite") && !q.flag("recursive"));
        assert_eq!(q.text("move").as_deref(), Some("/tmp/x"));
    }
}
