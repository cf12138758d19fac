//! The single reaper: the only code in the process that waits on children.
//!
//! It owns the registry of spawned children (pid → the channel that receives
//! its exit status), the "something was reaped" generation counter that
//! death waits (`Init::wait_until`) subscribe to, and the reaper
//! task (`run`): one task that reads SIGCHLD from its own signalfd and
//! sweeps.
//!
//! # Invariants
//! - Nothing else calls `wait*` on our children: jobs are started with our
//!   own `clone` child (the main command with `posix_spawnp`), not std's
//!   `Command`, and nothing holds a `Child`. The one exception is the spawn
//!   itself, which reaps a child whose set-up or `exec` failed before it
//!   returns (glibc does the same inside `posix_spawnp`); that happens inside
//!   the registry lock (see below), so it cannot race a sweep.
//! - Sweeps use `wait4`, so each status comes with the child's CPU time
//!   ([`Reaped`]): what tells a job killed at its `RLIMIT_CPU` hard limit
//!   from any other SIGKILL.
//! - **Exit before registration is impossible by construction.** `spawn`
//!   holds the registry lock from before the child is created until its pid
//!   is inserted, and a sweep only calls `wait4` while holding the same
//!   lock. A child that exits at once is therefore reaped either after it was
//!   registered (and its status is routed) or not by us in between. No buffer
//!   of unclaimed statuses is needed, and no status is ever dropped for a
//!   registered pid.
//! - A reaped pid that is not registered is an orphan (a descendant that was
//!   re-parented to us as PID 1 or child subreaper): reaped and dropped.
//! - SIGCHLD coalesces, so a sweep loops until `wait4` reports no more
//!   exited children; routing is decided by the pid `wait4` returns, never
//!   by the signal.
//! - The task sweeps *before* it waits for the next SIGCHLD: a child that
//!   exited before the signalfd existed is reaped at once, and a SIGCHLD that
//!   arrives during a sweep stays pending and causes one more sweep, so no
//!   exit is left unreaped until the next one.
//! - A pid leaves the registry under the lock, right after `wait4` returned
//!   it: "not registered" therefore always means "already reaped" (or never
//!   ours), which is what `Reaper::is_unreaped` and verified death rely on.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use nix::sys::signal::{SigSet, Signal as NixSignal};
use nix::sys::signalfd::SignalFd;
use tokio::io::unix::AsyncFd;
use tokio::sync::{oneshot, watch};

use crate::Shared;
use crate::signal::Signal;

/// How a direct child ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// It called `exit` with this code.
    Exited(i32),
    /// A signal killed it.
    Signaled(Signal),
}

impl ExitStatus {
    /// Decodes a raw wait status; `None` for anything but an exit or a
    /// death by signal (stops, which we never ask for).
    fn from_wait(status: i32) -> Option<ExitStatus> {
        use nix::libc::{WEXITSTATUS, WIFEXITED, WIFSIGNALED, WTERMSIG};
        if WIFEXITED(status) {
            return Some(ExitStatus::Exited(WEXITSTATUS(status)));
        }
        if WIFSIGNALED(status) {
            return Signal::from_raw(WTERMSIG(status)).map(ExitStatus::Signaled);
        }
        None
    }
}

/// How a direct child ended, and what CPU time it used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reaped {
    /// Its exit status.
    pub status: ExitStatus,
    /// User + system CPU time of the child (and of the descendants it
    /// waited for), as `wait4` reports it: what `RLIMIT_CPU` is measured on.
    pub cpu: Duration,
}

/// The registry of children whose exit status someone is waiting for.
pub(crate) type Registry = HashMap<i32, oneshot::Sender<Reaped>>;

/// Shared reaper state (owned by [`crate::Init`]).
pub(crate) struct Reaper {
    registry: Mutex<Registry>,
    generation: watch::Sender<u64>,
    orphans: AtomicU64,
}

impl Reaper {
    pub(crate) fn new() -> Reaper {
        Reaper {
            registry: Mutex::new(HashMap::new()),
            generation: watch::Sender::new(0),
            orphans: AtomicU64::new(0),
        }
    }

    /// Locks the registry. A poisoned lock is taken over: the map stays
    /// consistent because every critical section is a single insert/remove.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Subscribes to "at least one process was reaped" events.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Pids of registered children that have not been reaped yet.
    pub(crate) fn running(&self) -> Vec<i32> {
        self.lock().keys().copied().collect()
    }

