//! The JSON-RPC 2.0 wire format of MCP, as pure data (no I/O).
//!
//! This module is a leaf: it imports nothing from the rest of the crate, and
//! everything above it (session, tools, jobs) may use its types. It
//! classifies incoming values and builds outgoing messages; transports do
//! the framing (on stdio: one compact JSON value per line, UTF-8,
//! `\n`-terminated, in both directions, see [`mod@line`]) and the I/O.
//!
//! - [`result`]: the `tools/call` result shape ([`result::CallResult`]).
//! - [`version`]: revision negotiation, and every choice that depends on
//!   the revision a request is served in, in one place.
//! - [`era`]: how one request's revision is decided (per-request `_meta`
//!   or its session's `initialize`), what its client declared, and what a
//!   2026-07-28 result carries (`resultType`).
//!
//! Incoming messages:
//! - request: `{"jsonrpc":"2.0","id":<string|integer>,"method":<string>,"params"?:<any>}`
//! - notification: the same without `id`
//! - anything with `result`/`error` and no `method` is a response from the
//!   client; we send no requests, so those are ignored.
//!
//! Outgoing messages:
//! - success: `{"jsonrpc":"2.0","id":<id>,"result":<value>}`
//! - error: `{"jsonrpc":"2.0","id":<id|null>,"error":{"code":<int>,"message":<string>}}`
//! - notification: `{"jsonrpc":"2.0","method":<string>,"params":<object>}`
//!
//! Request ids are strings or integers and are distinct by type: `"1"` and
//! `1` are different requests (and cancelling one never touches the other).

pub mod era;
pub mod line;
pub mod result;
pub mod version;

use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// A JSON-RPC error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ErrorCode(pub i32);

impl ErrorCode {
    /// The line is not valid JSON (or too long to be read).
    pub const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
    /// The value is not a valid request object.
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
    /// Unknown method, or unknown tool.
    pub const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
    /// Malformed `params`.
    pub const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
    /// A bug on our side (a request task that died).
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);
    /// The request was cancelled (by the client or by shutdown).
    pub const REQUEST_CANCELLED: ErrorCode = ErrorCode(-32800);
}

/// A request id: a string or an integer, distinct by type.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RequestId {
    /// `"id": "abc"`
    Str(String),
    /// `"id": 7` (negative ids are accepted too)
    Int(i64),
    /// `"id": 18446744073709551615`: integers past `i64::MAX`
    UInt(u64),
}

impl RequestId {
    /// Reads an id; `None` for anything but a string or an integer.
    pub fn from_value(v: &Value) -> Option<RequestId> {
        match v {
            Value::String(s) => Some(RequestId::Str(s.clone())),
            Value::Number(n) => n
                .as_i64()
                .map(RequestId::Int)
                .or_else(|| n.as_u64().map(RequestId::UInt)),
            _ => None,
        }
    }

    /// The id as it goes back on the wire.
    pub fn to_value(&self) -> Value {
        match self {
            RequestId::Str(s) => Value::String(s.clone()),
            RequestId::Int(n) => Value::from(*n),
            RequestId::UInt(n) => Value::from(*n),
        }
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Str(s) => write!(f, "{s:?}"),
            RequestId::Int(n) => write!(f, "{n}"),
            RequestId::UInt(n) => write!(f, "{n}"),
        }
    }
}

/// One classified incoming message.
#[derive(Debug)]
pub enum Incoming {
    /// A request that expects a response.
    Request {
        /// Its id.
        id: RequestId,
        /// The method name.
        method: String,
        /// `params`, `Value::Null` when absent.
        params: Value,
    },
    /// A notification (no response, ever).
    Notification {
        /// The method name.
        method: String,
        /// `params`, `Value::Null` when absent.
        params: Value,
    },
    /// A response to a request we never sent: ignored.
    Response,
    /// Not a valid message; answer with this error (id null when unknown).
    Invalid {
        /// The id, when one could be read.
        id: Option<RequestId>,
        /// What was wrong.
        message: String,
    },
}

impl Incoming {
    /// Classifies one parsed JSON value (not an array: batches are the
    /// session's business).
    pub fn classify(value: Value) -> Incoming {
        let Value::Object(mut obj) = value else {
            return Incoming::Invalid {
                id: None,
                message: "invalid request: expected a JSON object".into(),
            };
        };
        let id = match obj.get("id") {
            None => None,
            Some(v) => match RequestId::from_value(v) {
                Some(id) => Some(id),
                None => {
                    return Incoming::Invalid {
                        id: None,
                        message: "invalid request: \"id\" must be a string or an integer".into(),
                    };
                }
            },
        };
        let params = obj.remove("params").unwrap_or(Value::Null);
        match obj.remove("method") {
            Some(Value::String(method)) => match id {
                Some(id) => Incoming::Request { id, method, params },
                None => Incoming::Notification { method, params },
            },
            Some(_) => Incoming::Invalid {
                id,
                message: "invalid request: \"method\" must be a string".into(),
            },
            None if obj.contains_key("result") || obj.contains_key("error") => Incoming::Response,
            None => Incoming::Invalid {
                id,
                message: "invalid request: missing \"method\"".into(),
            },
        }
    }
}

