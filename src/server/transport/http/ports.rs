//! `GET /ports` and the preview proxy `/ports/<n>/<path>`.
//! docs/http.md documents the wire; SECURITY.md the reasoning.
//!
//! - `GET /ports`: `{ports: [{port, proto, addr, loopback_only, pid,
//!   job_id}]}`, every listening TCP socket in the container but this
//!   server's own (`Jobs::ports`).
//! - `<any method> /ports/<n>/<path>?<query>`: the request, forwarded to
//!   the listener on port `n` as `/<path>?<query>`, and its answer back,
//!   both bodies streamed, never collected. Only a port `GET /ports` lists
//!   (any listener in the container, a job's or not; never this server's
//!   own) is reached; `502` otherwise, saying so. The proxy dials loopback
//!   only: `127.0.0.1` for a `0.0.0.0` bind, the bound address for a
//!   `127.x` one, `[::1]` for a `[::]`/`[::1]` one; a listener bound to
//!   any other address only is `502`, never dialled (a job's socket may
//!   name an address no interface has: `IP_FREEBIND`). A port this server
//!   listens on, on any address, is never reached (`502`): a job's
//!   `127.0.0.2:<that port>` must not lead to the server's own listener.
//!
//! # What is forwarded
//! The request's headers but the hop-by-hop ones (RFC 9110 §7.6.1:
//! `Connection` and the headers it names, `Keep-Alive`,
//! `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`, `Upgrade`,
//! `Proxy-Authorization`) and, when this server has a token,
//! `Authorization` (it carries the token: the guard has just checked it);
//! `Host` becomes the target's; `X-Forwarded-Host`, `-Proto`, `-Prefix`
//! say where the client was. The answer comes back without its
//! hop-by-hop headers.
//!
//! A WebSocket (any `Upgrade`) is forwarded with its `Upgrade` and
//! `Connection: upgrade`; when the target answers `101`, both connections
//! are taken over (hyper's upgrade on each side) and bytes are copied both
//! ways until either side closes.
//!
//! # Bounds
//! The connection to the target must be made within [`CONNECT_TIMEOUT`]
//! (`504` past it); a refused one is `502` with the reason. One connection
//! to the target per request (no pool): the client's own keep-alive is
//! what is reused. HTTP/1.1 only, by hyper's client (no hand-written HTTP).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpStream;

use super::state::HttpState;
use crate::jobs::{Port, ProxyLook};
use crate::net::body::Body;
use crate::net::reply::{HttpReply, json, status};

/// How long connecting to the target may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// `{ports: […]}`.
#[derive(Serialize)]
struct Ports {
    ports: Vec<Port>,
}

/// The listening sockets, looked up off the runtime's threads (a look
/// reads `/proc`: a millisecond in a container, more on a busy host).
async fn look(state: &Arc<HttpState>) -> Vec<Port> {
    let app = Arc::clone(&state.app);
    tokio::task::spawn_blocking(move || app.jobs.ports())
        .await
        .unwrap_or_default()
}

/// [`look`], with this server's own ports, for the proxy.
async fn proxy_look(state: &Arc<HttpState>) -> ProxyLook {
    let app = Arc::clone(&state.app);
    tokio::task::spawn_blocking(move || app.jobs.proxy_look())
        .await
        .unwrap_or_default()
}

/// `GET /ports`.
pub(super) async fn list(state: &Arc<HttpState>) -> HttpReply {
    let body = Ports {
        ports: look(state).await,
    };
    match serde_json::to_string(&body) {
        Ok(text) => json(StatusCode::OK, format!("{text}\n")),
        Err(_) => status(StatusCode::INTERNAL_SERVER_ERROR, "encoding the ports"),
    }
}

