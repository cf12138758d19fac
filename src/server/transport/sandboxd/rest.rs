//! sandboxd's REST API (KEP-539.2, `filesystem.yaml`; docs/sandboxd.md) as a
//! mapping onto [`crate::files`] and its transfer pipeline
//! ([`crate::files::transfer`]): nothing here reads or writes a file
//! itself.
//!
//! | request | answer |
//! |---|---|
//! | `GET /v1/files/{path}`, a file | the bytes, `application/octet-stream`, `Content-Length`, one `Range` (`206`, `416`) |
//! | `GET /v1/files/{path}`, a directory | `{"path", "entries":[{name, size, type: file\|directory, modified_at, mode}]}`, by name; a symlink shown as what it leads to, left out when that is outside the root or missing |
//! | `HEAD /v1/files/{path}` | `200` (a file's `Content-Length`) / `404` |
//! | `PUT /v1/files/{path}?mode=0644` | raw body or the `multipart/form-data` part `file`; the atomic commit of `files::commit`, parents created; `204`; `400` for a directory or a mode not `^0[0-7]{3}$` ([`crate::files::mode`]) |
//! | `DELETE /v1/files/{path}?recursive=true` | `204`; `404`; `409` a non-empty directory without `recursive` |
//! | `GET /v1/health` | `{"status":"ok","uptime_seconds"}`; `503 {"code":"UNAVAILABLE"}` once shutting down |
//! | `GET /v1/metadata` | `{"env":{…}}`: the variables with the prefix, credentials withheld |
//!
//! Errors are `{"code", "message"}` with sandboxd's codes
//! (`INVALID_ARGUMENT` 400, `PERMISSION_DENIED` 403, `NOT_FOUND` 404,
//! `CONFLICT` 409, `INTERNAL` 500, `UNAVAILABLE` 503).
//!
//! # Paths
//! `{path}` is sandbox-relative: the rest of the URL path, percent-decoded
//! (the SDK sends one segment with `%2F` for `/`; plain `/` works too), its
//! `.` and `..` applied to the text, then joined to `--sandboxd-root`. A
//! `..` that would climb above the root, or a symlink that leads out of it,
//! is `403 PERMISSION_DENIED`, as in sandboxd. Everything is resolved by a
//! [`CwdPolicy`] whose one root is the sandbox root (opened once,
//! `openat2(RESOLVE_BENEATH)`), and the root itself must be allowed by
//! the working-directory policy, so a sandboxd path can never reach what the
//! MCP tools may not. Like sandboxd, a path whose last component is a symlink (inside
//! the root) is read or written through: [`Place::through_link`] has the kernel
//! follow it from the parent's descriptor and places the object it reached
//! under the same policy (the same device and inode, or refused), which is
//! then used through descriptors; no path is checked and then used. `DELETE` removes the
//! link itself, never its target (sandboxd removes the target).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, StatusCode};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::settings::SandboxRoot;
use crate::config::Config;
use crate::files::commit::{Options, Staged};
use crate::files::mode::{self, Form, ModeError};
use crate::files::place::Place;
use crate::files::transfer::{blocking, receive};
use crate::files::{FileError, Kind, path, read, tree};
use crate::net::http::{InFlight, Mount};
use crate::net::query::{Plus, Query};
use crate::net::reply::{self, HttpReply};
use crate::net::{
    self,
    accept::{self, Protocol},
    multipart,
};
use crate::policy::cwd::CwdPolicy;
use crate::server::app::App;
use crate::server::transport::file_http::{FilePart, json_reply, send_file};
use crate::server::transport::platform::{Platform, PlatformAuth, Refusal};

/// The names `/v1/metadata` never shows, whatever the prefix (sandboxd's
/// `sensitiveEnvMarkers`, matched anywhere in the upper-cased name).
pub const WITHHELD: [&str; 10] = [
    "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CRED", "KEY", "AUTH", "BEARER", "PRIVATE", "CERT",
];

