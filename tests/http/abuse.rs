//! HTTP abuse on loopback (issue 15, item 4), bounded in count and time:
//! floods of wrong tokens, slow clients up to the connection limit,
//! oversize and withheld bodies, malformed SSE reconnects and garbage
//! session ids. Each asserts the abusive requests get their status and a
//! legitimate client is served during the abuse and after it. (How much
//! slower it is served is a benchmark figure: `bench -- --only http_abuse`.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::{Both, http};
use crate::support::{TIMEOUT, Target};

const TOKEN: &str = "abuse-test-token-0123456789";

/// A keep-alive connection that sends requests and reads each response
/// (sized bodies only: what every non-SSE answer of the server is).
struct KeepAlive {
    reader: BufReader<TcpStream>,
    port: u16,
}

impl KeepAlive {
    fn open(port: u16) -> KeepAlive {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(TIMEOUT)).expect("timeout");
        s.set_write_timeout(Some(TIMEOUT)).expect("timeout");
        KeepAlive {
            reader: BufReader::new(s),
            port,
        }
    }

    /// Sends one request and returns its status; reconnects first when the
    /// server closed the connection after the previous response.
    fn status(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> u16 {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n",
            self.port,
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        head.push_str(body);
        let (status, close) = self.exchange(head.as_bytes());
        if close {
            *self = KeepAlive::open(self.port);
        }
        status
    }

    fn exchange(&mut self, request: &[u8]) -> (u16, bool) {
        self.reader
            .get_mut()
            .write_all(request)
            .expect("write a request");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("a status line");
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {line:?}"));
        let (mut length, mut close) = (0usize, false);
        loop {
            line.clear();
            self.reader.read_line(&mut line).expect("a header");
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().expect("a length");
                } else if k.eq_ignore_ascii_case("connection") {
                    close = v.trim().eq_ignore_ascii_case("close");
                }
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body).expect("the body");
        (status, close)
    }
}

/// A legitimate client: its own session, a blocking `execute echo ok` per
/// call, each checked.
struct Legit<'a> {
    s: &'a Both,
    session: String,
    auth: String,
    next: i64,
}

impl<'a> Legit<'a> {
    fn new(s: &'a Both, token: Option<&str>) -> Legit<'a> {
        let auth = token.map_or_else(String::new, |t| format!("Bearer {t}"));
        let mut h = vec![("Accept", "application/json, text/event-stream")];
        if token.is_some() {
            h.push(("Authorization", auth.as_str()));
        }
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": crate::support::LATEST, "capabilities": {},
                       "clientInfo": {"name": "legit", "version": "0"}}});
        let r = http(s.port, "POST", "/mcp", &h, &init.to_string());
        assert_eq!(r.status, 200, "{r:?}");
        let session = r.header("mcp-session-id").expect("a session").to_owned();
        Legit {
            s,
            session,
            auth,
            next: 1,
        }
    }

    /// One blocking `execute echo ok`, which must print `ok`.
    fn echo_ok(&mut self) {
        self.next += 1;
        let mut h = vec![
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", self.session.as_str()),
        ];
        if !self.auth.is_empty() {
            h.push(("Authorization", self.auth.as_str()));
        }
        let call = json!({"jsonrpc": "2.0", "id": self.next, "method": "tools/call",
            "params": {"name": "execute", "arguments": {"command": "echo ok"}}});
        let r = http(self.s.port, "POST", "/mcp", &h, &call.to_string());
        assert_eq!(r.status, 200, "{r:?}");
        let result = crate::support::tool_json(&r.json()["result"]);
        assert_eq!(result["stdout"]["data"], json!("ok\n"), "{r:?}");
    }
}

