//! Fuzz target `utf8` (`fuzz/fuzz_targets/utf8.rs`): UTF-8 (capture::utf8).
//! What it checks, and how it reads its input: [`utf8`](fn@utf8).

use crate::capture;

/// `utf8`: the sanitiser and the character-boundary rule agree with a
/// byte-at-a-time decoder, at every position.
///
/// Input: the bytes themselves.
pub fn utf8(data: &[u8]) {
    let model = Decoded::of(data);
    assert_eq!(capture::sanitize_utf8(data), model.sanitized, "{data:?}");
    let mut appended = String::from("x");
    capture::push_sanitized(&mut appended, data);
    assert_eq!(appended[1..], model.sanitized);
    let byte = |i: u64| usize::try_from(i).ok().and_then(|i| data.get(i).copied());
    for pos in 0..=data.len() as u64 + 1 {
        assert_eq!(
            capture::char_around(pos, byte),
            model.inside(pos),
            "position {pos} of {data:?}"
        );
    }
}

/// A stream decoded the slow, obvious way; also the `capture` target's
/// model of character alignment.
pub(super) struct Decoded {
    /// Multi-byte characters `[start, end)`, including a valid prefix cut
    /// short by the end of the stream.
    chars: Vec<(u64, u64)>,
    /// Valid text kept, each run of invalid bytes one U+FFFD.
    sanitized: String,
}

impl Decoded {
    pub(super) fn of(bytes: &[u8]) -> Decoded {
        let mut chars = Vec::new();
        let mut sanitized = String::new();
        let mut in_invalid = false;
        let mut i = 0;
        while i < bytes.len() {
            let whole = (1..=4).find_map(|len| {
                let s = std::str::from_utf8(bytes.get(i..i + len)?).ok()?;
                Some((len, s))
            });
            if let Some((len, s)) = whole {
                sanitized.push_str(s);
                in_invalid = false;
                if len > 1 {
                    chars.push((i as u64, (i + len) as u64));
                }
                i += len;
                continue;
            }
            // A valid start of a character that the end of the stream cut.
            let rest = &bytes[i..];
            if rest.len() < 4
                && let Err(e) = std::str::from_utf8(rest)
                && e.valid_up_to() == 0
                && e.error_len().is_none()
            {
                chars.push((i as u64, bytes.len() as u64));
            }
            if !in_invalid {
                sanitized.push(char::REPLACEMENT_CHARACTER);
                in_invalid = true;
            }
            i += 1;
        }
        Decoded { chars, sanitized }
    }

    /// The character a cut before `pos` would split.
    pub(super) fn inside(&self, pos: u64) -> Option<(u64, u64)> {
        self.chars
            .iter()
            .copied()
            .find(|&(start, end)| start < pos && pos < end)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn utf8_sanitising_and_alignment_agree_with_a_naive_decoder() {
        crate::fuzzing::stable::drive("utf8", super::utf8, 3000);
    }
}
