//! The `file` part of a `multipart/form-data` body (RFC 7578), streamed:
//! sandboxd's `PUT /v1/files/{path}` takes either the raw bytes or this.
//!
//! Only the part named `file` is handed on, as it arrives; other parts are
//! skipped, and whatever follows the file part is read and dropped. Memory
//! is bounded: at most one delimiter's length is held back between frames
//! (the bytes that may begin it), and a part's headers are limited to
//! [`MAX_PART_HEAD`].

use bytes::{Buf, Bytes, BytesMut};

use crate::files::transfer::Frames;

/// The longest header block of one part.
pub const MAX_PART_HEAD: usize = 16 * 1024;

/// The boundary of a `multipart/form-data` content type, or `None` when
/// the type is another one.
pub fn boundary(content_type: &str) -> Option<String> {
    let mut params = content_type.split(';');
    let media = params.next()?.trim();
    if !media.eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| v.trim().trim_matches('"').to_owned())
    })
}

/// Where the parser is.
#[derive(Debug, PartialEq, Eq)]
enum At {
    /// Before a delimiter: in the preamble or a skipped part.
    Skipping,
    /// After a delimiter: a part's headers, or `--` (the end).
    Head,
    /// In the file part: its bytes are handed on.
    File,
    /// The file part ended; the rest is read and dropped.
    Done,
}

/// The file part of `body` as [`Frames`].
pub struct FilePart<F> {
    body: F,
    /// `\r\n--boundary`.
    delimiter: Vec<u8>,
    buf: BytesMut,
    at: At,
    ended: bool,
}

impl<F: Frames> FilePart<F> {
    /// Reads `body`, delimited by `boundary`.
    pub fn new(body: F, boundary: &str) -> FilePart<F> {
        let mut delimiter = b"\r\n--".to_vec();
        delimiter.extend_from_slice(boundary.as_bytes());
        // The first delimiter may open the body: a CRLF before it makes
        // every delimiter look the same.
        let mut buf = BytesMut::new();
        buf.extend_from_slice(b"\r\n");
        FilePart {
            body,
            delimiter,
            buf,
            at: At::Skipping,
            ended: false,
        }
    }

