//! `mcp-exec health URL` (docs/http.md), the probe *client*: a health check for
//! exec probes and image `HEALTHCHECK`s in images without curl. Exit 0 when
//! `URL` answers `200`, 1 otherwise (why on stderr), 2 for a malformed URL.
//! The endpoints it probes (`/healthz`, `/livez`) are served by the HTTP
//! transport, not here.
//!
//! One HTTP/1.1 `GET` over a plain `TcpStream`, hand-written because it is
//! tiny and a client crate would add to every image: `http://` only,
//! `HOST[:PORT][/PATH]` with `HOST` a name, an IPv4 address or a bracketed
//! IPv6 one (port 80 by default); no redirects, no TLS, no user info. Only
//! the status line is read. The whole check (name lookup excepted: std's
//! resolver has no timeout) is bounded by [`TIMEOUT`].
//!
//! Authorization: when `MCP_EXEC_HTTP_TOKEN_FILE` (preferred, as for the
//! server) or `MCP_EXEC_HTTP_TOKEN` is set, the request carries
//! `Authorization: Bearer <token>` — the same environment as the server's,
//! so a probe run inside the container can reach endpoints that need it
//! (`/healthz` itself does not). An unreadable token file is an error (exit 1).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// The bound on one check.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `mcp-exec health` with the arguments after `health`; returns the exit code.
pub fn main(args: &[String]) -> i32 {
    let [url] = args else {
        eprintln!("usage: mcp-exec health http://HOST[:PORT]/PATH");
        return 2;
    };
    let target = match Target::parse(url) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("mcp-exec health: {url:?}: {e}");
            return 2;
        }
    };
    let result = token().and_then(|token| check(&target, token.as_deref(), TIMEOUT));
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("mcp-exec health: {url}: {e}");
            1
        }
    }
}

/// The bearer token from the environment, if one is set.
fn token() -> Result<Option<String>, String> {
    if let Some(path) = std::env::var_os("MCP_EXEC_HTTP_TOKEN_FILE").filter(|p| !p.is_empty()) {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading MCP_EXEC_HTTP_TOKEN_FILE {}: {e}", path.display()))?;
        return Ok(Some(text.trim().to_owned()));
    }
    Ok(std::env::var("MCP_EXEC_HTTP_TOKEN")
        .ok()
        .filter(|t| !t.is_empty()))
}

/// A parsed `http://` URL.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    /// The host as written (IPv6 in brackets), for the `Host` header.
    host: String,
    port: u16,
    /// Path and query, at least `/`.
    path: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, String> {
        let rest = url
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case("http://"))
            .map(|_| &url[7..])
            .ok_or("only http:// URLs are supported")?;
        let rest = rest.split('#').next().unwrap_or_default();
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest[i..].starts_with('/') => (&rest[..i], rest[i..].to_owned()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_owned()),
        };
        if authority.contains('@') {
            return Err("user info in the URL is not supported".into());
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (addr, after) = v6.split_once(']').ok_or("unclosed [ in the host")?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or("junk after ]")?),
            };
            (format!("[{addr}]"), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), Some(p)),
                None => (authority.to_owned(), None),
            }
        };
        if host.is_empty() || host == "[]" || host.contains(char::is_whitespace) {
            return Err("no host".into());
        }
        let port = match port {
            None => 80,
            Some(p) => p.parse().map_err(|_| format!("bad port {p:?}"))?,
        };
        Ok(Target { host, port, path })
    }

    /// The host without IPv6 brackets, for the resolver.
    fn bare_host(&self) -> &str {
        self.host.trim_start_matches('[').trim_end_matches(']')
    }
}

/// `GET`s `target`; `Ok` when it answered `200`.
fn check(target: &Target, token: Option<&str>, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| format!("no answer within {}s", timeout.as_secs()))
    };
    let addrs: Vec<_> = (target.bare_host(), target.port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {}: {e}", target.host))?
        .collect();
    let mut last_error = format!("{} resolves to no address", target.host);
    let mut stream = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, left()?) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last_error = format!("connecting to {addr}: {e}"),
        }
    }
    let mut stream = stream.ok_or(last_error)?;

    let mut request = format!(
        "GET {} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: mcp-exec-health/{}\r\nAccept: */*\r\nConnection: close\r\n",
        target.path,
        target.host,
        target.port,
        env!("CARGO_PKG_VERSION")
    );
    if let Some(token) = token {
        request.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    request.push_str("\r\n");
    stream
        .set_write_timeout(Some(left()?))
        .and_then(|()| stream.write_all(request.as_bytes()))
        .map_err(|e| format!("sending the request: {e}"))?;

    // Read up to the end of the status line (bounded: 1 KiB is plenty).
    let mut head = Vec::with_capacity(128);
    let mut buf = [0u8; 256];
    while !head.contains(&b'\n') && head.len() < 1024 {
        stream
            .set_read_timeout(Some(left()?))
            .map_err(|e| format!("reading the answer: {e}"))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading the answer: {e}")),
        }
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let line = line.trim_end();
    match line.split_once(' ') {
        Some((version, status)) if version.starts_with("HTTP/1.") => {
            if status.split(' ').next() == Some("200") {
                Ok(())
            } else {
                Err(format!("answered {status}"))
            }
        }
        _ if line.is_empty() => Err("closed without an answer".into()),
        _ => Err(format!("not an HTTP/1.x answer: {line:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(host: &str, port: u16, path: &str) -> Target {
        Target {
            host: host.into(),
            port,
            path: path.into(),
        }
    }

    #[test]
    fn urls_name_host_port_and_path() {
        assert_eq!(
            Target::parse("http://127.0.0.1:8080/healthz"),
            Ok(target("127.0.0.1", 8080, "/healthz"))
        );
        assert_eq!(Target::parse("HTTP://web"), Ok(target("web", 80, "/")));
        assert_eq!(
            Target::parse("http://[::1]:9091/livez?x=1#f"),
            Ok(target("[::1]", 9091, "/livez?x=1"))
        );
        assert_eq!(Target::parse("http://h?q"), Ok(target("h", 80, "/?q")));
        assert_eq!(Target::parse("http://[::1]/"), Ok(target("[::1]", 80, "/")));
    }

    #[test]
    fn unsupported_or_malformed_urls_are_refused() {
        for url in [
            "https://h/",
            "h:80/",
            "http://",
            "http://:80/",
            "http://h:x/",
            "http://u@h/",
            "http://[::1/",
            "http://h:70000/",
        ] {
            assert!(Target::parse(url).is_err(), "{url} was accepted");
        }
    }
}
