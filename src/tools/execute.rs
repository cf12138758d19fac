//! `execute`: run `$SHELL -c command` as a job (SPEC §4.2).
//!
//! Input: `command` (required, not blank), `cwd`, `env` (object of strings),
//! `stdin` (written at once), `close_stdin`, `nowait`, `capture` (§5.2).
//! - blocking (default): waits until the job is terminal and delivers its
//!   result (which removes it). Cancelling tears the job down (TERM, grace,
//!   KILL, reaped, removed): the caller never learnt its id.
//! - `nowait`: `{job_id, state:"running"}` at once.
//! - a start failure is a terminal `error` result at once, job removed.
//! - a stdin write failure (other than cancellation) returns
//!   `{job_id, state, stdin_error}` and keeps the job.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use init::{Pid, Program, Signal, SpawnSpec, Step};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;

use super::args::{self, Args, invalid};
use super::{Awaited, CallCtx, Fail, Outcome, await_terminal};
use crate::capture::CapturePolicy;
use crate::jobs::{Claim, Job, JobId, JobState, StdinSlot, result, runner};
use crate::server::App;

struct Request {
    command: String,
    cwd: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
    stdin: Option<String>,
    close_stdin: bool,
    nowait: bool,
    capture: CapturePolicy,
}

fn parse(a: &Args) -> Result<Request, String> {
    let command = match a.get("command") {
        None | Some(Value::Null) => return Err("\"command\" is required".into()),
        Some(Value::String(s)) if s.trim().is_empty() => {
            return Err("\"command\" is required".into());
        }
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(invalid("\"command\" must be a string")),
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
                Value::String(_) => Err(invalid(format!(
                    "env name {k:?} is not a valid variable name"
                ))),
                _ => Err(invalid(format!("env value of {k:?} must be a string"))),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid("\"env\" must be an object of strings")),
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
        capture: CapturePolicy::from_json(a.get("capture")).map_err(invalid)?,
    })
}

/// Runs the tool.
pub async fn run(ctx: &CallCtx<'_>, a: &Args) -> Outcome {
    let req = parse(a)?;
    if req.command.contains('\0') {
        return Err(Fail::Message(invalid(
            "\"command\" must not contain NUL bytes",
        )));
    }
    let app = ctx.app;
    let jobs = &app.jobs;
    let id = jobs.next_id();
    let spec = SpawnSpec {
        program: Program::Shell(req.command),
        cwd: req.cwd,
        env: req.env,
    };

    let (pid, stdin) = match start(app, id, &spec, req.capture.clone()) {
        Ok(started) => started,
        Err(error) => {
            tracing::info!(job = %id, %error, "job failed to start");
            let job = Job {
                id,
                pgid: None,
                state: JobState::FailedToStart { error },
                stdout: jobs.window(),
                stderr: jobs.window(),
                capture: req.capture,
                stdin: StdinSlot::default(),
                removed: CancellationToken::new(),
            };
            return Ok(result::delivered(&job));
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
        let written = tokio::select! {
            r = write => Some(r),
            () = ctx.cancel.cancelled() => None,
        };
        match written {
            None => {
                drop(slot);
                if !ctx.shutdown.is_cancelled() {
                    teardown(app, id, pid).await;
                }
                return Err(Fail::Cancelled);
            }
            Some(Err(e)) => {
                *slot = None;
                let state = jobs.with(id, |j| j.state.name()).unwrap_or("running");
                let msg = crate::tools::input::write_error_text(&e);
                return Ok(json!({"job_id": id.to_string(), "state": state, "stdin_error": msg}));
            }
            Some(Ok(())) => {}
        }
    }
    if req.close_stdin {
        *stdin.lock().await = None;
    }
    if req.nowait {
        return Ok(json!({"job_id": id.to_string(), "state": "running"}));
    }

    ctx.progress.phase("command still running");
    match await_terminal(jobs, id, None, ctx.cancel).await {
        Err(Fail::Cancelled) => {
            // At shutdown the server tears every job down itself, after
            // answering; a plain cancel has to do it here.
            if !ctx.shutdown.is_cancelled() {
                teardown(app, id, pid).await;
            }
            Err(Fail::Cancelled)
        }
        Err(other) => Err(other),
        Ok(Awaited::Terminal | Awaited::Timeout) => match jobs.claim(id) {
            Claim::Delivered(job) => Ok(result::delivered(&job)),
            Claim::Running | Claim::Unknown => Err(delivered_elsewhere(id)),
        },
        Ok(Awaited::Gone) => Err(delivered_elsewhere(id)),
    }
}

fn delivered_elsewhere(id: JobId) -> Fail {
    Fail::Message(format!("job \"{id}\" was delivered to another request"))
}

/// Spawns the job, puts it in the table and starts its runner.
fn start(
    app: &Arc<App>,
    id: JobId,
    spec: &SpawnSpec,
    capture: CapturePolicy,
) -> Result<(Pid, StdinSlot), String> {
    let spawned = app.init.spawn(spec).map_err(|e| e.to_string())?;
    let pid = spawned.pid;
    let pipes = (|| -> std::io::Result<_> {
        Ok((
            pipe::Sender::from_owned_fd(spawned.stdin)?,
            pipe::Receiver::from_owned_fd(spawned.stdout)?,
            pipe::Receiver::from_owned_fd(spawned.stderr)?,
        ))
    })();
    let (stdin, stdout, stderr) = match pipes {
        Ok(p) => p,
        Err(e) => {
            // Cannot happen for fresh pipes; do not leave the child behind.
            let _ = init::signal_group(pid, init::Signal::KILL);
            return Err(format!("setting up pipes: {e}"));
        }
    };
    let removed = CancellationToken::new();
    let stdin: StdinSlot = Arc::new(tokio::sync::Mutex::new(Some(stdin)));
    app.jobs.insert(Job {
        id,
        pgid: Some(pid),
        state: JobState::Running { pid },
        stdout: app.jobs.window(),
        stderr: app.jobs.window(),
        capture,
        stdin: Arc::clone(&stdin),
        removed: removed.clone(),
    });
    let io = runner::Io {
        stdout,
        stderr,
        exit: spawned.exit,
    };
    tokio::spawn(runner::run(Arc::clone(&app.jobs), id, io, removed));
    tracing::debug!(job = %id, pid = pid.0, "job started");
    Ok((pid, stdin))
}

/// Tears a job down for a cancelled `execute`: TERM its group, give it the
/// shutdown grace, KILL what is left, wait for the reaper, remove it.
pub async fn teardown(app: &Arc<App>, id: JobId, pgid: Pid) {
    let steps = [
        Step::new(Signal::TERM, app.config.shutdown_grace),
        Step::new(Signal::KILL, std::time::Duration::from_secs(1)),
    ];
    let _ = app.init.escalate(pgid, &steps, |_| {}).await;
    app.jobs.remove(id);
    tracing::info!(job = %id, "cancelled execute: job torn down");
}
