//! Every front-end side by side (issue 26, Deliver 1's rtt row): one server
//! started with all of them on loopback (stdio, `--http`, `--sandboxd-grpc`,
//! `--envd`), and `execute`-of-`true` round trips over each, interleaved
//! sample by sample in one loop with the C baseline, so that a change of
//! load hits every one alike.
//!
//! Every side runs the same process, `/bin/sh -c true`: the MCP calls and
//! `POST /exec` send `{"command": "true"}` (run as `$SHELL -c`, and the
//! harness starts the server with `SHELL=/bin/sh`), sandboxd `Execute` sends
//! the argv `["/bin/sh", "-c", "true"]`, envd `Start` sends `cmd: "/bin/sh",
//! args: ["-c", "true"]`, and the baseline is `posix_spawn` + `waitpid` of
//! `/bin/sh -c true` straight from libc ([`crate::baseline::PosixSpawn`]). Like
//! with like: no side saves or pays a shell the others do not.
//!
//! The sides, each on a connection of its own held for the whole loop:
//!
//! - stdio: a blocking `execute` in a 2025-11-25 session, and `ping`;
//! - Streamable HTTP 2025-11-25: a session (`Mcp-Session-Id`) on one
//!   keep-alive connection, the same `execute`, and `ping`;
//! - Streamable HTTP 2026-07-28, stateless: no `initialize`, no session,
//!   the per-request `_meta` and the routing headers (`MCP-Protocol-Version`,
//!   `Mcp-Method`, `Mcp-Name`) on every request, on one keep-alive
//!   connection (a client would reuse it);
//! - `POST /exec`: the event stream, read to its `exit` event (keep-alive);
//! - sandboxd `Execute`: unary gRPC over h2c on one HTTP/2 connection (the
//!   minimal client below: h2 on a current-thread tokio runtime, the two
//!   messages encoded by hand);
//! - envd `process.Process/Start`: a Connect server stream over HTTP/1.1
//!   (keep-alive), read to its end-stream envelope.
//!
//! Each sample's time runs from the written request to the whole answer
//! read (for gRPC, from the request handed to h2 to its trailers: the
//! client's own HTTP/2 framing is in it, a few µs). Beside each the server's
//! own CPU time per call (its process CPU clock, all threads, not the job),
//! read between calls. A front-end the binary lacks (a build without the
//! `sandboxd` feature, an older binary without `--envd`) is dropped from
//! the launch and reported skipped with the server's reason. Timings are
//! never asserted; every answer is checked (state `success`, exit code 0).

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::baseline::PosixSpawn;
use crate::client::{self, Launch, Server};
use crate::http_client::Conn;
use crate::report::Figure;
use crate::scenarios::{CALL_TIMEOUT, expect_state};
use crate::stats::Samples;
use crate::{Error, Options};

/// The MCP revision of the stdio and legacy HTTP sessions.
const LEGACY: &str = "2025-11-25";
/// How long a launched server may take to print its addresses.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the server may take to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Calls of each side before the measured ones.
const WARMUP: usize = 3;
/// The gRPC method of [`Grpc::execute`].
const EXECUTE_PATH: &str = "/process.v1.ProcessService/Execute";

/// One network front-end: its flag, the name its `listening for` line
/// gives it, and the prefix of the server's refusal when it lacks it.
struct Listener {
    flag: &'static str,
    name: &'static str,
}

const LISTENERS: [Listener; 3] = [
    Listener {
        flag: "--http",
        name: "HTTP",
    },
    Listener {
        flag: "--sandboxd-grpc",
        name: "sandboxd gRPC",
    },
    Listener {
        flag: "--envd",
        name: "envd",
    },
];

/// The server with every front-end it has, and where each listens.
struct AllFronts {
    server: Server,
    /// By [`LISTENERS`] index: the bound address, or why it is absent.
    addrs: [Result<SocketAddr, String>; 3],
    _stderr: TempFile,
}

