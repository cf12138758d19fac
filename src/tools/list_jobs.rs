//! `list_jobs`: every job not yet delivered, oldest first.
//!
//! No input. Output: `{"jobs":[{"job_id","state"},…]}`; from 2025-03-26 on
//! entries also carry `queued_for` (a queued job), `label` (when set) and
//! `awaiting_input: true` (a running job blocked reading its stdin or
//! terminal) and `ports` (the sockets a running job listens on; absent when
//! none).

use serde::Serialize;
use serde_json::json;

use super::{Args, Call, Effect, Running, Tool, ToolOutcome};
use crate::jobs::JobId;
use crate::jobs::result::JobStatus;
use crate::protocol::result::Payload;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "list_jobs",
    title: "List jobs",
    description: "Every job that is running or whose result has not been delivered yet, oldest first.",
    effect: Effect::ReadOnly,
    input_schema: |_| json!({"type": "object", "properties": {}}),
    output_schema: |rev| {
        let entry = if rev.has_part_two() {
            json!({
                "type": "object",
                "properties": {
                    "job_id": {"type": "string"},
                    "state": {"type": "string"},
                    "queued_for": {"type": "string"},
                    "label": {"type": "string"},
                    "awaiting_input": {"type": "boolean"},
                    "ports": super::schema::ports_schema()
                },
                "required": ["job_id", "state"]
            })
        } else {
            json!({
                "type": "object",
                "properties": {"job_id": {"type": "string"}, "state": {"type": "string"}},
                "required": ["job_id", "state"]
            })
        };
        json!({
            "type": "object",
            "properties": {"jobs": {"type": "array", "items": entry}},
            "required": ["jobs"]
        })
    },
    file_params: &[],
    starts_jobs: false,
    run,
};

/// `{"jobs":[{job_id, state, queued_for?, label?}, …]}`.
#[derive(Serialize)]
struct Jobs {
    jobs: Vec<Entry>,
}

/// One job: its id and state (no exit code: that is `status`'s).
#[derive(Serialize)]
struct Entry {
    job_id: JobId,
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    queued_for: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    awaiting_input: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ports: Option<Vec<crate::jobs::Port>>,
}

fn run<'a>(call: &'a Call, _: &'a Args) -> Running<'a> {
    Box::pin(async move { list(call) })
}

fn list(call: &Call) -> ToolOutcome {
    let jobs = call
        .host
        .jobs()
        .list()
        .into_iter()
        .map(|l| {
            let s = JobStatus::listed(&l, call.fields());
            Entry {
                job_id: s.job_id,
                state: s.state,
                queued_for: s.queued_for,
                label: s.label,
                awaiting_input: s.awaiting_input,
                ports: s.ports,
            }
        })
        .collect();
    Ok(Payload::object(Jobs { jobs }))
}
