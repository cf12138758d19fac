//! Jobs: the one job lifecycle, as verbs (docs/ARCHITECTURE.md, "The verbs of `jobs`").
//!
//! [`Jobs`] is the one service every front-end calls — the MCP tools,
//! `POST /exec`, and later Tasks, terminal attach and the platform
//! protocols. Its table is private: a front-end parses its own wire format,
//! calls these verbs and renders their answers ([`result`]); it never
//! spawns, signals, reaps, writes stdin or waits on the table itself.
//!
//! | verb | what | module |
//! |---|---|---|
//! | [`Jobs::launch`], [`Jobs::launch_leaving_stdin`] | cwd policy, shell session, queue, breaker, spawn, the initial stdin; typed [`LaunchError`] | [`launch`] |
//! | [`result::signal_exit_code`] | a signal death as an exit code (128 + N), the one place | [`result`] |
//! | [`LaunchRequest::validate`] | a front-end's typed request → the [`Launch`] `launch` takes: the job rules, the policy's user and limits, the server's defaults | [`request`] |
//! | [`Jobs::deliver`] | claim a terminal result (exactly once) | here |
//! | [`Jobs::status`], [`Jobs::status_with_input`], [`Jobs::read`], [`Jobs::list`], [`Jobs::find`] | look, never remove | here |
//! | [`Jobs::awaiting_input`] | running jobs blocked reading their input (the gauge) | [`awaiting`] |
//! | [`Jobs::ports`] | listening TCP sockets, attributed to jobs | [`ports`] |
//! | [`Jobs::wait_any`] | until a listed job ends, prints a pattern, goes quiet, awaits input or listens on a port | [`mod@wait`] |
//! | [`Jobs::follow`] | a job's events: queued, started, output, exit | [`follow`] |
//! | [`Jobs::stream`] | a followed job to one client: events, keep-alives, its deadline, and the client-gone policy ([`ClientGone`]: tear down or retain) | [`stream`] |
//! | [`Jobs::follow_raw`] | a job's raw stdout, gaps said, and how it ended; never takes the result | [`follow`] |
//! | [`Jobs::attach_writer`] | the one attached terminal writer, or a takeover | [`attach`] |
//! | [`Jobs::write_stdin`] | the one stdin writer | [`stdin`] |
//! | [`Jobs::signal`] | verified kill, ASSURED | [`signal`] |
//! | [`Jobs::teardown`], [`Jobs::shutdown`] | end one job, end them all | here |
//! | [`Jobs::is_tty`], [`Jobs::resize`], [`Jobs::screen`], [`Jobs::terminal_device`] | terminal jobs | [`terminal`] |
//!
//! Every job has one [`Owner`], set at launch: the caller (whoever claims
//! the result first) or a stream (only it delivers). Jobs are
//! process-wide: one table per server, shared by every session on
//! every transport. Nothing here knows about sessions, transports, wire
//! revisions or JSON-RPC: `jobs` imports nothing from `protocol`, `tools`
//! or `server` (`scripts/check-layers.sh`).
//!
//! - [`request`]: the one typed launch request every front-end builds, and
//!   its one validation into a [`Launch`].
//! - [`state`]: job ids, states and owners.
//! - [`table`]: the table, its exactly-once claims, its admission queue and
//!   its one wait loop ([`table::JobTable::wait_for`]).
//! - [`runner`]: the per-job task that reads the pipes, records the exit and
//!   enforces the job's deadlines.
//! - [`result`]: the wire shapes of a job.
//! - [`stream`]: the one loop of a front-end that owns a job's stream.
//! - [`breaker`]: the circuit breaker for spawn failures.
//! - [`shell_session`]: shell sessions, their lanes, their state and the
//!   epilogue that reports it.
//! - [`terminal`]: a terminal job's pseudo-terminal.
//! - [`oom`]: the OOM ordering and the cgroup's OOM-kill counter.
//! - [`awaiting`]: whether a running job is blocked reading its stdin or
//!   terminal, for `status`, `list`, `wait_any` and the gauge.
//! - [`ports`]: listening TCP sockets and the jobs that hold them,
//!   for `ports`, `status`, `list` and `wait_any`.

