//! sandboxd's REST API (`--sandboxd-rest`, docs/sandboxd.md) end to end over real
//! HTTP on loopback: the wire shapes and status codes of agent-sandbox's
//! `filesystem.yaml`, the root and its traversal refusals, the auth rule,
//! the shared port with the MCP listener, and the official SDK
//! (`k8s-agent-sandbox`, interop/sandboxd/files.py) driving files.*.
//! Bare and PID-1 targets (both share the host's network and /tmp).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;

use serde_json::{Value, json};

use crate::http::bound_port;
use crate::support::{HostPath, Server, TIMEOUT, Target};

/// A server with a sandboxd REST listener on an ephemeral port, rooted at
/// a fresh directory.
struct Rest {
    server: Server,
    port: u16,
    root: HostPath,
    pid: Option<u32>,
}

impl Drop for Rest {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

impl Rest {
    fn start(t: Target, env: &[(&str, &str)], extra: &[&str]) -> Rest {
        let root = HostPath::new("sandboxd-root");
        std::fs::create_dir_all(&root.0).unwrap();
        let mut args = vec!["--sandboxd-rest", "127.0.0.1:0", "--sandboxd-root", &root.0];
        args.extend_from_slice(extra);
        let server = Server::start_with_cli(t, env, &args);
        let port = bound_port(&server, "sandboxd REST");
        let pid = server.server_host_pid();
        Rest {
            server,
            port,
            root,
            pid,
        }
    }

    fn path(&self, rel: &str) -> String {
        format!("{}/{rel}", self.root.0)
    }
}

/// A response with a binary body.
#[derive(Debug)]
struct Raw {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }
}

