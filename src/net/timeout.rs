//! The deadline a client asks for in a header, in the two RPC protocols'
//! spellings: gRPC's `grpc-timeout` and Connect's `connect-timeout-ms`.
//! Each keeps the inputs its front-end has always accepted, and what a
//! malformed one means is the protocol's:
//!
//! - `grpc-timeout`: one to eight ASCII digits, then one unit: `H` hours,
//!   `M` minutes, `S` seconds, `m` milliseconds, `u` microseconds, `n`
//!   nanoseconds (gRPC over HTTP/2, `Timeout`). Anything else is ignored —
//!   no deadline — as grpc-go does ([`grpc`]; only sandboxd speaks gRPC, so
//!   only with the `sandboxd` feature).
//! - `connect-timeout-ms`: one to ten ASCII digits, milliseconds (Connect's
//!   protocol). Anything else is a [`Malformed`] the front-end refuses
//!   ([`connect`]).
//!
//! Neither accepts a sign, spaces or a fraction; neither overflows (hours
//! and minutes saturate; eight or ten digits fit a `u64`). Absent is `None`
//! in both: no deadline.

use std::time::Duration;

use hyper::header::HeaderMap;

/// gRPC's deadline header.
#[cfg(feature = "sandboxd")]
pub const GRPC: &str = "grpc-timeout";
/// Connect's deadline header.
pub const CONNECT: &str = "connect-timeout-ms";

/// `grpc-timeout`'s deadline; `None` when absent or malformed.
#[cfg(feature = "sandboxd")]
pub fn grpc(headers: &HeaderMap) -> Option<Duration> {
    let (&unit, digits) = headers.get(GRPC)?.as_bytes().split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0_u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n.saturating_mul(3600)),
        b'M' => Duration::from_secs(n.saturating_mul(60)),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// A `connect-timeout-ms` that is not one to ten digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("Connect-Timeout-Ms must be at most 10 digits")]
pub struct Malformed;

/// `connect-timeout-ms`'s deadline: `Ok(None)` when absent.
pub fn connect(headers: &HeaderMap) -> Result<Option<Duration>, Malformed> {
    let Some(v) = headers.get(CONNECT) else {
        return Ok(None);
    };
    let digits = v.as_bytes();
    if digits.is_empty() || digits.len() > 10 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(Malformed);
    }
    let ms = digits
        .iter()
        .fold(0_u64, |n, d| n * 10 + u64::from(d - b'0'));
    Ok(Some(Duration::from_millis(ms)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn with(name: &'static str, value: &[u8]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_bytes(value).unwrap());
        h
    }

    #[test]
    #[cfg(feature = "sandboxd")]
    fn grpc_timeout_is_read_in_each_of_its_six_units() {
        let t = |v: &str| grpc(&with(GRPC, v.as_bytes()));
        assert_eq!(t("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(t("2M"), Some(Duration::from_secs(120)));
        assert_eq!(t("2S"), Some(Duration::from_secs(2)));
        assert_eq!(t("59999m"), Some(Duration::from_millis(59_999)));
        assert_eq!(t("5u"), Some(Duration::from_micros(5)));
        assert_eq!(t("7n"), Some(Duration::from_nanos(7)));
        assert_eq!(t("99999999H"), Some(Duration::from_secs(99_999_999 * 3600)));
        assert_eq!(t("0S"), Some(Duration::ZERO));
    }

    #[test]
    #[cfg(feature = "sandboxd")]
    fn a_malformed_or_absent_grpc_timeout_is_no_deadline() {
        let t = |v: &[u8]| grpc(&with(GRPC, v));
        for bad in [
            &b"123456789S"[..],
            b"S",
            b"10x",
            b"10",
            b"",
            b"+1S",
            b" 1S",
            b"1 S",
            b"1.5S",
            b"\xff1S",
            b"1s",
        ] {
            assert_eq!(t(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(grpc(&HeaderMap::new()), None);
    }

    #[test]
    fn connect_timeout_ms_is_one_to_ten_digits_of_milliseconds() {
        let t = |v: &[u8]| connect(&with(CONNECT, v));
        assert_eq!(t(b"60000"), Ok(Some(Duration::from_secs(60))));
        assert_eq!(t(b"0"), Ok(Some(Duration::ZERO)));
        assert_eq!(
            t(b"9999999999"),
            Ok(Some(Duration::from_millis(9_999_999_999)))
        );
        assert_eq!(connect(&HeaderMap::new()), Ok(None));
        for bad in [
            &b"12345678901"[..],
            b"",
            b"-1",
            b"1.5",
            b" 1",
            b"1 ",
            b"1e3",
        ] {
            assert_eq!(t(bad), Err(Malformed), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