/// The `<n>` and the rest of `/ports/<n>/<rest>` (`None`: not a proxy path;
/// `Some(Err)`: a bad port).
pub(super) fn proxy_path(path: &str) -> Option<Result<(u16, &str), ()>> {
    let rest = path.strip_prefix("/ports/")?;
    let (n, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    Some(
        n.parse::<u16>()
            .ok()
            .filter(|&p| p > 0)
            .map(|p| (p, tail))
            .ok_or(()),
    )
}

/// Why the proxy does not connect for a port.
#[derive(Debug, PartialEq, Eq)]
enum NoTarget {
    /// Nothing listed listens on it.
    Nothing,
    /// This server listens on it (on some address): whatever else does, a
    /// request is never sent to the server's own listeners through here.
    Own,
    /// Only on addresses that are not loopback (the first is named): the
    /// proxy dials loopback only, never an address a job merely names.
    NotLoopback(IpAddr),
}

/// Where to connect for port `port`, given one look (`GET /ports`'s list
/// and this server's own ports). Loopback only: a wildcard bind
/// (`0.0.0.0`, `::`) is dialled on `127.0.0.1` or `[::1]`, a loopback bind
/// on its own address (`127.0.0.2` stays `127.0.0.2`, so the dial reaches
/// that listener and no other), IPv4 first; a bind to any other address is
/// never dialled, so no request leaves the container, whatever address a
/// job's socket names (`IP_FREEBIND` binds addresses no interface has).
fn target(look: &ProxyLook, port: u16) -> Result<SocketAddr, NoTarget> {
    if look.own.contains(&port) {
        return Err(NoTarget::Own);
    }
    let mut best: Option<(u8, SocketAddr)> = None;
    let mut outside = None;
    for p in look.ports.iter().filter(|p| p.port == port) {
        let Ok(ip) = p.addr.parse::<IpAddr>() else {
            continue;
        };
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let (rank, dial) = match ip {
            IpAddr::V4(v4) if v4.is_unspecified() => (0, Ipv4Addr::LOCALHOST.into()),
            IpAddr::V4(v4) if v4.is_loopback() => (1, ip),
            IpAddr::V6(v6) if v6.is_unspecified() || v6.is_loopback() => {
                (2, Ipv6Addr::LOCALHOST.into())
            }
            other => {
                outside = outside.or(Some(other));
                continue;
            }
        };
        if best.is_none_or(|(r, _)| rank < r) {
            best = Some((rank, SocketAddr::new(dial, port)));
        }
    }
    match (best, outside) {
        (Some((_, addr)), _) => Ok(addr),
        (None, Some(ip)) => Err(NoTarget::NotLoopback(ip)),
        (None, None) => Err(NoTarget::Nothing),
    }
}

/// The headers that concern one connection only (RFC 9110 §7.6.1), plus
/// those `Connection` names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        HeaderName::from_static("keep-alive"),
        HeaderName::from_static("proxy-connection"),
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        header::PROXY_AUTHORIZATION,
    ] {
        headers.remove(name);
    }
}

/// The `Upgrade` a request or answer asks for, if any.
fn upgrade_of(headers: &HeaderMap) -> Option<HeaderValue> {
    let asks = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
        });
    asks.then(|| headers.get(header::UPGRADE).cloned())
        .flatten()
}

