//! Policies that bound what a job may do, applied before it is started
//! (SPEC Part II §12). Each is built once from the configuration and owned
//! by whoever starts jobs; none holds a job or knows about MCP.

pub mod cwd;