mod attach;
mod awaiting;
mod breaker;
mod follow;
mod launch;
pub mod oom;
mod ports;
mod request;
pub mod result;
mod runner;
mod shell_session;
mod signal;
mod state;
mod stdin;
mod stream;
mod table;
mod terminal;
mod wait;

use std::sync::Arc;
use std::time::Duration;

use init::{Init, Signal, Step};
use tokio::time::Instant;

use crate::capture::StreamSpec;
pub use attach::{AttachError, WriterLease};
pub use follow::{Event, JobEnd, RawEvent, RawFollowError};
pub use init::WindowSize;
pub use launch::{CwdResolver, Launch, LaunchError, Launched};
pub use ports::{Port, ProxyLook};
pub use request::{LaunchRequest, RequestError, TerminalSize};
use result::{Fields, JobResult, JobStatus, View};
pub use shell_session::{ShellSessions, Shown};
pub use signal::{Delivery, JobSignalError, Plan, Signalled};
pub use state::{Cause, JobId, JobPhase, Owner, Stream, TaskTag};
use state::{ExitOutcome, Pending};
pub use stdin::StdinError;
#[cfg(feature = "sandboxd")]
pub use stream::JobStream;
pub use stream::{ClientGone, KeepAlive, Streamed, Streaming};
use table::{Check, JobTable};
pub use table::{Claim, Job, Listed};
pub use terminal::{MAX_DIMENSION, SCROLLBACK_LINES, TerminalError, window_size};
pub use wait::{Trigger, Until, WaitEntry, WaitError};

/// How long to wait for SIGKILL to take effect after a grace.
const KILL_WAIT: Duration = Duration::from_secs(1);

/// The settings the job service runs with.
#[derive(Debug, Clone)]
pub struct JobsSettings {
    /// Seconds between TERM and KILL when a job is torn down or times out.
    pub grace: Duration,
    /// Jobs running at once.
    pub max_running: usize,
    /// Jobs waiting to start.
    pub max_queued: usize,
    /// Consecutive resource failures that open the breaker.
    pub breaker_failures: u32,
    /// How long an open breaker refuses jobs.
    pub breaker_cooldown: Duration,
    /// How long a shell session lives after its last job.
    pub shell_session_idle: Duration,
    /// The `oom_score_adj` each job's child writes (`None`: it inherits ours).
    pub oom_score_adj: Option<i32>,
}

/// The job service: cheap to share, one per server.
pub struct Jobs {
    shared: Arc<Shared>,
}

/// What the service and its runners share.
struct Shared {
    table: JobTable,
    init: Init,
    grace: Duration,
    breaker: breaker::Breaker,
    shell_sessions: ShellSessions,
    resolve_cwd: std::sync::OnceLock<CwdResolver>,
    /// The memory cgroup's OOM-kill counter, when readable.
    oom: Option<oom::OomCounter>,
    oom_score_adj: Option<i32>,
}

impl Jobs {
    /// A service over `init`.
    pub fn new(init: Init, settings: &JobsSettings) -> Jobs {
        let oom = oom::OomCounter::locate();
        match &oom {
            Some(c) => tracing::debug!(counter = %c.path().display(), "reading OOM kills"),
            None => tracing::info!(
                "no readable memory-cgroup OOM-kill counter: no job is reported as OOM-killed"
            ),
        }
        let breaker = breaker::Breaker::new(settings.breaker_failures, settings.breaker_cooldown);
        Jobs::assemble(init, breaker, oom, settings)
    }

