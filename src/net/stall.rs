//! The socket as hyper sees it, with a bound on how long a write may make
//! no progress (`MCP_EXEC_HTTP_STALL_TIMEOUT`): a client that stops reading
//! a response — a `GET /files` download, an event stream, anything — holds
//! its connection for at most that long, and then the write fails with
//! `TimedOut` and hyper closes the connection (issue 20, item 6).
//!
//! Only *stalls* count: the timer starts when a write or flush finds the
//! socket full and is reset by any progress, so a slow but moving transfer
//! is never cut. Reading is bounded elsewhere: the head by hyper's header
//! timeout, bodies by their handlers.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::rt::{Read, ReadBufCursor, Write};
use tokio::time::Sleep;

/// `T` whose writes fail after `limit` without progress.
pub struct Stalls<T> {
    inner: T,
    limit: Duration,
    /// Armed while a write or flush is pending.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<T> Stalls<T> {
    pub fn new(inner: T, limit: Duration) -> Stalls<T> {
        Stalls {
            inner,
            limit,
            timer: None,
        }
    }

    /// After the inner write found the socket full: not ready until the
    /// stall has lasted `limit`, then the error.
    fn stalled<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        let limit = self.limit;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        timer.as_mut().poll(cx).map(|()| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client read nothing for {} s (MCP_EXEC_HTTP_STALL_TIMEOUT)",
                    limit.as_secs_f64()
                ),
            ))
        })
    }

    fn timed<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if polled.is_pending() {
            return self.stalled(cx);
        }
        self.timer = None;
        polled
    }
}

impl<T: Read + Unpin> Read for Stalls<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: Write + Unpin> Write for Stalls<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.timed(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.timed(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_flush(cx);
        this.timed(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.timed(cx, polled)
    }
}
