//! The details of the reference implementation that clients can observe,
//! one test per detail, on every target.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Server, TIMEOUT, Target, tool_json, wait_for};

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// A `sleep` duration no other process on this machine uses, bounded so
/// that whatever a failing test leaves behind does not live long. (The
/// whole part, 90, is this module's own: the other modules count their
/// markers separately.)
fn marker() -> String {
    format!(
        "90.{}{:04}",
        std::process::id(),
        MARKERS.fetch_add(1, Ordering::Relaxed)
    )
}

/// Polls `status` until the job is terminal (without delivering it).
fn finish(s: &mut Server, id: &str) {
    let mut last = Value::Null;
    let done = wait_for(TIMEOUT, || {
        last = s.call("status", json!({"job_id": id}));
        last["state"] != json!("running")
    });
    assert!(done, "{id} still running: {last}");
}

fn output_with_a_bad_stream_spec_and_an_unknown_job_id_fails_with_invalid_arguments(t: Target) {
    let mut s = Server::started(t);
    for args in [
        json!({"job_id": "job-424242", "stdout": "everything"}),
        json!({"job_id": "job-424242", "stderr": {"tail": "x"}}),
        json!({"job_id": "nope", "stdout": {"from": "start"}}),
        json!({"job_id": "", "stdout": 5}),
    ] {
        let e = s.call_err("output", args.clone());
        let detail = e
            .strip_prefix("invalid arguments: ")
            .unwrap_or_else(|| panic!("output {args}: {e:?} is not an argument error"));
        assert!(detail.contains("invalid"), "output {args}: {e:?}");
        assert!(!e.contains("unknown job"), "output {args}: {e:?}");
    }
}

fn a_malformed_job_id_is_an_unknown_job_and_a_missing_or_null_one_is_required(t: Target) {
    let mut s = Server::started(t);
    for tool in ["status", "output", "input", "kill"] {
        // `data` is for `input`; the other tools ignore it (unknown field).
        // An empty id is the next test's.
        for id in ["nope", "job-", "job-x", "7", "  "] {
            assert_eq!(
                s.call_err(tool, json!({"job_id": id, "data": ""})),
                format!("unknown job_id \"{id}\""),
                "{tool} with job_id {id:?}"
            );
        }
        assert_eq!(
            s.call_err(tool, json!({"data": ""})),
            "\"job_id\" is required",
            "{tool} without job_id"
        );
        assert_eq!(
            s.call_err(tool, json!({"job_id": null, "data": ""})),
            "\"job_id\" is required",
            "{tool} with job_id null"
        );
    }
    for id in ["", "nope"] {
        assert_eq!(
            s.call_err("wait", json!({"job_ids": [id]})),
            format!("unknown job_id \"{id}\""),
            "wait with job_ids [{id:?}]"
        );
    }
}

