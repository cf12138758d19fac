//! `kill`: signal a job's process group and verify death.
//!
//! Input: `job_id`, `signal` (`"TERM"`, `"SIGKILL"`, `"kill"`, `"9"`, or
//! `"ASSURED"`, each with an optional `SIG` prefix; default TERM), `timeout`
//! (seconds to wait for death after each signal; default 5; 0 = don't
//! wait).
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
//! The result of a death the kill caused is its own: a `wait` blocking on
//! the job meanwhile answers with the job's status and
//! `result_delivered_elsewhere:true`. If another request took
//! the result first (a `wait` before the signal, another `kill`), the
//! answer says `terminated:true` with `result_delivered_elsewhere:true`
//! instead of a second copy of the result (exactly-once delivery).
//!
//! A job a `POST /exec` stream owns is signalled like any
//! other but never claimed: its stream delivers the result. Once it is dead
//! the answer is `{job_id, terminated:true, signal_sent, result_delivered_elsewhere:true}`
//! (`already_terminated` or `cancelled_before_start` as they apply); a
//! queued one is cancelled in place, for its stream to deliver.
//!
//! The signalling and the verification are `Jobs::signal`; this module
//! parses, renders its typed answer, and decides nothing.

use std::time::Duration;

use init::{DeathWait, Pid, Signal, Survivor};
use serde::Serialize;
use serde_json::{Value, json};

use super::schema;
use super::{Args, Call, Effect, Running, Tool, ToolError, ToolOutcome, args, cancellable};
use crate::jobs::result::{JobResult, JobStatus};
use crate::jobs::{Delivery, Job, JobId, JobSignalError, Plan, Signalled};
use crate::protocol::result::Payload;

/// Default seconds to wait for death after a signal.
const DEFAULT_TIMEOUT: f64 = 5.0;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "kill",
    title: "Signal a job",
    description: "Send a signal to a job's whole process group and verify that it died (process reaped and group empty). signal: a name (TERM, KILL, INT…), a number, or ASSURED (TERM, then KILL if anything survives the timeout).",
    effect: Effect::Destructive,
    input_schema: |_| {
        json!({
            "type": "object",
            "properties": {
                "job_id": schema::job_id(),
                "signal": {"type": "string", "description": "Default TERM."},
                "timeout": {"type": "number", "description": "Seconds to wait for death after each signal (default 5; 0 = don't wait)."}
            },
            "required": ["job_id"]
        })
    },
    output_schema: |rev| {
        json!({
            "type": "object",
            "properties": {
                "job_id": {"type": "string"},
                "terminated": {"type": "boolean"},
                "already_terminated": {"type": "boolean"},
                "cancelled_before_start": {"type": "boolean"},
                "signal_sent": {"type": "integer"},
                "escalated": {"type": "boolean"},
                "result": schema::job_result_schema(rev),
                "result_delivered_elsewhere": {"type": "boolean"},
                "state": {"type": "string"},
                "detail": {"type": "string"}
            },
            "required": ["job_id", "terminated"]
        })
    },
    file_params: &[],
    starts_jobs: false,
    run,
};

/// The answer, in wire field order; absent fields are omitted.
#[derive(Serialize)]
struct Killed {
    job_id: JobId,
    terminated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    already_terminated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cancelled_before_start: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    signal_sent: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    escalated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<JobResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result_delivered_elsewhere: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
}

impl Killed {
    fn new(job_id: JobId, terminated: bool) -> Killed {
        Killed {
            job_id,
            terminated,
            already_terminated: None,
            cancelled_before_start: None,
            signal_sent: None,
            escalated: None,
            result: None,
            result_delivered_elsewhere: None,
            state: None,
            detail: None,
        }
    }
}

/// Parses `signal`: absent or blank is TERM.
pub(crate) fn parse_signal(a: &Args) -> Result<Plan, ToolError> {
    let raw = match a.get("signal") {
        None | Some(Value::Null) => return Ok(Plan::One(Signal::TERM)),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(Plan::One(Signal::TERM)),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err(ToolError::invalid("\"signal\" must be a string")),
    };
    let name = raw.trim();
    let bare = match name.get(..3) {
        Some(p) if p.eq_ignore_ascii_case("SIG") => &name[3..],
        _ => name,
    };
    if bare.eq_ignore_ascii_case("ASSURED") {
        return Ok(Plan::Assured);
    }
    Signal::parse(&raw).map(Plan::One).map_err(|e| match e {
        init::ParseSignalError::InvalidNumber(n) => ToolError::InvalidSignalNumber(n.to_string()),
        init::ParseSignalError::Unknown(s) => ToolError::UnknownSignal(s),
    })
}

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(kill(call, a))
}

