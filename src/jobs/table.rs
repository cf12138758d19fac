//! The job table: the one structure shared between requests, private to
//! `jobs` (front-ends reach it only through the verbs of [`super::Jobs`]).
//!
//! It owns every job that has not been delivered yet: its state, its two
//! output windows, its capture policy, its owner and its stdin. Each job
//! also has a runner task ([`super::runner`]) that owns the job's
//! stdout/stderr pipes and its pending exit and writes what it reads into the
//! table.
//!
//! # Invariants
//! - The lock is a `std::sync::Mutex`, held only for short synchronous
//!   sections (never across an `.await`); slices and results are built from
//!   a job after it has been removed, or from copies, outside the lock.
//! - A job becomes terminal only after its direct child was reaped **and**
//!   the pipe data present at that moment was read, so a terminal
//!   job's windows already hold every byte the child wrote.
//! - **Exactly-once delivery**: a terminal result leaves the table only
//!   through [`JobTable::claim`], [`JobTable::claim_terminal_among`] or
//!   [`JobTable::cancel_queued`], which remove the job in the same critical
//!   section that checks it is terminal (or makes it so). Whoever claims
//!   first gets it; every later claim sees the job gone.
//! - **A kill answers with the death it caused**: while a `kill` signals a
//!   job its caller owns ([`JobTable::reserve`]), a `wait` does not claim it
//!   (it sees the job as pending), so the kill's answer carries the result
//!   and the waiter learns where it went, whichever task the runtime wakes
//!   first.
//! - **Waiters learn where a result went**: a `wait` registers
//!   its jobs ([`JobTable::register_waiter`]) while they exist; a registered
//!   job that leaves the table terminal leaves a [`Gone`] record of how it
//!   ended, kept exactly as long as a registered waiter may ask for it. A
//!   request that starts after the job left finds no record.
//! - Every state change that a waiter may care about (started, terminal,
//!   removed) is followed by [`Notify::notify_waiters`] on `changed`, and
//!   every output chunk by the same on `output`. [`JobTable::wait_for`] is the
//!   one loop that waits on them: it enables its `Notified` before it checks
//!   the table, so no wake-up is lost.
//! - **Admission**: every job enters as `Queued` and the FIFO
//!   `queue` of ids; [`JobTable::admit`] takes jobs off its front while
//!   fewer than `max_running` are running, in the same critical section that
//!   counts them. `running` counts jobs admitted and not yet terminal (the
//!   spawn in progress included); it drops exactly once per job, when the job
//!   becomes terminal or leaves the table while still running.
//! - **Shell-session lanes** ([`Lanes`]): of the jobs of one shell
//!   session, only the oldest not yet terminal is in the capacity FIFO or
//!   running; the lanes change only in the table's critical sections. The
//!   runner adopts a job's shell-session state *before* marking it
//!   terminal, so the next job starts with it.
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use init::Pid;
use tokio::net::unix::pipe;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::awaiting::Input;
use super::shell_session::lanes::Lanes;
use super::state::{Cause, ExitOutcome, JobId, JobPhase, JobState, Owner, Pending, Ran, Stream};
use super::terminal::{Terminal, Tty};
use crate::capture::{CapturePolicy, Window};

/// A job's stdin: `None` once closed (or before it started).
pub(super) type StdinSlot = Arc<tokio::sync::Mutex<Option<StdinWriter>>>;

/// Where a job's stdin goes: a pipe, or a terminal job's master.
#[derive(Debug)]
pub(super) enum StdinWriter {
    /// A pipe job's stdin pipe.
    Pipe(pipe::Sender),
    /// A terminal job's terminal.
    Terminal(Arc<Terminal>),
}

