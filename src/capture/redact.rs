//! The hook through which a read masks secrets, without capture knowing what a
//! secret is.
//!
//! Capture owns the bytes and the offsets; the policy that decides what to mask implements
//! [`Redact`] and is handed to [`Window::slice_with`](super::Window::slice_with). This keeps the
//! layering one-way: capture names only this trait, never the policy that implements it.
//!
//! The rule for context: a slice's bytes are handed over together with up to [`CONTEXT`] bytes
//! of the retained stream on each side (fewer at the window's edges), so that a secret cut by
//! the slice's edge is still recognised and its part inside the slice masked. A match that is
//! longer than any fixed context (a PEM private-key block, which is one match however long) is
//! handled by [`Redact::wants_wider`]: while a side looks like the inside of such a match, the
//! window offers that side again at twice the size, up to [`MAX_CONTEXT`].
//!
//! Invariant: whatever the redactor does to `data`, the slice's `offset`, `bytes` and
//! `total_bytes` are computed before it runs and describe the raw stream.
//!
//! # The live edge
//! Context after a slice exists only once it has been written. While a stream is still being
//! written, its newest bytes may be the beginning of a secret whose shape later output
//! completes (`postgres://admin:hunter2` before its `@`), which no redactor can recognise yet.
//! So a read of a stream that is still being written ([`Window::slice_live`]) ends where
//! [`Redact::held_back`] says such a beginning starts, at most [`HOLD_BACK`] bytes before the
//! end: those bytes are not returned yet (`offset + bytes` stops before them, as it stops
//! before an unfinished UTF-8 character), and the next read, once more output has arrived or
//! the stream has ended, returns them redacted with the context that decides them.

use std::ops::Range;

use super::utf8::char_around;
use super::window::Window;

/// Bytes of context offered on each side of a slice (docs/security.md: "up to 4 KiB").
pub const CONTEXT: usize = 4 << 10;

/// The most context a side can grow to through [`Redact::wants_wider`]. Private-key blocks
/// are well under this (an RSA-16384 key is about 12.5 KiB of PEM).
pub const MAX_CONTEXT: usize = 64 << 10;

/// The most bytes a read of a stream still being written holds back at its end (see "The
/// live edge"): as much as the context a later read is given before its start, since a
/// secret that begins further back than that could not be recognised by that read either.
pub const HOLD_BACK: usize = CONTEXT;

/// Masks secrets in one read of a stream.
///
/// Implementations must be pure functions of their input: the same bytes give the same text,
/// so that reads of overlapping ranges agree.
pub trait Redact {
    /// Returns the UTF-8-sanitised text of `text[data]`, with the part inside `data` of every
    /// match that overlaps `data` replaced by a marker, and how many matches did overlap it.
    ///
    /// `text` is the slice's raw bytes with the context around it: `text[..data.start]` are
    /// the stream bytes just before the slice, `text[data.end..]` those just after. `data`
    /// always lies within `text`.
    fn redact(&self, text: &[u8], data: Range<usize>) -> (String, u64);

    /// Whether `side` (the context before or after a slice) could lie wholly inside a match
    /// that begins or ends beyond it, so that a wider side is needed to decide. Called only
    /// while the window holds more bytes on that side and the side is smaller than
    /// [`MAX_CONTEXT`]. Default: never.
    fn wants_wider(&self, side: &[u8]) -> bool {
        let _ = side;
        false
    }

    /// How many of the last bytes of `tail` (the newest bytes of a stream that is still being
    /// written, at most [`HOLD_BACK`] of them) must not be shown yet, because later output could
    /// complete a match that begins there. Must be sound: every match of the finished stream
    /// that a read of `tail` cannot see whole begins within the bytes held back (or before
    /// `tail`). Default: none.
    fn held_back(&self, tail: &[u8]) -> usize {
        let _ = tail;
        0
    }
}

