//! Bounded execution (docs/tools.md, "Bounded execution"), down to the wire
//! details: `argv`, deadlines, yielding, the admission queue, labels
//! and timing, per-job output windows, the circuit breaker, `wait` until a
//! pattern or silence, idle deadlines, revision gating of all of it, and
//! which settings stop the server.
//!
//! Part II appears from revision 2025-03-26 on, so these tests initialize
//! with [`LATEST`] unless they are about gating. Jobs that must wait for the
//! test block on `read` from their stdin (the server holds it open: they
//! end by themselves when the server goes) and are released with `input`;
//! jobs that must just outlive the test sleep for a [`marker`] duration,
//! and jobs a deadline must cut short run [`OVERRUN`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{HostPath, LATEST, Server, TIMEOUT, Target, keys, wait_for};

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// A `sleep` duration no other process on this machine uses, bounded so
/// that whatever a failing test leaves behind does not live long. (The
/// whole part, 41, is this module's own.)
fn marker() -> String {
    format!(
        "41.{}{:04}",
        std::process::id(),
        MARKERS.fetch_add(1, Ordering::Relaxed)
    )
}

/// A command that outlives a 1–3 s deadline by far, yet ends by itself
/// soon enough that a server without deadlines still answers within the
/// response timeout (so such a server fails on the result, not the clock).
const OVERRUN: &str = "sleep 8";

/// Starts `t` with `env` and initializes it in the latest revision.
fn started(t: Target, env: &[(&str, &str)]) -> Server {
    Server::started_in(t, env, LATEST)
}

/// A terminal result without the fields that differ from run to run
/// (`started_at`, `duration_ms`, `queued_ms`); their form is checked by
/// the tests about them.
fn stable(r: &Value) -> Value {
    let mut r = r.clone();
    if let Some(o) = r.as_object_mut() {
        for k in ["started_at", "duration_ms", "queued_ms"] {
            o.remove(k);
        }
    }
    r
}

/// `n` lines of ten bytes, `000000000\n` … : the byte at offset `10·k`
/// starts line `k`.
fn numbered_lines(n: usize) -> String {
    format!("i=0; while [ $i -lt {n} ]; do printf '%09d\\n' $i; i=$((i+1)); done")
}

fn lines(range: std::ops::Range<usize>) -> String {
    range.map(|k| format!("{k:09}\n")).collect()
}

/// Polls `status` until the job is terminal (without delivering it).
fn finish(s: &mut Server, id: &str) {
    let mut last = Value::Null;
    let done = wait_for(TIMEOUT, || {
        last = s.call("status", json!({"job_id": id}));
        last["state"] != json!("running") && last["state"] != json!("queued")
    });
    assert!(done, "{id} still not terminal: {last}");
}

/// `wait` for one job (up to 15 s); returns its entry.
fn wait_one(s: &mut Server, id: &str) -> Value {
    let r = s.call("wait", json!({"job_ids": [id], "timeout": 15}));
    assert_eq!(r.as_array().map(Vec::len), Some(1), "{r}");
    r[0].clone()
}

/// Starts a job that runs until [`release`]: the one that takes the only
/// running slot in the queue tests. It is returned once it waits for its
/// input, so that `status` and `list_jobs` show it as `awaiting_input`
/// whatever the timing.
fn blocker(s: &mut Server) -> String {
    let r = s.call("execute", json!({"command": "read x", "nowait": true}));
    let id = r["job_id"].as_str().expect("job_id").to_owned();
    assert_eq!(r, json!({"job_id": id, "state": "running"}));
    awaits_input(s, &id);
    id
}

/// Waits until the running job `id` is blocked reading its stdin.
fn awaits_input(s: &mut Server, id: &str) {
    let r = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 15, "until": {"input": true}}),
    );
    assert_eq!(r[0]["awaiting_input"], json!(true), "{id} never read: {r}");
}

/// Lets a [`blocker`] end.
fn release(s: &mut Server, id: &str) {
    s.call("input", json!({"job_id": id, "data": "go\n"}));
}

/// Starts `command` with `nowait` and requires it to be queued.
fn queued(s: &mut Server, command: &str) -> String {
    let r = s.call("execute", json!({"command": command, "nowait": true}));
    let id = r["job_id"].as_str().expect("job_id").to_owned();
    assert_eq!(
        r,
        json!({"job_id": id, "state": "queued", "queued_for": "capacity"}),
        "{command}"
    );
    id
}

/// Whether `s` has the form `2026-11-30T14:41:12.123Z`.
fn is_rfc3339_utc_millis(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
}

