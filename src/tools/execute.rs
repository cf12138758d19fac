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
use std::time::Duration;

use init::{Program, SpawnSpec};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use super::schema;
use super::{Args, Call, Effect, Fail, Outcome, Running, Tool, ToolError, args, cancellable};
use crate::capture::CapturePolicy;
use crate::config::Config;
use crate::jobs::result::{JobResult, Status};
use crate::jobs::state::JobPhase;
use crate::jobs::{Awaited, Claim, JobId, Pending, Submitted};
use crate::policy::cwd::Refusal;
use crate::policy::identity::JobPolicy;
use crate::protocol::result::Payload;
use crate::protocol::version::Revision;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "execute",
    title: "Run a shell command",
    description: "Run a shell command ($SHELL -c, /bin/sh by default) as a job. By default blocks until it ends and returns its exit code and output (stdout on success, stderr on error); with nowait returns the job id at once for wait/status/output/input/kill. stdin stays open unless close_stdin is true.",
    effect: Effect::Destructive,
    input_schema,
    output_schema: schema::job_result_schema,
    starts_jobs: true,
    run,
};

fn input_schema(rev: Revision) -> Value {
    let mut schema = json!({
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
    });
    if rev.has_part_two() {
        // Flat: `command` and `argv` are both optional; the tool enforces
        // that exactly one is given.
        schema["required"] = json!([]);
        schema["properties"]["command"]["description"] =
            json!("Shell command line, run as $SHELL -c (give this or argv).");
        let extra = json!({
            "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "Program and arguments, run without a shell (PATH lookup); give this or command."},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "The job's deadline in seconds, from when it starts running: then TERM, and KILL after the grace (result timed_out:true)."},
            "yield_after": {"type": "number", "minimum": 0, "description": "Seconds after which a blocking call returns the still running job ({state:\"running\", yielded:true}; collect it with wait). 0 = never. Default MCP_EXEC_YIELD_AFTER (50)."},
            "label": {"type": "string", "maxLength": 200, "description": "Shown with the job in status, list_jobs and results."},
            "max_output_bytes": {"type": "integer", "minimum": 1, "description": "This job's retained window per stream (default MCP_EXEC_MAX_OUTPUT_BYTES)."},
            "idle_timeout": {"type": "number", "exclusiveMinimum": 0, "description": "End the job when it writes nothing for this many seconds (result cause:\"idle_timeout\")."},
            "shell_session": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$", "description": "Run in this shell session: start in its working directory with its exported variables (cwd/env still override), after its earlier jobs; a command that exits on its own hands its final cwd and exports to the next. Created by its first job; see shell_sessions."},
            "user": {"type": "string", "description": "Run as this user: \"name\" (groups from /etc/passwd and /etc/group), \"uid\" or \"uid:gid\". Needs the server to run as root."},
            "limits": {
                "type": "object",
                "description": "Resource limits of the job's processes; each at most the server's MCP_EXEC_JOB_LIMITS, whose values are the defaults.",
                "properties": {
                    "address_space_bytes": {"type": "integer", "minimum": 1, "description": "RLIMIT_AS: virtual address space (not resident memory)."},
                    "processes": {"type": "integer", "minimum": 1, "description": "RLIMIT_NPROC: processes of the job's user (needs user; not enforced for root)."},
                    "cpu_seconds": {"type": "integer", "minimum": 1, "description": "RLIMIT_CPU: CPU seconds per process (result cause:\"cpu_limit\")."},
                    "file_size_bytes": {"type": "integer", "minimum": 1, "description": "RLIMIT_FSIZE: largest file it may write (result cause:\"file_size_limit\")."},
                    "open_files": {"type": "integer", "minimum": 1, "description": "RLIMIT_NOFILE: open descriptors."}
                }
            }
        });
        if let (Some(props), Value::Object(extra)) = (schema["properties"].as_object_mut(), extra) {
            props.extend(extra);
        }
    }
    schema
}

/// `{job_id, state, stdin_error}`: the job runs on, its stdin is closed.
#[derive(Serialize)]
struct StdinFailed {
    #[serde(flatten)]
    status: Status,
    stdin_error: String,
}

/// A running job returned before it ended: `nowait`, or a blocking call that
/// yielded (`yielded: true`, SPEC §12.2).
#[derive(Serialize)]
struct Started {
    #[serde(flatten)]
    status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    yielded: Option<bool>,
}

/// The longest `label` (characters).
const MAX_LABEL: usize = 200;

/// Parsed `execute` arguments (also the body of `POST /exec`, SPEC §11.2).
pub(crate) struct Request {
    pub(crate) program: Program,
    pub(crate) cwd: Option<String>,
    pub(crate) env: Vec<(OsString, OsString)>,
    pub(crate) stdin: Option<String>,
    pub(crate) close_stdin: bool,
    pub(crate) nowait: bool,
    pub(crate) capture: CapturePolicy,
    pub(crate) timeout: Option<Duration>,
    pub(crate) yield_after: Option<Duration>,
    pub(crate) label: Option<String>,
    pub(crate) max_output_bytes: usize,
    pub(crate) idle_timeout: Option<Duration>,
    /// The shell session to run in (SPEC §17).
    pub(crate) shell_session: Option<String>,
    /// `user`, `limits` (and the server's default limits), SPEC §16.
    pub(crate) setup: init::Setup,
}

