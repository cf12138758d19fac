//! The one accept loop: every listener of the server (MCP HTTP, metrics,
//! envd, sandboxd REST and gRPC) accepts through [`serve`], so each gets the
//! same bounds from one place (docs/security.md, "What every listener
//! guarantees"):
//!
//! - a connection table of its own ([`Conns`]) of at most
//!   `max_connections` entries, and who is evicted at the cap;
//! - [`SILENT_TIMEOUT`] to send a first byte;
//! - past the cap, a refusal in the listener's own protocol (HTTP/1.1
//!   `503`; HTTP/2 a `GOAWAY`), written without waiting, then a close;
//! - on a listener without a token, no local peer of another uid
//!   ([`super::peer`]);
//! - the write-stall bound ([`Stalls`]) on the socket the protocol gets.
//!
//! The protocol's own deadlines (a request head, an idle HTTP/2
//! connection) are in [`super::http`].
//!
//! # Invariants
//! - The loop never waits on anything but `accept`: a decision about a new
//!   connection is made at once (admitted, or refused), or handed to a
//!   task of its own. Never waiting is what keeps the kernel's backlog
//!   empty, so a token holder's SYN is always answered.
//! - Every accepted socket is either served, or refused and closed; the
//!   silent ones waiting past the cap are bounded ([`LATE_WAITERS`]).

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::conns::{self, Admission, ConnSlot, Conns};
use super::stall::Stalls;

/// A connection that sends nothing at all within this is dropped: a client
/// that connects sends its request at once, and a silent connection only
/// holds a slot.
pub const SILENT_TIMEOUT: Duration = Duration::from_secs(2);

/// The protocol a listener speaks, for what the floor itself writes (the
/// refusal past the cap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 (MCP, metrics, envd, sandboxd REST).
    Http1,
    /// HTTP/2 with prior knowledge, h2c (sandboxd gRPC).
    #[cfg_attr(not(feature = "sandboxd"), allow(dead_code))]
    Http2,
}

/// Which local peers a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peers {
    /// Anyone who reaches it (every request is checked for the token).
    Any,
    /// No local process of another uid than the server's: a listener
    /// without a token (see [`super::peer`]).
    SameUid,
    /// Anyone, but a local peer of another uid is marked
    /// ([`Connection::foreign`]) for the routes that check no token (the
    /// MCP listener that carries sandboxd's `/v1/` paths).
    Mark,
}

/// What the floor needs to know of a listener.
#[derive(Debug, Clone)]
pub struct Listener {
    /// The `listener` label of its metrics: `mcp`, `metrics`, `envd`,
    /// `sandboxd-rest`, `sandboxd-grpc`.
    pub name: &'static str,
    pub protocol: Protocol,
    /// `MCP_EXEC_HTTP_MAX_CONNECTIONS`, or this listener's share of the
    /// descriptors when that is smaller.
    pub max_connections: usize,
    /// `MCP_EXEC_HTTP_STALL_TIMEOUT`.
    pub stall: Duration,
    pub peers: Peers,
    /// Accepting stops when it is cancelled (open connections go on).
    pub stop: Option<CancellationToken>,
    /// Where its requests in flight are counted, for shutdown.
    pub in_flight: Option<super::http::InFlight>,
}

impl Listener {
    /// A listener named `name`: `tokened` says whether it checks a token
    /// (without one, local peers of another uid are refused: [`Peers`]);
    /// it never stops accepting and counts no requests in flight until
    /// told otherwise.
    pub fn new(
        name: &'static str,
        protocol: Protocol,
        max_connections: usize,
        stall: Duration,
        tokened: bool,
    ) -> Listener {
        Listener {
            name,
            protocol,
            max_connections,
            stall,
            peers: if tokened { Peers::Any } else { Peers::SameUid },
            stop: None,
            in_flight: None,
        }
    }
}

