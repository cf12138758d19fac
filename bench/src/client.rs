//! A raw-JSON MCP client over real pipes, for measuring: one server process,
//! hand-written JSON-RPC lines, and a watchdog instead of per-read timeouts.
//!
//! Reads are plain blocking reads on the calling thread, so a measured
//! interval contains the server's work and the pipe hops, not a hand-off
//! between client threads. A watchdog thread enforces the deadline of the
//! call in progress: when it passes, the server is SIGKILLed, the blocked
//! read sees EOF and the call fails with a timeout error. Timings stop when
//! the response line has been read; parsing and checking it come after.
//!
//! Every response is checked for well-formedness (`jsonrpc`, matching `id`,
//! a `result`; for tools a text content whose text is JSON and `isError`
//! false). That is all the smoke mode asserts.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Error;

/// Protocol revision the client asks for by default: the one current
/// clients send. From this revision on, tool results carry the result twice
/// (as text and as `structuredContent`); `--protocol 2024-11-05` measures
/// the single-copy form the Go reference always uses.
pub const DEFAULT_PROTOCOL: &str = "2025-06-18";

/// Memory figures of a live process, from `/proc/<pid>/status`, in KiB.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    /// Resident set size now.
    pub rss_kib: u64,
    /// High-water mark of the resident set since start or the last reset.
    pub hwm_kib: u64,
    /// The anonymous part of `rss_kib` (heap, stacks, buffers).
    pub anon_kib: u64,
    /// The file-backed part of `rss_kib` (the binary's pages).
    pub file_kib: u64,
}

/// Deadline shared with the watchdog: 0 = disarmed, else nanoseconds since `epoch`.
struct Watchdog {
    epoch: Instant,
    /// The server's pid, 0 until it has been spawned.
    pid: AtomicU32,
    deadline_ns: AtomicU64,
    fired: AtomicBool,
    stop: AtomicBool,
}

/// A running server and the client end of its stdio.
pub struct Server {
    child: Child,
    /// `None` once [`Server::shutdown`] closed it.
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    watchdog: Arc<Watchdog>,
    watchdog_thread: Option<thread::JoinHandle<()>>,
    line: Vec<u8>,
    started: Instant,
}

/// How to start a server beyond the defaults of [`Server::spawn`].
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// Environment variables set on top of the harness's own.
    pub env: Vec<(&'static str, String)>,
    /// `RLIMIT_NOFILE` (soft, hard) to set in the child before `exec`.
    pub nofile: Option<(u64, u64)>,
    /// Arguments of the server (none: stdio only).
    pub args: Vec<String>,
    /// A file to write the server's stderr to (none: discarded).
    pub stderr: Option<std::path::PathBuf>,
}

