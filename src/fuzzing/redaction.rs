//! Fuzz target `redaction` (`fuzz/fuzz_targets/redaction.rs`): redaction
//! (policy::redact with capture's context). What it checks, and how it reads
//! its input: [`redaction`](fn@redaction).

use std::sync::OnceLock;

use super::Input;
use crate::capture::{self, StreamSpec, Window};
use crate::policy::redact::{MARKER, Redactor};

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
/// never shown, whole or through any read that covers it, nor, while only
/// its first bytes are written, through a live read; a read's range is the
/// same with or without redaction; no match means the exact text.
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

    // The live edge: the secret written only up to a cut (at least 4 of its
    // bytes) is not shown by a live read, neither is any of its part so far.
    let written = 4 + usize::from(input.byte()) % (secret.len() - 4);
    let cut = usize::try_from(secret_at).unwrap_or(0) + written;
    let mut live = Window::new(1 << 16);
    live.push(&planted[..cut]);
    let Some(read) = live.slice_live(&StreamSpec::All, Some(redactor)) else {
        panic!("no live slice");
    };
    assert!(read.offset + read.bytes <= live.total());
    let part = &secret[..written];
    let there = capture::sanitize_utf8(&planted[..cut])
        .matches(part)
        .count();
    assert!(
        read.data.matches(part).count() < there,
        "a live read shows {part:?} of {secret:?}"
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn planted_secrets_are_never_shown() {
        crate::fuzzing::stable::drive("redaction", super::redaction, 400);
    }
}
