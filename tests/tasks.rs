//! MCP Tasks, 2025-11-25 format (SEP-1686; docs/tasks.md) end to end: the
//! capability and `execute`'s `execution` field, a task-augmented
//! `execute` answered at once, `tasks/get`, `tasks/result` (blocking, then
//! identical on every call), `tasks/list`, `tasks/cancel` (cancelled before
//! the answer, then the verified group kill), `notifications/tasks/status`,
//! progress for the task's life, the job the task owns (`wait` refuses it;
//! `status`, `output`, `kill` work), the TTL and the cap; and that older
//! revisions see none of it.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Server, TIMEOUT, Target, tool_json, wait_for};

const REV: &str = "2025-11-25";

fn started(t: Target, env: &[(&str, &str)]) -> Server {
    Server::started_in(t, env, REV)
}

/// A task-augmented `execute`; returns the whole `result`.
fn create(s: &mut Server, args: Value, task: Value) -> Value {
    let r = s.request(
        "tools/call",
        json!({"name": "execute", "arguments": args, "task": task}),
    );
    assert!(r.get("error").is_none(), "create failed: {r}");
    r["result"].clone()
}

fn task_id(created: &Value) -> String {
    created["task"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned()
}

fn get(s: &mut Server, id: &str) -> Value {
    let r = s.request("tasks/get", json!({"taskId": id}));
    assert!(r.get("error").is_none(), "tasks/get failed: {r}");
    r["result"].clone()
}

fn is_iso_8601(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|t| humantime_like(t) && t.ends_with('Z') && t.contains('T'))
}

fn humantime_like(t: &str) -> bool {
    t.len() >= 20 && t.as_bytes()[4] == b'-' && t.as_bytes()[7] == b'-'
}

fn a_2025_11_25_session_declares_tasks_and_only_execute_may_run_as_one(t: Target) {
    let mut s = Server::start_with_env(t, &[]);
    let init = s.initialize(REV);
    assert_eq!(
        init["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    let tools = s.request("tools/list", json!({}))["result"]["tools"].clone();
    for tool in tools.as_array().unwrap() {
        if tool["name"] == "execute" {
            assert_eq!(tool["execution"], json!({"taskSupport": "optional"}));
        } else {
            assert!(tool.get("execution").is_none(), "{tool}");
        }
    }
    let r = s.request(
        "tools/call",
        json!({"name": "list_jobs", "arguments": {}, "task": {}}),
    );
    assert_eq!(r["error"]["code"], json!(-32601), "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not support task-augmented calls"),
        "{r}"
    );
}

fn older_revisions_see_no_tasks_and_run_a_task_param_as_a_plain_call(t: Target) {
    for rev in ["2024-11-05", "2025-03-26", "2025-06-18"] {
        let mut s = Server::start_with_env(t, &[]);
        let init = s.initialize(rev);
        assert!(init["capabilities"].get("tasks").is_none(), "{rev}: {init}");
        let tools = s.request("tools/list", json!({}))["result"]["tools"].clone();
        assert!(tools[0].get("execution").is_none(), "{rev}");
        let r = s.request(
            "tools/call",
            json!({"name": "execute", "arguments": {"command": "echo plain"}, "task": {}}),
        );
        assert!(r["result"].get("task").is_none(), "{rev}: {r}");
        assert_eq!(
            tool_json(&r["result"])["stdout"]["data"],
            json!("plain\n"),
            "{rev}"
        );
        for method in ["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"] {
            let r = s.request(method, json!({"taskId": "0".repeat(32)}));
            assert_eq!(r["error"]["code"], json!(-32601), "{rev} {method}: {r}");
        }
    }
}

fn a_task_is_answered_at_once_and_its_result_is_identical_on_every_call(t: Target) {
    let mut s = started(t, &[]);
    let created = create(
        &mut s,
        json!({"command": "read line; echo got $line", "stdin": "x\n", "close_stdin": true}),
        json!({"ttl": 60000}),
    );
    let task = &created["task"];
    let id = task_id(&created);
    assert_eq!(id.len(), 32, "{id}");
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
    assert_eq!(task["status"], json!("working"), "{created}");
    assert_eq!(task["ttl"], json!(60000));
    assert_eq!(task["pollInterval"], json!(1000));
    assert!(is_iso_8601(&task["createdAt"]) && is_iso_8601(&task["lastUpdatedAt"]));
    let hint = created["_meta"]["io.modelcontextprotocol/model-immediate-response"]
        .as_str()
        .expect("the immediate-response hint");
    assert!(hint.contains("job-1") && hint.contains(&id), "{hint}");

    let first = s.request("tasks/result", json!({"taskId": id}));
    let result = &first["result"];
    assert_eq!(result["isError"], json!(false), "{first}");
    assert_eq!(
        result["structuredContent"]["stdout"]["data"],
        json!("got x\n")
    );
    assert_eq!(result["structuredContent"]["job_id"], json!("job-1"));
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"],
        json!({"taskId": id})
    );
    let again = s.request("tasks/result", json!({"taskId": id}));
    assert_eq!(again["result"], first["result"], "identical on every call");

    let now = get(&mut s, &id);
    assert_eq!(now["status"], json!("completed"), "{now}");
    assert!(
        now.get("_meta").is_none(),
        "no related-task meta in tasks/get"
    );
    let listed = s.request("tasks/list", json!({}))["result"]["tasks"].clone();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["taskId"], json!(id));
    let notes = s.notifications(Duration::from_millis(100));
    assert!(
        notes
            .iter()
            .any(|n| n["method"] == "notifications/tasks/status"
                && n["params"]["taskId"] == json!(id)
                && n["params"]["status"] == "completed"),
        "{notes:?}"
    );
}

