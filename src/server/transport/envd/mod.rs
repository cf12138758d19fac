//! envd (E2B's in-sandbox daemon) on `--envd ADDR` (SPEC §21).
//! TODO(envdproc): this file is replaced by the listener's at merge; the
//! filesystem half only adds its modules here.

pub mod files;
pub mod filesystem;
