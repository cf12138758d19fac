//! Test support: a raw-JSON MCP client over real pipes, and the four targets
//! the same tests run against.
//!
//! - [`Target::Bare`]: the debug binary as a plain child process (it makes
//!   itself a child subreaper);
//! - [`Target::Pid1`]: the same binary as a real PID 1 under
//!   `unshare --pid --fork --mount-proc` (root);
//! - [`Target::Scratch`] / [`Target::Tini`]: `podman run -i --rm` of the
//!   `localhost/mcp-exec:scratch` / `:tini` images (built by
//!   `images/build-offline.sh`, which `scripts/test.sh` runs first).
//!
//! A target that cannot run here (not root, no podman, image missing) makes
//! the test fail when `CI` is set, and skip with a printed reason otherwise.
//!
//! Every read has a timeout: a test never hangs on a silent server. Every
//! server is started through [`guard::prepare`] and ended, with everything it
//! started, when its [`Server`] is dropped, also when the test fails.

#![allow(dead_code, reason = "each test module uses a different subset")]

/// A small HTTP/1.1 client (the HTTP transport and Kubernetes tests).
pub mod http;

/// Every server a test starts ends with it; the inherited signal state of a run.
pub mod guard;

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Default time allowed for one response.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The latest protocol revision: the one Part II tests run in unless they
/// are about revision gating.
pub const LATEST: &str = "2025-11-25";

/// Where the server under test runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Plain child process (subreaper).
    Bare,
    /// Real PID 1 under `unshare --pid --fork --mount-proc`.
    Pid1,
    /// `podman run -i --rm localhost/mcp-exec:scratch` (PID 1 in a container).
    Scratch,
    /// `podman run -i --rm localhost/mcp-exec:tini` (tini is PID 1).
    Tini,
}

/// The debug binary under test.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_mcp-exec")
}

