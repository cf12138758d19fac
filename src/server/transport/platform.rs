//! The auth rule every platform listener follows (SPEC §21): the sandboxd
//! gRPC and REST listeners and the envd one, whose protocols carry no
//! token of their own in the calls their SDKs make.
//!
//! - **At start-up** ([`PlatformAuth::new`]): a listener on a non-loopback
//!   address without our token (`MCP_EXEC_HTTP_TOKEN_FILE` /
//!   `MCP_EXEC_HTTP_TOKEN`) needs `MCP_EXEC_PLATFORM_INSECURE=1`, which says
//!   the pod network and a NetworkPolicy are the boundary; else `main`
//!   exits 2 with a message naming the listener's flag and that switch.
//! - **Per request** ([`PlatformAuth::check`]): one `Host` (or HTTP/2
//!   `:authority`) naming loopback on a loopback bind (DNS rebinding), an
//!   `Origin` only from the allowed ones (`MCP_EXEC_HTTP_ALLOWED_ORIGINS`),
//!   and, when a token is set, the token as `Authorization: Bearer <t>` or
//!   envd's `X-Access-Token: <t>`, compared in constant time. A health
//!   probe ([`PlatformAuth::check_probe`]) passes the same checks but the
//!   token: a kubelet sends none, and a probe tells nothing.
//! - **`MCP_EXEC_PLATFORM_INSECURE=1`** says the network is the boundary:
//!   the platform listeners then check no token even when one is set (it
//!   stays the MCP listener's), so that an SDK that sends none works
//!   beside a token-protected MCP listener in one pod.
//!
//! Invariant: the checks are the main HTTP listener's own ([`guard`]),
//! not a copy; each listener only maps a [`Refusal`] to its wire (an HTTP
//! status and body, a gRPC status).

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::header::{self, HeaderName};
use hyper::{HeaderMap, StatusCode, Uri};

use super::http::guard;
use super::http::settings::{self, Origins};
use crate::config::Config;

/// envd's token header (the e2b SDK sends it when the sandbox has one).
pub const ACCESS_TOKEN: HeaderName = HeaderName::from_static("x-access-token");

/// Which platform listener (for messages and logs).
// The gRPC and envd listeners land on their own branches (issues 22, 24).
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// `--sandboxd-grpc`: `process.v1.ProcessService` over h2c.
    SandboxdGrpc,
    /// `--sandboxd-rest`: `/v1/files`, `/v1/health`, `/v1/metadata`.
    SandboxdRest,
    /// `--envd`: E2B's Connect-RPC and `/files`.
    Envd,
}

impl Platform {
    /// The setting that enables it, as messages name it.
    pub fn setting(self) -> &'static str {
        match self {
            Platform::SandboxdGrpc => "MCP_EXEC_SANDBOXD_GRPC (--sandboxd-grpc)",
            Platform::SandboxdRest => "MCP_EXEC_SANDBOXD_REST (--sandboxd-rest)",
            Platform::Envd => "MCP_EXEC_ENVD (--envd)",
        }
    }

    /// A short name (`sandboxd-grpc`, …).
    pub fn name(self) -> &'static str {
        match self {
            Platform::SandboxdGrpc => "sandboxd-grpc",
            Platform::SandboxdRest => "sandboxd-rest",
            Platform::Envd => "envd",
        }
    }
}

