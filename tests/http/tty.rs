//! `GET /jobs/<id>/tty` (docs/http.md): a human attached to a job's terminal,
//! driven through a real WebSocket client — the Python `websockets` package
//! pinned in interop/requirements.txt, run from the interop venv by
//! interop/python/ws_client.py, one JSON command per line. Jobs are started
//! and delivered over the stdio MCP session; only the attach goes over HTTP.
//! Loopback only; every read has a timeout; the client process is killed
//! when a test ends, also when it fails.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Both, http};
use crate::support::{LATEST, TIMEOUT, Target, wait_for};

const TOKEN: &str = "tty-test-token";

/// The interop venv's python, with `websockets`; `None` (skip) when it is
/// missing here — in CI that fails.
fn python() -> Option<&'static str> {
    crate::support::venv_python(
        concat!(env!("CARGO_MANIFEST_DIR"), "/interop/.venv/bin/python"),
        "websockets.sync.client",
        "the Python websockets client",
        "--install-python",
    )
}

/// The WebSocket client process.
struct Ws {
    child: Child,
    stdin: ChildStdin,
    answers: mpsc::Receiver<String>,
    port: u16,
}

impl Drop for Ws {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Ws {
    /// A client for the server on `port`; `None` to skip (see [`python`]).
    fn start(port: u16) -> Option<Ws> {
        let python = python()?;
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/python/ws_client.py");
        let mut child = Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting the websockets client");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Some(Ws {
            child,
            stdin,
            answers,
            port,
        })
    }

    /// Sends one command and reads its answer (within `within`).
    fn cmd_within(&mut self, cmd: Value, within: Duration) -> Value {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        let line = self
            .answers
            .recv_timeout(within)
            .unwrap_or_else(|e| panic!("no answer to {cmd} within {within:?}: {e}"));
        serde_json::from_str(&line).unwrap()
    }

    fn cmd(&mut self, cmd: Value) -> Value {
        self.cmd_within(cmd, TIMEOUT + Duration::from_secs(5))
    }

    fn url(&self, job: &str, query: &str) -> String {
        format!("ws://127.0.0.1:{}/jobs/{job}/tty{query}", self.port)
    }

    /// Opens connection `name` to `job` with `query` and the token.
    fn open(&mut self, name: &str, job: &str, query: &str) -> Value {
        let url = self.url(job, query);
        self.open_with(
            name,
            &url,
            &json!({"Authorization": format!("Bearer {TOKEN}")}),
        )
    }

    fn open_with(&mut self, name: &str, url: &str, headers: &Value) -> Value {
        self.cmd(json!({"op": "open", "name": name, "url": url, "headers": headers}))
    }

    fn open_ok(&mut self, name: &str, job: &str, query: &str) {
        let r = self.open(name, job, query);
        assert_eq!(r, json!({"ok": true}), "attaching {name} to {job}{query}");
    }

    fn send(&mut self, name: &str, bytes: &[u8]) {
        let r = self.cmd(json!({"op": "send", "name": name, "binary": hex(bytes)}));
        assert_eq!(r, json!({"ok": true}), "{r}");
    }

    fn send_text(&mut self, name: &str, text: &Value) {
        let r = self.cmd(json!({"op": "send", "name": name, "text": text.to_string()}));
        assert_eq!(r, json!({"ok": true}), "{r}");
    }

    fn recv(&mut self, name: &str) -> Value {
        self.cmd(json!({"op": "recv", "name": name, "timeout": TIMEOUT.as_secs()}))
    }

    /// Output bytes until they contain `until` (or the socket closes).
    fn collect(&mut self, name: &str, until: Option<&[u8]>) -> Collected {
        let r = self.cmd(
            json!({"op": "collect", "name": name, "until": until.map(hex),
                                "timeout": TIMEOUT.as_secs()}),
        );
        assert!(r.get("error").is_none(), "{r}");
        assert!(
            r.get("timeout").is_none(),
            "neither {until:?} nor a close within {TIMEOUT:?}: {r}"
        );
        Collected {
            bytes: unhex(r["binary"].as_str().unwrap()),
            texts: r["texts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| serde_json::from_str(t.as_str().unwrap()).unwrap())
                .collect(),
            closed: r.get("closed").cloned(),
        }
    }

    fn close(&mut self, name: &str) {
        let r = self.cmd(json!({"op": "close", "name": name}));
        assert_eq!(r, json!({"ok": true}), "{r}");
    }
}

