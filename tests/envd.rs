//! E2B envd (docs/envd.md): the official `e2b` Python SDK (pinned in
//! interop/e2b/requirements.txt), in its local debug mode, against the
//! server's `--envd` listener on every target. interop/e2b/envd_client.py
//! runs one scenario per call and prints what it observed; each test here
//! asserts those values. A missing venv skips (a failure in CI:
//! `support::require`); `interop/run.sh --install-e2b` installs it.
//!
//! Beside the SDK, a raw Connect client (over `TcpStream`) checks what the
//! SDK cannot reach: a tag shown as the job's label over MCP, an MCP `kill`
//! seen as the stream's end event, the framing's refusals.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{LATEST, Server, TIMEOUT, Target, wait_for};

/// The e2b venv's python; `None` (skip) when it is not installed.
fn python() -> Option<&'static str> {
    crate::support::venv_python(
        concat!(env!("CARGO_MANIFEST_DIR"), "/interop/e2b/.venv/bin/python"),
        "e2b",
        "the e2b Python SDK",
        "--install-e2b",
    )
}

/// A server with the envd listener on a free loopback port.
struct Envd {
    server: Server,
    port: u16,
}

impl Envd {
    fn start(t: Target) -> Envd {
        // A HOME without the machine's shell start-up files: the SDK runs
        // every command as `bash -l -c`, and a login shell reads them.
        let home = std::env::temp_dir();
        let home = home.to_str().unwrap();
        let server = if t.is_container() {
            Server::start_with_args(t, &[("MCP_EXEC_ENVD", "127.0.0.1:0")], &["--network=host"])
        } else {
            Server::start_with_cli(t, &[("HOME", home)], &["--envd", "127.0.0.1:0"])
        };
        let port = crate::http::bound_port(&server, "envd");
        Envd { server, port }
    }

    /// Runs scenario `name` of envd_client.py and returns what it saw.
    fn scenario(&self, python: &str, name: &str) -> Value {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/e2b/envd_client.py");
        let out = Command::new("timeout")
            .args(["300", python, script, &self.port.to_string(), name])
            .output()
            .expect("running envd_client.py");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "scenario {name} failed: {stdout}\nstderr: {}\nserver: {}",
            String::from_utf8_lossy(&out.stderr),
            self.server.stderr.lock().unwrap()
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }
}

fn sdk_commands_run_reports_output_exit_codes_env_cwd_and_timeout(t: Target) {
    let Some(py) = python() else { return };
    let s = Envd::start(t);
    let r = s.scenario(py, "run");
    assert_eq!(
        r["plain"],
        json!({"stdout": "out\n", "stderr": "err\n", "exit_code": 0})
    );
    assert_eq!(
        r["failing"],
        json!({"raised": "CommandExitException", "exit_code": 3, "stdout": "partial\n",
               "stderr": "bad\n", "error": "exit status 3"})
    );
    assert_eq!(r["cwd_env"], "/tmp\nhello there\n");
    assert_eq!(r["timeout"], "TimeoutException", "{r}");
    let took = r["timeout_s"].as_f64().unwrap();
    assert!((0.9..10.0).contains(&took), "timeout after {took} s");
    assert_eq!(r["timeout_left"], json!([]), "the deadline ended the group");
    assert_eq!(r["running"], true, "/health answers 2xx");
}

fn sdk_background_command_is_listed_and_waited_for(t: Target) {
    let Some(py) = python() else { return };
    let s = Envd::start(t);
    let r = s.scenario(py, "background");
    let pid = r["pid"].as_u64().unwrap();
    assert!(pid > 0);
    assert_eq!(
        r["listed"],
        json!([{"pid": pid, "cmd": "/bin/bash",
                "args": ["-l", "-c", "sleep 0.5; echo done; exit 5"]}])
    );
    assert_eq!(
        r["wait"],
        json!({"raised": "CommandExitException", "exit_code": 5, "stdout": "done\n",
               "stderr": "", "error": "exit status 5"})
    );
    assert_eq!(r["listed_after"], json!([]));
}