/// `podman`, run from the temporary directory: conmon, which `podman run`
/// and `podman kube play` start with their working directory, creates an
/// empty file named `oom` there when its container sees an OOM kill (the
/// memory-limit tests do that on purpose), and a test writes only under
/// temporary directories.
pub fn podman() -> Command {
    let mut c = Command::new("podman");
    c.current_dir(std::env::temp_dir());
    c
}

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// A pinned interop venv's python, when it can `import` what a test needs:
/// `None` (skip) when it cannot here, a failure in CI ([`require`]).
/// `install` is the `interop/run.sh` option that installs it.
pub fn venv_python(
    venv: &'static str,
    import: &str,
    what: &str,
    install: &str,
) -> Option<&'static str> {
    let check = std::process::Command::new(venv)
        .args(["-c", &format!("import {import}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    let available = match check {
        Ok(s) if s.success() => Ok(()),
        other => Err(format!(
            "{venv}: cannot import {import} ({other:?}); run interop/run.sh {install}"
        )),
    };
    require(available, what).then_some(venv)
}

/// Fails (in CI) or reports a skip (elsewhere). Returns `false` to skip.
pub fn require(ok: Result<(), String>, what: &str) -> bool {
    match ok {
        Ok(()) => true,
        Err(why) if in_ci() => panic!("{what} is required in CI but unavailable: {why}"),
        Err(why) => {
            eprintln!("SKIPPED ({what} unavailable: {why})");
            false
        }
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

fn command_works(cmd: &str, args: &[&str]) -> Result<(), String> {
    match Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("`{cmd} {}` exited with {s}", args.join(" "))),
        Err(e) => Err(format!("`{cmd}`: {e}")),
    }
}

impl Target {
    /// All four, in parity order.
    pub const ALL: [Target; 4] = [Target::Bare, Target::Pid1, Target::Scratch, Target::Tini];

    /// Whether the target can run here (see the module doc).
    pub fn available(self) -> bool {
        let check = match self {
            Target::Bare => Ok(()),
            Target::Pid1 => {
                if is_root() {
                    command_works("unshare", &["--pid", "--fork", "--mount-proc", "true"])
                } else {
                    Err("not root".into())
                }
            }
            Target::Scratch | Target::Tini => command_works(
                "podman",
                &["image", "exists", self.image().unwrap_or_default()],
            ),
        };
        require(check, &format!("target {self:?}"))
    }

    /// The image of a container target: `localhost/mcp-exec:scratch|tini`,
    /// or the tag in `MCP_EXEC_TEST_IMAGE_SCRATCH|TINI` (a private copy, so
    /// that a run is not disturbed by someone rebuilding the shared tags).
    pub fn image(self) -> Option<&'static str> {
        static SCRATCH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        static TINI: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let pick = |cell: &'static std::sync::OnceLock<String>, var: &str, default: &str| {
            cell.get_or_init(|| std::env::var(var).unwrap_or_else(|_| default.to_owned()))
                .as_str()
        };
        match self {
            Target::Scratch => Some(pick(
                &SCRATCH,
                "MCP_EXEC_TEST_IMAGE_SCRATCH",
                "localhost/mcp-exec:scratch",
            )),
            Target::Tini => Some(pick(
                &TINI,
                "MCP_EXEC_TEST_IMAGE_TINI",
                "localhost/mcp-exec:tini",
            )),
            _ => None,
        }
    }

    /// Whether mcp-exec is PID 1 in this target.
    pub fn server_is_pid1(self) -> bool {
        matches!(self, Target::Pid1 | Target::Scratch)
    }

    /// Whether the target is a container (tests must act from inside).
    pub fn is_container(self) -> bool {
        self.image().is_some()
    }

    /// The command that starts the server on this target with `env`
    /// (containers get it as `-e`, named `name`).
    pub fn command(self, env: &[(&str, &str)], name: &str) -> Command {
        match self {
            Target::Bare => {
                let mut c = Command::new(binary());
                c.envs(env.iter().copied());
                c
            }
            Target::Pid1 => {
                let mut c = Command::new("unshare");
                c.args(["--pid", "--fork", "--mount-proc", binary()])
                    .envs(env.iter().copied());
                c
            }
            Target::Scratch | Target::Tini => {
                let mut c = podman();
                c.args(["run", "-i", "--rm", "--name", name, "--log-driver", "none"]);
                for (k, v) in env {
                    c.arg("-e").arg(format!("{k}={v}"));
                }
                c.arg(self.image().unwrap_or_default());
                c
            }
        }
    }
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A running server with a line-oriented JSON client.
pub struct Server {
    /// The target it runs on.
    pub target: Target,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// Messages read but not yet consumed (out-of-order responses,
    /// notifications).
    pending: VecDeque<Value>,
    /// Everything the server wrote to stderr so far.
    pub stderr: Arc<Mutex<String>>,
    /// Set when the stderr reader reached the end of the pipe.
    stderr_ended: Arc<std::sync::atomic::AtomicBool>,
    next_id: i64,
    container: Option<String>,
    mark: guard::Mark,
}

impl Server {
    /// Starts the server on `target` with extra environment.
    pub fn start_with_env(target: Target, env: &[(&str, &str)]) -> Server {
        let name = container_name();
        let command = target.command(env, &name);
        Server::spawn(target, command, name)
    }

