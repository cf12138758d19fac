//! Shutdown when the client goes (issue 9 §5): stdin EOF gives calls in
//! flight the shutdown grace to finish, a closed stdout (EPIPE) shuts the
//! server down at once, every response is written whole before exit, and a
//! client that does not read cannot make the server grow without bound.
//!
//! Processes are recognised from the host's `/proc` by a **marker**: a
//! `sleep` whose duration is unique to the test (`sleep 60.<test pid><n>`);
//! it is bounded, so whatever a failing test leaves behind does not live
//! long.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::raw::{RawServer, anon_rss_bytes, host_marker_alive, parse_line};
use crate::support::{Server, TIMEOUT, Target, tool_json, wait_for};

/// Time allowed for a clean exit after EOF: the grace for calls in flight,
/// the TERM grace, the KILL wait, plus slack for a loaded machine.
const EXIT: Duration = Duration::from_secs(40);

/// The shutdown grace these tests run with, where they set one.
const GRACE: Duration = Duration::from_secs(2);

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// A `sleep` duration of about `secs` seconds that no other process on
/// this machine uses.
fn marker(secs: u32) -> String {
    format!(
        "{secs}.{}{:04}",
        std::process::id(),
        MARKERS.fetch_add(1, Ordering::Relaxed)
    )
}

fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn call(id: u64, tool: &str, args: Value) -> Value {
    rpc(id, "tools/call", json!({"name": tool, "arguments": args}))
}

