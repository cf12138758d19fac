//! The atomic write (docs/files.md), shared by `upload`, `PUT /files`,
//! sandboxd's `PUT /v1/files` and envd's `POST /files`.
//!
//! 1. A temporary file beside the target (`.<name>.<random>.mcp-exec-tmp`,
//!    `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600), through the parent's
//!    descriptor.
//! 2. The bytes are written by [`Staged::append`] while the caller hashes
//!    them (on another thread: [`super::transfer::receive()`]; beside the
//!    writes: `fetch`), or, for bytes already in memory, [`commit_bytes`]
//!    hashes them once and checks before anything is written.
//! 3. [`Staged::commit_hashed`]: `fsync`; the `sha256` verified when given; an
//!    existing regular file with the same bytes (and mode, when one is
//!    asked) leaves everything as it was (`unchanged`: a retry is
//!    idempotent, also with `overwrite:false`); otherwise owner and mode
//!    (kept from the file replaced, or the directory's owner as root and
//!    `mode`, default 0644, for a new one) with `fchown`/`fchmod`; `rename`
//!    into place (`RENAME_NOREPLACE` when `overwrite` is false); `fsync`
//!    of the directory.
//!
//! On any failure — a mismatch, `ENOSPC`, a client that went away — the
//! [`Staged`] is dropped, which unlinks the temporary file: nothing is left
//! and the destination was never touched. Two writers of one path each
//! rename a whole file of their own: the last rename wins, nothing is torn.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::error::{FileError, Kind};
use super::place::Place;
use super::read;

/// The mode of a new file when none is asked.
pub const DEFAULT_MODE: u32 = 0o644;

/// What to do at the commit.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// `mode`: set on the file (`None`: keep the replaced file's, or 0644).
    pub mode: Option<u32>,
    /// Whether an existing different file may be replaced.
    pub overwrite: bool,
}

/// The answer of `upload` and `PUT`: `{path, bytes, sha256, unchanged}`.
#[derive(Debug, Clone, Serialize)]
pub struct Committed {
    /// The path, as given.
    pub path: String,
    /// Bytes the file holds.
    pub bytes: u64,
    /// Their SHA-256, hex.
    pub sha256: String,
    /// Whether the file already held exactly these bytes (nothing written).
    pub unchanged: bool,
    /// Whether the file did not exist before (`201` over HTTP).
    #[serde(skip)]
    pub created: bool,
}

/// A temporary file being written; dropped uncommitted, it is removed.
pub struct Staged {
    place: Place,
    tmp: OsString,
    file: File,
    bytes: u64,
    committed: bool,
}

impl Staged {
    /// Creates the temporary file beside `place`.
    pub fn create(place: Place) -> Result<Staged, FileError> {
        place.not_a_root("written over")?;
        let mut tries = 0;
        loop {
            let tmp = temp_name(&place.name)?;
            let flags =
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            match rustix::fs::openat(&place.dir, &tmp, flags, Mode::from_raw_mode(0o600)) {
                Ok(fd) => {
                    return Ok(Staged {
                        place,
                        tmp,
                        file: File::from(fd),
                        bytes: 0,
                        committed: false,
                    });
                }
                Err(Errno::EXIST) if tries < 8 => tries += 1,
                Err(e) => return Err(FileError::errno(e, "writing", &place.path)),
            }
        }
    }

    /// Appends `buf`; the caller hashes the same bytes in the same order
    /// itself (on another thread, while this one writes, or beforehand)
    /// and commits with [`Staged::commit_hashed`].
    pub fn append(&mut self, buf: &[u8]) -> Result<(), FileError> {
        self.file
            .write_all(buf)
            .map_err(|e| FileError::io(&e, "writing", &self.place.path))?;
        self.bytes += buf.len() as u64;
        Ok(())
    }

    /// A second descriptor of the temporary file, to `fdatasync` what has
    /// been written so far while more is appended (the disk then works
    /// during the transfer instead of all at the commit's `fsync`).
    pub fn sync_handle(&self) -> Result<File, FileError> {
        self.file
            .try_clone()
            .map_err(|e| FileError::io(&e, "writing", &self.place.path))
    }

