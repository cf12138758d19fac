//! The fuzz targets' entry points (FUZZING.md): one function per target in
//! `fuzz/fuzz_targets/`, each taking libFuzzer's raw bytes, running one part
//! of the server in process and panicking when an invariant breaks. Nothing
//! here spawns or signals a process: [`dispatch`](fn@dispatch) runs the
//! real sessions and tools over a job service whose every job fails to start
//! (`Jobs::refusing`).
//!
//! Where a part has a simple meaning, its output is checked against a naive
//! model written here, not only for not panicking: line framing against
//! `split('\n')`, window reads against the whole stream kept in a `Vec`, the
//! UTF-8 sanitiser and character alignment against a byte-at-a-time decoder,
//! signal names against their round trip, redaction against known secrets
//! planted in the input, the HTTP checks against what the header must look
//! like.
//!
//! Each function is also a plain test on stable, one in its target's module
//! driven by `stable`: the committed seed corpus, then seeded random
//! mutations of it, a bounded count. That is what runs where nightly or
//! `cargo-fuzz` is missing.
//!
//! One module per target, named after it; this file holds only what they
//! share: the input reader `Input` and the PRNG `xorshift`.
//!
//! Not public API: hidden from the docs, and free to change with the targets.

mod capture;
mod dispatch;
mod files_path;
mod http_checks;
mod line_framing;
mod redaction;
mod signal;
#[cfg(test)]
mod stable;
mod terminal;
mod utf8;

pub use capture::capture;
pub use dispatch::dispatch;
pub use files_path::files_path;
pub use http_checks::http_checks;
pub use line_framing::line_framing;
pub use redaction::redaction;
pub use signal::signal;
pub use terminal::terminal;
pub use utf8::utf8;

/// Reads an input as a sequence of small decisions: a byte at a time, then
/// zeros once it is used up (so every input decodes to something).
struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    /// Up to `n` bytes.
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// The bytes up to the next `sep` (not included), or the rest.
    fn field(&mut self, sep: u8) -> &'a [u8] {
        match self.data.iter().position(|&b| b == sep) {
            Some(i) => {
                let head = &self.data[..i];
                self.data = &self.data[i + 1..];
                head
            }
            None => self.take(self.data.len()),
        }
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