impl Window {
    /// Where a read of this stream, still being written, must end: before the newest bytes
    /// that `redact` holds back (see "The live edge"), never inside a character, never before
    /// the oldest retained byte.
    pub fn live_end(&self, redact: &dyn Redact) -> u64 {
        let total = self.total();
        let lo = total.saturating_sub(HOLD_BACK as u64).max(self.oldest());
        let tail = self.copy(lo, total);
        let held = redact.held_back(&tail).min(tail.len());
        let end = total - held as u64;
        // A pattern may begin inside a character (byte patterns): hold the whole character.
        match char_around(end, |at| self.byte_at(at)) {
            Some((lead, _)) if lead >= lo => lead,
            _ => end,
        }
    }

    /// The redacted text of the retained bytes `[start, end)` and the number of matches that
    /// overlapped them. The range is clamped to the retained bytes, which the reads of
    /// [`mod@super::slice`] never leave.
    pub(super) fn redacted(&self, start: u64, end: u64, redact: &dyn Redact) -> (String, u64) {
        let (oldest, total) = (self.oldest(), self.total());
        let start = start.clamp(oldest, total);
        let end = end.clamp(start, total);
        if start == end {
            return (String::new(), 0);
        }
        let (mut back, mut ahead) = (CONTEXT as u64, CONTEXT as u64);
        let max = MAX_CONTEXT as u64;
        loop {
            let lo = start.saturating_sub(back).max(oldest);
            let hi = end.saturating_add(ahead).min(total);
            let text = self.copy(lo, hi);
            // `text` holds exactly `[lo, hi)`, so these offsets fit in it (and in `usize`).
            let at = |pos: u64| usize::try_from(pos - lo).map_or(text.len(), |i| i.min(text.len()));
            let data = at(start)..at(end);
            let wider_back = lo > oldest && back < max && redact.wants_wider(&text[..data.start]);
            let wider_ahead = hi < total && ahead < max && redact.wants_wider(&text[data.end..]);
            if !wider_back && !wider_ahead {
                return redact.redact(&text, data);
            }
            if wider_back {
                back *= 2;
            }
            if wider_ahead {
                ahead *= 2;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::StreamSpec;
    use crate::capture::utf8::sanitize_utf8;
    use std::cell::RefCell;

    /// Records what it was given and masks every `#`, so tests can see the context and the
    /// effect of a match that overlaps the slice.
    #[derive(Default)]
    struct Recorder {
        calls: RefCell<Vec<(Vec<u8>, Range<usize>)>>,
        /// `wants_wider` answers true while a side is all `=`.
        widen_on_equals: bool,
    }

    impl Redact for Recorder {
        fn redact(&self, text: &[u8], data: Range<usize>) -> (String, u64) {
            self.calls.borrow_mut().push((text.to_vec(), data.clone()));
            let masked: Vec<u8> = text[data]
                .iter()
                .map(|&b| if b == b'#' { b'*' } else { b })
                .collect();
            let n = masked.iter().filter(|&&b| b == b'*').count() as u64;
            (sanitize_utf8(&masked), n)
        }

        fn wants_wider(&self, side: &[u8]) -> bool {
            self.widen_on_equals && side.iter().all(|&b| b == b'=')
        }
    }

    fn window(max: usize, bytes: &[u8]) -> Window {
        let mut window = Window::new(max);
        window.push(bytes);
        window
    }

    fn from(from: u64, length: u64) -> StreamSpec {
        StreamSpec::From {
            from,
            length: Some(length),
            unaligned: true,
        }
    }

    #[test]
    fn the_redactor_sees_the_slice_with_4_kib_of_context_each_side() {
        let bytes: Vec<u8> = (0..20_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let w = window(1 << 20, &bytes);
        let recorder = Recorder::default();
        let slice = w.slice_with(&from(10_000, 100), Some(&recorder));
        assert!(slice.is_some());
        let calls = recorder.calls.borrow();
        assert_eq!(calls.len(), 1);
        let (text, data) = &calls[0];
        assert_eq!(*data, CONTEXT..CONTEXT + 100);
        assert_eq!(
            &text[..],
            &bytes[10_000 - CONTEXT..10_100 + CONTEXT],
            "context is the stream's own adjacent bytes"
        );
    }

    #[test]
    fn context_stops_at_the_window_edges() {
        let mut w = Window::new(1000);
        w.push(&[b'x'; 1500]);
        let recorder = Recorder::default();
        // Retained: 500..1500. A read at 600..700 has 100 bytes before it and 800 after.
        assert!(w.slice_with(&from(600, 100), Some(&recorder)).is_some());
        let calls = recorder.calls.borrow();
        assert_eq!(calls[0].0.len(), 1000);
        assert_eq!(calls[0].1, 100..200);
    }

    #[test]
    fn a_side_that_wants_more_context_grows_by_doubling_up_to_the_maximum() {
        let mut bytes = vec![b'='; 200_000];
        bytes[100_000..100_010].copy_from_slice(b"##########");
        let w = window(1 << 20, &bytes);
        let recorder = Recorder {
            widen_on_equals: true,
            ..Recorder::default()
        };
        let slice = w.slice_with(&from(100_000, 10), Some(&recorder));
        assert_eq!(slice.map(|s| s.redacted), Some(Some(10)));
        let calls = recorder.calls.borrow();
        let (text, data) = calls.last().expect("the redactor was called");
        assert_eq!(data.start, MAX_CONTEXT);
        assert_eq!(text.len(), MAX_CONTEXT * 2 + 10);
        // 4, 8, 16, 32 KiB were each looked at and found too narrow.
        assert_eq!(calls.len(), 1, "only the final context is redacted");
    }

    #[test]
    fn a_side_stops_growing_at_the_window_head() {
        let mut bytes = vec![b'='; 10_000];
        bytes.extend_from_slice(b"tail");
        let w = window(1 << 20, &bytes);
        let recorder = Recorder {
            widen_on_equals: true,
            ..Recorder::default()
        };
        assert!(w.slice_with(&from(9_000, 4), Some(&recorder)).is_some());
        let calls = recorder.calls.borrow();
        let (text, data) = &calls[0];
        assert_eq!(data.start, 9_000, "the whole retained head, in one call");
        assert_eq!(text.len(), 10_004);
    }

    #[test]
    fn offsets_and_counts_describe_the_raw_stream_whatever_the_redactor_returns() {
        let w = window(64, b"ab#cd#ef");
        let recorder = Recorder::default();
        let plain = w.slice(&StreamSpec::All);
        let masked = w.slice_with(&StreamSpec::All, Some(&recorder));
        let (Some(plain), Some(masked)) = (plain, masked) else {
            panic!("both reads give a slice");
        };
        assert_eq!(masked.data, "ab*cd*ef");
        assert_eq!(
            (masked.offset, masked.bytes, masked.total_bytes),
            (plain.offset, plain.bytes, plain.total_bytes)
        );
        assert_eq!((plain.redacted, masked.redacted), (None, Some(2)));
    }

    #[test]
    fn an_empty_read_never_calls_the_redactor() {
        let w = window(64, b"abc");
        let recorder = Recorder::default();
        let slice = w.slice_with(&from(3, 10), Some(&recorder));
        assert_eq!(
            slice.map(|s| (s.data, s.redacted)),
            Some((String::new(), None))
        );
        assert!(recorder.calls.borrow().is_empty());
    }

    #[test]
    fn a_slice_without_matches_serialises_exactly_as_without_a_redactor() {
        let w = window(8, b"0123456789\n");
        let recorder = Recorder::default();
        for spec in [StreamSpec::All, StreamSpec::Tail(1), from(2, 5)] {
            let plain = serde_json::to_string(&w.slice(&spec)).ok();
            let hooked = serde_json::to_string(&w.slice_with(&spec, Some(&recorder))).ok();
            assert_eq!(plain, hooked, "{spec:?}");
        }
    }

    #[test]
    fn a_slice_with_matches_says_how_many_on_the_wire() {
        let w = window(64, b"a#b");
        let recorder = Recorder::default();
        let json = serde_json::to_string(&w.slice_with(&StreamSpec::All, Some(&recorder))).ok();
        assert_eq!(
            json.as_deref(),
            Some(r#"{"data":"a*b","offset":0,"bytes":3,"total_bytes":3,"redacted":1}"#)
        );
    }
}
