//! The Connect protocol (connectrpc.com `docs/protocol.md`), hand-written on
//! hyper for the three RPC shapes envd has, with the JSON codec only
//! (ProtoJSON: the serde structs of [`super::proto`]).
//!
//! - **Unary**: `Content-Type: application/json`; the body is the bare
//!   message; success is `200` with the bare answer; an error is the
//!   [`Code`]'s HTTP status with `{"code","message"}`.
//! - **Server stream**: `Content-Type: application/connect+json`; the body
//!   is exactly one envelope (`flags:u8 | length:u32 BE | message`, the
//!   floor's [`envelope`] codec, which encodes and splits them all); the
//!   answer is always `200` with envelopes ([`Envelopes`]) and exactly one
//!   end-stream envelope (flag `0x02`): `{}` or `{"error":{code,message}}`.
//!   Errors found before the first message go there too, as connect-go
//!   sends them.
//! - **Client stream** (`StreamInput`): the body is a sequence of
//!   envelopes read as they come ([`EnvelopeReader`]); the answer is one
//!   message envelope and the end-stream one.
//!
//! An error's `code` is the floor's [`Code`] by its Connect name, and a
//! unary error's HTTP status is Connect's for that code.
//!
//! Any other content type is `415` with an empty body (as connect-go); a
//! compressed message (`Content-Encoding`/`Connect-Content-Encoding` other
//! than `identity`, or flag `0x01`) is `unimplemented`: the SDK sends none.
//! `Connect-Timeout-Ms` is parsed by the floor ([`Meta::timeout`];
//! malformed is `invalid_argument`); `Keepalive-Ping-Interval` (seconds,
//! envd's own header) sets [`Meta::keepalive`], 90 s when absent as in
//! envd.
//!
//! A request envelope with the end-stream flag is `invalid_argument`; a
//! body that ends inside an envelope too.
//!
//! Bounds: a unary body or one envelope is at most `MCP_EXEC_MAX_LINE_BYTES`
//! (`resource_exhausted` past it, on the envelope's header alone).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tokio::sync::mpsc;

use crate::net::body::Body;
use crate::net::envelope::{self, Decoder, END_STREAM, EnvelopeError};
use crate::net::reply::HttpReply;
use crate::net::request::{self, BodyError};
pub use crate::net::status::Code;
use crate::net::timeout;

/// The unary codec's content type.
pub const JSON: &str = "application/json";
/// The streaming codec's content type.
pub const CONNECT_JSON: &str = "application/connect+json";
/// envd's keep-alive interval when the client names none (Go envd 0.5.x).
pub const DEFAULT_KEEPALIVE: Duration = Duration::from_secs(90);

/// A Connect error: a code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectError {
    /// Its code.
    pub code: Code,
    /// What went wrong.
    pub message: String,
}

impl ConnectError {
    /// An error of `code` saying `message`.
    pub fn new(code: Code, message: impl Into<String>) -> ConnectError {
        ConnectError {
            code,
            message: message.into(),
        }
    }

    /// `{"code","message"}`.
    fn json(&self) -> serde_json::Value {
        json!({"code": self.code.connect(), "message": self.message})
    }

    /// As a unary answer: the code's status and the JSON body.
    pub fn unary(&self) -> HttpReply {
        typed(self.code.http(), JSON, Body::full(self.json().to_string()))
    }
}

/// What a request's headers ask beside its message.
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    /// `Connect-Timeout-Ms`: the deadline; `None` when absent (infinite).
    pub timeout: Option<Duration>,
    /// `Keepalive-Ping-Interval` (seconds): how often a quiet stream sends
    /// a keep-alive event.
    pub keepalive: Duration,
}