/// Why a request was refused; each listener renders it in its own wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// More than one `Host`: `400`.
    Host(&'static str),
    /// A `Host` that does not name loopback on a loopback bind, or an
    /// `Origin` not allowed: `403`.
    Forbidden(&'static str),
    /// The token is set and the request does not carry it: `401` (gRPC
    /// `UNAUTHENTICATED`).
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

/// One platform listener's auth: where it is bound, our token, the
/// allowed origins. Cheap to clone (the token is shared).
#[derive(Clone)]
pub struct PlatformAuth {
    platform: Platform,
    addr: SocketAddr,
    token: Option<Arc<[u8]>>,
    origins: Arc<Origins>,
}

impl std::fmt::Debug for PlatformAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlatformAuth")
            .field("platform", &self.platform)
            .field("addr", &self.addr)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

impl PlatformAuth {
    /// Parses the listen address `raw` of `platform` and applies the
    /// start-up rule; an `Err` names the setting, and `main` exits 2.
    pub fn new(platform: Platform, raw: &str, c: &Config) -> Result<PlatformAuth, String> {
        let addr = settings::listen_address(platform.setting(), raw)?;
        let token = settings::token(c)?;
        allowed_without_token(platform, addr, token.is_some(), c.platform_insecure)?;
        // Insecure: the network is the boundary; the token is MCP's alone.
        let token = token.filter(|_| !c.platform_insecure);
        Ok(PlatformAuth {
            platform,
            addr,
            token: token.map(Arc::from),
            origins: Arc::new(settings::origins(c)?),
        })
    }

    /// Which listener this is.
    pub fn platform(&self) -> Platform {
        self.platform
    }

    /// Where it is to be bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether our token is set (and so checked on every request).
    pub fn has_token(&self) -> bool {
        self.token.is_some()
    }

    /// The per-request checks, in order: one `Host`, rebinding, `Origin`,
    /// the token. `uri` gives HTTP/2's `:authority` where no `Host` is sent.
    pub fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_probe(uri, headers)?;
        match &self.token {
            None => Ok(()),
            Some(token) => token_given(token, headers).map_err(Refusal::Token),
        }
    }

    /// [`PlatformAuth::check`] without the token, for health probes
    /// (`/v1/health`, envd's `/health`).
    pub fn check_probe(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        guard::one_host(headers).map_err(Refusal::Host)?;
        if self.addr.ip().is_loopback() {
            let host = headers
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .or_else(|| uri.authority().map(|a| a.as_str()));
            if !host.is_some_and(guard::is_loopback_authority) {
                return Err(Refusal::Forbidden(
                    "Host must be localhost, 127.0.0.1 or [::1] on a loopback listener",
                ));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("").trim().to_ascii_lowercase();
            if !self.origins.allows(&origin) {
                return Err(Refusal::Forbidden(
                    "Origin not allowed (MCP_EXEC_HTTP_ALLOWED_ORIGINS)",
                ));
            }
        }
        Ok(())
    }
}

/// The start-up rule: loopback, or a token, or the operator's explicit
/// `MCP_EXEC_PLATFORM_INSECURE=1`.
pub fn allowed_without_token(
    platform: Platform,
    addr: SocketAddr,
    has_token: bool,
    insecure: bool,
) -> Result<(), String> {
    if has_token || insecure || addr.ip().is_loopback() {
        return Ok(());
    }
    Err(format!(
        "refusing to serve {} on the non-loopback address {addr} without a token: its SDKs \
         send none, so anyone who can reach the port could run commands and write files. \
         Set MCP_EXEC_PLATFORM_INSECURE=1 when the pod network and a NetworkPolicy are the \
         boundary (README: \"Platform listeners and NetworkPolicy\"), or set \
         MCP_EXEC_HTTP_TOKEN_FILE (or MCP_EXEC_HTTP_TOKEN) and have the platform send it",
        platform.setting()
    ))
}

/// The token as `X-Access-Token: <t>` or `Authorization: Bearer <t>`; an
/// `X-Access-Token` that is present decides alone (a wrong one is wrong
/// even beside a right bearer: no header is tried after a failed one).
fn token_given(token: &[u8], headers: &HeaderMap) -> Result<(), &'static str> {
    if let Some(given) = headers.get(ACCESS_TOKEN) {
        return if guard::same(given.as_bytes().trim_ascii(), token) {
            Ok(())
        } else {
            Err("the access token is wrong")
        };
    }
    guard::bearer(token, headers).map_err(|why| {
        if headers.contains_key(header::AUTHORIZATION) {
            why
        } else {
            "a token is required (Authorization: Bearer <token>, or X-Access-Token: <token>)"
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    fn auth(addr: &str, token: Option<&str>) -> PlatformAuth {
        let c = Config {
            platform_insecure: token.is_none(),
            http_token: token.map(|t| Secret(t.into())),
            ..Config::default()
        };
        PlatformAuth::new(Platform::SandboxdRest, addr, &c).unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(HeaderName::try_from(*k).unwrap(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn a_non_loopback_listener_without_a_token_needs_the_insecure_switch_and_says_so() {
        for platform in [
            Platform::SandboxdGrpc,
            Platform::SandboxdRest,
            Platform::Envd,
        ] {
            let e = PlatformAuth::new(platform, "0.0.0.0:8080", &Config::default()).unwrap_err();
            assert!(
                e.contains("MCP_EXEC_PLATFORM_INSECURE=1") && e.contains(platform.setting()),
                "{e}"
            );
        }
        let insecure = Config {
            platform_insecure: true,
            ..Config::default()
        };
        assert!(PlatformAuth::new(Platform::Envd, "0.0.0.0:49983", &insecure).is_ok());
        let with_token = Config {
            http_token: Some(Secret("t".into())),
            ..Config::default()
        };
        assert!(PlatformAuth::new(Platform::SandboxdGrpc, "[::]:9090", &with_token).is_ok());
        for loopback in ["127.0.0.1:0", "[::1]:8080"] {
            assert!(
                PlatformAuth::new(Platform::SandboxdRest, loopback, &Config::default()).is_ok()
            );
        }
    }

    #[test]
    fn a_bad_address_or_token_setting_names_its_setting() {
        let e =
            PlatformAuth::new(Platform::SandboxdRest, "localhost", &Config::default()).unwrap_err();
        assert!(
            e.contains("MCP_EXEC_SANDBOXD_REST (--sandboxd-rest)"),
            "{e}"
        );
        let c = Config {
            http_token: Some(Secret(String::new())),
            ..Config::default()
        };
        let e = PlatformAuth::new(Platform::Envd, "127.0.0.1:0", &c).unwrap_err();
        assert!(e.contains("MCP_EXEC_HTTP_TOKEN"), "{e}");
    }

    #[test]
    fn without_a_token_any_request_passes_on_a_non_loopback_listener() {
        let a = auth("0.0.0.0:8080", None);
        assert!(!a.has_token());
        let uri = Uri::from_static("/v1/health");
        assert_eq!(
            a.check(&uri, &headers(&[("host", "10.0.0.7:8080")])),
            Ok(())
        );
        assert_eq!(a.check(&uri, &HeaderMap::new()), Ok(()));
    }

    #[test]
    fn the_token_is_accepted_as_a_bearer_or_as_an_access_token_and_nothing_else() {
        let a = auth("0.0.0.0:8080", Some("s3cret"));
        let uri = Uri::from_static("/v1/health");
        let check = |pairs: &[(&str, &str)]| a.check(&uri, &headers(pairs));
        assert_eq!(check(&[("authorization", "Bearer s3cret")]), Ok(()));
        assert_eq!(check(&[("authorization", "bearer s3cret ")]), Ok(()));
        assert_eq!(check(&[("x-access-token", "s3cret")]), Ok(()));
        for wrong in [
            vec![],
            vec![("authorization", "Bearer guess")],
            vec![("authorization", "Basic czNjcmV0")],
            vec![("x-access-token", "guess")],
            vec![("x-access-token", "s3cre")],
            vec![
                ("x-access-token", "guess"),
                ("authorization", "Bearer s3cret"),
            ],
        ] {
            let got = check(&wrong);
            let Err(Refusal::Token(why)) = got else {
                panic!("{wrong:?} → {got:?}");
            };
            assert!(!why.contains("guess") && !why.contains("s3cret"), "{why}");
            assert_eq!(Refusal::Token(why).status(), StatusCode::UNAUTHORIZED);
        }
        let missing = check(&[]).unwrap_err().message();
        assert!(missing.contains("X-Access-Token"), "{missing}");
    }

    #[test]
    fn with_the_insecure_switch_the_token_is_mcps_alone_and_probes_never_need_it() {
        let c = Config {
            http_token: Some(Secret("s3cret".into())),
            platform_insecure: true,
            ..Config::default()
        };
        let a = PlatformAuth::new(Platform::SandboxdRest, "0.0.0.0:8080", &c).unwrap();
        assert!(!a.has_token());
        let uri = Uri::from_static("/v1/files/x");
        assert_eq!(a.check(&uri, &HeaderMap::new()), Ok(()));
        let secured = auth("0.0.0.0:8080", Some("s3cret"));
        assert!(secured.check(&uri, &HeaderMap::new()).is_err());
        assert_eq!(secured.check_probe(&uri, &HeaderMap::new()), Ok(()));
        let bad_origin = headers(&[("origin", "https://evil.example")]);
        assert!(secured.check_probe(&uri, &bad_origin).is_err());
    }

    #[test]
    fn a_loopback_listener_answers_loopback_hosts_only_also_as_an_http2_authority() {
        let a = auth("127.0.0.1:8080", None);
        let plain = Uri::from_static("/v1/health");
        assert_eq!(
            a.check(&plain, &headers(&[("host", "127.0.0.1:8080")])),
            Ok(())
        );
        assert_eq!(a.check(&plain, &headers(&[("host", "localhost")])), Ok(()));
        let rebound = a.check(&plain, &headers(&[("host", "evil.example:8080")]));
        assert!(matches!(rebound, Err(Refusal::Forbidden(_))), "{rebound:?}");
        assert!(matches!(
            a.check(&plain, &HeaderMap::new()),
            Err(Refusal::Forbidden(_))
        ));
        // HTTP/2 (gRPC) carries the authority in the URI, not in `Host`.
        let h2 = Uri::from_static("http://localhost:9090/process.v1.ProcessService/Execute");
        assert_eq!(a.check(&h2, &HeaderMap::new()), Ok(()));
        let h2_evil = Uri::from_static("http://evil.example:9090/x");
        assert!(a.check(&h2_evil, &HeaderMap::new()).is_err());
        let two = a.check(
            &plain,
            &headers(&[("host", "localhost"), ("host", "evil.example")]),
        );
        assert!(matches!(two, Err(Refusal::Host(_))), "{two:?}");
        assert_eq!(two.unwrap_err().status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn an_origin_from_another_site_is_refused_even_without_a_token() {
        let a = auth("127.0.0.1:8080", None);
        let uri = Uri::from_static("/v1/files/x");
        let from = |origin: &str| {
            a.check(
                &uri,
                &headers(&[("host", "127.0.0.1:8080"), ("origin", origin)]),
            )
        };
        assert_eq!(from("http://localhost:3000"), Ok(()));
        let e = from("https://evil.example").unwrap_err();
        assert_eq!(e.status(), StatusCode::FORBIDDEN);
        assert!(e.message().contains("Origin"), "{e:?}");
    }
}
