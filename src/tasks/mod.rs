//! Tasks: the one MCP Task record (docs/tasks.md), shared by both wire formats
//! (2025-11-25's task-augmented `tools/call`, the 2026 extension
//! `io.modelcontextprotocol/tasks`).
//!
//! A task is a small record beside the job it owns (`jobs::Owner::Task`):
//! its id, who may see it, its status and message, its times, its TTL and
//! poll interval, and — only when there is no job to render it from — its
//! final answer. The job's terminal result stays in the job table until the
//! task ends, so every `tasks/result` renders the same terminal job the same
//! way (identical on every call) and nothing is held twice.
//!
//! Invariants:
//! - A task id is 128 bits from the kernel's random source, never derived
//!   from the job id; it is the [`TaskTag`] the job's owner names.
//! - A task is seen only by its [`Requestor`]: the stdio process, the HTTP
//!   listener's token; without a token the id itself is the only key, and
//!   tasks cannot be listed.
//! - A terminal status never changes (`cancelled` is sticky).
//! - At most `MCP_EXEC_MAX_TASKS` tasks hold a job or a result at once; a
//!   cancelled task whose job is gone (or that never had one) is *released*:
//!   it keeps only its status record, uncounted, so `tasks/get` still
//!   answers `cancelled`. Each task lives at most `MCP_EXEC_TASK_TTL` from
//!   its creation, then it and its job are removed by its driver (the
//!   front-end's).
//!
//! Nothing here knows a wire shape: the front-ends (`server::tasks`) render
//! a [`Snapshot`] in their revision's format.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::jobs::{JobId, TaskTag};
use crate::protocol::version::Revision;

/// The poll interval suggested to requestors.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Who created a task, and so who may see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requestor {
    /// The stdio process (one client per process).
    Stdio,
    /// An HTTP request that carried the listener's token.
    HttpToken,
    /// An HTTP listener without a token: requestors cannot be told apart.
    HttpOpen,
}

impl Requestor {
    /// Whether requestors are identified (then `tasks/list` is offered).
    pub fn identified(self) -> bool {
        self != Requestor::HttpOpen
    }
}

/// A task's status, the union of both formats' (`input_required` is never
/// used: a job's stdin is not a client request).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskStatus {
    /// The job is queued or runs.
    Working,
    /// The call ended with a result.
    Completed,
    /// The call ended with an error (2025-11-25: an `isError` result).
    Failed,
    /// `tasks/cancel` (sticky).
    Cancelled,
}

impl TaskStatus {
    /// The terminal status of a call that ended with a result, `is_error`
    /// or not, in `format`.
    pub fn of_result(format: Format, is_error: bool) -> TaskStatus {
        match (format, is_error) {
            (Format::Augmented, true) => TaskStatus::Failed,
            _ => TaskStatus::Completed,
        }
    }

    /// Its wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Whether it never changes again.
    pub fn is_terminal(self) -> bool {
        self != TaskStatus::Working
    }
}

/// Which wire format created the task (its status mapping differs).
///
/// 2025-11-25: an `isError` result is `failed`; the extension: it is
/// `completed` (only a JSON-RPC error is `failed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// 2025-11-25 (SEP-1686): requestor-driven, `tasks/result`.
    Augmented,
    /// The 2026 extension (SEP-2663): server-directed, result in `tasks/get`.
    Extension,
}

/// A final answer kept in the record (when no job holds it).
#[derive(Clone, Debug, PartialEq)]
pub enum Final {
    /// The `CallToolResult` as JSON.
    Result(Value),
    /// A JSON-RPC error.
    Error {
        /// Its code.
        code: i32,
        /// Its message.
        message: String,
    },
}

/// A task as it is now (a copy, for rendering after the lock).
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Its id.
    pub tag: TaskTag,
    /// Its status.
    pub status: TaskStatus,
    /// Its human message.
    pub message: Option<String>,
    /// When it was created.
    pub created: SystemTime,
    /// When its status or message last changed.
    pub updated: SystemTime,
    /// How long it is kept after its creation.
    pub ttl: Duration,
    /// The job it owns (none: it never started one, or it was removed).
    pub job: Option<JobId>,
    /// The format that created it.
    pub format: Format,
    /// The revision its results are rendered for.
    pub revision: Revision,
}

struct Record {
    requestor: Requestor,
    snapshot: Snapshot,
    /// Cancelled by `tasks/cancel`: wakes the task's driver.
    stop: CancellationToken,
    /// The answer, when no job holds it.
    kept: Option<Final>,
    /// Cancelled and holding no job: not counted against the cap.
    released: bool,
}

