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
//! - Every state change that a waiter may care about (started, terminal,
//!   removed) is followed by [`Notify::notify_waiters`] on `changed`, and
//!   every output chunk by the same on `output`; waiters enable their
//!   `Notified` before checking the table, so no wake-up is lost.
//! - **Admission** (SPEC §12.3): every job enters as `Queued` and the FIFO
//!   `queue` of ids; [`JobTable::admit`] takes jobs off its front while
//!   fewer than `max_running` are running, in the same critical section that
//!   counts them. `running` counts jobs admitted and not yet terminal (the
//!   spawn in progress included); it drops exactly once per job, when the job
//!   becomes terminal or leaves the table while still running.
//! - **Shell-session lanes** (SPEC §17): of the jobs of one shell session,
//!   only the oldest not yet terminal (the lane's `current`) is in the
//!   capacity FIFO or running; the later ones wait in the lane, outside the
//!   FIFO, so a session never holds up other jobs. When `current` becomes
//!   terminal or leaves the table, the next one moves to the back of the
//!   FIFO in the same critical section. The runner adopts a job's session
//!   state *before* marking it terminal, so the next job starts with it.
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use init::Pid;
use tokio::net::unix::pipe;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::state::{Cause, ExitOutcome, JobId, JobPhase, JobState, Pending, Ran, Stream};
use crate::capture::{CapturePolicy, Window};

/// A job's stdin: `None` once closed (or before it started).
pub type StdinSlot = Arc<tokio::sync::Mutex<Option<pipe::Sender>>>;

/// One job.
#[derive(Debug)]
pub struct Job {
    /// Its id.
    pub id: JobId,
    /// Its state.
    pub state: JobState,
    /// Its label (SPEC §12.4).
    pub label: Option<String>,
    /// Why it ended, when known (the server's reason, or the kernel's).
    pub cause: Option<Cause>,
    /// The signals our `kill` sent it (bit n for signal n): its death by
    /// one of them is `cause: "killed"`.
    pub kill_signals: u128,
    /// When it entered the queue, if it had to wait there.
    pub queued_at: Option<Instant>,
    /// When it last wrote output (or started).
    pub last_output: Instant,
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
    /// Started by a `POST /exec` stream (SPEC §11.2), which alone delivers
    /// its result: `wait` refuses it, `kill` signals it but never claims it.
    /// Set at submission, never changed.
    pub owned_by_stream: bool,
    /// The shell session it belongs to (SPEC §17). Set at submission.
    pub shell_session: Option<String>,
    /// Queued behind an earlier job of its shell session (not yet in the
    /// capacity FIFO).
    pub waits_for_shell_session: bool,
}

impl Job {
    /// A new queued job.
    pub fn queued(
        id: JobId,
        pending: Pending,
        capture: CapturePolicy,
        label: Option<String>,
        window: usize,
    ) -> Job {
        Job {
            id,
            state: JobState::Queued(Some(Box::new(pending))),
            label,
            cause: None,
            kill_signals: 0,
            queued_at: None,
            last_output: Instant::now(),
            stdout: Window::new(window),
            stderr: Window::new(window),
            capture,
            stdin: StdinSlot::default(),
            removed: CancellationToken::new(),
            owned_by_stream: false,
            shell_session: None,
            waits_for_shell_session: false,
        }
    }

    /// The outside view of its state.
    pub fn phase(&self) -> JobPhase {
        self.state.phase()
    }
}

/// The outcome of a claim.
#[derive(Debug)]
pub enum Claim {
    /// The job was terminal and is now ours (removed from the table).
    Delivered(Box<Job>),
    /// The job exists and is still queued or running.
    Running,
    /// No such job (never existed, or already delivered).
    Unknown,
}

/// A job admitted to start: the caller spawns it.
#[derive(Debug)]
pub struct Admitted {
    /// Its id.
    pub id: JobId,
    /// What to start.
    pub pending: Box<Pending>,
}

