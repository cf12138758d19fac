//! Reading a regular file through its [`Place`]: never a FIFO, device,
//! socket or symlink (opening a FIFO would block, a device could act).

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use sha2::{Digest, Sha256};

use super::CHUNK;
use super::error::FileError;
use super::place::Place;

/// An open regular file and its size when opened.
#[derive(Debug)]
pub struct Opened {
    /// The file, read-only.
    pub file: File,
    /// Its size in bytes.
    pub size: u64,
}

/// The `lstat` of the final component, or `None` when it does not exist.
pub fn lstat(place: &Place) -> Result<Option<Stat>, FileError> {
    match rustix::fs::statat(&place.dir, &place.name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(rustix::io::Errno::NOENT) => Ok(None),
        Err(e) => Err(FileError::errno(e, "reading", &place.path)),
    }
}

/// Whether a stat is of a regular file.
pub fn is_regular(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
}

/// Opens the regular file at `place` for reading: checked with `lstat`
/// first (so that a FIFO or device is never opened), opened with
/// `O_NOFOLLOW | O_NONBLOCK` (a FIFO swapped in meanwhile does not block
/// the open) and checked again on the descriptor.
pub fn open(place: &Place) -> Result<Opened, FileError> {
    let Some(st) = lstat(place)? else {
        return Err(FileError::errno(
            rustix::io::Errno::NOENT,
            "reading",
            &place.path,
        ));
    };
    if !is_regular(&st) {
        return Err(FileError::not_regular(&place.path));
    }
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&place.dir, &place.name, flags, Mode::empty()).map_err(|e| {
        if e == rustix::io::Errno::LOOP {
            FileError::not_regular(&place.path)
        } else {
            FileError::errno(e, "opening", &place.path)
        }
    })?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| FileError::errno(e, "reading", &place.path))?;
    if !is_regular(&stat) {
        return Err(FileError::not_regular(&place.path));
    }
    Ok(Opened {
        file: File::from(fd),
        size: u64::try_from(stat.st_size).unwrap_or(0),
    })
}

/// The SHA-256 of everything `file` holds from its current position.
pub fn sha256_of(file: &mut File, place: &Place) -> Result<[u8; 32], FileError> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FileError::io(&e, "reading", &place.path)),
        }
    }
    Ok(hasher.finalize().into())
}

/// Reads exactly `len` bytes at `offset` (fewer if the file shrank).
pub fn read_at(
    opened: &Opened,
    offset: u64,
    len: usize,
    place: &Place,
) -> Result<Vec<u8>, FileError> {
    let mut buf = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        match opened
            .file
            .read_at(&mut buf[filled..], offset + filled as u64)
        {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FileError::io(&e, "reading", &place.path)),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}
