//! `server/discover` (MCP 2026-07-28): what the server says about itself to
//! a modern client before (or instead of) anything else — the revisions it
//! speaks, its capabilities, its identity and its instructions.
//!
//! It exists only for a modern request (one with a per-request
//! `_meta["io.modelcontextprotocol/protocolVersion"]`); in a legacy session
//! it stays an unknown method (`-32601`), so a legacy transcript
//! does not change. A dual-era client probes with it first and, receiving a
//! `DiscoverResult`, stays modern: it never falls back to `initialize`.
//!
//! Result (one compact string, built once, then copied):
//! `{"supportedVersions":[<newest first>],"capabilities":{"tools":{}},
//! "instructions":<text>,"ttlMs":3600000,"cacheScope":"public",
//! "resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":
//! {"name":"mcp-exec","version":<crate version>}}}`.
//! - `supportedVersions` lists the legacy revisions too: a dual-era client
//!   may pick one and `initialize` (where the MCP example of a dual-era
//!   server, `["2026-07-28", "2025-11-25"]`, does the same).
//! - The caching hints are those of `tools/list` ([`tools::LIST_TTL_MS`]):
//!   the answer changes only with the binary.

use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::protocol::era::{self, ResultType};
use crate::protocol::version::{ALL_VERSIONS, Revision};
use crate::tools;

/// What a model is told about this server, once (tool descriptions say the
/// rest).
pub const INSTRUCTIONS: &str = "mcp-exec runs shell commands as jobs in this machine or \
container. `execute` runs one and returns its result (or, past its deadline or with \
`nowait: true`, a `job_id`); follow a job with `wait`, `status`, `output`, `input` and \
`kill`, and find them all with `list_jobs`. Jobs outlive the request that started them. \
`upload` and `download` move files.";

/// The server's capabilities in 2026-07-28: tools, and the Tasks extension
/// (SEP-2663), which a client then declares per request.
pub fn capabilities() -> Value {
    json!({"tools": {}, "extensions": {super::tasks::EXTENSION: {}}})
}

/// The `server/discover` result for a request of `revision` (a modern one),
/// as compact JSON, built on first use.
pub fn result_json(revision: Revision) -> &'static str {
    static CACHE: OnceLock<String> = OnceLock::new();
    CACHE.get_or_init(|| {
        let mut result = json!({
            "supportedVersions": ALL_VERSIONS,
            "capabilities": capabilities(),
            "instructions": INSTRUCTIONS,
            "ttlMs": tools::LIST_TTL_MS,
            "cacheScope": "public",
        });
        era::stamp(revision, ResultType::Complete, &mut result);
        result.to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discover_names_every_version_the_tools_capability_and_the_server() {
        let v: Value = serde_json::from_str(result_json(Revision::V2026_07_28)).unwrap();
        assert_eq!(v["supportedVersions"][0], "2026-07-28");
        assert_eq!(v["supportedVersions"].as_array().unwrap().len(), 5);
        assert_eq!(
            v["capabilities"],
            json!({"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
        );
        assert_eq!(v["resultType"], "complete");
        assert_eq!(v["cacheScope"], "public");
        assert!(v["ttlMs"].as_u64().is_some());
        assert_eq!(v["_meta"][era::META_SERVER_INFO]["name"], json!("mcp-exec"));
        assert!(v["instructions"].as_str().unwrap().contains("execute"));
    }
}