/// A listed job.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its id.
    pub id: JobId,
    /// Its state.
    pub phase: JobPhase,
    /// Its label.
    pub label: Option<String>,
    /// Queued behind an earlier job of its shell session.
    pub waits_for_shell_session: bool,
}

/// The queue is full: `(running, queued)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull {
    /// Jobs running.
    pub running: usize,
    /// Jobs queued.
    pub queued: usize,
}

struct Inner {
    next: u64,
    jobs: BTreeMap<JobId, Job>,
    queue: VecDeque<JobId>,
    running: usize,
    /// The serial lane of every shell session with a job not yet terminal.
    lanes: HashMap<String, Lane>,
    /// Jobs waiting in lanes (counted against `max_queued`).
    lane_waiting: usize,
}

/// A shell session's jobs not yet terminal.
#[derive(Debug, Default)]
struct Lane {
    /// The one job of the session that may run (queued in the FIFO or
    /// running).
    current: Option<JobId>,
    /// The later ones, in order.
    waiting: VecDeque<JobId>,
}

impl Inner {
    /// Job `id` no longer holds its session's lane (it is terminal or gone):
    /// the lane's next job moves to the back of the FIFO.
    fn release_lane(&mut self, id: JobId, session: Option<&str>) {
        let Some(name) = session else { return };
        let Some(lane) = self.lanes.get_mut(name) else {
            return;
        };
        if lane.current == Some(id) {
            lane.current = None;
            while let Some(next) = lane.waiting.pop_front() {
                self.lane_waiting = self.lane_waiting.saturating_sub(1);
                if let Some(job) = self.jobs.get_mut(&next)
                    && job.waits_for_shell_session
                {
                    job.waits_for_shell_session = false;
                    lane.current = Some(next);
                    self.queue.push_back(next);
                    break;
                }
            }
        } else if let Some(pos) = lane.waiting.iter().position(|w| *w == id) {
            lane.waiting.remove(pos);
            self.lane_waiting = self.lane_waiting.saturating_sub(1);
        }
        if lane.current.is_none() && lane.waiting.is_empty() {
            self.lanes.remove(name);
        }
    }

    /// `release_lane` for a job still in the map.
    fn release_lane_of(&mut self, id: JobId) {
        let session = self.jobs.get(&id).and_then(|j| j.shell_session.clone());
        self.release_lane(id, session.as_deref());
    }
}

/// The job table.
pub struct JobTable {
    inner: Mutex<Inner>,
    changed: Notify,
    output: Notify,
    max_running: usize,
    max_queued: usize,
}

