//! The HTTP listener's settings, validated once at start-up. Every error
//! names its setting; `main` exits 2 with it (security settings fail closed).

use std::net::SocketAddr;
use std::time::Duration;

use crate::config::Config;
use crate::net::gate::Gate;
pub use crate::net::gate::Origins;

/// The main listener's settings.
pub struct HttpSettings {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The bearer token, when one is set.
    pub token: Option<Vec<u8>>,
    /// Allowed origins.
    pub origins: Origins,
    /// `MCP_EXEC_HTTP_SESSION_IDLE`.
    pub session_idle: Duration,
    /// `MCP_EXEC_HTTP_MAX_CONNECTIONS`.
    pub max_connections: usize,
}

impl HttpSettings {
    /// The gate of the main listener, bound on `addr`.
    pub fn gate(&self, addr: SocketAddr) -> Gate {
        Gate::new(
            addr,
            self.token.as_deref(),
            std::sync::Arc::new(self.origins.clone()),
            None,
        )
    }
}

impl std::fmt::Debug for HttpSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSettings")
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("origins", &self.origins)
            .finish_non_exhaustive()
    }
}

/// Parses a listen address (`127.0.0.1:8080`, `[::1]:8080`; port 0 picks
/// a free one).
pub fn listen_address(name: &str, raw: &str) -> Result<SocketAddr, String> {
    raw.trim().parse().map_err(|_| {
        format!(
            "{name}={raw:?} is not a listen address (IP:PORT, e.g. 127.0.0.1:8080 or [::1]:8080)"
        )
    })
}

impl HttpSettings {
    /// The settings, or `None` when HTTP is off.
    pub fn from_config(c: &Config) -> Result<Option<HttpSettings>, String> {
        let Some(raw) = &c.http else {
            return Ok(None);
        };
        let addr = listen_address("MCP_EXEC_HTTP (--http)", raw)?;
        let token = token(c)?;
        if token.is_none() && !addr.ip().is_loopback() && !c.http_insecure {
            return Err(format!(
                "refusing to serve HTTP on the non-loopback address {addr} without a token: \
                 set MCP_EXEC_HTTP_TOKEN_FILE (or MCP_EXEC_HTTP_TOKEN), or MCP_EXEC_HTTP_INSECURE=1"
            ));
        }
        let origins = origins(c)?;
        let max_connections = c.http_max_connections()?;
        Ok(Some(HttpSettings {
            addr,
            token,
            origins,
            session_idle: c.http_session_idle,
            max_connections,
        }))
    }
}

/// Our bearer token (`MCP_EXEC_HTTP_TOKEN_FILE`, else `MCP_EXEC_HTTP_TOKEN`),
/// when one is set: the HTTP listener's, and the one the platform listeners
/// check when a platform sends it.
pub fn token(c: &Config) -> Result<Option<Vec<u8>>, String> {
    let token = match (&c.http_token_file, &c.http_token) {
        // `MCP_EXEC_HTTP_TOKEN_FILE="$FILE"` with `FILE` unset: the
        // operator meant a token, so serving without one is refused.
        (Some(path), _) if path.trim().is_empty() => {
            return Err(
                "MCP_EXEC_HTTP_TOKEN_FILE is set but empty: name the token file, \
                        or unset the variable"
                    .into(),
            );
        }
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("MCP_EXEC_HTTP_TOKEN_FILE={path:?} cannot be read: {e}"))?;
            let t = text.trim();
            if t.is_empty() {
                return Err(format!("MCP_EXEC_HTTP_TOKEN_FILE={path:?} is empty"));
            }
            Some(t.as_bytes().to_vec())
        }
        (None, Some(t)) if !t.0.trim().is_empty() => Some(t.0.trim().as_bytes().to_vec()),
        (None, Some(_)) => {
            return Err(
                "MCP_EXEC_HTTP_TOKEN is set but empty (an unset shell variable?): \
                        give the token, or unset the variable to serve without one"
                    .into(),
            );
        }
        (None, None) => None,
    };
    // A request's `Authorization` is compared only when it is visible
    // ASCII, so a token with other bytes could never be presented: refuse
    // it here rather than lock every client out (found by fuzzing).
    if let Some(t) = &token
        && !t.iter().all(|&b| (0x20..0x7f).contains(&b))
    {
        let var = if c.http_token_file.is_some() {
            "MCP_EXEC_HTTP_TOKEN_FILE"
        } else {
            "MCP_EXEC_HTTP_TOKEN"
        };
        return Err(format!(
            "{var}: the token must be printable ASCII (a client sends it in an HTTP header)"
        ));
    }
    Ok(token)
}

/// The allowed `Origin`s (`MCP_EXEC_HTTP_ALLOWED_ORIGINS`, else loopback).
pub fn origins(c: &Config) -> Result<Origins, String> {
    Ok(match &c.http_allowed_origins {
        None => Origins::Default,
        Some(raw) => Origins::List(origin_list(raw)?),
    })
}

