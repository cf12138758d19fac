//! The file engine, transport-agnostic: the `upload` and `download`
//! tools, the HTTP `/files` API, sandboxd's `/v1/files` and envd's
//! `/files` and `filesystem.Filesystem` are thin layers over this. It
//! names no tool, server or transport type (`scripts/check-layers.sh`;
//! `fetch`, an HTTPS client, is the one part that uses an HTTP library).
//!
//! - [`path`]: the text of a path → an absolute path (the tools' `path`
//!   argument, the URL of `/files/…`): pure functions, fuzzable.
//! - [`place`]: a path → its parent directory's descriptor and its final
//!   name, resolved once under the working-directory policy
//!   (`MCP_EXEC_ALLOWED_CWDS`); a final symlink followed, for a front-end
//!   that writes through links, by descriptor ([`place::Place::through_link`]).
//! - [`commit`]: the atomic write (temporary file, `fsync`, verify,
//!   `fchmod`, rename, `fsync` of the directory).
//! - [`transfer`]: the verified pipeline — bodies streamed in to the
//!   commit (chunks written and hashed side by side, background syncs) and
//!   byte ranges streamed out, on the file workers.
//! - [`mode`]: a mode as clients write it, and the setuid rule.
//! - [`read`]: opening a regular file for reading, and hashing.
//! - [`tree`]: listing, `stat`, `mkdir`, delete and move (the HTTP file
//!   API).
//! - [`watch`]: watching a directory for changes (inotify).
//! - [`error`]: [`FileError`] and its typed [`Kind`], from which every
//!   front-end chooses its wire code (never from the message).
//! - `fetch` (feature `https-fetch`): an `https://` URL streamed into the
//!   same commit (`upload`'s `file`); async (the network) around a writer
//!   on the blocking pool.
//!
//! # Free of check-then-use races
//! A path is resolved exactly once, to a [`place::Place`]: the `O_PATH`
//! descriptor of its parent directory (opened beneath an allowed root with
//! `openat2(RESOLVE_BENEATH)` under a policy) and the final name. Every
//! later step is an `*at` call on that descriptor, and the final component
//! is never followed when it is a symlink (`O_NOFOLLOW`, `AT_SYMLINK_NOFOLLOW`,
//! and `rename`, which replaces a link rather than its target) — unless a
//! front-end asks [`place::Place::through_link`], which has the kernel follow it
//! and accepts only the object it reached. Only regular files are read or
//! replaced. All of it but `fetch` and [`transfer`] is blocking I/O:
//! callers run it on the file workers ([`transfer::blocking`]).
//!
//! # What it is not
//! Redaction covers process output only: files are read and written
//! exactly. It knows no wire: status codes, headers, `Range` syntax and
//! error shapes are each front-end's.

pub mod commit;
pub mod error;
#[cfg(feature = "https-fetch")]
pub mod fetch;
pub mod mode;
pub mod path;
pub mod place;
pub mod read;
pub mod transfer;
pub mod tree;
pub mod watch;

pub use error::{FileError, Kind};

/// A fresh directory for a unit test of this room, removed when dropped.
#[cfg(test)]
pub(crate) struct Scratch(pub std::path::PathBuf);

#[cfg(test)]
impl Scratch {
    pub(crate) fn new(tag: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!(
            "mcp-exec-files-{tag}-{}-{:x}",
            std::process::id(),
            crate::random::bits_128().unwrap_or_default()
        ));
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }

    /// The place of `name` in it, under no policy.
    pub(crate) fn place(&self, name: &str) -> place::Place {
        let policy = crate::policy::cwd::CwdPolicy::from_settings(None, None).unwrap();
        place::Place::resolve(&policy, &self.0.join(name), false).unwrap()
    }

    /// The names in it, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

#[cfg(test)]
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Lower-case hex of a digest.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A SHA-256 given as 64 hex digits (either case), or `None`.
pub fn parse_sha256(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// How big a read or write chunk is: big enough for throughput, small
/// enough that memory stays flat.
pub const CHUNK: usize = 256 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sha256_round_trips_through_hex_in_either_case() {
        let raw: [u8; 32] = std::array::from_fn(|i| (i * 7) as u8);
        assert_eq!(parse_sha256(&hex(&raw)), Some(raw));
        assert_eq!(parse_sha256(&hex(&raw).to_uppercase()), Some(raw));
        assert_eq!(parse_sha256("abc"), None);
        assert_eq!(parse_sha256(&"zz".repeat(32)), None);
    }
}
