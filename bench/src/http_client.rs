//! A hand-written HTTP/1.1 keep-alive client for the Streamable HTTP
//! transport (docs/http.md), and the server launched with it.
//!
//! One [`Conn`] is one TCP connection (`TCP_NODELAY`, a read and write
//! timeout on every socket operation instead of the stdio client's
//! watchdog) carrying one MCP session: `initialize` takes the
//! `Mcp-Session-Id` the server answers with, every later request sends it
//! back. A request is written with one `write` (head and body together);
//! its time stops when the whole response body has been read, and parsing
//! and checking it come after, as in [`crate::client`]. Responses are
//! `application/json` (`Content-Length` or chunked); a `text/event-stream`
//! answer (the server sends one only for a request with a progress token,
//! which the harness never sends) is read to its end and its last `data:`
//! taken. Every response is checked like the stdio client's.
//!
//! [`HttpServer::launch`] starts the binary with `--http 127.0.0.1:0` and
//! reads the bound address from its stderr (a file, so that its logs never
//! fill a pipe nobody reads). A server built without the transport exits 2
//! with `unknown argument "--http"`: that is `None`, and the
//! scenarios are skipped, not failed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Error;
use crate::client::{self, Launch, Server};

/// The bound on every read and write of a connection.
pub const IO_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a launched server may take to print its HTTP address.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);

/// A server with the HTTP transport on, and its stdio as well.
pub struct HttpServer {
    /// The process and its stdio session (usable only when launched with stdio).
    pub server: Server,
    /// Where it listens for HTTP.
    pub addr: SocketAddr,
    /// Its stderr, removed when the server is dropped.
    stderr: TempFile,
}

