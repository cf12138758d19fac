//! Protocol revisions, and every choice that depends on the revision a
//! request is served in: this is the one place that decides what a request
//! of a given revision sees.
//!
//! Two eras (docs/clients.md; MCP 2026-07-28 "Versioning"):
//! - **legacy** (2024-11-05 … 2025-11-25): the client names a revision in
//!   `initialize`; if we support it we answer with it, otherwise with our
//!   latest legacy one (never an error, as those revisions ask). The stdio
//!   process or HTTP session keeps it. A 2024-11-05 session sees exactly the
//!   reference implementation's shapes.
//! - **modern** (2026-07-28): no handshake; every request names its revision
//!   in `_meta` (see [`super::era`], which decides a request's revision).

/// Legacy revisions, negotiated by `initialize`, oldest first.
pub const SUPPORTED: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Our latest legacy revision: what `initialize` answers to a version it
/// does not know.
pub const LATEST: &str = "2025-11-25";

/// Every revision we speak, newest first: `server/discover`'s
/// `supportedVersions` and `-32022`'s `supported`.
pub const ALL_VERSIONS: [&str; 5] = [
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

/// A negotiated protocol revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Revision {
    /// 2024-11-05: the reference implementation's shapes, nothing more.
    V2024_11_05,
    /// 2025-03-26: tool annotations, JSON-RPC batches.
    V2025_03_26,
    /// 2025-06-18: titles, output schemas, `structuredContent`.
    V2025_06_18,
    /// 2025-11-25.
    V2025_11_25,
    /// 2026-07-28: stateless, per-request `_meta`, `resultType` on every
    /// result, `server/discover`, no `ping` or `logging/setLevel`, no
    /// `Mcp-Session-Id`.
    V2026_07_28,
}

impl Revision {
    /// Every revision, oldest first (index = [`Revision::index`]).
    pub const ALL: [Revision; 5] = [
        Revision::V2024_11_05,
        Revision::V2025_03_26,
        Revision::V2025_06_18,
        Revision::V2025_11_25,
        Revision::V2026_07_28,
    ];

    /// Position in [`Revision::ALL`] (for per-revision caches).
    pub fn index(self) -> usize {
        self as usize
    }

