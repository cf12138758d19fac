//! The wire shapes of a job (docs/tools.md), as typed structs.
//!
//! Field order is the declaration order: `job_id`, `state`, `queued_for`,
//! `label`, `tty`, `exit_code`, `signal`, `signal_number`, `start_error`,
//! `awaiting_input`, `ports`, `timed_out`, `cause`, `started_at`, `duration_ms`,
//! `queued_ms`, `screen`, `stdout`, `stderr`.
//! - `state`: `queued` (waiting for capacity; shown as `running` to
//!   2024-11-05 sessions), `running`, `success` (exit code 0 and not ended at a
//!   deadline) or `error`.
//! - `exit_code`: only when terminal; `-1` for death by signal, a start
//!   error, or a lost status (which is logged where it happens).
//! - `signal`: the description (`"terminated"`), only on death by signal,
//!   with `signal_number` beside it.
//! - `start_error`: only when the job could not start (or was cancelled
//!   before it started).
//! - `stdout`/`stderr`: slices, only when captured.
//! - `awaiting_input`: `true` while a running job is blocked reading its
//!   stdin or terminal, from 2025-03-26 on, in `status`,
//!   `list_jobs` and `wait` entries (the verbs that look); never `false`.
//! - `ports`: the sockets a running job listens on, each
//!   `{port, proto, addr, loopback_only, pid, job_id}`, from 2025-03-26 on,
//!   in `status` and `list_jobs` entries and in a `wait` entry that
//!   `until.port` ended; absent when it listens on nothing.
//! - Part II fields, from revision 2025-03-26 on and only when they apply:
//!   `queued_for` (`"capacity"`), `label`, `cause` when known (`timeout`,
//!   `idle_timeout` — with `timed_out: true` —, `killed`, `shutdown`, `oom`,
//!   `cpu_limit`, `file_size_limit`), `started_at` (RFC 3339, UTC, ms) and
//!   `duration_ms` (terminal jobs that ran), `queued_ms` (jobs that waited),
//!   `tty: true` for a job on a pseudo-terminal, and in a
//!   terminal job's delivered result its last `screen` (before the streams).
//!   A 2024-11-05 session sees exactly the reference shapes.
//!
//! Which of these a result shows is [`Fields`]: a front-end picks it from
//! its own wire revision, so `jobs` never names a protocol revision.

use serde::Serialize;

use super::ports::Port;
use super::state::{Cause, JobId, JobPhase, JobState};
use super::table::{Gone, Job, Listed};
use crate::capture::{Redact, Slice, StreamSpec, Window};
use crate::terminal::ScreenView;

/// The values of `queued_for`: waiting for capacity, or
/// for the earlier jobs of its shell session.
pub const QUEUED_FOR: [&str; 2] = ["capacity", "shell_session"];

/// Which fields results show: exactly the reference's (Part I, a
/// 2024-11-05 session), or Part II's too (2025-03-26 on, `POST /exec`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fields {
    /// The reference's shapes only: `queued` shows as `running`.
    PartOne,
    /// Part II's fields too, each when it applies.
    PartTwo,
}

impl Fields {
    /// Whether Part II's fields show.
    pub fn has_part_two(self) -> bool {
        self == Fields::PartTwo
    }
}

/// How a front-end sees results: which fields exist and the redaction
/// applied to every `data`.
#[derive(Clone, Copy)]
pub struct View<'a> {
    /// Which fields show.
    pub fields: Fields,
    /// The redactor, when redaction is on.
    pub redact: Option<&'a (dyn Redact + Sync)>,
}

/// `{job_id, state, queued_for?, label?, exit_code?, signal?, signal_number?, start_error?}`.
#[derive(Debug, Clone, Serialize)]
pub struct JobStatus {
    /// `job-N`.
    pub job_id: JobId,
    /// `queued`, `running`, `success` or `error`.
    pub state: &'static str,
    /// Why a queued job waits (`capacity`, `shell_session`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued_for: Option<&'static str>,
    /// The job's label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// `true` for a terminal job; absent for a pipe job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tty: Option<bool>,
    /// Only when terminal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal's description, on death by signal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<String>,
    /// The signal's number, on death by signal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal_number: Option<i32>,
    /// Why the job could not start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_error: Option<String>,
    /// `true` while it is blocked reading its stdin or terminal; absent
    /// otherwise, and when nobody looked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub awaiting_input: Option<bool>,
    /// The sockets a running job listens on; absent when none,
    /// and when nobody looked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<Port>>,
}

