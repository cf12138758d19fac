//! Reading a [`Window`] with a [`StreamSpec`]: the semantics of a stream spec, and the wire form
//! of the result ([`Slice`]).
//!
//! Every read computes a raw byte range `[start, end)` inside the retained window first and
//! only then copies and sanitises it, so `offset` and `bytes` describe raw bytes whatever
//! sanitising does to `data`. Alignment only ever moves a boundary to the edge of a valid
//! character; `start <= end` holds after every adjustment. Redaction, when asked for, runs on
//! that same range (with context, see [`super::redact`]) and changes only `data` and
//! `redacted`, never the range.

use serde::Serialize;

use super::redact::Redact;
use super::spec::StreamSpec;
use super::utf8::{char_around, sanitize_owned};
use super::window::Window;

/// One read of one stream, as sent on the wire:
/// `{"data", "offset", "bytes", "total_bytes", "truncated"?, "dropped_bytes"?, "redacted"?}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Slice {
    /// The returned bytes, UTF-8-sanitised: each run of invalid bytes becomes one U+FFFD;
    /// NUL bytes are kept.
    pub data: String,
    /// Absolute offset of the first returned byte.
    pub offset: u64,
    /// Raw bytes returned; the next page starts at `offset + bytes`.
    pub bytes: u64,
    /// Bytes ever written to the stream.
    pub total_bytes: u64,
    /// The read reached into bytes the window has already dropped.
    #[serde(skip_serializing_if = "is_false")]
    pub truncated: bool,
    /// How many requested bytes are gone (all dropped bytes for `all` and `tail`); present
    /// exactly when `truncated`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropped_bytes: Option<u64>,
    /// How many secrets were masked in `data`; present only when at least one
    /// was, so a read without redaction, or without matches, is exactly what it was before
    /// redaction existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redacted: Option<u64>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Window {
    /// Reads the window as `spec` asks; `None` for [`StreamSpec::None`].
    ///
    /// `all` and `tail` never begin in the middle of a character: when the window's head cuts
    /// one (its first bytes were dropped), they start at the next character boundary, exactly
    /// like a `from` read that starts at the oldest retained byte. The skipped bytes show in
    /// `offset`. (The server always reads through [`Window::slice_with`],
    /// with or without a redactor; this shorthand serves the tests.)
    #[cfg(test)]
    pub fn slice(&self, spec: &StreamSpec) -> Option<Slice> {
        self.slice_with(spec, None)
    }

    /// Reads the window as `spec` asks (as `slice` does), with `data` passed through `redact`
    /// when one is given: the range read is the same, only `data` changes and `redacted` counts
    /// the matches.
    pub fn slice_with(&self, spec: &StreamSpec, redact: Option<&dyn Redact>) -> Option<Slice> {
        self.slice_upto(spec, redact, self.total())
    }

    /// Reads a stream that is still being written, as [`Window::slice_with`] does but ending
    /// no later than [`Window::live_end`] when a redactor is given (module
    /// [`super::redact`], "The live edge"): the bytes after it are not returned yet, so
    /// `offset + bytes` stops before them; `total_bytes` still counts them.
    pub fn slice_live(&self, spec: &StreamSpec, redact: Option<&dyn Redact>) -> Option<Slice> {
        let limit = redact.map_or(self.total(), |r| self.live_end(r));
        self.slice_upto(spec, redact, limit)
    }

    /// The read `spec` asks for, cut at `limit` (a character boundary): a read that starts
    /// after it is empty where it starts.
    fn slice_upto(
        &self,
        spec: &StreamSpec,
        redact: Option<&dyn Redact>,
        limit: u64,
    ) -> Option<Slice> {
        let mut read = match *spec {
            StreamSpec::None => return None,
            StreamSpec::All => self.read_all(),
            StreamSpec::Tail(lines) => self.read_tail(lines),
            StreamSpec::From {
                from,
                length,
                unaligned,
            } => self.read_from(from, length, unaligned),
        };
        read.end = read.end.min(limit.max(read.start));
        Some(self.make_slice(read, redact))
    }

    fn read_all(&self) -> RawRange {
        let start = self.head_boundary();
        RawRange::new(start, self.total(), self.dropped_if_any())
    }

    /// Lines end after each `\n`; a final stretch without one is a line too, and so is the
    /// (possibly partial) first line of the window. The result is "truncated" whenever it
    /// reaches the window's head after bytes were dropped, even if the head happens to fall on
    /// a line start: the window cannot tell whether the requested lines were all there.
    fn read_tail(&self, lines: u64) -> RawRange {
        let total = self.total();
        if lines == 0 {
            return RawRange::new(total, total, None);
        }
        let oldest = self.oldest();
        // The last byte never starts a line: if it is `\n` it ends the last line.
        let mut search_end = total.saturating_sub(1).max(oldest);
        let mut found = 0;
        while found < lines {
            match self.rfind(b'\n', oldest, search_end) {
                Some(newline) => {
                    search_end = newline;
                    found += 1;
                }
                None => break,
            }
        }
        if found == lines {
            return RawRange::new(search_end + 1, total, None);
        }
        RawRange::new(self.head_boundary(), total, self.dropped_if_any())
    }

    /// A read that starts inside the dropped head starts at the oldest retained byte instead,
    /// and its `length` counts from there, as the reference does: `dropped_bytes` is how far
    /// the start moved, `oldest - from`.
    fn read_from(&self, from: u64, length: Option<u64>, unaligned: bool) -> RawRange {
        let (oldest, total) = (self.oldest(), self.total());
        if from >= total {
            return RawRange::new(total, total, None);
        }
        let (first, gone) = if from < oldest {
            (oldest, Some(oldest - from))
        } else {
            (from, None)
        };
        let requested_end = length.map_or(total, |len| first.saturating_add(len).min(total));
        if unaligned {
            return RawRange::new(first, requested_end, gone);
        }
        let start = if from < oldest {
            self.head_boundary()
        } else {
            match self.char_around(from) {
                Some((lead, _)) if lead >= oldest => lead,
                // The lead byte was dropped, so the character cannot be returned whole.
                Some((_, char_end)) => char_end,
                None => from,
            }
        };
        let end = if requested_end == first {
            // A zero-length read stays zero-length instead of growing to a whole character.
            start
        } else {
            self.char_around(requested_end)
                .map_or(requested_end, |(_, char_end)| char_end)
                .max(start)
        };
        RawRange::new(start, end, gone)
    }

    /// The oldest retained byte, or the next character boundary if the head cuts a character.
    fn head_boundary(&self) -> u64 {
        let oldest = self.oldest();
        self.char_around(oldest)
            .map_or(oldest, |(_, char_end)| char_end)
    }

    fn char_around(&self, pos: u64) -> Option<(u64, u64)> {
        char_around(pos, |at| self.byte_at(at))
    }

    fn dropped_if_any(&self) -> Option<u64> {
        Some(self.dropped()).filter(|&n| n > 0)
    }

    fn make_slice(&self, read: RawRange, redact: Option<&dyn Redact>) -> Slice {
        let RawRange {
            start,
            end,
            dropped_bytes,
        } = read;
        let (data, redacted) = match redact {
            Some(redact) => {
                let (data, matches) = self.redacted(start, end, redact);
                (data, Some(matches).filter(|&n| n > 0))
            }
            None => (sanitize_owned(self.copy(start, end)), None),
        };
        Slice {
            data,
            offset: start,
            bytes: end - start,
            total_bytes: self.total(),
            truncated: dropped_bytes.is_some(),
            dropped_bytes,
            redacted,
        }
    }
}

