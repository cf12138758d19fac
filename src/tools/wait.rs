//! `wait`: block until any listed job is terminal, or, with
//! `until`, until a listed job prints what the caller waits for or goes
//! quiet.
//!
//! Input: `job_ids` (non-empty array of strings, duplicates allowed),
//! `timeout` (seconds; default `MCP_EXEC_DEFAULT_TIMEOUT`; `<= 0` polls),
//! and from 2025-03-26 on `until`: `{pattern, stream: "stdout"|"stderr"|"any",
//! from, quiet, input, port}`.
//! Output: an array in `job_ids` order. Terminal jobs carry their full result
//! and are removed (delivered here and nowhere else); the others are their
//! status (`{job_id, state:"running"}`). A later duplicate of an id
//! delivered in the same answer repeats its status fields without the
//! streams, so the output is delivered once. An unknown id fails the whole
//! call, and so does a job a `POST /exec` stream owns (`job "job-7" is
//! owned by an /exec stream`): only its stream delivers it.
//!
//! `until` adds four more reasons to return, none of which delivers
//! anything: a listed job still running whose retained output at or after
//! byte `from` (default 0, so a line printed before the call counts: no
//! race) matches `pattern` — its entry carries `matched: {stream, offset,
//! bytes}` of the first match —, a listed job that has written nothing
//! for `quiet` seconds — its entry carries `went_quiet: <seconds>` —, or,
//! with `input: true`, a listed job blocked reading its stdin or terminal
//! — its entry carries `awaiting_input: true` —, or, with
//! `port: N`, a listed job listening on TCP port N — its entry
//! carries `ports`, the job's listening sockets. The conditions
//! combine; each entry says which one its job met, and an answer whose
//! entries carry none of them (and no result) ended at the timeout. A
//! terminal job's triggered entry also carries its `screen`.
//!
//! A job listed here whose result a `kill` or another `wait` takes while
//! this call blocks is answered with its terminal status fields and
//! `result_delivered_elsewhere: true`; only a call that starts
//! after the delivery answers `unknown job_id`. The waiting itself is
//! `Jobs::wait_any`; this module parses and renders.

use std::time::Duration;

use regex::bytes::Regex;
use serde::Serialize;
use serde_json::{Value, json};

use super::schema;
use super::{Args, Call, Effect, Running, Tool, ToolError, ToolOutcome, cancellable, deadline_in};
use crate::jobs::result::{JobResult, JobStatus, View};
use crate::jobs::{Job, JobId, Jobs, Stream, Trigger, Until, WaitEntry, WaitError};
use crate::protocol::result::Payload;
use crate::protocol::version::Revision;
use crate::terminal::ScreenView;

/// The tool.
pub const TOOL: Tool = Tool {
    name: "wait",
    title: "Wait for jobs",
    description: "Block until any of the listed jobs ends, or the timeout. Returns one entry per id, in order: ended jobs with their full result (and they are removed), running ones as {job_id, state:\"running\"}.",
    effect: Effect::ReadOnly,
    input_schema,
    output_schema: |rev| {
        json!({
            "type": "object",
            "properties": {"results": {"type": "array", "items": schema::job_result_schema(rev)}},
            "required": ["results"]
        })
    },
    file_params: &[],
    starts_jobs: false,
    run,
};

fn input_schema(rev: Revision) -> Value {
    let mut s = json!({
        "type": "object",
        "properties": {
            "job_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "timeout": {"type": "number", "description": "Seconds to wait (default MCP_EXEC_DEFAULT_TIMEOUT, 30 unless set); <= 0 polls."}
        },
        "required": ["job_ids"]
    });
    if rev.has_part_two() {
        s["properties"]["until"] = json!({
            "type": "object",
            "description": "Also return, without delivering anything, when a listed running job's output at or after byte `from` (default 0: output printed before the call counts) matches `pattern` (entry gains matched:{stream, offset, bytes}), when a listed job has written nothing for `quiet` seconds (entry gains went_quiet), with `input: true`, when a listed job is blocked reading its stdin or terminal (entry gains awaiting_input: true), or, with `port`, when a listed job listens on that TCP port (entry gains ports). Conditions combine: the first met ends the wait.",
            "properties": {
                "pattern": {"type": "string", "description": "A regular expression (Rust regex syntax)."},
                "stream": {"type": "string", "enum": ["stdout", "stderr", "any"], "description": "Default any."},
                "from": {"type": "integer", "minimum": 0},
                "quiet": {"type": "number", "exclusiveMinimum": 0},
                "input": {"type": "boolean", "description": "Return when a listed job waits for input (a prompt)."},
                "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "Return when a listed job listens on this TCP port (entry gains ports)."}
            }
        });
    }
    s
}

