//! The file API over HTTP (docs/files.md): listing, `stat`, `mkdir`, delete
//! and move, each through descriptors from a [`Place`].
//!
//! Entries are `{name, type: file|dir|symlink|other, size, mode: "0644",
//! mtime: RFC 3339, target?}`: `lstat` (a symlink is not followed; its
//! `target` is given).

use std::collections::BinaryHeap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, RenameFlags, Stat};
use rustix::io::Errno;
use serde::Serialize;

use super::error::{FileError, Kind};
use super::place::Place;

/// Entries a listing gives when no `limit` is asked.
pub const DEFAULT_LIMIT: usize = 1000;
/// The most entries one listing gives.
pub const MAX_LIMIT: usize = 10_000;
/// How deep a recursive delete goes.
const MAX_DEPTH: usize = 256;

/// One entry of a listing, or the answer of `?stat`.
#[derive(Debug, Serialize)]
pub struct Entry {
    /// The final component (lossy UTF-8).
    pub name: String,
    /// `file`, `dir`, `symlink` or `other`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Size in bytes (`st_size`).
    pub size: u64,
    /// Permission bits, four octal digits (`"0644"`).
    pub mode: String,
    /// Last modification, RFC 3339 (UTC, seconds).
    pub mtime: String,
    /// A symlink's target, as stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// A page of a directory: `{entries, next?}` (`next`: the `after` of the
/// next page, when there is one).
#[derive(Debug, Serialize)]
pub struct Listing {
    /// The entries, sorted by name (bytewise).
    pub entries: Vec<Entry>,
    /// Present when more entries follow: pass it as `after`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

fn kind_of(st: &Stat) -> &'static str {
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => "file",
        FileType::Directory => "dir",
        FileType::Symlink => "symlink",
        _ => "other",
    }
}

/// Whether a stat is of a directory.
pub fn is_dir(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::Directory
}

fn entry(dir: impl AsFd, name: &OsStr, st: &Stat) -> Entry {
    let target = (FileType::from_raw_mode(st.st_mode) == FileType::Symlink)
        .then(|| rustix::fs::readlinkat(dir, name, Vec::new()).ok())
        .flatten()
        .map(|t| String::from_utf8_lossy(t.as_bytes()).into_owned());
    let secs = u64::try_from(st.st_mtime).unwrap_or(0);
    Entry {
        name: name.to_string_lossy().into_owned(),
        kind: kind_of(st),
        size: u64::try_from(st.st_size).unwrap_or(0),
        mode: format!("{:04o}", st.st_mode & 0o7777),
        mtime: humantime::format_rfc3339_seconds(
            SystemTime::UNIX_EPOCH + Duration::from_secs(secs),
        )
        .to_string(),
        target,
    }
}

/// `?stat`: the entry of `place` itself (not followed).
pub fn stat(place: &Place) -> Result<Entry, FileError> {
    let st = rustix::fs::statat(&place.dir, &place.name, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| FileError::errno(e, "reading", &place.path))?;
    let mut e = entry(&place.dir, &place.name, &st);
    if let Some(name) = place.entry_name() {
        e.name = name;
    }
    Ok(e)
}

/// Opens the directory at `place` for reading its entries (a symlink is
/// not followed).
fn open_dir(place: &Place) -> Result<OwnedFd, FileError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::openat(&place.dir, &place.name, flags, Mode::empty()).map_err(|e| match e {
        Errno::NOTDIR | Errno::LOOP => FileError::new(
            Kind::NotDirectory,
            format!("{:?} is not a directory", place.path),
        ),
        e => FileError::errno(e, "listing", &place.path),
    })
}

/// A page of the directory at `place`: the first `limit` names after
/// `after`, in byte order. Memory is bounded by `limit`, not by the
/// directory: the smallest names are kept in a heap as the directory is
/// read.
pub fn list(place: &Place, limit: usize, after: Option<&OsStr>) -> Result<Listing, FileError> {
    let limit = limit.clamp(1, MAX_LIMIT);
    let fd = open_dir(place)?;
    let mut dir = Dir::new(
        fd.try_clone()
            .map_err(|e| FileError::io(&e, "listing", &place.path))?,
    )
    .map_err(|e| FileError::errno(e, "listing", &place.path))?;
    // The `limit + 1` smallest names (one more tells whether a page follows).
    let mut smallest: BinaryHeap<Vec<u8>> = BinaryHeap::new();
    while let Some(next) = dir.read() {
        let dirent = next.map_err(|e| FileError::errno(e, "listing", &place.path))?;
        let name = dirent.file_name().to_bytes();
        if name == b"." || name == b".." || after.is_some_and(|a| name <= a.as_bytes()) {
            continue;
        }
        if smallest.len() <= limit {
            smallest.push(name.to_vec());
        } else if smallest.peek().is_some_and(|top| name < top.as_slice()) {
            smallest.pop();
            smallest.push(name.to_vec());
        }
    }
    let mut names = smallest.into_sorted_vec();
    let more = names.len() > limit;
    names.truncate(limit);
    let mut entries = Vec::with_capacity(names.len());
    for name in &names {
        let name = OsStr::from_bytes(name);
        // Gone since it was read: left out.
        if let Ok(st) = rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            entries.push(entry(&fd, name, &st));
        }
    }
    let next = more
        .then(|| {
            names
                .last()
                .map(|n| String::from_utf8_lossy(n).into_owned())
        })
        .flatten();
    Ok(Listing { entries, next })
}

