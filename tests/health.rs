//! `mcp-exec health URL` (docs/http.md, "Health checks") against a real
//! Python `http.server`, a closed port, a listener that never answers, and
//! a one-shot server in the test that checks the bearer token.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{binary, require, wait_for};

/// A Python `http.server` on 127.0.0.1, serving an empty directory; killed
/// on drop.
struct PyServer {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl PyServer {
    fn start() -> Option<PyServer> {
        let dir = std::env::temp_dir().join(format!("mcp-exec-health-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        // A free port: bind to 0, note it, let go. (Another process could
        // take it in between; then the wait below fails loudly.)
        let port = TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let spawned = Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .arg("--directory")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if !require(
            spawned.as_ref().map(|_| ()).map_err(|e| e.to_string()),
            "python3",
        ) {
            return None;
        }
        let server = PyServer {
            child: spawned.ok()?,
            port,
            dir,
        };
        let up = wait_for(Duration::from_secs(10), || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        assert!(up, "python3 http.server did not listen on port {port}");
        Some(server)
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn health(url: &str, env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(binary());
    command
        .args(["health", url])
        .env_remove("MCP_EXEC_HTTP_TOKEN")
        .env_remove("MCP_EXEC_HTTP_TOKEN_FILE")
        .envs(env.iter().copied())
        .stdin(Stdio::null());
    crate::support::guard::output(command).expect("running mcp-exec health")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_answer_200_exits_0() {
    let Some(server) = PyServer::start() else {
        return;
    };
    let out = health(&format!("http://127.0.0.1:{}/", server.port), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn an_answer_404_exits_1_and_says_so() {
    let Some(server) = PyServer::start() else {
        return;
    };
    let out = health(&format!("http://127.0.0.1:{}/missing", server.port), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("answered 404"), "{}", stderr(&out));
}

#[test]
fn a_closed_port_exits_1() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let out = health(&format!("http://127.0.0.1:{port}/healthz"), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("connecting to 127.0.0.1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_server_that_never_answers_fails_within_the_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("listening");
    let port = listener.local_addr().expect("address").port();
    let started = Instant::now();
    let out = health(&format!("http://127.0.0.1:{port}/"), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        stderr(&out).contains("reading the answer"),
        "{}",
        stderr(&out)
    );
    drop(listener);
}

#[test]
fn a_url_that_is_not_http_is_a_usage_error() {
    let out = health("https://127.0.0.1/", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("only http://"), "{}", stderr(&out));
    let mut command = Command::new(binary());
    command.arg("health");
    let out = crate::support::guard::output(command).expect("run");
    assert_eq!(out.status.code(), Some(2));
}

/// The token file wins over the variable, and its trailing newline is not
/// part of the token.
#[test]
fn the_token_from_the_environment_is_sent_as_a_bearer() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("listening");
    let port = listener.local_addr().expect("address").port();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).expect("read") == 0 || line == "\r\n" {
                break;
            }
            head.push(line.trim_end().to_owned());
        }
        let ok = head.iter().any(|l| l == "Authorization: Bearer from-file");
        let answer = if ok {
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        } else {
            "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n"
        };
        (&stream).write_all(answer.as_bytes()).expect("write");
        head
    });
    let file = std::env::temp_dir().join(format!("mcp-exec-health-token-{}", std::process::id()));
    std::fs::write(&file, "from-file\n").expect("writing the token file");
    let out = health(
        &format!("http://127.0.0.1:{port}/private"),
        &[
            ("MCP_EXEC_HTTP_TOKEN_FILE", file.to_str().expect("utf-8")),
            ("MCP_EXEC_HTTP_TOKEN", "from-variable"),
        ],
    );
    let head = server.join().expect("server thread");
    let _ = std::fs::remove_file(&file);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}; request: {head:?}",
        stderr(&out)
    );
    assert_eq!(
        head.first().map(String::as_str),
        Some("GET /private HTTP/1.1")
    );
}
