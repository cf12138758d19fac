//! The seven MCP tools: dispatch, result wrapping, and the shared helpers of
//! blocking calls. One file per tool, named after it.
//!
//! A tool returns `Ok(json)` (wrapped as a text block, plus
//! `structuredContent` from revision 2025-06-18 on), `Err(Fail::Message)`
//! (an `isError:true` result with that text) or `Err(Fail::Cancelled)`
//! (JSON-RPC `-32800`). Protocol-level problems (params not an object,
//! unknown tool) are JSON-RPC errors, raised in [`call`] before any tool runs.

pub mod args;
pub mod execute;
pub mod input;
pub mod kill;
pub mod list_jobs;
pub mod output;
pub mod schema;
pub mod status;
pub mod wait;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::jobs::{JobId, JobTable};
use crate::protocol::ErrorCode;
use crate::protocol::version::Revision;
use crate::server::App;
use crate::server::progress::Progress;

/// What a running tool call can reach.
pub struct CallCtx<'a> {
    /// Shared server state.
    pub app: &'a Arc<App>,
    /// Cancelled by `notifications/cancelled` for this request, and by
    /// shutdown (it is a child of [`CallCtx::shutdown`]).
    pub cancel: &'a CancellationToken,
    /// Cancelled when the server shuts down.
    pub shutdown: &'a CancellationToken,
    /// The progress phase for the ticker.
    pub progress: &'a Progress,
}

/// How a tool can fail.
#[derive(Debug)]
pub enum Fail {
    /// A tool error: `isError:true` with this text.
    Message(String),
    /// The request was cancelled.
    Cancelled,
}

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail::Message(s)
    }
}

/// A tool's outcome.
pub type Outcome = Result<Value, Fail>;

/// How a `tools/call` request fails as a whole.
#[derive(Debug)]
pub enum CallError {
    /// Answer `-32800`.
    Cancelled,
    /// Answer with this JSON-RPC error.
    Protocol(ErrorCode, String),
}

/// The tool names, in `tools/list` order.
pub const NAMES: [&str; 7] = [
    "execute",
    "wait",
    "status",
    "output",
    "input",
    "kill",
    "list_jobs",
];

/// `tools/list` for the session's revision.
pub fn list(revision: Revision) -> Vec<Value> {
    NAMES
        .iter()
        .map(|n| schema::describe(n, revision))
        .collect()
}

/// Handles one `tools/call`: validates the envelope, runs the tool, wraps
/// the outcome.
pub async fn call(
    ctx: &CallCtx<'_>,
    params: &Value,
    revision: Revision,
) -> Result<Value, CallError> {
    let Some(params) = params.as_object() else {
        return Err(CallError::Protocol(
            ErrorCode::INVALID_PARAMS,
            "invalid params: expected an object".into(),
        ));
    };
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err(CallError::Protocol(
            ErrorCode::INVALID_PARAMS,
            "invalid params: \"name\" must be a string".into(),
        ));
    };
    let empty = serde_json::Map::new();
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Ok(error_result(
                "invalid arguments: \"arguments\" must be an object",
            ));
        }
    };
    let outcome = match name {
        "execute" => execute::run(ctx, args).await,
        "wait" => wait::run(ctx, args).await,
        "status" => status::run(ctx, args),
        "output" => output::run(ctx, args),
        "input" => input::run(ctx, args).await,
        "kill" => kill::run(ctx, args).await,
        "list_jobs" => Ok(list_jobs::run(ctx)),
        other => {
            return Err(CallError::Protocol(
                ErrorCode::METHOD_NOT_FOUND,
                format!("unknown tool: {other}"),
            ));
        }
    };
    match outcome {
        Ok(value) => Ok(success_result(value, revision)),
        Err(Fail::Message(m)) => Ok(error_result(&m)),
        Err(Fail::Cancelled) => Err(CallError::Cancelled),
    }
}

/// The text block is the compact JSON of the result in every revision (SPEC §3: `wait`'s
/// is an array); only `structuredContent`, which MCP requires to be an object, wraps an
/// array as `{"results": […]}`.
fn success_result(value: Value, revision: Revision) -> Value {
    let text = value.to_string();
    if revision.has_structured_output() {
        let structured = match value {
            Value::Array(items) => json!({"results": items}),
            other => other,
        };
        json!({
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": false,
        })
    } else {
        json!({"content": [{"type": "text", "text": text}], "isError": false})
    }
}

fn error_result(message: &str) -> Value {
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}

/// How a wait for one job ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Awaited {
    /// The job is terminal (still in the table).
    Terminal,
    /// The deadline passed first.
    Timeout,
    /// The job left the table (delivered elsewhere).
    Gone,
}

/// Waits until job `id` is terminal, it leaves the table, or `deadline`.
/// Cancellable.
pub async fn await_terminal(
    jobs: &JobTable,
    id: JobId,
    deadline: Option<Instant>,
    cancel: &CancellationToken,
) -> Result<Awaited, Fail> {
    loop {
        let changed = jobs.changed();
        tokio::pin!(changed);
        changed.as_mut().enable();
        match jobs.with(id, |j| j.state.is_terminal()) {
            None => return Ok(Awaited::Gone),
            Some(true) => return Ok(Awaited::Terminal),
            Some(false) => {}
        }
        tokio::select! {
            () = cancel.cancelled() => return Err(Fail::Cancelled),
            () = &mut changed => {}
            () = sleep_until_opt(deadline) => return Ok(Awaited::Timeout),
        }
    }
}

/// Sleeps until `deadline`, or forever for `None`.
pub async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// A deadline `secs` from now (negative and NaN count as zero; huge values
/// are capped at a day so the arithmetic cannot overflow).
pub fn deadline_in(secs: f64) -> Instant {
    let secs = if secs.is_finite() {
        secs.clamp(0.0, 86_400.0)
    } else {
        0.0
    };
    Instant::now() + Duration::from_secs_f64(secs)
}
