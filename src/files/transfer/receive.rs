//! Receiving a file: a stream of byte chunks from a client written into a
//! staged file and committed (see [`super`] for the pipeline and why
//! memory stays flat and a stalled client holds nothing).
//!
//! # Invariants
//! - Chunks are written and hashed in the order they came, each lane one
//!   chunk at a time; the commit sees the SHA-256 of exactly the bytes
//!   written.
//! - Nothing is committed unless the stream ended ([`Frames::next`] gave
//!   `None`); a stream that broke, stalled or went away leaves no
//!   temporary file behind once [`receive`] returns.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;

use super::DEPTH;
use super::workers::{blocking, start_blocking};
use crate::files::commit::{Committed, Options, Staged};
use crate::files::{FileError, Kind};

/// How big a chunk written to the disk is. A front-end hands a body over
/// in frames of at most its read buffer (16 KiB on the HTTP listeners); they are
/// gathered into chunks this big, so that the blocking pool is woken, and
/// `write(2)` called, once per MiB rather than once per frame. With
/// [`DEPTH`] in the channel, one being gathered, one in each lane and the
/// pool of reused chunks, an upload holds at most about 8 MiB of buffers.
pub const WRITE_CHUNK: usize = 1 << 20;

/// What the socket side hands the writing task.
enum Piece {
    Data(Bytes),
    /// The whole body arrived.
    End,
}

/// A body as the data frames [`receive`] writes: over HTTP the raw request
/// body or one part of a `multipart/form-data` one.
pub trait Frames: Send {
    /// The next bytes; `None` at the end; `Err` (the client's fault: a
    /// front-end says it as a `400`) for a broken body.
    fn next(&mut self) -> impl Future<Output = Option<Result<Bytes, String>>> + Send;
}

/// How a `PUT` body went.
pub struct Received {
    /// The commit, or why there was none.
    pub outcome: Result<Committed, FileError>,
    /// The whole body was read (else the connection cannot be reused).
    pub complete: bool,
    /// A frame did not come within the stall timeout (answer `408`).
    pub stalled: bool,
}

/// Streams `body` into the file `open` stages, and commits it with
/// `expected` and `opts` (see the module doc: memory stays flat, a stalled
/// or vanished client leaves nothing). The one upload pipeline, for
/// `/files`, sandboxd's `/v1/files` and envd's `/files`.
pub async fn receive<F: Frames>(
    body: &mut F,
    stall: Duration,
    open: impl FnOnce() -> Result<Staged, FileError> + Send + 'static,
    expected: Option<[u8; 32]>,
    opts: Options,
) -> Received {
    let (tx, rx) = mpsc::channel::<Piece>(DEPTH);
    // Chunks come back once written, to be filled again: buffers this big
    // are fresh mappings otherwise (the allocator maps anything over 128
    // KiB), each one page-faulted in and unmapped again.
    let (home, pool) = std::sync::mpsc::sync_channel::<BytesMut>(DEPTH + 1);
    let writer = tokio::spawn(write_pieces(open, rx, home, expected, opts));
    let mut complete = false;
    let mut stalled = false;
    let mut broken = None;
    let mut gathered = BytesMut::new();
    loop {
        let Ok(frame) = tokio::time::timeout(stall, body.next()).await else {
            stalled = true;
            break;
        };
        match frame {
            None => {
                complete = true;
                break;
            }
            Some(Ok(mut data)) => {
                let mut stopped = false;
                // Filled to exactly `WRITE_CHUNK` (a frame may straddle two
                // chunks), and handed over whole, not split off: a chunk
                // that grew past its capacity would be reallocated, and one
                // that shares its buffer with what is left could never come
                // back to the pool.
                while !data.is_empty() {
                    if gathered.capacity() == 0 {
                        gathered = match pool.try_recv() {
                            Ok(mut used) => {
                                used.clear();
                                used
                            }
                            Err(_) => BytesMut::with_capacity(WRITE_CHUNK),
                        };
                    }
                    let take = (WRITE_CHUNK - gathered.len().min(WRITE_CHUNK)).min(data.len());
                    gathered.extend_from_slice(&data[..take]);
                    data = data.slice(take..);
                    if gathered.len() < WRITE_CHUNK {
                        break;
                    }
                    let full = std::mem::take(&mut gathered).freeze();
                    if tx.send(Piece::Data(full)).await.is_err() {
                        stopped = true;
                        break;
                    }
                }
                if stopped {
                    // The writer stopped early: its error is the answer.
                    break;
                }
            }
            // The client went away or sent a broken body: the writer sees
            // the channel close without `End` and removes its file.
            Some(Err(why)) => {
                broken = Some(why);
                break;
            }
        }
    }
    if complete {
        if !gathered.is_empty() {
            let _ = tx.send(Piece::Data(gathered.freeze())).await;
        }
        let _ = tx.send(Piece::End).await;
    }
    drop(tx);
    // Awaited also after a stall, so the temporary file is gone before the
    // `408` is sent.
    let mut outcome = writer
        .await
        .unwrap_or_else(|e| Err(FileError::new(Kind::Io, format!("file task failed: {e}"))));
    if let (Some(why), Err(_)) = (broken, &outcome) {
        outcome = Err(FileError::new(
            Kind::Invalid,
            format!("{why}; nothing was written"),
        ));
    }
    Received {
        outcome,
        complete,
        stalled,
    }
}

