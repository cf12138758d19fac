//! The 5-byte length-prefixed message envelope that gRPC and Connect's
//! streaming share: `flags:u8 | length:u32 big-endian | message`. sandboxd's
//! gRPC frames every message so; envd's Connect frames its streams so.
//!
//! - [`encode`] and [`header`] write one envelope (or its header, for a
//!   message encoded in place after it).
//! - [`Decoder`] splits bytes into envelopes however they arrive: feed it
//!   each chunk of a body, take out each complete envelope's message, and
//!   [`Decoder::finish`] at the end of the body.
//!
//! Invariants: an envelope is judged as soon as its header is complete, in
//! this order: the compressed flag ([`EnvelopeError::Compressed`]), then the flags
//! the caller refuses ([`Decoder::refusing`], [`EnvelopeError::Flags`]), then the
//! declared length against the caller's bound ([`EnvelopeError::TooLarge`]), so a
//! message past the bound is refused on its header, never waited for; a
//! body that ends inside an envelope is [`EnvelopeError::Truncated`], never a
//! shorter message. Other flags pass unseen: neither protocol gives a
//! request's envelope any but these two.
//!
//! What it is not: a status or a message codec. The errors are typed, and
//! each front-end maps them to its own code and text
//! ([`crate::net::status::Code`]); the message inside is JSON or protobuf,
//! the front-end's business.

use bytes::{Buf, Bytes, BytesMut};

/// The header's size: one flags byte and a 4-byte length.
pub const HEADER: usize = 5;
/// The compressed flag (both protocols; we send and accept none).
pub const COMPRESSED: u8 = 0x01;
/// Connect's end-stream flag: the last envelope of a server's stream.
pub const END_STREAM: u8 = 0x02;

/// Why bytes are not an envelope. (The texts are for logs; a front-end
/// answers its own.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    /// The header declares a message longer than the caller's bound.
    #[error("the envelope declares {declared} bytes, past the bound")]
    TooLarge {
        /// The length the header declares.
        declared: usize,
    },
    /// The body ended inside an envelope.
    #[error("the body ended {buffered} bytes into an envelope")]
    Truncated {
        /// The bytes of it that came: fewer than [`HEADER`] is inside the
        /// header.
        buffered: usize,
    },
    /// The compressed flag is set.
    #[error("the envelope is compressed")]
    Compressed,
    /// A flag the caller refuses is set (all the flags byte).
    #[error("the envelope's flags {0:#04x} are refused")]
    Flags(u8),
}

/// The header of an envelope of `flags` around a message of `len` bytes.
/// A message is far below 4 GiB (every caller bounds its own); a longer one
/// would be declared as `u32::MAX`.
pub fn header(flags: u8, len: usize) -> [u8; HEADER] {
    let [a, b, c, d] = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
    [flags, a, b, c, d]
}

/// One envelope: `flags`, then `message` with its length.
pub fn encode(flags: u8, message: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(HEADER + message.len());
    b.extend_from_slice(&header(flags, message.len()));
    b.extend_from_slice(message);
    b.freeze()
}

/// Splits a body's bytes into envelopes, each message at most `limit`
/// bytes.
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    limit: usize,
    refused: u8,
}

