//! `POST /exec` (docs/http.md): the event stream, queueing, coalescing,
//! redaction, ownership of its job, disconnects, statuses, stdin.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Both, http};
use crate::support::{LATEST, TIMEOUT, Target, wait_for};

/// One server-sent event: its name and its JSON data.
#[derive(Debug, Clone)]
struct Event {
    name: String,
    data: Value,
}

/// A `POST /exec` response read event by event.
struct Stream {
    reader: BufReader<TcpStream>,
    /// Decoded body bytes not yet split into events.
    pending: String,
    /// Comment lines seen (`: keep-alive`).
    comments: usize,
    done: bool,
}

impl Stream {
    /// Posts `body` to `/exec` and reads the response head (must be 200 SSE).
    fn open(port: u16, body: &Value) -> Stream {
        let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(TIMEOUT)).unwrap();
        let body = body.to_string();
        let mut w = c.try_clone().unwrap();
        write!(
            w,
            "POST /exec HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut reader = BufReader::new(c);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.contains(" 200 "), "{status}");
        let mut chunked = false;
        let mut sse = false;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let l = line.trim().to_ascii_lowercase();
            if l.is_empty() {
                break;
            }
            chunked |= l == "transfer-encoding: chunked";
            sse |= l == "content-type: text/event-stream";
        }
        assert!(chunked && sse, "not a chunked event stream");
        Stream {
            reader,
            pending: String::new(),
            comments: 0,
            done: false,
        }
    }

    /// Reads one chunk into `pending`; `false` at the end of the body.
    fn fill(&mut self) -> bool {
        if self.done {
            return false;
        }
        let mut size = String::new();
        self.reader.read_line(&mut size).unwrap();
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            self.done = true;
            return false;
        }
        let mut buf = vec![0; n + 2];
        self.reader.read_exact(&mut buf).unwrap();
        self.pending
            .push_str(std::str::from_utf8(&buf[..n]).expect("UTF-8 events"));
        true
    }

    /// The next event (comments are counted and skipped); `None` at the end.
    fn next(&mut self) -> Option<Event> {
        loop {
            while let Some(end) = self.pending.find("\n\n") {
                let block: String = self.pending.drain(..end + 2).collect();
                let mut name = None;
                let mut data = None;
                for line in block.lines() {
                    if line.starts_with(':') {
                        self.comments += 1;
                    } else if let Some(n) = line.strip_prefix("event: ") {
                        name = Some(n.to_owned());
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data = Some(serde_json::from_str(d).unwrap());
                    }
                }
                if let (Some(name), Some(data)) = (name, data) {
                    return Some(Event { name, data });
                }
            }
            if !self.fill() {
                return None;
            }
        }
    }

    /// Every remaining event, to the end of the stream.
    fn rest(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.next()).collect()
    }
}

/// The concatenated `data` of one stream's events, checking that their
/// offsets are contiguous from 0; returns (data, total bytes).
fn joined(events: &[Event], stream: &str) -> (String, u64) {
    let mut data = String::new();
    let mut next = 0;
    for e in events.iter().filter(|e| e.name == stream) {
        assert_eq!(e.data["offset"], json!(next), "{stream}: {e:?}");
        next += e.data["bytes"].as_u64().unwrap();
        data.push_str(e.data["data"].as_str().unwrap());
    }
    (data, next)
}

fn names(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.name.as_str()).collect()
}