    /// Whether `pid` is a registered child that has not been reaped yet.
    ///
    /// Taken under the registry lock, which the reaper holds from `wait4`
    /// until the pid is removed: a `false` here means the kernel has already
    /// reaped it (or it was never ours), never "about to be".
    pub(crate) fn is_unreaped(&self, pid: i32) -> bool {
        self.lock().contains_key(&pid)
    }

    /// Number of orphans reaped so far.
    pub(crate) fn orphans_reaped(&self) -> u64 {
        self.orphans.load(Ordering::Relaxed)
    }

    /// Reaps every child that has exited, routing each status. Returns how
    /// many were reaped.
    pub(crate) fn sweep(&self) -> usize {
        let mut reaped = 0;
        loop {
            // The lock is held across wait4: see the module doc.
            let mut registry = self.lock();
            match crate::sys::wait4_any() {
                Ok(Some(waited)) => {
                    reaped += 1;
                    let pid = waited.pid;
                    match (registry.remove(&pid), ExitStatus::from_wait(waited.status)) {
                        (Some(tx), Some(status)) => {
                            // The receiver may be gone (job dropped): fine.
                            let _ = tx.send(Reaped {
                                status,
                                cpu: waited.cpu,
                            });
                        }
                        (Some(tx), None) => {
                            // Not an exit (we never ask for stops): keep waiting.
                            registry.insert(pid, tx);
                        }
                        (None, _) => {
                            self.orphans.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(pid, "reaped orphan");
                        }
                    }
                }
                Ok(None) => break,
                Err(e) if e.raw_os_error() == Some(nix::libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(nix::libc::ECHILD) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "wait4 failed");
                    break;
                }
            }
        }
        if reaped > 0 {
            self.generation.send_modify(|g| *g = g.wrapping_add(1));
        }
        reaped
    }

    /// Whether the process has any child at all (running or zombie), without
    /// reaping anything.
    pub(crate) fn has_children(&self) -> bool {
        use rustix::process::{WaitId, WaitIdOptions, waitid};
        let opts = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        !matches!(waitid(WaitId::All, opts), Err(e) if e == rustix::io::Errno::CHILD)
    }
}

/// The reaper task's signalfd: SIGCHLD only (blocked since
/// [`crate::prepare`]).
pub(crate) fn open_signalfd() -> io::Result<AsyncFd<SignalFd>> {
    let mut set = SigSet::empty();
    set.add(NixSignal::SIGCHLD);
    crate::intake::signalfd(&set)
}

/// The reaper task: sweep, wait for SIGCHLD, repeat (see the module doc for
/// why the sweep comes first). Runs until the process exits. Waiting on the
/// signalfd only fails when tokio's reactor is going away; that is logged
/// and ends the task, as the process is then exiting anyway.
pub(crate) async fn run(shared: Arc<Shared>, fd: AsyncFd<SignalFd>) {
    loop {
        shared.reaper.sweep();
        if let Err(e) = crate::intake::next_signal(&fd).await {
            tracing::error!(error = %e, "SIGCHLD signalfd failed; children are no longer reaped");
            return;
        }
    }
}

/// Resolves to the exit status of one spawned child ([`PendingExit::with_usage`]:
/// with its CPU time).
#[derive(Debug)]
pub struct PendingExit(pub(crate) oneshot::Receiver<Reaped>);

impl PendingExit {
    /// The same pending exit, resolving to the status and the CPU time.
    pub fn with_usage(self) -> PendingExitUsage {
        PendingExitUsage(self.0)
    }
}

/// [`PendingExit`] with the child's CPU time.
#[derive(Debug)]
pub struct PendingExitUsage(oneshot::Receiver<Reaped>);

impl std::future::Future for PendingExitUsage {
    type Output = Result<Reaped, ReaperGone>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.map_err(|_| ReaperGone))
    }
}

/// The reaper stopped before the child's status arrived (only possible while
/// the process is exiting).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the reaper stopped before the child's exit status arrived")]
pub struct ReaperGone;

impl std::future::Future for PendingExit {
    type Output = Result<ExitStatus, ReaperGone>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.map(|reaped| reaped.status).map_err(|_| ReaperGone))
    }
}
