//! The peers of issue 26 (Deliver 5): the servers a user would pick instead of
//! mcp-exec, measured side by side with it in one run.
//!
//! Over stdio, DesktopCommander (npm) and mcp-shell-server (PyPI), installed
//! pinned by `bench/peers/install.sh`, and mcp-exec itself go through the same
//! client and the same scenario: startup to the first answer (spawn → the
//! `initialize` response), the RSS of the server's process tree once
//! initialized (node and python servers start helpers; their children count),
//! and round trips of the tool that runs a command, running `true`. Rounds are
//! interleaved server by server (one startup of each, …; one call on each, …),
//! so a change in the machine's load hits every server alike; each peer's ratio
//! is to mcp-exec's figure of the same run.
//!
//! The platform SDKs are measured against our own daemons: the E2B SDK's
//! `commands.run("true")` against `--envd`, the agent-sandbox SDK's against
//! `--sandboxd-grpc`, each interleaved with `POST /exec` of the argv that SDK
//! sends, through the same server from the same Python
//! (`bench/peers/sdk_rtt.py`, run from the interop venvs): the ratio is what
//! the SDK and its protocol cost over the raw wire.
//!
//! Nothing here is installed by CI: a peer or venv that is missing is skipped
//! with the reason printed, and the run goes on.

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::Error;
use crate::report::Figure;
use crate::stats::Samples;

/// How long one request may take before the scenario gives up on that server.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Calls on each server before the measured ones (the first spawn of a
/// runtime loads its code and caches).
const WARMUP: usize = 3;
/// The MCP revision every server is asked for: one the pinned peers speak.
const PROTOCOL: &str = "2025-06-18";

