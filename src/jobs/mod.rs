//! Jobs: the process-wide job table and every step of a job's life.
//!
//! [`Jobs`] is the one service the tools call: it starts a job (spawn +
//! table entry + runner), waits for a job to become terminal, signals a
//! job's group and verifies its death, tears a job down, and shuts every job
//! down. Tools only decide what to ask for and how to answer; they never
//! spawn, signal or reap themselves.
//!
//! Jobs are process-wide (SPEC §10): one table per server, shared by every
//! session on every transport. Nothing here knows about sessions,
//! transports or JSON-RPC.
//!
//! - [`state`]: job ids and states.
//! - [`table`]: the table and its exactly-once claims.
//! - [`runner`]: the per-job task that reads the pipes and records the exit.
//! - [`result`]: the wire shapes of a job.

pub mod result;
pub mod runner;
pub mod state;
pub mod table;

use std::sync::Arc;
use std::time::Duration;

use init::{Escalation, Init, Phase, Pid, Signal, SignalError, SpawnSpec, Step};
use tokio::net::unix::pipe;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::capture::CapturePolicy;
pub use state::{JobId, JobState, Stream};
pub use table::{Claim, Job, JobTable, StdinSlot, WaitEntry};

/// How long to wait for SIGKILL to take effect after a teardown's grace.
const KILL_WAIT: Duration = Duration::from_secs(1);

/// The job service: the table plus the init layer that runs the processes.
pub struct Jobs {
    table: Arc<JobTable>,
    init: Init,
    /// Seconds between TERM and KILL when a job is torn down.
    grace: Duration,
}

/// A job that is running.
#[derive(Debug)]
pub struct Started {
    /// Its id.
    pub id: JobId,
    /// Its stdin (shared with the table entry).
    pub stdin: StdinSlot,
}

/// A job that could not start (it never entered the table).
#[derive(Debug)]
pub struct StartFailed {
    /// The id it was given.
    pub id: JobId,
    /// Why (`chdir /x: no such file or directory`).
    pub error: String,
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
    /// A service over `init` whose windows keep `max_output` bytes per
    /// stream and whose teardowns give `grace` between TERM and KILL.
    pub fn new(init: Init, max_output: usize, grace: Duration) -> Jobs {
        Jobs {
            table: Arc::new(JobTable::new(max_output)),
            init,
            grace,
        }
    }

    /// The table (lookups, claims, listing).
    pub fn table(&self) -> &JobTable {
        &self.table
    }

    /// Spawns a job, puts it in the table and starts its runner.
    pub fn start(&self, spec: &SpawnSpec, capture: CapturePolicy) -> Result<Started, StartFailed> {
        let id = self.table.next_id();
        let fail = |error: String| {
            tracing::info!(job = %id, %error, "job failed to start");
            StartFailed { id, error }
        };
        let spawned = self.init.spawn(spec).map_err(|e| fail(e.to_string()))?;
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
                return Err(fail(format!("setting up pipes: {e}")));
            }
        };
        let removed = CancellationToken::new();
        let stdin: StdinSlot = Arc::new(tokio::sync::Mutex::new(Some(stdin)));
        self.table.insert(Job {
            id,
            pgid: pid,
            state: JobState::Running,
            stdout: self.table.window(),
            stderr: self.table.window(),
            capture,
            stdin: Arc::clone(&stdin),
            removed: removed.clone(),
        });
        let io = runner::Io {
            stdout,
            stderr,
            exit: spawned.exit,
        };
        tokio::spawn(runner::run(Arc::clone(&self.table), id, io, removed));
        tracing::debug!(job = %id, pid = pid.0, "job started");
        Ok(Started { id, stdin })
    }

    /// Waits until job `id` is terminal, it leaves the table, or `deadline`.
    /// Cancel by dropping the future.
    pub async fn await_terminal(&self, id: JobId, deadline: Option<Instant>) -> Awaited {
        loop {
            let changed = self.table.changed();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.table.with(id, |j| j.state.is_terminal()) {
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
        let escalation = self.init.escalate(pgid, steps, on_phase).await?;
        if escalation.dead || escalation.already_dead {
            self.await_terminal(id, None).await;
        }
        Ok(escalation)
    }

    /// Tears job `id` down (a cancelled blocking `execute`, whose caller never
    /// learnt the id): TERM its group, the grace, KILL what is left, wait for
    /// the reaper, remove it from the table.
    pub async fn teardown(&self, id: JobId) {
        let Some(pgid) = self.table.with(id, |j| j.pgid) else {
            return;
        };
        let steps = [
            Step::new(Signal::TERM, self.grace),
            Step::new(Signal::KILL, KILL_WAIT),
        ];
        if let Err(e) = self.terminate(id, pgid, &steps, |_| {}).await {
            tracing::warn!(job = %id, error = %e, "tearing a job down");
        }
        self.table.remove(id);
        tracing::info!(job = %id, "cancelled execute: job torn down");
    }

    /// Shuts every job down (SPEC §2.5 steps 2–4) and returns what survived.
    pub async fn shutdown(&self) -> init::ShutdownReport {
        self.init.shutdown(self.table.pgids(), self.grace).await
    }
}

/// Sleeps until `deadline`, or forever for `None`.
pub async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
