//! The outgoing queue of one transport: whole messages, bounded in bytes.
//!
//! Every message (a response line, a notification line) takes permits worth
//! its size from a byte budget before it is queued and gives them back once
//! the transport has written it. While the budget is used up, senders wait;
//! while most of it is used, the transport's reader does not take the next
//! request and calls already read do not start ([`Outbox::room`]). So a
//! client that does not read makes the server hold about one budget of
//! answers plus the jobs of the calls that had started before the queue
//! filled, never an unbounded amount. Messages keep their order: the semaphore is fair, so
//! permits are granted in the order they were asked for.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use crate::protocol::era::{ResultType, Stamped};
use crate::protocol::result::CallResult;
use crate::protocol::{self, RequestId};

/// Bytes of queued messages a transport holds at most (a bigger message
/// waits for the queue to empty and then takes the whole budget).
pub const BUDGET: usize = 8 << 20;

/// One outgoing message, without its framing.
#[derive(Debug)]
pub enum Message {
    /// A ready response line (errors, small answers, batches).
    Line(String),
    /// A notification line (progress): never a request's answer, so a
    /// transport that answers each request on its own (HTTP) can tell the
    /// two apart.
    Notification(String),
    /// A `tools/call` success response, serialised by the writer straight
    /// into its output: a result carrying megabytes of output is never held
    /// a second time as a string.
    Response {
        /// The request's id.
        id: RequestId,
        /// Its result.
        result: CallResult,
        /// Its `resultType` when it answers a modern (2026-07-28) request,
        /// which adds `resultType` and the server's `_meta`; `None` for a
        /// legacy one.
        result_type: Option<ResultType>,
    },
}

impl Message {
    /// What it costs the budget: its length, or the result's size hint.
    pub fn cost(&self) -> usize {
        match self {
            Message::Line(line) | Message::Notification(line) => line.len(),
            Message::Response { result, .. } => result.size_hint(),
        }
    }

    /// Writes it (without the newline).
    pub fn write_to<W: std::io::Write>(&self, mut w: W) -> std::io::Result<()> {
        match self {
            Message::Line(line) | Message::Notification(line) => w.write_all(line.as_bytes()),
            Message::Response {
                id,
                result,
                result_type,
            } => protocol::write_success(
                w,
                id,
                &Stamped {
                    result,
                    result_type: *result_type,
                },
            ),
        }
    }

    /// The transport handed it to its client: a result it carries is
    /// delivered ([`CallResult::sent`]); until then, dropping the message
    /// puts back what the result claimed.
    pub fn sent(&self) {
        if let Message::Response { result, .. } = self {
            result.sent();
        }
    }

    /// It as one line if `fits` its length (a batch's budget): then the line
    /// is what is sent from now on and the result counts as sent. Otherwise
    /// the line is dropped and so is the message, unsent (what its result
    /// claimed is put back), and the answer is the line's length.
    pub fn into_line_within(self, fits: impl FnOnce(usize) -> bool) -> Result<String, usize> {
        let line = match &self {
            Message::Line(line) | Message::Notification(line) => line.clone(),
            Message::Response {
                id,
                result,
                result_type,
            } => protocol::success_line(
                id,
                &Stamped {
                    result,
                    result_type: *result_type,
                },
            ),
        };
        if !fits(line.len()) {
            return Err(line.len());
        }
        self.sent();
        Ok(line)
    }

    /// It as one line (a batch joins several into one array). The line is
    /// what is sent from now on, so the result counts as sent.
    pub fn into_line(self) -> String {
        match self {
            Message::Line(line) | Message::Notification(line) => line,
            Message::Response {
                id,
                result,
                result_type,
            } => {
                result.sent();
                protocol::success_line(
                    &id,
                    &Stamped {
                        result: &result,
                        result_type,
                    },
                )
            }
        }
    }
}

impl From<String> for Message {
    fn from(line: String) -> Message {
        Message::Line(line)
    }
}

/// What the writing end receives.
#[derive(Debug)]
pub enum Outgoing {
    /// One message; the permit returns its cost to the budget when dropped
    /// (after the write).
    Message(Message, OwnedSemaphorePermit),
    /// Write what came before, flush, and stop.
    Finish,
}

/// The sending side; cheap to clone.
#[derive(Clone, Debug)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<Outgoing>,
    room: Arc<Semaphore>,
    budget: usize,
}

/// The receiving side, for the transport's writer.
#[derive(Debug)]
pub struct Inbox {
    /// Messages in order.
    pub rx: mpsc::UnboundedReceiver<Outgoing>,
    room: Arc<Semaphore>,
}

/// A writer that goes away (an HTTP response whose client vanished) stops
/// the queue as [`Inbox::close`] does.
impl Drop for Inbox {
    fn drop(&mut self) {
        self.room.close();
    }
}

