//! Fuzz target `line_framing` (`fuzz/fuzz_targets/line_framing.rs`): line
//! framing (protocol::line). What it checks, and how it reads its input:
//! [`line_framing`](fn@line_framing).

use super::{Input, xorshift};
use crate::protocol::line::{Line, LineSplitter};

/// `line_framing`: a limit, a chunking, and a stream; the lines agree with a
/// split on `\n`, and no more than the limit is ever buffered.
///
/// Input: byte 0 is the limit (mod 64), byte 1 seeds the chunk sizes (1–23),
/// the rest is the stream.
pub fn line_framing(data: &[u8]) {
    let mut input = Input { data };
    let max = usize::from(input.byte() % 64);
    let mut chunk_sizes = xorshift(u64::from(input.byte()));
    let stream = input.data;
    let mut splitter = LineSplitter::new(max);
    let mut got = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let n = 1 + (chunk_sizes() % 23) as usize;
        let (chunk, tail) = rest.split_at(n.min(rest.len()));
        splitter.push(chunk, &mut |l| got.push(l));
        assert!(splitter.buffered() <= max, "buffered past the limit");
        rest = tail;
    }
    splitter.finish(&mut |l| got.push(l));
    assert_eq!(got, naive_lines(max, stream));
}

/// Lines as stdio framing cuts them: split on `\n`; a line longer than `max`
/// (counting a trailing `\r`) is reported by length; otherwise one trailing
/// `\r` goes and blank lines are skipped.
fn naive_lines(max: usize, stream: &[u8]) -> Vec<Line> {
    let mut parts: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
    if parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
        .into_iter()
        .filter_map(|part| {
            if part.len() > max {
                return Some(Line::TooLong {
                    bytes: part.len() as u64,
                });
            }
            let line = part.strip_suffix(b"\r").unwrap_or(part);
            (!line.iter().all(u8::is_ascii_whitespace)).then(|| Line::Complete(line.to_vec()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn line_framing_agrees_with_a_split_on_newlines() {
        crate::fuzzing::stable::drive("line_framing", super::line_framing, 3000);
    }
}
