//! Kubernetes agent-sandbox's sandboxd protocols (KEP-539.2, SPEC §21):
//! front-ends over the same jobs and files as MCP, each on its own
//! listener, off by default. This module only declares them; each owns its
//! listener, wire format and mapping, and calls the verbs of `jobs::Jobs`
//! (scripts/check-layers.sh's transport rule applies to all of them).
//!
//! - [`grpc`]: `--sandboxd-grpc ADDR`, `process.v1.ProcessService` over
//!   h2c (`Execute`, `Start`, `WriteStdin`, `SendSignal`, `ResizeTTY`);
//!   its framing, messages and status codes are in [`wire`].
//!
//! docs/sandboxd.md is the user's page (the mapping, where we differ from
//! the reference daemon).

pub mod grpc;
mod wire;
