//! Golden transcripts: the wire format in one place (issue 9 §3).
//!
//! `tests/golden/<revision>.txt` holds, for each protocol revision, the
//! request lines a client sends and the exact response lines the server
//! writes. The four legacy files run the same script (only the
//! `initialize` version differs), so `diff tests/golden/2024-11-05.txt
//! tests/golden/2025-06-18.txt` shows what a revision changes.
//! `2026-07-28.txt` has a script of its own (no `initialize`, `_meta` on
//! every request), and `2026-07-28.http.txt` is its Streamable HTTP
//! binding, in the format of [`http_transcript`].
//!
//! # Format
//! One directive per line; the first two characters are the directive:
//! - `# ` a comment; `` (empty) a blank line. Both are kept by blessing.
//! - `> LINE` sends LINE as is, then reads until it is answered: for a
//!   JSON object with `method` and `id`, until the response with that id;
//!   for one with `method` and no `id` (a notification) or without
//!   `method` (a client response), nothing; for anything else (a batch,
//!   garbage), one line.
//! - `& LINE` sends a request without reading its answer (it stays in
//!   flight; a later `=` reads it).
//! - `= ID` reads until the response with that id (JSON: `7`, `"a"`).
//! - `~ LINE` sends a `tools/call` again and again (each answered) until
//!   the JSON of its tool result no longer says `"state":"running"`: it
//!   waits for a job to end without delivering it. Only the last answer
//!   is kept.
//! - `< LINE` a line the server wrote: everything read by the directive
//!   above, in order. After the script, stdin is closed; whatever the
//!   server still writes before it exits follows at the end.
//!
//! `<` lines are compared exactly, after two normalisations: the crate
//! version in `serverInfo` is written `CARGO_PKG_VERSION`, so a version
//! bump does not touch the transcripts; and the values of the timing
//! fields of Part II results (`started_at`, `duration_ms`, `queued_ms`,
//! plain or inside the escaped text block) are written `T`. Nothing else in
//! them may vary: job ids count from `job-1` per server process, and the
//! script avoids pids and progress notifications. The server runs as the bare
//! binary with `SHELL=/bin/sh` and no `MCP_EXEC_*` variable (all settings
//! at their defaults); the format does not depend on the target.
//!
//! # Blessing
//! `MCP_EXEC_BLESS=1 cargo test --test integration golden` rewrites every
//! `<` line from what the server writes now (the other directives are the
//! script and stay as they are). Review the result in `git diff`: a changed
//! `<` line is a changed wire format.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::raw::RawServer;
use crate::support::{TIMEOUT, Target, tool_json};

/// The legacy revisions with a transcript, oldest first: they run
/// the same script.
const REVISIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The 2026-07-28 transcripts: a script of their own, since that
/// revision has no `initialize` and every request carries `_meta`; one over
/// stdio, one over HTTP (see [`http_transcript`]).
const MODERN: [&str; 2] = ["2026-07-28.txt", "2026-07-28.http.txt"];

/// The Tasks transcripts, one per wire format (docs/tasks.md).
const TASKS: [&str; 2] = ["tasks-2025-11-25.txt", "tasks-2026-07-28.txt"];

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn blessing() -> bool {
    std::env::var_os("MCP_EXEC_BLESS").is_some_and(|v| v == "1")
}

