//! Streamable HTTP and the operations endpoints (health, metrics) end to end:
//! a small HTTP/1.1 client over `std::net::TcpStream`, a timeout on every
//! read, against the binary started with `--http 127.0.0.1:0` (it prints
//! the port it bound on stderr). The bare and PID-1 targets share the host's
//! network, so both are reachable on loopback.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::http::{Reply, parse, request};
use crate::support::{LATEST, Server, TIMEOUT, Target, tool_json, wait_for};

/// `POST /exec`: streaming execution.
mod exec;

/// `/files`: streamed file transfer and the file API.
mod files;

/// `GET /files/<dir>?watch`: a directory's changes as SSE.
mod watch;

/// `GET /jobs/<id>/tty`: terminal attach over a WebSocket, with the Python `websockets` client.
mod tty;

/// Ports and previews: `GET /ports`, `ports` fields, `wait` until a port, the `/ports/<n>/` proxy.
mod ports;

/// Abuse on loopback: wrong tokens, slow clients, oversize bodies, garbage sessions.
mod abuse;

/// Issue 20: a token-less connection flood, stalled transfers, the smaller guards.
mod hardening;

/// MCP 2026-07-28: a closed stream cancels, progress over SSE, the token.
mod era;

/// Sends one request (`Connection: close`) and reads the whole response.
fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    request(port, method, path, headers, body, TIMEOUT).expect("an HTTP exchange")
}

/// A server with stdio and an HTTP listener on an ephemeral port.
struct Both {
    stdio: Server,
    port: u16,
    metrics_port: Option<u16>,
    /// The server's own pid on the host.
    server_pid: Option<u32>,
}

