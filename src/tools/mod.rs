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
) -> Result<ToolResult, CallError> {
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
            return Ok(ToolResult::Error(
                "invalid arguments: \"arguments\" must be an object".into(),
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
        Ok(value) => Ok(ToolResult::Success {
            value,
            structured: revision.has_structured_output(),
        }),
        Err(Fail::Message(m)) => Ok(ToolResult::Error(m)),
        Err(Fail::Cancelled) => Err(CallError::Cancelled),
    }
}

/// A `tools/call` result, serialised straight into the output stream.
///
/// Success: `{"content":[{"type":"text","text":<compact JSON>}],
/// "structuredContent"?:<object>,"isError":false}`. The text block is the
/// compact JSON of the result in every revision (SPEC §3: `wait`'s is an
/// array); only `structuredContent` (from 2025-06-18 on), which MCP requires
/// to be an object, wraps an array as `{"results": […]}`. The text is
/// produced by streaming the value through the string escaper
/// (`collect_str`), so a megabyte of output is never held twice.
///
/// Failure: `{"content":[{"type":"text","text":<message>}],"isError":true}`.
#[derive(Debug)]
pub enum ToolResult {
    /// The tool succeeded.
    Success {
        /// Its result.
        value: Value,
        /// Whether to add `structuredContent`.
        structured: bool,
    },
    /// The tool failed with this message.
    Error(String),
}

impl serde::Serialize for ToolResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;

        /// `{"type":"text","text":<compact JSON of the value>}`.
        struct JsonText<'a>(&'a Value);
        impl serde::Serialize for JsonText<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                struct Compact<'a>(&'a Value);
                impl serde::Serialize for Compact<'_> {
                    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        // `Value`'s Display is its compact JSON, written in pieces.
                        s.collect_str(self.0)
                    }
                }
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", "text")?;
                m.serialize_entry("text", &Compact(self.0))?;
                m.end()
            }
        }
        /// The value as an object: arrays go under `results`.
        struct Structured<'a>(&'a Value);
        impl serde::Serialize for Structured<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                if self.0.is_array() {
                    let mut m = s.serialize_map(Some(1))?;
                    m.serialize_entry("results", self.0)?;
                    m.end()
                } else {
                    self.0.serialize(s)
                }
            }
        }

        let mut m = s.serialize_map(None)?;
        match self {
            ToolResult::Success { value, structured } => {
                m.serialize_entry("content", &[JsonText(value)])?;
                if *structured {
                    m.serialize_entry("structuredContent", &Structured(value))?;
                }
                m.serialize_entry("isError", &false)?;
            }
            ToolResult::Error(message) => {
                m.serialize_entry("content", &[json!({"type": "text", "text": message})])?;
                m.serialize_entry("isError", &true)?;
            }
        }
        m.end()
    }
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
