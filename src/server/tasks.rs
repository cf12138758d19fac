//! MCP Tasks on the wire, 2025-11-25 format (SEP-1686; docs/tasks.md): the
//! task-augmented `tools/call` of `execute`, `tasks/get`, `tasks/result`,
//! `tasks/list`, `tasks/cancel` and `notifications/tasks/status`.
//!
//! The record is `crate::tasks`'; the job is `jobs`'. This module parses
//! the requests, renders snapshots and runs one *driver* per task: it waits
//! for the job (sending progress for the task's life when the call carried a
//! `progressToken`), records the final status, runs the verified group kill
//! when the task is cancelled, and at the end of the TTL removes the task
//! and its job. Only sessions of 2025-11-25 see any of it.
//!
//! # The 2026 extension (`io.modelcontextprotocol/tasks`, SEP-2663)
//! Server-directed: a blocking `execute` from a 2026-07-28 request whose
//! client declared the extension launches its job owned by a task from the
//! start; if the job ends before the call would yield the call
//! answers its result as always (and the job leaves); if not, the task
//! record is made and the call answers the flat task with
//! `resultType: "task"` instead of `yielded: true`. Then `tasks/get`
//! (the `DetailedTask`, its result inlined), `tasks/update` (there are
//! never input requests), a cooperative `tasks/cancel` (an empty
//! acknowledgement; the same verified kill), `subscriptions/listen` for
//! `notifications/tasks`. `tasks/result` and `tasks/list` do not exist in
//! that era; progress is not sent for such a task. Its status mapping: a
//! result, `isError` or not, is `completed`; only a JSON-RPC error is
//! `failed`.
//!
//! Status mapping (2025-11-25: "an `isError:true` result makes the task
//! `failed`"): an `execute` result — whatever the exit code, a deadline, a
//! signal, a start failure — is `completed`; an `isError` result (bad
//! arguments, a refused `cwd`, a full queue) is `failed`; `tasks/cancel`
//! makes it `cancelled` before the answer, for good.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::outbox::{Message, Outbox};
use super::progress;
use crate::jobs::{JobId, Owner, Plan, Signalled};
use crate::protocol::era::ResultType;
use crate::protocol::result::CallResult;
use crate::protocol::{self, ErrorCode, RequestId};
use crate::server::app::App;
use crate::tasks::{self, Final, Format, NewTask, Requestor, Snapshot, TaskStatus};
use crate::tools::execute::{self, Begun};
use crate::tools::{self, Call, CallError, Fail, ProgressText, ToolError};

/// The Tasks extension's id (2026-07-28 `capabilities.extensions`).
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The `_meta` key of a task's result.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The `_meta` key of the hint a host may give the model at once.
const IMMEDIATE_RESPONSE: &str = "io.modelcontextprotocol/model-immediate-response";

/// Tasks per `tasks/list` page.
const PAGE: usize = 100;

/// The `tasks` capability of an `initialize` result (`list` only where
/// requestors can be told apart).
pub fn capability(requestor: Requestor) -> Value {
    let mut c = json!({"cancel": {}, "requests": {"tools": {"call": {}}}});
    if requestor.identified()
        && let Some(m) = c.as_object_mut()
    {
        let mut with_list = serde_json::Map::new();
        with_list.insert("list".into(), json!({}));
        with_list.extend(std::mem::take(m));
        *m = with_list;
    }
    c
}

