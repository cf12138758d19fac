//! Every listener stands on one floor (docs/security.md, "What every
//! listener guarantees"): the identity rule of a listener without a token,
//! and a token holder served within 1 s while silent connections flood that
//! same listener — for the MCP, metrics, envd, sandboxd REST and sandboxd
//! gRPC listeners alike, bare and as PID 1.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::http::bound_port;
use crate::support::{HostPath, LATEST, Server, Target, tool_json};

fn root() -> bool {
    rustix::process::geteuid().is_root()
}

/// What a job runs to reach a listener: `kind` `envd` starts
/// `touch MARKER` through envd's `Start`, `rest` writes the file `MARKER`
/// (relative to the sandboxd root) through sandboxd REST, `grpc` sends the
/// HTTP/2 preface; each prints what came back.
const REACH: &str = r#"
import json, socket, struct, sys
port, kind, marker = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.create_connection(("127.0.0.1", port), timeout=5)
if kind == "envd":
    msg = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", "touch " + marker]}}).encode()
    body = struct.pack(">BI", 0, len(msg)) + msg
    head = ("POST /process.Process/Start HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Content-Type: application/connect+json\r\nConnection: close\r\n"
            "Content-Length: %d\r\n\r\n" % len(body))
    s.sendall(head.encode() + body)
elif kind == "rest":
    s.sendall(("PUT /v1/files/%s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
               "Content-Length: 1\r\n\r\nx" % marker).encode())
else:
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
s.settimeout(2)
out = b""
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
except socket.timeout:
    pass
print(out.decode("latin-1"))
"#;

/// The refusal's words, in every protocol.
const REFUSED: &str = "serves no local process of another user";

fn a_job_running_as_nobody_cannot_act_as_the_root_server_through_a_listener_without_a_token(
    t: Target,
) {
    if !crate::support::require(
        if root() {
            Ok(())
        } else {
            Err("not root".into())
        },
        "root (a job as nobody)",
    ) {
        return;
    }
    // A directory only root may write: the sandboxd root, and where envd's
    // process would touch its marker.
    let dir = HostPath::new("identity");
    std::fs::create_dir(&dir.0).unwrap();
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    let script = HostPath::new("identity-reach.py");
    std::fs::write(&script.0, REACH).unwrap();
    std::fs::set_permissions(&script.0, std::fs::Permissions::from_mode(0o644)).unwrap();

    let mut args = vec![
        "--envd",
        "127.0.0.1:0",
        "--sandboxd-rest",
        "127.0.0.1:0",
        "--sandboxd-root",
        &dir.0,
    ];
    if cfg!(feature = "sandboxd") {
        args.extend(["--sandboxd-grpc", "127.0.0.1:0"]);
    }
    let mut server = Server::start_with_cli(t, &[], &args);
    server.initialize(LATEST);
    let mut kinds = vec![
        ("envd", bound_port(&server, "envd")),
        ("rest", bound_port(&server, "sandboxd REST")),
    ];
    if cfg!(feature = "sandboxd") {
        kinds.push(("grpc", bound_port(&server, "sandboxd gRPC")));
    }
    let mut reach = |user: Option<&str>, kind: &str, port: u16, marker: &str| {
        let mut args = json!({
            "argv": ["python3", script.0, port.to_string(), kind, marker],
            "cwd": "/tmp",
            "timeout": 30,
        });
        if let Some(user) = user {
            args["user"] = json!(user);
        }
        let r = tool_json(&server.call_result("execute", args));
        let out = r["stdout"]["data"].as_str().unwrap_or_default().to_owned();
        format!(
            "{out}\n{}",
            r["stderr"]["data"].as_str().unwrap_or_default()
        )
    };
    for (kind, port) in &kinds {
        let marker = format!("{}/by-nobody-{kind}", dir.0);
        let relative = format!("by-nobody-{kind}");
        let target = if *kind == "rest" { &relative } else { &marker };
        let out = reach(Some("nobody"), kind, *port, target);
        assert!(
            out.contains(REFUSED),
            "{kind}: a nobody job was not refused: {out:?}"
        );
        if *kind != "grpc" {
            assert!(out.starts_with("HTTP/1.1 403"), "{kind}: {out:?}");
        }
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !std::path::Path::new(&marker).exists(),
            "{kind}: the nobody job acted as root: {marker} exists"
        );
        // The same call from a root job is served: the listener works, and
        // only the peer's uid made the difference.
        let marker = format!("{}/by-root-{kind}", dir.0);
        let relative = format!("by-root-{kind}");
        let target = if *kind == "rest" { &relative } else { &marker };
        let out = reach(None, kind, *port, target);
        assert!(
            !out.contains(REFUSED),
            "{kind}: a root job was refused: {out:?}"
        );
        if *kind != "grpc" {
            assert!(
                crate::support::wait_for(Duration::from_secs(5), || std::path::Path::new(&marker)
                    .exists()),
                "{kind}: the root job's call did not act: {out:?}"
            );
        }
    }
}

