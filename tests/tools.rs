//! Each tool's result shape, defaults and error texts (docs/tools.md), on every
//! target; argument validation on the bare binary.
//!
//! Jobs that must stay running block on `read` from their stdin, which the
//! server holds open: they end by themselves when the server goes away.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Server, TIMEOUT, Target, keys, wait_for};

/// Polls `status` until the job is terminal (without delivering it).
fn terminal_status(s: &mut Server, id: &str) -> Value {
    let mut last = Value::Null;
    let done = wait_for(TIMEOUT, || {
        last = s.call("status", json!({"job_id": id}));
        last["state"] != json!("running")
    });
    assert!(done, "{id} still running: {last}");
    last
}

fn job_ids(list: &Value) -> Vec<String> {
    list["jobs"]
        .as_array()
        .expect("jobs array")
        .iter()
        .map(|j| j["job_id"].as_str().expect("job_id").to_owned())
        .collect()
}

fn execute_blocks_until_the_job_ends_and_delivers_its_result_once(t: Target) {
    let mut s = Server::started(t);
    let ok = s.exec("echo out; echo err >&2");
    assert_eq!(ok["job_id"], json!("job-1"), "job ids count from 1: {ok}");
    assert_eq!(
        keys(&ok),
        ["exit_code", "job_id", "state", "stdout"],
        "{ok}"
    );
    assert_eq!(
        (ok["state"].clone(), ok["exit_code"].clone()),
        (json!("success"), json!(0))
    );
    assert_eq!(
        ok["stdout"],
        json!({"data": "out\n", "offset": 0, "bytes": 4, "total_bytes": 4})
    );

    let failed = s.exec("echo out; echo err >&2; exit 3");
    assert_eq!(failed["job_id"], json!("job-2"));
    assert_eq!(
        keys(&failed),
        ["exit_code", "job_id", "state", "stderr"],
        "{failed}"
    );
    assert_eq!(
        (failed["state"].clone(), failed["exit_code"].clone()),
        (json!("error"), json!(3))
    );
    assert_eq!(failed["stderr"]["data"], json!("err\n"));

    // Delivery removed both jobs.
    for id in ["job-1", "job-2"] {
        assert_eq!(
            s.call_err("status", json!({"job_id": id})),
            format!("unknown job_id \"{id}\"")
        );
    }
    assert_eq!(s.call("list_jobs", json!({})), json!({"jobs": []}));
}

fn a_job_killed_by_a_signal_reports_exit_code_minus_one_and_the_signal_description(t: Target) {
    let mut s = Server::started(t);
    for (signo, description) in [
        (1, "hangup"),
        (9, "killed"),
        (10, "user defined signal 1"),
        (15, "terminated"),
        (34, "signal 34"),
    ] {
        let r = s.exec(&format!("echo dying >&2; kill -{signo} $$"));
        assert_eq!(r["state"], json!("error"), "signal {signo}: {r}");
        assert_eq!(r["exit_code"], json!(-1), "signal {signo}: {r}");
        assert_eq!(r["signal"], json!(description), "signal {signo}: {r}");
        if let Some(n) = r.get("signal_number") {
            assert_eq!(n, &json!(signo), "{r}");
        }
        assert!(r.get("start_error").is_none(), "{r}");
        assert_eq!(
            r["stderr"]["data"],
            json!("dying\n"),
            "on_error captures stderr: {r}"
        );
    }
}

fn execute_with_nowait_returns_the_job_id_and_running_state_at_once(t: Target) {
    let mut s = Server::started(t);
    let r = s.call(
        "execute",
        json!({"command": "read line; echo \"got $line\"", "nowait": true}),
    );
    assert_eq!(r, json!({"job_id": "job-1", "state": "running"}));
    assert_eq!(
        s.call("status", json!({"job_id": "job-1"})),
        json!({"job_id": "job-1", "state": "running"})
    );
    s.call("input", json!({"job_id": "job-1", "data": "hello\n"}));
    let results = s.call("wait", json!({"job_ids": ["job-1"]}));
    assert_eq!(results[0]["state"], json!("success"), "{results}");
    assert_eq!(results[0]["stdout"]["data"], json!("got hello\n"));
}

