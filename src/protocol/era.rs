//! Which era and revision one request is served in, and what its client
//! declared: the per-request half of MCP 2026-07-28, as pure data.
//!
//! # How a request's revision is decided ([`Era::of`])
//! - Its `params._meta["io.modelcontextprotocol/protocolVersion"]`, when
//!   present, decides, whatever the stdio process or HTTP session
//!   negotiated: a modern version (2026-07-28) is served statelessly in it;
//!   the session's own legacy revision is served as the session is (a legacy
//!   client that echoes its version loses nothing); any other value is
//!   `-32022` `{supported, requested}`. A modern request without
//!   `…/clientCapabilities` (an object) is malformed: `-32602`.
//! - Without it, the request belongs to the session: the revision its
//!   `initialize` negotiated (2024-11-05 before one, as always).
//!
//! # What the client declared ([`Client`])
//! A modern request carries its capabilities (and optionally its
//! `clientInfo`) in its own `_meta`, valid for that request only; a legacy
//! request has the capabilities its session's `initialize` declared. Either
//! way a tool call reads them from `Call::client`, never from earlier
//! requests (2026-07-28: "Servers MUST NOT infer capabilities from prior
//! requests").
//!
//! # What a modern result carries ([`ResultType`], [`Stamped`])
//! Every 2026-07-28 result has `resultType` (`"complete"`; an extension may
//! add its own, as Tasks adds `"task"`) and `_meta` naming the server
//! (`io.modelcontextprotocol/serverInfo`, a SHOULD). A legacy result has
//! neither.
//!
//! # HTTP routing headers ([`routing_name`])
//! The 2026-07-28 Streamable HTTP binding mirrors `method` into
//! `Mcp-Method` and, for the methods [`routing_name`] names, a name from
//! `params` into `Mcp-Name`; the transport checks them against the body.

use std::sync::Arc;

use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value, json};

use super::ErrorCode;
use super::version::{ALL_VERSIONS, Revision};

/// `_meta` key: the revision of one request.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: the capabilities the client declares for one request.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: the client's name and version (optional).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// Result `_meta` key: the server's name and version.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

impl ErrorCode {
    /// 2026-07-28: HTTP headers that do not match the body, or are missing.
    pub const HEADER_MISMATCH: ErrorCode = ErrorCode(-32020);
    /// 2026-07-28: the request needs a client capability it did not declare.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: ErrorCode = ErrorCode(-32021);
    /// 2026-07-28: the request's protocol version is not one we serve.
    pub const UNSUPPORTED_PROTOCOL_VERSION: ErrorCode = ErrorCode(-32022);
}

/// What a request's client declared: its capabilities and, if it said, who
/// it is. Empty for a legacy request whose session declared nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Client {
    /// `ClientCapabilities` (an object; empty = no optional capability).
    pub capabilities: Map<String, Value>,
    /// `Implementation` (`{name, version, …}`), when given.
    pub info: Option<Value>,
}

impl Client {
    /// From a legacy `initialize`'s params (`capabilities`, `clientInfo`).
    pub fn from_initialize(params: &Value) -> Client {
        Client {
            capabilities: params
                .get("capabilities")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
            info: params.get("clientInfo").cloned(),
        }
    }

    /// Whether the client declared the extension `id` (a key of
    /// `capabilities.extensions`, e.g. `io.modelcontextprotocol/tasks`).
    pub fn has_extension(&self, id: &str) -> bool {
        self.capabilities
            .get("extensions")
            .and_then(Value::as_object)
            .is_some_and(|e| e.contains_key(id))
    }
}

/// How one request is served: its revision, and what its client declared.
#[derive(Clone, Debug, PartialEq)]
pub struct Era {
    /// The revision it is served in.
    pub revision: Revision,
    /// Whether it came with per-request `_meta` (served statelessly) rather
    /// than belonging to an `initialize`d session.
    pub per_request: bool,
    /// What its client declared (per request, or its session's `initialize`).
    pub client: Arc<Client>,
}

/// Why a request's `_meta` cannot be served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EraError {
    /// `-32022`: a version we do not serve per request.
    Unsupported {
        /// What it asked for.
        requested: String,
    },
    /// `-32602`: a required per-request field is missing or mistyped.
    Malformed(String),
}

impl EraError {
    /// Its JSON-RPC code.
    pub fn code(&self) -> ErrorCode {
        match self {
            EraError::Unsupported { .. } => ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
            EraError::Malformed(_) => ErrorCode::INVALID_PARAMS,
        }
    }

