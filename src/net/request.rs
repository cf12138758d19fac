//! Reading a whole request body, the one way every listener does: at most
//! a size the caller gives, and within [`BODY_READ_TIMEOUT`] of its head.
//!
//! hyper's header timeout does not cover bodies: a client that sent a head
//! and then trickled (or withheld) its body held the request, and its
//! connection, for good — on HTTP/2 without even looking idle, since the
//! stream is open. Enough of them locked every client out. So a unary body
//! (an MCP `POST`, `POST /exec`, an envd RPC, a gRPC request) must arrive
//! whole within the deadline, and each front-end answers the refusal in
//! its own protocol (`408`, `deadline_exceeded`, `DEADLINE_EXCEEDED`).
//! Streamed bodies (`PUT /files`, envd's `StreamInput`) are bounded per
//! frame instead, by `MCP_EXEC_HTTP_STALL_TIMEOUT`, where they are read.
//!
//! # Invariants
//! - Past the size bound the read stops at once: no more is buffered.
//! - The deadline covers the whole body, however it is split into frames.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

/// How long a whole unary body may take after its head. Generous next to
/// the header deadline: a body may be as large as `MCP_EXEC_MAX_LINE_BYTES`.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a body could not be read whole.
#[derive(Debug)]
pub enum BodyError {
    /// It is larger than the bound.
    TooLarge,
    /// It did not arrive whole within [`BODY_READ_TIMEOUT`].
    Late,
    /// The connection failed or the client reset the stream.
    Read(String),
}

/// The whole of `body`, at most `limit` bytes, within [`BODY_READ_TIMEOUT`].
pub async fn read_whole(body: Incoming, limit: usize) -> Result<Bytes, BodyError> {
    read_within(body, limit, BODY_READ_TIMEOUT).await
}

async fn read_within(body: Incoming, limit: usize, within: Duration) -> Result<Bytes, BodyError> {
    match tokio::time::timeout(within, Limited::new(body, limit).collect()).await {
        Err(_) => Err(BodyError::Late),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge),
        Ok(Err(e)) => Err(BodyError::Read(e.to_string())),
    }
}