impl Inbox {
    /// Called by the writer when it stops for good (the peer is gone): every
    /// waiting and later sender returns at once, dropping its message.
    pub fn close(&self) {
        self.room.close();
    }
}

/// A new queue with a budget of `budget` bytes.
pub fn new(budget: usize) -> (Outbox, Inbox) {
    let (tx, rx) = mpsc::unbounded_channel();
    let room = Arc::new(Semaphore::new(budget));
    (
        Outbox {
            tx,
            room: Arc::clone(&room),
            budget,
        },
        Inbox { rx, room },
    )
}

impl Outbox {
    /// Queues one message, waiting while the budget is used up. Returns
    /// `false` when the writer has stopped (the message is dropped).
    pub async fn send(&self, message: impl Into<Message>) -> bool {
        let message = message.into();
        let cost = u32::try_from(message.cost().clamp(1, BUDGET)).unwrap_or(u32::MAX);
        let Ok(permit) = Arc::clone(&self.room).acquire_many_owned(cost).await else {
            return false;
        };
        self.tx.send(Outgoing::Message(message, permit)).is_ok()
    }

    /// Waits until the queue has room for more — a quarter of the budget
    /// free — or the writer has stopped. The reader waits here before it
    /// takes the next request, and a call before it starts its work: a call
    /// that has not started holds no job and no result.
    pub async fn room(&self) {
        let quarter = u32::try_from(self.budget / 4).unwrap_or(u32::MAX).max(1);
        let _ = self.room.acquire_many(quarter).await;
    }

    /// Completes when the writing end is gone (dropped): nothing sent from
    /// now on reaches anyone. A call waiting on its outbox's client uses it
    /// to detach: it stops waiting and claims nothing.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }

    /// Asks the writer to write everything queued so far and stop.
    pub fn finish(&self) {
        let _ = self.tx.send(Outgoing::Finish);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_full_budget_makes_senders_and_readers_wait_until_the_writer_takes_a_message() {
        let (out, mut inbox) = new(10);
        assert!(out.send(String::from("012345678")).await);
        let blocked = tokio::time::timeout(std::time::Duration::from_millis(50), out.room()).await;
        assert!(
            blocked.is_err(),
            "room() must wait while the budget is used up"
        );
        let Some(Outgoing::Message(m, permit)) = inbox.rx.recv().await else {
            panic!("expected the message");
        };
        assert_eq!(m.into_line(), "012345678");
        drop(permit);
        tokio::time::timeout(std::time::Duration::from_secs(5), out.room())
            .await
            .unwrap();
    }

    /// A `tools/call` answer whose payload counts how often it was lost.
    fn response(lost: &Arc<std::sync::atomic::AtomicUsize>) -> Message {
        let lost = Arc::clone(lost);
        let payload = crate::protocol::result::Payload::object(serde_json::json!({"ok": true}))
            .on_lost(move || {
                lost.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            });
        Message::Response {
            id: RequestId::Int(1),
            result: CallResult::Success {
                payload,
                structured: false,
            },
            result_type: None,
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_answer_that_never_reaches_its_writer_runs_its_lost_action_once_and_a_sent_one_never()
     {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let lost = Arc::new(AtomicUsize::new(0));
        // Taken by the writer and written: nothing is lost.
        let (out, mut inbox) = new(1 << 20);
        assert!(out.send(response(&lost)).await);
        let Some(Outgoing::Message(m, _permit)) = inbox.rx.recv().await else {
            panic!("expected the message");
        };
        let mut written = Vec::new();
        m.write_to(&mut written).unwrap();
        m.sent();
        drop(m);
        assert_eq!(lost.load(SeqCst), 0);
        // Queued, and the writer went away with it still in the queue.
        assert!(out.send(response(&lost)).await);
        drop(inbox);
        assert_eq!(lost.load(SeqCst), 1);
        // Sent after the writer went away: refused, and lost at once.
        assert!(!out.send(response(&lost)).await);
        assert_eq!(lost.load(SeqCst), 2);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn messages_keep_their_order_and_finish_comes_after_them() {
        let (out, mut inbox) = new(1 << 20);
        for i in 0..5 {
            assert!(out.send(format!("m{i}")).await);
        }
        out.finish();
        for i in 0..5 {
            match inbox.rx.recv().await {
                Some(Outgoing::Message(m, _)) => assert_eq!(m.into_line(), format!("m{i}")),
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(inbox.rx.recv().await, Some(Outgoing::Finish)));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn after_the_writer_closes_senders_return_false_at_once() {
        let (out, inbox) = new(4);
        assert!(out.send(String::from("1234")).await);
        inbox.close();
        assert!(!out.send(String::from("more")).await);
        out.room().await;
    }
}