/// One request (`Connection: close`); `chunked` sends the body in
/// chunked transfer encoding, as the SDK does for a file object.
fn send(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    chunked: bool,
) -> Raw {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.set_write_timeout(Some(TIMEOUT)).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    if chunked {
        head.push_str("Transfer-Encoding: chunked\r\n");
    } else {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    if chunked {
        for piece in body.chunks(1000) {
            s.write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                .unwrap();
            s.write_all(piece).unwrap();
            s.write_all(b"\r\n").unwrap();
        }
        s.write_all(b"0\r\n\r\n").unwrap();
    } else {
        s.write_all(body).unwrap();
    }
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("reading the response");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    Raw {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

fn call(port: u16, method: &str, path: &str, body: &[u8]) -> Raw {
    send(port, method, path, &[], body, false)
}

fn put_get_head_and_range_speak_sandboxds_wire(t: Target) {
    let r = Rest::start(t, &[], &[]);
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    // One segment with %2F, parents created, 204 and no body.
    let put = call(r.port, "PUT", "/v1/files/d1%2Fd2%2Fa%20b.bin", &bytes);
    assert_eq!(put.status, 204, "{put:?}");
    assert!(put.body.is_empty());
    assert_eq!(std::fs::read(r.path("d1/d2/a b.bin")).unwrap(), bytes);
    let get = call(r.port, "GET", "/v1/files/d1%2Fd2%2Fa%20b.bin", b"");
    assert_eq!(get.status, 200);
    assert_eq!(get.header("content-type"), Some("application/octet-stream"));
    assert_eq!(get.header("content-length"), Some("70000"));
    assert_eq!(get.body, bytes);
    // Plain slashes name the same file.
    assert_eq!(
        call(r.port, "GET", "/v1/files/d1/d2/a%20b.bin", b"").body,
        bytes
    );
    let part = send(
        r.port,
        "GET",
        "/v1/files/d1%2Fd2%2Fa%20b.bin",
        &[("Range", "bytes=10-19")],
        b"",
        false,
    );
    assert_eq!(part.status, 206);
    assert_eq!(part.header("content-range"), Some("bytes 10-19/70000"));
    assert_eq!(part.body, bytes[10..20]);
    let head = call(r.port, "HEAD", "/v1/files/d1%2Fd2%2Fa%20b.bin", b"");
    assert_eq!(
        (head.status, head.header("content-length")),
        (200, Some("70000"))
    );
    assert_eq!(call(r.port, "HEAD", "/v1/files/d1", b"").status, 200);
    let missing = call(r.port, "HEAD", "/v1/files/nope", b"");
    assert_eq!(missing.status, 404);
    let missing = call(r.port, "GET", "/v1/files/nope", b"");
    assert_eq!(
        (missing.status, missing.json()["code"].clone()),
        (404, json!("NOT_FOUND"))
    );
    // Idempotent: the same PUT again is 204 and changes nothing.
    assert_eq!(
        call(r.port, "PUT", "/v1/files/d1%2Fd2%2Fa%20b.bin", &bytes).status,
        204
    );
    // Chunked (the SDK's file objects), and the mode.
    let chunked = send(
        r.port,
        "PUT",
        "/v1/files/c.txt?mode=0600",
        &[],
        &bytes,
        true,
    );
    assert_eq!(chunked.status, 204, "{chunked:?}");
    assert_eq!(std::fs::read(r.path("c.txt")).unwrap(), bytes);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(r.path("c.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // No temporary file is left beside them.
    let names: Vec<String> = std::fs::read_dir(&r.root.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("tmp")), "{names:?}");
}

fn a_multipart_put_writes_the_part_named_file(t: Target) {
    let r = Rest::start(t, &[], &[]);
    let data: Vec<u8> = (0..=255u8).cycle().take(50_000).collect();
    let mut body = Vec::new();
    body.extend_from_slice(
        b"--BoUnD\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nnot this\r\n",
    );
    body.extend_from_slice(b"--BoUnD\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n");
    body.extend_from_slice(&data);
    body.extend_from_slice(b"\r\n--BoUnD--\r\n");
    let ct = [("Content-Type", "multipart/form-data; boundary=BoUnD")];
    let put = send(r.port, "PUT", "/v1/files/up%2Fx.bin", &ct, &body, true);
    assert_eq!(
        put.status,
        204,
        "{put:?} {}",
        String::from_utf8_lossy(&put.body)
    );
    assert_eq!(std::fs::read(r.path("up/x.bin")).unwrap(), data);
    let none =
        b"--BoUnD\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nx\r\n--BoUnD--\r\n";
    let refused = send(r.port, "PUT", "/v1/files/up%2Fy.bin", &ct, none, false);
    assert_eq!(refused.status, 400);
    assert_eq!(refused.json()["code"], json!("INVALID_ARGUMENT"));
    assert!(!std::path::Path::new(&r.path("up/y.bin")).exists());
}

fn a_directory_lists_in_sandboxds_shape_with_symlinks_resolved(t: Target) {
    let r = Rest::start(t, &[], &[]);
    std::fs::create_dir_all(r.path("d/sub")).unwrap();
    std::fs::write(r.path("d/f.txt"), b"12345").unwrap();
    std::os::unix::fs::symlink("f.txt", r.path("d/link")).unwrap();
    std::os::unix::fs::symlink("sub", r.path("d/dirlink")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", r.path("d/escape")).unwrap();
    std::os::unix::fs::symlink("missing", r.path("d/broken")).unwrap();
    let got = call(r.port, "GET", "/v1/files/d", b"");
    assert_eq!(got.status, 200);
    assert_eq!(got.header("content-type"), Some("application/json"));
    let v = got.json();
    assert_eq!(v["path"], json!("/d"));
    let entries = v["entries"].as_array().unwrap();
    let names: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    // Sorted; the link out of the root and the broken one are left out.
    assert_eq!(names, ["dirlink", "f.txt", "link", "sub"], "{v}");
    let by = |n: &str| entries.iter().find(|e| e["name"] == n).unwrap().clone();
    assert_eq!(by("f.txt")["type"], json!("file"));
    assert_eq!(by("f.txt")["size"], json!(5));
    assert_eq!(by("f.txt")["mode"], json!("0644"));
    assert_eq!(by("link")["type"], json!("file"));
    assert_eq!(by("link")["size"], json!(5));
    assert_eq!(by("dirlink")["type"], json!("directory"));
    assert_eq!(by("sub")["type"], json!("directory"));
    let at = by("f.txt")["modified_at"].as_str().unwrap().to_owned();
    assert!(at.ends_with('Z') && at.len() == 20, "{at}");
    let f = by("f.txt");
    let mut keys: Vec<&String> = f.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["mode", "modified_at", "name", "size", "type"]);
    // The root itself, as `/v1/files/` (the SDK's list("")).
    let top = call(r.port, "GET", "/v1/files/", b"").json();
    assert_eq!(top["path"], json!("/"));
    assert_eq!(top["entries"][0]["name"], json!("d"));
    // A symlink inside the root is read through.
    assert_eq!(
        call(r.port, "GET", "/v1/files/d%2Flink", b"").body,
        b"12345"
    );
}

fn traversal_and_symlinks_out_of_the_root_are_403_permission_denied(t: Target) {
    let r = Rest::start(t, &[], &[]);
    std::os::unix::fs::symlink("/etc", r.path("etc")).unwrap();
    for path in [
        "/v1/files/..%2Fx",
        "/v1/files/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
        "/v1/files/a%2F..%2F..%2Fx",
        "/v1/files/etc%2Fpasswd",
        "/v1/files/etc",
    ] {
        for method in ["GET", "PUT", "DELETE"] {
            if (method, path) == ("DELETE", "/v1/files/etc") {
                continue;
            }
            let got = call(r.port, method, path, b"x");
            assert_eq!(got.status, 403, "{method} {path}: {got:?}");
            assert_eq!(
                got.json()["code"],
                json!("PERMISSION_DENIED"),
                "{method} {path}"
            );
        }
    }
    assert!(std::fs::metadata("/etc/passwd").unwrap().len() > 1);
    // Deleting the link removes the link, never what it leads to
    // (sandboxd resolves it first and answers 403).
    assert_eq!(call(r.port, "DELETE", "/v1/files/etc", b"").status, 204);
    assert!(std::path::Path::new("/etc/passwd").exists());
    assert!(std::fs::symlink_metadata(r.path("etc")).is_err());
    // A `..` that stays inside is fine, as in sandboxd.
    std::fs::write(r.path("in.txt"), b"in").unwrap();
    assert_eq!(
        call(r.port, "GET", "/v1/files/a%2F..%2Fin.txt", b"").body,
        b"in"
    );
}

fn with_no_stdio_the_rest_listener_alone_serves_files(t: Target) {
    let mut r = Rest::start(t, &[], &["--no-stdio"]);
    assert_eq!(
        call(r.port, "PUT", "/v1/files/alone.txt", b"alone").status,
        204
    );
    assert_eq!(
        call(r.port, "GET", "/v1/files/alone.txt", b"").body,
        b"alone"
    );
    assert!(
        r.server
            .wait_exit(std::time::Duration::from_millis(200))
            .is_none(),
        "the server serves on without stdio"
    );
}

fn put_and_delete_answer_with_sandboxds_codes(t: Target) {
    let r = Rest::start(t, &[], &[]);
    std::fs::create_dir_all(r.path("full/inner")).unwrap();
    std::fs::write(r.path("full/inner/x"), b"x").unwrap();
    std::fs::create_dir_all(r.path("empty")).unwrap();
    let code = |raw: &Raw| {
        (
            raw.status,
            raw.json()["code"].as_str().unwrap_or("").to_owned(),
        )
    };
    let dir = call(r.port, "PUT", "/v1/files/full", b"x");
    assert_eq!(code(&dir), (400, "INVALID_ARGUMENT".into()));
    for bad in ["644", "0999", "04755", "rw"] {
        let got = call(r.port, "PUT", &format!("/v1/files/m?mode={bad}"), b"x");
        assert_eq!(code(&got), (400, "INVALID_ARGUMENT".into()), "{bad}");
    }
    assert!(!std::path::Path::new(&r.path("m")).exists());
    let full = call(r.port, "DELETE", "/v1/files/full", b"");
    assert_eq!(code(&full), (409, "CONFLICT".into()));
    assert!(std::path::Path::new(&r.path("full/inner/x")).exists());
    let bad = call(r.port, "DELETE", "/v1/files/full?recursive=maybe", b"");
    assert_eq!(code(&bad), (400, "INVALID_ARGUMENT".into()));
    assert_eq!(call(r.port, "DELETE", "/v1/files/empty", b"").status, 204);
    assert_eq!(
        call(r.port, "DELETE", "/v1/files/full?recursive=true", b"").status,
        204
    );
    assert!(!std::path::Path::new(&r.path("full")).exists());
    let gone = call(r.port, "DELETE", "/v1/files/full", b"");
    assert_eq!(code(&gone), (404, "NOT_FOUND".into()));
    // A symlink is removed itself, never its target.
    std::fs::write(r.path("target"), b"t").unwrap();
    std::os::unix::fs::symlink("target", r.path("l")).unwrap();
    assert_eq!(call(r.port, "DELETE", "/v1/files/l", b"").status, 204);
    assert!(std::path::Path::new(&r.path("target")).exists());
    // The root: never removed; recursive=true empties it, as in sandboxd.
    let root = call(r.port, "DELETE", "/v1/files/", b"");
    assert_eq!(code(&root), (409, "CONFLICT".into()));
    assert_eq!(
        call(r.port, "DELETE", "/v1/files/?recursive=true", b"").status,
        204
    );
    assert!(std::path::Path::new(&r.root.0).is_dir());
    assert_eq!(std::fs::read_dir(&r.root.0).unwrap().count(), 0);
}

fn health_and_metadata_answer_in_sandboxds_shape(t: Target) {
    let r = Rest::start(
        t,
        &[
            ("SANDBOX_NAME", "sb-7"),
            ("SANDBOX_API_TOKEN", "hidden"),
            ("SANDBOX_DB_PASSWORD", "hidden"),
            ("OTHER_THING", "not shown"),
        ],
        &[],
    );
    let health = call(r.port, "GET", "/v1/health", b"");
    assert_eq!(health.status, 200);
    let v = health.json();
    assert_eq!(v["status"], json!("ok"));
    assert!(v["uptime_seconds"].is_u64(), "{v}");
    let meta = call(r.port, "GET", "/v1/metadata", b"").json();
    assert_eq!(meta, json!({"env": {"SANDBOX_NAME": "sb-7"}}));
    let other = call(r.port, "GET", "/v1/nope", b"");
    assert_eq!(
        (other.status, other.json()["code"].clone()),
        (404, json!("NOT_FOUND"))
    );
    // A custom prefix.
    let r2 = Rest::start(
        t,
        &[("POD_ZONE", "z1"), ("SANDBOX_NAME", "x")],
        &["--sandboxd-metadata-prefix", "POD_"],
    );
    assert_eq!(
        call(r2.port, "GET", "/v1/metadata", b"").json(),
        json!({"env": {"POD_ZONE": "z1"}})
    );
}

fn health_is_503_unavailable_once_shutting_down(t: Target) {
    let mut r = Rest::start(t, &[("MCP_EXEC_SHUTDOWN_GRACE", "5")], &[]);
    r.server.initialize(crate::support::LATEST);
    // A job that ignores TERM holds the shutdown in its grace.
    r.server.spawn_job("trap '' TERM; sleep 60");
    assert_eq!(call(r.port, "GET", "/v1/health", b"").status, 200);
    let pid = r.pid.expect("the server's pid");
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let mut seen = None;
    let unavailable = crate::support::wait_for(TIMEOUT, || {
        match crate::support::http::request(r.port, "GET", "/v1/health", &[], "", TIMEOUT) {
            Ok(reply) if reply.status == 503 => {
                seen = Some(reply);
                true
            }
            _ => false,
        }
    });
    assert!(unavailable, "/v1/health never said 503");
    let body = seen.unwrap().json();
    assert_eq!(body["code"], json!("UNAVAILABLE"), "{body}");
}

fn with_a_token_set_it_is_required_as_a_bearer_or_an_access_token(t: Target) {
    let r = Rest::start(t, &[("MCP_EXEC_HTTP_TOKEN", "s3cret")], &[]);
    let none = call(r.port, "GET", "/v1/metadata", b"");
    assert_eq!(none.status, 401);
    assert_eq!(none.json()["code"], json!("UNAUTHENTICATED"));
    assert_eq!(call(r.port, "PUT", "/v1/files/x", b"x").status, 401);
    assert!(!std::path::Path::new(&r.path("x")).exists());
    let bearer = [("Authorization", "Bearer guess")];
    assert_eq!(
        send(r.port, "GET", "/v1/metadata", &bearer, b"", false).status,
        401
    );
    for h in [
        ("Authorization", "Bearer s3cret"),
        ("X-Access-Token", "s3cret"),
    ] {
        let got = send(r.port, "GET", "/v1/metadata", &[h], b"", false);
        assert_eq!(got.status, 200, "{h:?}");
    }
    // The probe needs none (a kubelet sends none).
    assert_eq!(call(r.port, "GET", "/v1/health", b"").status, 200);
    // DNS rebinding: a loopback listener answers loopback names only.
    let rebound = [("Host", "evil.example"), ("X-Access-Token", "s3cret")];
    assert_eq!(
        send(r.port, "GET", "/v1/metadata", &rebound, b"", false).status,
        403
    );
    // MCP_EXEC_PLATFORM_INSECURE=1: the token is MCP's alone.
    let open = Rest::start(
        t,
        &[
            ("MCP_EXEC_HTTP_TOKEN", "s3cret"),
            ("MCP_EXEC_PLATFORM_INSECURE", "1"),
        ],
        &[],
    );
    assert_eq!(call(open.port, "PUT", "/v1/files/x", b"x").status, 204);
}

fn a_non_loopback_listener_without_a_token_needs_platform_insecure(t: Target) {
    let root = HostPath::new("sandboxd-root");
    std::fs::create_dir_all(&root.0).unwrap();
    let mut s = Server::start_with_cli(
        t,
        &[],
        &["--sandboxd-rest", "0.0.0.0:0", "--sandboxd-root", &root.0],
    );
    let status = s.wait_exit(TIMEOUT).expect("the server exits");
    assert_eq!(status.code(), Some(2), "{}", s.stderr.lock().unwrap());
    // The reader thread may still be taking the last lines in.
    let said = |s: &Server| {
        let log = s.stderr.lock().unwrap();
        log.contains("MCP_EXEC_PLATFORM_INSECURE=1") && log.contains("--sandboxd-rest")
    };
    assert!(
        crate::support::wait_for(TIMEOUT, || said(&s)),
        "{}",
        s.stderr.lock().unwrap()
    );
    // With the switch it serves.
    let r = Rest::start(t, &[("MCP_EXEC_PLATFORM_INSECURE", "1")], &[]);
    assert_eq!(call(r.port, "GET", "/v1/health", b"").status, 200);
    // A root outside the cwd policy is refused at start-up too.
    let mut s = Server::start_with_cli(
        t,
        &[
            ("MCP_EXEC_ALLOWED_CWDS", "/tmp"),
            ("MCP_EXEC_DEFAULT_CWD", "/tmp"),
        ],
        &["--sandboxd-rest", "127.0.0.1:0", "--sandboxd-root", "/etc"],
    );
    assert_eq!(s.wait_exit(TIMEOUT).and_then(|s| s.code()), Some(2));
    assert!(
        crate::support::wait_for(TIMEOUT, || s
            .stderr
            .lock()
            .unwrap()
            .contains("MCP_EXEC_SANDBOXD_ROOT")),
        "{}",
        s.stderr.lock().unwrap()
    );
}

fn on_the_mcp_listeners_address_v1_is_sandboxds_and_the_rest_ours(t: Target) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let r = Rest::start_shared(t, &addr);
    let health = call(port, "GET", "/v1/health", b"").json();
    assert_eq!(health["status"], json!("ok"));
    assert!(health.get("uptime_seconds").is_some(), "{health}");
    let ours = call(port, "GET", "/healthz", b"").json();
    assert!(ours.get("jobs").is_some(), "{ours}");
    assert_eq!(call(port, "PUT", "/v1/files/s.txt", b"shared").status, 204);
    assert_eq!(std::fs::read(r.path("s.txt")).unwrap(), b"shared");
    // MCP is still served on /mcp.
    let init = send(
        port,
        "POST",
        "/mcp",
        &[("Accept", "application/json, text/event-stream"), ("Content-Type", "application/json")],
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}).to_string().as_bytes(),
        false,
    );
    assert_eq!(init.status, 200, "{}", String::from_utf8_lossy(&init.body));
    // On separate addresses, the MCP listener's /v1/ is ours (404).
    let apart = Rest::start(t, &[], &["--http", "127.0.0.1:0"]);
    let http_port = bound_port(&apart.server, "HTTP");
    assert_eq!(call(http_port, "GET", "/v1/health", b"").status, 404);
}

impl Rest {
    /// `--http ADDR --sandboxd-rest ADDR`: one listener for both.
    fn start_shared(t: Target, addr: &str) -> Rest {
        let root = HostPath::new("sandboxd-root");
        std::fs::create_dir_all(&root.0).unwrap();
        let server = Server::start_with_cli(
            t,
            &[],
            &[
                "--http",
                addr,
                "--sandboxd-rest",
                addr,
                "--sandboxd-root",
                &root.0,
            ],
        );
        let port = bound_port(&server, "HTTP");
        let pid = server.server_host_pid();
        Rest {
            server,
            port,
            root,
            pid,
        }
    }
}

/// The SDK's venv python (interop/sandboxd); `None` (skip) when missing
/// here — in CI that fails.
fn sdk_python() -> Option<&'static str> {
    crate::support::venv_python(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/interop/sandboxd/.venv/bin/python"
        ),
        "k8s_agent_sandbox.sandbox",
        "the agent-sandbox Python SDK",
        "--install-python",
    )
}