fn tasks_result_blocks_until_the_job_ends(t: Target) {
    let mut s = started(t, &[]);
    let created = create(
        &mut s,
        json!({"command": "sleep 0.4; echo late"}),
        json!({}),
    );
    let id = task_id(&created);
    assert_eq!(get(&mut s, &id)["status"], json!("working"));
    let waiting = s.send_request("tasks/result", json!({"taskId": id}));
    let r = s.response(&waiting, TIMEOUT);
    assert_eq!(
        r["result"]["structuredContent"]["stdout"]["data"],
        json!("late\n"),
        "{r}"
    );
    assert_eq!(get(&mut s, &id)["status"], json!("completed"));
}

fn the_job_is_owned_by_its_task_wait_refuses_it_status_output_and_kill_work(t: Target) {
    let mut s = started(t, &[]);
    let created = create(
        &mut s,
        json!({"command": "echo started; sleep 60"}),
        json!({}),
    );
    let id = task_id(&created);
    let text = s.call_err("wait", json!({"job_ids": ["job-1"], "timeout": 1}));
    assert_eq!(
        text,
        format!(
            "job \"job-1\" is owned by task {id}: the task delivers its result (status, output and kill work)"
        )
    );
    assert_eq!(
        s.call("status", json!({"job_id": "job-1"}))["state"],
        json!("running")
    );
    assert!(wait_for(TIMEOUT, || {
        s.call("output", json!({"job_id": "job-1", "stdout": "all"}))["stdout"]["data"]
            == json!("started\n")
    }));
    let killed = s.call("kill", json!({"job_id": "job-1"}));
    assert!(
        killed.get("result_delivered_elsewhere").is_some() || killed["state"].is_string(),
        "{killed}"
    );
    let r = s.request("tasks/result", json!({"taskId": id}));
    let job = &r["result"]["structuredContent"];
    assert_eq!(job["job_id"], json!("job-1"), "{r}");
    assert_eq!(job["cause"], json!("killed"), "{r}");
    // The result stays with the task: the job is still there to look at.
    assert_eq!(
        s.call("status", json!({"job_id": "job-1"}))["state"],
        json!("error")
    );
    assert_eq!(get(&mut s, &id)["status"], json!("completed"));
}

