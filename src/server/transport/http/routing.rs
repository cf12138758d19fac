//! The request headers of the 2026-07-28 Streamable HTTP binding, checked
//! against the body they mirror ("Server Validation"): `MCP-Protocol-Version`
//! (the body's `_meta["io.modelcontextprotocol/protocolVersion"]`),
//! `Mcp-Method` (`method`) and, for the methods
//! [`routing_name`] names, `Mcp-Name`
//! (`params.name` or `params.uri`, plain or in the Base64 sentinel
//! `=?base64?…?=`). A missing, undecodable or different header is
//! `-32020` `HeaderMismatch`, which the transport answers `400`: a load
//! balancer that routes on a header and a server that acts on the body can
//! never disagree about a request.
//!
//! What it is not: the check of the per-request `_meta` itself (`-32022`,
//! `-32602`), which [`Era::of`](crate::protocol::era::Era::of) makes for
//! every transport. We designate no tool parameter with `x-mcp-header`, so
//! `Mcp-Param-*` headers are not ours and are ignored.

use base64::Engine as _;
use hyper::HeaderMap;
use serde_json::Value;

use crate::protocol::era::{META_PROTOCOL_VERSION, routing_name};
use crate::server::session::Single;

/// Checks the routing headers of a modern request against its body; `Err`
/// is the `HeaderMismatch` message.
pub(super) fn check(headers: &HeaderMap, message: &Single<'_>) -> Result<(), String> {
    let version = message
        .params
        .get("_meta")
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .and_then(Value::as_str);
    same(
        "MCP-Protocol-Version",
        header(headers, "mcp-protocol-version")?,
        version,
    )?;
    // A notification names its method too, but the binding defines no
    // header rule for it (2026-07-28: "not defined by this revision").
    if message.id.is_none() {
        return Ok(());
    }
    same("Mcp-Method", header(headers, "mcp-method")?, message.method)?;
    if let Some(field) = message.method.and_then(routing_name) {
        let body = message.params.get(field).and_then(Value::as_str);
        let name = header(headers, "mcp-name")?.map(decode).transpose()?;
        same("Mcp-Name", name.as_deref(), body)?;
    }
    Ok(())
}

/// The one check that comes before the body's own `_meta` is judged: an
/// `MCP-Protocol-Version` header naming another version than the body is a
/// mismatch (`-32020`) even when the body's version is one we do not serve
/// (which alone would be `-32022`). A header or body version that is absent
/// is left to [`check`] and [`Era::of`](crate::protocol::era::Era::of).
pub(super) fn check_version(headers: &HeaderMap, message: &Single<'_>) -> Result<(), String> {
    let body = message
        .params
        .get("_meta")
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .and_then(Value::as_str);
    match (header(headers, "mcp-protocol-version")?, body) {
        (Some(h), Some(b)) if h != b => same("MCP-Protocol-Version", Some(h), Some(b)),
        _ => Ok(()),
    }
}

/// A header's value, if present; `Err` when it is not visible ASCII.
fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, String> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(Some)
            .map_err(|_| format!("Header mismatch: {name} has invalid characters")),
    }
}

/// `Ok` when the header is present and equals the body's value.
fn same(name: &str, header: Option<&str>, body: Option<&str>) -> Result<(), String> {
    match (header, body) {
        (Some(h), Some(b)) if h == b => Ok(()),
        (None, _) => Err(format!("Header mismatch: the {name} header is required")),
        (Some(h), Some(b)) => Err(format!(
            "Header mismatch: {name} header value {h:?} does not match body value {b:?}"
        )),
        (Some(h), None) => Err(format!(
            "Header mismatch: {name} header value {h:?} has no value in the body to match"
        )),
    }
}

/// A value in the Base64 sentinel (`=?base64?<standard base64>?=`) decoded;
/// any other value as it is.
fn decode(value: &str) -> Result<String, String> {
    let Some(inner) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    else {
        return Ok(value.to_owned());
    };
    base64::engine::general_purpose::STANDARD
        .decode(inner)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| "Header mismatch: Mcp-Name is not valid base64 of UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn call(name: &str) -> Value {
        json!({"name": name, "_meta": {META_PROTOCOL_VERSION: "2026-07-28"}})
    }

    fn single<'a>(id: &'a Value, method: &'a str, params: &'a Value) -> Single<'a> {
        Single {
            id: Some(id),
            method: Some(method),
            params,
        }
    }

    #[test]
    fn matching_headers_pass_and_a_base64_name_is_decoded_first() {
        let id = json!(1);
        let p = call("execute");
        let ok = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "execute"),
        ]);
        assert_eq!(check(&ok, &single(&id, "tools/call", &p)), Ok(()));
        let encoded = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?ZXhlY3V0ZQ==?="),
        ]);
        assert_eq!(check(&encoded, &single(&id, "tools/call", &p)), Ok(()));
    }

    #[test]
    fn a_missing_or_different_header_is_a_mismatch() {
        let id = json!(1);
        let p = call("execute");
        for h in [
            headers(&[("mcp-method", "tools/call"), ("mcp-name", "execute")]),
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-name", "execute"),
            ]),
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
            ]),
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/list"),
                ("mcp-name", "execute"),
            ]),
            headers(&[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "kill"),
            ]),
        ] {
            let e = check(&h, &single(&id, "tools/call", &p)).unwrap_err();
            assert!(e.starts_with("Header mismatch"), "{e}");
        }
    }

    #[test]
    fn a_header_version_other_than_the_body_one_is_a_mismatch_before_anything_else() {
        let id = json!(1);
        let p = json!({"_meta": {META_PROTOCOL_VERSION: "v999.0.0"}});
        let h = headers(&[("mcp-protocol-version", "2026-07-28")]);
        assert!(check_version(&h, &single(&id, "server/discover", &p)).is_err());
        let same = headers(&[("mcp-protocol-version", "v999.0.0")]);
        assert_eq!(
            check_version(&same, &single(&id, "server/discover", &p)),
            Ok(())
        );
        let none = json!({});
        assert_eq!(
            check_version(&h, &single(&id, "server/discover", &none)),
            Ok(())
        );
    }

    #[test]
    fn only_the_methods_that_mirror_a_name_need_mcp_name() {
        let id = json!(1);
        let p = json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}});
        let h = headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
        ]);
        assert_eq!(check(&h, &single(&id, "tools/list", &p)), Ok(()));
    }
}