/// The raw range a spec resolved to, before any byte is copied.
struct RawRange {
    start: u64,
    end: u64,
    dropped_bytes: Option<u64>,
}

impl RawRange {
    fn new(start: u64, end: u64, dropped_bytes: Option<u64>) -> Self {
        Self {
            start,
            end,
            dropped_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::xorshift_bytes;
    use super::*;
    use serde_json::json;

    fn window(max: usize, chunks: &[&[u8]]) -> Window {
        let mut window = Window::new(max);
        for chunk in chunks {
            window.push(chunk);
        }
        window
    }

    fn read(window: &Window, spec: StreamSpec) -> Slice {
        match window.slice(&spec) {
            Some(slice) => slice,
            None => panic!("{spec:?} returned no slice"),
        }
    }

    fn from(from: u64, length: Option<u64>) -> StreamSpec {
        StreamSpec::From {
            from,
            length,
            unaligned: false,
        }
    }

    fn from_unaligned(from: u64, length: Option<u64>) -> StreamSpec {
        StreamSpec::From {
            from,
            length,
            unaligned: true,
        }
    }

    /// `(data, offset, bytes)` of a read, for compact assertions.
    fn dob(window: &Window, spec: StreamSpec) -> (String, u64, u64) {
        let slice = read(window, spec);
        (slice.data, slice.offset, slice.bytes)
    }

    fn s(text: &str) -> String {
        text.to_owned()
    }

    #[test]
    fn none_returns_no_slice() {
        assert_eq!(window(8, &[b"abc"]).slice(&StreamSpec::None), None);
    }

    #[test]
    fn all_returns_the_whole_stream_when_nothing_was_dropped() {
        let w = window(64, &[b"hello ", b"world"]);
        let slice = read(&w, StreamSpec::All);
        assert_eq!(
            slice,
            Slice {
                data: s("hello world"),
                offset: 0,
                bytes: 11,
                total_bytes: 11,
                truncated: false,
                dropped_bytes: None,
                redacted: None,
            }
        );
    }

    #[test]
    fn all_on_an_empty_stream_is_empty_at_offset_zero() {
        let slice = read(&Window::new(16), StreamSpec::All);
        assert_eq!((slice.data.as_str(), slice.offset, slice.bytes), ("", 0, 0));
        assert!(!slice.truncated);
    }

    #[test]
    fn all_after_dropping_reports_every_dropped_byte() {
        let w = window(4, &[b"abcdefgh"]);
        let slice = read(&w, StreamSpec::All);
        assert_eq!(
            (slice.data.as_str(), slice.offset, slice.bytes),
            ("efgh", 4, 4)
        );
        assert_eq!((slice.truncated, slice.dropped_bytes), (true, Some(4)));
        assert_eq!(slice.total_bytes, 8);
    }

    #[test]
    fn all_skips_the_rest_of_a_character_whose_first_byte_was_dropped() {
        // "a→b" = 61 E2 86 92 62; a 3-byte window keeps 86 92 62.
        let w = window(3, &["a→b".as_bytes()]);
        let slice = read(&w, StreamSpec::All);
        assert_eq!(
            (slice.data.as_str(), slice.offset, slice.bytes),
            ("b", 4, 1)
        );
        assert_eq!(slice.dropped_bytes, Some(2));
    }

    #[test]
    fn all_keeps_stray_continuation_bytes_at_the_head_as_invalid_data() {
        // The dropped byte before the head is ASCII, so 0x86 is garbage, not half a character.
        let w = window(3, &[b"a\x86bc"]);
        let slice = read(&w, StreamSpec::All);
        assert_eq!(
            (slice.data.as_str(), slice.offset, slice.bytes),
            ("\u{FFFD}bc", 1, 3)
        );
    }

    #[test]
    fn tail_returns_the_last_lines_with_their_endings() {
        let w = window(64, &[b"one\ntwo\nthree\n"]);
        assert_eq!(dob(&w, StreamSpec::Tail(1)), (s("three\n"), 8, 6));
        assert_eq!(dob(&w, StreamSpec::Tail(2)), (s("two\nthree\n"), 4, 10));
        assert_eq!(
            dob(&w, StreamSpec::Tail(3)),
            (s("one\ntwo\nthree\n"), 0, 14)
        );
        assert_eq!(
            dob(&w, StreamSpec::Tail(99)),
            (s("one\ntwo\nthree\n"), 0, 14)
        );
    }

    #[test]
    fn tail_counts_an_unterminated_last_line_as_a_line() {
        assert_eq!(
            dob(&window(64, &[b"a\nb\n"]), StreamSpec::Tail(1)),
            (s("b\n"), 2, 2)
        );
        assert_eq!(
            dob(&window(64, &[b"a\nb"]), StreamSpec::Tail(1)),
            (s("b"), 2, 1)
        );
    }

    #[test]
    fn tail_counts_empty_lines() {
        let w = window(64, &[b"x\n\n\n"]);
        assert_eq!(dob(&w, StreamSpec::Tail(1)), (s("\n"), 3, 1));
        assert_eq!(dob(&w, StreamSpec::Tail(2)), (s("\n\n"), 2, 2));
        assert_eq!(dob(&w, StreamSpec::Tail(3)), (s("x\n\n\n"), 0, 4));
    }

    #[test]
    fn tail_zero_is_empty_at_the_end_of_the_stream() {
        let w = window(4, &[b"abc\ndef\n"]);
        let slice = read(&w, StreamSpec::Tail(0));
        assert_eq!((slice.data.as_str(), slice.offset, slice.bytes), ("", 8, 0));
        assert!(!slice.truncated && slice.dropped_bytes.is_none());
    }

    #[test]
    fn tail_on_an_empty_stream_is_empty() {
        assert_eq!(dob(&Window::new(8), StreamSpec::Tail(3)), (s(""), 0, 0));
    }

    #[test]
    fn tail_counts_a_first_partial_line_as_a_line() {
        // Stream "first\nsecond\nthird\n"; a 10-byte window keeps "ond\nthird\n".
        let w = window(10, &[b"first\nsecond\nthird\n"]);
        assert_eq!(dob(&w, StreamSpec::Tail(2)), (s("ond\nthird\n"), 9, 10));
    }

    #[test]
    fn tail_within_the_window_is_not_truncated_even_after_dropping() {
        let w = window(10, &[b"first\nsecond\nthird\n"]);
        let slice = read(&w, StreamSpec::Tail(1));
        assert_eq!((slice.data.as_str(), slice.offset), ("third\n", 13));
        assert!(!slice.truncated && slice.dropped_bytes.is_none());
    }

    #[test]
    fn tail_reaching_the_head_after_dropping_reports_every_dropped_byte() {
        let w = window(10, &[b"first\nsecond\nthird\n"]);
        for lines in [2, 3, 100] {
            let slice = read(&w, StreamSpec::Tail(lines));
            assert_eq!(slice.offset, 9);
            assert_eq!((slice.truncated, slice.dropped_bytes), (true, Some(9)));
        }
    }

    #[test]
    fn tail_reaching_the_head_without_dropping_is_not_truncated() {
        let slice = read(&window(64, &[b"a\nb\n"]), StreamSpec::Tail(5));
        assert!(!slice.truncated && slice.dropped_bytes.is_none());
    }

    #[test]
    fn tail_reaching_a_head_that_cuts_a_character_starts_after_it() {
        // "x→y\nz" = 78 E2 86 92 79 0A 7A; a 5-byte window keeps 86 92 79 0A 7A.
        let w = window(5, &["x→y\nz".as_bytes()]);
        assert_eq!(dob(&w, StreamSpec::Tail(2)), (s("y\nz"), 4, 3));
        assert_eq!(dob(&w, StreamSpec::Tail(1)), (s("z"), 6, 1));
    }

    #[test]
    fn from_reads_the_requested_range() {
        let w = window(64, &[b"0123456789"]);
        assert_eq!(dob(&w, from(3, Some(4))), (s("3456"), 3, 4));
        assert_eq!(dob(&w, from(3, None)), (s("3456789"), 3, 7));
        assert_eq!(dob(&w, from(8, Some(100))), (s("89"), 8, 2));
        assert_eq!(dob(&w, from(0, Some(u64::MAX))), (s("0123456789"), 0, 10));
    }

    #[test]
    fn from_with_length_zero_is_empty_at_the_start() {
        let w = window(64, &[b"0123456789"]);
        assert_eq!(dob(&w, from(4, Some(0))), (s(""), 4, 0));
        // Even inside a character, a zero-length read does not grow to the whole character.
        let w = window(64, &["héllo→".as_bytes()]);
        assert_eq!(dob(&w, from(2, Some(0))), (s(""), 1, 0));
    }

    #[test]
    fn from_past_the_end_is_empty_at_total_bytes() {
        let w = window(4, &[b"0123456789"]);
        for start in [10, 11, u64::MAX] {
            let slice = read(&w, from(start, Some(5)));
            assert_eq!(
                (slice.data.as_str(), slice.offset, slice.bytes),
                ("", 10, 0)
            );
            assert_eq!(slice.total_bytes, 10);
            assert!(!slice.truncated && slice.dropped_bytes.is_none());
        }
    }

    #[test]
    fn negative_from_and_length_read_from_zero_and_read_nothing() {
        let w = window(64, &[b"abc"]);
        let parse = |v| match StreamSpec::from_json(&v) {
            Ok(spec) => spec,
            Err(err) => panic!("{err}"),
        };
        assert_eq!(dob(&w, parse(json!({"from": -10}))), (s("abc"), 0, 3));
        assert_eq!(
            dob(&w, parse(json!({"from": -10, "length": -3}))),
            (s(""), 0, 0)
        );
    }

    #[test]
    fn from_into_the_dropped_head_starts_at_the_oldest_byte_and_counts_length_from_there() {
        // Stream "0123456789", window keeps "6789" (oldest = 6).
        let w = window(4, &[b"0123456789"]);
        let slice = read(&w, from(2, Some(3)));
        assert_eq!(
            (slice.data.as_str(), slice.offset, slice.bytes),
            ("678", 6, 3)
        );
        assert_eq!((slice.truncated, slice.dropped_bytes), (true, Some(4)));
        let slice = read(&w, from(2, None));
        assert_eq!(
            (slice.data.as_str(), slice.offset, slice.bytes),
            ("6789", 6, 4)
        );
        assert_eq!(slice.dropped_bytes, Some(4));
        let slice = read(&w, from_unaligned(0, Some(2)));
        assert_eq!((slice.data.as_str(), slice.offset), ("67", 6));
        assert_eq!(slice.dropped_bytes, Some(6));
    }

    #[test]
    fn the_spec_example_of_a_read_inside_the_dropped_head_holds() {
        // The reference's example: the first 740 bytes dropped; {"from":0,"length":50} gives
        // 740..790.
        let stream: Vec<u8> = (0..1740u32).map(|i| b'a' + (i % 26) as u8).collect();
        let w = window(1000, &[&stream]);
        let slice = read(&w, from(0, Some(50)));
        assert_eq!((slice.offset, slice.bytes), (740, 50));
        assert_eq!(slice.data.as_bytes(), &stream[740..790]);
        assert_eq!((slice.truncated, slice.dropped_bytes), (true, Some(740)));
    }

    #[test]
    fn a_zero_length_read_inside_the_dropped_head_is_empty_at_the_oldest_byte() {
        let w = window(4, &[b"0123456789"]);
        let slice = read(&w, from(1, Some(0)));
        assert_eq!((slice.data.as_str(), slice.offset, slice.bytes), ("", 6, 0));
        assert_eq!((slice.truncated, slice.dropped_bytes), (true, Some(5)));
    }

    #[test]
    fn from_in_the_window_after_dropping_is_not_truncated() {
        let w = window(4, &[b"0123456789"]);
        let slice = read(&w, from(7, None));
        assert_eq!((slice.data.as_str(), slice.offset), ("789", 7));
        assert!(!slice.truncated && slice.dropped_bytes.is_none());
    }

    #[test]
    fn the_spec_examples_for_utf8_alignment_hold() {
        // "héllo→": h=0, é=1..3, l=3, l=4, o=5, →=6..9.
        let w = window(64, &["héllo→".as_bytes()]);
        assert_eq!(dob(&w, from(2, None)), (s("éllo→"), 1, 8));
        assert_eq!(dob(&w, from(7, None)), (s("→"), 6, 3));
        assert_eq!(dob(&w, from(0, Some(2))), (s("hé"), 0, 3));
        assert_eq!(dob(&w, from_unaligned(2, Some(3))), (s("\u{FFFD}ll"), 2, 3));
    }

    #[test]
    fn an_end_inside_a_character_moves_past_its_last_byte() {
        let w = window(64, &["héllo→".as_bytes()]);
        assert_eq!(dob(&w, from(3, Some(4))), (s("llo→"), 3, 6));
        assert_eq!(dob(&w, from(5, Some(2))), (s("o→"), 5, 4));
    }

    #[test]
    fn an_end_never_moves_past_the_end_of_data() {
        // The writer is mid-character: "a" E2 86 (the 92 has not arrived yet).
        let w = window(64, &[b"a\xE2\x86"]);
        assert_eq!(dob(&w, from(0, Some(2))), (s("a\u{FFFD}"), 0, 3));
        assert_eq!(dob(&w, from(2, None)), (s("\u{FFFD}"), 1, 2));
    }

    #[test]
    fn unaligned_reads_return_exact_bytes() {
        let w = window(64, &["héllo→".as_bytes()]);
        assert_eq!(dob(&w, from_unaligned(0, Some(2))), (s("h\u{FFFD}"), 0, 2));
        assert_eq!(dob(&w, from_unaligned(7, Some(1))), (s("\u{FFFD}"), 7, 1));
        let w = window(3, &["a→b".as_bytes()]);
        let slice = read(&w, from_unaligned(0, None));
        assert_eq!(
            (slice.data.as_str(), slice.offset, slice.bytes),
            ("\u{FFFD}b", 2, 3)
        );
        assert_eq!(slice.dropped_bytes, Some(2));
    }

    #[test]
    fn a_start_whose_character_lost_its_first_byte_moves_forward() {
        // "a→b" with a 3-byte window: 0xE2 at offset 1 is dropped, 86 92 62 remain.
        let w = window(3, &["a→b".as_bytes()]);
        assert_eq!(dob(&w, from(2, None)), (s("b"), 4, 1));
        assert_eq!(dob(&w, from(3, None)), (s("b"), 4, 1));
        // From the dropped head: the read starts at the oldest byte (2), which is inside
        // "→", so it moves past that character.
        let slice = read(&w, from(0, Some(3)));
        assert_eq!(
            (slice.data.as_str(), slice.offset, slice.bytes),
            ("b", 4, 1)
        );
        assert_eq!(slice.dropped_bytes, Some(2));
    }

    #[test]
    fn invalid_bytes_are_not_moved_around() {
        let w = window(64, &[b"ab\xFF\x80\x80cd"]);
        assert_eq!(dob(&w, from(3, Some(1))), (s("\u{FFFD}"), 3, 1));
        assert_eq!(dob(&w, from(0, Some(4))), (s("ab\u{FFFD}"), 0, 4));
    }

    #[test]
    fn runs_of_invalid_bytes_become_one_replacement_character_but_count_raw() {
        let w = window(64, &[b"ok\xFF\xFF\xFEend"]);
        let slice = read(&w, StreamSpec::All);
        assert_eq!(slice.data, "ok\u{FFFD}end");
        assert_eq!((slice.bytes, slice.total_bytes), (8, 8));
    }

    #[test]
    fn nul_bytes_are_kept() {
        let w = window(64, &[b"a\0b\0"]);
        assert_eq!(read(&w, StreamSpec::All).data, "a\0b\0");
        assert_eq!(read(&w, StreamSpec::Tail(1)).data, "a\0b\0");
    }

    #[test]
    fn slices_serialise_to_the_wire_form() {
        let w = window(64, &[b"hi\n"]);
        let plain = serde_json::to_value(read(&w, StreamSpec::All)).ok();
        assert_eq!(
            plain,
            Some(json!({"data": "hi\n", "offset": 0, "bytes": 3, "total_bytes": 3}))
        );
        let w = window(2, &[b"hi\n"]);
        let cut = serde_json::to_string(&read(&w, StreamSpec::All)).ok();
        assert_eq!(
            cut.as_deref(),
            Some(
                r#"{"data":"i\n","offset":1,"bytes":2,"total_bytes":3,"truncated":true,"dropped_bytes":1}"#
            )
        );
    }

    #[test]
    fn a_2_kib_window_reports_exact_offsets_for_every_spec() {
        // 5000 bytes of numbered lines through a 2048-byte window.
        let text: String = (0..).map(|i| format!("line {i:04}\n")).take(500).collect();
        assert_eq!(text.len(), 5000);
        let mut w = Window::new(2048);
        for chunk in text.as_bytes().chunks(333) {
            w.push(chunk);
        }
        assert_eq!((w.total(), w.dropped()), (5000, 2952));
        let all = read(&w, StreamSpec::All);
        assert_eq!(
            (all.offset, all.bytes, all.dropped_bytes),
            (2952, 2048, Some(2952))
        );
        assert_eq!(all.data, text[2952..]);
        assert_eq!(
            dob(&w, StreamSpec::Tail(2)),
            (s("line 0498\nline 0499\n"), 4980, 20)
        );
        // From inside the dropped head: 100 bytes counted from the oldest byte.
        let paged = read(&w, from(2900, Some(100)));
        assert_eq!(
            (paged.offset, paged.bytes, paged.dropped_bytes),
            (2952, 100, Some(52))
        );
        assert_eq!(paged.data, text[2952..3052]);
    }

    #[test]
    fn three_mib_through_a_1_mib_window_is_rebuilt_by_256_kib_pages() {
        // Mixed-width characters so that page edges land inside characters.
        let unit = "ascii é → 😀 ";
        let text: String = unit.repeat((3 << 20) / unit.len() + 1);
        let bytes = &text.as_bytes()[..3 << 20];
        let mut w = Window::new(1 << 20);
        for chunk in bytes.chunks(65_536) {
            w.push(chunk);
        }
        assert_eq!((w.total(), w.dropped()), (3 << 20, 2 << 20));

        // Paginate from 0 as a client that knows nothing would: the first page starts at
        // the oldest retained byte (after the character the head cuts) and says how much
        // was skipped.
        let first = read(&w, from(0, Some(256 << 10)));
        assert_eq!(first.dropped_bytes, Some(2 << 20));
        assert!(first.bytes > 0);
        let mut next = first.offset + first.bytes;
        let mut rebuilt = first.data.clone();
        let mut start = Some(first.offset);
        while next < w.total() {
            let page = read(&w, from(next, Some(256 << 10)));
            assert!(page.bytes > 0 && page.bytes <= (256 << 10) + 3);
            assert!(!page.truncated);
            match start {
                // The head cuts a character: the first real page starts after it.
                None => start = Some(page.offset),
                Some(_) => assert_eq!(page.offset, next, "pages must be contiguous"),
            }
            rebuilt.push_str(&page.data);
            next = page.offset + page.bytes;
        }
        let start = start.unwrap_or(u64::MAX) as usize;
        assert!((2 << 20..(2 << 20) + 4).contains(&start), "start {start}");
        assert_eq!(rebuilt.as_bytes(), &bytes[start..]);
        let end = read(&w, from(next, Some(256 << 10)));
        assert_eq!((end.offset, end.bytes), (3 << 20, 0));
    }

    #[test]
    fn live_pagination_between_pushes_loses_nothing_and_splits_no_character() {
        let unit = "→ 😀 é x\n";
        let bytes = unit.repeat(40_000).into_bytes();
        let mut w = Window::new(64 << 10);
        let mut rebuilt = String::new();
        let mut next = 0;
        for chunk in bytes.chunks(7_919) {
            w.push(chunk);
            let page = read(&w, from(next, None));
            assert_eq!(page.offset, next);
            assert!(!page.truncated);
            // A page may end in a character the writer has not finished; hold it back.
            let complete = match page.data.strip_suffix('\u{FFFD}') {
                Some(head) => head,
                None => &page.data,
            };
            rebuilt.push_str(complete);
            next += complete.len() as u64;
        }
        assert_eq!(rebuilt.as_bytes(), &bytes[..]);
    }

    #[test]
    fn random_bytes_round_trip_through_unaligned_pages() {
        let data = xorshift_bytes(42, 50_000);
        let mut w = Window::new(8_192);
        let mut next = 0;
        let mut rebuilt = Vec::new();
        for chunk in data.chunks(1_000) {
            w.push(chunk);
            while next < w.total() {
                let page = read(&w, from_unaligned(next, Some(600)));
                assert!(!page.truncated);
                assert_eq!(page.offset, next);
                let raw = w.copy(page.offset, page.offset + page.bytes);
                assert_eq!(page.data, crate::capture::utf8::sanitize_utf8(&raw));
                rebuilt.extend_from_slice(&raw);
                next = page.offset + page.bytes;
            }
        }
        assert_eq!(rebuilt, data);
    }

    #[test]
    fn random_bytes_give_well_formed_slices_for_every_spec() {
        let data = xorshift_bytes(9, 6_000);
        let w = window(2_048, &[&data]);
        let oldest = w.oldest();
        let mut specs = vec![StreamSpec::All];
        for n in [0, 1, 2, 5, 50] {
            specs.push(StreamSpec::Tail(n));
        }
        let points = xorshift_bytes(13, 200);
        for pair in points.chunks(2) {
            let start = u64::from(pair[0]) * 25;
            let len = u64::from(pair[1]) * 10;
            specs.push(from(start, Some(len)));
            specs.push(from_unaligned(start, Some(len)));
            specs.push(from(start, None));
        }
        for spec in specs {
            let slice = read(&w, spec.clone());
            assert!(
                slice.offset >= oldest && slice.offset + slice.bytes <= 6_000,
                "{spec:?}"
            );
            assert_eq!(slice.total_bytes, 6_000);
            assert_eq!(slice.truncated, slice.dropped_bytes.is_some(), "{spec:?}");
            let raw = &data[slice.offset as usize..(slice.offset + slice.bytes) as usize];
            assert_eq!(
                slice.data,
                crate::capture::utf8::sanitize_utf8(raw),
                "{spec:?}"
            );
        }
    }

    #[test]
    fn any_spec_on_any_window_yields_a_consistent_slice_and_never_panics() {
        // Mostly multi-byte UTF-8 and invalid bytes, small windows, random
        // chunking and random specs: the invariants of the module doc hold.
        let alphabet: &[&[u8]] = &[
            b"a",
            b"\n",
            "\u{e9}".as_bytes(),
            "\u{2192}".as_bytes(),
            "\u{1f600}".as_bytes(),
            b"\xff",
            b"\x80",
            b"\0",
        ];
        let noise = xorshift_bytes(7, 40_000);
        let mut n = noise.iter().map(|&b| usize::from(b));
        let mut next = move || n.next().unwrap_or(0);
        for _ in 0..300 {
            let max = 1 + next() % 40;
            let mut w = Window::new(max);
            let mut all = Vec::new();
            for _ in 0..next() % 12 {
                let mut chunk = Vec::new();
                for _ in 0..next() % 9 {
                    chunk.extend_from_slice(alphabet[next() % alphabet.len()]);
                }
                w.push(&chunk);
                all.extend_from_slice(&chunk);
            }
            let total = all.len() as u64;
            let specs = [
                StreamSpec::All,
                StreamSpec::Tail((next() % 6) as u64),
                StreamSpec::From {
                    from: (next() % 80) as u64,
                    length: (next() % 2 == 0).then(|| (next() % 30) as u64),
                    unaligned: next() % 2 == 0,
                },
            ];
            for spec in specs {
                let slice = w.slice(&spec).expect("a slice");
                assert_eq!(slice.total_bytes, total, "{spec:?}");
                assert!(slice.offset + slice.bytes <= total, "{spec:?} {slice:?}");
                assert!(
                    slice.offset >= w.dropped() || slice.bytes == 0,
                    "{spec:?} {slice:?}"
                );
                let raw = &all[slice.offset as usize..(slice.offset + slice.bytes) as usize];
                assert_eq!(
                    slice.data,
                    crate::capture::utf8::sanitize_utf8(raw),
                    "{spec:?}"
                );
                assert_eq!(
                    slice.truncated,
                    slice.dropped_bytes.is_some(),
                    "{spec:?} {slice:?}"
                );
            }
        }
    }
}