/// With HTTP on, stdin EOF does not end the server (and killing `unshare`
/// does not end the PID 1 it forked): kill the server itself.
impl Drop for Both {
    fn drop(&mut self) {
        if let Some(pid) = self.server_pid {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// The port printed in `mcp-exec: listening for WHAT on 127.0.0.1:PORT`.
pub(crate) fn bound_port(s: &Server, what: &str) -> u16 {
    let needle = format!("listening for {what} on ");
    let mut port = None;
    let found = wait_for(TIMEOUT, || {
        let log = s.stderr.lock().unwrap();
        port = log
            .lines()
            .find_map(|l| l.split_once(needle.as_str()))
            .and_then(|(_, addr)| addr.trim().rsplit_once(':'))
            .and_then(|(_, p)| p.parse().ok());
        port.is_some()
    });
    assert!(
        found,
        "no `{needle}` line on stderr:\n{}",
        s.stderr.lock().unwrap()
    );
    port.unwrap()
}

impl Both {
    fn start(t: Target, env: &[(&str, &str)], args: &[&str]) -> Both {
        let mut all = vec!["--http", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let stdio = Server::start_with_cli(t, env, &all);
        let port = bound_port(&stdio, "HTTP");
        let metrics_port = args
            .contains(&"--metrics-listen")
            .then(|| bound_port(&stdio, "metrics"));
        let server_pid = stdio.server_host_pid();
        Both {
            stdio,
            port,
            metrics_port,
            server_pid,
        }
    }

    fn post(&self, session: Option<&str>, body: &Value) -> Reply {
        let mut h = vec![("Accept", "application/json, text/event-stream")];
        if let Some(id) = session {
            h.push(("Mcp-Session-Id", id));
        }
        http(self.port, "POST", "/mcp", &h, &body.to_string())
    }

    /// `initialize` over HTTP; returns the session id.
    fn initialize(&self) -> String {
        let r = self.post(
            None,
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": LATEST, "capabilities": {},
                               "clientInfo": {"name": "http-test", "version": "0"}}}),
        );
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(
            r.json()["result"]["protocolVersion"],
            json!(LATEST),
            "{r:?}"
        );
        let id = r
            .header("mcp-session-id")
            .expect("Mcp-Session-Id")
            .to_owned();
        assert!(
            id.len() >= 32 && id.bytes().all(|b| b.is_ascii_graphic()),
            "{id:?}"
        );
        let n = self.post(
            Some(&id),
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        assert_eq!(n.status, 202, "{n:?}");
        assert!(n.body.is_empty(), "{n:?}");
        id
    }

    fn call(&self, session: &str, id: i64, tool: &str, args: Value) -> Value {
        let r = self.post(
            Some(session),
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": tool, "arguments": args}}),
        );
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
        let v = r.json();
        assert_eq!(v["id"], json!(id), "{v}");
        tool_json(&v["result"])
    }
}

// ---------------------------------------------------------------------------
// Sessions and messages
// ---------------------------------------------------------------------------

fn an_http_session_initializes_lists_tools_and_executes_a_command(t: Target) {
    let s = Both::start(t, &[], &["--no-stdio"]);
    let sid = s.initialize();
    let list = s.post(
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    assert_eq!(list.status, 200, "{list:?}");
    let names: Vec<String> = list.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.iter().any(|n| n == "execute"), "{names:?}");
    let r = s.call(&sid, 2, "execute", json!({"command": "echo over-http"}));
    assert_eq!(r["state"], json!("success"), "{r}");
    assert_eq!(r["stdout"]["data"], json!("over-http\n"), "{r}");
}

fn a_request_without_a_session_gets_400_an_unknown_one_404_and_a_deleted_one_404(t: Target) {
    let s = Both::start(t, &[], &[]);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(s.post(None, &ping).status, 400);
    assert_eq!(
        s.post(Some("0123456789abcdef0123456789abcdef"), &ping)
            .status,
        404
    );
    let sid = s.initialize();
    assert_eq!(s.post(Some(&sid), &ping).status, 200);
    let del = http(s.port, "DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], "");
    assert_eq!(del.status, 204, "{del:?}");
    assert_eq!(s.post(Some(&sid), &ping).status, 404);
    let del = http(s.port, "DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], "");
    assert_eq!(del.status, 404, "{del:?}");
}

fn a_protocol_version_header_must_be_the_negotiated_or_a_supported_one(t: Target) {
    let s = Both::start(t, &[], &[]);
    let sid = s.initialize();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let with = |v: &str| {
        http(
            s.port,
            "POST",
            "/mcp",
            &[("Mcp-Session-Id", &sid), ("MCP-Protocol-Version", v)],
            &ping,
        )
        .status
    };
    assert_eq!(with(LATEST), 200);
    assert_eq!(with("1999-01-01"), 400);
    assert_eq!(with("2025-03-26"), 400);
}

fn an_idle_session_expires_and_then_gets_404(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_HTTP_SESSION_IDLE", "1")], &[]);
    let sid = s.initialize();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(s.post(Some(&sid), &ping).status, 200);
    // Any request would keep it alive: stay away for idle + one sweep + slack.
    std::thread::sleep(Duration::from_millis(3000));
    assert_eq!(
        s.post(Some(&sid), &ping).status,
        404,
        "the idle session did not expire"
    );
}

fn a_batch_is_answered_as_one_array_in_a_2025_03_26_session_only(t: Target) {
    let s = Both::start(t, &[], &[]);
    let init = |rev: &str| {
        let r = s.post(
            None,
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                    "params": {"protocolVersion": rev}}),
        );
        r.header("mcp-session-id").unwrap().to_owned()
    };
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "execute", "arguments": {"command": "echo b"}}},
    ]);
    let old = init("2025-03-26");
    let r = s.post(Some(&old), &batch);
    assert_eq!(r.status, 200, "{r:?}");
    let v = r.json();
    let answers = v.as_array().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(answers.len(), 2, "{v}");
    assert_eq!(answers[0]["id"], json!(1), "{v}");
    assert_eq!(answers[1]["id"], json!(2), "{v}");
    let new = init(LATEST);
    let r = s.post(Some(&new), &batch);
    assert_eq!(r.json()["error"]["code"], json!(-32600), "{r:?}");
}

