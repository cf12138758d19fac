//! JSON-RPC framing and the MCP methods over stdio: initialize and version
//! negotiation, ping, tools/list, the error codes, ids, notifications.
//!
//! Framing does not depend on where the server runs, so these tests use the
//! bare binary only; `tools.rs` and `capture.rs` cover the targets.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Server, TIMEOUT, Target, tool_json};

/// How long to listen for a message that must not come.
const SILENCE: Duration = Duration::from_millis(300);

/// The next message, which must arrive.
fn next(s: &mut Server) -> Value {
    s.next_message(TIMEOUT).expect("a message from the server")
}

fn assert_error(msg: &Value, id: &Value, code: i64) {
    assert_eq!(msg["jsonrpc"], json!("2.0"), "{msg}");
    assert_eq!(&msg["id"], id, "{msg}");
    assert!(msg.get("result").is_none(), "{msg}");
    assert_eq!(msg["error"]["code"], json!(code), "{msg}");
    assert!(msg["error"]["message"].is_string(), "{msg}");
}

/// A ping must still be answered (the server kept serving), and nothing else
/// may arrive before its answer.
fn assert_still_serving(s: &mut Server) {
    let id = s.send_request("ping", json!({}));
    let msg = next(s);
    assert_eq!(msg["id"], id, "expected the ping answer first, got {msg}");
    assert_eq!(msg["result"], json!({}));
}

