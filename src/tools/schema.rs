//! Schema fragments shared by several tools: stream specs, capture
//! policies, slices, the status and job-result objects. Each tool's own
//! schemas live in its file.
//!
//! Input schemas match the tools' inputs in docs/tools.md (required fields,
//! types). `oneOf` appears only *inside* properties (stream specs, capture
//! sides), never at the top of an `inputSchema`: schemas stay flat, since
//! some clients reject the whole tool list for a top-level `oneOf`. Output
//! schemas describe the `structuredContent` objects (for `wait`,
//! `{results:[…]}`).

use serde_json::{Value, json};

use crate::jobs::Cause;
use crate::protocol::version::Revision;

/// A stream spec.
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

/// One side of a capture policy.
pub fn capture_side() -> Value {
    json!({
        "oneOf": [
            {"type": "string", "enum": ["stdout", "stderr", "all", "none"]},
            {"type": "object", "properties": {"stdout": stream_spec(), "stderr": stream_spec()}}
        ]
    })
}

/// A slice.
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

/// The properties of the status object.
pub fn status_props(rev: Revision) -> serde_json::Map<String, Value> {
    let v = if rev.has_part_two() {
        json!({
            "job_id": {"type": "string"},
            "state": {"type": "string", "enum": ["queued", "running", "success", "error"]},
            "queued_for": {"type": "string", "enum": crate::jobs::result::QUEUED_FOR},
            "label": {"type": "string"},
            "exit_code": {"type": "integer"},
            "signal": {"type": "string"},
            "signal_number": {"type": "integer"},
            "start_error": {"type": "string"},
            "awaiting_input": {"type": "boolean", "description": "true while the running job is blocked reading its stdin or terminal"},
            "ports": ports_schema()
        })
    } else {
        json!({
            "job_id": {"type": "string"},
            "state": {"type": "string", "enum": ["running", "success", "error"]},
            "exit_code": {"type": "integer"},
            "signal": {"type": "string"},
            "signal_number": {"type": "integer"},
            "start_error": {"type": "string"}
        })
    };
    let mut props = match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    if rev.has_terminals() {
        props.insert(
            "tty".into(),
            json!({"type": "boolean", "description": "A terminal job (execute with tty: true)."}),
        );
    }
    props
}

/// A job result.
pub fn job_result_schema(rev: Revision) -> Value {
    let mut props = status_props(rev);
    if rev.has_part_two() {
        props.insert("timed_out".into(), json!({"type": "boolean"}));
        props.insert(
            "cause".into(),
            json!({"type": "string", "enum": Cause::ALL.map(Cause::name)}),
        );
        props.insert(
            "started_at".into(),
            json!({"type": "string", "format": "date-time"}),
        );
        props.insert("duration_ms".into(), json!({"type": "integer"}));
        props.insert("queued_ms".into(), json!({"type": "integer"}));
        props.insert("yielded".into(), json!({"type": "boolean"}));
        props.insert(
            "matched".into(),
            json!({"type": "object", "properties": {
                "stream": {"type": "string"}, "offset": {"type": "integer"}, "bytes": {"type": "integer"}
            }}),
        );
        props.insert("went_quiet".into(), json!({"type": "number"}));
    }
    if rev.has_terminals() {
        props.insert("screen".into(), screen_schema());
    }
    props.insert("stdout".into(), slice_schema());
    props.insert("stderr".into(), slice_schema());
    props.insert("stdin_error".into(), json!({"type": "string"}));
    json!({"type": "object", "properties": props, "required": ["job_id", "state"]})
}

/// A terminal job's screen: the `screen` tool's result, and
/// `screen` in a terminal job's delivered result.
pub fn screen_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "cols": {"type": "integer"},
            "rows": {"type": "integer"},
            "lines": {"type": "array", "items": {"type": "string"}, "description": "The visible rows, top to bottom, trailing blanks trimmed."},
            "cursor": {"type": "object", "properties": {
                "row": {"type": "integer"}, "col": {"type": "integer"}, "visible": {"type": "boolean"}
            }, "required": ["row", "col", "visible"]},
            "alternate_screen": {"type": "boolean"},
            "title": {"type": "string"},
            "offset": {"type": "integer", "description": "The raw stdout byte offset this screen reflects."},
            "scrollback": {"type": "array", "items": {"type": "string"}, "description": "Lines from above the screen, oldest first (when asked for)."}
        },
        "required": ["cols", "rows", "lines", "cursor", "alternate_screen", "offset"]
    })
}

/// The status object.
pub fn status_schema(rev: Revision) -> Value {
    json!({"type": "object", "properties": status_props(rev), "required": ["job_id", "state"]})
}

/// The `ports` of a running job that listens, as `GET /ports`
/// lists them.
pub fn ports_schema() -> Value {
    json!({
        "type": "array",
        "description": "the TCP sockets the running job listens on",
        "items": {
            "type": "object",
            "properties": {
                "port": {"type": "integer"},
                "proto": {"type": "string", "enum": ["tcp", "tcp6"]},
                "addr": {"type": "string"},
                "loopback_only": {"type": "boolean"},
                "pid": {"type": ["integer", "null"]},
                "job_id": {"type": ["string", "null"]}
            },
            "required": ["port", "proto", "addr", "loopback_only", "pid", "job_id"]
        }
    })
}

/// A `job_id` input property.
pub fn job_id() -> Value {
    json!({"type": "string", "description": "A job id such as \"job-1\"."})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The enums of the result schema against every documented `cause` and
    /// `queued_for` value, written out here: a client that validates structured
    /// content (the TypeScript SDK does) rejects a whole result whose value
    /// is missing from its enum.
    #[test]
    fn the_result_schema_lists_every_cause_and_queued_for_the_spec_names() {
        let spec_causes = [
            "oom",
            "cpu_limit",
            "file_size_limit",
            "timeout",
            "idle_timeout",
            "killed",
            "shutdown",
        ];
        for rev in Revision::ALL.into_iter().filter(|r| r.has_part_two()) {
            let schema = job_result_schema(rev);
            let causes = schema["properties"]["cause"]["enum"].as_array().cloned();
            let causes = causes.unwrap_or_default();
            for c in spec_causes {
                assert!(causes.contains(&json!(c)), "{c} in {rev:?}");
            }
            let queued = schema["properties"]["queued_for"]["enum"]
                .as_array()
                .cloned();
            let queued = queued.unwrap_or_default();
            for q in ["capacity", "shell_session"] {
                assert!(queued.contains(&json!(q)), "{q} in {rev:?}");
            }
        }
        for cause in Cause::ALL {
            assert!(spec_causes.contains(&cause.name()), "{}", cause.name());
        }
    }
}