/// Requires `started_at` and `duration_ms` in their forms; returns the
/// duration.
fn assert_timing(r: &Value) -> u64 {
    let at = r["started_at"]
        .as_str()
        .unwrap_or_else(|| panic!("no started_at string: {r}"));
    assert!(is_rfc3339_utc_millis(at), "started_at {at:?}: {r}");
    r["duration_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("duration_ms is not an integer ≥ 0: {r}"))
}

/// The fields a Part I (2024-11-05) job result or status may carry.
const PART_I_FIELDS: [&str; 8] = [
    "job_id",
    "state",
    "exit_code",
    "signal",
    "signal_number",
    "start_error",
    "stdout",
    "stderr",
];

fn assert_part_i_only(v: &Value) {
    for k in keys(v) {
        assert!(PART_I_FIELDS.contains(&k), "Part II field {k:?} in {v}");
    }
}

// ---------------------------------------------------------------------------
// argv
// ---------------------------------------------------------------------------

fn argv_runs_a_program_without_a_shell_found_by_path_lookup(t: Target) {
    let mut s = started(t, &[]);
    let r = s.call("execute", json!({"argv": ["echo", "$HOME", "a;b", "*"]}));
    assert_eq!(
        stable(&r),
        json!({"job_id": "job-1", "state": "success", "exit_code": 0,
               "stdout": {"data": "$HOME a;b *\n", "offset": 0, "bytes": 12, "total_bytes": 12}})
    );
}

fn argv_and_command_together_or_neither_are_refused_with_the_exact_texts(t: Target) {
    let mut s = started(t, &[]);
    for nowait in [false, true] {
        assert_eq!(
            s.call_err(
                "execute",
                json!({"command": "echo hi", "argv": ["echo", "hi"], "nowait": nowait})
            ),
            r#"give either "command" or "argv", not both"#
        );
        assert_eq!(
            s.call_err("execute", json!({"nowait": nowait})),
            r#""command" or "argv" is required"#
        );
        assert_eq!(
            s.call_err("execute", json!({"cwd": "/", "nowait": nowait})),
            r#""command" or "argv" is required"#
        );
    }
    assert_eq!(s.call("list_jobs", json!({})), json!({"jobs": []}));
}

fn an_empty_argv_or_one_with_a_non_string_element_is_invalid_arguments(t: Target) {
    let mut s = started(t, &[]);
    for argv in [
        json!([]),
        json!(["echo", 1]),
        json!(["echo", null]),
        json!([["echo"]]),
        json!("echo hi"),
    ] {
        assert_eq!(
            s.call_err("execute", json!({"argv": argv})),
            r#"invalid arguments: "argv" must be a non-empty array of strings"#,
            "argv {argv}"
        );
    }
}

fn argv_naming_a_missing_program_is_a_terminal_start_error_with_or_without_nowait(t: Target) {
    let mut s = started(t, &[]);
    for nowait in [false, true] {
        let r = s.call(
            "execute",
            json!({"argv": ["/nonexistent/mcp-exec-no-such-program", "x"], "nowait": nowait}),
        );
        assert_eq!(r["state"], json!("error"), "{r}");
        assert_eq!(r["exit_code"], json!(-1), "{r}");
        let e = r["start_error"]
            .as_str()
            .unwrap_or_else(|| panic!("no start_error: {r}"));
        assert!(
            e.starts_with("fork/exec ") && e.contains("no such file or directory"),
            "start_error {e:?}"
        );
        let id = r["job_id"].as_str().expect("job_id");
        assert_eq!(
            s.call_err("status", json!({"job_id": id})),
            format!("unknown job_id \"{id}\""),
            "a start failure is delivered at once and removed"
        );
    }
}

fn argv_in_a_2024_11_05_session_is_ignored_like_any_unknown_field(t: Target) {
    let mut s = Server::started(t);
    assert_eq!(
        s.call_err("execute", json!({"argv": ["echo", "hi"]})),
        r#""command" is required"#
    );
    let r = s.call(
        "execute",
        json!({"command": "echo hi", "argv": ["echo", "bye"]}),
    );
    assert_eq!(r["stdout"]["data"], json!("hi\n"), "{r}");
}

/// Scratch only: the image whose only programs are busybox and its applets.
fn argv_runs_busybox_and_its_applets_on_the_scratch_image(t: Target) {
    let mut s = started(t, &[]);
    for argv in [json!(["/bin/busybox", "echo", "hi"]), json!(["echo", "hi"])] {
        let r = s.call("execute", json!({"argv": argv}));
        assert_eq!(r["state"], json!("success"), "{argv}: {r}");
        assert_eq!(
            r["stdout"],
            json!({"data": "hi\n", "offset": 0, "bytes": 3, "total_bytes": 3}),
            "{argv}"
        );
    }
}

#[test]
fn scratch_argv_runs_busybox_and_its_applets() {
    if Target::Scratch.available() {
        argv_runs_busybox_and_its_applets_on_the_scratch_image(Target::Scratch);
    }
}

// ---------------------------------------------------------------------------
// Deadlines
// ---------------------------------------------------------------------------

fn a_job_past_its_timeout_is_terminated_and_reports_timed_out(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "1")]);
    let r = s.call("execute", json!({"command": OVERRUN, "timeout": 1}));
    assert_eq!(
        stable(&r),
        json!({"job_id": "job-1", "state": "error", "exit_code": -1,
               "signal": "terminated", "signal_number": 15,
               "timed_out": true, "cause": "timeout",
               "stderr": {"data": "", "offset": 0, "bytes": 0, "total_bytes": 0}})
    );
}

fn a_timed_out_shell_that_traps_term_and_exits_0_is_still_an_error(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "1")]);
    let r = s.call(
        "execute",
        json!({"command": format!("trap 'exit 0' TERM; {OVERRUN} & wait"), "timeout": 1}),
    );
    assert_eq!(
        stable(&r),
        json!({"job_id": "job-1", "state": "error", "exit_code": 0,
               "timed_out": true, "cause": "timeout",
               "stderr": {"data": "", "offset": 0, "bytes": 0, "total_bytes": 0}})
    );
}

fn a_timed_out_job_that_ignores_term_is_killed_after_the_shutdown_grace(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "1")]);
    let r = s.call(
        "execute",
        json!({"command": format!("trap '' TERM; {OVERRUN}"), "timeout": 1}),
    );
    assert_eq!(
        stable(&r),
        json!({"job_id": "job-1", "state": "error", "exit_code": -1,
               "signal": "killed", "signal_number": 9,
               "timed_out": true, "cause": "timeout",
               "stderr": {"data": "", "offset": 0, "bytes": 0, "total_bytes": 0}})
    );
}

fn a_timeout_of_0_or_less_is_invalid_arguments(t: Target) {
    let mut s = started(t, &[]);
    for timeout in [json!(0), json!(0.0), json!(-1), json!(-0.5)] {
        for nowait in [false, true] {
            assert_eq!(
                s.call_err(
                    "execute",
                    json!({"command": "true", "timeout": timeout, "nowait": nowait})
                ),
                r#"invalid arguments: "timeout" must be > 0"#,
                "timeout {timeout}"
            );
        }
    }
    assert_eq!(s.call("list_jobs", json!({})), json!({"jobs": []}));
}

fn mcp_exec_job_timeout_is_the_default_deadline_and_a_longer_timeout_overrides_it(t: Target) {
    let mut s = started(
        t,
        &[
            ("MCP_EXEC_JOB_TIMEOUT", "1"),
            ("MCP_EXEC_SHUTDOWN_GRACE", "1"),
        ],
    );
    let r = s.exec(OVERRUN);
    assert_eq!(r["timed_out"], json!(true), "{r}");
    assert_eq!(r["cause"], json!("timeout"), "{r}");
    assert_eq!(r["signal"], json!("terminated"), "{r}");

    let r = s.call(
        "execute",
        json!({"command": "sleep 2; echo done", "timeout": 30}),
    );
    assert_eq!(
        stable(&r),
        json!({"job_id": "job-2", "state": "success", "exit_code": 0,
               "stdout": {"data": "done\n", "offset": 0, "bytes": 5, "total_bytes": 5}}),
        "no timed_out or cause where they do not apply"
    );
}

