//! HTTP/1.1 and HTTP/2 on an admitted [`Connection`], with the limits every
//! listener of that protocol gets from here and nowhere else:
//!
//! - HTTP/1.1: [`HEADER_READ_TIMEOUT`] to send a request's head (also the
//!   idle time between keep-alive requests), heads of at most
//!   [`MAX_HEAD_BYTES`], upgrades (WebSockets) where a handler asks;
//! - HTTP/2: at most [`H2_MAX_STREAMS`] concurrent streams, header lists of
//!   at most [`MAX_HEAD_BYTES`] (which also bounds a CONTINUATION flood:
//!   h2 refuses a header block past it), frames of at most 16 KiB (h2's
//!   default), h2's own bounds on pending and locally caused resets (rapid
//!   reset), and a connection with no stream open is closed gracefully
//!   (`GOAWAY`) after [`HEADER_READ_TIMEOUT`] when it never carried the
//!   token, after [`H2_IDLE`] when it did — the preface-only or
//!   SETTINGS-only connection of a flood does not stay.
//!
//! Each request is counted in the listener's [`InFlight`] (when it has
//! one) and marked as being served in the connection table from
//! when its head arrives until its response body is dropped, with whether
//! it carried the token (`authorized`): a connection serving a request, or
//! of a token holder, is never evicted for a newcomer ([`super::conns`]).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
#[cfg(feature = "sandboxd")]
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper::{Request, Response};
#[cfg(feature = "sandboxd")]
use hyper_util::rt::TokioExecutor;
use hyper_util::rt::TokioTimer;

use super::accept::Connection;
use super::conns::InUse;

/// A client must send a request's head within this, or it is dropped.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head (request line and headers), or HTTP/2 header
/// list.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Concurrent streams of one HTTP/2 connection.
#[cfg(feature = "sandboxd")]
pub const H2_MAX_STREAMS: u32 = 128;
/// How long an HTTP/2 connection of a token holder may have no stream open.
#[cfg(feature = "sandboxd")]
pub const H2_IDLE: Duration = Duration::from_secs(300);
/// How long an idle HTTP/2 connection may take to close after its GOAWAY
/// (h2 waits for the peer's PING acknowledgement) before it is dropped.
#[cfg(feature = "sandboxd")]
const H2_CLOSE_GRACE: Duration = Duration::from_secs(2);
/// How often an idle HTTP/2 connection is looked at.
#[cfg(feature = "sandboxd")]
const H2_IDLE_TICK: Duration = Duration::from_secs(1);

/// The requests in flight on the listeners that share it, each counted
/// from its head until its response body is dropped: shutdown waits for
/// them ([`InFlight::drained`]). Cheap to clone.
#[derive(Clone, Default, Debug)]
pub struct InFlight(Arc<tokio::sync::watch::Sender<usize>>);

impl InFlight {
    /// A count of none.
    pub fn new() -> InFlight {
        InFlight::default()
    }

    fn enter(&self) -> Counted {
        self.0.send_modify(|n| *n += 1);
        Counted(self.clone())
    }

    /// Waits up to `within` until no response is being written.
    pub async fn drained(&self, within: Duration) {
        let mut rx = self.0.subscribe();
        let _ = tokio::time::timeout(within, rx.wait_for(|n| *n == 0)).await;
    }
}

/// One request of an [`InFlight`] count.
struct Counted(InFlight);

