//! `output`: read a job's live or final buffers, never removes it (SPEC §4.5).
//!
//! Input: `job_id`, `stdout`, `stderr` (stream specs, §5.1). Output: the
//! status fields plus one slice per requested stream. The capture policy is
//! not used here.

use serde_json::Value;

use super::args::{self, Args, invalid, unknown_job};
use super::{CallCtx, Outcome};
use crate::capture::StreamSpec;
use crate::jobs::result;

/// Runs the tool.
pub fn run(ctx: &CallCtx<'_>, a: &Args) -> Outcome {
    let id = args::job_id(a)?;
    let spec = |key: &str| -> Result<StreamSpec, String> {
        match a.get(key) {
            None => Ok(StreamSpec::None),
            Some(v) => StreamSpec::from_json(v).map_err(|e| invalid(format!("{key}: {e}"))),
        }
    };
    let (stdout, stderr) = (spec("stdout")?, spec("stderr")?);
    let out = ctx
        .app
        .jobs
        .with(id, |j| result::with_streams(j, &stdout, &stderr))
        .ok_or_else(|| unknown_job(id))?;
    Ok(Value::Object(out))
}