    /// More of the body into the buffer; `Ok(false)` at its end.
    async fn fill(&mut self) -> Result<bool, String> {
        if self.ended {
            return Ok(false);
        }
        match self.body.next().await {
            None => {
                self.ended = true;
                Ok(false)
            }
            Some(Ok(data)) => {
                self.buf.extend_from_slice(&data);
                Ok(true)
            }
            Some(Err(e)) => Err(e),
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Whether a part's headers name it `file` (`Content-Disposition:
/// form-data; name="file"`).
fn is_file_part(head: &[u8]) -> bool {
    let head = String::from_utf8_lossy(head);
    head.split("\r\n").any(|line| {
        let Some((name, value)) = line.split_once(':') else {
            return false;
        };
        name.trim().eq_ignore_ascii_case("content-disposition")
            && value.split(';').skip(1).any(|p| {
                p.split_once('=').is_some_and(|(k, v)| {
                    k.trim().eq_ignore_ascii_case("name") && v.trim().trim_matches('"') == "file"
                })
            })
    })
}

impl<F: Frames> Frames for FilePart<F> {
    async fn next(&mut self) -> Option<Result<Bytes, String>> {
        let d = self.delimiter.len();
        loop {
            match self.at {
                At::Skipping => {
                    if let Some(i) = find(&self.buf, &self.delimiter) {
                        self.buf.advance(i + d);
                        self.at = At::Head;
                        continue;
                    }
                    // Keep only what may begin a delimiter.
                    let keep = self.buf.len().min(d - 1);
                    let drop = self.buf.len() - keep;
                    self.buf.advance(drop);
                }
                At::Head => {
                    if self.buf.starts_with(b"--") {
                        return Some(Err(
                            "the multipart body has no part named \"file\"".to_owned()
                        ));
                    }
                    if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                        let file = is_file_part(&self.buf[..i]);
                        // The part's bytes start here; the delimiter that
                        // ends them brings its own CRLF, also when the part
                        // is empty.
                        self.buf.advance(i + 4);
                        self.at = if file { At::File } else { At::Skipping };
                        continue;
                    }
                    if self.buf.len() > MAX_PART_HEAD {
                        return Some(Err(format!(
                            "a multipart part's headers exceed {MAX_PART_HEAD} bytes"
                        )));
                    }
                }
                At::File => {
                    if let Some(i) = find(&self.buf, &self.delimiter) {
                        let data = self.buf.split_to(i).freeze();
                        self.buf.clear();
                        self.at = At::Done;
                        if !data.is_empty() {
                            return Some(Ok(data));
                        }
                        continue;
                    }
                    let keep = self.buf.len().min(d - 1);
                    let give = self.buf.len() - keep;
                    if give > 0 {
                        return Some(Ok(self.buf.split_to(give).freeze()));
                    }
                }
                At::Done => {
                    self.buf.clear();
                }
            }
            match self.fill().await {
                Ok(true) => {}
                Ok(false) => {
                    return match self.at {
                        At::Done => None,
                        _ => Some(Err(
                            "the multipart body ended before its part named \"file\" did"
                                .to_owned(),
                        )),
                    };
                }
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body delivered in frames of `size` bytes.
    struct Chunks(Vec<Bytes>);

    impl Frames for Chunks {
        async fn next(&mut self) -> Option<Result<Bytes, String>> {
            (!self.0.is_empty()).then(|| Ok(self.0.remove(0)))
        }
    }

    fn chunks(body: &[u8], size: usize) -> Chunks {
        Chunks(body.chunks(size).map(Bytes::copy_from_slice).collect())
    }

    async fn file_of(body: &[u8], size: usize) -> Result<Vec<u8>, String> {
        let mut part = FilePart::new(chunks(body, size), "XyZ");
        let mut out = Vec::new();
        while let Some(data) = part.next().await {
            out.extend_from_slice(&data?);
        }
        Ok(out)
    }

    fn form(parts: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = Vec::new();
        for (name, data) in parts {
            b.extend_from_slice(
                format!(
                    "--XyZ\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"f\"\r\n\
                     Content-Type: application/octet-stream\r\n\r\n"
                )
                .as_bytes(),
            );
            b.extend_from_slice(data);
            b.extend_from_slice(b"\r\n");
        }
        b.extend_from_slice(b"--XyZ--\r\n");
        b
    }

    #[test]
    fn the_boundary_comes_from_a_form_data_type_only() {
        assert_eq!(
            boundary("multipart/form-data; boundary=abc").as_deref(),
            Some("abc")
        );
        assert_eq!(
            boundary("Multipart/Form-Data; charset=x; boundary=\"a b\"").as_deref(),
            Some("a b")
        );
        assert_eq!(boundary("application/octet-stream"), None);
        assert_eq!(boundary("multipart/mixed; boundary=abc"), None);
    }

    #[tokio::test]
    async fn the_file_part_comes_out_whole_whatever_the_framing() {
        // Bytes that look like a delimiter's start, CRLFs inside the data.
        let data: Vec<u8> = b"line\r\n--Xy not it\r\n-\r\n--XyY"
            .iter()
            .copied()
            .chain((0..3000u32).map(|i| (i % 251) as u8))
            .collect();
        let body = form(&[("other", b"skip me"), ("file", &data), ("after", b"x")]);
        for size in [1, 2, 3, 7, 64, 1000, body.len()] {
            assert_eq!(
                file_of(&body, size).await.unwrap(),
                data,
                "frames of {size}"
            );
        }
    }

    #[tokio::test]
    async fn an_empty_file_part_is_an_empty_file() {
        let body = form(&[("file", b"")]);
        for size in [1, 5, body.len()] {
            assert_eq!(file_of(&body, size).await.unwrap(), b"", "frames of {size}");
        }
    }

    #[tokio::test]
    async fn a_form_without_a_file_part_or_cut_short_is_refused() {
        let e = file_of(&form(&[("other", b"x")]), 4).await.unwrap_err();
        assert!(e.contains("no part named \"file\""), "{e}");
        let mut cut = form(&[("file", b"abcdef")]);
        cut.truncate(cut.len() - 15);
        let e = file_of(&cut, 4).await.unwrap_err();
        assert!(e.contains("ended before"), "{e}");
    }
}