/// A file removed on drop.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Why the server refused `flag` at start-up, from its stderr: an unknown
/// argument (a binary older than the front-end) or a build without its
/// feature.
fn refusal(log: &str, flag: &str) -> Option<String> {
    let line = log.lines().find(|l| {
        l.contains(&format!("unknown argument \"{flag}\""))
            || (l.contains(&format!("({flag})")) && l.contains("built without"))
    })?;
    Some(line.trim().trim_start_matches("mcp-exec: ").to_owned())
}

/// The address in `mcp-exec: listening for NAME on ADDR`.
fn listening(log: &str, name: &str) -> Option<SocketAddr> {
    let prefix = format!("mcp-exec: listening for {name} on ");
    log.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|a| a.trim().parse().ok())
}

impl AllFronts {
    /// Starts `binary` with stdio and every listener on `127.0.0.1:0`; a
    /// listener the binary refuses is dropped (with its reason) and the
    /// server started again without it.
    fn launch(binary: &Path) -> Result<AllFronts, Error> {
        let mut absent: [Option<String>; 3] = [None, None, None];
        'attempts: for attempt in 0..=LISTENERS.len() {
            let stderr = TempFile(std::env::temp_dir().join(format!(
                "mcp-exec-bench-frontends-{}-{attempt}.log",
                std::process::id()
            )));
            let mut launch = Launch::default();
            for (l, gone) in LISTENERS.iter().zip(&absent) {
                if gone.is_none() {
                    launch
                        .args
                        .extend([l.flag.to_owned(), "127.0.0.1:0".to_owned()]);
                }
            }
            launch.stderr = Some(stderr.0.clone());
            // sandboxd's root must exist at start-up (the default, /workspace, may not).
            launch.env.push((
                "MCP_EXEC_SANDBOXD_ROOT",
                std::env::temp_dir().display().to_string(),
            ));
            let mut server = Server::launch(binary, &launch)?;
            let deadline = Instant::now() + LISTEN_TIMEOUT;
            loop {
                let log = std::fs::read_to_string(&stderr.0).unwrap_or_default();
                let bound: Vec<Option<SocketAddr>> =
                    LISTENERS.iter().map(|l| listening(&log, l.name)).collect();
                let all = bound
                    .iter()
                    .zip(&absent)
                    .all(|(b, gone)| b.is_some() || gone.is_some());
                if all {
                    let addrs = std::array::from_fn(|i| match (&absent[i], bound[i]) {
                        (Some(why), _) => Err(why.clone()),
                        (None, Some(a)) => Ok(a),
                        (None, None) => Err("no address printed".into()),
                    });
                    return Ok(AllFronts {
                        server,
                        addrs,
                        _stderr: stderr,
                    });
                }
                if let Some(code) = server.exit_code()? {
                    let refused = LISTENERS
                        .iter()
                        .enumerate()
                        .find_map(|(i, l)| refusal(&log, l.flag).map(|why| (i, why)));
                    match refused {
                        Some((i, why)) if absent[i].is_none() => {
                            eprintln!("bench: frontends: {} skipped: {why}", LISTENERS[i].flag);
                            absent[i] = Some(why);
                            continue 'attempts;
                        }
                        _ => {
                            let first = log.lines().next().unwrap_or("(nothing on stderr)");
                            return Err(Error(format!(
                                "frontends: the server exited with {code} before listening: {first}"
                            )));
                        }
                    }
                }
                if Instant::now() > deadline {
                    return Err(Error(format!(
                        "frontends: the server printed its addresses not within {LISTEN_TIMEOUT:?}"
                    )));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        Err(Error(
            "frontends: the server refused every listener and still did not start".into(),
        ))
    }
}

/// What the scenario measured (ms), each side's samples by [`Side`].
#[derive(Debug, Default)]
pub struct Frontends {
    /// Round trips, ms, by side.
    pub rtt: [Samples; SIDES],
    /// The server's CPU time per call, µs, by side (none for the baseline).
    pub cpu: [Samples; SIDES],
    /// Why a side was not measured, by side.
    pub skipped: [Option<String>; SIDES],
}

/// The sides of the loop, in the order of [`Frontends`]' arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// `posix_spawn` + `waitpid` of `/bin/sh -c true`.
    C = 0,
    /// `ping` over stdio.
    StdioPing,
    /// Blocking `execute` `true` over stdio.
    Stdio,
    /// `ping` in the HTTP 2025-11-25 session.
    HttpPing,
    /// `execute` `true` in that session.
    Http,
    /// `execute` `true` as a stateless 2026-07-28 request.
    Http2026,
    /// `POST /exec` of `true`.
    PostExec,
    /// sandboxd `Execute` of `/bin/sh -c true`.
    Grpc,
    /// envd `Start` of `/bin/sh -c true`.
    Envd,
}

/// How many sides there are.
pub const SIDES: usize = 9;

const ALL: [Side; SIDES] = [
    Side::C,
    Side::StdioPing,
    Side::Stdio,
    Side::HttpPing,
    Side::Http,
    Side::Http2026,
    Side::PostExec,
    Side::Grpc,
    Side::Envd,
];

impl Frontends {
    fn of(&self, side: Side) -> &Samples {
        &self.rtt[side as usize]
    }

