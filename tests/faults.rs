//! Fault injection (issue 15, item 2): the server under resource
//! exhaustion, hostile jobs and clients that misbehave. In each case a clear
//! error where one is due, the server serves on (a follow-up `execute echo
//! ok` works), every result is delivered exactly once, and no zombie is
//! left (read from `/proc` inside the target).
//!
//! Cases covered elsewhere are not repeated here: spawn failures for lack of
//! descriptors tripping the breaker (tests/bounded.rs), a stdio client that
//! stops reading or closes stdout with stdio the only transport
//! (tests/shutdown.rs), a burst of 100 orphans (tests/lifecycle.rs,
//! tests/containers.rs). This file adds what those leave out: the same
//! faults with HTTP on, processes and memory running out, a job that stops
//! itself, one in uninterruptible sleep, one that closes its output and runs
//! on, one that leaves 1,000 children behind.
//!
//! Processes are recognised by a **marker**: a `sleep` whose duration is
//! unique to the test (`sleep 90.<test pid><n>`), so whatever a failing
//! test leaves behind does not live long.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::http::request;
use crate::support::{LATEST, Server, TIMEOUT, Target, require, wait_for};

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// A `sleep` duration no other process on this machine uses, about `secs`.
fn marker(secs: u32) -> String {
    format!(
        "{secs}.{}{:04}",
        std::process::id(),
        MARKERS.fetch_add(1, Ordering::Relaxed)
    )
}

/// The trimmed stdout of a blocking `execute` that must succeed.
fn stdout_of(s: &mut Server, command: &str) -> String {
    let r = s.exec(command);
    assert_eq!(r["state"], json!("success"), "{command}: {r}");
    r["stdout"]["data"]
        .as_str()
        .unwrap_or_else(|| panic!("no stdout in {r}"))
        .trim()
        .to_owned()
}

/// The server serves on: a blocking `execute echo ok` answers `ok`.
fn serves_on(s: &mut Server) {
    assert_eq!(stdout_of(s, "echo ok"), "ok", "the follow-up execute");
}

/// Live processes in the target whose command line contains `marker`
/// (zombies have none). `[.]` keeps the checker itself from matching.
fn marker_count(s: &mut Server, marker: &str) -> usize {
    let pattern = marker.replace('.', "[.]");
    let out = stdout_of(
        s,
        &format!(
            "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -c '{pattern}' || true"
        ),
    );
    out.parse().unwrap_or_else(|e| panic!("count {out:?}: {e}"))
}

/// Live processes on the host (which sees every target's) with `marker`
/// in their command line: for when the target cannot run a job.
fn host_marker_count(marker: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                c.split(|&b| b == 0)
                    .any(|arg| String::from_utf8_lossy(arg) == marker)
            })
        })
        .count()
}

/// Zombies in the target, read from `/proc/*/stat` by shell builtins only
/// (no fork, so the checker makes none of its own). In a namespace (PID 1,
/// containers) every zombie counts; on the host only the server's own
/// children (`$PPID` of the checker is the server).
fn zombie_count(s: &mut Server) -> usize {
    let all = if s.target == Target::Bare { 0 } else { 1 };
    let script = format!(
        r#"n=0; for f in /proc/[0-9]*/stat; do read -r l 2>/dev/null < "$f" || continue; r=${{l##*) }}; st=${{r%% *}}; r=${{r#* }}; pp=${{r%% *}}; if [ "$st" = Z ] && {{ [ {all} = 1 ] || [ "$pp" = "$PPID" ]; }}; then n=$((n+1)); fi; done; echo $n"#
    );
    let out = stdout_of(s, &script);
    out.parse()
        .unwrap_or_else(|e| panic!("zombie count {out:?}: {e}"))
}

/// Waits until the target has no zombie and no process with `marker`.
fn assert_clean(s: &mut Server, marker: &str) {
    let mut seen = (0, 0);
    let clean = wait_for(TIMEOUT, || {
        seen = (marker_count(s, marker), zombie_count(s));
        seen == (0, 0)
    });
    assert!(
        clean,
        "{:?}: {} marked processes and {} zombies left",
        s.target, seen.0, seen.1
    );
}

