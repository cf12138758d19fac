//! HTTP abuse (issue 15, item 4): a legitimate client's latency while
//! abusive clients hammer the same server on loopback, against its latency
//! without them (goal ≤ 2×).
//!
//! One server with a token. The legitimate client calls a blocking
//! `execute true` on a keep-alive connection in its own session: first
//! alone (the baseline), then while the abuse runs, then alone again (the
//! two quiet halves are the baseline, so a drift of the machine's load over
//! the run does not land on one side). The abuse, all at once, bounded in
//! count: wrong tokens on keep-alive connections, slow clients that trickle
//! a request head a byte at a time (up to a quarter of the connection
//! limit), bodies over `MCP_EXEC_MAX_LINE_BYTES`, and `GET /mcp` SSE
//! reconnects with `Last-Event-ID` and garbage session ids. Every abusive
//! request must get the status it is due, or the run fails.
//!
//! The abusers are threads of this process on the same machine: part of the
//! slowdown measured is theirs, competing for the CPUs, as it would be for
//! a sandbox whose neighbour misbehaves.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::Error;
use crate::client::Launch;
use crate::http_client::{Conn, HttpServer};
use crate::scenarios::{Paired, expect_state};

const TOKEN: &str = "bench-abuse-token-0123456789abcdef";
/// The connection limit of the server under abuse.
const MAX_CONNECTIONS: usize = 256;

/// What the abusers did.
#[derive(Debug, Default)]
pub struct Abuse {
    /// The legitimate client's latency: `server` under abuse, `baseline`
    /// without it, ms.
    pub latency: Paired,
    /// Requests with a wrong token (each answered `401`).
    pub wrong_tokens: usize,
    /// Slow connections opened.
    pub slow: usize,
    /// Oversize bodies (each answered `413`).
    pub oversize: usize,
    /// SSE reconnects and garbage session ids (each answered `4xx`).
    pub garbage: usize,
}

fn execute_true(conn: &mut Conn) -> Result<Duration, Error> {
    let (took, r) = conn.tool("execute", json!({"command": "true"}))?;
    expect_state(&r, "success", "http_abuse")?;
    Ok(took)
}