    /// Spawns `command` (built for `target`; `name` is the container name of
    /// a container target) and connects the client to its stdio.
    fn spawn(target: Target, command: Command, name: String) -> Server {
        let (mut command, mark) = guard::prepare(command, !target.is_container());
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {target:?}: {e}"));
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let log = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&log);
        let stderr_ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ended = Arc::clone(&stderr_ended);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
            ended.store(true, std::sync::atomic::Ordering::Release);
        });
        Server {
            target,
            stdin: child.stdin.take(),
            child,
            lines: rx,
            pending: VecDeque::new(),
            stderr: log,
            stderr_ended,
            next_id: 0,
            container: target.is_container().then_some(name),
            mark,
        }
    }

    /// Starts the server on a non-container `target` with extra
    /// environment and command-line arguments (e.g. `--http ADDR`).
    pub fn start_with_cli(target: Target, env: &[(&str, &str)], args: &[&str]) -> Server {
        assert!(!target.is_container(), "{target:?}: arguments go to podman");
        let name = container_name();
        let mut command = target.command(env, &name);
        command.args(args);
        Server::spawn(target, command, name)
    }

    /// Starts `command` (a wrapper around [`binary`], e.g. `unshare
    /// --mount`) as the server of a non-container `target`.
    pub fn spawn_command(target: Target, command: Command) -> Server {
        assert!(!target.is_container(), "{target:?}: use start_with_args");
        Server::spawn(target, command, container_name())
    }

    /// Starts an image `target` with `podman run` options before the image
    /// (`-p 127.0.0.1:N:8080`) and server arguments after it.
    pub fn start_container(
        target: Target,
        env: &[(&str, &str)],
        options: &[&str],
        args: &[&str],
    ) -> Server {
        assert!(target.is_container(), "{target:?}: use start_with_cli");
        let name = container_name();
        let mut c = podman();
        c.args(["run", "-i", "--rm", "--name", &name, "--log-driver", "none"]);
        c.args(options);
        for (k, v) in env {
            c.arg("-e").arg(format!("{k}={v}"));
        }
        c.arg(target.image().unwrap_or_default()).args(args);
        Server::spawn(target, c, name)
    }

    /// Starts the server on `target` with the default environment.
    pub fn start(target: Target) -> Server {
        Server::start_with_env(target, &[])
    }

    /// Starts and initializes (protocol 2024-11-05).
    pub fn started(target: Target) -> Server {
        let mut s = Server::start(target);
        s.initialize("2024-11-05");
        s
    }

    /// Starts with env and initializes (protocol 2024-11-05).
    pub fn started_with_env(target: Target, env: &[(&str, &str)]) -> Server {
        let mut s = Server::start_with_env(target, env);
        s.initialize("2024-11-05");
        s
    }

    /// Starts with env and initializes with protocol `revision` (Part II
    /// behaviour appears from 2025-03-26 on; see [`LATEST`]).
    pub fn started_in(target: Target, env: &[(&str, &str)], revision: &str) -> Server {
        let mut s = Server::start_with_env(target, env);
        s.initialize(revision);
        s
    }

    /// `initialize` + `notifications/initialized`; returns the result.
    pub fn initialize(&mut self, version: &str) -> Value {
        let r = self.request(
            "initialize",
            json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "tests", "version": "0"}}),
        );
        self.notify("notifications/initialized", json!({}));
        r["result"].clone()
    }

    /// Writes one raw line (a `\n` is appended).
    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    /// Writes raw bytes as they are.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write");
        stdin.flush().expect("flush");
    }

    /// Sends a JSON value as one line.
    pub fn send(&mut self, v: &Value) {
        self.send_raw(&v.to_string());
    }

    /// A fresh integer id.
    pub fn fresh_id(&mut self) -> Value {
        self.next_id += 1;
        json!(self.next_id)
    }

    /// Sends a request without waiting; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> Value {
        let id = self.fresh_id();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and waits for its response (the whole message).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(&id, TIMEOUT)
    }

    /// The next message from the server, or `None` after `timeout`.
    pub fn next_message(&mut self, timeout: Duration) -> Option<Value> {
        if let Some(v) = self.pending.pop_front() {
            return Some(v);
        }
        self.read_line(timeout)
    }

    fn read_line(&mut self, timeout: Duration) -> Option<Value> {
        let line = self.lines.recv_timeout(timeout).ok()?;
        Some(
            serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("server wrote a non-JSON line {line:?}: {e}")),
        )
    }

    /// Whether the response with `id` has arrived by now (nothing is waited
    /// for; what was read is kept for later).
    pub fn answered(&mut self, id: &Value) -> bool {
        while let Some(m) = self.read_line(Duration::ZERO) {
            self.pending.push_back(m);
        }
        self.pending.iter().any(|m| is_response_to(m, id))
    }

    /// Waits for the response with `id` (other messages are kept for later).
    pub fn response(&mut self, id: &Value, timeout: Duration) -> Value {
        if let Some(i) = self.pending.iter().position(|m| is_response_to(m, id)) {
            return self.pending.remove(i).expect("present");
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(msg) = self.read_line(left) else {
                panic!(
                    "no response to id {id} within {timeout:?} from {:?}; pending: {:?}; stderr:\n{}",
                    self.target,
                    self.pending,
                    self.stderr.lock().unwrap()
                );
            };
            if is_response_to(&msg, id) {
                return msg;
            }
            self.pending.push_back(msg);
        }
    }

    /// Notifications received so far (drained from the pending queue), plus
    /// any that arrive within `wait`.
    pub fn notifications(&mut self, wait: Duration) -> Vec<Value> {
        let deadline = Instant::now() + wait;
        while let Some(m) = self.read_line(deadline.saturating_duration_since(Instant::now())) {
            self.pending.push_back(m);
        }
        let (notes, rest): (Vec<Value>, Vec<Value>) = self
            .pending
            .drain(..)
            .partition(|m| m.get("id").is_none() && m.get("method").is_some());
        self.pending = rest.into();
        notes
    }

    /// Sends `tools/call` without waiting; returns the id.
    pub fn send_call(&mut self, tool: &str, args: Value) -> Value {
        self.send_request("tools/call", json!({"name": tool, "arguments": args}))
    }

    /// Calls a tool and returns the whole `result` object
    /// (`{content, isError}`); panics on a JSON-RPC error.
    pub fn call_result(&mut self, tool: &str, args: Value) -> Value {
        let id = self.send_call(tool, args);
        let r = self.response(&id, TIMEOUT);
        assert!(r.get("error").is_none(), "tools/call {tool} failed: {r}");
        r["result"].clone()
    }

    /// Calls a tool that must succeed and returns its parsed JSON payload.
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        let result = self.call_result(tool, args.clone());
        assert_eq!(
            result["isError"],
            json!(false),
            "{tool} {args} failed: {result}"
        );
        tool_json(&result)
    }

    /// Calls a tool that must fail (`isError`) and returns its message.
    pub fn call_err(&mut self, tool: &str, args: Value) -> String {
        let result = self.call_result(tool, args.clone());
        assert_eq!(
            result["isError"],
            json!(true),
            "{tool} {args} should fail: {result}"
        );
        result["content"][0]["text"]
            .as_str()
            .expect("text")
            .to_owned()
    }

    /// Runs a blocking `execute` of `command` and returns its result.
    pub fn exec(&mut self, command: &str) -> Value {
        self.call("execute", json!({"command": command}))
    }

    /// Starts a `nowait` job and returns its id.
    pub fn spawn_job(&mut self, command: &str) -> String {
        let r = self.call("execute", json!({"command": command, "nowait": true}));
        r["job_id"].as_str().expect("job_id").to_owned()
    }

    /// Closes the server's stdin (EOF → graceful shutdown).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits for the server process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(s)) = self.child.try_wait() {
                // What it wrote to stderr before it exited is read whole
                // before the caller looks at it (the reader thread may lag
                // the exit on a busy machine); bounded, in case something
                // it left behind still holds the pipe.
                let read_by = Instant::now() + Duration::from_secs(5);
                while !self.stderr_ended.load(std::sync::atomic::Ordering::Acquire)
                    && Instant::now() < read_by
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The host pid of the client-side process (binary, unshare or podman).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// For containers: the container name.
    pub fn container(&self) -> Option<&str> {
        self.container.as_deref()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        end(self.container.as_deref(), &mut self.child, &self.mark);
    }
}