    /// Verifies and renames into place (see the module doc) the bytes that
    /// were [`Staged::append`]ed, `got` being their SHA-256.
    pub fn commit_hashed(
        mut self,
        got: [u8; 32],
        expected: Option<[u8; 32]>,
        opts: Options,
    ) -> Result<Committed, FileError> {
        self.file
            .sync_all()
            .map_err(|e| FileError::io(&e, "writing", &self.place.path))?;
        let (mut answer, existing) = match settle(&self.place, self.bytes, got, expected, opts)? {
            Settled::Unchanged(answer) => return Ok(answer),
            Settled::Write(answer, existing) => (answer, existing),
        };
        answer.created = existing.is_none();
        self.set_owner_and_mode(existing.as_ref(), opts.mode)?;
        self.rename(opts.overwrite)?;
        self.committed = true;
        sync_dir(&self.place);
        crate::metrics::transfer_bytes(false, self.bytes);
        Ok(answer)
    }

    fn set_owner_and_mode(
        &self,
        existing: Option<&rustix::fs::Stat>,
        mode: Option<u32>,
    ) -> Result<(), FileError> {
        let path = &self.place.path;
        let root = rustix::process::geteuid().is_root();
        let (owner, mode) = match existing {
            Some(st) => (
                Some((st.st_uid, st.st_gid)),
                mode.unwrap_or(st.st_mode & 0o7777),
            ),
            None => {
                // A new file as root belongs to its directory's owner (a job
                // running as that user can then change it).
                let owner = if root {
                    rustix::fs::fstat(&self.place.dir)
                        .ok()
                        .map(|d| (d.st_uid, d.st_gid))
                } else {
                    None
                };
                (owner, mode.unwrap_or(DEFAULT_MODE))
            }
        };
        if let Some((uid, gid)) = owner {
            // Only root may give a file away; as anyone else a replaced
            // file of another owner becomes ours (as with any editor).
            if root {
                // SAFETY-free: plain ids from a stat.
                let uid = rustix::fs::Uid::from_raw(uid);
                let gid = rustix::fs::Gid::from_raw(gid);
                rustix::fs::fchown(&self.file, Some(uid), Some(gid))
                    .map_err(|e| FileError::errno(e, "setting the owner of", path))?;
            }
        }
        // After the chown, which clears set-id bits.
        rustix::fs::fchmod(&self.file, Mode::from_raw_mode(mode))
            .map_err(|e| FileError::errno(e, "setting the mode of", path))
    }

    fn rename(&self, overwrite: bool) -> Result<(), FileError> {
        let (dir, path) = (&self.place.dir, &self.place.path);
        if overwrite {
            return rustix::fs::renameat(dir, &self.tmp, dir, &self.place.name)
                .map_err(|e| FileError::errno(e, "replacing", path));
        }
        match rustix::fs::renameat_with(
            dir,
            &self.tmp,
            dir,
            &self.place.name,
            RenameFlags::NOREPLACE,
        ) {
            Ok(()) => Ok(()),
            Err(Errno::EXIST) => Err(FileError::exists(path)),
            // A file system without RENAME_NOREPLACE: a hard link is never
            // made over an existing name either.
            Err(Errno::INVAL) => {
                match rustix::fs::linkat(dir, &self.tmp, dir, &self.place.name, AtFlags::empty()) {
                    Ok(()) => {
                        let _ = rustix::fs::unlinkat(dir, &self.tmp, AtFlags::empty());
                        Ok(())
                    }
                    Err(Errno::EXIST) => Err(FileError::exists(path)),
                    Err(e) => Err(FileError::errno(e, "creating", path)),
                }
            }
            Err(e) => Err(FileError::errno(e, "creating", path)),
        }
    }
}

/// What the checks of a commit found.
enum Settled {
    /// The file already holds these bytes: nothing is to be written.
    Unchanged(Committed),
    /// Write and rename; what is at the place now, if anything.
    Write(Committed, Option<rustix::fs::Stat>),
}