async fn kill(call: &Call, a: &Args) -> ToolOutcome {
    let id = args::job_id_not_empty(a)?;
    let plan = parse_signal(a)?;
    let timeout = args::opt_seconds(a, "timeout")?
        .unwrap_or(DEFAULT_TIMEOUT)
        .max(0.0);
    // `timeout` is finite, >= 0 and capped at a day: the conversion cannot panic.
    let wait = Duration::from_secs_f64(timeout.min(86_400.0));
    let phase = &call.progress;
    let on_wait = |p: DeathWait| {
        phase.set(match p {
            DeathWait::Exiting => "waiting for the process to exit",
            DeathWait::Draining => "waiting for the process group to drain",
        });
    };
    let signalled = cancellable(
        &call.cancel,
        call.host.jobs().signal(id, plan, wait, on_wait),
    )
    .await?
    .map_err(|e| match e {
        JobSignalError::Unknown(id) => ToolError::unknown(id),
        JobSignalError::Failed(e) => ToolError::SignalFailed(e.to_string()),
    })?;
    let mut out = Killed::new(id, true);
    let mut claimed = None;
    match signalled {
        Signalled::CancelledBeforeStart(delivery) => {
            out.cancelled_before_start = Some(true).filter(|_| call.revision.has_part_two());
            claimed = deliver(call, &mut out, delivery);
        }
        Signalled::AlreadyTerminated(delivery) => {
            out.already_terminated = Some(true);
            claimed = deliver(call, &mut out, delivery);
        }
        Signalled::Died {
            sent,
            escalated,
            delivery,
        } => {
            out.signal_sent = Some(sent.as_raw());
            out.escalated = Some(true).filter(|_| escalated);
            claimed = deliver(call, &mut out, delivery);
        }
        Signalled::Survived {
            sent,
            escalated,
            pgid,
            phase,
            cause,
            members,
        } => {
            out.terminated = false;
            out.signal_sent = Some(sent.as_raw());
            out.escalated = Some(true).filter(|_| escalated);
            out.state = Some(JobStatus::new(id, &phase, cause, None, call.fields()).state);
            out.detail = Some(detail(pgid, sent, !phase.is_terminal(), &members));
        }
    }
    // A claimed job is kept beside its rendered result until the answer is
    // sent: both count against the byte budgets.
    let held = claimed.as_ref().map_or(0, |j| j.held_bytes());
    let bytes = out.result.as_ref().map_or(0, JobResult::data_bytes);
    let payload = Payload::object(out).sized(bytes.saturating_add(held));
    Ok(match claimed {
        Some(job) => payload.on_lost(call.host.jobs().put_back(vec![*job])),
        None => payload,
    })
}

/// The result, or that someone else holds it; the job when claimed here.
fn deliver(call: &Call, out: &mut Killed, delivery: Delivery) -> Option<Box<Job>> {
    match delivery {
        Delivery::Here(job) => {
            out.result = Some(JobResult::delivered(&job, &call.view()));
            Some(job)
        }
        Delivery::Elsewhere => {
            out.result_delivered_elsewhere = Some(true);
            None
        }
    }
}

/// Why the group survived, from the members the escalation saw alive when
/// its wait ran out.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(v: Value) -> Result<Plan, ToolError> {
        let mut a = Args::new();
        a.insert("signal".into(), v);
        parse_signal(&a)
    }

    #[test]
    fn assured_and_every_name_accept_an_optional_sig_prefix_in_any_case() {
        for s in ["ASSURED", "assured", "SIGASSURED", "sigAssured"] {
            assert!(matches!(plan(json!(s)), Ok(Plan::Assured)), "{s}");
        }
        for s in ["sigkill", "SIGKILL", "kill", "9"] {
            assert!(
                matches!(plan(json!(s)), Ok(Plan::One(sig)) if sig == Signal::KILL),
                "{s}"
            );
        }
    }

    #[test]
    fn unknown_and_zero_signals_have_their_reference_texts() {
        assert_eq!(
            plan(json!("NOPE")).err().unwrap().to_string(),
            "unknown signal \"NOPE\" (use e.g. \"TERM\", \"KILL\", \"ASSURED\", or a number)"
        );
        assert_eq!(
            plan(json!("0")).err().unwrap().to_string(),
            "invalid signal number 0"
        );
    }
}