    /// Its message.
    pub fn message(&self) -> String {
        match self {
            EraError::Unsupported { requested } => {
                format!("Unsupported protocol version: {requested:?}")
            }
            EraError::Malformed(why) => format!("invalid params: {why}"),
        }
    }

    /// Its `data`: `{supported, requested}` for `-32022`.
    pub fn data(&self) -> Option<Value> {
        match self {
            EraError::Unsupported { requested } => Some(json!({
                "supported": ALL_VERSIONS,
                "requested": requested,
            })),
            EraError::Malformed(_) => None,
        }
    }
}

impl Era {
    /// A request of an `initialize`d session of `revision` (or of a session
    /// not initialized yet: 2024-11-05) whose client declared `client`.
    pub fn legacy(revision: Revision, client: Arc<Client>) -> Era {
        Era {
            revision,
            per_request: false,
            client,
        }
    }

    /// Decides how a request with `params` is served in a session that
    /// negotiated `session` (`None`: no `initialize` yet), whose client
    /// declared `session_client` there (see the module doc).
    pub fn of(
        params: &Value,
        session: Option<Revision>,
        session_client: impl FnOnce() -> Arc<Client>,
    ) -> Result<Era, EraError> {
        let meta = params.get("_meta");
        let Some(version) = meta.and_then(|m| m.get(META_PROTOCOL_VERSION)) else {
            let revision = session.unwrap_or(Revision::V2024_11_05);
            return Ok(Era::legacy(revision, session_client()));
        };
        let Some(version) = version.as_str() else {
            return Err(EraError::Malformed(format!(
                "_meta[{META_PROTOCOL_VERSION:?}] must be a string"
            )));
        };
        let Some(revision) = Revision::modern(version) else {
            return match session {
                Some(r) if r.as_str() == version => Ok(Era::legacy(r, session_client())),
                _ => Err(EraError::Unsupported {
                    requested: version.to_owned(),
                }),
            };
        };
        let meta = meta.unwrap_or(&Value::Null);
        let Some(capabilities) = meta
            .get(META_CLIENT_CAPABILITIES)
            .and_then(Value::as_object)
        else {
            return Err(EraError::Malformed(format!(
                "_meta[{META_CLIENT_CAPABILITIES:?}] (an object) is required"
            )));
        };
        Ok(Era {
            revision,
            per_request: true,
            client: Arc::new(Client {
                capabilities: capabilities.clone(),
                info: meta.get(META_CLIENT_INFO).cloned(),
            }),
        })
    }
}

/// Whether `params` carry a per-request protocol version (the request asks
/// to be served statelessly, whatever the version says).
pub fn is_per_request(params: &Value) -> bool {
    params
        .get("_meta")
        .is_some_and(|m| m.get(META_PROTOCOL_VERSION).is_some())
}

/// The `params` field the 2026-07-28 HTTP binding mirrors into `Mcp-Name`
/// for `method`, if it mirrors one (`tools/call`: `name`; `resources/read`:
/// `uri`; `prompts/get`: `name`).
pub fn routing_name(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        // The Tasks extension (SEP-2663).
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// A modern result's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultType {
    /// `"complete"`: the final result.
    Complete,
    /// `"task"`: a task handle (the Tasks extension, SEP-2663).
    Task,
}

impl ResultType {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            ResultType::Complete => "complete",
            ResultType::Task => "task",
        }
    }
}

/// `{"name":"mcp-exec","version":…}`.
pub fn server_info() -> Value {
    json!({"name": "mcp-exec", "version": env!("CARGO_PKG_VERSION")})
}

/// Adds what a result of `revision` carries besides its own fields to a
/// result object: in a modern revision `resultType` and `_meta.serverInfo`
/// (merged into a `_meta` the result has); nothing in a legacy one.
pub fn stamp(revision: Revision, result_type: ResultType, result: &mut Value) {
    if !revision.is_modern() {
        return;
    }
    let Some(obj) = result.as_object_mut() else {
        return;
    };
    obj.insert("resultType".into(), json!(result_type.as_str()));
    let meta = obj.entry("_meta").or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(META_SERVER_INFO.into(), server_info());
    }
}

/// A result that serialises as a map (`T` writes its own entries first
/// through [`StampedFields`]), followed, when `stamped`, by `resultType` and
/// `_meta.serverInfo`. `T` must not write a `_meta` of its own.
pub struct Stamped<'a, T: ?Sized> {
    /// The result.
    pub result: &'a T,
    /// Its type; `None` in a legacy revision (nothing added).
    pub result_type: Option<ResultType>,
}