/// The REST façade's settings and what it resolves paths with.
pub struct SandboxdRest {
    auth: PlatformAuth,
    /// `--sandboxd-root`, as configured.
    root: PathBuf,
    /// The policy whose one root is the sandbox root.
    policy: CwdPolicy,
    /// `/v1/metadata`'s answer, fixed at start-up (the environment is).
    metadata: Vec<u8>,
    started: Instant,
}

impl std::fmt::Debug for SandboxdRest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxdRest")
            .field("auth", &self.auth)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl SandboxdRest {
    /// The façade when `--sandboxd-rest` is set: its auth (the platform
    /// listeners' rule) and `root`, already checked against the
    /// working-directory policy ([`SandboxRoot::from_config`]). An `Err`
    /// names the setting; `main` exits 2.
    pub fn from_config(c: &Config, root: &SandboxRoot) -> Result<Option<SandboxdRest>, String> {
        let Some(raw) = &c.sandboxd_rest else {
            return Ok(None);
        };
        let auth = PlatformAuth::new(Platform::SandboxdRest, raw, c)?;
        let name = "MCP_EXEC_SANDBOXD_ROOT (--sandboxd-root)";
        let real_root = root.real().to_path_buf();
        let root = root.configured().to_path_buf();
        let text = real_root.to_string_lossy();
        let policy = CwdPolicy::from_settings(Some(&text), Some(&text))
            .map_err(|e| format!("{name}: {e}"))?;
        let metadata = metadata_body(std::env::vars_os(), &c.sandboxd_metadata_prefix);
        Ok(Some(SandboxdRest {
            auth,
            root,
            policy,
            metadata,
            started: Instant::now(),
        }))
    }

    /// The auth of the listener.
    pub fn auth(&self) -> &PlatformAuth {
        &self.auth
    }
}

/// `{"env":{…}}` of the variables in `vars` that start with `prefix` and
/// name no credential ([`WITHHELD`]); sorted, so the answer is stable.
pub fn metadata_body(vars: impl Iterator<Item = (OsString, OsString)>, prefix: &str) -> Vec<u8> {
    let env: std::collections::BTreeMap<String, String> = vars
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| k.starts_with(prefix))
        .filter(|(k, _)| {
            let upper = k.to_ascii_uppercase();
            !WITHHELD.iter().any(|m| upper.contains(m))
        })
        .collect();
    let mut body = serde_json::to_vec(&serde_json::json!({ "env": env })).unwrap_or_default();
    body.push(b'\n');
    body
}

/// Why a sandbox path was refused before any file was touched.
#[derive(Debug, PartialEq, Eq)]
pub enum PathRefusal {
    /// A bad percent-escape or a NUL byte: `400 INVALID_ARGUMENT`.
    Invalid(String),
    /// A `..` above the root: `403 PERMISSION_DENIED`.
    Escapes,
}

/// The sandbox path of the URL path after `/v1/files` (`/dir%2Fa%20b.txt`,
/// `/dir/a`, `/`, ``), as an absolute path beneath `root`: percent-decoded
/// once, `.` dropped, `..` applied to the text and refused above the root.
/// An absolute path already under `root` (`/workspace/x`) is taken as
/// that path, as sandboxd's `SanitizePath` does.
pub fn sandbox_path(root: &Path, raw: &str) -> Result<PathBuf, PathRefusal> {
    let decoded = path::percent_decode(raw)
        .ok_or_else(|| PathRefusal::Invalid(format!("{raw:?} has a bad percent-escape")))?;
    if decoded.contains(&0) {
        return Err(PathRefusal::Invalid(format!("{raw:?} contains a NUL byte")));
    }
    let mut parts: Vec<&[u8]> = Vec::new();
    for part in decoded.split(|&b| b == b'/') {
        match part {
            b"" | b"." => {}
            b".." => {
                parts.pop().ok_or(PathRefusal::Escapes)?;
            }
            p => parts.push(p),
        }
    }
    let root_parts: Vec<&[u8]> = root
        .as_os_str()
        .as_bytes()
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty())
        .collect();
    // `/workspace/x` means `x` (only when given as an absolute path).
    let rel = if decoded.first() == Some(&b'/') && parts.starts_with(&root_parts) {
        &parts[root_parts.len()..]
    } else {
        &parts[..]
    };
    let mut out = root.as_os_str().as_bytes().to_vec();
    for p in rel {
        if out.last() != Some(&b'/') {
            out.push(b'/');
        }
        out.extend_from_slice(p);
    }
    Ok(PathBuf::from(OsString::from_vec(out)))
}

