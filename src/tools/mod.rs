//! The MCP tools: one file per tool, each declaring one [`Tool`] — name,
//! title, description, annotations, input and output schemas, handler — and
//! [`TOOLS`], the one list that `tools/list` and `tools/call` both read.
//!
//! A handler returns a typed [`Payload`] (serialised on write), a
//! [`ToolError`] (an `isError:true` result with one of its exact texts) or
//! [`Fail::Cancelled`] (JSON-RPC `-32800`). Protocol-level problems (params
//! not an object, unknown tool) are JSON-RPC errors, raised in [`dispatch`]
//! before any tool runs.
//!
//! Tools see the job service and the call's context ([`Call`]); they never
//! know which session or transport called them.

pub mod args;
pub mod context;
pub mod download;
pub mod error;
pub mod execute;
pub mod input;
pub mod kill;
pub mod list_jobs;
pub mod output;
pub mod schema;
pub mod screen;
pub mod shell_sessions;
pub mod status;
pub mod upload;
pub mod wait;

use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;

use serde_json::{Value, json};

pub use args::Args;
pub use context::{Call, Host, ProgressText};
pub use error::{Fail, ToolError};

use crate::protocol::ErrorCode;
use crate::protocol::era;
use crate::protocol::result::{CallResult, Payload};
use crate::protocol::version::Revision;

/// A tool handler's outcome: its payload, or how it failed.
pub type ToolOutcome = Result<Payload, Fail>;

/// A handler's future.
pub type Running<'a> = Pin<Box<dyn Future<Output = ToolOutcome> + Send + 'a>>;

/// What a client is told about a tool's effects (MCP annotations).
#[derive(Clone, Copy, Debug)]
pub enum Effect {
    /// Reads only: `readOnlyHint:true, openWorldHint:false`.
    ReadOnly,
    /// Changes processes: `readOnlyHint:false, destructiveHint:true,
    /// idempotentHint:false, openWorldHint:true`.
    Destructive,
}

/// One tool: everything `tools/list` says about it, and its handler.
pub struct Tool {
    /// The name clients call it by.
    pub name: &'static str,
    /// A human title (revisions with titles).
    pub title: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// Its annotations (revisions with annotations).
    pub effect: Effect,
    /// Its `inputSchema` for a session of a revision (Part II inputs appear
    /// from 2025-03-26 on).
    pub input_schema: fn(Revision) -> Value,
    /// Its `outputSchema`: the shape of `structuredContent`.
    pub output_schema: fn(Revision) -> Value,
    /// Its top-level inputs that ChatGPT fills with a file reference
    /// (`_meta["openai/fileParams"]`; revisions with tool `_meta`).
    pub file_params: &'static [&'static str],
    /// Whether a call may start a job (the transport then admits it only
    /// while its answers are being read, see the server's outbox).
    pub starts_jobs: bool,
    /// Runs it.
    pub run: for<'a> fn(&'a Call, &'a Args) -> Running<'a>,
}

/// The Part I tools, in `tools/list` order: every session sees them.
pub static TOOLS: [&Tool; 7] = [
    &execute::TOOL,
    &wait::TOOL,
    &status::TOOL,
    &output::TOOL,
    &input::TOOL,
    &kill::TOOL,
    &list_jobs::TOOL,
];

/// The Part II and III tools (files, shell sessions, screens), listed after [`TOOLS`]
/// and only to sessions of 2025-03-26 and later: a 2024-11-05 session sees
/// exactly the seven Part I tools, and calling one of these is an unknown
/// tool there.
pub static PART_TWO_TOOLS: [&Tool; 4] = [
    &upload::TOOL,
    &download::TOOL,
    &shell_sessions::TOOL,
    &screen::TOOL,
];

/// The tools a session of `revision` sees, in `tools/list` order.
pub fn visible(revision: Revision) -> impl Iterator<Item = &'static Tool> {
    let part_two: &[&Tool] = if revision.has_part_two() {
        &PART_TWO_TOOLS
    } else {
        &[]
    };
    TOOLS.iter().chain(part_two).copied()
}

impl Tool {
    /// The `tools/list` entry for a session of `revision`: description and
    /// `inputSchema` always; the rest as [`Revision`] decides.
    pub fn describe(&self, revision: Revision) -> Value {
        let mut v = json!({
            "name": self.name,
            "description": self.description,
            "inputSchema": (self.input_schema)(revision),
        });
        if revision.has_titles_and_output_schemas() {
            v["title"] = json!(self.title);
            v["outputSchema"] = (self.output_schema)(revision);
        }
        if revision.has_annotations() {
            v["annotations"] = match self.effect {
                Effect::ReadOnly => {
                    json!({"title": self.title, "readOnlyHint": true, "openWorldHint": false})
                }
                Effect::Destructive => json!({
                    "title": self.title,
                    "readOnlyHint": false,
                    "destructiveHint": true,
                    "idempotentHint": false,
                    "openWorldHint": true,
                }),
            };
        }
        if revision.has_tool_meta() && !self.file_params.is_empty() {
            v["_meta"] = json!({"openai/fileParams": self.file_params});
        }
        // Only `execute` may run as a task; the others omit
        // `execution`, which defaults to "forbidden".
        if revision.has_task_augmentation() && std::ptr::eq(self, &execute::TOOL) {
            v["execution"] = json!({"taskSupport": "optional"});
        }
        v
    }
}