impl Meta {
    /// Reads the headers; a malformed timeout is `invalid_argument`.
    pub fn of(headers: &HeaderMap) -> Result<Meta, ConnectError> {
        let timeout = timeout::connect(headers)
            .map_err(|e| ConnectError::new(Code::InvalidArgument, e.to_string()))?;
        let keepalive = headers
            .get("keepalive-ping-interval")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|&s| s > 0)
            .map_or(DEFAULT_KEEPALIVE, Duration::from_secs);
        Ok(Meta { timeout, keepalive })
    }
}

/// Which shape a method has; the request's content type must match it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// One message each way.
    Unary,
    /// One request message, a stream of answers.
    ServerStream,
    /// A stream of request messages, one answer.
    ClientStream,
}

/// Checks the content type and the encoding for `shape`: `Some` is the
/// refusal, the whole answer (`415` with an empty body; `unimplemented`
/// for compression).
pub fn refusal(headers: &HeaderMap, shape: Shape) -> Option<HttpReply> {
    let media = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        });
    let want = if shape == Shape::Unary {
        JSON
    } else {
        CONNECT_JSON
    };
    if media.as_deref() != Some(want) {
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::UNSUPPORTED_MEDIA_TYPE;
        r.headers_mut().insert(
            header::HeaderName::from_static("accept-post"),
            HeaderValue::from_static(want),
        );
        return Some(r);
    }
    let encoding = if shape == Shape::Unary {
        "content-encoding"
    } else {
        "connect-content-encoding"
    };
    if let Some(v) = headers.get(encoding)
        && !v.as_bytes().eq_ignore_ascii_case(b"identity")
    {
        let e = ConnectError::new(
            Code::Unimplemented,
            "compression is not supported: send identity",
        );
        return Some(match shape {
            Shape::Unary => e.unary(),
            _ => Envelopes::failed(&e),
        });
    }
    None
}

/// Parses one JSON message (ProtoJSON, unknown fields ignored).
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ConnectError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ConnectError::new(
            Code::InvalidArgument,
            format!("the message is not valid: {e}"),
        )
    })
}

/// Reads a whole body of at most `limit` bytes, within the floor's body
/// deadline (`net::request`): a body that does not arrive whole in time is
/// `deadline_exceeded`.
async fn collect(body: Incoming, limit: usize) -> Result<Bytes, ConnectError> {
    match request::read_whole(body, limit).await {
        Ok(bytes) => Ok(bytes),
        Err(BodyError::TooLarge) => Err(too_big(limit)),
        Err(BodyError::Late) => Err(ConnectError::new(
            Code::DeadlineExceeded,
            format!(
                "the request did not arrive within {} s (MCP_EXEC_HTTP_STALL_TIMEOUT)",
                request::body_deadline().as_secs()
            ),
        )),
        Err(BodyError::Read(e)) => Err(ConnectError::new(
            Code::Canceled,
            format!("reading the request: {e}"),
        )),
    }
}

fn too_big(limit: usize) -> ConnectError {
    ConnectError::new(
        Code::ResourceExhausted,
        format!("a message is at most {limit} bytes (MCP_EXEC_MAX_LINE_BYTES)"),
    )
}

/// A unary request's message.
pub async fn unary_request<T: DeserializeOwned>(
    body: Incoming,
    limit: usize,
) -> Result<T, ConnectError> {
    let bytes = collect(body, limit).await?;
    // An empty body is the empty message, as ProtoJSON allows.
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return decode(b"{}");
    }
    decode(&bytes)
}

/// A server-stream request's one message: exactly one envelope.
pub async fn stream_request<T: DeserializeOwned>(
    body: Incoming,
    limit: usize,
) -> Result<T, ConnectError> {
    let bytes = collect(body, limit.saturating_add(envelope::HEADER)).await?;
    let mut decoder = request_decoder(limit);
    decoder.push(&bytes);
    let Some(message) = next(&mut decoder, limit)? else {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            "a streaming request needs exactly one enveloped message",
        ));
    };
    if decoder.buffered() > 0 {
        return Err(ConnectError::new(
            Code::InvalidArgument,
            "a server-streaming request carries exactly one message",
        ));
    }
    decode(&message)
}