fn a_queued_jobs_deadline_starts_when_it_starts_running(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_MAX_RUNNING", "1")]);
    let a = blocker(&mut s);
    let r = s.call(
        "execute",
        json!({"command": "sleep 1; echo ran", "timeout": 3, "nowait": true}),
    );
    let b = r["job_id"].as_str().expect("job_id").to_owned();
    assert_eq!(r["state"], json!("queued"), "{r}");
    // Longer in the queue than its whole deadline: it must still be there.
    let w = s.call("wait", json!({"job_ids": [b], "timeout": 4}));
    assert_eq!(w[0]["state"], json!("queued"), "{w}");
    release(&mut s, &a);
    let r = wait_one(&mut s, &b);
    assert_eq!(r["state"], json!("success"), "{r}");
    assert_eq!(r["stdout"]["data"], json!("ran\n"), "{r}");
    assert!(r.get("timed_out").is_none(), "{r}");
    let queued_ms = r["queued_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("no integer queued_ms: {r}"));
    assert!(
        queued_ms >= 3000,
        "it waited out a 4 s wait in the queue: {r}"
    );
}

// ---------------------------------------------------------------------------
// Yielding
// ---------------------------------------------------------------------------

fn a_blocking_execute_yields_after_mcp_exec_yield_after_and_wait_collects_the_job_once(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_YIELD_AFTER", "1")]);
    let r = s.exec("sleep 3; echo done");
    let id = r["job_id"].as_str().expect("job_id").to_owned();
    assert_eq!(
        r,
        json!({"job_id": id, "state": "running", "yielded": true})
    );
    assert_eq!(
        s.call("status", json!({"job_id": id})),
        json!({"job_id": id, "state": "running"}),
        "the job runs on"
    );
    let r = wait_one(&mut s, &id);
    assert_eq!(
        stable(&r),
        json!({"job_id": id, "state": "success", "exit_code": 0,
               "stdout": {"data": "done\n", "offset": 0, "bytes": 5, "total_bytes": 5}})
    );
    assert_eq!(
        s.call_err("wait", json!({"job_ids": [id]})),
        format!("unknown job_id \"{id}\"")
    );
}

fn yield_after_on_the_call_overrides_the_default_and_0_never_yields(t: Target) {
    let mut s = started(t, &[]);
    let r = s.call("execute", json!({"command": OVERRUN, "yield_after": 1}));
    let id = r["job_id"].as_str().expect("job_id").to_owned();
    assert_eq!(
        r,
        json!({"job_id": id, "state": "running", "yielded": true})
    );
    s.call("kill", json!({"job_id": id, "signal": "KILL"}));

    let mut s = started(t, &[("MCP_EXEC_YIELD_AFTER", "1")]);
    let r = s.call(
        "execute",
        json!({"command": "sleep 2.5; echo done", "yield_after": 0}),
    );
    assert_eq!(r["state"], json!("success"), "{r}");
    assert_eq!(r["stdout"]["data"], json!("done\n"), "{r}");
    assert!(r.get("yielded").is_none(), "{r}");
}

fn a_yielded_job_keeps_its_deadline(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "1")]);
    let r = s.call(
        "execute",
        json!({"command": OVERRUN, "yield_after": 1, "timeout": 3}),
    );
    let id = r["job_id"].as_str().expect("job_id").to_owned();
    assert_eq!(r["yielded"], json!(true), "{r}");
    let r = wait_one(&mut s, &id);
    assert_eq!(r["state"], json!("error"), "{r}");
    assert_eq!(r["timed_out"], json!(true), "{r}");
    assert_eq!(r["cause"], json!("timeout"), "{r}");
    assert_eq!(r["signal"], json!("terminated"), "{r}");
}

// ---------------------------------------------------------------------------
// Concurrency limit and admission queue
// ---------------------------------------------------------------------------

fn a_job_over_max_running_is_queued_for_capacity_in_nowait_status_and_list_jobs(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_MAX_RUNNING", "1")]);
    let a = blocker(&mut s);
    let b = queued(&mut s, "echo b");
    assert_eq!(
        s.call("status", json!({"job_id": b})),
        json!({"job_id": b, "state": "queued", "queued_for": "capacity"})
    );
    assert_eq!(
        s.call("list_jobs", json!({})),
        json!({"jobs": [
            {"job_id": a, "state": "running", "awaiting_input": true},
            {"job_id": b, "state": "queued", "queued_for": "capacity"},
        ]})
    );
    release(&mut s, &a);
    let r = wait_one(&mut s, &b);
    assert_eq!(
        stable(&r),
        json!({"job_id": b, "state": "success", "exit_code": 0,
               "stdout": {"data": "b\n", "offset": 0, "bytes": 2, "total_bytes": 2}})
    );
    assert!(r["queued_ms"].is_u64(), "queued_ms: {r}");
}

fn a_2024_11_05_session_sees_a_queued_job_as_running(t: Target) {
    let mut s = Server::started_with_env(t, &[("MCP_EXEC_MAX_RUNNING", "1")]);
    // Not `blocker`: a 2024-11-05 `wait` has no `until`.
    let a = s.spawn_job("read x");
    let r = s.call("execute", json!({"command": "echo b", "nowait": true}));
    let b = r["job_id"].as_str().expect("job_id").to_owned();
    assert_eq!(r, json!({"job_id": b, "state": "running"}));
    // b cannot start while a holds the only slot.
    assert_eq!(
        s.call("wait", json!({"job_ids": [b], "timeout": 1})),
        json!([{"job_id": b, "state": "running"}]),
        "the queued job shows as running and does not run"
    );
    assert_eq!(
        s.call("status", json!({"job_id": b})),
        json!({"job_id": b, "state": "running"})
    );
    assert_eq!(
        s.call("list_jobs", json!({})),
        json!({"jobs": [{"job_id": a, "state": "running"}, {"job_id": b, "state": "running"}]})
    );
    release(&mut s, &a);
    let r = wait_one(&mut s, &b);
    assert_eq!(
        r,
        json!({"job_id": b, "state": "success", "exit_code": 0,
               "stdout": {"data": "b\n", "offset": 0, "bytes": 2, "total_bytes": 2}}),
        "no queued_ms, started_at or duration_ms"
    );
}

fn queued_jobs_start_in_fifo_order_as_capacity_frees(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_MAX_RUNNING", "1")]);
    let dir = HostPath::new("fifo");
    s.exec(&format!("mkdir {}", dir.0));
    let a = blocker(&mut s);
    // One runs at a time, so the order of the appends is the start order.
    let ids: Vec<String> = (1..=5)
        .map(|n| queued(&mut s, &format!("echo {n} >> {}/order", dir.0)))
        .collect();
    release(&mut s, &a);
    for id in &ids {
        let r = wait_one(&mut s, id);
        assert_eq!(r["state"], json!("success"), "{r}");
    }
    let r = s.exec(&format!("cat {}/order", dir.0));
    assert_eq!(r["stdout"]["data"], json!("1\n2\n3\n4\n5\n"), "{r}");
}

