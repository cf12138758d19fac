//! Jobs: the process-wide job table and every step of a job's life.
//!
//! [`Jobs`] is the one service the tools call: it admits a job (through the
//! FIFO queue of SPEC §12.3), starts it (spawn + runner), waits for it to
//! become terminal, signals its group and verifies its death, tears it down,
//! and shuts every job down. Tools only decide what to ask for and how to
//! answer; they never spawn, signal or reap themselves.
//!
//! Jobs are process-wide (SPEC §10): one table per server, shared by every
//! session on every transport. Nothing here knows about sessions,
//! transports or JSON-RPC.
//!
//! - [`state`]: job ids and states.
//! - [`table`]: the table, its exactly-once claims and its admission queue.
//! - [`runner`]: the per-job task that reads the pipes, records the exit and
//!   enforces the job's deadlines.
//! - [`result`]: the wire shapes of a job.
//! - [`breaker`]: the circuit breaker for spawn failures (SPEC §12.7).
//! - [`shell_session`]: shell sessions, their state and the epilogue that
//!   reports it (SPEC §17).
//! - [`oom`]: the OOM ordering and the cgroup's OOM-kill counter (SPEC §16).

pub mod breaker;
pub mod oom;
pub mod result;
pub mod runner;
pub mod shell_session;
pub mod state;
pub mod table;

use std::sync::Arc;
use std::time::Duration;

use init::{Escalation, Init, Phase, Pid, Signal, SignalError, Step};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::time::Instant;

use crate::capture::CapturePolicy;
pub use state::{Cause, ExitOutcome, JobId, JobState, Pending, ShellSessionUse, Stream};
pub use table::{Claim, Job, JobTable, QueueFull, StdinSlot, WaitEntry};

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
    /// How long a shell session lives after its last job (SPEC §17).
    pub shell_session_idle: Duration,
    /// The `oom_score_adj` each job's child writes (`None`: it inherits ours).
    pub oom_score_adj: Option<i32>,
}

/// Resolves a shell session's working directory under the cwd policy
/// (SPEC §12.5) when a job of it starts; the error is its start error.
pub type CwdResolver = Box<dyn Fn(&std::path::Path) -> Result<init::Cwd, String> + Send + Sync>;

/// The job service: cheap to share, one per server.
pub struct Jobs {
    shared: Arc<Shared>,
}

/// What the service and its runners share.
pub(crate) struct Shared {
    pub(crate) table: JobTable,
    pub(crate) init: Init,
    pub(crate) grace: Duration,
    breaker: breaker::Breaker,
    pub(crate) shell_sessions: shell_session::ShellSessions,
    resolve_cwd: std::sync::OnceLock<CwdResolver>,
    /// The memory cgroup's OOM-kill counter, when readable.
    pub(crate) oom: Option<oom::OomCounter>,
    oom_score_adj: Option<i32>,
}

/// What a job asks for.
#[derive(Debug)]
pub struct Launch {
    /// What to start, and its stdin.
    pub pending: Pending,
    /// What its terminal result carries.
    pub capture: CapturePolicy,
    /// Its label.
    pub label: Option<String>,
    /// Its retained window per stream.
    pub window: usize,
    /// Started by a `POST /exec` stream, which alone delivers its result.
    pub owned_by_stream: bool,
}

/// How a submission went.
#[derive(Debug)]
pub enum Submitted {
    /// It runs; its stdin (already written, if it asked) is in the slot.
    Started {
        /// Its id.
        id: JobId,
        /// Its stdin.
        stdin: StdinSlot,
        /// The data it asked to have written to stdin, still to write (the
        /// caller writes it, so that it can report a failed write).
        stdin_data: Option<Vec<u8>>,
        /// Close stdin after writing.
        close_stdin: bool,
    },
    /// It waits for capacity; its stdin will be written when it starts.
    Queued {
        /// Its id.
        id: JobId,
    },
    /// It could not start (it is terminal in the table, to be claimed).
    Failed {
        /// Its id.
        id: JobId,
    },
}

