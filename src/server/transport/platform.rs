//! The auth rule every platform listener follows: the sandboxd
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
//! Invariant: the checks are the floor's one gate ([`crate::net::gate`]),
//! the MCP listener's too, not a copy; each listener only maps a
//! [`Refusal`] to its wire (an HTTP status and body, a gRPC status).

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::header::HeaderName;
use hyper::{HeaderMap, Uri};

use super::http::settings;
use crate::config::Config;
use crate::net::gate::Gate;
pub use crate::net::gate::Refusal;

/// envd's token header (the e2b SDK sends it when the sandbox has one).
pub const ACCESS_TOKEN: HeaderName = HeaderName::from_static("x-access-token");

/// Which platform listener (for messages and logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// `--sandboxd-grpc`: `process.v1.ProcessService` over h2c.
    #[cfg_attr(not(feature = "sandboxd"), allow(dead_code))]
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

    /// A short name (`sandboxd-grpc`, …): the listener's name in metrics
    /// and in the floor's table of probes.
    pub fn name(self) -> &'static str {
        match self {
            Platform::SandboxdGrpc => "sandboxd-grpc",
            Platform::SandboxdRest => "sandboxd-rest",
            Platform::Envd => "envd",
        }
    }
}

/// One platform listener's auth: which it is, and its [`Gate`] (where it is
/// bound, our token, the allowed origins, envd's own token header).
#[derive(Debug, Clone)]
pub struct PlatformAuth {
    platform: Platform,
    gate: Gate,
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
        // Every platform listener takes envd's header too (the SDKs of
        // both platforms send one or the other).
        let own_header = Some(ACCESS_TOKEN);
        Ok(PlatformAuth {
            platform,
            gate: Gate::new(
                addr,
                token.as_deref(),
                Arc::new(settings::origins(c)?),
                own_header,
            ),
        })
    }

    /// Which listener this is.
    pub fn platform(&self) -> Platform {
        self.platform
    }

    /// Where it is to be bound.
    pub fn addr(&self) -> SocketAddr {
        self.gate.addr()
    }

    /// Whether our token is set (and so checked on every request).
    pub fn has_token(&self) -> bool {
        self.gate.has_token()
    }

    /// The gate's every step: one `Host`, rebinding, `Origin`, the token.
    /// `uri` gives HTTP/2's `:authority` where no `Host` is sent.
    pub fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        self.gate.check(uri, headers)
    }

    /// The gate without the token, for this listener's probes (the floor's
    /// table, [`crate::net::gate::PROBES`]).
    pub fn check_probe(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        self.gate.probe(uri, headers)
    }

    /// Whether `method path` is one of this listener's probes.
    pub fn is_probe(&self, method: &str, path: &str) -> bool {
        crate::net::gate::is_probe(self.platform.name(), method, path)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;
    use hyper::StatusCode;
    use hyper::header::HeaderName;

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