/// The checks of a commit, in their order: the `sha256` (a mismatch), then
/// what is at `place` now — not a regular file, already these `bytes`
/// (unchanged), a different file while `overwrite` is false (exists).
fn settle(
    place: &Place,
    bytes: u64,
    got: [u8; 32],
    expected: Option<[u8; 32]>,
    opts: Options,
) -> Result<Settled, FileError> {
    if let Some(expected) = expected
        && expected != got
    {
        return Err(FileError::new(
            Kind::Mismatch,
            format!(
                "sha256 mismatch: expected {}, got {}",
                super::hex(&expected),
                super::hex(&got)
            ),
        ));
    }
    let mut answer = Committed {
        path: place.path.display().to_string(),
        bytes,
        sha256: super::hex(&got),
        unchanged: false,
        created: false,
    };
    let existing = read::lstat(place)?;
    if let Some(st) = &existing {
        if !read::is_regular(st) {
            return Err(FileError::not_regular(&place.path));
        }
        if holds(place, st, bytes, &got, opts.mode)? {
            answer.unchanged = true;
            return Ok(Settled::Unchanged(answer));
        }
        if !opts.overwrite {
            return Err(FileError::exists(&place.path));
        }
    }
    Ok(Settled::Write(answer, existing))
}

/// `content`, whole in memory (`upload`'s), committed at `place`. It is
/// hashed once; the commit's checks ([`Staged::commit_hashed`]'s, in the same
/// order) run first, before anything is written — so a retry of the same
/// bytes costs a read, not a write — and again at the commit, with that
/// hash, in case the file changed meanwhile.
pub fn commit_bytes(
    place: Place,
    content: &[u8],
    expected: Option<[u8; 32]>,
    opts: Options,
) -> Result<Committed, FileError> {
    place.not_a_root("written over")?;
    let got: [u8; 32] = Sha256::digest(content).into();
    let bytes = content.len() as u64;
    if let Settled::Unchanged(answer) = settle(&place, bytes, got, expected, opts)? {
        return Ok(answer);
    }
    let mut staged = Staged::create(place)?;
    staged.append(content)?;
    staged.commit_hashed(got, expected, opts)
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = rustix::fs::unlinkat(&self.place.dir, &self.tmp, AtFlags::empty());
        }
    }
}

/// Whether the existing regular file `st` at `place` already holds these
/// bytes (and `mode`, when one is asked).
pub fn holds(
    place: &Place,
    st: &rustix::fs::Stat,
    bytes: u64,
    sha: &[u8; 32],
    mode: Option<u32>,
) -> Result<bool, FileError> {
    if u64::try_from(st.st_size).ok() != Some(bytes)
        || mode.is_some_and(|m| m != st.st_mode & 0o7777)
    {
        return Ok(false);
    }
    let mut opened = match read::open(place) {
        Ok(o) => o,
        // Unreadable or gone: not known to be the same.
        Err(_) => return Ok(false),
    };
    Ok(read::sha256_of(&mut opened.file, place)? == *sha)
}

/// `fsync` of the directory, so that the rename survives a crash. A
/// directory that cannot be synced (some file systems refuse) is not an
/// error: the rename itself has happened.
fn sync_dir(place: &Place) {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    if let Ok(fd) = rustix::fs::openat(&place.dir, ".", flags, Mode::empty()) {
        let _ = rustix::fs::fsync(&fd);
    }
}

