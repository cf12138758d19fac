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

use init::{Pid, Signal};
use serde_json::{Map, Value, json};

use super::args::{self, Args, unknown_job};
use super::{CallCtx, Fail, Outcome, await_death, deadline_in};
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
    let group_alive = pgid.is_some_and(init::group_exists);
    if terminal && !group_alive {
        return match jobs.claim(id) {
            Claim::Delivered(job) => Ok(json!({
                "job_id": id.to_string(),
                "terminated": true,
                "already_terminated": true,
                "result": result::delivered(&job),
            })),
            _ => Err(Fail::Message(unknown_job(id))),
        };
    }
    let Some(pgid) = pgid else {
        return Err(Fail::Message(unknown_job(id)));
    };

    let (first, assured) = match plan {
        Plan::One(sig) => (sig, false),
        Plan::Assured => (Signal::TERM, true),
    };
    let mut sent = first;
    let mut escalated = false;
    send(pgid, first)?;
    let mut dead = wait_dead(ctx, id, pgid, timeout).await?;
    if !dead && assured {
        sent = Signal::KILL;
        escalated = true;
        send(pgid, Signal::KILL)?;
        dead = wait_dead(ctx, id, pgid, timeout).await?;
    }

    let mut out = Map::new();
    out.insert("job_id".into(), json!(id.to_string()));
    out.insert("terminated".into(), json!(dead));
    out.insert("signal_sent".into(), json!(sent.as_raw()));
    if escalated {
        out.insert("escalated".into(), json!(true));
    }
    if dead {
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
    out.insert("state".into(), json!(state));
    out.insert("detail".into(), json!(detail(pgid, sent, child_running)));
    Ok(Value::Object(out))
}

fn send(pgid: Pid, sig: Signal) -> Result<(), Fail> {
    init::signal_group(pgid, sig)
        .map(|_| ())
        .map_err(|e| Fail::Message(format!("sending {sig} to process group {pgid}: {e}")))
}

/// Waits up to `timeout` seconds for the child to be reaped and the group
/// to drain; reports the phase to the progress ticker.
async fn wait_dead(ctx: &CallCtx<'_>, id: JobId, pgid: Pid, timeout: f64) -> Result<bool, Fail> {
    await_death(
        ctx.app,
        id,
        pgid,
        deadline_in(timeout),
        ctx.cancel,
        Some(ctx.progress),
    )
    .await
}

fn detail(pgid: Pid, sig: Signal, child_running: bool) -> String {
    let members = init::procinfo::group_members(pgid.0);
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