impl JobTable {
    /// An empty table that runs at most `max_running` jobs at once and
    /// queues at most `max_queued` more.
    pub fn new(max_running: usize, max_queued: usize) -> JobTable {
        JobTable {
            inner: Mutex::new(Inner {
                next: 1,
                jobs: BTreeMap::new(),
                queue: VecDeque::new(),
                running: 0,
                lanes: HashMap::new(),
                lane_waiting: 0,
            }),
            changed: Notify::new(),
            output: Notify::new(),
            max_running: max_running.max(1),
            max_queued,
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

    /// How many jobs run and wait now.
    pub fn counts(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.running, inner.queue.len() + inner.lane_waiting)
    }

    /// Whether shell session `name` has a job that is not terminal yet.
    pub fn shell_session_busy(&self, name: &str) -> bool {
        self.lock().lanes.contains_key(name)
    }

    /// Adds a queued job (see [`Job::queued`]) at the back of the queue and
    /// admits what can start now, in one critical section. A job that cannot
    /// start at once is marked as having waited. Refused when the queue is
    /// full and the job could not start at once.
    pub fn submit(&self, mut job: Job) -> Result<Vec<Admitted>, QueueFull> {
        let id = job.id;
        let admitted = {
            let mut inner = self.lock();
            let behind = job
                .shell_session
                .as_ref()
                .is_some_and(|s| inner.lanes.get(s).is_some_and(|l| l.current.is_some()));
            let starts_now = !behind && inner.queue.is_empty() && inner.running < self.max_running;
            let queued = inner.queue.len() + inner.lane_waiting;
            if !starts_now && queued >= self.max_queued {
                return Err(QueueFull {
                    running: inner.running,
                    queued,
                });
            }
            if !starts_now {
                job.queued_at = Some(Instant::now());
            }
            let session = job.shell_session.clone();
            job.waits_for_shell_session = behind;
            inner.jobs.insert(id, job);
            match session {
                Some(name) if behind => {
                    inner.lanes.entry(name).or_default().waiting.push_back(id);
                    inner.lane_waiting += 1;
                }
                Some(name) => {
                    inner.lanes.entry(name).or_default().current = Some(id);
                    inner.queue.push_back(id);
                }
                None => inner.queue.push_back(id),
            }
            self.admit_locked(&mut inner)
        };
        self.changed.notify_waiters();
        Ok(admitted)
    }

    /// Takes jobs off the front of the queue while there is capacity.
    pub fn admit(&self) -> Vec<Admitted> {
        let admitted = self.admit_locked(&mut self.lock());
        if !admitted.is_empty() {
            self.changed.notify_waiters();
        }
        admitted
    }

    fn admit_locked(&self, inner: &mut Inner) -> Vec<Admitted> {
        let mut out = Vec::new();
        while inner.running < self.max_running {
            let Some(id) = inner.queue.pop_front() else {
                break;
            };
            if let Some(job) = inner.jobs.get_mut(&id)
                && let JobState::Queued(pending) = &mut job.state
                && let Some(pending) = pending.take()
            {
                inner.running += 1;
                out.push(Admitted { id, pending });
            }
        }
        out
    }

    /// Records that an admitted job started. Returns `false` when the job
    /// left the table meanwhile (the caller must not leave its process
    /// behind).
    pub fn started(&self, id: JobId, pgid: Pid, stdin: Option<pipe::Sender>) -> bool {
        let found = {
            let mut inner = self.lock();
            match inner.jobs.get_mut(&id) {
                Some(job) => {
                    job.state = JobState::Started {
                        pgid,
                        ran: Ran {
                            since: Instant::now(),
                            wall: std::time::SystemTime::now(),
                            until: None,
                        },
                        outcome: ExitOutcome::Running,
                    };
                    job.last_output = Instant::now();
                    if let Ok(mut slot) = job.stdin.try_lock() {
                        *slot = stdin;
                    }
                    true
                }
                None => false,
            }
        };
        self.changed.notify_waiters();
        found
    }

    /// Records that an admitted job could not start: it is terminal and its
    /// capacity is free again.
    pub fn start_failed(&self, id: JobId, error: String) {
        {
            let mut inner = self.lock();
            inner.running = inner.running.saturating_sub(1);
            if let Some(job) = inner.jobs.get_mut(&id) {
                job.state = JobState::NotStarted { error };
            }
            inner.release_lane_of(id);
        }
        self.changed.notify_waiters();
    }

    /// Takes a job that is still waiting in the queue out of the table, as
    /// cancelled before start. `None` when it is not waiting (running, being
    /// started, terminal or unknown).
    pub fn cancel_queued(&self, id: JobId) -> Option<Job> {
        let (job, idle) = {
            let mut inner = self.lock();
            let waiting = inner
                .jobs
                .get(&id)
                .is_some_and(|j| matches!(j.state, JobState::Queued(Some(_))));
            if !waiting {
                return None;
            }
            inner.queue.retain(|q| *q != id);
            inner.release_lane_of(id);
            let mut job = inner.jobs.remove(&id)?;
            job.state = JobState::NotStarted {
                error: "cancelled before start".into(),
            };
            (job, inner.jobs.is_empty())
        };
        self.after_removal([&job], idle);
        Some(job)
    }

    /// Cancels a stream-owned job still waiting in the queue *in place*: it
    /// leaves the queue and becomes terminal (`cancelled before start`) but
    /// stays in the table for its stream to deliver. `false` when it is not
    /// waiting.
    pub fn cancel_queued_in_place(&self, id: JobId) -> bool {
        {
            let mut inner = self.lock();
            let waiting = inner
                .jobs
                .get(&id)
                .is_some_and(|j| matches!(j.state, JobState::Queued(Some(_))));
            if !waiting {
                return false;
            }
            inner.queue.retain(|q| *q != id);
            inner.release_lane_of(id);
            if let Some(job) = inner.jobs.get_mut(&id) {
                job.state = JobState::NotStarted {
                    error: "cancelled before start".into(),
                };
            }
        }
        self.changed.notify_waiters();
        true
    }

    /// The first of `ids` that an `/exec` stream owns, if any.
    pub fn stream_owned_among(&self, ids: &[JobId]) -> Option<JobId> {
        let inner = self.lock();
        ids.iter()
            .copied()
            .find(|id| inner.jobs.get(id).is_some_and(|j| j.owned_by_stream))
    }

    /// A future that completes on the next state change (started, terminal,
    /// removed). Call `enable()` on it (pinned) *before* checking the table.
    pub fn changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// A future that completes on the next output chunk of any job. Call
    /// `enable()` on it (pinned) *before* checking the table.
    pub fn output_changed(&self) -> tokio::sync::futures::Notified<'_> {
        self.output.notified()
    }

