//! The one gate every request of every listener passes before it is
//! routed (docs/security.md): the MCP HTTP, metrics, envd, sandboxd REST
//! and sandboxd gRPC listeners each hold a [`Gate`] and map a [`Refusal`]
//! to their own wire (an HTTP status and body, a Connect or gRPC code).
//!
//! In order:
//! 1. one `Host` (RFC 9112 §3.2: more is `400`);
//! 2. on a loopback bind, a `Host` (or HTTP/2 `:authority`) naming
//!    loopback: a page that rebinds its name to 127.0.0.1 sends its own
//!    name (DNS rebinding), `403`;
//! 3. an `Origin`, when sent, from the allowed ones
//!    (`MCP_EXEC_HTTP_ALLOWED_ORIGINS`; loopback by default), `403`;
//! 4. when a token is set, the token — as `Authorization: Bearer <t>`, or
//!    as the protocol's own header where it has one (envd's
//!    `X-Access-Token`) — compared in constant time, `401`.
//!
//! A probe ([`PROBES`]: the paths a kubelet or a load balancer asks without
//! a token) passes 1–3 and not 4; nothing else skips a step.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::header::{self, HeaderName};
use hyper::{HeaderMap, StatusCode, Uri};

/// The unauthenticated paths of every listener: (listener, method, path).
/// Each keeps the `Host` and `Origin` rules; every other path of every
/// listener needs the token when one is set. docs/security.md has the same
/// table.
pub const PROBES: &[(&str, &str, &str)] = &[
    ("mcp", "GET", "/healthz"),
    ("mcp", "GET", "/livez"),
    ("metrics", "GET", "/healthz"),
    ("metrics", "GET", "/livez"),
    ("metrics", "GET", "/metrics"),
    ("sandboxd-rest", "GET", "/v1/health"),
    ("sandboxd-rest", "HEAD", "/v1/health"),
    ("envd", "GET", "/health"),
    ("envd", "HEAD", "/health"),
];

/// Whether `method path` is one of `listener`'s probes.
pub fn is_probe(listener: &str, method: &str, path: &str) -> bool {
    PROBES
        .iter()
        .any(|(l, m, p)| *l == listener && *m == method && *p == path)
}

/// Which `Origin`s may call.
#[derive(Debug, Clone)]
pub enum Origins {
    /// `http(s)://localhost`, `127.0.0.1`, `[::1]`, any port.
    Default,
    /// `MCP_EXEC_HTTP_ALLOWED_ORIGINS`, lower-cased; `*` allows any.
    List(Vec<String>),
}

/// Why a request was refused; each listener renders it in its own wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// More than one `Host`: `400`.
    Host(&'static str),
    /// A `Host` that does not name loopback on a loopback bind, or an
    /// `Origin` not allowed: `403`.
    Forbidden(&'static str),
    /// The token is set and the request does not carry it: `401`.
    Token(&'static str),
}

impl Refusal {
    /// The HTTP status of the refusal.
    pub fn status(self) -> StatusCode {
        match self {
            Refusal::Host(_) => StatusCode::BAD_REQUEST,
            Refusal::Forbidden(_) => StatusCode::FORBIDDEN,
            Refusal::Token(_) => StatusCode::UNAUTHORIZED,
        }
    }

    /// What is wrong, for the response body (never the token).
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Host(m) | Refusal::Forbidden(m) | Refusal::Token(m) => m,
        }
    }
}

/// One listener's gate: where it is bound, our token (when set), the
/// allowed origins, and the protocol's own token header. Cheap to clone.
#[derive(Clone)]
pub struct Gate {
    addr: SocketAddr,
    token: Option<Arc<[u8]>>,
    origins: Arc<Origins>,
    token_header: Option<HeaderName>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("origins", &self.origins)
            .field("token_header", &self.token_header)
            .finish()
    }
}

