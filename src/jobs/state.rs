//! What a job is: its id and the states of its life.
//!
//! Each state carries exactly what that state has: a queued job holds what
//! it needs to start and has no process; a started job has its process
//! group and its timing; a job that never started has only the reason. There
//! are no parallel `Option` fields to keep consistent.
//!
//! ```text
//!   Queued ──admitted──▶ Started{Running} ──reaped──▶ Started{Exited|Signaled|Lost}
//!     │                      (spawn failed)
//!     └──killed / failed──▶ NotStarted
//! ```

use std::fmt;
use std::time::SystemTime;

use init::{Pid, Signal, SpawnSpec};
use tokio::time::Instant;

/// A job's id, shown as `job-N`: N counts from 1 per server process and is
/// never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub u64);

impl JobId {
    /// Parses the canonical form `job-N` (no sign, no leading zero).
    pub fn parse(s: &str) -> Option<JobId> {
        let n = s.strip_prefix("job-")?;
        if n.starts_with('+') || n.starts_with('0') {
            return None;
        }
        n.parse().ok().map(JobId)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job-{}", self.0)
    }
}

impl serde::Serialize for JobId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What a queued job needs to start.
#[derive(Debug)]
pub struct Pending {
    /// The program, cwd and environment.
    pub spec: SpawnSpec,
    /// Written to stdin once it starts.
    pub stdin: Option<Vec<u8>>,
    /// Close stdin after writing.
    pub close_stdin: bool,
    /// Its deadline, counted from when it starts.
    pub timeout: Option<std::time::Duration>,
    /// End it when it writes nothing for this long.
    pub idle_timeout: Option<std::time::Duration>,
    /// The shell session it runs in.
    pub shell_session: Option<ShellSessionUse>,
    /// Run on a terminal of this size instead of pipes.
    pub terminal: Option<init::WindowSize>,
}

/// How a job uses its shell session.
#[derive(Debug, Clone)]
pub struct ShellSessionUse {
    /// The session's name.
    pub name: String,
    /// Its owner (the job's `user`; `None`: the server's).
    pub owner: super::shell_session::ShellSessionOwner,
    /// The job gave its own `cwd`, which wins over the session's.
    pub own_cwd: bool,
}

/// How a started job's direct child is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitOutcome {
    /// Not reaped yet (or the output it wrote before exiting not read
    /// yet).
    Running,
    /// It exited with this code.
    Exited(i32),
    /// A signal killed it.
    Signaled(Signal),
    /// It is gone but its status could not be learnt (the reaper stopped).
    /// Never reported as an exit code of its own.
    Lost,
}

/// When a started job ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ran {
    /// When it started (monotonic).
    pub since: Instant,
    /// When it started (wall clock, for `started_at`).
    pub wall: SystemTime,
    /// When its direct child was reaped.
    pub until: Option<Instant>,
}

/// Where a job is in its life.
#[derive(Debug)]
pub enum JobState {
    /// Waiting for capacity. `None` once an admission took the
    /// pending start out (the spawn is in progress).
    Queued(Option<Box<Pending>>),
    /// It has a process group.
    Started {
        /// The direct child's pid, which is also its process group id.
        pgid: Pid,
        /// Its timing.
        ran: Ran,
        /// How the direct child is doing.
        outcome: ExitOutcome,
    },
    /// It never ran: the spawn failed, or it was cancelled while queued.
    NotStarted {
        /// Why (`chdir /x: no such file or directory`, `cancelled before start`).
        error: String,
    },
}

/// What a job's state looks like from outside: a copy without the pending
/// start, for rendering after the table lock is gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobPhase {
    /// Waiting for capacity.
    Queued,
    /// Running.
    Running,
    /// Ended: the direct child exited with this code.
    Exited(i32),
    /// Ended: a signal killed the direct child.
    Signaled(Signal),
    /// Ended, status lost.
    Lost,
    /// Never ran.
    NotStarted(String),
}

impl JobState {
    /// The outside view.
    pub fn phase(&self) -> JobPhase {
        match self {
            JobState::Queued(_) => JobPhase::Queued,
            JobState::Started { outcome, .. } => match *outcome {
                ExitOutcome::Running => JobPhase::Running,
                ExitOutcome::Exited(code) => JobPhase::Exited(code),
                ExitOutcome::Signaled(signal) => JobPhase::Signaled(signal),
                ExitOutcome::Lost => JobPhase::Lost,
            },
            JobState::NotStarted { error } => JobPhase::NotStarted(error.clone()),
        }
    }

    /// The process group, once started.
    pub fn pgid(&self) -> Option<Pid> {
        match self {
            JobState::Started { pgid, .. } => Some(*pgid),
            _ => None,
        }
    }

    /// Whether the job is over.
    pub fn is_terminal(&self) -> bool {
        self.phase().is_terminal()
    }

