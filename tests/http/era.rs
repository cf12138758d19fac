//! MCP 2026-07-28 over Streamable HTTP beyond its golden
//! transcript: a closed response stream IS the cancellation of its request
//! (a blocking `execute` tears its job down), progress streams over SSE, and
//! a stateless request needs the token like every request.

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Both, http};
use crate::support::http::Reply;
use crate::support::{TIMEOUT, Target, tool_json, wait_for};

/// The per-request `_meta` of a 2026-07-28 request.
fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {}})
}

/// A 2026-07-28 `tools/call` body.
fn call_body(id: i64, tool: &str, args: Value, progress: Option<&str>) -> String {
    let mut m = meta();
    if let Some(token) = progress {
        m["progressToken"] = json!(token);
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": args, "_meta": m}})
    .to_string()
}

/// The head of a 2026-07-28 `tools/call` POST, with its routing headers.
fn call_head(tool: &str, accept: &str, token: Option<&str>, len: usize) -> String {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: {accept}\r\n\
         Content-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\n{auth}Content-Length: {len}\r\n\r\n"
    )
}

/// A 2026-07-28 `tools/call` over its own connection, read whole.
fn modern_call(port: u16, id: i64, tool: &str, args: Value, token: Option<&str>) -> Reply {
    let body = call_body(id, tool, args, None);
    let mut headers = vec![
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ];
    let auth = token.map(|t| format!("Bearer {t}"));
    if let Some(a) = &auth {
        headers.push(("Authorization", a));
    }
    http(port, "POST", "/mcp", &headers, &body)
}

/// The labels of the jobs `list_jobs` shows, asked in 2026-07-28.
fn listed_labels(port: u16) -> Vec<String> {
    let r = modern_call(port, 90, "list_jobs", json!({}), None);
    assert_eq!(r.status, 200, "{r:?}");
    tool_json(&r.json()["result"])["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|j| j["label"].as_str().map(str::to_owned))
        .collect()
}

/// Pids (host view) whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(Path::new("/proc").join(pid.to_string()).join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}

fn a_2026_07_28_blocking_execute_whose_stream_closes_is_cancelled_and_its_job_torn_down(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_PROGRESS_INTERVAL", "0.2")], &[]);
    // A plain JSON answer (the handler's future is dropped), and an SSE stream
    // that already carried progress events (its body is dropped).
    for (n, (accept, progress)) in [
        ("application/json", None),
        ("application/json, text/event-stream", Some("p")),
    ]
    .into_iter()
    .enumerate()
    {
        let marker = format!("era-closed-{n}-{}", std::process::id());
        // `; :` keeps the shell (the marker's process) alive beside its sleep.
        let args = json!({"command": format!("sleep 30; : {marker}"), "label": marker});
        let body = call_body(3, "execute", args, progress);
        {
            let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
            let head = call_head("execute", accept, None, body.len());
            write!(c, "{head}{body}").unwrap();
            assert!(
                wait_for(TIMEOUT, || !processes_with(&marker).is_empty()),
                "{accept}: the job never started"
            );
            assert!(listed_labels(s.port).contains(&marker), "{accept}");
            std::thread::sleep(Duration::from_millis(300));
            // Dropped: the client closes the stream while the call blocks.
        }
        assert!(
            wait_for(TIMEOUT, || processes_with(&marker).is_empty()),
            "{accept}: the job's processes outlived the closed stream: {:?}",
            processes_with(&marker)
        );
        assert!(
            wait_for(TIMEOUT, || !listed_labels(s.port).contains(&marker)),
            "{accept}: the cancelled job is still listed"
        );
    }
}

fn a_2026_07_28_call_with_a_progress_token_streams_progress_then_its_typed_result(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_PROGRESS_INTERVAL", "0.2")], &[]);
    let body = call_body(
        4,
        "execute",
        json!({"command": "sleep 0.7; echo p"}),
        Some("tok-4"),
    );
    let r = http(
        s.port,
        "POST",
        "/mcp",
        &[
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "execute"),
        ],
        &body,
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("content-type"), Some("text/event-stream"), "{r:?}");
    assert_eq!(r.header("x-accel-buffering"), Some("no"), "{r:?}");
    assert_eq!(r.header("mcp-session-id"), None, "{r:?}");
    let events: Vec<Value> = r
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let (last, progress) = events.split_last().expect("events");
    assert!(!progress.is_empty(), "{events:?}");
    for p in progress {
        assert_eq!(p["method"], json!("notifications/progress"), "{p}");
        assert_eq!(p["params"]["progressToken"], json!("tok-4"), "{p}");
    }
    assert_eq!(last["id"], json!(4), "{last}");
    assert_eq!(last["result"]["resultType"], json!("complete"), "{last}");
    assert_eq!(tool_json(&last["result"])["stdout"]["data"], json!("p\n"));
}

fn a_2026_07_28_request_needs_the_token_like_every_request(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_HTTP_TOKEN", "era-token")], &[]);
    let without = modern_call(s.port, 5, "list_jobs", json!({}), None);
    assert_eq!(without.status, 401, "{without:?}");
    assert_eq!(without.header("www-authenticate"), Some("Bearer"));
    let wrong = modern_call(s.port, 6, "list_jobs", json!({}), Some("nope"));
    assert_eq!(wrong.status, 401, "{wrong:?}");
    let right = modern_call(s.port, 7, "list_jobs", json!({}), Some("era-token"));
    assert_eq!(right.status, 200, "{right:?}");
    assert_eq!(right.json()["result"]["resultType"], json!("complete"));
}

/// One `#[test]` per target in modules `bare` and `pid1`.
macro_rules! era_targets {
    ($($name:ident),* $(,)?) => {
        mod bare { $( #[test] fn $name() { if crate::support::Target::Bare.available() { super::$name(crate::support::Target::Bare) } } )* }
        mod pid1 { $( #[test] fn $name() { if crate::support::Target::Pid1.available() { super::$name(crate::support::Target::Pid1) } } )* }
    };
}

era_targets!(
    a_2026_07_28_blocking_execute_whose_stream_closes_is_cancelled_and_its_job_torn_down,
    a_2026_07_28_call_with_a_progress_token_streams_progress_then_its_typed_result,
    a_2026_07_28_request_needs_the_token_like_every_request,
);
