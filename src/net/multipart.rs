//! `multipart/form-data` (RFC 7578, RFC 2046 §5.1), streamed: the one
//! parser of every listener that takes a form (envd's `POST /files`,
//! sandboxd's `PUT /v1/files/{path}`).
//!
//! [`Multipart`] is fed a body's frames as they come and answers the
//! [`Event`]s they complete: a part begins (its `name` and `filename`),
//! bytes of its body, it ends. Memory is bounded whatever the body: at most
//! one delimiter's length of a part's body is held back between frames (the
//! bytes that may begin a delimiter), and a part's headers are limited to
//! [`MAX_PART_HEADERS`]. The preamble and the epilogue are skipped. What a
//! listener does with the parts (which it writes, how many) is its own;
//! `transport::file_http` streams them into the file engine.

use bytes::{Bytes, BytesMut};

use super::query::percent_decode;

/// The most bytes a part's headers may take.
pub const MAX_PART_HEADERS: usize = 16 << 10;
/// The longest boundary taken (RFC 2046 allows 70; clients stay far below).
const MAX_BOUNDARY: usize = 200;

/// The `boundary` of a `multipart/form-data` content type: `None` when the
/// type is another one, or the boundary is missing, empty or longer than
/// 200 bytes.
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
            .filter(|b| !b.is_empty() && b.len() <= MAX_BOUNDARY)
    })
}

/// What the multipart parser found.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// A part begins: its `name` and `filename` from
    /// `Content-Disposition`.
    Part {
        /// The form field's name.
        name: String,
        /// The filename, decoded as browsers and httpx encode it.
        filename: Option<String>,
    },
    /// Bytes of the current part's body.
    Data(Bytes),
    /// The current part ended.
    PartEnd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the first delimiter (the preamble is skipped).
    Preamble,
    /// Just after a delimiter: `--` ends the body, CRLF starts a part.
    AfterDelimiter,
    /// A part's headers, up to the blank line.
    Headers,
    /// A part's body, up to the next delimiter.
    Body,
    /// After the closing delimiter (the epilogue is ignored).
    Done,
}

/// A streaming `multipart/form-data` parser (RFC 7578 / RFC 2046 §5.1):
/// fed frames as they come, it never holds more than a delimiter's length
/// of a part's body (plus one part's headers).
pub struct Multipart {
    /// `\r\n--<boundary>`.
    delimiter: Vec<u8>,
    buf: BytesMut,
    state: State,
}

impl Multipart {
    /// A parser for this boundary.
    pub fn new(boundary: &str) -> Multipart {
        let mut buf = BytesMut::new();
        // The first delimiter has no CRLF before it: supplying one makes
        // every delimiter look the same.
        buf.extend_from_slice(b"\r\n");
        Multipart {
            delimiter: format!("\r\n--{boundary}").into_bytes(),
            buf,
            state: State::Preamble,
        }
    }

    /// Whether the closing delimiter was seen.
    pub fn finished(&self) -> bool {
        self.state == State::Done
    }

    fn find(&self, needle: &[u8]) -> Option<usize> {
        let hay = &self.buf[..];
        if needle.is_empty() || hay.len() < needle.len() {
            return None;
        }
        let mut from = 0;
        while from + needle.len() <= hay.len() {
            let at = hay[from..=hay.len() - needle.len()]
                .iter()
                .position(|&b| b == needle[0])?;
            let at = from + at;
            if &hay[at..at + needle.len()] == needle {
                return Some(at);
            }
            from = at + 1;
        }
        None
    }

