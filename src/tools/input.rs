//! `input`: write to a running job's stdin.
//!
//! Input: `job_id`, `data` (string, may be empty), `close` (EOF after the
//! data). From 2025-03-26 on also `keys` (a list of tmux key
//! names and literal text, sent after `data`) and `resize {cols, rows}`
//! (a terminal job's new size, set before anything is written, so that the
//! program has redrawn for it when the keys arrive). Output: the status
//! shape. Errors: `job "job-7" is no longer running`, `stdin is already
//! closed for this job`, the write error, a key that does not exist (named),
//! `resize` of a job without a terminal. A write blocked on a full pipe is
//! cancellable. On a terminal job `close` sends `C-d`.

use serde_json::{Value, json};

use super::schema;
use super::{Args, Call, Effect, Running, Tool, ToolError, ToolOutcome, args, cancellable};
use crate::jobs::{JobId, StdinError, TerminalError, WindowSize};
use crate::protocol::result::Payload;
use crate::protocol::version::Revision;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "input",
    title: "Write to a job's stdin",
    description: "Write data to a running job's stdin; close sends EOF after the data.",
    effect: Effect::Destructive,
    input_schema,
    output_schema: schema::status_schema,
    file_params: &[],
    starts_jobs: false,
    run,
};

fn input_schema(rev: Revision) -> Value {
    let mut schema = json!({
        "type": "object",
        "properties": {"job_id": schema::job_id(), "data": {"type": "string"}, "close": {"type": "boolean"}},
        "required": ["job_id"]
    });
    if rev.has_terminals() {
        schema["properties"]["close"]["description"] = json!(
            "Send EOF after the data and keys (a terminal job: C-d, and the terminal stays open)."
        );
        schema["properties"]["keys"] = json!({
            "type": "array",
            "items": {"type": "string"},
            "description": "Sent after data, in order: each item a key in tmux's spelling (Enter, Tab, Escape, BSpace, Up, PageUp, F5, C-c, M-x, C-S-Left…), sent as the key's bytes, or else literal text, sent as is."
        });
        schema["properties"]["resize"] = json!({
            "type": "object",
            "description": "A terminal job's new size (set first; its foreground programs get SIGWINCH).",
            "properties": {
                "cols": {"type": "integer", "minimum": 1, "maximum": crate::jobs::MAX_DIMENSION},
                "rows": {"type": "integer", "minimum": 1, "maximum": crate::jobs::MAX_DIMENSION}
            },
            "required": ["cols", "rows"]
        });
    }
    schema
}

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(input(call, a))
}

/// `writing stdin: broken pipe` (Go's lower-case errno style).
pub fn write_error(e: &std::io::Error) -> ToolError {
    ToolError::StdinWrite(init::errno_text(e))
}

/// `resize`'s `{cols, rows}`.
fn resize(a: &Args) -> Result<Option<WindowSize>, ToolError> {
    let bad = || {
        ToolError::invalid(format!(
            "\"resize\" must be {{\"cols\": C, \"rows\": R}} with integers between 1 and {}",
            crate::jobs::MAX_DIMENSION
        ))
    };
    match a.get("resize") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => {
            let dim = |k: &str| m.get(k).and_then(Value::as_u64).ok_or_else(bad);
            crate::jobs::window_size(dim("cols")?, dim("rows")?)
                .map(Some)
                .map_err(|_| bad())
        }
        Some(_) => Err(bad()),
    }
}

/// `keys`' bytes: each item a tmux key name or literal text.
/// The cursor keys are sent as the job's program asked for (DECCKM).
fn keys(a: &Args, application_cursor: bool) -> Result<Vec<u8>, ToolError> {
    let items: Vec<String> = match a.get("keys") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| ToolError::invalid("\"keys\" must be an array of strings"))?,
        Some(_) => return Err(ToolError::invalid("\"keys\" must be an array of strings")),
    };
    crate::terminal::encode_for(&items, application_cursor).map_err(ToolError::invalid)
}

/// The tool error of a refused resize.
fn resize_error(id: JobId, e: TerminalError) -> ToolError {
    match e {
        TerminalError::Unknown => ToolError::unknown(id),
        TerminalError::NotTerminal => ToolError::NotTerminal(id),
        TerminalError::Queued => ToolError::NotStarted(id),
        TerminalError::NotRunning => ToolError::NotRunning(id),
        TerminalError::BadSize | TerminalError::Failed(_) => ToolError::invalid(e),
    }
}

async fn input(call: &Call, a: &Args) -> ToolOutcome {
    let id = args::job_id_not_empty(a)?;
    let mut data = args::opt_str(a, "data")?.unwrap_or("").as_bytes().to_vec();
    let close = args::opt_bool(a, "close")?;
    let jobs = &call.host.jobs();
    if call.revision.has_terminals() {
        data.extend(keys(a, jobs.application_cursor(id))?);
        if let Some(size) = resize(a)? {
            jobs.resize(id, size.cols, size.rows)
                .map_err(|e| resize_error(id, e))?;
        }
    }
    let written = cancellable(&call.cancel, jobs.write_stdin(id, &data, close)).await?;
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