/// One entry of the answer.
#[derive(Serialize)]
#[serde(untagged)]
enum Entry {
    Result(Box<JobResult>),
    Status(JobStatus),
    Elsewhere {
        #[serde(flatten)]
        status: JobStatus,
        result_delivered_elsewhere: bool,
    },
    Triggered {
        #[serde(flatten)]
        status: JobStatus,
        #[serde(skip_serializing_if = "Option::is_none")]
        matched: Option<Matched>,
        #[serde(skip_serializing_if = "Option::is_none")]
        went_quiet: Option<f64>,
        /// A terminal job's screen as it triggered.
        #[serde(skip_serializing_if = "Option::is_none")]
        screen: Option<ScreenView>,
    },
}

/// Where a pattern matched, in the raw stream.
#[derive(Serialize, Clone, Copy)]
struct Matched {
    stream: &'static str,
    offset: u64,
    bytes: u64,
}

fn parse_ids(a: &Args) -> Result<Vec<JobId>, ToolError> {
    let Some(Value::Array(items)) = a.get("job_ids") else {
        return Err(ToolError::JobIdsRequired);
    };
    if items.is_empty() {
        return Err(ToolError::JobIdsRequired);
    }
    items
        .iter()
        .map(|v| match v {
            Value::String(s) => JobId::parse(s).ok_or_else(|| ToolError::unknown(s)),
            _ => Err(ToolError::invalid("\"job_ids\" must contain only strings")),
        })
        .collect()
}

fn parse_until(a: &Args) -> Result<Option<Until>, ToolError> {
    let u = match a.get("until") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(u)) => u,
        Some(_) => return Err(ToolError::invalid("\"until\" must be an object")),
    };
    let pattern = match u.get("pattern") {
        None | Some(Value::Null) => None,
        Some(Value::String(p)) => Some(Regex::new(p).map_err(|e| {
            ToolError::invalid(format!("\"until.pattern\" is not a valid pattern: {e}"))
        })?),
        Some(_) => return Err(ToolError::invalid("\"until.pattern\" must be a string")),
    };
    let streams: &'static [Stream] = match u.get("stream").and_then(Value::as_str) {
        None | Some("any") => &[Stream::Stdout, Stream::Stderr],
        Some("stdout") => &[Stream::Stdout],
        Some("stderr") => &[Stream::Stderr],
        Some(other) => {
            return Err(ToolError::invalid(format!(
                "\"until.stream\" must be \"stdout\", \"stderr\" or \"any\", not {other:?}"
            )));
        }
    };
    let from = match u.get("from") {
        None | Some(Value::Null) => 0,
        Some(v) => match v.as_i64() {
            Some(n) => u64::try_from(n.max(0)).unwrap_or(0),
            None => v.as_u64().ok_or_else(|| {
                ToolError::invalid("\"until.from\" must be an integer byte offset")
            })?,
        },
    };
    let quiet = match u.get("quiet").and_then(Value::as_f64) {
        None => None,
        Some(q) if q > 0.0 && q.is_finite() => Some(Duration::from_secs_f64(q.min(86_400.0))),
        Some(_) => return Err(ToolError::invalid("\"until.quiet\" must be > 0")),
    };
    let input = match u.get("input") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ToolError::invalid("\"until.input\" must be a boolean")),
    };
    let port = match u.get("port") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .filter(|&p| p > 0)
                .ok_or_else(|| {
                    ToolError::invalid("\"until.port\" must be a TCP port (1 to 65535)")
                })?,
        ),
    };
    if pattern.is_none() && quiet.is_none() && !input && port.is_none() {
        return Err(ToolError::invalid(
            "\"until\" needs a \"pattern\", a \"quiet\" period, \"input\": true or a \"port\"",
        ));
    }
    Ok(Some(Until {
        pattern,
        streams,
        from,
        quiet,
        input,
        port,
    }))
}