    /// Runs `f` on the job, if it exists.
    pub fn with<R>(&self, id: JobId, f: impl FnOnce(&Job) -> R) -> Option<R> {
        self.lock().jobs.get(&id).map(f)
    }

    /// Records why a job is ending (first cause wins; a job that is
    /// already terminal keeps what it has).
    pub fn set_cause(&self, id: JobId, cause: Cause) {
        if let Some(job) = self.lock().jobs.get_mut(&id)
            && !job.state.is_terminal()
        {
            job.cause.get_or_insert(cause);
        }
    }

    /// Records, before it is sent, that our `kill` sends `signal` to a job.
    pub fn note_kill(&self, id: JobId, signal: init::Signal) {
        if let Some(job) = self.lock().jobs.get_mut(&id)
            && let Ok(bit) = u32::try_from(signal.as_raw())
        {
            job.kill_signals |= 1u128.checked_shl(bit).unwrap_or(0);
        }
    }

    /// Marks every job that has not ended as ended by shutdown.
    pub fn set_cause_all(&self, cause: Cause) {
        for job in self.lock().jobs.values_mut() {
            if !job.state.is_terminal() {
                job.cause.get_or_insert(cause);
            }
        }
    }

    /// Appends output; returns `false` when the job is gone (stop reading).
    pub fn push_output(&self, id: JobId, stream: Stream, bytes: &[u8]) -> bool {
        {
            let mut inner = self.lock();
            let Some(job) = inner.jobs.get_mut(&id) else {
                return false;
            };
            match stream {
                Stream::Stdout => job.stdout.push(bytes),
                Stream::Stderr => job.stderr.push(bytes),
            }
            job.last_output = Instant::now();
        }
        crate::metrics::output_bytes(matches!(stream, Stream::Stderr), bytes.len());
        self.output.notify_waiters();
        true
    }

