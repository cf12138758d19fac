//! Issue 20 on loopback, bounded in count and time: a token-less flood of
//! idle connections (run as a `nobody` job) does not lock token holders
//! out; stalled `/files` transfers time out and hold no file worker; the
//! metrics listener checks `Host`; one `Host` header; empty token variables
//! refused; the HTTP session cap; setuid/setgid modes refused.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Both, http};
use crate::support::{HostPath, LATEST, TIMEOUT, Target, tool_json, wait_for};

const TOKEN: &str = "hardening-test-token-0123456789";
const AUTH: (&str, &str) = ("Authorization", "Bearer hardening-test-token-0123456789");

fn root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    })
}

/// An MCP session over HTTP with the token.
struct Holder<'a> {
    s: &'a Both,
    session: String,
    next: i64,
}

impl<'a> Holder<'a> {
    fn new(s: &'a Both) -> Holder<'a> {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LATEST, "capabilities": {},
                       "clientInfo": {"name": "holder", "version": "0"}}});
        let r = http(s.port, "POST", "/mcp", &[AUTH], &init.to_string());
        assert_eq!(r.status, 200, "{r:?}");
        let session = r.header("mcp-session-id").expect("a session").to_owned();
        Holder {
            s,
            session,
            next: 1,
        }
    }

    fn call(&mut self, tool: &str, args: Value) -> Value {
        self.next += 1;
        let call = json!({"jsonrpc": "2.0", "id": self.next, "method": "tools/call",
            "params": {"name": tool, "arguments": args}});
        let r = http(
            self.s.port,
            "POST",
            "/mcp",
            &[AUTH, ("Mcp-Session-Id", &self.session)],
            &call.to_string(),
        );
        assert_eq!(r.status, 200, "{r:?}");
        r.json()["result"].clone()
    }
}

/// Sends `request` on a fresh connection and reads until the server closes
/// it or `within` passes: the bytes, and whether it closed.
fn exchange(port: u16, request: &[u8], within: Duration) -> (String, bool) {
    let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(within)).expect("a timeout");
    c.write_all(request).expect("a request");
    let mut raw = Vec::new();
    let closed = c.read_to_end(&mut raw).is_ok();
    (String::from_utf8_lossy(&raw).into_owned(), closed)
}

