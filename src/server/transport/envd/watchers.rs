//! envd's directory watchers, both kinds, over [`crate::files::watch`]
//! (inotify, resolved once under the cwd policy, bounded):
//!
//! - **polling** (the sync SDK's `files.watch_dir`): `CreateWatcher` →
//!   `{watcherId}`, `GetWatcherEvents {watcherId}` → the events since the
//!   last call, `RemoveWatcher {watcherId}` → `{}`. A task per watcher
//!   moves the [`Watch`]'s events into its queue.
//! - **streaming** (`AsyncSandbox`'s `files.watch_dir`): `WatchDir` → a
//!   server stream of `{start:{}}`, then `{filesystem:{name,type,entry?}}`
//!   and `{keepalive:{}}` envelopes, until the client goes.
//!
//! # Events, as envd (fsnotify) names them
//! `name` is the path relative to the watched directory. A
//! [`Change::Create`] is `EVENT_TYPE_CREATE`, [`Change::Modify`] (content or
//! metadata: inotify's `IN_MODIFY` and `IN_ATTRIB`, which the watch
//! coalesces) `EVENT_TYPE_WRITE`, [`Change::Delete`] `EVENT_TYPE_REMOVE`, a
//! [`Change::Move`] within the tree `EVENT_TYPE_RENAME` of the old name then
//! `EVENT_TYPE_CREATE` of the new one (fsnotify's pair). `EVENT_TYPE_CHMOD`
//! is never sent: a mode change is a `WRITE` (the watch does not tell the
//! two apart). `includeEntry` adds the entry's `EntryInfo` when it still
//! exists. The temporary files of our atomic writes
//! (`.<name>.<hex>.mcp-exec-tmp`) are left out, so a `files.write` shows
//! as a `CREATE` of its final name (envd, which writes in place, shows a
//! `CREATE` and `WRITE`s; a replaced file is a `CREATE` here too).
//!
//! # Bounds, and what overflow does (never silent loss)
//! - At most [`MAX_WATCHERS`] polling watchers live at once
//!   (`resource_exhausted` past it); one not polled for [`IDLE`] is
//!   removed when the next is created (envd keeps them until removed).
//! - A polling watcher queues at most [`MAX_QUEUED`] events. Past that, or
//!   when the watch itself reports lost events (the kernel's queue
//!   overflowed: [`WatchEvent::Resync`]), the queue is emptied and the
//!   next `GetWatcherEvents` answers `resource_exhausted` ("events were
//!   lost … list the directory again"), once; the watcher goes on and the
//!   call after it gets the events since. The SDK raises it from
//!   `get_new_events()`.
//! - A `WatchDir` stream that loses events ends with that
//!   `resource_exhausted` error in its end-stream envelope (the SDK calls
//!   `on_exit` with it); a watch that ends on its own (the directory was
//!   deleted or moved) ends the stream cleanly, as envd's does.
//! - `allowNetworkMounts` is accepted and ignored (inotify is used on
//!   every file system; envd refuses NFS/CIFS/FUSE by default).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::filesystem::{Ctx, EntryInfo, Names, RpcError, absolute, home, stat_place};
use crate::files::commit::is_temp_name;
use crate::files::place::Place;
use crate::files::watch::{Change, Limits, Watch, WatchEvent};

/// Polling watchers alive at once.
pub const MAX_WATCHERS: usize = 64;
/// Events a polling watcher keeps between two polls.
pub const MAX_QUEUED: usize = 10_000;
/// A polling watcher not polled for this long is removed at the next
/// `CreateWatcher`.
pub const IDLE: Duration = Duration::from_secs(600);

/// `WatchDirRequest` and `CreateWatcherRequest`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WatchRequest {
    /// The directory.
    pub path: String,
    /// Watch subdirectories too.
    pub recursive: bool,
    /// Add each event's `EntryInfo`.
    #[serde(alias = "include_entry")]
    pub include_entry: bool,
    /// Accepted, ignored (module doc).
    #[serde(alias = "allow_network_mounts")]
    pub allow_network_mounts: bool,
}

/// `{watcherId}`: `GetWatcherEvents`, `RemoveWatcher`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WatcherRequest {
    /// The watcher.
    #[serde(alias = "watcher_id")]
    pub watcher_id: String,
}

/// `CreateWatcherResponse`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateWatcherResponse {
    /// The new watcher's id.
    pub watcher_id: String,
}

/// `EventType`, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EventType {
    /// Created (or moved in, or the new name of a rename).
    #[serde(rename = "EVENT_TYPE_CREATE")]
    Create,
    /// Content or metadata changed.
    #[serde(rename = "EVENT_TYPE_WRITE")]
    Write,
    /// Deleted (or moved out).
    #[serde(rename = "EVENT_TYPE_REMOVE")]
    Remove,
    /// The old name of a rename.
    #[serde(rename = "EVENT_TYPE_RENAME")]
    Rename,
}

