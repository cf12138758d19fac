//! `output`: read a job's live or final buffers, never removes it.
//!
//! Input: `job_id`, `stdout`, `stderr` (stream specs). Output: the
//! status fields plus one slice per requested stream. The capture policy is
//! not used here. The stream specs are validated before the job id, so a bad
//! spec is reported even for an unknown job, as the reference does.

use serde_json::json;

use super::schema;
use super::{Args, Call, Effect, Running, Tool, ToolError, ToolOutcome, args};
use crate::capture::StreamSpec;
use crate::protocol::result::Payload;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "output",
    title: "Read job output",
    description: "Read a running or ended job's stdout/stderr by stream spec (all, tail N lines, or from an absolute byte offset), without removing it.",
    effect: Effect::ReadOnly,
    input_schema: |_| {
        json!({
            "type": "object",
            "properties": {"job_id": schema::job_id(), "stdout": schema::stream_spec(), "stderr": schema::stream_spec()},
            "required": ["job_id"]
        })
    },
    output_schema: schema::job_result_schema,
    file_params: &[],
    starts_jobs: false,
    run,
};

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(async move { output(call, a) })
}

fn output(call: &Call, a: &Args) -> ToolOutcome {
    let spec = |key: &str| -> Result<StreamSpec, ToolError> {
        match a.get(key) {
            None => Ok(StreamSpec::None),
            Some(v) => {
                StreamSpec::from_json(v).map_err(|e| ToolError::invalid(format!("{key}: {e}")))
            }
        }
    };
    let (stdout, stderr) = (spec("stdout")?, spec("stderr")?);
    let id = args::job_id(a)?;
    let out = call
        .host
        .jobs()
        .read(id, &stdout, &stderr, &call.view())
        .ok_or_else(|| ToolError::unknown(id))?;
    let bytes = out.data_bytes();
    Ok(Payload::object(out).sized(bytes))
}