/// The envelopes of a request: each at most `limit` bytes, none with the
/// end-stream flag (a server's to send).
fn request_decoder(limit: usize) -> Decoder {
    Decoder::new(limit).refusing(END_STREAM)
}

/// The decoder's next message, its refusals as Connect errors.
fn next(decoder: &mut Decoder, limit: usize) -> Result<Option<Bytes>, ConnectError> {
    decoder.next().map_err(|e| match e {
        EnvelopeError::Compressed => {
            ConnectError::new(Code::Unimplemented, "compressed messages are not supported")
        }
        EnvelopeError::Flags(_) => ConnectError::new(
            Code::InvalidArgument,
            "a request envelope must not set the end-stream flag",
        ),
        EnvelopeError::TooLarge { .. } => too_big(limit),
        EnvelopeError::Truncated { .. } => truncated(),
    })
}

fn truncated() -> ConnectError {
    ConnectError::new(Code::InvalidArgument, "the stream ended inside an envelope")
}

/// A client stream's envelopes, read as they arrive.
pub struct EnvelopeReader {
    body: Incoming,
    decoder: Decoder,
    limit: usize,
    done: bool,
}

impl EnvelopeReader {
    /// Reads `body`'s envelopes, each at most `limit` bytes.
    pub fn new(body: Incoming, limit: usize) -> EnvelopeReader {
        EnvelopeReader {
            body,
            decoder: request_decoder(limit),
            limit,
            done: false,
        }
    }

    /// The next message; `Ok(None)` at the end of the body.
    pub async fn next<T: DeserializeOwned>(&mut self) -> Result<Option<T>, ConnectError> {
        loop {
            if let Some(m) = next(&mut self.decoder, self.limit)? {
                return decode(&m).map(Some);
            }
            if self.done {
                return match self.decoder.finish() {
                    Ok(()) => Ok(None),
                    Err(_) => Err(truncated()),
                };
            }
            match self.body.frame().await {
                None => self.done = true,
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.decoder.push(&data);
                    }
                }
                Some(Err(e)) => {
                    return Err(ConnectError::new(
                        Code::Canceled,
                        format!("reading the stream: {e}"),
                    ));
                }
            }
        }
    }
}

/// A message envelope.
pub fn message(msg: &impl Serialize) -> Bytes {
    let json = serde_json::to_vec(msg).unwrap_or_else(|_| b"{}".to_vec());
    envelope::encode(0, &json)
}

/// The end-stream envelope: `{}`, or `{"error":{code,message}}`.
pub fn end(error: Option<&ConnectError>) -> Bytes {
    let json = match error {
        None => b"{}".to_vec(),
        Some(e) => json!({"error": e.json()}).to_string().into_bytes(),
    };
    envelope::encode(END_STREAM, &json)
}

/// A streaming answer: `200`, `application/connect+json`, the envelopes a
/// task sends.
pub struct Envelopes;

impl Envelopes {
    /// The answer whose body is what `rx` yields (the task sends the
    /// end-stream envelope last).
    pub fn reply(rx: mpsc::Receiver<Bytes>) -> HttpReply {
        typed(StatusCode::OK, CONNECT_JSON, Body::stream(rx))
    }

    /// A stream that failed before any message: only the end-stream
    /// envelope with the error (HTTP `200`, as connect-go answers).
    pub fn failed(e: &ConnectError) -> HttpReply {
        typed(StatusCode::OK, CONNECT_JSON, Body::full(end(Some(e))))
    }

    /// A client stream's answer: one message, then a clean end.
    pub fn single(msg: &impl Serialize) -> HttpReply {
        let mut b = BytesMut::from(&message(msg)[..]);
        b.extend_from_slice(&end(None));
        typed(StatusCode::OK, CONNECT_JSON, Body::full(b.freeze()))
    }
}