/// `FilesystemEvent`.
#[derive(Debug, Clone, Serialize)]
pub struct FilesystemEvent {
    /// Relative to the watched directory.
    pub name: String,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// With `includeEntry`, when the entry still exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<EntryInfo>,
}

/// `GetWatcherEventsResponse`.
#[derive(Debug, Serialize)]
pub struct EventsResponse {
    /// The events since the last call, oldest first.
    pub events: Vec<FilesystemEvent>,
}

/// `name` relative to `root` (lossy UTF-8).
fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// The envd events of one change (module doc).
pub fn map_change(kind: Change, path: &Path, from: Option<&Path>) -> Vec<(EventType, PathBuf)> {
    match kind {
        Change::Create => vec![(EventType::Create, path.to_owned())],
        Change::Modify => vec![(EventType::Write, path.to_owned())],
        Change::Delete => vec![(EventType::Remove, path.to_owned())],
        Change::Move => {
            let mut out = Vec::with_capacity(2);
            if let Some(from) = from {
                out.push((EventType::Rename, from.to_owned()));
            }
            out.push((EventType::Create, path.to_owned()));
            out
        }
    }
}

/// The `FilesystemEvent`s of one change, with entries when asked.
fn events_of(
    ctx: &Ctx,
    root: &Path,
    kind: Change,
    path: &Path,
    from: Option<&Path>,
    include_entry: bool,
) -> Vec<FilesystemEvent> {
    let names = include_entry.then(Names::load);
    map_change(kind, path, from)
        .into_iter()
        .filter(|(_, p)| !p.file_name().is_some_and(is_temp_name))
        .map(|(kind, p)| FilesystemEvent {
            name: relative(root, &p),
            kind,
            entry: names.as_ref().and_then(|names| {
                let place = Place::resolve(ctx.policy(), &p, false).ok()?;
                stat_place(&place, names).ok()
            }),
        })
        .collect()
}

/// Opens the watch a request asks for (on the blocking pool: a recursive
/// watch walks the tree).
async fn open(ctx: &Arc<Ctx>, req: &WatchRequest) -> Result<Watch, RpcError> {
    let ctx = Arc::clone(ctx);
    let text = req.path.clone();
    let recursive = req.recursive;
    let opened = tokio::task::spawn_blocking(move || {
        let names = Names::load();
        let path = absolute(&text, &home(&names, ctx.user.as_deref()))?;
        let place = Place::resolve(ctx.policy(), &path, false)?;
        match crate::files::read::lstat(&place)? {
            None => {
                return Err(RpcError::new(
                    "not_found",
                    format!("path {} not found", path.display()),
                ));
            }
            Some(st) if !crate::files::tree::is_dir(&st) => {
                return Err(RpcError::new(
                    "invalid_argument",
                    format!("path {} not a directory", path.display()),
                ));
            }
            Some(_) => {}
        }
        Ok(Watch::new(&place, recursive, Limits::default())?)
    })
    .await;
    opened.unwrap_or_else(|e| Err(RpcError::new("internal", format!("watch task failed: {e}"))))
}

/// One polling watcher's queue.
struct Queue {
    events: Vec<FilesystemEvent>,
    /// Events were lost since the last poll (module doc).
    lost: bool,
    /// The watch ended on its own, and why.
    ended: Option<String>,
    last_poll: Instant,
}

struct Poller {
    queue: Mutex<Queue>,
    task: tokio::task::JoinHandle<()>,
}

impl Poller {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        // The task holds the `Watch`: aborting it drops the inotify
        // descriptor.
        self.task.abort();
    }
}

/// The polling watchers of one envd listener.
pub struct Watchers {
    map: Mutex<HashMap<String, Arc<Poller>>>,
    /// [`MAX_WATCHERS`] (smaller in tests).
    max_watchers: usize,
    /// [`MAX_QUEUED`] (smaller in tests).
    max_queued: usize,
}

impl Default for Watchers {
    fn default() -> Watchers {
        Watchers::with_bounds(MAX_WATCHERS, MAX_QUEUED)
    }
}