fn tasks_cancel_is_cancelled_before_the_answer_then_the_group_is_verified_dead(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "0.5")]);
    // A group with a child that ignores TERM: ASSURED must reach KILL.
    let created = create(
        &mut s,
        json!({"command": "sh -c 'trap \"\" TERM; echo $$; sleep 60' & wait"}),
        json!({}),
    );
    let id = task_id(&created);
    let mut pid = None;
    assert!(wait_for(TIMEOUT, || {
        let out = s.call("output", json!({"job_id": "job-1", "stdout": "all"}));
        pid = out["stdout"]["data"]
            .as_str()
            .and_then(|o| o.trim().parse::<i32>().ok());
        pid.is_some()
    }));
    let r = s.request("tasks/cancel", json!({"taskId": id}));
    assert_eq!(r["result"]["status"], json!("cancelled"), "{r}");
    assert_eq!(r["result"]["taskId"], json!(id));
    assert!(r["result"].get("_meta").is_none());
    let mut report = String::new();
    assert!(wait_for(TIMEOUT, || {
        let now = get(&mut s, &id);
        report = now["statusMessage"].as_str().unwrap_or("").to_owned();
        report.contains("verified") || report.contains("still alive")
    }));
    assert!(
        report.contains("dead") && report.contains("KILL"),
        "{report}"
    );
    assert_eq!(get(&mut s, &id)["status"], json!("cancelled"), "sticky");
    // The pid is the job's own namespace's: checkable from here on the bare target.
    if matches!(t, Target::Bare) {
        let alive = std::path::Path::new(&format!("/proc/{}", pid.unwrap())).exists();
        assert!(!alive, "the TERM-ignoring child is dead");
    }
    // Cancellation removes the job and its result.
    let gone = s.call_err("status", json!({"job_id": "job-1"}));
    assert!(gone.contains("job-1"), "{gone}");
    let r = s.request("tasks/result", json!({"taskId": id}));
    assert_eq!(r["error"]["code"], json!(-32800), "{r}");
    let r = s.request("tasks/cancel", json!({"taskId": id}));
    assert_eq!(
        r["error"]["code"],
        json!(-32602),
        "cancelling a terminal task: {r}"
    );
}

fn an_is_error_result_makes_the_task_failed(t: Target) {
    let mut s = started(t, &[]);
    let created = create(&mut s, json!({"command": "   "}), json!({}));
    let id = task_id(&created);
    let r = s.request("tasks/result", json!({"taskId": id}));
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert_eq!(get(&mut s, &id)["status"], json!("failed"));
    // An exit code is data, not an error.
    let created = create(&mut s, json!({"command": "exit 3"}), json!({}));
    let id = task_id(&created);
    let r = s.request("tasks/result", json!({"taskId": id}));
    assert_eq!(
        r["result"]["structuredContent"]["exit_code"],
        json!(3),
        "{r}"
    );
    assert_eq!(get(&mut s, &id)["status"], json!("completed"));
}

fn unknown_tasks_are_invalid_params_and_another_requestor_sees_none(t: Target) {
    let mut s = started(t, &[]);
    for bad in [
        json!({"taskId": "f".repeat(32)}),
        json!({"taskId": "job-1"}),
        json!({}),
    ] {
        for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
            let r = s.request(method, bad.clone());
            assert_eq!(r["error"]["code"], json!(-32602), "{method} {bad}: {r}");
        }
    }
    let r = s.request("tasks/list", json!({"cursor": "nonsense"}));
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
}

fn the_ttl_is_capped_and_its_expiry_removes_the_task_and_its_job(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_TASK_TTL", "1")]);
    let created = create(
        &mut s,
        json!({"command": "true"}),
        json!({"ttl": 99_999_999}),
    );
    assert_eq!(
        created["task"]["ttl"],
        json!(1000),
        "capped at MCP_EXEC_TASK_TTL"
    );
    let id = task_id(&created);
    s.request("tasks/result", json!({"taskId": id}));
    assert!(s.call("status", json!({"job_id": "job-1"}))["state"].is_string());
    assert!(wait_for(TIMEOUT, || {
        s.request("tasks/get", json!({"taskId": id}))["error"]["code"] == json!(-32602)
    }));
    let gone = s.call_err("status", json!({"job_id": "job-1"}));
    assert!(gone.contains("job-1"), "{gone}");
}

fn live_tasks_are_capped_with_a_clear_error(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_MAX_TASKS", "1")]);
    create(&mut s, json!({"command": "sleep 30"}), json!({}));
    let r = s.request(
        "tools/call",
        json!({"name": "execute", "arguments": {"command": "true"}, "task": {}}),
    );
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("too many tasks") && message.contains("MCP_EXEC_MAX_TASKS"),
        "{r}"
    );
}

