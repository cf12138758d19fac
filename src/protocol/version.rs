//! Protocol-revision negotiation, and every choice that depends on the
//! negotiated revision: this is the one place that decides what a session
//! of a given revision sees.
//!
//! The client names a revision in `initialize`; if we support it we answer
//! with it, otherwise with our latest (never an error, as the MCP spec asks).
//! A 2024-11-05 session sees exactly the reference implementation's shapes.

/// Revisions we speak, oldest first.
pub const SUPPORTED: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Our latest revision.
pub const LATEST: &str = "2025-11-25";

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
}

impl Revision {
    /// Every revision, oldest first (index = [`Revision::index`]).
    pub const ALL: [Revision; 4] = [
        Revision::V2024_11_05,
        Revision::V2025_03_26,
        Revision::V2025_06_18,
        Revision::V2025_11_25,
    ];

    /// Position in [`Revision::ALL`] (for per-revision caches).
    pub fn index(self) -> usize {
        self as usize
    }

    /// Picks the revision for a client's requested version.
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
        }
    }

    /// Whether the session sees Part II of the contract (SPEC §10–§17):
    /// its tool inputs, result fields and the `queued` state. A 2024-11-05
    /// session sees exactly Part I.
    pub fn has_part_two(self) -> bool {
        self >= Revision::V2025_03_26
    }

    /// Whether the session sees terminal jobs (SPEC §20): `execute`'s
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

    /// Whether tool results carry `structuredContent`.
    pub fn has_structured_content(self) -> bool {
        self >= Revision::V2025_06_18
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
        for (i, r) in Revision::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
            assert_eq!(r.as_str(), SUPPORTED[i]);
        }
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
