//! The verified transfer pipeline: a file's bytes streamed in to the
//! atomic commit, or out of an opened file, in bounded chunks on a bounded
//! share of the blocking pool. Every front-end that moves a file — the
//! HTTP `/files`, sandboxd's `/v1/files`, envd's `/files`, the `upload`
//! and `download` tools — calls it; none of them knows a chunk, a lane or
//! a sync.
//!
//! - [`workers`]: the file workers, the bounded share of tokio's blocking
//!   pool that all file work runs on.
//! - [`receive()`]: a stream of byte chunks ([`receive::Frames`]) written
//!   and hashed side by side into a [`super::commit::Staged`] file, synced
//!   in the background, committed at the end.
//! - [`send()`]: a byte range of an opened file read into a channel of
//!   chunks.
//!
//! # What it is not
//! It knows no transport: no status code, no header, no `Range` syntax, no
//! request or body type. A front-end turns its body into
//! [`receive::Frames`], gives the stall timeout, and renders
//! [`receive::Received`] and [`FileError`](super::FileError)'s
//! [`Kind`](super::Kind) in its own terms.
//!
//! # Memory stays flat
//! A received body is never collected: its frames are gathered into
//! [`receive::WRITE_CHUNK`]s that go through a channel of [`DEPTH`] to a
//! task that writes and hashes them: the write and the SHA-256 of each
//! chunk run side by side on the blocking pool, each lane one chunk at a
//! time and in order, and every [`receive::SYNC_EVERY`] bytes an
//! `fdatasync` starts in the background, so that the disk writes while the
//! body arrives; the commit still `fsync`s the whole file and checks the
//! hash before the rename. A client that stops or goes away drops the
//! channel, and the temporary file is removed. A file sent reads
//! [`send::READ_CHUNK`]-sized pieces into a channel as deep, which the
//! front-end drains as its client accepts them.
//!
//! # A stalled client holds nothing for long
//! A frame must arrive within the stall timeout the caller gives of the
//! previous one, or [`receive::Received::stalled`] is set and the
//! temporary file is removed before [`receive::receive`] returns. And no
//! blocking-pool thread ever waits for a client: each chunk's disk work is
//! a blocking task of its own (its write, its hash, its read), and the
//! waiting between chunks happens on the async side, so any number of
//! stalled transfers leaves the [`workers::FILE_WORKERS`] to the file
//! operations (a stalled transfer costs its buffers and a descriptor).

pub mod receive;
pub mod send;
pub mod workers;

pub use receive::{Frames, Received, receive};
pub use send::send;
pub use workers::blocking;

/// Chunks in flight between the client and the disk, either way.
pub const DEPTH: usize = 4;