impl Decoder {
    /// A decoder refusing messages longer than `limit` bytes.
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            buf: BytesMut::new(),
            limit,
            refused: 0,
        }
    }

    /// Refuses also an envelope with any of the flags in `mask` (a Connect
    /// request with [`END_STREAM`]; a gRPC one with any flag at all).
    pub fn refusing(self, mask: u8) -> Decoder {
        Decoder {
            refused: mask,
            ..self
        }
    }

    /// Adds the next bytes of the body.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete envelope's message, `Ok(None)` until its bytes are
    /// all in. An error stays: the same header is judged again on the next
    /// call.
    pub fn next(&mut self) -> Result<Option<Bytes>, EnvelopeError> {
        let Some(&[flags, a, b, c, d]) = self.buf.first_chunk::<HEADER>() else {
            return Ok(None);
        };
        if flags & COMPRESSED != 0 {
            return Err(EnvelopeError::Compressed);
        }
        if flags & self.refused != 0 {
            return Err(EnvelopeError::Flags(flags));
        }
        let declared = u32::from_be_bytes([a, b, c, d]) as usize;
        if declared > self.limit {
            return Err(EnvelopeError::TooLarge { declared });
        }
        if self.buf.len() < HEADER + declared {
            return Ok(None);
        }
        self.buf.advance(HEADER);
        Ok(Some(self.buf.split_to(declared).freeze()))
    }

    /// How many bytes are held that no envelope took yet.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The end of the body: [`EnvelopeError::Truncated`] if it ended inside an
    /// envelope (call after [`Decoder::next`] answered `Ok(None)`).
    pub fn finish(&self) -> Result<(), EnvelopeError> {
        match self.buf.len() {
            0 => Ok(()),
            buffered => Err(EnvelopeError::Truncated { buffered }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(d: &mut Decoder) -> Vec<Bytes> {
        std::iter::from_fn(|| d.next().unwrap()).collect()
    }

    #[test]
    fn an_envelope_is_its_flags_a_big_endian_length_and_the_message() {
        assert_eq!(
            &encode(0, b"{\"a\":1}")[..],
            b"\x00\x00\x00\x00\x07{\"a\":1}"
        );
        assert_eq!(&encode(END_STREAM, b"{}")[..], b"\x02\x00\x00\x00\x02{}");
        assert_eq!(header(0, 0x0102_0304), [0, 1, 2, 3, 4]);
    }

    #[test]
    fn a_header_split_across_chunks_waits_for_its_last_byte() {
        let bytes = encode(0, b"hello");
        let mut d = Decoder::new(100);
        for b in &bytes[..bytes.len() - 1] {
            d.push(&[*b]);
            assert_eq!(d.next(), Ok(None));
        }
        d.push(&bytes[bytes.len() - 1..]);
        assert_eq!(&d.next().unwrap().unwrap()[..], b"hello");
        assert_eq!(d.next(), Ok(None));
        assert_eq!(d.finish(), Ok(()));
    }

    #[test]
    fn two_envelopes_in_one_chunk_come_out_one_by_one() {
        let mut d = Decoder::new(100);
        d.push(&[encode(0, b"one"), encode(0, b""), encode(0, b"two")].concat());
        assert_eq!(all(&mut d), [&b"one"[..], b"", b"two"]);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn a_message_of_exactly_the_limit_passes_and_one_byte_more_is_too_large() {
        let mut d = Decoder::new(4);
        d.push(&encode(0, b"four"));
        assert_eq!(&d.next().unwrap().unwrap()[..], b"four");
        let mut d = Decoder::new(4);
        // Refused on the header alone, before the message arrives.
        d.push(&header(0, 5));
        assert_eq!(d.next(), Err(EnvelopeError::TooLarge { declared: 5 }));
    }

    #[test]
    fn a_body_ending_inside_the_header_or_the_message_is_truncated() {
        let bytes = encode(0, b"hello");
        for cut in 1..bytes.len() {
            let mut d = Decoder::new(100);
            d.push(&bytes[..cut]);
            assert_eq!(d.next(), Ok(None));
            assert_eq!(d.finish(), Err(EnvelopeError::Truncated { buffered: cut }));
        }
    }

    #[test]
    fn the_compressed_flag_is_refused_before_the_length_is_judged() {
        let mut d = Decoder::new(1);
        d.push(&header(COMPRESSED, 1000));
        assert_eq!(d.next(), Err(EnvelopeError::Compressed));
        let mut d = Decoder::new(100);
        d.push(&encode(COMPRESSED | END_STREAM, b"{}"));
        assert_eq!(d.next(), Err(EnvelopeError::Compressed));
    }

    #[test]
    fn the_end_stream_flag_passes_unless_the_caller_refuses_it() {
        let mut d = Decoder::new(100);
        d.push(&[encode(0, b"{}"), encode(END_STREAM, b"[]")].concat());
        assert_eq!(all(&mut d), [&b"{}"[..], b"[]"]);
        // Refused on the header, before the length is judged.
        let mut d = Decoder::new(1).refusing(END_STREAM);
        d.push(&header(END_STREAM | 0x04, 1000));
        assert_eq!(d.next(), Err(EnvelopeError::Flags(END_STREAM | 0x04)));
    }
}
