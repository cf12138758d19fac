//! Integration tests of the mcp-exec binary: a raw-JSON client over real
//! pipes drives the built binary, as a plain process, as a real PID 1, and
//! in the two container images.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly by panicking"
)]
#![allow(missing_docs, reason = "test functions are documented by their names")]

/// Client harness and targets.
mod support;

/// A smoke test per target that the harness itself works.
mod harness;

/// JSON-RPC framing, initialize/version negotiation, error codes, bad input.
mod protocol;

/// Each tool's result shape, defaults, argument errors; stdin and input.
mod tools;

/// Stream specs and capture policies end to end: windows, tail, from/length, UTF-8, binary.
mod capture;

/// Kill, cancellation, progress, shutdown, exactly-once races, concurrency, orphans.
mod lifecycle;

/// Container-level behaviour: podman stop/kill, zombies, closed stdin.
mod containers;

/// A client that holds the server's stdout pipe itself: unread, closed, raw lines.
mod raw;

/// Shutdown when the client goes: EOF grace, EPIPE, whole lines at exit, bounded memory.
mod shutdown;

/// The reference's observable details, one by one.
mod compat;

/// Golden transcripts of the wire format per protocol revision (tests/golden/).
mod golden;

/// The process tools a job finds in every target (pgrep, pkill).
mod images;

/// Awaiting input: `wait` until input, `awaiting_input`, no false positives.
mod awaiting;

/// Bounded execution: argv, deadlines, yielding, the queue, labels, breaker, wait until.
mod bounded;

/// The cwd policy and secret redaction (docs/security.md) end to end.
mod policy;

/// Init mode (`mcp-exec -- CMD`) side by side with tini, bare and as PID 1.
mod initmode;

/// `mcp-exec health URL` against real HTTP servers and closed ports.
mod health;

/// E2B envd: the e2b Python SDK against `--envd` on every target, and raw Connect.
mod envd;

/// Streamable HTTP, sessions over HTTP, its guards and bounds; health and metrics.
mod http;

/// File transfer over MCP: upload and download on every target.
mod files;

/// ChatGPT file references on `upload`: an HTTPS fetch from a local server with a test CA.
mod fileref;

/// Per-job user, groups and limits; the OOM ordering; why a job ended.
mod identity;

/// Fault injection: resources running out, hostile jobs, misbehaving clients.
mod faults;

/// The Kubernetes manifests: schema validation, and the Pod under `podman kube play`.
mod kube;

/// Shell sessions: what carries between jobs and what does not, lanes, the tool.
mod sessions;

/// mcp-exec as a stdio server over `ssh -T` through a real OpenSSH server.
mod ssh;

/// MCP Tasks, 2025-11-25 format: create, poll, result, list, cancel, owned jobs, TTL.
mod tasks;

/// What a person is told: bad flags, bad settings, fatal errors, tokens, `--help` (issue 19 §7).
mod messages;

/// The sandboxd gRPC front-end driven by the agent-sandbox SDK and grpcio.
#[cfg(feature = "sandboxd")]
mod sandboxd;

/// Terminal jobs: a PTY, its output stream, TERM and size, resize, C-d, session kill.
mod terminal;

/// Interactive programs on a terminal job through `screen` and `keys` (issue 21 item 6).
mod terminal_programs;

/// envd's filesystem half through the official e2b Python SDK.
mod envd_files;
/// Every listener on one floor: the identity rule without a token, a flood on any listener.
mod listeners;
/// sandboxd's REST API: wire shapes, the root, auth, the shared port, the official SDK.
mod sandboxd_rest;
