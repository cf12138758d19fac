//! The fuzz targets' entry points (FUZZING.md): one function per target in
//! `fuzz/fuzz_targets/`, each taking libFuzzer's raw bytes, running one part
//! of the server in process and panicking when an invariant breaks. Nothing
//! here spawns or signals a process: [`dispatch`] runs the real sessions and
//! tools over a job service whose every job fails to start
//! (`Jobs::refusing`).
//!
//! Where a part has a simple meaning, its output is checked against a naive
//! model written here, not only for not panicking: line framing against
//! `split('\n')`, window reads against the whole stream kept in a `Vec`, the
//! UTF-8 sanitiser and character alignment against a byte-at-a-time decoder,
//! signal names against their round trip, redaction against known secrets
//! planted in the input, the HTTP checks against what the header must look
//! like.
//!
//! Each function is also a plain test on stable (the tests below): the
//! committed seed corpus, then seeded random mutations of it, a bounded
//! count. That is what runs where nightly or `cargo-fuzz` is missing.
//!
//! Not public API: hidden from the docs, and free to change with the targets.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::capture::{self, StreamSpec, Window};
use crate::config::Config;
use crate::jobs::{Jobs, JobsSettings};
use crate::policy::cwd::CwdPolicy;
use crate::policy::identity::JobPolicy;
use crate::policy::redact::{MARKER, Redactor};
use crate::protocol::line::{Line, LineSplitter};
use crate::server::outbox::{self, Outgoing};
use crate::server::session::Session;
use crate::server::transport::http::{Settings as HttpSettings, guard};
use crate::tools::{App, kill};

/// Reads an input as a sequence of small decisions: a byte at a time, then
/// zeros once it is used up (so every input decodes to something).
struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    /// Up to `n` bytes.
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// The bytes up to the next `sep` (not included), or the rest.
    fn field(&mut self, sep: u8) -> &'a [u8] {
        match self.data.iter().position(|&b| b == sep) {
            Some(i) => {
                let head = &self.data[..i];
                self.data = &self.data[i + 1..];
                head
            }
            None => self.take(self.data.len()),
        }
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

// ---------------------------------------------------------------------------
// Line framing (protocol::line).

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

/// Lines as SPEC §3 frames them: split on `\n`; a line longer than `max`
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

// ---------------------------------------------------------------------------
// UTF-8 (capture::utf8).

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

/// A stream decoded the slow, obvious way.
struct Decoded {
    /// Multi-byte characters `[start, end)`, including a valid prefix cut
    /// short by the end of the stream.
    chars: Vec<(u64, u64)>,
    /// Valid text kept, each run of invalid bytes one U+FFFD.
    sanitized: String,
}