fn get_is_405_and_an_accept_without_json_is_406(t: Target) {
    let s = Both::start(t, &[], &[]);
    let sid = s.initialize();
    let get = http(s.port, "GET", "/mcp", &[("Mcp-Session-Id", &sid)], "");
    assert_eq!(get.status, 405, "{get:?}");
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let r = http(
        s.port,
        "POST",
        "/mcp",
        &[("Mcp-Session-Id", &sid), ("Accept", "text/event-stream")],
        &ping,
    );
    assert_eq!(r.status, 406, "{r:?}");
    let r = http(
        s.port,
        "POST",
        "/mcp",
        &[("Mcp-Session-Id", &sid), ("Accept", "*/*")],
        &ping,
    );
    assert_eq!(r.status, 200, "{r:?}");
}

fn a_progress_token_with_sse_accepted_streams_progress_naming_the_job_then_the_response(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_PROGRESS_INTERVAL", "0.2")], &[]);
    let sid = s.initialize();
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"command": "sleep 1.2; echo done"},
                   "_meta": {"progressToken": "tok"}}});
    let r = s.post(Some(&sid), &call);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("content-type"), Some("text/event-stream"), "{r:?}");
    let events: Vec<Value> = r
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let (last, progress) = events.split_last().expect("events");
    assert_eq!(last["id"], json!(7), "the response comes last: {events:?}");
    let result = tool_json(&last["result"]);
    assert_eq!(result["stdout"]["data"], json!("done\n"), "{result}");
    let job = result["job_id"].as_str().unwrap();
    assert!(progress.len() >= 2, "{events:?}");
    for (i, p) in progress.iter().enumerate() {
        assert_eq!(p["method"], json!("notifications/progress"), "{p}");
        assert_eq!(p["params"]["progress"], json!(i + 1), "{p}");
        assert_eq!(p["params"]["progressToken"], json!("tok"), "{p}");
        assert_eq!(
            p["params"]["message"],
            json!(format!("{job} still running")),
            "{p}"
        );
    }
    // Without SSE in Accept the same request gets plain JSON.
    let r = http(
        s.port,
        "POST",
        "/mcp",
        &[("Mcp-Session-Id", &sid), ("Accept", "application/json")],
        &call.to_string(),
    );
    assert_eq!(r.header("content-type"), Some("application/json"), "{r:?}");
    assert_eq!(r.json()["id"], json!(7), "{r:?}");
}

// ---------------------------------------------------------------------------
// Jobs are process-wide; disconnects detach
// ---------------------------------------------------------------------------

fn a_job_started_over_http_is_waited_for_over_stdio(t: Target) {
    let mut s = Both::start(t, &[], &[]);
    s.stdio.initialize(LATEST);
    let sid = s.initialize();
    let r = s.call(
        &sid,
        1,
        "execute",
        json!({"command": "sleep 0.3; echo shared", "nowait": true}),
    );
    let job = r["job_id"].as_str().unwrap().to_owned();
    let w = s.stdio.call("wait", json!({"job_ids": [job]}));
    // `wait`'s text content is the array of results.
    assert_eq!(w[0]["job_id"], json!(job), "{w}");
    assert_eq!(w[0]["stdout"]["data"], json!("shared\n"), "{w}");
}

fn a_blocking_execute_whose_client_disconnects_leaves_its_job_listed(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_PROGRESS_INTERVAL", "0.2")], &[]);
    let sid = s.initialize();
    // Plain JSON, and an SSE stream that already carried progress events.
    for (n, accept) in ["application/json", "application/json, text/event-stream"]
        .into_iter()
        .enumerate()
    {
        vanish_during_execute(&s, &sid, accept, n);
    }
}