/// Runs `abuse` on `threads` threads while the legitimate client calls
/// `echo ok` in a loop; returns how many legitimate calls succeeded during
/// the abuse (at least one is required).
fn during(legit: &mut Legit, threads: usize, abuse: impl Fn(usize) + Send + Sync) -> usize {
    let done = AtomicUsize::new(0);
    let calls = std::thread::scope(|scope| {
        for i in 0..threads {
            let (abuse, done) = (&abuse, &done);
            scope.spawn(move || {
                abuse(i);
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
        let mut calls = 0;
        // At least one call, and calls as long as the abuse lasts.
        loop {
            legit.echo_ok();
            calls += 1;
            std::thread::sleep(Duration::from_millis(20));
            if done.load(Ordering::Relaxed) == threads {
                break calls;
            }
        }
    });
    assert!(calls >= 1);
    calls
}

fn ten_thousand_wrong_tokens_get_401_while_a_legitimate_client_is_served(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_HTTP_TOKEN", TOKEN)], &[]);
    let mut legit = Legit::new(&s, Some(TOKEN));
    let refused = AtomicUsize::new(0);
    let port = s.port;
    during(&mut legit, 4, |i| {
        let mut c = KeepAlive::open(port);
        for n in 0..2500 {
            let wrong = format!("Bearer wrong-{i}-{n}");
            let st = c.status(
                "POST",
                "/mcp",
                &[("Authorization", &wrong), ("Accept", "application/json")],
                "{}",
            );
            assert_eq!(st, 401, "wrong token {n}");
            refused.fetch_add(1, Ordering::Relaxed);
        }
    });
    assert_eq!(refused.load(Ordering::Relaxed), 10_000);
    legit.echo_ok();
}

fn slow_clients_up_to_the_connection_limit_are_dropped_and_a_legitimate_client_is_served(
    t: Target,
) {
    const LIMIT: usize = 16;
    let s = Both::start(
        t,
        &[("MCP_EXEC_HTTP_MAX_CONNECTIONS", &LIMIT.to_string())],
        &[],
    );
    let mut legit = Legit::new(&s, None);
    // All but one slot: half trickle a head a byte a second, half send a
    // head and then withhold the body they announced.
    let stop = Arc::new(AtomicBool::new(false));
    let dropped = AtomicUsize::new(0);
    let port = s.port;
    let start = Instant::now();
    during(&mut legit, LIMIT - 1, |i| {
        let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        c.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let head = b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n";
        if i % 2 == 1 {
            c.write_all(head).expect("a head");
            c.write_all(b"Content-Length: 100\r\n\r\n{")
                .expect("a body");
        }
        let mut buf = [0u8; 256];
        let mut sent = 0;
        // Bounded: the server must drop it within its timeouts (10 s for a
        // head, 30 s for a body); 60 s is the test's own limit.
        while start.elapsed() < Duration::from_secs(60) && !stop.load(Ordering::Relaxed) {
            if i % 2 == 0 && sent < head.len() {
                if c.write_all(&head[sent..=sent]).is_err() {
                    break;
                }
                sent += 1;
            }
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let text = String::from_utf8_lossy(&buf[..n]);
                    assert!(
                        text.starts_with("HTTP/1.1 408"),
                        "a slow client got {text:?}"
                    );
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(_) => std::thread::sleep(Duration::from_millis(800)),
            }
        }
        if start.elapsed() < Duration::from_secs(60) {
            dropped.fetch_add(1, Ordering::Relaxed);
        }
    });
    stop.store(true, Ordering::Relaxed);
    assert_eq!(
        dropped.load(Ordering::Relaxed),
        LIMIT - 1,
        "slow clients were left holding their connections"
    );
    legit.echo_ok();
}

fn oversize_and_unending_bodies_get_413_and_a_legitimate_client_is_served(t: Target) {
    let s = Both::start(t, &[("MCP_EXEC_MAX_LINE_BYTES", "65536")], &[]);
    let mut legit = Legit::new(&s, None);
    let port = s.port;
    during(&mut legit, 4, |i| {
        for n in 0..50 {
            let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            c.set_read_timeout(Some(TIMEOUT)).expect("timeout");
            let head = if (i + n) % 2 == 0 {
                // Declared too large: refused from the head.
                "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\nContent-Length: 1073741824\r\n\r\n".to_owned()
            } else {
                // Chunked, no length: refused once 64 KiB have arrived.
                "POST /exec HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n".to_owned()
            };
            let _ = c.write_all(head.as_bytes());
            if (i + n) % 2 == 1 {
                let chunk = format!("{:x}\r\n{}\r\n", 16384, "x".repeat(16384));
                for _ in 0..8 {
                    if c.write_all(chunk.as_bytes()).is_err() {
                        break;
                    }
                }
            }
            let mut raw = Vec::new();
            let _ = c.read_to_end(&mut raw);
            let text = String::from_utf8_lossy(&raw);
            // A chunked body is refused after 64 KiB while the client may
            // still be writing: the close can then reset the connection
            // before the 413 is read. Never anything but 413.
            assert!(
                text.starts_with("HTTP/1.1 413") || ((i + n) % 2 == 1 && text.is_empty()),
                "{head:?} got {text:?}"
            );
        }
    });
    legit.echo_ok();
}

fn malformed_sse_reconnects_and_garbage_session_ids_get_4xx_and_a_legitimate_client_is_served(
    t: Target,
) {
    let s = Both::start(t, &[], &[]);
    let mut legit = Legit::new(&s, None);
    let port = s.port;
    let real = legit.session.clone();
    during(&mut legit, 2, |i| {
        let mut c = KeepAlive::open(port);
        let garbage = [
            "0".to_owned(),
            "not-a-session".to_owned(),
            "x".repeat(8000),
            "%00%ff../../etc/passwd".to_owned(),
            format!("{real}x"),
        ];
        for n in 0..200 {
            let sid = &garbage[n % garbage.len()];
            let accept_sse = ("Accept", "text/event-stream");
            let st = match (n + i) % 4 {
                // An SSE reconnect: no server-initiated stream exists.
                0 => c.status(
                    "GET",
                    "/mcp",
                    &[accept_sse, ("Last-Event-ID", sid), ("Mcp-Session-Id", sid)],
                    "",
                ),
                1 => c.status(
                    "GET",
                    "/mcp",
                    &[
                        accept_sse,
                        ("Last-Event-ID", "-1"),
                        ("Mcp-Session-Id", &real),
                    ],
                    "",
                ),
                2 => c.status(
                    "POST",
                    "/mcp",
                    &[
                        ("Accept", "application/json"),
                        ("Mcp-Session-Id", sid),
                        ("Last-Event-ID", sid),
                    ],
                    r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
                ),
                _ => c.status("DELETE", "/mcp", &[("Mcp-Session-Id", sid)], ""),
            };
            match (n + i) % 4 {
                0 | 1 => assert_eq!(st, 405, "GET /mcp ({n})"),
                _ => assert!(st == 404 || st == 400, "{n}: session {sid:.40}: {st}"),
            }
        }
    });
    // The real session was neither ended nor disturbed.
    legit.echo_ok();
}

/// Transport-level behaviour: the bare target is enough.
mod bare_only {
    use crate::support::Target;

    macro_rules! bare {
        ($($name:ident),* $(,)?) => { $( #[test] fn $name() { super::$name(Target::Bare) } )* };
    }

    bare!(
        ten_thousand_wrong_tokens_get_401_while_a_legitimate_client_is_served,
        slow_clients_up_to_the_connection_limit_are_dropped_and_a_legitimate_client_is_served,
        oversize_and_unending_bodies_get_413_and_a_legitimate_client_is_served,
        malformed_sse_reconnects_and_garbage_session_ids_get_4xx_and_a_legitimate_client_is_served,
    );
}
