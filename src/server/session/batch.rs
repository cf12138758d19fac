//! JSON-RPC batches (2025-03-26 sessions only): one array of answers in
//! request order, bounded.
//!
//! # Invariants
//! - A batch has at most [`BATCH_MEMBERS`] members; past that it is refused
//!   whole with one `-32600`, nothing run.
//! - Its answers together hold at most [`BATCH_BUDGET`] bytes
//!   ([`BatchBudget`]); past that each further member is answered with a
//!   `-32600` saying so: one not yet run is not run, one that ran has its
//!   answer dropped and what it claimed put back.

// One MCP session split by concern: the parent's imports and items are
// this module's too.
use super::*;

/// The most members one JSON-RPC batch may have: past it the batch is
/// refused whole, unrun, with one error (with [`BATCH_BUDGET`], this bounds
/// the answer's error entries too).
pub const BATCH_MEMBERS: usize = 1000;

/// Bytes of answers one batch's array may hold: the outbox's budget, which a
/// single message may take whole.
pub const BATCH_BUDGET: usize = outbox::BUDGET;

/// What is left of one batch's [`BATCH_BUDGET`], shared by its members.
pub(super) struct BatchBudget {
    left: std::sync::atomic::AtomicUsize,
    /// A member's answer did not fit: the members after it are not run.
    exceeded: std::sync::atomic::AtomicBool,
}

impl BatchBudget {
    pub(super) fn new() -> BatchBudget {
        BatchBudget {
            left: std::sync::atomic::AtomicUsize::new(BATCH_BUDGET),
            exceeded: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Takes `bytes` if they are left; otherwise marks the budget exceeded.
    pub(super) fn take(&self, bytes: usize) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let taken = self
            .left
            .fetch_update(Relaxed, Relaxed, |left| left.checked_sub(bytes))
            .is_ok();
        if !taken {
            self.exceeded.store(true, Relaxed);
        }
        taken
    }

    pub(super) fn exceeded(&self) -> bool {
        self.exceeded.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The answer of a member that was not run.
    pub(super) fn not_run(id: Option<&RequestId>) -> String {
        let why = format!(
            "invalid request: this batch's answers reached the {BATCH_BUDGET} bytes one batch answer may hold, so this request was not run; send it again on its own or in a smaller batch"
        );
        protocol::error_line(id, ErrorCode::INVALID_REQUEST, &why)
    }

    /// The answer of a member whose answer of `bytes` did not fit.
    pub(super) fn dropped(id: Option<&RequestId>, bytes: usize) -> String {
        let why = format!(
            "invalid request: the answer to this request ({bytes} bytes) does not fit in what is left of the {BATCH_BUDGET} bytes one batch answer may hold, so it was dropped; send it again on its own (a result that a `wait` or `kill` had claimed is put back for the next one)"
        );
        protocol::error_line(id, ErrorCode::INVALID_REQUEST, &why)
    }
}

impl McpSession {
    pub(super) async fn on_batch(self: &Arc<Self>, items: Vec<Value>, out: &Outbox) {
        let batches = self.revision.get().is_some_and(|r| r.accepts_batches());
        if !batches || items.is_empty() {
            let msg = if batches {
                "invalid request: empty batch"
            } else {
                "invalid request: batches are not accepted in this protocol revision"
            };
            out.send(protocol::error_line(None, ErrorCode::INVALID_REQUEST, msg))
                .await;
            return;
        }
        if items.len() > BATCH_MEMBERS {
            let msg = format!(
                "invalid request: a batch of {} members is more than the {BATCH_MEMBERS} one batch may have; nothing in it was run",
                items.len()
            );
            out.send(protocol::error_line(None, ErrorCode::INVALID_REQUEST, &msg))
                .await;
            return;
        }
        let budget = Arc::new(BatchBudget::new());
        let replies: Vec<RpcReply> = items
            .into_iter()
            .filter_map(|item| self.on_batch_member(Incoming::classify(item), out, &budget))
            .collect();
        if replies.is_empty() {
            return;
        }
        let out = out.clone();
        self.running.spawn(async move {
            let mut array = String::from("[");
            let mut tickets = Vec::new();
            for (i, reply) in replies.into_iter().enumerate() {
                if i > 0 {
                    array.push(',');
                }
                array.push_str(&match reply {
                    RpcReply::Now(line) => line,
                    // Its task already fitted its answer into the budget.
                    RpcReply::Later(task) => match task.await {
                        Ok((message, ticket)) => {
                            tickets.push(ticket);
                            message.into_line()
                        }
                        Err(e) => {
                            let why = format!("request task failed: {e}");
                            protocol::error_line(None, ErrorCode::INTERNAL_ERROR, &why)
                        }
                    },
                });
            }
            array.push(']');
            out.send(array).await;
            drop(tickets);
        });
    }

    /// A batch member: like [`McpSession::on_message`], but a call's response
    /// is collected instead of sent, and every answer must fit in what is
    /// left of the batch's `budget`. A call's task fits its own answer as
    /// soon as it is made, so an answer that does not fit is dropped there
    /// and never waits for the array.
    pub(super) fn on_batch_member(
        self: &Arc<Self>,
        msg: Incoming,
        out: &Outbox,
        budget: &Arc<BatchBudget>,
    ) -> Option<RpcReply> {
        let id = match &msg {
            Incoming::Request { id, .. } => Some(id.clone()),
            Incoming::Invalid { id, .. } => id.clone(),
            Incoming::Notification { .. } | Incoming::Response => None,
        };
        if budget.exceeded() {
            return id.map(|id| RpcReply::Now(BatchBudget::not_run(Some(&id))));
        }
        match msg {
            Incoming::Request { id, method, params } if method == "tools/call" => {
                let era = match self.era_of(&id, &params) {
                    Ok(era) => era,
                    Err(line) => return Some(RpcReply::Now(line)),
                };
                let call = self.start_call(id.clone(), &params, era, out);
                let budget = Arc::clone(budget);
                Some(RpcReply::Later(self.running.spawn(async move {
                    let (message, ticket) = call.await;
                    let line = message
                        .into_line_within(|bytes| budget.take(bytes))
                        .unwrap_or_else(|bytes| BatchBudget::dropped(Some(&id), bytes));
                    (Message::Line(line), ticket)
                })))
            }
            other => match self.on_message(other, out)? {
                RpcReply::Now(line) if !budget.take(line.len()) => {
                    Some(RpcReply::Now(BatchBudget::dropped(id.as_ref(), line.len())))
                }
                reply => Some(reply),
            },
        }
    }
}
