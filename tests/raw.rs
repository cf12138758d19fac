//! A second client for the tests that need the server's stdout pipe itself:
//! to leave it unread (backpressure), to close it (EPIPE), or to see the
//! exact bytes of every line (golden transcripts, lines cut at exit).
//!
//! [`crate::support::Server`] drains stdout into a channel from the moment
//! it starts, so with it "the client does not read" never happens. Here the
//! pipe is read only while a `read` call runs: a helper thread borrows the
//! reader, reads the lines asked for, and hands the reader back.
//!
//! It starts the same four targets with the same command lines as
//! `support` (repeated here: `support::Target::command` is private to that
//! module), except that no `MCP_EXEC_*` variable of the test's own
//! environment reaches the server: only those a test passes. stderr is
//! always drained, so a chatty server never blocks on it.

#![allow(dead_code, reason = "each test module uses a different subset")]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{TIMEOUT, Target, wait_for};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A server whose stdin and stdout are plain pipes in the test's hands.
pub struct RawServer {
    /// The target it runs on.
    pub target: Target,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Option<BufReader<ChildStdout>>,
    /// Everything the server wrote to stderr so far.
    pub stderr: Arc<Mutex<String>>,
    container: Option<String>,
    mark: crate::support::guard::Mark,
}

/// What the reading thread sends back.
enum Read1 {
    Line(Vec<u8>),
    /// The reader, handed back after `max` lines or at EOF (`true`).
    Done(BufReader<ChildStdout>, bool),
}

impl RawServer {
    /// Starts the server on `target` with extra environment.
    pub fn start(target: Target, env: &[(&str, &str)]) -> RawServer {
        let name = format!(
            "mcp-exec-test-raw-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let command = if target.is_container() {
            target.command(env, &name)
        } else {
            let mut command = target.command(&[], &name);
            // Hermetic: only the settings a test passes, not the caller's.
            for (k, _) in std::env::vars_os() {
                if k.to_string_lossy().starts_with("MCP_EXEC_") {
                    command.env_remove(k);
                }
            }
            command.envs(env.iter().copied());
            command
        };
        let (mut command, mark) = crate::support::guard::prepare(command, !target.is_container());
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {target:?}: {e}"));
        let mut err = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        RawServer {
            target,
            stdin: child.stdin.take(),
            stdout: child.stdout.take().map(BufReader::new),
            child,
            stderr: log,
            container: target.is_container().then_some(name),
            mark,
        }
    }

    /// Writes one line (a `\n` is appended). Panics if the write fails.
    pub fn send_raw(&mut self, line: &str) {
        self.try_send_raw(line)
            .unwrap_or_else(|e| panic!("writing to {:?}: {e}", self.target));
    }