#[test]
fn initialize_answers_with_server_info_and_the_tools_capability() {
    let mut s = Server::start(Target::Bare);
    let id = s.send_request(
        "initialize",
        json!({"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    let r = s.response(&id, TIMEOUT);
    assert_eq!(r["jsonrpc"], json!("2.0"));
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(
        r["result"],
        json!({
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "mcp-exec", "version": env!("CARGO_PKG_VERSION")},
        })
    );
    // notifications/initialized gets no reply: the ping answer comes next.
    s.notify("notifications/initialized", json!({}));
    assert_still_serving(&mut s);
}

#[test]
fn each_supported_protocol_version_is_echoed_and_an_unknown_one_gets_the_latest() {
    for (asked, answered) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
        ("not a version", "2025-11-25"),
    ] {
        let mut s = Server::start(Target::Bare);
        let id = s.send_request(
            "initialize",
            json!({"protocolVersion": asked, "capabilities": {}}),
        );
        let r = s.response(&id, TIMEOUT);
        assert!(r.get("error").is_none(), "asking for {asked}: {r}");
        assert_eq!(
            r["result"]["protocolVersion"],
            json!(answered),
            "asking for {asked}"
        );
        assert_eq!(r["result"]["serverInfo"]["name"], json!("mcp-exec"));
    }
}

#[test]
fn ping_answers_an_empty_object_with_the_same_id() {
    let mut s = Server::started(Target::Bare);
    s.send_raw(r#"{"jsonrpc":"2.0","id":"p-1","method":"ping"}"#);
    let r = s.response(&json!("p-1"), TIMEOUT);
    assert_eq!(r, json!({"jsonrpc": "2.0", "id": "p-1", "result": {}}));
}

#[test]
fn a_garbage_line_gets_a_parse_error_with_a_null_id_and_the_server_keeps_serving() {
    let mut s = Server::started(Target::Bare);
    for garbage in [
        "this is not json",
        r#"{"jsonrpc":"2.0","id":7,"method":"ping""#,
        "}{",
        "[1,",
    ] {
        s.send_raw(garbage);
        let msg = next(&mut s);
        assert_error(&msg, &Value::Null, -32700);
    }
    // Invalid UTF-8 is garbage too.
    s.send_bytes(b"\xff\xfe\"x\"\n");
    assert_error(&next(&mut s), &Value::Null, -32700);
    assert_still_serving(&mut s);
    let r = s.exec("echo still here");
    assert_eq!(r["stdout"]["data"], json!("still here\n"));
}

#[test]
fn a_non_object_message_is_an_invalid_request_in_a_2024_11_05_session() {
    let mut s = Server::started(Target::Bare);
    for line in [
        "42",
        r#""ping""#,
        "null",
        "true",
        "[1,2]",
        "[]",
        r#"[{"jsonrpc":"2.0","id":900,"method":"ping"}]"#,
    ] {
        s.send_raw(line);
        let msg = next(&mut s);
        assert_error(&msg, &Value::Null, -32600);
    }
    // The batched ping was not run: the next message answers this ping, and
    // no answer to id 900 follows.
    assert_still_serving(&mut s);
    assert!(s.next_message(SILENCE).is_none());
}

#[test]
fn an_unknown_method_is_method_not_found_naming_it() {
    let mut s = Server::started(Target::Bare);
    let r = s.request("tools/frobnicate", json!({}));
    assert_error(&r, &r["id"].clone(), -32601);
    assert_eq!(
        r["error"]["message"],
        json!("method not found: tools/frobnicate")
    );
    let r = s.request("resources/list", json!({}));
    assert_eq!(r["error"]["code"], json!(-32601));
    assert_eq!(
        r["error"]["message"],
        json!("method not found: resources/list")
    );
}

#[test]
fn server_discover_is_answered_at_once_even_while_a_call_blocks() {
    let mut s = Server::started(Target::Bare);
    // A blocking execute whose job waits on its (open) stdin forever.
    let blocked = s.send_call("execute", json!({"command": "read line"}));
    let id = s.send_request("server/discover", json!({}));
    let r = s.response(&id, Duration::from_secs(2));
    assert_eq!(r["error"]["code"], json!(-32601), "{r}");
    assert_eq!(
        r["error"]["message"],
        json!("method not found: server/discover")
    );
    // The blocking call is still in flight: nothing answered it.
    let early = s.next_message(Duration::ZERO);
    assert!(early.is_none(), "{blocked} answered early: {early:?}");
}

#[test]
fn tools_call_with_non_object_params_is_invalid_params() {
    let mut s = Server::started(Target::Bare);
    for params in [
        json!([]),
        json!(["execute", {"command": "true"}]),
        json!("execute"),
        json!(3),
        Value::Null,
    ] {
        let r = s.request("tools/call", params.clone());
        assert_error(&r, &r["id"].clone(), -32602);
        assert!(r.get("result").is_none(), "params {params}: {r}");
    }
    // Nothing ran.
    assert_eq!(s.call("list_jobs", json!({})), json!({"jobs": []}));
}

#[test]
fn an_unknown_tool_is_method_not_found_naming_the_tool() {
    let mut s = Server::started(Target::Bare);
    let r = s.request("tools/call", json!({"name": "frobnicate", "arguments": {}}));
    assert_error(&r, &r["id"].clone(), -32601);
    let message = r["error"]["message"].as_str().expect("message");
    assert!(message.contains("unknown tool: frobnicate"), "{message}");
    assert_still_serving(&mut s);
}

#[test]
fn string_and_integer_ids_are_distinct_requests() {
    let mut s = Server::started(Target::Bare);
    // "100" stays in flight (its job reads stdin) while 100 runs and answers.
    s.send_raw(
        r#"{"jsonrpc":"2.0","id":"100","method":"tools/call","params":{"name":"execute","arguments":{"command":"read x; echo \"string $x\""}}}"#,
    );
    s.send_raw(
        r#"{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"name":"execute","arguments":{"command":"echo integer"}}}"#,
    );
    let int = s.response(&json!(100), TIMEOUT);
    assert_eq!(int["id"], json!(100));
    assert_eq!(
        tool_json(&int["result"])["stdout"]["data"],
        json!("integer\n")
    );

    let jobs = s.call("list_jobs", json!({}));
    assert_eq!(jobs["jobs"].as_array().map(Vec::len), Some(1), "{jobs}");
    let job = jobs["jobs"][0]["job_id"].clone();
    s.call(
        "input",
        json!({"job_id": job, "data": "go\n", "close": true}),
    );
    let string = s.response(&json!("100"), TIMEOUT);
    assert_eq!(string["id"], json!("100"));
    assert_eq!(
        tool_json(&string["result"])["stdout"]["data"],
        json!("string go\n")
    );
}

#[test]
fn unknown_notifications_and_client_responses_get_no_reply() {
    let mut s = Server::started(Target::Bare);
    s.notify("notifications/nonsense", json!({"x": 1}));
    s.send_raw(r#"{"jsonrpc":"2.0","method":"no/such/thing"}"#);
    s.notify("notifications/initialized", json!({}));
    // A response to a request the server never sent.
    s.send_raw(r#"{"jsonrpc":"2.0","id":55,"result":{}}"#);
    assert_still_serving(&mut s);
    assert!(s.next_message(SILENCE).is_none());
}

#[test]
fn tools_list_describes_seven_tools_with_object_input_schemas_and_required_fields() {
    let mut s = Server::started(Target::Bare);
    let r = s.request("tools/list", json!({}));
    let tools = r["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {r}"))
        .clone();
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "execute",
            "wait",
            "status",
            "output",
            "input",
            "kill",
            "list_jobs"
        ]
    );

    let required = |name: &str| -> Vec<String> {
        let t = tools.iter().find(|t| t["name"] == name).expect("listed");
        t["inputSchema"]["required"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().expect("string").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    for t in &tools {
        let name = &t["name"];
        assert!(
            t["description"]
                .as_str()
                .is_some_and(|d| !d.trim().is_empty()),
            "{name}: no description"
        );
        assert_eq!(t["inputSchema"]["type"], json!("object"), "{name}");
        assert!(
            t["inputSchema"]["properties"].is_object(),
            "{name}: no properties"
        );
    }
    assert_eq!(required("execute"), ["command"]);
    assert_eq!(required("wait"), ["job_ids"]);
    for name in ["status", "output", "input", "kill"] {
        assert_eq!(required(name), ["job_id"], "{name}");
    }
    assert!(required("list_jobs").is_empty());

    let props = |name: &str| {
        tools.iter().find(|t| t["name"] == name).expect("listed")["inputSchema"]["properties"]
            .clone()
    };
    let execute = props("execute");
    for (field, ty) in [
        ("command", "string"),
        ("cwd", "string"),
        ("env", "object"),
        ("stdin", "string"),
        ("close_stdin", "boolean"),
        ("nowait", "boolean"),
        ("capture", "object"),
    ] {
        assert_eq!(
            execute[field]["type"],
            json!(ty),
            "execute.{field}: {}",
            execute[field]
        );
    }
    for side in ["on_success", "on_error"] {
        assert!(
            execute["capture"]["properties"][side]["oneOf"].is_array(),
            "capture.{side}"
        );
    }
    let wait = props("wait");
    assert_eq!(wait["job_ids"]["type"], json!("array"));
    assert_eq!(wait["job_ids"]["items"]["type"], json!("string"));
    assert_eq!(wait["timeout"]["type"], json!("number"));
    let output = props("output");
    for stream in ["stdout", "stderr"] {
        assert!(
            output[stream]["oneOf"].is_array(),
            "output.{stream}: {}",
            output[stream]
        );
    }
    let input = props("input");
    assert_eq!(
        (
            input["data"]["type"].clone(),
            input["close"]["type"].clone()
        ),
        (json!("string"), json!("boolean"))
    );
    let kill = props("kill");
    assert_eq!(
        (
            kill["signal"]["type"].clone(),
            kill["timeout"]["type"].clone()
        ),
        (json!("string"), json!("number"))
    );
    for name in ["status", "output", "input", "kill"] {
        assert_eq!(
            props(name)["job_id"]["type"],
            json!("string"),
            "{name}.job_id"
        );
    }
}

#[test]
fn a_tool_result_is_one_text_block_of_compact_json() {
    let mut s = Server::started(Target::Bare);
    let id = s.send_call("execute", json!({"command": "echo hi"}));
    let r = s.response(&id, TIMEOUT);
    let result = &r["result"];
    assert_eq!(
        result.as_object().map(|o| o.len()),
        Some(2),
        "only content and isError: {result}"
    );
    assert_eq!(result["isError"], json!(false));
    let content = result["content"].as_array().expect("content array");
    assert_eq!(content.len(), 1);
    assert_eq!(content[0]["type"], json!("text"));
    let text = content[0]["text"].as_str().expect("text");
    let parsed: Value = serde_json::from_str(text).expect("JSON text");
    assert_eq!(text, parsed.to_string(), "compact JSON");
    assert_eq!(parsed["stdout"]["data"], json!("hi\n"));

    // A tool failure is a result too: isError with a plain-text message.
    let id = s.send_call("status", json!({"job_id": "job-424242"}));
    let r = s.response(&id, TIMEOUT);
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(
        r["result"],
        json!({"content": [{"type": "text", "text": "unknown job_id \"job-424242\""}], "isError": true})
    );
}

#[test]
fn tool_results_keep_the_same_text_in_every_protocol_revision() {
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let mut s = Server::start(Target::Bare);
        s.initialize(version);
        let id = s.spawn_job("echo done");
        let id = s.send_call("wait", json!({"job_ids": [id]}));
        let r = s.response(&id, TIMEOUT);
        assert_eq!(r["result"]["isError"], json!(false), "{version}: {r}");
        assert_eq!(
            r["result"]["content"][0]["type"],
            json!("text"),
            "{version}: {r}"
        );
        let text = tool_json(&r["result"]);
        assert!(
            text.is_array(),
            "{version}: wait's text block is not an array: {text}"
        );
        assert_eq!(text[0]["stdout"]["data"], json!("done\n"), "{version}");
    }
}

#[test]
fn structured_content_and_output_schemas_appear_from_2025_06_18_and_annotations_from_2025_03_26() {
    for (version, annotated, structured) in [
        ("2024-11-05", false, false),
        ("2025-03-26", true, false),
        ("2025-06-18", true, true),
        ("2025-11-25", true, true),
    ] {
        let mut s = Server::start(Target::Bare);
        s.initialize(version);
        let tools = s.request("tools/list", json!({}))["result"]["tools"].clone();
        for tool in tools.as_array().expect("tools") {
            let name = tool["name"].as_str().expect("name");
            assert_eq!(
                tool.get("annotations").is_some(),
                annotated,
                "{version} {name}: {tool}"
            );
            assert_eq!(
                tool.get("outputSchema").is_some(),
                structured,
                "{version} {name}: {tool}"
            );
            assert_eq!(
                tool.get("title").is_some(),
                structured,
                "{version} {name}: {tool}"
            );
            if annotated {
                let read_only = [
                    "status",
                    "output",
                    "list_jobs",
                    "wait",
                    "download",
                    "screen",
                ]
                .contains(&name);
                assert_eq!(
                    tool["annotations"]["readOnlyHint"],
                    json!(read_only),
                    "{name}"
                );
                if !read_only {
                    assert_eq!(
                        tool["annotations"]["destructiveHint"],
                        json!(true),
                        "{name}"
                    );
                    assert_eq!(
                        tool["annotations"]["idempotentHint"],
                        json!(false),
                        "{name}"
                    );
                }
            }
        }
        let job = s.spawn_job("echo hi");
        let r = s.call_result("wait", json!({"job_ids": [job]}));
        match r.get("structuredContent") {
            Some(sc) if structured => {
                assert_eq!(sc["results"], tool_json(&r), "{version}: {r}");
                assert_eq!(
                    sc["results"][0]["stdout"]["data"],
                    json!("hi\n"),
                    "{version}"
                );
            }
            None if !structured => {}
            other => panic!("{version}: structuredContent {other:?} in {r}"),
        }
        let r = s.call_result("list_jobs", json!({}));
        if structured {
            assert_eq!(r["structuredContent"], tool_json(&r), "{version}: {r}");
        }
    }
}

/// The server's peak resident memory (`VmHWM`), in KiB.
fn peak_rss_kib(s: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.pid())).expect("its status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// A batch of `n` `tools/list` requests, ids 1..=n, and then `tail`.
fn tools_list_batch(n: usize, tail: &[Value]) -> String {
    let mut members: Vec<Value> = (1..=n)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "tools/list"}))
        .collect();
    members.extend_from_slice(tail);
    Value::Array(members).to_string()
}