fn a_cancelled_task_frees_its_slot_at_once_and_still_answers_cancelled(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_MAX_TASKS", "1")]);
    let first = task_id(&create(&mut s, json!({"command": "sleep 30"}), json!({})));
    let r = s.request("tasks/cancel", json!({"taskId": first}));
    assert_eq!(r["result"]["status"], json!("cancelled"), "{r}");
    // The slot frees once the job is torn down (a sleep dies of TERM).
    let mut second = Value::Null;
    assert!(
        wait_for(Duration::from_secs(2), || {
            second = s.request(
                "tools/call",
                json!({"name": "execute", "arguments": {"command": "sleep 30"}, "task": {}}),
            );
            second["result"]["task"]["taskId"].is_string()
        }),
        "a new task is still refused after the cancel: {second}"
    );
    assert_eq!(get(&mut s, &first)["status"], json!("cancelled"));
    // The new task holds a job: the cap is still one.
    let r = s.request(
        "tools/call",
        json!({"name": "execute", "arguments": {"command": "true"}, "task": {}}),
    );
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("1 hold a job or a result") && message.contains("tasks/cancel"),
        "{r}"
    );
}

fn progress_continues_for_the_tasks_life(t: Target) {
    let mut s = started(t, &[("MCP_EXEC_PROGRESS_INTERVAL", "0.1")]);
    let r = s.request(
        "tools/call",
        json!({"name": "execute", "arguments": {"command": "sleep 0.5"}, "task": {},
               "_meta": {"progressToken": "p1"}}),
    );
    let id = task_id(&r["result"]);
    s.request("tasks/result", json!({"taskId": id}));
    let notes = s.notifications(Duration::from_millis(300));
    let ticks: Vec<&Value> = notes
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(ticks.len() >= 2, "{notes:?}");
    assert!(
        ticks.iter().all(|n| n["params"]["progressToken"] == "p1"
            && n["params"]["message"] == "job-1 still running")
    );
}

// ---------------------------------------------------------------------------
// The 2026-07-28 extension (SEP-2663).
// ---------------------------------------------------------------------------

/// A 2026-07-28 request's `_meta`, declaring the Tasks extension or not.
fn modern_meta(tasks: bool) -> Value {
    let extensions = if tasks {
        json!({"io.modelcontextprotocol/tasks": {}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
    })
}

fn modern(s: &mut Server, method: &str, mut params: Value, tasks: bool) -> Value {
    params["_meta"] = modern_meta(tasks);
    s.request(method, params)
}

fn the_2026_server_lists_the_extension_and_a_yielding_execute_becomes_a_task(t: Target) {
    let mut s = Server::start_with_env(t, &[]);
    let d = modern(&mut s, "server/discover", json!({}), true);
    assert_eq!(
        d["result"]["capabilities"]["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}}),
        "{d}"
    );
    // Ends before it would yield: its result, as always.
    let quick = modern(
        &mut s,
        "tools/call",
        json!({"name": "execute", "arguments": {"command": "echo quick"}}),
        true,
    );
    assert_eq!(quick["result"]["resultType"], json!("complete"), "{quick}");
    assert_eq!(
        quick["result"]["structuredContent"]["stdout"]["data"],
        json!("quick\n")
    );
    // Would yield: a task instead of `yielded: true`.
    let r = modern(
        &mut s,
        "tools/call",
        json!({"name": "execute", "arguments": {"command": "sleep 0.6; echo slow", "yield_after": 0.1}}),
        true,
    );
    let task = &r["result"];
    assert_eq!(task["resultType"], json!("task"), "{r}");
    assert_eq!(task["status"], json!("working"));
    assert!(
        task["ttlMs"].is_u64() && task["pollIntervalMs"].is_u64(),
        "{r}"
    );
    assert!(task.get("yielded").is_none());
    let id = task["taskId"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 32);
    // A client that did not declare the extension gets the yield.
    let plain = modern(
        &mut s,
        "tools/call",
        json!({"name": "execute", "arguments": {"command": "sleep 0.5", "yield_after": 0.1}}),
        false,
    );
    assert_eq!(
        tool_json(&plain["result"])["yielded"],
        json!(true),
        "{plain}"
    );
    // tasks/get inlines the result once it is there, without related-task meta.
    let mut done = Value::Null;
    assert!(wait_for(TIMEOUT, || {
        done = modern(&mut s, "tasks/get", json!({"taskId": id}), true)["result"].clone();
        done["status"] == "completed"
    }));
    assert_eq!(done["resultType"], json!("complete"));
    assert_eq!(
        done["result"]["structuredContent"]["stdout"]["data"],
        json!("slow\n"),
        "{done}"
    );
    assert!(done["result"].get("_meta").is_none(), "{done}");
    // Absent in this era.
    for method in ["tasks/result", "tasks/list"] {
        let r = modern(&mut s, method, json!({"taskId": id}), true);
        assert_eq!(r["error"]["code"], json!(-32601), "{method}: {r}");
    }
    let r = modern(
        &mut s,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {}}),
        true,
    );
    assert_eq!(r["result"]["resultType"], json!("complete"), "{r}");
    let r = modern(&mut s, "tasks/get", json!({"taskId": "0".repeat(32)}), true);
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    // The extension's methods need the extension declared on the request.
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let r = modern(&mut s, method, json!({"taskId": id}), false);
        assert_eq!(r["error"]["code"], json!(-32021), "{method}: {r}");
        assert_eq!(
            r["error"]["data"]["requiredCapabilities"]["extensions"],
            json!({"io.modelcontextprotocol/tasks": {}}),
            "{r}"
        );
    }
}

