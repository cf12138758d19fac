//! The graceful-shutdown sequence, bounded in time.
//!
//! Owns no state: it runs on the caller's task, over the groups the caller
//! names plus every child still registered with the reaper.
//!
//! 1. SIGTERM to every job group (given by the caller, plus every registered
//!    child that has not been reaped yet).
//! 2. Wait up to `grace` for all of them to die (leader reaped, group empty).
//! 3. SIGKILL what survives and wait briefly.
//! 4. As PID 1 only: `kill(-1, SIGTERM)`, a short wait, `kill(-1, SIGKILL)`,
//!    so that descendants that escaped their group cannot outlive the
//!    container's init. Never `kill(-1)` otherwise: that would signal every
//!    process of the user outside the container.
//! 5. Report the survivors (with /proc diagnostics) to the caller, which logs
//!    them and exits.
//!
//! Steps 1–3 are one [`Init::escalate`] run over all groups at once (one
//! shared grace, not one per group).
//!
//! # Bound
//! At most `grace` + 1 s (KILL) + 2 s (PID 1: the two sweeps), plus the /proc
//! scans for survivor diagnostics. Nothing in it waits without a deadline.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;

use crate::group::Step;
use crate::procinfo::{self, Survivor};
use crate::signal::Signal;
use crate::{Init, Pid};

/// How long to wait for SIGKILL to take effect at each step.
const KILL_WAIT: Duration = Duration::from_millis(1000);

/// What the shutdown sequence saw.
#[derive(Debug, Default)]
pub struct ShutdownReport {
    /// Groups that were sent SIGTERM.
    pub groups: usize,
    /// Processes still alive when the grace ran out (they were then killed).
    pub survived_term: Vec<Survivor>,
    /// Processes still alive at the very end.
    pub survived_kill: Vec<Survivor>,
}

impl Init {
    /// Runs the shutdown sequence on `groups` (process-group ids of jobs) and
    /// every child still registered with the reaper.
    pub async fn shutdown(
        &self,
        groups: impl IntoIterator<Item = Pid>,
        grace: Duration,
    ) -> ShutdownReport {
        let mut all: BTreeSet<Pid> = groups.into_iter().collect();
        all.extend(self.shared.reaper.running().into_iter().map(Pid));
        let all: Vec<Pid> = all.into_iter().collect();
        let mut report = ShutdownReport {
            groups: all.len(),
            ..ShutdownReport::default()
        };

        // 1–3: TERM to every group, one shared grace, KILL what survived.
        let steps = [
            Step::new(Signal::TERM, grace),
            Step::new(Signal::KILL, KILL_WAIT),
        ];
        let tracked = self.escalate_groups(&all, &steps, |_| {}).await;
        for t in &tracked {
            if let Some(e) = &t.error {
                tracing::warn!(pgid = t.pgid.0, error = %e, "signalling a job group failed");
            }
            report.survived_term.extend(
                t.outcome
                    .survived
                    .iter()
                    .filter(|s| s.after == Signal::TERM)
                    .flat_map(|s| s.members.iter().cloned()),
            );
        }

        if self.is_pid1() {
            if crate::sys::kill(-1, Signal::TERM.as_raw()).is_ok() {
                // As in `escalate`: a stopped process acts on TERM only
                // once continued.
                let _ = crate::sys::kill(-1, Signal::CONT.as_raw());
                self.wait_no_children(Instant::now() + KILL_WAIT).await;
            }
            if self.shared.reaper.has_children() {
                report.survived_term.extend(procinfo::everyone_else());
                let _ = crate::sys::kill(-1, Signal::KILL.as_raw());
                self.wait_no_children(Instant::now() + KILL_WAIT).await;
            }
            report.survived_kill = procinfo::everyone_else();
        } else {
            report.survived_kill = tracked
                .iter()
                .filter(|t| !t.outcome.dead)
                .flat_map(|t| procinfo::group_members(t.pgid.0))
                .collect();
        }
        report.survived_term.sort_by_key(|s| s.pid);
        report.survived_term.dedup_by_key(|s| s.pid);
        report
    }

    /// Waits until this process has no child at all (PID 1: the namespace is
    /// empty), or `deadline`.
    async fn wait_no_children(&self, deadline: Instant) {
        let reaper = &self.shared.reaper;
        self.wait_until(deadline, || {
            // Reap here too: the signal task may be busy, and this keeps the
            // sequence correct even if SIGCHLD were lost.
            reaper.sweep();
            !reaper.has_children()
        })
        .await;
    }
}