fn vanish_during_execute(s: &Both, sid: &str, accept: &str, n: usize) {
    let label = format!("vanished-{n}");
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"command": "sleep 1.5; echo kept", "label": label},
                   "_meta": {"progressToken": n}}})
    .to_string();
    {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        write!(
            c,
            "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: {accept}\r\n\
             Mcp-Session-Id: {sid}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(400));
        // Dropped: the client vanishes while the call blocks.
    }
    // Past the job's end: a call that had not detached would have claimed
    // its result and taken it out of the table by now.
    std::thread::sleep(Duration::from_millis(1800));
    let listed = s.call(sid, 4, "list_jobs", json!({}));
    let jobs = listed["jobs"].as_array().unwrap();
    let job = jobs
        .iter()
        .find(|j| j["label"] == json!(label))
        .unwrap_or_else(|| panic!("the detached job is not listed: {listed}"));
    let id = job["job_id"].as_str().unwrap().to_owned();
    // Its result was not delivered to anyone: a later wait collects it.
    let w = s.call(sid, 5, "wait", json!({"job_ids": [id]}));
    assert_eq!(w[0]["stdout"]["data"], json!("kept\n"), "{accept}: {w}");
}

fn stdin_eof_with_http_ends_the_stdio_session_only(t: Target) {
    let mut s = Both::start(t, &[], &[]);
    s.stdio.initialize(LATEST);
    s.stdio.close_stdin();
    assert!(
        s.stdio.wait_exit(Duration::from_secs(1)).is_none(),
        "the server exited on stdin EOF with HTTP on"
    );
    let sid = s.initialize();
    let r = s.call(&sid, 1, "execute", json!({"command": "echo still"}));
    assert_eq!(r["stdout"]["data"], json!("still\n"), "{r}");
}

fn sigterm_answers_an_http_call_in_flight_32800_and_health_says_shutting_down(t: Target) {
    let mut s = Both::start(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "2")], &["--no-stdio"]);
    let sid = s.initialize();
    // A job that ignores TERM keeps the shutdown going for the grace.
    s.call(
        &sid,
        1,
        "execute",
        json!({"command": "trap '' TERM; sleep 30", "nowait": true}),
    );
    let port = s.port;
    let session = sid.clone();
    let blocked = std::thread::spawn(move || {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"command": "sleep 30"}}});
        http(
            port,
            "POST",
            "/mcp",
            &[("Mcp-Session-Id", &session), ("Accept", "application/json")],
            &body.to_string(),
        )
    });
    std::thread::sleep(Duration::from_millis(500));
    let status = Command::new("kill")
        .args(["-TERM", &s.stdio.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let r = blocked.join().unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["error"]["code"], json!(-32800), "{r:?}");
    let h = http(s.port, "GET", "/healthz", &[], "");
    assert_eq!(h.status, 503, "{h:?}");
    assert_eq!(h.json()["status"], json!("shutting_down"), "{h:?}");
    let exit = s.stdio.wait_exit(Duration::from_secs(10));
    assert!(exit.is_some_and(|e| e.success()), "{exit:?}");
}

// ---------------------------------------------------------------------------
// Security and bounds
// ---------------------------------------------------------------------------

fn a_missing_or_wrong_token_gets_401_with_www_authenticate(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_HTTP_TOKEN", "s3cret-token")], &[]);
    let ping = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": LATEST}})
    .to_string();
    for auth in [
        None,
        Some("Bearer wrong-token!"),
        Some("Basic s3cret-token"),
    ] {
        let mut h = vec![];
        if let Some(a) = auth {
            h.push(("Authorization", a));
        }
        let r = http(s.port, "POST", "/mcp", &h, &ping);
        assert_eq!(r.status, 401, "{auth:?}: {r:?}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{r:?}");
    }
    let metrics = http(s.port, "GET", "/metrics", &[], "");
    assert_eq!(metrics.status, 401, "{metrics:?}");
    let ok = http(
        s.port,
        "POST",
        "/mcp",
        &[("Authorization", "Bearer s3cret-token")],
        &ping,
    );
    assert_eq!(ok.status, 200, "{ok:?}");
    // Health never needs the token.
    assert_eq!(http(s.port, "GET", "/healthz", &[], "").status, 200);
    assert_eq!(http(s.port, "GET", "/livez", &[], "").status, 200);
}