    /// Whether it waits for capacity.
    pub fn is_queued(&self) -> bool {
        matches!(self, JobState::Queued(_))
    }
}

impl JobPhase {
    /// Whether the job is over.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, JobPhase::Queued | JobPhase::Running)
    }

    /// The wire name: `queued`, `running`, `success` or `error`.
    /// (2024-11-05 sessions show `queued` as `running`: see the renderer.)
    pub fn name(&self) -> &'static str {
        match self {
            JobPhase::Queued => "queued",
            JobPhase::Running => "running",
            JobPhase::Exited(0) => "success",
            _ => "error",
        }
    }

    /// Whether the job succeeded (exit code 0).
    pub fn is_success(&self) -> bool {
        matches!(self, JobPhase::Exited(0))
    }
}

/// Why a job ended, when that is known: the server
/// ended it, or the kernel did for a reason it told us. Never inferred from
/// an exit code; a lost status has no cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// Its deadline (`timeout`, `MCP_EXEC_JOB_TIMEOUT`) passed.
    Timeout,
    /// It wrote nothing for `idle_timeout`.
    IdleTimeout,
    /// Our `kill` signalled it.
    Killed,
    /// The server shut down while it ran.
    Shutdown,
    /// The kernel's OOM killer: a SIGKILL none of ours sent while the memory
    /// cgroup's OOM-kill counter rose.
    Oom,
    /// Its `cpu_seconds` ran out (SIGXCPU).
    CpuLimit,
    /// It wrote past `file_size_bytes` (SIGXFSZ).
    FileSizeLimit,
}

impl Cause {
    /// Every cause, in the order the output schema lists them.
    pub const ALL: [Cause; 7] = [
        Cause::Timeout,
        Cause::IdleTimeout,
        Cause::Killed,
        Cause::Shutdown,
        Cause::Oom,
        Cause::CpuLimit,
        Cause::FileSizeLimit,
    ];

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Cause::Timeout => "timeout",
            Cause::IdleTimeout => "idle_timeout",
            Cause::Killed => "killed",
            Cause::Shutdown => "shutdown",
            Cause::Oom => "oom",
            Cause::CpuLimit => "cpu_limit",
            Cause::FileSizeLimit => "file_size_limit",
        }
    }

    /// A deadline of ours: the result says `timed_out: true`.
    pub fn is_deadline(self) -> bool {
        matches!(self, Cause::Timeout | Cause::IdleTimeout)
    }
}

/// Which output stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// stdout
    Stdout,
    /// stderr
    Stderr,
}

impl Stream {
    /// The wire name: `stdout` or `stderr`.
    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Who receives a job's terminal result, exactly once. Set at launch, never
/// changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The caller: MCP `execute`, `wait` or `kill`, whichever claims it
    /// first.
    Caller,
    /// A [`JobStream`](super::JobStream) (`POST /exec`, envd `Start`,
    /// sandboxd `Execute`/`Start`), which alone delivers it: `wait` refuses
    /// the job, `kill` signals it but never claims it, and a queued one is
    /// cancelled in place for its stream to deliver.
    JobStream,
    /// An MCP Task, which keeps the result until its TTL: `wait`
    /// refuses the job, `kill` signals it but never claims it, nothing
    /// claims it; the task renders it from the table (as often as it is
    /// asked) and removes it when the task expires or is cancelled.
    Task(TaskTag),
}

/// The task that owns a job: 128 random bits, chosen by the task record
/// (never derived from the job id). Shown as 32 lowercase hex digits, which
/// is the task's wire id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskTag(pub u128);

impl fmt::Display for TaskTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl Owner {
    /// Whether whoever claims it first receives it (the caller's jobs).
    pub fn is_caller(self) -> bool {
        self == Owner::Caller
    }

    /// The wire name: `caller` (an MCP client's `execute`/`wait`/`kill`),
    /// `stream` (a `POST /exec` stream), `task` (an MCP Task).
    pub fn name(self) -> &'static str {
        match self {
            Owner::Caller => "caller",
            Owner::JobStream => "stream",
            Owner::Task(_) => "task",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_parse_only_in_their_canonical_form() {
        assert_eq!(JobId::parse("job-7"), Some(JobId(7)));
        assert_eq!(JobId(7).to_string(), "job-7");
        for bad in [
            "job-07", "job-+7", "job-", "7", "JOB-7", "job-x", "job-0", "",
        ] {
            assert_eq!(JobId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_exit_code_zero_is_success_and_a_lost_status_is_an_error() {
        assert_eq!(JobPhase::Exited(0).name(), "success");
        assert_eq!(JobPhase::Exited(3).name(), "error");
        assert_eq!(JobPhase::Lost.name(), "error");
        assert!(JobPhase::Lost.is_terminal());
        assert!(!JobPhase::Running.is_terminal());
        assert!(!JobPhase::Queued.is_terminal());
        assert_eq!(JobPhase::Queued.name(), "queued");
    }
}