impl Drop for Counted {
    fn drop(&mut self) {
        (self.0).0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// A route one listener serves for another front-end (sandboxd's `/v1/` on
/// the MCP listener's address): the assembly of the listeners mounts it, so
/// neither front-end names the other.
#[derive(Clone)]
pub struct Mount {
    /// Its paths: `prefix` and everything under `prefix/`.
    pub prefix: &'static str,
    /// Whether it checks a token itself: when it does not, a local peer of
    /// another user is refused before it is called (docs/security.md).
    pub checks_token: bool,
    /// Answers a request of its paths.
    pub handler: MountHandler,
}

/// What a [`Mount`] runs.
pub type MountHandler = Arc<
    dyn Fn(Request<Incoming>) -> Pin<Box<dyn Future<Output = super::reply::HttpReply> + Send>>
        + Send
        + Sync,
>;

impl Mount {
    /// Whether `path` is one of its paths.
    pub fn covers(&self, path: &str) -> bool {
        path.strip_prefix(self.prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }

    /// Serves `req` from a peer that is `foreign` (a local process of
    /// another uid) or not.
    pub async fn serve(
        &self,
        req: Request<Incoming>,
        foreign: Option<u32>,
    ) -> super::reply::HttpReply {
        if let Some(uid) = foreign.filter(|_| !self.checks_token) {
            return super::reply::status(
                hyper::StatusCode::FORBIDDEN,
                &format!(
                    "{}/ checks no token here, so it serves no local process of another user \
                     (uid {uid}): set MCP_EXEC_HTTP_TOKEN_FILE and send the token \
                     (docs/security.md)",
                    self.prefix
                ),
            );
        }
        (self.handler)(req).await
    }
}

/// A response body that keeps its request marked as served until dropped.
pub struct Held<B> {
    inner: B,
    _in_use: InUse,
    _counted: Option<Counted>,
}

impl<B: Body + Unpin> Body for Held<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The answer to one request with its marks (busy in the connection table,
/// counted in the drain) held by the response body: the one service step
/// of both protocols.
async fn held<Fut, B>(
    marks: (InUse, Option<Counted>),
    answer: Fut,
) -> Result<Response<Held<B>>, Infallible>
where
    Fut: Future<Output = Response<B>>,
{
    let (in_use, counted) = marks;
    Ok(answer.await.map(|inner| Held {
        inner,
        _in_use: in_use,
        _counted: counted,
    }))
}

/// Serves HTTP/1.1 on `conn` until it ends: `authorized` says whether a
/// request carries the token, `handle` answers it.
pub async fn http1<A, H, Fut, B>(conn: Connection, authorized: A, handle: H)
where
    A: Fn(&Request<Incoming>) -> bool + Send + Sync + 'static,
    H: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let slot = Arc::clone(&conn.slot);
    let (authorized, handle) = (Arc::new(authorized), Arc::new(handle));
    let in_flight = conn.in_flight.clone();
    let service = service_fn(move |req: Request<Incoming>| {
        let marks = (
            slot.serving(authorized(&req)),
            in_flight.as_ref().map(InFlight::enter),
        );
        held(marks, handle(req))
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES);
    // A WebSocket (`/jobs/<id>/tty`, a proxied port) takes the connection over.
    if let Err(e) = builder
        .serve_connection(conn.io, service)
        .with_upgrades()
        .await
    {
        tracing::debug!(error = %e, "an HTTP/1.1 connection ended");
    }
}

/// Serves HTTP/2 (prior knowledge) on `conn` until it ends or stays idle
/// too long; `authorized` and `handle` as for [`http1()`].
#[cfg(feature = "sandboxd")]
pub async fn http2<A, H, Fut, B>(conn: Connection, authorized: A, handle: H)
where
    A: Fn(&Request<Incoming>) -> bool + Send + Sync + 'static,
    H: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let slot = Arc::clone(&conn.slot);
    let watched = Arc::clone(&conn.slot);
    let (authorized, handle) = (Arc::new(authorized), Arc::new(handle));
    let in_flight = conn.in_flight.clone();
    let service = service_fn(move |req: Request<Incoming>| {
        let marks = (
            slot.serving(authorized(&req)),
            in_flight.as_ref().map(InFlight::enter),
        );
        held(marks, handle(req))
    });
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_STREAMS)
        .max_header_list_size(MAX_HEAD_BYTES as u32)
        .max_frame_size(16 * 1024)
        .max_pending_accept_reset_streams(20)
        .max_local_error_reset_streams(256);
    let served = builder.serve_connection(conn.io, service);
    tokio::pin!(served);
    let mut tick = tokio::time::interval(H2_IDLE_TICK);
    let mut closing: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            ended = served.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "an HTTP/2 connection ended");
                }
                return;
            }
            _ = tick.tick() => {
                let idle = watched.idle();
                if let Some(since) = closing {
                    // h2 closes after the GOAWAY once its PING is answered:
                    // a peer that never reads would keep the connection for
                    // good, so an idle one is dropped after the grace.
                    if idle.is_some() && since.elapsed() >= H2_CLOSE_GRACE {
                        tracing::debug!("an HTTP/2 connection did not close after its GOAWAY: dropped");
                        return;
                    }
                    continue;
                }
                let too_idle = idle.is_some_and(|(idle, authorized)| {
                    idle >= if authorized { H2_IDLE } else { HEADER_READ_TIMEOUT }
                });
                if too_idle {
                    // GOAWAY: streams in flight finish, new ones go elsewhere.
                    served.as_mut().graceful_shutdown();
                    closing = Some(tokio::time::Instant::now());
                }
            }
        }
    }
}