/// An error body `{code, message}` with sandboxd's code for `status`.
fn failure(status: StatusCode, message: &str) -> HttpReply {
    let code = match status {
        StatusCode::BAD_REQUEST => "INVALID_ARGUMENT",
        StatusCode::UNAUTHORIZED => "UNAUTHENTICATED",
        StatusCode::FORBIDDEN => "PERMISSION_DENIED",
        StatusCode::NOT_FOUND => "NOT_FOUND",
        StatusCode::CONFLICT => "CONFLICT",
        StatusCode::SERVICE_UNAVAILABLE => "UNAVAILABLE",
        StatusCode::METHOD_NOT_ALLOWED => "METHOD_NOT_ALLOWED",
        StatusCode::REQUEST_TIMEOUT => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    };
    let body = format!(
        "{}\n",
        serde_json::json!({ "code": code, "message": message })
    );
    reply::json(status, body)
}

/// A [`FileError`] in sandboxd's terms: its kind decides the code; what
/// sandboxd has no code for (no space, a sha mismatch) is `500 INTERNAL`.
/// The root is `409`: the one refusal of it that reaches here is a
/// `DELETE` without `recursive` (a write to it is refused earlier, as a
/// directory), which sandboxd answers as a directory it cannot remove.
fn file_failure(e: &FileError) -> HttpReply {
    let status = match e.kind {
        Kind::Invalid | Kind::TooLarge => StatusCode::BAD_REQUEST,
        Kind::Outside | Kind::Denied => StatusCode::FORBIDDEN,
        Kind::NotFound => StatusCode::NOT_FOUND,
        Kind::Root
        | Kind::Exists
        | Kind::NotEmpty
        | Kind::NotRegular
        | Kind::NotDirectory
        | Kind::IsDirectory
        | Kind::Symlink
        | Kind::CrossDevice
        | Kind::Busy
        | Kind::TooDeep => StatusCode::CONFLICT,
        Kind::Exhausted => StatusCode::SERVICE_UNAVAILABLE,
        Kind::Mismatch | Kind::NoSpace | Kind::Io => StatusCode::INTERNAL_SERVER_ERROR,
    };
    failure(status, &e.message)
}

fn escapes() -> FileError {
    FileError::new(
        Kind::Outside,
        "path traversal outside sandbox root is forbidden",
    )
}

impl SandboxdRest {
    /// [`Place::resolve`] under the sandbox policy; "outside" in its words.
    fn place(&self, path: &Path, mkdirs: bool) -> Result<Place, FileError> {
        Place::resolve(&self.policy, path, mkdirs).map_err(|e| self.words(e))
    }

    /// `path` resolved, its final symlink (inside the root) followed
    /// ([`Place::through_link`]: by the kernel, from the parent's descriptor).
    fn followed(&self, path: &Path) -> Result<Place, FileError> {
        self.place(path, false)?
            .through_link(&self.policy)
            .map_err(|e| self.words(e))
    }

    /// A path outside the sandbox root in sandboxd's words.
    fn words(&self, e: FileError) -> FileError {
        match e.kind {
            Kind::Outside => escapes(),
            _ => e,
        }
    }
}

/// A listing entry in sandboxd's shape.
#[derive(Debug, Serialize)]
struct FileEntry {
    name: String,
    size: u64,
    #[serde(rename = "type")]
    kind: &'static str,
    modified_at: String,
    mode: String,
}

/// `DirectoryListing`.
#[derive(Debug, Serialize)]
struct DirectoryListing {
    path: String,
    entries: Vec<FileEntry>,
}

/// What a `GET` found.
enum Found {
    Listing(DirectoryListing),
    File(read::Opened, PathBuf),
}