/// What `collect` read.
#[derive(Debug)]
struct Collected {
    bytes: Vec<u8>,
    texts: Vec<Value>,
    closed: Option<Value>,
}

impl Collected {
    fn contains(&self, needle: &[u8]) -> bool {
        self.bytes.windows(needle.len()).any(|w| w == needle)
    }

    fn exit(&self) -> Option<&Value> {
        self.texts.iter().find_map(|t| t.get("exit"))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A server with a token; the stdio session initialized.
fn server(t: Target) -> Both {
    let mut s = Both::start(t, &[("MCP_EXEC_HTTP_TOKEN", TOKEN)], &[]);
    s.stdio.initialize(LATEST);
    s
}

/// Starts `command` as a terminal job (not waited for); its id.
fn job(s: &mut Both, command: &str, extra: Value) -> String {
    let mut extra = extra;
    extra["tty"] = json!(true);
    launch(s, command, extra)
}

/// Starts `command` as a job with `extra` arguments; its id.
fn launch(s: &mut Both, command: &str, extra: Value) -> String {
    let mut args = json!({"command": command, "nowait": true});
    for (k, v) in extra.as_object().unwrap() {
        args[k] = v.clone();
    }
    let r = s.stdio.call("execute", args);
    r["job_id"].as_str().unwrap().to_owned()
}

/// Waits until `job` wrote at least `n` bytes of stdout.
fn await_output(s: &mut Both, job: &str, n: u64) {
    let mut seen = json!(null);
    let ok = wait_for(TIMEOUT, || {
        seen = s
            .stdio
            .call("output", json!({"job_id": job, "stdout": {"tail": 0}}));
        seen["stdout"]["total_bytes"].as_u64().unwrap_or(0) >= n
    });
    assert!(ok, "{job} never wrote {n} bytes: {seen}");
}

fn an_attach_replays_from_since_then_streams_live_output_and_input_reaches_the_program(t: Target) {
    let mut s = server(t);
    let Some(mut ws) = Ws::start(s.port) else {
        return;
    };
    let id = job(
        &mut s,
        "printf 0123456789; read line; printf '[%s]' \"$line\"; read again",
        json!({}),
    );
    await_output(&mut s, &id, 10);
    ws.open_ok("a", &id, "?since=4");
    // Replayed from byte 4, not from 0.
    let replay = ws.collect("a", Some(b"456789"));
    assert_eq!(replay.bytes, b"456789", "{replay:?}");
    // Input reaches the program, and what it prints comes live.
    ws.send("a", b"typed by a human\n");
    let live = ws.collect("a", Some(b"[typed by a human]"));
    assert!(live.contains(b"[typed by a human]"), "{live:?}");
    assert!(!live.contains(b"0123"), "nothing is repeated: {live:?}");
    // A text frame that is not a resize is refused with an error frame;
    // the connection stays.
    ws.send_text("a", &json!({"paste": "x"}));
    let refused = ws.recv("a");
    let refused: Value = serde_json::from_str(refused["text"].as_str().unwrap()).unwrap();
    assert!(
        refused["error"].as_str().unwrap().contains("resize"),
        "{refused}"
    );
    ws.send("a", b"\n");
    let end = ws.collect("a", None);
    assert_eq!(
        end.exit().map(|e| e["exit_code"].clone()),
        Some(json!(0)),
        "{end:?}"
    );
}

fn the_exit_frame_carries_the_result_says_who_holds_it_and_leaves_delivery_to_the_owner(t: Target) {
    let mut s = server(t);
    let Some(mut ws) = Ws::start(s.port) else {
        return;
    };
    let id = job(&mut s, "printf done; exit 3", json!({"label": "attached"}));
    ws.open_ok("a", &id, "");
    let end = ws.collect("a", None);
    assert_eq!(end.bytes, b"done", "{end:?}");
    let exit = end
        .exit()
        .unwrap_or_else(|| panic!("no exit frame: {end:?}"));
    assert_eq!(exit["job_id"], json!(id), "{exit}");
    assert_eq!(exit["state"], json!("error"), "{exit}");
    assert_eq!(exit["exit_code"], json!(3), "{exit}");
    assert_eq!(exit["label"], json!("attached"), "{exit}");
    assert!(exit["duration_ms"].is_u64(), "{exit}");
    assert_eq!(exit["stdout_bytes"], json!(4), "{exit}");
    assert_eq!(exit["result_owner"], json!("caller"), "{exit}");
    assert!(exit.get("stdout").is_none(), "no stream data: {exit}");
    assert!(exit.get("result_delivered_elsewhere").is_none(), "{exit}");
    assert_eq!(
        end.closed.as_ref().map(|c| c["code"].clone()),
        Some(json!(1000)),
        "{end:?}"
    );
    // Attaching took nothing: the owner still gets the result, once.
    let w = s.stdio.call("wait", json!({"job_ids": [id]}));
    assert_eq!(w[0]["job_id"], json!(id), "{w}");
    assert_eq!(w[0]["exit_code"], json!(3), "{w}");
    // Delivered now: gone for attach too.
    let again = ws.open("b", &id, "");
    assert_eq!(again["status"], json!(404), "{again}");
}

fn a_second_attach_is_409_and_takeover_closes_the_first_with_4001(t: Target) {
    let mut s = server(t);
    let Some(mut ws) = Ws::start(s.port) else {
        return;
    };
    let id = job(&mut s, "cat", json!({}));
    ws.open_ok("first", &id, "");
    let second = ws.open("second", &id, "");
    assert_eq!(second["status"], json!(409), "{second}");
    assert!(
        second["body"].as_str().unwrap().contains("takeover=1"),
        "{second}"
    );
    ws.open_ok("third", &id, "?takeover=1");
    let closed = ws.recv("first");
    assert_eq!(closed["closed"]["code"], json!(4001), "{closed}");
    // The new writer's input reaches the job.
    ws.send("third", b"after takeover\n");
    // The terminal echoes the line, then `cat` prints it: twice.
    let twice = b"after takeover\r\nafter takeover\r\n";
    let echoed = ws.collect("third", Some(twice));
    assert!(echoed.contains(twice), "{echoed:?}");
    // Once it leaves, the next attach needs no takeover.
    ws.close("third");
    let mut reopened = json!(null);
    let ok = wait_for(TIMEOUT, || {
        reopened = ws.open("fourth", &id, "");
        reopened == json!({"ok": true})
    });
    assert!(ok, "the lease was not given back: {reopened}");
    s.stdio.call("kill", json!({"job_id": id}));
}

fn attaching_needs_the_token_and_passes_the_origin_guard(t: Target) {
    let mut s = server(t);
    let Some(mut ws) = Ws::start(s.port) else {
        return;
    };
    let id = job(&mut s, "sleep 30", json!({}));
    let url = ws.url(&id, "");
    for headers in [
        json!({}),
        json!({"Authorization": "Bearer wrong"}),
        json!({"Authorization": format!("Basic {TOKEN}")}),
    ] {
        let r = ws.open_with("x", &url, &headers);
        assert_eq!(r["status"], json!(401), "{headers}: {r}");
    }
    let foreign = ws.open_with(
        "x",
        &url,
        &json!({"Authorization": format!("Bearer {TOKEN}"), "Origin": "http://evil.example"}),
    );
    assert_eq!(foreign["status"], json!(403), "{foreign}");
    ws.open_ok("ok", &id, "");
    s.stdio.call("kill", json!({"job_id": id}));
}

fn bad_attaches_get_404_416_and_400_before_any_upgrade(t: Target) {
    let mut s = server(t);
    let Some(mut ws) = Ws::start(s.port) else {
        return;
    };
    let id = job(&mut s, "printf abc; sleep 30", json!({}));
    await_output(&mut s, &id, 3);
    assert_eq!(ws.open("x", "job-999", "")["status"], json!(404));
    assert_eq!(ws.open("x", "nonsense", "")["status"], json!(404));
    let ahead = ws.open("x", &id, "?since=4");
    assert_eq!(ahead["status"], json!(416), "{ahead}");
    assert!(
        ahead["body"].as_str().unwrap().contains("3 bytes"),
        "{ahead}"
    );
    assert_eq!(ws.open("x", &id, "?since=-1")["status"], json!(400));
    // A plain GET is not a WebSocket.
    let auth = format!("Bearer {TOKEN}");
    let plain = http(
        s.port,
        "GET",
        &format!("/jobs/{id}/tty"),
        &[("Authorization", &auth)],
        "",
    );
    assert_eq!(plain.status, 400, "{plain:?}");
    ws.open_ok("ok", &id, "?since=3");
    s.stdio.call("kill", json!({"job_id": id}));
}

fn bytes_the_window_dropped_are_announced_as_a_gap_never_skipped_silently(t: Target) {
    let mut s = server(t);
    let Some(mut ws) = Ws::start(s.port) else {
        return;
    };
    // 10 000 bytes through a 1 000-byte window: 0..9000 are gone.
    let id = job(
        &mut s,
        "head -c 10000 /dev/zero | tr '\\0' x; sleep 30",
        json!({"max_output_bytes": 1000}),
    );
    await_output(&mut s, &id, 10_000);
    ws.open_ok("a", &id, "?since=0");
    let first = ws.recv("a");
    let gap: Value = serde_json::from_str(first["text"].as_str().unwrap_or("null")).unwrap();
    assert_eq!(gap, json!({"gap": {"from": 0, "to": 9000}}), "{first}");
    let rest = ws.collect("a", Some(&[b'x'; 1000]));
    assert_eq!(rest.bytes.len(), 1000, "{rest:?}");
    s.stdio.call("kill", json!({"job_id": id}));
}

fn a_hundred_forced_reconnects_lose_and_duplicate_no_byte(t: Target) {
    let mut s = server(t);
    let Some(mut ws) = Ws::start(s.port) else {
        return;
    };
    // Numbered lines, 20 at a time, until the client types a line (not
    // echoed): the job is still writing at every forced reconnect, however
    // slow the client is. `read -t` paces it without a fork per pause.
    let id = job(
        &mut s,
        "stty -echo; exec bash -c 'i=0; while [ $i -lt 1000000 ]; do printf \"%06d\\n\" $i; \
         i=$((i+1)); if [ $((i % 20)) -eq 0 ] && read -t 0.01 _; then break; fi; done'",
        json!({}),
    );
    let url = ws.url(&id, "");
    let r = ws.cmd_within(
        json!({"op": "reconnects", "url": url, "count": 100, "timeout": 120,
               "stop": hex(b"stop\n"),
               "headers": {"Authorization": format!("Bearer {TOKEN}")}}),
        Duration::from_secs(130),
    );
    assert!(r.get("error").is_none(), "{r}");
    let got = unhex(r["binary"].as_str().unwrap());
    assert!(
        r["connections"].as_u64().unwrap() > 100,
        "{}",
        r["connections"]
    );
    assert!(
        r["with_output"].as_u64().unwrap() >= 100,
        "every forced reconnect lands mid-stream: {} of {}",
        r["with_output"],
        r["connections"]
    );
    assert_eq!(r["gaps"], json!([]), "nothing was dropped");
    assert_eq!(r["exit"]["exit_code"], json!(0), "{}", r["exit"]);
    // Everything the job wrote arrived once, in order: lines 0..n, each
    // `\n` turned into `\r\n` by the terminal (ONLCR).
    let written = r["exit"]["stdout_bytes"].as_u64().unwrap();
    assert_eq!(
        got.len() as u64,
        written,
        "bytes received vs written (a duplicate or a loss)"
    );
    let lines = got.len() / 8;
    assert!(lines >= 200, "{lines} lines");
    let expected: String = (0..lines).map(|i| format!("{i:06}\r\n")).collect();
    assert!(
        got == expected.as_bytes(),
        "the bytes are not the sequence 0..{lines}"
    );
}

fn a_resize_frame_reaches_the_terminal_as_stty_size_shows(t: Target) {
    let mut s = server(t);
    let Some(mut ws) = Ws::start(s.port) else {
        return;
    };
    let id = job(
        &mut s,
        "read x; stty size; read y",
        json!({"cols": 80, "rows": 24}),
    );
    ws.open_ok("a", &id, "");
    ws.send_text("a", &json!({"resize": {"cols": 101, "rows": 33}}));
    ws.send("a", b"\n");
    let seen = ws.collect("a", Some(b"33 101"));
    assert!(seen.contains(b"33 101"), "{seen:?}");
    assert!(seen.texts.is_empty(), "no error frame: {seen:?}");
    // A size the kernel would not take is an error frame, and the
    // connection stays.
    ws.send_text("a", &json!({"resize": {"cols": 0, "rows": 33}}));
    let refused = ws.recv("a");
    let refused: Value = serde_json::from_str(refused["text"].as_str().unwrap()).unwrap();
    assert!(
        refused["error"].as_str().unwrap().starts_with("resize:"),
        "{refused}"
    );
    ws.send("a", b"\n");
    let end = ws.collect("a", None);
    assert_eq!(
        end.exit().map(|e| e["exit_code"].clone()),
        Some(json!(0)),
        "{end:?}"
    );
}

fn a_pipe_job_cannot_be_attached_400(t: Target) {
    let mut s = server(t);
    let Some(mut ws) = Ws::start(s.port) else {
        return;
    };
    let id = launch(&mut s, "sleep 30", json!({}));
    let r = ws.open("a", &id, "");
    assert_eq!(r["status"], json!(400), "{r}");
    assert!(r["body"].as_str().unwrap().contains("tty"), "{r}");
    // Even with a takeover, and even with a since past its output.
    assert_eq!(
        ws.open("a", &id, "?takeover=1&since=9")["status"],
        json!(400)
    );
    s.stdio.call("kill", json!({"job_id": id}));
}

macro_rules! tty_targets {
    ($($name:ident),* $(,)?) => {
        mod bare { $( #[test] fn $name() { if crate::support::Target::Bare.available() { super::$name(crate::support::Target::Bare) } } )* }
        mod pid1 { $( #[test] fn $name() { if crate::support::Target::Pid1.available() { super::$name(crate::support::Target::Pid1) } } )* }
    };
}

tty_targets!(
    an_attach_replays_from_since_then_streams_live_output_and_input_reaches_the_program,
    the_exit_frame_carries_the_result_says_who_holds_it_and_leaves_delivery_to_the_owner,
    a_second_attach_is_409_and_takeover_closes_the_first_with_4001,
    attaching_needs_the_token_and_passes_the_origin_guard,
    bad_attaches_get_404_416_and_400_before_any_upgrade,
    bytes_the_window_dropped_are_announced_as_a_gap_never_skipped_silently,
    a_hundred_forced_reconnects_lose_and_duplicate_no_byte,
    a_resize_frame_reaches_the_terminal_as_stty_size_shows,
    a_pipe_job_cannot_be_attached_400,
);
