//! A file path resolved once: its parent directory's descriptor and its
//! final name (see the module doc of [`crate::files`]).
//!
//! A top of what may be touched — `/` without a policy, an allowed root
//! under one, whose parent is outside it — resolves to itself (the
//! directory, and `.`), marked [`Place::root`]: it can be listed, stat'ed,
//! read as a directory, never deleted, moved, replaced or written over.
//!
//! A front-end that reads and writes *through* a final symlink (sandboxd
//! does) asks [`Place::through_link`]: the kernel follows the link once, from
//! the parent's descriptor, and what it reached is placed again under the
//! same policy and accepted only if it is the very object the link led to
//! (device and inode) — never a check of one path and a use of another.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::error::{FileError, Kind};
use crate::policy::cwd::{CwdPolicy, DirRefusal};

/// A directory opened only to be resolved from.
const DIR_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NOFOLLOW);

/// Where a file path lives.
#[derive(Debug)]
pub struct Place {
    /// The parent directory (`O_PATH`), resolved under the policy.
    pub dir: OwnedFd,
    /// The final component; `.` for `/` itself.
    pub name: OsString,
    /// The path as the client gave it (normalised), for messages.
    pub path: PathBuf,
    /// It is `/` or an allowed root: `dir` is the directory itself and
    /// `name` is `.` (module doc).
    pub root: bool,
}

impl Place {
    /// For an allowed root (whose `name` is `.`), the name its entry is
    /// listed under: the last component of its path (`/` for `/` itself).
    /// `None` for any other place, whose entry takes `name`.
    #[must_use]
    pub fn entry_name(&self) -> Option<String> {
        self.root.then(|| {
            self.path
                .file_name()
                .map_or_else(|| "/".into(), |n| n.to_string_lossy().into_owned())
        })
    }

    /// Resolves the absolute, normalised `path` (see [`super::path`]):
    /// opens its parent under `policy`. With `mkdirs`, missing parents are
    /// created first (mode 0755), each one beneath the last through its
    /// descriptor, never followed if a symlink appears there meanwhile.
    pub fn resolve(policy: &CwdPolicy, path: &Path, mkdirs: bool) -> Result<Place, FileError> {
        let (parent, name, root) = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => (parent, name.to_owned(), false),
            _ => (Path::new("/"), OsString::from("."), true),
        };
        let dir = match policy.open_file_dir(parent) {
            Ok(fd) => fd,
            Err(DirRefusal::Outside) => match policy.open_root(path) {
                Some(dir) => {
                    return Ok(Place {
                        dir,
                        name: OsString::from("."),
                        path: path.to_owned(),
                        root: true,
                    });
                }
                None => return Err(outside(policy, path)),
            },
            Err(DirRefusal::Errno(Errno::NOENT)) if mkdirs => make_parents(policy, path, parent)?,
            Err(DirRefusal::Errno(e)) => return Err(parent_error(e, path, parent)),
        };
        Ok(Place {
            dir,
            name,
            path: path.to_owned(),
            root,
        })
    }

    /// Where the final component leads when it is a symlink: `self` when it
    /// is none (or does not exist); otherwise the link (and any chain of
    /// them) is followed by the kernel once, from [`Place::dir`] (`O_PATH`),
    /// and the object reached is placed again, by the path the kernel gives
    /// its descriptor, under `policy`: outside it is [`Kind::Outside`], a
    /// dangling link [`Kind::NotFound`], and a link or target swapped
    /// meanwhile (a different device or inode there) [`Kind::Io`].
    pub fn through_link(self, policy: &CwdPolicy) -> Result<Place, FileError> {
        match rustix::fs::statat(&self.dir, &self.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {}
            _ => return Ok(self),
        }
        let flags = OFlags::PATH | OFlags::CLOEXEC;
        let reached = rustix::fs::openat(&self.dir, &self.name, flags, Mode::empty())
            .map_err(|e| FileError::errno(e, "reading", &self.path))?;
        let seen =
            rustix::fs::fstat(&reached).map_err(|e| FileError::errno(e, "reading", &self.path))?;
        // The kernel's name of what the descriptor holds (not a lookup).
        let real = std::fs::read_link(format!("/proc/self/fd/{}", reached.as_raw_fd()))
            .map_err(|e| FileError::io(&e, "reading", &self.path))?;
        let place = Place::resolve(policy, &real, false)?;
        let same = rustix::fs::statat(&place.dir, &place.name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| (st.st_dev, st.st_ino) == (seen.st_dev, seen.st_ino));
        if !same {
            return Err(FileError::new(
                Kind::Io,
                format!(
                    "{:?} changed while its symbolic link was followed; try again",
                    self.path
                ),
            ));
        }
        Ok(place)
    }

    /// Refuses `doing` (`deleted`, `moved`, …) to a [`Place::root`], saying
    /// why: `"/workspace" is an allowed root directory: it cannot be deleted`.
    pub fn not_a_root(&self, doing: &str) -> Result<(), FileError> {
        if !self.root {
            return Ok(());
        }
        let what = if self.path == Path::new("/") {
            "the file system's root"
        } else {
            "an allowed root directory (MCP_EXEC_ALLOWED_CWDS)"
        };
        Err(FileError::new(
            Kind::Root,
            format!("{:?} is {what}: it cannot be {doing}", self.path),
        ))
    }
}

fn outside(policy: &CwdPolicy, path: &Path) -> FileError {
    FileError::new(Kind::Outside, policy.outside_text("path", path))
}

