//! E2B envd: the in-sandbox daemon protocol the `e2b` SDK
//! speaks, on its own listener (`--envd ADDR`, `MCP_EXEC_ENVD`; the SDK's
//! port is 49983). HTTP/1.1 on hyper; docs/envd.md maps every call.
//!
//! - [`connect`] is the Connect protocol (unary, server and client streams,
//!   errors, deadlines, keep-alives), JSON codec only.
//! - [`proto`] has envd's process messages as ProtoJSON serde structs, and
//!   the helpers (base64, enums) every message uses.
//! - [`process`] serves `/process.Process/<Method>`: envd processes are our
//!   jobs.
//! - [`filesystem`] serves `/filesystem.Filesystem/<Method>`.
//! - [`files`] serves `GET`/`POST /files`.
//!
//! Routing ([`route`]): `GET /health` answers `204` (envd's answer; the SDK
//! takes any 2xx as "running") under the probe rule (the Host and Origin
//! checks, no token; another method needs the token, then `405`); `POST /process.Process/<M>` and
//! `POST /filesystem.Filesystem/<M>` go to their service's `handle` with the
//! method name, which answers `unimplemented` for a method it does not
//! know; `/files` goes to [`files::handle`] whatever its method; anything
//! else is `404` (another RPC method than `POST`: `405`).
//!
//! Auth: every path but the probe passes the platform rule first
//! ([`PlatformAuth::check`]): one `Host` naming loopback on a
//! loopback bind, an allowed `Origin`, and, when our token is set, the
//! token as `X-Access-Token` (what the SDK sends outside debug mode) or
//! `Authorization: Bearer`; a refusal is its status with a Connect error
//! body. At start-up, a non-loopback `--envd` without a token needs
//! `MCP_EXEC_PLATFORM_INSECURE=1`.

mod connect;
mod files;
mod filesystem;
mod process;
mod proto;
mod watchers;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use tokio_util::sync::CancellationToken;

use super::platform::{Platform, PlatformAuth, Refusal};
use crate::jobs::JobId;
use crate::net::body::Body;
use crate::net::reply::HttpReply;
use crate::net::{
    self,
    accept::{self, Protocol},
};
use crate::server::app::App;
use connect::Code;

/// The envd listener's settings, validated at start-up.
#[derive(Debug, Clone)]
pub struct EnvdSettings {
    /// Where to listen, and the auth rule there.
    pub auth: PlatformAuth,
}

impl EnvdSettings {
    /// `MCP_EXEC_ENVD` (`--envd`), when set; an `Err` names the setting
    /// (a bad address, or a non-loopback one without our token and without
    /// `MCP_EXEC_PLATFORM_INSECURE=1`), and `main` exits 2.
    pub fn from_config(config: &crate::config::Config) -> Result<Option<EnvdSettings>, String> {
        let Some(raw) = config.envd.as_deref() else {
            return Ok(None);
        };
        let auth = PlatformAuth::new(Platform::Envd, raw, config)?;
        Ok(Some(EnvdSettings { auth }))
    }
}

/// What every handler shares.
pub(crate) struct EnvdState {
    /// The server's state: the jobs, the config, the policies.
    pub(crate) app: Arc<App>,
    /// Cancelled at shutdown.
    pub(crate) shutdown: CancellationToken,
    /// The per-request auth rule.
    auth: PlatformAuth,
    /// The processes started here: what `List` shows of each.
    processes: Mutex<HashMap<JobId, process::Started>>,
    /// The polling directory watchers (`CreateWatcher`), bounded.
    watchers: watchers::Watchers,
}

impl EnvdState {
    fn processes(&self) -> MutexGuard<'_, HashMap<JobId, process::Started>> {
        self.processes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The most bytes one message may have.
    fn max_message(&self) -> usize {
        self.app.config.max_line_bytes
    }
}

/// Binds the envd listener and serves it through the floor until the
/// process exits; its bound address is printed on stderr (`mcp-exec:
/// listening for envd on ADDR`: a port of 0 picks a free one).
pub async fn start(
    settings: EnvdSettings,
    app: Arc<App>,
    shutdown: &CancellationToken,
) -> std::io::Result<()> {
    let socket = accept::bind(settings.auth.addr(), "envd").await?;
    let floor = accept::Listener::new(
        "envd",
        Protocol::Http1,
        app.config.listener_cap(),
        app.config.http_stall_timeout,
        settings.auth.has_token(),
    );
    let state = Arc::new(EnvdState {
        app,
        shutdown: shutdown.clone(),
        auth: settings.auth,
        processes: Mutex::new(HashMap::new()),
        watchers: watchers::Watchers::default(),
    });
    accept::serve(socket, floor, move |conn| {
        let (checked, state) = (Arc::clone(&state), Arc::clone(&state));
        net::http::http1(
            conn,
            move |req| checked.auth.check(req.uri(), req.headers()).is_ok(),
            move |req| {
                let state = Arc::clone(&state);
                async move { route(&state, req).await }
            },
        )
    });
    Ok(())
}

/// The rule, then the endpoint.
async fn route(state: &Arc<EnvdState>, req: Request<Incoming>) -> HttpReply {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    // A probe (the floor's table: `GET`/`HEAD /health`) keeps the Host and
    // Origin rules and needs no token; nothing else skips the token.
    if state.auth.is_probe(method.as_str(), &path) {
        return match state.auth.check_probe(req.uri(), req.headers()) {
            Ok(()) => empty(StatusCode::NO_CONTENT),
            Err(refused) => refusal(refused),
        };
    }
    if let Err(refused) = state.auth.check(req.uri(), req.headers()) {
        return refusal(refused);
    }
    if path == "/health" {
        return empty(StatusCode::METHOD_NOT_ALLOWED);
    }
    if path == "/files" {
        return files::handle(state, req).await;
    }
    let Some((service, rpc)) = path
        .strip_prefix('/')
        .and_then(|p| p.split_once('/'))
        .filter(|(_, m)| !m.is_empty() && !m.contains('/'))
    else {
        return empty(StatusCode::NOT_FOUND);
    };
    let service = match service {
        "process.Process" => Service::Process,
        "filesystem.Filesystem" => Service::Filesystem,
        _ => return empty(StatusCode::NOT_FOUND),
    };
    if method != Method::POST {
        let mut r = empty(StatusCode::METHOD_NOT_ALLOWED);
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("POST"),
        );
        return r;
    }
    let rpc = rpc.to_owned();
    match service {
        Service::Process => process::handle(state, &rpc, req).await,
        Service::Filesystem => filesystem::handle(state, &rpc, req).await,
    }
}

#[derive(Clone, Copy)]
enum Service {
    Process,
    Filesystem,
}

/// A request the platform rule refused: its HTTP status, and a Connect
/// error body (`unauthenticated` without the token).
fn refusal(r: Refusal) -> HttpReply {
    let body = serde_json::json!({"code": Code::from(r).connect(), "message": r.message()});
    connect::typed(r.status(), connect::JSON, Body::full(body.to_string()))
}

/// A response with no body.
fn empty(code: StatusCode) -> HttpReply {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = code;
    r
}