fn the_official_sdk_writes_reads_lists_checks_and_deletes_files(t: Target) {
    let Some(python) = sdk_python() else { return };
    let r = Rest::start(t, &[], &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/sandboxd/files.py");
    // The gRPC port is never dialled by files.* (a free one, so a stray
    // dial fails fast).
    let grpc = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new("timeout")
        .args([
            "120",
            python,
            script,
            &r.port.to_string(),
            &grpc.to_string(),
        ])
        .output()
        .expect("running the SDK script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // What it left: bin.dat, exactly as written.
    let want: Vec<u8> = (0..=255u8).collect::<Vec<_>>().repeat(64);
    assert_eq!(std::fs::read(r.path("bin.dat")).unwrap(), want);
    assert!(!std::path::Path::new(&r.path("dir")).exists());
}

macro_rules! rest_targets {
    ($($name:ident),* $(,)?) => {
        mod bare { $( #[test] fn $name() { if crate::support::Target::Bare.available() { super::$name(crate::support::Target::Bare) } } )* }
        mod pid1 { $( #[test] fn $name() { if crate::support::Target::Pid1.available() { super::$name(crate::support::Target::Pid1) } } )* }
    };
}

rest_targets!(
    put_get_head_and_range_speak_sandboxds_wire,
    a_multipart_put_writes_the_part_named_file,
    a_directory_lists_in_sandboxds_shape_with_symlinks_resolved,
    traversal_and_symlinks_out_of_the_root_are_403_permission_denied,
    with_no_stdio_the_rest_listener_alone_serves_files,
    put_and_delete_answer_with_sandboxds_codes,
    health_and_metadata_answer_in_sandboxds_shape,
    health_is_503_unavailable_once_shutting_down,
    with_a_token_set_it_is_required_as_a_bearer_or_an_access_token,
    a_non_loopback_listener_without_a_token_needs_platform_insecure,
    on_the_mcp_listeners_address_v1_is_sandboxds_and_the_rest_ours,
    the_official_sdk_writes_reads_lists_checks_and_deletes_files,
);

/// The images: mcp-exec as the container's PID 1 (scratch) or under tini, sandboxd REST on
/// 0.0.0.0:8080 inside (MCP_EXEC_PLATFORM_INSECURE=1, as in the Kubernetes manifests),
/// published on a loopback port; the official SDK drives files.* through it and the wire
/// checks hold there too.
fn in_the_image_the_official_sdk_and_the_wire_work_through_a_published_port(t: Target) {
    let Some(python) = sdk_python() else { return };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let publish = format!("127.0.0.1:{port}:8080");
    let server = Server::start_container(
        t,
        &[("MCP_EXEC_PLATFORM_INSECURE", "1")],
        &["-p", &publish],
        &["--sandboxd-rest", "0.0.0.0:8080", "--sandboxd-root", "/tmp"],
    );
    let up = crate::support::wait_for(TIMEOUT, || {
        crate::support::http::request(port, "GET", "/v1/health", &[], "", TIMEOUT)
            .is_ok_and(|r| r.status == 200)
    });
    assert!(up, "no /v1/health: {}", server.stderr.lock().unwrap());
    assert_eq!(
        call(port, "PUT", "/v1/files/a%2Fb.txt", b"in the image").status,
        204
    );
    assert_eq!(
        call(port, "GET", "/v1/files/a%2Fb.txt", b"").body,
        b"in the image"
    );
    let out_of_root = call(port, "GET", "/v1/files/..%2Fetc%2Fpasswd", b"");
    assert_eq!(out_of_root.status, 403);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/sandboxd/files.py");
    let grpc = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new("timeout")
        .args(["120", python, script, &port.to_string(), &grpc.to_string()])
        .output()
        .expect("running the SDK script");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim_end().ends_with("ok"),
        "{:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    drop(server);
}

mod images {
    #[test]
    fn scratch_in_the_image_the_official_sdk_and_the_wire_work_through_a_published_port() {
        if crate::support::Target::Scratch.available() {
            super::in_the_image_the_official_sdk_and_the_wire_work_through_a_published_port(
                crate::support::Target::Scratch,
            );
        }
    }

    #[test]
    fn tini_in_the_image_the_official_sdk_and_the_wire_work_through_a_published_port() {
        if crate::support::Target::Tini.available() {
            super::in_the_image_the_official_sdk_and_the_wire_work_through_a_published_port(
                crate::support::Target::Tini,
            );
        }
    }
}
