//! Schema fragments shared by several tools: stream specs, capture
//! policies, slices, the status and job-result objects. Each tool's own
//! schemas live in its file.
//!
//! Input schemas match SPEC §4 (required fields, types). `oneOf` appears
//! only *inside* properties (stream specs, capture sides), never at the top
//! of an `inputSchema` (SPEC Part II: flat schemas). Output schemas describe
//! the `structuredContent` objects (for `wait`, `{results:[…]}`).

use serde_json::{Value, json};

/// A stream spec (SPEC §5.1).
pub fn stream_spec() -> Value {
    json!({
        "description": "Which part of a stream to return: \"none\" (or null or \"\"), \"all\" (the retained window), {\"tail\": N} (last N lines), or {\"from\": P, \"length\": L, \"unaligned\": false} (bytes from absolute offset P; continue at offset+bytes).",
        "oneOf": [
            {"type": "null"},
            {"type": "string", "enum": ["none", "all", ""]},
            {"type": "object", "properties": {"tail": {"type": "integer"}}, "required": ["tail"]},
            {"type": "object", "properties": {
                "from": {"type": "integer"},
                "length": {"type": "integer"},
                "unaligned": {"type": "boolean"}
            }, "required": ["from"]}
        ]
    })
}

/// One side of a capture policy (SPEC §5.2).
pub fn capture_side() -> Value {
    json!({
        "oneOf": [
            {"type": "string", "enum": ["stdout", "stderr", "all", "none"]},
            {"type": "object", "properties": {"stdout": stream_spec(), "stderr": stream_spec()}}
        ]
    })
}

/// A slice (SPEC §5.1).
pub fn slice_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "data": {"type": "string"},
            "offset": {"type": "integer"},
            "bytes": {"type": "integer"},
            "total_bytes": {"type": "integer"},
            "truncated": {"type": "boolean"},
            "dropped_bytes": {"type": "integer"}
        },
        "required": ["data", "offset", "bytes", "total_bytes"]
    })
}

/// The properties of the status object (SPEC §4.4).
pub fn status_props() -> serde_json::Map<String, Value> {
    let v = json!({
        "job_id": {"type": "string"},
        "state": {"type": "string", "enum": ["running", "success", "error"]},
        "exit_code": {"type": "integer"},
        "signal": {"type": "string"},
        "signal_number": {"type": "integer"},
        "start_error": {"type": "string"}
    });
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// A job result (SPEC §4.1).
pub fn job_result_schema() -> Value {
    let mut props = status_props();
    props.insert("stdout".into(), slice_schema());
    props.insert("stderr".into(), slice_schema());
    props.insert("stdin_error".into(), json!({"type": "string"}));
    json!({"type": "object", "properties": props, "required": ["job_id", "state"]})
}

/// The status object (SPEC §4.4).
pub fn status_schema() -> Value {
    json!({"type": "object", "properties": status_props(), "required": ["job_id", "state"]})
}

/// A `job_id` input property.
pub fn job_id() -> Value {
    json!({"type": "string", "description": "A job id such as \"job-1\"."})
}