fn a_full_queue_refuses_new_jobs_with_the_counts_and_control_tools_still_answer(t: Target) {
    let mut s = started(
        t,
        &[("MCP_EXEC_MAX_RUNNING", "1"), ("MCP_EXEC_MAX_QUEUED", "2")],
    );
    let a = blocker(&mut s);
    let b = queued(&mut s, "echo b");
    let c = queued(&mut s, "echo c");
    let full = "job queue is full (1 running, 2 queued)";
    assert_eq!(
        s.call_err("execute", json!({"command": "echo d", "nowait": true})),
        full
    );
    assert_eq!(s.call_err("execute", json!({"command": "echo d"})), full);
    assert_eq!(
        s.call_err("execute", json!({"argv": ["echo", "d"], "nowait": true})),
        full
    );

    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
    assert_eq!(
        s.call("status", json!({"job_id": b})),
        json!({"job_id": b, "state": "queued", "queued_for": "capacity"})
    );
    let list = s.call("list_jobs", json!({}));
    assert_eq!(list["jobs"].as_array().map(Vec::len), Some(3), "{list}");
    let out = s.call("output", json!({"job_id": a, "stdout": "all"}));
    assert_eq!(out["state"], json!("running"), "{out}");
    let w = s.call("wait", json!({"job_ids": [b], "timeout": 0}));
    assert_eq!(w[0]["state"], json!("queued"), "{w}");
    let k = s.call("kill", json!({"job_id": c}));
    assert_eq!(k["cancelled_before_start"], json!(true), "{k}");

    let e = queued(&mut s, "echo e");
    release(&mut s, &a);
    for (id, data) in [(&b, "b\n"), (&e, "e\n")] {
        let r = wait_one(&mut s, id);
        assert_eq!(r["stdout"]["data"], json!(data), "{r}");
    }
}

fn input_to_a_queued_job_is_refused_as_not_started(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_MAX_RUNNING", "1")]);
    let a = blocker(&mut s);
    let b = queued(&mut s, "cat");
    for args in [
        json!({"job_id": b, "data": "x\n"}),
        json!({"job_id": b, "data": "", "close": true}),
    ] {
        assert_eq!(
            s.call_err("input", args.clone()),
            format!("job \"{b}\" has not started"),
            "input {args}"
        );
    }
    assert_eq!(
        s.call("status", json!({"job_id": b}))["state"],
        json!("queued")
    );
    s.call("kill", json!({"job_id": b}));
    release(&mut s, &a);
}

fn output_and_status_answer_on_a_queued_job_with_empty_streams(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_MAX_RUNNING", "1")]);
    let a = blocker(&mut s);
    let b = queued(&mut s, "echo b");
    let empty = json!({"data": "", "offset": 0, "bytes": 0, "total_bytes": 0});
    for spec in [json!("all"), json!({"tail": 3}), json!({"from": 0})] {
        assert_eq!(
            s.call(
                "output",
                json!({"job_id": b, "stdout": spec, "stderr": spec})
            ),
            json!({"job_id": b, "state": "queued", "queued_for": "capacity",
                   "stdout": empty, "stderr": empty}),
            "spec {spec}"
        );
    }
    assert_eq!(
        s.call("output", json!({"job_id": b})),
        json!({"job_id": b, "state": "queued", "queued_for": "capacity"})
    );
    release(&mut s, &a);
    assert_eq!(wait_one(&mut s, &b)["state"], json!("success"));
}

fn killing_a_queued_job_cancels_it_before_start_and_it_never_runs(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_MAX_RUNNING", "1")]);
    let dir = HostPath::new("cancel");
    s.exec(&format!("mkdir {}", dir.0));
    let a = blocker(&mut s);
    let b = queued(&mut s, &format!("touch {}/b-ran", dir.0));
    let c = queued(&mut s, &format!("touch {}/c-ran", dir.0));
    let k = s.call("kill", json!({"job_id": b}));
    assert_eq!(
        keys(&k),
        ["cancelled_before_start", "job_id", "result", "terminated"],
        "{k}"
    );
    assert_eq!(
        (&k["job_id"], &k["terminated"], &k["cancelled_before_start"]),
        (&json!(b), &json!(true), &json!(true)),
        "{k}"
    );
    let result = &k["result"];
    assert_eq!(result["job_id"], json!(b), "{k}");
    assert_eq!(result["state"], json!("error"), "{k}");
    assert_eq!(result["exit_code"], json!(-1), "{k}");
    assert_eq!(
        result["start_error"],
        json!("cancelled before start"),
        "{k}"
    );
    assert!(result.get("signal").is_none(), "{k}");
    assert_eq!(
        s.call_err("status", json!({"job_id": b})),
        format!("unknown job_id \"{b}\""),
        "the cancelled job is removed"
    );
    release(&mut s, &a);
    // c was behind b in the queue: once c has run, b would have too.
    assert_eq!(wait_one(&mut s, &c)["state"], json!("success"));
    let r = s.exec(&format!("ls {}", dir.0));
    assert_eq!(r["stdout"]["data"], json!("c-ran\n"), "{r}");
}

fn a_blocking_execute_of_a_queued_job_waits_through_the_queue(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_MAX_RUNNING", "1")]);
    let a = blocker(&mut s);
    let call = s.send_call("execute", json!({"command": "echo hi"}));
    let mut list = Value::Null;
    let seen = wait_for(TIMEOUT, || {
        list = s.call("list_jobs", json!({}));
        list["jobs"][1]["state"] == json!("queued")
    });
    assert!(seen, "the blocking execute's job is not queued: {list}");
    release(&mut s, &a);
    let r = crate::support::tool_json(&s.response(&call, TIMEOUT)["result"]);
    assert_eq!(
        stable(&r),
        json!({"job_id": list["jobs"][1]["job_id"], "state": "success", "exit_code": 0,
               "stdout": {"data": "hi\n", "offset": 0, "bytes": 3, "total_bytes": 3}})
    );
    assert!(r["queued_ms"].is_u64(), "queued_ms: {r}");
}