fn a_foreign_origin_or_host_gets_403(t: Target) {
    let s = Both::start(t, &[], &[]);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": LATEST}})
    .to_string();
    let r = http(
        s.port,
        "POST",
        "/mcp",
        &[("Origin", "http://evil.example")],
        &init,
    );
    assert_eq!(r.status, 403, "{r:?}");
    let r = http(
        s.port,
        "POST",
        "/mcp",
        &[("Host", "evil.example:80")],
        &init,
    );
    assert_eq!(r.status, 403, "{r:?}");
    let r = http(
        s.port,
        "POST",
        "/mcp",
        &[("Origin", "http://localhost:3000"), ("Host", "localhost")],
        &init,
    );
    assert_eq!(r.status, 200, "{r:?}");
}

fn an_oversize_body_gets_413(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_MAX_LINE_BYTES", "1000")], &[]);
    // Only the head is sent: the server must answer without reading a body.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(TIMEOUT)).unwrap();
    write!(
        c,
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5000\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    c.read_to_end(&mut raw).unwrap();
    let r = parse(&raw);
    assert_eq!(r.status, 413, "{r:?}");
}

fn a_request_head_over_16_kib_is_refused(t: Target) {
    let s = Both::start(t, &[], &[]);
    let big = "x".repeat(20 * 1024);
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(TIMEOUT)).unwrap();
    let _ = write!(
        c,
        "GET /livez HTTP/1.1\r\nHost: localhost\r\nX-Big: {big}\r\n\r\n"
    );
    let mut raw = Vec::new();
    let _ = c.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 431"),
        "an oversize head was served: {text:?}"
    );
    assert!(!text.contains("200 OK"), "{text:?}");
}

/// The server's header timeout (not configurable).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

fn a_client_that_does_not_finish_its_headers_in_10_s_is_dropped(t: Target) {
    let s = Both::start(t, &[], &[]);
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(HEADER_READ_TIMEOUT + Duration::from_secs(5)))
        .unwrap();
    let start = Instant::now();
    c.write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    let mut buf = [0u8; 512];
    let n = c.read(&mut buf);
    let took = start.elapsed();
    assert!(
        took >= HEADER_READ_TIMEOUT - Duration::from_millis(500),
        "dropped too early ({took:?}): {n:?}"
    );
    assert!(
        took < HEADER_READ_TIMEOUT + Duration::from_secs(4),
        "not dropped in time ({took:?})"
    );
    // Either closed outright or with a 408 and then closed.
    if let Ok(n) = n
        && n > 0
    {
        assert!(
            String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 408"),
            "{:?}",
            String::from_utf8_lossy(&buf[..n])
        );
    }
}

// ---------------------------------------------------------------------------
// Health and metrics
// ---------------------------------------------------------------------------

/// Parses `text` with the Python `prometheus_client` parser; the names of
/// the families it found. `None` (skip) when the module is missing here;
/// in CI that fails.
fn prometheus_families(text: &str) -> Option<Vec<String>> {
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/.venv/bin/python");
    let python = if std::path::Path::new(venv).exists() {
        venv
    } else {
        "python3"
    };
    let script = "import sys\n\
        from prometheus_client.parser import text_string_to_metric_families\n\
        for f in text_string_to_metric_families(sys.stdin.read()):\n    print(f.name)\n";
    let check = Command::new(python)
        .args(["-c", "import prometheus_client"])
        .status();
    let available = match check {
        Ok(s) if s.success() => Ok(()),
        other => Err(format!(
            "{python}: no prometheus_client module ({other:?}); \
             run interop/run.sh or pip install -r interop/requirements.txt"
        )),
    };
    if !crate::support::require(available, "the Python prometheus_client parser") {
        return None;
    }
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the exposition does not parse: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect(),
    )
}