/// A file removed on drop.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl HttpServer {
    /// Starts `binary --http 127.0.0.1:0` (and `--no-stdio` unless `stdio`)
    /// with `launch`'s settings, and waits until it prints the address it
    /// bound; `None` when the binary has no HTTP transport (it refused
    /// `--http` with exit code 2).
    pub fn launch(
        binary: &Path,
        launch: &Launch,
        stdio: bool,
    ) -> Result<Option<HttpServer>, Error> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let stderr = TempFile(std::env::temp_dir().join(format!(
            "mcp-exec-bench-http-{}-{}.log",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        )));
        let mut launch = launch.clone();
        let mut args = vec!["--http".into(), "127.0.0.1:0".into()];
        if !stdio {
            args.push("--no-stdio".into());
        }
        // The launch's own arguments (another listener) after these.
        args.append(&mut launch.args);
        launch.args = args;
        launch.stderr = Some(stderr.0.clone());
        let mut server = Server::launch(binary, &launch)?;
        let deadline = Instant::now() + LISTEN_TIMEOUT;
        loop {
            let log = std::fs::read_to_string(&stderr.0).unwrap_or_default();
            if let Some(addr) = listening_addr(&log) {
                return Ok(Some(HttpServer {
                    server,
                    addr,
                    stderr,
                }));
            }
            if let Some(code) = server.exit_code()? {
                if code == 2 && log.contains("unknown argument \"--http\"") {
                    return Ok(None);
                }
                let first = log.lines().next().unwrap_or("(nothing on stderr)");
                return Err(Error(format!(
                    "the server exited with {code} before listening for HTTP: {first}"
                )));
            }
            if Instant::now() > deadline {
                return Err(Error(format!(
                    "the server printed no HTTP address within {LISTEN_TIMEOUT:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The address of another listener it printed (`mcp-exec: listening
    /// for WHAT on ADDR`), waiting up to [`LISTEN_TIMEOUT`] for the line.
    pub fn listener(&self, what: &str) -> Result<SocketAddr, Error> {
        let prefix = format!("mcp-exec: listening for {what} on ");
        let deadline = Instant::now() + LISTEN_TIMEOUT;
        loop {
            let log = std::fs::read_to_string(&self.stderr.0).unwrap_or_default();
            let found = log
                .lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .and_then(|a| a.trim().parse().ok());
            if let Some(addr) = found {
                return Ok(addr);
            }
            if Instant::now() > deadline {
                return Err(Error(format!(
                    "the server printed no address for {what} within {LISTEN_TIMEOUT:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// A new connection to it (no session yet).
    pub fn connect(&self) -> Result<Conn, Error> {
        Conn::open(self.addr)
    }

    /// A new connection with an initialized session of `protocol`.
    pub fn session(&self, protocol: &str) -> Result<Conn, Error> {
        let mut c = self.connect()?;
        c.initialize(protocol)?;
        Ok(c)
    }

    /// Ends the server with SIGTERM (stdin EOF ends only its stdio session
    /// while HTTP is on) and waits up to `timeout` for a clean exit.
    pub fn terminate(self, timeout: Duration) -> Result<(), Error> {
        self.server.terminate(timeout)
    }
}

/// The address in `mcp-exec: listening for HTTP on ADDR`.
fn listening_addr(log: &str) -> Option<SocketAddr> {
    log.lines()
        .find_map(|l| l.strip_prefix("mcp-exec: listening for HTTP on "))
        .and_then(|a| a.trim().parse().ok())
}

/// One response: its status, session header and body.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// `Mcp-Session-Id`, when present.
    pub session: Option<String>,
    /// The body (for an event stream: the last `data:` of it).
    pub body: Vec<u8>,
}

/// One keep-alive connection and the session it carries.
pub struct Conn {
    reader: BufReader<TcpStream>,
    host: String,
    session: Option<String>,
    protocol: Option<String>,
    next_id: u64,
    request: Vec<u8>,
    /// `Authorization` value sent with every request, when set.
    auth: Option<String>,
}

impl Conn {
    /// Connects to `addr`.
    pub fn open(addr: SocketAddr) -> Result<Conn, Error> {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .map_err(|e| Error(format!("connecting to {addr}: {e}")))?;
        let setup = || -> std::io::Result<()> {
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(IO_TIMEOUT))?;
            stream.set_write_timeout(Some(IO_TIMEOUT))
        };
        setup().map_err(|e| Error(format!("setting up a connection to {addr}: {e}")))?;
        Ok(Conn {
            reader: BufReader::with_capacity(64 << 10, stream),
            host: addr.to_string(),
            session: None,
            protocol: None,
            next_id: 0,
            request: Vec::with_capacity(1024),
            auth: None,
        })
    }

    /// `POST /mcp` of `body`; returns when the whole response was read, and
    /// the time from the written request to that.
    pub fn post(&mut self, body: &[u8]) -> Result<(Duration, Response), Error> {
        let r = &mut self.request;
        r.clear();
        r.extend_from_slice(b"POST /mcp HTTP/1.1\r\nHost: ");
        r.extend_from_slice(self.host.as_bytes());
        r.extend_from_slice(
            b"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
        );
        if let Some(s) = &self.session {
            r.extend_from_slice(b"Mcp-Session-Id: ");
            r.extend_from_slice(s.as_bytes());
            r.extend_from_slice(b"\r\n");
        }
        if let Some(a) = &self.auth {
            r.extend_from_slice(b"Authorization: ");
            r.extend_from_slice(a.as_bytes());
            r.extend_from_slice(b"\r\n");
        }
        if let Some(p) = &self.protocol {
            r.extend_from_slice(b"MCP-Protocol-Version: ");
            r.extend_from_slice(p.as_bytes());
            r.extend_from_slice(b"\r\n");
        }
        r.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
        r.extend_from_slice(body);
        self.reader
            .get_mut()
            .write_all(&self.request)
            .map_err(|e| Error(format!("writing a request: {e}")))?;
        let sent = Instant::now();
        let response = read_response(&mut self.reader)?;
        Ok((sent.elapsed(), response))
    }

    /// Sends `Authorization: Bearer TOKEN` with every later request.
    pub fn set_token(&mut self, token: &str) {
        self.auth = Some(format!("Bearer {token}"));
    }

    /// Sends `method path` with exactly `headers` (no session, no token)
    /// and `body`; the response. For requests outside a session, such as
    /// the abusive ones of the `http_abuse` scenario.
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, Error> {
        let mut r = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
            self.host,
            body.len()
        );
        for (k, v) in headers {
            r.push_str(&format!("{k}: {v}\r\n"));
        }
        r.push_str("\r\n");
        let stream = self.reader.get_mut();
        stream
            .write_all(r.as_bytes())
            .and_then(|()| stream.write_all(body))
            .map_err(|e| Error(format!("writing a request: {e}")))?;
        read_response(&mut self.reader)
    }

    /// Writes `request` (a whole HTTP/1.1 request, head and body, made by
    /// the caller) in one `write` and reads one response; the time from the
    /// written request to the whole response read, as [`Conn::post`] times.
    pub fn exchange(&mut self, request: &[u8]) -> Result<(Duration, Response), Error> {
        self.reader
            .get_mut()
            .write_all(request)
            .map_err(|e| Error(format!("writing a request: {e}")))?;
        let sent = Instant::now();
        let response = read_response(&mut self.reader)?;
        Ok((sent.elapsed(), response))
    }

    /// `DELETE /mcp` of this connection's session; its status.
    pub fn delete_session(&mut self) -> Result<u16, Error> {
        let session = self.session.take().unwrap_or_default();
        let auth = self.auth.clone();
        let mut headers = vec![("Mcp-Session-Id", session.as_str())];
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        Ok(self.send("DELETE", "/mcp", &headers, b"")?.status)
    }

    /// Sends a request; returns the time and its checked `result`.
    pub fn call(&mut self, method: &str, params: Value) -> Result<(Duration, Value), Error> {
        self.next_id += 1;
        let id = self.next_id;
        let body = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )?;
        let (took, r) = self.post(&body)?;
        if r.status != 200 {
            return Err(Error(format!(
                "{method}: HTTP {} {}",
                r.status,
                String::from_utf8_lossy(&r.body).trim()
            )));
        }
        let msg: Value = serde_json::from_slice(&r.body)
            .map_err(|e| Error(format!("{method}: the response body is not JSON: {e}")))?;
        if method == "initialize" {
            self.session = r.session;
        }
        Ok((took, client::check_response(msg, id)?))
    }

    /// `initialize` (taking the session id), then `notifications/initialized`.
    pub fn initialize(&mut self, protocol: &str) -> Result<Duration, Error> {
        let (took, result) = self.call("initialize", client::initialize_params(protocol))?;
        client::check_initialize(&result, protocol)?;
        if self.session.is_none() {
            return Err(Error(
                "initialize was answered without Mcp-Session-Id".into(),
            ));
        }
        self.protocol = Some(protocol.to_owned());
        let body = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}}),
        )?;
        let (_, r) = self.post(&body)?;
        if r.status != 202 {
            return Err(Error(format!(
                "notifications/initialized: expected HTTP 202, got {}",
                r.status
            )));
        }
        Ok(took)
    }

    /// Calls a tool; returns the time and its parsed JSON result.
    pub fn tool(&mut self, name: &str, args: Value) -> Result<(Duration, Value), Error> {
        let (took, result) = self.call("tools/call", json!({"name": name, "arguments": args}))?;
        Ok((took, client::tool_json(&result, name)?))
    }

    /// `ping`; its time.
    pub fn ping(&mut self) -> Result<Duration, Error> {
        self.call("ping", json!({})).map(|(took, _)| took)
    }
}

fn io(what: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error(format!("reading {what}: {e}"))
}

/// Reads one response: the head, then a body by `Content-Length`, chunked,
/// or none (`202`, `204`).
fn read_response(reader: &mut BufReader<TcpStream>) -> Result<Response, Error> {
    let mut line = Vec::new();
    let mut status = None;
    let mut session = None;
    let mut length = None;
    let mut chunked = false;
    let mut sse = false;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(io("a response head"))?;
        if n == 0 {
            return Err(Error("the server closed the connection".into()));
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        if status.is_none() {
            let code = text
                .strip_prefix("HTTP/1.1 ")
                .and_then(|rest| rest.get(..3)?.parse::<u16>().ok())
                .ok_or_else(|| Error(format!("not an HTTP/1.1 status line: {text:?}")))?;
            status = Some(code);
            continue;
        }
        if text.is_empty() {
            break;
        }
        let Some((name, value)) = text.split_once(':') else {
            return Err(Error(format!("a malformed header: {text:?}")));
        };
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "mcp-session-id" => session = Some(value.to_owned()),
            "content-length" => {
                length = Some(
                    value
                        .parse::<usize>()
                        .map_err(|_| Error(format!("a bad Content-Length: {value:?}")))?,
                );
            }
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            "content-type" => sse = value.starts_with("text/event-stream"),
            _ => {}
        }
    }
    let status = status.unwrap_or(0);
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            reader
                .read_until(b'\n', &mut line)
                .map_err(io("a chunk size"))?;
            let size = String::from_utf8_lossy(&line);
            let size = size.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| Error(format!("a bad chunk size: {size:?}")))?;
            let start = body.len();
            body.resize(start + size + 2, 0);
            reader
                .read_exact(&mut body[start..])
                .map_err(io("a chunk"))?;
            body.truncate(start + size);
            if size == 0 {
                break;
            }
        }
    } else if let Some(n) = length {
        body.resize(n, 0);
        reader
            .read_exact(&mut body)
            .map_err(io("a response body"))?;
    } else if !matches!(status, 202 | 204 | 304) {
        return Err(Error(format!(
            "HTTP {status} without Content-Length or chunked body"
        )));
    }
    if sse {
        body = last_event_data(&body)
            .ok_or_else(|| Error("an event stream without data".into()))?
            .to_vec();
    }
    Ok(Response {
        status,
        session,
        body,
    })
}

