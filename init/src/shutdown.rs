//! The graceful-shutdown sequence (SPEC §2.5), bounded in time.
//!
//! 1. SIGTERM to every job group (given by the caller, plus every registered
//!    child that has not been reaped yet).
//! 2. Wait up to `grace` for all of them to die (child reaped, group empty).
//! 3. SIGKILL what survives and wait briefly.
//! 4. As PID 1 only: `kill(-1, SIGTERM)`, a short wait, `kill(-1, SIGKILL)`,
//!    so that descendants that escaped their group cannot outlive the
//!    container's init. Never `kill(-1)` otherwise: that would signal every
//!    process of the user outside the container.
//! 5. Report the survivors (with /proc diagnostics) to the caller, which logs
//!    them and exits.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;

use crate::group::{group_exists, signal_group};
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
        let mut report = ShutdownReport {
            groups: all.len(),
            ..ShutdownReport::default()
        };

        for &g in &all {
            if let Err(e) = signal_group(g, Signal::TERM) {
                tracing::warn!(pgid = g.0, error = %e, "SIGTERM to job group failed");
            }
        }
        let deadline = Instant::now() + grace;
        let left = self.wait_all_empty(&all, deadline).await;
        if !left.is_empty() {
            report.survived_term = left
                .iter()
                .flat_map(|g| procinfo::group_members(g.0))
                .collect();
            for &g in &left {
                let _ = signal_group(g, Signal::KILL);
            }
            self.wait_all_empty(&left, Instant::now() + KILL_WAIT).await;
        }

        if self.is_pid1() {
            if crate::sys::kill_raw(-1, Signal::TERM.as_raw()).is_ok() {
                self.wait_no_children(Instant::now() + KILL_WAIT).await;
            }
            if self.shared.reaper.has_children() {
                report.survived_term.extend(procinfo::everyone_else());
                let _ = crate::sys::kill_raw(-1, Signal::KILL.as_raw());
                self.wait_no_children(Instant::now() + KILL_WAIT).await;
            }
            report.survived_kill = procinfo::everyone_else();
        } else {
            report.survived_kill = all
                .iter()
                .flat_map(|g| procinfo::group_members(g.0))
                .collect();
        }
        report.survived_term.sort_by_key(|s| s.pid);
        report.survived_term.dedup_by_key(|s| s.pid);
        report
    }

    /// Waits until every group in `groups` is empty and no registered child
    /// is left, or `deadline`; returns the groups that still have members.
    async fn wait_all_empty(&self, groups: &BTreeSet<Pid>, deadline: Instant) -> BTreeSet<Pid> {
        for &g in groups {
            let now = Instant::now();
            self.wait_group_empty(g, deadline.saturating_duration_since(now))
                .await;
        }
        groups
            .iter()
            .copied()
            .filter(|&g| group_exists(g))
            .collect()
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
