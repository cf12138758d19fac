//! `GET /files/<dir>?watch[&recursive]` (docs/http.md): the SSE stream of a
//! directory's changes — create, modify, delete, move, recursive into new
//! directories, a 10,000-file burst that ends in events or `resync` (never
//! silent loss, checked against the tree), the end when the directory
//! goes, errors, the token, and no inotify descriptor left when the client
//! goes.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Both, http};
use crate::support::{HostPath, TIMEOUT, Target, wait_for};

/// One server-sent event: its name and its JSON data.
#[derive(Debug, Clone)]
struct Event {
    name: String,
    data: Value,
}

impl Event {
    fn path(&self) -> &str {
        self.data["path"].as_str().unwrap_or("")
    }
}

/// A watch stream read event by event.
struct Stream {
    reader: BufReader<TcpStream>,
    pending: String,
    done: bool,
}

/// A `GET` of `path` that must not be a stream: (status, body).
fn refused(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let r = http(port, "GET", path, headers, "");
    (r.status, r.json())
}

impl Stream {
    /// `GET path` (with `headers`); the response must be a 200 chunked
    /// event stream whose first event is `ready`.
    fn open(port: u16, path: &str, headers: &[(&str, &str)]) -> Stream {
        let c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(TIMEOUT)).unwrap();
        let mut w = c.try_clone().unwrap();
        let mut head = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n");
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        w.write_all(head.as_bytes()).unwrap();
        let mut reader = BufReader::new(c);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.contains(" 200 "), "{status}");
        let (mut chunked, mut sse) = (false, false);
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
        let mut s = Stream {
            reader,
            pending: String::new(),
            done: false,
        };
        let ready = s.next().expect("a ready event");
        assert_eq!(ready.name, "ready", "{ready:?}");
        s
    }

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

    /// The next event (comments skipped); `None` at the end of the stream.
    fn next(&mut self) -> Option<Event> {
        loop {
            while let Some(end) = self.pending.find("\n\n") {
                let block: String = self.pending.drain(..end + 2).collect();
                let mut name = None;
                let mut data = None;
                for line in block.lines() {
                    if let Some(n) = line.strip_prefix("event: ") {
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

    /// Events until one of `name` for `path` (included).
    fn until(&mut self, name: &str, path: &str) -> Vec<Event> {
        let mut got = Vec::new();
        loop {
            let e = self
                .next()
                .unwrap_or_else(|| panic!("the stream ended before {name} {path}: {got:?}"));
            let done = e.name == name && e.path() == path;
            got.push(e);
            if done {
                return got;
            }
        }
    }
}

/// A fresh host directory (the bare and PID-1 targets share the host's).
fn fresh_dir(what: &str) -> HostPath {
    let d = HostPath::new(what);
    std::fs::create_dir(&d.0).expect("a fresh directory");
    d
}

/// The inotify descriptors the server holds (its host pid's `/proc`).
fn inotify_fds(s: &Both) -> usize {
    let pid = s.server_pid.expect("the server's pid");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the server's descriptors")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|t| t.to_string_lossy().contains("inotify"))
        .count()
}

const TOKEN: &str = "tok-watch";
const AUTH: (&str, &str) = ("Authorization", "Bearer tok-watch");

fn create_modify_delete_and_move_arrive_as_typed_events_with_absolute_paths(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_HTTP_TOKEN", TOKEN)], &[]);
    let dir = fresh_dir("watch-basic");
    let mut w = Stream::open(s.port, &format!("/files{}?watch", dir.0), &[AUTH]);
    let a = format!("{}/a.txt", dir.0);
    let b = format!("{}/b.txt", dir.0);
    std::fs::write(&a, "one").unwrap();
    let got = w.until("create", &a);
    assert_eq!(
        got.last().unwrap().data,
        json!({"type": "create", "path": a, "is_dir": false})
    );
    std::fs::write(&a, "two").unwrap();
    let got = w.until("modify", &a);
    assert_eq!(
        got.last().unwrap().data,
        json!({"type": "modify", "path": a, "is_dir": false})
    );
    std::fs::rename(&a, &b).unwrap();
    let got = w.until("move", &b);
    assert_eq!(
        got.last().unwrap().data,
        json!({"type": "move", "path": b, "from": a, "is_dir": false})
    );
    std::fs::remove_file(&b).unwrap();
    w.until("delete", &b);
    let d = format!("{}/d", dir.0);
    std::fs::create_dir(&d).unwrap();
    let got = w.until("create", &d);
    assert_eq!(got.last().unwrap().data["is_dir"], json!(true));
}

fn a_recursive_watch_follows_into_a_new_subdirectory_and_reports_what_it_already_held(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("watch-recursive");
    let mut w = Stream::open(s.port, &format!("/files{}?watch&recursive", dir.0), &[]);
    // Created together: the inner file may exist before the new
    // directory's watch does, and is still reported.
    let deep = format!("{}/sub/deep", dir.0);
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(format!("{deep}/early"), "").unwrap();
    let mut seen = BTreeSet::new();
    while !seen.contains(&format!("{deep}/early")) {
        let e = w.next().expect("events");
        assert_eq!(e.name, "create", "{e:?}");
        seen.insert(e.path().to_owned());
    }
    assert!(seen.contains(&format!("{}/sub", dir.0)), "{seen:?}");
    assert!(seen.contains(&deep), "{seen:?}");
    let late = format!("{deep}/late");
    std::fs::write(&late, "x").unwrap();
    w.until("create", &late);
    // Without `recursive`, only the directory itself is watched.
    let mut flat = Stream::open(s.port, &format!("/files{}?watch", dir.0), &[]);
    std::fs::write(format!("{deep}/unseen"), "").unwrap();
    let top = format!("{}/top", dir.0);
    std::fs::write(&top, "").unwrap();
    let got = flat.until("create", &top);
    assert_eq!(got.len(), 1, "{got:?}");
}

fn a_burst_of_10000_files_ends_in_events_or_resync_never_silent_loss(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("watch-burst");
    let mut w = Stream::open(s.port, &format!("/files{}?watch&recursive", dir.0), &[]);
    let sub = format!("{}/sub", dir.0);
    std::fs::create_dir(&sub).unwrap();
    for i in 0..10_000 {
        let parent = if i % 2 == 0 { &dir.0 } else { &sub };
        std::fs::write(format!("{parent}/f{i}"), "x").unwrap();
    }
    // The end of the burst, seen when its create arrives; after a resync
    // (which may have dropped it) a new one is made.
    let mut marker = format!("{}/done0", dir.0);
    std::fs::write(&marker, "").unwrap();
    let mut created = BTreeSet::new();
    let mut resyncs = 0;
    loop {
        let e = w.next().expect("the burst's events");
        match e.name.as_str() {
            "resync" => {
                resyncs += 1;
                marker = format!("{}/done{resyncs}", dir.0);
                std::fs::write(&marker, "").unwrap();
            }
            "create" => {
                created.insert(e.path().to_owned());
            }
            "modify" => {}
            other => panic!("unexpected {other}: {e:?}"),
        }
        if created.contains(&marker) {
            break;
        }
    }
    let mut tree = BTreeSet::new();
    for d in [&dir.0, &sub] {
        for e in std::fs::read_dir(d).unwrap() {
            tree.insert(format!("{d}/{}", e.unwrap().file_name().to_string_lossy()));
        }
    }
    let missing: Vec<&String> = tree.difference(&created).collect();
    assert!(
        missing.is_empty() || resyncs > 0,
        "{} paths of the tree were never reported and no resync came: {:?}…",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    eprintln!(
        "burst: {} of {} paths reported, {resyncs} resync",
        tree.len() - missing.len(),
        tree.len()
    );
    // Either way the watch goes on, in both directories.
    let after = format!("{sub}/after");
    std::fs::write(&after, "").unwrap();
    w.until("create", &after);
}

fn deleting_the_watched_directory_ends_the_stream_with_an_end_event(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("watch-end");
    let watched = format!("{}/w", dir.0);
    std::fs::create_dir(&watched).unwrap();
    let mut w = Stream::open(s.port, &format!("/files{watched}?watch"), &[]);
    std::fs::remove_dir(&watched).unwrap();
    let rest: Vec<Event> = std::iter::from_fn(|| w.next()).collect();
    let end = rest.last().expect("an end event");
    assert_eq!(end.name, "end", "{rest:?}");
    assert!(
        end.data["reason"].as_str().unwrap().contains("deleted"),
        "{end:?}"
    );
}

fn a_watch_needs_the_token_an_existing_directory_and_the_policy(t: Target) {
    let dir = fresh_dir("watch-refused");
    let root = format!("{}/root", dir.0);
    std::fs::create_dir(&root).unwrap();
    std::fs::write(format!("{root}/file"), "").unwrap();
    let s = Both::start(
        t,
        &[
            ("MCP_EXEC_HTTP_TOKEN", TOKEN),
            ("MCP_EXEC_ALLOWED_CWDS", &root),
            ("MCP_EXEC_DEFAULT_CWD", &root),
        ],
        &[],
    );
    let url = |p: &str| format!("/files{p}?watch");
    assert_eq!(refused(s.port, &url(&root), &[]).0, 401);
    let (code, body) = refused(s.port, &url(&format!("{root}/nope")), &[AUTH]);
    assert_eq!(code, 404, "{body}");
    let (code, body) = refused(s.port, &url(&format!("{root}/file")), &[AUTH]);
    assert_eq!(code, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("not a directory"),
        "{body}"
    );
    let (code, body) = refused(s.port, &url(&dir.0), &[AUTH]);
    assert_eq!(code, 403, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("outside the allowed directories"),
        "{body}"
    );
    // The allowed root itself may be watched.
    let mut w = Stream::open(s.port, &format!("{}&recursive", url(&root)), &[AUTH]);
    let f = format!("{root}/new");
    std::fs::write(&f, "").unwrap();
    w.until("create", &f);
}

fn a_client_that_goes_away_ends_its_watch_and_leaves_no_inotify_descriptor(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("watch-gone");
    std::fs::create_dir_all(format!("{}/a/b", dir.0)).unwrap();
    let before = inotify_fds(&s);
    {
        let mut w = Stream::open(s.port, &format!("/files{}?watch&recursive", dir.0), &[]);
        assert_eq!(inotify_fds(&s), before + 1);
        let f = format!("{}/a/b/f", dir.0);
        std::fs::write(&f, "").unwrap();
        w.until("create", &f);
        // Dropped: the client goes away.
    }
    assert!(
        wait_for(Duration::from_secs(10), || inotify_fds(&s) == before),
        "the watch outlived its client: {} inotify descriptors, {before} before",
        inotify_fds(&s)
    );
    // Still serving.
    let mut again = Stream::open(s.port, &format!("/files{}?watch", dir.0), &[]);
    let g = format!("{}/g", dir.0);
    std::fs::write(&g, "").unwrap();
    again.until("create", &g);
}

fn at_most_16_watch_streams_are_open_at_once_and_a_closed_one_frees_its_slot(t: Target) {
    let s = Both::start(t, &[], &[]);
    let dir = fresh_dir("watch-cap");
    let url = format!("/files{}?watch", dir.0);
    let mut open: Vec<Stream> = (0..16).map(|_| Stream::open(s.port, &url, &[])).collect();
    let (code, body) = refused(s.port, &url, &[]);
    assert_eq!(code, 503, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("16 watch streams"),
        "{body}"
    );
    drop(open.pop());
    let freed = wait_for(Duration::from_secs(10), || inotify_fds(&s) == 15);
    assert!(freed, "the closed stream's watch is still open");
    let mut again = Stream::open(s.port, &url, &[]);
    let f = format!("{}/f", dir.0);
    std::fs::write(&f, "").unwrap();
    again.until("create", &f);
    open[0].until("create", &f);
}

/// envd's `CreateWatcher` of `dir`: (HTTP status, answer).
fn envd_watcher(envd: u16, dir: &str) -> (u16, Value) {
    let r = crate::support::http::request(
        envd,
        "POST",
        "/filesystem.Filesystem/CreateWatcher",
        &[("Content-Type", "application/json")],
        &json!({"path": dir, "recursive": false}).to_string(),
        TIMEOUT,
    )
    .unwrap();
    (r.status, r.json())
}

fn every_watch_of_every_listener_draws_on_one_inotify_budget_and_jobs_keep_the_rest(t: Target) {
    let mut s = Both::start(
        t,
        &[("MCP_EXEC_MAX_WATCHES", "3")],
        &["--envd", "127.0.0.1:0"],
    );
    let envd = crate::http::bound_port(&s.stdio, "envd");
    let dir = fresh_dir("watch-budget");
    let url = format!("/files{}?watch", dir.0);
    let first = Stream::open(s.port, &url, &[]);
    let mut ids = Vec::new();
    for n in 1..3 {
        let (code, r) = envd_watcher(envd, &dir.0);
        assert_eq!(code, 200, "watch {n} of 3: {r}");
        ids.push(r["watcherId"].as_str().unwrap().to_owned());
    }
    assert_eq!(inotify_fds(&s), 3);
    // Spent, on both listeners: refused, naming the budget.
    let spent = "3 watches are open, this server's share of fs.inotify.max_user_instances";
    let (code, r) = envd_watcher(envd, &dir.0);
    assert_eq!(r["code"], json!("resource_exhausted"), "{code} {r}");
    assert!(r["message"].as_str().unwrap().contains(spent), "{r}");
    let (code, body) = refused(s.port, &url, &[]);
    assert_eq!(code, 503, "{body}");
    assert!(body["error"].as_str().unwrap().contains(spent), "{body}");
    // A job still gets an inotify instance of its own.
    let r = s.stdio.call(
        "execute",
        json!({"command":
            "python3 -c 'import ctypes; print(ctypes.CDLL(None).inotify_init1(0))'"}),
    );
    let fd: i64 = r["stdout"]["data"]
        .as_str()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(fd >= 0, "a job's inotify_init1 failed: {r}");
    // One given back, on either listener, is one to take on the other.
    drop(first);
    let freed = wait_for(Duration::from_secs(10), || inotify_fds(&s) == 2);
    assert!(freed, "the closed stream's watch is still open");
    let (code, r) = envd_watcher(envd, &dir.0);
    assert_eq!(code, 200, "{r}");
    let removed = crate::support::http::request(
        envd,
        "POST",
        "/filesystem.Filesystem/RemoveWatcher",
        &[("Content-Type", "application/json")],
        &json!({"watcherId": ids.pop().unwrap()}).to_string(),
        TIMEOUT,
    )
    .unwrap();
    assert_eq!(removed.status, 200, "{removed:?}");
    let mut again = Stream::open(s.port, &url, &[]);
    let f = format!("{}/f", dir.0);
    std::fs::write(&f, "").unwrap();
    again.until("create", &f);
}

macro_rules! watch_targets {
    ($($name:ident),* $(,)?) => {
        mod bare { $( #[test] fn $name() { if crate::support::Target::Bare.available() { super::$name(crate::support::Target::Bare) } } )* }
        mod pid1 { $( #[test] fn $name() { if crate::support::Target::Pid1.available() { super::$name(crate::support::Target::Pid1) } } )* }
    };
}

watch_targets!(
    create_modify_delete_and_move_arrive_as_typed_events_with_absolute_paths,
    a_recursive_watch_follows_into_a_new_subdirectory_and_reports_what_it_already_held,
    a_burst_of_10000_files_ends_in_events_or_resync_never_silent_loss,
    deleting_the_watched_directory_ends_the_stream_with_an_end_event,
    a_watch_needs_the_token_an_existing_directory_and_the_policy,
    a_client_that_goes_away_ends_its_watch_and_leaves_no_inotify_descriptor,
    at_most_16_watch_streams_are_open_at_once_and_a_closed_one_frees_its_slot,
    every_watch_of_every_listener_draws_on_one_inotify_budget_and_jobs_keep_the_rest,
);
