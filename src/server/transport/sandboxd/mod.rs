//! Kubernetes agent-sandbox's in-sandbox runtime API, KEP-539.2 "sandboxd"
//! (docs/sandboxd.md), so that its official SDKs drive mcp-exec unchanged: front-ends
//! over the same jobs and files as MCP, each on its own listener, off by
//! default. This module only declares them; each owns its listener, wire
//! format and mapping (scripts/check-layers.sh's transport rule applies).
//!
//! - [`rest`]: `--sandboxd-rest`, `/v1/files/{path}`, `/v1/health`,
//!   `/v1/metadata`, a mapping onto [`crate::files`] under
//!   `--sandboxd-root`; a `multipart/form-data` `PUT` is read through
//!   `transport::file_http`'s `FilePart`.
//! - `grpc` (the `sandboxd` feature, default on): `--sandboxd-grpc`,
//!   `process.v1.ProcessService` over h2c (`Execute`, `Start`,
//!   `WriteStdin`, `SendSignal`, `ResizeTTY`), each RPC a mapping onto the
//!   verbs of `jobs::Jobs`; its framing, messages and status codes are in
//!   `wire`.
//!
//! - [`settings`]: what they start with, checked at start-up: the sandbox
//!   root both share (`--sandboxd-root`, where REST's paths live and gRPC
//!   jobs start) and the gRPC listener's settings.
//!
//! Every listener applies [`super::platform`]'s auth rule. docs/sandboxd.md
//! is the user's page (the mapping, where we differ from the reference
//! daemon).

#[cfg(feature = "sandboxd")]
pub mod grpc;
pub mod rest;
pub mod settings;
#[cfg(feature = "sandboxd")]
mod wire;