impl Watchers {
    /// Watchers with these bounds.
    pub fn with_bounds(max_watchers: usize, max_queued: usize) -> Watchers {
        Watchers {
            map: Mutex::new(HashMap::new()),
            max_watchers,
            max_queued,
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Arc<Poller>>> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `CreateWatcher`.
    pub async fn create(
        &self,
        ctx: Ctx,
        req: WatchRequest,
    ) -> Result<CreateWatcherResponse, RpcError> {
        {
            let mut map = self.map();
            map.retain(|_, p| p.queue().last_poll.elapsed() < IDLE);
            if map.len() >= self.max_watchers {
                let max = self.max_watchers;
                return Err(RpcError::new(
                    "resource_exhausted",
                    format!("{max} watchers are open: stop one (RemoveWatcher) first"),
                ));
            }
        }
        let Some(bits) = crate::random::bits_128() else {
            return Err(RpcError::new(
                "unavailable",
                "no random bits for a watcher id",
            ));
        };
        let ctx = Arc::new(ctx);
        let mut watch = open(&ctx, &req).await?;
        let root = watch.root().to_owned();
        let include_entry = req.include_entry;
        let max_queued = self.max_queued;
        let poller = Arc::new_cyclic(|weak: &std::sync::Weak<Poller>| {
            let weak = weak.clone();
            let task = tokio::spawn(async move {
                while let Some(event) = watch.next().await {
                    let Some(poller) = weak.upgrade() else { return };
                    let fresh = match event {
                        WatchEvent::Resync => None,
                        WatchEvent::Change {
                            kind, path, from, ..
                        } => Some(events_of(
                            &ctx,
                            &root,
                            kind,
                            &path,
                            from.as_deref(),
                            include_entry,
                        )),
                    };
                    let mut q = poller.queue();
                    match fresh {
                        Some(events) if !q.lost && q.events.len() + events.len() <= max_queued => {
                            q.events.extend(events);
                        }
                        _ => {
                            q.events.clear();
                            q.lost = true;
                        }
                    }
                }
                if let Some(poller) = weak.upgrade() {
                    poller.queue().ended =
                        Some(watch.end_reason().unwrap_or("the watch ended").to_owned());
                }
            });
            Poller {
                queue: Mutex::new(Queue {
                    events: Vec::new(),
                    lost: false,
                    ended: None,
                    last_poll: Instant::now(),
                }),
                task,
            }
        });
        let id = format!("w{bits:032x}");
        self.map().insert(id.clone(), poller);
        Ok(CreateWatcherResponse { watcher_id: id })
    }

    /// `GetWatcherEvents`: the queue, emptied (module doc for loss).
    pub fn events(&self, req: &WatcherRequest) -> Result<EventsResponse, RpcError> {
        let poller = self
            .map()
            .get(&req.watcher_id)
            .cloned()
            .ok_or_else(|| not_found(&req.watcher_id))?;
        let mut q = poller.queue();
        q.last_poll = Instant::now();
        if q.lost {
            q.lost = false;
            let max = self.max_queued;
            return Err(RpcError::new(
                "resource_exhausted",
                format!(
                    "events were lost (more than {max} waited, or the kernel's inotify queue overflowed): list the directory again; the watcher goes on"
                ),
            ));
        }
        let events = std::mem::take(&mut q.events);
        if events.is_empty()
            && let Some(why) = &q.ended
        {
            return Err(RpcError::new(
                "failed_precondition",
                format!("the watcher ended: {why}"),
            ));
        }
        Ok(EventsResponse { events })
    }

    /// `RemoveWatcher`.
    pub fn remove(&self, req: &WatcherRequest) -> Result<(), RpcError> {
        self.map()
            .remove(&req.watcher_id)
            .map(drop)
            .ok_or_else(|| not_found(&req.watcher_id))
    }
}

fn not_found(id: &str) -> RpcError {
    RpcError::new("not_found", format!("watcher with id {id} not found"))
}

/// `WatchDirResponse` events.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum WatchDirResponse {
    /// The watch is in place.
    Start {},
    /// A change.
    Filesystem(Box<FilesystemEvent>),
    /// Nothing happened for a keep-alive interval.
    Keepalive {},
}

/// `WatchDir`: opens the watch (an error here is the stream's only
/// answer), then sends `start`, the changes and keep-alives to `tx` as
/// `message`-framed envelopes until the client goes; `end` frames the
/// end-stream envelope (with the error, if any).
pub async fn watch_dir(
    ctx: Ctx,
    req: WatchRequest,
    keepalive: Duration,
    tx: mpsc::Sender<Bytes>,
    message: impl Fn(&WatchDirResponse) -> Bytes,
    end: impl Fn(Option<RpcError>) -> Bytes,
) {
    let ctx = Arc::new(ctx);
    let mut watch = match open(&ctx, &req).await {
        Ok(w) => w,
        Err(e) => {
            let _ = tx.send(end(Some(e))).await;
            return;
        }
    };
    if tx.send(message(&WatchDirResponse::Start {})).await.is_err() {
        return;
    }
    let root = watch.root().to_owned();
    let failure = loop {
        let event = tokio::select! {
            () = tx.closed() => return,
            e = tokio::time::timeout(keepalive, watch.next()) => e,
        };
        match event {
            Err(_) => {
                if tx
                    .send(message(&WatchDirResponse::Keepalive {}))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Ok(None) => break None,
            Ok(Some(WatchEvent::Resync)) => {
                break Some(RpcError::new(
                    "resource_exhausted",
                    "events were lost (the kernel's inotify queue overflowed): list the directory again and watch anew",
                ));
            }
            Ok(Some(WatchEvent::Change {
                kind, path, from, ..
            })) => {
                let ctx = Arc::clone(&ctx);
                let root = root.clone();
                let include = req.include_entry;
                let events = tokio::task::spawn_blocking(move || {
                    events_of(&ctx, &root, kind, &path, from.as_deref(), include)
                })
                .await
                .unwrap_or_default();
                for e in events {
                    if tx
                        .send(message(&WatchDirResponse::Filesystem(Box::new(e))))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    };
    let _ = tx.send(end(failure)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many events wait in watcher `id`, and whether some were lost.
    fn queued(w: &Watchers, id: &str) -> (usize, bool) {
        let p = w.map().get(id).cloned().unwrap();
        let q = p.queue();
        (q.events.len(), q.lost)
    }

    fn ctx() -> Ctx {
        let policy = crate::policy::cwd::CwdPolicy::from_settings(None, None).unwrap();
        Ctx::with_policy(Arc::new(policy), None)
    }

    #[tokio::test]
    async fn polling_watchers_are_bounded_and_an_overflow_is_said_once_then_events_go_on() {
        let dir = std::env::temp_dir().join(format!("mcp-exec-envd-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let req = || WatchRequest {
            path: dir.display().to_string(),
            ..WatchRequest::default()
        };
        let w = Watchers::with_bounds(1, 3);
        let id = w.create(ctx(), req()).await.unwrap().watcher_id;
        let second = w.create(ctx(), req()).await.unwrap_err();
        assert_eq!(second.code, "resource_exhausted", "{second:?}");

        let one = dir.join("one");
        std::fs::write(&one, b"1").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while queued(&w, &id).0 == 0 {
            assert!(Instant::now() < deadline, "no event for {one:?}");
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let got = w
            .events(&WatcherRequest {
                watcher_id: id.clone(),
            })
            .unwrap();
        assert_eq!(got.events[0].name, "one");
        assert_eq!(got.events[0].kind, EventType::Create);

        for i in 0..10 {
            std::fs::write(dir.join(format!("f{i}")), b"x").unwrap();
        }
        while !queued(&w, &id).1 {
            assert!(
                Instant::now() < deadline,
                "no overflow: {:?}",
                queued(&w, &id)
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let lost = w
            .events(&WatcherRequest {
                watcher_id: id.clone(),
            })
            .unwrap_err();
        assert_eq!(lost.code, "resource_exhausted");
        assert!(
            lost.message.contains("more than 3 waited"),
            "{}",
            lost.message
        );
        // Drained, then the watcher goes on.
        while queued(&w, &id).0 > 0 || queued(&w, &id).1 {
            let _ = w.events(&WatcherRequest {
                watcher_id: id.clone(),
            });
        }
        std::fs::remove_file(&one).unwrap();
        let mut seen = Vec::new();
        while !seen
            .iter()
            .any(|e: &FilesystemEvent| e.name == "one" && e.kind == EventType::Remove)
        {
            assert!(Instant::now() < deadline, "no REMOVE of one: {seen:?}");
            if let Ok(r) = w.events(&WatcherRequest {
                watcher_id: id.clone(),
            }) {
                seen.extend(r.events);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        w.remove(&WatcherRequest {
            watcher_id: id.clone(),
        })
        .unwrap();
        let gone = w.events(&WatcherRequest { watcher_id: id }).unwrap_err();
        assert_eq!(gone.code, "not_found");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn changes_map_to_fsnotify_event_types_with_relative_names() {
        let root = Path::new("/w");
        let m = map_change(Change::Move, Path::new("/w/b"), Some(Path::new("/w/a")));
        assert_eq!(
            m,
            [
                (EventType::Rename, PathBuf::from("/w/a")),
                (EventType::Create, PathBuf::from("/w/b"))
            ]
        );
        assert_eq!(
            map_change(Change::Modify, Path::new("/w/x"), None)[0].0,
            EventType::Write
        );
        assert_eq!(relative(root, Path::new("/w/d/x")), "d/x");
        let e = FilesystemEvent {
            name: "x".into(),
            kind: EventType::Remove,
            entry: None,
        };
        assert_eq!(
            serde_json::to_string(&WatchDirResponse::Filesystem(Box::new(e))).unwrap(),
            r#"{"filesystem":{"name":"x","type":"EVENT_TYPE_REMOVE"}}"#
        );
        assert_eq!(
            serde_json::to_string(&WatchDirResponse::Start {}).unwrap(),
            r#"{"start":{}}"#
        );
    }
}
