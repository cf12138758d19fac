//! How a file operation fails: a [`Kind`] (which decides an HTTP status)
//! and the message the client sees, which always names the path.

use std::path::Path;

use rustix::io::Errno;

/// What went wrong, coarsely.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The request is malformed (a relative path, `..`, bad hex, …): 400.
    Invalid,
    /// Outside the working-directory policy, or the kernel said `EACCES` /
    /// `EPERM`: 403.
    Forbidden,
    /// The path does not exist: 404.
    NotFound,
    /// It exists (and may not be replaced), is not empty, is not a regular
    /// file, or is of the wrong kind: 409.
    Conflict,
    /// The content does not match its `sha256`: 422.
    Mismatch,
    /// More than one call may carry: 413.
    TooLarge,
    /// No space left on the device: 507.
    NoSpace,
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
        FileError::new(Kind::Conflict, format!("{path:?} is not a regular file"))
    }

    /// `"/x" exists and overwrite is false`.
    pub fn exists(path: &Path) -> FileError {
        FileError::new(
            Kind::Conflict,
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
            Errno::EXIST | Errno::NOTEMPTY | Errno::ISDIR | Errno::NOTDIR | Errno::BUSY => {
                FileError::new(Kind::Conflict, format!("{path:?}: {reason}"))
            }
            Errno::ACCESS | Errno::PERM | Errno::ROFS => {
                FileError::new(Kind::Forbidden, format!("{doing} {path:?}: {reason}"))
            }
            Errno::LOOP => FileError::new(
                Kind::Conflict,
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

    /// The HTTP status code of its kind.
    pub fn http_status(&self) -> u16 {
        match self.kind {
            Kind::Invalid => 400,
            Kind::Forbidden => 403,
            Kind::NotFound => 404,
            Kind::Conflict => 409,
            Kind::TooLarge => 413,
            Kind::Mismatch => 422,
            Kind::NoSpace => 507,
            Kind::Io => 500,
        }
    }
}

#[cfg(test)]
mod tests {
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
}