/// An ISO 8601 time with milliseconds.
fn stamp(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// `Task` as 2025-11-25 writes it.
pub fn task_json(s: &Snapshot) -> Value {
    task_json_keyed(s, "ttl", "pollInterval")
}

/// `Task` as the extension writes it (flat; `ttlMs`, `pollIntervalMs`).
fn task_json_2026(s: &Snapshot) -> Value {
    task_json_keyed(s, "ttlMs", "pollIntervalMs")
}

/// A `Task` whose two durations (in milliseconds) carry the names of its
/// format.
fn task_json_keyed(s: &Snapshot, ttl: &str, poll_interval: &str) -> Value {
    let mut v = json!({
        "taskId": s.tag.to_string(),
        "status": s.status.as_str(),
    });
    if let Some(m) = &s.message {
        v["statusMessage"] = json!(m);
    }
    v["createdAt"] = json!(stamp(s.created));
    v["lastUpdatedAt"] = json!(stamp(s.updated));
    v[ttl] = json!(u64::try_from(s.ttl.as_millis()).unwrap_or(u64::MAX));
    v[poll_interval] = json!(tasks::POLL_INTERVAL.as_millis() as u64);
    v
}

/// Where a task's notifications go: the creating request's outbox, and its
/// progress token.
#[derive(Clone)]
pub struct Reach {
    /// The session's outbox at the time of the call.
    pub out: Outbox,
    /// The call's `progressToken`, if any.
    pub token: Option<Value>,
}

/// Runs a `tools/call`: as a task when the session's revision has task
/// augmentation and the params carry `task`, else as a plain call.
pub async fn dispatch(
    app: &Arc<App>,
    call: &Call,
    params: &Value,
    requestor: Requestor,
    reach: Reach,
) -> Result<CallResult, CallError> {
    let task = params.get("task").filter(|t| t.is_object());
    let execute = params.get("name").and_then(Value::as_str) == Some(execute::TOOL.name);
    match task {
        Some(task) if call.revision.has_task_augmentation() => {
            create(app, call, params, task, requestor, reach).await
        }
        _ if execute && call.revision.is_modern() && call.client.has_extension(EXTENSION) => {
            server_directed(app, call, params, requestor, reach).await
        }
        _ => tools::dispatch(call, params).await,
    }
}

/// A task-augmented `tools/call`: answers a `CreateTaskResult` once the job
/// is launched (a `tasks/get` for it resolves by then).
async fn create(
    app: &Arc<App>,
    call: &Call,
    params: &Value,
    task: &Value,
    requestor: Requestor,
    reach: Reach,
) -> Result<CallResult, CallError> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    if name != execute::TOOL.name {
        if tools::visible(call.revision).any(|t| t.name == name) {
            return Err(CallError::Protocol(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "tool {name} does not support task-augmented calls (its execution.taskSupport is forbidden; only execute's is optional)"
                ),
            ));
        }
        // Unknown tool, bad params: as a plain call answers them.
        return tools::dispatch(call, params).await;
    }
    let ttl = task
        .get("ttl")
        .and_then(Value::as_f64)
        .filter(|ms| ms.is_finite() && *ms > 0.0)
        .map(|ms| Duration::from_secs_f64(ms.min(1e12) / 1000.0));
    let protocol_error =
        |e: tasks::CreateError| CallError::Protocol(ErrorCode::INTERNAL_ERROR, e.to_string());
    let tag = tasks::new_tag().map_err(protocol_error)?;
    let created = app
        .tasks
        .create(NewTask {
            tag,
            requestor,
            format: Format::Augmented,
            revision: call.revision,
            ttl,
            message: None,
        })
        .map_err(protocol_error)?;
    let empty = tools::Args::new();
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Ok(&empty),
        Some(Value::Object(m)) => Ok(m),
        Some(_) => Err(ToolError::invalid("\"arguments\" must be an object")),
    };
    let begun =
        match args.and_then(|a| execute::parse(a, &app.config, &app.job_policy, call.revision)) {
            Ok(mut req) => {
                req.launch.owner = Owner::Task(tag);
                execute::begin(call, req.launch).await
            }
            Err(e) => Err(Fail::Tool(e)),
        };
    let structured = call.revision.has_structured_content();
    let first = created.snapshot.clone();
    let hint;
    match begun {
        Ok(Begun::Running(id) | Begun::StdinFailed(id, _)) => {
            let message = format!("{id} running");
            app.tasks.set_job(tag, Some(id), Some(message));
            hint = format!(
                "Started {id} as task {tag}. Its result comes with the task; meanwhile status and output with job_id \"{id}\" show it, and kill ends it."
            );
            let driver = drive(Arc::clone(app), tag, id, created, requestor, reach);
            tokio::spawn(driver);
        }
        Ok(Begun::Answered(payload)) => {
            let result = CallResult::Success {
                payload,
                structured,
            };
            hint = "The command ended at once; its result comes with the task.".into();
            end_at_once(app, tag, TaskStatus::Completed, &result, created);
        }
        Err(Fail::Tool(e)) => {
            let text = e.to_string();
            hint = text.clone();
            let result = CallResult::Error(text);
            end_at_once(app, tag, TaskStatus::Failed, &result, created);
        }
        Err(Fail::Cancelled) => {
            hint = "The call was cancelled before its job started.".into();
            let kept = Final::Error {
                code: ErrorCode::REQUEST_CANCELLED.0,
                message: "request cancelled".into(),
            };
            app.tasks.finish(
                tag,
                TaskStatus::Cancelled,
                Some("cancelled".into()),
                Some(kept),
            );
            // It never had a job.
            app.tasks.release(tag);
            tokio::spawn(expire(Arc::clone(app), tag, created.expires));
        }
    }
    let snapshot = app.tasks.get(tag, requestor).unwrap_or(first);
    Ok(CallResult::Raw(
        json!({
            "task": task_json(&snapshot),
            "_meta": {IMMEDIATE_RESPONSE: hint},
        }),
        ResultType::Complete,
    ))
}