    fn cpu_of(&self, side: Side) -> &Samples {
        &self.cpu[side as usize]
    }
}

/// The connections of every side.
struct Clients {
    spawn: PosixSpawn,
    http: Option<Conn>,
    modern: Option<Conn>,
    exec: Option<Conn>,
    grpc: Option<Grpc>,
    envd: Option<Conn>,
    /// The requests written as they are, made once.
    modern_request: Vec<u8>,
    exec_request: Vec<u8>,
    envd_request: Vec<u8>,
}

/// A request of `method path` with `headers` and `body`, head and body in
/// one buffer.
fn request(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut r = format!("POST {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut r = r.into_bytes();
    r.extend_from_slice(body);
    r
}

/// A Connect envelope of `msg` (flags 0).
fn envelope(msg: &Value) -> Vec<u8> {
    let json = msg.to_string().into_bytes();
    let mut b = vec![0u8];
    b.extend_from_slice(&u32::try_from(json.len()).unwrap_or(u32::MAX).to_be_bytes());
    b.extend_from_slice(&json);
    b
}

/// The envelopes of a Connect stream's body, each with its flags.
fn envelopes(mut body: &[u8]) -> Result<Vec<(u8, Value)>, Error> {
    let mut out = Vec::new();
    while !body.is_empty() {
        if body.len() < 5 {
            return Err(Error("envd: a truncated envelope".into()));
        }
        let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
        let msg = body
            .get(5..5 + len)
            .ok_or_else(|| Error("envd: a truncated envelope".into()))?;
        out.push((body[0], serde_json::from_slice(msg)?));
        body = &body[5 + len..];
    }
    Ok(out)
}

impl Clients {
    fn connect(fronts: &mut AllFronts) -> Result<Clients, Error> {
        let http = fronts.addrs[0].as_ref().ok().copied();
        let mut c = Clients {
            spawn: PosixSpawn::default(),
            http: None,
            modern: None,
            exec: None,
            grpc: None,
            envd: None,
            modern_request: Vec::new(),
            exec_request: Vec::new(),
            envd_request: Vec::new(),
        };
        if let Some(addr) = http {
            let mut legacy = Conn::open(addr)?;
            legacy.initialize(LEGACY)?;
            c.http = Some(legacy);
            c.modern = Some(Conn::open(addr)?);
            c.exec = Some(Conn::open(addr)?);
            let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities": {},
                              "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"}});
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                              "params": {"name": "execute", "arguments": {"command": "true"},
                                         "_meta": meta}});
            c.modern_request = request(
                addr,
                "/mcp",
                &[
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json, text/event-stream"),
                    ("MCP-Protocol-Version", "2026-07-28"),
                    ("Mcp-Method", "tools/call"),
                    ("Mcp-Name", "execute"),
                ],
                body.to_string().as_bytes(),
            );
            c.exec_request = request(
                addr,
                "/exec",
                &[
                    ("Content-Type", "application/json"),
                    ("Accept", "text/event-stream"),
                ],
                br#"{"command":"true"}"#,
            );
        }
        if let Ok(addr) = fronts.addrs[1] {
            c.grpc = Some(Grpc::connect(addr)?);
        }
        if let Ok(addr) = fronts.addrs[2] {
            c.envd = Some(Conn::open(addr)?);
            let msg = json!({"process": {"cmd": "/bin/sh", "args": ["-c", "true"]},
                             "stdin": false});
            c.envd_request = request(
                addr,
                "/process.Process/Start",
                &[
                    ("Content-Type", "application/connect+json"),
                    ("Connect-Protocol-Version", "1"),
                ],
                &envelope(&msg),
            );
        }
        Ok(c)
    }

    /// Why `side` cannot be measured here, if it cannot.
    fn missing(&self, side: Side, fronts: &AllFronts) -> Option<String> {
        let why = |i: usize| fronts.addrs[i].as_ref().err().cloned();
        match side {
            Side::C | Side::StdioPing | Side::Stdio => None,
            Side::HttpPing | Side::Http | Side::Http2026 | Side::PostExec => why(0),
            Side::Grpc => why(1),
            Side::Envd => why(2),
        }
    }

    /// One sample of `side`.
    fn sample(&mut self, side: Side, server: &mut Server) -> Result<Duration, Error> {
        let absent = || Error(format!("frontends: {side:?} has no connection"));
        match side {
            Side::C => self.spawn.run(),
            Side::StdioPing => crate::scenarios::ping(server),
            Side::Stdio => {
                let (took, result) =
                    server.tool("execute", json!({"command": "true"}), CALL_TIMEOUT)?;
                expect_state(&result, "success", "frontends stdio")?;
                Ok(took)
            }
            Side::HttpPing => self.http.as_mut().ok_or_else(absent)?.ping(),
            Side::Http => {
                crate::http::execute_true(self.http.as_mut().ok_or_else(absent)?, "frontends http")
            }
            Side::Http2026 => {
                let conn = self.modern.as_mut().ok_or_else(absent)?;
                let (took, r) = conn.exchange(&self.modern_request)?;
                let msg: Value = serde_json::from_slice(&r.body)?;
                let result = client::check_response(msg, 1)?;
                if r.status != 200 || result["resultType"] != "complete" {
                    return Err(Error(format!(
                        "frontends 2026-07-28: HTTP {} {result}",
                        r.status
                    )));
                }
                let job = client::tool_json(&result, "execute")?;
                expect_state(&job, "success", "frontends 2026-07-28")?;
                Ok(took)
            }
            Side::PostExec => {
                let conn = self.exec.as_mut().ok_or_else(absent)?;
                let (took, r) = conn.exchange(&self.exec_request)?;
                // The last event's data: the `exit` event.
                let exit: Value = serde_json::from_slice(&r.body)?;
                if r.status != 200 {
                    return Err(Error(format!("frontends POST /exec: HTTP {}", r.status)));
                }
                expect_state(&exit, "success", "frontends POST /exec")?;
                Ok(took)
            }
            Side::Grpc => self.grpc.as_mut().ok_or_else(absent)?.execute(),
            Side::Envd => {
                let conn = self.envd.as_mut().ok_or_else(absent)?;
                let (took, r) = conn.exchange(&self.envd_request)?;
                let events = envelopes(&r.body)?;
                let ended = events.iter().any(|(flags, m)| {
                    *flags == 0
                        && m["event"]["end"]["exited"] == true
                        && m["event"]["end"]["exitCode"].as_i64().unwrap_or(0) == 0
                });
                let last = events.last().map(|(f, m)| (*f, m.clone()));
                if r.status != 200 || !ended || last != Some((2, json!({}))) {
                    return Err(Error(format!(
                        "frontends envd Start: HTTP {}, events {events:?}",
                        r.status
                    )));
                }
                Ok(took)
            }
        }
    }
}

