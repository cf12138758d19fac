//! `input`: write to a running job's stdin (SPEC §4.6).
//!
//! Input: `job_id`, `data` (string, may be empty), `close` (EOF after the
//! data). Output: the status shape. Errors: `job "job-7" is no longer
//! running`, `stdin is already closed for this job`, or the write error.
//! A write blocked on a full pipe is cancellable.

use serde_json::json;
use tokio::io::AsyncWriteExt;

use super::schema;
use super::{Args, Call, Effect, Running, Tool, ToolError, ToolOutcome, args, cancellable};
use crate::jobs::result::Status;
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
    let table = call.app.jobs.table();
    let (terminal, queued, slot) = table
        .with(id, |j| {
            (j.state.is_terminal(), j.state.is_queued(), j.stdin.clone())
        })
        .ok_or_else(|| ToolError::unknown(id))?;
    if terminal {
        return Err(ToolError::NotRunning(id).into());
    }
    if queued && call.revision.has_part_two() {
        return Err(ToolError::NotStarted(id).into());
    }
    let mut guard = cancellable(&call.cancel, slot.lock()).await?;
    let Some(tx) = guard.as_mut() else {
        return Err(ToolError::StdinClosed.into());
    };
    if !data.is_empty() {
        let written = cancellable(&call.cancel, tx.write_all(data.as_bytes())).await?;
        if let Err(e) = written {
            *guard = None;
            // EPIPE from a job that has exited meanwhile: say that, not the errno.
            if table.with(id, |j| j.state.is_terminal()).unwrap_or(true) {
                return Err(ToolError::NotRunning(id).into());
            }
            return Err(write_error(&e).into());
        }
    }
    if close {
        *guard = None;
    }
    drop(guard);
    let status = table
        .with(id, |j| Status::of(j, call.revision))
        .ok_or_else(|| ToolError::unknown(id))?;
    Ok(Payload::object(status))
}
