//! Watching a directory for changes (docs/http.md, `GET /files/<dir>?watch`):
//! inotify over a directory resolved under the working-directory policy,
//! optionally recursive, coalesced, bounded, and ended when dropped. The
//! HTTP `GET /files/<dir>?watch` stream and envd's `WatchDir` are thin
//! layers over [`Watch`].
//!
//! # The API
//! - [`Watch::open`] (a path, resolved under the policy) or [`Watch::new`]
//!   (a [`Place`] already resolved) → a [`Watch`]. Both block (they walk the
//!   tree when `recursive`): call them on the blocking pool; they need a
//!   tokio runtime (the descriptor is registered with its reactor; outside
//!   one they panic, as tokio does).
//! - [`Watch::next`] → `Some(`[`WatchEvent`]`)`, or `None` once the watch
//!   has ended on its own ([`Watch::end_reason`] says why: the directory
//!   was deleted or moved away, or a directory could no longer be watched).
//!   Cancel-safe: a `select!` or `timeout` that drops it loses nothing.
//! - [`WatchEvent::Change`] `{kind, path, from, is_dir}`: `kind` is
//!   [`Change::Create`], [`Change::Modify`] (content or metadata: `IN_MODIFY`,
//!   `IN_ATTRIB`), [`Change::Delete`] or [`Change::Move`] (`from` → `path`,
//!   both inside the watched tree). `path` is absolute, spelled from the
//!   watched directory's path as given ([`Watch::root`]).
//! - [`WatchEvent::Resync`]: events were lost (the kernel's queue
//!   overflowed, `IN_Q_OVERFLOW`, or ours reached [`Limits::max_events`]):
//!   the consumer lists the tree again. Never silent loss: everything
//!   dropped is covered by a `Resync` that comes after it.
//! - Dropping the [`Watch`] closes the inotify descriptor, which removes
//!   every watch it holds.
//!
//! # What is reported
//! - A file or directory created in, deleted from, or modified in a watched
//!   directory. Moved within the tree: one `Move`. Moved in from outside:
//!   a `Create`; moved out: a `Delete` (an `IN_MOVED_FROM` whose
//!   `IN_MOVED_TO` is not the next event the kernel holds; the kernel
//!   queues both halves of a rename together, so a `Move` split by a read
//!   between them is reported as `Delete` + `Create`, still the truth).
//! - Recursive: a directory that appears (created, moved in) is watched at
//!   once, then read: everything already in it is reported as `Create`
//!   (and its subdirectories watched the same way), so a file made between
//!   the `mkdir` and the watch is not lost. The watch is added *before* the
//!   directory is read, so nothing falls between the two (a file can be
//!   reported twice; coalescing drops the second while the first waits).
//! - The watched directory deleted, moved or unmounted ends the watch.
//!
//! # Coalescing, and bounded memory
//! A `Create` or `Modify` of a path whose last queued event is already a
//! `Create` or `Modify` is dropped: the consumer will look at that path
//! anyway (the kernel merges identical consecutive events too). At most
//! [`Limits::max_events`] events wait; one more replaces all of them with
//! a `Resync`, and until that `Resync` is taken every new change is
//! dropped too (the re-listing it asks for covers them). The directories
//! watched are capped by [`Limits::max_dirs`] (and the kernel's
//! `fs.inotify.max_user_watches`): over it at the start is an error; over
//! it later ends the watch after a `Resync`, rather than leave a directory
//! silently unwatched. Structural work (watching new directories) goes on
//! while events are dropped, so a `Resync` never leaves a directory
//! unwatched; after the kernel's own overflow the whole tree is walked
//! again to find directories whose creation was lost.
//!
//! # Under the policy, free of check-then-use races
//! The directory is resolved once ([`Place`]) and opened `O_PATH` without
//! following a final symlink; inotify is given that descriptor as
//! `/proc/self/fd/N`, so the watch is on exactly the directory that was
//! resolved (and file watch needs `/proc`, which a container has). A
//! subdirectory is opened beneath the watched directory's descriptor one
//! component at a time with `O_NOFOLLOW`: a symlink is never followed, so
//! a recursive watch never leaves the tree it was given.
//!
//! # Cost
//! The syscalls of a batch (adding watches, reading a new directory) run
//! inline in [`Watch::next`]; they are bounded by the caps above.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use rustix::io::Errno;
use tokio::io::unix::AsyncFd;

use super::error::{FileError, Kind as ErrorKind};
use super::place::Place;
use crate::policy::cwd::CwdPolicy;

/// How much a watch may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Events that may wait to be taken; one more becomes a
    /// [`WatchEvent::Resync`].
    pub max_events: usize,
    /// Directories watched at once (one inotify watch each).
    pub max_dirs: usize,
}

impl Default for Limits {
    /// 16,384 events (a few MiB at worst), 10,000 directories.
    fn default() -> Limits {
        Limits {
            max_events: 16_384,
            max_dirs: 10_000,
        }
    }
}

/// What happened to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Created, or moved in from outside the tree.
    Create,
    /// Its content or metadata changed.
    Modify,
    /// Deleted, or moved out of the tree.
    Delete,
    /// Renamed within the tree (`from` → `path`).
    Move,
}