/// The state letter of `pid` in the target (`/proc/PID/stat`).
fn proc_state(s: &mut Server, pid: &str) -> String {
    let r = s.exec(&format!("cat /proc/{pid}/stat"));
    let line = r["stdout"]["data"].as_str().unwrap_or_default().to_owned();
    line.rsplit_once(") ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_default()
        .to_owned()
}

/// Polls `output` until the job's stdout contains `needle`; returns it.
fn wait_output(s: &mut Server, job: &str, needle: &str) -> String {
    let mut data = String::new();
    let seen = wait_for(TIMEOUT, || {
        let r = s.call("output", json!({"job_id": job, "stdout": "all"}));
        data = r["stdout"]["data"].as_str().unwrap_or_default().to_owned();
        data.contains(needle)
    });
    assert!(
        seen,
        "{job} never wrote {needle:?}; stdout so far: {data:?}"
    );
    data
}

/// The job ids `list_jobs` reports.
fn listed(s: &mut Server) -> Vec<String> {
    let r = s.call("list_jobs", json!({}));
    r["jobs"]
        .as_array()
        .unwrap_or_else(|| panic!("no jobs in {r}"))
        .iter()
        .map(|j| j["job_id"].as_str().expect("job_id").to_owned())
        .collect()
}

/// A second `wait` on a delivered job fails: it was delivered once.
fn assert_delivered(s: &mut Server, job: &str) {
    let e = s.call_err("wait", json!({"job_ids": [job], "timeout": 0}));
    assert!(e.contains("unknown job_id"), "{job} delivered again? {e}");
}

// ---------------------------------------------------------------------------
// Hostile jobs, every target
// ---------------------------------------------------------------------------

fn a_job_that_stopped_itself_is_ended_by_a_plain_kill(t: Target) {
    let mut s = Server::started_in(t, &[], LATEST);
    let m = marker(90);
    // The shell stops itself with a child still running in its group. A
    // stopped process keeps a TERM pending until it is continued, so a kill
    // that only sent TERM would wait its whole timeout and fail.
    let job = s.spawn_job(&format!(
        "sleep {m} & echo stopping $$; kill -STOP $$; echo resumed"
    ));
    let out = wait_output(&mut s, &job, "stopping");
    let pid = out.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let mut state = String::new();
    assert!(
        wait_for(TIMEOUT, || {
            state = proc_state(&mut s, &pid);
            state == "T"
        }),
        "the job never stopped: state {state:?}"
    );
    let k = s.call("kill", json!({"job_id": job, "signal": "TERM"}));
    assert_eq!(k["terminated"], json!(true), "{k}");
    assert_eq!(k["signal_sent"], json!(15), "{k}");
    assert!(k.get("escalated").is_none(), "TERM was enough: {k}");
    assert_eq!(k["result"]["signal"], json!("terminated"), "{k}");
    let stdout = k["result"]["stdout"]["data"].as_str().unwrap_or_default();
    assert!(!stdout.contains("resumed"), "the shell ran on: {k}");
    assert_delivered(&mut s, &job);
    assert_clean(&mut s, &m);
    serves_on(&mut s);
}

fn a_job_stopped_at_its_deadline_is_ended_by_term_without_the_grace(t: Target) {
    // The grace is long: a result within it shows that TERM took effect.
    let mut s = Server::started_in(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "60")], LATEST);
    let id = s.send_call(
        "execute",
        json!({"command": "kill -STOP $$; echo resumed", "timeout": 1}),
    );
    let r = s.response(&id, Duration::from_secs(30));
    let r = crate::support::tool_json(&r["result"]);
    assert_eq!(r["timed_out"], json!(true), "{r}");
    assert_eq!(r["signal"], json!("terminated"), "{r}");
    assert!(listed(&mut s).is_empty(), "delivered and removed");
    serves_on(&mut s);
}

fn a_job_that_closes_its_stdout_and_runs_on_is_waited_for_until_it_exits(t: Target) {
    let mut s = Server::started(t);
    let r = s.call(
        "execute",
        json!({"command": "echo early; exec >&-; sleep 1; echo late >&2; exit 3", "capture": {"on_error": "all"}}),
    );
    assert_eq!(r["exit_code"], json!(3), "{r}");
    assert_eq!(r["stdout"]["data"], json!("early\n"), "{r}");
    assert_eq!(r["stderr"]["data"], json!("late\n"), "{r}");

    // Both streams closed: only the exit status is left to deliver.
    let job = s.spawn_job("exec >&- 2>&-; sleep 1; exit 4");
    let w = s.call("wait", json!({"job_ids": [job], "timeout": 20}));
    assert_eq!(w[0]["state"], json!("error"), "{w}");
    assert_eq!(w[0]["exit_code"], json!(4), "{w}");
    assert_delivered(&mut s, &job);
    serves_on(&mut s);
}