/// Whether sandboxd's REST paths share the MCP listener at `mcp` (the same
/// address, and not port 0, which asks each for a free port).
pub fn shares(rest: &SandboxdRest, mcp: Option<SocketAddr>) -> bool {
    let addr = rest.auth.addr();
    addr.port() != 0 && Some(addr) == mcp
}

/// sandboxd's `/v1/` paths as a route of the MCP listener (when they share
/// its address): mounted there by the code that assembles the listeners.
pub fn mount(rest: SandboxdRest, app: Arc<App>, shutdown: &CancellationToken) -> Mount {
    let checks_token = rest.auth.has_token();
    let (rest, shutdown) = (Arc::new(rest), shutdown.clone());
    Mount {
        prefix: "/v1",
        checks_token,
        handler: Arc::new(move |req| {
            let (rest, app, shutting_down) =
                (Arc::clone(&rest), Arc::clone(&app), shutdown.is_cancelled());
            Box::pin(async move { handle(&rest, &app, shutting_down, req).await })
        }),
    }
}

/// Binds sandboxd's own REST listener through the floor and serves its
/// `/v1/` paths (anything else `404`) until the process exits; its
/// requests count in `in_flight`. The bound address is printed on stderr
/// (`mcp-exec: listening for sandboxd REST on ADDR`).
pub async fn start(
    rest: SandboxdRest,
    app: Arc<App>,
    shutdown: &CancellationToken,
    in_flight: &InFlight,
) -> std::io::Result<()> {
    let socket = accept::bind(rest.auth.addr(), "sandboxd REST").await?;
    let floor = accept::Listener {
        in_flight: Some(in_flight.clone()),
        ..accept::Listener::new(
            "sandboxd-rest",
            Protocol::Http1,
            app.config.listener_cap(),
            app.config.http_stall_timeout,
            rest.auth.has_token(),
        )
    };
    let route = mount(rest, app, shutdown);
    accept::serve(socket, floor, move |conn| {
        let (route, checked) = (route.clone(), route.clone());
        net::http::http1(
            conn,
            // Without a token every request is authorized (never evicted
            // while it serves one); with one, only being busy protects a
            // connection, as on this listener before the floor.
            move |_| !checked.checks_token,
            move |req| {
                let route = route.clone();
                async move {
                    if let Err(why) = crate::net::gate::one_host(req.headers()) {
                        return reply::status(StatusCode::BAD_REQUEST, why);
                    }
                    if route.covers(req.uri().path()) {
                        (route.handler)(req).await
                    } else {
                        reply::status(StatusCode::NOT_FOUND, "not found")
                    }
                }
            },
        )
    });
    Ok(())
}

/// Routes a `/v1/…` request (on the sandboxd listener, or on the MCP
/// listener sharing its address) after [`PlatformAuth::check`].
pub async fn handle(
    rest: &Arc<SandboxdRest>,
    app: &Arc<App>,
    shutting_down: bool,
    req: Request<Incoming>,
) -> HttpReply {
    let path = req.uri().path().to_owned();
    // A kubelet's probe carries no token (and learns nothing): the floor's
    // table says which paths are probes.
    let checked = if rest.auth.is_probe(req.method().as_str(), &path) {
        rest.auth.check_probe(req.uri(), req.headers())
    } else {
        rest.auth.check(req.uri(), req.headers())
    };
    if let Err(refusal) = checked {
        return refused(refusal);
    }
    let method = req.method().clone();
    if let Some(raw) = path
        .strip_prefix("/v1/files")
        .filter(|r| r.is_empty() || r.starts_with('/'))
    {
        let full = match sandbox_path(&rest.root, raw) {
            Ok(p) => p,
            Err(PathRefusal::Invalid(why)) => return failure(StatusCode::BAD_REQUEST, &why),
            Err(PathRefusal::Escapes) => return file_failure(&escapes()),
        };
        let shown = format!(
            "/{}",
            String::from_utf8_lossy(&path::percent_decode(raw).unwrap_or_default())
                .trim_start_matches('/')
        );
        let query = req.uri().query().unwrap_or("").to_owned();
        return match method {
            Method::GET | Method::HEAD => {
                get(rest, full, shown, &req, method == Method::HEAD).await
            }
            Method::PUT => put(rest, app, full, &query, req).await,
            Method::DELETE => delete(rest, full, &query).await,
            _ => not_allowed("GET, HEAD, PUT, DELETE"),
        };
    }
    match (method, path.as_str()) {
        (Method::GET | Method::HEAD, "/v1/health") => {
            if shutting_down {
                return failure(StatusCode::SERVICE_UNAVAILABLE, "sandboxd is shutting down");
            }
            let body = format!(
                "{}\n",
                serde_json::json!({"status": "ok", "uptime_seconds": rest.started.elapsed().as_secs()})
            );
            reply::json(StatusCode::OK, body)
        }
        (Method::GET | Method::HEAD, "/v1/metadata") => {
            reply::json(StatusCode::OK, rest.metadata.clone())
        }
        (_, "/v1/health" | "/v1/metadata") => not_allowed("GET, HEAD"),
        _ => failure(StatusCode::NOT_FOUND, "no such endpoint"),
    }
}

