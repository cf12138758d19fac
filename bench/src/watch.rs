//! The file-watch scenario of issue 23: `GET /files/<dir>?watch&recursive`
//! on loopback, read by a thread that stamps each event as it arrives.
//!
//! - **Latency**: a file is created (opened, written, closed) and the clock
//!   runs until its `create` event is read off the socket; one at a time,
//!   a few milliseconds apart (goal: p99 ≤ 20 ms).
//! - **Burst**: 10,000 files (half in a directory made just before them, so
//!   the recursive watch must follow into it) as fast as the harness can
//!   make them, then a marker file; the stream is read until the marker's
//!   `create` (a new marker after each `resync`). The outcome is checked
//!   against the tree: every path is reported, or a `resync` came —
//!   anything else is silent loss, and the figure says how much. The
//!   server's peak RSS over the burst is reported beside it.
//!
//! Timings are never asserted; a malformed stream is an error.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Error;
use crate::client::Launch;
use crate::http_client::HttpServer;
use crate::report::Figure;
use crate::stats::Samples;

/// How long the harness waits for any one event.
const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

/// A directory under the temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch, Error> {
        let dir = std::env::temp_dir().join(format!("mcp-exec-bench-watch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error(format!("creating {}: {e}", dir.display())))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One event as read: its type, path and when it came off the socket.
struct Arrived {
    kind: String,
    path: String,
    at: Instant,
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> Error {
    move |e| Error(format!("{what}: {e}"))
}

/// Opens the watch of `dir` and reads it on a thread; events arrive on the
/// returned channel (after `ready`, which this waits for).
fn open(addr: SocketAddr, dir: &Path) -> Result<(TcpStream, mpsc::Receiver<Arrived>), Error> {
    let c = TcpStream::connect(addr).map_err(io("connecting"))?;
    let mut w = c.try_clone().map_err(io("cloning the socket"))?;
    write!(
        w,
        "GET /files{}?watch&recursive HTTP/1.1\r\nHost: localhost\r\n\r\n",
        dir.display()
    )
    .map_err(io("sending the request"))?;
    let mut reader = BufReader::new(c.try_clone().map_err(io("cloning the socket"))?);
    let mut status = String::new();
    reader
        .read_line(&mut status)
        .map_err(io("reading the status"))?;
    if !status.contains(" 200 ") {
        return Err(Error(format!("GET ?watch: {}", status.trim())));
    }
    loop {
        let mut line = String::new();
        reader
            .read_line(&mut line)
            .map_err(io("reading the head"))?;
        if line.trim().is_empty() {
            break;
        }
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut pending = String::new();
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).unwrap_or(0) == 0 {
                return;
            }
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                return;
            }
            let mut buf = vec![0; n + 2];
            if reader.read_exact(&mut buf).is_err() {
                return;
            }
            let at = Instant::now();
            pending.push_str(&String::from_utf8_lossy(&buf[..n]));
            while let Some(end) = pending.find("\n\n") {
                let block: String = pending.drain(..end + 2).collect();
                let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue;
                };
                let Ok(v) = serde_json::from_str::<Value>(data) else {
                    continue;
                };
                let arrived = Arrived {
                    kind: v["type"].as_str().unwrap_or("").to_owned(),
                    path: v["path"].as_str().unwrap_or("").to_owned(),
                    at,
                };
                if tx.send(arrived).is_err() {
                    return;
                }
            }
        }
    });
    match rx.recv_timeout(EVENT_TIMEOUT) {
        Ok(e) if e.kind == "ready" => Ok((c, rx)),
        Ok(e) => Err(Error(format!("the first event is {}, not ready", e.kind))),
        Err(_) => Err(Error("no ready event".into())),
    }
}

/// Events until the `create` of `path`; `Err` after [`EVENT_TIMEOUT`]
/// without one.
fn until_created(
    rx: &mpsc::Receiver<Arrived>,
    path: &str,
) -> Result<(Instant, Vec<Arrived>), Error> {
    let mut seen = Vec::new();
    loop {
        let e = rx
            .recv_timeout(EVENT_TIMEOUT)
            .map_err(|_| Error(format!("no create of {path} within {EVENT_TIMEOUT:?}")))?;
        if e.kind == "create" && e.path == path {
            return Ok((e.at, seen));
        }
        seen.push(e);
    }
}

/// What the burst came to.
struct Burst {
    files: usize,
    reported: usize,
    in_tree: usize,
    resyncs: usize,
    silently_lost: usize,
    took: Duration,
    peak_rss_mib: f64,
}