impl Gate {
    /// The gate of a listener bound on `addr`; `token_header` is the
    /// protocol's own header for the token, beside `Authorization: Bearer`.
    pub fn new(
        addr: SocketAddr,
        token: Option<&[u8]>,
        origins: Arc<Origins>,
        token_header: Option<HeaderName>,
    ) -> Gate {
        Gate {
            addr,
            token: token.map(Arc::from),
            origins,
            token_header,
        }
    }

    /// The same gate for a listener bound on `addr` (a port of 0 resolved).
    pub fn on(&self, addr: SocketAddr) -> Gate {
        Gate {
            addr,
            ..self.clone()
        }
    }

    /// Where the listener is bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether a token is set (and so checked on every request but probes).
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// Steps 1–3: what a probe passes too.
    pub fn probe(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        one_host(headers).map_err(Refusal::Host)?;
        self.host(uri, headers).map_err(Refusal::Forbidden)?;
        self.origin(headers).map_err(Refusal::Forbidden)
    }

    /// Every step.
    pub fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        self.probe(uri, headers)?;
        self.token(headers).map_err(Refusal::Token)
    }

    /// Whether the request carries the token (always, when none is set).
    pub fn authorized(&self, headers: &HeaderMap) -> bool {
        self.token(headers).is_ok()
    }

    /// Step 2: on a loopback bind, `Host` (or `:authority` where no `Host`
    /// is sent) must name loopback.
    pub fn host(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), &'static str> {
        if !self.addr.ip().is_loopback() {
            return Ok(());
        }
        let host = match headers.get(header::HOST) {
            Some(h) => h.to_str().ok(),
            None => uri.authority().map(|a| a.as_str()),
        };
        match host {
            Some(h) if is_loopback_authority(h) => Ok(()),
            _ => Err("Host must be localhost, 127.0.0.1 or [::1] on a loopback listener"),
        }
    }

    /// Step 3: a request with an `Origin` must come from an allowed one.
    pub fn origin(&self, headers: &HeaderMap) -> Result<(), &'static str> {
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        let origin = origin.to_str().unwrap_or("").trim().to_ascii_lowercase();
        if self.origins.allows(&origin) {
            Ok(())
        } else {
            Err("Origin not allowed (MCP_EXEC_HTTP_ALLOWED_ORIGINS)")
        }
    }

    /// Step 4, with the `401` text when it fails: a missing header, one that
    /// is not `Bearer <token>`, and a wrong token are told apart (the token
    /// itself is never echoed). Where the protocol has a header of its own,
    /// that header, when present, decides alone (a wrong one is wrong even
    /// beside a right bearer).
    pub fn token(&self, headers: &HeaderMap) -> Result<(), &'static str> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        let Some(own) = &self.token_header else {
            return bearer(token, headers);
        };
        if let Some(given) = headers.get(own) {
            return if same(given.as_bytes().trim_ascii(), token) {
                Ok(())
            } else {
                Err("the access token is wrong")
            };
        }
        bearer(token, headers).map_err(|why| {
            if headers.contains_key(header::AUTHORIZATION) {
                why
            } else {
                "a token is required (Authorization: Bearer <token>, or X-Access-Token: <token>)"
            }
        })
    }
}

/// The host names a loopback listener answers to.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// `host[:port]` without its port, lower-cased; anything else whole (so it
/// names no host in particular).
fn host_part(authority: &str) -> String {
    let a = authority.trim().to_ascii_lowercase();
    let is_port = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if a.starts_with('[') {
        // Only `:port` may follow the bracket: `[::1]evil` is not `[::1]`
        // (found by fuzzing, FUZZING.md).
        return match a.find(']').map(|end| a.split_at(end + 1)) {
            Some((host, rest))
                if rest.is_empty() || rest.strip_prefix(':').is_some_and(is_port) =>
            {
                host.to_owned()
            }
            _ => a,
        };
    }
    match a.rsplit_once(':') {
        Some((host, port)) if is_port(port) => host.to_owned(),
        _ => a,
    }
}