    /// A service that starts nothing: every launched job fails to start (its
    /// breaker is open for good) and ends as a start error, so every tool
    /// can be called on it in process without a process being spawned or
    /// signalled (the fuzz facade, `crate::fuzzing`).
    pub fn refusing(settings: &JobsSettings) -> Jobs {
        let breaker = breaker::Breaker::refusing("this server starts no processes (fuzzing)");
        Jobs::assemble(Init::inert(), breaker, None, settings)
    }

    fn assemble(
        init: Init,
        breaker: breaker::Breaker,
        oom: Option<oom::OomCounter>,
        settings: &JobsSettings,
    ) -> Jobs {
        Jobs {
            shared: Arc::new(Shared {
                table: JobTable::new(settings.max_running, settings.max_queued),
                init,
                grace: settings.grace,
                breaker,
                shell_sessions: ShellSessions::new(settings.shell_session_idle),
                resolve_cwd: std::sync::OnceLock::new(),
                oom,
                oom_score_adj: settings.oom_score_adj,
            }),
        }
    }

    /// The shell sessions, after dropping the expired ones.
    pub fn shell_sessions(&self) -> &ShellSessions {
        let table = &self.shared.table;
        self.shared
            .shell_sessions
            .expire(|name| table.shell_session_busy(name));
        &self.shared.shell_sessions
    }

    /// Whether shell session `name` has a job that is not terminal yet.
    pub fn shell_session_busy(&self, name: &str) -> bool {
        self.shared.table.shell_session_busy(name)
    }

    /// Sets how a job's `cwd` (and a shell session's) is checked when it
    /// launches (once, at start-up; without it a path is used as is).
    pub fn set_cwd_resolver(&self, resolve: CwdResolver) {
        let _ = self.shared.resolve_cwd.set(resolve);
    }

    /// Whether the circuit breaker refuses new jobs now.
    pub fn breaker_open(&self) -> bool {
        self.shared.breaker.is_open()
    }

    /// How many jobs run and wait now.
    pub fn counts(&self) -> (usize, usize) {
        self.shared.table.counts()
    }

    /// Orphaned processes reaped so far.
    pub fn orphans_reaped(&self) -> u64 {
        self.shared.init.orphans_reaped()
    }

    /// Whether this process is PID 1.
    pub fn is_pid1(&self) -> bool {
        self.shared.init.is_pid1()
    }