fn the_awaiting_input_gauge_counts_the_jobs_blocked_reading_their_stdin(t: Target) {
    let s = Both::start(
        t,
        &[("MCP_EXEC_HTTP_TOKEN", "tok")],
        &["--metrics-listen", "127.0.0.1:0"],
    );
    let mp = s.metrics_port.unwrap();
    let gauge = || {
        let m = http(mp, "GET", "/metrics", &[], "");
        m.body
            .lines()
            .find_map(|l| l.strip_prefix("mcp_exec_jobs_awaiting_input "))
            .map(str::to_owned)
    };
    assert_eq!(gauge().as_deref(), Some("0"));
    let auth = [("Authorization", "Bearer tok")];
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": LATEST}})
    .to_string();
    let r = http(s.port, "POST", "/mcp", &auth, &init);
    let sid = r.header("mcp-session-id").unwrap().to_owned();
    let headers = [auth[0], ("Mcp-Session-Id", sid.as_str())];
    let call = |id: u64, name: &str, arguments: Value| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}})
        .to_string();
        let r = http(s.port, "POST", "/mcp", &headers, &body);
        assert_eq!(r.status, 200, "{r:?}");
        r
    };
    call(1, "execute", json!({"command": "read x", "nowait": true}));
    // Answered once job-1 waits for its input.
    let r = call(
        2,
        "wait",
        json!({"job_ids": ["job-1"], "timeout": 15, "until": {"input": true}}),
    );
    assert!(r.body.contains("awaiting_input"), "{r:?}");
    assert_eq!(gauge().as_deref(), Some("1"));
    call(3, "input", json!({"job_id": "job-1", "data": "x\n"}));
    let r = call(4, "wait", json!({"job_ids": ["job-1"], "timeout": 15}));
    assert!(r.body.contains("success"), "{r:?}");
    assert_eq!(gauge().as_deref(), Some("0"));
}

fn healthz_livez_and_metrics_answer_and_the_metrics_parse_as_prometheus_text(t: Target) {
    let s = Both::start(
        t,
        &[("MCP_EXEC_HTTP_TOKEN", "tok")],
        &["--metrics-listen", "127.0.0.1:0"],
    );
    let h = http(s.port, "GET", "/healthz", &[], "");
    assert_eq!(h.status, 200, "{h:?}");
    let v = h.json();
    assert_eq!(v["status"], json!("ok"), "{v}");
    assert_eq!(v["version"], json!(env!("CARGO_PKG_VERSION")), "{v}");
    assert_eq!(v["pid1"], json!(t.server_is_pid1()), "{v}");
    assert!(v["uptime_s"].is_u64(), "{v}");
    assert_eq!(v["jobs"], json!({"running": 0, "queued": 0}), "{v}");
    assert_eq!(http(s.port, "GET", "/livez", &[], "").status, 200);

    // Token-free on the metrics listener, with a job behind the counters.
    let mp = s.metrics_port.unwrap();
    assert_eq!(http(mp, "GET", "/healthz", &[], "").status, 200);
    assert_eq!(http(mp, "GET", "/livez", &[], "").status, 200);
    assert_eq!(http(mp, "POST", "/mcp", &[], "{}").status, 404);
    let auth = [("Authorization", "Bearer tok")];
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": LATEST}})
    .to_string();
    let r = http(s.port, "POST", "/mcp", &auth, &init);
    let sid = r.header("mcp-session-id").unwrap().to_owned();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"command": "true"}}})
    .to_string();
    let r = http(
        s.port,
        "POST",
        "/mcp",
        &[auth[0], ("Mcp-Session-Id", &sid)],
        &call,
    );
    assert_eq!(r.status, 200, "{r:?}");

    let m = http(mp, "GET", "/metrics", &[], "");
    assert_eq!(m.status, 200, "{m:?}");
    let main = http(s.port, "GET", "/metrics", &auth, "");
    assert_eq!(main.status, 200, "{main:?}");
    for needle in [
        "mcp_exec_jobs_started_total 1",
        "mcp_exec_jobs_finished_total{outcome=\"success\"} 1",
        "mcp_exec_jobs_running 0",
        "mcp_exec_jobs_queued 0",
        "mcp_exec_jobs_capacity ",
        "mcp_exec_requests_total{transport=\"http\",method=\"tools/call\",outcome=\"ok\"} 1",
        "mcp_exec_http_sessions 1",
        "mcp_exec_breaker_open 0",
        "mcp_exec_orphans_reaped_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_start_time_seconds ",
    ] {
        assert!(m.body.contains(needle), "{needle} missing:\n{}", m.body);
    }
    if let Some(families) = prometheus_families(&m.body) {
        for f in [
            "mcp_exec_jobs_started",
            "mcp_exec_jobs_finished",
            "mcp_exec_job_duration_seconds",
            "mcp_exec_job_queue_wait_seconds",
            "mcp_exec_requests",
            "mcp_exec_http_sessions",
            "process_resident_memory_bytes",
        ] {
            assert!(
                families.iter().any(|n| n == f),
                "{f} not parsed: {families:?}"
            );
        }
    }
}

