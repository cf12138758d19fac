//! envd's `filesystem.Filesystem` (docs/envd.md, "Filesystem"): `Stat`,
//! `MakeDir`, `Move`, `ListDir`, `Remove` as functions
//! over their ProtoJSON messages (lowerCamelCase, enums by name, int64 as a
//! string, `Timestamp` as RFC 3339), each a mapping onto [`crate::files`]:
//! a path is resolved once under the working-directory policy to a
//! [`Place`] and used only through `*at` calls. The watchers
//! (`CreateWatcher`/`GetWatcherEvents`/`RemoveWatcher`, `WatchDir`) are in
//! [`super::watchers`].
//!
//! # Paths
//! A relative path (and `~`, `~/…`) is relative to the user's home, as in
//! envd: the home of the user the request names (`Authorization: Basic`
//! for RPCs, `?username=` for `/files`) from `/etc/passwd`, else the
//! server's `$HOME`, else `/` ([`absolute`]). No `.`/`..` components
//! (the rule of [`crate::files::path`]).
//!
//! # Differences from envd, on purpose
//! - `Remove` of a directory removes it recursively (as envd's
//!   `os.RemoveAll`) but never follows a symlink and refuses an allowed
//!   root or `/`.
//! - `Move` never replaces a non-empty directory, and across file systems
//!   it is refused (`failed_precondition`) rather than copied.
//! - `MakeDir` creates the missing parents (as envd) with mode 0755, owned
//!   by the server's user; envd chowns them to the request's user.
//! - `ListDir` gives at most [`MAX_ENTRIES`] entries (`resource_exhausted`
//!   beyond), in name order per directory; envd has no bound.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hyper::Request;
use hyper::body::Incoming;
use rustix::fs::{AtFlags, FileType as RawType, Stat};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::EnvdState;
use super::connect::{
    Code, ConnectError, Envelopes, Meta, Shape, end, message, ok, refusal, stream_request,
    unary_request,
};
use super::watchers::{self, WatchRequest, WatcherRequest};
use crate::files::place::Place;
use crate::files::transfer::blocking;
use crate::files::{FileError, Kind, path, tree};
use crate::net::reply::HttpReply;
use crate::policy::cwd::CwdPolicy;
use crate::server::app::App;

/// The most entries one `ListDir` answers.
pub const MAX_ENTRIES: usize = 100_000;
/// How deep `ListDir` goes at most, whatever `depth` asks.
pub const MAX_DEPTH: u32 = 64;

/// A Connect error: its code (`not_found`, …) decides the HTTP status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The Connect code, e.g. `not_found`.
    pub code: &'static str,
    /// The text the client sees (names the path).
    pub message: String,
}

impl RpcError {
    /// An error with this code and text.
    pub fn new(code: &'static str, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
        }
    }
}

impl From<FileError> for RpcError {
    fn from(e: FileError) -> RpcError {
        let code = match e.kind {
            Kind::Invalid => "invalid_argument",
            Kind::Outside | Kind::Denied | Kind::Root => "permission_denied",
            Kind::NotFound => "not_found",
            Kind::Exists
            | Kind::NotEmpty
            | Kind::NotRegular
            | Kind::NotDirectory
            | Kind::IsDirectory
            | Kind::Symlink
            | Kind::CrossDevice
            | Kind::Busy
            | Kind::TooDeep => "failed_precondition",
            Kind::TooLarge | Kind::NoSpace | Kind::Exhausted => "resource_exhausted",
            Kind::Mismatch => "data_loss",
            Kind::Io => "internal",
        };
        RpcError::new(code, e.message)
    }
}

/// `FileType`, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EntryType {
    /// Neither of the others (a FIFO, socket, device, a dangling link).
    #[serde(rename = "FILE_TYPE_UNSPECIFIED")]
    Unspecified,
    /// A regular file.
    #[serde(rename = "FILE_TYPE_FILE")]
    File,
    /// A directory.
    #[serde(rename = "FILE_TYPE_DIRECTORY")]
    Directory,
    /// A symbolic link whose target could not be stat'ed.
    #[serde(rename = "FILE_TYPE_SYMLINK")]
    Symlink,
}

