//! Newline framing with a bound on line length.
//!
//! A line longer than the limit is never held whole: once the buffered part
//! passes the limit it is dropped, the rest of the line is skipped as it
//! arrives, and one [`Line::TooLong`] is reported when its newline comes (or
//! at EOF). Memory is therefore at most `max` bytes plus one read chunk.

/// One framed item.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A complete line without its `\n` (and without a trailing `\r`).
    Complete(Vec<u8>),
    /// A line that exceeded the limit; `bytes` is its full length.
    TooLong {
        /// How long the line was (without the newline).
        bytes: u64,
    },
}

/// Splits a byte stream into lines of at most `max` bytes.
#[derive(Debug)]
pub struct LineSplitter {
    max: usize,
    buf: Vec<u8>,
    /// `Some(n)`: inside an over-long line, `n` bytes seen so far.
    skipping: Option<u64>,
}

impl LineSplitter {
    /// A splitter that accepts lines of up to `max` bytes.
    pub fn new(max: usize) -> LineSplitter {
        LineSplitter {
            max,
            buf: Vec::new(),
            skipping: None,
        }
    }

    /// Feeds one chunk; calls `emit` for every line it completes. Blank
    /// lines are skipped.
    pub fn push(&mut self, mut chunk: &[u8], emit: &mut impl FnMut(Line)) {
        while !chunk.is_empty() {
            let newline = chunk.iter().position(|&b| b == b'\n');
            let (part, rest) = match newline {
                Some(i) => (&chunk[..i], Some(&chunk[i + 1..])),
                None => (chunk, None),
            };
            if let Some(seen) = self.skipping.as_mut() {
                *seen += part.len() as u64;
            } else if self.buf.len() + part.len() > self.max {
                self.skipping = Some((self.buf.len() + part.len()) as u64);
                self.buf = Vec::new();
            } else {
                self.buf.extend_from_slice(part);
            }
            match rest {
                Some(rest) => {
                    self.end_line(emit);
                    chunk = rest;
                }
                None => break,
            }
        }
    }

    /// Bytes of an unfinished line held now: never more than `max`.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Ends the stream: a final line without a newline still counts.
    pub fn finish(&mut self, emit: &mut impl FnMut(Line)) {
        self.end_line(emit);
    }

    fn end_line(&mut self, emit: &mut impl FnMut(Line)) {
        if let Some(bytes) = self.skipping.take() {
            emit(Line::TooLong { bytes });
            return;
        }
        let mut line = std::mem::take(&mut self.buf);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if !line.iter().all(u8::is_ascii_whitespace) {
            emit(Line::Complete(line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(max: usize, chunks: &[&[u8]]) -> Vec<Line> {
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, &mut |l| out.push(l));
        }
        s.finish(&mut |l| out.push(l));
        out
    }

    #[test]
    fn lines_split_across_chunks_are_joined() {
        let out = split(100, &[b"ab", b"c\nde", b"f\n\n", b"g"]);
        assert_eq!(
            out,
            vec![
                Line::Complete(b"abc".to_vec()),
                Line::Complete(b"def".to_vec()),
                Line::Complete(b"g".to_vec())
            ]
        );
    }

    #[test]
    fn an_over_long_line_is_reported_once_with_its_length_and_the_next_line_survives() {
        let out = split(4, &[b"12", b"345", b"67\nok\n"]);
        assert_eq!(
            out,
            vec![Line::TooLong { bytes: 7 }, Line::Complete(b"ok".to_vec())]
        );
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_accepted_and_crlf_is_trimmed() {
        let out = split(4, &[b"123\r\n", b"1234\n"]);
        assert_eq!(
            out,
            vec![
                Line::Complete(b"123".to_vec()),
                Line::Complete(b"1234".to_vec())
            ]
        );
    }

    #[test]
    fn an_over_long_final_line_without_newline_is_reported_at_eof() {
        assert_eq!(split(2, &[b"xyz"]), vec![Line::TooLong { bytes: 3 }]);
    }
}
