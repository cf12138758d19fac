//! A small HTTP/1.1 client over `std::net::TcpStream` for the tests of the
//! HTTP transport and of the Kubernetes pod: one request per connection
//! (`Connection: close`), a timeout on every read and write, sized or
//! chunked bodies.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

/// One HTTP response.
#[derive(Debug)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked).
    pub body: String,
}

impl Reply {
    /// A header's value (the name in any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// Sends one request to 127.0.0.1:`port` and reads the whole response; `Err`
/// when the connection or a read fails (a server not listening yet).
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    timeout: Duration,
) -> std::io::Result<Reply> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    try_parse(&raw).ok_or_else(|| {
        std::io::Error::other(format!(
            "no HTTP response in {:?}",
            String::from_utf8_lossy(&raw)
        ))
    })
}

/// Parses a whole raw response; panics when it is not one.
pub fn parse(raw: &[u8]) -> Reply {
    try_parse(raw)
        .unwrap_or_else(|| panic!("no HTTP response in {:?}", String::from_utf8_lossy(raw)))
}

/// Parses a whole raw response; `None` without a head and a status line.
pub fn try_parse(raw: &[u8]) -> Option<Reply> {
    let text = String::from_utf8_lossy(raw);
    let (head, rest) = text.split_once("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let body = if chunked {
        let mut out = String::new();
        let mut rest = rest;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&after[..n]);
            rest = &after[n + 2..];
        }
        out
    } else {
        rest.to_owned()
    };
    Some(Reply {
        status,
        headers,
        body,
    })
}

/// Reads `c` until the server ends the stream: whether it ended (an end of
/// file, not an error or a read timeout) and how many bytes came first.
pub fn drain(c: &mut TcpStream) -> (bool, u64) {
    let mut got = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return (true, got),
            Ok(n) => got += n as u64,
            Err(_) => return (false, got),
        }
    }
}
