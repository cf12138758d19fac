//! `shell_sessions`: inspect and end shell sessions. Part II
//! only: a 2024-11-05 session does not see it.
//!
//! Input: `action` (`list`, `show`, `reset`, `close`) and, except for
//! `list`, `session`. Output:
//! - `list`: `{"sessions":[{session, cwd?, variables?, busy, idle_seconds}, …]}`
//!   by name; `cwd` only once the session has one of its own (else its jobs
//!   start where jobs start by default), `variables` the number of its
//!   exported variables once it has an environment of its own;
//! - `show`: `{session, cwd?, variables?: [names], busy, idle_seconds}` —
//!   names only, never values (they may be secrets);
//! - `reset`: `{session, reset: true}`: back to the server's defaults (a job
//!   of it still running does not hand its state over afterwards);
//! - `close`: `{session, closed: true}`: forgotten; jobs of it already
//!   queued or running go on, their state is not kept.
//!
//! An unknown session is a tool error: `shell session "x" does not exist`.

use serde::Serialize;
use serde_json::{Value, json};

use super::{Args, Call, Effect, Running, Tool, ToolError, ToolOutcome, args};
use crate::jobs::Shown;
use crate::protocol::result::Payload;
use crate::protocol::version::Revision;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "shell_sessions",
    title: "Shell sessions",
    description: "Inspect or end the shell sessions that execute's shell_session creates. action list: every session; show: one session's cwd and exported variable names (not values); reset: back to the server's default cwd and environment; close: forget it.",
    effect: Effect::Destructive,
    input_schema,
    output_schema,
    file_params: &[],
    starts_jobs: false,
    run,
};

fn input_schema(_: Revision) -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["list", "show", "reset", "close"], "description": "What to do."},
            "session": {"type": "string", "description": "The session's name (all actions but list)."}
        },
        "required": ["action"]
    })
}

fn output_schema(_: Revision) -> Value {
    let session = json!({
        "type": "object",
        "properties": {
            "session": {"type": "string"},
            "cwd": {"type": "string"},
            "variables": {},
            "busy": {"type": "boolean"},
            "idle_seconds": {"type": "number"}
        },
        "required": ["session"]
    });
    json!({
        "type": "object",
        "properties": {
            "sessions": {"type": "array", "items": session},
            "session": {"type": "string"},
            "cwd": {"type": "string"},
            "variables": {"type": "array", "items": {"type": "string"}},
            "busy": {"type": "boolean"},
            "idle_seconds": {"type": "number"},
            "reset": {"type": "boolean"},
            "closed": {"type": "boolean"}
        }
    })
}

/// One session in `list` (`variables` a count) or `show` (names).
#[derive(Serialize)]
struct Entry<V: Serialize> {
    session: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    cwd: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    variables: Option<V>,
    busy: bool,
    idle_seconds: u64,
}

fn entry<V: Serialize>(
    call: &Call,
    s: Shown,
    variables: impl FnOnce(Vec<String>) -> V,
) -> Entry<V> {
    Entry {
        busy: call.host.jobs().shell_session_busy(&s.name),
        session: s.name,
        cwd: s.cwd.map(|c| c.to_string_lossy().into_owned()),
        variables: s.variables.map(variables),
        idle_seconds: s.idle.as_secs(),
    }
}

#[derive(Serialize)]
struct Listing {
    sessions: Vec<Entry<usize>>,
}

#[derive(Serialize)]
struct Done {
    session: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    reset: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    closed: Option<bool>,
}

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(async move { shell_sessions(call, a) })
}

fn shell_sessions(call: &Call, a: &Args) -> ToolOutcome {
    let sessions = call.host.jobs().shell_sessions();
    let action = args::opt_str(a, "action")?;
    let name = || -> Result<String, ToolError> {
        match args::opt_str(a, "session")? {
            Some(n) if !n.is_empty() => Ok(n.to_owned()),
            _ => Err(ToolError::invalid(
                "\"session\" is required for this action",
            )),
        }
    };
    match action {
        Some("list") => {
            let list = sessions
                .list()
                .into_iter()
                .map(|s| entry(call, s, |v| v.len()))
                .collect();
            Ok(Payload::object(Listing { sessions: list }))
        }
        Some("show") => {
            let name = name()?;
            let shown = sessions
                .show(&name)
                .ok_or(ToolError::UnknownSession(name))?;
            Ok(Payload::object(entry(call, shown, |v| v)))
        }
        Some("reset") => {
            let name = name()?;
            if !sessions.reset(&name) {
                return Err(ToolError::UnknownSession(name).into());
            }
            Ok(Payload::object(Done {
                session: name,
                reset: Some(true),
                closed: None,
            }))
        }
        Some("close") => {
            let name = name()?;
            if !sessions.close(&name) {
                return Err(ToolError::UnknownSession(name).into());
            }
            Ok(Payload::object(Done {
                session: name,
                reset: None,
                closed: Some(true),
            }))
        }
        _ => Err(ToolError::invalid("\"action\" must be one of list, show, reset, close").into()),
    }
}