/// A client that holds `n` silent connections to `port`, replaced by fresh
/// ones every 0.3 s, until `stop` is set. Each batch is held longer than the
/// server's grace for a silent connection (0.25 s), so the next batch finds
/// a table full of connections old enough to evict.
fn flood(port: u16, n: usize, stop: &AtomicBool) {
    let mut held: Vec<TcpStream> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let fresh: Vec<TcpStream> = (0..n)
            .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
            .collect();
        held = fresh;
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(held);
}

/// One complete request, sent at once: HTTP/1.1 `request` and the status
/// line's code; `None` when nothing whole came back.
fn http1_status(port: u16, request: &str, within: Duration) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(within)).ok()?;
    s.write_all(request.as_bytes()).ok()?;
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).ok()?;
    let head = String::from_utf8_lossy(&buf[..n]).into_owned();
    head.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// An HTTP/2 gRPC call of an unknown method, sent at once (preface,
/// SETTINGS, HEADERS of literal fields, an empty message); `Some` when a
/// HEADERS frame for the stream comes back (the call was served).
fn h2_served(port: u16, token: Option<&str>, within: Duration) -> Option<()> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(within)).ok()?;
    let mut block = Vec::new();
    let mut field = |name: &str, value: &str| {
        block.push(0u8);
        block.push(name.len() as u8);
        block.extend_from_slice(name.as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    };
    field(":method", "POST");
    field(":scheme", "http");
    field(":path", "/process.v1.ProcessService/NoSuchMethod");
    field(":authority", "127.0.0.1");
    field("content-type", "application/grpc");
    field("te", "trailers");
    let bearer = token.map(|t| format!("Bearer {t}"));
    if let Some(b) = &bearer {
        field("authorization", b);
    }
    let frame = |kind: u8, flags: u8, stream: u32, payload: &[u8]| {
        let len = (payload.len() as u32).to_be_bytes();
        let mut f = vec![len[1], len[2], len[3], kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    };
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(4, 0, 0, &[]));
    out.extend(frame(1, 0x4, 1, &block)); // HEADERS, END_HEADERS
    out.extend(frame(0, 0x1, 1, &[0, 0, 0, 0, 0])); // DATA, END_STREAM
    s.write_all(&out).ok()?;
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
        let mut at = 0;
        while got.len() >= at + 9 {
            let len = u32::from_be_bytes([0, got[at], got[at + 1], got[at + 2]]) as usize;
            let kind = got[at + 3];
            let stream = u32::from_be_bytes([got[at + 5], got[at + 6], got[at + 7], got[at + 8]])
                & 0x7fff_ffff;
            if kind == 1 && stream == 1 {
                return Some(());
            }
            at += 9 + len;
        }
    }
    None
}

const TOKEN: &str = "listeners-test-token-0123456789";

