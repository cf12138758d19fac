//! Classification of one framed message, parsed once ([`Inbound`]): what a
//! transport may ask before it picks a session (whether it opens one, is
//! per-request, wants progress; its [`Single`] parts), and which methods a
//! modern request may name ([`modern_method`]).
//!
//! # Invariants
//! - A message is parsed once; [`McpSession::on_inbound`] does not parse it
//!   again.

// One MCP session split by concern: the parent's imports and items are
// this module's too.
use super::*;

/// One framed message, parsed once: a transport may ask it what it needs
/// to know before it picks the session (HTTP: whether it opens one, whether
/// its answer comes with progress), then hands it to
/// [`McpSession::on_inbound`], which does not parse it again.
pub struct Inbound(pub(super) Parsed);

pub(super) enum Parsed {
    /// A line past `MCP_EXEC_MAX_LINE_BYTES`, of this many bytes.
    TooLong(u64),
    /// Not JSON.
    Malformed(serde_json::Error),
    /// A JSON value: a message, a batch, or something invalid.
    Json(Value),
}

/// A single message's parts, as a transport may need to see them before
/// the session handles it (HTTP: to check its routing headers).
#[derive(Clone, Copy, Debug)]
pub struct Single<'a> {
    /// Its `id` (absent in a notification).
    pub id: Option<&'a Value>,
    /// Its `method`, if a string.
    pub method: Option<&'a str>,
    /// Its `params` (`null` when absent).
    pub params: &'a Value,
}

/// Whether a modern (2026-07-28) request may name `method`: the methods
/// [`McpSession`] answers in that revision. Anything else is `-32601`, which
/// the HTTP binding answers `404`.
pub fn modern_method(method: &str) -> bool {
    matches!(
        method,
        "server/discover"
            | "tools/list"
            | "tools/call"
            // The Tasks extension (SEP-2663); `tasks/result` and
            // `tasks/list` do not exist in this era.
            | "tasks/get"
            | "tasks/update"
            | "tasks/cancel"
            | "subscriptions/listen"
    )
}

impl Inbound {
    /// Parses one framed line.
    pub fn parse(line: Line) -> Inbound {
        match line {
            Line::Complete(bytes) => Inbound::from_slice(&bytes),
            Line::TooLong { bytes } => Inbound(Parsed::TooLong(bytes)),
        }
    }

    /// Parses one message's bytes (an HTTP body).
    pub fn from_slice(bytes: &[u8]) -> Inbound {
        Inbound(match serde_json::from_slice(bytes) {
            Ok(v) => Parsed::Json(v),
            Err(e) => Parsed::Malformed(e),
        })
    }

    /// The message as a single object with an `id` (a request, or a
    /// malformed one that is answered); `None` for a batch, a notification
    /// or what did not parse.
    pub(super) fn request(&self) -> Option<&serde_json::Map<String, Value>> {
        match &self.0 {
            Parsed::Json(Value::Object(m)) if m.contains_key("id") => Some(m),
            _ => None,
        }
    }

    /// The message as a single object: `None` for a batch or what did not
    /// parse.
    pub fn single(&self) -> Option<Single<'_>> {
        let Parsed::Json(Value::Object(m)) = &self.0 else {
            return None;
        };
        Some(Single {
            id: m.get("id"),
            method: m.get("method").and_then(Value::as_str),
            params: m.get("params").unwrap_or(&Value::Null),
        })
    }

    /// Whether it asks to be served statelessly (a per-request
    /// `_meta["io.modelcontextprotocol/protocolVersion"]`, 2026-07-28).
    pub fn is_per_request(&self) -> bool {
        self.single().is_some_and(|m| era::is_per_request(m.params))
    }

    /// Whether it is an `initialize` request: one that opens a session.
    pub fn opens_session(&self) -> bool {
        self.request()
            .is_some_and(|m| m.get("method").and_then(Value::as_str) == Some("initialize"))
    }

    /// Whether it is a request that asked for progress (a non-null
    /// `params._meta.progressToken`): its answer may come after
    /// notifications.
    pub fn wants_progress(&self) -> bool {
        self.request().is_some_and(|m| {
            m.get("params")
                .and_then(|p| p.get("_meta"))
                .and_then(|m| m.get("progressToken"))
                .is_some_and(|t| !t.is_null())
        })
    }
}
