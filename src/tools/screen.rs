//! `screen`: a terminal job's screen as a VT parser renders it,
//! read-only, from 2025-03-26 on.
//!
//! Input: `job_id`, `scrollback` (lines from above the screen, default 0,
//! at most [`crate::jobs::SCROLLBACK_LINES`]). Output: `{cols, rows, lines,
//! cursor: {row, col, visible}, alternate_screen, title?, offset,
//! scrollback?}`, where `offset` is the raw byte offset of the job's
//! `stdout` the screen reflects. Works on running and ended terminal jobs
//! until their result is delivered (which carries the last screen); lines
//! are redacted as output is. Errors: an unknown job, a pipe job (no
//! terminal), a queued one (no terminal yet).

use serde_json::{Value, json};

use super::schema;
use super::{Args, Call, Effect, Running, Tool, ToolError, ToolOutcome, args};
use crate::jobs::{SCROLLBACK_LINES, TerminalError};
use crate::protocol::result::Payload;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "screen",
    title: "A terminal job's screen",
    description: "The screen of a job started with tty: true, as a terminal shows it: its rows of text, cursor, whether the alternate screen (full-screen programs) is active, the window title, and offset (the raw output byte offset it reflects). scrollback: also that many lines from above the screen. Works until the job's result is delivered.",
    effect: Effect::ReadOnly,
    input_schema: |_| {
        json!({
            "type": "object",
            "properties": {
                "job_id": schema::job_id(),
                "scrollback": {"type": "integer", "minimum": 0, "maximum": SCROLLBACK_LINES, "description": "Lines from above the screen to include (default 0)."}
            },
            "required": ["job_id"]
        })
    },
    output_schema: |_| schema::screen_schema(),
    file_params: &[],
    starts_jobs: false,
    run,
};

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(async move { screen(call, a) })
}

fn screen(call: &Call, a: &Args) -> ToolOutcome {
    let id = args::job_id(a)?;
    let scrollback = match a.get("scrollback") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n <= SCROLLBACK_LINES)
            .ok_or_else(|| {
                ToolError::invalid(format!(
                    "\"scrollback\" must be an integer between 0 and {SCROLLBACK_LINES}"
                ))
            })?,
    };
    let view = call.view();
    match call.host.jobs().screen(id, scrollback, view.redact) {
        Ok(view) => Ok(Payload::object(view)),
        Err(TerminalError::NotTerminal) => Err(ToolError::NotTerminal(id).into()),
        Err(TerminalError::Queued) => Err(ToolError::NotStarted(id).into()),
        Err(_) => Err(ToolError::unknown(id).into()),
    }
}