#[derive(Serialize)]
struct ErrorObject<'a> {
    code: ErrorCode,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Value>,
}

#[derive(Serialize)]
struct ResponseOut<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorObject<'a>>,
}

#[derive(Serialize)]
struct NotificationOut<'a, T: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a T,
}

fn to_line<T: Serialize>(v: &T) -> String {
    // Serialising our own types (strings, numbers, Values) cannot fail.
    serde_json::to_string(v).unwrap_or_else(|e| {
        format!(r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"serialising a response: {e}"}}}}"#)
    })
}

/// A success response line.
pub fn success_line<T: Serialize>(id: &RequestId, result: &T) -> String {
    to_line(&ResponseOut {
        jsonrpc: "2.0",
        id: id.to_value(),
        result: Some(result),
        error: None,
    })
}

/// Writes a success response (without its newline) straight into `w`: a
/// tool result can be megabytes, and is never held as one string.
pub fn write_success<W: std::io::Write, T: Serialize>(
    w: W,
    id: &RequestId,
    result: &T,
) -> std::io::Result<()> {
    serde_json::to_writer(
        w,
        &ResponseOut {
            jsonrpc: "2.0",
            id: id.to_value(),
            result: Some(result),
            error: None,
        },
    )
    .map_err(std::io::Error::from)
}

/// A success response line whose result is already compact JSON (a cached
/// `tools/list`): the line is assembled by copying, not serialising.
pub fn success_line_raw(id: &RequestId, result_json: &str) -> String {
    let id = to_line(&id.to_value());
    let mut line = String::with_capacity(result_json.len() + id.len() + 36);
    line.push_str(r#"{"jsonrpc":"2.0","id":"#);
    line.push_str(&id);
    line.push_str(r#","result":"#);
    line.push_str(result_json);
    line.push('}');
    line
}

/// An error response line; `id` is `None` when the request's id is unknown.
pub fn error_line(id: Option<&RequestId>, code: ErrorCode, message: &str) -> String {
    error_line_of(id, code, message, None)
}

/// An error response line with `data` (`-32022`'s `{supported, requested}`).
pub fn error_line_with_data(
    id: Option<&RequestId>,
    code: ErrorCode,
    message: &str,
    data: &Value,
) -> String {
    error_line_of(id, code, message, Some(data))
}

fn error_line_of(
    id: Option<&RequestId>,
    code: ErrorCode,
    message: &str,
    data: Option<&Value>,
) -> String {
    to_line(&ResponseOut::<()> {
        jsonrpc: "2.0",
        id: id.map_or(Value::Null, RequestId::to_value),
        result: None,
        error: Some(ErrorObject {
            code,
            message,
            data,
        }),
    })
}

/// A notification line.
pub fn notification_line<T: Serialize>(method: &str, params: &T) -> String {
    to_line(&NotificationOut {
        jsonrpc: "2.0",
        method,
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_and_integer_ids_are_distinct() {
        let a = RequestId::from_value(&json!("1")).unwrap();
        let b = RequestId::from_value(&json!(1)).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.to_value(), json!("1"));
        assert_eq!(b.to_value(), json!(1));
    }

    #[test]
    fn float_bool_and_null_ids_make_an_invalid_request() {
        for id in [json!(1.5), json!(true), json!(null), json!([1])] {
            let m = Incoming::classify(json!({"jsonrpc":"2.0","id":id,"method":"ping"}));
            assert!(matches!(m, Incoming::Invalid { id: None, .. }), "{m:?}");
        }
    }

    #[test]
    fn messages_are_classified_by_id_and_method() {
        assert!(matches!(
            Incoming::classify(json!({"jsonrpc":"2.0","id":3,"method":"ping"})),
            Incoming::Request {
                id: RequestId::Int(3),
                ..
            }
        ));
        assert!(matches!(
            Incoming::classify(json!({"jsonrpc":"2.0","method":"notifications/initialized"})),
            Incoming::Notification { .. }
        ));
        assert!(matches!(
            Incoming::classify(json!({"jsonrpc":"2.0","id":3,"result":{}})),
            Incoming::Response
        ));
        assert!(matches!(
            Incoming::classify(json!("ping")),
            Incoming::Invalid { .. }
        ));
    }

    #[test]
    fn error_lines_carry_a_null_id_when_the_id_is_unknown() {
        let line = error_line(None, ErrorCode::PARSE_ERROR, "parse error");
        assert_eq!(
            line,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}"#
        );
        let line = success_line(&RequestId::Str("a".into()), &json!({}));
        assert_eq!(line, r#"{"jsonrpc":"2.0","id":"a","result":{}}"#);
        let raw = success_line_raw(&RequestId::Str("a".into()), "{}");
        assert_eq!(raw, line);
    }
}
