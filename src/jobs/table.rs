//! The job table: the one structure shared between requests.
//!
//! It owns every job that has not been delivered yet: its state, its two
//! output windows, its capture policy and its stdin. Each job also has a
//! runner task ([`super::runner`]) that owns the job's stdout/stderr pipes
//! and its exit watch and writes what it reads into the table.
//!
//! # Invariants
//! - The lock is a `std::sync::Mutex`, held only for short synchronous
//!   sections (never across an `.await`); slices and results are built from
//!   a job after it has been removed, or from copies, outside the lock.
//! - A job becomes terminal only after its direct child was reaped **and**
//!   the pipe data present at that moment was read (SPEC §5.3), so a terminal
//!   job's windows already hold every byte the child wrote.
//! - **Exactly-once delivery**: a terminal result leaves the table only
//!   through [`JobTable::claim`] or [`JobTable::claim_terminal_among`], which
//!   remove the job in the same critical section that checks it is terminal.
//!   Whoever claims first gets it; every later claim sees the job gone.
//! - Every state change that a waiter may care about (terminal, removed) is
//!   followed by [`Notify::notify_waiters`]; waiters enable their `Notified`
//!   before checking the table, so no wake-up is lost.
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::{Arc, Mutex, MutexGuard};

use init::Pid;
use tokio::net::unix::pipe;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::state::{JobId, JobState, Stream};
use crate::capture::{CapturePolicy, Window};

/// A job's stdin: `None` once closed.
pub type StdinSlot = Arc<tokio::sync::Mutex<Option<pipe::Sender>>>;

/// One job.
#[derive(Debug)]
pub struct Job {
    /// Its id.
    pub id: JobId,
    /// Its process group: the direct child's pid, which is also its pgid.
    pub pgid: Pid,
    /// Its state.
    pub state: JobState,
    /// stdout window.
    pub stdout: Window,
    /// stderr window.
    pub stderr: Window,
    /// What to deliver when it ends.
    pub capture: CapturePolicy,
    /// Its stdin (shared with `input` calls, which write outside the lock).
    pub stdin: StdinSlot,
    /// Cancelled when the job leaves the table: stops its runner.
    pub removed: CancellationToken,
}

/// The outcome of a claim.
#[derive(Debug)]
pub enum Claim {
    /// The job was terminal and is now ours (removed from the table).
    Delivered(Box<Job>),
    /// The job exists and is still running.
    Running,
    /// No such job (never existed, or already delivered).
    Unknown,
}

struct Inner {
    next: u64,
    jobs: BTreeMap<JobId, Job>,
}

/// The job table.
pub struct JobTable {
    inner: Mutex<Inner>,
    changed: Notify,
    max_output: usize,
}