impl Change {
    /// `create`, `modify`, `delete` or `move`.
    pub fn name(self) -> &'static str {
        match self {
            Change::Create => "create",
            Change::Modify => "modify",
            Change::Delete => "delete",
            Change::Move => "move",
        }
    }
}

/// One event of a [`Watch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// A change of one path.
    Change {
        /// What happened.
        kind: Change,
        /// The path (absolute; for a `Move`, where it is now).
        path: PathBuf,
        /// For a `Move`, where it was.
        from: Option<PathBuf>,
        /// It is a directory.
        is_dir: bool,
    },
    /// Events were lost: list the tree again.
    Resync,
}

/// What inotify is asked to report for each watched directory.
const MASK: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR)
    // Files unlinked but still open report nothing more.
    .union(WatchFlags::EXCL_UNLINK);

/// A directory opened only to be watched or resolved from.
const DIR_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NOFOLLOW);

/// How deep a recursive watch goes; deeper is treated as over the cap.
const MAX_DEPTH: usize = 128;

/// The read buffer: many events per `read`, and more than one event with
/// the longest name (16 + `NAME_MAX` + 1 bytes), which the kernel needs.
const READ_BUF: usize = 32 * 1024;

/// The size of `struct inotify_event` without its name.
const EVENT_HEAD: usize = 16;

/// An `IN_MOVED_FROM` waiting for its `IN_MOVED_TO`.
#[derive(Debug)]
struct MovedFrom {
    cookie: u32,
    path: PathBuf,
    is_dir: bool,
}

/// One raw inotify event.
#[derive(Debug)]
struct Raw {
    wd: i32,
    mask: ReadFlags,
    cookie: u32,
    name: Option<OsString>,
}

/// A structural step could not be done: the watch is no longer complete.
struct Incomplete(String);

/// A watched directory; see the module doc.
pub struct Watch {
    fd: AsyncFd<OwnedFd>,
    /// The watched directory's parent (`O_PATH`) and the watched
    /// directory's name in it: subdirectories are opened beneath it. Not
    /// the directory itself: a descriptor held on it would keep the kernel
    /// from reporting its deletion (`IN_DELETE_SELF` waits for the last
    /// reference to its dentry) — except for an allowed root, which the
    /// policy holds open anyway.
    parent_fd: OwnedFd,
    root_name: OsString,
    /// The watched directory's device and inode: what is opened as it
    /// later must still be it.
    root_id: (u64, u64),
    /// The watched directory's path as given.
    root: PathBuf,
    root_wd: i32,
    recursive: bool,
    limits: Limits,
    /// Watch descriptor → the directory's absolute path.
    dirs: HashMap<i32, PathBuf>,
    queue: VecDeque<WatchEvent>,
    /// Paths whose last queued event is a `Create` or `Modify`
    /// (coalescing; see the module doc).
    pending: HashSet<PathBuf>,
    /// A `Resync` waits in the queue: new changes are dropped.
    resync_queued: bool,
    moved: Option<MovedFrom>,
    buf: Vec<u8>,
    /// Set when the watch has ended on its own; `next` gives `None` once
    /// the queue is empty.
    ended: Option<String>,
    /// Its place in the server's budget of inotify instances.
    _instance: Instance,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("root", &self.root)
            .field("recursive", &self.recursive)
            .field("dirs", &self.dirs.len())
            .field("queued", &self.queue.len())
            .finish_non_exhaustive()
    }
}

/// `a` joined with `rest`, without the trailing `/` an empty `rest` adds.
fn join(a: &Path, rest: &Path) -> PathBuf {
    if rest.as_os_str().is_empty() {
        a.to_owned()
    } else {
        a.join(rest)
    }
}

fn not_a_dir(path: &Path) -> FileError {
    FileError::new(
        ErrorKind::NotDirectory,
        format!("{path:?} is not a directory"),
    )
}

/// The inotify instances this server's watches may hold at once (every
/// `?watch` stream, envd watcher and `WatchDir` stream together):
/// `MCP_EXEC_MAX_WATCHES` ([`set_instance_budget`] at start-up), else a
/// quarter of `fs.inotify.max_user_instances`, at least one. The kernel
/// counts instances per user, and the jobs of the server's user draw on
/// the same count, so most of it is left to them (a job's own
/// `inotify_init1` must not fail because watches took everything: 32 of
/// the default 128 here, 96 left). Read once; 128 when it cannot be read.
pub fn instance_budget() -> usize {
    *BUDGET.get_or_init(|| {
        let max = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
            .ok()
            .and_then(|t| t.trim().parse::<usize>().ok())
            .unwrap_or(128);
        share_of_instances(max)
    })
}

static BUDGET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Sets [`instance_budget`] (`MCP_EXEC_MAX_WATCHES`), before the first
/// watch; a later call changes nothing.
pub fn set_instance_budget(n: usize) {
    let _ = BUDGET.set(n.max(1));
}

/// The server's share of `max` inotify instances (see [`instance_budget`]).
fn share_of_instances(max: usize) -> usize {
    (max / 4).max(1)
}

/// Watches open now, against [`instance_budget`].
static INSTANCES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One inotify instance of the budget, given back when dropped.
#[derive(Debug)]
struct Instance;

