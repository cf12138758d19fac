//! The wire shapes of a job (SPEC §4.1, §4.4), as typed structs.
//!
//! Field order is the declaration order: `job_id`, `state`, `exit_code`,
//! `signal`, `signal_number`, `start_error`, `stdout`, `stderr`.
//! - `exit_code`: only when terminal; `-1` for death by signal, a start
//!   error, or a lost status.
//! - `signal`: the description (`"terminated"`), only on death by signal,
//!   with `signal_number` beside it.
//! - `start_error`: only when the job could not start.
//! - `stdout`/`stderr`: slices (SPEC §5.1), only when captured.
//!
//! A lost status (the reaper stopped before reporting the child) shows as
//! `state:"error", exit_code:-1` in every revision, never as an exit code of
//! its own; it is logged where it happens.

use serde::Serialize;

use super::state::{JobId, JobState};
use super::table::Job;
use crate::capture::{CapturePolicy, Slice, StreamSpec, Window};

/// `{job_id, state, exit_code?, signal?, signal_number?, start_error?}`.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// `job-N`.
    pub job_id: JobId,
    /// `running`, `success` or `error`.
    pub state: &'static str,
    /// Only when terminal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal's description, on death by signal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// The signal's number, on death by signal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal_number: Option<i32>,
    /// Why the job could not start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_error: Option<String>,
}

impl Status {
    /// The status of job `id` in `state`.
    pub fn of(id: JobId, state: &JobState) -> Status {
        let mut s = Status {
            job_id: id,
            state: state.name(),
            exit_code: None,
            signal: None,
            signal_number: None,
            start_error: None,
        };
        match state {
            JobState::Running => {}
            JobState::Exited { code } => s.exit_code = Some(*code),
            JobState::Signaled { signal } => {
                s.exit_code = Some(-1);
                s.signal = Some(signal.description());
                s.signal_number = Some(signal.as_raw());
            }
            JobState::FailedToStart { error } => {
                s.exit_code = Some(-1);
                s.start_error = Some(error.clone());
            }
            JobState::Lost => s.exit_code = Some(-1),
        }
        s
    }

    /// `{job_id, state:"running"}`.
    pub fn running(id: JobId) -> Status {
        Status::of(id, &JobState::Running)
    }
}

/// A status with the slices asked for.
#[derive(Debug, Clone, Serialize)]
pub struct JobResult {
    /// The status fields.
    #[serde(flatten)]
    pub status: Status,
    /// stdout, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<Slice>,
    /// stderr, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<Slice>,
}

impl JobResult {
    /// Status plus the slices asked for (a `none` spec omits its stream).
    pub fn with_streams(job: &Job, stdout: &StreamSpec, stderr: &StreamSpec) -> JobResult {
        JobResult {
            status: Status::of(job.id, &job.state),
            stdout: job.stdout.slice(stdout),
            stderr: job.stderr.slice(stderr),
        }
    }

    /// The terminal result as delivered by `execute`, `wait` and `kill`:
    /// status plus the streams of the job's capture policy for its outcome.
    pub fn delivered(job: &Job) -> JobResult {
        let side = job.capture.side(job.state.is_success());
        JobResult::with_streams(job, &side.stdout, &side.stderr)
    }

    /// The result of a job that could not start: an `error` with its
    /// `start_error`, and the (empty) streams its `on_error` policy names.
    pub fn start_failed(id: JobId, error: String, capture: &CapturePolicy) -> JobResult {
        let side = capture.side(false);
        let empty = Window::new(0);
        JobResult {
            status: Status::of(id, &JobState::FailedToStart { error }),
            stdout: empty.slice(&side.stdout),
            stderr: empty.slice(&side.stderr),
        }
    }
}