impl Decoded {
    fn of(bytes: &[u8]) -> Decoded {
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
    fn inside(&self, pos: u64) -> Option<(u64, u64)> {
        self.chars
            .iter()
            .copied()
            .find(|&(start, end)| start < pos && pos < end)
    }
}

// ---------------------------------------------------------------------------
// Capture windows and slices (capture::window, capture::slice).

/// `capture`: pushes and reads interleaved on a small window; every read
/// agrees with a model that keeps the whole stream, and paging with `from`
/// rebuilds what the window holds.
///
/// Input: byte 0 is the window size (1–48); then operations, each an op byte:
/// a multiple of 3 pushes a chunk (a length byte mod 24, then the bytes);
/// otherwise op mod 5 reads `all` (0), `tail` (1, a byte mod 8 lines),
/// `none` (2) or `from` (3, 4: a `u16` from mod 160, a length byte mod 40
/// unless op has bit 4, `unaligned` if op has bit 5).
pub fn capture(data: &[u8]) {
    let mut input = Input { data };
    let max = 1 + usize::from(input.byte() % 48);
    let mut window = Window::new(max);
    let mut all: Vec<u8> = Vec::new();
    while !input.is_empty() {
        let op = input.byte();
        if op.is_multiple_of(3) {
            let n = usize::from(input.byte() % 24);
            let chunk = input.take(n);
            window.push(chunk);
            all.extend_from_slice(chunk);
            continue;
        }
        let spec = match op % 5 {
            0 => StreamSpec::All,
            1 => StreamSpec::Tail(u64::from(input.byte() % 8)),
            2 => StreamSpec::None,
            _ => StreamSpec::From {
                from: u64::from(input.u16() % 160),
                length: (op & 0x10 == 0).then(|| u64::from(input.byte() % 40)),
                unaligned: op & 0x20 != 0,
            },
        };
        check_read(&window, max, &all, &spec);
    }
    check_read(&window, max, &all, &StreamSpec::All);
    check_pages(
        &window,
        &all,
        1 + u64::from(data.first().copied().unwrap_or(0) % 7),
    );
}

/// One read against the model.
fn check_read(window: &Window, max: usize, all: &[u8], spec: &StreamSpec) {
    let Some(slice) = window.slice_with(spec, None) else {
        assert!(matches!(spec, StreamSpec::None));
        return;
    };
    let (start, end, dropped) = naive_read(max, all, spec);
    let what = format!("{spec:?} on {all:?} (window {max})");
    assert_eq!(
        (
            slice.offset,
            slice.offset + slice.bytes,
            slice.dropped_bytes
        ),
        (start, end, dropped),
        "{what}"
    );
    assert_eq!(slice.total_bytes, all.len() as u64, "{what}");
    assert_eq!(slice.truncated, dropped.is_some(), "{what}");
    assert_eq!(
        slice.data,
        capture::sanitize_utf8(&all[to_usize(start)..to_usize(end)]),
        "{what}"
    );
}

/// SPEC §5.1 on the whole stream: `[start, end)` and `dropped_bytes`.
fn naive_read(max: usize, all: &[u8], spec: &StreamSpec) -> (u64, u64, Option<u64>) {
    let total = all.len() as u64;
    let oldest = total.saturating_sub(max as u64);
    let gone = Some(oldest).filter(|&n| n > 0);
    let chars = Decoded::of(all);
    let boundary_after = |pos: u64| chars.inside(pos).map_or(pos, |(_, end)| end);
    let head = boundary_after(oldest);
    match *spec {
        StreamSpec::None => (0, 0, None),
        StreamSpec::All => (head, total, gone),
        StreamSpec::Tail(0) => (total, total, None),
        StreamSpec::Tail(lines) => {
            // Line starts after each `\n` that is not the last byte.
            let starts: Vec<u64> = (oldest..total.saturating_sub(1))
                .filter(|&i| all[to_usize(i)] == b'\n')
                .map(|i| i + 1)
                .collect();
            match starts.len().checked_sub(to_usize(lines)) {
                Some(i) => (starts[i], total, None),
                None => (head, total, gone),
            }
        }
        StreamSpec::From {
            from,
            length,
            unaligned,
        } => {
            if from >= total {
                return (total, total, None);
            }
            let first = from.max(oldest);
            let dropped = (from < oldest).then(|| oldest - from);
            let requested_end = length.map_or(total, |n| (first + n).min(total));
            if unaligned {
                return (first, requested_end, dropped);
            }
            let start = if from < oldest {
                head
            } else {
                match chars.inside(from) {
                    Some((lead, _)) if lead >= oldest => lead,
                    Some((_, end)) => end,
                    None => from,
                }
            };
            let end = if requested_end == first {
                start
            } else {
                boundary_after(requested_end).max(start)
            };
            (start, end, dropped)
        }
    }
}

/// Pages of `length` from the head rebuild the retained stream exactly.
fn check_pages(window: &Window, all: &[u8], length: u64) {
    let total = all.len() as u64;
    let first = window
        .slice_with(&StreamSpec::All, None)
        .map_or(total, |s| s.offset);
    let mut next = first;
    let mut rebuilt = Vec::new();
    while next < total {
        let spec = StreamSpec::From {
            from: next,
            length: Some(length),
            unaligned: false,
        };
        let Some(page) = window.slice_with(&spec, None) else {
            panic!("no page");
        };
        assert_eq!(page.offset, next, "pages are contiguous");
        assert!(page.bytes > 0, "a page makes progress");
        rebuilt.extend_from_slice(&all[to_usize(page.offset)..to_usize(page.offset + page.bytes)]);
        next = page.offset + page.bytes;
    }
    assert_eq!(rebuilt, &all[to_usize(first)..]);
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

// ---------------------------------------------------------------------------
// Signal names (init::Signal, the `kill` tool's `signal`).

/// `signal`: whatever parses names a signal in `1..=64` that parses back
/// from its name and number; `kill`'s `signal` argument agrees with it.
///
/// Input: the text (lossy UTF-8).
pub fn signal(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let parsed = init::Signal::parse(&text);
    if let Ok(sig) = parsed {
        let n = sig.as_raw();
        assert!((1..=64).contains(&n), "{text:?} gave {n}");
        assert_eq!(init::Signal::parse(&n.to_string()).ok(), Some(sig));
        if let Some(name) = sig.name() {
            assert_eq!(init::Signal::parse(name).ok(), Some(sig));
            let lower = format!(" sig{} ", name.to_ascii_lowercase());
            assert_eq!(init::Signal::parse(&lower).ok(), Some(sig));
        }
    }
    let mut args = crate::tools::Args::new();
    args.insert("signal".into(), Value::String(text.clone().into_owned()));
    let bare = text.trim();
    let bare = match bare.get(..3) {
        Some(p) if p.eq_ignore_ascii_case("SIG") => &bare[3..],
        _ => bare,
    };
    match kill::parse_signal(&args) {
        Ok(crate::jobs::Plan::Assured) => assert!(bare.eq_ignore_ascii_case("ASSURED")),
        Ok(crate::jobs::Plan::One(sig)) if text.trim().is_empty() => {
            assert_eq!(sig, init::Signal::TERM)
        }
        Ok(crate::jobs::Plan::One(sig)) => assert_eq!(parsed.ok(), Some(sig), "{text:?}"),
        Err(_) => assert!(parsed.is_err() && !bare.eq_ignore_ascii_case("ASSURED")),
    }
    if let Ok(n) = text.trim().parse::<i64>() {
        args.insert("signal".into(), json!(n));
        let ok = kill::parse_signal(&args).is_ok();
        assert_eq!(ok, (1..=64).contains(&n), "{n}");
    }
}

// ---------------------------------------------------------------------------
// Redaction (policy::redact with capture's context).

/// Secrets of each builtin kind, each as shaped as the patterns expect.
const SECRETS: [&str; 6] = [
    "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-1234567890-abcdefghijklmn",
    "glpat-abcdefghij0123456789",
    "npm_abcdefghijklmnopqrstuvwxyz0123456789",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----",
];

fn builtin_redactor() -> Option<&'static Redactor> {
    static REDACTOR: OnceLock<Option<Redactor>> = OnceLock::new();
    REDACTOR
        .get_or_init(|| {
            Redactor::from_settings(Some("builtin"), None)
                .ok()
                .flatten()
        })
        .as_ref()
}

/// `redaction`: a secret planted on a line of its own in arbitrary output is
/// never shown, whole or through any read that covers it; a read's range
/// is the same with or without redaction; no match means the exact text.
///
/// Input: byte 0 picks the secret, a `u16` where it goes, the rest is the
/// output it is planted in (the read ranges take bytes from the front too).
pub fn redaction(data: &[u8]) {
    let Some(redactor) = builtin_redactor() else {
        panic!("the builtin patterns compile");
    };
    let mut input = Input { data };
    let secret = SECRETS[usize::from(input.byte()) % SECRETS.len()];
    let at = usize::from(input.u16());
    let noise = input.data;

    let (text, matches) = redactor.redact_text(noise);
    if matches == 0 {
        assert_eq!(text, capture::sanitize_utf8(noise));
    }
    assert!(text.matches(MARKER).count() as u64 >= matches);

    let at = if noise.is_empty() {
        0
    } else {
        at % (noise.len() + 1)
    };
    let mut planted = noise[..at].to_vec();
    planted.push(b'\n');
    let secret_at = planted.len() as u64;
    planted.extend_from_slice(secret.as_bytes());
    let secret_end = planted.len() as u64;
    planted.push(b'\n');
    planted.extend_from_slice(&noise[at..]);
    // The input may hold the secret's text already, glued to other text
    // (not a match: the patterns want it whole); the planted copy, on its
    // own line, must go.
    let before = capture::sanitize_utf8(&planted).matches(secret).count();
    let (text, matches) = redactor.redact_text(&planted);
    assert!(matches >= 1);
    assert!(
        text.matches(secret).count() < before,
        "{secret:?} shown in {text:?}"
    );

    let mut window = Window::new(1 << 16);
    window.push(&planted);
    let reads = [
        StreamSpec::All,
        StreamSpec::Tail(3),
        StreamSpec::From {
            from: secret_at.saturating_sub(u64::from(input.byte())),
            length: Some(u64::from(input.u16())),
            unaligned: false,
        },
        StreamSpec::From {
            from: secret_at,
            length: Some(secret_end - secret_at),
            unaligned: true,
        },
    ];
    for spec in reads {
        let (Some(plain), Some(masked)) = (
            window.slice_with(&spec, None),
            window.slice_with(&spec, Some(redactor)),
        ) else {
            panic!("no slice for {spec:?}");
        };
        assert_eq!(
            (
                plain.offset,
                plain.bytes,
                plain.total_bytes,
                plain.dropped_bytes
            ),
            (
                masked.offset,
                masked.bytes,
                masked.total_bytes,
                masked.dropped_bytes
            )
        );
        if masked.redacted.is_none() {
            assert_eq!(masked.data, plain.data);
        }
        if masked.offset <= secret_at && secret_end <= masked.offset + masked.bytes {
            let (shown, there) = (masked.data.matches(secret), plain.data.matches(secret));
            assert!(shown.count() < there.count(), "{spec:?} shows {secret:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// HTTP request checks (server::transport::http::guard).

/// `http_checks`: `Host`, `Origin` and `Authorization` values against the
/// guard, on a loopback or a wildcard bind, with or without a token and an
/// origin list; allowed values look as the model says they must.
///
/// Input: a flags byte (bit 0 a wildcard bind, 1 a token, 2 an origin list;
/// bits 3–5 leave out `Host`, `Origin`, `Authorization`), then `\n`-separated
/// fields: Host, Origin, Authorization, token, origin list.
pub fn http_checks(data: &[u8]) {
    let mut input = Input { data };
    let flags = input.byte();
    let host = input.field(b'\n');
    let origin = input.field(b'\n');
    let auth = input.field(b'\n');
    let token = String::from_utf8_lossy(input.field(b'\n')).into_owned();
    let origins = String::from_utf8_lossy(input.field(b'\n')).into_owned();
    let addr = if flags & 1 == 0 {
        "127.0.0.1:0"
    } else {
        "0.0.0.0:0"
    };
    let use_token = flags & 2 != 0;
    let use_origins = flags & 4 != 0;
    let (config, _) = Config::from_lookup(
        |name| match name {
            "MCP_EXEC_HTTP" => Some(addr.to_owned()),
            "MCP_EXEC_HTTP_TOKEN" if use_token => Some(token.clone()),
            "MCP_EXEC_HTTP_ALLOWED_ORIGINS" if use_origins => Some(origins.clone()),
            "MCP_EXEC_HTTP_INSECURE" => Some("1".to_owned()),
            _ => None,
        },
        1024,
    );
    let settings = match HttpSettings::from_config(&config) {
        Ok(Some(s)) => s,
        Ok(None) => panic!("MCP_EXEC_HTTP was set"),
        // A blank token or a bad origin list: refused at start-up.
        Err(_) => return,
    };
    let mut headers = hyper::HeaderMap::new();
    let mut put = |name: hyper::header::HeaderName, value: &[u8]| {
        if let Ok(v) = hyper::header::HeaderValue::from_bytes(value) {
            headers.insert(name, v);
        }
    };
    if flags & 8 == 0 {
        put(hyper::header::HOST, host);
    }
    if flags & 16 == 0 {
        put(hyper::header::ORIGIN, origin);
    }
    if flags & 32 == 0 {
        put(hyper::header::AUTHORIZATION, auth);
    }
    let text = |name| {
        headers
            .get(name)
            .map(|v: &hyper::header::HeaderValue| v.to_str().ok())
    };

    // Host: on a loopback bind, allowed exactly when it names loopback.
    let host_ok = guard::host(&settings, &headers).is_ok();
    if settings.addr.ip().is_loopback() {
        let expected = matches!(text(hyper::header::HOST), Some(Some(h)) if names_loopback(h));
        assert_eq!(host_ok, expected, "Host {:?}", text(hyper::header::HOST));
    } else {
        assert!(host_ok);
    }

    // Origin: absent is fine; an allowed one is http(s); by default exactly
    // the loopback names; the list's own entries are allowed.
    let origin_ok = guard::origin(&settings, &headers).is_ok();
    match text(hyper::header::ORIGIN) {
        None => assert!(origin_ok),
        Some(value) => {
            let value = value.unwrap_or("").trim().to_ascii_lowercase();
            if origin_ok {
                assert!(value.starts_with("http://") || value.starts_with("https://"));
            }
            if !use_origins {
                let expected = ["http://", "https://"]
                    .iter()
                    .any(|s| value.strip_prefix(s).is_some_and(names_loopback));
                assert_eq!(origin_ok, expected, "Origin {value:?}");
            }
        }
    }
    if use_origins {
        for entry in origins
            .split(',')
            .map(str::trim)
            .filter(|e| e.contains("://"))
        {
            let entry = entry.to_ascii_lowercase();
            let scheme_ok = entry.starts_with("http://") || entry.starts_with("https://");
            let mut h = hyper::HeaderMap::new();
            if let Ok(v) = hyper::header::HeaderValue::from_str(&entry) {
                h.insert(hyper::header::ORIGIN, v);
                assert_eq!(guard::origin(&settings, &h).is_ok(), scheme_ok, "{entry:?}");
            }
        }
    }

    // Authorization: with a token, exactly `Bearer <token>` (scheme in any
    // case, spaces around); without one, anything.
    let authorized = guard::authorized(&settings, &headers);
    match &settings.token {
        None => assert!(authorized),
        Some(t) => {
            let expected = match text(hyper::header::AUTHORIZATION) {
                Some(Some(v)) => v.trim().split_once(' ').is_some_and(|(scheme, cred)| {
                    scheme.eq_ignore_ascii_case("bearer") && cred.trim().as_bytes() == t.as_slice()
                }),
                _ => false,
            };
            assert_eq!(authorized, expected);
            let mut h = hyper::HeaderMap::new();
            let mut right = b"Bearer ".to_vec();
            right.extend_from_slice(t);
            if let Ok(v) = hyper::header::HeaderValue::from_bytes(&right) {
                h.insert(hyper::header::AUTHORIZATION, v);
                assert!(guard::authorized(&settings, &h));
            }
        }
    }
}

/// Whether a `Host` value (or an origin's authority) is `localhost`,
/// `127.0.0.1` or `[::1]`, in any case, with an optional numeric port.
fn names_loopback(value: &str) -> bool {
    let value = value.trim().to_ascii_lowercase();
    ["localhost", "127.0.0.1", "[::1]"].iter().any(|name| {
        value.strip_prefix(name).is_some_and(|rest| {
            rest.is_empty()
                || rest
                    .strip_prefix(':')
                    .is_some_and(|port| port.bytes().all(|b| b.is_ascii_digit()))
        })
    })
}

// ---------------------------------------------------------------------------
// The `/files/<abs path>` path parser (files::path, SPEC §13.2).

/// `files_path`: the input is the raw path of a `/files/…` URL (or a
/// `?move=` value) as a client sends it. `from_url_path` must agree with a
/// naive model applied by the letter: percent-decode (a `%` needs two hex
/// digits), then refuse a relative path, a NUL byte, a `.` or `..`
/// component, and otherwise join the non-empty components under `/`. An
/// accepted path is therefore absolute, normalised and free of `..`, so
/// "beneath a root" is never a question of spelling; parsing its own text
/// again gives it back (`from_text`, when it is UTF-8).
pub fn files_path(data: &[u8]) {
    use crate::files::path::{PathError, from_text, from_url_path};
    use std::os::unix::ffi::OsStrExt;

    let raw = String::from_utf8_lossy(data);
    let got = from_url_path(&raw);

    let bytes = raw.as_bytes();
    let mut decoded = Vec::new();
    let mut bad_escape = false;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
            match (hex(bytes.get(i + 1)), hex(bytes.get(i + 2))) {
                (Some(hi), Some(lo)) => {
                    decoded.push((hi * 16 + lo) as u8);
                    i += 3;
                }
                _ => {
                    bad_escape = true;
                    break;
                }
            }
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    let parts: Vec<&[u8]> = decoded
        .split(|&b| b == b'/')
        .filter(|p| !p.is_empty())
        .collect();
    let expected: Result<Vec<u8>, fn(String) -> PathError> = if bad_escape {
        Err(PathError::BadEscape)
    } else if decoded.first() != Some(&b'/') {
        Err(PathError::Relative)
    } else if decoded.contains(&0) {
        Err(PathError::Nul)
    } else if parts.iter().any(|p| *p == b"." || *p == b"..") {
        Err(PathError::DotDot)
    } else if parts.is_empty() {
        Ok(b"/".to_vec())
    } else {
        Ok(parts.iter().flat_map(|p| [&b"/"[..], p].concat()).collect())
    };
    match (&got, expected) {
        (Ok(path), Ok(want)) => {
            let have = path.as_os_str().as_bytes();
            assert_eq!(have, &want[..], "{raw:?}");
            assert!(!have.windows(2).any(|w| w == b"//"), "{raw:?}");
            assert!(have == b"/" || !have.ends_with(b"/"), "{raw:?}");
            if let Some(text) = path.to_str() {
                assert_eq!(from_text(text).as_ref(), Ok(path), "{raw:?}");
            }
        }
        (Err(e), Err(kind)) => assert_eq!(e, &kind(raw.clone().into_owned()), "{raw:?}"),
        (got, want) => panic!("{raw:?}: got {got:?}, the model says {want:?}"),
    }
}

// ---------------------------------------------------------------------------
// JSON-RPC decode and dispatch (server::session, tools).

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => panic!("a tokio runtime: {e}"),
        }
    })
}

/// The one directory the file tools of [`dispatch`] may touch, under the
/// temporary directory (one for all runs, so that runs leave no trail).
fn fuzz_root() -> &'static std::path::Path {
    static ROOT: OnceLock<std::path::PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let dir = std::env::temp_dir().join("mcp-exec-fuzz");
        if let Err(e) = std::fs::create_dir_all(&dir) {
            panic!("creating {}: {e}", dir.display());
        }
        dir
    })
}