/// A flood of silent connections (256 every 0.3 s, from 0.8 s before the
/// clients until they are all answered) on each listener in turn, with the
/// cap at 64, while 20 clients each send one complete request to that
/// listener at once: each is answered within 1 s.
fn flood_every_listener(t: Target, token: Option<&str>) {
    let dir = HostPath::new("flood-root");
    std::fs::create_dir(&dir.0).unwrap();
    let mut env = vec![("MCP_EXEC_HTTP_MAX_CONNECTIONS", "64")];
    if let Some(token) = token {
        env.push(("MCP_EXEC_HTTP_TOKEN", token));
    }
    let mut args = vec![
        "--http",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
        "--envd",
        "127.0.0.1:0",
        "--sandboxd-rest",
        "127.0.0.1:0",
        "--sandboxd-root",
        &dir.0,
    ];
    if cfg!(feature = "sandboxd") {
        args.extend(["--sandboxd-grpc", "127.0.0.1:0"]);
    }
    let server = Server::start_with_cli(t, &env, &args);
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let envd_token = token.map_or(String::new(), |t| format!("X-Access-Token: {t}\r\n"));
    let mut listeners: Vec<(&str, u16, String)> = vec![
        (
            "mcp",
            bound_port(&server, "HTTP"),
            format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n"),
        ),
        (
            "metrics",
            bound_port(&server, "metrics"),
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_owned(),
        ),
        (
            "envd",
            bound_port(&server, "envd"),
            format!(
                "POST /process.Process/List HTTP/1.1\r\nHost: 127.0.0.1\r\n{envd_token}\
                 Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
            ),
        ),
        (
            "sandboxd-rest",
            bound_port(&server, "sandboxd REST"),
            format!("GET /v1/metadata HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n"),
        ),
    ];
    if cfg!(feature = "sandboxd") {
        listeners.push((
            "sandboxd-grpc",
            bound_port(&server, "sandboxd gRPC"),
            String::new(),
        ));
    }
    for (name, port, request) in &listeners {
        let stop = AtomicBool::new(false);
        let served: Vec<Result<Duration, String>> = std::thread::scope(|scope| {
            let flooder = scope.spawn(|| flood(*port, 256, &stop));
            // Let the flood fill the table and evict its own first batch
            // (256 > the cap of 64; the second batch comes at 0.3 s).
            std::thread::sleep(Duration::from_millis(800));
            let clients: Vec<_> = (0..20)
                .map(|_| {
                    scope.spawn(|| {
                        let begun = Instant::now();
                        let within = Duration::from_secs(1);
                        let ok = if *name == "sandboxd-grpc" {
                            h2_served(*port, token, within).is_some()
                        } else {
                            http1_status(*port, request, within) == Some(200)
                        };
                        let took = begun.elapsed();
                        if ok && took <= within {
                            Ok(took)
                        } else {
                            Err(format!("served: {ok}, after {took:?}"))
                        }
                    })
                })
                .collect();
            let served = clients
                .into_iter()
                .map(|c| c.join().expect("a client"))
                .collect();
            // The flood lasts as long as its clients, not a fixed time.
            stop.store(true, Ordering::Relaxed);
            flooder.join().expect("the flood");
            served
        });
        // The flood did fill this listener's table: its silent connections
        // were evicted for newcomers.
        let metrics = crate::support::http::request(
            listeners[0].1,
            "GET",
            "/metrics",
            &token
                .map(|t| ("Authorization", format!("Bearer {t}")))
                .iter()
                .map(|(k, v)| (*k, v.as_str()))
                .collect::<Vec<_>>(),
            "",
            Duration::from_secs(5),
        )
        .expect("metrics");
        let needle = format!(
            "mcp_exec_http_connections_dropped_total{{listener=\"{name}\",reason=\"evicted\"}} "
        );
        let evicted: u64 = metrics
            .body
            .lines()
            .find_map(|l| l.strip_prefix(needle.as_str()))
            .map_or(0, |n| n.trim().parse().expect("a count"));
        assert!(
            evicted > 0,
            "{name}: the flood evicted nothing:\n{}",
            metrics.body
        );
        let late: Vec<_> = served.iter().filter(|r| r.is_err()).collect();
        assert!(
            late.is_empty(),
            "{name} (token {}): clients not served within 1 s under a flood: {late:?}\n{}",
            token.is_some(),
            server.stderr.lock().unwrap()
        );
    }
}

fn under_a_silent_flood_of_any_listener_20_clients_are_each_served_within_1_s(t: Target) {
    flood_every_listener(t, None);
}

fn with_the_token_set_under_a_silent_flood_of_any_listener_20_token_holders_are_served_within_1_s(
    t: Target,
) {
    flood_every_listener(t, Some(TOKEN));
}

macro_rules! hosts {
    ($($name:ident),* $(,)?) => {
        mod bare { $( #[test] fn $name() { if crate::support::Target::Bare.available() { super::$name(crate::support::Target::Bare) } } )* }
        mod pid1 { $( #[test] fn $name() { if crate::support::Target::Pid1.available() { super::$name(crate::support::Target::Pid1) } } )* }
    };
}

hosts!(
    a_job_running_as_nobody_cannot_act_as_the_root_server_through_a_listener_without_a_token,
    under_a_silent_flood_of_any_listener_20_clients_are_each_served_within_1_s,
    with_the_token_set_under_a_silent_flood_of_any_listener_20_token_holders_are_served_within_1_s,
);