/// How a wait for one job ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Awaited {
    /// The job is terminal (still in the table).
    Terminal,
    /// The deadline passed first.
    Timeout,
    /// The job left the table (delivered elsewhere).
    Gone,
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

    /// A service that starts nothing: every submitted job fails to start (its
    /// breaker is open for good) and ends in the table as a start error, so
    /// every tool can be called on it in process without a process being
    /// spawned or signalled (the fuzz facade, `crate::fuzzing`).
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
                shell_sessions: shell_session::ShellSessions::new(settings.shell_session_idle),
                resolve_cwd: std::sync::OnceLock::new(),
                oom,
                oom_score_adj: settings.oom_score_adj,
            }),
        }
    }

    /// The table (lookups, claims, listing).
    pub fn table(&self) -> &JobTable {
        &self.shared.table
    }

    /// The shell sessions (SPEC §17), after dropping the expired ones.
    pub fn shell_sessions(&self) -> &shell_session::ShellSessions {
        let table = &self.shared.table;
        self.shared
            .shell_sessions
            .expire(|name| table.shell_session_busy(name));
        &self.shared.shell_sessions
    }

    /// Sets how a shell session's working directory is checked when a job
    /// of it starts (once, at start-up; without it the path is used as is).
    pub fn set_cwd_resolver(&self, resolve: CwdResolver) {
        let _ = self.shared.resolve_cwd.set(resolve);
    }

    /// Whether the circuit breaker refuses new jobs now (SPEC §12.7).
    pub fn breaker_open(&self) -> bool {
        self.shared.breaker.is_open()
    }

    /// Orphaned processes reaped so far (SPEC §14).
    pub fn orphans_reaped(&self) -> u64 {
        self.shared.init.orphans_reaped()
    }

    /// Whether this process is PID 1.
    pub fn is_pid1(&self) -> bool {
        self.shared.init.is_pid1()
    }

    /// Submits a job: it starts now if there is capacity and nobody waits
    /// before it, otherwise it joins the queue. A start failure leaves a
    /// terminal job in the table; a full queue refuses it.
    pub fn submit(&self, req: Launch) -> Result<Submitted, QueueFull> {
        let table = &self.shared.table;
        let id = table.next_id();
        let mut job = Job::queued(id, req.pending, req.capture, req.label, req.window);
        job.owned_by_stream = req.owned_by_stream;
        job.shell_session = job_shell_session(&job);
        let admitted = table.submit(job)?;
        let mut mine = None;
        for a in admitted {
            if a.id == id {
                mine = Some(a);
            } else {
                Arc::clone(&self.shared).start_admitted(a, true);
            }
        }
        let Some(a) = mine else {
            return Ok(Submitted::Queued { id });
        };
        let pending = *a.pending;
        let stdin_data = pending.stdin.clone();
        let close_stdin = pending.close_stdin;
        match Arc::clone(&self.shared).start(id, pending) {
            Some(stdin) => Ok(Submitted::Started {
                id,
                stdin,
                stdin_data,
                close_stdin,
            }),
            None => Ok(Submitted::Failed { id }),
        }
    }

    /// A job that cannot start at all (its `cwd` is unusable): it gets an
    /// id and a terminal `NotStarted` state but never enters the table, so
    /// the caller delivers it at once.
    pub fn not_started(&self, capture: CapturePolicy, label: Option<String>, error: String) -> Job {
        let mut job = Job::queued(
            self.shared.table.next_id(),
            Pending {
                spec: init::SpawnSpec::shell(""),
                stdin: None,
                close_stdin: false,
                timeout: None,
                idle_timeout: None,
                shell_session: None,
            },
            capture,
            label,
            0,
        );
        tracing::info!(job = %job.id, %error, "job failed to start");
        job.state = JobState::NotStarted { error };
        job
    }

    /// Waits until job `id` is terminal, it leaves the table, or `deadline`.
    /// Cancel by dropping the future.
    pub async fn await_terminal(&self, id: JobId, deadline: Option<Instant>) -> Awaited {
        let table = &self.shared.table;
        loop {
            let changed = table.changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match table.with(id, |j| j.state.is_terminal()) {
                None => return Awaited::Gone,
                Some(true) => return Awaited::Terminal,
                Some(false) => {}
            }
            tokio::select! {
                () = &mut changed => {}
                () = sleep_until_opt(deadline) => return Awaited::Timeout,
            }
        }
    }

    /// Signals job `id`'s group `pgid` step by step until it is dead
    /// (init's [`Init::escalate`]: a later step only if something outlived
    /// the earlier one's wait), and when it is, waits for the job to be
    /// terminal in the table (its runner reads the last output first).
    /// `on_phase` hears which part of the death is awaited. Cancel by
    /// dropping the future.
    pub async fn terminate(
        &self,
        id: JobId,
        pgid: Pid,
        steps: &[Step],
        on_phase: impl FnMut(Phase),
    ) -> Result<Escalation, SignalError> {
        let escalation = self.shared.init.escalate(pgid, steps, on_phase).await?;
        if escalation.dead || escalation.already_dead {
            self.await_terminal(id, None).await;
        }
        Ok(escalation)
    }

    /// Tears job `id` down (a cancelled blocking `execute`, whose caller never
    /// learnt the id): a queued job is dropped; a running one gets TERM, the
    /// grace, KILL, and is waited for; then it leaves the table.
    pub async fn teardown(&self, id: JobId) {
        let table = &self.shared.table;
        if table.cancel_queued(id).is_none()
            && let Some(Some(pgid)) = table.with(id, |j| j.state.pgid())
        {
            let steps = [
                Step::new(Signal::TERM, self.shared.grace),
                Step::new(Signal::KILL, KILL_WAIT),
            ];
            if let Err(e) = self.terminate(id, pgid, &steps, |_| {}).await {
                tracing::warn!(job = %id, error = %e, "tearing a job down");
            }
        }
        table.remove(id);
        tracing::info!(job = %id, "cancelled execute: job torn down");
    }

    /// Shuts every job down (SPEC §2.5 steps 2–4) and returns what survived.
    /// Every job that has not ended by then ends with `cause: "shutdown"`.
    pub async fn shutdown(&self) -> init::ShutdownReport {
        let shared = &self.shared;
        shared.table.set_cause_all(Cause::Shutdown);
        shared
            .init
            .shutdown(shared.table.pgids(), shared.grace)
            .await
    }
}