/// One job. Its fields are `jobs`' own: front-ends hold a delivered job
/// only to render it ([`super::result`]).
#[derive(Debug)]
pub struct Job {
    /// Its id.
    pub(super) id: JobId,
    /// Its state.
    pub(super) state: JobState,
    /// Who receives its result. Set at launch, never changed.
    pub(super) owner: Owner,
    /// Its label.
    pub(super) label: Option<String>,
    /// Why it ended, when known (the server's reason, or the kernel's).
    pub(super) cause: Option<Cause>,
    /// The signals our `kill` sent it (bit n for signal n): its death by
    /// one of them is `cause: "killed"`.
    pub(super) kill_signals: u128,
    /// When it entered the queue, if it had to wait there.
    pub(super) queued_at: Option<Instant>,
    /// When it last wrote output (or started).
    pub(super) last_output: Instant,
    /// stdout window.
    pub(super) stdout: Window,
    /// stderr window.
    pub(super) stderr: Window,
    /// What to deliver when it ends.
    pub(super) capture: CapturePolicy,
    /// Its stdin (written outside the lock by [`super::Jobs::write_stdin`]).
    pub(super) stdin: StdinSlot,
    /// The open file that is its input (its stdin pipe, or its terminal),
    /// once started: what [`super::awaiting`] compares a read against.
    pub(super) input: Option<Input>,
    /// A pipe job's stdout and stderr read ends, shared with its runner:
    /// [`super::awaiting`] reports nothing while they hold bytes the
    /// runner has not read yet (a prompt on its way).
    pub(super) output_pipes: Option<[Arc<pipe::Receiver>; 2]>,
    /// Cancelled when the job leaves the table: stops its runner.
    pub(super) removed: CancellationToken,
    /// The shell session it belongs to. Set at launch.
    pub(super) shell_session: Option<String>,
    /// Queued behind an earlier job of its shell session (not yet in the
    /// capacity FIFO).
    pub(super) waits_for_shell_session: bool,
    /// Whether it runs on a terminal, and its terminal once started. Set
    /// at launch; its terminal at start, kept until delivery.
    pub(super) tty: Tty,
    /// Blocking `wait` calls that listed it (see [`Gone`]).
    waiters: usize,
    /// `kill` calls signalling it that will claim it ([`JobTable::reserve`]).
    signalling: usize,
    /// The one attached terminal writer, if any.
    pub(super) writer: Option<super::attach::Writer>,
}

impl Job {
    /// A new queued job, owned by its caller.
    pub(super) fn queued(
        id: JobId,
        pending: Pending,
        capture: CapturePolicy,
        label: Option<String>,
        window: usize,
    ) -> Job {
        let shell_session = pending.shell_session.as_ref().map(|s| s.name.clone());
        let tty = if pending.terminal.is_some() {
            Tty::Asked
        } else {
            Tty::No
        };
        Job {
            id,
            state: JobState::Queued(Some(Box::new(pending))),
            owner: Owner::Caller,
            label,
            cause: None,
            kill_signals: 0,
            queued_at: None,
            last_output: Instant::now(),
            stdout: Window::new(window),
            stderr: Window::new(window),
            capture,
            stdin: StdinSlot::default(),
            input: None,
            output_pipes: None,
            removed: CancellationToken::new(),
            shell_session,
            waits_for_shell_session: false,
            tty,
            waiters: 0,
            signalling: 0,
            writer: None,
        }
    }

    /// The outside view of its state.
    pub fn phase(&self) -> JobPhase {
        self.state.phase()
    }

    /// Bytes `stream` wrote in all (retained or not).
    pub fn total_bytes(&self, stream: Stream) -> u64 {
        match stream {
            Stream::Stdout => self.stdout.total(),
            Stream::Stderr => self.stderr.total(),
        }
    }

    /// Bytes of memory its output windows hold: what keeping it costs
    /// (a result kept to be put back counts it against the answer budgets).
    pub fn held_bytes(&self) -> usize {
        self.stdout.held().saturating_add(self.stderr.held())
    }