impl JobStatus {
    /// The status of job `id` in `phase`, as `fields` show it.
    pub fn new(
        id: JobId,
        phase: &JobPhase,
        cause: Option<Cause>,
        label: Option<&str>,
        fields: Fields,
    ) -> JobStatus {
        let part_two = fields.has_part_two();
        let state = match phase {
            JobPhase::Queued if !part_two => "running",
            // A deadline ends a job as an error even if it exited 0 after
            // TERM; other causes never change the state.
            p if p.is_terminal() && cause.is_some_and(Cause::is_deadline) => "error",
            p => p.name(),
        };
        let mut s = JobStatus {
            job_id: id,
            state,
            queued_for: (part_two && *phase == JobPhase::Queued).then_some(QUEUED_FOR[0]),
            label: label.filter(|_| part_two).map(str::to_owned),
            tty: None,
            exit_code: None,
            signal: None,
            signal_number: None,
            start_error: None,
            awaiting_input: None,
            ports: None,
        };
        match phase {
            JobPhase::Queued | JobPhase::Running => {}
            JobPhase::Exited(code) => s.exit_code = Some(*code),
            JobPhase::Signaled(signal) => {
                s.exit_code = Some(-1);
                s.signal = Some(signal.description());
                s.signal_number = Some(signal.as_raw());
            }
            JobPhase::NotStarted(error) => {
                s.exit_code = Some(-1);
                s.start_error = Some(error.clone());
            }
            JobPhase::Lost => s.exit_code = Some(-1),
        }
        s
    }

    /// The status of a job.
    pub fn of(job: &Job, fields: Fields) -> JobStatus {
        JobStatus::new(
            job.id,
            &job.phase(),
            job.cause,
            job.label.as_deref(),
            fields,
        )
        .waiting_for_shell_session(job.waits_for_shell_session)
        .on_terminal(job.tty.is_tty(), fields)
    }

    /// `tty: true` for a terminal job, in the fields that have it.
    fn on_terminal(mut self, tty: bool, fields: Fields) -> JobStatus {
        if tty && fields.has_part_two() {
            self.tty = Some(true);
        }
        self
    }

    /// `queued_for: "shell_session"` for a job queued behind an earlier job
    /// of its shell session.
    fn waiting_for_shell_session(mut self, waits: bool) -> JobStatus {
        if waits && self.queued_for.is_some() {
            self.queued_for = Some(QUEUED_FOR[1]);
        }
        self
    }

    /// `awaiting_input: true` when `yes` (a look found it blocked reading
    /// its input), for Part II fields only.
    pub fn awaiting_input(mut self, yes: bool) -> JobStatus {
        if yes && self.queued_for.is_none() && self.exit_code.is_none() {
            self.awaiting_input = Some(true);
        }
        self
    }

    /// `ports` when a look found the running job listening,
    /// for Part II fields only (the caller looks only for those).
    pub fn listening(mut self, ports: Vec<Port>) -> JobStatus {
        if !ports.is_empty() && self.queued_for.is_none() && self.exit_code.is_none() {
            self.ports = Some(ports);
        }
        self
    }

    /// The status of a listed job.
    pub fn listed(l: &Listed, fields: Fields) -> JobStatus {
        let ports = if fields.has_part_two() {
            l.ports.clone()
        } else {
            Vec::new()
        };
        JobStatus::new(l.id, &l.phase, None, l.label.as_deref(), fields)
            .waiting_for_shell_session(l.waits_for_shell_session)
            .on_terminal(l.tty, fields)
            .awaiting_input(l.awaiting_input && fields.has_part_two())
            .listening(ports)
    }

    /// How a job ended whose result another request took.
    pub fn gone(g: &Gone, fields: Fields) -> JobStatus {
        JobStatus::new(g.id, &g.phase, g.cause, g.label.as_deref(), fields)
    }
}

/// The exit code a shell reports for a death by signal `signo`: 128 + N.
///
/// Our own results say `exit_code: -1` with the signal beside it; a wire
/// that has only an exit code (sandboxd, envd, PID 1's own exit status)
/// says it as a shell does, through this one function.
pub const fn signal_exit_code(signo: i32) -> i32 {
    128 + signo
}