impl Launch {
    /// A launch with these environment variables.
    pub fn with_env(env: &[(&'static str, &str)]) -> Launch {
        Launch {
            env: env.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
            ..Launch::default()
        }
    }
}

/// Requests serialised ahead of time for [`Server::pipeline`], so that
/// building them is not part of a measured interval.
pub struct Batch {
    /// One line per request, newline included.
    lines: Vec<Vec<u8>>,
    /// The id of the first; the rest follow in order.
    first: u64,
    /// The tool called, for error messages.
    tool: String,
}

/// A request that was written, with the time it was written.
pub struct Sent {
    /// Its JSON-RPC id.
    pub id: u64,
    /// When the line had been written.
    pub at: Instant,
}

impl Server {
    /// Starts `binary` with piped stdin/stdout and stderr discarded (logs are
    /// not part of the protocol and must not fill a pipe nobody reads), and
    /// with `SHELL=/bin/sh`: jobs run `$SHELL -c`, and the baselines run
    /// `sh -c`, so both sides must start the same shell (a login `SHELL` of
    /// bash would triple the job's own cost and hide the server's).
    ///
    /// The watchdog thread is started first, so that [`Server::started`]
    /// (taken just before the spawn) measures the server and not the client.
    pub fn spawn(binary: &Path) -> Result<Server, Error> {
        Server::launch(binary, &Launch::default())
    }

    /// [`Server::spawn`] with `launch`'s environment on top and, when it
    /// asks for one, a descriptor limit set in the child before `exec`.
    pub fn launch(binary: &Path, launch: &Launch) -> Result<Server, Error> {
        let watchdog = Arc::new(Watchdog {
            epoch: Instant::now(),
            pid: AtomicU32::new(0),
            deadline_ns: AtomicU64::new(0),
            fired: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let dog = Arc::clone(&watchdog);
        let handle = thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || watch(&dog))
            .map_err(|e| Error(format!("starting the watchdog: {e}")))?;
        let mut command = Command::new(binary);
        let stderr = match &launch.stderr {
            Some(path) => Stdio::from(
                std::fs::File::create(path)
                    .map_err(|e| Error(format!("creating {}: {e}", path.display())))?,
            ),
            None => Stdio::null(),
        };
        command
            .args(&launch.args)
            .env("SHELL", "/bin/sh")
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        if let Some(limit) = launch.nofile {
            crate::sys::set_nofile_before_exec(&mut command, limit);
        }
        let started = Instant::now();
        let spawned = command.spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                watchdog.stop.store(true, Ordering::SeqCst);
                let _ = handle.join();
                return Err(Error(format!("starting {}: {e}", binary.display())));
            }
        };
        watchdog.pid.store(child.id(), Ordering::SeqCst);
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let mut server = Server {
            child,
            stdin,
            stdout: BufReader::with_capacity(
                1 << 20,
                stdout.ok_or_else(|| Error("no stdout pipe".into()))?,
            ),
            next_id: 0,
            watchdog,
            watchdog_thread: Some(handle),
            line: Vec::new(),
            started,
        };
        server.stdin()?;
        Ok(server)
    }

    /// When the server process was spawned (just before `fork`/`exec`).
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Arms the watchdog: the server is killed if `timeout` passes before
    /// [`Server::disarm`].
    pub fn arm(&self, timeout: Duration) {
        let at = self.watchdog.epoch.elapsed() + timeout;
        let ns = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.watchdog.deadline_ns.store(ns, Ordering::SeqCst);
    }

    /// Disarms the watchdog.
    pub fn disarm(&self) {
        self.watchdog.deadline_ns.store(0, Ordering::SeqCst);
    }

    fn timed_out(&self) -> bool {
        self.watchdog.fired.load(Ordering::SeqCst)
    }

    /// Writes one message as one line (one `write` for the whole line).
    pub fn write(&mut self, msg: &Value) -> Result<Instant, Error> {
        let mut buf = serde_json::to_vec(msg)?;
        buf.push(b'\n');
        self.stdin()?
            .write_all(&buf)
            .map_err(|e| Error(format!("writing to the server: {e}")))?;
        Ok(Instant::now())
    }

    fn stdin(&mut self) -> Result<&mut ChildStdin, Error> {
        self.stdin
            .as_mut()
            .ok_or_else(|| Error("the server's stdin is already closed".into()))
    }

    /// The next request id.
    pub fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Writes a request and returns its id and the time it was written.
    pub fn send(&mut self, method: &str, params: Value) -> Result<Sent, Error> {
        let id = self.fresh_id();
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let at = self.write(&msg)?;
        Ok(Sent { id, at })
    }

    /// Writes a notification.
    pub fn notify(&mut self, method: &str, params: Value) -> Result<(), Error> {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .map(|_| ())
    }

    /// Reads one line (blocking; the watchdog bounds it). Returns the time
    /// the line was complete; the bytes are in `self.line`.
    fn read_line(&mut self) -> Result<Instant, Error> {
        self.line.clear();
        let n = self
            .stdout
            .read_until(b'\n', &mut self.line)
            .map_err(|e| Error(format!("reading from the server: {e}")))?;
        let at = Instant::now();
        if n == 0 || self.line.last() != Some(&b'\n') {
            return Err(if self.timed_out() {
                Error("timed out waiting for the server (it was killed)".into())
            } else {
                Error("the server closed its stdout".into())
            });
        }
        Ok(at)
    }

    /// Reads messages until the response to `id`, skipping notifications;
    /// returns when the response line had been read and the response itself.
    pub fn response(&mut self, id: u64, timeout: Duration) -> Result<(Instant, Value), Error> {
        self.arm(timeout);
        let out = loop {
            let at = match self.read_line() {
                Ok(at) => at,
                Err(e) => break Err(e),
            };
            let msg: Value = match serde_json::from_slice(&self.line) {
                Ok(v) => v,
                Err(e) => break Err(Error(format!("server wrote a line that is not JSON: {e}"))),
            };
            if msg.get("id").is_none() && msg.get("method").is_some() {
                continue; // a notification (progress): not what we wait for
            }
            break check_response(msg, id).map(|v| (at, v));
        };
        self.disarm();
        out
    }

    /// Sends a request and waits for its result; returns the elapsed time
    /// from the write to the complete response line.
    pub fn call(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<(Duration, Value), Error> {
        let sent = self.send(method, params)?;
        let (at, result) = self.response(sent.id, timeout)?;
        Ok((at - sent.at, result))
    }

    /// `initialize` then `notifications/initialized`.
    pub fn initialize(&mut self, protocol: &str, timeout: Duration) -> Result<Duration, Error> {
        let (took, result) = self.call("initialize", initialize_params(protocol), timeout)?;
        check_initialize(&result, protocol)?;
        self.notify("notifications/initialized", json!({}))?;
        Ok(took)
    }

    /// Calls a tool and returns the elapsed time and its parsed JSON result.
    pub fn tool(
        &mut self,
        name: &str,
        args: Value,
        timeout: Duration,
    ) -> Result<(Duration, Value), Error> {
        let (took, result) = self.call(
            "tools/call",
            json!({"name": name, "arguments": args}),
            timeout,
        )?;
        Ok((took, tool_json(&result, name)?))
    }

    /// Splits the client into its write and read halves, for a writer thread
    /// that pipelines requests while this thread reads responses.
    pub fn halves(&mut self) -> Result<(&mut ChildStdin, Reader<'_>), Error> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| Error("the server's stdin is already closed".into()))?;
        Ok((
            stdin,
            Reader {
                stdout: &mut self.stdout,
                line: &mut self.line,
                watchdog: &self.watchdog,
            },
        ))
    }

    /// `tools/call` requests of tool `name`, one per element of `args`,
    /// with fresh ids in order.
    pub fn batch(&mut self, name: &str, args: &[Value]) -> Result<Batch, Error> {
        let first = self.next_id + 1;
        let mut lines = Vec::with_capacity(args.len());
        for a in args {
            let id = self.fresh_id();
            let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": name, "arguments": a}});
            let mut line = serde_json::to_vec(&msg)?;
            line.push(b'\n');
            lines.push(line);
        }
        Ok(Batch {
            lines,
            first,
            tool: name.to_owned(),
        })
    }

    /// Writes every request of `batch` from a writer thread while this
    /// thread reads the answers (a client that wrote all before reading
    /// would deadlock once both pipes and the server's queues fill);
    /// returns the parsed tool results in the order of the batch. The
    /// watchdog bounds the whole batch by `timeout`.
    pub fn pipeline(&mut self, batch: Batch, timeout: Duration) -> Result<Vec<Value>, Error> {
        let Batch { lines, first, tool } = batch;
        let n = lines.len();
        self.arm(timeout);
        let (stdin, mut reader) = self.halves()?;
        let results = thread::scope(|s| -> Result<Vec<Option<Value>>, Error> {
            let writer = s.spawn(move || -> Result<(), Error> {
                for line in &lines {
                    stdin
                        .write_all(line)
                        .map_err(|e| Error(format!("pipelining requests: {e}")))?;
                }
                Ok(())
            });
            let mut results: Vec<Option<Value>> = vec![None; n];
            for _ in 0..n {
                let (id, result) = reader.next_response()?;
                let slot = id
                    .checked_sub(first)
                    .and_then(|i| usize::try_from(i).ok())
                    .and_then(|i| results.get_mut(i));
                let Some(slot) = slot.filter(|s| s.is_none()) else {
                    return Err(Error(format!("unexpected response id {id}")));
                };
                *slot = Some(result);
            }
            writer
                .join()
                .map_err(|_| Error("the writer thread panicked".into()))??;
            Ok(results)
        });
        self.disarm();
        results?
            .into_iter()
            .map(|r| {
                let r =
                    r.ok_or_else(|| Error(format!("{tool}: a pipelined call got no answer")))?;
                tool_json(&r, &tool)
            })
            .collect()
    }

    /// CPU time the server (all its threads, not its children) has used so far.
    pub fn cpu_time(&self) -> Result<Duration, Error> {
        crate::sys::process_cpu_time(self.pid())
            .map_err(|e| Error(format!("reading the server's CPU clock: {e}")))
    }

    /// Memory figures of the server now.
    pub fn memory(&self) -> Result<Memory, Error> {
        memory_of(self.pid())
    }

    /// Resets the server's RSS high-water mark (`VmHWM`) to its current RSS.
    pub fn reset_peak(&self) -> Result<(), Error> {
        std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5").map_err(|e| {
            Error(format!(
                "resetting VmHWM (needs Linux ≥ 4.0 and ptrace rights): {e}"
            ))
        })
    }