    /// What puts `delivered` results back into the table, for a front-end
    /// that claimed them and then could not hand them to their client (an
    /// HTTP client that went away): run it, and the next claim gets them.
    pub fn put_back(&self, delivered: Vec<Job>) -> impl FnOnce() + Send + 'static {
        let shared = Arc::clone(&self.shared);
        move || {
            for job in delivered {
                tracing::info!(job = %job.id, "its result did not reach its client: put back");
                shared.table.put_back(job);
            }
        }
    }

    /// Claims job `id`'s terminal result: the only way a result leaves,
    /// exactly once (`Running`: not terminal yet; `Unknown`: no such job, or
    /// delivered already).
    pub fn deliver(&self, id: JobId) -> Claim {
        self.shared.table.claim(id)
    }

    /// Job `id`'s status as `fields` show it; never removes it. It does not
    /// look for awaiting input (the status shape of `execute`'s and
    /// `input`'s answers): [`Jobs::status_with_input`] does.
    pub fn status(&self, id: JobId, fields: Fields) -> Option<JobStatus> {
        self.shared.table.with(id, |j| JobStatus::of(j, fields))
    }

    /// [`Jobs::status`], and with Part II fields a running job blocked
    /// reading its input says so (for the `status` tool), and one that
    /// listens names its ports.
    pub fn status_with_input(&self, id: JobId, fields: Fields) -> Option<JobStatus> {
        let status = self.status(id, fields)?;
        let running = fields.has_part_two() && status.state == "running";
        let awaiting = running
            && matches!(
                self.shared.awaiting_input(id, &mut None),
                awaiting::Awaiting::Yes(_)
            );
        let ports = if running {
            ports::of(&self.shared.ports(), id)
        } else {
            Vec::new()
        };
        Some(status.awaiting_input(awaiting).listening(ports))
    }

    /// Job `id`'s status with the slices asked for; never removes it.
    pub fn read(
        &self,
        id: JobId,
        stdout: &StreamSpec,
        stderr: &StreamSpec,
        view: &View<'_>,
    ) -> Option<JobResult> {
        self.shared
            .table
            .with(id, |j| JobResult::with_streams(j, stdout, stderr, view))
    }

    /// Waits until job `id` is terminal without claiming it (a task's job,
    /// whose result stays in the table until its TTL); `false` if it is not (or
    /// no longer) in the table. Cancel by dropping the future.
    pub async fn settled(&self, id: JobId) -> bool {
        self.shared.terminal(id).await;
        self.shared
            .table
            .with(id, |j| j.state.is_terminal())
            .unwrap_or(false)
    }

    /// The terminal result of job `id` as `view` renders it, left in the
    /// table (a task renders it on every `tasks/result`, identically: a
    /// terminal job no longer changes). `None` while it runs or once it is
    /// gone.
    pub fn kept_result(&self, id: JobId, view: &View<'_>) -> Option<JobResult> {
        self.shared
            .table
            .with(id, |j| {
                j.state.is_terminal().then(|| JobResult::delivered(j, view))
            })
            .flatten()
    }

    /// Every job not delivered yet, oldest first; a running job blocked
    /// reading its input is marked so, and one that listens
    /// carries its ports.
    pub fn list(&self) -> Vec<Listed> {
        let mut listed = self.list_awaiting();
        if listed.iter().any(|l| l.phase == JobPhase::Running) {
            let all = self.shared.ports();
            for l in listed.iter_mut().filter(|l| l.phase == JobPhase::Running) {
                l.ports = ports::of(&all, l.id);
            }
        }
        listed
    }

    /// [`Jobs::list`] without the ports.
    fn list_awaiting(&self) -> Vec<Listed> {
        let mut listed = self.shared.table.list();
        let mut procs = None;
        for l in &mut listed {
            l.awaiting_input = l.phase == JobPhase::Running
                && matches!(
                    self.shared.awaiting_input(l.id, &mut procs),
                    awaiting::Awaiting::Yes(_)
                );
        }
        listed
    }

    /// The newest job in the table (queued, running, or ended and not yet
    /// delivered) whose listing entry `pick` accepts, that entry — a
    /// front-end that names jobs its own way (envd: by pid or tag) finds
    /// its job here.
    /// Cheap: it looks at nothing outside the table (no awaiting input).
    pub fn find(&self, pick: impl Fn(&Listed) -> bool) -> Option<Listed> {
        self.shared.table.find(pick)
    }

    /// Whether job `id` is still in the table (so a front-end can forget
    /// what it noted of a job that left it).
    pub fn contains(&self, id: JobId) -> bool {
        self.shared.table.with(id, |_| ()).is_some()
    }

    /// How many running jobs are blocked reading their input now (the
    /// gauge `mcp_exec_jobs_awaiting_input`, read at scrape).
    pub fn awaiting_input(&self) -> usize {
        self.list_awaiting()
            .iter()
            .filter(|l| l.awaiting_input)
            .count()
    }

    /// Tears job `id` down (a cancelled blocking `execute`, whose caller
    /// never learnt the id; an `/exec` stream whose client left): a queued
    /// job is dropped; a running one gets TERM, the grace, KILL, and is
    /// waited for; then it leaves the table.
    pub async fn teardown(&self, id: JobId) {
        let shared = &self.shared;
        if shared.table.cancel_queued(id).is_none()
            && let Some(Some(pgid)) = shared.table.with(id, |j| j.state.pgid())
        {
            let steps = [
                Step::new(Signal::TERM, shared.grace),
                Step::new(Signal::KILL, KILL_WAIT),
            ];
            match shared.escalate(id, pgid, &steps, |_| {}).await {
                Ok(e) if e.dead || e.already_dead => shared.terminal(id).await,
                Ok(_) => {}
                Err(e) => tracing::warn!(job = %id, error = %e, "tearing a job down"),
            }
        }
        shared.table.remove(id);
        tracing::info!(job = %id, "cancelled execute: job torn down");
    }

    /// Shuts every job down (TERM to every group, the grace, KILL) and returns what survived.
    /// Every job that has not ended by then ends with `cause: "shutdown"`.
    pub async fn shutdown(&self) -> init::ShutdownReport {
        let shared = &self.shared;
        shared.table.set_cause_all(Cause::Shutdown);
        let mut groups = Vec::new();
        let mut sessions = Vec::new();
        for (pgid, tty) in shared.table.pgids() {
            groups.push(pgid);
            if tty {
                // A terminal job's session may hold more groups.
                sessions.push(pgid.0);
            }
        }
        let others = init::procinfo::sessions_groups(&sessions);
        groups.extend(others.into_iter().map(init::Pid));
        shared.init.shutdown(groups, shared.grace).await
    }
}