/// A task whose call was answered without a job: it keeps the answer.
fn end_at_once(
    app: &Arc<App>,
    tag: crate::jobs::TaskTag,
    status: TaskStatus,
    result: &CallResult,
    created: tasks::Created,
) {
    let value = serde_json::to_value(result).unwrap_or(Value::Null);
    let message = match result {
        CallResult::Error(text) => text.clone(),
        _ => "ended at once".into(),
    };
    // Born terminal: its status is in the create answer, no transition to push.
    app.tasks
        .finish(tag, status, Some(message), Some(Final::Result(value)));
    tokio::spawn(expire(Arc::clone(app), tag, created.expires));
}

/// Sends `notifications/tasks/status` with the full task (2025-11-25 tasks
/// only).
async fn notify(out: &Outbox, s: &Snapshot) {
    if s.format != Format::Augmented {
        return;
    }
    let line = protocol::notification_line("notifications/tasks/status", &task_json(s));
    out.send(Message::Notification(line)).await;
}

/// Removes task `tag` at `expires` (it has no job).
async fn expire(app: Arc<App>, tag: crate::jobs::TaskTag, expires: tokio::time::Instant) {
    tokio::time::sleep_until(expires).await;
    if let Some(job) = app.tasks.remove(tag) {
        app.jobs.teardown(job).await;
    }
}

/// How a task's wait for its job ended.
enum Ended {
    /// The job is terminal (`false`: it left the table first).
    Settled(bool),
    /// `tasks/cancel`.
    Cancelled,
    /// The TTL ran out first.
    Expired,
}