fn wait_waits_through_the_queue(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_MAX_RUNNING", "1")]);
    let a = blocker(&mut s);
    let b = queued(&mut s, "echo b");
    let call = s.send_call("wait", json!({"job_ids": [b], "timeout": 15}));
    release(&mut s, &a);
    let r = crate::support::tool_json(&s.response(&call, TIMEOUT)["result"]);
    assert_eq!(r[0]["state"], json!("success"), "{r}");
    assert_eq!(r[0]["stdout"]["data"], json!("b\n"), "{r}");
}

// ---------------------------------------------------------------------------
// Labels and timing
// ---------------------------------------------------------------------------

fn a_label_is_echoed_in_nowait_status_list_jobs_and_the_result(t: Target) {
    let mut s = started(t, &[]);
    let label = "nightly build: step 1/3 ✓";
    let r = s.call(
        "execute",
        json!({"command": "read x; echo built", "nowait": true, "label": label}),
    );
    let id = r["job_id"].as_str().expect("job_id").to_owned();
    assert_eq!(r, json!({"job_id": id, "state": "running", "label": label}));
    // Both wait for their input: `status` and `list_jobs` say so.
    awaits_input(&mut s, &id);
    assert_eq!(
        s.call("status", json!({"job_id": id})),
        json!({"job_id": id, "state": "running", "label": label, "awaiting_input": true})
    );
    let plain = s.spawn_job("read x");
    awaits_input(&mut s, &plain);
    assert_eq!(
        s.call("list_jobs", json!({})),
        json!({"jobs": [
            {"job_id": id, "state": "running", "label": label, "awaiting_input": true},
            {"job_id": plain, "state": "running", "awaiting_input": true},
        ]}),
        "no label where none was set"
    );
    release(&mut s, &id);
    let r = wait_one(&mut s, &id);
    assert_eq!(
        stable(&r),
        json!({"job_id": id, "state": "success", "exit_code": 0, "label": label,
               "stdout": {"data": "built\n", "offset": 0, "bytes": 6, "total_bytes": 6}})
    );
    release(&mut s, &plain);
    let r = wait_one(&mut s, &plain);
    assert!(r.get("label").is_none(), "{r}");
}

fn a_label_over_200_characters_or_with_control_characters_is_refused(t: Target) {
    let mut s = started(t, &[]);
    let text =
        r#"invalid arguments: "label" must be at most 200 characters without control characters"#;
    for label in [
        "x".repeat(201),
        "a\nb".into(),
        "tab\there".into(),
        "\u{1b}[31mred".into(),
        "del\u{7f}".into(),
    ] {
        assert_eq!(
            s.call_err(
                "execute",
                json!({"command": "true", "nowait": true, "label": label})
            ),
            text,
            "label {label:?}"
        );
    }
    let r = s.call(
        "execute",
        json!({"command": "true", "label": "x".repeat(200)}),
    );
    assert_eq!(r["label"], json!("x".repeat(200)), "{r}");
}

fn terminal_results_carry_started_at_and_duration_ms_from_2025_03_26_on(t: Target) {
    for revision in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut s = Server::started_in(t, &[], revision);
        // Delivered by execute.
        let r = s.exec("sleep 1");
        let ms = assert_timing(&r);
        assert!(ms >= 900, "{revision}: a 1 s sleep lasted {ms} ms: {r}");
        // By wait.
        let id = s.spawn_job("echo hi");
        let r = wait_one(&mut s, &id);
        assert_timing(&r);
        // By kill.
        let id = s.spawn_job(&format!("sleep {}", marker()));
        let k = s.call("kill", json!({"job_id": id, "signal": "KILL"}));
        assert_timing(&k["result"]);
    }
}

fn a_2024_11_05_session_ignores_part_ii_inputs_and_sees_no_part_ii_fields(t: Target) {
    let mut s = Server::started(t);
    let part_ii = json!({
        "timeout": 0.5, "idle_timeout": 0.5, "yield_after": 0.5, "label": "x",
        "max_output_bytes": 1, "argv": ["echo", "no"],
    });
    let with = |command: &str, extra: Value| {
        let mut args = part_ii.clone();
        let o = args.as_object_mut().expect("object");
        o.insert("command".into(), json!(command));
        for (k, v) in extra.as_object().expect("object") {
            o.insert(k.clone(), v.clone());
        }
        args
    };
    let r = s.call("execute", with("sleep 1.5; echo done", json!({})));
    assert_eq!(
        r,
        json!({"job_id": "job-1", "state": "success", "exit_code": 0,
               "stdout": {"data": "done\n", "offset": 0, "bytes": 5, "total_bytes": 5}})
    );
    // Values Part II would refuse are ignored as well.
    let r = s.call(
        "execute",
        with(
            "echo ok",
            json!({"timeout": -1, "label": "y\n".repeat(300), "max_output_bytes": 0}),
        ),
    );
    assert_eq!(r["stdout"]["data"], json!("ok\n"), "{r}");
    assert_part_i_only(&r);

    let r = s.call("execute", with("read x", json!({"nowait": true})));
    let id = r["job_id"].as_str().expect("job_id").to_owned();
    assert_eq!(r, json!({"job_id": id, "state": "running"}));
    assert_eq!(
        s.call("status", json!({"job_id": id})),
        json!({"job_id": id, "state": "running"})
    );
    assert_eq!(
        s.call("list_jobs", json!({})),
        json!({"jobs": [{"job_id": id, "state": "running"}]})
    );
    let k = s.call("kill", json!({"job_id": id, "signal": "KILL"}));
    assert_part_i_only(&k["result"]);
    let id = s.spawn_job("exit 3");
    let r = wait_one(&mut s, &id);
    assert_part_i_only(&r);
}

// ---------------------------------------------------------------------------
// max_output_bytes
// ---------------------------------------------------------------------------

fn max_output_bytes_keeps_only_that_many_bytes_of_each_stream(t: Target) {
    let mut s = started(t, &[]);
    let print = numbered_lines(100);
    let r = s.call(
        "execute",
        json!({"command": format!("{print}; {{ {print}; }} >&2"), "max_output_bytes": 100,
               "capture": {"on_success": "all"}}),
    );
    let window = json!({"data": lines(90..100), "offset": 900, "bytes": 100,
                        "total_bytes": 1000, "truncated": true, "dropped_bytes": 900});
    assert_eq!(r["stdout"], window, "{r}");
    assert_eq!(r["stderr"], window, "{r}");
}