/// Ends a server under test for good: removes its container, if any, kills
/// the client-side process, the server and every process either started
/// (see [`guard`]), and reaps the client-side process.
pub fn end(container: Option<&str>, child: &mut Child, mark: &guard::Mark) {
    if let Some(name) = container {
        let _ = podman()
            .args(["rm", "-f", "-t", "0", name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    mark.end(Some(child.id()));
    let _ = child.kill();
    let _ = child.wait();
}

fn is_response_to(m: &Value, id: &Value) -> bool {
    m.get("id") == Some(id) && (m.get("result").is_some() || m.get("error").is_some())
}

/// Parses the JSON text block of a tool result.
pub fn tool_json(result: &Value) -> Value {
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text block in {result}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("text block is not JSON ({e}): {text}"))
}

/// Polls `cond` every few ms until it holds or `timeout` passes.
pub fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Declares one `#[test]` per target for each listed test function
/// `fn name(t: Target)`, in modules `bare`, `pid1`, `scratch`, `tini`.
#[macro_export]
macro_rules! parity {
    ($($name:ident),* $(,)?) => {
        mod bare { $( #[test] fn $name() { if $crate::support::Target::Bare.available() { super::$name($crate::support::Target::Bare) } } )* }
        mod pid1 { $( #[test] fn $name() { if $crate::support::Target::Pid1.available() { super::$name($crate::support::Target::Pid1) } } )* }
        mod scratch { $( #[test] fn $name() { if $crate::support::Target::Scratch.available() { super::$name($crate::support::Target::Scratch) } } )* }
        mod tini { $( #[test] fn $name() { if $crate::support::Target::Tini.available() { super::$name($crate::support::Target::Tini) } } )* }
    };
}

// ---------------------------------------------------------------------------
// Helpers for tests/lifecycle.rs and tests/containers.rs.
// ---------------------------------------------------------------------------

/// A container name unique to this test process.
fn container_name() -> String {
    format!(
        "mcp-exec-test-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

impl Server {
    /// Starts a container target with extra `podman run` arguments (placed
    /// before the image, e.g. `["-v", "/host/dir:/out"]`) and extra
    /// environment. Panics for a non-container target.
    pub fn start_with_args(target: Target, env: &[(&str, &str)], podman_args: &[&str]) -> Server {
        let image = target
            .image()
            .unwrap_or_else(|| panic!("{target:?} is not a container target"));
        let name = container_name();
        let mut command = podman();
        command.args(["run", "-i", "--rm", "--name", &name, "--log-driver", "none"]);
        for (k, v) in env {
            command.arg("-e").arg(format!("{k}={v}"));
        }
        command.args(podman_args).arg(image);
        Server::spawn(target, command, name)
    }

    /// The host pid of the mcp-exec process itself: the client-side child
    /// for [`Target::Bare`], the child of `unshare` for [`Target::Pid1`];
    /// `None` for containers (signal those through podman).
    pub fn server_host_pid(&self) -> Option<u32> {
        match self.target {
            Target::Bare => Some(self.pid()),
            Target::Pid1 => {
                let children = format!("/proc/{0}/task/{0}/children", self.pid());
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

    /// Waits for the response to `id` and returns its JSON-RPC error code
    /// (panics if it is a result).
    pub fn error_code(&mut self, id: &Value, timeout: Duration) -> i64 {
        let r = self.response(id, timeout);
        r["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("expected an error response to {id}, got {r}"))
    }

    /// Sends `notifications/cancelled` for `id` (sent as is: a string id
    /// stays a string).
    pub fn cancel(&mut self, id: &Value) {
        self.notify(
            "notifications/cancelled",
            json!({"requestId": id, "reason": "test"}),
        );
    }

    /// Closes stdin and requires a clean exit (status 0) within `timeout`.
    pub fn finish(&mut self, timeout: Duration) {
        self.close_stdin();
        let status = self.wait_exit(timeout);
        assert!(
            status.is_some_and(|s| s.success()),
            "{:?} did not exit 0 within {timeout:?} after EOF: {status:?}; stderr:\n{}",
            self.target,
            self.stderr.lock().unwrap()
        );
    }
}

// ---------------------------------------------------------------------------
// Helpers for tests/bounded.rs and tests/policy.rs.
// ---------------------------------------------------------------------------

impl Server {
    /// Starts `target` with its soft and hard `RLIMIT_NOFILE` lowered to
    /// `nofile` from the start: `prlimit` execs the binary (the bare target;
    /// inside `unshare` for the PID 1 target, so the binary is still PID 1),
    /// and `podman run --ulimit` for the containers. (Giving podman one
    /// `--ulimit` replaces `default_ulimits` of containers.conf, whose
    /// `nproc` runc needs here, so that one is repeated.)
    pub fn start_with_nofile(target: Target, env: &[(&str, &str)], nofile: u32) -> Server {
        let limit = format!("--nofile={nofile}:{nofile}");
        match target {
            Target::Bare | Target::Pid1 => {
                let mut command = if target == Target::Pid1 {
                    let mut c = Command::new("unshare");
                    c.args(["--pid", "--fork", "--mount-proc", "prlimit"]);
                    c
                } else {
                    Command::new("prlimit")
                };
                command
                    .args([limit.as_str(), "--", binary()])
                    .envs(env.iter().copied());
                Server::spawn(target, command, container_name())
            }
            Target::Scratch | Target::Tini => {
                let ulimit = format!("nofile={nofile}:{nofile}");
                Server::start_with_args(
                    target,
                    env,
                    &["--ulimit", &ulimit, "--ulimit", "nproc=4096:4096"],
                )
            }
        }
    }

    /// Starts `target` so that the host file `path` is readable at the same
    /// path inside it (a read-only bind mount for the containers).
    pub fn start_with_host_file(target: Target, env: &[(&str, &str)], path: &str) -> Server {
        if target.is_container() {
            let volume = format!("{path}:{path}:ro");
            Server::start_with_args(target, env, &["-v", &volume])
        } else {
            Server::start_with_env(target, env)
        }
    }
}

/// A host path unique to this test process, removed (file or directory
/// tree) when dropped.
pub struct HostPath(pub String);

impl HostPath {
    /// `/tmp/mcp-exec-test-<what>-<pid>-<n>`; nothing is created.
    pub fn new(what: &str) -> HostPath {
        HostPath(format!(
            "/tmp/mcp-exec-test-{what}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ))
    }
}

impl Drop for HostPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The sorted field names of a JSON object.
pub fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k
}

// ---------------------------------------------------------------------------
// Helpers for tests/faults.rs.
// ---------------------------------------------------------------------------

impl Server {
    /// Starts a non-container `target` with the binary run through
    /// `prefix` (a program that sets something up and execs the rest of
    /// its command line, e.g. `setpriv …` or `prlimit …`): on the PID 1
    /// target inside `unshare`, so the binary is still PID 1.
    pub fn start_prefixed(
        target: Target,
        env: &[(&str, &str)],
        prefix: &[&str],
        args: &[&str],
    ) -> Server {
        assert!(!target.is_container(), "{target:?}: use podman arguments");
        let mut command = if target == Target::Pid1 {
            let mut c = Command::new("unshare");
            c.args(["--pid", "--fork", "--mount-proc"]).args(prefix);
            c
        } else {
            let mut c = Command::new(prefix[0]);
            c.args(&prefix[1..]);
            c
        };
        command.arg(binary()).args(args).envs(env.iter().copied());
        Server::spawn(target, command, container_name())
    }
}