/// `EntryInfo` as envd fills it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryInfo {
    /// The final component.
    pub name: String,
    /// A symlink has its target's type here (and `isSymlink`), as newer
    /// envd does.
    #[serde(rename = "type")]
    pub kind: EntryType,
    /// The absolute path.
    pub path: String,
    /// `st_size`, an int64: a string in ProtoJSON.
    #[serde(with = "int64")]
    pub size: u64,
    /// The permission bits (`mode & 0o777`, Go's `FileMode.Perm()`).
    pub mode: u32,
    /// Go's `FileMode.String()`: `-rw-r--r--`, `drwxr-xr-x`, `Lrwxrwxrwx`.
    pub permissions: String,
    /// The owner's name from `/etc/passwd`, else the uid.
    pub owner: String,
    /// The group's name from `/etc/group`, else the gid.
    pub group: String,
    /// `st_mtime`, RFC 3339 with nanoseconds.
    pub modified_time: String,
    /// A symlink's target as stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symlink_target: Option<String>,
    /// Whether the entry itself is a symlink (omitted when false: proto3
    /// JSON leaves defaults out).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub is_symlink: bool,
}

/// ProtoJSON writes int64 as a decimal string.
mod int64 {
    pub fn serialize<S: serde::Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }
}

/// `{path}`: `Stat`, `MakeDir`, `Remove`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct PathRequest {
    /// The path (relative: to the home).
    pub path: String,
}

/// `MoveRequest`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct MoveRequest {
    /// From.
    pub source: String,
    /// To.
    pub destination: String,
}

/// `ListDirRequest`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ListDirRequest {
    /// The directory.
    pub path: String,
    /// 0 is 1 (envd): the directory's own entries.
    pub depth: u32,
}

/// `{entry}`: the answer of `Stat`, `MakeDir`, `Move`.
#[derive(Debug, Serialize)]
pub struct EntryResponse {
    /// The entry.
    pub entry: EntryInfo,
}

/// `ListDirResponse`.
#[derive(Debug, Serialize)]
pub struct ListDirResponse {
    /// The entries, depth-first, each directory's in name order.
    pub entries: Vec<EntryInfo>,
}

/// User and group names, read once per request.
pub struct Names {
    passwd: String,
    group: String,
}

impl Names {
    /// Reads `/etc/passwd` and `/etc/group` (missing: numbers are shown).
    pub fn load() -> Names {
        Names {
            passwd: std::fs::read_to_string("/etc/passwd").unwrap_or_default(),
            group: std::fs::read_to_string("/etc/group").unwrap_or_default(),
        }
    }

    fn lookup(table: &str, id: u32) -> String {
        let id_text = id.to_string();
        table
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.len() > 2 && f[2] == id_text)
            .map_or(id_text, |f| f[0].to_owned())
    }

    /// The owner's name.
    pub fn user(&self, uid: u32) -> String {
        Self::lookup(&self.passwd, uid)
    }

    /// The group's name.
    pub fn group(&self, gid: u32) -> String {
        Self::lookup(&self.group, gid)
    }

    /// The home directory of `user` (a name), if it has an entry.
    pub fn home_of(&self, user: &str) -> Option<PathBuf> {
        self.passwd
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.len() > 5 && f[0] == user)
            .map(|f| PathBuf::from(f[5]))
    }
}