fn max_output_bytes_may_exceed_the_servers_default_window(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_MAX_OUTPUT_BYTES", "100")]);
    let r = s.call(
        "execute",
        json!({"command": numbered_lines(100), "max_output_bytes": 1000}),
    );
    assert_eq!(
        r["stdout"],
        json!({"data": lines(0..100), "offset": 0, "bytes": 1000, "total_bytes": 1000}),
        "{r}"
    );
}

fn max_output_bytes_outside_1_to_the_limit_is_refused_with_the_limit_in_the_text(t: Target) {
    let mut s = started(t, &[]);
    for bad in [json!(0), json!(-5), json!(67_108_865)] {
        assert_eq!(
            s.call_err(
                "execute",
                json!({"command": "true", "max_output_bytes": bad})
            ),
            r#"invalid arguments: "max_output_bytes" must be between 1 and 67108864"#,
            "max_output_bytes {bad}"
        );
    }
    for good in [1, 67_108_864] {
        let r = s.call(
            "execute",
            json!({"command": "echo hi", "max_output_bytes": good}),
        );
        assert_eq!(r["state"], json!("success"), "{good}: {r}");
    }

    let mut s = started(t, &[("MCP_EXEC_MAX_OUTPUT_BYTES_LIMIT", "1000")]);
    assert_eq!(
        s.call_err(
            "execute",
            json!({"command": "true", "max_output_bytes": 1001})
        ),
        r#"invalid arguments: "max_output_bytes" must be between 1 and 1000"#
    );
    let r = s.call(
        "execute",
        json!({"command": "true", "max_output_bytes": 1000}),
    );
    assert_eq!(r["state"], json!("success"), "{r}");
}

// ---------------------------------------------------------------------------
// Circuit breaker
// ---------------------------------------------------------------------------

fn consecutive_spawn_failures_for_lack_of_descriptors_trip_the_breaker_until_the_cooldown(
    t: Target,
) {
    // A limit of 24 descriptors leaves room for a few jobs only (four with
    // the server of Part I; none at all would do as well). Without
    // MCP_EXEC_MAX_RUNNING the default derived from that limit would queue
    // the next job instead of failing to spawn it.
    let env = [
        ("MCP_EXEC_MAX_RUNNING", "1000"),
        ("MCP_EXEC_BREAKER_FAILURES", "3"),
        ("MCP_EXEC_BREAKER_COOLDOWN", "2"),
        ("MCP_EXEC_SHUTDOWN_GRACE", "1"),
    ];
    let mut s = Server::start_with_nofile(t, &env, 24);
    s.initialize(LATEST);
    let start = |s: &mut Server| {
        s.call(
            "execute",
            json!({"command": format!("sleep {}", marker()), "nowait": true}),
        )
    };
    let mut sleeps = Vec::new();
    let first = loop {
        let r = start(&mut s);
        if r["state"] != json!("running") {
            break r;
        }
        sleeps.push(r["job_id"].as_str().expect("job_id").to_owned());
        assert!(
            sleeps.len() < 24,
            "24 descriptors held {} jobs",
            sleeps.len()
        );
    };
    let mut failures = vec![first];
    failures.push(start(&mut s));
    failures.push(start(&mut s));
    for f in &failures {
        assert_eq!(f["state"], json!("error"), "{f}");
        let e = f["start_error"].as_str().unwrap_or_default();
        assert!(
            e.to_lowercase().contains("too many open files") && !e.contains("refusing"),
            "a spawn failure for lack of descriptors: {f}"
        );
    }
    let refused = start(&mut s);
    assert_eq!(refused["state"], json!("error"), "{refused}");
    assert_eq!(refused["exit_code"], json!(-1), "{refused}");
    let e = refused["start_error"].as_str().unwrap_or_default();
    assert!(
        e.contains("refusing new jobs") && e.contains("consecutive spawn failures"),
        "the fourth start after three failures: {refused}"
    );

    assert_eq!(s.request("ping", json!({}))["result"], json!({}));
    let list = s.call("list_jobs", json!({}));
    let listed: Vec<&str> = list["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["job_id"].as_str().expect("job_id"))
        .collect();
    assert_eq!(listed, sleeps, "{list}");
    for id in &sleeps {
        let k = s.call("kill", json!({"job_id": id, "signal": "KILL"}));
        assert_eq!(k["terminated"], json!(true), "{k}");
    }
    std::thread::sleep(Duration::from_secs(3));
    let r = s.exec("echo ok");
    assert_eq!(
        r["stdout"]["data"],
        json!("ok\n"),
        "after the cooldown: {r}"
    );
}

// ---------------------------------------------------------------------------
// wait until
// ---------------------------------------------------------------------------

/// Polls `output` until the job has written `bytes` bytes to `stream`.
fn wait_written(s: &mut Server, id: &str, stream: &str, bytes: u64) {
    let mut last = Value::Null;
    let done = wait_for(TIMEOUT, || {
        last = s.call("output", json!({"job_id": id, stream: {"tail": 0}}));
        last[stream]["total_bytes"].as_u64() >= Some(bytes)
    });
    assert!(done, "{id} did not write {bytes} bytes to {stream}: {last}");
}

fn wait_until_a_pattern_returns_when_a_running_job_prints_it_with_its_offset(t: Target) {
    let mut s = started(t, &[]);
    let id = s.spawn_job(&format!(
        "echo booting; sleep 1; echo listening on 8080; sleep {}",
        marker()
    ));
    let r = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 15,
               "until": {"pattern": "listening on", "stream": "stdout"}}),
    );
    assert_eq!(
        r,
        json!([{"job_id": id, "state": "running",
                "matched": {"stream": "stdout", "offset": 8, "bytes": 12}}])
    );
    assert_eq!(
        s.call("status", json!({"job_id": id}))["state"],
        json!("running")
    );
}

fn wait_until_matches_a_line_printed_before_the_call(t: Target) {
    let mut s = started(t, &[]);
    let id = s.spawn_job(&format!("echo listening on 8080; sleep {}", marker()));
    wait_written(&mut s, &id, "stdout", 18);
    let r = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 15,
               "until": {"pattern": "listening on [0-9]+", "stream": "stdout"}}),
    );
    assert_eq!(
        r,
        json!([{"job_id": id, "state": "running",
                "matched": {"stream": "stdout", "offset": 0, "bytes": 17}}])
    );
}