fn the_token_never_reaches_a_job(t: Target) {
    let dir = std::env::temp_dir().join(format!("mcp-exec-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("token-{t:?}"));
    std::fs::write(&file, "from-a-file\n").unwrap();
    let mut s = Both::start(
        t,
        &[
            ("MCP_EXEC_HTTP_TOKEN", "from-the-env"),
            ("MCP_EXEC_HTTP_TOKEN_FILE", file.to_str().unwrap()),
        ],
        &[],
    );
    s.stdio.initialize(LATEST);
    let r = s.stdio.exec("env");
    let env = r["stdout"]["data"].as_str().unwrap();
    assert!(env.contains("PATH="), "{env}");
    assert!(!env.contains("MCP_EXEC_HTTP_TOKEN"), "{env}");
    assert!(!env.contains("from-the-env"), "{env}");
    // The file's token is the one in force.
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                      "params": {"protocolVersion": LATEST}})
    .to_string();
    let ok = http(
        s.port,
        "POST",
        "/mcp",
        &[("Authorization", "Bearer from-a-file")],
        &init,
    );
    assert_eq!(ok.status, 200, "{ok:?}");
}

// ---------------------------------------------------------------------------
// Init mode with HTTP
// ---------------------------------------------------------------------------

/// `mcp-exec --http ADDR -- CMD`: MCP is served over HTTP while CMD runs as
/// the main process, and the server exits with CMD's status.
fn init_mode_with_http_serves_mcp_while_the_main_command_runs_and_exits_with_its_code(t: Target) {
    let marker = format!("/tmp/mcp-exec-initmode-http-{}", std::process::id());
    let _ = std::fs::remove_file(&marker);
    let main = format!("while [ ! -e {marker} ]; do sleep 0.05; done; exit 7");
    let mut s = Both::start(t, &[], &["--", "sh", "-c", &main]);
    let sid = s.initialize();
    let r = s.call(
        &sid,
        1,
        "execute",
        json!({"command": format!("echo from-a-job; touch {marker}")}),
    );
    assert_eq!(r["stdout"]["data"], json!("from-a-job\n"), "{r}");
    let status = s.stdio.wait_exit(TIMEOUT);
    let _ = std::fs::remove_file(&marker);
    assert_eq!(
        status.and_then(|st| st.code()),
        Some(7),
        "the server exits with the main command's code"
    );
    s.server_pid = None;
}