/// What a new task is.
#[derive(Debug)]
pub struct NewTask {
    /// Its id (see [`new_tag`]).
    pub tag: TaskTag,
    /// Who created it.
    pub requestor: Requestor,
    /// Its wire format.
    pub format: Format,
    /// The revision its results are rendered for.
    pub revision: Revision,
    /// The TTL asked for (capped at `MCP_EXEC_TASK_TTL`, its default).
    pub ttl: Option<Duration>,
    /// Its first message.
    pub message: Option<String>,
}

/// A created task: its snapshot, the token `tasks/cancel` cancels, and
/// when it expires.
#[derive(Debug)]
pub struct Created {
    /// As it is now.
    pub snapshot: Snapshot,
    /// Cancelled by `tasks/cancel`.
    pub stop: CancellationToken,
    /// When its TTL runs out.
    pub expires: Instant,
}

/// Why a task could not be created.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CreateError {
    /// `MCP_EXEC_MAX_TASKS` tasks hold a job or a result already.
    #[error(
        "too many tasks: {0} hold a job or a result (MCP_EXEC_MAX_TASKS); a slot frees when one is cancelled (tasks/cancel) or its TTL expires"
    )]
    Full(usize),
    /// The kernel gave no random bits for its id.
    #[error("no random bits for a task id")]
    NoRandom,
}

/// Why a task could not be cancelled.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CancelError {
    /// No such task for this requestor (or it expired).
    #[error("task not found: {0}")]
    Unknown(String),
    /// It is terminal already.
    #[error("task {0} is already {1} and cannot be cancelled")]
    Terminal(TaskTag, &'static str),
}

/// The live tasks of the server.
pub struct Tasks {
    records: Mutex<HashMap<TaskTag, Record>>,
    /// Notified on every change (`tasks/result` and subscriptions wait on it).
    changed: Notify,
    ttl: Duration,
    max: usize,
}

/// A fresh task id: 128 random bits from the kernel.
pub fn new_tag() -> Result<TaskTag, CreateError> {
    crate::random::bits_128()
        .map(TaskTag)
        .ok_or(CreateError::NoRandom)
}

/// Parses a wire task id (32 lowercase hex digits).
pub fn parse_tag(s: &str) -> Option<TaskTag> {
    if s.len() != 32 || !s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    u128::from_str_radix(s, 16).ok().map(TaskTag)
}