/// The `<` line of a message the server wrote.
fn normalise(line: &str) -> String {
    let version = format!(
        r#""serverInfo":{{"name":"mcp-exec","version":"{}"}}"#,
        env!("CARGO_PKG_VERSION")
    );
    let mut line = line.replace(
        &version,
        r#""serverInfo":{"name":"mcp-exec","version":"CARGO_PKG_VERSION"}"#,
    );
    // 2026-07-28 results name the server in `_meta` (the same object, its key
    // prefixed: the pattern above ends where that one does).
    line = line.replace(
        &version.replacen(r#""serverInfo""#, r#"/serverInfo""#, 1),
        r#"/serverInfo":{"name":"mcp-exec","version":"CARGO_PKG_VERSION"}"#,
    );
    for field in [
        "started_at",
        "duration_ms",
        "queued_ms",
        "createdAt",
        "lastUpdatedAt",
    ] {
        for quote in ["\"", "\\\""] {
            line = mask_value(&line, &format!("{quote}{field}{quote}:"), quote);
        }
    }
    line
}

/// Replaces the value after every `key` (a number, or a string quoted with
/// `quote`) by `T`.
fn mask_value(line: &str, key: &str, quote: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(key) {
        let (head, tail) = rest.split_at(at + key.len());
        out.push_str(head);
        let end = if let Some(quoted) = tail.strip_prefix(quote) {
            quote.len() + quoted.find(quote).map_or(quoted.len(), |i| i + quote.len())
        } else {
            tail.find(|c: char| !c.is_ascii_digit())
                .unwrap_or(tail.len())
        };
        out.push('T');
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// A running transcript: the server, and the lines written so far.
struct Run {
    server: RawServer,
    out: String,
    /// The last task id the server wrote (the Tasks transcripts): written
    /// `$TASK` in `<` lines and put for `$TASK` in the lines sent.
    task: String,
}

impl Run {
    /// Reads one line and records it.
    fn read_one(&mut self) -> Value {
        let line = self.server.read_lines(1, TIMEOUT).remove(0);
        let text = String::from_utf8(line).expect("the server wrote UTF-8");
        let text = text
            .strip_suffix('\n')
            .unwrap_or_else(|| panic!("a line was cut: {text:?}"));
        let msg: Value =
            serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        let id = &msg["result"];
        if let Some(t) = id["task"]["taskId"].as_str().or(id["taskId"].as_str()) {
            self.task = t.to_owned();
        }
        let mut line = normalise(text);
        if !self.task.is_empty() {
            line = line.replace(&self.task, "$TASK");
        }
        writeln!(self.out, "< {line}").expect("write to a String");
        msg
    }

    /// Reads and records lines until the response with `id`; returns it.
    fn read_until(&mut self, id: &Value) -> Value {
        loop {
            let msg = self.read_one();
            if msg.get("id") == Some(id)
                && (msg.get("result").is_some() || msg.get("error").is_some())
            {
                return msg;
            }
        }
    }

    /// What `> LINE` reads after sending LINE (see the module doc).
    fn answer(&mut self, line: &str) {
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(o)) if o.contains_key("method") => {
                if let Some(id) = o.get("id") {
                    self.read_until(id);
                }
            }
            Ok(Value::Object(_)) => {}
            _ => {
                self.read_one();
            }
        }
    }

    /// `~ LINE`: polls until the tool result is not running.
    fn poll(&mut self, line: &str) {
        let request: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("`~` needs a JSON request ({e}): {line}"));
        let id = request["id"].clone();
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let before = self.out.len();
            self.server.send_raw(line);
            let msg = self.read_until(&id);
            let running = msg["result"]["content"][0]["text"].is_string()
                && tool_json(&msg["result"])["state"] == json!("running");
            if !running {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "still running after {TIMEOUT:?}: {line}"
            );
            self.out.truncate(before);
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Runs the script of `file` against the bare binary and returns the
/// transcript it produces (same directives, fresh `<` lines).
fn transcript(file: &str) -> String {
    let mut run = Run {
        server: RawServer::start(Target::Bare, &[("SHELL", "/bin/sh")]),
        out: String::new(),
        task: String::new(),
    };
    for (n, line) in file.lines().enumerate() {
        let (directive, rest) = line.split_at(line.len().min(2));
        match directive {
            "" | "# " => writeln!(run.out, "{line}").expect("write to a String"),
            "< " => {}
            "> " => {
                writeln!(run.out, "{line}").expect("write to a String");
                let rest = rest.replace("$TASK", &run.task);
                run.server.send_raw(&rest);
                run.answer(&rest);
            }
            "& " => {
                writeln!(run.out, "{line}").expect("write to a String");
                run.server.send_raw(rest);
            }
            "= " => {
                writeln!(run.out, "{line}").expect("write to a String");
                let id: Value = serde_json::from_str(rest)
                    .unwrap_or_else(|e| panic!("line {}: `= ID` needs a JSON id: {e}", n + 1));
                run.read_until(&id);
            }
            "~ " => {
                writeln!(run.out, "{line}").expect("write to a String");
                run.poll(rest);
            }
            _ => panic!("line {}: unknown directive: {line:?}", n + 1),
        }
    }
    run.server.close_stdin();
    run.server.read(usize::MAX, TIMEOUT, |line| {
        let text = String::from_utf8_lossy(&line);
        writeln!(run.out, "< {}", normalise(text.trim_end_matches('\n')))
            .expect("write to a String");
    });
    let status = run.server.wait_exit(TIMEOUT);
    assert!(
        status.is_some_and(|s| s.success()),
        "exit after the script: {status:?}; stderr:\n{}",
        run.server.stderr.lock().unwrap()
    );
    run.out
}

/// The token the HTTP transcript's server requires (sent on every request
/// unless a `+ Authorization:` line drops it).
const HTTP_TOKEN: &str = "golden-token";

/// Runs the script of an HTTP transcript (`tests/golden/*.http.txt`) against
/// the bare binary with `--http 127.0.0.1:0` and a token, and returns the
/// transcript it produces.
///
/// # Format
/// As the stdio one, with these directives:
/// - `> BODY` POSTs BODY to `/mcp` with `Accept: application/json,
///   text/event-stream`, the bearer token and the 2026-07-28 routing headers
///   mirrored from the body (`MCP-Protocol-Version` from its `_meta` version,
///   `Mcp-Method`, and `Mcp-Name` from `params.name` for `tools/call`).
/// - `+ Name: value` before a `>` sets a header of that one request (it
///   replaces a mirrored one); `+ Name:` drops it. `$SESSION` in a value is
///   the last `Mcp-Session-Id` the server minted.
/// - `< HTTP <status> <content-type|-> [mcp-session-id]`: the response's
///   status, type and whether it minted a session (the id is random), then
///   `< LINE` for each line of its body (an SSE event: its `data` line).
fn http_transcript(file: &str) -> String {
    let server = crate::support::Server::start_with_cli(
        Target::Bare,
        &[("SHELL", "/bin/sh"), ("MCP_EXEC_HTTP_TOKEN", HTTP_TOKEN)],
        &["--http", "127.0.0.1:0"],
    );
    let port = crate::http::bound_port(&server, "HTTP");
    let mut out = String::new();
    let mut extra: Vec<(String, String)> = Vec::new();
    let mut session = String::new();
    for (n, line) in file.lines().enumerate() {
        let (directive, rest) = line.split_at(line.len().min(2));
        match directive {
            "" | "# " => writeln!(out, "{line}").expect("write to a String"),
            "< " => {}
            "+ " => {
                writeln!(out, "{line}").expect("write to a String");
                let (name, value) = rest
                    .split_once(':')
                    .unwrap_or_else(|| panic!("line {}: `+ Name: value`", n + 1));
                extra.push((
                    name.trim().to_owned(),
                    value.trim().replace("$SESSION", &session),
                ));
            }
            "> " => {
                writeln!(out, "{line}").expect("write to a String");
                let body: Value = serde_json::from_str(rest).unwrap_or(Value::Null);
                let mut headers: Vec<(String, String)> = vec![
                    (
                        "Accept".into(),
                        "application/json, text/event-stream".into(),
                    ),
                    ("Content-Type".into(), "application/json".into()),
                    ("Authorization".into(), format!("Bearer {HTTP_TOKEN}")),
                ];
                let meta = &body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"];
                if let Some(v) = meta.as_str() {
                    headers.push(("MCP-Protocol-Version".into(), v.into()));
                    if let Some(m) = body["method"].as_str() {
                        headers.push(("Mcp-Method".into(), m.into()));
                        if m == "tools/call"
                            && let Some(name) = body["params"]["name"].as_str()
                        {
                            headers.push(("Mcp-Name".into(), name.into()));
                        }
                    }
                }
                for (name, value) in extra.drain(..) {
                    headers.retain(|(k, _)| !k.eq_ignore_ascii_case(&name));
                    if !value.is_empty() {
                        headers.push((name, value));
                    }
                }
                let headers: Vec<(&str, &str)> = headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let reply =
                    crate::support::http::request(port, "POST", "/mcp", &headers, rest, TIMEOUT)
                        .unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
                let minted = reply.header("mcp-session-id");
                if let Some(id) = minted {
                    session = id.to_owned();
                }
                writeln!(
                    out,
                    "< HTTP {} {}{}",
                    reply.status,
                    reply.header("content-type").unwrap_or("-"),
                    if minted.is_some() {
                        " mcp-session-id"
                    } else {
                        ""
                    }
                )
                .expect("write to a String");
                let sse = reply.header("content-type") == Some("text/event-stream");
                for body_line in reply.body.lines().filter(|l| !l.is_empty()) {
                    let body_line = if sse {
                        match body_line.strip_prefix("data: ") {
                            Some(data) => data,
                            None => continue,
                        }
                    } else {
                        body_line
                    };
                    writeln!(out, "< {}", normalise(body_line)).expect("write to a String");
                }
            }
            _ => panic!("line {}: unknown directive: {line:?}", n + 1),
        }
    }
    drop(server);
    out
}

/// A line diff (longest common subsequence) of two texts: ` ` same, `-`
/// expected only (with its line number in the file), `+` actual only, with
/// two lines of context; for a changed line, where it first differs.
fn diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // (tag, line number in the expected file, text)
    let mut ops: Vec<(char, usize, &str)> = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', i + 1, a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', i + 1, a[i]));
            i += 1;
        } else {
            ops.push(('+', i + 1, b[j]));
            j += 1;
        }
    }
    let near_change = |k: usize| {
        ops[k.saturating_sub(2)..(k + 3).min(ops.len())]
            .iter()
            .any(|(t, _, _)| *t != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (tag, line, text)) in ops.iter().enumerate() {
        if !near_change(k) {
            skipped = true;
            continue;
        }
        if skipped {
            out.push_str("   …\n");
            skipped = false;
        }
        if *tag == '+' {
            let _ = writeln!(out, "+      {text}");
        } else {
            let _ = writeln!(out, "{tag} {line:>4} {text}");
        }
        if *tag == '-'
            && let Some((_, _, next)) = ops[k + 1..]
                .iter()
                .take_while(|(t, _, _)| *t != ' ')
                .find(|(t, _, _)| *t == '+')
        {
            let _ = writeln!(out, "       {}", first_difference(text, next));
        }
    }
    out
}

