//! `list_jobs`: every job not yet delivered, oldest first (SPEC §4.8).
//! Output: `{"jobs":[{"job_id","state"},…]}`.

use serde_json::{Value, json};

use super::CallCtx;

/// Runs the tool.
pub fn run(ctx: &CallCtx<'_>) -> Value {
    let jobs: Vec<Value> = ctx
        .app
        .jobs
        .list()
        .into_iter()
        .map(|(id, state)| json!({"job_id": id.to_string(), "state": state}))
        .collect();
    json!({ "jobs": jobs })
}