fn run<'a>(call: &'a Call, a: &'a Args) -> Running<'a> {
    Box::pin(wait(call, a))
}

async fn wait(call: &Call, a: &Args) -> ToolOutcome {
    let ids = parse_ids(a)?;
    let timeout = match super::args::opt_seconds(a, "timeout")? {
        Some(t) => t,
        None => call.host.config().default_timeout.as_secs_f64(),
    };
    let until = if call.revision.has_part_two() {
        parse_until(a)?
    } else {
        None
    };
    let deadline = deadline_in(timeout);
    let view = call.view();
    call.progress.set("waiting for jobs");
    let waited = call
        .host
        .jobs()
        .wait_any(&ids, Some(deadline), until.as_ref(), view.redact);
    let entries = cancellable(&call.cancel, waited)
        .await?
        .map_err(|e| match e {
            WaitError::Unknown(id) => ToolError::unknown(id),
            WaitError::OwnedByStream(id) => ToolError::OwnedByStream(id),
            WaitError::OwnedByTask(id, task) => ToolError::OwnedByTask(id, task),
        })?;
    let mut claimed = Vec::new();
    let out: Vec<Entry> = entries
        .into_iter()
        .map(|e| render(e, call.host.jobs(), &view, &mut claimed))
        .collect();
    let bytes = out
        .iter()
        .map(|e| match e {
            Entry::Result(r) => r.data_bytes(),
            _ => 0,
        })
        .sum::<usize>();
    // The claimed jobs are kept beside their rendered results until the
    // answer is sent: both count against the byte budgets.
    let held: usize = claimed.iter().map(Job::held_bytes).sum();
    let payload = Payload::array("results", out).sized(bytes.saturating_add(held));
    Ok(if claimed.is_empty() {
        payload
    } else {
        payload.on_lost(call.host.jobs().put_back(claimed))
    })
}

/// One entry; a job delivered here joins `claimed` (put back if the answer
/// never reaches the client). A terminal job that triggered carries its
/// screen.
fn render(e: WaitEntry, jobs: &Jobs, view: &View<'_>, claimed: &mut Vec<Job>) -> Entry {
    let fields = view.fields;
    match e {
        WaitEntry::Delivered(job) => {
            let result = Entry::Result(Box::new(JobResult::delivered(&job, view)));
            claimed.push(*job);
            result
        }
        WaitEntry::Repeat(l) => Entry::Status(JobStatus::listed(&l, fields)),
        WaitEntry::Elsewhere(gone) => Entry::Elsewhere {
            status: JobStatus::gone(&gone, fields),
            result_delivered_elsewhere: true,
        },
        WaitEntry::Pending(l, None) => Entry::Status(JobStatus::listed(&l, fields)),
        WaitEntry::Pending(l, Some(trigger)) => {
            // `JobStatus::listed` carries `awaiting_input: true`.
            let status = JobStatus::listed(&l, fields);
            let screen = if l.tty {
                jobs.screen(l.id, 0, view.redact).ok()
            } else {
                None
            };
            let (matched, went_quiet) = match trigger {
                Trigger::Matched(m) => (
                    Some(Matched {
                        stream: m.stream.name(),
                        offset: m.offset,
                        bytes: m.bytes,
                    }),
                    None,
                ),
                Trigger::WentQuiet(silent) => {
                    (None, Some((silent.as_secs_f64() * 1000.0).round() / 1000.0))
                }
                // `JobStatus::listed` carries `awaiting_input: true`, `ports`.
                Trigger::AwaitingInput | Trigger::Listening => (None, None),
            };
            Entry::Triggered {
                status,
                matched,
                went_quiet,
                screen,
            }
        }
    }
}