/// Whether `name` is one of [`temp_name`]'s (a file being written): the
/// envd watchers leave them out, so that a write shows as its final name.
pub fn is_temp_name(name: &std::ffi::OsStr) -> bool {
    let b = name.as_bytes();
    let Some(rest) = b.strip_suffix(b".mcp-exec-tmp") else {
        return false;
    };
    rest.len() > 18
        && rest[0] == b'.'
        && rest[rest.len() - 17] == b'.'
        && rest[rest.len() - 16..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

/// `.<name>.<16 hex digits>.mcp-exec-tmp` (a dot file: hidden from `ls`).
fn temp_name(name: &std::ffi::OsStr) -> Result<OsString, FileError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // Random where the kernel gives it; a process-wide counter makes the
    // name unique within this server even where it does not.
    let mut raw = COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes();
    let mut random = [0u8; 8];
    let _ = rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::NONBLOCK);
    for (r, x) in raw.iter_mut().zip(random) {
        *r ^= x;
    }
    // Long names are cut so that the temporary name stays under NAME_MAX.
    let bytes = name.as_bytes();
    let keep = &bytes[..bytes.len().min(200)];
    let mut out = Vec::with_capacity(keep.len() + 40);
    out.push(b'.');
    out.extend_from_slice(keep);
    out.push(b'.');
    out.extend_from_slice(super::hex(&raw).as_bytes());
    out.extend_from_slice(b".mcp-exec-tmp");
    Ok(std::os::unix::ffi::OsStringExt::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_recognised_and_nothing_else() {
        let t = temp_name(std::ffi::OsStr::new("a.txt")).unwrap();
        assert!(is_temp_name(&t), "{t:?}");
        assert!(!is_temp_name(std::ffi::OsStr::new("a.txt")));
        assert!(!is_temp_name(std::ffi::OsStr::new(".mcp-exec-tmp")));
        assert!(!is_temp_name(std::ffi::OsStr::new(
            ".a.zzzzzzzzzzzzzzzz.mcp-exec-tmp"
        )));
    }

    fn opts(overwrite: bool) -> Options {
        Options {
            mode: None,
            overwrite,
        }
    }

    fn sha(bytes: &[u8]) -> [u8; 32] {
        Sha256::digest(bytes).into()
    }

    #[test]
    fn bytes_in_memory_are_committed_and_the_same_bytes_again_leave_the_file_untouched() {
        use std::os::unix::fs::MetadataExt;
        let s = crate::files::Scratch::new("bytes");
        let done = commit_bytes(s.place("f"), b"hello", Some(sha(b"hello")), opts(true)).unwrap();
        assert!(done.created && !done.unchanged);
        assert_eq!(
            (done.bytes, done.sha256.clone()),
            (5, super::super::hex(&sha(b"hello")))
        );
        let ino = std::fs::metadata(s.0.join("f")).unwrap().ino();
        let again = commit_bytes(s.place("f"), b"hello", None, opts(false)).unwrap();
        assert!(again.unchanged && !again.created);
        assert_eq!(std::fs::metadata(s.0.join("f")).unwrap().ino(), ino);
        assert_eq!(s.names(), ["f"]);
    }

    #[test]
    fn bytes_in_memory_are_refused_in_the_commits_order_before_anything_is_written() {
        let s = crate::files::Scratch::new("refused");
        std::fs::write(s.0.join("f"), b"old").unwrap();
        std::os::unix::fs::symlink("f", s.0.join("l")).unwrap();
        // A mismatch comes first, even where the place is no regular file.
        let e = commit_bytes(s.place("l"), b"new", Some(sha(b"other")), opts(true)).unwrap_err();
        assert_eq!(e.kind, Kind::Mismatch, "{e}");
        assert!(e.message.starts_with("sha256 mismatch: expected "), "{e}");
        let e = commit_bytes(s.place("l"), b"new", None, opts(true)).unwrap_err();
        assert_eq!(e.kind, Kind::NotRegular, "{e}");
        let e = commit_bytes(s.place("f"), b"new", Some(sha(b"new")), opts(false)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{:?} exists and overwrite is false", s.0.join("f"))
        );
        assert_eq!(std::fs::read(s.0.join("f")).unwrap(), b"old");
        assert_eq!(s.names(), ["f", "l"], "no temporary file is left");
        let done = commit_bytes(s.place("f"), b"new", None, opts(true)).unwrap();
        assert!(!done.created && !done.unchanged);
        assert_eq!(std::fs::read(s.0.join("f")).unwrap(), b"new");
    }
}