/// The answer budget of one batch (`session::BATCH_BUDGET`, the outbox's).
const BATCH_BUDGET: usize = 8 << 20;

#[test]
fn a_batch_of_8000_tools_list_is_refused_whole_with_one_small_error_and_memory_stays_flat() {
    let mut s = Server::start(Target::Bare);
    s.initialize("2025-03-26");
    let before = peak_rss_kib(&s);
    s.send_raw(&tools_list_batch(8_000, &[]));
    let msg = next(&mut s);
    assert_error(&msg, &Value::Null, -32600);
    assert_eq!(
        msg["error"]["message"],
        json!(
            "invalid request: a batch of 8000 members is more than the 1000 one batch may have; nothing in it was run"
        )
    );
    assert_still_serving(&mut s);
    // Before: a 104 MB answer and 311 MB of peak memory. Now the answer is
    // one line, and the 447 KB request is parsed and dropped.
    let after = peak_rss_kib(&s);
    assert!(
        after < before + 32 * 1024,
        "peak {before} KiB -> {after} KiB"
    );
}

#[test]
fn a_batch_whose_answers_pass_the_budget_answers_the_rest_with_an_error_and_runs_nothing_more() {
    let mut s = Server::start(Target::Bare);
    s.initialize("2025-03-26");
    let marker = format!("/tmp/mcp-exec-batch-{}", std::process::id());
    let _ = std::fs::remove_file(&marker);
    let execute = json!({"jsonrpc": "2.0", "id": "last", "method": "tools/call",
        "params": {"name": "execute", "arguments": {"command": format!("touch {marker}")}}});
    let before = peak_rss_kib(&s);
    s.send_raw(&tools_list_batch(999, &[execute]));
    let msg = next(&mut s);
    let answers = msg.as_array().unwrap_or_else(|| panic!("one array: {msg}"));
    assert_eq!(answers.len(), 1000);
    let size = msg.to_string().len();
    assert!(
        size <= BATCH_BUDGET + 1000 * 512,
        "an answer of {size} bytes"
    );
    let fitted = answers
        .iter()
        .take_while(|a| a.get("result").is_some())
        .count();
    let one = answers[0].to_string().len();
    assert!(
        fitted >= 1 && fitted <= BATCH_BUDGET / one,
        "{fitted} answers of {one} bytes"
    );
    for (i, a) in answers.iter().enumerate().skip(fitted) {
        let id = if i == 999 {
            json!("last")
        } else {
            json!(i + 1)
        };
        assert_error(a, &id, -32600);
        let text = a["error"]["message"].as_str().unwrap_or_default();
        assert!(
            text.contains("8388608 bytes one batch answer may hold"),
            "{a}"
        );
    }
    let last = answers[999]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(last.contains("was not run"), "{last}");
    assert!(
        !std::path::Path::new(&marker).exists(),
        "the execute past the budget was not run"
    );
    let after = peak_rss_kib(&s);
    assert!(
        after < before + 64 * 1024,
        "peak {before} KiB -> {after} KiB"
    );
    assert_still_serving(&mut s);
}

#[test]
fn a_batch_in_a_2025_03_26_session_is_answered_with_one_array_in_request_order() {
    let mut s = Server::start(Target::Bare);
    s.initialize("2025-03-26");
    s.send_raw(
        r#"[{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"execute","arguments":{"command":"sleep 0.3; echo slow"}}},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"no/such"}]"#,
    );
    let msg = next(&mut s);
    let items = msg
        .as_array()
        .unwrap_or_else(|| panic!("expected one array, got {msg}"));
    assert_eq!(items.len(), 3, "the notification gets no entry: {msg}");
    assert_eq!(items[0]["id"], json!("slow"));
    assert_eq!(
        tool_json(&items[0]["result"])["stdout"]["data"],
        json!("slow\n")
    );
    assert_eq!(items[1]["id"], json!(2));
    assert_eq!(items[1]["result"], json!({}));
    assert_error(&items[2], &json!(3), -32601);
    s.send_raw("[]");
    assert_error(&next(&mut s), &Value::Null, -32600);
    assert_still_serving(&mut s);
}