fn initialize(s: &mut RawServer) {
    s.send(&rpc(
        0,
        "initialize",
        json!({"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "tests", "version": "0"}}),
    ));
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
}

/// The command of a job that prints `bytes` bytes of `a` and nothing else.
fn print_a(bytes: usize) -> String {
    format!("head -c {bytes} /dev/zero | tr '\\0' a")
}

/// Checks one response to [`print_a`] and returns its id: a complete line,
/// a successful result whose stdout is exactly `bytes` bytes of `a`.
fn assert_print_a_response(line: &[u8], bytes: usize) -> u64 {
    let msg = parse_line(line);
    let id = msg["id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no integer id in a {}-byte response", line.len()));
    assert!(
        msg.get("error").is_none(),
        "request {id} failed: {}",
        msg["error"]
    );
    let r = tool_json(&msg["result"]);
    assert_eq!(r["state"], json!("success"), "request {id}");
    assert_eq!(r["stdout"]["bytes"], json!(bytes), "request {id}");
    assert_eq!(r["stdout"]["total_bytes"], json!(bytes), "request {id}");
    let data = r["stdout"]["data"].as_str().unwrap_or_default();
    assert!(
        data.len() == bytes && data.bytes().all(|b| b == b'a'),
        "request {id}: stdout is not {bytes} bytes of 'a' ({} bytes)",
        data.len()
    );
    id
}

// ---------------------------------------------------------------------------
// stdin EOF: calls in flight get the shutdown grace
// ---------------------------------------------------------------------------

fn at_eof_calls_in_flight_finish_within_the_grace_and_the_rest_get_32800_after_it(t: Target) {
    let grace = GRACE.as_secs().to_string();
    let mut s = Server::started_with_env(t, &[("MCP_EXEC_SHUTDOWN_GRACE", &grace)]);
    let m = marker(60);
    let quick = s.send_call("execute", json!({"command": "sleep 1; echo done"}));
    let job = s.spawn_job("sleep 1; echo waited");
    let wait = s.send_call("wait", json!({"job_ids": [job], "timeout": 60}));
    let slow = s.send_call("execute", json!({"command": format!("sleep {m}")}));
    assert!(
        wait_for(TIMEOUT, || host_marker_alive(&m)),
        "the slow job never started"
    );
    let closed = Instant::now();
    s.close_stdin();

    let r = s.response(&quick, TIMEOUT);
    assert!(
        r.get("error").is_none(),
        "a blocking execute that ends 1 s after EOF, within the {GRACE:?} grace, must answer normally: {r}"
    );
    let result = tool_json(&r["result"]);
    assert_eq!(result["exit_code"], json!(0), "{r}");
    assert_eq!(result["stdout"]["data"], json!("done\n"), "{r}");

    let r = s.response(&wait, TIMEOUT);
    assert!(
        r.get("error").is_none(),
        "a wait whose job ends within the grace must answer normally: {r}"
    );
    let entries = tool_json(&r["result"]);
    assert_eq!(entries[0]["job_id"], json!(job), "{r}");
    assert_eq!(entries[0]["stdout"]["data"], json!("waited\n"), "{r}");

    assert_eq!(s.error_code(&slow, TIMEOUT), -32800);
    let after = closed.elapsed();
    assert!(
        after >= GRACE - Duration::from_millis(300),
        "the still-running execute was cancelled {after:?} after EOF, before the {GRACE:?} grace"
    );
    let status = s.wait_exit(EXIT);
    assert!(
        status.is_some_and(|st| st.success()),
        "exit after EOF: {status:?}; stderr:\n{}",
        s.stderr.lock().unwrap()
    );
    assert!(
        wait_for(TIMEOUT, || !host_marker_alive(&m)),
        "the cancelled execute's job outlived the shutdown"
    );
}

fn the_readme_example_piped_without_a_sleep_prints_the_execute_result(t: Target) {
    let mut s = Server::start(t);
    // The two lines of the README's "Try it by hand", then EOF at once.
    s.send_raw(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#,
    );
    s.send_raw(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute","arguments":{"command":"uname -a"}}}"#,
    );
    s.close_stdin();
    let init = s.response(&json!(1), TIMEOUT);
    assert_eq!(
        init["result"]["protocolVersion"],
        json!("2025-06-18"),
        "{init}"
    );
    let r = s.response(&json!(2), TIMEOUT);
    assert!(r.get("error").is_none(), "uname -a was not answered: {r}");
    let result = tool_json(&r["result"]);
    assert_eq!(result["state"], json!("success"), "{r}");
    let out = result["stdout"]["data"].as_str().unwrap_or_default();
    assert!(out.starts_with("Linux "), "uname -a printed {out:?}");
    let status = s.wait_exit(EXIT);
    assert!(
        status.is_some_and(|st| st.success()),
        "exit after EOF: {status:?}"
    );
}

// ---------------------------------------------------------------------------
// stdout closed by the client (EPIPE): shutdown at once
// ---------------------------------------------------------------------------

fn when_the_client_closes_stdout_the_server_shuts_down_at_once_and_its_jobs_end(t: Target) {
    let mut s = RawServer::start(t, &[]);
    let m = marker(30);
    initialize(&mut s);
    s.send(&call(
        1,
        "execute",
        json!({"command": format!("sleep {m}"), "nowait": true}),
    ));
    let started = s.read_lines(2, TIMEOUT);
    let r = parse_line(&started[1]);
    assert_eq!(tool_json(&r["result"])["state"], json!("running"), "{r}");
    assert!(
        wait_for(TIMEOUT, || host_marker_alive(&m)),
        "the job never started"
    );

    s.close_stdout();
    let closed = Instant::now();
    // One more request, so that the server writes and meets the closed pipe.
    // stdin stays open: the server must not wait for EOF.
    let _ = s.try_send_raw(&call(2, "list_jobs", json!({})).to_string());

    // As on SIGTERM: TERM to the `sleep`, which dies at once. Containers add
    // podman's own teardown.
    let limit = if t.is_container() {
        Duration::from_secs(20)
    } else {
        Duration::from_secs(5)
    };
    let status = s.wait_exit(limit);
    assert!(
        status.is_some(),
        "{t:?}: the server still runs {:?} after its stdout was closed; stderr:\n{}",
        closed.elapsed(),
        s.stderr.lock().unwrap()
    );
    if !t.is_container() {
        assert!(
            status.is_some_and(|st| st.success()),
            "a graceful shutdown exits 0: {status:?}"
        );
    }
    assert!(
        wait_for(Duration::from_secs(5), || !host_marker_alive(&m)),
        "the job outlived the server"
    );
    if let Some(name) = s.container().map(str::to_owned) {
        let gone = wait_for(Duration::from_secs(10), || {
            !crate::support::podman()
                .args(["container", "exists", &name])
                .status()
                .is_ok_and(|st| st.success())
        });
        assert!(gone, "container {name} still exists");
    }
}

// ---------------------------------------------------------------------------
// Whole lines and bounded memory
// ---------------------------------------------------------------------------

/// Responses of the whole-lines test and their stdout size.
const WHOLE_CALLS: u64 = 100;
const WHOLE_BYTES: usize = 500_000;

fn every_response_is_written_whole_before_exit_when_the_client_reads_only_after_eof(t: Target) {
    // A grace long enough that no call of a slow machine is cut short: this
    // test is about whole lines, not about the grace.
    let mut s = RawServer::start(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "10")]);
    initialize(&mut s);
    for id in 1..=WHOLE_CALLS {
        s.send(&call(
            id,
            "execute",
            json!({"command": print_a(WHOLE_BYTES)}),
        ));
    }
    // The client does not read: the responses pile up behind a full pipe.
    std::thread::sleep(Duration::from_secs(2));
    s.close_stdin();

    // Everything is read first and checked afterwards, so that the client
    // reads as fast as the pipe allows.
    let mut lines = Vec::new();
    let (count, eof) = s.read(usize::MAX, Duration::from_secs(90), |line| lines.push(line));
    assert!(eof);
    let mut ids = Vec::new();
    for line in &lines {
        if line.len() < 1000 {
            let msg = parse_line(line);
            assert_eq!(msg["id"], json!(0), "unexpected short message {msg}");
            assert_eq!(msg["result"]["serverInfo"]["name"], json!("mcp-exec"));
        } else {
            ids.push(assert_print_a_response(line, WHOLE_BYTES));
        }
    }
    ids.sort_unstable();
    assert_eq!(
        ids,
        (1..=WHOLE_CALLS).collect::<Vec<_>>(),
        "{count} lines; not every request got exactly one result"
    );
    let status = s.wait_exit(EXIT);
    assert!(
        status.is_some_and(|st| st.success()),
        "exit after EOF: {status:?}"
    );
}

