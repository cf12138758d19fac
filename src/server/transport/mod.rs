//! Transports: how messages reach a session and leave it.
//!
//! A transport frames bytes into messages, hands each to a
//! [`McpSession`](super::session::McpSession) with the [`Outbox`](super::outbox::Outbox)
//! its answers go to, and writes what that outbox yields. It knows nothing
//! of methods, tools or jobs.
//!
//! - [`stdio`]: newline-delimited JSON-RPC on stdin/stdout (SPEC §3).
//! - [`http`]: Streamable HTTP (SPEC §11), with health and metrics.
//! - [`envd`]: E2B envd's Connect-RPC and `/files` (SPEC §21).
//! - [`platform`]: the auth rule every platform listener (sandboxd, envd;
//!   SPEC §21) applies, at start-up and per request.
//! - [`sandboxd`]: Kubernetes agent-sandbox's runtime API (SPEC §21): REST,
//!   and gRPC with the `sandboxd` feature (default on).

pub mod envd;
pub mod http;
pub mod platform;
pub mod sandboxd;
pub mod stdio;
