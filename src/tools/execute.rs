//! `execute`: run `$SHELL -c command` as a job.
//!
//! Input: `command` (required, not blank), `cwd`, `env` (object of strings),
//! `stdin` (written at once), `close_stdin`, `nowait`, `capture` (a capture policy).
//! - blocking (default): waits until the job is terminal and delivers its
//!   result (which removes it). Cancelling tears the job down (TERM, grace,
//!   KILL, reaped, removed): the caller never learnt its id.
//! - `nowait`: `{job_id, state:"running"}` at once.
//! - a start failure is a terminal `error` result at once; the job never
//!   enters the table.
//! - a stdin write failure (other than cancellation) returns
//!   `{job_id, state, stdin_error}` and keeps the job.
//!
//! [`parse`] is the JSON reader of `execute`, `POST /exec` and Tasks: it
//! checks each field's JSON type and what a revision sees, fills a
//! `jobs::LaunchRequest` and validates it with the rules every front-end
//! shares (envd and sandboxd fill the same request from their proto
//! fields).

use std::ffi::OsString;
use std::time::Duration;

use init::Program;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::schema;
use super::{Args, Call, Effect, Fail, Running, Tool, ToolError, ToolOutcome, args, cancellable};
use crate::capture::CapturePolicy;
use crate::config::Config;
use crate::jobs::result::{JobResult, JobStatus};
use crate::jobs::{
    Job, JobId, JobPhase, Launch, LaunchError, LaunchRequest, Launched, RequestError, StdinError,
    TerminalSize, WaitEntry,
};
use crate::policy::identity::{JobLimits, JobPolicy};
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
    file_params: &[],
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
    if rev.has_terminals() {
        let extra = json!({
            "tty": {"type": "boolean", "description": "Run on a pseudo-terminal (default false: pipes): the job is a session leader with the terminal as its stdin, stdout, stderr and controlling terminal, TERM=xterm-256color unless env sets it. Its output is one stream, stdout (raw bytes, as the terminal shows them); screen shows the rendered screen; input takes keys and resize; close sends C-d."},
            "cols": {"type": "integer", "minimum": 1, "maximum": crate::jobs::MAX_DIMENSION, "description": "The terminal's columns (tty only; default 120)."},
            "rows": {"type": "integer", "minimum": 1, "maximum": crate::jobs::MAX_DIMENSION, "description": "The terminal's rows (tty only; default 40)."},
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
    status: JobStatus,
    stdin_error: String,
}

/// A running job returned before it ended: `nowait`, or a blocking call that
/// yielded (`yielded: true`).
#[derive(Serialize)]
struct Started {
    #[serde(flatten)]
    status: JobStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    yielded: Option<bool>,
}

/// `tty`, `cols`, `rows`: the terminal a job asks for, if any.
/// `cols`/`rows` without `tty: true` are refused rather than ignored; their
/// range is the request's rule ([`LaunchRequest::validate`]).
fn terminal(a: &Args) -> Result<Option<TerminalSize>, ToolError> {
    let tty = args::opt_bool(a, "tty")?;
    let dim = |key: &str| -> Result<Option<u64>, ToolError> {
        match a.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                ToolError::invalid(format!(
                    "\"{key}\" must be an integer between 1 and {}",
                    crate::jobs::MAX_DIMENSION
                ))
            }),
        }
    };
    let (cols, rows) = (dim("cols")?, dim("rows")?);
    if !tty {
        if cols.is_some() || rows.is_some() {
            return Err(ToolError::invalid(
                "\"cols\" and \"rows\" need \"tty\": true",
            ));
        }
        return Ok(None);
    }
    Ok(Some(TerminalSize { cols, rows }))
}

/// Parsed `execute` arguments (also the body of `POST /exec`):
/// the job to launch, and how this call waits for it.
pub(crate) struct Execute {
    /// The job, owned by its caller.
    pub(crate) launch: Launch,
    /// Answer at once with the job id.
    pub(crate) nowait: bool,
    /// Answer with the running job after this long.
    pub(crate) yield_after: Option<Duration>,
}

/// `command` or (Part II) `argv`: exactly one. A blank `command` counts as
/// absent; NUL bytes are the request's rule.
fn program(a: &Args, part_two: bool) -> Result<Program, ToolError> {
    let command = match a.get("command") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim().is_empty() => None,
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
                    Value::String(s) => Ok(OsString::from(s)),
                    _ => Err(RequestError::Argv.into()),
                })
                .collect::<Result<Vec<_>, ToolError>>()?,
        ),
        Some(_) => return Err(RequestError::Argv.into()),
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

/// `env`: an object of strings (names and values are the request's rule).
fn env(a: &Args) -> Result<Vec<(String, String)>, ToolError> {
    match a.get("env") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(ToolError::invalid(format!(
                    "env value of {k:?} must be a string"
                ))),
            })
            .collect(),
        Some(_) => Err(ToolError::invalid("\"env\" must be an object of strings")),
    }
}