fn an_exec_stream_sends_started_stdout_stderr_and_exit_with_offsets(t: Target) {
    let s = Both::start(t, &[], &[]);
    let events = Stream::open(
        s.port,
        &json!({"command": "printf 'a\\nb\\n'; echo e >&2; exit 3"}),
    )
    .rest();
    // A job's separate writes may arrive as separate events: compare the
    // sequence with repeats collapsed, and each stream joined.
    let mut kinds = names(&events);
    kinds.dedup();
    assert_eq!(kinds, ["started", "stdout", "stderr", "exit"], "{events:?}");
    let started = &events[0].data;
    let id = started["job_id"].as_str().unwrap();
    assert!(started["pid"].as_u64().is_some_and(|p| p > 0), "{started}");
    assert_eq!(joined(&events, "stdout"), ("a\nb\n".to_owned(), 4));
    assert_eq!(joined(&events, "stderr"), ("e\n".to_owned(), 2));
    for e in events.iter().filter(|e| e.name.starts_with("std")) {
        let keys: Vec<&String> = e.data.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["data", "offset", "bytes"], "{e:?}");
    }
    let exit = &events.last().unwrap().data;
    assert_eq!(exit["job_id"], json!(id), "{exit}");
    assert_eq!(exit["state"], json!("error"), "{exit}");
    assert_eq!(exit["exit_code"], json!(3), "{exit}");
    assert_eq!(exit["stdout_bytes"], json!(4), "{exit}");
    assert_eq!(exit["stderr_bytes"], json!(2), "{exit}");
    assert!(exit["duration_ms"].is_u64(), "{exit}");
    assert!(exit["started_at"].is_string(), "{exit}");
    assert!(
        exit.get("stdout").is_none() && exit.get("stderr").is_none(),
        "{exit}"
    );
    // Delivered exactly once: the job is gone.
    let sid = s.initialize();
    let listed = s.call(&sid, 1, "list_jobs", json!({}));
    assert_eq!(listed["jobs"], json!([]), "{listed}");
}

fn an_exec_job_waiting_for_capacity_is_announced_as_queued_first(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_MAX_RUNNING", "1")], &[]);
    let sid = s.initialize();
    let busy = s.call(
        &sid,
        1,
        "execute",
        json!({"command": "sleep 1", "nowait": true}),
    );
    let events = Stream::open(s.port, &json!({"command": "echo after"})).rest();
    let mut kinds = names(&events);
    kinds.dedup();
    assert_eq!(kinds, ["queued", "started", "stdout", "exit"], "{events:?}");
    assert_eq!(events[0].data["job_id"], events[1].data["job_id"]);
    let exit = &events.last().unwrap().data;
    assert_eq!(exit["state"], json!("success"), "{exit}");
    assert!(exit["queued_ms"].is_u64(), "{exit}");
    s.call(&sid, 2, "wait", json!({"job_ids": [busy["job_id"]]}));
}

fn output_over_64_kib_arrives_in_contiguous_chunks_of_at_most_64_kib(t: Target) {
    let s = Both::start(t, &[], &[]);
    // 300 000 bytes in one burst: several chunks, none over 64 KiB.
    let events = Stream::open(
        s.port,
        &json!({"command": "head -c 300000 /dev/zero | tr '\\0' x"}),
    )
    .rest();
    let chunks: Vec<&Event> = events.iter().filter(|e| e.name == "stdout").collect();
    assert!(chunks.len() >= 5, "{} chunks", chunks.len());
    assert!(
        chunks
            .iter()
            .all(|e| e.data["bytes"].as_u64().unwrap() <= 64 * 1024),
        "a chunk over 64 KiB"
    );
    let (data, total) = joined(&events, "stdout");
    assert_eq!(total, 300_000);
    assert!(data.len() == 300_000 && data.bytes().all(|b| b == b'x'));
    let exit = &events.last().unwrap().data;
    assert_eq!(exit["stdout_bytes"], json!(300_000), "{exit}");
}

fn exec_events_are_redacted_with_raw_offsets(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_REDACT", "builtin")], &[]);
    let events = Stream::open(
        s.port,
        &json!({"command": "echo key=AKIAIOSFODNN7EXAMPLE; echo done"}),
    )
    .rest();
    let (data, total) = joined(&events, "stdout");
    assert!(!data.contains("AKIAIOSFODNN7EXAMPLE"), "{data:?}");
    assert!(
        data.contains("[REDACTED]") && data.contains("done"),
        "{data:?}"
    );
    // Offsets describe the raw stream.
    assert_eq!(total, "key=AKIAIOSFODNN7EXAMPLE\ndone\n".len() as u64);
    assert!(
        events
            .iter()
            .any(|e| e.name == "stdout" && e.data["redacted"].as_u64() >= Some(1)),
        "{events:?}"
    );
}