/// Whether `authority` names the loopback interface (any port).
pub fn is_loopback_authority(authority: &str) -> bool {
    LOOPBACK_HOSTS.contains(&host_part(authority).as_str())
}

/// A request has at most one `Host` (RFC 9112 §3.2: a server must answer
/// `400` to more): with two, the rebinding check could pass on one while a
/// proxy or a handler read the other.
pub fn one_host(headers: &HeaderMap) -> Result<(), &'static str> {
    if headers.get_all(header::HOST).iter().nth(1).is_some() {
        return Err("a request carries one Host header, not several");
    }
    Ok(())
}

impl Origins {
    /// Whether the lower-cased `origin` (`scheme://host[:port]`) is allowed.
    pub fn allows(&self, origin: &str) -> bool {
        let Some((scheme, authority)) = origin.split_once("://") else {
            return false;
        };
        if scheme != "http" && scheme != "https" {
            return false;
        }
        match self {
            Origins::Default => is_loopback_authority(authority),
            Origins::List(list) => list.iter().any(|allowed| {
                allowed == "*"
                    || allowed == origin
                    // An entry without a port allows that origin on any port.
                    || (allowed.matches(':').count() == 1
                        && *allowed == format!("{scheme}://{}", host_part(authority)))
            }),
        }
    }
}

/// Whether `headers` carry `Authorization: Bearer <token>`, with the three
/// texts of [`Gate::token`] when not.
fn bearer(token: &[u8], headers: &HeaderMap) -> Result<(), &'static str> {
    let Some(given) = headers.get(header::AUTHORIZATION) else {
        return Err("a bearer token is required (Authorization: Bearer <token>)");
    };
    let malformed = "the Authorization header must be \"Bearer <token>\"";
    let Some((scheme, credentials)) = given.to_str().ok().and_then(|g| g.trim().split_once(' '))
    else {
        return Err(malformed);
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(malformed);
    }
    if same(credentials.trim().as_bytes(), token) {
        Ok(())
    } else {
        Err("the bearer token is wrong")
    }
}