/// The home a relative path is relative to (module doc).
pub fn home(names: &Names, user: Option<&str>) -> PathBuf {
    if let Some(h) = user
        .filter(|u| !u.is_empty())
        .and_then(|u| names.home_of(u))
    {
        return h;
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// `text` as an absolute, normalised path: relative ones (and `~`, `~/…`)
/// joined to `home`.
pub fn absolute(text: &str, home: &Path) -> Result<PathBuf, RpcError> {
    let joined;
    let text = if text.starts_with('/') {
        text
    } else {
        let rest = text
            .strip_prefix('~')
            .filter(|r| r.is_empty() || r.starts_with('/'))
            .unwrap_or(text);
        joined = format!("{}/{rest}", home.display());
        &joined
    };
    path::from_text(text).map_err(|e| RpcError::new("invalid_argument", e.to_string()))
}

/// Go's `FileMode.String()` of a `st_mode`.
pub fn permissions(st_mode: u32) -> String {
    let mut s = String::with_capacity(12);
    match RawType::from_raw_mode(st_mode) {
        RawType::Directory => s.push('d'),
        RawType::Symlink => s.push('L'),
        RawType::BlockDevice => s.push('D'),
        RawType::CharacterDevice => s.push_str("Dc"),
        RawType::Fifo => s.push('p'),
        RawType::Socket => s.push('S'),
        _ => {}
    }
    if st_mode & 0o4000 != 0 {
        s.push('u');
    }
    if st_mode & 0o2000 != 0 {
        s.push('g');
    }
    if st_mode & 0o1000 != 0 {
        s.push('t');
    }
    if s.is_empty() {
        s.push('-');
    }
    for (i, c) in "rwxrwxrwx".chars().enumerate() {
        s.push(if st_mode & (1 << (8 - i)) != 0 {
            c
        } else {
            '-'
        });
    }
    s
}

fn rfc3339(secs: i64, nanos: i64) -> String {
    let at = if secs >= 0 {
        SystemTime::UNIX_EPOCH
            + Duration::new(
                secs.unsigned_abs(),
                u32::try_from(nanos.clamp(0, 999_999_999)).unwrap_or(0),
            )
    } else {
        SystemTime::UNIX_EPOCH
    };
    humantime::format_rfc3339_nanos(at).to_string()
}

/// The `EntryInfo` of `name` in `dir` with its `lstat` `st`, at `path`.
pub fn entry_info(
    dir: impl rustix::fd::AsFd,
    name: &OsStr,
    st: &Stat,
    path: &Path,
    names: &Names,
) -> EntryInfo {
    let raw = RawType::from_raw_mode(st.st_mode);
    let is_symlink = raw == RawType::Symlink;
    let (kind, symlink_target) = if is_symlink {
        let target = rustix::fs::readlinkat(&dir, name, Vec::new())
            .ok()
            .map(|t| String::from_utf8_lossy(t.as_bytes()).into_owned());
        // The target's type: a stat that follows the link (the type only;
        // nothing is opened).
        let kind = match rustix::fs::statat(&dir, name, AtFlags::empty()) {
            Ok(t) => type_of(RawType::from_raw_mode(t.st_mode)),
            Err(_) => EntryType::Symlink,
        };
        (kind, target)
    } else {
        (type_of(raw), None)
    };
    EntryInfo {
        name: String::from_utf8_lossy(name.as_bytes()).into_owned(),
        kind,
        path: String::from_utf8_lossy(path.as_os_str().as_bytes()).into_owned(),
        size: u64::try_from(st.st_size).unwrap_or(0),
        mode: st.st_mode & 0o777,
        permissions: permissions(st.st_mode),
        owner: names.user(st.st_uid),
        group: names.group(st.st_gid),
        modified_time: rfc3339(st.st_mtime, st.st_mtime_nsec as i64),
        symlink_target,
        is_symlink,
    }
}

fn type_of(raw: RawType) -> EntryType {
    match raw {
        RawType::RegularFile => EntryType::File,
        RawType::Directory => EntryType::Directory,
        _ => EntryType::Unspecified,
    }
}

/// The entry of a resolved place (not followed), or `not_found`.
pub fn stat_place(place: &Place, names: &Names) -> Result<EntryInfo, RpcError> {
    let st = rustix::fs::statat(&place.dir, &place.name, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| FileError::errno(e, "reading", &place.path))?;
    let mut e = entry_info(&place.dir, &place.name, &st, &place.path, names);
    if let Some(name) = place.entry_name() {
        e.name = name;
    }
    Ok(e)
}

/// Who the request is for, and the policy it is resolved under.
pub struct Ctx {
    /// Holds the working-directory policy.
    policy: Arc<dyn AsRef<CwdPolicy> + Send + Sync>,
    /// The user the request names, if any.
    pub user: Option<String>,
}

/// The server's policy, kept alive by its [`App`].
struct AppPolicy(Arc<App>);

impl AsRef<CwdPolicy> for AppPolicy {
    fn as_ref(&self) -> &CwdPolicy {
        &self.0.cwd
    }
}

impl Ctx {
    /// The request's context from the app and the user it named.
    pub fn new(app: &Arc<App>, user: Option<String>) -> Ctx {
        Ctx {
            policy: Arc::new(AppPolicy(Arc::clone(app))),
            user,
        }
    }

    /// A context over a policy of its own.
    #[cfg(test)]
    pub fn with_policy(policy: Arc<CwdPolicy>, user: Option<String>) -> Ctx {
        struct Own(Arc<CwdPolicy>);
        impl AsRef<CwdPolicy> for Own {
            fn as_ref(&self) -> &CwdPolicy {
                &self.0
            }
        }
        Ctx {
            policy: Arc::new(Own(policy)),
            user,
        }
    }

    /// The working-directory policy.
    pub fn policy(&self) -> &CwdPolicy {
        (*self.policy).as_ref()
    }

    fn resolve(&self, names: &Names, text: &str, mkdirs: bool) -> Result<Place, RpcError> {
        let path = absolute(text, &home(names, self.user.as_deref()))?;
        Ok(Place::resolve(self.policy(), &path, mkdirs)?)
    }
}

/// Runs `f` on the file workers' blocking pool with the user names loaded.
async fn run<T: Send + 'static>(
    ctx: Ctx,
    f: impl FnOnce(&Ctx, &Names) -> Result<T, RpcError> + Send + 'static,
) -> Result<T, RpcError> {
    let done = blocking(move || Ok(f(&ctx, &Names::load()))).await;
    done.map_err(RpcError::from)?
}

/// `Stat {path}` → `{entry}`; a missing path is `not_found`.
pub async fn stat(ctx: Ctx, req: PathRequest) -> Result<EntryResponse, RpcError> {
    run(ctx, move |ctx, names| {
        let place = ctx.resolve(names, &req.path, false)?;
        Ok(EntryResponse {
            entry: stat_place(&place, names)?,
        })
    })
    .await
}

/// `MakeDir {path}` → `{entry}`, parents created; an existing directory is
/// `already_exists` (the SDK's `make_dir` then answers `False`), an
/// existing non-directory `invalid_argument` (as envd).
pub async fn make_dir(ctx: Ctx, req: PathRequest) -> Result<EntryResponse, RpcError> {
    run(ctx, move |ctx, names| {
        let place = ctx.resolve(names, &req.path, true)?;
        if let Some(st) = crate::files::read::lstat(&place)? {
            return Err(if tree::is_dir(&st) {
                RpcError::new(
                    "already_exists",
                    format!("directory already exists: {}", place.path.display()),
                )
            } else {
                RpcError::new(
                    "invalid_argument",
                    format!(
                        "path already exists but it is not a directory: {}",
                        place.path.display()
                    ),
                )
            });
        }
        match tree::mkdir(&place, false) {
            Ok(_) => {}
            // Made meanwhile by someone else: it exists.
            Err(e) if e.kind == Kind::Exists => {
                return Err(RpcError::new("already_exists", e.message));
            }
            Err(e) => return Err(e.into()),
        }
        Ok(EntryResponse {
            entry: stat_place(&place, names)?,
        })
    })
    .await
}

/// `Move {source, destination}` → `{entry}` of the destination: an atomic
/// rename that replaces a file (as envd's `os.Rename`), never a non-empty
/// directory.
pub async fn move_entry(ctx: Ctx, req: MoveRequest) -> Result<EntryResponse, RpcError> {
    run(ctx, move |ctx, names| {
        let from = ctx.resolve(names, &req.source, false)?;
        let to = ctx.resolve(names, &req.destination, true)?;
        // Across file systems (`Kind::CrossDevice`) it is
        // `failed_precondition`, as every conflict.
        tree::rename(&from, &to, true)?;
        Ok(EntryResponse {
            entry: stat_place(&to, names)?,
        })
    })
    .await
}

/// `Remove {path}` → `{}`: a file or symlink is unlinked, a directory
/// removed with everything beneath it (module doc).
pub async fn remove(ctx: Ctx, req: PathRequest) -> Result<(), RpcError> {
    run(ctx, move |ctx, names| {
        let place = ctx.resolve(names, &req.path, false)?;
        Ok(tree::delete(&place, true)?)
    })
    .await
}

/// `ListDir {path, depth}` → `{entries}`: the directory's entries and,
/// down to `depth` levels, those of its subdirectories (symlinks never
/// followed below the top). The top may be a symlink to a directory (as
/// envd, which resolves it); entries keep the path as asked.
pub async fn list_dir(ctx: Ctx, req: ListDirRequest) -> Result<ListDirResponse, RpcError> {
    run(ctx, move |ctx, names| {
        let depth = req.depth.clamp(1, MAX_DEPTH);
        let top = absolute(&req.path, &home(names, ctx.user.as_deref()))?;
        let place = Place::resolve(ctx.policy(), &top, false)?;
        let st = crate::files::read::lstat(&place)?.ok_or_else(|| {
            RpcError::new(
                "not_found",
                format!("directory not found: {}", top.display()),
            )
        })?;
        // A symlink at the top is followed once, to the directory it
        // names, resolved again under the policy.
        let listed = if RawType::from_raw_mode(st.st_mode) == RawType::Symlink {
            let target = rustix::fs::readlinkat(&place.dir, &place.name, Vec::new())
                .map_err(|e| FileError::errno(e, "reading", &top))?;
            let target = Path::new(OsStr::from_bytes(target.as_bytes()));
            let parent = top.parent().unwrap_or(Path::new("/"));
            let resolved = absolute(
                &String::from_utf8_lossy(target.as_os_str().as_bytes()),
                parent,
            )?;
            Place::resolve(ctx.policy(), &resolved, false)?
        } else {
            place
        };
        let mut entries = Vec::new();
        walk(ctx, names, &listed, &top, depth, &mut entries)?;
        Ok(ListDirResponse { entries })
    })
    .await
}

/// Appends the entries of the directory `place` (shown under `shown`) and,
/// while `depth` > 1, of its subdirectories.
fn walk(
    ctx: &Ctx,
    names: &Names,
    place: &Place,
    shown: &Path,
    depth: u32,
    out: &mut Vec<EntryInfo>,
) -> Result<(), RpcError> {
    let mut after: Option<std::ffi::OsString> = None;
    loop {
        let page = tree::list(place, tree::MAX_LIMIT, after.as_deref()).map_err(|e| {
            if e.kind == Kind::NotDirectory {
                RpcError::new(
                    "invalid_argument",
                    format!("path is not a directory: {}", shown.display()),
                )
            } else {
                e.into()
            }
        })?;
        for entry in &page.entries {
            if out.len() >= MAX_ENTRIES {
                return Err(RpcError::new(
                    "resource_exhausted",
                    format!(
                        "{} holds more than {MAX_ENTRIES} entries at depth {depth}: list less deep",
                        shown.display()
                    ),
                ));
            }
            let name = OsStr::new(&entry.name);
            let child = shown.join(name);
            let real = place.path.join(name);
            let Ok(child_place) = Place::resolve(ctx.policy(), &real, false) else {
                continue;
            };
            let Ok(Some(st)) = crate::files::read::lstat(&child_place) else {
                continue;
            };
            out.push(entry_info(
                &child_place.dir,
                &child_place.name,
                &st,
                &child,
                names,
            ));
            if depth > 1 && tree::is_dir(&st) {
                walk(ctx, names, &child_place, &child, depth - 1, out)?;
            }
        }
        match page.next {
            Some(n) => after = Some(n.into()),
            None => return Ok(()),
        }
    }
}

// ---------------------------------------------------------------------------
// The RPCs on the wire (Connect, JSON codec: `super::connect`).
// ---------------------------------------------------------------------------

/// The user an RPC names: `Authorization: Basic base64("<user>:")` (the
/// SDK's `user=`), if any.
fn basic_user(headers: &hyper::HeaderMap) -> Option<String> {
    use base64::Engine;
    let v = headers.get(hyper::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = v.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let user = text.split(':').next().unwrap_or("");
    (!user.is_empty()).then(|| user.to_owned())
}

/// Our error as Connect's.
pub(super) fn to_connect(e: &RpcError) -> ConnectError {
    let code = match e.code {
        "canceled" => Code::Canceled,
        "invalid_argument" => Code::InvalidArgument,
        "deadline_exceeded" => Code::DeadlineExceeded,
        "not_found" => Code::NotFound,
        "already_exists" => Code::AlreadyExists,
        "permission_denied" => Code::PermissionDenied,
        "resource_exhausted" => Code::ResourceExhausted,
        "failed_precondition" => Code::FailedPrecondition,
        "aborted" => Code::Aborted,
        "out_of_range" => Code::OutOfRange,
        "unimplemented" => Code::Unimplemented,
        "unavailable" => Code::Unavailable,
        "data_loss" => Code::DataLoss,
        "unauthenticated" => Code::Unauthenticated,
        "internal" => Code::Internal,
        _ => Code::Unknown,
    };
    ConnectError::new(code, e.message.clone())
}

/// A unary RPC: the message decoded, `f` run, its answer (or error) sent.
async fn unary<Req, Res, F>(body: Incoming, limit: usize, f: impl FnOnce(Req) -> F) -> HttpReply
where
    Req: serde::de::DeserializeOwned,
    Res: Serialize,
    F: std::future::Future<Output = Result<Res, RpcError>>,
{
    let req: Req = match unary_request(body, limit).await {
        Ok(r) => r,
        Err(e) => return e.unary(),
    };
    match f(req).await {
        Ok(res) => ok(&res),
        Err(e) => to_connect(&e).unary(),
    }
}

/// `{}`: the answer of `Remove` and `RemoveWatcher`.
#[derive(Serialize)]
struct Empty {}

/// Serves `/filesystem.Filesystem/<rpc>`.
pub(super) async fn handle(state: &Arc<EnvdState>, rpc: &str, req: Request<Incoming>) -> HttpReply {
    let streaming = rpc == "WatchDir";
    let shape = if streaming {
        Shape::ServerStream
    } else {
        Shape::Unary
    };
    if let Some(r) = refusal(req.headers(), shape) {
        return r;
    }
    let meta = match Meta::of(req.headers()) {
        Ok(m) => m,
        Err(e) if streaming => return Envelopes::failed(&e),
        Err(e) => return e.unary(),
    };
    let ctx = Ctx::new(&state.app, basic_user(req.headers()));
    let limit = state.max_message();
    let body = req.into_body();
    let watchers = &state.watchers;
    match rpc {
        "Stat" => unary(body, limit, |r| stat(ctx, r)).await,
        "MakeDir" => unary(body, limit, |r| make_dir(ctx, r)).await,
        "Move" => unary(body, limit, |r| move_entry(ctx, r)).await,
        "ListDir" => unary(body, limit, |r| list_dir(ctx, r)).await,
        "Remove" => {
            unary(body, limit, |r| async {
                remove(ctx, r).await.map(|()| Empty {})
            })
            .await
        }
        "CreateWatcher" => unary(body, limit, |r| watchers.create(ctx, r)).await,
        "GetWatcherEvents" => {
            unary(body, limit, |r: WatcherRequest| async move {
                watchers.events(&r)
            })
            .await
        }
        "RemoveWatcher" => {
            unary(body, limit, |r: WatcherRequest| async move {
                watchers.remove(&r).map(|()| Empty {})
            })
            .await
        }
        "WatchDir" => {
            let req: WatchRequest = match stream_request(body, limit).await {
                Ok(r) => r,
                Err(e) => return Envelopes::failed(&e),
            };
            let (tx, rx) = mpsc::channel(16);
            tokio::spawn(watchers::watch_dir(
                ctx,
                req,
                meta.keepalive,
                tx,
                message,
                |e| end(e.as_ref().map(to_connect).as_ref()),
            ));
            Envelopes::reply(rx)
        }
        _ => ConnectError::new(
            Code::Unimplemented,
            format!("filesystem.Filesystem/{rpc} does not exist"),
        )
        .unary(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "mcp-exec-envdfs-{}-{}",
                std::process::id(),
                N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("creating a temp dir");
            TempDir(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn ctx() -> Ctx {
        Ctx::with_policy(
            Arc::new(CwdPolicy::from_settings(None, None).unwrap()),
            None,
        )
    }

    #[test]
    fn permissions_read_as_gos_file_mode_string() {
        assert_eq!(permissions(0o100644), "-rw-r--r--");
        assert_eq!(permissions(0o040755), "drwxr-xr-x");
        assert_eq!(permissions(0o120777), "Lrwxrwxrwx");
        assert_eq!(permissions(0o104755), "urwxr-xr-x");
        assert_eq!(permissions(0o041777), "dtrwxrwxrwx");
        assert_eq!(permissions(0o010600), "prw-------");
    }

    #[test]
    fn relative_paths_and_the_tilde_resolve_against_the_home() {
        let home = Path::new("/home/user");
        assert_eq!(
            absolute("a/b", home).unwrap(),
            PathBuf::from("/home/user/a/b")
        );
        assert_eq!(absolute("~", home).unwrap(), PathBuf::from("/home/user"));
        assert_eq!(
            absolute("~/x", home).unwrap(),
            PathBuf::from("/home/user/x")
        );
        assert_eq!(absolute("/etc/x", home).unwrap(), PathBuf::from("/etc/x"));
        assert_eq!(
            absolute("~x", home).unwrap(),
            PathBuf::from("/home/user/~x")
        );
        assert_eq!(absolute("../x", home).unwrap_err().code, "invalid_argument");
    }

    #[test]
    fn names_and_homes_come_from_passwd_and_group() {
        let names = Names {
            passwd: "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000::/home/user:/bin/bash\n"
                .into(),
            group: "root:x:0:\nstaff:x:50:\n".into(),
        };
        assert_eq!(names.user(1000), "user");
        assert_eq!(names.user(4242), "4242");
        assert_eq!(names.group(50), "staff");
        assert_eq!(home(&names, Some("user")), PathBuf::from("/home/user"));
    }

    #[test]
    fn an_entry_info_is_protojson() {
        let e = EntryInfo {
            name: "a".into(),
            kind: EntryType::File,
            path: "/t/a".into(),
            size: 5,
            mode: 0o644,
            permissions: "-rw-r--r--".into(),
            owner: "root".into(),
            group: "root".into(),
            modified_time: "2026-12-01T00:00:00.000000000Z".into(),
            symlink_target: None,
            is_symlink: false,
        };
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["type"], "FILE_TYPE_FILE");
        assert_eq!(v["size"], "5");
        assert_eq!(v["mode"], 420);
        assert_eq!(v["modifiedTime"], "2026-12-01T00:00:00.000000000Z");
        assert!(v.get("isSymlink").is_none() && v.get("symlinkTarget").is_none());
        let r: MoveRequest =
            serde_json::from_str(r#"{"source":"a","destination":"b","x":1}"#).unwrap();
        assert_eq!((r.source.as_str(), r.destination.as_str()), ("a", "b"));
    }

    #[tokio::test]
    async fn stat_make_dir_list_move_and_remove_work_on_a_tree() {
        let tmp = TempDir::new();
        let root = tmp.path().to_str().unwrap().to_owned();
        let p = |s: &str| PathRequest {
            path: format!("{root}/{s}"),
        };
        let made = make_dir(ctx(), p("d/e")).await.unwrap();
        assert_eq!(made.entry.kind, EntryType::Directory);
        assert_eq!(made.entry.path, format!("{root}/d/e"));
        assert_eq!(
            make_dir(ctx(), p("d/e")).await.unwrap_err().code,
            "already_exists"
        );
        std::fs::write(tmp.path().join("d/e/f.txt"), b"hello").unwrap();
        std::os::unix::fs::symlink("e/f.txt", tmp.path().join("d/link")).unwrap();
        let st = stat(ctx(), p("d/e/f.txt")).await.unwrap().entry;
        assert_eq!(
            (st.kind, st.size, st.name.as_str()),
            (EntryType::File, 5, "f.txt")
        );
        let link = stat(ctx(), p("d/link")).await.unwrap().entry;
        assert!(link.is_symlink);
        assert_eq!(link.kind, EntryType::File);
        assert_eq!(link.symlink_target.as_deref(), Some("e/f.txt"));
        assert_eq!(stat(ctx(), p("nope")).await.unwrap_err().code, "not_found");

        let one = list_dir(
            ctx(),
            ListDirRequest {
                path: format!("{root}/d"),
                depth: 1,
            },
        )
        .await
        .unwrap();
        let names: Vec<_> = one.entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["e", "link"]);
        let two = list_dir(
            ctx(),
            ListDirRequest {
                path: format!("{root}/d"),
                depth: 2,
            },
        )
        .await
        .unwrap();
        let paths: Vec<_> = two.entries.iter().map(|e| e.path.clone()).collect();
        assert_eq!(
            paths,
            [
                format!("{root}/d/e"),
                format!("{root}/d/e/f.txt"),
                format!("{root}/d/link")
            ]
        );
        let not_dir = list_dir(
            ctx(),
            ListDirRequest {
                path: format!("{root}/d/e/f.txt"),
                depth: 1,
            },
        );
        assert_eq!(not_dir.await.unwrap_err().code, "invalid_argument");

        let moved = move_entry(
            ctx(),
            MoveRequest {
                source: format!("{root}/d/e/f.txt"),
                destination: format!("{root}/g.txt"),
            },
        )
        .await
        .unwrap();
        assert_eq!((moved.entry.name.as_str(), moved.entry.size), ("g.txt", 5));
        assert!(!tmp.path().join("d/e/f.txt").exists());
        remove(ctx(), p("d")).await.unwrap();
        assert!(!tmp.path().join("d").exists());
        assert_eq!(remove(ctx(), p("d")).await.unwrap_err().code, "not_found");
    }
}