/// Where two lines first differ, with 40 bytes of context each side.
fn first_difference(expected: &str, actual: &str) -> String {
    let at = expected
        .bytes()
        .zip(actual.bytes())
        .take_while(|(x, y)| x == y)
        .count();
    let window = |s: &str| {
        let from = s.floor_char_boundary(at.saturating_sub(40));
        let to = s.ceil_char_boundary((at + 40).min(s.len()));
        s[from..to].to_owned()
    };
    format!(
        "first difference at byte {at}: expected …{}… got …{}…",
        window(expected),
        window(actual)
    )
}

/// Runs `tests/golden/<revision>.txt`; compares or (with `MCP_EXEC_BLESS=1`)
/// rewrites it.
fn check(revision: &str) {
    check_file(&format!("{revision}.txt"), transcript);
}

/// Runs `tests/golden/<name>` with `run`; compares or (with
/// `MCP_EXEC_BLESS=1`) rewrites it.
fn check_file(name: &str, run: fn(&str) -> String) {
    let path = golden_dir().join(name);
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let actual = run(&expected);
    if blessing() {
        if actual != expected {
            std::fs::write(&path, &actual)
                .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
            eprintln!("blessed {}", path.display());
        }
        return;
    }
    assert!(
        actual == expected,
        "the wire format differs from {} (- expected, + actual; line numbers of the file).\n\
         If the change is intended, run with MCP_EXEC_BLESS=1 and review the diff.\n{}",
        path.display(),
        diff(&expected, &actual)
    );
}

