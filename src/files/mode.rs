//! A file's mode as a client writes it (`"0644"`), and the setuid rule:
//! which modes the server gives a file it writes. The file policy's, so
//! that `upload`, `PUT /files` and sandboxd's `PUT /v1/files` answer alike.
//!
//! # The setuid rule
//! No file is written with the setuid or setgid bit: a file the root
//! server writes with one runs as root (or with root's group) for every
//! job user that can execute it, so a caller of `upload` or `PUT /files`
//! could hand a `nobody` job a way back to root. A job that means it runs
//! `chmod` itself, as whichever user it is. The sticky bit (01000) is
//! harmless and kept.
//!
//! # One parser, two spellings
//! [`parse_mode`] takes the [`Form`] a wire accepts: the tools' and
//! `/files`' lenient octal, or sandboxd's exact `^0[0-7]{3}$` (which can
//! spell no set-id bit). Each front-end says a [`ModeError::Malformed`] in
//! its own words (they are part of its wire) and a [`ModeError::SetId`]
//! with this module's text.

/// Which spellings of a mode a wire accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `"0644"`, `"644"`, `"0o644"` (spaces around ignored), at most
    /// `07777`: `upload`'s `mode` and `PUT /files?mode=`.
    Octal,
    /// Exactly `0` and three octal digits, `^0[0-7]{3}$`: sandboxd's
    /// `PUT /v1/files?mode=`.
    Sandboxd,
}

/// Why a mode was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    /// Not a mode in the [`Form`] asked (the front-end says so in its
    /// words, naming the form).
    #[error("not octal permission bits")]
    Malformed,
    /// The mode sets the setuid or setgid bit (module doc).
    #[error(
        "mode {0:04o} sets the setuid or setgid bit, which upload and PUT /files refuse: \
         the file would run as root for any job user (chmod it from a job to mean it)"
    )]
    SetId(u32),
}

/// The permission bits `text` spells in `form`, unless it is malformed or
/// sets a set-id bit ([`without_setid`]).
pub fn parse_mode(text: &str, form: Form) -> Result<u32, ModeError> {
    let mode = match form {
        Form::Octal => octal(text),
        Form::Sandboxd => sandboxd(text),
    };
    without_setid(mode.ok_or(ModeError::Malformed)?)
}

/// `"0644"`, `"644"`, `"0o644"`: at most `07777`.
fn octal(text: &str) -> Option<u32> {
    let t = text.trim();
    let t = t.strip_prefix("0o").unwrap_or(t);
    if t.is_empty() || t.len() > 5 {
        return None;
    }
    u32::from_str_radix(t, 8).ok().filter(|m| *m <= 0o7777)
}

/// sandboxd's `^0[0-7]{3}$`.
fn sandboxd(text: &str) -> Option<u32> {
    let b = text.as_bytes();
    (b.len() == 4 && b[0] == b'0' && b[1..].iter().all(|c| (b'0'..=b'7').contains(c)))
        .then(|| u32::from_str_radix(text, 8).ok())
        .flatten()
}

/// `mode`, unless it has the setuid or setgid bit (the module doc's rule).
pub fn without_setid(mode: u32) -> Result<u32, ModeError> {
    if mode & 0o6000 != 0 {
        return Err(ModeError::SetId(mode));
    }
    Ok(mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setuid_and_setgid_modes_are_refused_with_a_reason_and_the_sticky_bit_is_kept() {
        for setid in [0o4755, 0o2755, 0o6777] {
            let e = without_setid(setid).unwrap_err().to_string();
            assert!(e.contains("setuid or setgid"), "{e}");
            assert_eq!(
                parse_mode(&format!("{setid:o}"), Form::Octal),
                Err(ModeError::SetId(setid))
            );
        }
        assert_eq!(without_setid(0o1777), Ok(0o1777));
        assert_eq!(without_setid(0o644), Ok(0o644));
        assert_eq!(parse_mode("1777", Form::Octal), Ok(0o1777));
    }

    #[test]
    fn modes_are_octal_with_or_without_a_leading_zero() {
        let octal = |t| parse_mode(t, Form::Octal);
        assert_eq!(octal("0644"), Ok(0o644));
        assert_eq!(octal("755"), Ok(0o755));
        assert_eq!(octal("0o600"), Ok(0o600));
        assert_eq!(octal(" 0600 "), Ok(0o600));
        assert_eq!(super::octal("4755"), Some(0o4755));
        for bad in ["", "rw-r--r--", "0999", "77777", "-1"] {
            assert_eq!(octal(bad), Err(ModeError::Malformed), "{bad}");
        }
    }

    #[test]
    fn a_sandboxd_mode_is_four_octal_digits_with_a_leading_zero() {
        let strict = |t| parse_mode(t, Form::Sandboxd);
        assert_eq!(strict("0644"), Ok(0o644));
        assert_eq!(strict("0755"), Ok(0o755));
        for bad in ["644", "0844", "04755", "0o644", "abcd", "", " 0644"] {
            assert_eq!(strict(bad), Err(ModeError::Malformed), "{bad}");
        }
    }
}
