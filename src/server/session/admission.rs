//! Admission and backpressure of a session's calls, and each call's start.
//!
//! Owns [`ANSWER_BUDGET`] (the bytes of answers a session's job-starting
//! calls may hold before their answers reach the outbox), the one turn at a
//! time in which such a call takes its first step ([`FirstStep`]), and
//! [`McpSession::start_call`], which registers a call as in flight before
//! its task exists and runs it: admitted, dispatched (as a task when asked),
//! its progress ticking, its answer queued.
//!
//! # Invariants
//! - A call starts its work only while its outbox has room, and a call that
//!   may start a job only while [`ANSWER_BUDGET`] has [`ANSWER_FLOOR`] free;
//!   its ticket is dropped only once its answer is queued.
//! - An answer never waits for this budget (it takes only what is free), so
//!   no answer can deadlock another.
//! - A call is in flight (cancellable) from before its task is spawned; at
//!   the session's end it answers `-32800`, after at most
//!   [`ANSWER_BACKSTOP`] if it is busy in a non-blocking step.

// One MCP session split by concern: the parent's imports and items are
// this module's too.
use super::*;
use crate::protocol::result::CallResult;

/// How long a call may run on after its session ended before it is
/// answered `-32800` regardless (a call busy in a non-blocking step
/// finishes first).
pub(super) const ANSWER_BACKSTOP: Duration = Duration::from_millis(500);

/// Bytes of answers that one session's calls that may start a job
/// (`execute`) hold before their answers are queued in the outbox (whose
/// own budget takes over then). Such a call is admitted only while this
/// budget has [`ANSWER_FLOOR`] free, which it reserves; once its answer is
/// made it holds the answer's real size instead (taking only what is free:
/// an answer never waits for this budget, so none can deadlock another).
/// And the session's job-starting calls start one after another
/// ([`FirstStep`]), each after the outbox has room again, so each admission
/// sees the answers made until then.
///
/// So a client that stops reading makes the server hold the outbox, about
/// this budget of answers, and the answers of the calls admitted before
/// those were made: at most `ANSWER_BUDGET / ANSWER_FLOOR` = 200 of them,
/// each a job bounded as every job is (`MCP_EXEC_MAX_RUNNING`/`MAX_QUEUED`,
/// `max_output_bytes`). A client that reads gets a burst of up to 200
/// parallel blocking calls run in parallel. Why 200, not more: the server
/// cannot tell a burst of `sleep`s from a burst of big printers before
/// their jobs end, so that many answers may all be big at once (500 calls
/// of 200 kB each, unread, peak at 53 MiB here, 57 MiB as PID 1; the test
/// bound is 64 MiB). A fixed cap of 32 calls ran a burst of 200
/// `sleep 0.5` in seven rounds.
pub const ANSWER_BUDGET: usize = outbox::BUDGET;

/// What a job-starting call is assumed to hold until its answer is made
/// (about 41 KiB: 200 calls in flight at once before any answer).
pub const ANSWER_FLOOR: usize = ANSWER_BUDGET / 200;

/// A job-starting call's work, its first step taken while it holds its
/// session's turn to start. A tool starts its job in its first step (the
/// job service's submit is synchronous), so a session starts its jobs one
/// after another, as a shell does, and the next admission sees the answers
/// made meanwhile.
pub(super) struct FirstStep<F> {
    call: F,
    turn: Option<OwnedMutexGuard<()>>,
}

impl<F: Future + Unpin> Future for FirstStep<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let step = Pin::new(&mut this.call).poll(cx);
        this.turn = None;
        step
    }
}

impl McpSession {
    /// Resizes a job-starting call's ticket to its answer's `cost`: gives
    /// back what the answer does not need, takes what it needs more as far
    /// as the budget has it free (never waiting).
    pub(super) fn hold_answer(&self, ticket: &mut OwnedSemaphorePermit, cost: usize) {
        let held = ticket.num_permits();
        if cost < held {
            drop(ticket.split(held - cost));
            return;
        }
        let more = (cost - held).min(self.answers.available_permits());
        if let Ok(more) = Arc::clone(&self.answers).try_acquire_many_owned(more as u32) {
            ticket.merge(more);
        }
    }