/// The counter `mcp_exec_http_connections_dropped_total{listener, reason}`
/// of the MCP listener (each listener counts its own).
fn dropped(s: &Both, reason: &str) -> u64 {
    let m = http(s.port, "GET", "/metrics", &[AUTH], "");
    assert_eq!(m.status, 200, "{m:?}");
    let needle =
        format!("mcp_exec_http_connections_dropped_total{{listener=\"mcp\",reason=\"{reason}\"}} ");
    m.body
        .lines()
        .find_map(|l| l.strip_prefix(needle.as_str()))
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

// ---------------------------------------------------------------------------
// Item 1: the listener cannot be locked out
// ---------------------------------------------------------------------------

/// The flood: a `nobody` job that, for a bounded time, keeps `HOLD`
/// connections to the listener open at once (4 × the limit), reopening a
/// fresh set five times a second (so whatever the server drops is
/// replaced), and never sends a byte. It prints `flooding` once it has held
/// a full set. (Not a SYN flood at line rate: the kernel's backlog and SYN
/// cookies are the answer to that, not the server.)
const HOLD: usize = 256;
const FLOOD_SECONDS: u64 = 8;
const LIMIT: usize = 64;

fn a_token_less_flood_from_a_nobody_job_leaves_20_token_holders_each_served_within_1_s(t: Target) {
    if !crate::support::require(
        if root() {
            Ok(())
        } else {
            Err("not root".into())
        },
        "root (a job as nobody)",
    ) {
        return;
    }
    let s = Both::start(
        t,
        &[
            ("MCP_EXEC_HTTP_TOKEN", TOKEN),
            ("MCP_EXEC_HTTP_MAX_CONNECTIONS", &LIMIT.to_string()),
        ],
        &[],
    );
    let mut holder = Holder::new(&s);
    let script = format!(
        "end=$((SECONDS+{FLOOD_SECONDS})); opened=0; held=()
         while [ $SECONDS -lt $end ]; do
           fresh=()
           for i in $(seq 1 {HOLD}); do
             exec {{fd}}<>/dev/tcp/127.0.0.1/{port} && fresh+=($fd) && opened=$((opened+1))
           done 2>/dev/null
           [ -z \"$said\" ] && [ ${{#fresh[@]}} -eq {HOLD} ] && echo flooding && said=1
           for fd in \"${{held[@]}}\"; do exec {{fd}}>&-; done
           held=(\"${{fresh[@]}}\")
           sleep 0.2
         done
         echo opened=$opened",
        port = s.port
    );
    let started = tool_json(&holder.call(
        "execute",
        json!({"argv": ["bash", "-c", script], "user": "nobody", "cwd": "/tmp",
               "nowait": true, "timeout": FLOOD_SECONDS + 30}),
    ));
    let job = started["job_id"].as_str().expect("a job id").to_owned();
    let flooding = wait_for(TIMEOUT, || {
        let out = tool_json(&holder.call("output", json!({"job_id": job, "stdout": {"tail": 5}})));
        out["stdout"]["data"]
            .as_str()
            .is_some_and(|d| d.contains("flooding"))
    });
    assert!(
        flooding,
        "the flood never held {HOLD} connections: {}",
        holder.call("output", json!({"job_id": job}))
    );

    // 20 token holders at once, each on a fresh connection, each served
    // within 1 s (connect, request, whole answer).
    let ping = json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}).to_string();
    let served: Vec<Result<Duration, String>> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..20)
            .map(|_| {
                let (ping, session, port) = (&ping, &holder.session, s.port);
                scope.spawn(move || {
                    let begun = Instant::now();
                    let r = crate::support::http::request(
                        port,
                        "POST",
                        "/mcp",
                        &[AUTH, ("Mcp-Session-Id", session)],
                        ping,
                        Duration::from_secs(1),
                    )
                    .map_err(|e| e.to_string())?;
                    if r.status != 200 {
                        return Err(format!("{r:?}"));
                    }
                    Ok(begun.elapsed())
                })
            })
            .collect();
        clients
            .into_iter()
            .map(|c| c.join().expect("a client"))
            .collect()
    });
    let late: Vec<_> = served
        .iter()
        .filter(|r| r.as_ref().map_or(true, |d| *d > Duration::from_secs(1)))
        .collect();
    assert!(
        late.is_empty(),
        "token holders not served within 1 s: {late:?}"
    );

    // The flood really went past the limit, and the server dropped its
    // connections rather than token holders'.
    let waited = tool_json(&holder.call("wait", json!({"job_ids": [job], "timeout": 60})));
    let done = &waited[0];
    let out = done["stdout"]["data"].as_str().unwrap_or("").to_owned();
    let opened: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("opened="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count from the flood: {done}"));
    assert!(opened >= 2 * HOLD, "the flood opened only {opened}: {done}");
    assert!(
        dropped(&s, "evicted") + dropped(&s, "silent") > 0,
        "nothing was evicted"
    );
}

fn a_connection_that_sends_nothing_is_dropped_long_before_the_header_timeout(t: Target) {
    let s = Both::start(t, &[], &[]);
    let begun = Instant::now();
    let (text, closed) = exchange(s.port, b"", Duration::from_secs(8));
    assert!(
        closed && text.is_empty(),
        "a silent connection got {text:?}"
    );
    assert!(
        begun.elapsed() < Duration::from_secs(8),
        "kept for {:?}",
        begun.elapsed()
    );
}

fn past_the_limit_a_newcomer_takes_a_silent_connection_s_slot_and_is_served(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_HTTP_MAX_CONNECTIONS", "1")], &[]);
    let mut silent = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    silent.set_read_timeout(Some(TIMEOUT)).unwrap();
    // Older than the grace a silent connection has (250 ms), so even a
    // newcomer whose request has not arrived at accept may take its slot.
    std::thread::sleep(Duration::from_millis(500));
    let r = http(s.port, "GET", "/livez", &[], "");
    assert_eq!(r.status, 200, "{r:?}");
    let mut buf = [0u8; 64];
    assert!(
        matches!(silent.read(&mut buf), Ok(0) | Err(_)),
        "the silent connection was kept"
    );
}

fn past_the_limit_with_every_slot_held_by_token_holders_a_newcomer_gets_503_at_once(t: Target) {
    let s = Both::start(
        t,
        &[
            ("MCP_EXEC_HTTP_TOKEN", TOKEN),
            ("MCP_EXEC_HTTP_MAX_CONNECTIONS", "2"),
        ],
        &[],
    );
    let request = format!(
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\n{}: {}\r\n\r\n",
        AUTH.0, AUTH.1
    );
    // Two keep-alive connections that showed the token, kept open.
    let mut kept = Vec::new();
    for _ in 0..2 {
        let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        c.set_read_timeout(Some(TIMEOUT)).unwrap();
        c.write_all(request.as_bytes()).unwrap();
        let mut buf = [0u8; 12];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"HTTP/1.1 200", "a token holder was refused");
        kept.push(c);
    }
    let begun = Instant::now();
    let (text, closed) = exchange(s.port, b"", TIMEOUT);
    assert!(
        closed
            && text.starts_with("HTTP/1.1 503")
            && text.contains("MCP_EXEC_HTTP_MAX_CONNECTIONS"),
        "{text:?}"
    );
    assert!(
        begun.elapsed() < Duration::from_secs(2),
        "{:?}",
        begun.elapsed()
    );
    drop(kept);
}

