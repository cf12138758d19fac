//! Sending a file: a byte range of an opened regular file read, a chunk at
//! a time, into a channel that the front-end drains as its client accepts
//! them (see [`super`]).
//!
//! # Invariants
//! - At most [`DEPTH`] chunks wait in the channel; their buffers are
//!   reused, so a download holds at most about 6 MiB however big the file.
//! - Each read is a blocking task of its own: a client that stops reading
//!   holds no thread, only its buffers.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::DEPTH;
use super::workers::blocking;
use crate::files::read::Opened;
use crate::files::{FileError, Kind};

/// How big a chunk read from the disk is: each is one `pread`, one
/// hand-off to the blocking pool and back, and (over HTTP) one `writev` to
/// the socket, so the hand-offs (futex wake-ups, eventfd writes) are paid
/// once per MiB. With [`DEPTH`] in the channel, one in the front-end's
/// hands and the pool of reused chunks, a download holds at most about
/// 6 MiB of buffers.
pub const READ_CHUNK: usize = 1 << 20;

/// A chunk sent that goes back to its pool when the front-end has written
/// it and drops it (see [`super::receive::receive`] for why buffers are
/// reused).
struct Recycled {
    buf: Vec<u8>,
    len: usize,
    home: std::sync::mpsc::SyncSender<Vec<u8>>,
}

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len.min(self.buf.len())]
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        // A full pool, or a reader that has finished: the buffer is freed.
        let _ = self.home.try_send(std::mem::take(&mut self.buf));
    }
}

/// Reads `len` bytes from `start` into `tx`, a chunk at a time (each read
/// a blocking task of its own: waiting for the client holds no thread),
/// until done or the client is gone (`tx` closed). A file that shrank
/// meanwhile ends the stream early: over HTTP the connection then closes
/// (fewer bytes than announced).
pub async fn send(opened: Opened, start: u64, len: u64, tx: mpsc::Sender<Bytes>) {
    use std::os::unix::fs::FileExt;
    let (home, pool) = std::sync::mpsc::sync_channel::<Vec<u8>>(DEPTH + 1);
    let opened = Arc::new(opened);
    let mut at = start;
    let end = start + len;
    let mut sent = 0u64;
    while at < end {
        let want = usize::try_from((end - at).min(READ_CHUNK as u64)).unwrap_or(READ_CHUNK);
        let mut buf = pool.try_recv().unwrap_or_default();
        let file = Arc::clone(&opened);
        let read = blocking(move || {
            buf.resize(want, 0);
            loop {
                match file.file.read_at(&mut buf, at) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        return Err(FileError::new(Kind::Io, format!("reading: {e}")));
                    }
                    Ok(n) => return Ok((buf, n)),
                }
            }
        });
        let (buf, n) = match read.await {
            Ok((_, 0)) => break,
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(error = %e.message, "reading a file to send");
                break;
            }
        };
        let chunk = Recycled {
            buf,
            len: n,
            home: home.clone(),
        };
        if tx.send(Bytes::from_owner(chunk)).await.is_err() {
            break;
        }
        at += n as u64;
        sent += n as u64;
    }
    crate::metrics::transfer_bytes(true, sent);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::{Scratch, read};

    async fn sent(opened: Opened, start: u64, len: u64) -> (Vec<u8>, usize) {
        let (tx, mut rx) = mpsc::channel(DEPTH);
        tokio::spawn(send(opened, start, len, tx));
        let (mut all, mut chunks) = (Vec::new(), 0);
        while let Some(b) = rx.recv().await {
            assert!(b.len() <= READ_CHUNK);
            all.extend_from_slice(&b);
            chunks += 1;
        }
        (all, chunks)
    }

    #[tokio::test]
    async fn a_range_is_sent_exactly_in_chunks_of_at_most_read_chunk() {
        let s = Scratch::new("send");
        let data: Vec<u8> = (0..READ_CHUNK * 2 + 10).map(|i| (i % 253) as u8).collect();
        std::fs::write(s.0.join("f"), &data).unwrap();
        let open = || read::open(&s.place("f")).unwrap();
        let (all, chunks) = sent(open(), 0, data.len() as u64).await;
        assert_eq!((all.len(), chunks), (data.len(), 3));
        assert_eq!(all, data);
        let (part, _) = sent(open(), 5, 100).await;
        assert_eq!(part, data[5..105]);
        // Past the end of a file that is shorter than asked: what there is.
        let (tail, _) = sent(open(), data.len() as u64 - 4, 100).await;
        assert_eq!(tail, data[data.len() - 4..]);
    }
}
