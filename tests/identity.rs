//! Per-job identity and limits, and why a job ended (docs/security.md), end
//! to end on every target where they apply: `user` (the images ship `nobody`,
//! 65534, and a `users` group it belongs to), `limits` as the kernel shows
//! them in `/proc/self/limits` and enforces them, `MCP_EXEC_JOB_LIMITS` as
//! defaults and maxima, and `cause` for each way a job can end that the
//! kernel or the server can name. The memory-exhaustion test runs in the
//! images only: it needs the container's own memory limit
//! (`podman run --memory 64m`).
//!
//! Tests run as root (the harness's PID-1 and container targets need it
//! anyway); where a test needs the server *not* to be root it starts the
//! binary as `nobody` itself.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{LATEST, Server, TIMEOUT, Target, tool_json, wait_for};

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// A file name under `/tmp` that no other test uses.
fn scratch_file(what: &str) -> String {
    format!(
        "/tmp/mcp-exec-identity-{what}-{}-{}",
        std::process::id(),
        MARKERS.fetch_add(1, Ordering::Relaxed)
    )
}

fn server(t: Target) -> Server {
    Server::started_in(t, &[], LATEST)
}

/// Runs a blocking `execute` with `args` and returns the result.
fn run(s: &mut Server, args: Value) -> Value {
    s.call("execute", args)
}

/// The `/proc/self/limits` row of `name` as `(soft, hard)`.
fn limit_row(limits: &str, name: &str) -> (String, String) {
    let line = limits
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no {name:?} row in:\n{limits}"));
    let mut cols = line[name.len()..].split_whitespace();
    (
        cols.next().unwrap_or_default().to_owned(),
        cols.next().unwrap_or_default().to_owned(),
    )
}

/// The server still answers and runs jobs as root.
fn assert_still_serving(s: &mut Server) {
    let r = run(
        s,
        json!({"command": "echo alive; id -u", "capture": {"on_success": "all"}}),
    );
    assert_eq!(r["stdout"]["data"], json!("alive\n0\n"), "{r}");
}

// ---------------------------------------------------------------------------
// user
// ---------------------------------------------------------------------------

fn a_job_as_nobody_is_uid_65534_and_cannot_write_a_root_owned_file(t: Target) {
    let mut s = server(t);
    let file = scratch_file("owned");
    let r = run(
        &mut s,
        json!({"command": format!("echo root > {file} && chmod 0644 {file}")}),
    );
    assert_eq!(r["state"], json!("success"), "{r}");
    let r = run(
        &mut s,
        json!({"command": format!("id -u; echo nobody >> {file}"), "user": "nobody",
               "capture": {"on_error": "all"}}),
    );
    assert_eq!(r["state"], json!("error"), "the write must fail: {r}");
    assert_eq!(r["stdout"]["data"], json!("65534\n"), "{r}");
    let stderr = r["stderr"]["data"].as_str().unwrap_or_default();
    assert!(stderr.to_lowercase().contains("permission denied"), "{r}");
    let r = run(
        &mut s,
        json!({"command": format!("cat {file}; rm -f {file}")}),
    );
    assert_eq!(r["stdout"]["data"], json!("root\n"), "untouched: {r}");
}

/// The groups `/etc/passwd` and `/etc/group` of the target give `nobody`.
fn nobody_groups_in(s: &mut Server) -> (String, Vec<String>) {
    let r = run(
        s,
        json!({"command": "cat /etc/passwd; echo ---; cat /etc/group"}),
    );
    let text = r["stdout"]["data"].as_str().unwrap_or_default().to_owned();
    let (passwd, group) = text.split_once("---\n").expect("both files");
    let gid = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f[0] == "nobody")
        .map(|f| f[3].to_owned())
        .expect("nobody in /etc/passwd");
    let mut groups = vec![gid.clone()];
    for f in group.lines().map(|l| l.split(':').collect::<Vec<_>>()) {
        if f.len() >= 4 && f[3].split(',').any(|m| m == "nobody") && !groups.contains(&f[2].into())
        {
            groups.push(f[2].to_owned());
        }
    }
    groups.sort();
    (gid, groups)
}

