//! How a file operation fails: a [`Kind`], which every front-end maps to
//! its own code (an HTTP status, a Connect code, a sandboxd code), and the
//! message the client sees, which always names the path.
//!
//! # The kind decides, never the text
//! A front-end chooses its wire code by matching the [`Kind`]
//! exhaustively, so a new kind makes each of them choose; the message is
//! only shown. [`FileError::http_status`] is the mapping of `/files` (and
//! envd's `/files`), the others are in their front-ends.

use std::path::Path;

use rustix::io::Errno;

/// What went wrong: one variant per cause a client may be told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The request is malformed (a relative path, `..`, bad hex, …): 400.
    Invalid,
    /// The path is outside the working-directory policy's allowed
    /// directories (or a sandbox's root): 403.
    Outside,
    /// The kernel refused (`EACCES`, `EPERM`, `EROFS`): 403.
    Denied,
    /// `/` or an allowed root, which is never deleted, moved, replaced or
    /// written over: 403.
    Root,
    /// The path does not exist: 404.
    NotFound,
    /// It exists and may not be replaced (`EEXIST`, `overwrite` false): 409.
    Exists,
    /// A directory that is not empty (`ENOTEMPTY`): 409.
    NotEmpty,
    /// Not a regular file where one is read or replaced (a FIFO, device,
    /// socket, directory): 409.
    NotRegular,
    /// Not a directory where one is needed (`ENOTDIR`; a parent, a listed
    /// or watched path): 409.
    NotDirectory,
    /// A directory where a file is meant (`EISDIR`, a delete without
    /// `recursive`): 409.
    IsDirectory,
    /// A symbolic link as the final component, which is never followed
    /// (`ELOOP` under `O_NOFOLLOW`): 409.
    Symlink,
    /// A move across file systems (`EXDEV`), which would not be atomic: 409.
    CrossDevice,
    /// In use (`EBUSY`, a mount point): 409.
    Busy,
    /// A tree nested deeper than a delete goes: 409.
    TooDeep,
    /// The content does not match its `sha256`: 422.
    Mismatch,
    /// More than one call may carry: 413.
    TooLarge,
    /// No space left on the device (`ENOSPC`, `EDQUOT`): 507.
    NoSpace,
    /// A budget of the whole server is spent (its share of inotify
    /// instances): 503, try again once one is given back.
    Exhausted,
    /// Any other I/O error: 500.
    Io,
}

/// A failed file operation; its `Display` is the exact text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FileError {
    /// What went wrong.
    pub kind: Kind,
    /// The text the client sees.
    pub message: String,
}

impl FileError {
    /// An error of `kind` with this text.
    pub fn new(kind: Kind, message: impl Into<String>) -> FileError {
        FileError {
            kind,
            message: message.into(),
        }
    }

    /// `"/x" is not a regular file`.
    pub fn not_regular(path: &Path) -> FileError {
        FileError::new(Kind::NotRegular, format!("{path:?} is not a regular file"))
    }

    /// `"/x" exists and overwrite is false`.
    pub fn exists(path: &Path) -> FileError {
        FileError::new(
            Kind::Exists,
            format!("{path:?} exists and overwrite is false"),
        )
    }

    /// The kernel's `errno` while `doing` (e.g. `writing`) `path`:
    /// `no space left on device writing "/x"`, `"/x": no such file or
    /// directory`, …
    pub fn errno(e: Errno, doing: &str, path: &Path) -> FileError {
        let reason = init::errno_text(&std::io::Error::from(e));
        match e {
            Errno::NOSPC | Errno::DQUOT => {
                FileError::new(Kind::NoSpace, format!("{reason} {doing} {path:?}"))
            }
            Errno::NOENT => FileError::new(Kind::NotFound, format!("{path:?}: {reason}")),
            Errno::EXIST => FileError::new(Kind::Exists, format!("{path:?}: {reason}")),
            Errno::NOTEMPTY => FileError::new(Kind::NotEmpty, format!("{path:?}: {reason}")),
            Errno::ISDIR => FileError::new(Kind::IsDirectory, format!("{path:?}: {reason}")),
            Errno::NOTDIR => FileError::new(Kind::NotDirectory, format!("{path:?}: {reason}")),
            Errno::BUSY => FileError::new(Kind::Busy, format!("{path:?}: {reason}")),
            Errno::ACCESS | Errno::PERM | Errno::ROFS => {
                FileError::new(Kind::Denied, format!("{doing} {path:?}: {reason}"))
            }
            Errno::LOOP => FileError::new(
                Kind::Symlink,
                format!("{path:?} is a symbolic link (not followed)"),
            ),
            Errno::NAMETOOLONG | Errno::INVAL => {
                FileError::new(Kind::Invalid, format!("{doing} {path:?}: {reason}"))
            }
            _ => FileError::new(Kind::Io, format!("{doing} {path:?}: {reason}")),
        }
    }

    /// The same from an `io::Error`.
    pub fn io(e: &std::io::Error, doing: &str, path: &Path) -> FileError {
        FileError::errno(Errno::from_io_error(e).unwrap_or(Errno::IO), doing, path)
    }

