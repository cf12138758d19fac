//! What a job is: its id and the states of its life.
//!
//! A state carries exactly what that state has; there are no parallel
//! `Option` fields to keep consistent. The process group of a job lives on
//! the job (`Job::pgid`), not in its state: it outlives the direct child
//! (backgrounded members keep the group alive after the child is reaped).

use std::fmt;

use init::Signal;

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

/// Where a job is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobState {
    /// The direct child has not been reaped yet (or the output it wrote
    /// before exiting has not been read yet, SPEC §5.3).
    Running,
    /// The direct child exited with this code.
    Exited {
        /// The exit code.
        code: i32,
    },
    /// A signal killed the direct child.
    Signaled {
        /// The signal.
        signal: Signal,
    },
    /// The job never started (it never enters the table: a start failure is
    /// delivered at once).
    FailedToStart {
        /// Why (`chdir /x: no such file or directory`).
        error: String,
    },
    /// The child is gone but its status could not be learnt (the reaper
    /// stopped). Never reported as an exit code of its own.
    Lost,
}

impl JobState {
    /// Whether the job is over.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, JobState::Running)
    }

    /// The wire name: `running`, `success` or `error`.
    pub fn name(&self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Exited { code: 0 } => "success",
            _ => "error",
        }
    }

    /// Whether the terminal state counts as success (for capture policies).
    pub fn is_success(&self) -> bool {
        matches!(self, JobState::Exited { code: 0 })
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
        assert_eq!(JobState::Exited { code: 0 }.name(), "success");
        assert_eq!(JobState::Exited { code: 3 }.name(), "error");
        assert_eq!(JobState::Lost.name(), "error");
        assert!(JobState::Lost.is_terminal());
        assert!(!JobState::Running.is_terminal());
    }
}