    /// Picks the legacy revision for the version an `initialize` asks for
    /// (a modern version is not negotiable there: it gets our latest legacy).
    pub fn negotiate(requested: Option<&str>) -> Revision {
        let known = requested
            .filter(|r| SUPPORTED.contains(r))
            .unwrap_or(LATEST);
        match known {
            "2024-11-05" => Revision::V2024_11_05,
            "2025-03-26" => Revision::V2025_03_26,
            "2025-06-18" => Revision::V2025_06_18,
            _ => Revision::V2025_11_25,
        }
    }

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Revision::V2024_11_05 => "2024-11-05",
            Revision::V2025_03_26 => "2025-03-26",
            Revision::V2025_06_18 => "2025-06-18",
            Revision::V2025_11_25 => "2025-11-25",
            Revision::V2026_07_28 => "2026-07-28",
        }
    }

    /// The modern revision a per-request `_meta` version names; `None` for
    /// anything else (a legacy version too: those need `initialize`).
    pub fn modern(version: &str) -> Option<Revision> {
        match version {
            "2026-07-28" => Some(Revision::V2026_07_28),
            _ => None,
        }
    }

    /// Whether it is a modern (stateless) revision: served per request, with
    /// `resultType` on every result and a result `_meta` naming the server.
    pub fn is_modern(self) -> bool {
        self >= Revision::V2026_07_28
    }

    /// Whether `ping` exists (removed in 2026-07-28).
    pub fn has_ping(self) -> bool {
        !self.is_modern()
    }

    /// Whether `server/discover` exists (from 2026-07-28 on).
    pub fn has_discover(self) -> bool {
        self.is_modern()
    }

    /// Whether `tools/list` (and `server/discover`) carry the caching hints
    /// `ttlMs` and `cacheScope`.
    pub fn has_cache_hints(self) -> bool {
        self.is_modern()
    }

    /// The JSON-RPC code of a `tools/call` naming an unknown tool: `-32601`
    /// up to 2025-11-25, `-32602` in 2026-07-28 (its schema's
    /// `InvalidParamsError`: "Unknown tool name").
    pub fn unknown_tool_code(self) -> super::ErrorCode {
        if self.is_modern() {
            super::ErrorCode::INVALID_PARAMS
        } else {
            super::ErrorCode::METHOD_NOT_FOUND
        }
    }

    /// Whether a closed HTTP response stream cancels its request (2026-07-28:
    /// "closing the SSE response stream MUST be treated as cancellation");
    /// up to 2025-11-25 a disconnect is not a cancellation.
    pub fn closed_stream_cancels(self) -> bool {
        self.is_modern()
    }

    /// Whether the session sees Part II, the surface beyond the reference
    /// implementation's: its tool inputs, result fields and the `queued`
    /// state. A 2024-11-05 session sees exactly Part I, the reference shapes.
    pub fn has_part_two(self) -> bool {
        self >= Revision::V2025_03_26
    }

    /// Whether the session sees terminal jobs: `execute`'s
    /// `tty`, `cols`, `rows`, `input`'s `keys` and `resize`, the `screen`
    /// tool, `tty` in statuses and `screen` in a terminal job's result.
    pub fn has_terminals(self) -> bool {
        self >= Revision::V2025_03_26
    }

    /// Whether tools carry `annotations`.
    pub fn has_annotations(self) -> bool {
        self >= Revision::V2025_03_26
    }

    /// Whether tools carry `title` and `outputSchema`.
    pub fn has_titles_and_output_schemas(self) -> bool {
        self >= Revision::V2025_06_18
    }

    /// Whether a `Tool` may carry `_meta` (the schema has it from
    /// 2025-06-18): `upload`'s `openai/fileParams` (docs/files.md).
    pub fn has_tool_meta(self) -> bool {
        self >= Revision::V2025_06_18
    }

    /// Whether tool results carry `structuredContent`.
    pub fn has_structured_content(self) -> bool {
        self >= Revision::V2025_06_18
    }

    /// Whether `tools/call` may be task-augmented (SEP-1686: the `tasks`
    /// capability, `execute`'s `execution.taskSupport`, `tasks/*`).
    pub fn has_task_augmentation(self) -> bool {
        self == Revision::V2025_11_25
    }

    /// Whether a JSON-RPC batch (array) is accepted.
    pub fn accepts_batches(self) -> bool {
        self == Revision::V2025_03_26
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_revision_at_its_index() {
        let oldest_first: Vec<&str> = SUPPORTED.iter().chain(&["2026-07-28"]).copied().collect();
        for (i, r) in Revision::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert_eq!(r.as_str(), oldest_first[i]);
        }
        let mut newest_first = oldest_first.clone();
        newest_first.reverse();
        assert_eq!(newest_first, ALL_VERSIONS);
    }

    #[test]
    fn only_a_modern_version_is_modern_and_initialize_never_negotiates_one() {
        assert_eq!(Revision::modern("2026-07-28"), Some(Revision::V2026_07_28));
        for v in SUPPORTED {
            assert_eq!(Revision::modern(v), None);
            assert!(!Revision::negotiate(Some(v)).is_modern());
        }
        assert_eq!(Revision::negotiate(Some("2026-07-28")).as_str(), LATEST);
    }

    #[test]
    fn a_supported_version_is_echoed_and_anything_else_gets_the_latest() {
        for v in SUPPORTED {
            assert_eq!(Revision::negotiate(Some(v)).as_str(), v);
        }
        assert_eq!(Revision::negotiate(Some("1999-01-01")).as_str(), LATEST);
        assert_eq!(Revision::negotiate(None).as_str(), LATEST);
    }
}