/// One stdio server of the comparison.
struct StdioServer {
    /// Name and version, for the labels.
    label: String,
    /// JSON keys of its figures.
    keys: Keys,
    /// The command line.
    argv: Vec<String>,
    /// Environment on top of the harness's own.
    env: Vec<(&'static str, String)>,
    /// The tool that runs a command, and its arguments for `true`.
    tool: &'static str,
    args: Value,
    /// A scratch HOME, removed at the end (DesktopCommander writes its config there).
    home: Option<PathBuf>,
}

struct Keys {
    startup: &'static str,
    rss: &'static str,
    rtt: &'static str,
}

const MCP_EXEC: Keys = Keys {
    startup: "peers_startup_mcp_exec",
    rss: "peers_rss_mcp_exec",
    rtt: "peers_rtt_mcp_exec",
};
const DESKTOP_COMMANDER: Keys = Keys {
    startup: "peers_startup_desktop_commander",
    rss: "peers_rss_desktop_commander",
    rtt: "peers_rtt_desktop_commander",
};
const SHELL_SERVER: Keys = Keys {
    startup: "peers_startup_mcp_shell_server",
    rss: "peers_rss_mcp_shell_server",
    rtt: "peers_rtt_mcp_shell_server",
};

/// Where the peers are installed.
fn peers_dir() -> PathBuf {
    crate::workspace().join("bench/peers")
}

/// The interop directory whose venvs hold the SDKs: `MCP_EXEC_BENCH_INTEROP`
/// (e.g. another checkout's, read-only) or this workspace's.
fn interop_dir() -> PathBuf {
    std::env::var_os("MCP_EXEC_BENCH_INTEROP")
        .map_or_else(|| crate::workspace().join("interop"), PathBuf::from)
}

/// A fresh empty directory under the system's temp dir.
fn scratch(name: &str) -> Result<PathBuf, Error> {
    let dir = std::env::temp_dir().join(format!("mcp-exec-bench-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| Error(format!("mkdir {}: {e}", dir.display())))?;
    Ok(dir)
}

/// DesktopCommander, or why not.
fn desktop_commander() -> Result<StdioServer, String> {
    let pkg = peers_dir().join("node/node_modules/@wonderwhy-er/desktop-commander");
    let manifest = fs::read_to_string(pkg.join("package.json")).map_err(|_| {
        format!(
            "DesktopCommander is not installed ({} missing: bash bench/peers/install.sh)",
            pkg.display()
        )
    })?;
    let version = serde_json::from_str::<Value>(&manifest)
        .ok()
        .and_then(|v| v["version"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "?".into());
    let node = which("node").ok_or("DesktopCommander needs node on PATH")?;
    let home = scratch("dc-home").map_err(|e| e.0)?;
    Ok(StdioServer {
        label: format!("DesktopCommander {version}"),
        keys: DESKTOP_COMMANDER,
        argv: vec![
            node.display().to_string(),
            pkg.join("dist/index.js").display().to_string(),
        ],
        env: vec![
            // Its config (written on first start) and tool-call log go here, not in the user's home.
            ("HOME", home.display().to_string()),
            ("DESKTOP_COMMANDER_DISABLE_TELEMETRY", "1".into()),
            // Its feature-flag fetch stays on loopback (refused at once) instead of the internet.
            ("DC_FLAG_URL", "http://127.0.0.1:9/flags.json".into()),
        ],
        tool: "start_process",
        args: json!({"command": "true", "timeout_ms": 30000}),
        home: Some(home),
    })
}

/// mcp-shell-server, or why not.
fn shell_server() -> Result<StdioServer, String> {
    let venv = peers_dir().join(".venv");
    let exe = venv.join("bin/mcp-shell-server");
    if !exe.is_file() {
        return Err(format!(
            "mcp-shell-server is not installed ({} missing: bash bench/peers/install.sh)",
            exe.display()
        ));
    }
    let version = dist_version(&venv, "mcp_shell_server").unwrap_or_else(|| "?".into());
    Ok(StdioServer {
        label: format!("mcp-shell-server {version}"),
        keys: SHELL_SERVER,
        argv: vec![exe.display().to_string()],
        env: vec![("ALLOW_COMMANDS", "true".into())],
        tool: "shell_execute",
        args: json!({"command": ["true"]}),
        home: None,
    })
}

/// The version in a venv's `NAME-VERSION.dist-info` directory.
fn dist_version(venv: &Path, name: &str) -> Option<String> {
    let lib = fs::read_dir(venv.join("lib"))
        .ok()?
        .flatten()
        .next()?
        .path();
    fs::read_dir(lib.join("site-packages"))
        .ok()?
        .flatten()
        .find_map(|e| {
            let file = e.file_name().into_string().ok()?;
            let rest = file.strip_prefix(name)?.strip_prefix('-')?;
            Some(rest.strip_suffix(".dist-info")?.to_owned())
        })
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// A stdio MCP server in its own process group, with its stdout read by a
/// thread so that every wait is bounded.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
    label: String,
}

impl Session {
    fn spawn(s: &StdioServer) -> Result<Session, Error> {
        let mut cmd = Command::new(&s.argv[0]);
        cmd.args(&s.argv[1..])
            // Every server starts the same shell where it starts one (the other
            // scenarios' rule: see `client::Server::spawn`).
            .env("SHELL", "/bin/sh")
            .env("MCP_EXEC_LOG", "warn")
            .envs(s.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd
            .spawn()
            .map_err(|e| Error(format!("spawn {}: {e}", s.label)))?;
        let stdout = child.stdout.take().ok_or(Error("no stdout".into()))?;
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Session {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 0,
            label: s.label.clone(),
        })
    }

    fn write(&mut self, msg: &Value) -> Result<(), Error> {
        let mut line = serde_json::to_vec(msg)?;
        line.push(b'\n');
        let stdin = self.stdin.as_mut().ok_or(Error("stdin closed".into()))?;
        stdin
            .write_all(&line)
            .and_then(|()| stdin.flush())
            .map_err(|e| Error(format!("{}: write: {e}", self.label)))
    }

    /// Sends a request and waits for its answer: notifications are skipped,
    /// and a request from the server is refused (no peer needs one here).
    fn request(&mut self, method: &str, params: Value) -> Result<Value, Error> {
        self.next_id += 1;
        let id = self.next_id;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).map_err(|_| {
                Error(format!(
                    "{}: no answer to {method} (timeout or exit)",
                    self.label
                ))
            })?;
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue; // a stray log line on stdout
            };
            if msg.get("method").is_some() {
                if let Some(rid) = msg.get("id") {
                    let refusal = json!({"jsonrpc": "2.0", "id": rid,
                        "error": {"code": -32601, "message": "not supported by the benchmark"}});
                    self.write(&refusal)?;
                }
                continue;
            }
            if msg["id"] != json!(id) {
                continue;
            }
            if let Some(e) = msg.get("error") {
                return Err(Error(format!("{}: {method}: {e}", self.label)));
            }
            return Ok(msg["result"].clone());
        }
    }

    fn initialize(&mut self) -> Result<Value, Error> {
        let params = json!({"protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "mcp-exec-bench", "version": env!("CARGO_PKG_VERSION")}});
        let result = self.request("initialize", params)?;
        self.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(result)
    }

    /// One call of the tool that runs `true`; its round trip.
    fn run_true(&mut self, tool: &str, args: &Value) -> Result<Duration, Error> {
        let t = Instant::now();
        let result = self.request("tools/call", json!({"name": tool, "arguments": args}))?;
        let took = t.elapsed();
        if result["isError"] == json!(true) {
            return Err(Error(format!(
                "{}: {tool} `true` failed: {result}",
                self.label
            )));
        }
        Ok(took)
    }

    /// Closes stdin, gives the server a moment to leave, then ends its whole group.
    fn end(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        if let Some(pgid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// RSS summed over a process and its descendants (KiB), and how many there are.
fn tree_rss(root: u32) -> (u64, usize) {
    let mut parent = HashMap::new();
    for e in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        // The ppid is the second field after the parenthesised command name.
        if let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat"))
            && let Some(ppid) = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok())
        {
            parent.insert(pid, ppid);
        }
    }
    let in_tree = |mut pid: u32| {
        while pid > 1 {
            if pid == root {
                return true;
            }
            pid = parent.get(&pid).copied().unwrap_or(0);
        }
        false
    };
    let mut kib = 0;
    let mut count = 0;
    for &pid in parent.keys().filter(|&&p| in_tree(p)) {
        if let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) {
            count += 1;
            kib += status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    (kib, count)
}

/// What one stdio server measured.
struct Measured {
    startup: Samples,
    rtt: Samples,
    rss_kib: u64,
    processes: usize,
}

/// Runs the stdio scenario on every server at once, interleaved.
fn stdio_side_by_side(
    servers: &[StdioServer],
    startups: usize,
    calls: usize,
) -> Result<Vec<Measured>, Error> {
    let mut out: Vec<Measured> = servers
        .iter()
        .map(|_| Measured {
            startup: Samples::default(),
            rtt: Samples::default(),
            rss_kib: 0,
            processes: 0,
        })
        .collect();
    // A first start of each, not counted: a runtime's first start on a
    // machine reads its code from disk, and DesktopCommander's writes its config.
    for s in servers {
        let mut session = Session::spawn(s)?;
        let init = session.initialize();
        session.end();
        init?;
    }
    for _ in 0..startups {
        for (s, m) in servers.iter().zip(&mut out) {
            let t = Instant::now();
            let mut session = Session::spawn(s)?;
            let init = session.initialize();
            let took = t.elapsed();
            session.end();
            init?;
            m.startup.push_ms(took);
        }
    }
    let mut sessions = Vec::new();
    for (s, m) in servers.iter().zip(&mut out) {
        let mut session = Session::spawn(s)?;
        session.initialize()?;
        // Its answer to a ping: the initialized notification has been read.
        session.request("ping", json!({}))?;
        // Idle is the quietest of 10 samples 50 ms apart: DesktopCommander runs
        // short-lived helpers (`python3 --version`) after initialize, which are no
        // part of what it holds while idle.
        (m.rss_kib, m.processes) = (0..10)
            .map(|i| {
                if i > 0 {
                    thread::sleep(Duration::from_millis(50));
                }
                tree_rss(session.child.id())
            })
            .min_by_key(|&(kib, count)| (count, kib))
            .unwrap_or((0, 0));
        sessions.push(session);
    }
    let result = (|| {
        for _ in 0..WARMUP {
            for (s, session) in servers.iter().zip(&mut sessions) {
                session.run_true(s.tool, &s.args)?;
            }
        }
        for _ in 0..calls {
            for ((s, session), m) in servers.iter().zip(&mut sessions).zip(&mut out) {
                m.rtt.push_ms(session.run_true(s.tool, &s.args)?);
            }
        }
        Ok(())
    })();
    for session in sessions {
        session.end();
    }
    result.map(|()| out)
}

/// One SDK's figures: its `commands.run("true")` and `POST /exec` of the same argv.
struct SdkRun {
    sdk: Samples,
    raw: Samples,
    package: String,
    version: String,
}

/// Starts mcp-exec with `listen` (its front-end's flags) and `--http`, waits
/// for both addresses, and runs `sdk_rtt.py KIND PORT HTTP_PORT N` from `python`.
/// `Ok(Err(why))`: a server built without that front-end (it exits at once on
/// the flag), to skip.
fn sdk_side_by_side(
    binary: &Path,
    python: &Path,
    kind: &str,
    listen: &[&str],
    listening: &str,
    calls: usize,
) -> Result<Result<SdkRun, String>, Error> {
    let home = scratch(&format!("{kind}-home"))?;
    let log = home.join("server.log");
    let mut cmd = Command::new(binary);
    cmd.args(listen)
        .args(["--http", "127.0.0.1:0", "--no-stdio"])
        // The E2B SDK starts every command as a login bash: an empty HOME keeps
        // the machine's ~/.bashrc out of both sides (bench/envd/sdk.sh does the same).
        .env("HOME", &home)
        .env("SHELL", "/bin/sh")
        // sandboxd's root must exist at start-up (the default, /workspace, may not).
        .env("MCP_EXEC_SANDBOXD_ROOT", &home)
        .env("MCP_EXEC_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(
            fs::File::create(&log).map_err(|e| Error(format!("create {}: {e}", log.display())))?,
        );
    let mut server = cmd
        .spawn()
        .map_err(|e| Error(format!("spawn {}: {e}", binary.display())))?;
    let result = (|| {
        let port_of = |text: &str, what: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("mcp-exec: listening for {what} on ")))
                .and_then(|a| a.rsplit_once(':'))
                .map(|(_, p)| p.to_owned())
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let (port, http) = loop {
            let text = fs::read_to_string(&log).unwrap_or_default();
            if let (Some(p), Some(h)) = (port_of(&text, listening), port_of(&text, "HTTP")) {
                break (p, h);
            }
            if let Ok(Some(status)) = server.try_wait() {
                let first = text.lines().next().unwrap_or("").to_owned();
                return Ok(Err(format!(
                    "the server exited {status} on {} (built without it?): {first}",
                    listen[0]
                )));
            }
            if Instant::now() > deadline {
                return Err(Error(format!("the {kind} server did not listen: {text}")));
            }
            thread::sleep(Duration::from_millis(20));
        };
        let out = Command::new(python)
            .arg(peers_dir().join("sdk_rtt.py"))
            .args([kind, &port, &http, &calls.to_string()])
            .env("HOME", &home)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| Error(format!("run {}: {e}", python.display())))?;
        let mut run = SdkRun {
            sdk: Samples::default(),
            raw: Samples::default(),
            package: String::new(),
            version: String::new(),
        };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let v: Value = serde_json::from_str(line)?;
            if let Some(e) = v.get("error") {
                return Err(Error(format!("sdk_rtt.py {kind}: {e}")));
            }
            if let (Some(s), Some(r)) = (v["sdk_ms"].as_f64(), v["raw_ms"].as_f64()) {
                run.sdk.push(s);
                run.raw.push(r);
            } else {
                run.package = v["sdk"].as_str().unwrap_or("?").to_owned();
                run.version = v["version"].as_str().unwrap_or("?").to_owned();
            }
        }
        if !out.status.success() || run.sdk.len() != calls {
            return Err(Error(format!(
                "sdk_rtt.py {kind} exited {} with {} of {calls} samples",
                out.status,
                run.sdk.len()
            )));
        }
        Ok(Ok(run))
    })();
    let _ = server.kill();
    let _ = server.wait();
    let _ = fs::remove_dir_all(&home);
    result
}

/// A skipped figure, its reason printed and noted.
fn skip(
    figures: &mut Vec<Figure>,
    notes: &mut Map<String, Value>,
    key: &'static str,
    label: &str,
    why: &str,
) {
    eprintln!("bench: {label} skipped: {why}");
    figures.push(Figure::skipped(
        key,
        format!("{label} (skipped: {why})"),
        "ms",
        "—",
    ));
    notes.insert(format!("{key}_skipped"), json!(why));
}

/// The scenario `peers`: its figures go into `figures`, skips and versions into `notes`.
pub fn run(
    binary: &Path,
    startups: usize,
    calls: usize,
    figures: &mut Vec<Figure>,
    notes: &mut Map<String, Value>,
) -> Result<(), Error> {
    let ours = StdioServer {
        label: "mcp-exec".into(),
        keys: MCP_EXEC,
        argv: vec![binary.display().to_string()],
        env: Vec::new(),
        tool: "execute",
        args: json!({"command": "true"}),
        home: None,
    };
    let mut servers = vec![ours];
    for (peer, key, name) in [
        (
            desktop_commander(),
            DESKTOP_COMMANDER.rtt,
            "DesktopCommander",
        ),
        (shell_server(), SHELL_SERVER.rtt, "mcp-shell-server"),
    ] {
        match peer {
            Ok(p) => servers.push(p),
            Err(why) => skip(figures, notes, key, &format!("peers: {name}"), &why),
        }
    }
    eprintln!(
        "bench: peers over stdio ({}; {startups} × startup, {calls} × the tool running `true`, interleaved)",
        servers
            .iter()
            .map(|s| format!("{} {}", s.label, s.tool))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let measured = stdio_side_by_side(&servers, startups, calls);
    for s in &servers {
        if let Some(home) = &s.home {
            let _ = fs::remove_dir_all(home);
        }
    }
    let measured = measured?;
    let (ours, ours_m) = (&servers[0], &measured[0]);
    for (s, m) in servers.iter().zip(&measured) {
        notes.insert(format!("{}_label", s.keys.rtt), json!(s.label));
        let is_ours = std::ptr::eq(s, ours);
        let rtt_label = format!(
            "peers: rtt of {} `{}` running `true` (stdio)",
            s.label, s.tool
        );
        let startup_label = format!("peers: startup of {}: spawn → initialize answered", s.label);
        if is_ours {
            figures.push(Figure::latency(
                s.keys.startup,
                startup_label,
                &m.startup,
                None,
            ));
            figures.push(Figure::latency(s.keys.rtt, rtt_label, &m.rtt, None));
        } else {
            figures.push(Figure::latency_vs(
                s.keys.startup,
                startup_label,
                &m.startup,
                &ours_m.startup,
                "mcp-exec startup (interleaved)",
            ));
            figures.push(Figure::latency_vs(
                s.keys.rtt,
                rtt_label,
                &m.rtt,
                &ours_m.rtt,
                "mcp-exec execute `true` (interleaved)",
            ));
        }
        let rss_label = format!(
            "peers: idle RSS of {} after initialize ({} process{}, summed)",
            s.label,
            m.processes,
            if m.processes == 1 { "" } else { "es" }
        );
        let rss = m.rss_kib as f64 / 1024.0;
        if is_ours {
            figures.push(Figure::value(s.keys.rss, rss_label, "MiB", rss, None));
        } else {
            figures.push(Figure::value_vs(
                s.keys.rss,
                rss_label,
                "MiB",
                rss,
                ours_m.rss_kib as f64 / 1024.0,
                "mcp-exec idle RSS",
            ));
        }
    }

    let interop = interop_dir();
    for (kind, venv, listen, listening, key_sdk) in [
        (
            "e2b",
            "e2b/.venv",
            ["--envd", "127.0.0.1:0"],
            "envd",
            "peers_sdk_e2b",
        ),
        (
            "sandboxd",
            "sandboxd/.venv",
            ["--sandboxd-grpc", "127.0.0.1:0"],
            "sandboxd gRPC",
            "peers_sdk_sandboxd",
        ),
    ] {
        let python = interop.join(venv).join("bin/python");
        if !python.is_file() {
            let how = if kind == "e2b" {
                "--install-e2b"
            } else {
                "--install-python"
            };
            let why = format!(
                "{} missing: bash interop/run.sh {how} (or MCP_EXEC_BENCH_INTEROP)",
                python.display()
            );
            skip(
                figures,
                notes,
                key_sdk,
                &format!("peers: the {kind} SDK"),
                &why,
            );
            continue;
        }
        eprintln!(
            "bench: peers: the {kind} SDK's commands.run(\"true\") against POST /exec, {calls} × interleaved"
        );
        let r = match sdk_side_by_side(binary, &python, kind, &listen, listening, calls)? {
            Ok(r) => r,
            Err(why) => {
                skip(
                    figures,
                    notes,
                    key_sdk,
                    &format!("peers: the {kind} SDK"),
                    &why,
                );
                continue;
            }
        };
        notes.insert(format!("{key_sdk}_version"), json!(r.version));
        figures.push(Figure::latency_vs(
            key_sdk,
            format!(
                "peers: rtt of the {} {} SDK's commands.run(\"true\") against mcp-exec {listening}",
                r.package, r.version
            ),
            &r.sdk,
            &r.raw,
            if kind == "e2b" {
                "POST /exec of `/bin/bash -l -c true` (the SDK's argv), same server, interleaved"
            } else {
                "POST /exec of `/bin/sh -c true` (the SDK's argv), same server, interleaved"
            },
        ));
    }
    Ok(())
}
