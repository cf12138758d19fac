//! Ports and previews (docs/http.md): `GET /ports`, the `ports` field of
//! `status` and `list_jobs`, `wait` until a port, and the `/ports/<n>/`
//! proxy. The listeners are jobs running interop/python/ports_upstream.py
//! with the interop venv's python (which has `websockets`; missing here →
//! skipped, in CI → failure); the WebSocket client is
//! interop/python/ws_client.py, as in tests/http/tty.rs. Loopback only;
//! every job is killed when its server ends (the `Both` drop).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::{Both, http};
use crate::support::{LATEST, TIMEOUT, Target};

const TOKEN: &str = "ports-test-token";
const AUTH: &str = "Bearer ports-test-token";

/// The interop venv's python; `None` (skip) when it is missing here.
fn python() -> Option<&'static str> {
    crate::support::venv_python(
        concat!(env!("CARGO_MANIFEST_DIR"), "/interop/.venv/bin/python"),
        "websockets.sync.server",
        "the interop venv's python",
        "--install-python",
    )
}

const UPSTREAM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/interop/python/ports_upstream.py"
);

/// A server with a token, its stdio session initialized; `None` to skip.
fn server(t: Target) -> Option<(Both, &'static str)> {
    let python = python()?;
    let mut s = Both::start(t, &[("MCP_EXEC_HTTP_TOKEN", TOKEN)], &[]);
    s.stdio.initialize(LATEST);
    Some((s, python))
}

/// Starts `ports_upstream.py <args>` as a job and returns its id and the
/// first line it printed.
fn upstream(s: &mut Both, python: &str, args: &str) -> (String, String) {
    let id = s
        .stdio
        .spawn_job(&format!("exec {python} {UPSTREAM} {args}"));
    let w = s.stdio.call(
        "wait",
        json!({"job_ids": [id], "timeout": TIMEOUT.as_secs(), "until": {"pattern": "\n"}}),
    );
    assert!(w[0].get("matched").is_some(), "{id} printed no line: {w}");
    let out = s
        .stdio
        .call("output", json!({"job_id": id, "stdout": "all"}));
    let line = out["stdout"]["data"].as_str().unwrap().trim().to_owned();
    (id, line)
}

/// The port of an upstream that printed `listening PORT`.
fn listening(line: &str) -> u16 {
    line.strip_prefix("listening ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("not a listening line: {line:?}"))
}

fn ports(s: &Both) -> Vec<Value> {
    let r = http(s.port, "GET", "/ports", &[("Authorization", AUTH)], "");
    assert_eq!(r.status, 200, "{r:?}");
    r.json()["ports"].as_array().unwrap().clone()
}

fn twenty_listeners_across_ten_jobs_are_each_attributed_to_their_job_and_process(t: Target) {
    let Some((mut s, python)) = server(t) else {
        return;
    };
    // Each job: two sockets, one on 0.0.0.0 and one on 127.0.0.1.
    let mut expected = Vec::new();
    for _ in 0..10 {
        let (id, line) = upstream(&mut s, python, "listen 2");
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some("pid"), "{line}");
        let pid: i64 = words.next().unwrap().parse().unwrap();
        assert_eq!(words.next(), Some("ports"), "{line}");
        for p in words {
            let (port, addr) = p.split_once('/').unwrap();
            expected.push((
                id.clone(),
                pid,
                port.parse::<u64>().unwrap(),
                addr.to_owned(),
            ));
        }
    }
    assert_eq!(expected.len(), 20);
    let listed = ports(&s);
    for (id, pid, port, addr) in &expected {
        let entry = listed
            .iter()
            .find(|p| p["port"] == json!(port) && p["proto"] == json!("tcp"))
            .unwrap_or_else(|| panic!("port {port} of {id} is not listed: {listed:?}"));
        assert_eq!(entry["job_id"], json!(id), "{entry}");
        assert_eq!(entry["pid"], json!(pid), "{entry}");
        assert_eq!(entry["addr"], json!(addr), "{entry}");
        assert_eq!(
            entry["loopback_only"],
            json!(addr == "127.0.0.1"),
            "{entry}"
        );
    }
    // The server's own listener is not listed.
    assert!(
        !listed.iter().any(|p| p["port"] == json!(s.port)),
        "the server's own port {} is listed: {listed:?}",
        s.port
    );
    // `status` and `list_jobs` carry each job's ports.
    let (first, _, port, _) = &expected[0];
    let st = s.stdio.call("status", json!({"job_id": first}));
    let mine: Vec<u64> = st["ports"]
        .as_array()
        .unwrap_or_else(|| panic!("no ports on {st}"))
        .iter()
        .map(|p| p["port"].as_u64().unwrap())
        .collect();
    assert_eq!(mine.len(), 2, "{st}");
    assert!(mine.contains(port), "{st}");
    let list = s.stdio.call("list_jobs", json!({}));
    for j in list["jobs"].as_array().unwrap() {
        assert_eq!(j["ports"].as_array().map(Vec::len), Some(2), "{j}");
    }
    // A job that listens on nothing has no `ports`.
    let quiet = s.stdio.spawn_job("sleep 30");
    let st = s.stdio.call("status", json!({"job_id": quiet}));
    assert!(st.get("ports").is_none(), "{st}");
}