impl JobTable {
    /// An empty table whose windows keep `max_output` bytes per stream.
    pub fn new(max_output: usize) -> JobTable {
        JobTable {
            inner: Mutex::new(Inner {
                next: 1,
                jobs: BTreeMap::new(),
            }),
            changed: Notify::new(),
            max_output,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Every critical section leaves the map consistent, so a poisoned
        // lock (impossible with panic=abort, possible in tests) is reusable.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh, never reused id.
    pub fn next_id(&self) -> JobId {
        let mut inner = self.lock();
        let id = JobId(inner.next);
        inner.next += 1;
        id
    }

    /// A new window sized by the configuration.
    pub fn window(&self) -> Window {
        Window::new(self.max_output)
    }

    /// Adds a running job.
    pub fn insert(&self, job: Job) {
        self.lock().jobs.insert(job.id, job);
        self.changed.notify_waiters();
    }

    /// A future that completes on the next table change. Call
    /// `enable()` on it (pinned) *before* checking the table.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// Runs `f` on the job, if it exists.
    pub fn with<R>(&self, id: JobId, f: impl FnOnce(&Job) -> R) -> Option<R> {
        self.lock().jobs.get(&id).map(f)
    }

    /// Appends output; returns `false` when the job is gone (stop reading).
    pub fn push_output(&self, id: JobId, stream: Stream, bytes: &[u8]) -> bool {
        let mut inner = self.lock();
        let Some(job) = inner.jobs.get_mut(&id) else {
            return false;
        };
        match stream {
            Stream::Stdout => job.stdout.push(bytes),
            Stream::Stderr => job.stderr.push(bytes),
        }
        true
    }

    /// Records the terminal state and wakes waiters.
    ///
    /// A terminal job's stdin is closed here: nobody can write to it any
    /// more (`input` refuses), and every descriptor the server keeps open is
    /// one more that each later spawn has to copy and close at exec. (If a
    /// write is in progress it holds the slot; it fails with EPIPE and closes
    /// it itself.)
    pub fn set_terminal(&self, id: JobId, state: JobState) {
        if let Some(job) = self.lock().jobs.get_mut(&id) {
            job.state = state;
            if let Ok(mut stdin) = job.stdin.try_lock() {
                *stdin = None;
            }
        }
        self.changed.notify_waiters();
    }

    /// Takes the job out if it is terminal (the only way results leave).
    pub fn claim(&self, id: JobId) -> Claim {
        let (claim, idle) = {
            let mut inner = self.lock();
            let claim = match inner.jobs.entry(id) {
                Entry::Vacant(_) => Claim::Unknown,
                Entry::Occupied(e) if !e.get().state.is_terminal() => Claim::Running,
                Entry::Occupied(e) => Claim::Delivered(Box::new(e.remove())),
            };
            (claim, inner.jobs.is_empty())
        };
        if let Claim::Delivered(job) = &claim {
            self.after_removal([job.as_ref()], idle);
        }
        claim
    }

    /// Claims every terminal job among `ids` in one critical section, so a
    /// `wait` either sees all its jobs or fails as a whole.
    ///
    /// Returns `Err(id)` for the first id that does not exist (nothing is
    /// claimed then). Otherwise one entry per id, in order: the delivered job
    /// for the first occurrence of a terminal id, `Repeat` for later
    /// occurrences of it, `Running` for the rest.
    pub fn claim_terminal_among(&self, ids: &[JobId]) -> Result<Vec<WaitEntry>, JobId> {
        let mut out = Vec::with_capacity(ids.len());
        let idle = {
            let mut inner = self.lock();
            if let Some(&missing) = ids.iter().find(|id| !inner.jobs.contains_key(id)) {
                return Err(missing);
            }
            for &id in ids {
                let entry = match inner.jobs.entry(id) {
                    Entry::Occupied(e) if e.get().state.is_terminal() => {
                        WaitEntry::Delivered(Box::new(e.remove()))
                    }
                    Entry::Occupied(_) => WaitEntry::Running(id),
                    // Removed by an earlier occurrence in this same call.
                    Entry::Vacant(_) => out
                        .iter()
                        .find_map(|e| match e {
                            WaitEntry::Delivered(j) if j.id == id => {
                                Some(WaitEntry::Repeat(id, j.state.clone()))
                            }
                            _ => None,
                        })
                        .unwrap_or(WaitEntry::Running(id)),
                };
                out.push(entry);
            }
            inner.jobs.is_empty()
        };
        let delivered: Vec<&Job> = out
            .iter()
            .filter_map(|e| match e {
                WaitEntry::Delivered(job) => Some(job.as_ref()),
                _ => None,
            })
            .collect();
        if !delivered.is_empty() {
            self.after_removal(delivered, idle);
        }
        Ok(out)
    }

    /// Every job, oldest first, with its wire state.
    pub fn list(&self) -> Vec<(JobId, &'static str)> {
        self.lock()
            .jobs
            .values()
            .map(|j| (j.id, j.state.name()))
            .collect()
    }

    /// The process groups of every job in the table (for shutdown).
    pub fn pgids(&self) -> Vec<Pid> {
        self.lock().jobs.values().map(|j| j.pgid).collect()
    }

    /// After jobs left the table: stop their runners, wake waiters, and, when
    /// the table has just become empty, hand freed memory back to the kernel
    /// so an idle server stays small after a burst or a big output.
    fn after_removal<'a>(&self, jobs: impl IntoIterator<Item = &'a Job>, idle: bool) {
        for job in jobs {
            job.removed.cancel();
        }
        self.changed.notify_waiters();
        if idle {
            super::runner::release_buffer();
            init::trim_heap();
        }
    }

    /// Removes a job whatever its state (teardown of a cancelled execute).
    pub fn remove(&self, id: JobId) -> Option<Job> {
        let (job, idle) = {
            let mut inner = self.lock();
            let job = inner.jobs.remove(&id);
            (job, inner.jobs.is_empty())
        };
        if let Some(job) = &job {
            self.after_removal([job], idle);
        }
        job
    }
}

/// One entry of a `wait` answer.
#[derive(Debug)]
pub enum WaitEntry {
    /// Terminal and delivered here.
    Delivered(Box<Job>),
    /// A later duplicate of an id delivered earlier in the same answer.
    Repeat(JobId, JobState),
    /// Still running.
    Running(JobId),
}

#[cfg(test)]
mod tests {
    //! The exactly-once claim logic, without processes: jobs are inserted
    //! and made terminal by hand.