    /// Records the direct child's end and wakes waiters; returns whether it
    /// freed capacity (the caller then admits the next queued job).
    ///
    /// A terminal job's stdin is closed here: nobody can write to it any
    /// more (`input` refuses), and every descriptor the server keeps open is
    /// one more that each later spawn has to copy and close at exec. (If a
    /// write is in progress it holds the slot; it fails with EPIPE and closes
    /// it itself.)
    pub fn set_terminal(&self, id: JobId, end: ExitOutcome) -> bool {
        let freed = {
            let mut inner = self.lock();
            let freed = match inner.jobs.get_mut(&id) {
                Some(Job {
                    state: JobState::Started { ran, outcome, .. },
                    stdin,
                    ..
                }) if *outcome == ExitOutcome::Running => {
                    *outcome = end;
                    ran.until = Some(Instant::now());
                    if let Ok(mut stdin) = stdin.try_lock() {
                        *stdin = None;
                    }
                    true
                }
                _ => false,
            };
            if freed {
                inner.running = inner.running.saturating_sub(1);
                inner.release_lane_of(id);
            }
            freed
        };
        self.changed.notify_waiters();
        freed
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
    /// occurrences of it, `Pending` for the rest.
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
                    Entry::Occupied(e) => WaitEntry::Pending(Listed {
                        id,
                        phase: e.get().phase(),
                        label: e.get().label.clone(),
                        waits_for_shell_session: e.get().waits_for_shell_session,
                    }),
                    // Removed by an earlier occurrence in this same call.
                    Entry::Vacant(_) => out
                        .iter()
                        .find_map(|e| match e {
                            WaitEntry::Delivered(j) if j.id == id => {
                                Some(WaitEntry::Repeat(Listed {
                                    id,
                                    phase: j.phase(),
                                    label: j.label.clone(),
                                    waits_for_shell_session: false,
                                }))
                            }
                            _ => None,
                        })
                        .unwrap_or(WaitEntry::Pending(Listed {
                            id,
                            phase: JobPhase::Running,
                            label: None,
                            waits_for_shell_session: false,
                        })),
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

    /// Every job, oldest first.
    pub fn list(&self) -> Vec<Listed> {
        self.lock()
            .jobs
            .values()
            .map(|j| Listed {
                id: j.id,
                phase: j.phase(),
                label: j.label.clone(),
                waits_for_shell_session: j.waits_for_shell_session,
            })
            .collect()
    }

    /// The process groups of every started job in the table (for shutdown).
    pub fn pgids(&self) -> Vec<Pid> {
        self.lock()
            .jobs
            .values()
            .filter_map(|j| j.state.pgid())
            .collect()
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
    /// A job removed while running gives its capacity back here; its runner
    /// stops and never reports it.
    pub fn remove(&self, id: JobId) -> Option<Job> {
        let (job, idle) = {
            let mut inner = self.lock();
            let job = inner.jobs.remove(&id);
            if let Some(job) = &job {
                if !job.state.is_terminal() {
                    inner.release_lane(id, job.shell_session.as_deref());
                }
                match job.state {
                    JobState::Queued(Some(_)) => inner.queue.retain(|q| *q != id),
                    JobState::Queued(None)
                    | JobState::Started {
                        outcome: ExitOutcome::Running,
                        ..
                    } => inner.running = inner.running.saturating_sub(1),
                    _ => {}
                }
            }
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
    Repeat(Listed),
    /// Still queued or running.
    Pending(Listed),
}

#[cfg(test)]
mod tests {
    //! The exactly-once claim logic and the admission queue, without
    //! processes: jobs are started and ended by hand.

    use std::future::Future;

    use init::SpawnSpec;

    use super::*;

    fn pending() -> Pending {
        Pending {
            spec: SpawnSpec::shell("true"),
            stdin: None,
            close_stdin: false,
            timeout: None,
            idle_timeout: None,
            shell_session: None,
        }
    }

    fn submit(t: &JobTable) -> (JobId, Vec<Admitted>) {
        let id = t.next_id();
        let job = Job::queued(id, pending(), CapturePolicy::default(), None, 1024);
        (id, t.submit(job).unwrap())
    }

    /// A table with one job per entry: `None` stays running, `Some` ends so.
    fn table_with(ends: &[Option<ExitOutcome>]) -> (JobTable, Vec<JobId>) {
        let table = JobTable::new(100, 100);
        let ids = ends
            .iter()
            .enumerate()
            .map(|(i, end)| {
                let (id, admitted) = submit(&table);
                assert_eq!(admitted.len(), 1);
                assert!(table.started(id, Pid(100_000 + i32::try_from(i).unwrap()), None));
                if let Some(end) = end {
                    assert!(table.set_terminal(id, *end));
                }
                id
            })
            .collect();
        (table, ids)
    }

    const DONE: Option<ExitOutcome> = Some(ExitOutcome::Exited(0));

    /// Submits a job of shell session `session`.
    fn submit_in(t: &JobTable, session: &str) -> (JobId, Vec<Admitted>) {
        let id = t.next_id();
        let mut job = Job::queued(id, pending(), CapturePolicy::default(), None, 1024);
        job.shell_session = Some(session.to_owned());
        (id, t.submit(job).unwrap())
    }

    #[test]
    fn a_later_session_job_waits_outside_the_fifo_and_starts_when_the_earlier_ends() {
        let t = JobTable::new(2, 100);
        let (a, admitted) = submit_in(&t, "s");
        assert_eq!(admitted.len(), 1);
        assert!(t.started(a, Pid(100_001), None));
        let (b, admitted) = submit_in(&t, "s");
        assert!(admitted.is_empty());
        assert!(t.with(b, |j| j.waits_for_shell_session).unwrap());
        // The free slot goes to a job outside the session at once.
        let (c, admitted) = submit(&t);
        assert_eq!(admitted.iter().map(|x| x.id).collect::<Vec<_>>(), [c]);
        assert!(t.shell_session_busy("s"));
        assert!(t.set_terminal(a, ExitOutcome::Exited(0)));
        assert!(!t.with(b, |j| j.waits_for_shell_session).unwrap());
        assert_eq!(t.admit().iter().map(|x| x.id).collect::<Vec<_>>(), [b]);
        assert!(t.started(b, Pid(100_002), None));
        assert!(t.set_terminal(b, ExitOutcome::Exited(0)));
        assert!(!t.shell_session_busy("s"));
    }

    #[test]
    fn cancelling_a_waiting_session_job_takes_it_out_of_its_lane() {
        let t = JobTable::new(4, 100);
        let (a, _) = submit_in(&t, "s");
        assert!(t.started(a, Pid(100_001), None));
        let (b, _) = submit_in(&t, "s");
        let (c, _) = submit_in(&t, "s");
        assert_eq!(t.counts(), (1, 2));
        assert!(t.cancel_queued(b).is_some());
        assert_eq!(t.counts(), (1, 1));
        assert!(t.set_terminal(a, ExitOutcome::Exited(0)));
        assert_eq!(t.admit().iter().map(|x| x.id).collect::<Vec<_>>(), [c]);
    }

    #[test]
    fn a_terminal_job_is_claimed_once_and_then_unknown() {
        let (t, ids) = table_with(&[DONE]);
        assert!(matches!(t.claim(ids[0]), Claim::Delivered(j) if j.id == ids[0]));
        assert!(matches!(t.claim(ids[0]), Claim::Unknown));
        assert!(t.list().is_empty());
    }

    #[test]
    fn a_running_job_is_not_claimed_and_stays_in_the_table() {
        let (t, ids) = table_with(&[None]);
        assert!(matches!(t.claim(ids[0]), Claim::Running));
        let listed = t.list();
        assert_eq!(
            (listed[0].id, listed[0].phase.clone()),
            (ids[0], JobPhase::Running)
        );
    }

    #[test]
    fn claiming_among_ids_takes_every_terminal_one_and_reports_the_rest_pending() {
        let (t, ids) = table_with(&[DONE, None, Some(ExitOutcome::Lost)]);
        let entries = t.claim_terminal_among(&ids).unwrap();
        assert!(matches!(&entries[0], WaitEntry::Delivered(j) if j.id == ids[0]));
        assert!(matches!(&entries[1], WaitEntry::Pending(l) if l.id == ids[1]));
        assert!(matches!(&entries[2], WaitEntry::Delivered(j) if j.phase() == JobPhase::Lost));
        assert_eq!(t.list().len(), 1);
    }

    #[test]
    fn a_duplicated_id_is_delivered_at_its_first_occurrence_and_repeated_as_status_later() {
        let (t, ids) = table_with(&[DONE]);
        let entries = t.claim_terminal_among(&[ids[0], ids[0], ids[0]]).unwrap();
        assert!(matches!(&entries[0], WaitEntry::Delivered(_)));
        for e in &entries[1..] {
            assert!(
                matches!(e, WaitEntry::Repeat(l) if l.id == ids[0] && l.phase == JobPhase::Exited(0))
            );
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
        let (t, ids) = table_with(&[None]);
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

    #[test]
    fn jobs_beyond_capacity_wait_in_fifo_order_and_start_as_capacity_frees() {
        let t = JobTable::new(2, 10);
        let mut ids = Vec::new();
        for _ in 0..5 {
            let (id, admitted) = submit(&t);
            for a in admitted {
                assert!(t.started(a.id, Pid(1), None));
            }
            ids.push(id);
        }
        assert_eq!(t.counts(), (2, 3));
        assert!(t.with(ids[2], |j| j.queued_at.is_some()).unwrap());
        assert!(t.with(ids[0], |j| j.queued_at.is_none()).unwrap());
        assert!(t.set_terminal(ids[1], ExitOutcome::Exited(0)));
        let next: Vec<JobId> = t.admit().into_iter().map(|a| a.id).collect();
        assert_eq!(next, vec![ids[2]]);
        assert!(t.set_terminal(ids[0], ExitOutcome::Exited(0)));
        let next: Vec<JobId> = t.admit().into_iter().map(|a| a.id).collect();
        assert_eq!(next, vec![ids[3]]);
    }

    #[test]
    fn a_full_queue_refuses_a_job_that_cannot_start_at_once() {
        let t = JobTable::new(1, 1);
        submit(&t);
        submit(&t);
        let id = t.next_id();
        let job = Job::queued(id, pending(), CapturePolicy::default(), None, 1024);
        assert_eq!(
            t.submit(job).unwrap_err(),
            QueueFull {
                running: 1,
                queued: 1
            }
        );
    }

    #[test]
    fn a_queued_job_is_cancelled_before_start_and_never_admitted() {
        let t = JobTable::new(1, 10);
        let (first, _) = submit(&t);
        let (second, admitted) = submit(&t);
        assert!(admitted.is_empty());
        let job = t.cancel_queued(second).unwrap();
        assert_eq!(
            job.phase(),
            JobPhase::NotStarted("cancelled before start".into())
        );
        assert!(
            t.cancel_queued(first).is_none(),
            "a started job is not queued"
        );
        assert!(t.started(first, Pid(1), None));
        assert!(t.set_terminal(first, ExitOutcome::Exited(0)));
        assert!(t.admit().is_empty());
        assert_eq!(t.counts(), (0, 0));
    }

    #[test]
    fn removing_a_running_job_gives_its_capacity_back_exactly_once() {
        let (t, ids) = table_with(&[None]);
        assert_eq!(t.counts(), (1, 0));
        t.remove(ids[0]);
        assert_eq!(t.counts(), (0, 0));
        assert!(!t.set_terminal(ids[0], ExitOutcome::Exited(0)));
        assert_eq!(t.counts(), (0, 0));
    }

    #[test]
    fn a_queued_stream_owned_job_is_cancelled_in_place_for_its_stream_to_claim() {
        let t = JobTable::new(1, 10);
        let (_, admitted) = submit(&t);
        assert_eq!(admitted.len(), 1);
        let id = t.next_id();
        let mut job = Job::queued(id, pending(), CapturePolicy::default(), None, 1024);
        job.owned_by_stream = true;
        assert!(t.submit(job).unwrap().is_empty());
        assert_eq!(t.stream_owned_among(&[JobId(1), id]), Some(id));
        assert_eq!(t.stream_owned_among(&[JobId(1)]), None);
        assert!(t.cancel_queued_in_place(id));
        assert!(!t.cancel_queued_in_place(id));
        assert_eq!(t.counts(), (1, 0));
        match t.claim(id) {
            Claim::Delivered(j) => assert_eq!(
                j.phase(),
                JobPhase::NotStarted("cancelled before start".into())
            ),
            other => panic!("{other:?}"),
        }
    }
}