    /// Writes one line (a `\n` is appended); the error if it fails.
    pub fn try_send_raw(&mut self, line: &str) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(format!("{line}\n").as_bytes())?;
        stdin.flush()
    }

    /// Sends a JSON value as one line.
    pub fn send(&mut self, v: &Value) {
        self.send_raw(&v.to_string());
    }

    /// Takes the write end of the server's stdin (to write from another
    /// thread while this one does not read).
    pub fn take_stdin(&mut self) -> ChildStdin {
        self.stdin.take().expect("stdin is open")
    }

    /// Closes the server's stdin (EOF).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Closes the client's read end of the server's stdout: the server's
    /// next write fails with EPIPE.
    pub fn close_stdout(&mut self) {
        self.stdout.take();
    }

    /// Reads lines (each with its `\n`; a last line cut by EOF without it)
    /// and gives each to `f`, until `max` lines were read or stdout reached
    /// EOF. Returns how many lines were read and whether EOF was reached.
    /// Panics when `timeout` passes first.
    pub fn read(
        &mut self,
        max: usize,
        timeout: Duration,
        mut f: impl FnMut(Vec<u8>),
    ) -> (usize, bool) {
        let mut reader = self.stdout.take().expect("stdout is open");
        // A small bound: the client's memory stays flat however much the
        // server writes.
        let (tx, rx) = mpsc::sync_channel(16);
        std::thread::spawn(move || {
            let mut n = 0;
            let eof = loop {
                if n == max {
                    break false;
                }
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break true,
                    Ok(_) => {
                        n += 1;
                        if tx.send(Read1::Line(line)).is_err() {
                            return;
                        }
                    }
                }
            };
            let _ = tx.send(Read1::Done(reader, eof));
        });
        let deadline = Instant::now() + timeout;
        let mut count = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(Read1::Line(line)) => {
                    count += 1;
                    f(line);
                }
                Ok(Read1::Done(reader, eof)) => {
                    self.stdout = Some(reader);
                    return (count, eof);
                }
                Err(_) => panic!(
                    "{:?}: read {count} of {max} lines, then nothing for {timeout:?}; stderr:\n{}",
                    self.target,
                    self.stderr.lock().unwrap()
                ),
            }
        }
    }

    /// Reads `n` lines; panics on EOF or timeout before them.
    pub fn read_lines(&mut self, n: usize, timeout: Duration) -> Vec<Vec<u8>> {
        let mut lines = Vec::with_capacity(n);
        let (count, eof) = self.read(n, timeout, |l| lines.push(l));
        assert!(
            !eof || count == n,
            "{:?}: stdout ended after {count} of {n} lines: {:?}",
            self.target,
            lines
                .iter()
                .map(|l| String::from_utf8_lossy(l))
                .collect::<Vec<_>>()
        );
        lines
    }

    /// Reads one line and parses it as JSON (it must end with `\n`).
    pub fn read_message(&mut self, timeout: Duration) -> Value {
        let line = self.read_lines(1, timeout).remove(0);
        parse_line(&line)
    }

    /// Waits for the client-side process (binary, `unshare` or `podman`)
    /// to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let mut status = None;
        wait_for(timeout, || {
            status = self.child.try_wait().ok().flatten();
            status.is_some()
        });
        status
    }

    /// The host pid of the mcp-exec process itself ([`Target::Bare`] and
    /// [`Target::Pid1`]: the child of `unshare`); `None` for containers.
    pub fn server_host_pid(&self) -> Option<u32> {
        match self.target {
            Target::Bare => Some(self.child.id()),
            Target::Pid1 => {
                let children = format!("/proc/{0}/task/{0}/children", self.child.id());
                let mut found = None;
                wait_for(TIMEOUT, || {
                    found = std::fs::read_to_string(&children)
                        .ok()
                        .and_then(|s| s.split_whitespace().next().and_then(|p| p.parse().ok()));
                    found.is_some()
                });
                found
            }
            Target::Scratch | Target::Tini => None,
        }
    }

    /// For containers: the container name.
    pub fn container(&self) -> Option<&str> {
        self.container.as_deref()
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        crate::support::end(self.container.as_deref(), &mut self.child, &self.mark);
    }
}

/// Parses one line read from the server: complete (ends with `\n`) and one
/// JSON value.
pub fn parse_line(line: &[u8]) -> Value {
    let Some(body) = line.strip_suffix(b"\n") else {
        panic!(
            "a line was cut (no newline after {} bytes): {:?}…",
            line.len(),
            String::from_utf8_lossy(&line[..line.len().min(200)])
        );
    };
    serde_json::from_slice(body).unwrap_or_else(|e| {
        panic!(
            "not one JSON value ({e}): {:?}…",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        )
    })
}

/// The anonymous resident memory of a host process (`RssAnon` of
/// `/proc/<pid>/status`: heap, stacks, buffers; not the binary's
/// file-backed pages), `None` once it is gone.
pub fn anon_rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Whether any process on the host has `marker` in its command line (the
/// host's `/proc` sees the processes of every target, containers included).
pub fn host_marker_alive(marker: &str) -> bool {
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