impl Shared {
    /// Starts a job the table admitted and returns its stdin slot, or
    /// records why it could not start (and admits the next one).
    fn start(self: Arc<Self>, id: JobId, pending: Pending) -> Option<StdinSlot> {
        let Pending {
            mut spec,
            timeout,
            idle_timeout,
            shell_session: session,
            ..
        } = pending;
        let mut complete_env = false;
        let mut state_pipe = None;
        let mut session_run = None;
        if let Some(session) = session {
            let snap = self.shell_sessions.snapshot(&session.name, &session.owner);
            let mut cwd_error = None;
            if !session.own_cwd
                && let Some(cwd) = snap.cwd
            {
                match self.resolve_cwd.get() {
                    Some(resolve) => match resolve(&cwd) {
                        Ok(c) => spec.cwd = c,
                        Err(e) => cwd_error = Some(e),
                    },
                    None => spec.cwd = init::Cwd::Path(cwd),
                }
            }
            if let Some(mut env) = snap.env {
                env.append(&mut spec.env);
                spec.env = env;
                complete_env = true;
            }
            if let init::Program::Shell(command) = &spec.program {
                match rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC) {
                    Ok((read, write)) => {
                        use std::os::fd::AsRawFd;
                        spec.program =
                            init::Program::Shell(shell_session::wrap(command, read.as_raw_fd()));
                        state_pipe = Some((read, write));
                    }
                    Err(e) => cwd_error = Some(format!("creating pipes: {e}")),
                }
            }
            if let Some(error) = cwd_error {
                self.shell_sessions
                    .finish(&session.name, snap.generation, None);
                tracing::info!(job = %id, %error, "job failed to start");
                crate::metrics::job_finished("start_error", None);
                self.table.start_failed(id, error);
                self.admit_next();
                return None;
            }
            session_run = Some(runner::ShellSessionRun {
                name: session.name,
                generation: snap.generation,
                state: None,
            });
        }
        if spec.setup.oom_score_adj.is_none() {
            spec.setup.oom_score_adj = self.oom_score_adj;
        }
        // Read before the spawn: a rise after it is the job's (SPEC §16).
        let oom_kills = self.oom.as_ref().and_then(oom::OomCounter::read);
        let cpu_seconds = spec
            .setup
            .limits
            .iter()
            .find(|l| l.resource == init::Resource::CpuSeconds)
            .map(|l| l.soft);
        let spawned = match self.breaker.check() {
            Err(refusal) => {
                crate::metrics::spawn_failed("breaker_open");
                Err(refusal)
            }
            Ok(()) => {
                use std::os::fd::AsFd;
                let extras = init::Extras {
                    fd: state_pipe
                        .as_ref()
                        .map(|(_, w)| (w.as_fd(), shell_session::STATE_FD)),
                    complete_env,
                };
                self.init.spawn_with(&spec, extras).map_err(|e| {
                    self.breaker.failed(&e);
                    crate::metrics::spawn_failed("spawn_error");
                    e.to_string()
                })
            }
        };
        // The child has its copy of the write end; ours must go, or the
        // state pipe would never reach EOF.
        let state_read = state_pipe.map(|(read, _write)| read);
        if let (Some(run), Some(read)) = (session_run.as_mut(), state_read) {
            run.state = pipe::Receiver::from_owned_fd(read).ok();
        }
        let spawned = match spawned {
            Ok(s) => {
                self.breaker.succeeded();
                crate::metrics::job_started();
                let waited = self.table.with(id, |j| j.queued_at).flatten();
                crate::metrics::queue_wait(waited.map_or(Duration::ZERO, |q| q.elapsed()));
                s
            }
            Err(error) => {
                if let Some(run) = &session_run {
                    self.shell_sessions.finish(&run.name, run.generation, None);
                }
                tracing::info!(job = %id, %error, "job failed to start");
                crate::metrics::job_finished("start_error", None);
                self.table.start_failed(id, error);
                self.admit_next();
                return None;
            }
        };
        let pid = spawned.pid;
        let pipes = (|| -> std::io::Result<_> {
            Ok((
                pipe::Sender::from_owned_fd(spawned.stdin)?,
                pipe::Receiver::from_owned_fd(spawned.stdout)?,
                pipe::Receiver::from_owned_fd(spawned.stderr)?,
            ))
        })();
        let (stdin, stdout, stderr) = match pipes {
            Ok(p) => p,
            Err(e) => {
                // Registering fresh pipes with the reactor does not fail in
                // practice; do not leave the child behind if it does. Its
                // exit watch is dropped, so the reaper treats it as an orphan.
                let _ = init::signal_group(pid, Signal::KILL);
                self.table
                    .start_failed(id, format!("setting up pipes: {e}"));
                self.admit_next();
                return None;
            }
        };
        if !self.table.started(id, pid, Some(stdin)) {
            // It left the table while it was being started (shutdown).
            let _ = init::signal_group(pid, Signal::KILL);
            return None;
        }
        let (removed, slot) = self
            .table
            .with(id, |j| (j.removed.clone(), j.stdin.clone()))?;
        let io = runner::Io {
            stdout,
            stderr,
            exit: spawned.exit,
        };
        let limits = runner::Limits {
            deadline: timeout.map(|t| Instant::now() + t),
            idle: idle_timeout,
            oom_kills,
            cpu_seconds,
        };
        tokio::spawn(runner::run(
            Arc::clone(&self),
            id,
            pid,
            io,
            removed,
            limits,
            session_run,
        ));
        tracing::debug!(job = %id, pid = pid.0, "job started");
        Some(slot)
    }

    /// Starts a job admitted from the queue; `background` writes its stdin
    /// in a task of its own.
    fn start_admitted(self: Arc<Self>, admitted: table::Admitted, background: bool) {
        let pending = *admitted.pending;
        let data = pending.stdin.clone();
        let close = pending.close_stdin;
        let id = admitted.id;
        if let Some(slot) = self.start(id, pending)
            && background
            && (data.is_some() || close)
        {
            tokio::spawn(async move {
                let mut slot = slot.lock().await;
                if let (Some(tx), Some(data)) = (slot.as_mut(), data.as_deref())
                    && let Err(e) = tx.write_all(data).await
                {
                    tracing::info!(job = %id, error = %e, "writing a queued job's stdin");
                    *slot = None;
                }
                if close {
                    *slot = None;
                }
            });
        }
    }

    /// Starts queued jobs while there is capacity (after a job ended or
    /// failed to start).
    pub(crate) fn admit_next(self: &Arc<Self>) {
        for a in self.table.admit() {
            Arc::clone(self).start_admitted(a, true);
        }
    }

    /// Ends a job whose deadline passed (`cause`): TERM to its group, the
    /// grace, KILL, in a task of its own (the runner keeps reading).
    pub(crate) fn expire(self: &Arc<Self>, id: JobId, pgid: Pid, cause: Cause) {
        self.table.set_cause(id, cause);
        tracing::info!(job = %id, cause = cause.name(), "job deadline: ending it");
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            let steps = [
                Step::new(Signal::TERM, shared.grace),
                Step::new(Signal::KILL, KILL_WAIT),
            ];
            if let Err(e) = shared.init.escalate(pgid, &steps, |_| {}).await {
                tracing::warn!(job = %id, error = %e, "ending a job at its deadline");
            }
        });
    }
}

/// The shell session a job belongs to, from its pending start.
fn job_shell_session(job: &Job) -> Option<String> {
    match &job.state {
        JobState::Queued(Some(p)) => p.shell_session.as_ref().map(|s| s.name.clone()),
        _ => None,
    }
}

/// Sleeps until `deadline`, or forever for `None`.
pub async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
