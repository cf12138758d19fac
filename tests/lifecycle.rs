//! Kill, cancellation, progress, shutdown, exactly-once races, concurrency,
//! orphans and bad input, on every target.
//!
//! Processes are observed from inside the target, through an `execute` that
//! reads `/proc`, so one test works on the host, in a PID namespace and in a
//! container alike. A process is recognised by a **marker**: a `sleep` whose
//! duration is unique to the test (`sleep 120.<test pid><n>`); the duration
//! is bounded, so whatever a failing test leaves behind does not live long.
//! After the server has exited, the host's `/proc` is read directly (it sees
//! the processes of every target, containers included).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Server, TIMEOUT, Target, tool_json, wait_for};

/// Time allowed for a clean exit after EOF or a shutdown signal: the answer
/// wait, the grace, the KILL wait, plus slack for a loaded machine.
const EXIT: Duration = Duration::from_secs(30);

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// A `sleep` duration no other process on this machine uses.
fn marker() -> String {
    format!(
        "120.{}{:04}",
        std::process::id(),
        MARKERS.fetch_add(1, Ordering::Relaxed)
    )
}

/// How many command-line arguments of live processes in the target contain
/// `marker` (a `sh -c "sleep M"` counts once, its `sleep M` once more).
/// Zombies have no command line, so they do not count.
fn marker_count(s: &mut Server, marker: &str) -> usize {
    count_args(s, marker, "")
}

/// How many `sleep <marker>` processes have started (exec'd) in the target:
/// arguments that are exactly the marker.
fn sleeping(s: &mut Server, marker: &str) -> usize {
    count_args(s, marker, "x")
}

fn count_args(s: &mut Server, marker: &str, grep_flags: &str) -> usize {
    // `[.]` keeps this checker's own command line from matching.
    let pattern = marker.replace('.', "[.]");
    let r = s.exec(&format!(
        "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -c{grep_flags} '{pattern}' || true"
    ));
    let out = r["stdout"]["data"]
        .as_str()
        .unwrap_or_else(|| panic!("no stdout in {r}"));
    out.trim()
        .parse()
        .unwrap_or_else(|e| panic!("count {out:?}: {e}"))
}

/// Zombies in the target, read from `/proc/*/stat` by shell builtins only
/// (no fork, so the checker makes no zombie of its own). In a namespace
/// (PID 1, containers) every zombie counts; on the host only the server's
/// own children (`$PPID` of the checker job is the server).
pub(crate) fn zombie_count(s: &mut Server) -> usize {
    let all = if s.target == Target::Bare { 0 } else { 1 };
    let script = format!(
        r#"n=0; for f in /proc/[0-9]*/stat; do read -r l 2>/dev/null < "$f" || continue; r=${{l##*) }}; st=${{r%% *}}; r=${{r#* }}; pp=${{r%% *}}; if [ "$st" = Z ] && {{ [ {all} = 1 ] || [ "$pp" = "$PPID" ]; }}; then n=$((n+1)); fi; done; echo $n"#
    );
    let r = s.exec(&script);
    let out = r["stdout"]["data"]
        .as_str()
        .unwrap_or_else(|| panic!("no stdout in {r}"));
    out.trim()
        .parse()
        .unwrap_or_else(|e| panic!("zombie count {out:?}: {e}"))
}

/// Whether any process on the host has `marker` in its command line.
pub(crate) fn host_marker_alive(marker: &str) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            c.split(|&b| b == 0)
                .any(|arg| String::from_utf8_lossy(arg).contains(marker))
        })
    })
}

/// How often `number` occurs in `text` as a whole number.
fn mentions(text: &str, number: &str) -> usize {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|w| *w == number)
        .count()
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

/// Waits until `status` says the job is terminal; returns the status.
fn wait_terminal(s: &mut Server, job: &str) -> Value {
    let mut last = Value::Null;
    let done = wait_for(TIMEOUT, || {
        last = s.call("status", json!({"job_id": job}));
        last["state"] != json!("running")
    });
    assert!(done, "{job} did not end: {last}");
    last
}

