//! How a tool call fails: a tool error (an `isError:true` result whose exact
//! text is kept here and nowhere else) or a cancellation (JSON-RPC
//! `-32800`).

use crate::jobs::JobId;

/// A tool error; its `Display` is the exact text the client sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// `execute` without a usable `command`.
    #[error("\"command\" is required")]
    CommandRequired,
    /// Part II `execute` with neither `command` nor `argv`.
    #[error("\"command\" or \"argv\" is required")]
    CommandOrArgvRequired,
    /// Part II `execute` with both.
    #[error("give either \"command\" or \"argv\", not both")]
    CommandAndArgv,
    /// The admission queue is full.
    #[error("job queue is full ({running} running, {queued} queued)")]
    QueueFull {
        /// Jobs running.
        running: usize,
        /// Jobs queued.
        queued: usize,
    },
    /// A `cwd` outside the allowed directories.
    #[error("{0}")]
    CwdRefused(String),
    /// The circuit breaker refuses new jobs. `execute` answers
    /// it as the job's start error instead; `POST /exec` as a `503`.
    #[error("{0}")]
    BreakerOpen(String),
    /// `input` to a job still waiting in the queue.
    #[error("job \"{0}\" has not started")]
    NotStarted(JobId),
    /// `wait` without a non-empty `job_ids` array.
    #[error("\"job_ids\" must be a non-empty array")]
    JobIdsRequired,
    /// A missing or null `job_id`.
    #[error("\"job_id\" is required")]
    JobIdRequired,
    /// A job id that names no job in the table (also empty or malformed ids,
    /// shown as given).
    #[error("unknown job_id \"{0}\"")]
    UnknownJob(String),
    /// `input` to a job that has ended.
    #[error("job \"{0}\" is no longer running")]
    NotRunning(JobId),
    /// `input` after stdin was closed.
    #[error("stdin is already closed for this job")]
    StdinClosed,
    /// A signal name or number that does not exist.
    #[error("unknown signal \"{0}\" (use e.g. \"TERM\", \"KILL\", \"ASSURED\", or a number)")]
    UnknownSignal(String),
    /// Signal number 0 (or negative).
    #[error("invalid signal number {0}")]
    InvalidSignalNumber(String),
    /// Any malformed argument; the detail contains "invalid" where it names
    /// a bad stream or capture spec.
    #[error("invalid arguments: {0}")]
    Invalid(String),
    /// A blocking `execute` whose job was delivered to another request.
    #[error("job \"{0}\" was delivered to another request")]
    DeliveredElsewhere(JobId),
    /// `wait` on a job whose result a `POST /exec` stream delivers.
    #[error("job \"{0}\" is owned by an /exec stream")]
    OwnedByStream(JobId),
    /// `wait` on a job an MCP Task owns.
    #[error(
        "job \"{0}\" is owned by task {1}: the task delivers its result (status, output and kill work)"
    )]
    OwnedByTask(JobId, crate::jobs::TaskTag),
    /// Writing to a job's stdin failed (`writing stdin: broken pipe`).
    #[error("writing stdin: {0}")]
    StdinWrite(String),
    /// A file tool failed; the text names the path:
    /// `sha256 mismatch: expected …, got …`, `"/x" exists and overwrite is
    /// false`, `no space left on device writing "/x"`, …
    #[error("{0}")]
    File(String),
    /// `upload`/`download` without a `path`.
    #[error("\"path\" is required")]
    PathRequired,
    /// The kernel refused a signal (`sending terminated to process group 7: …`).
    #[error("{0}")]
    SignalFailed(String),
    /// `resize` or `screen` on a job that runs on pipes.
    #[error("job \"{0}\" has no terminal (start it with \"tty\": true)")]
    NotTerminal(JobId),
    /// `shell_sessions` on a session that does not exist.
    #[error("shell session \"{0}\" does not exist")]
    UnknownSession(String),
}

impl ToolError {
    /// `unknown job_id "<id>"`.
    pub fn unknown(id: impl std::fmt::Display) -> ToolError {
        ToolError::UnknownJob(id.to_string())
    }

    /// `invalid arguments: <detail>`.
    pub fn invalid(detail: impl std::fmt::Display) -> ToolError {
        ToolError::Invalid(detail.to_string())
    }
}

/// A launch request's broken rule is `invalid arguments: <detail>` (also
/// on envd's and sandboxd's wire, which have always shown the tool's text).
impl From<crate::jobs::RequestError> for ToolError {
    fn from(e: crate::jobs::RequestError) -> ToolError {
        ToolError::invalid(e)
    }
}

/// How a tool call ends when it does not succeed.
#[derive(Debug, PartialEq, Eq)]
pub enum Fail {
    /// A tool error (`isError:true`).
    Tool(ToolError),
    /// The request was cancelled (`-32800`).
    Cancelled,
}

impl From<ToolError> for Fail {
    fn from(e: ToolError) -> Fail {
        Fail::Tool(e)
    }
}