    /// Its listing entry.
    pub(super) fn listed(&self) -> Listed {
        Listed {
            id: self.id,
            phase: self.phase(),
            label: self.label.clone(),
            waits_for_shell_session: self.waits_for_shell_session,
            awaiting_input: false,
            tty: self.tty.is_tty(),
            ports: Vec::new(),
            pid: self.state.pgid(),
        }
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

/// A queued job cancelled before it started.
#[derive(Debug)]
pub(super) enum Cancelled {
    /// Taken out of the table, for the canceller to deliver.
    Removed(Box<Job>),
    /// Left in the table, terminal, for its stream to deliver.
    InPlace,
}

/// A job admitted to start: the caller spawns it.
#[derive(Debug)]
pub(super) struct Admitted {
    /// Its id.
    pub(super) id: JobId,
    /// What to start.
    pub(super) pending: Box<Pending>,
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
    /// Blocked reading its stdin or terminal, when someone looked
    /// ([`super::Jobs::list`], a `wait` until input).
    pub awaiting_input: bool,
    /// A terminal job.
    pub tty: bool,
    /// The sockets it listens on, when someone looked ([`super::Jobs::list`],
    /// a `wait` until a port).
    pub ports: Vec<super::ports::Port>,
    /// Its process's pid (also its process group), once started.
    pub pid: Option<Pid>,
}

/// How a job that a waiter listed ended, after another request took its
/// result (the waiter answers with it and
/// `result_delivered_elsewhere: true`).
#[derive(Debug, Clone)]
pub struct Gone {
    /// Its id.
    pub id: JobId,
    /// How it ended.
    pub phase: JobPhase,
    /// Why, when known.
    pub cause: Option<Cause>,
    /// Its label.
    pub label: Option<String>,
    /// Who received its result.
    pub owner: Owner,
    /// Bytes it wrote to stdout in all.
    pub stdout_bytes: u64,
}

/// The queue is full: `(running, queued)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueFull {
    /// Jobs running.
    pub running: usize,
    /// Jobs queued.
    pub queued: usize,
}

/// What a [`JobTable::wait_for`] check decided.
pub(super) enum Check<R> {
    /// Done: this is the answer.
    Done(R),
    /// Look again at the next change (and output, if watched), or at
    /// `until`.
    Wait {
        /// When to look again even without a change.
        until: Option<Instant>,
    },
}

impl<R> Check<R> {
    /// Look again at the next change.
    pub(super) const AGAIN: Check<R> = Check::Wait { until: None };
}

struct Inner {
    next: u64,
    /// Boxed: a B-tree leaf holds 11 entries and is about two thirds full
    /// after ascending inserts, so the records themselves in its nodes cost
    /// half as much again as the record (~570 B each); boxed, the slack is
    /// on 16-byte entries (10,000 idle jobs: the budget in BENCHMARKS.md is 4 KiB each).
    jobs: BTreeMap<JobId, Box<Job>>,
    queue: VecDeque<JobId>,
    running: usize,
    /// The serial lane of every shell session with a job not yet terminal.
    lanes: Lanes,
    /// How registered jobs that left the table ended, with the number of
    /// waiters that may still ask.
    gone: HashMap<JobId, (Gone, usize)>,
}

impl Inner {
    /// Job `id` no longer holds its shell session's lane (it is terminal or
    /// gone): the lane's next job moves to the back of the FIFO.
    fn release_lane(&mut self, id: JobId, shell_session: Option<&str>) {
        let Some(name) = shell_session else { return };
        let jobs = &mut self.jobs;
        let next = self.lanes.release(id, name, |j| {
            jobs.get(&j).is_some_and(|j| j.waits_for_shell_session)
        });
        if let Some(next) = next {
            if let Some(job) = self.jobs.get_mut(&next) {
                job.waits_for_shell_session = false;
            }
            self.queue.push_back(next);
        }
    }

    /// `release_lane` for a job still in the map.
    fn release_lane_of(&mut self, id: JobId) {
        let shell_session = self.jobs.get(&id).and_then(|j| j.shell_session.clone());
        self.release_lane(id, shell_session.as_deref());
    }