fn refused(refusal: Refusal) -> HttpReply {
    let mut r = failure(refusal.status(), refusal.message());
    if refusal.status() == StatusCode::UNAUTHORIZED {
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

fn not_allowed(allow: &'static str) -> HttpReply {
    let mut r = failure(
        StatusCode::METHOD_NOT_ALLOWED,
        &format!("this path takes {allow}"),
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

async fn get(
    rest: &Arc<SandboxdRest>,
    full: PathBuf,
    shown: String,
    req: &Request<Incoming>,
    head: bool,
) -> HttpReply {
    let range = req
        .headers()
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let r = Arc::clone(rest);
    let found = blocking(move || {
        let place = r.followed(&full)?;
        let st = read::lstat(&place)?
            .ok_or_else(|| FileError::errno(rustix::io::Errno::NOENT, "reading", &full))?;
        if tree::is_dir(&st) {
            if head {
                return Ok(Found::Listing(DirectoryListing {
                    path: shown,
                    entries: Vec::new(),
                }));
            }
            return listing(&r, &place, shown).map(Found::Listing);
        }
        read::open(&place).map(|o| Found::File(o, place.path.clone()))
    })
    .await;
    match found {
        // HEAD: no body, whatever the status (hyper sends none).
        Err(e) => file_failure(&e),
        Ok(Found::Listing(_)) if head => reply::typed(
            StatusCode::OK,
            "application/json",
            crate::net::body::Body::empty(),
        ),
        Ok(Found::Listing(l)) => json_reply(StatusCode::OK, &l),
        Ok(Found::File(opened, path)) => {
            let mut reply = send_file(opened, &path, range.as_deref(), head);
            if reply.status() == StatusCode::RANGE_NOT_SATISFIABLE {
                let content_range = reply.headers_mut().remove(header::CONTENT_RANGE);
                reply = failure(
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    "invalid range: failed to overlap",
                );
                if let Some(v) = content_range {
                    reply.headers_mut().insert(header::CONTENT_RANGE, v);
                }
            }
            reply
        }
    }
}

/// Every entry of the directory at `place`, sandboxd's shape: symlinks
/// shown as what they lead to ([`Place::through_link`]), or left out.
fn listing(
    rest: &SandboxdRest,
    place: &Place,
    shown: String,
) -> Result<DirectoryListing, FileError> {
    let mut entries = Vec::new();
    let mut after: Option<OsString> = None;
    loop {
        let page = tree::list(place, tree::MAX_LIMIT, after.as_deref())?;
        for e in page.entries {
            let (kind, size, mode, mtime) = if e.kind == "symlink" {
                let Some(st) = rest
                    .followed(&place.path.join(&e.name))
                    .ok()
                    .and_then(|t| read::lstat(&t).ok().flatten())
                else {
                    continue;
                };
                let secs = u64::try_from(st.st_mtime).unwrap_or(0);
                let mtime = humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH + Duration::from_secs(secs),
                )
                .to_string();
                (
                    if tree::is_dir(&st) {
                        "directory"
                    } else {
                        "file"
                    },
                    u64::try_from(st.st_size).unwrap_or(0),
                    st.st_mode,
                    mtime,
                )
            } else {
                let mode = u32::from_str_radix(&e.mode, 8).unwrap_or(0);
                let kind = if e.kind == "dir" { "directory" } else { "file" };
                (kind, e.size, mode, e.mtime)
            };
            entries.push(FileEntry {
                name: e.name,
                size,
                kind,
                modified_at: mtime,
                mode: format!("{:04o}", mode & 0o777),
            });
        }
        match page.next {
            Some(next) => after = Some(OsString::from(next)),
            None => break,
        }
    }
    Ok(DirectoryListing {
        path: shown,
        entries,
    })
}

/// A `?key=value` of a query, percent-decoded (a `+` is a plus).
fn query_value(query: &str, key: &str) -> Option<String> {
    Query::parse(Some(query), Plus::Literal).text(key)
}

/// Go's `strconv.ParseBool`.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Where a `PUT` writes: placed before the body is read when its parent
/// exists (a final symlink followed), else placed, its parents made, when
/// the body starts.
enum Dest {
    Placed(Place),
    Later(PathBuf),
}

async fn put(
    rest: &Arc<SandboxdRest>,
    app: &Arc<App>,
    full: PathBuf,
    query: &str,
    req: Request<Incoming>,
) -> HttpReply {
    // sandboxd gives every written file its mode, 0644 unless asked.
    let mode = match query_value(query, "mode").filter(|m| !m.is_empty()) {
        None => crate::files::commit::DEFAULT_MODE,
        Some(m) => match mode::parse_mode(&m, Form::Sandboxd) {
            Ok(m) => m,
            Err(ModeError::Malformed) => {
                return failure(
                    StatusCode::BAD_REQUEST,
                    &format!("mode {m:?} must match ^0[0-7]{{3}}$"),
                );
            }
            Err(e @ ModeError::SetId(_)) => {
                return failure(StatusCode::BAD_REQUEST, &e.to_string());
            }
        },
    };
    let r = Arc::clone(rest);
    let dest = match blocking(move || {
        // Any refusal of the path (a parent missing, …) is the commit's
        // to say, once its parents have been made.
        let Ok(place) = r.place(&full, false) else {
            return Ok(Dest::Later(full));
        };
        let place = place.through_link(&r.policy).map_err(|e| r.words(e))?;
        if read::lstat(&place)?.is_some_and(|st| tree::is_dir(&st)) {
            return Err(FileError::new(Kind::Invalid, "target path is a directory"));
        }
        Ok(Dest::Placed(place))
    })
    .await
    {
        Ok(d) => d,
        Err(e) => return file_failure(&e),
    };
    let opts = Options {
        mode: Some(mode),
        overwrite: true,
    };
    let stall = app.config.http_stall_timeout;
    let r = Arc::clone(rest);
    let open = move || match dest {
        Dest::Placed(place) => Staged::create(place),
        Dest::Later(path) => Staged::create(r.place(&path, true)?),
    };
    let boundary = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(multipart::boundary);
    let body = req.into_body();
    let got = match boundary {
        Some(b) => receive(&mut FilePart::new(body, &b), stall, open, None, opts).await,
        None => {
            let mut body = body;
            receive(&mut body, stall, open, None, opts).await
        }
    };
    let reply = match got.outcome {
        _ if got.stalled => failure(
            StatusCode::REQUEST_TIMEOUT,
            "the body stalled (MCP_EXEC_HTTP_STALL_TIMEOUT); nothing was written",
        ),
        Ok(_) => reply::empty(StatusCode::NO_CONTENT),
        Err(e) => file_failure(&e),
    };
    if got.complete {
        reply
    } else {
        reply::closing(reply)
    }
}

async fn delete(rest: &Arc<SandboxdRest>, full: PathBuf, query: &str) -> HttpReply {
    let recursive = match query_value(query, "recursive").filter(|v| !v.is_empty()) {
        None => false,
        Some(v) => match parse_bool(&v) {
            Some(b) => b,
            None => {
                return failure(
                    StatusCode::BAD_REQUEST,
                    &format!("recursive {v:?} must be a boolean"),
                );
            }
        },
    };
    let r = Arc::clone(rest);
    match blocking(move || tree::remove(&r.place(&full, false)?, recursive)).await {
        Ok(()) => reply::empty(StatusCode::NO_CONTENT),
        Err(e) => file_failure(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_path_is_one_decoded_segment_joined_to_the_root() {
        let root = Path::new("/workspace");
        let p = |raw: &str| sandbox_path(root, raw);
        assert_eq!(
            p("/dir%2Fa%20b.txt"),
            Ok(PathBuf::from("/workspace/dir/a b.txt"))
        );
        assert_eq!(p("/dir/a"), Ok(PathBuf::from("/workspace/dir/a")));
        assert_eq!(p("/"), Ok(PathBuf::from("/workspace")));
        assert_eq!(p(""), Ok(PathBuf::from("/workspace")));
        assert_eq!(p("/%2E%2Fx%2F.%2Fy"), Ok(PathBuf::from("/workspace/x/y")));
        assert_eq!(p("/a%2F..%2Fb"), Ok(PathBuf::from("/workspace/b")));
        // An absolute path under the root is that path (SanitizePath).
        assert_eq!(p("/%2Fworkspace%2Fx"), Ok(PathBuf::from("/workspace/x")));
        assert_eq!(
            p("/%2Fworkspacex"),
            Ok(PathBuf::from("/workspace/workspacex"))
        );
        assert_eq!(
            p("/%2Fetc%2Fpasswd"),
            Ok(PathBuf::from("/workspace/etc/passwd"))
        );
        let raw = p("/%FF").unwrap();
        assert_eq!(raw.as_os_str().as_bytes(), b"/workspace/\xff");
    }

    #[test]
    fn climbing_above_the_root_is_refused_as_traversal_and_bad_bytes_as_invalid() {
        let root = Path::new("/workspace");
        for raw in ["/..", "/%2E%2E", "/a%2F..%2F..%2Fetc", "/../../etc/passwd"] {
            assert_eq!(sandbox_path(root, raw), Err(PathRefusal::Escapes), "{raw}");
        }
        assert!(matches!(
            sandbox_path(root, "/a%00"),
            Err(PathRefusal::Invalid(_))
        ));
        assert!(matches!(
            sandbox_path(root, "/a%zz"),
            Err(PathRefusal::Invalid(_))
        ));
    }

    #[test]
    fn a_bool_is_gos_parse_bool() {
        assert_eq!(parse_bool("true"), Some(true));
        assert_eq!(parse_bool("0"), Some(false));
        assert_eq!(parse_bool("yes"), None);
    }

    #[test]
    fn metadata_shows_the_prefixed_variables_and_withholds_credentials() {
        let vars = [
            ("SANDBOX_ID", "sb-1"),
            ("SANDBOX_NAMESPACE", "default"),
            ("SANDBOX_API_TOKEN", "t"),
            ("SANDBOX_db_password", "p"),
            ("SANDBOX_SSH_KEY", "k"),
            ("SANDBOX_TLS_CERT", "c"),
            ("HOME", "/root"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let body = metadata_body(vars.into_iter(), "SANDBOX_");
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"env": {"SANDBOX_ID": "sb-1", "SANDBOX_NAMESPACE": "default"}})
        );
    }

    #[test]
    fn errors_carry_sandboxds_codes() {
        let code = |e: FileError| {
            let r = file_failure(&e);
            r.status()
        };
        assert_eq!(
            code(FileError::new(Kind::NotFound, "x")),
            StatusCode::NOT_FOUND
        );
        assert_eq!(code(escapes()), StatusCode::FORBIDDEN);
        assert_eq!(
            code(FileError::new(Kind::Denied, "x")),
            StatusCode::FORBIDDEN
        );
        for kind in [Kind::Exists, Kind::NotEmpty, Kind::CrossDevice, Kind::Root] {
            assert_eq!(code(FileError::new(kind, "x")), StatusCode::CONFLICT);
        }
        assert_eq!(
            code(FileError::new(Kind::NoSpace, "x")),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