fn a_job_that_forks_1000_children_and_exits_leaves_no_zombie(t: Target) {
    let mut s = Server::started(t);
    let m = marker(3);
    let r = s.exec(&format!(
        "i=0; while [ $i -lt 1000 ]; do sleep {m} & i=$((i+1)); done; echo forked $i"
    ));
    assert_eq!(r["state"], json!("success"), "{r}");
    assert_eq!(r["stdout"]["data"], json!("forked 1000\n"), "{r}");
    assert!(listed(&mut s).is_empty(), "the result was delivered once");
    // The orphans are the server's (subreaper or PID 1) to reap.
    assert_clean(&mut s, &m);
    serves_on(&mut s);
}

// ---------------------------------------------------------------------------
// Processes running out
// ---------------------------------------------------------------------------

/// A server whose jobs can have at most about `procs` processes: an
/// unprivileged server under `RLIMIT_NPROC` (bare, PID 1: the limit counts
/// every process of the user, so the server runs as `nobody`), or
/// `podman run --pids-limit` (containers).
/// The bare and PID-1 runs of a test use different users, so that running
/// in parallel they do not share the per-user count.
fn server_with_few_processes(t: Target, env: &[(&str, &str)], procs: u32) -> Server {
    if t.is_container() {
        let limit = procs.to_string();
        Server::start_with_args(t, env, &["--pids-limit", &limit])
    } else {
        let nproc = format!("--nproc={procs}:{procs}");
        let uid = 61_000 + (std::process::id() % 1000) * 2 + u32::from(t == Target::Pid1);
        let (reuid, regid) = (format!("--reuid={uid}"), format!("--regid={uid}"));
        Server::start_prefixed(
            t,
            env,
            &[
                "setpriv",
                &reuid,
                &regid,
                "--clear-groups",
                "prlimit",
                &nproc,
                "--",
            ],
            &[],
        )
    }
}

fn a_job_that_exhausts_the_process_limit_fails_new_spawns_clearly_until_it_is_killed(t: Target) {
    // The breaker stays out of the way: this is about each spawn failing
    // clearly and the server serving on.
    let env = [
        ("MCP_EXEC_BREAKER_FAILURES", "1000"),
        ("MCP_EXEC_SHUTDOWN_GRACE", "1"),
    ];
    let mut s = server_with_few_processes(t, &env, 48);
    s.initialize(LATEST);
    let m = marker(90);
    // Forks until fork fails (the shell then gives up), leaving what it
    // got running in its group.
    let bomb = s.spawn_job(&format!(
        "i=0; while [ $i -lt 200 ]; do sleep {m} & i=$((i+1)); done; echo all 200 forked"
    ));
    // The shell retries a failing fork for a while before it gives up.
    let mut st = Value::Null;
    assert!(
        wait_for(Duration::from_secs(90), || {
            st = s.call("status", json!({"job_id": bomb}));
            st["state"] != json!("running")
        }),
        "the forking shell never ended: {st}"
    );
    let held = host_marker_count(&m);
    assert!(
        held > 0 && held < 200,
        "the limit never bit: {held} sleeps, {st}"
    );
    // The shell's own slot is free again: fill it, and whatever else frees,
    // until a spawn fails.
    let mut fillers = Vec::new();
    let failed = loop {
        let r = s.call(
            "execute",
            json!({"command": format!("exec sleep {m}"), "nowait": true}),
        );
        if r["state"] != json!("running") {
            break r;
        }
        fillers.push(r["job_id"].as_str().expect("job_id").to_owned());
        assert!(fillers.len() < 20, "{} more jobs started", fillers.len());
    };
    assert_eq!(failed["state"], json!("error"), "{failed}");
    assert_eq!(failed["exit_code"], json!(-1), "{failed}");
    let e = failed["start_error"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(
        e.contains("resource temporarily unavailable") || e.contains("try again"),
        "a spawn failure for lack of processes: {failed}"
    );
    for id in &fillers {
        let k = s.call("kill", json!({"job_id": id, "signal": "KILL"}));
        assert_eq!(k["terminated"], json!(true), "{k}");
    }
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
    // The shell has ended; its orphans still hold its group.
    let k = s.call("kill", json!({"job_id": bomb, "signal": "KILL"}));
    assert_eq!(k["terminated"], json!(true), "{k}");
    assert_delivered(&mut s, &bomb);
    assert_clean(&mut s, &m);
    serves_on(&mut s);
}

// ---------------------------------------------------------------------------
// Memory running out (containers: `podman run --memory`)
// ---------------------------------------------------------------------------

fn under_a_32_mib_memory_limit_a_job_writing_1_gib_is_captured_and_a_hog_is_killed(t: Target) {
    let mut s = Server::start_with_args(t, &[], &["--memory", "32m", "--memory-swap", "32m"]);
    s.initialize(LATEST);
    // 1 GiB through a pipe takes a while on a loaded machine.
    let id = s.send_call(
        "execute",
        json!({"command": "head -c 1073741824 /dev/zero", "capture": {"on_success": {"stdout": {"from": 1073741823}}}}),
    );
    let r = crate::support::tool_json(&s.response(&id, Duration::from_secs(180))["result"]);
    assert_eq!(r["state"], json!("success"), "{r}");
    assert_eq!(r["stdout"]["total_bytes"], json!(1u64 << 30), "{r}");

    // A job that needs more than the container has: the OOM killer takes
    // it, not the server (jobs run with a higher oom_score_adj, and are
    // the larger process anyway).
    let r = s.exec("dd if=/dev/zero of=/dev/null bs=256M count=1 2>&1");
    assert_eq!(r["state"], json!("error"), "{r}");
    assert_eq!(r["signal"], json!("killed"), "{r}");
    serves_on(&mut s);
    assert_eq!(zombie_count(&mut s), 0);
}

// ---------------------------------------------------------------------------
// Uninterruptible sleep (bare, PID 1: the host's python3)
// ---------------------------------------------------------------------------

/// A python3 on the host that jobs of the bare and PID-1 targets can run.
fn host_python() -> Option<&'static str> {
    ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
}