fn a_user_by_name_gets_its_primary_and_supplementary_groups_and_by_number_none(t: Target) {
    let mut s = server(t);
    let (gid, expected) = nobody_groups_in(&mut s);
    if t == Target::Scratch {
        assert!(
            expected.len() >= 2,
            "the image lists nobody in a group: {expected:?}"
        );
    }
    let r = run(&mut s, json!({"command": "id -g; id -G", "user": "nobody"}));
    let out = r["stdout"]["data"].as_str().unwrap_or_default().to_owned();
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some(gid.as_str()), "{r}");
    let mut got: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    got.sort();
    assert_eq!(got, expected, "{r}");
    let r = run(
        &mut s,
        json!({"command": "id -u; id -g; id -G", "user": "65534:65534"}),
    );
    assert_eq!(r["stdout"]["data"], json!("65534\n65534\n65534\n"), "{r}");
}

fn an_unknown_user_is_refused_with_its_name(t: Target) {
    let mut s = server(t);
    let e = s.call_err(
        "execute",
        json!({"command": "true", "user": "no-such-user-here"}),
    );
    assert_eq!(
        e,
        "invalid arguments: unknown user \"no-such-user-here\" (not in /etc/passwd)"
    );
}

fn a_2024_11_05_session_ignores_user_and_limits(t: Target) {
    let mut s = Server::started(t);
    let r = run(
        &mut s,
        json!({"command": "id -u", "user": "no-such-user-here", "limits": {"memory": 1}}),
    );
    assert_eq!(r["stdout"]["data"], json!("0\n"), "{r}");
}