fn command(a: &Args, part_two: bool) -> Result<Program, ToolError> {
    let command = match a.get("command") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
        Some(Value::String(s)) if s.contains('\0') => {
            return Err(ToolError::invalid("\"command\" must not contain NUL bytes"));
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ToolError::invalid("\"command\" must be a string")),
    };
    let argv = match a.get("argv") {
        _ if !part_two => None,
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) if !items.is_empty() => Some(
            items
                .iter()
                .map(|v| match v {
                    Value::String(s) if !s.contains('\0') => Ok(OsString::from(s)),
                    _ => Err(ToolError::invalid(
                        "\"argv\" must be a non-empty array of strings",
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => {
            return Err(ToolError::invalid(
                "\"argv\" must be a non-empty array of strings",
            ));
        }
    };
    match (command, argv) {
        (Some(_), Some(_)) => Err(ToolError::CommandAndArgv),
        (Some(c), None) => Ok(Program::Shell(c)),
        (None, Some(argv)) => Ok(Program::Argv(argv)),
        (None, None) if part_two => Err(ToolError::CommandOrArgvRequired),
        (None, None) => Err(ToolError::CommandRequired),
    }
}

/// A positive number of seconds (`<= 0` is refused with `"<key>" must be > 0`).
fn positive_seconds(a: &Args, key: &str) -> Result<Option<Duration>, ToolError> {
    match args::opt_seconds(a, key)? {
        None => Ok(None),
        Some(s) if s > 0.0 => Ok(Some(Duration::from_secs_f64(s.min(1e9)))),
        Some(_) => Err(ToolError::invalid(format!("\"{key}\" must be > 0"))),
    }
}

/// Parses `execute`'s arguments as a session of `revision` sees them (the
/// tool passes its session's; `POST /exec` the latest). `jobs` says what
/// `user` and `limits` may ask for; its default limits apply to every job,
/// Part I sessions' too.
pub(crate) fn parse(
    a: &Args,
    config: &Config,
    jobs: &JobPolicy,
    revision: Revision,
) -> Result<Request, ToolError> {
    let part_two = revision.has_part_two();
    let program = command(a, part_two)?;
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
    let mut req = Request {
        program,
        cwd: args::opt_str(a, "cwd")?
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        env,
        stdin: args::opt_str(a, "stdin")?.map(str::to_owned),
        close_stdin: args::opt_bool(a, "close_stdin")?,
        nowait: args::opt_bool(a, "nowait")?,
        capture: CapturePolicy::from_json(a.get("capture")).map_err(ToolError::invalid)?,
        timeout: config.job_timeout,
        yield_after: config.yield_after,
        label: None,
        max_output_bytes: config.max_output_bytes,
        idle_timeout: None,
        shell_session: None,
        setup: jobs.setup(None, None).map_err(ToolError::invalid)?,
    };
    if !part_two {
        // A 2024-11-05 session sees exactly Part I: its inputs are ignored.
        return Ok(req);
    }
    if let Some(t) = positive_seconds(a, "timeout")? {
        req.timeout = Some(t);
    }
    if let Some(y) = args::opt_seconds(a, "yield_after")? {
        req.yield_after = (y > 0.0).then(|| Duration::from_secs_f64(y.min(1e9)));
    }
    req.idle_timeout = positive_seconds(a, "idle_timeout")?;
    if let Some(name) = args::opt_str(a, "shell_session")? {
        if !crate::jobs::shell_session::valid_name(name) {
            return Err(ToolError::invalid(
                "\"shell_session\" must be 1-64 characters of A-Z a-z 0-9 . _ -",
            ));
        }
        req.shell_session = Some(name.to_owned());
    }
    if let Some(label) = args::opt_str(a, "label")? {
        if label.chars().count() > MAX_LABEL || label.chars().any(char::is_control) {
            return Err(ToolError::invalid(format!(
                "\"label\" must be at most {MAX_LABEL} characters without control characters"
            )));
        }
        req.label = Some(label.to_owned());
    }
    let user = match a.get("user") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(ToolError::invalid("\"user\" must be a string")),
    };
    req.setup = jobs
        .setup(user, a.get("limits"))
        .map_err(ToolError::invalid)?;
    match a.get("max_output_bytes") {
        None | Some(Value::Null) => {}
        Some(v) => {
            let limit = config.max_output_bytes_limit;
            match v.as_u64() {
                Some(n) if n >= 1 && n <= limit as u64 => {
                    req.max_output_bytes = usize::try_from(n).unwrap_or(limit);
                }
                _ => {
                    return Err(ToolError::invalid(format!(
                        "\"max_output_bytes\" must be between 1 and {limit}"
                    )));
                }
            }
        }
    }
    Ok(req)
}

impl Request {
    /// Joins the request's shell session, if it names one (creating it),
    /// as the job's user: its uid when it has a `user` (SPEC §16), else the
    /// server's own (`None`). The uid is the key, so `"nobody"` and
    /// `"65534"` are one owner.
    pub(crate) fn session_use(
        &self,
        jobs: &crate::jobs::Jobs,
    ) -> Result<Option<crate::jobs::ShellSessionUse>, ToolError> {
        let Some(name) = &self.shell_session else {
            return Ok(None);
        };
        let owner = self.setup.user.as_ref().map(|c| c.uid.to_string());
        jobs.shell_sessions()
            .join(name, &owner)
            .map_err(|e| ToolError::invalid(e.to_string()))?;
        Ok(Some(crate::jobs::ShellSessionUse {
            name: name.clone(),
            owner,
            own_cwd: self.cwd.is_some(),
        }))
    }
}

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(execute(call, a))
}

async fn execute(call: &Call, a: &Args) -> Outcome {
    let req = parse(a, &call.app.config, &call.app.job_policy, call.revision)?;
    let jobs = &call.app.jobs;
    let rev = call.revision;
    let cwd = match call.app.cwd.resolve(req.cwd.as_deref()) {
        Ok(cwd) => cwd,
        Err(Refusal::Outside(why)) => return Err(ToolError::CwdRefused(why).into()),
        Err(Refusal::Unusable(why)) => {
            let job = jobs.not_started(req.capture, req.label, why);
            return Ok(Payload::object(JobResult::delivered(&job, &call.view())));
        }
    };
    let session = req.session_use(jobs)?;
    let submitted = jobs
        .submit(crate::jobs::Launch {
            pending: Pending {
                spec: SpawnSpec {
                    program: req.program,
                    cwd,
                    env: req.env,
                    setup: req.setup,
                },
                stdin: req.stdin.filter(|d| !d.is_empty()).map(String::into_bytes),
                close_stdin: req.close_stdin,
                timeout: req.timeout,
                idle_timeout: req.idle_timeout,
                shell_session: session,
            },
            capture: req.capture,
            label: req.label,
            window: req.max_output_bytes,
            owned_by_stream: false,
        })
        .map_err(|full| ToolError::QueueFull {
            running: full.running,
            queued: full.queued,
        })?;
    let id = match submitted {
        Submitted::Failed { id } => return deliver(call, id),
        Submitted::Queued { id } => id,
        Submitted::Started {
            id,
            stdin,
            stdin_data,
            close_stdin,
        } => {
            if let Some(data) = stdin_data {
                let mut slot = stdin.lock().await;
                let write = async {
                    match slot.as_mut() {
                        Some(tx) => tx.write_all(&data).await,
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
                        let status = jobs
                            .table()
                            .with(id, |j| Status::of(j, rev))
                            .unwrap_or_else(|| {
                                Status::new(id, &JobPhase::Running, None, None, rev)
                            });
                        return Ok(Payload::object(StdinFailed {
                            status,
                            stdin_error: super::input::write_error(&e).to_string(),
                        }));
                    }
                    Ok(Ok(())) => {}
                }
            }
            if close_stdin {
                *stdin.lock().await = None;
            }
            id
        }
    };
    if req.nowait {
        return running(call, id, None);
    }

    // From 2025-03-26 on the message names the job, so a client that lost
    // its HTTP stream can find it (SPEC §11); Part I keeps its fixed text.
    if rev.has_part_two() {
        call.phase.set(format!("{id} still running"));
    } else {
        call.phase.set("command still running");
    }
    let yield_at = req.yield_after.map(|y| Instant::now() + y);
    match cancellable(&call.cancel, jobs.await_terminal(id, yield_at)).await {
        Err(cancelled) => Err(abandon(call, id, cancelled).await),
        Ok(Awaited::Terminal) => deliver(call, id),
        Ok(Awaited::Timeout) => running(call, id, Some(true).filter(|_| rev.has_part_two())),
        Ok(Awaited::Gone) => Err(ToolError::DeliveredElsewhere(id).into()),
    }
}

/// Claims and delivers a terminal job's result.
fn deliver(call: &Call, id: JobId) -> Outcome {
    match call.app.jobs.table().claim(id) {
        Claim::Delivered(job) => {
            let result = JobResult::delivered(&job, &call.view());
            let bytes = result.data_bytes();
            Ok(Payload::object(result).sized(bytes))
        }
        Claim::Running | Claim::Unknown => Err(ToolError::DeliveredElsewhere(id).into()),
    }
}

/// `{job_id, state, label?, yielded?}` of a job that runs on.
fn running(call: &Call, id: JobId, yielded: Option<bool>) -> Outcome {
    let rev = call.revision;
    let status = call
        .app
        .jobs
        .table()
        .with(id, |j| Status::of(j, rev))
        .ok_or(ToolError::DeliveredElsewhere(id))?;
    Ok(Payload::object(Started { status, yielded }))
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
