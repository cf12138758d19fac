//! The serial lanes of shell sessions: which job of a shell
//! session may run, and which wait behind it.
//!
//! The job table owns its [`Lanes`] and changes them only inside its own
//! critical sections, together with the FIFO they feed, so a lane and the
//! FIFO never disagree.
//!
//! # Invariants
//! - Of the jobs of one shell session, only the oldest not yet terminal (the
//!   lane's `current`) is in the capacity FIFO or running; the later ones
//!   wait in the lane, outside the FIFO, so a shell session never holds up
//!   other jobs.
//! - When `current` becomes terminal or leaves the table, [`Lanes::release`]
//!   names the next one, which the table moves to the back of the FIFO in
//!   the same critical section.
//! - A lane with neither a current nor a waiting job does not exist, so
//!   [`Lanes::busy`] is "has a job not yet terminal".
//! - `waiting` counts the jobs waiting in lanes (they count against the
//!   queue's bound).

use std::collections::{HashMap, VecDeque};

use crate::jobs::JobId;

/// A shell session's jobs not yet terminal.
#[derive(Debug, Default)]
struct Lane {
    /// The one job of the shell session that may run (queued in the FIFO or
    /// running).
    current: Option<JobId>,
    /// The later ones, in order.
    waiting: VecDeque<JobId>,
}

/// Every shell session's lane.
#[derive(Debug, Default)]
pub struct Lanes {
    lanes: HashMap<String, Lane>,
    waiting: usize,
}

impl Lanes {
    /// Whether shell session `name` has a job that is not terminal yet.
    pub fn busy(&self, name: &str) -> bool {
        self.lanes.contains_key(name)
    }

    /// Jobs waiting in lanes, behind an earlier job of their shell session.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Whether a new job of shell session `name` must wait behind an
    /// earlier one.
    pub fn held(&self, name: &str) -> bool {
        self.lanes.get(name).is_some_and(|l| l.current.is_some())
    }

    /// Enters job `id` in the lane of `name`: behind its current job when
    /// `behind` (it waits outside the FIFO), else as its current job (the
    /// caller puts it in the FIFO).
    pub fn enter(&mut self, name: String, id: JobId, behind: bool) {
        let lane = self.lanes.entry(name).or_default();
        if behind {
            lane.waiting.push_back(id);
            self.waiting += 1;
        } else {
            lane.current = Some(id);
        }
    }

    /// Job `id` of shell session `name` no longer holds its lane (it is
    /// terminal or gone). Returns the lane's next job, now its current one,
    /// for the caller to move to the back of the FIFO; `still_waits` says
    /// whether a waiting job is still in the table and waiting (one that is
    /// not is skipped).
    pub fn release(
        &mut self,
        id: JobId,
        name: &str,
        mut still_waits: impl FnMut(JobId) -> bool,
    ) -> Option<JobId> {
        let lane = self.lanes.get_mut(name)?;
        let mut next = None;
        if lane.current == Some(id) {
            lane.current = None;
            while let Some(candidate) = lane.waiting.pop_front() {
                self.waiting = self.waiting.saturating_sub(1);
                if still_waits(candidate) {
                    lane.current = Some(candidate);
                    next = Some(candidate);
                    break;
                }
            }
        } else if let Some(pos) = lane.waiting.iter().position(|w| *w == id) {
            lane.waiting.remove(pos);
            self.waiting = self.waiting.saturating_sub(1);
        }
        if lane.current.is_none() && lane.waiting.is_empty() {
            self.lanes.remove(name);
        }
        next
    }
}