/// `scheme://host[:port]` entries (no path), or `*`.
fn origin_list(raw: &str) -> Result<Vec<String>, String> {
    let bad = |e: &str| {
        format!(
            "MCP_EXEC_HTTP_ALLOWED_ORIGINS: {e:?} is not an origin (http(s)://host[:port], or *)"
        )
    };
    let mut list = Vec::new();
    for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let e = entry.to_ascii_lowercase();
        if e != "*" {
            let Some((scheme, authority)) = e.split_once("://") else {
                return Err(bad(entry));
            };
            if (scheme != "http" && scheme != "https")
                || authority.is_empty()
                || authority.contains(['/', '?', '#', '@', ' '])
            {
                return Err(bad(entry));
            }
            // Browsers send an `Origin` in ASCII (IDNs as punycode), and a
            // header that is not ASCII is never allowed: such an entry could
            // never match (found by fuzzing, FUZZING.md).
            if !authority.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(format!(
                    "MCP_EXEC_HTTP_ALLOWED_ORIGINS: {entry:?} is not ASCII (write an international name in punycode, xn--…)"
                ));
            }
        }
        list.push(e.trim_end_matches('/').to_owned());
    }
    if list.is_empty() {
        return Err("MCP_EXEC_HTTP_ALLOWED_ORIGINS is empty".into());
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(http: &str) -> Config {
        Config {
            http: Some(http.into()),
            ..Config::default()
        }
    }

    #[test]
    fn a_non_loopback_bind_needs_a_token_or_insecure() {
        let err = HttpSettings::from_config(&config("0.0.0.0:8080")).unwrap_err();
        assert!(err.contains("without a token"), "{err}");
        let mut c = config("0.0.0.0:8080");
        c.http_insecure = true;
        assert!(HttpSettings::from_config(&c).is_ok());
        c.http_insecure = false;
        c.http_token = Some(crate::config::Secret("t".into()));
        assert!(HttpSettings::from_config(&c).is_ok());
        assert!(HttpSettings::from_config(&config("127.0.0.1:0")).is_ok());
    }

    #[test]
    fn a_token_variable_set_but_empty_is_refused_rather_than_serving_without_a_token() {
        for (file, token) in [(None, Some("")), (None, Some("  ")), (Some(""), None)] {
            let mut c = config("127.0.0.1:0");
            c.http_token_file = file.map(str::to_owned);
            c.http_token = token.map(|t| crate::config::Secret(t.into()));
            let e = HttpSettings::from_config(&c).unwrap_err();
            assert!(e.contains("set but empty"), "{e}");
        }
    }

    #[test]
    fn bad_addresses_files_and_origins_name_their_setting() {
        let e = HttpSettings::from_config(&config("localhost")).unwrap_err();
        assert!(e.contains("MCP_EXEC_HTTP"), "{e}");
        let mut c = config("127.0.0.1:0");
        c.http_token_file = Some("/nonexistent/token".into());
        let e = HttpSettings::from_config(&c).unwrap_err();
        assert!(e.contains("MCP_EXEC_HTTP_TOKEN_FILE"), "{e}");
        let mut c = config("127.0.0.1:0");
        c.http_allowed_origins = Some("localhost:3000".into());
        let e = HttpSettings::from_config(&c).unwrap_err();
        assert!(e.contains("MCP_EXEC_HTTP_ALLOWED_ORIGINS"), "{e}");
    }

    #[test]
    fn a_token_that_is_not_printable_ascii_is_refused_because_no_client_could_send_it() {
        // Found by the `http_checks` fuzz target: such a token was accepted
        // and then no `Authorization` header could ever match it.
        for token in ["p\u{e4}ss", "tab\there", "nul\0"] {
            let mut c = config("127.0.0.1:0");
            c.http_token = Some(crate::config::Secret(token.into()));
            let e = HttpSettings::from_config(&c).unwrap_err();
            assert!(
                e.contains("MCP_EXEC_HTTP_TOKEN") && !e.contains(token),
                "{e}"
            );
        }
        let mut c = config("127.0.0.1:0");
        c.http_token = Some(crate::config::Secret("s3cr3t-Token_+/=".into()));
        assert!(HttpSettings::from_config(&c).is_ok());
    }

    #[test]
    fn an_origin_that_is_not_ascii_is_refused_because_no_request_could_match_it() {
        // Found by the `http_checks` fuzz target: the entry was accepted and
        // then silently matched nothing.
        for raw in ["https://bücher.example", "http://a\u{7f}b"] {
            let mut c = config("127.0.0.1:0");
            c.http_allowed_origins = Some(raw.into());
            let e = HttpSettings::from_config(&c).unwrap_err();
            assert!(e.contains("MCP_EXEC_HTTP_ALLOWED_ORIGINS"), "{e}");
        }
        let mut c = config("127.0.0.1:0");
        c.http_allowed_origins = Some("https://xn--bcher-kva.example".into());
        assert!(HttpSettings::from_config(&c).is_ok());
    }
}