#[test]
fn the_2024_11_05_transcript_is_what_the_server_writes() {
    check("2024-11-05");
}

#[test]
fn the_2025_03_26_transcript_is_what_the_server_writes() {
    check("2025-03-26");
}

#[test]
fn the_2025_06_18_transcript_is_what_the_server_writes() {
    check("2025-06-18");
}

#[test]
fn the_2025_11_25_transcript_is_what_the_server_writes() {
    check("2025-11-25");
}

#[test]
fn the_2026_07_28_transcript_is_what_the_server_writes() {
    check("2026-07-28");
}

#[test]
fn the_2026_07_28_http_transcript_is_what_the_server_writes() {
    check_file("2026-07-28.http.txt", http_transcript);
}

#[test]
fn the_2025_11_25_tasks_transcript_is_what_the_server_writes() {
    check_file("tasks-2025-11-25.txt", transcript);
}

#[test]
fn the_2026_07_28_tasks_extension_transcript_is_what_the_server_writes() {
    check_file("tasks-2026-07-28.txt", transcript);
}

#[test]
fn the_golden_directory_holds_one_transcript_per_revision_and_nothing_else() {
    let mut names: Vec<String> = std::fs::read_dir(golden_dir())
        .expect("tests/golden")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut expected: Vec<String> = REVISIONS.iter().map(|r| format!("{r}.txt")).collect();
    expected.extend(MODERN.iter().map(|m| m.to_string()));
    expected.extend(TASKS.iter().map(|m| m.to_string()));
    expected.sort();
    assert_eq!(names, expected);
}

#[test]
fn the_transcripts_send_the_same_script_except_for_the_initialize_version() {
    let script = |revision: &str| -> Vec<String> {
        let path = golden_dir().join(format!("{revision}.txt"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
            .lines()
            .filter(|l| !l.starts_with("< ") && !l.starts_with("# "))
            .map(|l| l.replace(revision, "REVISION"))
            .collect()
    };
    let first = script(REVISIONS[0]);
    for revision in &REVISIONS[1..] {
        assert_eq!(
            script(revision),
            first,
            "the script of {revision} differs from {}",
            REVISIONS[0]
        );
    }
}
