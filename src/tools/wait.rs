//! `wait`: block until any listed job is terminal (SPEC §4.3).
//!
//! Input: `job_ids` (non-empty array of strings, duplicates allowed),
//! `timeout` (seconds; default `MCP_EXEC_DEFAULT_TIMEOUT`; `<= 0` polls).
//! Output: an array in `job_ids` order. Terminal jobs carry their full result
//! and are removed (delivered here and nowhere else); running ones are
//! `{job_id, state:"running"}`. A later duplicate of an id delivered in the
//! same answer repeats its status fields without the streams, so the output
//! is delivered once. An unknown id fails the whole call.

use serde::Serialize;
use serde_json::{Value, json};

use super::schema;
use super::{Args, Call, Effect, Fail, Outcome, Running, Tool, ToolError, deadline_in};
use crate::jobs::result::{JobResult, Status};
use crate::jobs::{JobId, WaitEntry};
use crate::protocol::result::Payload;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "wait",
    title: "Wait for jobs",
    description: "Block until any of the listed jobs ends, or the timeout. Returns one entry per id, in order: ended jobs with their full result (and they are removed), running ones as {job_id, state:\"running\"}.",
    effect: Effect::ReadOnly,
    input_schema: || {
        json!({
            "type": "object",
            "properties": {
                "job_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "timeout": {"type": "number", "description": "Seconds to wait (default MCP_EXEC_DEFAULT_TIMEOUT, 30 unless set); <= 0 polls."}
            },
            "required": ["job_ids"]
        })
    },
    output_schema: || {
        json!({
            "type": "object",
            "properties": {"results": {"type": "array", "items": schema::job_result_schema()}},
            "required": ["results"]
        })
    },
    starts_jobs: false,
    run,
};

/// One entry of the answer.
#[derive(Serialize)]
#[serde(untagged)]
enum Entry {
    Result(JobResult),
    Status(Status),
}

fn parse_ids(a: &Args) -> Result<Vec<JobId>, ToolError> {
    let Some(Value::Array(items)) = a.get("job_ids") else {
        return Err(ToolError::JobIdsRequired);
    };
    if items.is_empty() {
        return Err(ToolError::JobIdsRequired);
    }
    items
        .iter()
        .map(|v| match v {
            Value::String(s) => JobId::parse(s).ok_or_else(|| ToolError::unknown(s)),
            _ => Err(ToolError::invalid("\"job_ids\" must contain only strings")),
        })
        .collect()
}

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(wait(call, a))
}

async fn wait(call: &Call, a: &Args) -> Outcome {
    let ids = parse_ids(a)?;
    let timeout = match super::args::opt_seconds(a, "timeout")? {
        Some(t) => t,
        None => call.app.config.default_timeout.as_secs_f64(),
    };
    let deadline = deadline_in(timeout);
    let table = call.app.jobs.table();
    call.phase.set("waiting for jobs");
    loop {
        let changed = table.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let entries = table
            .claim_terminal_among(&ids)
            .map_err(ToolError::unknown)?;
        let done = entries.iter().any(|e| !matches!(e, WaitEntry::Running(_)));
        if done || tokio::time::Instant::now() >= deadline {
            let out: Vec<Entry> = entries.into_iter().map(render).collect();
            return Ok(Payload::array("results", out));
        }
        tokio::select! {
            () = call.cancel.cancelled() => return Err(Fail::Cancelled),
            () = &mut changed => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

fn render(e: WaitEntry) -> Entry {
    match e {
        WaitEntry::Delivered(job) => Entry::Result(JobResult::delivered(&job)),
        WaitEntry::Repeat(id, state) => Entry::Status(Status::of(id, &state)),
        WaitEntry::Running(id) => Entry::Status(Status::running(id)),
    }
}