fn a_start_error_is_a_terminal_error_at_once_and_the_job_is_removed(t: Target) {
    let mut s = Server::started(t);
    for (n, nowait) in [(1, false), (2, true)] {
        let id = format!("job-{n}");
        let r = s.call(
            "execute",
            json!({"command": "echo never", "cwd": "/x", "nowait": nowait}),
        );
        assert_eq!(r["job_id"], json!(id), "{r}");
        assert_eq!(r["state"], json!("error"), "{r}");
        assert_eq!(r["exit_code"], json!(-1), "{r}");
        assert_eq!(
            r["start_error"],
            json!("chdir /x: no such file or directory"),
            "{r}"
        );
        assert!(
            r.get("signal").is_none() && r.get("stdout").is_none(),
            "{r}"
        );
        assert!(
            r["stderr"].is_object(),
            "stderr is captured per on_error: {r}"
        );
        assert_eq!(
            s.call_err("status", json!({"job_id": id})),
            format!("unknown job_id \"{id}\"")
        );
    }
    assert_eq!(s.call("list_jobs", json!({})), json!({"jobs": []}));
    // Ids are never reused.
    assert_eq!(s.exec("true")["job_id"], json!("job-3"));
}

fn wait_returns_one_entry_per_id_in_order_and_leaves_running_jobs(t: Target) {
    let mut s = Server::started(t);
    let running = s.spawn_job("read line");
    let failing = s.spawn_job("echo bad >&2; exit 4");
    let r = s.call("wait", json!({"job_ids": [running, failing]}));
    assert_eq!(r[0], json!({"job_id": running, "state": "running"}), "{r}");
    assert_eq!(r[1]["job_id"], json!(failing));
    assert_eq!(
        (r[1]["state"].clone(), r[1]["exit_code"].clone()),
        (json!("error"), json!(4)),
        "{r}"
    );
    assert_eq!(r[1]["stderr"]["data"], json!("bad\n"));
    assert_eq!(r.as_array().map(Vec::len), Some(2));

    // The delivered job is gone: asking for it again fails the whole call.
    let gone = s.call_err("wait", json!({"job_ids": [running, failing], "timeout": 0}));
    assert_eq!(gone, format!("unknown job_id \"{failing}\""));

    // Order follows job_ids, not job age; a terminal job makes wait return at once.
    let done = s.spawn_job("echo fine");
    terminal_status(&mut s, &done);
    let started = Instant::now();
    let r = s.call("wait", json!({"job_ids": [done, running], "timeout": 30}));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "wait did not return at once"
    );
    assert_eq!(r[0]["job_id"], json!(done));
    assert_eq!(r[0]["stdout"]["data"], json!("fine\n"));
    assert_eq!(r[1], json!({"job_id": running, "state": "running"}));

    // An unknown id fails the whole call and delivers nothing.
    let other = s.spawn_job("exit 0");
    terminal_status(&mut s, &other);
    let err = s.call_err("wait", json!({"job_ids": [other, "job-999"]}));
    assert_eq!(err, "unknown job_id \"job-999\"");
    assert_eq!(
        s.call("status", json!({"job_id": other}))["state"],
        json!("success"),
        "not delivered"
    );
    assert_eq!(
        job_ids(&s.call("list_jobs", json!({}))),
        [running.clone(), other.clone()]
    );
}

fn wait_polls_at_a_timeout_of_zero_or_less_and_otherwise_waits_the_given_or_default_timeout(
    t: Target,
) {
    // Polls and the 0.3 s wait must end well before this default would.
    let mut s = Server::started_with_env(t, &[("MCP_EXEC_DEFAULT_TIMEOUT", "1.5")]);
    let running = s.spawn_job("read line");
    for timeout in [json!(0), json!(-1), json!(-0.5)] {
        let started = Instant::now();
        let r = s.call("wait", json!({"job_ids": [running], "timeout": timeout}));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "timeout {timeout} blocked"
        );
        assert_eq!(r, json!([{"job_id": running, "state": "running"}]));
    }
    let started = Instant::now();
    let r = s.call("wait", json!({"job_ids": [running], "timeout": 0.3}));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(1400),
        "took {took:?}"
    );
    assert_eq!(r, json!([{"job_id": running, "state": "running"}]));
    // Without a timeout, MCP_EXEC_DEFAULT_TIMEOUT applies.
    let started = Instant::now();
    let r = s.call("wait", json!({"job_ids": [running]}));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(5),
        "took {took:?}"
    );
    assert_eq!(r, json!([{"job_id": running, "state": "running"}]));

    // A poll delivers a job that is already terminal.
    let done = s.spawn_job("echo polled");
    terminal_status(&mut s, &done);
    let r = s.call("wait", json!({"job_ids": [done], "timeout": 0}));
    assert_eq!(r[0]["stdout"]["data"], json!("polled\n"), "{r}");
}