    /// Feeds the next bytes; answers what they complete.
    pub fn feed(&mut self, data: &[u8]) -> Result<Vec<Event>, String> {
        if self.state == State::Done {
            return Ok(Vec::new());
        }
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        loop {
            match self.state {
                State::Done => {
                    self.buf.clear();
                    return Ok(out);
                }
                State::Preamble => match self.find(&self.delimiter.clone()) {
                    Some(at) => {
                        let _ = self.buf.split_to(at + self.delimiter.len());
                        self.state = State::AfterDelimiter;
                    }
                    None => {
                        let keep = self.delimiter.len().min(self.buf.len());
                        let drop = self.buf.len() - keep;
                        let _ = self.buf.split_to(drop);
                        if self.buf.len() > MAX_PART_HEADERS {
                            return Err("no multipart boundary found".into());
                        }
                        return Ok(out);
                    }
                },
                State::AfterDelimiter => {
                    // Transport padding (spaces, tabs) may follow.
                    while self.buf.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
                        let _ = self.buf.split_to(1);
                    }
                    if self.buf.len() < 2 {
                        return Ok(out);
                    }
                    if self.buf.starts_with(b"--") {
                        self.state = State::Done;
                    } else if self.buf.starts_with(b"\r\n") {
                        let _ = self.buf.split_to(2);
                        self.state = State::Headers;
                    } else {
                        return Err("malformed multipart body: junk after a boundary".into());
                    }
                }
                // A part without headers: its body follows the blank line
                // at once (and may itself hold a blank line).
                State::Headers if self.buf.starts_with(b"\r\n") => {
                    let _ = self.buf.split_to(2);
                    out.push(Event::Part {
                        name: String::new(),
                        filename: None,
                    });
                    self.state = State::Body;
                }
                State::Headers if self.buf.len() < 2 => return Ok(out),
                State::Headers => match self.find(b"\r\n\r\n") {
                    Some(at) => {
                        let head = self.buf.split_to(at + 4);
                        out.push(part_of(&head[..at])?);
                        self.state = State::Body;
                    }
                    None => {
                        if self.buf.len() > MAX_PART_HEADERS {
                            return Err(format!(
                                "a multipart part's headers exceed {MAX_PART_HEADERS} bytes"
                            ));
                        }
                        return Ok(out);
                    }
                },
                State::Body => match self.find(&self.delimiter.clone()) {
                    Some(at) => {
                        let data = self.buf.split_to(at).freeze();
                        if !data.is_empty() {
                            out.push(Event::Data(data));
                        }
                        let _ = self.buf.split_to(self.delimiter.len());
                        out.push(Event::PartEnd);
                        self.state = State::AfterDelimiter;
                    }
                    None => {
                        // All but what could begin a delimiter is the part's.
                        let keep = (self.delimiter.len() - 1).min(self.buf.len());
                        let n = self.buf.len() - keep;
                        if n > 0 {
                            out.push(Event::Data(self.buf.split_to(n).freeze()));
                        }
                        return Ok(out);
                    }
                },
            }
        }
    }
}

/// The `Part` event of a part's header block.
fn part_of(head: &[u8]) -> Result<Event, String> {
    let text = String::from_utf8_lossy(head);
    let mut name = String::new();
    let mut filename = None;
    for line in text.split("\r\n") {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if !k.trim().eq_ignore_ascii_case("content-disposition") {
            continue;
        }
        for (key, value) in disposition_params(v) {
            match key.to_ascii_lowercase().as_str() {
                "name" => name = value,
                "filename" => filename = Some(value),
                _ => {}
            }
        }
    }
    Ok(Event::Part { name, filename })
}

/// The `key=value` parameters of a `Content-Disposition` value; quoted
/// values are decoded as HTML5 forms and httpx encode them (`%22` for `"`,
/// `%0A`-style escapes for control characters, `\\` for `\`).
fn disposition_params(value: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let bytes = value.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && (bytes[i] == b';' || bytes[i] == b' ' || bytes[i] == b'\t') {
            i += 1;
        }
        let key_start = i;
        while i < bytes.len() && bytes[i] != b'=' && bytes[i] != b';' {
            i += 1;
        }
        let key = value[key_start..i].trim().to_owned();
        if i >= bytes.len() || bytes[i] == b';' {
            continue;
        }
        i += 1;
        let mut v = Vec::new();
        if bytes.get(i) == Some(&b'"') {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                if bytes[i] == b'\\' && i + 1 < bytes.len() {
                    i += 1;
                }
                v.push(bytes[i]);
                i += 1;
            }
            i += 1;
        } else {
            while i < bytes.len() && bytes[i] != b';' {
                v.push(bytes[i]);
                i += 1;
            }
        }
        let v = String::from_utf8_lossy(&v).trim().to_owned();
        out.push((key, unescape_form(&v)));
    }
    out
}

