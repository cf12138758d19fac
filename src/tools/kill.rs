//! `kill`: signal a job's process group and verify death (SPEC §4.7).
//!
//! Input: `job_id`, `signal` (`"TERM"`, `"SIGKILL"`, `"kill"`, `"9"`, or
//! `"ASSURED"`; default TERM), `timeout` (seconds to wait for death after
//! each signal; default 5; 0 = don't wait).
//!
//! "Dead" is observed: the direct child reaped **and** its group empty.
//! Results:
//! - already fully gone before any signal:
//!   `{job_id, terminated:true, already_terminated:true, result}`, removed;
//! - died after the signal:
//!   `{job_id, terminated:true, signal_sent, escalated?, result}`, removed;
//! - survived: `{job_id, terminated:false, signal_sent, escalated?, state,
//!   detail}`, kept; `detail` names the survivors with /proc diagnostics.
//!
//! If a concurrent `wait` claims the result while we wait for death, the
//! answer says `terminated:true` with `result_delivered_elsewhere:true`
//! instead of a second copy of the result (exactly-once delivery).

use std::time::Duration;

use init::{Phase, Pid, Signal, Step, Survivor};
use serde_json::{Map, Value, json};

use super::args::{self, Args, unknown_job};
use super::{CallCtx, Fail, Outcome, await_terminal};
use crate::jobs::{Claim, JobId, result};

/// Default seconds to wait for death after a signal.
const DEFAULT_TIMEOUT: f64 = 5.0;

enum Plan {
    One(Signal),
    Assured,
}

fn parse_signal(a: &Args) -> Result<Plan, String> {
    let raw = match a.get("signal") {
        None | Some(Value::Null) => return Ok(Plan::One(Signal::TERM)),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(Plan::One(Signal::TERM)),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err(args::invalid("\"signal\" must be a string")),
    };
    if raw.trim().eq_ignore_ascii_case("ASSURED") {
        return Ok(Plan::Assured);
    }
    Signal::parse(&raw).map(Plan::One).map_err(|e| match e {
        init::ParseSignalError::InvalidNumber(n) => format!("invalid signal number {n}"),
        init::ParseSignalError::Unknown(s) => {
            format!(
                "unknown signal \"{s}\" (use e.g. \"TERM\", \"KILL\", \"ASSURED\", or a number)"
            )
        }
    })
}

/// Runs the tool.
pub async fn run(ctx: &CallCtx<'_>, a: &Args) -> Outcome {
    let id = args::job_id(a)?;
    let plan = parse_signal(a)?;
    let timeout = args::opt_seconds(a, "timeout")?
        .unwrap_or(DEFAULT_TIMEOUT)
        .max(0.0);
    let jobs = &ctx.app.jobs;

    let (pgid, terminal) = jobs
        .with(id, |j| (j.pgid, j.state.is_terminal()))
        .ok_or_else(|| unknown_job(id))?;
    let Some(pgid) = pgid else {
        // Never started, so nothing to signal.
        return if terminal {
            already_terminated(ctx, id).await
        } else {
            Err(Fail::Message(unknown_job(id)))
        };
    };

    // Finite and >= 0 (opt_seconds); capped at a day like `deadline_in`.
    let t = Duration::from_secs_f64(timeout.min(86_400.0));
    let steps = match plan {
        Plan::One(sig) => vec![Step::new(sig, t)],
        Plan::Assured => vec![Step::new(Signal::TERM, t), Step::new(Signal::KILL, t)],
    };
    let on_phase = |phase| {
        ctx.progress.phase(match phase {
            Phase::Exiting => "waiting for the process to exit",
            Phase::Draining => "waiting for the process group to drain",
        });
    };
    let outcome = tokio::select! {
        r = ctx.app.init.escalate(pgid, &steps, on_phase) => r.map_err(|e| Fail::Message(e.to_string()))?,
        () = ctx.cancel.cancelled() => return Err(Fail::Cancelled),
    };
    if outcome.already_dead {
        return already_terminated(ctx, id).await;
    }
    let sent = outcome.last_signal.unwrap_or(steps[0].signal);

    let mut out = Map::new();
    out.insert("job_id".into(), json!(id.to_string()));
    out.insert("terminated".into(), json!(outcome.dead));
    out.insert("signal_sent".into(), json!(sent.as_raw()));
    if outcome.escalated {
        out.insert("escalated".into(), json!(true));
    }
    if outcome.dead {
        // The reaper has the exit; the job is terminal in the table as soon
        // as its runner has drained the pipes.
        await_terminal(jobs, id, None, ctx.cancel).await?;
        match jobs.claim(id) {
            Claim::Delivered(job) => {
                out.insert("result".into(), result::delivered(&job));
            }
            Claim::Unknown => {
                out.insert("result_delivered_elsewhere".into(), json!(true));
            }
            Claim::Running => {
                // Cannot happen: dead implies terminal; report what we see.
                out.insert("terminated".into(), json!(false));
                out.insert("state".into(), json!("running"));
            }
        }
        return Ok(Value::Object(out));
    }
    let state = jobs.with(id, |j| j.state.name()).unwrap_or("running");
    let child_running = state == "running";
    let members = outcome
        .survived
        .last()
        .map(|s| s.members.as_slice())
        .unwrap_or_default();
    out.insert("state".into(), json!(state));
    out.insert(
        "detail".into(),
        json!(detail(pgid, sent, child_running, members)),
    );
    Ok(Value::Object(out))
}

/// The answer for a job that was gone before any signal: its result, once
/// the runner has made it terminal.
async fn already_terminated(ctx: &CallCtx<'_>, id: JobId) -> Outcome {
    let jobs = &ctx.app.jobs;
    await_terminal(jobs, id, None, ctx.cancel).await?;
    match jobs.claim(id) {
        Claim::Delivered(job) => Ok(json!({
            "job_id": id.to_string(),
            "terminated": true,
            "already_terminated": true,
            "result": result::delivered(&job),
        })),
        _ => Err(Fail::Message(unknown_job(id))),
    }
}

fn detail(pgid: Pid, sig: Signal, child_running: bool, members: &[Survivor]) -> String {
    let list = if members.is_empty() {
        String::from("no member could be read from /proc")
    } else {
        members
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    };
    if child_running {
        format!(
            "process {pgid} is still running after {sig}; it may catch or ignore the signal; \
             retry with KILL/9 or ASSURED. Group members: {list}"
        )
    } else {
        format!(
            "the process exited, but other members of its process group {pgid} survive {sig}: {list}. \
             Retry with KILL/9 or ASSURED"
        )
    }
}