impl Shared {
    /// The one escalation of a job's processes: its group, and for a
    /// terminal job every group of its session (`kill` reaches the
    /// session), with death observed as for a group.
    async fn escalate(
        &self,
        id: JobId,
        pgid: init::Pid,
        steps: &[Step],
        on_wait: impl FnMut(init::DeathWait),
    ) -> Result<init::Escalation, init::SignalError> {
        if self.table.with(id, |j| j.tty.is_tty()).unwrap_or(false) {
            self.init.escalate_session(pgid, steps, on_wait).await
        } else {
            self.init.escalate(pgid, steps, on_wait).await
        }
    }

    /// Waits until job `id` is terminal or has left the table (its runner
    /// reads the last output before it marks it terminal).
    async fn terminal(&self, id: JobId) {
        self.table
            .wait_for(false, || {
                match self.table.with(id, |j| j.state.is_terminal()) {
                    Some(false) => Check::AGAIN,
                    Some(true) | None => Check::Done(()),
                }
            })
            .await;
    }

    /// Starts queued jobs while there is capacity (after a job ended or
    /// failed to start).
    fn admit_next(self: &Arc<Self>) {
        for a in self.table.admit() {
            self.start_admitted(a);
        }
    }

    /// Ends a job whose deadline passed (`cause`): TERM to its group, the
    /// grace, KILL, in a task of its own (the runner keeps reading).
    fn expire(self: &Arc<Self>, id: JobId, pgid: init::Pid, cause: Cause) {
        self.table.set_cause(id, cause);
        tracing::info!(job = %id, cause = cause.name(), "job deadline: ending it");
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            let steps = [
                Step::new(Signal::TERM, shared.grace),
                Step::new(Signal::KILL, KILL_WAIT),
            ];
            if let Err(e) = shared.escalate(id, pgid, &steps, |_| {}).await {
                tracing::warn!(job = %id, error = %e, "ending a job at its deadline");
            }
        });
    }
}

/// Sleeps until `deadline`, or forever for `None`.
///
/// The timer is boxed, and only made for a deadline: a runner's future is
/// parked for as long as its job runs, and is as big as all the branches of
/// its `select!` together, so an unboxed `Sleep` in each of its two deadline
/// branches cost every job without a deadline ~200 B (10,000 idle jobs:
/// the budget in BENCHMARKS.md is 4 KiB each).
fn sleep_until_opt(deadline: Option<Instant>) -> impl Future<Output = ()> {
    let sleep = deadline.map(|d| Box::pin(tokio::time::sleep_until(d)));
    async move {
        match sleep {
            Some(s) => s.await,
            None => std::future::pending().await,
        }
    }
}