fn an_empty_job_id_is_required_for_input_and_kill_and_an_unknown_job_for_status_and_output(
    t: Target,
) {
    let mut s = Server::started(t);
    // A running job, so that "" cannot be taken for "no job at all".
    let job = s.spawn_job(&format!("sleep {}", marker()));
    for tool in ["input", "kill"] {
        assert_eq!(
            s.call_err(tool, json!({"job_id": "", "data": "x"})),
            "\"job_id\" is required",
            "{tool} with job_id \"\""
        );
    }
    for tool in ["status", "output"] {
        assert_eq!(
            s.call_err(tool, json!({"job_id": ""})),
            "unknown job_id \"\"",
            "{tool} with job_id \"\""
        );
    }
    let r = s.call("status", json!({"job_id": job}));
    assert_eq!(r["state"], json!("running"), "kill \"\" touched {job}: {r}");
    let r = s.call("kill", json!({"job_id": job, "signal": "KILL"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
}

fn a_stream_spec_with_tail_and_from_reads_by_tail_and_ignores_from_length_and_unaligned(t: Target) {
    let mut s = Server::started(t);
    let job = s.spawn_job("printf 'one\\ntwo\\nthree\\n'");
    finish(&mut s, &job);
    let last_two = json!({"data": "two\nthree\n", "offset": 4, "bytes": 10, "total_bytes": 14});
    for spec in [
        json!({"tail": 2, "from": 0}),
        json!({"tail": 2, "from": 1, "length": 3}),
        json!({"tail": 2, "from": 5, "length": 1, "unaligned": true}),
        json!({"tail": 2, "length": 1}),
        json!({"tail": 2, "unaligned": true}),
    ] {
        let r = s.call("output", json!({"job_id": job, "stdout": spec}));
        assert_eq!(r["stdout"], last_two, "output with {spec}: {r}");
    }
    // The same parser reads execute's capture policy.
    let r = s.call(
        "execute",
        json!({"command": "printf 'a\\nb\\n'",
               "capture": {"on_success": {"stdout": {"tail": 1, "from": 0, "length": 1}}}}),
    );
    assert_eq!(
        r["stdout"],
        json!({"data": "b\n", "offset": 2, "bytes": 2, "total_bytes": 4}),
        "{r}"
    );
}

fn a_negative_tail_counts_as_0_and_gives_empty_data_at_the_end_of_the_stream(t: Target) {
    let mut s = Server::started(t);
    let job = s.spawn_job("printf 'one\\ntwo\\n'; printf 'e\\n' >&2");
    finish(&mut s, &job);
    for tail in [-1, -3, i64::MIN] {
        let r = s.call(
            "output",
            json!({"job_id": job, "stdout": {"tail": tail}, "stderr": {"tail": tail}}),
        );
        assert_eq!(
            r["stdout"],
            json!({"data": "", "offset": 8, "bytes": 0, "total_bytes": 8}),
            "tail {tail}: {r}"
        );
        assert_eq!(
            r["stderr"],
            json!({"data": "", "offset": 2, "bytes": 0, "total_bytes": 2}),
            "tail {tail}: {r}"
        );
        let zero = s.call("output", json!({"job_id": job, "stdout": {"tail": 0}}));
        assert_eq!(r["stdout"], zero["stdout"], "tail {tail} is not tail 0");
    }
}

fn kill_accepts_sigassured_and_lowercase_sigkill(t: Target) {
    let mut s = Server::started(t);
    let job = s.spawn_job(&format!("sleep {}", marker()));
    let r = s.call("kill", json!({"job_id": job, "signal": "SIGASSURED"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    assert_eq!(
        r["signal_sent"],
        json!(15),
        "SIGASSURED starts with TERM: {r}"
    );
    assert_eq!(r["result"]["signal"], json!("terminated"), "{r}");

    let job = s.spawn_job(&format!("sleep {}", marker()));
    let r = s.call("kill", json!({"job_id": job, "signal": "sigkill"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    assert_eq!(r["signal_sent"], json!(9), "{r}");
    assert_eq!(r["result"]["signal"], json!("killed"), "{r}");
}

fn a_from_read_inside_the_dropped_head_starts_at_the_oldest_retained_byte_and_counts_length_from_there(
    t: Target,
) {
    let mut s = Server::started_with_env(t, &[("MCP_EXEC_MAX_OUTPUT_BYTES", "1000")]);
    // 174 lines of ten bytes, "000000000\n" … "000000173\n": the byte at
    // offset 10·k starts line k. The window keeps the last 1000 bytes, so
    // the first 740 (lines 0–73) are dropped.
    let job = s.spawn_job("i=0; while [ $i -lt 174 ]; do printf '%09d\\n' $i; i=$((i+1)); done");
    finish(&mut s, &job);
    let line = |k: usize| format!("{k:09}\n");
    let r = s.call(
        "output",
        json!({"job_id": job, "stdout": {"from": 0, "length": 50}}),
    );
    assert_eq!(
        r["stdout"],
        json!({
            "data": (74..79).map(line).collect::<String>(),
            "offset": 740,
            "bytes": 50,
            "total_bytes": 1740,
            "truncated": true,
            "dropped_bytes": 740,
        }),
        "{r}"
    );
    // From inside the dropped head, not at its start: 740 − 100 are gone.
    let r = s.call(
        "output",
        json!({"job_id": job, "stdout": {"from": 100, "length": 20}}),
    );
    assert_eq!(
        r["stdout"],
        json!({
            "data": (74..76).map(line).collect::<String>(),
            "offset": 740,
            "bytes": 20,
            "total_bytes": 1740,
            "truncated": true,
            "dropped_bytes": 640,
        }),
        "{r}"
    );
}

fn wait_with_a_duplicated_id_gives_the_streams_to_the_first_occurrence_and_delivers_once(
    t: Target,
) {
    let mut s = Server::started(t);
    let job = s.spawn_job("echo hi");
    finish(&mut s, &job);
    let r = s.call("wait", json!({"job_ids": [job, job, job]}));
    assert_eq!(
        r,
        json!([
            {"job_id": job, "state": "success", "exit_code": 0,
             "stdout": {"data": "hi\n", "offset": 0, "bytes": 3, "total_bytes": 3}},
            {"job_id": job, "state": "success", "exit_code": 0},
            {"job_id": job, "state": "success", "exit_code": 0},
        ])
    );
    assert_eq!(
        s.call_err("status", json!({"job_id": job})),
        format!("unknown job_id \"{job}\""),
        "the result was not delivered"
    );
    assert_eq!(s.call("list_jobs", json!({})), json!({"jobs": []}));
}

fn a_wait_blocking_on_a_job_that_a_kill_claims_answers_its_status_with_result_delivered_elsewhere(
    t: Target,
) {
    let mut s = Server::started(t);
    let job = s.spawn_job("sleep 0.4");
    let waiting = s.send_call("wait", json!({"job_ids": [job], "timeout": 30}));
    // Long enough for the wait to be blocking on the job, well before it ends.
    std::thread::sleep(Duration::from_millis(150));
    let killed = s.call("kill", json!({"job_id": job, "signal": "KILL"}));
    assert_eq!(killed["terminated"], json!(true), "{killed}");
    assert_eq!(killed["signal_sent"], json!(9), "{killed}");
    assert_eq!(
        killed["result"]["job_id"],
        json!(job),
        "the kill gets the result: {killed}"
    );
    assert_eq!(killed["result"]["signal"], json!("killed"), "{killed}");
    assert!(
        killed.get("result_delivered_elsewhere").is_none(),
        "{killed}"
    );

    let answer = s.response(&waiting, TIMEOUT);
    let result = &answer["result"];
    assert_eq!(
        result["isError"],
        json!(false),
        "the waiter is not a tool error: {answer}"
    );
    assert_eq!(
        tool_json(result),
        json!([{
            "job_id": job, "state": "error", "exit_code": -1,
            "signal": "killed", "signal_number": 9,
            "result_delivered_elsewhere": true,
        }]),
        "the waiter gets the terminal status fields, no streams"
    );

    // A request that starts after the delivery finds no such job.
    assert_eq!(
        s.call_err("wait", json!({"job_ids": [job]})),
        format!("unknown job_id \"{job}\"")
    );
    assert_eq!(s.call("list_jobs", json!({})), json!({"jobs": []}));
}

crate::parity!(
    output_with_a_bad_stream_spec_and_an_unknown_job_id_fails_with_invalid_arguments,
    a_malformed_job_id_is_an_unknown_job_and_a_missing_or_null_one_is_required,
    an_empty_job_id_is_required_for_input_and_kill_and_an_unknown_job_for_status_and_output,
    a_stream_spec_with_tail_and_from_reads_by_tail_and_ignores_from_length_and_unaligned,
    a_negative_tail_counts_as_0_and_gives_empty_data_at_the_end_of_the_stream,
    kill_accepts_sigassured_and_lowercase_sigkill,
    a_from_read_inside_the_dropped_head_starts_at_the_oldest_retained_byte_and_counts_length_from_there,
    wait_with_a_duplicated_id_gives_the_streams_to_the_first_occurrence_and_delivers_once,
    a_wait_blocking_on_a_job_that_a_kill_claims_answers_its_status_with_result_delivered_elsewhere,
);