impl Tasks {
    /// A store keeping each task at most `ttl`, at most `max` at once.
    pub fn new(ttl: Duration, max: usize) -> Tasks {
        Tasks {
            records: Mutex::default(),
            changed: Notify::new(),
            ttl,
            max,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TaskTag, Record>> {
        self.records.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The TTL a task asking for `asked` gets.
    pub fn ttl_for(&self, asked: Option<Duration>) -> Duration {
        asked.map_or(self.ttl, |a| a.min(self.ttl))
    }

    /// Creates a `working` task (no job yet: [`Tasks::set_job`]).
    pub fn create(&self, new: NewTask) -> Result<Created, CreateError> {
        let now = SystemTime::now();
        let ttl = self.ttl_for(new.ttl);
        let stop = CancellationToken::new();
        let snapshot = Snapshot {
            tag: new.tag,
            status: TaskStatus::Working,
            message: new.message,
            created: now,
            updated: now,
            ttl,
            job: None,
            format: new.format,
            revision: new.revision,
        };
        {
            let mut records = self.lock();
            let held = records.values().filter(|r| !r.released).count();
            if held >= self.max {
                return Err(CreateError::Full(held));
            }
            records.insert(
                new.tag,
                Record {
                    requestor: new.requestor,
                    snapshot: snapshot.clone(),
                    stop: stop.clone(),
                    kept: None,
                    released: false,
                },
            );
        }
        crate::metrics::task_moved(None, Some(TaskStatus::Working.as_str()));
        Ok(Created {
            snapshot,
            stop,
            expires: Instant::now() + ttl,
        })
    }

    /// Task `tag` as `requestor` may see it.
    pub fn get(&self, tag: TaskTag, requestor: Requestor) -> Option<Snapshot> {
        self.lock()
            .get(&tag)
            .filter(|r| r.requestor == requestor)
            .map(|r| r.snapshot.clone())
    }

    /// Every task `requestor` may see, oldest first.
    pub fn list(&self, requestor: Requestor) -> Vec<Snapshot> {
        let mut all: Vec<Snapshot> = self
            .lock()
            .values()
            .filter(|r| r.requestor == requestor)
            .map(|r| r.snapshot.clone())
            .collect();
        all.sort_by_key(|s| (s.created, s.tag));
        all
    }

    /// Changes task `tag` with `f` (which returns whether it changed
    /// anything); stamps `lastUpdatedAt` and wakes the waiters if it did.
    fn change(&self, tag: TaskTag, f: impl FnOnce(&mut Record) -> bool) -> Option<Snapshot> {
        let changed = self.change_quietly(tag, f);
        if changed.is_some() {
            self.wake();
        }
        changed
    }

    /// [`Tasks::change`] without waking the waiters: the caller wakes them
    /// ([`Tasks::wake`]) once it has queued what must come first.
    fn change_quietly(
        &self,
        tag: TaskTag,
        f: impl FnOnce(&mut Record) -> bool,
    ) -> Option<Snapshot> {
        let (snapshot, moved) = {
            let mut records = self.lock();
            let r = records.get_mut(&tag)?;
            let before = r.snapshot.status;
            if !f(r) {
                return None;
            }
            r.snapshot.updated = SystemTime::now();
            let after = r.snapshot.status;
            (
                r.snapshot.clone(),
                (before != after).then_some((before, after)),
            )
        };
        if let Some((before, after)) = moved {
            crate::metrics::task_moved(Some(before.as_str()), Some(after.as_str()));
        }
        Some(snapshot)
    }

    /// Wakes whoever waits for a change (`tasks/result`, subscriptions).
    pub fn wake(&self) {
        self.changed.notify_waiters();
    }

    /// Records the job task `tag` owns.
    pub fn set_job(&self, tag: TaskTag, job: Option<JobId>, message: Option<String>) {
        self.change(tag, |r| {
            r.snapshot.job = job;
            r.snapshot.message = message;
            true
        });
    }

    /// Sets task `tag`'s message (the status stays).
    pub fn set_message(&self, tag: TaskTag, message: String) -> Option<Snapshot> {
        self.change(tag, |r| {
            r.snapshot.message = Some(message);
            true
        })
    }

    /// Ends task `tag` as `status` with `message` (and `kept`, the answer
    /// when no job holds it), unless it is terminal already (a cancelled
    /// task stays cancelled): then `None`.
    pub fn finish(
        &self,
        tag: TaskTag,
        status: TaskStatus,
        message: Option<String>,
        kept: Option<Final>,
    ) -> Option<Snapshot> {
        let done = self.finish_quietly(tag, status, message, kept);
        self.wake();
        done
    }

    /// [`Tasks::finish`] without waking the waiters (a driver that pushes
    /// the new status first, so a `tasks/result` answers after it).
    pub fn finish_quietly(
        &self,
        tag: TaskTag,
        status: TaskStatus,
        message: Option<String>,
        kept: Option<Final>,
    ) -> Option<Snapshot> {
        self.change_quietly(tag, |r| {
            if r.snapshot.status.is_terminal() {
                return false;
            }
            r.snapshot.status = status;
            r.snapshot.message = message;
            if kept.is_some() {
                r.kept = kept;
            }
            true
        })
    }

    /// `tasks/cancel`: marks task `tag` cancelled before anything else
    /// happens and wakes its driver, which then ends the job.
    pub fn cancel(&self, tag: TaskTag, requestor: Requestor) -> Result<Snapshot, CancelError> {
        let mut stop = None;
        let changed = self.change(tag, |r| {
            if r.requestor != requestor || r.snapshot.status.is_terminal() {
                return false;
            }
            r.snapshot.status = TaskStatus::Cancelled;
            r.snapshot.message = Some(match r.snapshot.job {
                Some(job) => format!("cancelled: ending {job} (TERM, grace, KILL)"),
                None => "cancelled".into(),
            });
            stop = Some(r.stop.clone());
            true
        });
        match (changed, stop) {
            (Some(snapshot), Some(stop)) => {
                stop.cancel();
                Ok(snapshot)
            }
            _ => match self.get(tag, requestor) {
                Some(s) => Err(CancelError::Terminal(tag, s.status.as_str())),
                None => Err(CancelError::Unknown(tag.to_string())),
            },
        }
    }

    /// Releases cancelled task `tag` once its job is gone (torn down, or
    /// never started): it keeps its status record until its TTL, no longer
    /// counted against `MCP_EXEC_MAX_TASKS`. A task that is not cancelled
    /// is left as it is.
    pub fn release(&self, tag: TaskTag) {
        if let Some(r) = self.lock().get_mut(&tag) {
            r.released |= r.snapshot.status == TaskStatus::Cancelled;
        }
    }

    /// The answer task `tag` keeps, if any.
    pub fn kept(&self, tag: TaskTag) -> Option<Final> {
        self.lock().get(&tag).and_then(|r| r.kept.clone())
    }

    /// Waits until task `tag` (as `requestor` sees it) is terminal; `None`
    /// if there is no such task (or it expired meanwhile).
    pub async fn terminal(&self, tag: TaskTag, requestor: Requestor) -> Option<Snapshot> {
        self.wait_for(|| {
            std::future::ready(match self.get(tag, requestor) {
                None => ControlFlow::Break(None),
                Some(now) if now.status.is_terminal() => ControlFlow::Break(Some(now)),
                Some(_) => ControlFlow::Continue(()),
            })
        })
        .await
    }

    /// The tasks' one "enable the notification, look, wait" loop (as
    /// `jobs`' table has its own): calls `look` and awaits what it returns
    /// until that breaks with the answer, again after every change to any
    /// task. The notification is enabled *before* `look` reads the records,
    /// so a change while it looks (or while its future sends what it saw)
    /// is never lost. Cancel by dropping the future.
    pub async fn wait_for<R, Look>(&self, mut look: impl FnMut() -> Look) -> R
    where
        Look: Future<Output = ControlFlow<R>>,
    {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let ControlFlow::Break(r) = look().await {
                return r;
            }
            changed.await;
        }
    }

    /// Removes task `tag` (its TTL ran out); returns its job, which the
    /// caller removes too.
    pub fn remove(&self, tag: TaskTag) -> Option<JobId> {
        let record = self.lock().remove(&tag)?;
        crate::metrics::task_moved(Some(record.snapshot.status.as_str()), None);
        self.changed.notify_waiters();
        record.snapshot.job
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn try_new(
        tasks: &Tasks,
        requestor: Requestor,
        ttl: Option<Duration>,
    ) -> Result<Created, CreateError> {
        tasks.create(NewTask {
            tag: new_tag().unwrap(),
            requestor,
            format: Format::Augmented,
            revision: Revision::V2025_11_25,
            ttl,
            message: None,
        })
    }

    fn new(tasks: &Tasks, requestor: Requestor, ttl: Option<Duration>) -> Created {
        try_new(tasks, requestor, ttl).unwrap()
    }

    #[test]
    fn task_ids_are_128_random_bits_that_parse_back_and_never_repeat() {
        let a = new_tag().unwrap();
        let b = new_tag().unwrap();
        assert_ne!(a, b);
        let shown = a.to_string();
        assert_eq!(shown.len(), 32);
        assert_eq!(parse_tag(&shown), Some(a));
        for bad in [
            "",
            "job-1",
            &shown[1..],
            &shown.to_uppercase(),
            "g".repeat(32).as_str(),
        ] {
            if bad != shown {
                assert_eq!(parse_tag(bad), None, "{bad}");
            }
        }
    }

    #[test]
    fn an_is_error_result_fails_a_2025_task_and_completes_an_extension_task() {
        assert_eq!(
            TaskStatus::of_result(Format::Augmented, true),
            TaskStatus::Failed
        );
        assert_eq!(
            TaskStatus::of_result(Format::Augmented, false),
            TaskStatus::Completed
        );
        assert_eq!(
            TaskStatus::of_result(Format::Extension, true),
            TaskStatus::Completed
        );
        assert_eq!(
            TaskStatus::of_result(Format::Extension, false),
            TaskStatus::Completed
        );
    }

    #[test]
    fn the_ttl_defaults_to_the_maximum_and_is_capped_by_it() {
        let tasks = Tasks::new(Duration::from_secs(3600), 8);
        assert_eq!(tasks.ttl_for(None), Duration::from_secs(3600));
        assert_eq!(
            tasks.ttl_for(Some(Duration::from_secs(60))),
            Duration::from_secs(60)
        );
        assert_eq!(
            tasks.ttl_for(Some(Duration::from_secs(99_999))),
            Duration::from_secs(3600)
        );
    }

    #[test]
    fn live_tasks_are_capped_with_a_clear_error() {
        let tasks = Tasks::new(Duration::from_secs(60), 2);
        new(&tasks, Requestor::Stdio, None);
        let second = new(&tasks, Requestor::Stdio, None);
        let third = try_new(&tasks, Requestor::Stdio, None);
        let err = third.unwrap_err();
        assert_eq!(err, CreateError::Full(2));
        assert!(err.to_string().contains("MCP_EXEC_MAX_TASKS"), "{err}");
        tasks.remove(second.snapshot.tag);
        assert!(try_new(&tasks, Requestor::Stdio, None).is_ok());
    }

    #[test]
    fn a_released_cancelled_task_frees_its_slot_and_still_answers_cancelled() {
        let tasks = Tasks::new(Duration::from_secs(60), 1);
        let first = new(&tasks, Requestor::Stdio, None).snapshot.tag;
        let another = || {
            tasks.create(NewTask {
                tag: new_tag().unwrap(),
                requestor: Requestor::Stdio,
                format: Format::Augmented,
                revision: Revision::V2025_11_25,
                ttl: None,
                message: None,
            })
        };
        // Not cancelled: release leaves it counted.
        tasks.release(first);
        assert_eq!(another().unwrap_err(), CreateError::Full(1));
        tasks.cancel(first, Requestor::Stdio).unwrap();
        // Cancelled, its job still being ended: still counted.
        assert_eq!(another().unwrap_err(), CreateError::Full(1));
        tasks.release(first);
        let second = another().unwrap().snapshot.tag;
        assert_eq!(
            tasks.get(first, Requestor::Stdio).unwrap().status,
            TaskStatus::Cancelled
        );
        // A finished task holds its result: counted.
        tasks.finish(second, TaskStatus::Completed, None, None);
        tasks.release(second);
        let err = another().unwrap_err();
        assert_eq!(err, CreateError::Full(1));
        assert!(err.to_string().contains("tasks/cancel"), "{err}");
    }

    #[test]
    fn a_task_is_seen_only_by_its_requestor() {
        let tasks = Tasks::new(Duration::from_secs(60), 8);
        let t = new(&tasks, Requestor::HttpToken, None).snapshot.tag;
        assert!(tasks.get(t, Requestor::HttpToken).is_some());
        assert!(tasks.get(t, Requestor::Stdio).is_none());
        assert_eq!(tasks.list(Requestor::HttpToken).len(), 1);
        assert!(tasks.list(Requestor::Stdio).is_empty());
        assert_eq!(
            tasks.cancel(t, Requestor::Stdio).unwrap_err(),
            CancelError::Unknown(t.to_string())
        );
    }

    #[test]
    fn cancelled_is_set_before_the_answer_and_sticks() {
        let tasks = Tasks::new(Duration::from_secs(60), 8);
        let c = new(&tasks, Requestor::Stdio, None);
        let t = c.snapshot.tag;
        tasks.set_job(t, Some(JobId(7)), None);
        let s = tasks.cancel(t, Requestor::Stdio).unwrap();
        assert_eq!(s.status, TaskStatus::Cancelled);
        assert!(c.stop.is_cancelled());
        assert!(s.message.unwrap().contains("job-7"));
        assert!(tasks.finish(t, TaskStatus::Completed, None, None).is_none());
        assert_eq!(
            tasks.get(t, Requestor::Stdio).unwrap().status,
            TaskStatus::Cancelled
        );
        assert_eq!(
            tasks.cancel(t, Requestor::Stdio).unwrap_err(),
            CancelError::Terminal(t, "cancelled")
        );
    }

    #[test]
    fn live_tasks_are_counted_by_status_in_the_metrics() {
        let tasks = Tasks::new(Duration::from_secs(60), 8);
        let t = new(&tasks, Requestor::Stdio, None).snapshot.tag;
        tasks.finish(t, TaskStatus::Failed, None, None);
        let text = crate::metrics::render(&crate::metrics::Snapshot::default());
        assert!(text.contains("# TYPE mcp_exec_tasks gauge"), "{text}");
        assert!(
            text.contains(r#"mcp_exec_tasks{status="failed"}"#),
            "{text}"
        );
        assert!(
            text.contains(r#"mcp_exec_tasks{status="working"}"#),
            "{text}"
        );
        tasks.remove(t);
    }

    #[tokio::test]
    async fn terminal_waits_for_the_end_and_removal_returns_the_job() {
        let tasks = std::sync::Arc::new(Tasks::new(Duration::from_secs(60), 8));
        let t = new(&tasks, Requestor::Stdio, None).snapshot.tag;
        tasks.set_job(t, Some(JobId(3)), None);
        let waiter = {
            let tasks = std::sync::Arc::clone(&tasks);
            tokio::spawn(async move { tasks.terminal(t, Requestor::Stdio).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        tasks.finish(t, TaskStatus::Completed, Some("done".into()), None);
        let s = waiter.await.unwrap().unwrap();
        assert_eq!(s.status, TaskStatus::Completed);
        assert!(s.updated >= s.created);
        assert_eq!(tasks.remove(t), Some(JobId(3)));
        assert!(tasks.get(t, Requestor::Stdio).is_none());
        assert!(tasks.terminal(t, Requestor::Stdio).await.is_none());
    }
}
