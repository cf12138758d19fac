//! The checks every request on the main listener passes before routing
//! (SPEC §11): one `Host`, and on a loopback bind one that names loopback
//! (DNS rebinding; the metrics listener checks these two as well), `Origin`
//! against the allowed list, and the bearer token (not for `/healthz`,
//! `/livez`).

use std::net::SocketAddr;

use hyper::HeaderMap;
use hyper::header;

use super::settings::{HttpSettings, Origins};

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

/// On a loopback bind, `Host` must name loopback: a page on another site
/// that rebinds its name to 127.0.0.1 sends its own name.
pub fn host(settings: &HttpSettings, headers: &HeaderMap) -> Result<(), &'static str> {
    host_on(settings.addr, headers)
}

/// [`host`] for a listener bound on `listen` (the metrics listener too).
pub fn host_on(listen: SocketAddr, headers: &HeaderMap) -> Result<(), &'static str> {
    if !listen.ip().is_loopback() {
        return Ok(());
    }
    match headers.get(header::HOST).and_then(|v| v.to_str().ok()) {
        Some(h) if is_loopback_authority(h) => Ok(()),
        _ => Err("Host must be localhost, 127.0.0.1 or [::1] on a loopback listener"),
    }
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

/// A request with an `Origin` must come from an allowed one.
pub fn origin(settings: &HttpSettings, headers: &HeaderMap) -> Result<(), &'static str> {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("").trim().to_ascii_lowercase();
    if settings.origins.allows(&origin) {
        Ok(())
    } else {
        Err("Origin not allowed (MCP_EXEC_HTTP_ALLOWED_ORIGINS)")
    }
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

/// Whether the request carries the token (always, when none is set).
pub fn authorized(settings: &HttpSettings, headers: &HeaderMap) -> bool {
    authorization(settings, headers).is_ok()
}

/// [`authorized`], with the `401` text when not: a missing header, one that
/// is not `Bearer <token>`, and a wrong token are told apart (the token
/// itself is never echoed).
pub fn authorization(settings: &HttpSettings, headers: &HeaderMap) -> Result<(), &'static str> {
    match &settings.token {
        Some(token) => bearer(token, headers),
        None => Ok(()),
    }
}

/// Whether `headers` carry `Authorization: Bearer <token>`, with the three
/// texts of [`authorization`] when not (the platform listeners use it too).
pub fn bearer(token: &[u8], headers: &HeaderMap) -> Result<(), &'static str> {
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
        let settings = HttpSettings {
            addr: "127.0.0.1:0".parse().unwrap(),
            token: Some(b"secret".to_vec()),
            origins: Origins::Default,
            session_idle: std::time::Duration::from_secs(1),
            max_connections: 1,
        };
        let with = |value: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(v) = value {
                h.insert(header::AUTHORIZATION, v.parse().unwrap());
            }
            authorization(&settings, &h)
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
    fn tokens_compare_equal_only_when_every_byte_is() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secrets"));
    }
}