fn burst(
    hs: &HttpServer,
    rx: &mpsc::Receiver<Arrived>,
    dir: &Path,
    files: usize,
) -> Result<Burst, Error> {
    let sub = dir.join("burst");
    hs.server.reset_peak()?;
    let started = Instant::now();
    std::fs::create_dir(&sub).map_err(io("creating the burst's directory"))?;
    for i in 0..files {
        let parent = if i % 2 == 0 { dir } else { &sub };
        std::fs::write(parent.join(format!("b{i}")), b"x").map_err(io("writing a file"))?;
    }
    let mut resyncs = 0;
    let mut marker = dir.join("marker-0");
    std::fs::write(&marker, b"").map_err(io("writing the marker"))?;
    let mut created = BTreeSet::new();
    loop {
        let e = rx
            .recv_timeout(EVENT_TIMEOUT)
            .map_err(|_| Error("the burst's events stopped before its marker".into()))?;
        match e.kind.as_str() {
            "resync" => {
                resyncs += 1;
                marker = dir.join(format!("marker-{resyncs}"));
                std::fs::write(&marker, b"").map_err(io("writing the marker"))?;
            }
            "create" => {
                let done = Path::new(&e.path) == marker;
                created.insert(e.path);
                if done {
                    break;
                }
            }
            _ => {}
        }
    }
    let took = started.elapsed();
    let peak_rss_mib = hs.server.memory()?.hwm_kib as f64 / 1024.0;
    let mut tree = BTreeSet::new();
    for d in [dir, sub.as_path()] {
        for e in std::fs::read_dir(d).map_err(io("listing the tree"))? {
            let e = e.map_err(io("listing the tree"))?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('b') || name.starts_with("marker") || name == "burst" {
                tree.insert(d.join(&*name).to_string_lossy().into_owned());
            }
        }
    }
    let missing = tree.difference(&created).count();
    Ok(Burst {
        files,
        reported: tree.len() - missing,
        in_tree: tree.len(),
        resyncs,
        silently_lost: if resyncs > 0 { 0 } else { missing },
        took,
        peak_rss_mib,
    })
}

/// The scenario `watch`: see the module doc.
pub fn figures(
    o: &crate::Options,
    binary: &Path,
    figures: &mut Vec<Figure>,
    notes: &mut serde_json::Map<String, Value>,
) -> Result<(), Error> {
    if !o.wants("watch") {
        return Ok(());
    }
    let (samples, files) = if o.smoke { (20, 1_000) } else { (300, 10_000) };
    eprintln!(
        "bench: watch ({samples} × create → its event over GET /files?watch&recursive; a {files}-file burst)"
    );
    let Some(hs) = HttpServer::launch(binary, &Launch::default(), false)? else {
        figures.push(Figure::skipped(
            "watch_event",
            "file watch: create → its SSE event",
            "ms",
            "p99 ≤ 20 ms",
        ));
        return Ok(());
    };
    let dir = Scratch::new()?;
    let (_conn, rx) = open(hs.addr, &dir.0)?;
    let mut latency = Samples::default();
    for i in 0..samples {
        let path = dir.0.join(format!("l{i}"));
        let t0 = Instant::now();
        std::fs::write(&path, b"x").map_err(io("writing a file"))?;
        let (at, _) = until_created(&rx, &path.to_string_lossy())?;
        latency.push_ms(at.saturating_duration_since(t0));
        std::thread::sleep(Duration::from_millis(3));
    }
    figures.push(Figure::latency(
        "watch_event",
        "file watch: a file's creation → its create event read off the SSE stream",
        &latency,
        None,
    ));
    figures.push(Figure::value(
        "watch_event_p99",
        "  the same, p99",
        "ms",
        latency.p99(),
        Some(("≤ 20 ms", 20.0)),
    ));
    let b = burst(&hs, &rx, &dir.0, files)?;
    figures.push(Figure::value(
        "watch_burst_silent_loss",
        format!(
            "file watch: {} files at once → {} of {} paths reported, {} resync, in {:.0} ms (peak RSS {:.1} MiB); paths lost without a resync",
            b.files,
            b.reported,
            b.in_tree,
            b.resyncs,
            b.took.as_secs_f64() * 1000.0,
            b.peak_rss_mib
        ),
        "paths",
        b.silently_lost as f64,
        Some(("0: events or resync", 0.0)),
    ));
    notes.insert(
        "watch_burst".into(),
        json!({
            "files": b.files, "reported": b.reported, "in_tree": b.in_tree,
            "resyncs": b.resyncs, "silently_lost": b.silently_lost,
            "ms": b.took.as_secs_f64() * 1000.0, "peak_rss_mib": b.peak_rss_mib,
        }),
    );
    drop(_conn);
    hs.terminate(Duration::from_secs(10))
}
