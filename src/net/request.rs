//! Reading a whole request body, the one way every listener does: at most
//! a size the caller gives, and within the body deadline of its head
//! ([`body_deadline`]: `MCP_EXEC_HTTP_STALL_TIMEOUT`, 30 s by default).
//!
//! hyper's header timeout does not cover bodies: a client that sent a head
//! and then trickled (or withheld) its body held the request, and its
//! connection, for good — on HTTP/2 without even looking idle, since the
//! stream is open. Enough of them locked every client out. So a unary body
//! (an MCP `POST`, `POST /exec`, an envd RPC, a gRPC request) must arrive
//! whole within the deadline, and each front-end answers the refusal in
//! its own protocol (`408`, `deadline_exceeded`, `DEADLINE_EXCEEDED`).
//! Streamed uploads (`PUT /files`, envd's `POST /files`, `PUT /v1/files`)
//! are bounded per frame instead, by the same `MCP_EXEC_HTTP_STALL_TIMEOUT`,
//! where they are read. envd's `StreamInput` is a job's stdin, which a
//! person may leave idle for as long as they like: it has no deadline, and
//! only a client past the gate can open one.
//!
//! # Invariants
//! - Past the size bound the read stops at once: no more is buffered.
//! - The deadline covers the whole body, however it is split into frames.
//! - The deadline is one for the whole server, set once at start-up
//!   ([`set_body_deadline`]) before any listener serves, so every listener
//!   releases a withheld body at the same moment.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

/// How long a whole unary body may take after its head, by default.
/// Generous next to the header deadline: a body may be as large as
/// `MCP_EXEC_MAX_LINE_BYTES`.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The body deadline in milliseconds; [`BODY_READ_TIMEOUT`] until set.
static DEADLINE_MS: AtomicU64 = AtomicU64::new(BODY_READ_TIMEOUT.as_millis() as u64);

/// Sets the body deadline for every listener (`MCP_EXEC_HTTP_STALL_TIMEOUT`:
/// the one bound on a client that withholds what it owes, a body or a read).
pub fn set_body_deadline(within: Duration) {
    let ms = u64::try_from(within.as_millis()).unwrap_or(u64::MAX).max(1);
    DEADLINE_MS.store(ms, Ordering::Relaxed);
}

/// How long a whole unary body may take after its head.
pub fn body_deadline() -> Duration {
    Duration::from_millis(DEADLINE_MS.load(Ordering::Relaxed))
}

/// Why a body could not be read whole.
#[derive(Debug)]
pub enum BodyError {
    /// It is larger than the bound.
    TooLarge,
    /// It did not arrive whole within [`body_deadline`].
    Late,
    /// The connection failed or the client reset the stream.
    Read(String),
}

/// The whole of `body`, at most `limit` bytes, within [`body_deadline`].
pub async fn read_whole(body: Incoming, limit: usize) -> Result<Bytes, BodyError> {
    read_within(body, limit, body_deadline()).await
}

async fn read_within(body: Incoming, limit: usize, within: Duration) -> Result<Bytes, BodyError> {
    match tokio::time::timeout(within, Limited::new(body, limit).collect()).await {
        Err(_) => Err(BodyError::Late),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge),
        Ok(Err(e)) => Err(BodyError::Read(e.to_string())),
    }
}
