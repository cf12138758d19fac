//! Transports: how messages reach a session and leave it.
//!
//! A transport frames bytes into messages, hands each to a
//! [`McpSession`](super::session::McpSession) with the [`Outbox`](super::outbox::Outbox)
//! its answers go to, and writes what that outbox yields. It knows nothing
//! of methods, tools or jobs.
//!
//! - [`stdio`]: newline-delimited JSON-RPC on stdin/stdout (SPEC §3).
//! - [`http`]: Streamable HTTP (SPEC §11), with health and metrics.
//! - [`sandboxd`]: Kubernetes agent-sandbox's sandboxd protocols (SPEC §21),
//!   front-ends over the job verbs rather than MCP sessions (the `sandboxd`
//!   feature, default on).

pub mod http;
#[cfg(feature = "sandboxd")]
pub mod sandboxd;
pub mod stdio;