    /// The server's exit code if it has exited (a signal counts as 128+N).
    pub fn exit_code(&mut self) -> Result<Option<i32>, Error> {
        use std::os::unix::process::ExitStatusExt;
        let status = self
            .child
            .try_wait()
            .map_err(|e| Error(format!("waiting for the server: {e}")))?;
        Ok(status.map(|s| s.code().or(s.signal().map(|n| 128 + n)).unwrap_or(-1)))
    }

    /// Sends SIGTERM (the shutdown of a server whose stdin EOF does not end
    /// it: one with HTTP on) and waits up to `timeout` for a clean exit; the
    /// server is killed (by `Drop`) if it does not.
    pub fn terminate(mut self, timeout: Duration) -> Result<(), Error> {
        let pid = i32::try_from(self.pid())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .ok_or_else(|| Error("the server has no valid pid".into()))?;
        rustix::process::kill_process(pid, rustix::process::Signal::TERM)
            .map_err(|e| Error(format!("sending SIGTERM to the server: {e}")))?;
        let deadline = Instant::now() + timeout;
        loop {
            match self.exit_code()? {
                Some(0) => return Ok(()),
                Some(code) => {
                    return Err(Error(format!("server exited with {code} after SIGTERM")));
                }
                None if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                None => {
                    return Err(Error(format!(
                        "server did not exit within {timeout:?} of SIGTERM"
                    )));
                }
            }
        }
    }