/// The last `data:` line of an event stream.
fn last_event_data(stream: &[u8]) -> Option<&[u8]> {
    stream
        .split(|&b| b == b'\n')
        .filter_map(|l| l.strip_prefix(b"data:"))
        .map(|d| d.strip_prefix(b" ").unwrap_or(d))
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_address_is_read_from_the_servers_stderr() {
        let log = "2026-11-30 INFO starting\nmcp-exec: listening for HTTP on 127.0.0.1:40123\n";
        assert_eq!(
            listening_addr(log),
            Some("127.0.0.1:40123".parse().unwrap())
        );
        assert_eq!(
            listening_addr("mcp-exec: listening for metrics on 127.0.0.1:9\n"),
            None
        );
    }

    #[test]
    fn an_event_stream_answers_with_its_last_data_line() {
        let s = b"event: message\ndata: {\"a\":1}\n\nevent: message\ndata: {\"b\":2}\n\n";
        assert_eq!(last_event_data(s), Some(&b"{\"b\":2}"[..]));
        assert_eq!(last_event_data(b"event: message\n\n"), None);
    }

    #[test]
    fn chunked_and_sized_bodies_read_alike_over_a_socket() {
        use std::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nmcp-session-id: abc\r\n\r\nhello\
                  HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2;x=1\r\nlo\r\n0\r\n\r\n\
                  HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
            )
            .unwrap();
        });
        let stream = TcpStream::connect(addr).unwrap();
        let mut reader = BufReader::new(stream);
        let a = read_response(&mut reader).unwrap();
        assert_eq!((a.status, a.session.as_deref()), (200, Some("abc")));
        assert_eq!(a.body, b"hello");
        let b = read_response(&mut reader).unwrap();
        assert_eq!((b.status, b.body.as_slice()), (200, &b"hello"[..]));
        let c = read_response(&mut reader).unwrap();
        assert_eq!((c.status, c.body.len()), (202, 0));
        server.join().unwrap();
    }
}
