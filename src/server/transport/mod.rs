//! Transports: how requests reach the server and answers leave it.
//!
//! Two kinds live here, on the floor (`crate::net`) for their listeners:
//!
//! - **MCP's** (stdio, and HTTP's `/mcp`) frame bytes into messages, hand
//!   each to a [`McpSession`](super::session::McpSession) with the
//!   [`Outbox`](super::outbox::Outbox) its answers go to, and write what
//!   that outbox yields. They know no method, tool or job: the session
//!   dispatches.
//! - **The other front-ends** (`POST /exec`, terminal attach, `/files`,
//!   `/ports`, envd, sandboxd) each parse their own wire format, call the
//!   verbs of `jobs::Jobs` and the file engine (`crate::files`), and render
//!   the answers; `POST /exec` and envd's and sandboxd's process calls read
//!   their launch with `execute`'s parser. None reaches into the job table
//!   (`scripts/check-layers.sh`).
//!
//! - [`stdio`]: newline-delimited JSON-RPC on stdin/stdout.
//! - [`http`]: Streamable HTTP (docs/http.md), with health and metrics.
//! - [`envd`]: E2B envd's Connect-RPC and `/files` (docs/envd.md).
//! - [`platform`]: the auth rule every platform listener (sandboxd, envd)
//!   applies, at start-up and per request.
//! - [`sandboxd`]: Kubernetes agent-sandbox's runtime API (docs/sandboxd.md): REST,
//!   and gRPC with the `sandboxd` feature (default on).

pub mod envd;
pub(crate) mod file_http;
pub mod http;
pub mod platform;
pub mod sandboxd;
pub mod stdio;