impl Instance {
    /// Takes one, or says that the budget is spent (`503`).
    fn take(path: &Path) -> Result<Instance, FileError> {
        use std::sync::atomic::Ordering;
        let budget = instance_budget();
        INSTANCES
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < budget).then_some(n + 1)
            })
            .map(|_| Instance)
            .map_err(|_| {
                FileError::new(
                    ErrorKind::Exhausted,
                    format!(
                        "watching {path:?}: {budget} watches are open, this server's share of \
                         fs.inotify.max_user_instances (MCP_EXEC_MAX_WATCHES; by default a \
                         quarter, the rest is left to jobs): end one (a ?watch stream, an envd \
                         watcher or WatchDir stream) first"
                    ),
                )
            })
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        INSTANCES.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl Watch {
    /// Watches the directory at `path` (absolute, normalised), resolved
    /// under `policy` (see [`Watch::new`]).
    pub fn open(
        policy: &CwdPolicy,
        path: &Path,
        recursive: bool,
        limits: Limits,
    ) -> Result<Watch, FileError> {
        Watch::new(&Place::resolve(policy, path, false)?, recursive, limits)
    }

    /// Watches the directory at `place` (a symlink there is not followed:
    /// `409`), and every directory beneath it when `recursive`. Blocks
    /// while it walks the tree; needs a tokio runtime. Errors: not found,
    /// not a directory, more directories than [`Limits::max_dirs`] or the
    /// kernel allows (`413`), the server's [`instance_budget`] spent
    /// (`503`), no inotify instance left, no `/proc`.
    pub fn new(place: &Place, recursive: bool, limits: Limits) -> Result<Watch, FileError> {
        let path = &place.path;
        let root_fd = rustix::fs::openat(&place.dir, &place.name, DIR_FLAGS, Mode::empty())
            .map_err(|e| match e {
                Errno::NOTDIR | Errno::LOOP => not_a_dir(path),
                e => FileError::errno(e, "watching", path),
            })?;
        let root_id = identity(&root_fd).map_err(|e| FileError::errno(e, "watching", path))?;
        let parent_fd = place
            .dir
            .try_clone()
            .map_err(|e| FileError::io(&e, "watching", path))?;
        let instance = Instance::take(path)?;
        let inotify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).map_err(|e| {
            match e {
                Errno::MFILE => FileError::new(
                    ErrorKind::Io,
                    format!(
                        "watching {path:?}: no inotify instance left (fs.inotify.max_user_instances)"
                    ),
                ),
                e => FileError::errno(e, "watching", path),
            }
        })?;
        let fd = init::register_fd(inotify).map_err(|e| FileError::io(&e, "watching", path))?;
        let mut watch = Watch {
            fd,
            parent_fd,
            root_name: place.name.clone(),
            root_id,
            root: path.clone(),
            root_wd: -1,
            recursive,
            limits,
            dirs: HashMap::new(),
            queue: VecDeque::new(),
            pending: HashSet::new(),
            resync_queued: false,
            moved: None,
            buf: vec![0; READ_BUF],
            ended: None,
            _instance: instance,
        };
        match watch.add(&root_fd, path.clone()) {
            Ok(Some(wd)) => watch.root_wd = wd,
            Ok(None) => {}
            Err(Errno::NOENT) if !Path::new("/proc/self/fd").exists() => {
                return Err(FileError::new(
                    ErrorKind::Io,
                    format!("watching {path:?}: file watch needs /proc, which is not mounted"),
                ));
            }
            Err(e) => return Err(watch_error(e, path, limits)),
        }
        if recursive {
            watch
                .walk(&root_fd, path.clone(), false, 0)
                .map_err(|Incomplete(why)| FileError::new(ErrorKind::TooLarge, why))?;
        }
        Ok(watch)
    }

    /// The watched directory's path as given.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Why the watch ended on its own, once it has.
    pub fn end_reason(&self) -> Option<&str> {
        self.ended.as_deref()
    }

    /// Directories watched now.
    pub fn watched_dirs(&self) -> usize {
        self.dirs.len()
    }

    /// The next event; `None` once the watch has ended on its own (see
    /// [`Watch::end_reason`]). Cancel-safe: nothing is lost when the
    /// future is dropped before it completes.
    pub async fn next(&mut self) -> Option<WatchEvent> {
        loop {
            if let Some(e) = self.pop() {
                return Some(e);
            }
            if self.ended.is_some() {
                return None;
            }
            // The only await is for readiness, before anything is read or
            // taken: a `next` dropped there (a `select!` that chose another
            // branch) loses nothing.
            let read = if self.moved.is_some() {
                // A move's other half would be queued already: nothing
                // there means it went out of the tree.
                match rustix::io::read(self.fd.get_ref(), &mut self.buf[..]) {
                    Err(Errno::AGAIN) => {
                        self.flush_moved();
                        continue;
                    }
                    other => other,
                }
            } else {
                match self.fd.readable().await {
                    Err(e) => Err(Errno::from_io_error(&e).unwrap_or(Errno::IO)),
                    Ok(mut guard) => match guard.try_io(|fd| {
                        rustix::io::read(fd.get_ref(), &mut self.buf[..])
                            .map_err(std::io::Error::from)
                    }) {
                        Ok(r) => r.map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO)),
                        Err(_would_block) => continue,
                    },
                }
            };
            match read {
                Ok(n) => {
                    for raw in parse(self.buf.get(..n).unwrap_or_default()) {
                        self.handle(raw);
                    }
                }
                Err(Errno::INTR | Errno::AGAIN) => {}
                Err(e) => self.end(format!(
                    "reading the watch of {:?}: {}",
                    self.root,
                    init::errno_text(&std::io::Error::from(e))
                )),
            }
        }
    }

    fn pop(&mut self) -> Option<WatchEvent> {
        let e = self.queue.pop_front()?;
        match &e {
            WatchEvent::Resync => self.resync_queued = false,
            WatchEvent::Change {
                kind: Change::Create | Change::Modify,
                path,
                ..
            } => {
                self.pending.remove(path);
            }
            WatchEvent::Change { .. } => {}
        }
        Some(e)
    }

    fn end(&mut self, why: String) {
        if self.ended.is_none() {
            tracing::debug!(root = ?self.root, why = %why, "file watch ended");
            self.ended = Some(why);
        }
    }

    /// Queues a change (coalesced; dropped while a `Resync` waits; a full
    /// queue becomes a `Resync`).
    fn push(&mut self, kind: Change, path: PathBuf, from: Option<PathBuf>, is_dir: bool) {
        match kind {
            Change::Create | Change::Modify if self.pending.contains(&path) => return,
            Change::Create | Change::Modify => {}
            Change::Delete | Change::Move => {
                if is_dir {
                    // Paths beneath it changed names: no coalescing on
                    // stale ones.
                    self.pending.clear();
                } else {
                    self.pending.remove(&path);
                    if let Some(from) = &from {
                        self.pending.remove(from);
                    }
                }
            }
        }
        if self.resync_queued {
            return;
        }
        if self.queue.len() >= self.limits.max_events {
            self.overflow();
            return;
        }
        if matches!(kind, Change::Create | Change::Modify) {
            self.pending.insert(path.clone());
        }
        self.queue.push_back(WatchEvent::Change {
            kind,
            path,
            from,
            is_dir,
        });
    }

    /// Everything queued is replaced by one `Resync`.
    fn overflow(&mut self) {
        self.queue.clear();
        self.pending.clear();
        self.queue.push_back(WatchEvent::Resync);
        self.resync_queued = true;
    }

    /// A structural step failed: say so with a `Resync`, then end (a
    /// directory left unwatched would lose its events silently).
    fn incomplete(&mut self, Incomplete(why): Incomplete) {
        self.overflow();
        self.end(why);
    }

    fn flush_moved(&mut self) {
        if let Some(m) = self.moved.take() {
            if m.is_dir && self.recursive {
                self.unwatch_beneath(&m.path);
            }
            self.push(Change::Delete, m.path, None, m.is_dir);
        }
    }

    fn handle(&mut self, raw: Raw) {
        if raw.mask.contains(ReadFlags::QUEUE_OVERFLOW) {
            self.moved = None;
            self.overflow();
            if self.recursive {
                // Directories created while events were lost have no
                // watch yet: walk the tree again.
                if let Err(why) = self.rewalk() {
                    self.incomplete(why);
                }
            }
            return;
        }
        let paired = raw.mask.contains(ReadFlags::MOVED_TO)
            && self.moved.as_ref().is_some_and(|m| m.cookie == raw.cookie);
        if !paired {
            self.flush_moved();
        }
        let Some(dir) = self.dirs.get(&raw.wd).cloned() else {
            // A watch removed since (moved out of the tree): stale.
            return;
        };
        if raw.mask.contains(ReadFlags::IGNORED) {
            self.dirs.remove(&raw.wd);
            if raw.wd == self.root_wd {
                self.end(format!("{:?} is gone", self.root));
            }
            return;
        }
        if raw.wd == self.root_wd {
            if raw.mask.contains(ReadFlags::DELETE_SELF) {
                return self.end(format!("{:?} was deleted", self.root));
            }
            if raw.mask.contains(ReadFlags::MOVE_SELF) {
                return self.end(format!("{:?} was moved", self.root));
            }
            if raw.mask.contains(ReadFlags::UNMOUNT) {
                return self.end(format!("{:?} was unmounted", self.root));
            }
        }
        let Some(name) = raw.name else {
            // A subdirectory's own DELETE_SELF/MOVE_SELF: its parent
            // reports it.
            return;
        };
        let path = dir.join(&name);
        let is_dir = raw.mask.contains(ReadFlags::ISDIR);
        if raw.mask.contains(ReadFlags::CREATE) {
            self.push(Change::Create, path.clone(), None, is_dir);
            if is_dir && self.recursive {
                self.appeared(&path);
            }
        } else if raw.mask.contains(ReadFlags::DELETE) {
            self.push(Change::Delete, path, None, is_dir);
        } else if raw.mask.intersects(ReadFlags::MODIFY | ReadFlags::ATTRIB) {
            self.push(Change::Modify, path, None, is_dir);
        } else if raw.mask.contains(ReadFlags::MOVED_FROM) {
            self.moved = Some(MovedFrom {
                cookie: raw.cookie,
                path,
                is_dir,
            });
        } else if raw.mask.contains(ReadFlags::MOVED_TO) {
            match self.moved.take().filter(|_| paired) {
                Some(from) => {
                    if is_dir && self.recursive {
                        self.renamed(&from.path, &path);
                    }
                    self.push(Change::Move, path, Some(from.path), is_dir);
                }
                None => {
                    self.push(Change::Create, path.clone(), None, is_dir);
                    if is_dir && self.recursive {
                        self.appeared(&path);
                    }
                }
            }
        }
    }

    /// A directory appeared at `path` (created or moved in): watch it and
    /// report what it holds.
    fn appeared(&mut self, path: &Path) {
        let fd = match self.open_beneath(path) {
            Ok(fd) => fd,
            // Gone or replaced since: its parent reports what happened.
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => return,
            Err(e) => {
                let why = watch_error(e, path, self.limits).message;
                return self.incomplete(Incomplete(why));
            }
        };
        let depth = path
            .strip_prefix(&self.root)
            .map_or(0, |rest| rest.components().count());
        match self.add(&fd, path.to_owned()) {
            Ok(Some(_)) => {}
            // Already watched (a bind mount of a watched directory).
            Ok(None) => return,
            Err(Errno::NOENT | Errno::NOTDIR) => return,
            Err(e) => {
                let why = watch_error(e, path, self.limits).message;
                return self.incomplete(Incomplete(why));
            }
        }
        if let Err(why) = self.walk(&fd, path.to_owned(), true, depth) {
            self.incomplete(why);
        }
    }

    /// A watched directory moved from `from` to `to` within the tree: the
    /// paths of its watches follow.
    fn renamed(&mut self, from: &Path, to: &Path) {
        for path in self.dirs.values_mut() {
            if let Ok(rest) = path.strip_prefix(from) {
                *path = join(to, rest);
            }
        }
    }

    /// A directory left the tree: its watches (and those beneath) go.
    fn unwatch_beneath(&mut self, gone: &Path) {
        let wds: Vec<i32> = self
            .dirs
            .iter()
            .filter(|(_, p)| p.starts_with(gone))
            .map(|(wd, _)| *wd)
            .collect();
        for wd in wds {
            let _ = inotify::remove_watch(self.fd.get_ref(), wd);
            self.dirs.remove(&wd);
        }
    }

    /// Opens the directory at `path` (inside the tree) beneath the watched
    /// directory, one component at a time, never following a symlink.
    fn open_beneath(&self, path: &Path) -> Result<OwnedFd, Errno> {
        let rest = path.strip_prefix(&self.root).map_err(|_| Errno::NOENT)?;
        let mut fd =
            rustix::fs::openat(&self.parent_fd, &self.root_name, DIR_FLAGS, Mode::empty())?;
        if identity(&fd)? != self.root_id {
            // Replaced: the watched directory was moved or deleted, which
            // its own events report.
            return Err(Errno::NOENT);
        }
        for part in rest.components() {
            fd = rustix::fs::openat(&fd, part.as_os_str(), DIR_FLAGS, Mode::empty())?;
        }
        Ok(fd)
    }

    /// Adds the watch of the directory `fd` (`O_PATH`) at `path`:
    /// `Ok(None)` when it was watched already.
    fn add(&mut self, fd: &OwnedFd, path: PathBuf) -> Result<Option<i32>, Errno> {
        if self.dirs.len() >= self.limits.max_dirs {
            return Err(Errno::NOSPC);
        }
        let magic = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let wd = inotify::add_watch(self.fd.get_ref(), magic.as_str(), MASK)?;
        if self.dirs.contains_key(&wd) {
            return Ok(None);
        }
        self.dirs.insert(wd, path);
        Ok(Some(wd))
    }

    /// Reads the directory `fd` (watched already) at `path`: with `report`,
    /// each entry is a `Create`; when recursive, each subdirectory is
    /// watched and read the same way.
    fn walk(
        &mut self,
        fd: &OwnedFd,
        path: PathBuf,
        report: bool,
        depth: usize,
    ) -> Result<(), Incomplete> {
        let Ok(listing) = rustix::fs::openat(
            fd,
            c".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            // Gone since: its parent reports it.
            return Ok(());
        };
        let Ok(mut dir) = Dir::new(listing) else {
            return Ok(());
        };
        let mut subdirs: Vec<OsString> = Vec::new();
        while let Some(Ok(dirent)) = dir.read() {
            let name = OsStr::from_bytes(dirent.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let is_dir = match dirent.file_type() {
                FileType::Directory => true,
                FileType::Unknown => rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory),
                _ => false,
            };
            if report {
                self.push(Change::Create, path.join(name), None, is_dir);
            }
            if is_dir && self.recursive {
                subdirs.push(name.to_owned());
            }
        }
        drop(dir);
        for name in subdirs {
            let Ok(child) = rustix::fs::openat(fd, &name, DIR_FLAGS, Mode::empty()) else {
                continue;
            };
            let child_path = path.join(&name);
            if depth + 1 > MAX_DEPTH {
                return Err(Incomplete(format!(
                    "{child_path:?} is deeper than {MAX_DEPTH} directories below the watched one"
                )));
            }
            match self.add(&child, child_path.clone()) {
                Ok(Some(_)) => self.walk(&child, child_path, report, depth + 1)?,
                Ok(None) | Err(Errno::NOENT | Errno::NOTDIR) => {}
                Err(e) => return Err(Incomplete(watch_error(e, &child_path, self.limits).message)),
            }
        }
        Ok(())
    }

    /// After the kernel's overflow: walks the whole tree again, watching
    /// directories that have no watch, giving moved ones their new paths
    /// and dropping the watches of directories no longer in the tree.
    fn rewalk(&mut self) -> Result<(), Incomplete> {
        let before = std::mem::take(&mut self.dirs);
        let root_fd = match self.open_beneath(&self.root.clone()) {
            Ok(fd) => fd,
            // Gone: its own events end the watch.
            Err(_) => {
                self.dirs = before;
                return Ok(());
            }
        };
        self.dirs.insert(self.root_wd, self.root.clone());
        // `self.dirs` holds only the root now, so `add` gives an existing
        // watch back as new: re-inserted with today's path.
        let result = self.walk(&root_fd, self.root.clone(), false, 0);
        for wd in before.keys() {
            if !self.dirs.contains_key(wd) {
                let _ = inotify::remove_watch(self.fd.get_ref(), *wd);
            }
        }
        result
    }
}