/// The `tools/list` result for `revision` as compact JSON, built on first
/// use (not at start-up, which it would slow by ~0.3 ms a revision) and then
/// only copied. Building it scatters temporary `Value`s over the heap, which
/// is trimmed right after so the idle server does not keep them.
///
/// In 2026-07-28 it is a `CacheableResult`: the list is the same for every
/// client and changes only with the binary, so `cacheScope` is `"public"`
/// and `ttlMs` is [`LIST_TTL_MS`]; the order is [`TOOLS`] then
/// [`PART_TWO_TOOLS`], the same on every call (the spec's deterministic
/// order, for clients' and models' prompt caches).
pub fn list_json(revision: Revision) -> &'static str {
    static CACHE: [OnceLock<String>; Revision::ALL.len()] =
        [const { OnceLock::new() }; Revision::ALL.len()];
    CACHE[revision.index()].get_or_init(|| {
        let tools: Vec<Value> = visible(revision).map(|t| t.describe(revision)).collect();
        let mut list = json!({ "tools": tools });
        if revision.has_cache_hints() {
            list["ttlMs"] = json!(LIST_TTL_MS);
            list["cacheScope"] = json!("public");
        }
        era::stamp(revision, era::ResultType::Complete, &mut list);
        let json = list.to_string();
        drop(list);
        init::trim_heap();
        json
    })
}

/// How long a client may cache `tools/list` and `server/discover` (2026-07-28
/// `ttlMs`): an hour. Both change only when the binary does, and a
/// restarted server is a new process the client re-probes anyway.
pub const LIST_TTL_MS: u64 = 3_600_000;

/// Whether the `tools/call` with these params may start a job.
pub fn starts_jobs(params: &Value) -> bool {
    let name = params.get("name").and_then(Value::as_str);
    TOOLS
        .iter()
        .chain(&PART_TWO_TOOLS)
        .any(|t| Some(t.name) == name && t.starts_jobs)
}

/// How a `tools/call` request fails as a whole.
#[derive(Debug)]
pub enum CallError {
    /// Answer `-32800`.
    Cancelled,
    /// Answer with this JSON-RPC error.
    Protocol(ErrorCode, String),
}

/// Handles one `tools/call`: validates the envelope, runs the tool, wraps
/// the outcome.
pub async fn dispatch(call: &Call, params: &Value) -> Result<CallResult, CallError> {
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
    let Some(tool) = visible(call.revision).find(|t| t.name == name) else {
        return Err(CallError::Protocol(
            call.revision.unknown_tool_code(),
            format!("unknown tool: {name}"),
        ));
    };
    let empty = Args::new();
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => {
            let e = ToolError::invalid("\"arguments\" must be an object");
            return Ok(CallResult::Error(e.to_string()));
        }
    };
    match (tool.run)(call, args).await {
        Ok(payload) => Ok(CallResult::Success {
            payload,
            structured: call.revision.has_structured_content(),
        }),
        Err(Fail::Tool(e)) => Ok(CallResult::Error(e.to_string())),
        Err(Fail::Cancelled) => Err(CallError::Cancelled),
    }
}

/// Waits on `fut` unless `cancel` fires first (then `Fail::Cancelled`).
pub async fn cancellable<T>(
    cancel: &tokio_util::sync::CancellationToken,
    fut: impl Future<Output = T>,
) -> Result<T, Fail> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(Fail::Cancelled),
        v = fut => Ok(v),
    }
}

/// A deadline `secs` from now (negative and NaN count as zero; huge values
/// are capped at a day so the arithmetic cannot overflow).
pub fn deadline_in(secs: f64) -> tokio::time::Instant {
    let secs = if secs.is_finite() {
        secs.clamp(0.0, 86_400.0)
    } else {
        0.0
    };
    tokio::time::Instant::now() + std::time::Duration::from_secs_f64(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_unique_name_and_object_schemas() {
        let mut names: Vec<_> = visible(Revision::V2025_11_25).map(|t| t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TOOLS.len() + PART_TWO_TOOLS.len());
        for t in visible(Revision::V2025_11_25) {
            for r in Revision::ALL {
                assert_eq!((t.input_schema)(r)["type"], "object", "{}", t.name);
                assert_eq!((t.output_schema)(r)["type"], "object", "{}", t.name);
            }
        }
    }

    #[test]
    fn the_list_is_built_once_per_revision_and_gated_by_it() {
        let old: Value = serde_json::from_str(list_json(Revision::V2024_11_05)).unwrap();
        let new: Value = serde_json::from_str(list_json(Revision::V2025_11_25)).unwrap();
        assert!(std::ptr::eq(
            list_json(Revision::V2025_11_25),
            list_json(Revision::V2025_11_25)
        ));
        let first = &old["tools"][0];
        assert!(first.get("annotations").is_none() && first.get("title").is_none());
        let first = &new["tools"][0];
        assert!(first.get("annotations").is_some() && first.get("outputSchema").is_some());
        assert_eq!(old["tools"].as_array().unwrap().len(), 7);
        assert_eq!(new["tools"].as_array().unwrap().len(), 11);
    }

    #[test]
    fn no_input_schema_has_a_top_level_combinator() {
        for t in visible(Revision::V2025_11_25) {
            for r in Revision::ALL {
                let s = (t.input_schema)(r);
                for k in ["oneOf", "anyOf", "allOf"] {
                    assert!(s.get(k).is_none(), "{} has top-level {k}", t.name);
                }
            }
        }
    }
}