/// The scenario: `runs` rounds, each one sample of every side the server
/// has, round-robin (round `i` starts at side `i mod SIDES`, so no side
/// always follows the same one), after [`WARMUP`] rounds.
pub fn run(binary: &Path, runs: usize) -> Result<Frontends, Error> {
    let mut fronts = AllFronts::launch(binary)?;
    fronts.server.initialize(LEGACY, CALL_TIMEOUT)?;
    let mut clients = Clients::connect(&mut fronts)?;
    let mut out = Frontends::default();
    let sides: Vec<Side> = ALL
        .into_iter()
        .filter(|&s| match clients.missing(s, &fronts) {
            Some(why) => {
                out.skipped[s as usize] = Some(why);
                false
            }
            None => true,
        })
        .collect();
    for _ in 0..WARMUP {
        for &side in &sides {
            clients.sample(side, &mut fronts.server)?;
        }
    }
    for i in 0..runs {
        for j in 0..sides.len() {
            let side = sides[(i + j) % sides.len()];
            let cpu0 = fronts.server.cpu_time()?;
            let took = clients.sample(side, &mut fronts.server)?;
            let cpu1 = fronts.server.cpu_time()?;
            out.rtt[side as usize].push_ms(took);
            if side != Side::C {
                out.cpu[side as usize].push_us(cpu1.saturating_sub(cpu0));
            }
        }
    }
    drop(clients);
    fronts.server.terminate(STOP_TIMEOUT)?;
    Ok(out)
}