fn a_job_in_uninterruptible_sleep_is_named_so_and_sigkill_still_ends_it(t: Target) {
    let ok = host_python().ok_or_else(|| "no python3 on the host".to_owned());
    if !require(ok.map(|_| ()), "python3 (a vfork parent in D state)") {
        return;
    }
    let python = host_python().unwrap_or_default();
    let mut s = Server::started(t);
    let dir = crate::support::HostPath::new("dstate");
    std::fs::create_dir(&dir.0).expect("a directory for the fifo");
    // glibc's posix_spawn is a vfork: the parent sleeps uninterruptibly
    // (D, killable) until the child execs, and the child blocks first in
    // opening a FIFO that has no writer. Both ignore TERM.
    let script = format!(
        "import os, signal\n\
         signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
         fifo = '{}/fifo'\n\
         os.mkfifo(fifo)\n\
         print('parent', os.getpid(), 'spawning', flush=True)\n\
         os.posix_spawn('/bin/true', ['true'], dict(os.environ), file_actions=[(os.POSIX_SPAWN_OPEN, 3, fifo, os.O_RDONLY, 0)])\n",
        dir.0
    );
    let job = s.call(
        "execute",
        json!({"command": format!("exec {python} -c \"$PY\""), "env": {"PY": script}, "nowait": true}),
    )["job_id"]
        .as_str()
        .expect("job_id")
        .to_owned();
    let out = wait_output(&mut s, &job, "spawning");
    let pid = out.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let mut state = String::new();
    assert!(
        wait_for(TIMEOUT, || {
            state = proc_state(&mut s, &pid);
            state == "D"
        }),
        "the vfork parent never went into D state: {state:?}; stdout {out:?}"
    );
    let k = s.call(
        "kill",
        json!({"job_id": job, "signal": "TERM", "timeout": 0.5}),
    );
    assert_eq!(k["terminated"], json!(false), "{k}");
    let detail = k["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("uninterruptible sleep (D state)") && detail.contains(&pid),
        "the detail names the D-state member: {k}"
    );
    let k = s.call("kill", json!({"job_id": job, "signal": "KILL"}));
    assert_eq!(k["terminated"], json!(true), "{k}");
    assert_eq!(k["result"]["signal"], json!("killed"), "{k}");
    assert_delivered(&mut s, &job);
    assert_eq!(zombie_count(&mut s), 0);
    serves_on(&mut s);
}

// ---------------------------------------------------------------------------
// Descriptors running out, and stdio clients that misbehave, with HTTP on
// (bare, PID 1: both share the host's loopback)
// ---------------------------------------------------------------------------

