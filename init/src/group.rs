//! Process-group signalling and verified death.
//!
//! A job's signal goes to its whole group (`kill(-pgid, sig)`). "Dead" means
//! observed, never assumed: the caller has the direct child's status from the
//! reaper, and [`Init::wait_group_empty`] sees `kill(-pgid, 0)` fail with
//! `ESRCH`, which the kernel only reports once every member, zombies
//! included, has been reaped.
//!
//! Members that left the group with `setsid()`/`setpgid()` are out of a group
//! signal's reach; only the PID-1 shutdown sweep (`kill(-1, …)`) still gets
//! them.

use std::io;
use std::time::Duration;

use tokio::time::Instant;

use crate::signal::Signal;
use crate::{Init, Pid};

/// Sends `sig` to every member of group `pgid`. Returns `Ok(false)` when the
/// group has no member left (`ESRCH`).
pub fn signal_group(pgid: Pid, sig: Signal) -> io::Result<bool> {
    match crate::sys::kill_raw(-pgid.0, sig.as_raw()) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(nix::libc::ESRCH) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether group `pgid` still has a member (a zombie counts).
pub fn group_exists(pgid: Pid) -> bool {
    match crate::sys::kill_raw(-pgid.0, 0) {
        Ok(()) => true,
        // EPERM: a member exists that we may not signal.
        Err(e) => e.raw_os_error() != Some(nix::libc::ESRCH),
    }
}

impl Init {
    /// Waits until group `pgid` is empty or `timeout` passes; returns whether
    /// it is empty.
    pub async fn wait_group_empty(&self, pgid: Pid, timeout: Duration) -> bool {
        self.wait_until(Instant::now() + timeout, || !group_exists(pgid))
            .await
    }

    /// Waits until `done()` holds or `deadline` passes; returns the last
    /// answer of `done()`.
    ///
    /// Re-checks on every reap sweep: the usual way a process goes is that
    /// we reap it, as its parent, subreaper or init. A process can also go
    /// without any event we see (`setsid`, or reaped by a parent outside
    /// the group), so a backing-off re-check (1 ms doubling to 200 ms) covers
    /// those cases.
    pub(crate) async fn wait_until(
        &self,
        deadline: Instant,
        mut done: impl FnMut() -> bool,
    ) -> bool {
        const FALLBACK_MAX: Duration = Duration::from_millis(200);
        let mut reaped = self.shared.reaper.subscribe();
        let mut fallback = Duration::from_millis(1);
        loop {
            // Mark the current generation seen *before* checking, so a reap
            // that happens after the check still wakes us.
            reaped.borrow_and_update();
            if done() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let nap = (now + fallback).min(deadline);
            tokio::select! {
                changed = reaped.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep_until(nap).await;
                    }
                }
                () = tokio::time::sleep_until(nap) => {
                    fallback = (fallback * 2).min(FALLBACK_MAX);
                }
            }
        }
    }
}