fn an_exec_event_shows_no_byte_of_a_secret_that_later_output_completes(t: Target) {
    let mut s = Both::start(t, &[("MCP_EXEC_REDACT", "builtin")], &[]);
    s.stdio.initialize(LATEST);
    let go = format!("/tmp/mcp-exec-exec-go-{}", std::process::id());
    let first = "db=postgres://admin:hunter2hunter2";
    let command = format!(
        "printf '%s' '{first}'; n=0; while [ ! -e {go} ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done; \
         printf '@db/app\\n'; rm -f {go}"
    );
    let mut stream = Stream::open(s.port, &json!({"command": command}));
    let started = stream.next().unwrap();
    let id = started.data["job_id"].as_str().unwrap().to_owned();
    // The first write is whole in the job's window …
    let mut out = Value::Null;
    let there = wait_for(TIMEOUT, || {
        out = s
            .stdio
            .call("output", json!({"job_id": id, "stdout": "all"}));
        out["stdout"]["total_bytes"] == json!(first.len())
    });
    assert!(there, "{out}");
    // … and the event sent for it stops before what could still be a secret.
    let event = stream.next().unwrap();
    assert_eq!(
        (event.name.as_str(), &event.data),
        (
            "stdout",
            &json!({"data": "db=postgres", "offset": 0, "bytes": 11})
        ),
    );
    s.stdio.exec(&format!("touch {go}"));
    let mut events = vec![event];
    events.extend(stream.rest());
    let (data, total) = joined(&events, "stdout");
    assert_eq!(
        data, "db=postgres://admin:[REDACTED]@db/app\n",
        "{events:?}"
    );
    assert_eq!(total, (first.len() + "@db/app\n".len()) as u64);
}

fn a_stream_owned_job_is_listed_refused_by_wait_and_kill_leaves_its_result_to_the_stream(
    t: Target,
) {
    let mut s = Both::start(t, &[], &[]);
    let mut stream = Stream::open(
        s.port,
        &json!({"command": "echo up; sleep 30", "label": "owned"}),
    );
    let started = stream.next().unwrap();
    assert_eq!(started.name, "started", "{started:?}");
    let id = started.data["job_id"].as_str().unwrap().to_owned();
    s.stdio.initialize(LATEST);
    let listed = s.stdio.call("list_jobs", json!({}));
    assert!(
        listed["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["job_id"] == json!(id)),
        "{listed}"
    );
    let status = s.stdio.call("status", json!({"job_id": id}));
    assert_eq!(status["state"], json!("running"), "{status}");
    let err = s.stdio.call_err("wait", json!({"job_ids": [id]}));
    assert_eq!(err, format!("job \"{id}\" is owned by an /exec stream"));
    let killed = s.stdio.call("kill", json!({"job_id": id}));
    assert_eq!(killed["terminated"], json!(true), "{killed}");
    assert_eq!(
        killed["result_delivered_elsewhere"],
        json!(true),
        "{killed}"
    );
    assert!(killed.get("result").is_none(), "{killed}");
    let events = stream.rest();
    let exit = &events.last().unwrap();
    assert_eq!(exit.name, "exit", "{events:?}");
    assert_eq!(exit.data["signal"], json!("terminated"), "{exit:?}");
    assert_eq!(exit.data["state"], json!("error"), "{exit:?}");
    assert_eq!(exit.data["label"], json!("owned"), "{exit:?}");
    let listed = s.stdio.call("list_jobs", json!({}));
    assert_eq!(listed["jobs"], json!([]), "{listed}");
}

fn a_client_that_leaves_an_exec_stream_ends_its_job(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "1")], &[]);
    let marker = format!("exec-marker-{t:?}-{}", std::process::id());
    let alive = || {
        Command::new("pgrep")
            .args(["-f", &marker])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    {
        let mut stream = Stream::open(
            s.port,
            &json!({"command": format!("echo up; sleep 60; echo {marker}")}),
        );
        assert_eq!(stream.next().unwrap().name, "started");
        assert_eq!(stream.next().unwrap().name, "stdout");
        assert!(alive(), "no process carries the marker");
        // Dropped: the client goes away mid-stream.
    }
    assert!(
        wait_for(Duration::from_secs(10), || !alive()),
        "the job outlived its stream"
    );
    let sid = s.initialize();
    assert!(
        wait_for(Duration::from_secs(5), || {
            s.call(&sid, 1, "list_jobs", json!({}))["jobs"] == json!([])
        }),
        "the job is still listed"
    );
}