fn wait_with_duplicate_ids_delivers_the_output_once(t: Target) {
    let mut s = Server::started(t);
    let id = s.spawn_job("echo once; exit 0");
    terminal_status(&mut s, &id);
    let r = s.call("wait", json!({"job_ids": [id, id, id]}));
    let entries = r.as_array().expect("array");
    assert_eq!(entries.len(), 3, "one entry per listed id: {r}");
    for e in entries {
        assert_eq!(
            (
                e["job_id"].clone(),
                e["state"].clone(),
                e["exit_code"].clone()
            ),
            (json!(id), json!("success"), json!(0)),
            "{r}"
        );
    }
    let with_output: Vec<&Value> = entries
        .iter()
        .filter(|e| e.get("stdout").is_some())
        .collect();
    assert_eq!(with_output.len(), 1, "the output is delivered once: {r}");
    assert_eq!(with_output[0]["stdout"]["data"], json!("once\n"));
    assert_eq!(
        s.call_err("wait", json!({"job_ids": [id]})),
        format!("unknown job_id \"{id}\"")
    );
}

fn status_and_output_report_a_job_without_removing_it(t: Target) {
    let mut s = Server::started(t);
    let id = s.spawn_job("printf 'a\\nb\\n'; printf e >&2; read line; exit 7");
    let mut out = Value::Null;
    assert!(wait_for(TIMEOUT, || {
        out = s.call(
            "output",
            json!({"job_id": id, "stdout": "all", "stderr": "all"}),
        );
        out["stdout"]["total_bytes"] == json!(4) && out["stderr"]["total_bytes"] == json!(1)
    }));
    assert_eq!(
        out["state"],
        json!("running"),
        "output works on running jobs: {out}"
    );
    assert_eq!(out["stdout"]["data"], json!("a\nb\n"));
    assert_eq!(out["stderr"]["data"], json!("e"));
    let status = json!({"job_id": id, "state": "running"});
    assert_eq!(
        s.call("output", json!({"job_id": id})),
        status,
        "no stream = status"
    );
    assert_eq!(
        s.call(
            "output",
            json!({"job_id": id, "stdout": "none", "stderr": null})
        ),
        status
    );
    assert_eq!(
        s.call("output", json!({"job_id": id, "stdout": ""})),
        status
    );
    assert_eq!(s.call("status", json!({"job_id": id})), status);

    s.call("input", json!({"job_id": id, "data": "\n"}));
    let ended = json!({"job_id": id, "state": "error", "exit_code": 7});
    assert_eq!(terminal_status(&mut s, &id), ended);
    assert_eq!(
        s.call("status", json!({"job_id": id})),
        ended,
        "status never removes"
    );
    assert_eq!(s.call("output", json!({"job_id": id})), ended);
    let out = s.call("output", json!({"job_id": id, "stdout": "all"}));
    assert_eq!(
        out["stdout"]["data"],
        json!("a\nb\n"),
        "output works on finished jobs"
    );
    assert!(out.get("stderr").is_none(), "{out}");
    assert_eq!(
        job_ids(&s.call("list_jobs", json!({}))),
        std::slice::from_ref(&id)
    );
    let r = s.call("wait", json!({"job_ids": [id]}));
    assert_eq!(r[0]["stderr"]["data"], json!("e"), "{r}");
}

fn input_writes_data_and_close_sends_eof(t: Target) {
    let mut s = Server::started(t);
    let id = s.spawn_job("while read l; do echo \"got $l\"; done; echo eof");
    let r = s.call("input", json!({"job_id": id, "data": "one\n"}));
    assert_eq!(
        r,
        json!({"job_id": id, "state": "running"}),
        "input returns the status shape"
    );
    assert_eq!(
        s.call("input", json!({"job_id": id, "data": ""})),
        r,
        "empty data is allowed"
    );
    s.call(
        "input",
        json!({"job_id": id, "data": "two\n", "close": true}),
    );
    let r = s.call("wait", json!({"job_ids": [id]}));
    assert_eq!(
        r[0]["stdout"]["data"],
        json!("got one\ngot two\neof\n"),
        "{r}"
    );

    // stdin given to execute is written first and stays open for input.
    let id = s.call(
        "execute",
        json!({"command": "cat", "stdin": "abc", "nowait": true}),
    )["job_id"]
        .as_str()
        .expect("id")
        .to_owned();
    s.call("input", json!({"job_id": id, "data": "def", "close": true}));
    let r = s.call("wait", json!({"job_ids": [id]}));
    assert_eq!(r[0]["stdout"]["data"], json!("abcdef"), "{r}");
}