    /// [`Server::shutdown`] while reading (and dropping) whatever the server
    /// still writes: a shutdown that ends many tasks or terminal jobs writes
    /// a notification for each, and a client that stops reading would hold
    /// the server in a full stdout pipe. Killed (and waited for) when it does
    /// not exit within `timeout`.
    pub fn shutdown_draining(mut self, timeout: Duration) -> Result<(), Error> {
        drop(self.stdin.take());
        let (child, stdout) = (&mut self.child, &mut self.stdout);
        thread::scope(|s| {
            s.spawn(move || std::io::copy(stdout, &mut std::io::sink()));
            let deadline = Instant::now() + timeout;
            loop {
                match child.try_wait() {
                    Ok(Some(st)) if st.success() => return Ok(()),
                    Ok(Some(st)) => {
                        return Err(Error(format!("server exited with {st} after stdin EOF")));
                    }
                    Ok(None) if Instant::now() < deadline => {
                        thread::sleep(Duration::from_millis(5))
                    }
                    other => {
                        // The reader ends when the killed server's stdout closes.
                        let _ = child.kill();
                        let _ = child.wait();
                        return Err(Error(match other {
                            Err(e) => format!("waiting for the server: {e}"),
                            _ => format!("server did not exit within {timeout:?} of stdin EOF"),
                        }));
                    }
                }
            }
        })
    }

    /// Closes stdin (a graceful shutdown) and waits up to `timeout` for a clean
    /// exit; the server is killed (by `Drop`) if it does not.
    pub fn shutdown(mut self, timeout: Duration) -> Result<(), Error> {
        drop(self.stdin.take());
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) if s.success() => return Ok(()),
                Ok(Some(s)) => {
                    return Err(Error(format!("server exited with {s} after stdin EOF")));
                }
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                Ok(None) => {
                    return Err(Error(format!(
                        "server did not exit within {timeout:?} of stdin EOF"
                    )));
                }
                Err(e) => return Err(Error(format!("waiting for the server: {e}"))),
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.watchdog.stop.store(true, Ordering::SeqCst);
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if let Some(h) = self.watchdog_thread.take() {
            let _ = h.join();
        }
    }
}