fn wait_until_port_returns_when_the_job_listens_and_not_before(t: Target) {
    let Some((mut s, python)) = server(t) else {
        return;
    };
    // A free port, then a job that listens on it only after its gate file
    // exists.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let gate =
        std::env::temp_dir().join(format!("mcp-exec-ports-gate-{}-{port}", std::process::id()));
    let _ = std::fs::remove_file(&gate);
    let id = s.stdio.spawn_job(&format!(
        "while [ ! -e {g} ]; do sleep 0.01; done; exec {python} {UPSTREAM} at {port}",
        g = gate.display()
    ));
    // Not listening yet: a short wait ends at its timeout, untriggered.
    let w = s.stdio.call(
        "wait",
        json!({"job_ids": [id], "timeout": 0.3, "until": {"port": port}}),
    );
    assert_eq!(w[0]["state"], json!("running"), "{w}");
    assert!(w[0].get("ports").is_none(), "{w}");
    std::fs::write(&gate, b"").unwrap();
    let w = s.stdio.call(
        "wait",
        json!({"job_ids": [id], "timeout": TIMEOUT.as_secs(), "until": {"port": port}}),
    );
    let _ = std::fs::remove_file(&gate);
    let listed = w[0]["ports"]
        .as_array()
        .unwrap_or_else(|| panic!("the wait ended without the port: {w}"));
    assert!(
        listed
            .iter()
            .any(|p| p["port"] == json!(port) && p["job_id"] == json!(id)),
        "{w}"
    );
    assert_eq!(w[0]["state"], json!("running"), "{w}");
    // A bad port is invalid arguments.
    let e = s
        .stdio
        .call_err("wait", json!({"job_ids": [id], "until": {"port": 70000}}));
    assert!(e.contains("until.port"), "{e}");
}

fn the_proxy_forwards_get_and_post_with_bodies_strips_the_token_and_needs_it(t: Target) {
    let Some((mut s, python)) = server(t) else {
        return;
    };
    let (_, line) = upstream(&mut s, python, "http");
    let port = listening(&line);
    let r = http(
        s.port,
        "GET",
        &format!("/ports/{port}/echo/a?b=c"),
        &[("Authorization", AUTH), ("X-Custom", "kept")],
        "",
    );
    assert_eq!(r.status, 200, "{r:?}");
    let echo = r.json();
    assert_eq!(echo["method"], json!("GET"), "{echo}");
    assert_eq!(echo["path"], json!("/echo/a?b=c"), "{echo}");
    assert_eq!(echo["headers"]["x-custom"], json!("kept"), "{echo}");
    assert!(
        echo["headers"].get("authorization").is_none(),
        "the token was forwarded: {echo}"
    );
    assert_eq!(
        echo["headers"]["x-forwarded-prefix"],
        json!(format!("/ports/{port}")),
        "{echo}"
    );
    let body = "a body of some length ".repeat(1000);
    let r = http(
        s.port,
        "POST",
        &format!("/ports/{port}/echo"),
        &[("Authorization", AUTH), ("Content-Type", "text/plain")],
        &body,
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.json()["body"], json!(body));
    // Without the token, or with a wrong one: 401, nothing forwarded.
    for headers in [vec![], vec![("Authorization", "Bearer wrong")]] {
        let r = http(s.port, "GET", &format!("/ports/{port}/echo"), &headers, "");
        assert_eq!(r.status, 401, "{headers:?}: {r:?}");
        let r = http(s.port, "GET", "/ports", &headers, "");
        assert_eq!(r.status, 401, "{headers:?}: {r:?}");
    }
    // A large answer arrives whole.
    let r = http(
        s.port,
        "GET",
        &format!("/ports/{port}/big?n=3000000"),
        &[("Authorization", AUTH)],
        "",
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 3_000_000);
}

