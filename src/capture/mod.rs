//! Output capture (docs/tools.md, "Output capture"): the per-stream sliding window, the
//! stream specs that read it, and the capture policy that picks which streams a terminal
//! result carries.
//!
//! This module owns no shared state and does no I/O: the job that owns a stream owns its
//! [`Window`] and pushes what its pipe yields; readers call [`Window::slice_with`] with a
//! [`StreamSpec`] and get a [`slice::Slice`], which is the wire form of a read.
//!
//! Invariants kept here, relied on by callers:
//! - offsets (`offset`, `bytes`, `total_bytes`, `dropped_bytes`) always count raw bytes of the
//!   stream, absolute from its first byte, whatever sanitising did to `data`;
//! - `data` is always valid UTF-8 and therefore always valid JSON;
//! - a slice never starts or (unless the stream itself ends there) ends inside a structurally
//!   valid UTF-8 character, except for `unaligned` reads;
//! - pagination is loss-free while the window still holds the bytes: the next read starts at
//!   `offset + bytes`;
//! - redaction is a policy this module does not know: a read may be given a
//!   [`Redact`] hook, which sees the slice's bytes with context and returns its `data`; it
//!   never moves the range;
//! - a read of a stream that is still being written ([`Window::slice_live`]) ends before the
//!   newest bytes that could still begin a secret (at most [`HOLD_BACK`] of them): they are
//!   returned once later output or the stream's end decides them.
//!
//! Layout: [`window`] stores bytes, [`mod@slice`] turns a spec into a slice, [`spec`] parses the
//! JSON forms, [`utf8`] holds the UTF-8 rules (sanitising, character boundaries), [`redact`]
//! is the redaction hook and the context it is given.

mod redact;
mod slice;
mod spec;
mod utf8;
mod window;

#[cfg_attr(
    not(test),
    expect(
        unused_imports,
        reason = "named by the redaction policy's docs and tests"
    )
)]
pub use redact::CONTEXT;
pub use redact::{HOLD_BACK, Redact};
pub use utf8::push_sanitized;
// For the fuzz facade (`crate::fuzzing`), which checks them against naive models.
pub use utf8::{char_around, sanitize_utf8};

pub use spec::{CapturePolicy, StreamSpec};
// `allow`, not `expect`: callers may reach this type only through `CapturePolicy::side`, in
// which case the re-export is unused, and naming it must not then become an error either.
pub use slice::Slice;
#[allow(
    unused_imports,
    reason = "part of the module's API whether or not a caller names it"
)]
pub use spec::StreamPair;
pub use window::Window;

/// Deterministic pseudo-random bytes (xorshift64) so tests need no `rand` dependency.
#[cfg(test)]
fn xorshift_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}