/// A status with the Part II fields of a terminal job and the slices asked
/// for.
#[derive(Debug, Clone, Serialize)]
pub struct JobResult {
    /// The status fields.
    #[serde(flatten)]
    pub status: JobStatus,
    /// The server ended the job at a deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<bool>,
    /// Why the server ended it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<&'static str>,
    /// When it started (RFC 3339, UTC, milliseconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// How long it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// How long it waited for capacity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queued_ms: Option<u64>,
    /// A terminal job's last screen, in its delivered result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub screen: Option<ScreenView>,
    /// stdout, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<Slice>,
    /// stderr, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<Slice>,
}

impl JobResult {
    /// JobStatus (plus timing and cause once terminal) and the slices asked for
    /// (a `none` spec omits its stream).
    pub fn with_streams(
        job: &Job,
        stdout: &StreamSpec,
        stderr: &StreamSpec,
        view: &View<'_>,
    ) -> JobResult {
        let fields = view.fields;
        let redact = view.redact.map(|r| r as &dyn Redact);
        // A running job's streams end before what later output could still
        // turn into a secret (capture's "The live edge").
        let read = |w: &Window, spec| {
            if job.state.is_terminal() {
                w.slice_with(spec, redact)
            } else {
                w.slice_live(spec, redact)
            }
        };
        let mut r = JobResult {
            status: JobStatus::of(job, fields),
            timed_out: None,
            cause: None,
            started_at: None,
            duration_ms: None,
            queued_ms: None,
            screen: None,
            stdout: read(&job.stdout, stdout),
            stderr: read(&job.stderr, stderr),
        };
        if fields.has_part_two() && job.state.is_terminal() {
            if let Some(cause) = job.cause {
                r.timed_out = cause.is_deadline().then_some(true);
                r.cause = Some(cause.name());
            }
            if let JobState::Started { ran, .. } = &job.state {
                r.started_at = Some(humantime::format_rfc3339_millis(ran.wall).to_string());
                r.duration_ms = ran.until.map(|until| millis(until - ran.since));
                r.queued_ms = job.queued_at.map(|q| millis(ran.since - q));
            }
        }
        r
    }

    /// How a job ended whose result was delivered already: its status and
    /// cause, without timing or streams.
    pub fn gone(g: &Gone, fields: Fields) -> JobResult {
        let cause = g.cause.filter(|_| fields.has_part_two());
        JobResult {
            status: JobStatus::gone(g, fields),
            timed_out: cause.and_then(|c| c.is_deadline().then_some(true)),
            cause: cause.map(Cause::name),
            started_at: None,
            duration_ms: None,
            queued_ms: None,
            screen: None,
            stdout: None,
            stderr: None,
        }
    }

    /// The terminal result as delivered by `execute`, `wait` and `kill`:
    /// status plus the streams of the job's capture policy for its outcome.
    pub fn delivered(job: &Job, view: &View<'_>) -> JobResult {
        let success = job.phase().is_success() && !job.cause.is_some_and(Cause::is_deadline);
        let side = job.capture.side(success);
        let mut r = JobResult::with_streams(job, &side.stdout, &side.stderr, view);
        if view.fields.has_part_two() {
            r.screen = super::terminal::last_screen(&job.tty, view.redact);
        }
        r
    }
}

impl JobResult {
    /// Bytes of output data it carries (a size hint for transports).
    pub fn data_bytes(&self) -> usize {
        [&self.stdout, &self.stderr]
            .into_iter()
            .flatten()
            .map(|s| s.data.len())
            .sum()
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_deadline_turns_an_exit_0_into_an_error() {
        let fields = Fields::PartTwo;
        let state =
            |cause| JobStatus::new(JobId(1), &JobPhase::Exited(0), cause, None, fields).state;
        assert_eq!(state(None), "success");
        assert_eq!(state(Some(Cause::Shutdown)), "success");
        assert_eq!(state(Some(Cause::Killed)), "success");
        assert_eq!(state(Some(Cause::Timeout)), "error");
        assert_eq!(state(Some(Cause::IdleTimeout)), "error");
    }
}