fn input_refuses_a_closed_stdin_and_a_job_that_is_no_longer_running(t: Target) {
    let mut s = Server::started(t);
    // Neither job reads stdin, so closing it does not end them.
    let closed_by_input = s.spawn_job("exec sleep 30");
    let closed_at_start = s.call(
        "execute",
        json!({"command": "exec sleep 30", "close_stdin": true, "nowait": true}),
    )["job_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let r = s.call("input", json!({"job_id": closed_by_input, "close": true}));
    assert_eq!(r, json!({"job_id": closed_by_input, "state": "running"}));
    for id in [&closed_by_input, &closed_at_start] {
        for args in [
            json!({"job_id": id, "close": true}),
            json!({"job_id": id, "data": "x"}),
        ] {
            assert_eq!(
                s.call_err("input", args),
                "stdin is already closed for this job"
            );
        }
    }
    for id in [&closed_by_input, &closed_at_start] {
        let k = s.call("kill", json!({"job_id": id, "signal": "KILL"}));
        assert_eq!(k["terminated"], json!(true), "{k}");
    }

    let finished = s.spawn_job("true");
    terminal_status(&mut s, &finished);
    for args in [
        json!({"job_id": finished, "data": "late"}),
        json!({"job_id": finished, "close": true}),
    ] {
        assert_eq!(
            s.call_err("input", args),
            format!("job \"{finished}\" is no longer running")
        );
    }
    s.call("wait", json!({"job_ids": [finished]}));
    assert_eq!(
        s.call_err("input", json!({"job_id": finished, "data": "x"})),
        format!("unknown job_id \"{finished}\"")
    );
}

fn list_jobs_lists_undelivered_jobs_oldest_first(t: Target) {
    let mut s = Server::started(t);
    assert_eq!(s.call("list_jobs", json!({})), json!({"jobs": []}));
    let first = s.spawn_job("read line");
    let second = s.spawn_job("echo done");
    s.exec("echo delivered at once");
    s.call("execute", json!({"command": "true", "cwd": "/x"}));
    let third = s.spawn_job("read line");
    terminal_status(&mut s, &second);
    let list = s.call("list_jobs", json!({}));
    assert_eq!(
        list,
        json!({"jobs": [
            {"job_id": first, "state": "running"},
            {"job_id": second, "state": "success"},
            {"job_id": third, "state": "running"},
        ]})
    );
    s.call("wait", json!({"job_ids": [second]}));
    assert_eq!(job_ids(&s.call("list_jobs", json!({}))), [first, third]);
}

fn env_is_layered_over_the_server_environment_and_cwd_is_applied(t: Target) {
    let mut s = Server::started_with_env(
        t,
        &[("MCP_TEST_OUTER", "outer"), ("MCP_TEST_OVERRIDE", "server")],
    );
    let show =
        r#"printf '%s|%s|%s|%s' "$MCP_TEST_OUTER" "$MCP_TEST_OVERRIDE" "$MCP_TEST_NEW" "$(pwd)""#;
    let r = s.call(
        "execute",
        json!({"command": show, "cwd": "/etc", "env": {"MCP_TEST_OVERRIDE": "job", "MCP_TEST_NEW": "new value with spaces"}}),
    );
    assert_eq!(
        r["stdout"]["data"],
        json!("outer|job|new value with spaces|/etc"),
        "{r}"
    );

    let r = s.exec(show);
    let data = r["stdout"]["data"].as_str().expect("data").to_owned();
    assert!(data.starts_with("outer|server||"), "{data}");
    if !t.is_container() {
        let here = std::env::current_dir().expect("cwd");
        assert_eq!(
            data,
            format!("outer|server||{}", here.display()),
            "jobs default to the server's cwd"
        );
    }
}

fn two_hundred_kb_of_stdin_come_back_through_cat_exactly(t: Target) {
    let mut s = Server::started(t);
    let mut payload = String::new();
    let mut i = 0;
    while payload.len() < 200_000 {
        payload.push_str(&format!("line {i:06}: héllo→ {}\n", "x".repeat(i % 50)));
        i += 1;
    }
    let r = s.call(
        "execute",
        json!({"command": "cat", "stdin": payload, "close_stdin": true}),
    );
    assert_eq!(r["state"], json!("success"), "{}", r["stderr"]);
    assert_eq!(r["stdout"]["total_bytes"], json!(payload.len()));
    assert_eq!(r["stdout"]["bytes"], json!(payload.len()));
    assert!(
        r["stdout"]["data"] == json!(payload),
        "the echo differs from what was sent"
    );
}

fn a_stdin_write_failure_returns_stdin_error_and_keeps_the_job(t: Target) {
    let mut s = Server::started(t);
    // The job exits without reading: writing 1 MiB to it fails.
    let r = s.call(
        "execute",
        json!({"command": "exit 5", "stdin": "x".repeat(1 << 20)}),
    );
    assert_eq!(keys(&r), ["job_id", "state", "stdin_error"], "{r}");
    let error = r["stdin_error"].as_str().expect("stdin_error");
    assert!(error.starts_with("writing stdin: "), "{error}");
    let id = r["job_id"].as_str().expect("job_id").to_owned();
    let delivered = s.call("wait", json!({"job_ids": [id]}));
    assert_eq!(
        (
            delivered[0]["state"].clone(),
            delivered[0]["exit_code"].clone()
        ),
        (json!("error"), json!(5)),
        "the job was kept: {delivered}"
    );
}

crate::parity!(
    a_stdin_write_failure_returns_stdin_error_and_keeps_the_job,
    execute_blocks_until_the_job_ends_and_delivers_its_result_once,
    a_job_killed_by_a_signal_reports_exit_code_minus_one_and_the_signal_description,
    execute_with_nowait_returns_the_job_id_and_running_state_at_once,
    a_start_error_is_a_terminal_error_at_once_and_the_job_is_removed,
    wait_returns_one_entry_per_id_in_order_and_leaves_running_jobs,
    wait_polls_at_a_timeout_of_zero_or_less_and_otherwise_waits_the_given_or_default_timeout,
    wait_with_duplicate_ids_delivers_the_output_once,
    status_and_output_report_a_job_without_removing_it,
    input_writes_data_and_close_sends_eof,
    input_refuses_a_closed_stdin_and_a_job_that_is_no_longer_running,
    list_jobs_lists_undelivered_jobs_oldest_first,
    env_is_layered_over_the_server_environment_and_cwd_is_applied,
    two_hundred_kb_of_stdin_come_back_through_cat_exactly,
);

#[test]
fn every_tool_error_text_of_the_spec_is_exact() {
    let mut s = Server::started(Target::Bare);
    for args in [
        json!({}),
        json!({"command": null}),
        json!({"command": ""}),
        json!({"command": "  \n\t"}),
    ] {
        assert_eq!(s.call_err("execute", args), "\"command\" is required");
    }
    for args in [
        json!({}),
        json!({"job_ids": []}),
        json!({"job_ids": null}),
        json!({"job_ids": "job-1"}),
    ] {
        assert_eq!(
            s.call_err("wait", args.clone()),
            "\"job_ids\" must be a non-empty array",
            "{args}"
        );
    }
    for tool in ["status", "output", "input", "kill"] {
        assert_eq!(
            s.call_err(tool, json!({})),
            "\"job_id\" is required",
            "{tool}"
        );
        assert_eq!(
            s.call_err(tool, json!({"job_id": "job-7"})),
            "unknown job_id \"job-7\"",
            "{tool}"
        );
    }
    assert_eq!(
        s.call_err("wait", json!({"job_ids": ["job-7"]})),
        "unknown job_id \"job-7\""
    );

    let id = s.spawn_job("read line");
    assert_eq!(
        s.call_err("kill", json!({"job_id": id, "signal": "NOPE"})),
        "unknown signal \"NOPE\" (use e.g. \"TERM\", \"KILL\", \"ASSURED\", or a number)"
    );
    assert_eq!(
        s.call_err("kill", json!({"job_id": id, "signal": "0"})),
        "invalid signal number 0"
    );

    // Every bad capture policy or stream spec: `invalid arguments: <detail containing "invalid">`.
    let bad_specs = [
        ("output", json!({"job_id": id, "stdout": "everything"})),
        ("output", json!({"job_id": id, "stderr": {"tail": 1.5}})),
        ("output", json!({"job_id": id, "stdout": {"from": "start"}})),
        (
            "output",
            json!({"job_id": id, "stdout": {"from": 0, "unaligned": "yes"}}),
        ),
        ("output", json!({"job_id": id, "stdout": 5})),
        (
            "execute",
            json!({"command": "true", "capture": {"on_success": "sideways"}}),
        ),
        (
            "execute",
            json!({"command": "true", "capture": {"on_error": {"stderr": {"tail": "ten"}}}}),
        ),
        (
            "execute",
            json!({"command": "true", "capture": {"on_success": 3}}),
        ),
    ];
    for (tool, args) in bad_specs {
        let err = s.call_err(tool, args.clone());
        let detail = err
            .strip_prefix("invalid arguments: ")
            .unwrap_or_else(|| panic!("{tool} {args}: {err}"));
        assert!(detail.contains("invalid"), "{tool} {args}: {err}");
    }
    // None of the rejected executes ran; the running job was left alone.
    assert_eq!(
        s.call("list_jobs", json!({})),
        json!({"jobs": [{"job_id": id, "state": "running"}]})
    );
}

#[test]
fn wrong_argument_types_are_tool_errors_and_the_server_keeps_serving() {
    let mut s = Server::started(Target::Bare);
    let id = s.spawn_job("read line");
    let bad = [
        ("execute", json!({"command": 5})),
        ("execute", json!({"command": ["echo", "hi"]})),
        ("execute", json!({"command": "echo hi", "cwd": 1})),
        ("execute", json!({"command": "echo hi", "env": "A=1"})),
        ("execute", json!({"command": "echo hi", "env": {"A": 1}})),
        ("execute", json!({"command": "echo hi", "stdin": 3})),
        (
            "execute",
            json!({"command": "echo hi", "close_stdin": "yes"}),
        ),
        ("execute", json!({"command": "echo hi", "nowait": 1})),
        ("execute", json!({"command": "echo hi", "capture": "all"})),
        ("wait", json!({"job_ids": [1]})),
        ("wait", json!({"job_ids": [id], "timeout": "soon"})),
        ("status", json!({"job_id": 1})),
        ("output", json!({"job_id": [id]})),
        ("input", json!({"job_id": id, "data": 5})),
        ("input", json!({"job_id": id, "close": "true"})),
        ("kill", json!({"job_id": id, "timeout": "5"})),
    ];
    for (tool, args) in bad {
        let result = s.call_result(tool, args.clone());
        assert_eq!(result["isError"], json!(true), "{tool} {args}: {result}");
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        assert!(!text.is_empty(), "{tool} {args}: no message");
    }
    // Nothing was started or delivered, and the server still works.
    assert_eq!(
        s.call("list_jobs", json!({})),
        json!({"jobs": [{"job_id": id, "state": "running"}]})
    );
    assert_eq!(s.exec("echo alive")["stdout"]["data"], json!("alive\n"));
}

#[test]
fn unknown_fields_in_tool_arguments_are_ignored() {
    let mut s = Server::started(Target::Bare);
    let r = s.call(
        "execute",
        json!({"command": "echo hi", "shell": "zsh", "timeout": 5, "extra": {"x": [1]}}),
    );
    assert_eq!(r["stdout"]["data"], json!("hi\n"), "{r}");
    let id = s.spawn_job("read line");
    assert_eq!(
        s.call("status", json!({"job_id": id, "verbose": true}))["state"],
        json!("running")
    );
    assert_eq!(
        s.call("output", json!({"job_id": id, "format": "text"})),
        json!({"job_id": id, "state": "running"})
    );
    assert_eq!(
        s.call(
            "input",
            json!({"job_id": id, "data": "\n", "encoding": "utf-8"})
        )["job_id"],
        json!(id)
    );
    let r = s.call("wait", json!({"job_ids": [id], "mode": "any"}));
    assert_eq!(r[0]["state"], json!("success"), "{r}");
    assert_eq!(
        s.call("list_jobs", json!({"all": true})),
        json!({"jobs": []})
    );
}