/// `POST ?mkdir`: creates the directory (its parents were made by
/// [`Place::resolve`] when asked). An existing directory is `409` unless
/// `parents` (then it is what `mkdir -p` leaves, and fine).
pub fn mkdir(place: &Place, parents: bool) -> Result<Entry, FileError> {
    match rustix::fs::mkdirat(&place.dir, &place.name, Mode::from_raw_mode(0o755)) {
        Ok(()) => {}
        Err(Errno::EXIST) if parents => {
            let st = rustix::fs::statat(&place.dir, &place.name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| FileError::errno(e, "creating", &place.path))?;
            if !is_dir(&st) {
                return Err(FileError::new(
                    Kind::Exists,
                    format!("{:?} exists and is not a directory", place.path),
                ));
            }
        }
        Err(Errno::EXIST) => {
            return Err(FileError::new(
                Kind::Exists,
                format!("{:?} already exists", place.path),
            ));
        }
        Err(e) => return Err(FileError::errno(e, "creating", &place.path)),
    }
    stat(place)
}

/// `DELETE`: a file, symlink or other entry is unlinked; a directory only
/// with `recursive` (then everything beneath it, never following a
/// symlink).
pub fn delete(place: &Place, recursive: bool) -> Result<(), FileError> {
    place.not_a_root("deleted")?;
    let st = rustix::fs::statat(&place.dir, &place.name, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| FileError::errno(e, "deleting", &place.path))?;
    if !is_dir(&st) {
        return rustix::fs::unlinkat(&place.dir, &place.name, AtFlags::empty())
            .map_err(|e| FileError::errno(e, "deleting", &place.path));
    }
    if !recursive {
        return Err(FileError::new(
            Kind::IsDirectory,
            format!(
                "{:?} is a directory (delete it with ?recursive)",
                place.path
            ),
        ));
    }
    remove_tree(&place.dir, &place.name, &place.path, 0)
}

/// sandboxd's `DELETE` (`os.Remove` / `os.RemoveAll`): a file, symlink or
/// other entry is unlinked (a symlink itself, never its target); a
/// directory is removed when empty, with everything beneath it when
/// `recursive`, and is `409` ("not empty") otherwise. A root (the sandbox
/// root) is never removed: `recursive` empties it, as sandboxd does, and
/// without it the answer is `409`.
pub fn remove(place: &Place, recursive: bool) -> Result<(), FileError> {
    if place.root {
        if !recursive {
            return Err(FileError::new(
                Kind::Root,
                format!(
                    "{:?} is the root: it cannot be deleted (recursive=true empties it)",
                    place.path
                ),
            ));
        }
        let fd = open_dir(place)?;
        return empty_tree(&fd, &place.path, 0);
    }
    let st = rustix::fs::statat(&place.dir, &place.name, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| FileError::errno(e, "deleting", &place.path))?;
    if !is_dir(&st) {
        return rustix::fs::unlinkat(&place.dir, &place.name, AtFlags::empty())
            .map_err(|e| FileError::errno(e, "deleting", &place.path));
    }
    if recursive {
        return remove_tree(&place.dir, &place.name, &place.path, 0);
    }
    rustix::fs::unlinkat(&place.dir, &place.name, AtFlags::REMOVEDIR).map_err(|e| match e {
        Errno::NOTEMPTY | Errno::EXIST => FileError::new(
            Kind::NotEmpty,
            format!(
                "{:?} is a directory that is not empty (recursive=true removes it)",
                place.path
            ),
        ),
        e => FileError::errno(e, "deleting", &place.path),
    })
}

