//! `input`: write to a running job's stdin (SPEC §4.6).
//!
//! Input: `job_id`, `data` (string, may be empty), `close` (EOF after the
//! data). Output: the status shape. Errors: `job "job-7" is no longer
//! running`, `stdin is already closed for this job`, or the write error.
//! A write blocked on a full pipe is cancellable.

use serde_json::json;

use super::schema;
use super::{Args, Call, Effect, Running, Tool, ToolError, ToolOutcome, args, cancellable};
use crate::jobs::StdinError;
use crate::protocol::result::Payload;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "input",
    title: "Write to a job's stdin",
    description: "Write data to a running job's stdin; close sends EOF after the data.",
    effect: Effect::Destructive,
    input_schema: |_| {
        json!({
            "type": "object",
            "properties": {"job_id": schema::job_id(), "data": {"type": "string"}, "close": {"type": "boolean"}},
            "required": ["job_id"]
        })
    },
    output_schema: schema::status_schema,
    starts_jobs: false,
    run,
};

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(input(call, a))
}

/// `writing stdin: broken pipe` (Go's lower-case errno style).
pub fn write_error(e: &std::io::Error) -> ToolError {
    ToolError::StdinWrite(init::errno_text(e))
}

async fn input(call: &Call, a: &Args) -> ToolOutcome {
    let id = args::job_id_not_empty(a)?;
    let data = args::opt_str(a, "data")?.unwrap_or("");
    let close = args::opt_bool(a, "close")?;
    let jobs = &call.app.jobs;
    let written = cancellable(&call.cancel, jobs.write_stdin(id, data.as_bytes(), close)).await?;
    match written {
        Ok(()) => {}
        Err(StdinError::Unknown) => return Err(ToolError::unknown(id).into()),
        Err(StdinError::NotRunning) => return Err(ToolError::NotRunning(id).into()),
        // A 2024-11-05 session sees a queued job as running, with no stdin yet.
        Err(StdinError::Queued) if call.revision.has_part_two() => {
            return Err(ToolError::NotStarted(id).into());
        }
        Err(StdinError::Queued | StdinError::Closed) => return Err(ToolError::StdinClosed.into()),
        // EPIPE from a job that has exited meanwhile: say that, not the errno.
        Err(StdinError::Write { ended: true, .. }) => {
            return Err(ToolError::NotRunning(id).into());
        }
        Err(StdinError::Write { error, .. }) => return Err(write_error(&error).into()),
    }
    let status = jobs
        .status(id, call.fields())
        .ok_or_else(|| ToolError::unknown(id))?;
    Ok(Payload::object(status))
}
