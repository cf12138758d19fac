//! UTF-8 rules shared by every read: sanitising bytes into a `String`, and deciding whether a
//! cut between two bytes falls inside a character.
//!
//! Both follow the same notion of "valid" as `std::str::from_utf8` (no overlongs, no
//! surrogates, nothing above U+10FFFF), so a sequence that alignment treats as one character
//! is exactly a sequence that sanitising keeps, and invalid bytes are never moved around.

/// Turns arbitrary bytes into a `String`: valid UTF-8 is copied as is (NUL bytes included) and
/// each *run* of invalid bytes becomes a single U+FFFD.
///
/// `String::from_utf8_lossy` emits one U+FFFD per maximal invalid subpart, so `FF FF` would
/// become two replacement characters; for output meant to be read by a model, one marker per
/// damaged stretch is less noise and says the same thing.
pub fn sanitize_utf8(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    push_sanitized(&mut out, bytes);
    out
}

/// Appends `bytes` to `out`, sanitised as [`sanitize_utf8`] does.
///
/// Valid input, the common case, is checked by `str::from_utf8` (vectorised) before the
/// chunk walk, which goes byte by byte and is several times slower on a 1 MiB window.
pub fn push_sanitized(out: &mut String, bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        out.push_str(text);
        return;
    }
    let mut in_invalid_run = false;
    for chunk in bytes.utf8_chunks() {
        if !chunk.valid().is_empty() {
            out.push_str(chunk.valid());
            in_invalid_run = false;
        }
        if !chunk.invalid().is_empty() && !in_invalid_run {
            out.push(char::REPLACEMENT_CHARACTER);
            in_invalid_run = true;
        }
    }
}

/// Like [`sanitize_utf8`] but reuses the buffer when it is already valid, which is the common
/// case for command output.
pub(super) fn sanitize_owned(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => sanitize_utf8(err.as_bytes()),
    }
}

/// Encoded length announced by a lead byte, or `None` for a byte that cannot start a
/// multi-byte character (ASCII, continuation, `C0`/`C1`, `F5..`).
fn lead_len(byte: u8) -> Option<u64> {
    match byte {
        0xC2..=0xDF => Some(2),
        0xE0..=0xEF => Some(3),
        0xF0..=0xF4 => Some(4),
        _ => None,
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// If the cut just before absolute position `pos` splits a character, returns that
/// character's `(first byte, one past its last available byte)`.
///
/// `byte(i)` yields the byte at absolute position `i`, or `None` where it is unknown (past the
/// end of the stream, or dropped and forgotten). A cut splits a character only when there are
/// bytes of it on both sides and they form a valid character, or a valid prefix of one that
/// the end of the stream cut short (a writer may be mid-character right now). Anything else is
/// invalid data and is left where it is.
pub fn char_around(pos: u64, byte: impl Fn(u64) -> Option<u8>) -> Option<(u64, u64)> {
    if !is_continuation(byte(pos)?) {
        return None;
    }
    // A character is at most 4 bytes, so its lead is at most 3 bytes before `pos`.
    for back in 1..=3 {
        let lead_pos = pos.checked_sub(back)?;
        let lead = byte(lead_pos)?;
        if is_continuation(lead) {
            continue;
        }
        let len = lead_len(lead)?;
        if lead_pos + len <= pos {
            return None;
        }
        let mut seq = [0u8; 4];
        let mut have = 0;
        for (slot, at) in seq.iter_mut().zip(lead_pos..lead_pos + len) {
            match byte(at) {
                Some(b) => *slot = b,
                None => break,
            }
            have += 1;
        }
        let whole_or_cut_short = match std::str::from_utf8(&seq[..have]) {
            Ok(_) => true,
            Err(err) => err.valid_up_to() == 0 && err.error_len().is_none(),
        };
        return whole_or_cut_short.then_some((lead_pos, lead_pos + have as u64));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn around(bytes: &[u8], pos: u64) -> Option<(u64, u64)> {
        char_around(pos, |i| {
            usize::try_from(i).ok().and_then(|i| bytes.get(i).copied())
        })
    }

    #[test]
    fn valid_text_is_copied_unchanged_including_nul_bytes() {
        let text = "a\0b héllo→ 😀\0";
        assert_eq!(sanitize_utf8(text.as_bytes()), text);
    }

    #[test]
    fn a_run_of_invalid_bytes_becomes_one_replacement_character() {
        assert_eq!(sanitize_utf8(b"a\xFF\xFFb"), "a\u{FFFD}b");
        assert_eq!(sanitize_utf8(b"\xFF\xFE\xC0\x80\xED\xA0\x80z"), "\u{FFFD}z");
        // from_utf8_lossy would give two here; the run rule gives one.
        assert_eq!(String::from_utf8_lossy(b"\xFF\xFF"), "\u{FFFD}\u{FFFD}");
        assert_eq!(sanitize_utf8(b"\xFF\xFF"), "\u{FFFD}");
    }

    #[test]
    fn invalid_runs_separated_by_valid_text_each_get_a_replacement_character() {
        assert_eq!(
            sanitize_utf8(b"\xFFa\xFF\xFEb\xFF"),
            "\u{FFFD}a\u{FFFD}b\u{FFFD}"
        );
    }

    #[test]
    fn a_character_cut_short_at_the_end_becomes_a_replacement_character() {
        assert_eq!(sanitize_utf8(b"ab\xE2\x86"), "ab\u{FFFD}");
        assert_eq!(sanitize_utf8(b"\x86\x92c"), "\u{FFFD}c");
    }

    #[test]
    fn sanitize_owned_agrees_with_sanitize_utf8() {
        for bytes in [&b"plain"[..], b"\xFF\xFFx", b"h\xC3\xA9\xE2", b""] {
            assert_eq!(sanitize_owned(bytes.to_vec()), sanitize_utf8(bytes));
        }
    }

    #[test]
    fn a_cut_inside_a_character_reports_its_bounds() {
        let text = "héllo→".as_bytes();
        assert_eq!(around(text, 2), Some((1, 3)));
        assert_eq!(around(text, 7), Some((6, 9)));
        assert_eq!(around(text, 8), Some((6, 9)));
        let emoji = "x😀".as_bytes();
        for pos in 2..=4 {
            assert_eq!(around(emoji, pos), Some((1, 5)));
        }
    }

    #[test]
    fn a_cut_on_a_boundary_or_at_the_end_is_not_inside_a_character() {
        let text = "héllo→".as_bytes();
        for pos in [0, 1, 3, 4, 6, 9, 10] {
            assert_eq!(around(text, pos), None, "pos {pos}");
        }
    }

    #[test]
    fn invalid_sequences_are_not_treated_as_characters() {
        // Stray continuation bytes, a lead followed by ASCII, an overlong, a surrogate.
        assert_eq!(around(b"a\x80\x80", 1), None);
        assert_eq!(around(b"a\x80\x80", 2), None);
        assert_eq!(around(b"\xE2a\x86", 2), None);
        assert_eq!(around(b"\xC0\x80", 1), None);
        assert_eq!(around(b"\xED\xA0\x80", 1), None);
        assert_eq!(around(b"\xE2\x86\x92\x80", 3), None);
    }

    #[test]
    fn a_character_cut_short_by_the_end_of_the_stream_still_counts() {
        assert_eq!(around(b"a\xE2\x86", 2), Some((1, 3)));
        assert_eq!(around(b"a\xF0\x9F\x98", 3), Some((1, 4)));
    }
}