/// The server state [`dispatch`] runs on, one per variant (the policy's root
/// spelled two ways, redaction on or off), reused while its table is empty: building the
/// builtin redactor costs milliseconds, and a failed job is delivered by its
/// `execute` at once, so the table is normally empty between inputs.
fn app(flags: u8) -> Arc<App> {
    static APPS: [Mutex<Option<Arc<App>>>; 4] = [const { Mutex::new(None) }; 4];
    let variant = usize::from(flags & 3);
    let mut slot = APPS[variant].lock().unwrap_or_else(|p| p.into_inner());
    if let Some(app) = slot.as_ref()
        && app.jobs.list().is_empty()
    {
        return Arc::clone(app);
    }
    let config = Config {
        max_line_bytes: 4096,
        max_output_bytes: 64,
        max_output_bytes_limit: 1024,
        ..Config::default()
    };
    let settings = JobsSettings {
        grace: Duration::ZERO,
        max_running: 2,
        max_queued: 2,
        breaker_failures: 0,
        breaker_cooldown: Duration::ZERO,
        shell_session_idle: Duration::from_secs(3600),
        oom_score_adj: None,
    };
    // Always a policy, rooted in a private directory (also the default
    // cwd): `upload` and `download` are dispatched like every tool, and a
    // fuzzed path must never write or read anything outside it. The variants
    // differ in whether the root is given as a symlink-free path or with a
    // trailing `/` (both must resolve to the same root).
    let root = fuzz_root().to_string_lossy().into_owned();
    let spelled = if variant & 1 == 0 {
        root.clone()
    } else {
        format!("{root}/")
    };
    let cwd = CwdPolicy::from_settings(Some(&spelled), Some(&root));
    let Ok(cwd) = cwd else {
        panic!("the cwd policy builds");
    };
    let redact = if variant & 2 == 0 {
        None
    } else {
        Redactor::from_settings(Some("builtin"), None)
            .ok()
            .flatten()
    };
    let app = App::share(App {
        jobs: Jobs::refusing(&settings),
        cwd,
        redact,
        job_policy: JobPolicy::default(),
        config,
    });
    *slot = Some(Arc::clone(&app));
    app
}