const C_BASELINE: &str = "posix_spawn+waitpid of /bin/sh -c true (libc, interleaved)";

/// The figures of `frontends`.
pub fn figures(
    o: &Options,
    runs: usize,
    binary: &Path,
    figures: &mut Vec<Figure>,
    notes: &mut Map<String, Value>,
) -> Result<(), Error> {
    if !o.wants("frontends") {
        return Ok(());
    }
    eprintln!(
        "bench: frontends ({runs} rounds, round-robin: posix_spawn, stdio ping + execute, \
         HTTP 2025-11-25 ping + execute, 2026-07-28 execute, POST /exec, sandboxd Execute, \
         envd Start; all /bin/sh -c true)"
    );
    let f = run(binary, runs)?;
    let c = f.of(Side::C);
    let stdio = f.of(Side::Stdio);
    let stdio_ping = f.of(Side::StdioPing).median();
    let http_ping = f.of(Side::HttpPing).median();
    figures.push(
        Figure::latency_vs(
            "frontends_stdio_net",
            "frontends: stdio blocking execute `true` ($SHELL -c, 2025-11-25) − median stdio ping",
            &stdio.shifted(-stdio_ping),
            c,
            C_BASELINE,
        )
        .with_ratio_target("median ≤ 1.2× C", 1.2),
    );
    figures.push(Figure::latency_vs(
        "frontends_stdio",
        "  stdio execute `true`, whole rtt",
        stdio,
        c,
        C_BASELINE,
    ));
    let skipped = |key: &'static str, label: &str, side: Side, target: &'static str| {
        let why = f.skipped[side as usize].clone().unwrap_or_default();
        Figure::skipped(key, format!("{label} (skipped: {why})"), "ms", target)
    };
    const HTTP_TARGET: &str = "median ≤ stdio rtt + 0.1 ms, p99 ≤ 2 ms";
    let stdio_median = stdio.median();
    let http_rows: [(&'static str, &str, Side); 3] = [
        (
            "frontends_http",
            "frontends: Streamable HTTP 2025-11-25, execute `true` ($SHELL -c) in a session, keep-alive",
            Side::Http,
        ),
        (
            "frontends_http_2026",
            "frontends: Streamable HTTP 2026-07-28 stateless (per-request _meta, routing headers), execute `true` ($SHELL -c), keep-alive",
            Side::Http2026,
        ),
        (
            "frontends_post_exec",
            "frontends: POST /exec {command: true} ($SHELL -c), event stream to its exit event, keep-alive",
            Side::PostExec,
        ),
    ];
    for (key, label, side) in http_rows {
        if f.skipped[side as usize].is_some() {
            figures.push(skipped(key, label, side, HTTP_TARGET));
            continue;
        }
        let s = f.of(side);
        let mut fig = Figure::latency_vs(
            key,
            format!("{label}: {:+.3} ms vs stdio", s.median() - stdio_median),
            s,
            c,
            C_BASELINE,
        );
        fig.target = HTTP_TARGET;
        fig.met = Some(s.median() <= stdio_median + 0.1 && s.p99() <= 2.0);
        figures.push(fig);
    }
    if f.skipped[Side::HttpPing as usize].is_none() {
        figures.push(Figure::latency_vs(
            "frontends_http_net",
            "  HTTP 2025-11-25 execute `true` − median HTTP ping",
            &f.of(Side::Http).shifted(-http_ping),
            c,
            C_BASELINE,
        ));
    }
    const PLATFORM_TARGET: &str = "median ≤ 1.5× POST /exec";
    let exec_median = f.of(Side::PostExec).median();
    let platform_rows: [(&'static str, &str, Side); 2] = [
        (
            "frontends_sandboxd",
            "frontends: sandboxd Execute [/bin/sh, -c, true] (gRPC, h2c, one connection)",
            Side::Grpc,
        ),
        (
            "frontends_envd",
            "frontends: envd process.Process/Start /bin/sh -c true (Connect stream, HTTP/1.1 keep-alive) to its end",
            Side::Envd,
        ),
    ];
    for (key, label, side) in platform_rows {
        if f.skipped[side as usize].is_some() {
            figures.push(skipped(key, label, side, PLATFORM_TARGET));
            continue;
        }
        let s = f.of(side);
        let vs_exec = s.median() / exec_median;
        let mut fig = Figure::latency_vs(
            key,
            format!("{label}: {vs_exec:.2}× POST /exec"),
            s,
            c,
            C_BASELINE,
        );
        fig.target = PLATFORM_TARGET;
        fig.met = Some(vs_exec <= 1.5);
        figures.push(fig);
    }
    for (key, label, side) in [
        (
            "frontends_c",
            "  the C baseline itself: posix_spawn+waitpid of /bin/sh -c true (its tail is the machine's)",
            Side::C,
        ),
        ("frontends_ping_stdio", "  ping over stdio", Side::StdioPing),
        (
            "frontends_ping_http",
            "  ping over HTTP (2025-11-25 session)",
            Side::HttpPing,
        ),
    ] {
        if f.skipped[side as usize].is_none() {
            figures.push(Figure::latency(key, label, f.of(side), None));
        }
    }
    let mut cpu = Map::new();
    for side in ALL.into_iter().filter(|&s| s != Side::C) {
        let s = f.cpu_of(side);
        if s.len() > 0 {
            cpu.insert(
                format!("{side:?}"),
                json!({"median_us": s.median(), "p90_us": s.p90()}),
            );
        }
    }
    for (key, side) in [
        ("frontends_cpu_stdio", Side::Stdio),
        ("frontends_cpu_http", Side::Http),
        ("frontends_cpu_http_2026", Side::Http2026),
        ("frontends_cpu_post_exec", Side::PostExec),
        ("frontends_cpu_sandboxd", Side::Grpc),
        ("frontends_cpu_envd", Side::Envd),
    ] {
        let s = f.cpu_of(side);
        if s.len() > 0 {
            figures.push(Figure::latency_in(
                key,
                format!("  server CPU per call, {side:?} (all its threads, not the job)"),
                "µs",
                s,
                None,
            ));
        }
    }
    notes.insert("frontends_cpu".into(), Value::Object(cpu));
    notes.insert(
        "frontends_skipped".into(),
        json!(
            ALL.iter()
                .filter_map(|&s| f.skipped[s as usize]
                    .as_ref()
                    .map(|why| (format!("{s:?}"), json!(why))))
                .collect::<Map<String, Value>>()
        ),
    );
    Ok(())
}

/// A minimal gRPC client of `ProcessService.Execute` over h2c: one HTTP/2
/// connection driven on a current-thread tokio runtime, which runs only
/// inside [`Grpc::execute`]'s `block_on` (the connection task with it).
struct Grpc {
    runtime: tokio::runtime::Runtime,
    sender: h2::client::SendRequest<bytes::Bytes>,
    uri: http_types::Uri,
    /// The framed `ExecuteRequest` of `/bin/sh -c true`.
    message: bytes::Bytes,
}

/// Appends a protobuf length-delimited field (`tag` with wire type 2).
fn field(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    out.push(tag << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// `ExecuteRequest{config: ProcessConfig{command: argv}}`, gRPC-framed
/// (uncompressed flag, big-endian length).
fn execute_request(argv: &[&str]) -> Vec<u8> {
    let mut config = Vec::new();
    for a in argv {
        field(&mut config, 1, a.as_bytes());
    }
    let mut msg = Vec::new();
    field(&mut msg, 1, &config);
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(msg.len()).unwrap_or(u32::MAX).to_be_bytes());
    framed.extend_from_slice(&msg);
    framed
}

/// The `exit_code` (field 1, varint) of an `ExecuteResponse`; its other
/// fields (stdout, stderr: length-delimited) are skipped.
fn exit_code(mut msg: &[u8]) -> Result<i64, Error> {
    let bad = || Error("sandboxd: a malformed ExecuteResponse".into());
    fn read_varint(b: &mut &[u8]) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = b.split_first()?;
            *b = rest;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }
    let mut code = 0;
    while !msg.is_empty() {
        let key = read_varint(&mut msg).ok_or_else(bad)?;
        match (key >> 3, key & 7) {
            (1, 0) => code = read_varint(&mut msg).ok_or_else(bad)? as i32 as i64,
            (_, 2) => {
                let len = read_varint(&mut msg).ok_or_else(bad)? as usize;
                msg = msg.get(len..).ok_or_else(bad)?;
            }
            (_, 0) => {
                read_varint(&mut msg).ok_or_else(bad)?;
            }
            _ => return Err(bad()),
        }
    }
    Ok(code)
}

fn h2_error(what: &'static str) -> impl Fn(h2::Error) -> Error {
    move |e| Error(format!("sandboxd gRPC: {what}: {e}"))
}

impl Grpc {
    fn connect(addr: SocketAddr) -> Result<Grpc, Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error(format!("sandboxd gRPC: a tokio runtime: {e}")))?;
        let sender = runtime.block_on(async {
            let tcp = tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| Error(format!("sandboxd gRPC: connecting to {addr}: {e}")))?;
            tcp.set_nodelay(true)
                .map_err(|e| Error(format!("sandboxd gRPC: TCP_NODELAY: {e}")))?;
            let (sender, connection) = h2::client::handshake(tcp)
                .await
                .map_err(h2_error("the HTTP/2 handshake"))?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok::<_, Error>(sender)
        })?;
        let uri = format!("http://{addr}{EXECUTE_PATH}")
            .parse()
            .map_err(|e| Error(format!("sandboxd gRPC: the URI: {e}")))?;
        Ok(Grpc {
            runtime,
            sender,
            uri,
            message: execute_request(&["/bin/sh", "-c", "true"]).into(),
        })
    }

    /// One `Execute`: its time (request handed to h2 → trailers read), after
    /// checking `grpc-status: 0` and exit code 0.
    fn execute(&mut self) -> Result<Duration, Error> {
        let request = http_types::Request::builder()
            .method("POST")
            .uri(self.uri.clone())
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .map_err(|e| Error(format!("sandboxd gRPC: a request: {e}")))?;
        let message = self.message.clone();
        let sender = self.sender.clone();
        let (took, body, trailers) = self.runtime.block_on(timed(async move {
            let mut sender = sender.ready().await.map_err(h2_error("ready"))?;
            let (response, mut stream) = sender
                .send_request(request, false)
                .map_err(h2_error("sending the request"))?;
            stream
                .send_data(message, true)
                .map_err(h2_error("sending the message"))?;
            let response = response.await.map_err(h2_error("the response"))?;
            if response.status() != 200 {
                return Err(Error(format!("sandboxd gRPC: HTTP {}", response.status())));
            }
            let mut body = response.into_body();
            let mut data = Vec::new();
            while let Some(chunk) = body.data().await {
                let chunk = chunk.map_err(h2_error("the body"))?;
                let _ = body.flow_control().release_capacity(chunk.len());
                data.extend_from_slice(&chunk);
            }
            let trailers = body
                .trailers()
                .await
                .map_err(h2_error("the trailers"))?
                .unwrap_or_default();
            Ok((data, trailers))
        }))?;
        let status = trailers.get("grpc-status").and_then(|v| v.to_str().ok());
        if status != Some("0") {
            return Err(Error(format!(
                "sandboxd Execute: grpc-status {status:?} ({:?})",
                trailers.get("grpc-message")
            )));
        }
        if body.len() < 5 {
            return Err(Error("sandboxd Execute: no response message".into()));
        }
        let code = exit_code(&body[5..])?;
        if code != 0 {
            return Err(Error(format!("sandboxd Execute: exit code {code}")));
        }
        Ok(took)
    }
}