/// The port in `mcp-exec: listening for HTTP on 127.0.0.1:PORT`.
fn http_port(s: &Server) -> u16 {
    let mut port = None;
    let found = wait_for(TIMEOUT, || {
        let log = s.stderr.lock().unwrap();
        port = log
            .lines()
            .find_map(|l| l.split_once("listening for HTTP on "))
            .and_then(|(_, addr)| addr.trim().rsplit_once(':'))
            .and_then(|(_, p)| p.parse().ok());
        port.is_some()
    });
    assert!(
        found,
        "no HTTP port on stderr:\n{}",
        s.stderr.lock().unwrap()
    );
    port.unwrap_or_default()
}

/// One HTTP `initialize` and a blocking `execute echo ok` in that session,
/// each allowed `timeout`; returns the job result.
fn http_echo(port: u16, timeout: Duration) -> Value {
    let accept = ("Accept", "application/json, text/event-stream");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": LATEST, "capabilities": {}, "clientInfo": {"name": "faults", "version": "0"}}});
    let r = request(
        port,
        "POST",
        "/mcp",
        &[accept, ("Content-Type", "application/json")],
        &init.to_string(),
        timeout,
    )
    .expect("initialize over HTTP");
    assert_eq!(r.status, 200, "{r:?}");
    let sid = r.header("mcp-session-id").expect("a session id").to_owned();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "execute", "arguments": {"command": "echo ok"}}});
    let r = request(
        port,
        "POST",
        "/mcp",
        &[
            accept,
            ("Content-Type", "application/json"),
            ("Mcp-Session-Id", &sid),
        ],
        &call.to_string(),
        timeout,
    )
    .expect("execute over HTTP");
    assert_eq!(r.status, 200, "{r:?}");
    crate::support::tool_json(&r.json()["result"])
}

/// [`http_echo`] that must print `ok`.
fn http_echo_ok(port: u16, timeout: Duration) {
    let r = http_echo(port, timeout);
    assert_eq!(r["stdout"]["data"], json!("ok\n"), "{r}");
}

fn a_server_out_of_descriptors_keeps_serving_and_accepts_http_again_once_they_free(t: Target) {
    let env = [
        ("MCP_EXEC_HTTP", "127.0.0.1:0"),
        ("MCP_EXEC_MAX_RUNNING", "1000"),
        ("MCP_EXEC_BREAKER_FAILURES", "1000"),
    ];
    let mut s = Server::start_with_nofile(t, &env, 40);
    s.initialize(LATEST);
    let port = http_port(&s);
    let m = marker(90);
    let mut held = Vec::new();
    let failed = loop {
        let r = s.call(
            "execute",
            json!({"command": format!("sleep {m}"), "nowait": true}),
        );
        if r["state"] != json!("running") {
            break r;
        }
        held.push(r["job_id"].as_str().expect("job_id").to_owned());
        assert!(held.len() < 40, "40 descriptors held {} jobs", held.len());
    };
    let e = failed["start_error"].as_str().unwrap_or_default();
    assert!(
        e.to_lowercase().contains("too many open files"),
        "a clear start error: {failed}"
    );
    // Few descriptors are left, maybe none for a connection: an HTTP
    // client is either accepted and gets a clear error, or waits in the
    // backlog until descriptors free. stdio serves meanwhile.
    let client = std::thread::spawn(move || http_echo(port, Duration::from_secs(60)));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
    for id in &held {
        let k = s.call("kill", json!({"job_id": id, "signal": "KILL"}));
        assert_eq!(k["terminated"], json!(true), "{k}");
    }
    let r = client.join().expect("the HTTP client was served");
    let error = r["start_error"].as_str().unwrap_or_default();
    assert!(
        r["stdout"]["data"] == json!("ok\n") || error.contains("Too many open files"),
        "the HTTP call during the shortage: {r}"
    );
    http_echo_ok(port, TIMEOUT);
    assert!(listed(&mut s).is_empty());
    assert_clean(&mut s, &m);
    serves_on(&mut s);
}