/// `dispatch`: the input is what a client writes on stdin; each line goes
/// through a real session to the real tools, over a job service that starts
/// nothing (every `execute` is a start error, which `wait`, `status`,
/// `output`, `kill`, `input` and `list_jobs` then see). Every call
/// finishes, and every line written back is one JSON-RPC 2.0 message.
///
/// Input: a flags byte (bit 0 the cwd policy `/tmp`, bit 1 builtin
/// redaction), then the lines.
pub fn dispatch(data: &[u8]) {
    let mut input = Input { data };
    let flags = input.byte();
    let lines = input.data;
    let app = app(flags);
    let max_line = app.config.max_line_bytes;
    runtime().block_on(async move {
        let shutdown = CancellationToken::new();
        let session = Session::new(app, &shutdown, "fuzz");
        let (out, mut inbox) = outbox::new(outbox::BUDGET);
        let reader = tokio::spawn(async move {
            let mut written = Vec::new();
            while let Some(Outgoing::Message(message, permit)) = inbox.rx.recv().await {
                written.push(message.into_line());
                drop(permit);
            }
            written
        });
        let mut framed = Vec::new();
        let mut splitter = LineSplitter::new(max_line);
        splitter.push(lines, &mut |l| framed.push(l));
        splitter.finish(&mut |l| framed.push(l));
        for line in framed {
            session.on_line(line, &out).await;
        }
        assert!(
            session.settle(Duration::from_secs(10)).await,
            "a call did not finish"
        );
        out.finish();
        let written = match reader.await {
            Ok(w) => w,
            Err(e) => panic!("the reader: {e}"),
        };
        for line in written {
            let value: Value = match serde_json::from_str(&line) {
                Ok(v) => v,
                Err(e) => panic!("not JSON ({e}): {line}"),
            };
            let messages = match value {
                Value::Array(items) => items,
                one => vec![one],
            };
            for m in messages {
                assert_eq!(m["jsonrpc"], "2.0", "{m}");
                let is_response =
                    m.get("result").is_some() != m.get("error").is_some() && m.get("id").is_some();
                let is_notification = m.get("method").is_some() && m.get("id").is_none();
                assert!(is_response || is_notification, "{m}");
            }
        }
    });
}