/// Compares in time independent of where the bytes differ (the length is
/// not secret: it is checked first).
pub fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_name_loopback_with_or_without_a_port() {
        for ok in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1:1",
            "[::1]",
            "[::1]:80",
        ] {
            assert!(is_loopback_authority(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:80",
            "127.0.0.2",
            "[::2]:1",
            "",
        ] {
            assert!(!is_loopback_authority(bad), "{bad}");
        }
    }

    #[test]
    fn only_a_port_may_follow_a_bracketed_loopback_address() {
        // Found by the `http_checks` fuzz target: everything after `]` was
        // ignored, so these counted as `[::1]`.
        for bad in [
            "[::1]evil.example",
            "[::1]:/app.example",
            "[::1]:80x",
            "[::1]]",
        ] {
            assert!(!is_loopback_authority(bad), "{bad}");
            assert!(!Origins::Default.allows(&format!("http://{bad}")), "{bad}");
        }
        let listed = Origins::List(vec!["https://[::1]:8443".into()]);
        assert!(listed.allows("https://[::1]:8443"));
        assert!(!listed.allows("https://[::1]:8443evil"));
    }

    #[test]
    fn the_default_origins_are_loopback_over_http_and_https_only() {
        let o = Origins::Default;
        assert!(o.allows("http://localhost:3000"));
        assert!(o.allows("https://127.0.0.1"));
        assert!(o.allows("http://[::1]:9"));
        assert!(!o.allows("http://evil.example"));
        assert!(!o.allows("ftp://localhost"));
        assert!(!o.allows("null"));
    }

    #[test]
    fn a_listed_origin_without_a_port_allows_any_port() {
        let o = Origins::List(vec![
            "https://app.example".into(),
            "http://x.example:8080".into(),
        ]);
        assert!(o.allows("https://app.example"));
        assert!(o.allows("https://app.example:444"));
        assert!(o.allows("http://x.example:8080"));
        assert!(!o.allows("http://x.example:8081"));
        assert!(!o.allows("http://app.example"));
    }

    #[test]
    fn a_missing_a_malformed_and_a_wrong_token_get_three_different_texts() {
        let gate = Gate::new(
            "127.0.0.1:0".parse().unwrap(),
            Some(b"secret"),
            Arc::new(Origins::Default),
            None,
        );
        let with = |value: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(v) = value {
                h.insert(header::AUTHORIZATION, v.parse().unwrap());
            }
            gate.token(&h)
        };
        assert_eq!(with(Some("Bearer secret")), Ok(()));
        let missing = with(None).unwrap_err();
        let malformed = with(Some("Basic c2VjcmV0")).unwrap_err();
        let wrong = with(Some("Bearer guess")).unwrap_err();
        assert!(missing.contains("required"), "{missing}");
        assert!(malformed.contains("\"Bearer <token>\""), "{malformed}");
        assert!(
            wrong.contains("wrong") && !wrong.contains("guess"),
            "{wrong}"
        );
        assert!(missing != malformed && malformed != wrong && missing != wrong);
    }

    #[test]
    fn a_protocol_s_own_token_header_decides_alone_when_present() {
        let gate = Gate::new(
            "127.0.0.1:0".parse().unwrap(),
            Some(b"secret"),
            Arc::new(Origins::Default),
            Some(HeaderName::from_static("x-access-token")),
        );
        let with = |pairs: &[(&str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(HeaderName::try_from(*k).unwrap(), v.parse().unwrap());
            }
            gate.token(&h)
        };
        assert_eq!(with(&[("x-access-token", "secret")]), Ok(()));
        assert_eq!(with(&[("authorization", "Bearer secret")]), Ok(()));
        let wrong = with(&[
            ("x-access-token", "guess"),
            ("authorization", "Bearer secret"),
        ]);
        assert_eq!(wrong, Err("the access token is wrong"));
        assert!(with(&[]).unwrap_err().contains("X-Access-Token"));
    }

    #[test]
    fn a_probe_keeps_the_host_and_origin_rules_but_needs_no_token() {
        let gate = Gate::new(
            "127.0.0.1:0".parse().unwrap(),
            Some(b"secret"),
            Arc::new(Origins::Default),
            None,
        );
        let uri: Uri = "/healthz".parse().unwrap();
        let with = |pairs: &[(&str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(HeaderName::try_from(*k).unwrap(), v.parse().unwrap());
            }
            h
        };
        assert_eq!(gate.probe(&uri, &with(&[("host", "localhost:1")])), Ok(()));
        let token = gate.check(&uri, &with(&[("host", "localhost:1")]));
        assert!(matches!(token, Err(Refusal::Token(_))), "{token:?}");
        let foreign = gate.probe(&uri, &with(&[("host", "evil.example")]));
        assert!(matches!(foreign, Err(Refusal::Forbidden(_))), "{foreign:?}");
        let origin = gate.probe(
            &uri,
            &with(&[("host", "localhost"), ("origin", "http://evil.example")]),
        );
        assert!(matches!(origin, Err(Refusal::Forbidden(_))), "{origin:?}");
        let two = gate.probe(&uri, &with(&[("host", "localhost"), ("host", "localhost")]));
        assert!(matches!(two, Err(Refusal::Host(_))), "{two:?}");
        assert!(is_probe("envd", "GET", "/health") && !is_probe("envd", "POST", "/health"));
        assert!(
            !is_probe("mcp", "GET", "/metrics"),
            "metrics needs the token on the MCP listener"
        );
    }

    #[test]
    fn tokens_compare_equal_only_when_every_byte_is() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secrets"));
    }
}
