//! `input`: write to a running job's stdin (SPEC §4.6).
//!
//! Input: `job_id`, `data` (string, may be empty), `close` (EOF after the
//! data). Output: the status shape. Errors: `job "job-7" is no longer
//! running`, `stdin is already closed for this job`, or the write error.
//! A write blocked on a full pipe is cancellable.

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::args::{self, Args, not_running, unknown_job};
use super::{CallCtx, Fail, Outcome};
use crate::jobs::result;

/// `writing stdin: broken pipe` (Go's lower-case errno style).
pub fn write_error_text(e: &std::io::Error) -> String {
    format!("writing stdin: {}", init::errno_text(e))
}

/// Runs the tool.
pub async fn run(ctx: &CallCtx<'_>, a: &Args) -> Outcome {
    let id = args::job_id(a)?;
    let data = args::opt_str(a, "data")?.unwrap_or("");
    let close = args::opt_bool(a, "close")?;
    let jobs = &ctx.app.jobs;
    let (terminal, slot) = jobs
        .with(id, |j| (j.state.is_terminal(), j.stdin.clone()))
        .ok_or_else(|| unknown_job(id))?;
    if terminal {
        return Err(Fail::Message(not_running(id)));
    }
    let mut guard = tokio::select! {
        g = slot.lock() => g,
        () = ctx.cancel.cancelled() => return Err(Fail::Cancelled),
    };
    let Some(tx) = guard.as_mut() else {
        return Err(Fail::Message("stdin is already closed for this job".into()));
    };
    if !data.is_empty() {
        let written = tokio::select! {
            r = tx.write_all(data.as_bytes()) => r,
            () = ctx.cancel.cancelled() => return Err(Fail::Cancelled),
        };
        if let Err(e) = written {
            *guard = None;
            // EPIPE from a job that has exited meanwhile: say that, not the errno.
            if jobs.with(id, |j| j.state.is_terminal()).unwrap_or(true) {
                return Err(Fail::Message(not_running(id)));
            }
            return Err(Fail::Message(write_error_text(&e)));
        }
    }
    if close {
        *guard = None;
    }
    drop(guard);
    let status = jobs
        .with(id, |j| result::status(j.id, &j.state))
        .ok_or_else(|| unknown_job(id))?;
    Ok(Value::Object(status))
}