/// `%22` → `"` and `%XX` of a control character → it; anything else kept.
fn unescape_form(v: &str) -> String {
    let mut out = Vec::with_capacity(v.len());
    let b = v.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(decoded) = percent_decode(&v[i..i + 3])
            && let [c] = decoded[..]
            && (c == b'"' || c < 0x20)
        {
            out.push(c);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> Vec<u8> {
        b"preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/t/a \\\\b%22.txt\"\r\nContent-Type: application/octet-stream\r\n\r\nhello\r\n--Xy\r\n\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"rel/b.bin\"\r\n\r\n\x00\x01\r\n--XyZ--\r\nepilogue".to_vec()
    }

    /// The events of `body` fed in pieces of `size`, data joined per part.
    fn parse(body: &[u8], size: usize) -> Vec<(String, Option<String>, Vec<u8>)> {
        let mut p = Multipart::new("XyZ");
        let mut parts: Vec<(String, Option<String>, Vec<u8>)> = Vec::new();
        for chunk in body.chunks(size) {
            for e in p.feed(chunk).unwrap() {
                match e {
                    Event::Part { name, filename } => parts.push((name, filename, Vec::new())),
                    Event::Data(d) => parts.last_mut().unwrap().2.extend_from_slice(&d),
                    Event::PartEnd => {}
                }
            }
        }
        assert!(p.finished(), "closing boundary seen with pieces of {size}");
        parts
    }

    #[test]
    fn a_multipart_body_parses_the_same_whatever_its_frames() {
        let b = body();
        let want = parse(&b, b.len());
        assert_eq!(want.len(), 2);
        assert_eq!(want[0].0, "file");
        assert_eq!(want[0].1.as_deref(), Some("/t/a \\b\".txt"));
        assert_eq!(want[0].2, b"hello\r\n--Xy\r\n");
        assert_eq!(want[1].1.as_deref(), Some("rel/b.bin"));
        assert_eq!(want[1].2, b"\x00\x01");
        for size in 1..b.len() {
            assert_eq!(parse(&b, size), want, "pieces of {size}");
        }
    }

    #[test]
    fn a_multipart_body_without_its_closing_boundary_is_not_finished() {
        let mut p = Multipart::new("b");
        p.feed(b"--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc")
            .unwrap();
        assert!(!p.finished());
        assert!(Multipart::new("b").feed(b"--bjunk").is_err());
    }

    #[test]
    fn a_part_without_headers_keeps_a_blank_line_of_its_body() {
        let body = b"--b\r\n\r\nx\r\n\r\ny\r\n--b--\r\n";
        for size in 1..body.len() {
            let mut p = Multipart::new("b");
            let mut events = Vec::new();
            for chunk in body.chunks(size) {
                events.extend(p.feed(chunk).unwrap());
            }
            let data: Vec<u8> = events
                .iter()
                .filter_map(|e| match e {
                    Event::Data(d) => Some(d.to_vec()),
                    _ => None,
                })
                .flatten()
                .collect();
            assert_eq!(
                events[0],
                Event::Part {
                    name: String::new(),
                    filename: None
                },
                "pieces of {size}"
            );
            assert_eq!(data, b"x\r\n\r\ny", "pieces of {size}");
            assert!(p.finished());
        }
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
        assert_eq!(boundary("multipart/form-data"), None);
        assert_eq!(boundary("multipart/form-data; boundary=\"\""), None);
        assert_eq!(boundary("application/octet-stream"), None);
        assert_eq!(boundary("multipart/mixed; boundary=abc"), None);
    }
}
