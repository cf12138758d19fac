//! The response body of every HTTP/1.1 listener: whole (with its length),
//! a stream of chunks a task sends over a channel (SSE; a file, with its
//! length), or a proxied port's answer as it arrives (`/ports/<n>/`). The
//! floor wraps it ([`super::http`]) to count its request in flight until
//! hyper has taken its last byte and dropped it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use tokio::sync::mpsc;

/// A response body.
pub struct Body {
    kind: Kind,
}

enum Kind {
    Full(Option<Bytes>),
    /// Chunks, and the total length when it is known in advance.
    Stream(mpsc::Receiver<Bytes>, Option<u64>),
    /// A proxied answer's body, frame by frame (`/ports/<n>/`).
    Upstream(Incoming),
}

impl Body {
    /// A whole body.
    pub fn full(bytes: impl Into<Bytes>) -> Body {
        let bytes: Bytes = bytes.into();
        Body {
            kind: Kind::Full((!bytes.is_empty()).then_some(bytes)),
        }
    }

    /// No body.
    pub fn empty() -> Body {
        Body::full(Bytes::new())
    }

    /// A body of the chunks sent to `rx`, ending when its senders are gone.
    pub fn stream(rx: mpsc::Receiver<Bytes>) -> Body {
        Body {
            kind: Kind::Stream(rx, None),
        }
    }

    /// A body of exactly `len` bytes sent to `rx` (a file): hyper sends
    /// `Content-Length` and cuts the connection if fewer arrive.
    pub fn stream_sized(rx: mpsc::Receiver<Bytes>, len: u64) -> Body {
        Body {
            kind: Kind::Stream(rx, Some(len)),
        }
    }

    /// The body of an answer from a proxied port, passed on as it arrives
    /// (its trailers too); an error from the target ends this body with it.
    pub fn upstream(body: Incoming) -> Body {
        Body {
            kind: Kind::Upstream(body),
        }
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match &mut self.get_mut().kind {
            Kind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Kind::Stream(rx, _) => rx.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b)))),
            Kind::Upstream(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(b) => b.is_none(),
            Kind::Stream(..) => false,
            Kind::Upstream(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Stream(_, Some(len)) => SizeHint::with_exact(*len),
            Kind::Stream(_, None) => SizeHint::default(),
            Kind::Upstream(body) => body.size_hint(),
        }
    }
}