/// The life of a task that owns job `id`: until terminal (with progress),
/// then until its TTL; a cancel runs the verified kill and removes the job.
async fn drive(
    app: Arc<App>,
    tag: crate::jobs::TaskTag,
    id: JobId,
    created: tasks::Created,
    requestor: Requestor,
    reach: Reach,
) {
    let tasks::Created { stop, expires, .. } = created;
    let settled = app.jobs.settled(id);
    let text = ProgressText::default();
    text.set(format!("{id} still running"));
    let every = app.config.progress_interval;
    let waited = async {
        match &reach.token {
            Some(t) => progress::with_ticker(settled, &text, t.clone(), every, &reach.out).await,
            None => settled.await,
        }
    };
    // Boxed, as the kill and the teardown below: a task spends most of its
    // life in the last sleep, and the future it is parked in is only as big
    // as its largest state (10,000 live tasks: the target is 4 KiB each
    // above their jobs, docs/tasks.md "Figures").
    let waited = Box::pin(waited);
    let ended = tokio::select! {
        biased;
        () = stop.cancelled() => Ended::Cancelled,
        () = tokio::time::sleep_until(expires) => Ended::Expired,
        done = waited => Ended::Settled(done),
    };
    match ended {
        Ended::Settled(true) => {
            let now = app.tasks.get(tag, requestor);
            let result = now
                .as_ref()
                .and_then(|s| execute::kept_result(app.as_ref(), s.revision, id));
            let format = now.map_or(Format::Augmented, |s| s.format);
            let status =
                TaskStatus::of_result(format, matches!(result, Some(CallResult::Error(_))));
            let message = app
                .jobs
                .status(id, crate::jobs::result::Fields::PartTwo)
                .map(|s| summary(id, &s));
            // Pushed before `tasks/result` waiters wake: the status
            // notification comes first on the wire.
            if let Some(s) = app.tasks.finish_quietly(tag, status, message, None) {
                notify(&reach.out, &s).await;
            }
            app.tasks.wake();
        }
        Ended::Settled(false) => {
            let kept = Final::Error {
                code: ErrorCode::INTERNAL_ERROR.0,
                message: format!("{id} left the job table before it ended (server shutdown)"),
            };
            let message = format!("{id} is gone");
            if let Some(s) = app
                .tasks
                .finish(tag, TaskStatus::Failed, Some(message), Some(kept))
            {
                notify(&reach.out, &s).await;
            }
        }
        Ended::Cancelled => {
            // The status changed (to cancelled) when tasks/cancel answered;
            // the kill's report is a message, read with tasks/get.
            let report = Box::pin(kill(&app, id)).await;
            Box::pin(app.jobs.teardown(id)).await;
            app.tasks.set_message(tag, report);
            // Its job is gone: the status record alone stays, uncounted.
            app.tasks.release(tag);
        }
        Ended::Expired => {}
    }
    drop(stop);
    tokio::time::sleep_until(expires).await;
    if let Some(job) = app.tasks.remove(tag) {
        Box::pin(app.jobs.teardown(job)).await;
    }
}

/// A terminal job's status line: `job-7 exited 0`.
fn summary(id: JobId, s: &crate::jobs::result::JobStatus) -> String {
    let v = serde_json::to_value(s).unwrap_or(Value::Null);
    let state = v.get("state").and_then(Value::as_str).unwrap_or("ended");
    match v.get("exit_code").and_then(Value::as_i64) {
        Some(code) => format!("{id} {state}: exit code {code}"),
        None => format!("{id} {state}"),
    }
}

/// `tasks/cancel`'s verified group kill (TERM, the grace, KILL): what
/// happened, for `statusMessage`.
async fn kill(app: &App, id: JobId) -> String {
    let grace = app.config.shutdown_grace;
    match app.jobs.signal(id, Plan::Assured, grace, |_| {}).await {
        Ok(Signalled::CancelledBeforeStart(_)) => {
            format!("cancelled: {id} was still queued and never ran")
        }
        Ok(Signalled::AlreadyTerminated(_)) => {
            format!("cancelled: {id} had already ended")
        }
        Ok(Signalled::Died {
            sent, escalated, ..
        }) => {
            let how = if escalated {
                format!("{sent} after TERM's grace")
            } else {
                sent.to_string()
            };
            format!("cancelled: {id}'s process group is dead ({how}), verified")
        }
        Ok(Signalled::Survived {
            sent,
            pgid,
            members,
            ..
        }) => {
            let pids: Vec<String> = members.iter().map(|m| m.pid.to_string()).collect();
            format!(
                "cancelled: {id}'s process group {pgid} outlived {sent}: still alive: {}",
                pids.join(", ")
            )
        }
        Err(e) => format!("cancelled: {id}: {e}"),
    }
}

/// The `taskId` param, parsed; the error line for a bad one.
fn task_param(id: &RequestId, params: &Value) -> Result<crate::jobs::TaskTag, String> {
    let raw = params.get("taskId").and_then(Value::as_str);
    raw.and_then(tasks::parse_tag).ok_or_else(|| {
        let shown = raw.map_or_else(|| "(none)".into(), |r| format!("{r:?}"));
        protocol::error_line(
            Some(id),
            ErrorCode::INVALID_PARAMS,
            &format!("task not found: {shown}"),
        )
    })
}