    /// Takes job `id` out of the map; a terminal one that waiters listed
    /// leaves its [`Gone`] record for them.
    fn take(&mut self, id: JobId) -> Option<Box<Job>> {
        let job = self.jobs.remove(&id)?;
        if job.waiters > 0 && job.state.is_terminal() {
            let gone = Gone {
                id,
                phase: job.phase(),
                cause: job.cause,
                label: job.label.clone(),
                owner: job.owner,
                stdout_bytes: job.stdout.total(),
            };
            self.gone.insert(id, (gone, job.waiters));
        }
        Some(job)
    }
}

/// The job table.
pub(super) struct JobTable {
    inner: Mutex<Inner>,
    changed: Notify,
    output: Notify,
    max_running: usize,
    max_queued: usize,
}

impl JobTable {
    /// An empty table that runs at most `max_running` jobs at once and
    /// queues at most `max_queued` more.
    pub(super) fn new(max_running: usize, max_queued: usize) -> JobTable {
        JobTable {
            inner: Mutex::new(Inner {
                next: 1,
                jobs: BTreeMap::new(),
                queue: VecDeque::new(),
                running: 0,
                lanes: Lanes::default(),
                gone: HashMap::new(),
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

    /// The one "enable the notification, check, wait" loop:
    /// calls `check` until it is done, waking on every state change, on
    /// every output chunk too when `output`, and at the `until` the check
    /// asked for. The `Notified` futures are enabled *before* `check` looks
    /// at the table, so a change between the look and the wait is never
    /// lost. Cancel by dropping the future.
    pub(super) async fn wait_for<R>(&self, output: bool, mut check: impl FnMut() -> Check<R>) -> R {
        loop {
            let changed = self.changed.notified();
            let written = self.output.notified();
            tokio::pin!(changed, written);
            changed.as_mut().enable();
            if output {
                written.as_mut().enable();
            }
            let until = match check() {
                Check::Done(r) => return r,
                Check::Wait { until } => until,
            };
            tokio::select! {
                () = &mut changed => {}
                () = &mut written, if output => {}
                () = super::sleep_until_opt(until) => {}
            }
        }
    }

    /// A fresh, never reused id.
    pub(super) fn next_id(&self) -> JobId {
        let mut inner = self.lock();
        let id = JobId(inner.next);
        inner.next += 1;
        id
    }

    /// How many jobs run and wait now.
    pub(super) fn counts(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.running, inner.queue.len() + inner.lanes.waiting())
    }

    /// Whether shell session `name` has a job that is not terminal yet.
    pub(super) fn shell_session_busy(&self, name: &str) -> bool {
        self.lock().lanes.busy(name)
    }

    /// Adds a queued job (see [`Job::queued`]) at the back of the queue and
    /// admits what can start now, in one critical section. A job that cannot
    /// start at once is marked as having waited. Refused when the queue is
    /// full and the job could not start at once.
    pub(super) fn submit(&self, mut job: Job) -> Result<Vec<Admitted>, QueueFull> {
        let id = job.id;
        let admitted = {
            let mut inner = self.lock();
            let behind = job
                .shell_session
                .as_ref()
                .is_some_and(|s| inner.lanes.held(s));
            let starts_now = !behind && inner.queue.is_empty() && inner.running < self.max_running;
            let queued = inner.queue.len() + inner.lanes.waiting();
            if !starts_now && queued >= self.max_queued {
                return Err(QueueFull {
                    running: inner.running,
                    queued,
                });
            }
            if !starts_now {
                job.queued_at = Some(Instant::now());
            }
            let shell_session = job.shell_session.clone();
            job.waits_for_shell_session = behind;
            inner.jobs.insert(id, Box::new(job));
            if let Some(name) = shell_session {
                inner.lanes.enter(name, id, behind);
            }
            if !behind {
                inner.queue.push_back(id);
            }
            self.admit_locked(&mut inner)
        };
        self.changed.notify_waiters();
        Ok(admitted)
    }

    /// Takes jobs off the front of the queue while there is capacity.
    pub(super) fn admit(&self) -> Vec<Admitted> {
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
    /// A terminal job's `terminal` is kept with it until it is delivered.
    pub(super) fn started(
        &self,
        id: JobId,
        pgid: Pid,
        stdin: Option<StdinWriter>,
        terminal: Option<Arc<Terminal>>,
    ) -> bool {
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
                    job.input = match &terminal {
                        Some(t) => Input::terminal_at(&t.device().path),
                        None => match &stdin {
                            Some(StdinWriter::Pipe(tx)) => Input::pipe(tx),
                            _ => None,
                        },
                    };
                    if let Some(t) = terminal {
                        job.tty = Tty::Open(t);
                    }
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

    /// Keeps a started pipe job's output read ends with it (see
    /// [`Job::output_pipes`]).
    pub(super) fn set_output_pipes(&self, id: JobId, pipes: [Arc<pipe::Receiver>; 2]) {
        if let Some(job) = self.lock().jobs.get_mut(&id) {
            job.output_pipes = Some(pipes);
        }
    }

    /// Records that an admitted job could not start: it is terminal and its
    /// capacity is free again. A job that left the table meanwhile gave its
    /// capacity back when it left ([`JobTable::remove`]).
    pub(super) fn start_failed(&self, id: JobId, error: String) {
        {
            let mut inner = self.lock();
            if let Some(job) = inner.jobs.get_mut(&id) {
                job.state = JobState::NotStarted { error };
                inner.running = inner.running.saturating_sub(1);
                inner.release_lane_of(id);
            }
        }
        self.changed.notify_waiters();
    }

    /// Cancels a job that is still waiting in the queue: it leaves the queue
    /// and its lane and becomes terminal (`cancelled before start`). A job
    /// its caller owns is taken out for the canceller to deliver; one a
    /// stream owns stays for its stream. `None` when it is not waiting
    /// (running, being started, terminal or unknown).
    pub(super) fn cancel_queued(&self, id: JobId) -> Option<Cancelled> {
        let (cancelled, idle) = {
            let mut inner = self.lock();
            let job = inner.jobs.get_mut(&id)?;
            if !matches!(job.state, JobState::Queued(Some(_))) {
                return None;
            }
            job.state = JobState::NotStarted {
                error: "cancelled before start".into(),
            };
            let owner = job.owner;
            inner.queue.retain(|q| *q != id);
            inner.release_lane_of(id);
            let cancelled = match owner {
                Owner::JobStream | Owner::Task(_) => Cancelled::InPlace,
                Owner::Caller => Cancelled::Removed(inner.take(id)?),
            };
            (cancelled, inner.jobs.is_empty())
        };
        match &cancelled {
            Cancelled::Removed(job) => self.after_removal([job.as_ref()], idle),
            Cancelled::InPlace => self.changed.notify_waiters(),
        }
        Some(cancelled)
    }

    /// The first of `ids` that its caller does not own (an `/exec` stream
    /// or a task does), with its owner, if any.
    pub(super) fn owned_among(&self, ids: &[JobId]) -> Option<(JobId, Owner)> {
        let inner = self.lock();
        ids.iter().find_map(|id| {
            inner
                .jobs
                .get(id)
                .filter(|j| !j.owner.is_caller())
                .map(|j| (*id, j.owner))
        })
    }

    /// Runs `f` on the job, if it exists.
    pub(super) fn with<R>(&self, id: JobId, f: impl FnOnce(&Job) -> R) -> Option<R> {
        self.lock().jobs.get(&id).map(|j| f(j))
    }

    /// Runs `f` on the job mutably, if it exists (a short change of one of
    /// its own fields; nothing that wakes waiters).
    pub(super) fn with_mut<R>(&self, id: JobId, f: impl FnOnce(&mut Job) -> R) -> Option<R> {
        self.lock().jobs.get_mut(&id).map(|j| f(j))
    }

    /// How job `id` ended, if it left the table while a registered waiter
    /// listed it ([`JobTable::register_waiter`]).
    pub(super) fn gone(&self, id: JobId) -> Option<Gone> {
        self.lock().gone.get(&id).map(|(g, _)| g.clone())
    }

    /// Records why a job is ending (first cause wins; a job that is
    /// already terminal keeps what it has).
    pub(super) fn set_cause(&self, id: JobId, cause: Cause) {
        if let Some(job) = self.lock().jobs.get_mut(&id)
            && !job.state.is_terminal()
        {
            job.cause.get_or_insert(cause);
        }
    }

    /// Records, before it is sent, that our `kill` sends `signal` to a job.
    pub(super) fn note_kill(&self, id: JobId, signal: init::Signal) {
        if let Some(job) = self.lock().jobs.get_mut(&id)
            && let Ok(bit) = u32::try_from(signal.as_raw())
        {
            job.kill_signals |= 1u128.checked_shl(bit).unwrap_or(0);
        }
    }

    /// Marks every job that has not ended as ended by shutdown.
    pub(super) fn set_cause_all(&self, cause: Cause) {
        for job in self.lock().jobs.values_mut() {
            if !job.state.is_terminal() {
                job.cause.get_or_insert(cause);
            }
        }
    }

    /// Appends output; returns `false` when the job is gone (stop reading).
    pub(super) fn push_output(&self, id: JobId, stream: Stream, bytes: &[u8]) -> bool {
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
    pub(super) fn set_terminal(&self, id: JobId, end: ExitOutcome) -> bool {
        let freed = {
            let mut inner = self.lock();
            let freed = match inner.jobs.get_mut(&id).map(|j| &mut **j) {
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
    pub(super) fn claim(&self, id: JobId) -> Claim {
        let (claim, idle) = {
            let mut inner = self.lock();
            let claim = match inner.jobs.get(&id) {
                None => Claim::Unknown,
                Some(job) if !job.state.is_terminal() => Claim::Running,
                Some(_) => inner.take(id).map_or(Claim::Unknown, Claim::Delivered),
            };
            (claim, inner.jobs.is_empty())
        };
        if let Claim::Delivered(job) = &claim {
            self.after_removal([job.as_ref()], idle);
        }
        claim
    }

    /// Registers a blocking `wait` on `ids`: until the returned guard is
    /// dropped, a listed job that leaves the table terminal leaves its
    /// [`Gone`] record. `Err(id)` for the first id that does not exist
    /// (nothing is registered then).
    pub(super) fn register_waiter<'a>(&'a self, ids: &[JobId]) -> Result<Waiter<'a>, JobId> {
        let mut inner = self.lock();
        if let Some(&missing) = ids.iter().find(|id| !inner.jobs.contains_key(id)) {
            return Err(missing);
        }
        let mut distinct = ids.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        for id in &distinct {
            if let Some(job) = inner.jobs.get_mut(id) {
                job.waiters += 1;
            }
        }
        Ok(Waiter {
            table: self,
            ids: distinct,
        })
    }

    /// Reserves job `id`'s result for a `kill` that signals it: until the
    /// returned guard is dropped, [`JobTable::claim_terminal_among`] leaves
    /// the job to the kill (it stays pending there).
    pub(super) fn reserve(&self, id: JobId) -> Reserved<'_> {
        if let Some(job) = self.lock().jobs.get_mut(&id) {
            job.signalling += 1;
        }
        Reserved { table: self, id }
    }

    /// Claims every terminal job among `ids` in one critical section, so a
    /// `wait` either sees all its jobs or fails as a whole.
    ///
    /// Returns `Err(id)` for the first id that neither exists nor left a
    /// [`Gone`] record (nothing is claimed then). Otherwise one entry per id,
    /// in order: the delivered job for the first occurrence of a terminal
    /// id, `Repeat` for later occurrences of it, `Elsewhere` for a job whose
    /// result another request took, `Pending` for the rest.
    pub(super) fn claim_terminal_among(&self, ids: &[JobId]) -> Result<Vec<TableEntry>, JobId> {
        let mut out: Vec<TableEntry> = Vec::with_capacity(ids.len());
        let idle = {
            let mut inner = self.lock();
            let known = |id: &&JobId| inner.jobs.contains_key(id) || inner.gone.contains_key(id);
            if let Some(&missing) = ids.iter().find(|id| !known(id)) {
                return Err(missing);
            }
            for &id in ids {
                let earlier = out.iter().find_map(|e| match e {
                    TableEntry::Delivered(j) if j.id == id => Some(j.listed()),
                    _ => None,
                });
                let entry = if let Some(mut listed) = earlier {
                    // Removed by an earlier occurrence in this same call.
                    listed.waits_for_shell_session = false;
                    TableEntry::Repeat(listed)
                } else if let Some(job) = inner.jobs.get(&id) {
                    if job.state.is_terminal() && job.signalling == 0 {
                        match inner.take(id) {
                            Some(job) => TableEntry::Delivered(job),
                            None => return Err(id),
                        }
                    } else {
                        TableEntry::Pending(job.listed())
                    }
                } else if let Some((gone, _)) = inner.gone.get(&id) {
                    TableEntry::Elsewhere(gone.clone())
                } else {
                    return Err(id);
                };
                out.push(entry);
            }
            inner.jobs.is_empty()
        };
        let delivered: Vec<&Job> = out
            .iter()
            .filter_map(|e| match e {
                TableEntry::Delivered(job) => Some(job.as_ref()),
                _ => None,
            })
            .collect();
        if !delivered.is_empty() {
            self.after_removal(delivered, idle);
        }
        Ok(out)
    }

    /// Puts a delivered job back, terminal and unclaimed, for the next
    /// claim: its result never reached whoever claimed it. The
    /// waiters registered when it left move back with it from its [`Gone`]
    /// record, so a `wait` that listed it claims it again.
    pub(super) fn put_back(&self, mut job: Job) {
        {
            let mut inner = self.lock();
            job.signalling = 0;
            job.waiters = inner.gone.remove(&job.id).map_or(0, |(_, left)| left);
            inner.jobs.insert(job.id, Box::new(job));
        }
        self.changed.notify_waiters();
    }

    /// Every job, oldest first.
    pub(super) fn list(&self) -> Vec<Listed> {
        self.lock().jobs.values().map(|j| j.listed()).collect()
    }

    /// Every started job's id and process group, with whether it is a
    /// terminal job's (whose processes are its session's), oldest first
    /// (ports: which job a socket's holder belongs to).
    pub(super) fn groups(&self) -> Vec<(JobId, Pid, bool)> {
        self.lock()
            .jobs
            .values()
            .filter_map(|j| j.state.pgid().map(|p| (j.id, p, j.tty.is_tty())))
            .collect()
    }

    /// The newest job in the table that `pick` accepts (its listing entry
    /// says), without looking at anything else.
    pub(super) fn find(&self, pick: impl Fn(&Listed) -> bool) -> Option<Listed> {
        let table = self.lock();
        table
            .jobs
            .values()
            .rev()
            .map(|j| j.listed())
            .find(|l| pick(l))
    }

    /// The process groups of every started job in the table (for
    /// shutdown), each with whether it is a terminal job's (whose session
    /// may hold more groups).
    pub(super) fn pgids(&self) -> Vec<(Pid, bool)> {
        self.lock()
            .jobs
            .values()
            .filter_map(|j| j.state.pgid().map(|p| (p, j.tty.is_tty())))
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
    pub(super) fn remove(&self, id: JobId) -> Option<Box<Job>> {
        let (job, idle) = {
            let mut inner = self.lock();
            let job = inner.take(id);
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
            self.after_removal([job.as_ref()], idle);
        }
        job
    }
}

/// A blocking `wait`'s registration ([`JobTable::register_waiter`]);
/// dropping it forgets the [`Gone`] records nobody else asks for.
pub(super) struct Waiter<'a> {
    table: &'a JobTable,
    ids: Vec<JobId>,
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let mut inner = self.table.lock();
        for id in &self.ids {
            if let Some(job) = inner.jobs.get_mut(id) {
                job.waiters = job.waiters.saturating_sub(1);
            } else if let Some((_, left)) = inner.gone.get_mut(id) {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    inner.gone.remove(id);
                }
            }
        }
    }
}

/// A `kill`'s reservation of a job's result ([`JobTable::reserve`]);
/// dropping it (the kill answered, or was cancelled) lets waiters claim the
/// job again, and wakes them to look.
pub(super) struct Reserved<'a> {
    table: &'a JobTable,
    id: JobId,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if let Some(job) = self.table.lock().jobs.get_mut(&self.id) {
            job.signalling = job.signalling.saturating_sub(1);
        }
        self.table.changed.notify_waiters();
    }
}

/// One entry of [`JobTable::claim_terminal_among`].
#[derive(Debug)]
pub(super) enum TableEntry {
    /// Terminal and delivered here.
    Delivered(Box<Job>),
    /// A later duplicate of an id delivered earlier in the same answer.
    Repeat(Listed),
    /// Its result was taken by another request while this one waited.
    Elsewhere(Gone),
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
            terminal: None,
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
                assert!(table.started(id, Pid(100_000 + i32::try_from(i).unwrap()), None, None));
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
        assert!(t.started(a, Pid(100_001), None, None));
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
        assert!(t.started(b, Pid(100_002), None, None));
        assert!(t.set_terminal(b, ExitOutcome::Exited(0)));
        assert!(!t.shell_session_busy("s"));
    }

    #[test]
    fn cancelling_a_waiting_session_job_takes_it_out_of_its_lane() {
        let t = JobTable::new(4, 100);
        let (a, _) = submit_in(&t, "s");
        assert!(t.started(a, Pid(100_001), None, None));
        let (b, _) = submit_in(&t, "s");
        let (c, _) = submit_in(&t, "s");
        assert_eq!(t.counts(), (1, 2));
        assert!(matches!(t.cancel_queued(b), Some(Cancelled::Removed(_))));
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
        assert!(matches!(&entries[0], TableEntry::Delivered(j) if j.id == ids[0]));
        assert!(matches!(&entries[1], TableEntry::Pending(l) if l.id == ids[1]));
        assert!(matches!(&entries[2], TableEntry::Delivered(j) if j.phase() == JobPhase::Lost));
        assert_eq!(t.list().len(), 1);
    }

    #[test]
    fn a_duplicated_id_is_delivered_at_its_first_occurrence_and_repeated_as_status_later() {
        let (t, ids) = table_with(&[DONE]);
        let entries = t.claim_terminal_among(&[ids[0], ids[0], ids[0]]).unwrap();
        assert!(matches!(&entries[0], TableEntry::Delivered(_)));
        for e in &entries[1..] {
            assert!(
                matches!(e, TableEntry::Repeat(l) if l.id == ids[0] && l.phase == JobPhase::Exited(0))
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
                                    .filter(|e| matches!(e, TableEntry::Delivered(_)))
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
        let gone = t.wait_for(false, || match t.with(ids[0], |_| ()) {
            Some(()) => Check::AGAIN,
            None => Check::Done(()),
        });
        tokio::pin!(gone);
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(gone.as_mut().poll(&mut cx).is_pending());
        assert!(t.remove(ids[0]).is_some());
        assert!(token.is_cancelled());
        assert!(gone.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_registered_waiter_learns_how_a_job_claimed_elsewhere_ended_and_a_later_request_does_not() {
        let (t, ids) = table_with(&[None]);
        let waiter = t.register_waiter(&[ids[0], ids[0]]).unwrap();
        assert!(matches!(
            &t.claim_terminal_among(&ids).unwrap()[0],
            TableEntry::Pending(_)
        ));
        assert!(t.set_terminal(ids[0], ExitOutcome::Exited(3)));
        assert!(matches!(t.claim(ids[0]), Claim::Delivered(_)));
        let entries = t.claim_terminal_among(&[ids[0], ids[0]]).unwrap();
        for e in &entries {
            assert!(
                matches!(e, TableEntry::Elsewhere(g) if g.id == ids[0] && g.phase == JobPhase::Exited(3))
            );
        }
        assert_eq!(t.register_waiter(&ids).err(), Some(ids[0]));
        drop(waiter);
        assert_eq!(t.claim_terminal_among(&ids).unwrap_err(), ids[0]);
        assert!(t.lock().gone.is_empty());
    }

    #[test]
    fn a_delivered_job_put_back_is_claimed_once_more_and_its_waiter_claims_it() {
        let (t, ids) = table_with(&[None]);
        let waiter = t.register_waiter(&ids).unwrap();
        assert!(t.set_terminal(ids[0], ExitOutcome::Exited(3)));
        let Claim::Delivered(job) = t.claim(ids[0]) else {
            panic!("not delivered");
        };
        assert!(t.lock().gone.contains_key(&ids[0]));
        // Its answer never reached the client: back it goes.
        t.put_back(*job);
        assert!(t.lock().gone.is_empty(), "the Gone record moved back");
        match &t.claim_terminal_among(&ids).unwrap()[0] {
            TableEntry::Delivered(j) => assert_eq!(j.phase(), JobPhase::Exited(3)),
            _ => panic!("the waiter does not get the put-back result"),
        }
        assert!(
            matches!(t.claim(ids[0]), Claim::Unknown),
            "delivered once more, once"
        );
        drop(waiter);
        assert!(t.lock().gone.is_empty());
    }

    #[test]
    fn a_job_a_kill_reserved_is_left_to_the_kill_and_claimable_again_after() {
        let (t, ids) = table_with(&[None]);
        let reserved = t.reserve(ids[0]);
        assert!(t.set_terminal(ids[0], ExitOutcome::Exited(0)));
        assert!(matches!(
            &t.claim_terminal_among(&ids).unwrap()[0],
            TableEntry::Pending(_)
        ));
        drop(reserved);
        assert!(matches!(
            &t.claim_terminal_among(&ids).unwrap()[0],
            TableEntry::Delivered(_)
        ));
    }

    #[test]
    fn a_job_delivered_without_a_registered_waiter_leaves_no_record() {
        let (t, ids) = table_with(&[DONE]);
        assert!(matches!(t.claim(ids[0]), Claim::Delivered(_)));
        assert!(t.lock().gone.is_empty());
        assert_eq!(t.claim_terminal_among(&ids).unwrap_err(), ids[0]);
    }

    #[test]
    fn jobs_beyond_capacity_wait_in_fifo_order_and_start_as_capacity_frees() {
        let t = JobTable::new(2, 10);
        let mut ids = Vec::new();
        for _ in 0..5 {
            let (id, admitted) = submit(&t);
            for a in admitted {
                assert!(t.started(a.id, Pid(1), None, None));
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
        let Some(Cancelled::Removed(job)) = t.cancel_queued(second) else {
            panic!("a caller's queued job is taken out when cancelled");
        };
        assert_eq!(
            job.phase(),
            JobPhase::NotStarted("cancelled before start".into())
        );
        assert!(
            t.cancel_queued(first).is_none(),
            "a started job is not queued"
        );
        assert!(t.started(first, Pid(1), None, None));
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
        job.owner = Owner::JobStream;
        assert!(t.submit(job).unwrap().is_empty());
        assert_eq!(t.owned_among(&[JobId(1), id]), Some((id, Owner::JobStream)));
        assert_eq!(t.owned_among(&[JobId(1)]), None);
        assert!(matches!(t.cancel_queued(id), Some(Cancelled::InPlace)));
        assert!(t.cancel_queued(id).is_none());
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
