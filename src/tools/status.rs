//! `status`: a job's state, never removes it.
//!
//! Input: `job_id`. Output: `{job_id, state, exit_code?, signal?,
//! signal_number?, start_error?}`; from 2025-03-26 on also `queued_for`,
//! `label`, `awaiting_input: true` while the job is blocked reading its
//! stdin or terminal, and `ports` while it listens
//! (`[{port, proto, addr, loopback_only, pid, job_id}]`; absent when none).

use serde_json::json;

use super::schema;
use super::{Args, Call, Effect, Running, Tool, ToolError, ToolOutcome, args};
use crate::protocol::result::Payload;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "status",
    title: "Job status",
    description: "A job's state and exit code, without removing it.",
    effect: Effect::ReadOnly,
    input_schema: |_| json!({"type": "object", "properties": {"job_id": schema::job_id()}, "required": ["job_id"]}),
    output_schema: schema::status_schema,
    file_params: &[],
    starts_jobs: false,
    run,
};

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(async move { status(call, a) })
}

fn status(call: &Call, a: &Args) -> ToolOutcome {
    let id = args::job_id(a)?;
    let status = call
        .host
        .jobs()
        .status_with_input(id, call.fields())
        .ok_or_else(|| ToolError::unknown(id))?;
    Ok(Payload::object(status))
}