/// The parent of `path` could not be opened.
fn parent_error(e: Errno, path: &Path, parent: &Path) -> FileError {
    match e {
        Errno::NOENT => FileError::new(
            Kind::NotFound,
            format!("{path:?}: the directory {parent:?} does not exist (mkdirs creates it)"),
        ),
        Errno::NOTDIR | Errno::LOOP => FileError::new(
            Kind::NotDirectory,
            format!("{path:?}: {parent:?} is not a directory"),
        ),
        e => FileError::errno(e, "opening the directory of", path),
    }
}

/// Opens the deepest existing ancestor of `parent` under the policy and
/// creates the rest beneath it, one component at a time.
fn make_parents(policy: &CwdPolicy, path: &Path, parent: &Path) -> Result<OwnedFd, FileError> {
    let mut missing: Vec<&std::ffi::OsStr> = Vec::new();
    let mut at = parent;
    let mut dir = loop {
        match at.file_name() {
            Some(name) => missing.push(name),
            None => break open_ancestor(policy, path, at)?,
        }
        at = at.parent().unwrap_or(Path::new("/"));
        match policy.open_file_dir(at) {
            Ok(fd) => break fd,
            Err(DirRefusal::Outside) => return Err(outside(policy, path)),
            Err(DirRefusal::Errno(Errno::NOENT)) => {}
            Err(DirRefusal::Errno(e)) => return Err(parent_error(e, path, at)),
        }
    };
    for name in missing.into_iter().rev() {
        match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(FileError::errno(e, "creating the directories of", path)),
        }
        dir = rustix::fs::openat(dir.as_fd(), name, DIR_FLAGS, Mode::empty())
            .map_err(|e| parent_error(e, path, parent))?;
    }
    Ok(dir)
}

fn open_ancestor(policy: &CwdPolicy, path: &Path, at: &Path) -> Result<OwnedFd, FileError> {
    match policy.open_file_dir(at) {
        Ok(fd) => Ok(fd),
        Err(DirRefusal::Outside) => Err(outside(policy, path)),
        Err(DirRefusal::Errno(e)) => Err(parent_error(e, path, at)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::Scratch;

    #[test]
    fn a_path_outside_the_allowed_directories_is_of_the_outside_kind() {
        let s = Scratch::new("outside");
        let root = s.0.join("root");
        std::fs::create_dir(&root).unwrap();
        let policy = CwdPolicy::from_settings(root.to_str(), root.to_str()).unwrap();
        let e = Place::resolve(&policy, &s.0.join("x"), false).unwrap_err();
        assert_eq!(e.kind, Kind::Outside, "{e}");
        let e = Place::resolve(&policy, &s.0.join("a/b"), true).unwrap_err();
        assert_eq!(e.kind, Kind::Outside, "{e}");
        assert!(Place::resolve(&policy, &root.join("x"), false).is_ok());
    }

    #[test]
    fn an_allowed_root_is_of_the_root_kind_when_it_would_be_changed() {
        let s = Scratch::new("root");
        let policy = CwdPolicy::from_settings(s.0.to_str(), s.0.to_str()).unwrap();
        let root = Place::resolve(&policy, &s.0, false).unwrap();
        assert!(root.root);
        assert_eq!(root.not_a_root("deleted").unwrap_err().kind, Kind::Root);
        let inside = Place::resolve(&policy, &s.0.join("x"), false).unwrap();
        assert_eq!(inside.not_a_root("deleted"), Ok(()));
    }

    #[test]
    fn a_missing_parent_is_not_found_and_a_file_as_parent_is_not_a_directory() {
        let s = Scratch::new("parent");
        std::fs::write(s.0.join("f"), b"x").unwrap();
        let policy = CwdPolicy::from_settings(None, None).unwrap();
        let e = Place::resolve(&policy, &s.0.join("no/x"), false).unwrap_err();
        assert_eq!(e.kind, Kind::NotFound, "{e}");
        let e = Place::resolve(&policy, &s.0.join("f/x"), false).unwrap_err();
        assert_eq!(e.kind, Kind::NotDirectory, "{e}");
    }

    #[test]
    fn a_final_symlink_is_followed_to_its_target_and_never_out_of_the_policy() {
        let s = Scratch::new("follow");
        let root = s.0.join("root");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(root.join("d/t"), b"x").unwrap();
        std::fs::write(s.0.join("secret"), b"s").unwrap();
        std::os::unix::fs::symlink("d/t", root.join("rel")).unwrap();
        std::os::unix::fs::symlink("rel", root.join("chain")).unwrap();
        std::os::unix::fs::symlink(s.0.join("secret"), root.join("out")).unwrap();
        std::os::unix::fs::symlink("nothing", root.join("dangling")).unwrap();
        let policy = CwdPolicy::from_settings(root.to_str(), root.to_str()).unwrap();
        let through =
            |name: &str| Place::resolve(&policy, &root.join(name), false)?.through_link(&policy);
        let real = std::fs::canonicalize(root.join("d/t")).unwrap();
        assert_eq!(through("rel").unwrap().path, real);
        assert_eq!(through("chain").unwrap().path, real);
        assert_eq!(through("d/t").unwrap().path, root.join("d/t"));
        assert_eq!(through("new").unwrap().path, root.join("new"));
        assert_eq!(through("out").unwrap_err().kind, Kind::Outside);
        assert_eq!(through("dangling").unwrap_err().kind, Kind::NotFound);
    }
}
