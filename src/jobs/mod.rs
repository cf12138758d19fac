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

pub mod breaker;
pub mod result;
pub mod runner;
pub mod state;
pub mod table;

use std::sync::Arc;
use std::time::Duration;

use init::{Escalation, Init, Phase, Pid, Signal, SignalError, Step};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::time::Instant;

use crate::capture::CapturePolicy;
pub use state::{Cause, JobId, JobState, Outcome, Pending, Stream};
pub use table::{Claim, Job, JobTable, QueueFull, StdinSlot, WaitEntry};

/// How long to wait for SIGKILL to take effect after a grace.
const KILL_WAIT: Duration = Duration::from_secs(1);

/// The settings the job service runs with.
#[derive(Debug, Clone)]
pub struct Settings {
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
}

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
}

/// What a job asks for.
#[derive(Debug)]
pub struct Request {
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
    pub fn new(init: Init, settings: &Settings) -> Jobs {
        Jobs {
            shared: Arc::new(Shared {
                table: JobTable::new(settings.max_running, settings.max_queued),
                init,
                grace: settings.grace,
                breaker: breaker::Breaker::new(
                    settings.breaker_failures,
                    settings.breaker_cooldown,
                ),
            }),
        }
    }

    /// A service that starts nothing: every submitted job fails to start (its
    /// breaker is open for good) and ends in the table as a start error, so
    /// every tool can be called on it in process without a process being
    /// spawned or signalled (the fuzz facade, `crate::fuzzing`).
    pub fn refusing(settings: &Settings) -> Jobs {
        Jobs {
            shared: Arc::new(Shared {
                table: JobTable::new(settings.max_running, settings.max_queued),
                init: Init::inert(),
                grace: settings.grace,
                breaker: breaker::Breaker::refusing("this server starts no processes (fuzzing)"),
            }),
        }
    }

    /// The table (lookups, claims, listing).
    pub fn table(&self) -> &JobTable {
        &self.shared.table
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
    pub fn submit(&self, req: Request) -> Result<Submitted, QueueFull> {
        let table = &self.shared.table;
        let id = table.next_id();
        let mut job = Job::queued(id, req.pending, req.capture, req.label, req.window);
        job.owned_by_stream = req.owned_by_stream;
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
    pub async fn shutdown(&self) -> init::ShutdownReport {
        let shared = &self.shared;
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
            spec,
            timeout,
            idle_timeout,
            ..
        } = pending;
        let spawned = match self.breaker.check() {
            Err(refusal) => {
                crate::metrics::spawn_failed("breaker_open");
                Err(refusal)
            }
            Ok(()) => self.init.spawn(&spec).map_err(|e| {
                self.breaker.failed(&e);
                crate::metrics::spawn_failed("spawn_error");
                e.to_string()
            }),
        };
        let spawned = match spawned {
            Ok(s) => {
                self.breaker.succeeded();
                crate::metrics::job_started();
                let waited = self.table.with(id, |j| j.queued_at).flatten();
                crate::metrics::queue_wait(waited.map_or(Duration::ZERO, |q| q.elapsed()));
                s
            }
            Err(error) => {
                tracing::info!(job = %id, %error, "job failed to start");
                crate::metrics::job_finished("start_error");
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
        };
        tokio::spawn(runner::run(Arc::clone(&self), id, pid, io, removed, limits));
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

/// Sleeps until `deadline`, or forever for `None`.
pub async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
