//! The wire shapes of a job (SPEC §4.1, §4.4).
//!
//! Field order is fixed (serde_json's `preserve_order`): `job_id`, `state`,
//! `exit_code`, `signal`, `signal_number`, `start_error`, `stdout`, `stderr`.
//! - `exit_code`: only when terminal; `-1` for death by signal or start error.
//! - `signal`: the description (`"terminated"`), only on death by signal,
//!   with `signal_number` beside it.
//! - `start_error`: only when the job could not start.
//! - `stdout`/`stderr`: slices (SPEC §5.1), only when captured.

use serde_json::{Map, Value, json};

use super::{Job, JobId, JobState};
use crate::capture::StreamSpec;

/// `{job_id, state, exit_code?, signal?, signal_number?, start_error?}`.
pub fn status(id: JobId, state: &JobState) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("job_id".into(), json!(id.to_string()));
    m.insert("state".into(), json!(state.name()));
    match state {
        JobState::Running { .. } => {}
        JobState::Exited { code } => {
            m.insert("exit_code".into(), json!(code));
        }
        JobState::Signaled { signal } => {
            m.insert("exit_code".into(), json!(-1));
            m.insert("signal".into(), json!(signal.description()));
            m.insert("signal_number".into(), json!(signal.as_raw()));
        }
        JobState::FailedToStart { error } => {
            m.insert("exit_code".into(), json!(-1));
            m.insert("start_error".into(), json!(error));
        }
    }
    m
}

/// Status plus the slices asked for (absent specs are omitted).
pub fn with_streams(job: &Job, stdout: &StreamSpec, stderr: &StreamSpec) -> Map<String, Value> {
    let mut m = status(job.id, &job.state);
    if let Some(s) = job.stdout.slice(stdout) {
        m.insert("stdout".into(), json!(s));
    }
    if let Some(s) = job.stderr.slice(stderr) {
        m.insert("stderr".into(), json!(s));
    }
    m
}

/// The terminal result as delivered by `execute`, `wait` and `kill`: status
/// plus the streams of the job's capture policy for its outcome.
pub fn delivered(job: &Job) -> Value {
    let side = job.capture.side(job.state.is_success());
    Value::Object(with_streams(job, &side.stdout, &side.stderr))
}