fn a_2026_cancel_is_acknowledged_and_the_group_is_verified_dead(t: Target) {
    let mut s = Server::start_with_env(t, &[]);
    let r = modern(
        &mut s,
        "tools/call",
        json!({"name": "execute", "arguments": {"command": "sleep 60", "yield_after": 0.1}}),
        true,
    );
    let id = r["result"]["taskId"].as_str().expect("a task").to_owned();
    let r = modern(&mut s, "tasks/cancel", json!({"taskId": id}), true);
    assert_eq!(r["result"]["resultType"], json!("complete"), "{r}");
    assert!(
        r["result"].get("status").is_none(),
        "an empty acknowledgement: {r}"
    );
    let mut now = Value::Null;
    assert!(wait_for(TIMEOUT, || {
        now = modern(&mut s, "tasks/get", json!({"taskId": id}), true)["result"].clone();
        now["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("verified"))
    }));
    assert_eq!(now["status"], json!("cancelled"), "{now}");
    let notes = s.notifications(Duration::from_millis(100));
    assert!(
        !notes
            .iter()
            .any(|n| n["method"] == "notifications/tasks/status"),
        "the extension pushes only to subscriptions/listen: {notes:?}"
    );
}

fn subscriptions_listen_streams_notifications_tasks_until_terminal(t: Target) {
    let mut s = Server::start_with_env(t, &[]);
    let r = modern(
        &mut s,
        "tools/call",
        json!({"name": "execute", "arguments": {"command": "sleep 0.5", "yield_after": 0.1}}),
        true,
    );
    let id = r["result"]["taskId"].as_str().expect("a task").to_owned();
    let mut params = json!({"notifications": {"taskIds": [id, "f".repeat(32)]}});
    params["_meta"] = modern_meta(true);
    let listen = s.send_request("subscriptions/listen", params);
    let done = s.response(&listen, TIMEOUT);
    assert_eq!(done["result"]["resultType"], json!("complete"), "{done}");
    let notes = s.notifications(Duration::from_millis(50));
    let ack = notes
        .iter()
        .find(|n| n["method"] == "notifications/subscriptions/acknowledged")
        .expect("acknowledged");
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([id]),
        "only its own tasks"
    );
    let last = notes
        .iter()
        .rfind(|n| n["method"] == "notifications/tasks")
        .expect("notifications/tasks");
    assert_eq!(last["params"]["status"], json!("completed"), "{last}");
    assert!(
        last["params"]["result"]["structuredContent"].is_object(),
        "{last}"
    );
}

crate::parity!(
    the_2026_server_lists_the_extension_and_a_yielding_execute_becomes_a_task,
    a_2026_cancel_is_acknowledged_and_the_group_is_verified_dead,
    subscriptions_listen_streams_notifications_tasks_until_terminal,
    a_2025_11_25_session_declares_tasks_and_only_execute_may_run_as_one,
    older_revisions_see_no_tasks_and_run_a_task_param_as_a_plain_call,
    a_task_is_answered_at_once_and_its_result_is_identical_on_every_call,
    tasks_result_blocks_until_the_job_ends,
    the_job_is_owned_by_its_task_wait_refuses_it_status_output_and_kill_work,
    tasks_cancel_is_cancelled_before_the_answer_then_the_group_is_verified_dead,
    an_is_error_result_makes_the_task_failed,
    unknown_tasks_are_invalid_params_and_another_requestor_sees_none,
    the_ttl_is_capped_and_its_expiry_removes_the_task_and_its_job,
    live_tasks_are_capped_with_a_clear_error,
    a_cancelled_task_frees_its_slot_at_once_and_still_answers_cancelled,
    progress_continues_for_the_tasks_life,
);