/// The job ids and states that `list_jobs` reports, in order.
fn listed(s: &mut Server) -> Vec<(String, String)> {
    let r = s.call("list_jobs", json!({}));
    r["jobs"]
        .as_array()
        .unwrap_or_else(|| panic!("no jobs array in {r}"))
        .iter()
        .map(|j| {
            (
                j["job_id"].as_str().unwrap_or_default().to_owned(),
                j["state"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A job that ignores SIGTERM (its `sleep`s inherit the ignored signal) and
/// has set that up once `wait_output(.., "ready")` returns. Prints its pid.
fn spawn_term_ignoring(s: &mut Server, marker: &str) -> (String, String) {
    let id = s.spawn_job(&format!(
        "trap '' TERM; echo ready $$; sleep {marker}; sleep {marker}"
    ));
    let out = wait_output(s, &id, "ready");
    let pid = out
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("no pid in {out:?}"))
        .to_owned();
    (id, pid)
}

/// A `tools/call` request with `_meta.progressToken`; returns its id.
fn send_call_with_progress(s: &mut Server, tool: &str, args: Value, token: Value) -> Value {
    s.send_request(
        "tools/call",
        json!({"name": tool, "arguments": args, "_meta": {"progressToken": token}}),
    )
}

/// Reads messages in arrival order until the response to `id`; returns the
/// progress notifications for `token` that came before it, and the response.
fn progress_until_response(s: &mut Server, id: &Value, token: &Value) -> (Vec<Value>, Value) {
    let mut progress = Vec::new();
    loop {
        let m = s
            .next_message(TIMEOUT)
            .unwrap_or_else(|| panic!("no response to {id}"));
        if m.get("id") == Some(id) {
            return (progress, m);
        }
        if m["method"] == json!("notifications/progress") && m["params"]["progressToken"] == *token
        {
            progress.push(m["params"].clone());
        }
    }
}

/// Asserts that the notifications count 1, 2, 3… with `message`, at least
/// `min` of them.
fn assert_progress(notes: &[Value], message: &str, min: usize) {
    assert!(
        notes.len() >= min,
        "expected at least {min} progress notifications, got {notes:?}"
    );
    for (i, n) in notes.iter().enumerate() {
        assert_eq!(
            n["progress"],
            json!(i + 1),
            "progress must count 1, 2, 3…: {notes:?}"
        );
        assert_eq!(n["message"], json!(message), "{notes:?}");
    }
}

/// Every message that arrives within `wait` (responses and notifications).
fn drain(s: &mut Server, wait: Duration) -> Vec<Value> {
    let deadline = std::time::Instant::now() + wait;
    let mut out = Vec::new();
    while let Some(m) =
        s.next_message(deadline.saturating_duration_since(std::time::Instant::now()))
    {
        out.push(m);
    }
    out
}

fn ping_works(s: &mut Server) {
    let r = s.request("ping", json!({}));
    assert_eq!(r["result"], json!({}), "ping after bad input: {r}");
}

// ---------------------------------------------------------------------------
// kill
// ---------------------------------------------------------------------------

fn kill_with_term_ends_the_job_and_delivers_its_result(t: Target) {
    let mut s = Server::started(t);
    let m = marker();
    let job = s.spawn_job(&format!("sleep {m}"));
    let r = s.call("kill", json!({"job_id": job, "signal": "TERM"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    assert_eq!(r["signal_sent"], json!(15), "{r}");
    assert!(
        r.get("escalated").is_none() && r.get("already_terminated").is_none(),
        "{r}"
    );
    assert_eq!(r["result"]["job_id"], json!(job), "{r}");
    assert_eq!(r["result"]["state"], json!("error"), "{r}");
    assert_eq!(r["result"]["exit_code"], json!(-1), "{r}");
    assert_eq!(r["result"]["signal"], json!("terminated"), "{r}");
    assert_eq!(
        s.call_err("status", json!({"job_id": job})),
        format!("unknown job_id \"{job}\"")
    );
    assert_eq!(
        marker_count(&mut s, &m),
        0,
        "the sleep outlived a verified kill"
    );
    s.finish(EXIT);
}

fn kill_with_signal_9_as_a_number_string_kills_the_job(t: Target) {
    let mut s = Server::started(t);
    let m = marker();
    let job = s.spawn_job(&format!("sleep {m}"));
    let r = s.call("kill", json!({"job_id": job, "signal": "9"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    assert_eq!(r["signal_sent"], json!(9), "{r}");
    assert_eq!(r["result"]["signal"], json!("killed"), "{r}");
    assert_eq!(r["result"]["exit_code"], json!(-1), "{r}");
    assert!(listed(&mut s).is_empty(), "a killed job stays listed");
    s.finish(EXIT);
}

fn kill_assured_escalates_to_sigkill_on_a_job_that_ignores_term(t: Target) {
    let mut s = Server::started(t);
    let m = marker();
    let (job, _) = spawn_term_ignoring(&mut s, &m);
    let r = s.call(
        "kill",
        json!({"job_id": job, "signal": "ASSURED", "timeout": 1}),
    );
    assert_eq!(r["terminated"], json!(true), "{r}");
    assert_eq!(r["escalated"], json!(true), "{r}");
    assert_eq!(r["signal_sent"], json!(9), "{r}");
    assert_eq!(r["result"]["signal"], json!("killed"), "{r}");
    assert_eq!(marker_count(&mut s, &m), 0);
    s.finish(EXIT);
}

fn kill_assured_does_not_escalate_when_term_is_enough(t: Target) {
    let mut s = Server::started(t);
    let job = s.spawn_job(&format!("sleep {}", marker()));
    let r = s.call(
        "kill",
        json!({"job_id": job, "signal": "assured", "timeout": 10}),
    );
    assert_eq!(r["terminated"], json!(true), "{r}");
    assert!(
        r.get("escalated").is_none(),
        "ASSURED escalated although TERM killed the job: {r}"
    );
    assert_eq!(r["signal_sent"], json!(15), "{r}");
    assert_eq!(r["result"]["signal"], json!("terminated"), "{r}");
    s.finish(EXIT);
}

fn kill_with_timeout_0_reports_not_terminated_with_a_detail_and_keeps_the_job(t: Target) {
    let mut s = Server::started(t);
    let (job, _) = spawn_term_ignoring(&mut s, &marker());
    let r = s.call(
        "kill",
        json!({"job_id": job, "signal": "TERM", "timeout": 0}),
    );
    assert_eq!(r["terminated"], json!(false), "{r}");
    assert_eq!(r["signal_sent"], json!(15), "{r}");
    assert_eq!(r["state"], json!("running"), "{r}");
    assert!(
        r["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "no detail: {r}"
    );
    assert!(r.get("result").is_none(), "{r}");
    assert_eq!(listed(&mut s), vec![(job.clone(), "running".to_owned())]);
    let r = s.call("kill", json!({"job_id": job, "signal": "KILL"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    s.finish(EXIT);
}

fn kill_survivor_detail_names_the_running_process_its_comm_and_state(t: Target) {
    let mut s = Server::started(t);
    let (job, pid) = spawn_term_ignoring(&mut s, &marker());
    let r = s.call(
        "kill",
        json!({"job_id": job, "signal": "TERM", "timeout": 0.5}),
    );
    assert_eq!(r["terminated"], json!(false), "{r}");
    let detail = r["detail"]
        .as_str()
        .unwrap_or_else(|| panic!("no detail: {r}"));
    assert!(
        detail.contains("it may catch or ignore the signal; retry with KILL/9 or ASSURED"),
        "{detail}"
    );
    assert!(
        mentions(detail, &pid) >= 1,
        "the detail does not name the job's pid {pid}: {detail}"
    );
    assert!(
        detail.contains("sleep"),
        "the detail does not name the sleeping member's comm: {detail}"
    );
    assert!(
        detail.contains("state S") || detail.contains("sleeping"),
        "no state in: {detail}"
    );
    let r = s.call("kill", json!({"job_id": job, "signal": "9"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    s.finish(EXIT);
}

fn kill_survivor_detail_names_group_members_that_outlive_a_finished_child(t: Target) {
    let mut s = Server::started(t);
    let m = marker();
    let job = s.spawn_job(&format!(
        "(trap '' TERM; exec sleep {m}) & echo grandchild $!; exit 0"
    ));
    let out = wait_output(&mut s, &job, "grandchild");
    let grandchild = out.split_whitespace().nth(1).unwrap_or_default().to_owned();
    assert!(
        wait_for(TIMEOUT, || sleeping(&mut s, &m) == 1),
        "the grandchild never got to ignore TERM"
    );
    assert_eq!(wait_terminal(&mut s, &job)["state"], json!("success"));
    let r = s.call(
        "kill",
        json!({"job_id": job, "signal": "TERM", "timeout": 0.5}),
    );
    assert_eq!(r["terminated"], json!(false), "{r}");
    assert_eq!(r["state"], json!("success"), "{r}");
    let detail = r["detail"]
        .as_str()
        .unwrap_or_else(|| panic!("no detail: {r}"));
    assert!(
        !detail.contains("it may catch or ignore the signal"),
        "the detail claims the exited direct process is still running: {detail}"
    );
    assert!(
        mentions(detail, &grandchild) >= 1 && detail.contains("sleep"),
        "survivor {grandchild} not named: {detail}"
    );
    assert_eq!(
        listed(&mut s),
        vec![(job.clone(), "success".to_owned())],
        "a job with survivors must be kept"
    );
    let r = s.call("kill", json!({"job_id": job, "signal": "KILL"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    assert_eq!(r["result"]["state"], json!("success"), "{r}");
    s.finish(EXIT);
}

fn kill_survivor_detail_names_the_living_parent_of_an_unreaped_zombie(t: Target) {
    let mut s = Server::started(t);
    // The inner shell becomes a `sleep` that never reaps its `sleep 0`
    // child: a zombie member of the group whose parent is alive and is not
    // the server. Everything ignores TERM.
    // (`sleep 1`: the shell has long exec'd before its child exits, so it
    // cannot reap it.)
    let job = s.spawn_job(&format!(
        "trap '' TERM; sh -c 'sleep 1 & echo parent $$; exec sleep {}'",
        marker()
    ));
    let out = wait_output(&mut s, &job, "parent");
    let parent = out.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let find_zombie = format!(
        r#"for c in $(cat /proc/{parent}/task/{parent}/children); do read -r l < /proc/$c/stat; case "$l" in *") Z "*) echo $c;; esac; done"#
    );
    let mut zombie = String::new();
    let found = wait_for(TIMEOUT, || {
        zombie = s.exec(&find_zombie)["stdout"]["data"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_owned();
        !zombie.is_empty()
    });
    assert!(found, "no zombie child of {parent} appeared");
    let r = s.call(
        "kill",
        json!({"job_id": job, "signal": "TERM", "timeout": 0.5}),
    );
    assert_eq!(r["terminated"], json!(false), "{r}");
    let detail = r["detail"]
        .as_str()
        .unwrap_or_else(|| panic!("no detail: {r}"));
    assert!(
        mentions(detail, &zombie) >= 1,
        "the zombie {zombie} is not named: {detail}"
    );
    // The parent is a survivor itself, and is named once more as the
    // zombie's parent.
    assert!(
        mentions(detail, &parent) >= 2,
        "the zombie's parent {parent} is not named: {detail}"
    );
    let r = s.call("kill", json!({"job_id": job, "signal": "KILL"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    s.finish(EXIT);
}

fn kill_reaches_an_orphaned_grandchild_holding_the_group_of_a_finished_job(t: Target) {
    let mut s = Server::started(t);
    let m = marker();
    let job = s.spawn_job(&format!("sleep {m} & echo grandchild $!; exit 0"));
    wait_output(&mut s, &job, "grandchild");
    assert_eq!(wait_terminal(&mut s, &job)["exit_code"], json!(0));
    assert!(
        marker_count(&mut s, &m) >= 1,
        "the grandchild is not running"
    );
    let r = s.call("kill", json!({"job_id": job, "signal": "TERM"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    assert!(
        r.get("already_terminated").is_none(),
        "the group was alive, so kill had work to do: {r}"
    );
    assert_eq!(r["signal_sent"], json!(15), "{r}");
    assert_eq!(r["result"]["state"], json!("success"), "{r}");
    assert_eq!(r["result"]["exit_code"], json!(0), "{r}");
    assert_eq!(
        marker_count(&mut s, &m),
        0,
        "terminated:true but the grandchild lives"
    );
    s.finish(EXIT);
}

fn kill_of_an_already_finished_job_reports_already_terminated_and_removes_it(t: Target) {
    let mut s = Server::started(t);
    let job = s.spawn_job("echo done");
    wait_terminal(&mut s, &job);
    let r = s.call("kill", json!({"job_id": job}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    assert_eq!(r["already_terminated"], json!(true), "{r}");
    assert!(
        r.get("signal_sent").is_none(),
        "no signal is sent to a job that is gone: {r}"
    );
    assert_eq!(r["result"]["state"], json!("success"), "{r}");
    assert_eq!(r["result"]["stdout"]["data"], json!("done\n"), "{r}");
    assert_eq!(
        s.call_err("kill", json!({"job_id": job})),
        format!("unknown job_id \"{job}\"")
    );
    s.finish(EXIT);
}

fn kill_after_the_job_was_killed_from_outside_reports_already_terminated(t: Target) {
    let mut s = Server::started(t);
    let job = s.spawn_job(&format!("echo pid $$; exec sleep {}", marker()));
    let out = wait_output(&mut s, &job, "pid");
    let pid = out.split_whitespace().nth(1).unwrap_or_default().to_owned();
    let r = s.exec(&format!("kill -9 {pid}"));
    assert_eq!(r["state"], json!("success"), "{r}");
    let st = wait_terminal(&mut s, &job);
    assert_eq!(st["signal"], json!("killed"), "{st}");
    let r = s.call("kill", json!({"job_id": job, "signal": "TERM"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    assert_eq!(r["already_terminated"], json!(true), "{r}");
    assert_eq!(r["result"]["state"], json!("error"), "{r}");
    assert_eq!(r["result"]["signal"], json!("killed"), "{r}");
    assert_eq!(r["result"]["exit_code"], json!(-1), "{r}");
    s.finish(EXIT);
}

// ---------------------------------------------------------------------------
// list_jobs
// ---------------------------------------------------------------------------

fn list_jobs_lists_jobs_oldest_first_and_drops_delivered_ones(t: Target) {
    let mut s = Server::started(t);
    let m = marker();
    assert!(listed(&mut s).is_empty());
    let a = s.spawn_job(&format!("sleep {m}"));
    let b = s.spawn_job("exit 3");
    let c = s.spawn_job(&format!("sleep {m}"));
    wait_terminal(&mut s, &b);
    let st = |id: &str, state: &str| (id.to_owned(), state.to_owned());
    assert_eq!(
        listed(&mut s),
        vec![st(&a, "running"), st(&b, "error"), st(&c, "running")]
    );
    // status and output never remove.
    s.call("output", json!({"job_id": b, "stdout": "all"}));
    assert_eq!(listed(&mut s).len(), 3);
    let w = s.call("wait", json!({"job_ids": [b]}));
    assert_eq!(w[0]["exit_code"], json!(3), "{w}");
    assert_eq!(listed(&mut s), vec![st(&a, "running"), st(&c, "running")]);
    s.call("kill", json!({"job_id": a, "signal": "KILL"}));
    assert_eq!(listed(&mut s), vec![st(&c, "running")]);
    let delivered = s.exec("true");
    assert_eq!(delivered["state"], json!("success"));
    assert_eq!(
        listed(&mut s),
        vec![st(&c, "running")],
        "a delivered blocking execute is listed"
    );
    let d = s.spawn_job("true");
    let used: HashSet<&str> = [a.as_str(), b.as_str(), c.as_str()].into();
    assert!(!used.contains(d.as_str()), "job id {d} was reused");
    wait_terminal(&mut s, &d);
    assert_eq!(listed(&mut s), vec![st(&c, "running"), st(&d, "success")]);
    s.finish(EXIT);
}

// ---------------------------------------------------------------------------
// Cancellation
// ---------------------------------------------------------------------------

fn cancelling_a_blocking_execute_answers_32800_and_leaves_no_process_of_it(t: Target) {
    let mut s = Server::started(t);
    let m = marker();
    let id = s.send_call("execute", json!({"command": format!("sleep {m}")}));
    assert!(
        wait_for(TIMEOUT, || marker_count(&mut s, &m) >= 1),
        "the job never started"
    );
    s.cancel(&id);
    assert_eq!(s.error_code(&id, TIMEOUT), -32800);
    assert!(
        wait_for(TIMEOUT, || marker_count(&mut s, &m) == 0),
        "a process of the cancelled execute survives"
    );
    assert!(
        listed(&mut s).is_empty(),
        "the cancelled job is still listed"
    );
    s.finish(EXIT);
}

fn cancelling_a_blocking_execute_kills_a_job_that_ignores_term_after_the_grace(t: Target) {
    let mut s = Server::started_with_env(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "1")]);
    let m = marker();
    let id = s.send_call(
        "execute",
        json!({"command": format!("trap '' TERM; sleep {m}; sleep {m}")}),
    );
    assert!(
        wait_for(TIMEOUT, || sleeping(&mut s, &m) >= 1),
        "the job never got to ignore TERM"
    );
    s.cancel(&id);
    assert_eq!(s.error_code(&id, TIMEOUT), -32800);
    assert!(
        wait_for(TIMEOUT, || marker_count(&mut s, &m) == 0),
        "the TERM-ignoring job survived its teardown"
    );
    assert!(listed(&mut s).is_empty());
    s.finish(EXIT);
}

fn cancelling_a_wait_answers_32800_and_keeps_the_jobs(t: Target) {
    let mut s = Server::started(t);
    let job = s.spawn_job(&format!("echo kept; sleep {}", marker()));
    let id = s.send_call("wait", json!({"job_ids": [job], "timeout": 60}));
    ping_works(&mut s); // the wait has been read and registered
    s.cancel(&id);
    assert_eq!(s.error_code(&id, TIMEOUT), -32800);
    assert_eq!(listed(&mut s), vec![(job.clone(), "running".to_owned())]);
    // The result was not lost: it is still delivered, once.
    let r = s.call(
        "kill",
        json!({"job_id": job, "signal": "KILL", "timeout": 10}),
    );
    assert_eq!(r["terminated"], json!(true), "{r}");
    assert_eq!(r["result"]["job_id"], json!(job), "{r}");
    s.finish(EXIT);
}

fn cancelling_a_kill_answers_32800_and_keeps_the_job(t: Target) {
    let mut s = Server::started(t);
    let (job, _) = spawn_term_ignoring(&mut s, &marker());
    let id = s.send_call(
        "kill",
        json!({"job_id": job, "signal": "TERM", "timeout": 60}),
    );
    ping_works(&mut s);
    s.cancel(&id);
    assert_eq!(s.error_code(&id, TIMEOUT), -32800);
    assert_eq!(listed(&mut s), vec![(job.clone(), "running".to_owned())]);
    assert_eq!(
        s.call("status", json!({"job_id": job}))["state"],
        json!("running")
    );
    let r = s.call("kill", json!({"job_id": job, "signal": "KILL"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    s.finish(EXIT);
}

fn cancelling_an_input_stuck_writing_answers_32800_and_keeps_the_job(t: Target) {
    let mut s = Server::started(t);
    // The job never reads stdin, so 4 MiB cannot fit in the pipe.
    let job = s.spawn_job(&format!("sleep {}", marker()));
    let id = s.send_call("input", json!({"job_id": job, "data": "x".repeat(4 << 20)}));
    ping_works(&mut s);
    s.cancel(&id);
    assert_eq!(s.error_code(&id, TIMEOUT), -32800);
    assert_eq!(listed(&mut s), vec![(job.clone(), "running".to_owned())]);
    let r = s.call("kill", json!({"job_id": job, "signal": "KILL"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    s.finish(EXIT);
}

fn unknown_late_double_and_type_mismatched_cancels_are_ignored(t: Target) {
    let mut s = Server::started(t);
    let job = s.spawn_job(&format!("sleep {}", marker()));
    let wait = |id: Value, timeout: f64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "wait", "arguments": {"job_ids": [job], "timeout": timeout}}})
    };

    // Unknown ids.
    s.cancel(&json!(987_654));
    s.cancel(&json!("no-such-request"));
    s.notify("notifications/cancelled", json!({}));
    ping_works(&mut s);

    // Type mismatch both ways: integer 4242 is not "4242", and vice versa.
    s.send(&wait(json!(4242), 1.5));
    s.send(&wait(json!("4243"), 1.5));
    s.cancel(&json!("4242"));
    s.cancel(&json!(4243));
    for id in [json!(4242), json!("4243")] {
        let r = s.response(&id, TIMEOUT);
        assert!(
            r.get("error").is_none(),
            "a cancel of the other id type cancelled {id}: {r}"
        );
        assert_eq!(
            tool_json(&r["result"]),
            json!([{"job_id": job, "state": "running"}]),
            "{r}"
        );
    }

    // Late: the request is answered; cancelling it now changes nothing.
    s.cancel(&json!(4242));
    // Double: two cancels, one answer.
    s.send(&wait(json!(4244), 60.0));
    s.cancel(&json!(4244));
    s.cancel(&json!(4244));
    assert_eq!(s.error_code(&json!(4244), TIMEOUT), -32800);
    ping_works(&mut s);
    let extra: Vec<Value> = drain(&mut s, Duration::from_millis(500))
        .into_iter()
        .filter(|m| {
            [json!(4242), json!("4243"), json!(4244)]
                .iter()
                .any(|id| m.get("id") == Some(id))
        })
        .collect();
    assert!(
        extra.is_empty(),
        "extra answers after late/double cancels: {extra:?}"
    );
    assert_eq!(
        listed(&mut s),
        vec![(job.clone(), "running".to_owned())],
        "a cancel touched the job"
    );
    s.call("kill", json!({"job_id": job, "signal": "KILL"}));
    s.finish(EXIT);
}

// ---------------------------------------------------------------------------
// Progress
// ---------------------------------------------------------------------------

const FAST_PROGRESS: (&str, &str) = ("MCP_EXEC_PROGRESS_INTERVAL", "0.2");

fn progress_of_a_blocking_execute_counts_up_and_stops_at_the_response(t: Target) {
    let mut s = Server::started_with_env(t, &[FAST_PROGRESS]);
    let token = json!("exec-progress");
    let id = send_call_with_progress(
        &mut s,
        "execute",
        json!({"command": "sleep 2; echo finished"}),
        token.clone(),
    );
    let (notes, r) = progress_until_response(&mut s, &id, &token);
    assert_eq!(
        tool_json(&r["result"])["stdout"]["data"],
        json!("finished\n"),
        "{r}"
    );
    assert_progress(&notes, "command still running", 3);
    let after: Vec<Value> = s
        .notifications(Duration::from_millis(800))
        .into_iter()
        .filter(|n| n["params"]["progressToken"] == token)
        .collect();
    assert!(after.is_empty(), "progress after the response: {after:?}");
    s.finish(EXIT);
}

fn progress_of_wait_and_kill_carries_their_messages_and_the_token_as_sent(t: Target) {
    let mut s = Server::started_with_env(t, &[FAST_PROGRESS]);
    let m = marker();

    let job = s.spawn_job(&format!("sleep {m}"));
    let token = json!(77);
    let id = send_call_with_progress(
        &mut s,
        "wait",
        json!({"job_ids": [job], "timeout": 1.5}),
        token.clone(),
    );
    let (notes, r) = progress_until_response(&mut s, &id, &token);
    assert_eq!(
        tool_json(&r["result"]),
        json!([{"job_id": job, "state": "running"}]),
        "{r}"
    );
    assert_progress(&notes, "waiting for jobs", 2);
    s.call("kill", json!({"job_id": job, "signal": "KILL"}));

    let (job, _) = spawn_term_ignoring(&mut s, &m);
    let token = json!("kill-exit");
    let id = send_call_with_progress(
        &mut s,
        "kill",
        json!({"job_id": job, "timeout": 1.5}),
        token.clone(),
    );
    let (notes, r) = progress_until_response(&mut s, &id, &token);
    assert_eq!(tool_json(&r["result"])["terminated"], json!(false), "{r}");
    assert_progress(&notes, "waiting for the process to exit", 2);
    s.call("kill", json!({"job_id": job, "signal": "KILL"}));

    let job = s.spawn_job(&format!(
        "(trap '' TERM; exec sleep {m}) & echo started; exit 0"
    ));
    wait_output(&mut s, &job, "started");
    assert!(
        wait_for(TIMEOUT, || sleeping(&mut s, &m) == 1),
        "the grandchild never got to ignore TERM"
    );
    wait_terminal(&mut s, &job);
    let token = json!("kill-drain");
    let id = send_call_with_progress(
        &mut s,
        "kill",
        json!({"job_id": job, "timeout": 1.5}),
        token.clone(),
    );
    let (notes, r) = progress_until_response(&mut s, &id, &token);
    assert_eq!(tool_json(&r["result"])["terminated"], json!(false), "{r}");
    assert_progress(&notes, "waiting for the process group to drain", 2);
    s.call("kill", json!({"job_id": job, "signal": "KILL"}));
    s.finish(EXIT);
}

fn no_progress_is_sent_without_a_progress_token(t: Target) {
    let mut s = Server::started_with_env(t, &[FAST_PROGRESS]);
    let id = s.send_call("execute", json!({"command": "sleep 1.5; echo finished"}));
    let r = s.response(&id, TIMEOUT);
    assert_eq!(
        tool_json(&r["result"])["stdout"]["data"],
        json!("finished\n"),
        "{r}"
    );
    let notes = s.notifications(Duration::from_millis(600));
    assert!(
        notes.is_empty(),
        "notifications without a progress token: {notes:?}"
    );
    s.finish(EXIT);
}

// ---------------------------------------------------------------------------
// Shutdown
// ---------------------------------------------------------------------------

fn eof_answers_every_in_flight_request_with_32800_and_exits_0_within_the_grace(t: Target) {
    let mut s = Server::started_with_env(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "1")]);
    let m = marker();
    let (stubborn, _) = spawn_term_ignoring(&mut s, &m);
    let sleeper = s.spawn_job(&format!("sleep {m}"));
    let execute = s.send_call("execute", json!({"command": format!("sleep {m}")}));
    let wait = s.send_call("wait", json!({"job_ids": [sleeper], "timeout": 60}));
    let kill = s.send_call(
        "kill",
        json!({"job_id": stubborn, "signal": "TERM", "timeout": 60}),
    );
    ping_works(&mut s); // all three are in flight
    assert!(wait_for(TIMEOUT, || host_marker_alive(&m)));
    s.close_stdin();
    for id in [execute, wait, kill] {
        assert_eq!(s.error_code(&id, TIMEOUT), -32800, "request {id} at EOF");
    }
    let status = s.wait_exit(EXIT);
    assert!(
        status.is_some_and(|st| st.success()),
        "exit after EOF: {status:?}"
    );
    assert!(
        wait_for(TIMEOUT, || !host_marker_alive(&m)),
        "a job outlived the server's shutdown"
    );
}

fn shutdown_on_signal(t: Target, signal: &str) {
    let mut s = Server::started_with_env(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "1")]);
    let m = marker();
    s.spawn_job(&format!("trap '' TERM; sleep {m}"));
    let execute = s.send_call("execute", json!({"command": format!("sleep {m}")}));
    ping_works(&mut s);
    assert!(wait_for(TIMEOUT, || host_marker_alive(&m)));
    let pid = s.server_host_pid().expect("the server's host pid");
    let sent = std::process::Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .status();
    assert!(
        sent.as_ref().is_ok_and(|st| st.success()),
        "kill -s {signal} {pid}: {sent:?}"
    );
    assert_eq!(s.error_code(&execute, TIMEOUT), -32800);
    let status = s.wait_exit(EXIT);
    assert!(
        status.is_some_and(|st| st.success()),
        "exit after SIG{signal}: {status:?}"
    );
    assert!(
        wait_for(TIMEOUT, || !host_marker_alive(&m)),
        "a job outlived the shutdown"
    );
}

/// The signals mcp-exec forwards to every running job's process group.
pub const FORWARDED: [&str; 5] = ["HUP", "USR1", "USR2", "WINCH", "CONT"];

/// Starts two jobs that trap every forwarded signal, then for each signal
/// calls `send(server, name)` and requires both jobs to see it.
pub fn forwarded_signals_reach_every_running_jobs_group(
    s: &mut Server,
    send: &dyn Fn(&Server, &str),
) {
    let traps: String = FORWARDED
        .iter()
        .map(|sig| format!("trap 'echo got-{sig}' {sig}; "))
        .collect();
    let jobs: Vec<String> = (0..2)
        .map(|_| s.spawn_job(&format!("{traps}echo ready; while :; do sleep 0.1; done")))
        .collect();
    for job in &jobs {
        wait_output(s, job, "ready");
    }
    for sig in FORWARDED {
        send(s, sig);
        for job in &jobs {
            wait_output(s, job, &format!("got-{sig}"));
        }
    }
    for job in &jobs {
        let r = s.call("kill", json!({"job_id": job, "signal": "KILL"}));
        assert_eq!(r["terminated"], json!(true), "{r}");
    }
}

/// The `SigIgn` mask (hexadecimal) of `/proc/<pid>/status`.
fn sigign_of(status: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or_else(|| panic!("no SigIgn line in {status:?}"))
}

/// Started as under `nohup` or from a backgrounding script (issue 19 §5):
/// the server inherits HUP, INT and QUIT ignored; its jobs must not.
fn a_job_has_every_signal_at_its_default_whatever_the_server_inherited(t: Target) {
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg("trap '' HUP INT QUIT; exec \"$0\" \"$@\"");
    if t == Target::Pid1 {
        command.args(["unshare", "--pid", "--fork", "--mount-proc"]);
    }
    command.arg(crate::support::binary());
    let mut s = Server::spawn_command(t, command);
    s.initialize("2024-11-05");
    let server = s.server_host_pid().expect("the server's pid");
    let status = std::fs::read_to_string(format!("/proc/{server}/status")).expect("its status");
    let inherited = (1 << 0) | (1 << 1) | (1 << 2);
    assert_eq!(
        sigign_of(&status) & inherited,
        inherited,
        "the server did not start with HUP, INT and QUIT ignored: {status}"
    );
    let r = s.exec("cat /proc/$$/status");
    let job = r["stdout"]["data"].as_str().expect("stdout");
    assert_eq!(sigign_of(job), 0, "the job's status: {job}");
    let r = s.exec("kill -HUP $$; exit 3");
    assert_eq!(r["state"], json!("error"), "{r}");
    assert_eq!(r["signal"], json!("hangup"), "{r}");
    assert_eq!(r["signal_number"], json!(1), "{r}");
}

fn signals_to_the_server_pid_are_forwarded_to_the_jobs(t: Target) {
    let mut s = Server::started(t);
    let pid = s
        .server_host_pid()
        .expect("the server's host pid")
        .to_string();
    forwarded_signals_reach_every_running_jobs_group(&mut s, &|_, sig| {
        let sent = std::process::Command::new("kill")
            .args(["-s", sig, &pid])
            .status();
        assert!(
            sent.as_ref().is_ok_and(|st| st.success()),
            "kill -s {sig} {pid}: {sent:?}"
        );
    });
    s.finish(EXIT);
}

// ---------------------------------------------------------------------------
// Concurrency and exactly-once
// ---------------------------------------------------------------------------

fn a_blocking_call_does_not_delay_ping_or_other_calls(t: Target) {
    let mut s = Server::started(t);
    let m = marker();
    let execute = s.send_call("execute", json!({"command": format!("sleep {m}")}));
    let job = s.spawn_job(&format!("sleep {m}"));
    let wait = s.send_call("wait", json!({"job_ids": [job], "timeout": 60}));
    ping_works(&mut s);
    assert_eq!(
        s.call("status", json!({"job_id": job}))["state"],
        json!("running")
    );
    let early: Vec<Value> = drain(&mut s, Duration::ZERO)
        .into_iter()
        .filter(|m| m.get("id") == Some(&execute) || m.get("id") == Some(&wait))
        .collect();
    assert!(
        early.is_empty(),
        "the blocking calls answered early: {early:?}"
    );
    s.cancel(&execute);
    s.cancel(&wait);
    assert_eq!(s.error_code(&execute, TIMEOUT), -32800);
    assert_eq!(s.error_code(&wait, TIMEOUT), -32800);
    s.finish(EXIT);
}

/// The full results of `job` that a tool response carries. A full result
/// has the captured streams (the jobs run with `capture: all`, so every
/// delivered result has a `stdout` slice, even an empty one); a running
/// entry, or a repeated id later in the same `wait`, has none.
fn deliveries(response: &Value, job: &str) -> Vec<Value> {
    let result = &response["result"];
    if response.get("error").is_some() || result["isError"] == json!(true) {
        return Vec::new();
    }
    let full = |v: &Value| v["job_id"] == json!(job) && v["stdout"]["total_bytes"].is_u64();
    match tool_json(result) {
        Value::Array(entries) => entries.into_iter().filter(|e| full(e)).collect(),
        v => Some(v["result"].clone()).filter(full).into_iter().collect(),
    }
}

fn kill_wait_and_duplicate_wait_races_deliver_each_result_exactly_once(t: Target) {
    let mut s = Server::started(t);
    let m = marker();
    let capture = json!({"on_success": "all", "on_error": "all"});
    for round in 0..200 {
        let tag = format!("round-{round}-");
        // Half the jobs end by themselves (racing kill's first look), half
        // only through the kill.
        let command = if round % 2 == 0 {
            format!("echo {tag}; sleep {m}")
        } else {
            format!("echo {tag}")
        };
        let r = s.call(
            "execute",
            json!({"command": command, "nowait": true, "capture": capture}),
        );
        let job = r["job_id"].as_str().unwrap_or_default().to_owned();
        let ids = [
            s.send_call(
                "kill",
                json!({"job_id": job, "signal": "TERM", "timeout": 20}),
            ),
            s.send_call("wait", json!({"job_ids": [job]})),
            s.send_call("wait", json!({"job_ids": [job, job]})),
        ];
        // Past the kill's own 20 s: a kill that saw the job survive answers
        // with the survivors, and the assertion below shows them.
        let responses: Vec<Value> = ids
            .iter()
            .map(|id| s.response(id, TIMEOUT + Duration::from_secs(10)))
            .collect();
        let delivered: Vec<Value> = responses.iter().flat_map(|r| deliveries(r, &job)).collect();
        assert_eq!(
            delivered.len(),
            1,
            "round {round}: the result of {job} was delivered {} times: {responses:#?}",
            delivered.len()
        );
        if delivered[0]["exit_code"] == json!(0) {
            assert_eq!(
                delivered[0]["stdout"]["data"],
                json!(format!("{tag}\n")),
                "round {round}"
            );
        }
    }
    assert!(listed(&mut s).is_empty(), "a result was never delivered");
    s.finish(EXIT);
}

fn three_hundred_concurrent_jobs_report_their_exact_exit_codes(t: Target) {
    let mut s = Server::started(t);
    let starts: Vec<Value> = (0..300)
        .map(|i| {
            s.send_call(
                "execute",
                json!({"command": format!("sleep 1; exit $(({i} % 256))"), "nowait": true}),
            )
        })
        .collect();
    let jobs: Vec<String> = starts
        .iter()
        .map(|id| {
            let r = s.response(id, TIMEOUT);
            tool_json(&r["result"])["job_id"]
                .as_str()
                .unwrap_or_else(|| panic!("no job id in {r}"))
                .to_owned()
        })
        .collect();
    let unique: HashSet<&String> = jobs.iter().collect();
    assert_eq!(unique.len(), 300, "job ids are not distinct");
    let waits: Vec<Value> = jobs
        .iter()
        .map(|j| s.send_call("wait", json!({"job_ids": [j], "timeout": 60})))
        .collect();
    for (i, (id, job)) in waits.iter().zip(&jobs).enumerate() {
        let r = s.response(id, Duration::from_secs(90));
        let entry = &tool_json(&r["result"])[0];
        assert_eq!(entry["job_id"], json!(job), "{r}");
        assert_eq!(entry["exit_code"], json!(i % 256), "job {i} ({job}): {r}");
        assert_eq!(
            entry["state"],
            json!(if i % 256 == 0 { "success" } else { "error" }),
            "{r}"
        );
    }
    assert!(listed(&mut s).is_empty());
    s.finish(EXIT);
}

// ---------------------------------------------------------------------------
// Orphans
// ---------------------------------------------------------------------------

fn a_burst_of_100_orphaned_background_processes_leaves_no_zombie(t: Target) {
    let mut s = Server::started(t);
    // A short sleep with a unique duration: `0.3` plus the marker's digits.
    let m = format!("0.3{}", marker().replace('.', ""));
    let starts: Vec<Value> = (0..100)
        .map(|_| {
            s.send_call(
                "execute",
                json!({"command": format!("sleep {m} & echo $!; exit 0"), "nowait": true}),
            )
        })
        .collect();
    let jobs: Vec<String> = starts
        .iter()
        .map(|id| {
            tool_json(&s.response(id, TIMEOUT)["result"])["job_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    for job in &jobs {
        let r = s.call("wait", json!({"job_ids": [job], "timeout": 30}));
        assert_eq!(r[0]["exit_code"], json!(0), "{r}");
        let pid = r[0]["stdout"]["data"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_owned();
        assert!(
            pid.parse::<u32>().is_ok(),
            "{job} did not start its background sleep: {r}"
        );
    }
    assert!(
        wait_for(Duration::from_secs(60), || marker_count(&mut s, &m) == 0),
        "the orphaned sleeps never ended"
    );
    let mut zombies = usize::MAX;
    assert!(
        wait_for(TIMEOUT, || {
            zombies = zombie_count(&mut s);
            zombies == 0
        }),
        "{zombies} zombies left after the orphans exited"
    );
    s.finish(EXIT);
}

// ---------------------------------------------------------------------------
// No fixed delay: a job is terminal when its direct child exits
// ---------------------------------------------------------------------------

fn a_blocking_execute_returns_when_the_child_exits_although_a_descendant_keeps_writing(t: Target) {
    let mut s = Server::started(t);
    // The writer outlives the 20 s response timeout (3000 × ≥10 ms), so an
    // implementation that waits for the pipe's EOF fails here. It ends on
    // SIGPIPE once the delivered job's pipes are closed.
    let r = s.exec("(i=0; while [ $i -lt 3000 ]; do echo x; sleep 0.01; i=$((i+1)); done) & echo first; exit 0");
    assert_eq!(r["state"], json!("success"), "{r}");
    let out = r["stdout"]["data"].as_str().unwrap_or_default();
    assert!(
        out.lines().any(|l| l == "first"),
        "stdout lacks what the child wrote before exiting: {out:?}"
    );
    s.finish(EXIT);
}

// ---------------------------------------------------------------------------
// Bad input: every bad line gets an error and the server keeps serving.
// ---------------------------------------------------------------------------

fn assert_parse_error(s: &mut Server, what: &str) {
    let m = s
        .next_message(TIMEOUT)
        .unwrap_or_else(|| panic!("no answer to {what}"));
    assert_eq!(m["error"]["code"], json!(-32700), "{what}: {m}");
    assert_eq!(
        m.get("id"),
        Some(&Value::Null),
        "{what}: a parse error has \"id\": null: {m}"
    );
}

fn garbage_lines_each_get_a_parse_error_and_the_server_keeps_serving(t: Target) {
    let mut s = Server::started(t);
    for line in [
        "not json",
        "{",
        r#"{"jsonrpc":"2.0","id":"#,
        "[1,",
        "\u{1}\u{2}",
        r#"{"id":1,"method":"ping"}}"#,
    ] {
        s.send_raw(line);
        assert_parse_error(&mut s, line);
    }
    s.send_bytes(b"\xff\xfe\xfd not utf-8\n");
    assert_parse_error(&mut s, "invalid UTF-8");
    ping_works(&mut s);
    assert_eq!(s.exec("echo alive")["stdout"]["data"], json!("alive\n"));
    s.finish(EXIT);
}

fn a_20_mib_line_is_parsed_under_the_default_limit(t: Target) {
    let mut s = Server::started(t);
    let big = 20usize << 20;
    let r = s.call(
        "execute",
        json!({"command": "wc -c", "stdin": "a".repeat(big), "close_stdin": true}),
    );
    assert_eq!(
        r["stdout"]["data"].as_str().map(str::trim),
        Some(big.to_string().as_str()),
        "{r}"
    );
    s.send_raw(&"x".repeat(big));
    assert_parse_error(&mut s, "20 MiB of garbage");
    ping_works(&mut s);
    s.finish(EXIT);
}

fn a_line_over_max_line_bytes_gets_a_parse_error_and_the_next_line_is_served(t: Target) {
    let mut s = Server::started_with_env(t, &[("MCP_EXEC_MAX_LINE_BYTES", "1024")]);
    let request = |pad: usize| json!({"jsonrpc": "2.0", "id": 9001, "method": "ping", "params": {"pad": "p".repeat(pad)}});
    s.send(&request(2000));
    assert_parse_error(&mut s, "a 2 KB line over a 1 KiB limit");
    // The same request under the limit is served: the length was the reason.
    s.send(&request(900));
    let r = s.response(&json!(9001), TIMEOUT);
    assert_eq!(r["result"], json!({}), "{r}");
    ping_works(&mut s);
    s.finish(EXIT);
}

fn deeply_nested_json_gets_an_error_and_the_server_keeps_serving(t: Target) {
    let mut s = Server::started(t);
    let depth = 100_000;
    s.send_raw(&"[".repeat(depth));
    assert_parse_error(&mut s, "100000 unclosed [");
    s.send_raw(&format!("{}{}", "[".repeat(depth), "]".repeat(depth)));
    assert_parse_error(&mut s, "100000 nested arrays");
    s.send_raw(&format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"ping","params":{{"a":{}{}}}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    ));
    assert_parse_error(&mut s, "a request with 100000 nested arrays in its params");
    ping_works(&mut s);
    s.finish(EXIT);
}

fn wrong_argument_types_get_errors_and_the_server_keeps_serving(t: Target) {
    let mut s = Server::started(t);
    let job = s.spawn_job(&format!("sleep {}", marker()));
    let r = s.request("tools/call", json!([]));
    assert_eq!(r["error"]["code"], json!(-32602), "array params: {r}");
    for (tool, args) in [
        ("execute", json!({"command": 5})),
        ("execute", json!({"command": "true", "nowait": "yes"})),
        ("execute", json!({"command": "true", "env": {"A": 1}})),
        ("execute", json!({"command": "true", "env": ["A=1"]})),
        ("execute", json!({"command": "true", "cwd": 7})),
        ("wait", json!({"job_ids": job})),
        ("wait", json!({"job_ids": [1, 2]})),
        ("wait", json!({"job_ids": [job], "timeout": "soon"})),
        ("kill", json!({"job_id": 7})),
        ("kill", json!({"job_id": job, "timeout": "soon"})),
        ("kill", json!({"job_id": job, "signal": ["TERM"]})),
        ("input", json!({"job_id": job, "data": 5})),
        ("input", json!({"job_id": job, "data": "", "close": "yes"})),
        ("output", json!({"job_id": job, "stdout": 5})),
        ("status", json!({"job_id": ["job-1"]})),
    ] {
        let id = s.send_call(tool, args.clone());
        let r = s.response(&id, TIMEOUT);
        let failed = r.get("error").is_some() || r["result"]["isError"] == json!(true);
        assert!(failed, "{tool} {args} should fail: {r}");
        ping_works(&mut s);
    }
    // Nothing was started, nothing was killed.
    assert_eq!(listed(&mut s), vec![(job.clone(), "running".to_owned())]);
    s.call("kill", json!({"job_id": job, "signal": "KILL"}));
    s.finish(EXIT);
}

crate::parity!(
    kill_with_term_ends_the_job_and_delivers_its_result,
    kill_with_signal_9_as_a_number_string_kills_the_job,
    kill_assured_escalates_to_sigkill_on_a_job_that_ignores_term,
    kill_assured_does_not_escalate_when_term_is_enough,
    kill_with_timeout_0_reports_not_terminated_with_a_detail_and_keeps_the_job,
    kill_survivor_detail_names_the_running_process_its_comm_and_state,
    kill_survivor_detail_names_group_members_that_outlive_a_finished_child,
    kill_survivor_detail_names_the_living_parent_of_an_unreaped_zombie,
    kill_reaches_an_orphaned_grandchild_holding_the_group_of_a_finished_job,
    kill_of_an_already_finished_job_reports_already_terminated_and_removes_it,
    kill_after_the_job_was_killed_from_outside_reports_already_terminated,
    list_jobs_lists_jobs_oldest_first_and_drops_delivered_ones,
    cancelling_a_blocking_execute_answers_32800_and_leaves_no_process_of_it,
    cancelling_a_blocking_execute_kills_a_job_that_ignores_term_after_the_grace,
    cancelling_a_wait_answers_32800_and_keeps_the_jobs,
    cancelling_a_kill_answers_32800_and_keeps_the_job,
    cancelling_an_input_stuck_writing_answers_32800_and_keeps_the_job,
    unknown_late_double_and_type_mismatched_cancels_are_ignored,
    progress_of_a_blocking_execute_counts_up_and_stops_at_the_response,
    progress_of_wait_and_kill_carries_their_messages_and_the_token_as_sent,
    no_progress_is_sent_without_a_progress_token,
    eof_answers_every_in_flight_request_with_32800_and_exits_0_within_the_grace,
    a_blocking_call_does_not_delay_ping_or_other_calls,
    kill_wait_and_duplicate_wait_races_deliver_each_result_exactly_once,
    three_hundred_concurrent_jobs_report_their_exact_exit_codes,
    a_burst_of_100_orphaned_background_processes_leaves_no_zombie,
    a_blocking_execute_returns_when_the_child_exits_although_a_descendant_keeps_writing,
    garbage_lines_each_get_a_parse_error_and_the_server_keeps_serving,
    a_20_mib_line_is_parsed_under_the_default_limit,
    a_line_over_max_line_bytes_gets_a_parse_error_and_the_next_line_is_served,
    deeply_nested_json_gets_an_error_and_the_server_keeps_serving,
    wrong_argument_types_get_errors_and_the_server_keeps_serving,
);

/// Signals sent to the server's host pid: TERM, INT and QUIT shut it down
/// gracefully, HUP, USR1, USR2, WINCH and CONT reach every job. The container
/// targets get theirs through podman (tests/containers.rs).
mod server_signals {
    use super::*;

    macro_rules! signal_tests {
        ($($name:ident: $target:ident, $signal:literal;)*) => {$(
            #[test]
            fn $name() {
                if Target::$target.available() {
                    shutdown_on_signal(Target::$target, $signal);
                }
            }
        )*};
    }

    signal_tests! {
        sigterm_to_the_bare_server_shuts_it_down_gracefully: Bare, "TERM";
        sigint_to_the_bare_server_shuts_it_down_gracefully: Bare, "INT";
        sigquit_to_the_bare_server_shuts_it_down_gracefully: Bare, "QUIT";
        sigterm_to_the_server_as_pid_1_shuts_it_down_gracefully: Pid1, "TERM";
        sigint_to_the_server_as_pid_1_shuts_it_down_gracefully: Pid1, "INT";
        sigquit_to_the_server_as_pid_1_shuts_it_down_gracefully: Pid1, "QUIT";
    }

    #[test]
    fn a_job_of_a_bare_server_started_with_hup_int_and_quit_ignored_has_every_signal_at_its_default()
     {
        if Target::Bare.available() {
            a_job_has_every_signal_at_its_default_whatever_the_server_inherited(Target::Bare);
        }
    }

    #[test]
    fn a_job_of_the_server_as_pid_1_started_with_hup_int_and_quit_ignored_has_every_signal_at_its_default()
     {
        if Target::Pid1.available() {
            a_job_has_every_signal_at_its_default_whatever_the_server_inherited(Target::Pid1);
        }
    }

    #[test]
    fn hup_usr1_usr2_winch_and_cont_to_the_bare_server_reach_every_job() {
        if Target::Bare.available() {
            signals_to_the_server_pid_are_forwarded_to_the_jobs(Target::Bare);
        }
    }

    #[test]
    fn hup_usr1_usr2_winch_and_cont_to_the_server_as_pid_1_reach_every_job() {
        if Target::Pid1.available() {
            signals_to_the_server_pid_are_forwarded_to_the_jobs(Target::Pid1);
        }
    }
}