fn sdk_kill_ends_the_whole_group_and_an_unknown_pid_is_false(t: Target) {
    let Some(py) = python() else { return };
    let s = Envd::start(t);
    let r = s.scenario(py, "kill");
    assert!(
        r["before"].as_array().unwrap().len() >= 2,
        "both sleeps ran: {r}"
    );
    assert_eq!(r["killed"], true);
    assert_eq!(
        r["wait"],
        json!({"raised": "CommandExitException", "exit_code": 137, "stdout": "",
               "stderr": "", "error": "signal: killed"})
    );
    assert_eq!(
        r["after"],
        json!([]),
        "no process of the group is left (envd would leave the sleeps)"
    );
    assert_eq!(r["kill_again"], false, "a collected process is not_found");
    assert_eq!(r["kill_unknown"], false);
}

fn sdk_stdin_send_stream_and_close_reach_the_process(t: Target) {
    let Some(py) = python() else { return };
    let s = Envd::start(t);
    let r = s.scenario(py, "stdin");
    assert_eq!(r["cat"]["stdout"], "hello\nbytes\nstreamed input\neof\n");
    assert_eq!(r["cat"]["exit_code"], 0);
    assert_eq!(
        r["no_stdin"]["stdout"], "eof-at-once\n",
        "stdin:false is closed"
    );
}

fn sdk_pty_create_resize_input_and_kill(t: Target) {
    let Some(py) = python() else { return };
    let s = Envd::start(t);
    let r = s.scenario(py, "pty");
    let out = r["output"].as_str().unwrap();
    assert!(
        out.contains("30 100"),
        "stty size shows the resize: {out:?}"
    );
    assert!(out.contains("tty=/dev/pts"), "a terminal: {out:?}");
    assert_eq!(r["wait"]["exit_code"], 7);
    assert_eq!(r["killed"], true);
    assert_eq!(r["killed_wait"]["exit_code"], 137);
    assert_eq!(r["killed_wait"]["error"], "signal: killed");
}

fn sdk_burst_of_200_background_commands_loses_no_exit_status(t: Target) {
    let Some(py) = python() else { return };
    let s = Envd::start(t);
    let r = s.scenario(py, "burst");
    assert_eq!(r["count"], 200);
    assert_eq!(r["wrong"], json!({}), "every exit code is its own");
    assert_eq!(r["pids"], 200);
}

fn sdk_connect_replays_output_written_while_detached(t: Target) {
    let Some(py) = python() else { return };
    let s = Envd::start(t);
    let r = s.scenario(py, "detached");
    assert_eq!(
        r["running_while_detached"], true,
        "a disconnect does not end the job"
    );
    assert_eq!(
        r["reattached"],
        json!({"exit_code": 0, "stdout": "one\nthree\n", "stderr": "two\n", "error": null}),
        "the output written while nobody was attached is replayed"
    );
    assert_eq!(
        r["ended_detached"],
        json!({"raised": "CommandExitException", "exit_code": 4, "stdout": "late\n",
               "stderr": "", "error": "exit status 4"}),
        "a job that ended detached still gives its output and its end"
    );
    assert_eq!(r["collected_again"], "NotFoundException", "delivered once");
}

crate::parity!(
    sdk_commands_run_reports_output_exit_codes_env_cwd_and_timeout,
    sdk_background_command_is_listed_and_waited_for,
    sdk_kill_ends_the_whole_group_and_an_unknown_pid_is_false,
    sdk_stdin_send_stream_and_close_reach_the_process,
    sdk_pty_create_resize_input_and_kill,
    sdk_burst_of_200_background_commands_loses_no_exit_status,
    sdk_connect_replays_output_written_while_detached,
);

// ---------------------------------------------------------------------------
// A raw Connect client: what the SDK does not show.
// ---------------------------------------------------------------------------

/// One envelope.
fn envelope(msg: &Value) -> Vec<u8> {
    let json = msg.to_string().into_bytes();
    let mut b = vec![0u8];
    b.extend_from_slice(&u32::try_from(json.len()).unwrap().to_be_bytes());
    b.extend_from_slice(&json);
    b
}

/// Opens a server-streaming call and returns the socket (response unread).
fn open_stream(port: u16, path: &str, msg: &Value) -> TcpStream {
    let body = envelope(msg);
    let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(TIMEOUT)).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/connect+json\r\n\
         Connect-Protocol-Version: 1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).unwrap();
    sock.write_all(&body).unwrap();
    sock
}

