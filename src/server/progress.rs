//! Progress notifications for long blocking calls.
//!
//! When a `tools/call` carries `_meta.progressToken`, the call runs beside a
//! ticker that sends `notifications/progress {progressToken, progress,
//! message}` every interval (the first after one interval), with `progress`
//! counting 1, 2, 3… The tool sets the message for what it waits for
//! ([`ProgressText`]); no message set means the call is not blocking yet, and no
//! tick is sent. The ticker stops when the call completes, before its
//! response is queued, so no progress follows the response.

use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};

use super::outbox::{Message, Outbox};
use crate::protocol;
use crate::tools::ProgressText;

/// Runs `call`, sending progress for `token` to `out` every `every` while
/// it runs.
pub async fn with_ticker<T>(
    call: impl Future<Output = T>,
    text: &ProgressText,
    token: Value,
    every: Duration,
    out: &Outbox,
) -> T {
    tokio::pin!(call);
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n: u64 = 0;
    loop {
        tokio::select! {
            biased;
            result = &mut call => return result,
            _ = ticks.tick() => {
                if let Some(message) = text.current() {
                    n += 1;
                    let line = protocol::notification_line(
                        "notifications/progress",
                        &json!({"progressToken": token, "progress": n, "message": message}),
                    );
                    out.send(Message::Notification(line)).await;
                }
            }
        }
    }
}
