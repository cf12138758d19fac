//! `list_jobs`: every job not yet delivered, oldest first (SPEC §4.8).
//!
//! No input. Output: `{"jobs":[{"job_id","state"},…]}`.

use serde::Serialize;
use serde_json::json;

use super::{Args, Call, Effect, Outcome, Running, Tool};
use crate::jobs::JobId;
use crate::protocol::result::Payload;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "list_jobs",
    title: "List jobs",
    description: "Every job that is running or whose result has not been delivered yet, oldest first.",
    effect: Effect::ReadOnly,
    input_schema: || json!({"type": "object", "properties": {}}),
    output_schema: || {
        json!({
            "type": "object",
            "properties": {"jobs": {"type": "array", "items": {
                "type": "object",
                "properties": {"job_id": {"type": "string"}, "state": {"type": "string"}},
                "required": ["job_id", "state"]
            }}},
            "required": ["jobs"]
        })
    },
    starts_jobs: false,
    run,
};

#[derive(Serialize)]
struct Listed {
    job_id: JobId,
    state: &'static str,
}

#[derive(Serialize)]
struct Jobs {
    jobs: Vec<Listed>,
}

fn run<'a>(call: &'a Call, _: &'a Args) -> Running<'a> {
    Box::pin(async move { list(call) })
}

fn list(call: &Call) -> Outcome {
    let jobs = call
        .app
        .jobs
        .table()
        .list()
        .into_iter()
        .map(|(job_id, state)| Listed { job_id, state })
        .collect();
    Ok(Payload::object(Jobs { jobs }))
}