fn wait_until_from_past_the_line_does_not_match_and_returns_at_the_timeout(t: Target) {
    let mut s = started(t, &[]);
    let id = s.spawn_job(&format!("echo listening on 8080; sleep {}", marker()));
    wait_written(&mut s, &id, "stdout", 18);
    let until = |from: u64| json!({"pattern": "listening on", "stream": "stdout", "from": from});
    let r = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 1, "until": until(18)}),
    );
    assert_eq!(r, json!([{"job_id": id, "state": "running"}]));
    // The same wait from where the line starts does match.
    let r = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 15, "until": until(0)}),
    );
    assert_eq!(
        r,
        json!([{"job_id": id, "state": "running",
                "matched": {"stream": "stdout", "offset": 0, "bytes": 12}}])
    );
}

fn wait_until_on_any_stream_matches_stderr(t: Target) {
    let mut s = started(t, &[]);
    let id = s.spawn_job(&format!("echo ready >&2; sleep {}", marker()));
    wait_written(&mut s, &id, "stderr", 6);
    let r = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 1, "until": {"pattern": "ready", "stream": "stdout"}}),
    );
    assert_eq!(
        r,
        json!([{"job_id": id, "state": "running"}]),
        "stdout only"
    );
    for stream in ["any", "stderr"] {
        let r = s.call(
            "wait",
            json!({"job_ids": [id], "timeout": 15, "until": {"pattern": "ready", "stream": stream}}),
        );
        assert_eq!(
            r,
            json!([{"job_id": id, "state": "running",
                    "matched": {"stream": "stderr", "offset": 0, "bytes": 5}}]),
            "stream {stream}"
        );
    }
}

fn wait_until_quiet_returns_when_a_job_has_written_nothing_for_that_long(t: Target) {
    let mut s = started(t, &[]);
    let id = s.spawn_job(&format!("echo once; sleep {}", marker()));
    let r = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 15, "until": {"quiet": 1}}),
    );
    assert_eq!(r.as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(keys(&r[0]), ["job_id", "state", "went_quiet"], "{r}");
    assert_eq!(r[0]["state"], json!("running"), "{r}");
    let quiet = r[0]["went_quiet"]
        .as_f64()
        .unwrap_or_else(|| panic!("went_quiet is not a number: {r}"));
    assert!(quiet >= 0.99, "silent for at least the 1 s asked: {r}");
}

fn wait_until_delivers_nothing_early_and_a_later_wait_collects_the_result_once(t: Target) {
    let mut s = started(t, &[]);
    let id = s.spawn_job("echo listening on 8080; sleep 2; echo bye");
    let r = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 15, "until": {"pattern": "listening"}}),
    );
    assert_eq!(r[0]["state"], json!("running"), "{r}");
    assert!(r[0].get("matched").is_some(), "{r}");
    assert_eq!(
        s.call("list_jobs", json!({})),
        json!({"jobs": [{"job_id": id, "state": "running"}]})
    );
    let r = wait_one(&mut s, &id);
    assert_eq!(
        stable(&r),
        json!({"job_id": id, "state": "success", "exit_code": 0,
               "stdout": {"data": "listening on 8080\nbye\n", "offset": 0, "bytes": 22,
                          "total_bytes": 22}})
    );
    assert_eq!(
        s.call_err("wait", json!({"job_ids": [id]})),
        format!("unknown job_id \"{id}\"")
    );

    // A job already terminal is delivered as by any wait.
    let id = s.spawn_job("echo done");
    finish(&mut s, &id);
    let r = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 15, "until": {"pattern": "never printed"}}),
    );
    assert_eq!(
        stable(&r[0]),
        json!({"job_id": id, "state": "success", "exit_code": 0,
               "stdout": {"data": "done\n", "offset": 0, "bytes": 5, "total_bytes": 5}})
    );
}

fn wait_until_with_an_invalid_regex_is_invalid_arguments_naming_pattern(t: Target) {
    let mut s = started(t, &[]);
    let id = s.spawn_job("read x");
    for job in [id.as_str(), "job-424242"] {
        let e = s.call_err(
            "wait",
            json!({"job_ids": [job], "timeout": 1, "until": {"pattern": "("}}),
        );
        assert!(
            e.starts_with("invalid arguments: ") && e.contains("pattern"),
            "{job}: {e:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// idle_timeout
// ---------------------------------------------------------------------------

fn a_job_silent_for_its_idle_timeout_is_ended_with_cause_idle_timeout(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "1")]);
    let r = s.call(
        "execute",
        json!({"command": format!("echo hi; {OVERRUN}"), "idle_timeout": 1,
               "capture": {"on_error": "all"}}),
    );
    assert_eq!(
        stable(&r),
        json!({"job_id": "job-1", "state": "error", "exit_code": -1,
               "signal": "terminated", "signal_number": 15,
               "timed_out": true, "cause": "idle_timeout",
               "stdout": {"data": "hi\n", "offset": 0, "bytes": 3, "total_bytes": 3},
               "stderr": {"data": "", "offset": 0, "bytes": 0, "total_bytes": 0}})
    );
}

fn a_job_that_keeps_printing_is_not_ended_by_its_idle_timeout(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "1")]);
    for redirect in ["", ">&2"] {
        let r = s.call(
            "execute",
            json!({"command": format!(
                "i=0; while [ $i -lt 10 ]; do echo $i {redirect}; sleep 0.2; i=$((i+1)); done"),
                "idle_timeout": 1}),
        );
        assert_eq!(r["state"], json!("success"), "writing {redirect:?}: {r}");
        assert!(r.get("timed_out").is_none(), "{r}");
    }
}

// ---------------------------------------------------------------------------
// Revision gating and schemas
// ---------------------------------------------------------------------------

fn tools_list_from_2025_03_26_on_has_the_part_ii_inputs_and_flat_schemas(t: Target) {
    for revision in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut s = Server::started_in(t, &[], revision);
        let list = s.request("tools/list", json!({}));
        let tools = list["result"]["tools"].as_array().expect("tools").clone();
        for tool in &tools {
            let schema = &tool["inputSchema"];
            for k in ["oneOf", "anyOf", "allOf"] {
                assert!(
                    schema.get(k).is_none(),
                    "{revision}: {} has a top-level {k}",
                    tool["name"]
                );
            }
        }
        let schema = |name: &str| {
            tools
                .iter()
                .find(|t| t["name"] == json!(name))
                .unwrap_or_else(|| panic!("{revision}: no {name} tool"))["inputSchema"]
                .clone()
        };
        let execute = schema("execute");
        for p in [
            "command",
            "argv",
            "timeout",
            "yield_after",
            "label",
            "max_output_bytes",
            "idle_timeout",
        ] {
            assert!(
                execute["properties"].get(p).is_some(),
                "{revision}: execute has no {p:?}: {execute}"
            );
        }
        let required = execute["required"].as_array().cloned().unwrap_or_default();
        assert!(
            !required.contains(&json!("command")) && !required.contains(&json!("argv")),
            "{revision}: command and argv are both optional: {execute}"
        );
        let wait = schema("wait");
        assert!(
            wait["properties"].get("until").is_some(),
            "{revision}: wait has no until: {wait}"
        );
    }
}