/// Parses `execute`'s arguments as a session of `revision` sees them (the
/// tool passes its session's; `POST /exec` the latest) into a
/// [`LaunchRequest`], and validates it: `jobs` says what `user` and
/// `limits` may ask for; its default limits apply to every job, Part I
/// sessions' too. The JSON reader checks each field's type; the rules on
/// the values are the request's, shared with every other front-end.
pub(crate) fn parse(
    a: &Args,
    config: &Config,
    jobs: &JobPolicy,
    revision: Revision,
) -> Result<Execute, ToolError> {
    let (request, nowait, yield_after) = request(a, config, revision)?;
    Ok(Execute {
        launch: request.validate(config, jobs)?,
        nowait,
        yield_after,
    })
}

/// The JSON half of [`parse`]: the request, `nowait` and `yield_after`.
fn request(
    a: &Args,
    config: &Config,
    revision: Revision,
) -> Result<(LaunchRequest, bool, Option<Duration>), ToolError> {
    let part_two = revision.has_part_two();
    let mut req = LaunchRequest::new(program(a, part_two)?);
    req.env = env(a)?;
    req.cwd = args::opt_str(a, "cwd")?.map(str::to_owned);
    req.stdin = args::opt_str(a, "stdin")?.map(|d| d.as_bytes().to_vec());
    req.close_stdin = args::opt_bool(a, "close_stdin")?;
    req.capture = match a.get("capture") {
        None | Some(Value::Null) => None,
        v => Some(CapturePolicy::from_json(v).map_err(ToolError::invalid)?),
    };
    let nowait = args::opt_bool(a, "nowait")?;
    let mut yield_after = config.yield_after;
    if !part_two {
        // A 2024-11-05 session sees exactly Part I: its inputs are ignored.
        return Ok((req, nowait, yield_after));
    }
    req.timeout = positive_seconds(a, "timeout")?;
    if let Some(y) = args::opt_seconds(a, "yield_after")? {
        yield_after = (y > 0.0).then(|| Duration::from_secs_f64(y.min(1e9)));
    }
    req.idle_timeout = positive_seconds(a, "idle_timeout")?;
    req.shell_session = args::opt_str(a, "shell_session")?.map(str::to_owned);
    req.label = args::opt_str(a, "label")?.map(str::to_owned);
    req.user = match a.get("user") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(ToolError::invalid("\"user\" must be a string")),
    };
    req.limits = match a.get("limits") {
        None | Some(Value::Null) => JobLimits::default(),
        Some(v) => JobLimits::from_json(v, "\"limits\"").map_err(ToolError::invalid)?,
    };
    if revision.has_terminals() {
        req.tty = terminal(a)?;
    }
    req.max_output_bytes = match a.get("max_output_bytes") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or(RequestError::Window {
            limit: config.max_output_bytes_limit,
        })?),
    };
    Ok((req, nowait, yield_after))
}

/// The tool error of a launch refused before it ran (the breaker's
/// refusal is a job result for `execute`, a `503` for `POST /exec`).
pub(crate) fn launch_error(e: LaunchError) -> ToolError {
    match e {
        LaunchError::CwdRefused(why) => ToolError::CwdRefused(why),
        LaunchError::ShellSession(refused) => ToolError::invalid(refused.to_string()),
        LaunchError::QueueFull { running, queued } => ToolError::QueueFull { running, queued },
        LaunchError::BreakerOpen { refusal, .. } => ToolError::BreakerOpen(refusal),
        LaunchError::DeliveredElsewhere(id) => ToolError::DeliveredElsewhere(id),
    }
}

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(execute(call, a))
}

async fn execute(call: &Call, a: &Args) -> ToolOutcome {
    let Execute {
        launch,
        nowait,
        yield_after,
    } = parse(a, call.host.config(), call.host.job_policy(), call.revision)?;
    let jobs = call.host.jobs();
    let rev = call.revision;
    let id = match begin(call, launch).await? {
        Begun::Running(id) => id,
        Begun::Answered(payload) | Begun::StdinFailed(_, payload) => return Ok(payload),
    };
    if nowait {
        return running(call, id, None);
    }

    // From 2025-03-26 on the message names the job, so a client that lost
    // its HTTP stream can find it; Part I keeps its fixed text.
    if rev.has_part_two() {
        call.progress.set(format!("{id} still running"));
    } else {
        call.progress.set("command still running");
    }
    let yield_at = yield_after.map(|y| Instant::now() + y);
    let ids = [id];
    let waited = jobs.wait_any(&ids, yield_at, None, None);
    match cancellable(&call.cancel, waited).await {
        Err(cancelled) => Err(abandon(call, id, cancelled).await),
        Ok(Ok(mut entries)) => match entries.pop() {
            Some(WaitEntry::Delivered(job)) => Ok(rendered(call, &job)),
            Some(WaitEntry::Pending(..)) => {
                running(call, id, Some(true).filter(|_| rev.has_part_two()))
            }
            _ => Err(ToolError::DeliveredElsewhere(id).into()),
        },
        Ok(Err(_)) => Err(ToolError::DeliveredElsewhere(id).into()),
    }
}