fn exec_refuses_bad_arguments_400_no_sse_accept_406_and_no_token_401(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_HTTP_TOKEN", "tok-exec")], &[]);
    let auth = ("Authorization", "Bearer tok-exec");
    let sse = ("Accept", "text/event-stream");
    let body = json!({"command": "echo x"}).to_string();
    let r = http(s.port, "POST", "/exec", &[sse], &body);
    assert_eq!(r.status, 401, "{r:?}");
    let r = http(
        s.port,
        "POST",
        "/exec",
        &[auth, ("Accept", "application/json")],
        &body,
    );
    assert_eq!(r.status, 406, "{r:?}");
    let r = http(s.port, "POST", "/exec", &[auth], &body);
    assert_eq!(r.status, 406, "{r:?}");
    let bad = json!({"command": "echo x", "argv": ["echo"]}).to_string();
    let r = http(s.port, "POST", "/exec", &[auth, sse], &bad);
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(
        r.json(),
        json!({"error": "give either \"command\" or \"argv\", not both"})
    );
    let r = http(
        s.port,
        "POST",
        "/exec",
        &[auth, sse],
        &json!({"timeout": 0, "command": "x"}).to_string(),
    );
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(
        r.json(),
        json!({"error": "invalid arguments: \"timeout\" must be > 0"})
    );
    let r = http(s.port, "POST", "/exec", &[auth, sse], "[1]");
    assert_eq!(r.status, 400, "{r:?}");
    let r = http(s.port, "POST", "/exec", &[auth, sse], &body);
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body.contains("event: exit"), "{r:?}");
}

fn an_idle_exec_stream_gets_a_keep_alive_comment_every_15_s(t: Target) {
    let s = Both::start(t, &[], &[]);
    let mut stream = Stream::open(s.port, &json!({"command": "sleep 16.5; echo late"}));
    let events = stream.rest();
    assert_eq!(stream.comments, 1, "{events:?}");
    assert_eq!(
        events.last().unwrap().data["exit_code"],
        json!(0),
        "{events:?}"
    );
}

fn a_full_queue_gets_503_with_the_queue_full_text(t: Target) {
    let s = Both::start(
        t,
        &[("MCP_EXEC_MAX_RUNNING", "1"), ("MCP_EXEC_MAX_QUEUED", "0")],
        &[],
    );
    let sid = s.initialize();
    let busy = s.call(
        &sid,
        1,
        "execute",
        json!({"command": "sleep 1", "nowait": true}),
    );
    let body = json!({"command": "echo never"}).to_string();
    let r = http(
        s.port,
        "POST",
        "/exec",
        &[("Accept", "text/event-stream")],
        &body,
    );
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(
        r.json(),
        json!({"error": "job queue is full (1 running, 0 queued)"})
    );
    s.call(&sid, 2, "wait", json!({"job_ids": [busy["job_id"]]}));
}

fn killing_a_queued_stream_job_cancels_it_and_the_stream_delivers_the_result(t: Target) {
    let mut s = Both::start(t, &[("MCP_EXEC_MAX_RUNNING", "1")], &[]);
    s.stdio.initialize(LATEST);
    let busy = s
        .stdio
        .call("execute", json!({"command": "sleep 2", "nowait": true}));
    let mut stream = Stream::open(s.port, &json!({"command": "echo never"}));
    let queued = stream.next().unwrap();
    assert_eq!(queued.name, "queued", "{queued:?}");
    let id = queued.data["job_id"].clone();
    let killed = s.stdio.call("kill", json!({"job_id": id}));
    assert_eq!(killed["cancelled_before_start"], json!(true), "{killed}");
    assert_eq!(
        killed["result_delivered_elsewhere"],
        json!(true),
        "{killed}"
    );
    let events = stream.rest();
    assert_eq!(names(&events), ["exit"], "{events:?}");
    assert_eq!(
        events[0].data["start_error"],
        json!("cancelled before start"),
        "{events:?}"
    );
    s.stdio
        .call("kill", json!({"job_id": busy["job_id"], "signal": "KILL"}));
}