// ---------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------

fn invalid_security_settings_stop_the_server_with_exit_code_2_naming_the_variable(t: Target) {
    let patterns = HostPath::new("bad-patterns");
    std::fs::write(&patterns.0, "AKIA[0-9A-Z]{16}\n(\n").expect("write the patterns file");
    // Each case names the variable at fault; the patterns files are
    // checked with redaction on.
    let cases: [(&str, Vec<(&str, &str)>); 4] = [
        (
            "MCP_EXEC_ALLOWED_CWDS",
            vec![("MCP_EXEC_ALLOWED_CWDS", "relative/dir")],
        ),
        ("MCP_EXEC_REDACT", vec![("MCP_EXEC_REDACT", "bogus")]),
        (
            "MCP_EXEC_REDACT_PATTERNS_FILE",
            vec![
                ("MCP_EXEC_REDACT", "builtin"),
                (
                    "MCP_EXEC_REDACT_PATTERNS_FILE",
                    "/nonexistent/mcp-exec-patterns",
                ),
            ],
        ),
        (
            "MCP_EXEC_REDACT_PATTERNS_FILE",
            vec![
                ("MCP_EXEC_REDACT", "builtin"),
                ("MCP_EXEC_REDACT_PATTERNS_FILE", &patterns.0),
            ],
        ),
    ];
    // All at once: each must exit by itself, within the same bound.
    let mut servers: Vec<(Server, &str, String)> = cases
        .iter()
        .map(|(k, env)| {
            (
                Server::start_with_host_file(t, env, &patterns.0),
                *k,
                format!("{env:?}"),
            )
        })
        .collect();
    for (s, k, v) in &mut servers {
        let status = s.wait_exit(Duration::from_secs(15));
        let log = || s.stderr.lock().unwrap().clone();
        assert_eq!(
            status.and_then(|st| st.code()),
            Some(2),
            "{v}: {status:?}; stderr:\n{}",
            log()
        );
        assert!(
            wait_for(Duration::from_secs(5), || log().contains(*k)),
            "{v}: stderr does not name {k}:\n{}",
            log()
        );
    }
}

fn an_invalid_tuning_value_only_warns_and_the_server_starts(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_YIELD_AFTER", "soon")]);
    assert_eq!(s.exec("echo hi")["stdout"]["data"], json!("hi\n"));
    let log = s.stderr.clone();
    assert!(
        wait_for(Duration::from_secs(5), || log
            .lock()
            .unwrap()
            .contains("MCP_EXEC_YIELD_AFTER")),
        "no warning naming MCP_EXEC_YIELD_AFTER:\n{}",
        log.lock().unwrap()
    );
}

crate::parity!(
    argv_runs_a_program_without_a_shell_found_by_path_lookup,
    argv_and_command_together_or_neither_are_refused_with_the_exact_texts,
    an_empty_argv_or_one_with_a_non_string_element_is_invalid_arguments,
    argv_naming_a_missing_program_is_a_terminal_start_error_with_or_without_nowait,
    argv_in_a_2024_11_05_session_is_ignored_like_any_unknown_field,
    a_job_past_its_timeout_is_terminated_and_reports_timed_out,
    a_timed_out_shell_that_traps_term_and_exits_0_is_still_an_error,
    a_timed_out_job_that_ignores_term_is_killed_after_the_shutdown_grace,
    a_timeout_of_0_or_less_is_invalid_arguments,
    mcp_exec_job_timeout_is_the_default_deadline_and_a_longer_timeout_overrides_it,
    a_queued_jobs_deadline_starts_when_it_starts_running,
    a_blocking_execute_yields_after_mcp_exec_yield_after_and_wait_collects_the_job_once,
    yield_after_on_the_call_overrides_the_default_and_0_never_yields,
    a_yielded_job_keeps_its_deadline,
    a_job_over_max_running_is_queued_for_capacity_in_nowait_status_and_list_jobs,
    a_2024_11_05_session_sees_a_queued_job_as_running,
    queued_jobs_start_in_fifo_order_as_capacity_frees,
    a_full_queue_refuses_new_jobs_with_the_counts_and_control_tools_still_answer,
    input_to_a_queued_job_is_refused_as_not_started,
    output_and_status_answer_on_a_queued_job_with_empty_streams,
    killing_a_queued_job_cancels_it_before_start_and_it_never_runs,
    a_blocking_execute_of_a_queued_job_waits_through_the_queue,
    wait_waits_through_the_queue,
    a_label_is_echoed_in_nowait_status_list_jobs_and_the_result,
    a_label_over_200_characters_or_with_control_characters_is_refused,
    terminal_results_carry_started_at_and_duration_ms_from_2025_03_26_on,
    a_2024_11_05_session_ignores_part_ii_inputs_and_sees_no_part_ii_fields,
    max_output_bytes_keeps_only_that_many_bytes_of_each_stream,
    max_output_bytes_may_exceed_the_servers_default_window,
    max_output_bytes_outside_1_to_the_limit_is_refused_with_the_limit_in_the_text,
    consecutive_spawn_failures_for_lack_of_descriptors_trip_the_breaker_until_the_cooldown,
    wait_until_a_pattern_returns_when_a_running_job_prints_it_with_its_offset,
    wait_until_matches_a_line_printed_before_the_call,
    wait_until_from_past_the_line_does_not_match_and_returns_at_the_timeout,
    wait_until_on_any_stream_matches_stderr,
    wait_until_quiet_returns_when_a_job_has_written_nothing_for_that_long,
    wait_until_delivers_nothing_early_and_a_later_wait_collects_the_result_once,
    wait_until_with_an_invalid_regex_is_invalid_arguments_naming_pattern,
    a_job_silent_for_its_idle_timeout_is_ended_with_cause_idle_timeout,
    a_job_that_keeps_printing_is_not_ended_by_its_idle_timeout,
    tools_list_from_2025_03_26_on_has_the_part_ii_inputs_and_flat_schemas,
    invalid_security_settings_stop_the_server_with_exit_code_2_naming_the_variable,
    an_invalid_tuning_value_only_warns_and_the_server_starts,
);