/// The binary started as `nobody` itself: one exchange over its stdio.
fn exchange_as_nobody(env: &[(&str, &str)], args: &[&str], call: Value) -> Value {
    let mut command = Command::new(crate::support::binary());
    command
        .args(args)
        .envs(env.iter().copied())
        .current_dir("/");
    let (mut command, mark) = crate::support::guard::prepare(command, true);
    let child = command
        .uid(65534)
        .gid(65534)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the binary as nobody");
    let _ended = mark.guard(child.id());
    let mut child = child;
    let lines = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
               "params": {"protocolVersion": LATEST, "capabilities": {},
                          "clientInfo": {"name": "identity-test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "execute", "arguments": call}}),
    ];
    {
        let mut stdin = child.stdin.take().expect("stdin");
        for l in lines {
            writeln!(stdin, "{l}").expect("writing a request");
        }
    }
    // stdin is at EOF: the server answers and exits.
    let out = child.wait_with_output().expect("its output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let answer = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["id"] == json!(1))
        .unwrap_or_else(|| panic!("no answer to the call: {out:?}"));
    answer["result"].clone()
}

#[test]
fn user_on_a_server_that_is_not_root_is_refused_and_its_jobs_still_run() {
    let r = exchange_as_nobody(&[], &[], json!({"command": "true", "user": "nobody"}));
    assert_eq!(r["isError"], json!(true), "{r}");
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("\"user\" needs the server to run as root (it runs as uid 65534)"),
        "{r}"
    );
    let r = exchange_as_nobody(
        &[],
        &[],
        json!({"command": "id -u; cat /proc/self/oom_score_adj"}),
    );
    assert_eq!(
        tool_json(&r)["stdout"]["data"],
        json!("65534\n500\n"),
        "an unprivileged server runs jobs, raised for the OOM killer: {r}"
    );
}

#[test]
fn user_is_refused_while_an_http_listener_runs_without_a_token() {
    let mut s = Server::start_with_cli(Target::Bare, &[], &["--http", "127.0.0.1:0"]);
    s.initialize(LATEST);
    let e = s.call_err("execute", json!({"command": "true", "user": "nobody"}));
    assert!(
        e.contains("\"user\" is refused while an HTTP listener runs without a token"),
        "{e}"
    );
    let pid = s.server_host_pid().expect("the server's pid");
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}

// ---------------------------------------------------------------------------
// limits
// ---------------------------------------------------------------------------

fn a_job_given_limits_sees_them_in_proc_self_limits(t: Target) {
    let mut s = server(t);
    let r = run(
        &mut s,
        json!({"argv": ["cat", "/proc/self/limits"],
               "limits": {"address_space_bytes": 2_000_000_000u64, "processes": 321,
                          "cpu_seconds": 30, "file_size_bytes": 1_000_000, "open_files": 77}}),
    );
    let limits = r["stdout"]["data"].as_str().unwrap_or_default();
    assert_eq!(
        limit_row(limits, "Max address space"),
        ("2000000000".into(), "2000000000".into())
    );
    assert_eq!(
        limit_row(limits, "Max processes"),
        ("321".into(), "321".into())
    );
    assert_eq!(
        limit_row(limits, "Max cpu time"),
        ("30".into(), "31".into()),
        "hard one second above soft: SIGXCPU first"
    );
    assert_eq!(
        limit_row(limits, "Max file size"),
        ("1000000".into(), "1000000".into())
    );
    assert_eq!(
        limit_row(limits, "Max open files"),
        ("77".into(), "77".into())
    );
    // The server's own are untouched.
    let r = run(&mut s, json!({"argv": ["cat", "/proc/self/limits"]}));
    let plain = r["stdout"]["data"].as_str().unwrap_or_default();
    assert_ne!(limit_row(plain, "Max open files").0, "77", "{plain}");
    assert_eq!(limit_row(plain, "Max cpu time").0, "unlimited", "{plain}");
}

fn a_fork_bomb_limited_by_processes_fails_inside_the_job_while_the_server_serves(t: Target) {
    let mut s = server(t);
    // Bounded: at most 100 forks of a 3 s sleep, and a deadline.
    let r = run(
        &mut s,
        json!({"argv": ["/bin/sh", "-c",
                        "i=0; while [ $i -lt 100 ]; do sleep 3 & i=$((i+1)); done; wait"],
               "user": "nobody", "limits": {"processes": 25}, "timeout": 30,
               "capture": {"on_success": "all", "on_error": "all"}}),
    );
    let stderr = r["stderr"]["data"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(
        stderr.contains("fork"),
        "the job's own forks fail past 25 processes: {r}"
    );
    assert!(r.get("start_error").is_none(), "it started: {r}");
    assert_still_serving(&mut s);
}

/// `awk` doubling a string `doublings` times: 2^doublings bytes, about twice
/// that at the peak; prints the length when it got there.
fn allocating_awk(doublings: u32) -> Value {
    json!([
        "awk",
        format!("BEGIN{{s=\"x\"; for(i=0;i<{doublings};i++) s=s s; print length(s)}}")
    ])
}

fn address_space_bytes_stops_a_job_that_allocates_past_it(t: Target) {
    let mut s = server(t);
    let r = run(&mut s, json!({"argv": allocating_awk(26)}));
    assert_eq!(
        r["stdout"]["data"],
        json!("67108864\n"),
        "unlimited it gets there: {r}"
    );
    let r = run(
        &mut s,
        json!({"argv": allocating_awk(26), "limits": {"address_space_bytes": 40_000_000},
               "capture": {"on_error": "all"}}),
    );
    assert_eq!(r["state"], json!("error"), "{r}");
    assert_ne!(r["stdout"]["data"], json!("67108864\n"), "{r}");
    assert_still_serving(&mut s);
}

fn cpu_seconds_ends_a_busy_loop_with_cause_cpu_limit(t: Target) {
    let mut s = server(t);
    let r = run(
        &mut s,
        json!({"argv": ["/bin/sh", "-c", "while :; do :; done"],
               "limits": {"cpu_seconds": 1}, "timeout": 60}),
    );
    assert_eq!(r["signal_number"], json!(24), "{r}");
    assert_eq!(r["signal"], json!("CPU time limit exceeded"), "{r}");
    assert_eq!(r["cause"], json!("cpu_limit"), "{r}");
    assert!(r.get("timed_out").is_none(), "{r}");
}

/// SIGXCPU ignored: the hard limit, one second later, is a SIGKILL; the
/// child's CPU time (from `wait4`) says it was the limit.
fn a_busy_loop_that_ignores_sigxcpu_is_killed_at_the_hard_limit_with_cause_cpu_limit(t: Target) {
    let mut s = server(t);
    let r = run(
        &mut s,
        json!({"argv": ["/bin/sh", "-c", "trap '' XCPU; while :; do :; done"],
               "limits": {"cpu_seconds": 1}, "timeout": 60}),
    );
    assert_eq!(r["signal_number"], json!(9), "{r}");
    assert_eq!(r["cause"], json!("cpu_limit"), "{r}");
    // A SIGKILL from elsewhere, with CPU time far below the limit, has no cause.
    let id = s.spawn_job("kill -KILL $$");
    let r = s.call("wait", json!({"job_ids": [id], "timeout": 20}));
    assert_eq!(r[0]["signal_number"], json!(9), "{r}");
    assert!(r[0].get("cause").is_none(), "{r}");
}

fn file_size_bytes_ends_a_writer_with_cause_file_size_limit(t: Target) {
    let mut s = server(t);
    let file = scratch_file("fsize");
    let r = run(
        &mut s,
        json!({"argv": ["/bin/sh", "-c", format!("exec head -c 100000 /dev/zero > {file}")],
               "limits": {"file_size_bytes": 1000}}),
    );
    assert_eq!(r["signal_number"], json!(25), "{r}");
    assert_eq!(r["cause"], json!("file_size_limit"), "{r}");
    let r = run(
        &mut s,
        json!({"command": format!("wc -c < {file}; rm -f {file}")}),
    );
    assert_eq!(
        r["stdout"]["data"].as_str().map(str::trim),
        Some("1000"),
        "{r}"
    );
}

fn job_limits_are_defaults_and_maxima_a_call_cannot_exceed(t: Target) {
    let mut s = Server::started_in(
        t,
        &[(
            "MCP_EXEC_JOB_LIMITS",
            r#"{"cpu_seconds": 50, "open_files": 90}"#,
        )],
        LATEST,
    );
    let r = run(&mut s, json!({"argv": ["cat", "/proc/self/limits"]}));
    let limits = r["stdout"]["data"].as_str().unwrap_or_default();
    assert_eq!(
        limit_row(limits, "Max cpu time"),
        ("50".into(), "51".into())
    );
    assert_eq!(
        limit_row(limits, "Max open files"),
        ("90".into(), "90".into())
    );
    let r = run(
        &mut s,
        json!({"argv": ["cat", "/proc/self/limits"], "limits": {"open_files": 40}}),
    );
    let limits = r["stdout"]["data"].as_str().unwrap_or_default();
    assert_eq!(
        limit_row(limits, "Max open files"),
        ("40".into(), "40".into())
    );
    assert_eq!(limit_row(limits, "Max cpu time").0, "50");
    let e = s.call_err(
        "execute",
        json!({"command": "true", "limits": {"cpu_seconds": 51}}),
    );
    assert_eq!(
        e,
        "invalid arguments: \"limits.cpu_seconds\" is 51, above the server's maximum 50 (MCP_EXEC_JOB_LIMITS)"
    );
    let e = s.call_err(
        "execute",
        json!({"command": "true", "limits": {"memory": 1}}),
    );
    assert!(e.contains("unknown limit \"memory\""), "{e}");
}

#[test]
fn an_invalid_job_limits_setting_stops_the_server_with_exit_2_naming_it() {
    for bad in [
        r#"{"cpu_seconds": 0}"#,
        "{not json",
        r#"{"memory": 5}"#,
        "[1]",
    ] {
        let mut command = Command::new(crate::support::binary());
        command.env("MCP_EXEC_JOB_LIMITS", bad).stdin(Stdio::null());
        let out = crate::support::guard::output(command).expect("running the binary");
        assert_eq!(out.status.code(), Some(2), "{bad}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("MCP_EXEC_JOB_LIMITS"), "{bad}: {err}");
    }
}

// ---------------------------------------------------------------------------
// cause
// ---------------------------------------------------------------------------

fn a_job_our_kill_ended_says_cause_killed(t: Target) {
    let mut s = server(t);
    let id = s.spawn_job("sleep 30");
    let k = s.call("kill", json!({"job_id": id, "signal": "TERM"}));
    assert_eq!(k["result"]["signal_number"], json!(15), "{k}");
    assert_eq!(k["result"]["cause"], json!("killed"), "{k}");
    assert!(k["result"].get("timed_out").is_none(), "{k}");
    // A signal our kill did not send is no cause of ours.
    let id = s.spawn_job("kill -TERM $$");
    let r = s.call("wait", json!({"job_ids": [id], "timeout": 20}));
    assert_eq!(r[0]["signal_number"], json!(15), "{r}");
    assert!(r[0].get("cause").is_none(), "{r}");
}

/// The port the server printed for `what` (`HTTP`).
fn bound_port(s: &Server, what: &str) -> u16 {
    let needle = format!("listening for {what} on ");
    let mut port = None;
    let found = wait_for(TIMEOUT, || {
        port = s
            .stderr
            .lock()
            .unwrap()
            .lines()
            .find_map(|l| l.split_once(needle.as_str()))
            .and_then(|(_, addr)| addr.trim().rsplit_once(':'))
            .and_then(|(_, p)| p.parse().ok());
        port.is_some()
    });
    assert!(found, "no {needle:?} on stderr");
    port.unwrap_or_default()
}

#[test]
fn finished_jobs_are_counted_by_cause_in_the_metrics() {
    let mut s = Server::start_with_cli(Target::Bare, &[], &["--metrics-listen", "127.0.0.1:0"]);
    s.initialize(LATEST);
    let port = bound_port(&s, "metrics");
    let r = run(
        &mut s,
        json!({"argv": ["head", "-c", "5000", "/dev/zero"], "limits": {"file_size_bytes": 100},
               "capture": {"on_success": "none"}}),
    );
    assert_eq!(r["state"], json!("success"), "a pipe has no file size: {r}");
    let file = scratch_file("metrics");
    let r = run(
        &mut s,
        json!({"argv": ["/bin/sh", "-c", format!("exec head -c 5000 /dev/zero > {file}")],
               "limits": {"file_size_bytes": 100}}),
    );
    assert_eq!(r["cause"], json!("file_size_limit"), "{r}");
    let r = run(&mut s, json!({"argv": ["rm", "-f", file]}));
    assert_eq!(r["state"], json!("success"), "{r}");
    let m = crate::support::http::request(port, "GET", "/metrics", &[], "", TIMEOUT)
        .expect("GET /metrics");
    assert!(
        m.body.contains(
            "mcp_exec_jobs_finished_total{outcome=\"signal\",cause=\"file_size_limit\"} 1"
        ),
        "{}",
        m.body
    );
    assert!(
        m.body
            .contains("mcp_exec_jobs_finished_total{outcome=\"success\"} 2"),
        "jobs without a cause have no cause label: {}",
        m.body
    );
    let pid = s.server_host_pid().expect("the server's pid");
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
}

/// A job that runs while the server shuts down: its `POST /exec` stream
/// delivers the result, `cause: "shutdown"`.
fn a_job_ended_by_shutdown_says_cause_shutdown(t: Target) {
    let token = "identity-test-token";
    let mut s = Server::start_with_cli(
        t,
        &[("MCP_EXEC_HTTP_TOKEN", token)],
        &["--http", "127.0.0.1:0", "--no-stdio"],
    );
    let port = bound_port(&s, "HTTP");
    let streaming = std::thread::spawn(move || {
        crate::support::http::request(
            port,
            "POST",
            "/exec",
            &[
                ("Authorization", &format!("Bearer {token}")),
                ("Accept", "text/event-stream"),
                ("Content-Type", "application/json"),
            ],
            r#"{"command": "sleep 30"}"#,
            TIMEOUT,
        )
    });
    let started = wait_for(TIMEOUT, || {
        s.stderr
            .lock()
            .unwrap()
            .contains("POST /exec: job submitted")
    });
    assert!(started);
    std::thread::sleep(Duration::from_millis(300));
    let pid = s.server_host_pid().expect("the server's pid");
    let sent = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let reply = streaming
        .join()
        .expect("the stream thread")
        .expect("the stream");
    let exit = reply
        .body
        .split("event: exit\ndata: ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or_else(|| panic!("no exit event: {}", reply.body));
    assert_eq!(exit["cause"], json!("shutdown"), "{exit}");
    assert_eq!(exit["signal_number"], json!(15), "{exit}");
    assert!(s.wait_exit(TIMEOUT).is_some_and(|e| e.success()));
}

/// The container has 64 MiB and no swap; the job wants 512 MiB. The kernel
/// kills the job (its `oom_score_adj` is 500, the server's lower), the
/// server lives on and says why.
fn a_job_that_exhausts_the_containers_memory_is_killed_by_the_kernel_with_cause_oom(t: Target) {
    let mut s = Server::start_with_args(t, &[], &["--memory", "64m", "--memory-swap", "64m"]);
    s.initialize(LATEST);
    let r = run(&mut s, json!({"argv": allocating_awk(28), "timeout": 60}));
    assert_eq!(r["signal_number"], json!(9), "{r}");
    assert_eq!(r["cause"], json!("oom"), "{r}");
    assert_still_serving(&mut s);
    let r = run(
        &mut s,
        json!({"command": "cat /proc/1/oom_score_adj /proc/self/oom_score_adj"}),
    );
    let scores: Vec<i32> = r["stdout"]["data"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    assert_eq!(scores.len(), 2, "{r}");
    assert!(
        scores[1] >= 500 && scores[1] > scores[0],
        "jobs go first: {r}"
    );
}

mod oom {
    use super::*;

    #[test]
    fn scratch() {
        if Target::Scratch.available() {
            a_job_that_exhausts_the_containers_memory_is_killed_by_the_kernel_with_cause_oom(
                Target::Scratch,
            );
        }
    }

    #[test]
    fn tini() {
        if Target::Tini.available() {
            a_job_that_exhausts_the_containers_memory_is_killed_by_the_kernel_with_cause_oom(
                Target::Tini,
            );
        }
    }
}

mod shutdown_cause {
    use super::*;

    #[test]
    fn bare() {
        if Target::Bare.available() {
            a_job_ended_by_shutdown_says_cause_shutdown(Target::Bare);
        }
    }

    #[test]
    fn pid1() {
        if Target::Pid1.available() {
            a_job_ended_by_shutdown_says_cause_shutdown(Target::Pid1);
        }
    }
}

crate::parity!(
    a_job_as_nobody_is_uid_65534_and_cannot_write_a_root_owned_file,
    a_user_by_name_gets_its_primary_and_supplementary_groups_and_by_number_none,
    an_unknown_user_is_refused_with_its_name,
    a_2024_11_05_session_ignores_user_and_limits,
    a_job_given_limits_sees_them_in_proc_self_limits,
    a_fork_bomb_limited_by_processes_fails_inside_the_job_while_the_server_serves,
    address_space_bytes_stops_a_job_that_allocates_past_it,
    cpu_seconds_ends_a_busy_loop_with_cause_cpu_limit,
    a_busy_loop_that_ignores_sigxcpu_is_killed_at_the_hard_limit_with_cause_cpu_limit,
    file_size_bytes_ends_a_writer_with_cause_file_size_limit,
    job_limits_are_defaults_and_maxima_a_call_cannot_exceed,
    a_job_our_kill_ended_says_cause_killed,
);