/// Calls of the backpressure test, their stdout size, the bound on the
/// server's anonymous memory (what buffering grows; the debug binary's
/// file-backed pages, over 12 MiB of its RSS, grow with every crate added).
const FLOOD_CALLS: u64 = 500;
const FLOOD_BYTES: usize = 200_000;
const RSS_BOUND: u64 = 64 << 20;
/// How long the client does not read.
const NOT_READING: Duration = Duration::from_secs(8);

/// Floods the server with `FLOOD_CALLS` large results while not reading,
/// samples its RSS throughout, then reads and checks every result.
fn a_client_that_does_not_read_keeps_the_server_under_64_mib_and_then_gets_all_500_results(
    t: Target,
) {
    let mut s = RawServer::start(t, &[]);
    let pid = s.server_host_pid().expect("the server's host pid");
    let stop = Arc::new(AtomicBool::new(false));
    let max = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, max) = (Arc::clone(&stop), Arc::clone(&max));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                max.fetch_max(anon_rss_bytes(pid).unwrap_or(0), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let assert_bounded = |when: &str| {
        let max = max.load(Ordering::Relaxed);
        assert!(
            max < RSS_BOUND,
            "the server's anonymous RSS reached {} MiB {when}; bound {} MiB",
            max >> 20,
            RSS_BOUND >> 20
        );
    };
    initialize(&mut s);
    // Written from another thread: a server that stops reading while its
    // output is stuck makes these writes block, which is allowed.
    let mut stdin = s.take_stdin();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        for id in 1..=FLOOD_CALLS {
            let line = format!(
                "{}\n",
                call(id, "execute", json!({"command": print_a(FLOOD_BYTES)}))
            );
            stdin.write_all(line.as_bytes()).expect("write a request");
        }
        stdin
    });
    std::thread::sleep(NOT_READING);
    // Fails fast: the reads below would take long on a server that grew.
    assert_bounded(&format!(
        "while the client did not read for {NOT_READING:?}"
    ));

    let mut seen = vec![false; FLOOD_CALLS as usize + 1];
    let (count, _) = s.read(FLOOD_CALLS as usize + 1, Duration::from_secs(240), |line| {
        if line.len() < 1000 {
            let msg = parse_line(&line);
            assert_eq!(msg["id"], json!(0), "unexpected short message {msg}");
        } else {
            let id = assert_print_a_response(&line, FLOOD_BYTES);
            assert!(!seen[id as usize], "request {id} answered twice");
            seen[id as usize] = true;
        }
    });
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    assert_bounded("while the client read the results");
    let stdin = writer.join().expect("writer");
    assert_eq!(count, FLOOD_CALLS as usize + 1);
    assert!(seen[1..].iter().all(|&s| s), "a request got no result");
    drop(stdin);
    let status = s.wait_exit(EXIT);
    assert!(
        status.is_some_and(|st| st.success()),
        "exit after EOF: {status:?}"
    );
}

crate::parity!(
    at_eof_calls_in_flight_finish_within_the_grace_and_the_rest_get_32800_after_it,
    the_readme_example_piped_without_a_sleep_prints_the_execute_result,
    when_the_client_closes_stdout_the_server_shuts_down_at_once_and_its_jobs_end,
    every_response_is_written_whole_before_exit_when_the_client_reads_only_after_eof,
);

/// The server's RSS is read from the host's `/proc/<pid>/status`, so only
/// the targets whose server pid the host knows: the bare binary and the
/// PID 1 under `unshare`.
mod rss {
    use super::*;

    #[test]
    fn a_client_that_does_not_read_keeps_the_bare_server_under_64_mib_and_then_gets_all_500_results()
     {
        if Target::Bare.available() {
            a_client_that_does_not_read_keeps_the_server_under_64_mib_and_then_gets_all_500_results(
                Target::Bare,
            );
        }
    }

    #[test]
    fn a_client_that_does_not_read_keeps_the_pid_1_server_under_64_mib_and_then_gets_all_500_results()
     {
        if Target::Pid1.available() {
            a_client_that_does_not_read_keeps_the_server_under_64_mib_and_then_gets_all_500_results(
                Target::Pid1,
            );
        }
    }
}