fn not_found(id: &RequestId, tag: crate::jobs::TaskTag) -> String {
    protocol::error_line(
        Some(id),
        ErrorCode::INVALID_PARAMS,
        &format!("task not found: {tag} (unknown, expired, or another requestor's)"),
    )
}

/// `tasks/get`: the task's snapshot.
pub fn get(app: &App, requestor: Requestor, id: &RequestId, params: &Value) -> String {
    let tag = match task_param(id, params) {
        Ok(t) => t,
        Err(line) => return line,
    };
    match app.tasks.get(tag, requestor) {
        Some(s) => protocol::success_line(id, &task_json(&s)),
        None => not_found(id, tag),
    }
}

/// `tasks/list`: the requestor's tasks, oldest first, [`PAGE`] a page.
pub fn list(app: &App, requestor: Requestor, id: &RequestId, params: &Value) -> String {
    let all = app.tasks.list(requestor);
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(c) => match c.as_str().and_then(|c| c.parse::<usize>().ok()) {
            Some(n) if n <= all.len() => n,
            _ => {
                return protocol::error_line(
                    Some(id),
                    ErrorCode::INVALID_PARAMS,
                    &format!("invalid cursor: {c}"),
                );
            }
        },
    };
    let page: Vec<Value> = all.iter().skip(start).take(PAGE).map(task_json).collect();
    let mut result = json!({ "tasks": page });
    if start + PAGE < all.len() {
        result["nextCursor"] = json!((start + PAGE).to_string());
    }
    protocol::success_line(id, &result)
}

/// `tasks/cancel`: `cancelled` before this answer; the task's driver then
/// ends the job (TERM, grace, KILL, verified) and reports in
/// `statusMessage`.
pub fn cancel(app: &App, requestor: Requestor, id: &RequestId, params: &Value) -> String {
    let tag = match task_param(id, params) {
        Ok(t) => t,
        Err(line) => return line,
    };
    match app.tasks.cancel(tag, requestor) {
        Ok(s) => protocol::success_line(id, &task_json(&s)),
        Err(tasks::CancelError::Unknown(_)) => not_found(id, tag),
        Err(e) => protocol::error_line(Some(id), ErrorCode::INVALID_PARAMS, &e.to_string()),
    }
}

/// `tasks/result`: blocks until the task is terminal, then answers what
/// the `execute` call would have answered, with the related-task `_meta`;
/// the same on every call until the TTL.
pub async fn result(app: &App, requestor: Requestor, id: &RequestId, params: &Value) -> String {
    let tag = match task_param(id, params) {
        Ok(t) => t,
        Err(line) => return line,
    };
    let Some(s) = app.tasks.terminal(tag, requestor).await else {
        return not_found(id, tag);
    };
    let answer = match (s.status, app.tasks.kept(tag), s.job) {
        (_, Some(kept), _) => kept,
        (TaskStatus::Cancelled, None, _) => Final::Error {
            code: ErrorCode::REQUEST_CANCELLED.0,
            message: format!("task {tag} was cancelled"),
        },
        (_, None, Some(job)) => match execute::kept_result(app, s.revision, job) {
            Some(r) => Final::Result(serde_json::to_value(&r).unwrap_or(Value::Null)),
            None => Final::Error {
                code: ErrorCode::INTERNAL_ERROR.0,
                message: format!("{job}'s result is gone"),
            },
        },
        (_, None, None) => Final::Error {
            code: ErrorCode::INTERNAL_ERROR.0,
            message: "the task has no result".into(),
        },
    };
    match answer {
        Final::Result(mut v) => {
            if let Some(m) = v.as_object_mut() {
                m.insert(
                    "_meta".into(),
                    json!({RELATED_TASK: {"taskId": tag.to_string()}}),
                );
            }
            protocol::success_line(id, &v)
        }
        Final::Error { code, message } => protocol::error_line(Some(id), ErrorCode(code), &message),
    }
}

// ---------------------------------------------------------------------------
// The 2026 extension (SEP-2663).
// ---------------------------------------------------------------------------