/// One `#[test]` per target in modules `bare` and `pid1` (the container
/// targets would need the port published).
macro_rules! http_targets {
    ($($name:ident),* $(,)?) => {
        mod bare { $( #[test] fn $name() { if crate::support::Target::Bare.available() { super::$name(crate::support::Target::Bare) } } )* }
        mod pid1 { $( #[test] fn $name() { if crate::support::Target::Pid1.available() { super::$name(crate::support::Target::Pid1) } } )* }
    };
}

http_targets!(
    init_mode_with_http_serves_mcp_while_the_main_command_runs_and_exits_with_its_code,
    an_http_session_initializes_lists_tools_and_executes_a_command,
    a_job_started_over_http_is_waited_for_over_stdio,
    a_blocking_execute_whose_client_disconnects_leaves_its_job_listed,
    healthz_livez_and_metrics_answer_and_the_metrics_parse_as_prometheus_text,
    the_awaiting_input_gauge_counts_the_jobs_blocked_reading_their_stdin,
    the_token_never_reaches_a_job,
);

/// Transport-level behaviour: the bare target is enough.
mod bare_only {
    use crate::support::Target;

    macro_rules! bare {
        ($($name:ident),* $(,)?) => { $( #[test] fn $name() { super::$name(Target::Bare) } )* };
    }

    bare!(
        a_request_without_a_session_gets_400_an_unknown_one_404_and_a_deleted_one_404,
        a_protocol_version_header_must_be_the_negotiated_or_a_supported_one,
        get_is_405_and_an_accept_without_json_is_406,
        an_idle_session_expires_and_then_gets_404,
        a_batch_is_answered_as_one_array_in_a_2025_03_26_session_only,
        a_progress_token_with_sse_accepted_streams_progress_naming_the_job_then_the_response,
        stdin_eof_with_http_ends_the_stdio_session_only,
        sigterm_answers_an_http_call_in_flight_32800_and_health_says_shutting_down,
        a_missing_or_wrong_token_gets_401_with_www_authenticate,
        a_foreign_origin_or_host_gets_403,
        an_oversize_body_gets_413,
        a_request_head_over_16_kib_is_refused,
        a_client_that_does_not_finish_its_headers_in_10_s_is_dropped,
    );
}

// ---------------------------------------------------------------------------
// Start-up refusals (exit 2, naming the setting)
// ---------------------------------------------------------------------------

fn refusal(env: &[(&str, &str)], args: &[&str]) -> String {
    let mut command = Command::new(crate::support::binary());
    command
        .args(args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null());
    let out = crate::support::guard::output(command).unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_non_loopback_bind_without_a_token_refuses_to_start_with_exit_2() {
    let err = refusal(&[], &["--http", "0.0.0.0:0"]);
    assert!(err.contains("without a token"), "{err}");
}

#[test]
fn an_invalid_listen_address_empty_token_file_or_bad_origin_exits_2_naming_it() {
    let err = refusal(&[], &["--http", "localhost"]);
    assert!(err.contains("MCP_EXEC_HTTP"), "{err}");
    let err = refusal(&[], &["--http", "127.0.0.1:0", "--metrics-listen", "x"]);
    assert!(err.contains("MCP_EXEC_METRICS_LISTEN"), "{err}");
    let err = refusal(
        &[("MCP_EXEC_HTTP_TOKEN_FILE", "/dev/null")],
        &["--http", "127.0.0.1:0"],
    );
    assert!(err.contains("MCP_EXEC_HTTP_TOKEN_FILE"), "{err}");
    let err = refusal(
        &[("MCP_EXEC_HTTP_ALLOWED_ORIGINS", "not an origin")],
        &["--http", "127.0.0.1:0"],
    );
    assert!(err.contains("MCP_EXEC_HTTP_ALLOWED_ORIGINS"), "{err}");
    let err = refusal(&[], &["--no-stdio"]);
    assert!(err.contains("--no-stdio"), "{err}");
    let err = refusal(&[], &["--bogus"]);
    assert!(err.contains("unknown argument"), "{err}");
}

#[test]
fn an_invalid_connection_cap_stops_the_server_with_any_listener_not_only_http() {
    let bad = [("MCP_EXEC_HTTP_MAX_CONNECTIONS", "0")];
    for args in [
        &["--http", "127.0.0.1:0"][..],
        &["--envd", "127.0.0.1:0"],
        &["--metrics-listen", "127.0.0.1:0"],
        &["--sandboxd-rest", "127.0.0.1:0", "--sandboxd-root", "/tmp"],
    ] {
        let err = refusal(&bad, args);
        assert!(
            err.contains("MCP_EXEC_HTTP_MAX_CONNECTIONS=\"0\" is not a positive count"),
            "{args:?}: {err}"
        );
    }
}