/// xorshift64: the tests' PRNG, and chunk sizes in [`line_framing`].
fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[cfg(test)]
mod tests {
    //! Stable mode: each target on its committed seeds, then on seeded
    //! random mutations of them (flips, inserts, deletes, splices), a
    //! bounded count. A failure names the input to add to the corpus.

    use super::*;

    fn corpus(target: &str) -> Vec<Vec<u8>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus")
            .join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let seeds: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
        assert!(!seeds.is_empty(), "no seeds in {}", dir.display());
        seeds
    }

    fn mutate(seeds: &[Vec<u8>], next: &mut impl FnMut() -> u64) -> Vec<u8> {
        let pick = |n: u64, len: usize| (n % (len as u64 + 1)) as usize;
        let mut data = seeds[(next() % seeds.len() as u64) as usize].clone();
        for _ in 0..1 + next() % 4 {
            match next() % 6 {
                0 if !data.is_empty() => {
                    let i = pick(next(), data.len() - 1);
                    data[i] ^= 1 << (next() % 8);
                }
                1 => {
                    let i = pick(next(), data.len());
                    let bytes: Vec<u8> = (0..1 + next() % 8).map(|_| next() as u8).collect();
                    data.splice(i..i, bytes);
                }
                2 if !data.is_empty() => {
                    let i = pick(next(), data.len() - 1);
                    let j = (i + 1 + pick(next(), 16)).min(data.len());
                    data.drain(i..j);
                }
                3 => {
                    let other = &seeds[(next() % seeds.len() as u64) as usize];
                    let i = pick(next(), data.len());
                    let j = pick(next(), other.len());
                    data.truncate(i);
                    data.extend_from_slice(&other[j..]);
                }
                4 => {
                    let i = pick(next(), data.len());
                    let interesting: &[&[u8]] = &[
                        b"\n",
                        b"\r\n",
                        "\u{e9}".as_bytes(),
                        "\u{1f600}".as_bytes(),
                        b"\xff",
                        b"\x80",
                        b"\"",
                        b"{}",
                        b"0",
                    ];
                    let piece = interesting[(next() % interesting.len() as u64) as usize];
                    data.splice(i..i, piece.iter().copied());
                }
                _ => {
                    let i = pick(next(), data.len());
                    data.truncate(i);
                }
            }
        }
        data
    }

    fn drive(target: &str, run: fn(&[u8]), mutations: usize) {
        let seeds = corpus(target);
        for seed in &seeds {
            run(seed);
        }
        let mut next = xorshift(target.len() as u64 * 7919);
        for _ in 0..mutations {
            let data = mutate(&seeds, &mut next);
            let shown = data.clone();
            let outcome = std::panic::catch_unwind(|| run(&data));
            assert!(outcome.is_ok(), "{target} failed on {shown:?}");
        }
    }

    #[test]
    fn line_framing_agrees_with_a_split_on_newlines() {
        drive("line_framing", line_framing, 3000);
    }

    #[test]
    fn utf8_sanitising_and_alignment_agree_with_a_naive_decoder() {
        drive("utf8", utf8, 3000);
    }

    #[test]
    fn capture_reads_agree_with_a_model_of_the_whole_stream() {
        drive("capture", capture, 3000);
    }

    #[test]
    fn signal_names_round_trip() {
        drive("signal", signal, 3000);
    }

    #[test]
    fn planted_secrets_are_never_shown() {
        drive("redaction", redaction, 400);
    }

    #[test]
    fn http_checks_allow_what_the_model_allows() {
        drive("http_checks", http_checks, 3000);
    }

    #[test]
    fn files_paths_agree_with_a_naive_decoder_and_never_hold_dot_dot() {
        drive("files_path", files_path, 3000);
    }

    #[test]
    fn dispatch_answers_every_line_with_json_rpc_and_spawns_nothing() {
        drive("dispatch", dispatch, 400);
    }
}