fn the_proxy_streams_an_answer_before_the_target_has_finished_it(t: Target) {
    let Some((mut s, python)) = server(t) else {
        return;
    };
    let (_, line) = upstream(&mut s, python, "http");
    let port = listening(&line);
    let gate = std::env::temp_dir().join(format!(
        "mcp-exec-ports-stream-{}-{port}",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&gate);
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(TIMEOUT)).unwrap();
    write!(
        c,
        "GET /ports/{port}/stream?gate={} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: {AUTH}\r\nConnection: close\r\n\r\n",
        gate.display(),
        s.port
    )
    .unwrap();
    // "first" arrives while the target still waits for the gate.
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("first") {
        let n = c.read(&mut buf).expect("the first chunk before the gate");
        assert!(
            n > 0,
            "closed before the first chunk: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    assert!(!String::from_utf8_lossy(&got).contains("second"));
    std::fs::write(&gate, b"").unwrap();
    c.read_to_end(&mut got).unwrap();
    let _ = std::fs::remove_file(&gate);
    let r = crate::support::http::parse(&got);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, "first\nsecond\n", "{r:?}");
}

fn a_websocket_through_the_proxy_echoes_both_ways(t: Target) {
    let Some((mut s, python)) = server(t) else {
        return;
    };
    let (_, line) = upstream(&mut s, python, "ws");
    let port = listening(&line);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/python/ws_client.py");
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let mut cmd = |c: Value| -> Value {
        writeln!(stdin, "{c}").unwrap();
        stdin.flush().unwrap();
        serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
    };
    let url = format!("ws://127.0.0.1:{}/ports/{port}/", s.port);
    let opened =
        cmd(json!({"op": "open", "name": "a", "url": url, "headers": {"Authorization": AUTH}}));
    let sent = cmd(json!({"op": "send", "name": "a", "binary": "00ff10"}));
    let back = cmd(json!({"op": "recv", "name": "a", "timeout": TIMEOUT.as_secs()}));
    let text = cmd(json!({"op": "send", "name": "a", "text": "hello through the proxy"}));
    let text_back = cmd(json!({"op": "recv", "name": "a", "timeout": TIMEOUT.as_secs()}));
    let refused = cmd(json!({"op": "open", "name": "b", "url": url, "headers": {}}));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(opened, json!({"ok": true}));
    assert_eq!(sent, json!({"ok": true}));
    assert_eq!(back, json!({"binary": "00ff10"}));
    assert_eq!(text, json!({"ok": true}));
    assert_eq!(text_back, json!({"text": "hello through the proxy"}));
    assert_eq!(refused["status"], json!(401), "{refused}");
}

fn a_port_nothing_listens_on_is_502_and_the_servers_own_is_not_proxied(t: Target) {
    let Some((s, _)) = server(t) else {
        return;
    };
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for port in [closed, s.port] {
        let r = http(
            s.port,
            "GET",
            &format!("/ports/{port}/"),
            &[("Authorization", AUTH)],
            "",
        );
        assert_eq!(r.status, 502, "{port}: {r:?}");
        assert!(
            r.json()["error"].as_str().unwrap().contains("nothing"),
            "{r:?}"
        );
    }
    let r = http(s.port, "GET", "/ports/0/", &[("Authorization", AUTH)], "");
    assert_eq!(r.status, 404, "{r:?}");
}

/// For each of the server's own listeners (MCP, metrics, envd, sandboxd
/// REST, and sandboxd gRPC when built): a job listening on 127.0.0.2 at
/// that listener's port (another socket than the server's 127.0.0.1 one,
/// so the bind succeeds) is listed by `GET /ports`, and the proxy refuses
/// it with `502` — it never reaches the server's own listener.
fn a_job_on_another_loopback_address_of_any_of_the_servers_own_ports_is_listed_but_never_proxied(
    t: Target,
) {
    let Some(python) = python() else {
        return;
    };
    let root = crate::support::HostPath::new("ports-own-root");
    std::fs::create_dir(&root.0).unwrap();
    let mut args = vec![
        "--metrics-listen",
        "127.0.0.1:0",
        "--envd",
        "127.0.0.1:0",
        "--sandboxd-rest",
        "127.0.0.1:0",
        "--sandboxd-root",
        &root.0,
    ];
    if cfg!(feature = "sandboxd") {
        args.extend(["--sandboxd-grpc", "127.0.0.1:0"]);
    }
    let mut s = Both::start(t, &[("MCP_EXEC_HTTP_TOKEN", TOKEN)], &args);
    s.stdio.initialize(LATEST);
    let mut own = vec![("MCP", s.port)];
    for what in ["metrics", "envd", "sandboxd REST", "sandboxd gRPC"] {
        if what != "sandboxd gRPC" || cfg!(feature = "sandboxd") {
            own.push((what, crate::http::bound_port(&s.stdio, what)));
        }
    }
    for &(what, port) in &own {
        let (_id, line) = upstream(&mut s, python, &format!("at {port} 127.0.0.2"));
        assert_eq!(listening(&line), port, "{what}");
    }
    let listed = ports(&s);
    for &(what, port) in &own {
        assert!(
            listed
                .iter()
                .any(|p| p["port"] == json!(port) && p["addr"] == json!("127.0.0.2")),
            "{what}: GET /ports lists the job's socket on {port}: {listed:?}"
        );
        let r = http(
            s.port,
            "GET",
            &format!("/ports/{port}/health"),
            &[("Authorization", AUTH)],
            "",
        );
        assert_eq!(r.status, 502, "{what} ({port}): {r:?}");
        assert!(
            r.json()["error"]
                .as_str()
                .unwrap()
                .contains("one of this server's own listeners"),
            "{what} ({port}): {r:?}"
        );
    }
}

/// Outside a network namespace no packet may leave the machine, so this
/// proves the refusal comes before any dial: a job's `IP_FREEBIND`
/// listener on 198.51.100.7 (an address no interface has) is listed, and
/// the proxy answers `502` "loopback only" at once, naming the address.
fn a_job_listening_on_an_address_that_is_not_loopback_is_listed_and_refused_before_any_dial(
    t: Target,
) {
    let Some((mut s, python)) = server(t) else {
        return;
    };
    let (_id, line) = upstream(&mut s, python, "at 8093 198.51.100.7 freebind");
    assert_eq!(listening(&line), 8093);
    let listed = ports(&s);
    assert!(
        listed
            .iter()
            .any(|p| p["port"] == json!(8093) && p["addr"] == json!("198.51.100.7")),
        "GET /ports lists the job's socket: {listed:?}"
    );
    let begun = std::time::Instant::now();
    let r = http(
        s.port,
        "GET",
        "/ports/8093/",
        &[("Authorization", AUTH)],
        "",
    );
    assert_eq!(r.status, 502, "{r:?}");
    let error = r.json()["error"].as_str().unwrap().to_owned();
    assert!(
        error.contains("listens on 198.51.100.7 only") && error.contains("loopback only"),
        "{error}"
    );
    assert!(
        begun.elapsed() < std::time::Duration::from_secs(1),
        "the refusal took {:?}: was a dial tried?",
        begun.elapsed()
    );
}

/// What a job inside the namespace got from `GET <url>` with the token:
/// its status and body.
fn fetched_inside(s: &mut crate::support::Server, python: &str, url: &str) -> (u16, String) {
    let script = format!(
        "import sys, urllib.request, urllib.error\n\
         r = urllib.request.Request({url:?}, headers={{'Authorization': {AUTH:?}}})\n\
         try:\n    a = urllib.request.urlopen(r, timeout=20); code, body = a.status, a.read()\n\
         except urllib.error.HTTPError as e:\n    code, body = e.code, e.read()\n\
         print(code); print(body.decode())\n"
    );
    let r = s.call(
        "execute",
        json!({"argv": [python, "-c", script], "timeout": 30}),
    );
    let out = r["stdout"]["data"].as_str().unwrap_or_default().to_owned();
    let (code, body) = out.split_once('\n').unwrap_or((&out, ""));
    (
        code.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{url}: no status in {r}")),
        body.to_owned(),
    )
}

/// The proxy dials loopback only. The server runs in a network namespace
/// of its own, made here: a veth pair with 192.0.2.1 on one end (an
/// address of the namespace's own), and no route out of it, so even a
/// proxy that did dial could send nothing beyond it. A job's listener on
/// 192.0.2.1, and another on an address no interface has (`IP_FREEBIND`),
/// are listed and never dialled; a loopback one is proxied (the
/// namespace's proxy works).
#[test]
fn in_a_network_namespace_a_listener_on_an_address_that_is_not_loopback_is_never_dialled() {
    let Some(python) = python() else {
        return;
    };
    let netns = std::process::Command::new("unshare")
        .args([
            "--net", "--", "ip", "link", "add", "v0", "type", "veth", "peer", "name", "v1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let available = match netns {
        Ok(st) if st.success() => Ok(()),
        other => Err(format!(
            "unshare --net with ip link add … veth (root, iproute2): {other:?}"
        )),
    };
    if !crate::support::require(available, "a network namespace of the test's own") {
        return;
    }
    let mut command = Command::new("unshare");
    command
        .args(["--net", "--", "sh", "-c"])
        .arg(
            "set -e; ip link set lo up; ip link add v0 type veth peer name v1; \
             ip addr add 192.0.2.1/24 dev v0; ip link set v0 up; ip link set v1 up; \
             exec \"$0\" \"$@\"",
        )
        .arg(crate::support::binary())
        .args(["--http", "127.0.0.1:8080"])
        .env("MCP_EXEC_HTTP_TOKEN", TOKEN);
    let mut s = crate::support::Server::spawn_command(Target::Bare, command);
    s.initialize(LATEST);
    let spawn = |s: &mut crate::support::Server, args: &str| {
        let id = s.spawn_job(&format!("exec {python} {UPSTREAM} {args}"));
        let w = s.call(
            "wait",
            json!({"job_ids": [id], "timeout": TIMEOUT.as_secs(), "until": {"pattern": "\n"}}),
        );
        assert!(
            w[0].get("matched").is_some(),
            "{args}: printed no line: {w}"
        );
        let out = s.call("output", json!({"job_id": id, "stdout": "all"}));
        listening(out["stdout"]["data"].as_str().unwrap().trim())
    };
    let control = spawn(&mut s, "http");
    spawn(&mut s, "at 8081 192.0.2.1");
    spawn(&mut s, "at 8082 198.51.100.7 freebind");

    let (code, body) = fetched_inside(&mut s, python, "http://127.0.0.1:8080/ports");
    assert_eq!(code, 200, "{body}");
    for addr in ["\"192.0.2.1\"", "\"198.51.100.7\""] {
        assert!(body.contains(addr), "GET /ports lists {addr}: {body}");
    }
    let (code, body) = fetched_inside(
        &mut s,
        python,
        &format!("http://127.0.0.1:8080/ports/{control}/echo"),
    );
    assert_eq!(code, 200, "a loopback listener is proxied: {body}");
    assert!(
        body.contains("\"path\": \"/echo\"") || body.contains("\"path\":\"/echo\""),
        "{body}"
    );
    for (port, addr) in [(8081, "192.0.2.1"), (8082, "198.51.100.7")] {
        let (code, body) = fetched_inside(
            &mut s,
            python,
            &format!("http://127.0.0.1:8080/ports/{port}/"),
        );
        assert_eq!(code, 502, "{port}: {body}");
        assert!(
            body.contains(&format!("listens on {addr} only")) && body.contains("loopback only"),
            "{port}: {body}"
        );
    }
}

macro_rules! ports_targets {
    ($($name:ident),* $(,)?) => {
        mod bare { $( #[test] fn $name() { if crate::support::Target::Bare.available() { super::$name(crate::support::Target::Bare) } } )* }
        mod pid1 { $( #[test] fn $name() { if crate::support::Target::Pid1.available() { super::$name(crate::support::Target::Pid1) } } )* }
    };
}

ports_targets!(
    twenty_listeners_across_ten_jobs_are_each_attributed_to_their_job_and_process,
    wait_until_port_returns_when_the_job_listens_and_not_before,
    the_proxy_forwards_get_and_post_with_bodies_strips_the_token_and_needs_it,
    the_proxy_streams_an_answer_before_the_target_has_finished_it,
    a_websocket_through_the_proxy_echoes_both_ways,
    a_port_nothing_listens_on_is_502_and_the_servers_own_is_not_proxied,
    a_job_on_another_loopback_address_of_any_of_the_servers_own_ports_is_listed_but_never_proxied,
    a_job_listening_on_an_address_that_is_not_loopback_is_listed_and_refused_before_any_dial,
);