/// A unary success: `200` with the JSON message.
pub fn ok(msg: &impl Serialize) -> HttpReply {
    let json = serde_json::to_vec(msg).unwrap_or_else(|_| b"{}".to_vec());
    typed(StatusCode::OK, JSON, Body::full(json))
}

/// A response of `code` with `content_type`.
pub fn typed(code: StatusCode, content_type: &'static str, body: Body) -> HttpReply {
    let mut r = Response::new(body);
    *r.status_mut() = code;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_is_its_flags_a_big_endian_length_and_the_json() {
        assert_eq!(
            &message(&json!({"a": 1}))[..],
            b"\x00\x00\x00\x00\x07{\"a\":1}"
        );
        assert_eq!(&end(None)[..], b"\x02\x00\x00\x00\x02{}");
        let e = ConnectError::new(Code::NotFound, "no such process");
        assert_eq!(
            &end(Some(&e))[..],
            &b"\x02\x00\x00\x00\x3a{\"error\":{\"code\":\"not_found\",\"message\":\"no such process\"}}"[..]
        );
    }

    #[test]
    fn a_compressed_end_stream_oversized_or_cut_request_envelope_is_refused() {
        let too_big = envelope::header(0, 1000);
        let cut = &message(&json!({"x": 1}))[..6];
        for (bytes, code, text) in [
            (
                envelope::encode(envelope::COMPRESSED, b"{}"),
                Code::Unimplemented,
                "compressed messages are not supported",
            ),
            (
                envelope::encode(END_STREAM, b"{}"),
                Code::InvalidArgument,
                "a request envelope must not set the end-stream flag",
            ),
            (
                Bytes::copy_from_slice(&too_big),
                Code::ResourceExhausted,
                "a message is at most 100 bytes (MCP_EXEC_MAX_LINE_BYTES)",
            ),
        ] {
            let mut d = request_decoder(100);
            d.push(&bytes);
            assert_eq!(
                next(&mut d, 100).unwrap_err(),
                ConnectError::new(code, text)
            );
        }
        let mut d = request_decoder(100);
        d.push(cut);
        assert_eq!(next(&mut d, 100).unwrap(), None);
        assert!(d.finish().is_err());
    }

    #[test]
    fn a_unary_error_has_connects_http_status_and_name() {
        let r = ConnectError::new(Code::Unauthenticated, "no token").unary();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let r = ConnectError::new(Code::Canceled, "gone").unary();
        assert_eq!(r.status().as_u16(), 499);
        assert_eq!(
            ConnectError::new(Code::NotFound, "x").json(),
            json!({"code": "not_found", "message": "x"})
        );
    }

    #[test]
    fn the_timeout_is_at_most_ten_digits_and_keepalive_defaults_to_envds() {
        let mut h = HeaderMap::new();
        let m = Meta::of(&h).unwrap();
        assert_eq!((m.timeout, m.keepalive), (None, DEFAULT_KEEPALIVE));
        h.insert("connect-timeout-ms", HeaderValue::from_static("60000"));
        h.insert("keepalive-ping-interval", HeaderValue::from_static("50"));
        let m = Meta::of(&h).unwrap();
        assert_eq!(m.timeout, Some(Duration::from_secs(60)));
        assert_eq!(m.keepalive, Duration::from_secs(50));
        h.insert(
            "connect-timeout-ms",
            HeaderValue::from_static("12345678901"),
        );
        let e = Meta::of(&h).unwrap_err();
        assert_eq!(e.code, Code::InvalidArgument);
        assert_eq!(e.message, "Connect-Timeout-Ms must be at most 10 digits");
    }

    #[test]
    fn a_wrong_media_type_is_415_with_an_empty_body() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/proto"),
        );
        let r = refusal(&h, Shape::Unary).unwrap();
        assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert!(refusal(&h, Shape::Unary).is_none());
        assert!(refusal(&h, Shape::ServerStream).is_some());
    }
}