/// An admitted connection, handed to the listener's protocol.
pub struct Connection {
    /// The socket, with the write-stall bound.
    pub io: Stalls<TokioIo<TcpStream>>,
    /// Its place in the table: mark each request served through it.
    pub slot: Arc<ConnSlot>,
    /// The peer's uid, when the listener marks peers ([`Peers::Mark`]) and
    /// the peer is a local process of another uid.
    pub foreign: Option<u32>,
    /// The listener's count of requests in flight.
    pub in_flight: Option<super::http::InFlight>,
}

/// Binds `addr` for the listener `what` names (`HTTP`, `envd`, …) and says
/// where on stderr and in the log (`mcp-exec: listening for WHAT on ADDR`:
/// a port of 0 picks a free one).
pub async fn bind(addr: SocketAddr, what: &str) -> std::io::Result<TcpListener> {
    let socket = TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("binding {addr} for {what}: {e}")))?;
    let bound = socket.local_addr()?;
    tracing::info!(%bound, "listening for {what}");
    eprintln!("mcp-exec: listening for {what} on {bound}");
    Ok(socket)
}

/// Accepts every connection of `socket` until `listener.stop`, and hands
/// each admitted one to `protocol` in a task of its own; a connection
/// evicted for a newcomer is dropped wherever its protocol is.
pub fn serve<F, Fut>(socket: TcpListener, listener: Listener, protocol: F)
where
    F: Fn(Connection) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let conns = Conns::new(listener.name, listener.max_connections);
    let served = Arc::new(Served {
        listener,
        conns,
        late: LateWaiters::default(),
        protocol,
    });
    tokio::spawn(accept(socket, served));
}

/// What every connection task of one listener shares.
struct Served<F> {
    listener: Listener,
    conns: Arc<Conns>,
    late: LateWaiters,
    protocol: F,
}

async fn accept<F, Fut>(socket: TcpListener, served: Arc<Served<F>>)
where
    F: Fn(Connection) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let stop = served.listener.stop.clone().unwrap_or_default();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = socket.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(listener = served.listener.name, error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = stop.cancelled() => return,
        };
        // Without TCP_NODELAY, Nagle holds a small response's last segment
        // until the client ACKs the previous one, and a client that delays
        // its ACKs (Linux: up to 40 ms) stalls every small answer that long.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "setting TCP_NODELAY");
        }
        // Whether its bytes are already here, without waiting: a token
        // holder's request usually is, and it must not be taken for silent.
        let heard = rustix::net::recv(
            &stream,
            &mut [0u8; 1][..],
            rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT,
        )
        .is_ok_and(|(n, _)| n > 0);
        match served.conns.admit(heard) {
            Admission::Admitted(slot) => {
                tokio::spawn(connection(Arc::clone(&served), stream, peer, slot));
            }
            // A silent newcomer may only be slow to send (a token holder on a
            // loaded machine): it gets up to the grace a silent connection
            // has, then asks again as one that has sent bytes. A bounded
            // number wait at once: the newest newcomer displaces the longest
            // waiting one, so under a flood of silent connections each still
            // gets (waiters ÷ arrival rate) to send, never nothing.
            Admission::Full if !heard => {
                let (id, displaced) = served.late.enter();
                let served = Arc::clone(&served);
                tokio::spawn(async move {
                    let mut first = [0u8; 1];
                    let peeked = tokio::select! {
                        p = tokio::time::timeout(conns::GRACE, stream.peek(&mut first)) => Some(p),
                        () = displaced.cancelled() => None,
                    };
                    served.late.leave(id);
                    let heard = matches!(peeked, Some(Ok(Ok(n))) if n > 0);
                    match (heard, heard.then(|| served.conns.admit(true))) {
                        (true, Some(Admission::Admitted(slot))) => {
                            connection(served, stream, peer, slot).await;
                        }
                        _ => refuse(&served.listener, &stream),
                    }
                });
            }
            Admission::Full => refuse(&served.listener, &stream),
        }
    }
}