    /// The HTTP status code of its kind, as `/files` answers.
    pub fn http_status(&self) -> u16 {
        match self.kind {
            Kind::Invalid => 400,
            Kind::Outside | Kind::Denied | Kind::Root => 403,
            Kind::NotFound => 404,
            Kind::Exists
            | Kind::NotEmpty
            | Kind::NotRegular
            | Kind::NotDirectory
            | Kind::IsDirectory
            | Kind::Symlink
            | Kind::CrossDevice
            | Kind::Busy
            | Kind::TooDeep => 409,
            Kind::TooLarge => 413,
            Kind::Mismatch => 422,
            Kind::NoSpace => 507,
            Kind::Exhausted => 503,
            Kind::Io => 500,
        }
    }
}

/// A URL (or what was meant as one) as an error text shows it: at most
/// 200 characters of what precedes its query or fragment, without the
/// user and password of its authority, and `?…` where a query was cut. A
/// download link's query is often its credential (a signed link), so no
/// error ever shows it, however malformed the rest is.
pub fn url_for_errors(text: &str) -> String {
    let text = text.trim();
    // The user and password go first: before the first `/` after the
    // scheme, everything up to the last `@` (a `?` in a password too).
    let (scheme, rest) = match text.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, text),
    };
    let rest = match scheme {
        Some(_) => {
            let end = rest.find('/').unwrap_or(rest.len());
            match rest[..end].rfind('@') {
                Some(at) => &rest[at + 1..],
                None => rest,
            }
        }
        None => rest,
    };
    let (head, cut) = match rest.find(['?', '#']) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let head = match scheme {
        Some(scheme) => format!("{scheme}://{head}"),
        None => head.to_owned(),
    };
    let mut shown: String = head.chars().take(200).collect();
    if cut.starts_with('?') {
        shown.push_str("?…");
    } else if !cut.is_empty() {
        shown.push_str("#…");
    }
    shown
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_url_in_an_error_never_shows_its_query_fragment_or_credentials() {
        let cases = [
            (
                "https://h.example/d/f.png?sig=SECRET",
                "https://h.example/d/f.png?…",
            ),
            ("https:///no-host?sig=SECRET", "https:///no-host?…"),
            (
                "https://h.example/a b?x=SECRET y",
                "https://h.example/a b?…",
            ),
            ("chat_upload://image_0", "chat_upload://image_0"),
            (
                "sandbox:/mnt/data/x.png?token=SECRET",
                "sandbox:/mnt/data/x.png?…",
            ),
            ("https://user:SECRET@h.example/x", "https://h.example/x"),
            (
                "https://user:SE?CRET@h.example/x?q=SECRET",
                "https://h.example/x?…",
            ),
            ("https://h.example/x#SECRET", "https://h.example/x#…"),
            (
                "  https://h.example/\u{7f}?SECRET  ",
                "https://h.example/\u{7f}?…",
            ),
        ];
        for (url, shown) in cases {
            assert_eq!(url_for_errors(url), shown, "{url}");
            assert!(!url_for_errors(url).contains("SECRET"), "{url}");
        }
        assert_eq!(url_for_errors(&"x".repeat(500)).chars().count(), 200);
    }
    use super::*;

    #[test]
    fn the_exact_texts_of_the_spec_name_the_path() {
        let p = Path::new("/x");
        assert_eq!(
            FileError::errno(Errno::NOSPC, "writing", p).to_string(),
            "no space left on device writing \"/x\""
        );
        assert_eq!(
            FileError::exists(p).to_string(),
            "\"/x\" exists and overwrite is false"
        );
        assert_eq!(
            FileError::not_regular(p).to_string(),
            "\"/x\" is not a regular file"
        );
        assert_eq!(
            FileError::errno(Errno::NOENT, "reading", p).http_status(),
            404
        );
    }

    #[test]
    fn each_errno_has_its_own_kind_and_keeps_its_status() {
        let p = Path::new("/x");
        let cases = [
            (Errno::NOENT, Kind::NotFound, 404),
            (Errno::EXIST, Kind::Exists, 409),
            (Errno::NOTEMPTY, Kind::NotEmpty, 409),
            (Errno::ISDIR, Kind::IsDirectory, 409),
            (Errno::NOTDIR, Kind::NotDirectory, 409),
            (Errno::BUSY, Kind::Busy, 409),
            (Errno::LOOP, Kind::Symlink, 409),
            (Errno::ACCESS, Kind::Denied, 403),
            (Errno::ROFS, Kind::Denied, 403),
            (Errno::NOSPC, Kind::NoSpace, 507),
            (Errno::DQUOT, Kind::NoSpace, 507),
            (Errno::INVAL, Kind::Invalid, 400),
            (Errno::IO, Kind::Io, 500),
        ];
        for (errno, kind, status) in cases {
            let e = FileError::errno(errno, "writing", p);
            assert_eq!((e.kind, e.http_status()), (kind, status), "{errno:?}: {e}");
            assert!(e.message.contains("\"/x\""), "{errno:?}: {e}");
        }
        assert_eq!(FileError::exists(p).kind, Kind::Exists);
        assert_eq!(FileError::not_regular(p).kind, Kind::NotRegular);
    }
}