/// Runs `f` and times it from its first poll.
async fn timed<T>(
    f: impl Future<Output = Result<(T, http_types::HeaderMap), Error>>,
) -> Result<(Duration, T, http_types::HeaderMap), Error> {
    let t0 = Instant::now();
    let (v, trailers) = f.await?;
    Ok((t0.elapsed(), v, trailers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_execute_request_is_the_argv_in_a_config_in_a_grpc_frame() {
        let framed = execute_request(&["sh", "-c"]);
        // config{command: "sh", command: "-c"} inside field 1.
        let msg = [0x0a, 8, 0x0a, 2, b's', b'h', 0x0a, 2, b'-', b'c'];
        assert_eq!(&framed[..5], &[0, 0, 0, 0, msg.len() as u8]);
        assert_eq!(&framed[5..], &msg);
    }

    #[test]
    fn the_exit_code_is_read_past_the_output_fields() {
        assert_eq!(exit_code(&[]).unwrap(), 0);
        // stdout "hi", exit_code 3, stderr "".
        assert_eq!(
            exit_code(&[0x12, 2, b'h', b'i', 0x08, 3, 0x1a, 0]).unwrap(),
            3
        );
        // exit_code -1: ten bytes of varint.
        let minus_one = [
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        assert_eq!(exit_code(&minus_one).unwrap(), -1);
        assert!(exit_code(&[0x12, 5, b'h']).is_err());
    }

    #[test]
    fn a_refused_front_end_is_recognised_with_its_reason() {
        let log = "mcp-exec: MCP_EXEC_SANDBOXD_GRPC (--sandboxd-grpc): this mcp-exec was built \
                   without the `sandboxd` feature\n";
        assert!(
            refusal(log, "--sandboxd-grpc")
                .unwrap()
                .contains("built without")
        );
        assert!(refusal(log, "--envd").is_none());
        let old = "mcp-exec: unknown argument \"--envd\"\n";
        assert!(refusal(old, "--envd").is_some());
    }

    #[test]
    fn connect_envelopes_are_split_with_their_flags() {
        let mut body = envelope(&json!({"a": 1}));
        body.extend([2, 0, 0, 0, 2, b'{', b'}']);
        let e = envelopes(&body).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e[0], (0, json!({"a": 1})));
        assert_eq!(e[1], (2, json!({})));
    }
}
