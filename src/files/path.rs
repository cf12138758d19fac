//! The text of a path → an absolute path: pure functions, no I/O, so that
//! they can be fuzzed (`from_url_path` is the target for the HTTP side).
//!
//! A file path must be absolute, contain no NUL byte and no `.` or `..`
//! component (a `..` would make the policy's "beneath a root" a question of
//! spelling; there is no need for one in an absolute path). Repeated `/`
//! collapse; a trailing `/` is dropped (the path names the same thing).

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// Why a path's text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Not starting with `/`.
    #[error("{0:?} is not an absolute path")]
    Relative(String),
    /// A `.` or `..` component.
    #[error("{0:?} has a \".\" or \"..\" component")]
    DotDot(String),
    /// A NUL byte (also a percent-encoded `%00`).
    #[error("{0:?} contains a NUL byte")]
    Nul(String),
    /// A `%` not followed by two hex digits.
    #[error("{0:?} has a bad percent-escape")]
    BadEscape(String),
}

/// A tool's `path` argument as an absolute path (see the module doc).
pub fn from_text(text: &str) -> Result<PathBuf, PathError> {
    from_bytes(text.as_bytes(), text)
}

/// The part of a URL's path after `/files` (`/tmp/a%20b.txt`), percent-
/// decoded (any byte may be escaped, so non-UTF-8 names are reachable; `+`
/// is a plus), as an absolute path (see the module doc). Also parses the
/// value of `?move=`.
pub fn from_url_path(raw: &str) -> Result<PathBuf, PathError> {
    let decoded = percent_decode(raw).ok_or_else(|| PathError::BadEscape(raw.to_owned()))?;
    from_bytes(&decoded, raw)
}

/// Percent-decodes `raw`; `None` at a bad escape (the floor's decoder,
/// which every listener's query shares).
pub use crate::net::query::percent_decode;

/// `bytes` as a normalised absolute path; `shown` is the text for errors.
fn from_bytes(bytes: &[u8], shown: &str) -> Result<PathBuf, PathError> {
    if bytes.first() != Some(&b'/') {
        return Err(PathError::Relative(shown.to_owned()));
    }
    if bytes.contains(&0) {
        return Err(PathError::Nul(shown.to_owned()));
    }
    let mut out = Vec::with_capacity(bytes.len());
    for part in bytes.split(|&b| b == b'/').filter(|p| !p.is_empty()) {
        if part == b"." || part == b".." {
            return Err(PathError::DotDot(shown.to_owned()));
        }
        out.push(b'/');
        out.extend_from_slice(part);
    }
    if out.is_empty() {
        out.push(b'/');
    }
    Ok(PathBuf::from(OsString::from_vec(out)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn a_url_path_is_percent_decoded_and_normalised() {
        assert_eq!(
            from_url_path("/tmp/a%20b.txt").unwrap(),
            PathBuf::from("/tmp/a b.txt")
        );
        assert_eq!(
            from_url_path("//tmp///x/").unwrap(),
            PathBuf::from("/tmp/x")
        );
        assert_eq!(from_url_path("/").unwrap(), PathBuf::from("/"));
        assert_eq!(from_url_path("/a+b").unwrap(), PathBuf::from("/a+b"));
        let raw = from_url_path("/t/%ff%FE").unwrap();
        assert_eq!(raw.as_os_str().as_bytes(), b"/t/\xff\xfe");
    }

    #[test]
    fn relative_dot_dot_nul_and_bad_escapes_are_refused() {
        assert!(matches!(
            from_url_path("tmp/x"),
            Err(PathError::Relative(_))
        ));
        assert!(matches!(from_url_path(""), Err(PathError::Relative(_))));
        assert!(matches!(
            from_url_path("/a/../etc"),
            Err(PathError::DotDot(_))
        ));
        assert!(matches!(
            from_url_path("/a/%2e%2e/etc"),
            Err(PathError::DotDot(_))
        ));
        assert!(matches!(from_url_path("/a/./b"), Err(PathError::DotDot(_))));
        assert!(matches!(from_url_path("/a%00b"), Err(PathError::Nul(_))));
        assert!(matches!(
            from_url_path("/a%2"),
            Err(PathError::BadEscape(_))
        ));
        assert!(matches!(
            from_url_path("/a%zz"),
            Err(PathError::BadEscape(_))
        ));
        assert!(matches!(from_text("rel"), Err(PathError::Relative(_))));
        assert!(matches!(from_text("/a/.."), Err(PathError::DotDot(_))));
        assert!(matches!(from_text("/a\0"), Err(PathError::Nul(_))));
        // "..." is a name like any other.
        assert_eq!(from_text("/a/...").unwrap(), PathBuf::from("/a/..."));
    }

    #[test]
    fn an_encoded_slash_is_a_separator_and_still_cannot_smuggle_dot_dot() {
        assert_eq!(from_url_path("/a%2Fb").unwrap(), PathBuf::from("/a/b"));
        assert!(from_url_path("/a%2F..%2Fb").is_err());
    }
}