/// `/ports/<port>/<tail>`, after the guard (Host, Origin, token).
pub(super) async fn proxy(
    state: &Arc<HttpState>,
    mut req: Request<Incoming>,
    port: u16,
    tail: &str,
) -> HttpReply {
    let addr = match target(&proxy_look(state).await, port) {
        Ok(addr) => addr,
        Err(NoTarget::Nothing) => {
            return status(
                StatusCode::BAD_GATEWAY,
                &format!(
                    "nothing in the container listens on port {port} (GET /ports lists what \
                     does; this server's own listeners are not proxied)"
                ),
            );
        }
        Err(NoTarget::Own) => {
            return status(
                StatusCode::BAD_GATEWAY,
                &format!(
                    "port {port} is one of this server's own listeners: nothing listens on it \
                     that the proxy reaches (this server's own listeners are not proxied, on \
                     any address)"
                ),
            );
        }
        Err(NoTarget::NotLoopback(ip)) => {
            return status(
                StatusCode::BAD_GATEWAY,
                &format!(
                    "port {port} listens on {ip} only: nothing listens on it on loopback, and \
                     the proxy dials loopback only (bind 0.0.0.0 or 127.0.0.1 to preview it)"
                ),
            );
        }
    };
    let path = if tail.is_empty() { "/" } else { tail };
    let path_and_query = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    let Ok(uri) = path_and_query.parse::<Uri>() else {
        return status(StatusCode::BAD_REQUEST, "the path cannot be forwarded");
    };
    let stream = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            return status(
                StatusCode::BAD_GATEWAY,
                &format!("connecting to {addr} (port {port}): {e}"),
            );
        }
        Err(_) => {
            return status(
                StatusCode::GATEWAY_TIMEOUT,
                &format!("connecting to {addr} (port {port}) took over {CONNECT_TIMEOUT:?}"),
            );
        }
    };
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    {
        Ok(pair) => pair,
        Err(e) => return status(StatusCode::BAD_GATEWAY, &format!("port {port}: {e}")),
    };
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, port, "proxied connection ended");
        }
    });

    let upgrade = upgrade_of(req.headers());
    let client_upgrade = upgrade.is_some().then(|| hyper::upgrade::on(&mut req));
    let (mut parts, body) = req.into_parts();
    let original_host = parts.headers.get(header::HOST).cloned();
    strip_hop_by_hop(&mut parts.headers);
    if state.settings.as_ref().is_some_and(|s| s.token.is_some()) {
        parts.headers.remove(header::AUTHORIZATION);
    }
    if let Ok(host) = HeaderValue::from_str(&addr.to_string()) {
        parts.headers.insert(header::HOST, host);
    }
    if let Some(h) = original_host {
        parts
            .headers
            .insert(HeaderName::from_static("x-forwarded-host"), h);
    }
    parts.headers.insert(
        HeaderName::from_static("x-forwarded-proto"),
        HeaderValue::from_static("http"),
    );
    if let Ok(prefix) = HeaderValue::from_str(&format!("/ports/{port}")) {
        parts
            .headers
            .insert(HeaderName::from_static("x-forwarded-prefix"), prefix);
    }
    if let Some(u) = &upgrade {
        parts.headers.insert(header::UPGRADE, u.clone());
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    }
    parts.uri = uri;
    parts.version = hyper::Version::HTTP_11;
    let forwarded = Request::from_parts(parts, body);

    let mut answer = match sender.send_request(forwarded).await {
        Ok(a) => a,
        Err(e) => return status(StatusCode::BAD_GATEWAY, &format!("port {port}: {e}")),
    };
    if answer.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(client) = client_upgrade
    {
        let target_upgrade = hyper::upgrade::on(&mut answer);
        tokio::spawn(async move {
            let (client, target) = match tokio::try_join!(client, target_upgrade) {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::debug!(error = %e, port, "proxied upgrade failed");
                    return;
                }
            };
            let (mut client, mut target) = (TokioIo::new(client), TokioIo::new(target));
            if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut target).await {
                tracing::debug!(error = %e, port, "proxied upgraded connection ended");
            }
        });
        let (mut parts, _) = answer.into_parts();
        let upgrade = parts.headers.get(header::UPGRADE).cloned();
        strip_hop_by_hop(&mut parts.headers);
        if let Some(u) = upgrade {
            parts.headers.insert(header::UPGRADE, u);
        }
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        return Response::from_parts(parts, Body::empty());
    }
    let (mut parts, body) = answer.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Response::from_parts(parts, Body::upstream(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(addr: &str, n: u16) -> Port {
        Port {
            port: n,
            proto: if addr.contains(':') { "tcp6" } else { "tcp" },
            addr: addr.to_owned(),
            loopback_only: false,
            pid: None,
            job_id: None,
        }
    }

    #[test]
    fn a_proxy_path_names_its_port_and_the_rest_of_the_path() {
        assert_eq!(proxy_path("/ports/8080/a/b"), Some(Ok((8080, "/a/b"))));
        assert_eq!(proxy_path("/ports/8080"), Some(Ok((8080, ""))));
        assert_eq!(proxy_path("/ports/8080/"), Some(Ok((8080, "/"))));
        assert_eq!(proxy_path("/ports/0/"), Some(Err(())));
        assert_eq!(proxy_path("/ports/70000/"), Some(Err(())));
        assert_eq!(proxy_path("/ports/x/"), Some(Err(())));
        assert_eq!(proxy_path("/portsx"), None);
    }

    fn look(ports: Vec<Port>, own: &[u16]) -> ProxyLook {
        ProxyLook {
            ports,
            own: own.to_vec(),
        }
    }

    #[test]
    fn the_target_is_loopback_only_and_a_loopback_bind_keeps_its_own_address() {
        let at = |ip: [u8; 4]| Ok(SocketAddr::from((ip, 80)));
        assert_eq!(
            target(&look(vec![port("0.0.0.0", 80)], &[]), 80),
            at([127, 0, 0, 1])
        );
        assert_eq!(
            target(&look(vec![port("::", 80), port("127.0.0.1", 80)], &[]), 80),
            at([127, 0, 0, 1])
        );
        assert_eq!(
            target(&look(vec![port("::", 80)], &[]), 80),
            Ok(SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 80))
        );
        // 127.0.0.2 is dialled as 127.0.0.2: 127.0.0.1's listener on the
        // same port is another socket.
        assert_eq!(
            target(&look(vec![port("127.0.0.2", 80)], &[]), 80),
            at([127, 0, 0, 2])
        );
        assert_eq!(
            target(&look(vec![port("::ffff:127.0.0.3", 80)], &[]), 80),
            at([127, 0, 0, 3])
        );
        assert_eq!(
            target(&look(vec![port("0.0.0.0", 81)], &[]), 80),
            Err(NoTarget::Nothing)
        );
    }

    #[test]
    fn an_address_that_is_not_loopback_is_never_dialled() {
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(
            target(&look(vec![port("192.0.2.1", 80)], &[]), 80),
            Err(NoTarget::NotLoopback(ip))
        );
        assert_eq!(
            target(
                &look(vec![port("192.0.2.1", 80), port("127.0.0.1", 80)], &[]),
                80
            ),
            Ok(SocketAddr::from(([127, 0, 0, 1], 80)))
        );
        assert!(matches!(
            target(&look(vec![port("2001:db8::1", 80)], &[]), 80),
            Err(NoTarget::NotLoopback(_))
        ));
    }

    #[test]
    fn a_port_this_server_listens_on_is_never_a_target_whatever_else_listens_on_it() {
        let listed = vec![port("127.0.0.2", 80), port("0.0.0.0", 80)];
        assert_eq!(target(&look(listed, &[80]), 80), Err(NoTarget::Own));
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_are_dropped() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret"),
        );
        h.insert("x-secret", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert(header::TE, HeaderValue::from_static("trailers"));
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1, "{h:?}");
        assert!(h.contains_key(header::CONTENT_TYPE));
    }
}