/// A directory's device and inode.
fn identity(fd: &OwnedFd) -> Result<(u64, u64), Errno> {
    let st = rustix::fs::fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

/// Why a directory could not be watched.
fn watch_error(e: Errno, path: &Path, limits: Limits) -> FileError {
    match e {
        Errno::NOSPC => FileError::new(
            ErrorKind::TooLarge,
            format!(
                "watching {path:?}: more directories than a watch may hold (at most {}, and the kernel's fs.inotify.max_user_watches)",
                limits.max_dirs
            ),
        ),
        Errno::NOTDIR => not_a_dir(path),
        e => FileError::errno(e, "watching", path),
    }
}

/// The events of one `read` of an inotify descriptor.
fn parse(bytes: &[u8]) -> Vec<Raw> {
    let word = |at: usize| -> Option<u32> {
        let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(u32::from_ne_bytes(b))
    };
    let mut out = Vec::new();
    let mut at = 0;
    while let (Some(wd), Some(mask), Some(cookie), Some(len)) =
        (word(at), word(at + 4), word(at + 8), word(at + 12))
    {
        let len = len as usize;
        let Some(name) = bytes.get(at + EVENT_HEAD..at + EVENT_HEAD + len) else {
            break;
        };
        let name = Some(name.split(|&b| b == 0).next().unwrap_or_default())
            .filter(|n| !n.is_empty())
            .map(|n| OsStr::from_bytes(n).to_owned());
        out.push(Raw {
            wd: i32::from_ne_bytes(wd.to_ne_bytes()),
            mask: ReadFlags::from_bits_retain(mask),
            cookie,
            name,
        });
        at += EVENT_HEAD + len;
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_servers_share_of_inotify_instances_is_a_quarter_and_at_least_one() {
        assert_eq!(share_of_instances(128), 32);
        assert_eq!(share_of_instances(8192), 2048);
        assert_eq!(share_of_instances(3), 1);
        assert_eq!(share_of_instances(0), 1);
    }

    use super::*;
    use std::time::Duration;

    /// A fresh directory under the system's temporary directory, removed
    /// when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let p = std::env::temp_dir().join(format!(
                "mcp-exec-watch-{tag}-{}-{:x}",
                std::process::id(),
                crate::random::bits_128().unwrap_or_default()
            ));
            std::fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn policy() -> CwdPolicy {
        CwdPolicy::from_settings(None, None).unwrap()
    }

    fn watch(dir: &Path, recursive: bool, limits: Limits) -> Watch {
        Watch::open(&policy(), dir, recursive, limits).unwrap()
    }

    /// The next event, or `None` after a generous deadline (a test that
    /// fails says what it got instead of hanging).
    async fn next(w: &mut Watch) -> Option<WatchEvent> {
        tokio::time::timeout(Duration::from_secs(10), w.next())
            .await
            .ok()
            .flatten()
    }

    /// Events until `stop` matches one (included).
    async fn until(w: &mut Watch, stop: impl Fn(&WatchEvent) -> bool) -> Vec<WatchEvent> {
        let mut got = Vec::new();
        while let Some(e) = next(w).await {
            let done = stop(&e);
            got.push(e);
            if done {
                return got;
            }
        }
        panic!("the watch ended or went quiet first; got {got:?}");
    }

    fn change(kind: Change, path: &Path, is_dir: bool) -> WatchEvent {
        WatchEvent::Change {
            kind,
            path: path.to_owned(),
            from: None,
            is_dir,
        }
    }

    fn is(kind: Change, path: &Path) -> impl Fn(&WatchEvent) -> bool {
        let path = path.to_owned();
        move |e| matches!(e, WatchEvent::Change { kind: k, path: p, .. } if *k == kind && *p == path)
    }

    #[tokio::test]
    async fn create_modify_delete_and_move_are_reported_with_absolute_paths() {
        let s = Scratch::new("basic");
        let mut w = watch(&s.0, false, Limits::default());
        let a = s.0.join("a.txt");
        let b = s.0.join("b.txt");
        std::fs::write(&a, "one").unwrap();
        // Created and written before the first read: the write is
        // coalesced into the create.
        let got = until(&mut w, is(Change::Create, &a)).await;
        assert_eq!(got, vec![change(Change::Create, &a, false)]);
        std::fs::write(&a, "two").unwrap();
        until(&mut w, is(Change::Modify, &a)).await;
        std::fs::rename(&a, &b).unwrap();
        let got = until(&mut w, is(Change::Move, &b)).await;
        assert_eq!(
            got.last().unwrap(),
            &WatchEvent::Change {
                kind: Change::Move,
                path: b.clone(),
                from: Some(a.clone()),
                is_dir: false
            }
        );
        std::fs::remove_file(&b).unwrap();
        until(&mut w, is(Change::Delete, &b)).await;
        std::fs::create_dir(s.0.join("d")).unwrap();
        let got = until(&mut w, is(Change::Create, &s.0.join("d"))).await;
        assert_eq!(
            got.last().unwrap(),
            &change(Change::Create, &s.0.join("d"), true)
        );
    }

    #[tokio::test]
    async fn repeated_writes_to_one_file_are_coalesced_while_unread() {
        let s = Scratch::new("coalesce");
        let mut w = watch(&s.0, false, Limits::default());
        let a = s.0.join("a");
        std::fs::write(&a, "").unwrap();
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().append(true).open(&a).unwrap();
            for _ in 0..1000 {
                f.write_all(b"x").unwrap();
            }
        }
        std::fs::write(s.0.join("end"), "").unwrap();
        let got = until(&mut w, is(Change::Create, &s.0.join("end"))).await;
        let about_a = got
            .iter()
            .filter(|e| matches!(e, WatchEvent::Change { path, .. } if *path == a))
            .count();
        // Create, and at most a Modify per read of the kernel's queue; a
        // thousand writes are far fewer events.
        assert!(about_a <= 3, "{got:?}");
    }

    #[tokio::test]
    async fn a_recursive_watch_reports_inside_a_new_directory_and_what_it_held_before_its_watch() {
        let s = Scratch::new("recursive");
        std::fs::create_dir(s.0.join("old")).unwrap();
        let mut w = watch(&s.0, true, Limits::default());
        assert_eq!(w.watched_dirs(), 2);
        // Made before the watch of `new` can exist: reported by the scan.
        std::fs::create_dir_all(s.0.join("new/deep")).unwrap();
        std::fs::write(s.0.join("new/deep/early"), "").unwrap();
        std::fs::write(s.0.join("old/x"), "").unwrap();
        let mut got = until(&mut w, is(Change::Create, &s.0.join("old/x"))).await;
        // Order between directories is not promised: wait for the rest.
        while !got
            .iter()
            .any(is(Change::Create, &s.0.join("new/deep/early")))
        {
            got.push(next(&mut w).await.expect("the early file"));
        }
        assert!(
            got.iter().any(is(Change::Create, &s.0.join("new"))),
            "{got:?}"
        );
        assert!(
            got.iter().any(is(Change::Create, &s.0.join("new/deep"))),
            "{got:?}"
        );
        // Now watched: a later file in the deep directory is reported.
        std::fs::write(s.0.join("new/deep/late"), "").unwrap();
        until(&mut w, is(Change::Create, &s.0.join("new/deep/late"))).await;
        assert_eq!(w.watched_dirs(), 4);
    }

    #[tokio::test]
    async fn a_directory_moved_within_the_tree_keeps_reporting_under_its_new_name() {
        let s = Scratch::new("rename");
        std::fs::create_dir_all(s.0.join("a/sub")).unwrap();
        let mut w = watch(&s.0, true, Limits::default());
        std::fs::rename(s.0.join("a"), s.0.join("b")).unwrap();
        until(&mut w, is(Change::Move, &s.0.join("b"))).await;
        std::fs::write(s.0.join("b/sub/f"), "").unwrap();
        until(&mut w, is(Change::Create, &s.0.join("b/sub/f"))).await;
    }

    #[tokio::test]
    async fn moving_out_is_a_delete_and_the_moved_tree_is_no_longer_watched() {
        let s = Scratch::new("moveout");
        let outside = Scratch::new("outside");
        std::fs::create_dir_all(s.0.join("in/sub")).unwrap();
        let mut w = watch(&s.0, true, Limits::default());
        assert_eq!(w.watched_dirs(), 3);
        std::fs::rename(s.0.join("in"), outside.0.join("in")).unwrap();
        std::fs::write(outside.0.join("in/sub/f"), "").unwrap();
        std::fs::write(s.0.join("marker"), "").unwrap();
        let got = until(&mut w, is(Change::Create, &s.0.join("marker"))).await;
        assert_eq!(
            got[0],
            change(Change::Delete, &s.0.join("in"), true),
            "{got:?}"
        );
        assert_eq!(got.len(), 2, "nothing from outside the tree: {got:?}");
        assert_eq!(w.watched_dirs(), 1);
    }

    #[tokio::test]
    async fn a_next_that_is_dropped_while_it_waits_loses_nothing() {
        let s = Scratch::new("cancel");
        let mut w = watch(&s.0, false, Limits::default());
        for _ in 0..3 {
            // Nothing happens: the wait is cut short, as a keep-alive
            // branch of a select! would.
            let cut = tokio::time::timeout(Duration::from_millis(20), w.next()).await;
            assert!(cut.is_err(), "{cut:?}");
        }
        let a = s.0.join("a");
        std::fs::write(&a, "").unwrap();
        assert_eq!(next(&mut w).await, Some(change(Change::Create, &a, false)));
        assert_eq!(w.end_reason(), None);
    }

    #[tokio::test]
    async fn a_full_queue_becomes_one_resync_and_events_resume_after_it() {
        let s = Scratch::new("overflow");
        let limits = Limits {
            max_events: 8,
            max_dirs: 10,
        };
        let mut w = watch(&s.0, false, limits);
        for i in 0..100 {
            std::fs::write(s.0.join(format!("f{i}")), "").unwrap();
        }
        std::fs::write(s.0.join("last"), "").unwrap();
        let mut got = Vec::new();
        while !got.contains(&WatchEvent::Resync) {
            got.push(next(&mut w).await.expect("a resync"));
        }
        // Nothing queued is older than what the resync covers.
        assert_eq!(got, vec![WatchEvent::Resync]);
        std::fs::write(s.0.join("after"), "").unwrap();
        until(&mut w, is(Change::Create, &s.0.join("after"))).await;
    }

    #[tokio::test]
    async fn after_the_kernels_overflow_a_directory_made_meanwhile_is_watched() {
        let s = Scratch::new("kernel-overflow");
        let max: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(16_384);
        // Our own queue far bigger than the kernel's: the overflow is its.
        let limits = Limits {
            max_events: 1 << 20,
            max_dirs: 10,
        };
        let mut w = watch(&s.0, true, limits);
        // More events than the kernel queues, none read: IN_Q_OVERFLOW.
        for i in 0..=max {
            std::fs::File::create(s.0.join(format!("f{i}"))).unwrap();
        }
        // Its creation is lost in the overflow.
        std::fs::create_dir(s.0.join("late")).unwrap();
        let mut got = Vec::new();
        while !got.contains(&WatchEvent::Resync) {
            got.push(next(&mut w).await.expect("a resync"));
        }
        std::fs::write(s.0.join("late/f"), "").unwrap();
        until(&mut w, is(Change::Create, &s.0.join("late/f"))).await;
    }

    #[tokio::test]
    async fn more_directories_than_the_cap_is_an_error_at_the_start_and_a_resync_and_end_later() {
        let s = Scratch::new("cap");
        std::fs::create_dir_all(s.0.join("a/b")).unwrap();
        let limits = Limits {
            max_events: 100,
            max_dirs: 2,
        };
        let e = Watch::open(&policy(), &s.0, true, limits).unwrap_err();
        assert_eq!(e.kind, ErrorKind::TooLarge, "{e}");
        std::fs::remove_dir(s.0.join("a/b")).unwrap();
        let mut w = watch(&s.0, true, limits);
        std::fs::create_dir(s.0.join("c")).unwrap();
        assert_eq!(next(&mut w).await, Some(WatchEvent::Resync));
        assert_eq!(next(&mut w).await, None);
        assert!(
            w.end_reason().unwrap().contains("more directories"),
            "{w:?}"
        );
    }

    #[tokio::test]
    async fn deleting_the_watched_directory_ends_the_watch() {
        let s = Scratch::new("gone");
        let dir = s.0.join("w");
        std::fs::create_dir(&dir).unwrap();
        let mut w = watch(&dir, false, Limits::default());
        std::fs::remove_dir(&dir).unwrap();
        assert_eq!(next(&mut w).await, None);
        assert!(w.end_reason().unwrap().contains("deleted"), "{w:?}");
    }

    #[tokio::test]
    async fn a_symlink_is_not_followed_neither_as_the_watched_directory_nor_beneath_it() {
        let s = Scratch::new("link");
        let outside = Scratch::new("linked");
        std::os::unix::fs::symlink(&outside.0, s.0.join("l")).unwrap();
        let e = Watch::open(&policy(), &s.0.join("l"), false, Limits::default()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotDirectory, "{e}");
        let w = watch(&s.0, true, Limits::default());
        assert_eq!(w.watched_dirs(), 1);
    }

    #[tokio::test]
    async fn outside_the_policy_is_refused() {
        let s = Scratch::new("policy");
        std::fs::create_dir(s.0.join("root")).unwrap();
        let root = s.0.join("root");
        let p = CwdPolicy::from_settings(root.to_str(), root.to_str()).unwrap();
        let e = Watch::open(&p, &s.0, false, Limits::default()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Outside, "{e}");
        assert!(Watch::open(&p, &root, true, Limits::default()).is_ok());
    }

    #[test]
    fn raw_events_are_parsed_with_their_padded_names() {
        let mut bytes = Vec::new();
        for (wd, mask, name) in [(1i32, 0x100u32, &b"a\0\0\0"[..]), (2, 0x200, &b""[..])] {
            bytes.extend_from_slice(&wd.to_ne_bytes());
            bytes.extend_from_slice(&mask.to_ne_bytes());
            bytes.extend_from_slice(&7u32.to_ne_bytes());
            bytes.extend_from_slice(&(name.len() as u32).to_ne_bytes());
            bytes.extend_from_slice(name);
        }
        let got = parse(&bytes);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].wd, 1);
        assert_eq!(got[0].name.as_deref(), Some(OsStr::new("a")));
        assert!(got[0].mask.contains(ReadFlags::CREATE));
        assert_eq!(got[1].name, None);
        assert_eq!(got[1].cookie, 7);
        // A truncated tail is ignored, never read past.
        assert_eq!(parse(&bytes[..bytes.len() - 2]).len(), 1);
    }
}