/// [`Conn::send`] that reconnects once when the server has closed the
/// connection (it closes after some refusals).
fn send(
    c: &mut Conn,
    addr: SocketAddr,
    method: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<u16, Error> {
    match c.send(method, "/mcp", headers, body) {
        Ok(r) => Ok(r.status),
        Err(_) => {
            *c = Conn::open(addr)?;
            Ok(c.send(method, "/mcp", headers, body)?.status)
        }
    }
}

fn check(status: u16, want: &[u16], what: &str) -> Result<(), Error> {
    if want.contains(&status) {
        Ok(())
    } else {
        Err(Error(format!("http_abuse: {what} got {status}")))
    }
}

/// `calls` legitimate calls alone, `calls` under abuse, `calls` alone
/// again; the abusers send `wrong_tokens` bad requests in all, and the
/// other kinds in proportion. `None` against a server without HTTP.
pub fn abuse(
    binary: &Path,
    protocol: &str,
    calls: usize,
    wrong_tokens: usize,
) -> Result<Option<Abuse>, Error> {
    let launch = Launch::with_env(&[
        ("MCP_EXEC_HTTP_TOKEN", TOKEN),
        ("MCP_EXEC_MAX_LINE_BYTES", "65536"),
    ]);
    let Some(hs) = HttpServer::launch(binary, &launch, false)? else {
        return Ok(None);
    };
    let addr = hs.addr;
    let mut legit = hs.connect()?;
    legit.set_token(TOKEN);
    legit.initialize(protocol)?;
    for _ in 0..5 {
        execute_true(&mut legit)?;
    }
    let mut out = Abuse::default();
    let half = calls.div_ceil(2);
    for _ in 0..half {
        out.latency.baseline.push_ms(execute_true(&mut legit)?);
    }

    let stop = AtomicBool::new(false);
    let counts = [
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    ];
    let result: Result<(), Error> = std::thread::scope(|scope| {
        let per_thread = wrong_tokens.div_ceil(2);
        let mut abusers = Vec::new();
        for i in 0..2 {
            let counts = &counts;
            abusers.push(scope.spawn(move || -> Result<(), Error> {
                let mut c = Conn::open(addr)?;
                for n in 0..per_thread {
                    let wrong = format!("Bearer wrong-{i}-{n}");
                    let status = send(
                        &mut c,
                        addr,
                        "POST",
                        &[("Authorization", &wrong), ("Accept", "application/json")],
                        b"{}",
                    )?;
                    check(status, &[401], "a wrong token")?;
                    counts[0].fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            }));
        }
        let (stop, counts_ref) = (&stop, &counts);
        abusers.push(scope.spawn(move || slow_clients(addr, stop, &counts_ref[1])));
        abusers.push(scope.spawn(move || oversize(addr, stop, wrong_tokens / 50, &counts_ref[2])));
        abusers.push(scope.spawn(move || garbage(addr, stop, wrong_tokens / 10, &counts_ref[3])));
        let mut measured = Ok(());
        for _ in 0..calls - half {
            match execute_true(&mut legit) {
                Ok(d) => out.latency.server.push_ms(d),
                Err(e) => {
                    measured = Err(e);
                    break;
                }
            }
        }
        // The wrong-token threads are bounded by count; the rest run
        // until they are. Every thread is stopped and joined before any
        // error is returned (a scope waits for them all).
        let mut joined = Vec::new();
        for a in abusers.drain(..2) {
            joined.push(a.join());
        }
        stop.store(true, Ordering::Relaxed);
        for a in abusers {
            joined.push(a.join());
        }
        for j in joined {
            j.map_err(|_| Error("http_abuse: an abuser panicked".into()))??;
        }
        measured
    });
    result?;
    for _ in half..calls {
        out.latency.baseline.push_ms(execute_true(&mut legit)?);
    }
    out.wrong_tokens = counts[0].load(Ordering::Relaxed);
    out.slow = counts[1].load(Ordering::Relaxed);
    out.oversize = counts[2].load(Ordering::Relaxed);
    out.garbage = counts[3].load(Ordering::Relaxed);
    drop(legit);
    hs.terminate(Duration::from_secs(10))?;
    Ok(Some(out))
}

/// Opens slow clients up to a quarter of the connection limit, each
/// trickling a request head a byte every 100 ms (so the header timeout
/// ends them); replaces those the server drops, until `stop`.
fn slow_clients(addr: SocketAddr, stop: &AtomicBool, count: &AtomicUsize) -> Result<(), Error> {
    let head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\nX-Slow: ";
    let mut clients: Vec<(TcpStream, usize)> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        while clients.len() < MAX_CONNECTIONS / 4 {
            let s = TcpStream::connect(addr)
                .map_err(|e| Error(format!("http_abuse: a slow client: {e}")))?;
            clients.push((s, 0));
            count.fetch_add(1, Ordering::Relaxed);
        }
        clients.retain_mut(|(s, sent)| {
            let byte = head.get(*sent).copied().unwrap_or(b'x');
            *sent += 1;
            s.write_all(&[byte]).is_ok()
        });
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// `n` bodies over the limit (declared), until `stop`: each `413`.
fn oversize(
    addr: SocketAddr,
    stop: &AtomicBool,
    n: usize,
    count: &AtomicUsize,
) -> Result<(), Error> {
    for _ in 0..n {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut s = TcpStream::connect(addr)
            .map_err(|e| Error(format!("http_abuse: an oversize body: {e}")))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| Error(format!("http_abuse: {e}")))?;
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nAccept: application/json\r\nContent-Length: 1073741824\r\n\r\n"
        );
        let _ = s.write_all(head.as_bytes());
        let mut buf = [0u8; 12];
        let mut got = 0;
        while got < buf.len() {
            match s.read(&mut buf[got..]) {
                Ok(0) | Err(_) => break,
                Ok(k) => got += k,
            }
        }
        if !buf.starts_with(b"HTTP/1.1 413") {
            return Err(Error(format!(
                "http_abuse: an oversize body got {:?}",
                String::from_utf8_lossy(&buf[..got])
            )));
        }
        count.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// `n` SSE reconnects and requests with garbage session ids, until `stop`.
fn garbage(
    addr: SocketAddr,
    stop: &AtomicBool,
    n: usize,
    count: &AtomicUsize,
) -> Result<(), Error> {
    let auth = format!("Bearer {TOKEN}");
    let mut c = Conn::open(addr)?;
    let ids = ["0", "not-a-session", "../../etc/passwd", "%00%ff"];
    for k in 0..n {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let id = ids[k % ids.len()];
        let (status, want): (_, &[u16]) = if k % 2 == 0 {
            let h = [
                ("Authorization", auth.as_str()),
                ("Accept", "text/event-stream"),
                ("Last-Event-ID", id),
                ("Mcp-Session-Id", id),
            ];
            (send(&mut c, addr, "GET", &h, b"")?, &[405])
        } else {
            let h = [
                ("Authorization", auth.as_str()),
                ("Accept", "application/json"),
                ("Mcp-Session-Id", id),
            ];
            let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
            (send(&mut c, addr, "POST", &h, ping)?, &[400, 404])
        };
        check(status, want, "a garbage session id")?;
        count.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}
