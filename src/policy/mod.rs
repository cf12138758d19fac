//! Policies of bounded execution: decisions about what a
//! job may do and what the server shows of it, made from settings read once
//! at start-up.
//!
//! This module sits beside `jobs`: it may use `capture` (it implements
//! capture's hooks) and `init` (its types), but never `jobs`, `tools` or
//! `server`. Each policy is an immutable value built at start-up and shared
//! by reference; none holds mutable state, so none needs a lock. A setting
//! that is invalid makes its constructor return an error naming it, and the
//! server refuses to start (security settings fail closed).
//!
//! - [`cwd`]: where jobs may start.
//! - [`redact`]: secret redaction of process output.
//! - [`identity`]: who a job runs as and what it may use.

pub mod cwd;
pub mod identity;
pub mod redact;