/// Removes the directory `name` in `parent` and everything beneath it.
fn remove_tree(parent: &OwnedFd, name: &OsStr, path: &Path, depth: usize) -> Result<(), FileError> {
    if depth >= MAX_DEPTH {
        return Err(FileError::new(
            Kind::TooDeep,
            format!("{path:?} is nested more than {MAX_DEPTH} directories deep"),
        ));
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(parent, name, flags, Mode::empty())
        .map_err(|e| FileError::errno(e, "deleting", path))?;
    empty_tree(&fd, path, depth)?;
    rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR)
        .map_err(|e| FileError::errno(e, "deleting", path))
}

/// Removes everything beneath the open directory `fd` (at `path`), never
/// following a symlink.
fn empty_tree(fd: &OwnedFd, path: &Path, depth: usize) -> Result<(), FileError> {
    loop {
        // A batch of names, then their removal: removing while reading may
        // skip entries, so each batch reads the directory afresh. Every
        // removal either succeeds or ends the delete, so this ends.
        let mut batch: Vec<(OsString, bool)> = Vec::new();
        let mut dir = Dir::new(
            fd.try_clone()
                .map_err(|e| FileError::io(&e, "deleting", path))?,
        )
        .map_err(|e| FileError::errno(e, "deleting", path))?;
        while let Some(next) = dir.read() {
            let dirent = next.map_err(|e| FileError::errno(e, "deleting", path))?;
            let n = dirent.file_name().to_bytes();
            if n == b"." || n == b".." {
                continue;
            }
            let is_dir = match dirent.file_type() {
                FileType::Directory => true,
                FileType::Unknown => {
                    rustix::fs::statat(fd, dirent.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok_and(|st| is_dir(&st))
                }
                _ => false,
            };
            batch.push((OsString::from_vec(n.to_vec()), is_dir));
            if batch.len() >= 256 {
                break;
            }
        }
        drop(dir);
        if batch.is_empty() {
            break;
        }
        for (n, is_dir) in batch {
            let inner = path.join(&n);
            if is_dir {
                remove_tree(fd, &n, &inner, depth + 1)?;
            } else {
                rustix::fs::unlinkat(fd, &n, AtFlags::empty())
                    .map_err(|e| FileError::errno(e, "deleting", &inner))?;
            }
        }
    }
    Ok(())
}

/// `POST ?move=<dest>`: an atomic rename; an existing destination is
/// replaced only with `overwrite` (`RENAME_NOREPLACE` otherwise).
pub fn rename(from: &Place, to: &Place, overwrite: bool) -> Result<(), FileError> {
    from.not_a_root("moved")?;
    to.not_a_root("replaced")?;
    let flags = if overwrite {
        RenameFlags::empty()
    } else {
        RenameFlags::NOREPLACE
    };
    rustix::fs::renameat_with(&from.dir, &from.name, &to.dir, &to.name, flags).map_err(
        |e| match e {
            Errno::EXIST => FileError::new(
                Kind::Exists,
                format!("{:?} exists (move with &overwrite to replace it)", to.path),
            ),
            Errno::XDEV => FileError::new(
                Kind::CrossDevice,
                format!(
                    "{:?} and {:?} are on different file systems (not atomic: copy instead)",
                    from.path, to.path
                ),
            ),
            Errno::NOTEMPTY => {
                FileError::new(Kind::NotEmpty, format!("{:?} is not empty", to.path))
            }
            e => FileError::errno(e, "moving", &from.path),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::Scratch;

    #[test]
    fn each_refusal_of_the_file_api_has_its_own_kind() {
        let s = Scratch::new("kinds");
        std::fs::create_dir_all(s.0.join("d/inner")).unwrap();
        std::fs::write(s.0.join("f"), b"x").unwrap();
        std::fs::write(s.0.join("g"), b"y").unwrap();
        let kind = |r: Result<(), FileError>| r.unwrap_err().kind;
        assert_eq!(kind(delete(&s.place("d"), false)), Kind::IsDirectory);
        assert_eq!(kind(remove(&s.place("d"), false)), Kind::NotEmpty);
        assert_eq!(
            kind(rename(&s.place("f"), &s.place("g"), false)),
            Kind::Exists
        );
        assert_eq!(
            kind(rename(&s.place("f"), &s.place("d"), true)),
            Kind::IsDirectory
        );
        assert_eq!(kind(mkdir(&s.place("f"), false).map(drop)), Kind::Exists);
        assert_eq!(
            kind(list(&s.place("f"), 10, None).map(drop)),
            Kind::NotDirectory
        );
        assert_eq!(kind(delete(&s.place("nothing"), false)), Kind::NotFound);
        // Nothing was changed by a refusal.
        assert_eq!(std::fs::read(s.0.join("g")).unwrap(), b"y");
        assert!(s.0.join("d/inner").is_dir());
    }
}
