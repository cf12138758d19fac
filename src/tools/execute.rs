//! `execute`: run `$SHELL -c command` as a job (SPEC §4.2).
//!
//! Input: `command` (required, not blank), `cwd`, `env` (object of strings),
//! `stdin` (written at once), `close_stdin`, `nowait`, `capture` (§5.2).
//! - blocking (default): waits until the job is terminal and delivers its
//!   result (which removes it). Cancelling tears the job down (TERM, grace,
//!   KILL, reaped, removed): the caller never learnt its id.
//! - `nowait`: `{job_id, state:"running"}` at once.
//! - a start failure is a terminal `error` result at once; the job never
//!   enters the table.
//! - a stdin write failure (other than cancellation) returns
//!   `{job_id, state, stdin_error}` and keeps the job.

use std::ffi::OsString;
use std::path::PathBuf;

use init::{Program, SpawnSpec};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use super::schema;
use super::{Args, Call, Effect, Fail, Outcome, Running, Tool, ToolError, args, cancellable};
use crate::capture::CapturePolicy;
use crate::jobs::result::{JobResult, Status};
use crate::jobs::{Awaited, Claim, JobId, StartFailed, Started};
use crate::protocol::result::Payload;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "execute",
    title: "Run a shell command",
    description: "Run a shell command ($SHELL -c, /bin/sh by default) as a job. By default blocks until it ends and returns its exit code and output (stdout on success, stderr on error); with nowait returns the job id at once for wait/status/output/input/kill. stdin stays open unless close_stdin is true.",
    effect: Effect::Destructive,
    input_schema: || {
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "Shell command line (must not be blank)."},
                "cwd": {"type": "string", "description": "Working directory (default: the server's)."},
                "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Variables layered over the server's environment."},
                "stdin": {"type": "string", "description": "Written to the job's stdin at once."},
                "close_stdin": {"type": "boolean", "description": "Close stdin after writing (default false: stays open for input)."},
                "nowait": {"type": "boolean", "description": "Return {job_id, state:\"running\"} at once."},
                "capture": {
                    "type": "object",
                    "description": "What the terminal result carries: on_success / on_error, each \"stdout\", \"stderr\", \"all\", \"none\" or {stdout, stderr} stream specs. Default: stdout on success, stderr on error.",
                    "properties": {"on_success": schema::capture_side(), "on_error": schema::capture_side()}
                }
            },
            "required": ["command"]
        })
    },
    output_schema: schema::job_result_schema,
    starts_jobs: true,
    run,
};

/// `{job_id, state, stdin_error}`: the job runs on, its stdin is closed.
#[derive(Serialize)]
struct StdinFailed {
    job_id: JobId,
    state: &'static str,
    stdin_error: String,
}

struct Request {
    command: String,
    cwd: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
    stdin: Option<String>,
    close_stdin: bool,
    nowait: bool,
    capture: CapturePolicy,
}

fn parse(a: &Args) -> Result<Request, ToolError> {
    let command = match a.get("command") {
        None | Some(Value::Null) => return Err(ToolError::CommandRequired),
        Some(Value::String(s)) if s.trim().is_empty() => return Err(ToolError::CommandRequired),
        Some(Value::String(s)) if s.contains('\0') => {
            return Err(ToolError::invalid("\"command\" must not contain NUL bytes"));
        }
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(ToolError::invalid("\"command\" must be a string")),
    };
    let env = match a.get("env") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s)
                    if !k.is_empty()
                        && !k.contains('=')
                        && !k.contains('\0')
                        && !s.contains('\0') =>
                {
                    Ok((OsString::from(k), OsString::from(s)))
                }
                Value::String(_) => Err(ToolError::invalid(format!(
                    "env name {k:?} is not a valid variable name"
                ))),
                _ => Err(ToolError::invalid(format!(
                    "env value of {k:?} must be a string"
                ))),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(ToolError::invalid("\"env\" must be an object of strings")),
    };
    Ok(Request {
        command,
        cwd: args::opt_str(a, "cwd")?
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        env,
        stdin: args::opt_str(a, "stdin")?.map(str::to_owned),
        close_stdin: args::opt_bool(a, "close_stdin")?,
        nowait: args::opt_bool(a, "nowait")?,
        capture: CapturePolicy::from_json(a.get("capture")).map_err(ToolError::invalid)?,
    })
}

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(execute(call, a))
}

async fn execute(call: &Call, a: &Args) -> Outcome {
    let req = parse(a)?;
    let jobs = &call.app.jobs;
    let spec = SpawnSpec {
        program: Program::Shell(req.command),
        cwd: req.cwd.into(),
        env: req.env,
    };
    let Started { id, stdin } = match jobs.start(&spec, req.capture.clone()) {
        Ok(started) => started,
        Err(StartFailed { id, error }) => {
            return Ok(Payload::object(JobResult::start_failed(
                id,
                error,
                &req.capture,
            )));
        }
    };

    if let Some(data) = req.stdin.as_deref().filter(|d| !d.is_empty()) {
        let mut slot = stdin.lock().await;
        let write = async {
            match slot.as_mut() {
                Some(tx) => tx.write_all(data.as_bytes()).await,
                None => Ok(()),
            }
        };
        match cancellable(&call.cancel, write).await {
            Err(cancelled) => {
                drop(slot);
                return Err(abandon(call, id, cancelled).await);
            }
            Ok(Err(e)) => {
                *slot = None;
                let state = jobs
                    .table()
                    .with(id, |j| j.state.name())
                    .unwrap_or("running");
                return Ok(Payload::object(StdinFailed {
                    job_id: id,
                    state,
                    stdin_error: super::input::write_error(&e).to_string(),
                }));
            }
            Ok(Ok(())) => {}
        }
    }
    if req.close_stdin {
        *stdin.lock().await = None;
    }
    if req.nowait {
        return Ok(Payload::object(Status::running(id)));
    }

    call.phase.set("command still running");
    match cancellable(&call.cancel, jobs.await_terminal(id, None)).await {
        Err(cancelled) => Err(abandon(call, id, cancelled).await),
        Ok(Awaited::Terminal | Awaited::Timeout) => match jobs.table().claim(id) {
            Claim::Delivered(job) => Ok(Payload::object(JobResult::delivered(&job))),
            Claim::Running | Claim::Unknown => Err(ToolError::DeliveredElsewhere(id).into()),
        },
        Ok(Awaited::Gone) => Err(ToolError::DeliveredElsewhere(id).into()),
    }
}

/// A cancelled blocking `execute`: its caller never learns the job id, so
/// the job is torn down — here on a plain cancel; at shutdown the server
/// tears every job down itself, after answering.
async fn abandon(call: &Call, id: JobId, cancelled: Fail) -> Fail {
    if !call.shutdown.is_cancelled() {
        call.app.jobs.teardown(id).await;
    }
    cancelled
}