fn an_oversize_exec_body_gets_413(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_MAX_LINE_BYTES", "1000")], &[]);
    let big = json!({"command": format!("echo {}", "y".repeat(2000))}).to_string();
    let r = http(
        s.port,
        "POST",
        "/exec",
        &[("Accept", "text/event-stream")],
        &big,
    );
    assert_eq!(r.status, 413, "{r:?}");
}

fn the_exec_stdin_string_reaches_the_job_and_eof_follows(t: Target) {
    let s = Both::start(t, &[], &[]);
    let events = Stream::open(
        s.port,
        &json!({"command": "cat; echo eof", "stdin": "fed\n"}),
    )
    .rest();
    let (data, _) = joined(&events, "stdout");
    assert_eq!(data, "fed\neof\n", "{events:?}");
    assert_eq!(
        events.last().unwrap().data["exit_code"],
        json!(0),
        "{events:?}"
    );
}

fn a_tty_exec_streams_the_terminal_as_stdout_and_its_stdin_ends_with_c_d(t: Target) {
    let s = Both::start(t, &[], &[]);
    let events = Stream::open(
        s.port,
        &json!({"command": "cat; [ -t 1 ] && echo eof-on-a-tty", "stdin": "fed\n", "tty": true}),
    )
    .rest();
    let (data, _) = joined(&events, "stdout");
    // The terminal echoes the input, cat writes it back, C-d ends cat.
    assert_eq!(data, "fed\r\nfed\r\neof-on-a-tty\r\n", "{events:?}");
    assert!(!events.iter().any(|e| e.name == "stderr"), "{events:?}");
    let exit = &events.last().unwrap().data;
    assert_eq!(exit["exit_code"], json!(0), "{events:?}");
    assert_eq!(exit["tty"], json!(true), "{exit}");
}

macro_rules! exec_targets {
    ($($name:ident),* $(,)?) => {
        mod bare { $( #[test] fn $name() { if crate::support::Target::Bare.available() { super::$name(crate::support::Target::Bare) } } )* }
        mod pid1 { $( #[test] fn $name() { if crate::support::Target::Pid1.available() { super::$name(crate::support::Target::Pid1) } } )* }
    };
}

exec_targets!(
    an_exec_stream_sends_started_stdout_stderr_and_exit_with_offsets,
    an_exec_job_waiting_for_capacity_is_announced_as_queued_first,
    a_stream_owned_job_is_listed_refused_by_wait_and_kill_leaves_its_result_to_the_stream,
    a_client_that_leaves_an_exec_stream_ends_its_job,
    the_exec_stdin_string_reaches_the_job_and_eof_follows,
    a_tty_exec_streams_the_terminal_as_stdout_and_its_stdin_ends_with_c_d,
);

/// Transport-level behaviour: the bare target is enough.
mod bare_only {
    use crate::support::Target;

    macro_rules! bare {
        ($($name:ident),* $(,)?) => { $( #[test] fn $name() { super::$name(Target::Bare) } )* };
    }

    bare!(
        output_over_64_kib_arrives_in_contiguous_chunks_of_at_most_64_kib,
        exec_events_are_redacted_with_raw_offsets,
        an_exec_event_shows_no_byte_of_a_secret_that_later_output_completes,
        exec_refuses_bad_arguments_400_no_sse_accept_406_and_no_token_401,
        an_oversize_exec_body_gets_413,
        a_full_queue_gets_503_with_the_queue_full_text,
        an_idle_exec_stream_gets_a_keep_alive_comment_every_15_s,
        killing_a_queued_stream_job_cancels_it_and_the_stream_delivers_the_result,
    );
}