/// One admitted connection: the peer rule, its first byte within
/// [`SILENT_TIMEOUT`], then its protocol until it ends or is evicted.
async fn connection<F, Fut>(
    served: Arc<Served<F>>,
    stream: TcpStream,
    peer: SocketAddr,
    slot: ConnSlot,
) where
    F: Fn(Connection) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let name = served.listener.name;
    let slot = Arc::new(slot);
    let evicted = slot.evicted().clone();
    // `peek`, not `readable()`: readiness may be reported before any byte
    // has arrived, and a silent connection must stay evictable first.
    let mut first = [0u8; 1];
    let first = tokio::select! {
        first = tokio::time::timeout(SILENT_TIMEOUT, stream.peek(&mut first)) => first,
        () = evicted.cancelled() => return,
    };
    match first {
        Ok(Ok(n)) if n > 0 => slot.heard(),
        // Closed before a byte, or an error.
        Ok(_) => return,
        Err(_) => {
            crate::metrics::http_connection_dropped(name, "silent");
            return;
        }
    }
    // After the first bytes, so that the refusal can be read: the client's
    // request is drained before the answer, and a close with unread bytes
    // (a reset, which would lose the answer) does not happen.
    let foreign = match served.listener.peers {
        Peers::Any => None,
        Peers::SameUid | Peers::Mark => match foreign_peer(&stream, peer) {
            Ok(foreign) => foreign,
            Err(e) => {
                tracing::warn!(listener = name, error = %e, "refusing a connection whose peer is unknown");
                crate::metrics::http_connection_dropped(name, "foreign");
                return;
            }
        },
    };
    if let (Some(uid), Peers::SameUid) = (foreign, served.listener.peers) {
        tracing::warn!(
            listener = name,
            uid,
            "refused a local process of another user: this listener checks no token"
        );
        crate::metrics::http_connection_dropped(name, "foreign");
        close_saying(stream, &foreign_refusal(&served.listener, uid)).await;
        return;
    }
    let io = Stalls::new(TokioIo::new(stream), served.listener.stall);
    let in_flight = served.listener.in_flight.clone();
    let served_conn = (served.protocol)(Connection {
        io,
        slot,
        foreign,
        in_flight,
    });
    tokio::select! {
        () = served_conn => {}
        // Dropping the connection closes the socket.
        () = evicted.cancelled() => {}
    }
}

/// The peer's uid when it is a local process of another uid than ours.
fn foreign_peer(stream: &TcpStream, peer: SocketAddr) -> std::io::Result<Option<u32>> {
    let local = stream.local_addr()?;
    let ours = rustix::process::geteuid().as_raw();
    Ok(super::peer::owner(peer, local)?.filter(|uid| *uid != ours))
}

/// How many silent newcomers past the limit may wait at once for their
/// first bytes: each holds a descriptor for up to [`conns::GRACE`].
const LATE_WAITERS: usize = 64;

/// The silent newcomers waiting for their first bytes, oldest first: at
/// most [`LATE_WAITERS`]; one more displaces the oldest (cancels its wait,
/// and it is refused as before).
#[derive(Default)]
struct LateWaiters(Mutex<(u64, VecDeque<(u64, CancellationToken)>)>);

impl LateWaiters {
    /// A new waiter: its id and the token cancelled if it is displaced.
    fn enter(&self) -> (u64, CancellationToken) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (next, waiting) = &mut *w;
        *next += 1;
        let id = *next;
        if waiting.len() >= LATE_WAITERS
            && let Some((_, oldest)) = waiting.pop_front()
        {
            oldest.cancel();
        }
        let token = CancellationToken::new();
        waiting.push_back((id, token.clone()));
        (id, token)
    }

    /// Waiter `id` is done (heard, timed out or displaced).
    fn leave(&self, id: u64) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        w.1.retain(|(i, _)| *i != id);
    }
}

/// What is said to a connection past the limit when no slot could be freed.
const FULL: &str = "every connection is in use (MCP_EXEC_HTTP_MAX_CONNECTIONS); retry";

/// The answer to a connection past the limit: written without waiting (the
/// socket's buffer is empty), then closed.
fn refuse(listener: &Listener, stream: &TcpStream) {
    let bytes = match listener.protocol {
        Protocol::Http1 => http1_refusal(503, "Service Unavailable", FULL, true),
        Protocol::Http2 => http2_goaway(FULL),
    };
    let _ = stream.try_write(&bytes);
    crate::metrics::http_connection_dropped(listener.name, "refused");
}

