//! Kubernetes agent-sandbox's in-sandbox runtime API, KEP-539.2 "sandboxd"
//! (SPEC §21), so that its official SDKs drive mcp-exec unchanged.
//!
//! - [`rest`]: `--sandboxd-rest`, `/v1/files/{path}`, `/v1/health`,
//!   `/v1/metadata`, a mapping onto [`crate::files`] under
//!   `--sandboxd-root`.
//! - [`multipart`]: the one part of a `multipart/form-data` `PUT` that
//!   holds the file, streamed.
//!
//! Every listener applies [`super::platform`]'s auth rule.

pub(in crate::server::transport) mod multipart;
pub mod rest;