/// One thing a `PUT` does to every chunk in order (write it, hash it),
/// on the blocking pool: idle with its state, or busy with a chunk and
/// giving the state back when done. Two lanes run side by side, each one
/// chunk at a time.
enum Lane<T> {
    Idle(T),
    Busy(tokio::task::JoinHandle<Result<T, FileError>>),
    /// Only while being switched, or after a failure.
    Gone,
}

impl<T: Send + 'static> Lane<T> {
    /// The state, once the chunk in hand is done.
    async fn wait(&mut self) -> Result<T, FileError> {
        match std::mem::replace(self, Lane::Gone) {
            Lane::Idle(t) => Ok(t),
            Lane::Busy(task) => task.await.unwrap_or_else(|e| {
                Err(FileError::new(Kind::Io, format!("file task failed: {e}")))
            }),
            Lane::Gone => Err(FileError::new(Kind::Io, "a file task failed before")),
        }
    }

    /// After the chunk in hand, starts `f` on the next one.
    async fn then(
        &mut self,
        f: impl FnOnce(T) -> Result<T, FileError> + Send + 'static,
    ) -> Result<(), FileError> {
        let t = self.wait().await?;
        *self = Lane::Busy(start_blocking(move || f(t)).await?);
        Ok(())
    }
}

/// Gives a written and hashed chunk back to `home` to be filled again, by
/// whichever lane lets go of it last.
fn recycle(d: Bytes, home: &std::sync::mpsc::SyncSender<BytesMut>) {
    if let Ok(used) = d.try_into_mut() {
        let _ = home.try_send(used);
    }
}

/// Written bytes after which a `PUT` starts an `fdatasync` of what it has
/// written (when none is running yet), so that the disk writes while the
/// body still arrives and the commit's `fsync` finds little left to do.
pub const SYNC_EVERY: u64 = 64 << 20;