// ---------------------------------------------------------------------------
// Item 6: /files transfers time out
// ---------------------------------------------------------------------------

fn fresh_dir(what: &str) -> HostPath {
    let d = HostPath::new(what);
    std::fs::create_dir(&d.0).expect("a fresh directory");
    d
}

fn names(dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("reading the directory")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Opens a `PUT` of `path` announcing 10 MB and sends 1 MiB of it.
fn stalled_put(port: u16, path: &str) -> TcpStream {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(TIMEOUT)).unwrap();
    write!(
        c,
        "PUT /files{path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10000000\r\n\r\n"
    )
    .unwrap();
    c.write_all(&vec![7u8; 1 << 20]).unwrap();
    c
}

/// Opens a `GET` of `path` and reads only its status line.
fn stalled_get(port: u16, path: &str) -> TcpStream {
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(TIMEOUT)).unwrap();
    write!(c, "GET /files{path} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut buf = [0u8; 12];
    c.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200");
    c
}

fn a_put_whose_body_stalls_gets_408_and_leaves_no_temporary_file(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_HTTP_STALL_TIMEOUT", "1")], &[]);
    let dir = fresh_dir("http-stall-put");
    let mut c = stalled_put(s.port, &format!("{}/f", dir.0));
    let mut raw = Vec::new();
    let _ = c.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    assert!(
        text.starts_with("HTTP/1.1 408") && text.contains("MCP_EXEC_HTTP_STALL_TIMEOUT"),
        "{text:?}"
    );
    assert!(names(&dir.0).is_empty(), "{:?}", names(&dir.0));
}

fn a_get_whose_client_stops_reading_is_closed_after_the_stall_timeout(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_HTTP_STALL_TIMEOUT", "1")], &[]);
    let dir = fresh_dir("http-stall-get");
    let path = format!("{}/big", dir.0);
    let size = 256u64 << 20;
    std::fs::File::create(&path).unwrap().set_len(size).unwrap();
    let mut c = stalled_get(s.port, &path);
    // Read nothing for well past the stall timeout, then drain: the server
    // has given up, so the stream ends short of the announced length.
    std::thread::sleep(Duration::from_secs(4));
    let (ended, got) = crate::support::http::drain(&mut c);
    assert!(ended, "the connection was still open after {got} bytes");
    assert!(got < size, "the whole file arrived: the stall was not cut");
}

fn stalled_transfers_hold_no_file_worker_so_file_operations_are_served_meanwhile(t: Target) {
    // More stalled transfers, either way, than the file workers (16).
    const EACH: usize = 20;
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("http-stall-many");
    let big = format!("{}/big", dir.0);
    std::fs::File::create(&big)
        .unwrap()
        .set_len(64 << 20)
        .unwrap();
    let puts: Vec<TcpStream> = (0..EACH)
        .map(|i| stalled_put(s.port, &format!("{}/up-{i}", dir.0)))
        .collect();
    let gets: Vec<TcpStream> = (0..EACH).map(|_| stalled_get(s.port, &big)).collect();
    // Every PUT has its temporary file: each got as far as a file worker.
    assert!(
        wait_for(TIMEOUT, || names(&dir.0).len() == EACH + 1),
        "{:?}",
        names(&dir.0)
    );
    let quick = Duration::from_secs(5);
    let stat =
        crate::support::http::request(s.port, "GET", &format!("/files{big}?stat"), &[], "", quick)
            .expect("a stat while transfers stall");
    assert_eq!(stat.status, 200, "{stat:?}");
    let small = format!("{}/small", dir.0);
    let put =
        crate::support::http::request(s.port, "PUT", &format!("/files{small}"), &[], "hi", quick)
            .expect("a PUT while transfers stall");
    assert_eq!(put.status, 201, "{put:?}");
    assert_eq!(std::fs::read(&small).unwrap(), b"hi");
    drop((puts, gets));
}

// ---------------------------------------------------------------------------
// Item 7: the smaller guards
// ---------------------------------------------------------------------------