/// A 2026-07-28 `execute` whose client declared the extension: as a
/// blocking `execute`, except that where it would yield it answers a task.
async fn server_directed(
    app: &Arc<App>,
    call: &Call,
    params: &Value,
    requestor: Requestor,
    reach: Reach,
) -> Result<CallResult, CallError> {
    let empty = tools::Args::new();
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        // As a plain call answers it.
        Some(_) => return tools::dispatch(call, params).await,
    };
    let structured = call.revision.has_structured_content();
    let as_result = |outcome: Result<crate::protocol::result::Payload, Fail>| match outcome {
        Ok(payload) => Ok(CallResult::Success {
            payload,
            structured,
        }),
        Err(Fail::Tool(e)) => Ok(CallResult::Error(e.to_string())),
        Err(Fail::Cancelled) => Err(CallError::Cancelled),
    };
    let mut req = match execute::parse(args, &app.config, &app.job_policy, call.revision) {
        Ok(req) if !req.nowait => req,
        // `nowait` asks for the job id, not for a task.
        Ok(_) => return tools::dispatch(call, params).await,
        Err(e) => return as_result(Err(Fail::Tool(e))),
    };
    let tag = tasks::new_tag()
        .map_err(|e| CallError::Protocol(ErrorCode::INTERNAL_ERROR, e.to_string()))?;
    req.launch.owner = Owner::Task(tag);
    let yield_after = req.yield_after;
    let id = match execute::begin(call, req.launch).await {
        Ok(Begun::Running(id)) => id,
        Ok(Begun::Answered(payload) | Begun::StdinFailed(_, payload)) => {
            return as_result(Ok(payload));
        }
        Err(e) => return as_result(Err(e)),
    };
    call.progress.set(format!("{id} still running"));
    let yield_at = yield_after.map(|y| tokio::time::Instant::now() + y);
    let ended = async {
        match yield_at {
            Some(at) => tokio::time::timeout_at(at, app.jobs.settled(id)).await.ok(),
            None => Some(app.jobs.settled(id).await),
        }
    };
    let settled = tokio::select! {
        biased;
        () = call.cancel.cancelled() => {
            if !call.shutdown.is_cancelled() {
                app.jobs.teardown(id).await;
            }
            return Err(CallError::Cancelled);
        }
        s = ended => s,
    };
    let created = match settled {
        None => app.tasks.create(NewTask {
            tag,
            requestor,
            format: Format::Extension,
            revision: call.revision,
            ttl: None,
            message: Some(format!("{id} running")),
        }),
        Some(_) => Err(tasks::CreateError::Full(0)),
    };
    let created = match created {
        Ok(created) => created,
        // It ended before the yield (or no task can be made: then the call
        // blocks as `execute` with no yield would): the result, and the job
        // leaves with it.
        Err(e) => {
            if settled.is_none() {
                tracing::warn!(error = %e, job = %id, "no task for a yielding execute: blocking on");
                tokio::select! {
                    () = call.cancel.cancelled() => {
                        app.jobs.teardown(id).await;
                        return Err(CallError::Cancelled);
                    }
                    _ = app.jobs.settled(id) => {}
                }
            }
            let result = execute::kept_result(app.as_ref(), call.revision, id);
            app.jobs.teardown(id).await;
            return result.ok_or(CallError::Protocol(
                ErrorCode::INTERNAL_ERROR,
                format!("{id} left the job table before it ended"),
            ));
        }
    };
    app.tasks
        .set_job(tag, Some(id), Some(format!("{id} running")));
    let snapshot = app
        .tasks
        .get(tag, requestor)
        .unwrap_or(created.snapshot.clone());
    let quiet = Reach {
        out: reach.out,
        token: None,
    };
    tokio::spawn(drive(Arc::clone(app), tag, id, created, requestor, quiet));
    Ok(CallResult::Raw(task_json_2026(&snapshot), ResultType::Task))
}

