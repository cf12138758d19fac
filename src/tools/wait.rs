//! `wait`: block until any listed job is terminal (SPEC §4.3).
//!
//! Input: `job_ids` (non-empty array of strings, duplicates allowed),
//! `timeout` (seconds; default `MCP_EXEC_DEFAULT_TIMEOUT`; `<= 0` polls).
//! Output: an array in `job_ids` order. Terminal jobs carry their full result
//! and are removed (delivered here and nowhere else); running ones are
//! `{job_id, state:"running"}`. A later duplicate of an id delivered in the
//! same answer repeats its status fields without the streams, so the output
//! is delivered once. An unknown id fails the whole call.

use serde_json::{Value, json};

use super::args::{Args, invalid, unknown_job};
use super::{CallCtx, Fail, Outcome, deadline_in};
use crate::jobs::{JobId, WaitEntry, result};

fn parse_ids(a: &Args) -> Result<Vec<JobId>, String> {
    let required = || "\"job_ids\" must be a non-empty array".to_owned();
    let Some(Value::Array(items)) = a.get("job_ids") else {
        return Err(required());
    };
    if items.is_empty() {
        return Err(required());
    }
    items
        .iter()
        .map(|v| match v {
            Value::String(s) => JobId::parse(s).ok_or_else(|| unknown_job(s)),
            _ => Err(invalid("\"job_ids\" must contain only strings")),
        })
        .collect()
}

/// Runs the tool.
pub async fn run(ctx: &CallCtx<'_>, a: &Args) -> Outcome {
    let ids = parse_ids(a)?;
    let timeout = match super::args::opt_seconds(a, "timeout")? {
        Some(t) => t,
        None => ctx.app.config.default_timeout.as_secs_f64(),
    };
    let deadline = deadline_in(timeout);
    let jobs = &ctx.app.jobs;
    ctx.progress.phase("waiting for jobs");
    loop {
        let changed = jobs.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let entries = jobs.claim_terminal_among(&ids).map_err(unknown_job)?;
        let done = entries.iter().any(|e| !matches!(e, WaitEntry::Running(_)));
        if done || tokio::time::Instant::now() >= deadline {
            return Ok(Value::Array(entries.into_iter().map(render).collect()));
        }
        tokio::select! {
            () = ctx.cancel.cancelled() => return Err(Fail::Cancelled),
            () = &mut changed => {}
            () = tokio::time::sleep_until(deadline) => {}
        }
    }
}

fn render(e: WaitEntry) -> Value {
    match e {
        WaitEntry::Delivered(job) => result::delivered(&job),
        WaitEntry::Repeat(id, state) => Value::Object(result::status(id, &state)),
        WaitEntry::Running(id) => json!({"job_id": id.to_string(), "state": "running"}),
    }
}