/// A result whose entries can be written into a map that someone else opened
/// (so that [`Stamped`] can add its own after them without buffering).
pub trait StampedFields {
    /// Writes the result's entries into `m`.
    fn write_fields<M: SerializeMap>(&self, m: &mut M) -> Result<(), M::Error>;
}

impl<T: StampedFields + ?Sized> Serialize for Stamped<'_, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        self.result.write_fields(&mut m)?;
        if let Some(t) = self.result_type {
            m.serialize_entry("resultType", t.as_str())?;
            m.serialize_entry("_meta", &ServerInfoMeta)?;
        }
        m.end()
    }
}

/// `{"io.modelcontextprotocol/serverInfo":{"name":"mcp-exec","version":…}}`.
struct ServerInfoMeta;

impl Serialize for ServerInfoMeta {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Info {
            name: &'static str,
            version: &'static str,
        }
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry(
            META_SERVER_INFO,
            &Info {
                name: "mcp-exec",
                version: env!("CARGO_PKG_VERSION"),
            },
        )?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modern(meta: Value) -> Value {
        json!({"_meta": meta})
    }

    #[test]
    fn a_per_request_modern_version_is_served_statelessly_even_in_an_initialized_session() {
        let p = modern(json!({
            META_PROTOCOL_VERSION: "2026-07-28",
            META_CLIENT_CAPABILITIES: {"extensions": {"io.modelcontextprotocol/tasks": {}}},
            META_CLIENT_INFO: {"name": "c", "version": "1"},
        }));
        for session in [None, Some(Revision::V2025_11_25)] {
            let era = Era::of(&p, session, Arc::default).unwrap();
            assert_eq!(era.revision, Revision::V2026_07_28);
            assert!(era.per_request);
            assert!(era.client.has_extension("io.modelcontextprotocol/tasks"));
            assert_eq!(era.client.info, Some(json!({"name": "c", "version": "1"})));
        }
    }

    #[test]
    fn without_meta_a_request_belongs_to_its_session() {
        let client = || {
            Arc::new(Client::from_initialize(
                &json!({"capabilities": {"roots": {}}}),
            ))
        };
        let era = Era::of(&json!({}), Some(Revision::V2025_06_18), client).unwrap();
        assert_eq!(era.revision, Revision::V2025_06_18);
        assert!(!era.per_request);
        assert!(era.client.capabilities.contains_key("roots"));
        let era = Era::of(&Value::Null, None, Arc::default).unwrap();
        assert_eq!(era.revision, Revision::V2024_11_05);
    }

    #[test]
    fn an_unknown_version_is_32022_naming_every_supported_one() {
        let p = modern(json!({META_PROTOCOL_VERSION: "1900-01-01", META_CLIENT_CAPABILITIES: {}}));
        let e = Era::of(&p, None, Arc::default).unwrap_err();
        assert_eq!(e.code(), ErrorCode(-32022));
        assert_eq!(
            e.data().unwrap(),
            json!({"supported": ALL_VERSIONS, "requested": "1900-01-01"})
        );
        // A legacy version per request: served only as the session's own.
        let p = modern(json!({META_PROTOCOL_VERSION: "2025-11-25"}));
        assert!(matches!(
            Era::of(&p, None, Arc::default),
            Err(EraError::Unsupported { .. })
        ));
        let era = Era::of(&p, Some(Revision::V2025_11_25), Arc::default).unwrap();
        assert_eq!(era.revision, Revision::V2025_11_25);
        assert!(!era.per_request);
    }

    #[test]
    fn a_modern_request_without_client_capabilities_is_invalid_params() {
        for meta in [
            json!({META_PROTOCOL_VERSION: "2026-07-28"}),
            json!({META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: []}),
            json!({META_PROTOCOL_VERSION: 20260728, META_CLIENT_CAPABILITIES: {}}),
        ] {
            let e = Era::of(&modern(meta), None, Arc::default).unwrap_err();
            assert_eq!(e.code(), ErrorCode::INVALID_PARAMS, "{e:?}");
            assert_eq!(e.data(), None);
        }
    }

    #[test]
    fn a_modern_result_gets_its_type_and_the_server_info_a_legacy_one_nothing() {
        let mut v = json!({"tools": [], "_meta": {"x": 1}});
        stamp(Revision::V2026_07_28, ResultType::Complete, &mut v);
        assert_eq!(v["resultType"], "complete");
        assert_eq!(v["_meta"]["x"], 1);
        assert_eq!(v["_meta"][META_SERVER_INFO]["name"], "mcp-exec");
        let mut v = json!({});
        stamp(Revision::V2025_11_25, ResultType::Complete, &mut v);
        assert_eq!(v, json!({}));
    }
}