/// Reads a chunked response to its end and returns its envelopes' JSON,
/// each with its flags.
fn read_envelopes(mut sock: TcpStream) -> (String, Vec<(u8, Value)>) {
    let mut raw = Vec::new();
    let _ = sock.read_to_end(&mut raw);
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut rest = &raw[split + 4..];
    let mut body = Vec::new();
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body.extend_from_slice(rest);
        rest = &[];
    }
    // Chunked: size line, data, CRLF; the last chunk is empty.
    while !rest.is_empty() {
        let line_end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16).unwrap();
        rest = &rest[line_end + 2..];
        if size == 0 {
            break;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
    let mut out = Vec::new();
    let mut b = &body[..];
    while b.len() >= 5 {
        let len = u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize;
        out.push((b[0], serde_json::from_slice(&b[5..5 + len]).unwrap()));
        b = &b[5 + len..];
    }
    (head, out)
}

fn a_tagged_envd_process_is_an_mcp_job_and_an_mcp_kill_ends_its_stream(t: Target) {
    let mut s = Envd::start(t);
    s.server.initialize(LATEST);
    let sock = open_stream(
        s.port,
        "/process.Process/Start",
        &json!({"process": {"cmd": "sh", "args": ["-c", "echo ready; exec sleep 1000"]},
                "tag": "web-1", "stdin": false}),
    );
    let mut job = None;
    assert!(
        wait_for(TIMEOUT, || {
            let listed = s.server.call("list_jobs", json!({}));
            job = listed["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|j| j["label"] == "web-1" && j["state"] == "running")
                .map(|j| j["job_id"].as_str().unwrap().to_owned());
            job.is_some()
        }),
        "the tag is the job's label in list_jobs"
    );
    let job = job.unwrap();
    assert!(
        wait_for(TIMEOUT, || {
            let out = s
                .server
                .call("output", json!({"job_id": job, "stdout": "all"}));
            out["stdout"]["data"] == "ready\n"
        }),
        "MCP's output shows what the envd process wrote"
    );
    let killed = s
        .server
        .call("kill", json!({"job_id": job, "signal": "KILL"}));
    assert_eq!(killed["result_delivered_elsewhere"], true, "{killed}");
    let (head, events) = read_envelopes(sock);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/connect+json")
    );
    assert!(
        events[0].1["event"]["start"]["pid"].as_u64().unwrap() > 0,
        "{events:?}"
    );
    assert_eq!(
        events[1].1,
        json!({"event": {"data": {"stdout": "cmVhZHkK"}}})
    );
    let end = &events[events.len() - 2];
    assert_eq!(
        end.1,
        json!({"event": {"end": {"exitCode": 137, "status": "signal: killed",
                                 "error": "signal: killed"}}})
    );
    assert_eq!(
        events.last().unwrap(),
        &(2, json!({})),
        "the end-stream envelope"
    );
}