fn the_metrics_listener_refuses_a_foreign_host_and_any_listener_a_second_host(t: Target) {
    let s = Both::start(t, &[], &["--metrics-listen", "127.0.0.1:0"]);
    let mp = s.metrics_port.unwrap();
    let evil = http(mp, "GET", "/metrics", &[("Host", "evil.example:9091")], "");
    assert_eq!(evil.status, 403, "{evil:?}");
    let ok = http(mp, "GET", "/metrics", &[("Host", "localhost:9091")], "");
    assert_eq!(ok.status, 200, "{ok:?}");
    for port in [s.port, mp] {
        let (text, _) = exchange(
            port,
            b"GET /livez HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
            TIMEOUT,
        );
        assert!(text.starts_with("HTTP/1.1 400"), "port {port}: {text:?}");
    }
}

fn past_max_sessions_the_least_recently_used_session_ends_for_a_new_one(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_HTTP_MAX_SESSIONS", "2")], &[]);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let first = s.initialize();
    let second = s.initialize();
    // `first` used last: `second` is the least recently used.
    assert_eq!(s.post(Some(&first), &ping).status, 200);
    let third = s.initialize();
    assert_eq!(s.post(Some(&second), &ping).status, 404);
    assert_eq!(s.post(Some(&first), &ping).status, 200);
    assert_eq!(s.post(Some(&third), &ping).status, 200);
}

fn setuid_and_setgid_modes_are_refused_by_put_and_upload(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("http-setid");
    for mode in ["4755", "2755", "6755"] {
        let path = format!("{}/f", dir.0);
        let r = http(
            s.port,
            "PUT",
            &format!("/files{path}?mode={mode}"),
            &[],
            "x",
        );
        assert_eq!(r.status, 400, "{r:?}");
        assert!(r.body.contains("setuid or setgid"), "{r:?}");
        let sid = s.initialize();
        let r = s.post(
            Some(&sid),
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "upload",
                               "arguments": {"path": path, "text": "x", "mode": mode}}}),
        );
        let result = &r.json()["result"];
        assert_eq!(result["isError"], json!(true), "{r:?}");
        assert!(result.to_string().contains("setuid or setgid"), "{r:?}");
        assert!(names(&dir.0).is_empty(), "{:?}", names(&dir.0));
    }
    let r = http(
        s.port,
        "PUT",
        &format!("/files{}/sticky?mode=1755", dir.0),
        &[],
        "x",
    );
    assert_eq!(r.status, 201, "{r:?}");
}

fn http_without_a_token_logs_a_warning(t: Target) {
    let s = Both::start(t, &[], &[]);
    let warned = wait_for(TIMEOUT, || {
        s.stdio
            .stderr
            .lock()
            .unwrap()
            .contains("HTTP serves without a token")
    });
    assert!(warned, "{}", s.stdio.stderr.lock().unwrap());
}

/// Transport-level: bare and PID 1 (both reach the server on loopback).
mod on_hosts {
    macro_rules! hosts {
        ($($name:ident),* $(,)?) => {
            mod bare { $( #[test] fn $name() { super::super::$name(crate::support::Target::Bare) } )* }
            mod pid1 { $( #[test] fn $name() { if crate::support::Target::Pid1.available() { super::super::$name(crate::support::Target::Pid1) } } )* }
        };
    }

    hosts!(
        a_token_less_flood_from_a_nobody_job_leaves_20_token_holders_each_served_within_1_s,
        a_connection_that_sends_nothing_is_dropped_long_before_the_header_timeout,
        past_the_limit_a_newcomer_takes_a_silent_connection_s_slot_and_is_served,
        past_the_limit_with_every_slot_held_by_token_holders_a_newcomer_gets_503_at_once,
        a_put_whose_body_stalls_gets_408_and_leaves_no_temporary_file,
        a_get_whose_client_stops_reading_is_closed_after_the_stall_timeout,
        stalled_transfers_hold_no_file_worker_so_file_operations_are_served_meanwhile,
        the_metrics_listener_refuses_a_foreign_host_and_any_listener_a_second_host,
        past_max_sessions_the_least_recently_used_session_ends_for_a_new_one,
        setuid_and_setgid_modes_are_refused_by_put_and_upload,
        http_without_a_token_logs_a_warning,
    );
}

#[test]
fn a_token_variable_set_but_empty_exits_2_instead_of_serving_without_a_token() {
    for var in ["MCP_EXEC_HTTP_TOKEN", "MCP_EXEC_HTTP_TOKEN_FILE"] {
        let err = super::refusal(&[(var, "")], &["--http", "127.0.0.1:0"]);
        assert!(err.contains(var) && err.contains("set but empty"), "{err}");
    }
}