    use super::*;

    fn table_with(states: &[JobState]) -> (JobTable, Vec<JobId>) {
        let table = JobTable::new(1024);
        let ids = states
            .iter()
            .enumerate()
            .map(|(i, state)| {
                let id = table.next_id();
                table.insert(Job {
                    id,
                    pgid: Pid(100_000 + i32::try_from(i).unwrap()),
                    state: JobState::Running,
                    stdout: table.window(),
                    stderr: table.window(),
                    capture: CapturePolicy::default(),
                    stdin: StdinSlot::default(),
                    removed: CancellationToken::new(),
                });
                if state.is_terminal() {
                    table.set_terminal(id, state.clone());
                }
                id
            })
            .collect();
        (table, ids)
    }

    const DONE: JobState = JobState::Exited { code: 0 };

    #[test]
    fn a_terminal_job_is_claimed_once_and_then_unknown() {
        let (t, ids) = table_with(&[DONE]);
        assert!(matches!(t.claim(ids[0]), Claim::Delivered(j) if j.id == ids[0]));
        assert!(matches!(t.claim(ids[0]), Claim::Unknown));
        assert!(t.list().is_empty());
    }

    #[test]
    fn a_running_job_is_not_claimed_and_stays_in_the_table() {
        let (t, ids) = table_with(&[JobState::Running]);
        assert!(matches!(t.claim(ids[0]), Claim::Running));
        assert_eq!(t.list(), vec![(ids[0], "running")]);
    }

    #[test]
    fn claiming_among_ids_takes_every_terminal_one_and_reports_the_rest_running() {
        let (t, ids) = table_with(&[DONE, JobState::Running, JobState::Lost]);
        let entries = t.claim_terminal_among(&ids).unwrap();
        assert!(matches!(&entries[0], WaitEntry::Delivered(j) if j.id == ids[0]));
        assert!(matches!(&entries[1], WaitEntry::Running(id) if *id == ids[1]));
        assert!(matches!(&entries[2], WaitEntry::Delivered(j) if j.state == JobState::Lost));
        assert_eq!(t.list(), vec![(ids[1], "running")]);
    }

    #[test]
    fn a_duplicated_id_is_delivered_at_its_first_occurrence_and_repeated_as_status_later() {
        let (t, ids) = table_with(&[DONE]);
        let entries = t.claim_terminal_among(&[ids[0], ids[0], ids[0]]).unwrap();
        assert!(matches!(&entries[0], WaitEntry::Delivered(_)));
        for e in &entries[1..] {
            assert!(matches!(e, WaitEntry::Repeat(id, s) if *id == ids[0] && *s == DONE));
        }
    }

    #[test]
    fn an_unknown_id_fails_the_whole_claim_and_claims_nothing() {
        let (t, ids) = table_with(&[DONE]);
        let missing = JobId(99);
        assert_eq!(
            t.claim_terminal_among(&[ids[0], missing]).unwrap_err(),
            missing
        );
        assert!(matches!(t.claim(ids[0]), Claim::Delivered(_)));
    }

    #[test]
    fn concurrent_claimers_of_one_result_get_it_exactly_once() {
        for _ in 0..200 {
            let (t, ids) = table_with(&[DONE]);
            let t = Arc::new(t);
            let id = ids[0];
            let claimers: Vec<_> = (0..4)
                .map(|k| {
                    let t = Arc::clone(&t);
                    std::thread::spawn(move || {
                        if k % 2 == 0 {
                            usize::from(matches!(t.claim(id), Claim::Delivered(_)))
                        } else {
                            match t.claim_terminal_among(&[id]) {
                                Ok(e) => e
                                    .iter()
                                    .filter(|e| matches!(e, WaitEntry::Delivered(_)))
                                    .count(),
                                Err(_) => 0,
                            }
                        }
                    })
                })
                .collect();
            let delivered: usize = claimers.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(delivered, 1);
        }
    }

    #[test]
    fn removing_a_job_wakes_waiters_and_cancels_its_runner_token() {
        let (t, ids) = table_with(&[JobState::Running]);
        let token = t.with(ids[0], |j| j.removed.clone()).unwrap();
        let changed = t.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        assert!(t.remove(ids[0]).is_some());
        assert!(token.is_cancelled());
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(changed.as_mut().poll(&mut cx).is_ready());
    }
}