fn sigterm_by_tag_ends_the_group_and_the_stream_says_signal_terminated(t: Target) {
    let s = Envd::start(t);
    let sock = open_stream(
        s.port,
        "/process.Process/Start",
        &json!({"process": {"cmd": "sh", "args": ["-c", "sleep 1000 & echo ready; wait"]},
                "tag": "term-me", "stdin": false}),
    );
    // The tag finds it once it runs (List shows it).
    assert!(wait_for(TIMEOUT, || {
        let r = crate::support::http::request(
            s.port,
            "POST",
            "/process.Process/List",
            &[("Content-Type", "application/json")],
            "{}",
            TIMEOUT,
        )
        .unwrap();
        r.json()["processes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["tag"] == "term-me")
    }));
    let r = crate::support::http::request(
        s.port,
        "POST",
        "/process.Process/SendSignal",
        &[("Content-Type", "application/json")],
        r#"{"process":{"tag":"term-me"},"signal":"SIGNAL_SIGTERM"}"#,
        TIMEOUT,
    )
    .unwrap();
    assert_eq!((r.status, r.json()), (200, json!({})));
    let (_, events) = read_envelopes(sock);
    let end = &events[events.len() - 2].1["event"]["end"];
    assert_eq!(end["exitCode"], 143, "{events:?}");
    assert_eq!(end["status"], "signal: terminated");
}

fn connect_framing_refuses_a_wrong_media_type_unknown_pids_and_methods(t: Target) {
    let s = Envd::start(t);
    let req = |path: &str, ct: &str, body: &str| {
        crate::support::http::request(s.port, "POST", path, &[("Content-Type", ct)], body, TIMEOUT)
            .unwrap()
    };
    let r = req("/process.Process/List", "application/proto", "");
    assert_eq!(r.status, 415);
    assert!(r.body.is_empty(), "415 has an empty body");
    let r = req(
        "/process.Process/SendSignal",
        "application/json",
        r#"{"process":{"pid":999999},"signal":"SIGNAL_SIGKILL"}"#,
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["code"], "not_found");
    let r = req("/process.Process/Nope", "application/json", "{}");
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (501, json!("unimplemented"))
    );
    let r = req("/process.Process/List", "application/json", "{}");
    assert_eq!((r.status, r.json()), (200, json!({"processes": []})));
    let h = crate::support::http::request(s.port, "GET", "/health", &[], "", TIMEOUT).unwrap();
    assert_eq!(h.status, 204);
    // A stream that fails before its first event: HTTP 200 and the error
    // in the end-stream envelope.
    let sock = open_stream(
        s.port,
        "/process.Process/Connect",
        &json!({"process": {"pid": 999999}}),
    );
    let (head, events) = read_envelopes(sock);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].0, 2);
    assert_eq!(events[0].1["error"]["code"], "not_found");
}

fn with_a_token_every_call_needs_it_as_x_access_token_or_bearer(t: Target) {
    let server = Server::start_with_cli(
        t,
        &[("MCP_EXEC_HTTP_TOKEN", "envd-secret-token")],
        &["--envd", "127.0.0.1:0"],
    );
    let port = crate::http::bound_port(&server, "envd");
    let list = |headers: &[(&str, &str)]| {
        let mut h = vec![("Content-Type", "application/json")];
        h.extend_from_slice(headers);
        crate::support::http::request(port, "POST", "/process.Process/List", &h, "{}", TIMEOUT)
            .unwrap()
    };
    let r = list(&[]);
    assert_eq!(
        (r.status, r.json()["code"].clone()),
        (401, json!("unauthenticated"))
    );
    assert_eq!(list(&[("X-Access-Token", "wrong")]).status, 401);
    assert_eq!(list(&[("X-Access-Token", "envd-secret-token")]).status, 200);
    assert_eq!(
        list(&[("Authorization", "Bearer envd-secret-token")]).status,
        200
    );
    let h = crate::support::http::request(port, "GET", "/health", &[], "", TIMEOUT).unwrap();
    assert_eq!(h.status, 204, "health needs no token, as envd's");
}

fn a_non_loopback_envd_without_a_token_or_the_insecure_switch_exits_2(t: Target) {
    let mut server = Server::start_with_cli(t, &[], &["--envd", "0.0.0.0:0"]);
    let status = server.wait_exit(TIMEOUT).expect("it exits");
    assert_eq!(status.code(), Some(2));
    let log = server.stderr.lock().unwrap().clone();
    assert!(
        log.contains("MCP_EXEC_ENVD") && log.contains("MCP_EXEC_PLATFORM_INSECURE"),
        "{log}"
    );
}

macro_rules! raw_targets {
    ($($name:ident),* $(,)?) => {
        mod raw_bare { $( #[test] fn $name() { if crate::support::Target::Bare.available() { super::$name(crate::support::Target::Bare) } } )* }
        mod raw_pid1 { $( #[test] fn $name() { if crate::support::Target::Pid1.available() { super::$name(crate::support::Target::Pid1) } } )* }
    };
}

raw_targets!(
    a_tagged_envd_process_is_an_mcp_job_and_an_mcp_kill_ends_its_stream,
    connect_framing_refuses_a_wrong_media_type_unknown_pids_and_methods,
    sigterm_by_tag_ends_the_group_and_the_stream_says_signal_terminated,
    with_a_token_every_call_needs_it_as_x_access_token_or_bearer,
    a_non_loopback_envd_without_a_token_or_the_insecure_switch_exits_2,
);