/// The answer to a local process of another uid on a listener without a token.
fn foreign_refusal(listener: &Listener, uid: u32) -> Vec<u8> {
    let why = format!(
        "this listener checks no token, so it serves no local process of another user \
         (uid {uid}): set MCP_EXEC_HTTP_TOKEN_FILE and send the token (docs/security.md)"
    );
    match listener.protocol {
        Protocol::Http1 => http1_refusal(403, "Forbidden", &why, false),
        Protocol::Http2 => http2_goaway(&why),
    }
}

/// How long a refused connection is given to read its answer.
const LINGER: Duration = Duration::from_secs(1);

/// Answers `bytes` and closes so that the client reads them: what it sent
/// is read and dropped first, then the answer, our half closed, and its
/// bytes read until it closes too (at most [`LINGER`] in all).
async fn close_saying(mut stream: TcpStream, bytes: &[u8]) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = tokio::time::timeout(LINGER, async {
        let mut sink = [0u8; 4096];
        while let Ok(n) = stream.try_read(&mut sink) {
            if n == 0 {
                break;
            }
        }
        stream.write_all(bytes).await?;
        stream.shutdown().await?;
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), std::io::Error>(())
    })
    .await;
}

/// A whole HTTP/1.1 answer with a JSON `{"error": …}` body, closing.
fn http1_refusal(code: u16, reason: &str, error: &str, retry: bool) -> Vec<u8> {
    let body = format!("{}\n", serde_json::json!({ "error": error }));
    let retry = if retry { "retry-after: 1\r\n" } else { "" };
    format!(
        "HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n{retry}connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// An HTTP/2 server preface (an empty SETTINGS frame) and a `GOAWAY` with
/// last stream 0, `ENHANCE_YOUR_CALM`, and `why` as its debug data: the
/// client's streams were never processed, so it may retry them.
fn http2_goaway(why: &str) -> Vec<u8> {
    const SETTINGS: u8 = 0x4;
    const GOAWAY: u8 = 0x7;
    const ENHANCE_YOUR_CALM: u32 = 0xb;
    let frame = |kind: u8, payload: &[u8]| {
        let len = u32::try_from(payload.len()).unwrap_or(0).to_be_bytes();
        let mut f = vec![len[1], len[2], len[3], kind, 0, 0, 0, 0, 0];
        f.extend_from_slice(payload);
        f
    };
    let mut goaway = Vec::with_capacity(8 + why.len());
    goaway.extend_from_slice(&0u32.to_be_bytes());
    goaway.extend_from_slice(&ENHANCE_YOUR_CALM.to_be_bytes());
    goaway.extend_from_slice(why.as_bytes());
    let mut out = frame(SETTINGS, &[]);
    out.extend(frame(GOAWAY, &goaway));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http2_refusal_is_a_settings_frame_then_a_goaway_that_says_why() {
        let bytes = http2_goaway("full");
        assert_eq!(&bytes[..9], &[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        let goaway = &bytes[9..];
        assert_eq!(&goaway[..4], &[0, 0, 12, 7]);
        assert_eq!(&goaway[9..13], &[0, 0, 0, 0], "last stream id 0");
        assert_eq!(&goaway[13..17], &[0, 0, 0, 0xb], "ENHANCE_YOUR_CALM");
        assert_eq!(&goaway[17..], b"full");
    }

    #[test]
    fn an_http1_refusal_is_a_whole_answer_that_closes() {
        let text =
            String::from_utf8(http1_refusal(503, "Service Unavailable", FULL, true)).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{text}"
        );
        assert!(text.contains("retry-after: 1\r\n") && text.contains("connection: close\r\n"));
        let body = text.split("\r\n\r\n").nth(1).unwrap();
        assert!(
            text.contains(&format!("content-length: {}\r\n", body.len())),
            "{text}"
        );
        assert!(body.contains("MCP_EXEC_HTTP_MAX_CONNECTIONS"), "{body}");
    }
}
