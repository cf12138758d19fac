//! Fuzz target `http_checks` (`fuzz/fuzz_targets/http_checks.rs`): HTTP request
//! checks (the floor's gate, net::gate, as the MCP listener holds it). What it checks, and how it reads
//! its input: [`http_checks`](fn@http_checks).

use super::Input;
use crate::config::Config;
use crate::server::transport::http::HttpSettings;

/// `http_checks`: `Host`, `Origin` and `Authorization` values against the
/// guard, on a loopback or a wildcard bind, with or without a token and an
/// origin list; allowed values look as the model says they must.
///
/// Input: a flags byte (bit 0 a wildcard bind, 1 a token, 2 an origin list;
/// bits 3–5 leave out `Host`, `Origin`, `Authorization`), then `\n`-separated
/// fields: Host, Origin, Authorization, token, origin list.
pub fn http_checks(data: &[u8]) {
    let mut input = Input { data };
    let flags = input.byte();
    let host = input.field(b'\n');
    let origin = input.field(b'\n');
    let auth = input.field(b'\n');
    let token = String::from_utf8_lossy(input.field(b'\n')).into_owned();
    let origins = String::from_utf8_lossy(input.field(b'\n')).into_owned();
    let addr = if flags & 1 == 0 {
        "127.0.0.1:0"
    } else {
        "0.0.0.0:0"
    };
    let use_token = flags & 2 != 0;
    let use_origins = flags & 4 != 0;
    let (config, _) = Config::from_lookup(
        |name| match name {
            "MCP_EXEC_HTTP" => Some(addr.to_owned()),
            "MCP_EXEC_HTTP_TOKEN" if use_token => Some(token.clone()),
            "MCP_EXEC_HTTP_ALLOWED_ORIGINS" if use_origins => Some(origins.clone()),
            "MCP_EXEC_HTTP_INSECURE" => Some("1".to_owned()),
            _ => None,
        },
        1024,
    );
    let settings = match HttpSettings::from_config(&config) {
        Ok(Some(s)) => s,
        Ok(None) => panic!("MCP_EXEC_HTTP was set"),
        // A blank token or a bad origin list: refused at start-up.
        Err(_) => return,
    };
    let gate = settings.gate(settings.addr);
    let uri = hyper::Uri::from_static("/mcp");
    let mut headers = hyper::HeaderMap::new();
    let mut put = |name: hyper::header::HeaderName, value: &[u8]| {
        if let Ok(v) = hyper::header::HeaderValue::from_bytes(value) {
            headers.insert(name, v);
        }
    };
    if flags & 8 == 0 {
        put(hyper::header::HOST, host);
    }
    if flags & 16 == 0 {
        put(hyper::header::ORIGIN, origin);
    }
    if flags & 32 == 0 {
        put(hyper::header::AUTHORIZATION, auth);
    }
    let text = |name| {
        headers
            .get(name)
            .map(|v: &hyper::header::HeaderValue| v.to_str().ok())
    };

    // Host: on a loopback bind, allowed exactly when it names loopback.
    let host_ok = gate.host(&uri, &headers).is_ok();
    if settings.addr.ip().is_loopback() {
        let expected = matches!(text(hyper::header::HOST), Some(Some(h)) if names_loopback(h));
        assert_eq!(host_ok, expected, "Host {:?}", text(hyper::header::HOST));
    } else {
        assert!(host_ok);
    }

    // Origin: absent is fine; an allowed one is http(s); by default exactly
    // the loopback names; the list's own entries are allowed.
    let origin_ok = gate.origin(&headers).is_ok();
    match text(hyper::header::ORIGIN) {
        None => assert!(origin_ok),
        Some(value) => {
            let value = value.unwrap_or("").trim().to_ascii_lowercase();
            if origin_ok {
                assert!(value.starts_with("http://") || value.starts_with("https://"));
            }
            if !use_origins {
                let expected = ["http://", "https://"]
                    .iter()
                    .any(|s| value.strip_prefix(s).is_some_and(names_loopback));
                assert_eq!(origin_ok, expected, "Origin {value:?}");
            }
        }
    }
    if use_origins {
        for entry in origins
            .split(',')
            .map(str::trim)
            .filter(|e| e.contains("://"))
        {
            let entry = entry.to_ascii_lowercase();
            let scheme_ok = entry.starts_with("http://") || entry.starts_with("https://");
            let mut h = hyper::HeaderMap::new();
            if let Ok(v) = hyper::header::HeaderValue::from_str(&entry) {
                h.insert(hyper::header::ORIGIN, v);
                assert_eq!(gate.origin(&h).is_ok(), scheme_ok, "{entry:?}");
            }
        }
    }

    // Authorization: with a token, exactly `Bearer <token>` (scheme in any
    // case, spaces around); without one, anything.
    let authorized = gate.authorized(&headers);
    match &settings.token {
        None => assert!(authorized),
        Some(t) => {
            let expected = match text(hyper::header::AUTHORIZATION) {
                Some(Some(v)) => v.trim().split_once(' ').is_some_and(|(scheme, cred)| {
                    scheme.eq_ignore_ascii_case("bearer") && cred.trim().as_bytes() == t.as_slice()
                }),
                _ => false,
            };
            assert_eq!(authorized, expected);
            let mut h = hyper::HeaderMap::new();
            let mut right = b"Bearer ".to_vec();
            right.extend_from_slice(t);
            if let Ok(v) = hyper::header::HeaderValue::from_bytes(&right) {
                h.insert(hyper::header::AUTHORIZATION, v);
                assert!(gate.authorized(&h));
            }
        }
    }
}

/// Whether a `Host` value (or an origin's authority) is `localhost`,
/// `127.0.0.1` or `[::1]`, in any case, with an optional numeric port.
fn names_loopback(value: &str) -> bool {
    let value = value.trim().to_ascii_lowercase();
    ["localhost", "127.0.0.1", "[::1]"].iter().any(|name| {
        value.strip_prefix(name).is_some_and(|rest| {
            rest.is_empty()
                || rest
                    .strip_prefix(':')
                    .is_some_and(|port| port.bytes().all(|b| b.is_ascii_digit()))
        })
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn http_checks_allow_what_the_model_allows() {
        crate::fuzzing::stable::drive("http_checks", super::http_checks, 3000);
    }
}
