//! `status`: a job's state, never removes it (SPEC §4.4).
//! Output: `{job_id, state, exit_code?, signal?, signal_number?, start_error?}`.

use serde_json::Value;

use super::args::{self, Args, unknown_job};
use super::{CallCtx, Outcome};
use crate::jobs::result;

/// Runs the tool.
pub fn run(ctx: &CallCtx<'_>, a: &Args) -> Outcome {
    let id = args::job_id(a)?;
    let status = ctx
        .app
        .jobs
        .with(id, |j| result::status(j.id, &j.state))
        .ok_or_else(|| unknown_job(id))?;
    Ok(Value::Object(status))
}