    /// Registers the call as in flight (before its task exists, so a cancel
    /// that follows it on the wire finds it) and returns the future that
    /// runs it and yields its response line. Progress notifications go to
    /// `out`.
    pub(super) fn start_call(
        self: &Arc<Self>,
        id: RequestId,
        params: &Value,
        era: Era,
        out: &Outbox,
    ) -> impl Future<Output = Answer> + Send + 'static {
        let cancel = self.track(&id);
        let session = Arc::clone(self);
        let out = out.clone();
        let token = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| !t.is_null())
            .cloned();
        let params = params.clone();
        let requestor = self.requestor();
        let reach = crate::server::tasks::Reach {
            out: out.clone(),
            token: token.clone(),
        };
        async move {
            let call = Call {
                host: Arc::clone(&session.app) as Arc<dyn tools::Host>,
                cancel: cancel.clone(),
                shutdown: session.shutdown.clone(),
                progress: ProgressText::default(),
                revision: era.revision,
                client: era.client,
            };
            let result_type = era.revision.is_modern();
            let admitted = session.admit(&out, &params);
            let mut ticket = None;
            let run = async {
                let turn;
                (ticket, turn) = tokio::select! {
                    t = admitted => t,
                    () = call.cancel.cancelled() => return Err(CallError::Cancelled),
                };
                let work = FirstStep {
                    call: Box::pin(crate::server::tasks::dispatch(
                        &session.app,
                        &call,
                        &params,
                        requestor,
                        reach,
                    )),
                    turn,
                };
                match token {
                    Some(t) => {
                        let every = session.app.config.progress_interval;
                        progress::with_ticker(work, &call.progress, t, every, &out).await
                    }
                    None => work.await,
                }
            };
            let ended = session.calls.clone();
            // Backstop: a call that does not reach a blocking point soon
            // after its session ended is answered anyway. (A call cancelled
            // on its own, e.g. an `execute` tearing its job down, answers
            // when it is done.)
            let backstop = || async {
                ended.cancelled().await;
                tokio::time::sleep(ANSWER_BACKSTOP).await;
            };
            // A block: the call's future (which borrows `ticket`) ends with it.
            let outcome = {
                let mut run = std::pin::pin!(run);
                let mut outcome = tokio::select! {
                    biased;
                    () = backstop() => Some(Err(CallError::Cancelled)),
                    // Nobody can read the answer any more (an HTTP client went
                    // away): up to 2025-11-25 the call is detached, not
                    // cancelled. It is dropped where it waits; tools
                    // claim a job's result only after their wait, so its job
                    // and result stay in the table.
                    () = out.closed() => None,
                    r = &mut run => Some(r),
                };
                // In 2026-07-28 the closed stream IS the cancellation: the
                // call is cancelled as by `notifications/cancelled` and runs
                // to its end (a blocking `execute` tears its job down).
                if outcome.is_none() && call.revision.closed_stream_cancels() {
                    tracing::debug!(request = %id, "response stream closed: request cancelled");
                    call.cancel.cancel();
                    tokio::select! {
                        biased;
                        () = backstop() => {}
                        _ = &mut run => {}
                    }
                    outcome = Some(Err(CallError::Cancelled));
                }
                outcome
            };
            session
                .in_flight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            let message = answer(session.transport, id, outcome, result_type);
            if let Some(t) = ticket.as_mut() {
                session.hold_answer(t, message.cost());
            }
            (message, ticket)
        }
    }

    /// A call's admission: it starts its work only while its outbox has
    /// room, and a call that may start a job only while the session's
    /// answers leave room for one more ([`ANSWER_BUDGET`]), in the session's
    /// one turn to start: so the jobs and answers that a client that does
    /// not read makes the server hold are bounded, as well as its queued
    /// messages. Gives the call's ticket and turn (both `None` for a call
    /// that starts no job).
    async fn admit(
        self: &Arc<Self>,
        out: &Outbox,
        params: &Value,
    ) -> (Option<OwnedSemaphorePermit>, Option<OwnedMutexGuard<()>>) {
        out.room().await;
        if !tools::starts_jobs(params) {
            return (None, None);
        }
        let turn = Arc::clone(&self.starting).lock_owned().await;
        // Again in its turn: the calls before it may have filled it.
        out.room().await;
        let ticket = Arc::clone(&self.answers)
            .acquire_many_owned(ANSWER_FLOOR as u32)
            .await
            .ok();
        (ticket, Some(turn))
    }
}

/// The answer to call `id` from how it ended (`None`: detached, its client
/// gone), counted in the request metric of `transport`; `result_type` is
/// whether the era stamps `resultType`.
fn answer(
    transport: &'static str,
    id: RequestId,
    outcome: Option<Result<CallResult, CallError>>,
    result_type: bool,
) -> Message {
    let label = match &outcome {
        Some(Ok(_)) => "ok",
        None => "detached",
        Some(Err(CallError::Cancelled)) => "cancelled",
        Some(Err(CallError::Protocol(..))) => "error",
    };
    crate::metrics::request(transport, "tools/call", label);
    match outcome {
        Some(Ok(result)) => Message::Response {
            result_type: result_type.then(|| result.result_type()),
            id,
            result,
        },
        None => {
            tracing::debug!(request = %id, "call detached: its client is gone");
            Message::Line(protocol::error_line(
                Some(&id),
                ErrorCode::REQUEST_CANCELLED,
                "request detached",
            ))
        }
        Some(Err(CallError::Cancelled)) => Message::Line(protocol::error_line(
            Some(&id),
            ErrorCode::REQUEST_CANCELLED,
            "request cancelled",
        )),
        Some(Err(CallError::Protocol(code, msg))) => {
            Message::Line(protocol::error_line(Some(&id), code, &msg))
        }
    }
}