/// Where an `execute` job stands once it is launched and its stdin written.
pub(crate) enum Begun {
    /// It runs or waits in the queue.
    Running(JobId),
    /// The call's answer is ready: the job never entered the table (a start
    /// failure, the breaker's refusal).
    Answered(Payload),
    /// Writing its stdin failed: the job runs on with its stdin closed, and
    /// this is `execute`'s answer.
    StdinFailed(JobId, Payload),
}

/// Launches `launch` and writes its stdin (cancellable: a cancel tears the
/// job down). The first half of `execute`, shared with a task-augmented
/// call, which launches the job owned by its task.
pub(crate) async fn begin(call: &Call, launch: Launch) -> Result<Begun, Fail> {
    let jobs = call.host.jobs();
    let launched = match jobs.launch_leaving_stdin(launch) {
        Ok(launched) => launched,
        // The breaker's refusal is the job's start error.
        Err(LaunchError::BreakerOpen { ended, .. }) => {
            return Ok(Begun::Answered(rendered(call, &ended)));
        }
        Err(e) => return Err(launch_error(e).into()),
    };
    match launched {
        Launched::Ended(job) => Ok(Begun::Answered(rendered(call, &job))),
        Launched::Queued { id } => Ok(Begun::Running(id)),
        Launched::Started {
            id,
            stdin,
            close_stdin,
        } => {
            if stdin.is_some() || close_stdin {
                let data = stdin.unwrap_or_default();
                let written = jobs.write_stdin(id, &data, close_stdin);
                match cancellable(&call.cancel, written).await {
                    Err(cancelled) => return Err(abandon(call, id, cancelled).await),
                    Ok(Err(StdinError::Write { error, .. })) => {
                        let fields = call.fields();
                        let mut status = jobs.status(id, fields).unwrap_or_else(|| {
                            JobStatus::new(id, &JobPhase::Running, None, None, fields)
                        });
                        // The answer is `{job_id, state, stdin_error}` however
                        // quickly the job ended: its result (exit code, signal)
                        // stays with the kept job for `wait` to deliver once.
                        status.exit_code = None;
                        status.signal = None;
                        status.signal_number = None;
                        status.start_error = None;
                        let payload = Payload::object(StdinFailed {
                            status,
                            stdin_error: super::input::write_error(&error).to_string(),
                        });
                        return Ok(Begun::StdinFailed(id, payload));
                    }
                    // A job that already ended or closed its stdin needs none.
                    Ok(_) => {}
                }
            }
            Ok(Begun::Running(id))
        }
    }
}

/// The `execute` result of job `id`, which a task owns, rendered for a
/// session of `revision` from the job left in the table: the same on every
/// call (a terminal job no longer changes). `None` while it runs or once
/// it is gone.
pub(crate) fn kept_result(
    host: &dyn super::Host,
    revision: Revision,
    id: JobId,
) -> Option<crate::protocol::result::CallResult> {
    let result = host.jobs().kept_result(id, &host.view(revision))?;
    let bytes = result.data_bytes();
    Some(crate::protocol::result::CallResult::Success {
        payload: Payload::object(result).sized(bytes),
        structured: revision.has_structured_content(),
    })
}

/// A job's result.
///
/// Unlike `wait` and `kill`, a blocking `execute` does not keep the job to
/// put it back should the answer never reach its client: its call detaches
/// (and claims nothing) when the client goes away while it waits, which
/// leaves only the instant between the claim and the send; and keeping
/// every answered job beside its rendered result until it is written would
/// double what a client that does not read makes the server hold (the
/// 500-results test measured 53 → 91 MiB).
fn rendered(call: &Call, job: &Job) -> Payload {
    let result = JobResult::delivered(job, &call.view());
    let bytes = result.data_bytes();
    Payload::object(result).sized(bytes)
}

/// `{job_id, state, label?, yielded?}` of a job that runs on.
fn running(call: &Call, id: JobId, yielded: Option<bool>) -> ToolOutcome {
    let status = call
        .host
        .jobs()
        .status(id, call.fields())
        .ok_or(ToolError::DeliveredElsewhere(id))?;
    Ok(Payload::object(Started { status, yielded }))
}

/// A cancelled blocking `execute`: its caller never learns the job id, so
/// the job is torn down — here on a plain cancel; at shutdown the server
/// tears every job down itself, after answering.
async fn abandon(call: &Call, id: JobId, cancelled: Fail) -> Fail {
    if !call.shutdown.is_cancelled() {
        call.host.jobs().teardown(id).await;
    }
    cancelled
}