/// The extension's `DetailedTask`: the task with its result (`completed`)
/// or error (`failed`) inlined, no related-task `_meta`.
fn detailed(app: &App, s: &Snapshot) -> Value {
    let mut v = task_json_2026(s);
    let answer = match (s.status, app.tasks.kept(s.tag), s.job) {
        (TaskStatus::Working | TaskStatus::Cancelled, ..) => None,
        (_, Some(kept), _) => Some(kept),
        (_, None, Some(job)) => execute::kept_result(app, s.revision, job)
            .map(|r| Final::Result(serde_json::to_value(&r).unwrap_or(Value::Null))),
        (_, None, None) => None,
    };
    match answer {
        Some(Final::Result(r)) => {
            v["status"] = json!(TaskStatus::Completed.as_str());
            v["result"] = r;
        }
        Some(Final::Error { code, message }) => {
            v["status"] = json!(TaskStatus::Failed.as_str());
            v["error"] = json!({"code": code, "message": message});
        }
        None => {}
    }
    v
}

/// A modern result line: `value` with `resultType` and the server's `_meta`.
fn modern_line(
    id: &RequestId,
    revision: crate::protocol::version::Revision,
    mut value: Value,
) -> String {
    crate::protocol::era::stamp(revision, ResultType::Complete, &mut value);
    protocol::success_line(id, &value)
}

/// The extension's `tasks/get`, `tasks/update`, `tasks/cancel`.
pub fn modern(
    app: &App,
    revision: crate::protocol::version::Revision,
    requestor: Requestor,
    method: &str,
    id: &RequestId,
    params: &Value,
) -> String {
    let tag = match task_param(id, params) {
        Ok(t) => t,
        Err(line) => return line,
    };
    let Some(s) = app.tasks.get(tag, requestor) else {
        return not_found(id, tag);
    };
    match method {
        "tasks/get" => modern_line(id, revision, detailed(app, &s)),
        "tasks/update" => {
            let responses = params.get("inputResponses").and_then(Value::as_object);
            match responses {
                Some(r) if !r.is_empty() => protocol::error_line(
                    Some(id),
                    ErrorCode::INVALID_PARAMS,
                    &format!("task {tag} has no outstanding input requests"),
                ),
                _ => modern_line(id, revision, json!({})),
            }
        }
        // Cooperative: a terminal task is acknowledged too, and stays as it is.
        _ => {
            let _ = app.tasks.cancel(tag, requestor);
            modern_line(id, revision, json!({}))
        }
    }
}

/// `subscriptions/listen` for `notifications/tasks`: acknowledges the
/// requestor's tasks among `notifications.taskIds`, sends the full
/// `DetailedTask` of each on every change, and answers once each of them is
/// terminal (or gone). Cancel by dropping the future.
pub async fn listen(
    app: &App,
    revision: crate::protocol::version::Revision,
    requestor: Requestor,
    id: &RequestId,
    params: &Value,
    out: &Outbox,
) -> String {
    let asked = params
        .get("notifications")
        .and_then(|n| n.get("taskIds"))
        .and_then(Value::as_array);
    let tags: Vec<crate::jobs::TaskTag> = asked
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter_map(tasks::parse_tag)
        .filter(|t| app.tasks.get(*t, requestor).is_some())
        .collect();
    let ids: Vec<String> = tags.iter().map(ToString::to_string).collect();
    let ack = protocol::notification_line(
        "notifications/subscriptions/acknowledged",
        &json!({"notifications": {"taskIds": ids}}),
    );
    out.send(Message::Notification(ack)).await;
    // When each task was last sent; the look's future reads and marks it
    // between its sends (a lock held for neither).
    let seen: std::sync::Mutex<
        std::collections::HashMap<crate::jobs::TaskTag, std::time::SystemTime>,
    > = std::sync::Mutex::default();
    let (seen, tags) = (&seen, &tags);
    app.tasks
        .wait_for(|| async move {
            let mut open = false;
            for tag in tags {
                let Some(s) = app.tasks.get(*tag, requestor) else {
                    continue;
                };
                open |= !s.status.is_terminal();
                let fresh = {
                    let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
                    seen.insert(*tag, s.updated) != Some(s.updated)
                };
                if fresh {
                    let line =
                        protocol::notification_line("notifications/tasks", &detailed(app, &s));
                    out.send(Message::Notification(line)).await;
                }
            }
            if open {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        })
        .await;
    modern_line(id, revision, json!({}))
}
