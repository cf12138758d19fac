//! Tool descriptions for `tools/list`: description and `inputSchema` always;
//! `annotations` from 2025-03-26; `title` and `outputSchema` from 2025-06-18.
//!
//! The input schemas match SPEC §4 (required fields, types, and the
//! stream-spec and capture-policy `oneOf`s). Output schemas describe the
//! `structuredContent` objects (for `wait`, `{results:[…]}`).

use serde_json::{Value, json};

use crate::protocol::version::Revision;

fn stream_spec() -> Value {
    json!({
        "description": "Which part of a stream to return: \"none\" (or null or \"\"), \"all\" (the retained window), {\"tail\": N} (last N lines), or {\"from\": P, \"length\": L, \"unaligned\": false} (bytes from absolute offset P; continue at offset+bytes).",
        "oneOf": [
            {"type": "null"},
            {"type": "string", "enum": ["none", "all", ""]},
            {"type": "object", "properties": {"tail": {"type": "integer", "minimum": 0}}, "required": ["tail"]},
            {"type": "object", "properties": {
                "from": {"type": "integer"},
                "length": {"type": "integer"},
                "unaligned": {"type": "boolean"}
            }, "required": ["from"]}
        ]
    })
}

fn capture_side() -> Value {
    json!({
        "oneOf": [
            {"type": "string", "enum": ["stdout", "stderr", "all", "none"]},
            {"type": "object", "properties": {"stdout": stream_spec(), "stderr": stream_spec()}}
        ]
    })
}

fn slice_schema() -> Value {
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

fn status_props() -> serde_json::Map<String, Value> {
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

fn job_result_schema() -> Value {
    let mut props = status_props();
    props.insert("stdout".into(), slice_schema());
    props.insert("stderr".into(), slice_schema());
    props.insert("stdin_error".into(), json!({"type": "string"}));
    json!({"type": "object", "properties": props, "required": ["job_id", "state"]})
}

struct Tool {
    title: &'static str,
    description: &'static str,
    input: Value,
    output: Value,
    read_only: bool,
}

fn tool(name: &str) -> Tool {
    let job_id = json!({"type": "string", "description": "A job id such as \"job-1\"."});
    match name {
        "execute" => Tool {
            title: "Run a shell command",
            description: "Run a shell command ($SHELL -c, /bin/sh by default) as a job. By default blocks until it ends and returns its exit code and output (stdout on success, stderr on error); with nowait returns the job id at once for wait/status/output/input/kill. stdin stays open unless close_stdin is true.",
            input: json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "Shell command line (must not be blank)."},
                    "cwd": {"type": "string", "description": "Working directory (default: the server's)."},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Variables layered over the server's environment."},
                    "stdin": {"type": "string", "description": "Written to the job's stdin at once."},
                    "close_stdin": {"type": "boolean", "description": "Close stdin after writing (default false: stays open for input)."},
                    "nowait": {"type": "boolean", "description": "Return {job_id, state:\"running\"} at once."},
                    "capture": {
                        "type": "object",
                        "description": "What the terminal result carries: on_success / on_error, each \"stdout\", \"stderr\", \"all\", \"none\" or {stdout, stderr} stream specs. Default: stdout on success, stderr on error.",
                        "properties": {"on_success": capture_side(), "on_error": capture_side()}
                    }
                },
                "required": ["command"]
            }),
            output: job_result_schema(),
            read_only: false,
        },
        "wait" => Tool {
            title: "Wait for jobs",
            description: "Block until any of the listed jobs ends, or the timeout. Returns one entry per id, in order: ended jobs with their full result (and they are removed), running ones as {job_id, state:\"running\"}.",
            input: json!({
                "type": "object",
                "properties": {
                    "job_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "timeout": {"type": "number", "description": "Seconds (default 30); <= 0 polls."}
                },
                "required": ["job_ids"]
            }),
            output: json!({
                "type": "object",
                "properties": {"results": {"type": "array", "items": job_result_schema()}},
                "required": ["results"]
            }),
            read_only: true,
        },
        "status" => Tool {
            title: "Job status",
            description: "A job's state and exit code, without removing it.",
            input: json!({"type": "object", "properties": {"job_id": job_id}, "required": ["job_id"]}),
            output: json!({"type": "object", "properties": status_props(), "required": ["job_id", "state"]}),
            read_only: true,
        },
        "output" => Tool {
            title: "Read job output",
            description: "Read a running or ended job's stdout/stderr by stream spec (all, tail N lines, or from an absolute byte offset), without removing it.",
            input: json!({
                "type": "object",
                "properties": {"job_id": job_id, "stdout": stream_spec(), "stderr": stream_spec()},
                "required": ["job_id"]
            }),
            output: job_result_schema(),
            read_only: true,
        },
        "input" => Tool {
            title: "Write to a job's stdin",
            description: "Write data to a running job's stdin; close sends EOF after the data.",
            input: json!({
                "type": "object",
                "properties": {"job_id": job_id, "data": {"type": "string"}, "close": {"type": "boolean"}},
                "required": ["job_id"]
            }),
            output: json!({"type": "object", "properties": status_props(), "required": ["job_id", "state"]}),
            read_only: false,
        },
        "kill" => Tool {
            title: "Signal a job",
            description: "Send a signal to a job's whole process group and verify that it died (process reaped and group empty). signal: a name (TERM, KILL, INT…), a number, or ASSURED (TERM, then KILL if anything survives the timeout).",
            input: json!({
                "type": "object",
                "properties": {
                    "job_id": job_id,
                    "signal": {"type": "string", "description": "Default TERM."},
                    "timeout": {"type": "number", "description": "Seconds to wait for death after each signal (default 5; 0 = don't wait)."}
                },
                "required": ["job_id"]
            }),
            output: json!({
                "type": "object",
                "properties": {
                    "job_id": {"type": "string"},
                    "terminated": {"type": "boolean"},
                    "already_terminated": {"type": "boolean"},
                    "signal_sent": {"type": "integer"},
                    "escalated": {"type": "boolean"},
                    "result": job_result_schema(),
                    "result_delivered_elsewhere": {"type": "boolean"},
                    "state": {"type": "string"},
                    "detail": {"type": "string"}
                },
                "required": ["job_id", "terminated"]
            }),
            read_only: false,
        },
        _ => Tool {
            title: "List jobs",
            description: "Every job that is running or whose result has not been delivered yet, oldest first.",
            input: json!({"type": "object", "properties": {}}),
            output: json!({
                "type": "object",
                "properties": {"jobs": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"job_id": {"type": "string"}, "state": {"type": "string"}},
                    "required": ["job_id", "state"]
                }}},
                "required": ["jobs"]
            }),
            read_only: true,
        },
    }
}

/// The `tools/list` entry for `name` in a session of `revision`.
pub fn describe(name: &str, revision: Revision) -> Value {
    let t = tool(name);
    let mut v = json!({"name": name, "description": t.description, "inputSchema": t.input});
    if revision.has_structured_output() {
        v["title"] = json!(t.title);
        v["outputSchema"] = t.output;
    }
    if revision.has_annotations() {
        v["annotations"] = if t.read_only {
            json!({"title": t.title, "readOnlyHint": true, "openWorldHint": false})
        } else {
            json!({"title": t.title, "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true})
        };
    }
    v
}