/// The writing task of a `PUT`: waits for chunks on the async side and
/// hands each to two lanes — the write, and the SHA-256 — that run on
/// the blocking pool side by side (see the module doc), and syncs every
/// [`SYNC_EVERY`] bytes in the background.
async fn write_pieces(
    open: impl FnOnce() -> Result<Staged, FileError> + Send + 'static,
    mut rx: mpsc::Receiver<Piece>,
    home: std::sync::mpsc::SyncSender<BytesMut>,
    expected: Option<[u8; 32]>,
    opts: Options,
) -> Result<Committed, FileError> {
    use sha2::Digest;
    let staged = blocking(open).await?;
    let syncer = Arc::new(staged.sync_handle()?);
    let mut writing = Lane::Idle(staged);
    let mut hashing = Lane::Idle(sha2::Sha256::new());
    let mut syncing: Option<tokio::task::JoinHandle<Result<(), FileError>>> = None;
    let mut unsynced = 0u64;
    loop {
        match rx.recv().await {
            Some(Piece::Data(d)) => {
                unsynced += d.len() as u64;
                let (h, d2, home2) = (home.clone(), d.clone(), home.clone());
                hashing
                    .then(move |mut sha| {
                        sha.update(&d2);
                        recycle(d2, &home2);
                        Ok(sha)
                    })
                    .await?;
                writing
                    .then(move |mut staged| {
                        staged.append(&d)?;
                        recycle(d, &h);
                        Ok(staged)
                    })
                    .await?;
                if unsynced >= SYNC_EVERY && syncing.as_ref().is_none_or(|s| s.is_finished()) {
                    unsynced = 0;
                    let file = Arc::clone(&syncer);
                    // A failure shows again at the commit's `fsync`.
                    syncing = Some(
                        start_blocking(move || {
                            let _ = file.sync_data();
                            Ok(())
                        })
                        .await?,
                    );
                }
            }
            Some(Piece::End) => {
                let sha = hashing.wait().await?;
                let staged = writing.wait().await?;
                if let Some(s) = syncing {
                    let _ = s.await;
                }
                drop(syncer);
                let got: [u8; 32] = sha.finalize().into();
                return blocking(move || staged.commit_hashed(got, expected, opts)).await;
            }
            None => {
                // Dropped on the blocking side: removing the temporary
                // file is a syscall.
                let staged = writing.wait().await;
                return blocking(move || {
                    drop(staged);
                    Err(FileError::new(
                        Kind::Invalid,
                        "the body ended early; nothing was written",
                    ))
                })
                .await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use sha2::{Digest, Sha256};

    use super::*;
    use crate::files::Scratch;

    /// A body of these frames; then its end, or a stall (it never ends).
    struct Body {
        frames: VecDeque<Result<Bytes, String>>,
        stalls: bool,
    }

    impl Frames for Body {
        async fn next(&mut self) -> Option<Result<Bytes, String>> {
            match self.frames.pop_front() {
                Some(f) => Some(f),
                None if self.stalls => std::future::pending().await,
                None => None,
            }
        }
    }

    fn body(frames: Vec<Result<Bytes, String>>, stalls: bool) -> Body {
        Body {
            frames: frames.into(),
            stalls,
        }
    }

    const OPTS: Options = Options {
        mode: None,
        overwrite: true,
    };

    async fn put(s: &Scratch, b: &mut Body, expected: Option<[u8; 32]>) -> Received {
        let place = s.place("f");
        let open = move || Staged::create(place);
        receive(b, Duration::from_millis(200), open, expected, OPTS).await
    }

    #[tokio::test]
    async fn frames_of_any_size_are_gathered_written_in_order_and_hashed_once_committed() {
        let s = Scratch::new("receive");
        // Frames that straddle chunk boundaries, more than DEPTH chunks.
        let data: Vec<u8> = (0..WRITE_CHUNK * 5 + 123)
            .map(|i| (i % 251) as u8)
            .collect();
        let frames = data
            .chunks(16 * 1024 + 7)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        let sha: [u8; 32] = Sha256::digest(&data).into();
        let got = put(&s, &mut body(frames, false), Some(sha)).await;
        assert!(got.complete && !got.stalled);
        let done = got.outcome.unwrap();
        assert_eq!(done.bytes, data.len() as u64);
        assert_eq!(done.sha256, crate::files::hex(&sha));
        assert_eq!(std::fs::read(s.0.join("f")).unwrap(), data);
        assert_eq!(s.names(), ["f"]);
    }

    #[tokio::test]
    async fn a_mismatch_a_broken_body_and_a_stall_leave_nothing_behind() {
        let s = Scratch::new("refused");
        let frames = || vec![Ok(Bytes::from_static(b"hello"))];
        let got = put(&s, &mut body(frames(), false), Some([0; 32])).await;
        assert!(got.complete);
        assert_eq!(got.outcome.unwrap_err().kind, Kind::Mismatch);

        let mut broken = frames();
        broken.push(Err("reading the body: reset".into()));
        let got = put(&s, &mut body(broken, false), None).await;
        assert!(!got.complete && !got.stalled);
        let e = got.outcome.unwrap_err();
        assert_eq!(e.kind, Kind::Invalid);
        assert_eq!(e.message, "reading the body: reset; nothing was written");

        let got = put(&s, &mut body(frames(), true), None).await;
        assert!(got.stalled && !got.complete);
        assert!(got.outcome.is_err());
        assert!(s.names().is_empty(), "{:?}", s.names());
    }
}