fn http_is_served_while_the_stdio_client_does_not_read(t: Target) {
    use crate::raw::RawServer;
    let mut s = RawServer::start(t, &[("MCP_EXEC_HTTP", "127.0.0.1:0")]);
    let port = {
        let mut port = None;
        let found = wait_for(TIMEOUT, || {
            let log = s.stderr.lock().unwrap();
            port = log
                .lines()
                .find_map(|l| l.split_once("listening for HTTP on "))
                .and_then(|(_, a)| a.trim().rsplit_once(':'))
                .and_then(|(_, p)| p.parse::<u16>().ok());
            port.is_some()
        });
        assert!(found, "no HTTP port");
        port.unwrap_or_default()
    };
    let rpc = |id: u64, method: &str, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    s.send(&rpc(
        0,
        "initialize",
        json!({"protocolVersion": LATEST, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    ));
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    s.read_lines(1, TIMEOUT);
    // 64 results of 1 MB each, none read: stdout's pipe and the outbox fill.
    let mut stdin = s.take_stdin();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        for id in 1..=64u64 {
            let line = format!(
                "{}\n",
                rpc(
                    id,
                    "tools/call",
                    json!({"name": "execute", "arguments": {"command": "head -c 1000000 /dev/zero | tr '\\0' a"}})
                )
            );
            if stdin.write_all(line.as_bytes()).is_err() {
                break;
            }
        }
        stdin
    });
    std::thread::sleep(Duration::from_secs(3));
    for _ in 0..3 {
        http_echo_ok(port, TIMEOUT);
    }
    // Nothing was lost on stdio: all 64 arrive once the client reads.
    let mut ids = Vec::new();
    s.read(64, Duration::from_secs(120), |line| {
        let v: Value = serde_json::from_slice(&line).expect("a JSON line");
        ids.push(v["id"].as_u64().expect("an id"));
    });
    ids.sort_unstable();
    assert_eq!(ids, (1..=64).collect::<Vec<_>>());
    drop(writer.join().expect("writer"));
    if let Some(pid) = s.server_host_pid() {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

fn with_http_on_a_closed_stdout_ends_the_stdio_session_only(t: Target) {
    use crate::raw::RawServer;
    let mut s = RawServer::start(t, &[("MCP_EXEC_HTTP", "127.0.0.1:0")]);
    let mut port = None;
    assert!(wait_for(TIMEOUT, || {
        let log = s.stderr.lock().unwrap();
        port = log
            .lines()
            .find_map(|l| l.split_once("listening for HTTP on "))
            .and_then(|(_, a)| a.trim().rsplit_once(':'))
            .and_then(|(_, p)| p.parse::<u16>().ok());
        port.is_some()
    }));
    let port = port.unwrap_or_default();
    s.close_stdout();
    let _ = s.try_send_raw(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        s.wait_exit(Duration::from_secs(2)).is_none(),
        "the server exited although HTTP serves"
    );
    http_echo_ok(port, TIMEOUT);
    if let Some(pid) = s.server_host_pid() {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

crate::parity!(
    a_job_that_stopped_itself_is_ended_by_a_plain_kill,
    a_job_stopped_at_its_deadline_is_ended_by_term_without_the_grace,
    a_job_that_closes_its_stdout_and_runs_on_is_waited_for_until_it_exits,
    a_job_that_forks_1000_children_and_exits_leaves_no_zombie,
    a_job_that_exhausts_the_process_limit_fails_new_spawns_clearly_until_it_is_killed,
);

/// The tests that need the host's loopback or programs: bare and PID 1.
macro_rules! host_only {
    ($($name:ident),* $(,)?) => {
        mod host_bare { $( #[test] fn $name() { if crate::support::Target::Bare.available() { super::$name(crate::support::Target::Bare) } } )* }
        mod host_pid1 { $( #[test] fn $name() { if crate::support::Target::Pid1.available() { super::$name(crate::support::Target::Pid1) } } )* }
    };
}

host_only!(
    a_job_in_uninterruptible_sleep_is_named_so_and_sigkill_still_ends_it,
    a_server_out_of_descriptors_keeps_serving_and_accepts_http_again_once_they_free,
    http_is_served_while_the_stdio_client_does_not_read,
    with_http_on_a_closed_stdout_ends_the_stdio_session_only,
);

/// Memory limits need a container (a cgroup of its own).
mod containers {
    use crate::support::Target;

    #[test]
    fn scratch_under_a_32_mib_memory_limit_a_job_writing_1_gib_is_captured_and_a_hog_is_killed() {
        if Target::Scratch.available() {
            super::under_a_32_mib_memory_limit_a_job_writing_1_gib_is_captured_and_a_hog_is_killed(
                Target::Scratch,
            );
        }
    }

    #[test]
    fn tini_under_a_32_mib_memory_limit_a_job_writing_1_gib_is_captured_and_a_hog_is_killed() {
        if Target::Tini.available() {
            super::under_a_32_mib_memory_limit_a_job_writing_1_gib_is_captured_and_a_hog_is_killed(
                Target::Tini,
            );
        }
    }
}
