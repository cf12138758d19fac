//! Terminal jobs (issue 21): the `screen` tool's server time, the memory of an idle PTY job with
//! 1,000 lines of scrollback, keystroke-to-screen latency, and `yes` through a PTY against a bare
//! PTY reader.
//!
//! Every wait is on an event the server reports (`wait … until` a pattern) or on the screen
//! itself (polling `screen` until it shows what was typed): no fixed sleep.

use std::fs::File;
use std::io::{self, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Error;
use crate::client::Server;
use crate::scenarios::{CALL_TIMEOUT, ping};
use crate::stats::Samples;

/// The two sizes of the `screen` figure, with their goals (µs).
pub const SIZES: [(u16, u16, f64); 2] = [(80, 24, 20.0), (200, 60, 100.0)];

/// Lines a job prints before it idles, so that 1,000 of them are above the screen.
const FILL_LINES: usize = 1100;

/// Starts a PTY job of `cols` × `rows` running `command` (nowait) and returns its id.
fn start(server: &mut Server, command: &str, cols: u16, rows: u16) -> Result<String, Error> {
    let (_, r) = server.tool(
        "execute",
        json!({"command": command, "tty": true, "cols": cols, "rows": rows, "nowait": true}),
        CALL_TIMEOUT,
    )?;
    r["job_id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| Error(format!("execute tty: no job_id in {r}")))
}

/// Waits until job `id`'s output matches `pattern`.
fn wait_for(server: &mut Server, id: &str, pattern: &str) -> Result<(), Error> {
    let (_, r) = server.tool(
        "wait",
        json!({"job_ids": [id], "timeout": 50, "until": {"pattern": pattern}}),
        CALL_TIMEOUT,
    )?;
    let text = r.to_string();
    if !text.contains("\"matched\"") {
        return Err(Error(format!("wait for {pattern:?} on {id}: {text}")));
    }
    Ok(())
}

/// `screen` of job `id`.
fn screen(server: &mut Server, id: &str) -> Result<(Duration, Value), Error> {
    server.tool("screen", json!({"job_id": id}), CALL_TIMEOUT)
}

fn kill(server: &mut Server, id: &str) -> Result<(), Error> {
    server.tool("kill", json!({"job_id": id}), CALL_TIMEOUT)?;
    Ok(())
}

/// A shell command printing [`FILL_LINES`] lines of `width` characters, then `ready`, then
/// idling in `cat` (reading the terminal).
fn fill_command(width: usize) -> String {
    format!(
        "yes \"$(printf '%0{}d' 0)\" | head -n {FILL_LINES}; echo ready; exec cat",
        width.max(1)
    )
}

/// What the `screen` scenario measured at one size (µs).
#[derive(Debug, Default)]
pub struct ScreenTime {
    /// Columns and rows.
    pub size: (u16, u16),
    /// `screen` rtt.
    pub screen: Samples,
    /// `ping` rtt, one before each `screen`.
    pub ping: Samples,
    /// Bytes of one `screen` result.
    pub bytes: usize,
}

impl ScreenTime {
    /// The `screen` rtt less the median `ping` rtt: the server's time to look the job up,
    /// render the view and serialize it.
    pub fn server_time(&self) -> Samples {
        self.screen.shifted(-self.ping.median())
    }
}

/// `screen` server time: for each of [`SIZES`], a PTY job whose screen is full (every row a
/// line of `cols - 1` characters), then `calls` × (`ping`, `screen`).
pub fn screen_time(server: &mut Server, calls: usize) -> Result<Vec<ScreenTime>, Error> {
    let mut out = Vec::new();
    for (cols, rows, _) in SIZES {
        let id = start(server, &fill_command(usize::from(cols) - 1), cols, rows)?;
        wait_for(server, &id, "(?m)^ready\r")?;
        let mut t = ScreenTime {
            size: (cols, rows),
            ..ScreenTime::default()
        };
        for _ in 0..calls {
            t.ping.push_us(ping(server)?);
            let (took, view) = screen(server, &id)?;
            let lines = view["lines"].as_array().map_or(0, Vec::len);
            if lines != usize::from(rows) {
                return Err(Error(format!(
                    "screen {cols}x{rows}: {lines} lines in {view}"
                )));
            }
            t.screen.push_us(took);
            t.bytes = serde_json::to_vec(&view)?.len();
        }
        kill(server, &id)?;
        out.push(t);
    }
    Ok(out)
}

/// What the idle-memory scenario measured.
#[derive(Debug)]
pub struct IdleMemory {
    /// PTY jobs held at once.
    pub jobs: usize,
    /// Characters per line of their output.
    pub width: usize,
    /// Server RSS growth per job (KiB): anon, file, total.
    pub per_job_kib: (f64, f64, f64),
    /// Lines of scrollback the first job's screen holds (asked 1,000).
    pub scrollback_lines: usize,
}

/// Memory of idle PTY jobs at 80×24 with 1,000 lines above the screen: `jobs` of them print
/// [`FILL_LINES`] lines of `width` characters and idle reading the terminal; the server's RSS
/// growth over them, per job. The job's whole cost: PTY, output window (the raw bytes), screen.
pub fn idle_memory(server: &mut Server, jobs: usize, width: usize) -> Result<IdleMemory, Error> {
    let before = server.memory()?;
    let mut ids = Vec::new();
    for _ in 0..jobs {
        let id = start(server, &fill_command(width), 80, 24)?;
        wait_for(server, &id, "(?m)^ready\r")?;
        ids.push(id);
    }
    let (_, view) = server.tool(
        "screen",
        json!({"job_id": ids[0], "scrollback": 1000}),
        CALL_TIMEOUT,
    )?;
    let scrollback_lines = view["scrollback"].as_array().map_or(0, Vec::len);
    let after = server.memory()?;
    for id in &ids {
        kill(server, id)?;
    }
    let per = |a: u64, b: u64| (a as f64 - b as f64) / jobs as f64;
    Ok(IdleMemory {
        jobs,
        width,
        per_job_kib: (
            per(after.anon_kib, before.anon_kib),
            per(after.file_kib, before.file_kib),
            per(after.rss_kib, before.rss_kib),
        ),
        scrollback_lines,
    })
}

/// What the keystroke scenario measured (ms).
#[derive(Debug, Default)]
pub struct Keystroke {
    /// `input` of one character → the `screen` that first shows it, over MCP.
    pub total: Samples,
    /// The same less the median `ping` rtt for each call it took (`input` and every `screen`):
    /// the time spent in the server and the terminal.
    pub server: Samples,
    /// `ping` rtt, interleaved.
    pub ping: Samples,
    /// `screen` calls per keystroke (mean).
    pub polls: f64,
}

/// Keystroke to screen: `cat` on a PTY in cooked mode (the terminal echoes what is typed);
/// `keys` times, `input` of `x`, then `screen` until the cursor has moved past it. Every 60
/// characters the line is killed (`C-u`) outside the measurement.
pub fn keystroke(server: &mut Server, keys: usize) -> Result<Keystroke, Error> {
    let id = start(server, "exec cat", 80, 24)?;
    let mut out = Keystroke::default();
    let mut screens = 0usize;
    let mut raw = Vec::new();
    let mut col = 0u64;
    // The terminal is ready when `cat` reads it: the first echo shows that.
    wait_until_col(server, &id, 0)?;
    for _ in 0..keys {
        out.ping.push_ms(ping(server)?);
        let t0 = Instant::now();
        server.tool("input", json!({"job_id": id, "data": "x"}), CALL_TIMEOUT)?;
        let mut calls = 1;
        loop {
            let (_, view) = screen(server, &id)?;
            calls += 1;
            screens += 1;
            if view["cursor"]["col"].as_u64() == Some(col + 1) {
                break;
            }
            if t0.elapsed() > CALL_TIMEOUT {
                return Err(Error(format!("keystroke: the echo never showed: {view}")));
            }
        }
        raw.push((t0.elapsed(), calls));
        col += 1;
        if col == 60 {
            server.tool(
                "input",
                json!({"job_id": id, "keys": ["C-u"]}),
                CALL_TIMEOUT,
            )?;
            wait_until_col(server, &id, 0)?;
            col = 0;
        }
    }
    kill(server, &id)?;
    let ping_ms = out.ping.median();
    for (took, calls) in raw {
        out.total.push_ms(took);
        out.server
            .push(took.as_secs_f64() * 1e3 - calls as f64 * ping_ms);
    }
    out.polls = screens as f64 / keys.max(1) as f64;
    Ok(out)
}

fn wait_until_col(server: &mut Server, id: &str, want: u64) -> Result<(), Error> {
    let t0 = Instant::now();
    loop {
        let (_, view) = screen(server, id)?;
        if view["cursor"]["col"].as_u64() == Some(want) {
            return Ok(());
        }
        if t0.elapsed() > CALL_TIMEOUT {
            return Err(Error(format!(
                "keystroke: cursor never at column {want}: {view}"
            )));
        }
    }
}

/// What the PTY throughput scenario measured.
#[derive(Debug, Default)]
pub struct PtyThroughput {
    /// Bytes through the terminal per run (after `onlcr`: `y\r\n` per line).
    pub bytes: u64,
    /// Wall times (ms): the server (blocking `execute` of a PTY job) and the bare reader.
    pub server_ms: Samples,
    /// The bare PTY reader.
    pub bare_ms: Samples,
    /// The server's `VmHWM` over the runs (KiB), reset before the first.
    pub peak_kib: u64,
}

/// `yes` through a PTY: a blocking `execute {tty: true}` of `yes | head -c N` against a bare
/// reader (this process on a PTY master, reading the same command until it ends).
pub fn pty_throughput(
    server: &mut Server,
    runs: usize,
    bytes: u64,
) -> Result<PtyThroughput, Error> {
    // `yes` writes `y\n`, which the terminal's `onlcr` makes `y\r\n`: N bytes written are
    // 1.5 N bytes read. Write two thirds of `bytes` so that `bytes` go through.
    let written = bytes / 3 * 2;
    let through = written / 2 * 3;
    let command = format!("yes | head -c {written}");
    let _ = server.reset_peak();
    let mut out = PtyThroughput {
        bytes: through,
        ..PtyThroughput::default()
    };
    for _ in 0..runs {
        let (took, n) = bare_pty_reader(&command)?;
        if n != through {
            return Err(Error(format!(
                "bare PTY reader: {n} bytes, expected {through}"
            )));
        }
        out.bare_ms.push_ms(took);
        let (took, r) = server.tool(
            "execute",
            json!({"command": command, "tty": true, "yield_after": 0}),
            Duration::from_secs(600),
        )?;
        if r["stdout"]["total_bytes"] != through {
            return Err(Error(format!(
                "pty throughput: stdout.total_bytes should be {through}, got {}",
                r["stdout"]["total_bytes"]
            )));
        }
        out.server_ms.push_ms(took);
    }
    out.peak_kib = server.memory()?.hwm_kib;
    Ok(out)
}

/// Runs `sh -c command` with a PTY slave as its stdin, stdout and stderr and reads the master
/// until the last writer closes the slave (EIO); returns the wall time and the bytes read.
fn bare_pty_reader(command: &str) -> Result<(Duration, u64), Error> {
    let err =
        |what: &str, e: &dyn std::fmt::Display| Error(format!("bare PTY reader: {what}: {e}"));
    let t0 = Instant::now();
    let master =
        rustix::pty::openpt(rustix::pty::OpenptFlags::RDWR | rustix::pty::OpenptFlags::NOCTTY)
            .map_err(|e| err("openpt", &e))?;
    rustix::pty::grantpt(&master).map_err(|e| err("grantpt", &e))?;
    rustix::pty::unlockpt(&master).map_err(|e| err("unlockpt", &e))?;
    let name = rustix::pty::ptsname(&master, Vec::new()).map_err(|e| err("ptsname", &e))?;
    let slave = File::options()
        .read(true)
        .write(true)
        .open(name.to_string_lossy().as_ref())
        .map_err(|e| err("open slave", &e))?;
    let mut child = Command::new("/bin/sh")
        .args(["-c", command])
        .stdin(Stdio::from(slave.try_clone().map_err(|e| err("dup", &e))?))
        .stdout(Stdio::from(slave.try_clone().map_err(|e| err("dup", &e))?))
        .stderr(Stdio::from(slave))
        .spawn()
        .map_err(|e| err("spawn", &e))?;
    let mut master = File::from(master);
    let mut buf = vec![0u8; 64 << 10];
    let mut n = 0u64;
    loop {
        match master.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => n += k as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // EIO: every slave descriptor is closed, the output is over.
            Err(e) if e.raw_os_error() == Some(5) => break,
            Err(e) => return Err(err("read", &e)),
        }
    }
    child.wait().map_err(|e| err("wait", &e))?;
    Ok((t0.elapsed(), n))
}