/// The read half of a [`Server`] (see [`Server::halves`]).
pub struct Reader<'a> {
    stdout: &'a mut BufReader<ChildStdout>,
    line: &'a mut Vec<u8>,
    watchdog: &'a Watchdog,
}

impl Reader<'_> {
    /// Reads the next response (notifications skipped), bounded by the armed
    /// watchdog, and checks it is well-formed with one of the expected ids.
    pub fn next_response(&mut self) -> Result<(u64, Value), Error> {
        loop {
            self.line.clear();
            let n = self
                .stdout
                .read_until(b'\n', self.line)
                .map_err(|e| Error(format!("reading from the server: {e}")))?;
            if n == 0 {
                return Err(if self.watchdog.fired.load(Ordering::SeqCst) {
                    Error("timed out waiting for the server (it was killed)".into())
                } else {
                    Error("the server closed its stdout".into())
                });
            }
            let msg: Value = serde_json::from_slice(self.line)
                .map_err(|e| Error(format!("server wrote a line that is not JSON: {e}")))?;
            if msg.get("id").is_none() && msg.get("method").is_some() {
                continue;
            }
            let Some(id) = msg.get("id").and_then(Value::as_u64) else {
                return Err(Error(format!("response without an integer id: {msg}")));
            };
            return check_response(msg, id).map(|v| (id, v));
        }
    }
}

fn watch(dog: &Watchdog) {
    while !dog.stop.load(Ordering::SeqCst) {
        thread::sleep(Duration::from_millis(20));
        let deadline = dog.deadline_ns.load(Ordering::SeqCst);
        let now = u64::try_from(dog.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if deadline != 0 && now > deadline {
            dog.fired.store(true, Ordering::SeqCst);
            let pid = dog.pid.load(Ordering::SeqCst);
            if let Some(pid) = i32::try_from(pid)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            return;
        }
    }
}

/// The `initialize` params the client sends.
pub fn initialize_params(protocol: &str) -> Value {
    json!({
        "protocolVersion": protocol,
        "capabilities": {},
        "clientInfo": {"name": "mcp-exec-bench", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// Checks an `initialize` result.
pub fn check_initialize(result: &Value, protocol: &str) -> Result<(), Error> {
    let ok = result["protocolVersion"] == protocol
        && result["serverInfo"]["name"] == "mcp-exec"
        && result["capabilities"]["tools"].is_object();
    if ok {
        Ok(())
    } else {
        Err(Error(format!("malformed initialize result: {result}")))
    }
}

/// Checks the JSON-RPC envelope and returns its `result`.
pub fn check_response(msg: Value, id: u64) -> Result<Value, Error> {
    if msg.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Error(format!("response without jsonrpc 2.0: {msg}")));
    }
    if msg.get("id").and_then(Value::as_u64) != Some(id) {
        return Err(Error(format!("expected the response to {id}, got {msg}")));
    }
    match msg {
        Value::Object(mut m) => {
            if let Some(err) = m.remove("error") {
                return Err(Error(format!("request {id} failed: {err}")));
            }
            m.remove("result")
                .ok_or_else(|| Error(format!("response {id} has neither result nor error")))
        }
        other => Err(Error(format!("response is not an object: {other}"))),
    }
}

/// Checks a `tools/call` result and parses the JSON in its text content.
pub fn tool_json(result: &Value, tool: &str) -> Result<Value, Error> {
    let text = result["content"][0]["text"].as_str();
    let (Some(text), Some("text")) = (text, result["content"][0]["type"].as_str()) else {
        return Err(Error(format!(
            "{tool}: result without text content: {result}"
        )));
    };
    if result["isError"] != false {
        return Err(Error(format!("{tool}: tool error: {text}")));
    }
    serde_json::from_str(text).map_err(|e| Error(format!("{tool}: result text is not JSON: {e}")))
}

/// Memory figures of any process.
pub fn memory_of(pid: u32) -> Result<Memory, Error> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| Error(format!("reading /proc/{pid}/status: {e}")))?;
    let field = |name: &str| -> Result<u64, Error> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .ok_or_else(|| Error(format!("no {name} in /proc/{pid}/status")))
    };
    Ok(Memory {
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
        anon_kib: field("RssAnon:")?,
        file_kib: field("RssFile:")?,
    })
}
