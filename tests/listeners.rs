//! Every listener stands on one floor (docs/security.md, "What every
//! listener guarantees"): the identity rule of a listener without a token;
//! a token holder served within 1 s while silent connections flood that
//! same listener; the first-byte and head deadlines; the one gate on every
//! route and its probe table; and HTTP/2 rapid-reset and SETTINGS floods
//! against sandboxd gRPC — for the MCP, metrics, envd, sandboxd REST and
//! sandboxd gRPC listeners alike, bare and as PID 1.

use std::io::{ErrorKind, Read, Write};
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
/// An HTTP/2 frame: its 9-byte header, then `payload`.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The client preface and an empty SETTINGS frame.
fn h2_preface() -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(h2_frame(4, 0, 0, &[]));
    out
}

/// The header block of a gRPC call of an unknown method, in HPACK literal
/// fields without indexing (no table, no Huffman).
fn grpc_call_block(token: Option<&str>) -> Vec<u8> {
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
    if let Some(t) = token {
        field("authorization", &format!("Bearer {t}"));
    }
    block
}

fn h2_served(port: u16, token: Option<&str>, within: Duration) -> Option<()> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(within)).ok()?;
    let block = grpc_call_block(token);
    let frame = h2_frame;
    let mut out = h2_preface();
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
/// A server with all five listeners on loopback (sandboxd gRPC with the
/// `sandboxd` feature), `token` set on all of them when given, and `env`;
/// each listener's name (its `listener` label) and port.
fn every_listener(
    t: Target,
    env: &[(&str, &str)],
    token: Option<&str>,
) -> (Server, HostPath, Vec<(&'static str, u16)>) {
    let dir = HostPath::new("listeners-root");
    std::fs::create_dir(&dir.0).unwrap();
    let mut env = env.to_vec();
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
    let mut ports = vec![
        ("mcp", bound_port(&server, "HTTP")),
        ("metrics", bound_port(&server, "metrics")),
        ("envd", bound_port(&server, "envd")),
        ("sandboxd-rest", bound_port(&server, "sandboxd REST")),
    ];
    if cfg!(feature = "sandboxd") {
        ports.push(("sandboxd-grpc", bound_port(&server, "sandboxd gRPC")));
    }
    (server, dir, ports)
}

fn flood_every_listener(t: Target, token: Option<&str>) {
    let (server, _dir, ports) =
        every_listener(t, &[("MCP_EXEC_HTTP_MAX_CONNECTIONS", "64")], token);
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let envd_token = token.map_or(String::new(), |t| format!("X-Access-Token: {t}\r\n"));
    let request = |name: &str| match name {
        "mcp" => format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n"),
        "metrics" => "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_owned(),
        "envd" => format!(
            "POST /process.Process/List HTTP/1.1\r\nHost: 127.0.0.1\r\n{envd_token}\
             Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
        ),
        "sandboxd-rest" => format!("GET /v1/metadata HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n"),
        _ => String::new(),
    };
    let listeners: Vec<(&str, u16, String)> = ports
        .iter()
        .map(|(name, port)| (*name, *port, request(name)))
        .collect();
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

/// Reads `s` until the server closes it (an end of file or a reset) and
/// says after how long; `None` if it is still open after `limit`. What
/// came before the close (a 408, a GOAWAY) is not looked at.
fn closed_after(mut s: TcpStream, limit: Duration) -> Option<Duration> {
    let begun = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(100))).ok()?;
    let mut buf = [0u8; 4096];
    while begun.elapsed() < limit {
        match s.read(&mut buf) {
            Ok(0) => return Some(begun.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Some(begun.elapsed()),
        }
    }
    None
}

/// One counter of `mcp_exec_http_connections_dropped_total` from the
/// metrics listener.
fn dropped(metrics_port: u16, listener: &str, reason: &str) -> u64 {
    let metrics = crate::support::http::request(
        metrics_port,
        "GET",
        "/metrics",
        &[],
        "",
        Duration::from_secs(5),
    )
    .expect("metrics");
    let needle = format!(
        "mcp_exec_http_connections_dropped_total{{listener=\"{listener}\",reason=\"{reason}\"}} "
    );
    metrics
        .body
        .lines()
        .find_map(|l| l.strip_prefix(needle.as_str()))
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

/// On each listener at once: a connection that sends nothing, and one that
/// sends half a request head (HTTP/2: the preface and SETTINGS, then no
/// stream). The first is closed at the 2 s first-byte deadline, the second
/// at the 10 s head deadline (HTTP/2: 10 s without a stream or a token),
/// each counted by its listener.
fn every_listener_closes_a_silent_connection_at_2_s_and_a_withheld_head_at_10_s(t: Target) {
    let (server, _dir, ports) = every_listener(t, &[], None);
    let closed: Vec<(&str, Option<Duration>, Option<Duration>)> = std::thread::scope(|scope| {
        let each: Vec<_> = ports
            .iter()
            .map(|&(name, port)| {
                scope.spawn(move || {
                    let silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
                    let mut half = TcpStream::connect(("127.0.0.1", port)).unwrap();
                    if name == "sandboxd-grpc" {
                        half.write_all(&h2_preface()).unwrap();
                    } else {
                        half.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                            .unwrap();
                    }
                    let silent =
                        std::thread::spawn(move || closed_after(silent, Duration::from_secs(8)));
                    let half = closed_after(half, Duration::from_secs(25));
                    (name, silent.join().unwrap(), half)
                })
            })
            .collect();
        each.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let metrics = ports[1].1;
    for (name, silent, half) in closed {
        let silent =
            silent.unwrap_or_else(|| panic!("{name}: a silent connection stayed open 8 s"));
        assert!(
            silent >= Duration::from_millis(1500),
            "{name}: a silent connection was closed after {silent:?}, before its 2 s"
        );
        let half =
            half.unwrap_or_else(|| panic!("{name}: a withheld head kept its connection 25 s"));
        assert!(
            half >= Duration::from_secs(8),
            "{name}: a withheld head was closed after {half:?}, before its 10 s"
        );
        assert!(
            dropped(metrics, name, "silent") >= 1,
            "{name}: the silent connection was not counted\n{}",
            server.stderr.lock().unwrap()
        );
    }
}

/// With the token set on every listener, every route of every HTTP/1.1
/// listener refuses a request without the token, with a wrong one, and with
/// the right one in the query (`401`); with it, the gate lets the request
/// through; and only the listed probe paths answer without it. (sandboxd
/// gRPC's token is proven through the official SDK in tests/sandboxd.rs.)
fn every_route_refuses_a_missing_a_wrong_and_a_query_token_and_only_the_probes_answer_without_one(
    t: Target,
) {
    let (_server, dir, ports) = every_listener(t, &[], Some(TOKEN));
    let port = |name: &str| ports.iter().find(|(n, _)| *n == name).unwrap().1;
    let put = format!("/files{}/auth", dir.0);
    let json = "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n";
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let routes: Vec<(&str, &str, &str, &str, &str)> = vec![
        // listener, method, path, extra headers, body
        ("mcp", "POST", "/mcp", json, ping),
        ("mcp", "POST", "/exec", json, r#"{"command":"true"}"#),
        ("mcp", "GET", "/files/tmp", "", ""),
        ("mcp", "PUT", &put, "", "x"),
        ("mcp", "GET", "/jobs/job-1/tty", "", ""),
        ("mcp", "GET", "/ports", "", ""),
        ("mcp", "GET", "/metrics", "", ""),
        (
            "envd",
            "POST",
            "/process.Process/List",
            "Content-Type: application/json\r\n",
            "{}",
        ),
        (
            "envd",
            "POST",
            "/filesystem.Filesystem/Stat",
            "Content-Type: application/json\r\n",
            r#"{"path":"/tmp"}"#,
        ),
        ("envd", "GET", "/files?path=/etc/hostname", "", ""),
        ("sandboxd-rest", "GET", "/v1/metadata", "", ""),
        ("sandboxd-rest", "GET", "/v1/files/x", "", ""),
        ("sandboxd-rest", "PUT", "/v1/files/x", "", "x"),
    ];
    let status = |name: &str, method: &str, path: &str, headers: &str, body: &str| {
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{headers}\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        http1_status(port(name), &request, Duration::from_secs(5))
    };
    for (name, method, path, extra, body) in &routes {
        let bearer = |t: &str| format!("{extra}Authorization: Bearer {t}\r\n");
        let own = |t: &str| format!("{extra}X-Access-Token: {t}\r\n");
        let sep = if path.contains('?') { '&' } else { '?' };
        let queried = format!("{path}{sep}token={TOKEN}&access_token={TOKEN}");
        let refused = [
            ("no token", status(name, method, path, extra, body)),
            (
                "a wrong bearer",
                status(name, method, path, &bearer("wrong"), body),
            ),
            (
                "a wrong X-Access-Token",
                status(name, method, path, &own("wrong"), body),
            ),
            (
                "the token in the query",
                status(name, method, &queried, extra, body),
            ),
        ];
        for (how, got) in refused {
            assert_eq!(got, Some(401), "{name} {method} {path} with {how}");
        }
        let passed = status(name, method, path, &bearer(TOKEN), body);
        assert!(
            passed.is_some_and(|s| s != 401),
            "{name} {method} {path} with the token: {passed:?}"
        );
    }
    let probes = [
        ("mcp", "/healthz"),
        ("mcp", "/livez"),
        ("metrics", "/metrics"),
        ("metrics", "/healthz"),
        ("metrics", "/livez"),
        ("envd", "/health"),
        ("sandboxd-rest", "/v1/health"),
    ];
    for (name, path) in probes {
        let got = status(name, "GET", path, "", "");
        assert!(
            got.is_some_and(|s| (200..300).contains(&s)),
            "{name} GET {path} without the token: {got:?}"
        );
    }
    // The metrics listener serves its probes and nothing else.
    let other = status("metrics", "GET", "/mcp", "", "");
    assert!(
        other.is_some_and(|s| s >= 400),
        "metrics GET /mcp: {other:?}"
    );
}

/// The probes that need no token keep the one gate's other rules on every
/// listener (loopback binds): a foreign `Host` and a foreign `Origin` are
/// `403`, two `Host` headers `400` — envd's `/health` as sandboxd's
/// `/v1/health` and the MCP and metrics listeners' `/healthz`.
fn every_probe_of_every_listener_refuses_a_foreign_host_a_foreign_origin_and_two_hosts(t: Target) {
    let (_server, _dir, ports) = every_listener(t, &[], Some(TOKEN));
    let port = |name: &str| ports.iter().find(|(n, _)| *n == name).unwrap().1;
    let probes = [
        ("mcp", "/healthz"),
        ("mcp", "/livez"),
        ("metrics", "/metrics"),
        ("metrics", "/healthz"),
        ("envd", "/health"),
        ("sandboxd-rest", "/v1/health"),
    ];
    for (name, path) in probes {
        let probe = |lines: &str| {
            let request = format!("GET {path} HTTP/1.1\r\n{lines}Connection: close\r\n\r\n");
            http1_status(port(name), &request, Duration::from_secs(5))
        };
        let cases = [
            ("the loopback Host", "Host: 127.0.0.1\r\n", 200),
            ("a foreign Host", "Host: evil.example\r\n", 403),
            (
                "a foreign Origin",
                "Host: 127.0.0.1\r\nOrigin: http://evil.example\r\n",
                403,
            ),
            (
                "two Host headers",
                "Host: 127.0.0.1\r\nHost: evil.example\r\n",
                400,
            ),
        ];
        for (how, lines, want) in cases {
            let got = probe(lines);
            let ok = if want == 200 {
                got.is_some_and(|s| (200..300).contains(&s))
            } else {
                got == Some(want)
            };
            assert!(ok, "{name} GET {path} with {how}: {got:?}, want {want}");
        }
    }
}

/// Sends `bytes` (a head and part of the body it declares) and reads
/// until the server closes the connection or `limit` passes: after how
/// long it closed (`None`: still open) and what came back.
fn withheld(port: u16, bytes: &[u8], limit: Duration) -> (Option<Duration>, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(bytes).unwrap();
    let begun = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while begun.elapsed() < limit {
        match s.read(&mut buf) {
            Ok(0) => return (Some(begun.elapsed()), got),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return (Some(begun.elapsed()), got),
        }
    }
    (None, got)
}

/// With `MCP_EXEC_HTTP_STALL_TIMEOUT=2`, every request body that stops
/// coming — a unary body (an MCP `POST /mcp`, `POST /exec`, an envd RPC and
/// an envd server-stream request, a sandboxd gRPC call) or a streamed
/// upload (`PUT /files`, envd's `POST /files`, `PUT /v1/files`) — is
/// answered with its protocol's deadline refusal and its connection closed
/// at 2 s, not at the 30 s default; and no upload leaves a file.
fn every_listener_releases_a_withheld_request_body_at_the_stall_timeout(t: Target) {
    let (server, dir, ports) = every_listener(t, &[("MCP_EXEC_HTTP_STALL_TIMEOUT", "2")], None);
    let port = |name: &str| ports.iter().find(|(n, _)| *n == name).unwrap().1;
    let head = |method: &str, path: &str, kind: &str| {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {kind}\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n"
        )
        .into_bytes()
    };
    let with = |mut head: Vec<u8>, part: &[u8]| {
        head.extend_from_slice(part);
        head
    };
    let json = "application/json";
    let upload = format!("{}/withheld", dir.0);
    // (listener, what, the bytes sent, what the answer must contain)
    let mut cases: Vec<(&str, &str, Vec<u8>, &str)> = vec![
        (
            "mcp",
            "POST /mcp",
            with(head("POST", "/mcp", json), b"{\"jsonrpc\""),
            "HTTP/1.1 408",
        ),
        (
            "mcp",
            "POST /exec",
            with(head("POST", "/exec", json), b"{\"command\""),
            "HTTP/1.1 408",
        ),
        (
            "mcp",
            "PUT /files",
            with(
                head(
                    "PUT",
                    &format!("/files{upload}-mcp"),
                    "application/octet-stream",
                ),
                b"x",
            ),
            "HTTP/1.1 408",
        ),
        (
            "envd",
            "a unary RPC",
            with(head("POST", "/filesystem.Filesystem/Stat", json), b"{"),
            "deadline_exceeded",
        ),
        (
            "envd",
            "a server-stream request",
            with(
                head("POST", "/process.Process/Start", "application/connect+json"),
                &[0, 0, 0, 0, 90, b'{'],
            ),
            "deadline_exceeded",
        ),
        (
            "envd",
            "POST /files",
            with(
                head(
                    "POST",
                    &format!("/files?path={upload}-envd"),
                    "application/octet-stream",
                ),
                b"x",
            ),
            "HTTP/1.1 408",
        ),
        (
            "sandboxd-rest",
            "PUT /v1/files",
            with(
                head("PUT", "/v1/files/withheld-rest", "application/octet-stream"),
                b"x",
            ),
            "HTTP/1.1 408",
        ),
    ];
    if cfg!(feature = "sandboxd") {
        // HEADERS without END_STREAM, then three bytes of a five-byte
        // message header: the call's body never ends.
        let mut call = h2_preface();
        call.extend(h2_frame(1, 0x4, 1, &grpc_call_block(None)));
        call.extend(h2_frame(0, 0, 1, &[0, 0, 0]));
        cases.push(("sandboxd-grpc", "a call", call, ""));
    }
    let answered: Vec<_> = std::thread::scope(|scope| {
        let each: Vec<_> = cases
            .iter()
            .map(|(name, what, bytes, _)| {
                let port = port(name);
                scope.spawn(move || {
                    if *name == "sandboxd-grpc" {
                        // The trailers (a HEADERS frame on stream 1) are the
                        // answer; the connection itself stays up.
                        let begun = Instant::now();
                        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
                        s.write_all(bytes).unwrap();
                        let got = h2_answer(&mut s, Duration::from_secs(10));
                        return (*what, got.map(|()| begun.elapsed()), Vec::new());
                    }
                    let (closed, got) = withheld(port, bytes, Duration::from_secs(10));
                    (*what, closed, got)
                })
            })
            .collect();
        each.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ((name, _, _, want), (what, closed, got)) in cases.iter().zip(answered) {
        let text = String::from_utf8_lossy(&got);
        let closed = closed.unwrap_or_else(|| {
            panic!("{name} {what}: a withheld body was not released in 10 s; got {text:?}")
        });
        assert!(
            closed >= Duration::from_millis(1500) && closed < Duration::from_secs(6),
            "{name} {what}: released after {closed:?}, not at the 2 s stall timeout; got {text:?}\n{}",
            server.stderr.lock().unwrap()
        );
        assert!(
            text.contains(want),
            "{name} {what}: the answer lacks {want:?}: {text:?}"
        );
    }
    for suffix in ["-mcp", "-envd"] {
        let path = format!("{upload}{suffix}");
        assert!(
            !std::path::Path::new(&path).exists(),
            "a withheld upload left {path}"
        );
    }
    let entries: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        entries.is_empty(),
        "withheld uploads left files in the root: {entries:?}"
    );
}

/// With `MCP_EXEC_HTTP_STALL_TIMEOUT=1`, a download (256 MiB, sparse)
/// whose client reads its status line and then nothing is cut off on every
/// listener that serves files — MCP `GET /files`, envd `GET /files`,
/// sandboxd `GET /v1/files`: drained 4 s later, the stream ends short of
/// the file, and a client asking for its first byte is served meanwhile.
fn every_listener_cuts_off_a_download_whose_client_stops_reading(t: Target) {
    let (_server, dir, ports) = every_listener(t, &[("MCP_EXEC_HTTP_STALL_TIMEOUT", "1")], None);
    let port = |name: &str| ports.iter().find(|(n, _)| *n == name).unwrap().1;
    let size = 256u64 << 20;
    let big = format!("{}/big", dir.0);
    std::fs::File::create(&big).unwrap().set_len(size).unwrap();
    let gets = [
        ("mcp", format!("/files{big}")),
        ("envd", format!("/files?path={big}")),
        ("sandboxd-rest", "/v1/files/big".to_owned()),
    ];
    let stalled: Vec<(&str, TcpStream)> = gets
        .iter()
        .map(|(name, path)| {
            let mut c = TcpStream::connect(("127.0.0.1", port(name))).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            write!(c, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
            let mut status = [0u8; 12];
            c.read_exact(&mut status).unwrap();
            assert_eq!(&status, b"HTTP/1.1 200", "{name} GET {path}");
            (*name, c)
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    for (name, path) in &gets {
        let first = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=0-0\r\n\r\n");
        assert_eq!(
            http1_status(port(name), &first, Duration::from_secs(2)),
            Some(206),
            "{name}: a client that reads was not served beside a stalled download"
        );
    }
    std::thread::sleep(Duration::from_millis(3500));
    for (name, mut c) in stalled {
        let (ended, got) = crate::support::http::drain(&mut c);
        assert!(
            ended,
            "{name}: the download was still open after {got} bytes"
        );
        assert!(
            got < size,
            "{name}: the whole file arrived: the stall was not cut"
        );
    }
}

/// Reads HTTP/2 frames from `s` until a HEADERS frame on stream 1 (the
/// answer) comes, or `within` passes.
fn h2_answer(s: &mut TcpStream, within: Duration) -> Option<()> {
    s.set_read_timeout(Some(Duration::from_millis(100))).ok()?;
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return None,
        }
        let mut at = 0;
        while got.len() >= at + 9 {
            let len = u32::from_be_bytes([0, got[at], got[at + 1], got[at + 2]]) as usize;
            let stream = u32::from_be_bytes([got[at + 5], got[at + 6], got[at + 7], got[at + 8]])
                & 0x7fff_ffff;
            if got[at + 3] == 1 && stream == 1 {
                return Some(());
            }
            at += 9 + len;
        }
    }
    None
}

/// The resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// sandboxd gRPC under two HTTP/2 floods at once — rapid reset (2,000
/// HEADERS each cancelled at once by RST_STREAM, on each of 3 connections)
/// and a SETTINGS flood (20,000 frames never acknowledged as read): 10
/// calls sent meanwhile are each answered within 1 s, and the server's
/// resident memory grows by less than 32 MiB.
fn sandboxd_grpc_serves_calls_within_1_s_through_a_rapid_reset_and_a_settings_flood(t: Target) {
    if !cfg!(feature = "sandboxd") {
        return;
    }
    let (server, _dir, ports) = every_listener(t, &[], None);
    let port = ports.iter().find(|(n, _)| *n == "sandboxd-grpc").unwrap().1;
    let pid = server.server_host_pid().expect("the server's pid");
    assert!(
        h2_served(port, None, Duration::from_secs(5)).is_some(),
        "a first call"
    );
    let before = rss_kib(pid);
    let block = grpc_call_block(None);
    let flood = |bytes: Vec<u8>| {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
            return;
        };
        s.set_write_timeout(Some(Duration::from_secs(2))).ok();
        // The server may stop reading or close: the flood then ends.
        for chunk in bytes.chunks(16 << 10) {
            if s.write_all(chunk).is_err() {
                break;
            }
        }
    };
    let mut resets = h2_preface();
    for i in 0..2000u32 {
        let stream = 2 * i + 1;
        resets.extend(h2_frame(1, 0x4, stream, &block)); // HEADERS, END_HEADERS
        resets.extend(h2_frame(3, 0, stream, &8u32.to_be_bytes())); // RST_STREAM CANCEL
    }
    let mut settings = h2_preface();
    for _ in 0..20_000 {
        settings.extend(h2_frame(4, 0, 0, &[0, 4, 0, 0, 0xff, 0xff])); // INITIAL_WINDOW_SIZE
    }
    let served: Vec<Option<Duration>> = std::thread::scope(|scope| {
        for _ in 0..3 {
            let resets = resets.clone();
            scope.spawn(move || flood(resets));
        }
        scope.spawn(|| flood(settings.clone()));
        std::thread::sleep(Duration::from_millis(100));
        let calls: Vec<_> = (0..10)
            .map(|_| {
                scope.spawn(|| {
                    let begun = Instant::now();
                    h2_served(port, None, Duration::from_secs(1)).map(|()| begun.elapsed())
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let late: Vec<_> = served
        .iter()
        .filter(|s| !s.is_some_and(|d| d <= Duration::from_secs(1)))
        .collect();
    assert!(late.is_empty(), "calls not answered within 1 s: {served:?}");
    let after = rss_kib(pid);
    assert!(
        after < before + 32 * 1024,
        "the floods took the server from {before} KiB to {after} KiB"
    );
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
    every_listener_closes_a_silent_connection_at_2_s_and_a_withheld_head_at_10_s,
    every_route_refuses_a_missing_a_wrong_and_a_query_token_and_only_the_probes_answer_without_one,
    sandboxd_grpc_serves_calls_within_1_s_through_a_rapid_reset_and_a_settings_flood,
    every_listener_releases_a_withheld_request_body_at_the_stall_timeout,
    every_listener_cuts_off_a_download_whose_client_stops_reading,
    every_probe_of_every_listener_refuses_a_foreign_host_a_foreign_origin_and_two_hosts,
);
