//! The working-directory policy (docs/security.md): where a job may start.
//!
//! Built once at start-up from `MCP_EXEC_ALLOWED_CWDS` (colon-separated
//! absolute directories, the *roots*; unset or empty = anywhere) and
//! `MCP_EXEC_DEFAULT_CWD` (where a job starts when it names no `cwd`;
//! unset or empty = the server's own working directory). An invalid setting
//! is an `Err` naming the variable, and the server refuses to start (security
//! settings fail closed).
//!
//! # What it is
//! A guard on where jobs *start* (and where files are written):
//! a `cwd` is allowed when its realpath is one of the roots' realpaths or
//! beneath one. Anything else, a symlink inside a root that leads out
//! included, is refused with
//! `cwd "/etc" is outside the allowed directories (/workspace:/tmp)` (the
//! roots as configured). A path outside every root that merely *leads* into
//! one (`/home/me/ws` → `/workspace`) is allowed: the rule is about where
//! the job ends up, not how the path is spelled.
//!
//! # What it is not
//! Not a sandbox. A job can `cd /` as its first command, and every process
//! it starts sees the whole file system the container gives it. The
//! container is the sandbox; this policy keeps an agent's jobs *starting*
//! where the operator expects, so that a mistyped or injected `cwd` does not
//! run a build in `/etc`.
//!
//! # Free of check-then-use races
//! The roots are opened once, here, as `O_PATH` directory descriptors, and
//! their realpaths recorded. A `cwd` is canonicalised only to find the root
//! it lies under; the directory itself is then opened from that root's
//! descriptor with `openat2(root, rest, RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS)`, which the kernel refuses (`EXDEV`) if any step —
//! a `..`, or a symlink swapped in after the canonicalisation — would leave
//! the root. The job is then started through that descriptor
//! ([`init::Cwd::Dir`], `fchdir` in the child), never through the path
//! again. `openat2` needs Linux 5.6; with a policy set and no `openat2`
//! (an older kernel, or a seccomp profile that refuses it) the server does
//! not start.
//!
//! # Relative `cwd`s
//! A relative `cwd` is relative to the default working directory
//! (`MCP_EXEC_DEFAULT_CWD`, else the server's own), and messages show it
//! joined to that directory. Without a policy or a default this is exactly
//! what the spawn did before (a relative `chdir` from the server's
//! directory), and the path is passed on unchanged.
//!
//! # Without a policy
//! [`CwdPolicy::resolve`] returns what the spawn always did:
//! [`init::Cwd::Inherit`] or [`init::Cwd::Path`], whose errors are the spawn's
//! own (`chdir /x: no such file or directory`).

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use init::Cwd;
use rustix::fs::{Mode, OFlags, ResolveFlags};

/// The variable that lists the allowed roots.
const ALLOWED: &str = "MCP_EXEC_ALLOWED_CWDS";
/// The variable that names the default working directory.
const DEFAULT: &str = "MCP_EXEC_DEFAULT_CWD";

/// How `openat2` may resolve a path beneath a root: never out of it (by
/// `..`, an absolute symlink or a relative one that climbs out), and never
/// through a `/proc` magic link, which would jump anywhere.
const BENEATH: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);
/// A directory opened only to be changed to or resolved from.
const DIR_FLAGS: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);
/// How often an `openat2` that raced a rename (`EAGAIN`) is retried.
const EAGAIN_RETRIES: usize = 8;

/// Where jobs may start, and where they start by default.
#[derive(Debug)]
pub struct CwdPolicy {
    /// The allowed roots; `None` = anywhere.
    roots: Option<Roots>,
    /// `MCP_EXEC_DEFAULT_CWD`, if set.
    default: Option<PathBuf>,
    /// What a relative `cwd` is relative to, and where a job without one
    /// starts under a policy: the default, else the server's directory.
    base: PathBuf,
}

/// The allowed roots.
#[derive(Debug)]
struct Roots {
    list: Vec<Root>,
    /// `MCP_EXEC_ALLOWED_CWDS` as configured, for the refusal text.
    text: String,
}

/// One allowed directory.
#[derive(Debug)]
struct Root {
    /// As configured.
    configured: PathBuf,
    /// Its realpath when it was opened.
    real: PathBuf,
    /// The directory itself (`O_PATH`).
    fd: OwnedFd,
}

impl CwdPolicy {
    /// The policy from `MCP_EXEC_ALLOWED_CWDS` (`allowed`) and
    /// `MCP_EXEC_DEFAULT_CWD` (`default_cwd`); `None` and `""` both mean
    /// unset.
    ///
    /// Errors, each naming its variable: a root that is empty (`/a::/b`),
    /// relative, missing or not a directory; `openat2` unavailable while
    /// roots are set; a default that is relative, missing, not a directory,
    /// or (with roots) outside them — also when it is unset and the server's
    /// own directory is outside them.
    pub fn from_settings(
        allowed: Option<&str>,
        default_cwd: Option<&str>,
    ) -> Result<CwdPolicy, String> {
        let roots = match allowed.filter(|s| !s.is_empty()) {
            None => None,
            Some(text) => Some(Roots::open(text)?),
        };
        let default = match default_cwd.filter(|s| !s.is_empty()) {
            None => None,
            Some(d) => {
                let d = PathBuf::from(d);
                if !d.is_absolute() {
                    return Err(format!("{DEFAULT}: {d:?} is not an absolute path"));
                }
                Some(d)
            }
        };
        let base = match &default {
            Some(d) => d.clone(),
            None => std::env::current_dir()
                .map_err(|e| format!("{DEFAULT}: the server's working directory: {e}"))?,
        };
        let policy = CwdPolicy {
            roots,
            default,
            base,
        };
        match (&policy.roots, &policy.default) {
            (Some(roots), Some(d)) => {
                roots
                    .open_dir(d)
                    .map_err(|why| format!("{DEFAULT}: {why}"))?;
            }
            (Some(roots), None) => {
                roots.open_dir(&policy.base).map_err(|why| {
                    format!(
                        "{DEFAULT} is unset, so jobs would start in the server's own working directory, which is not allowed: {why}"
                    )
                })?;
            }
            (None, Some(d)) => match std::fs::metadata(d) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(format!("{DEFAULT}: {d:?} is not a directory")),
                Err(e) => return Err(format!("{DEFAULT}: {d:?}: {}", init::errno_text(&e))),
            },
            (None, None) => {}
        }
        Ok(policy)
    }

    /// Where a job asked to start in `cwd` starts, or why it may not.
    ///
    /// Without roots: [`Cwd::Inherit`] (no `cwd` and no default) or
    /// [`Cwd::Path`], checked by the spawn as before. With roots: the
    /// directory opened beneath its root, as [`Cwd::Dir`]; a `cwd` outside
    /// every root is refused with `cwd "/etc" is outside the allowed
    /// directories (/workspace:/tmp)`, and one inside that cannot be opened
    /// gets the spawn's text, `chdir /workspace/nope: no such file or
    /// directory`. An empty `cwd` is no `cwd`.
    pub fn resolve(&self, cwd: Option<&str>) -> Result<Cwd, Refusal> {
        let cwd = cwd.filter(|s| !s.is_empty()).map(Path::new);
        let Some(roots) = &self.roots else {
            return Ok(match (cwd, &self.default) {
                (None, None) => Cwd::Inherit,
                (None, Some(d)) => Cwd::Path(d.clone()),
                (Some(c), Some(d)) if c.is_relative() => Cwd::Path(d.join(c)),
                (Some(c), _) => Cwd::Path(c.to_path_buf()),
            });
        };
        let path = match cwd {
            None => self.base.clone(),
            Some(c) => self.base.join(c),
        };
        roots.open_dir(&path).map(|fd| Cwd::Dir(Arc::new(fd)))
    }
}

/// Why the directory of a file path cannot be used (the same
/// policy applies to file paths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirRefusal {
    /// Outside every allowed root (see [`CwdPolicy::outside_text`]).
    Outside,
    /// Inside (or no policy), but the kernel refused it: `ENOENT`,
    /// `ENOTDIR`, `EACCES`, …
    Errno(rustix::io::Errno),
}

impl CwdPolicy {
    /// Opens the directory `dir` (absolute) for file operations, as an
    /// `O_PATH` descriptor: beneath its root with a policy (the same
    /// resolution as a `cwd`), by its path without one. Every later step
    /// uses only this descriptor (`*at` calls), so nothing is resolved
    /// twice.
    pub fn open_file_dir(&self, dir: &Path) -> Result<OwnedFd, DirRefusal> {
        match &self.roots {
            None => rustix::fs::open(dir, DIR_FLAGS, Mode::empty()).map_err(DirRefusal::Errno),
            Some(roots) => roots.open_dir_raw(dir),
        }
    }

    /// The directory of the allowed root that `path` (absolute, normalised)
    /// names, as configured or by its realpath: a root is resolved to
    /// itself, its own parent being outside the policy. `None` when `path`
    /// is no root, or without a policy (where `/` is the only top).
    pub fn open_root(&self, path: &Path) -> Option<OwnedFd> {
        let roots = self.roots.as_ref()?;
        let path = lexical(path);
        let root = roots
            .list
            .iter()
            .find(|root| path == lexical(&root.configured) || path == root.real)?;
        root.open_beneath(Path::new("")).ok()
    }

    /// `path "/etc/x" is outside the allowed directories (/workspace:/tmp)`
    /// (`what` names the kind of path, e.g. `path`).
    pub fn outside_text(&self, what: &str, path: &Path) -> String {
        let roots = self.roots.as_ref().map_or("", |r| r.text.as_str());
        format!("{what} {path:?} is outside the allowed directories ({roots})")
    }
}

/// Why a job may not start where it asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Outside every root: `cwd "/etc" is outside the allowed directories
    /// (/workspace:/tmp)` (the caller's request is refused).
    Outside(String),
    /// Inside a root, but not a usable directory: `chdir /workspace/nope: no
    /// such file or directory` (a start error of the job, as without a
    /// policy).
    Unusable(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Outside(s) | Refusal::Unusable(s) => f.write_str(s),
        }
    }
}

impl Roots {
    /// Opens every root of `text` (`MCP_EXEC_ALLOWED_CWDS`, not empty) and
    /// checks that `openat2` works.
    fn open(text: &str) -> Result<Roots, String> {
        let mut list = Vec::new();
        for entry in text.split(':') {
            if entry.is_empty() {
                return Err(format!("{ALLOWED}: empty entry in {text:?}"));
            }
            let configured = PathBuf::from(entry);
            if !configured.is_absolute() {
                return Err(format!("{ALLOWED}: {entry:?} is not an absolute path"));
            }
            let real = std::fs::canonicalize(&configured)
                .map_err(|e| format!("{ALLOWED}: {entry:?}: {}", init::errno_text(&e)))?;
            // NOFOLLOW: the realpath has no symlink left, so the descriptor
            // is of exactly the directory whose realpath is recorded (a
            // symlink swapped in since fails with ENOTDIR).
            let fd = rustix::fs::open(&real, DIR_FLAGS | OFlags::NOFOLLOW, Mode::empty())
                .map_err(|e| format!("{ALLOWED}: {entry:?}: {}", errno(e)))?;
            list.push(Root {
                configured,
                real,
                fd,
            });
        }
        if let Some(first) = list.first() {
            // ENOSYS before Linux 5.6; EPERM or ENOSYS from some seccomp
            // profiles. Either way no cwd could be resolved safely.
            first.open_beneath(Path::new("")).map_err(|e| {
                format!(
                    "{ALLOWED} needs openat2 (Linux 5.6 or later), which failed here: {}",
                    errno(e)
                )
            })?;
        }
        Ok(Roots {
            list,
            text: text.to_owned(),
        })
    }

    /// Opens the directory `path` (absolute) beneath the root its realpath
    /// lies under.
    fn open_dir(&self, path: &Path) -> Result<OwnedFd, Refusal> {
        self.open_dir_raw(path).map_err(|why| match why {
            DirRefusal::Outside => Refusal::Outside(self.outside(path)),
            DirRefusal::Errno(e) => Refusal::Unusable(chdir_error(path, &io::Error::from(e))),
        })
    }

    /// [`Roots::open_dir`] with the reason as data.
    fn open_dir_raw(&self, path: &Path) -> Result<OwnedFd, DirRefusal> {
        let real = match std::fs::canonicalize(path) {
            Ok(real) => real,
            // It does not resolve: say why if it names a place inside a
            // root, and say only "outside" otherwise (that it is missing
            // there is none of the caller's business).
            Err(e) if self.lexically_inside(path) => {
                return Err(DirRefusal::Errno(
                    rustix::io::Errno::from_io_error(&e).unwrap_or(rustix::io::Errno::NOENT),
                ));
            }
            Err(_) => return Err(DirRefusal::Outside),
        };
        let Some((root, rest)) = self
            .list
            .iter()
            .find_map(|root| Some((root, real.strip_prefix(&root.real).ok()?)))
        else {
            return Err(DirRefusal::Outside);
        };
        match root.open_beneath(rest) {
            Ok(fd) => Ok(fd),
            // Something under the root changed since the canonicalisation
            // and now leads out of it.
            Err(rustix::io::Errno::XDEV) => Err(DirRefusal::Outside),
            Err(e) => Err(DirRefusal::Errno(e)),
        }
    }

    /// Whether `path`, with `.` and `..` applied to its text, is a root (as
    /// configured or as its realpath) or beneath one. Only for choosing an
    /// error message: it ignores symlinks.
    fn lexically_inside(&self, path: &Path) -> bool {
        let path = lexical(path);
        self.list
            .iter()
            .any(|root| path.starts_with(lexical(&root.configured)) || path.starts_with(&root.real))
    }

    fn outside(&self, path: &Path) -> String {
        format!(
            "cwd {path:?} is outside the allowed directories ({})",
            self.text
        )
    }
}

impl Root {
    /// `openat2(root, rest, O_PATH | O_DIRECTORY | O_CLOEXEC,
    /// RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`; an empty `rest` is the
    /// root itself. `EAGAIN` (a concurrent rename the kernel could not rule
    /// out) is retried a few times.
    fn open_beneath(&self, rest: &Path) -> rustix::io::Result<OwnedFd> {
        let rest = if rest.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rest
        };
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(&self.fd, rest, DIR_FLAGS, Mode::empty(), BENEATH) {
                Err(rustix::io::Errno::AGAIN) if tries < EAGAIN_RETRIES => tries += 1,
                other => return other,
            }
        }
    }
}

/// `path` with `.` dropped and `..` applied to the text.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The spawn's own text for a directory it cannot change to.
fn chdir_error(path: &Path, e: &io::Error) -> String {
    init::SpawnError::Chdir {
        path: path.display().to_string(),
        reason: init::errno_text(e),
    }
    .to_string()
}

fn errno(e: rustix::io::Errno) -> String {
    init::errno_text(&io::Error::from(e))
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static N: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "mcp-exec-cwd-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("creating a temp dir");
            TempDir(dir)
        }

        /// `self/rel`, created as a directory.
        fn mkdir(&self, rel: &str) -> PathBuf {
            let p = self.0.join(rel);
            std::fs::create_dir_all(&p).expect("creating a directory");
            p
        }

        fn path(&self, rel: &str) -> String {
            self.0.join(rel).display().to_string()
        }

        fn text(&self) -> String {
            self.0.display().to_string()
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn policy(allowed: &str, default: &str) -> CwdPolicy {
        CwdPolicy::from_settings(Some(allowed), Some(default)).expect("a valid policy")
    }

    /// The directory a [`Cwd::Dir`] holds, as the kernel names it.
    fn dir_of(cwd: &Cwd) -> PathBuf {
        match cwd {
            Cwd::Dir(fd) => std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                .expect("reading the descriptor's path"),
            other => panic!("expected a directory descriptor, got {other:?}"),
        }
    }

    fn real(p: impl AsRef<Path>) -> PathBuf {
        std::fs::canonicalize(p).expect("canonicalising")
    }

    fn outside(cwd: &str, roots: &str) -> Refusal {
        Refusal::Outside(format!(
            "cwd {cwd:?} is outside the allowed directories ({roots})"
        ))
    }

    #[test]
    fn unset_or_empty_allows_anywhere_and_changes_nothing() {
        for allowed in [None, Some("")] {
            let p = CwdPolicy::from_settings(allowed, None).expect("no policy");
            assert!(matches!(p.resolve(None), Ok(Cwd::Inherit)));
            assert!(matches!(p.resolve(Some("")), Ok(Cwd::Inherit)));
            assert!(matches!(p.resolve(Some("/etc")), Ok(Cwd::Path(c)) if c == Path::new("/etc")));
            // Checked by the spawn, with its own text, as before.
            assert!(matches!(p.resolve(Some("/nonexistent")), Ok(Cwd::Path(_))));
            assert!(matches!(p.resolve(Some("rel")), Ok(Cwd::Path(c)) if c == Path::new("rel")));
        }
    }

    #[test]
    fn without_roots_a_default_is_where_jobs_start_and_what_relative_ones_are_relative_to() {
        let t = TempDir::new();
        let p = CwdPolicy::from_settings(None, Some(&t.text())).expect("a valid default");
        assert!(matches!(p.resolve(None), Ok(Cwd::Path(c)) if c == t.0));
        assert!(matches!(p.resolve(Some("sub")), Ok(Cwd::Path(c)) if c == t.0.join("sub")));
        assert!(matches!(p.resolve(Some("/etc")), Ok(Cwd::Path(c)) if c == Path::new("/etc")));
    }

    #[test]
    fn the_root_itself_is_allowed_and_opened() {
        let t = TempDir::new();
        let p = policy(&t.text(), &t.text());
        assert_eq!(
            dir_of(&p.resolve(Some(&t.text())).expect("allowed")),
            real(&t.0)
        );
        assert_eq!(dir_of(&p.resolve(None).expect("the default")), real(&t.0));
    }

    #[test]
    fn a_root_named_as_configured_or_by_its_realpath_opens_as_itself_and_nothing_else_does() {
        let t = TempDir::new();
        let root = t.mkdir("root");
        t.mkdir("root/sub");
        std::os::unix::fs::symlink(&root, t.0.join("link")).expect("a symlink");
        let p = policy(&t.path("link"), &t.path("link"));
        let dir = |fd: OwnedFd| {
            std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("its path")
        };
        for named in [t.path("link"), real(&root).display().to_string()] {
            let fd = p.open_root(Path::new(&named));
            assert_eq!(fd.map(dir), Some(real(&root)), "{named}");
        }
        for not_a_root in [t.path("link/sub"), t.text(), "/".to_owned()] {
            assert!(
                p.open_root(Path::new(&not_a_root)).is_none(),
                "{not_a_root}"
            );
        }
        let none = CwdPolicy::from_settings(None, None).expect("no policy");
        assert!(none.open_root(Path::new("/")).is_none());
    }

    #[test]
    fn a_subdirectory_of_a_root_is_allowed() {
        let t = TempDir::new();
        let sub = t.mkdir("a/b");
        let p = policy(&t.text(), &t.text());
        assert_eq!(
            dir_of(&p.resolve(Some(&t.path("a/b"))).expect("allowed")),
            real(sub)
        );
    }

    #[test]
    fn a_dotdot_escape_is_refused_with_the_outside_text() {
        let t = TempDir::new();
        t.mkdir("root/sub");
        let root = t.path("root");
        let p = policy(&root, &root);
        let escape = t.path("root/sub/../..");
        assert_eq!(
            p.resolve(Some(&escape)).unwrap_err(),
            outside(&escape, &root)
        );
        assert_eq!(p.resolve(Some("/etc")).unwrap_err(), outside("/etc", &root));
    }

    #[test]
    fn a_symlink_inside_a_root_that_leads_outside_is_refused() {
        let t = TempDir::new();
        t.mkdir("root");
        t.mkdir("elsewhere");
        std::os::unix::fs::symlink(t.path("elsewhere"), t.path("root/link")).expect("symlink");
        let root = t.path("root");
        let p = policy(&root, &root);
        let link = t.path("root/link");
        assert_eq!(p.resolve(Some(&link)).unwrap_err(), outside(&link, &root));
    }

    #[test]
    fn a_symlink_inside_a_root_that_stays_inside_is_allowed() {
        let t = TempDir::new();
        let target = t.mkdir("root/target");
        std::os::unix::fs::symlink("target", t.path("root/link")).expect("symlink");
        let root = t.path("root");
        let p = policy(&root, &root);
        assert_eq!(
            dir_of(&p.resolve(Some(&t.path("root/link"))).expect("allowed")),
            real(target)
        );
    }

    #[test]
    fn a_path_outside_that_leads_into_a_root_is_allowed_by_its_realpath() {
        let t = TempDir::new();
        let sub = t.mkdir("root/sub");
        std::os::unix::fs::symlink(t.path("root"), t.path("alias")).expect("symlink");
        let root = t.path("root");
        let p = policy(&root, &root);
        assert_eq!(
            dir_of(&p.resolve(Some(&t.path("alias/sub"))).expect("allowed")),
            real(sub)
        );
    }

    #[test]
    fn past_the_realpath_check_openat2_still_refuses_a_symlink_out_of_the_root() {
        // What a symlink swapped in between the check and the open meets.
        let t = TempDir::new();
        t.mkdir("root");
        t.mkdir("elsewhere");
        std::os::unix::fs::symlink(t.path("elsewhere"), t.path("root/abs")).expect("symlink");
        std::os::unix::fs::symlink("../elsewhere", t.path("root/rel")).expect("symlink");
        let root = t.path("root");
        let p = policy(&root, &root);
        let roots = p.roots.as_ref().expect("roots");
        for rest in ["abs", "rel", ".."] {
            assert_eq!(
                roots.list[0].open_beneath(Path::new(rest)).map(drop),
                Err(rustix::io::Errno::XDEV),
                "{rest}"
            );
        }
    }

    #[test]
    fn a_missing_directory_inside_a_root_reads_like_the_spawns_chdir_error() {
        let t = TempDir::new();
        std::fs::write(t.0.join("file"), "").expect("a file");
        let p = policy(&t.text(), &t.text());
        let nope = t.path("nope");
        assert_eq!(
            p.resolve(Some(&nope)).unwrap_err(),
            Refusal::Unusable(format!("chdir {nope}: no such file or directory"))
        );
        let file = t.path("file");
        assert_eq!(
            p.resolve(Some(&file)).unwrap_err(),
            Refusal::Unusable(format!("chdir {file}: not a directory"))
        );
        // Outside every root, only "outside" is said.
        assert_eq!(
            p.resolve(Some("/nonexistent/x")).unwrap_err(),
            outside("/nonexistent/x", &t.text())
        );
    }

    #[test]
    fn a_relative_cwd_is_relative_to_the_default_cwd() {
        let t = TempDir::new();
        t.mkdir("root/home");
        let inner = t.mkdir("root/home/proj");
        let root = t.path("root");
        let home = t.path("root/home");
        let p = policy(&root, &home);
        assert_eq!(
            dir_of(&p.resolve(Some("proj")).expect("allowed")),
            real(inner)
        );
        assert_eq!(dir_of(&p.resolve(Some(".")).expect("allowed")), real(&home));
        let shown = format!("{home}/../..");
        assert_eq!(
            p.resolve(Some("../..")).unwrap_err(),
            outside(&shown, &root)
        );
    }

    #[test]
    fn the_refusal_names_every_root_as_configured() {
        let a = TempDir::new();
        let b = TempDir::new();
        let allowed = format!("{}:{}/", a.text(), b.text());
        let p = policy(&allowed, &a.text());
        assert_eq!(
            p.resolve(Some("/etc")).unwrap_err(),
            outside("/etc", &allowed)
        );
        assert!(matches!(p.resolve(Some(&b.text())), Ok(Cwd::Dir(_))));
    }

    #[test]
    fn a_default_outside_the_roots_is_an_error_naming_the_variable() {
        let root = TempDir::new();
        let other = TempDir::new();
        let e = CwdPolicy::from_settings(Some(&root.text()), Some(&other.text())).unwrap_err();
        assert_eq!(
            e,
            format!(
                "MCP_EXEC_DEFAULT_CWD: {}",
                outside(&other.text(), &root.text())
            )
        );
    }

    #[test]
    fn with_roots_and_no_default_the_servers_own_directory_must_be_inside_them() {
        // The test runs in the package directory, which no temp dir contains.
        let root = TempDir::new();
        let e = CwdPolicy::from_settings(Some(&root.text()), None).unwrap_err();
        assert!(e.starts_with("MCP_EXEC_DEFAULT_CWD is unset"), "{e}");
        assert!(e.contains("is outside the allowed directories"), "{e}");
    }

    #[test]
    fn invalid_roots_are_errors_naming_the_variable() {
        let t = TempDir::new();
        std::fs::write(t.0.join("file"), "").expect("a file");
        let cases = [
            (
                "relative/dir".to_owned(),
                "\"relative/dir\" is not an absolute path",
            ),
            (format!("{}::/tmp", t.text()), "empty entry in"),
            (format!("{}:", t.text()), "empty entry in"),
            (t.path("missing"), "no such file or directory"),
            (t.path("file"), "not a directory"),
        ];
        for (allowed, why) in cases {
            let e = CwdPolicy::from_settings(Some(&allowed), Some(&t.text())).unwrap_err();
            assert!(e.starts_with("MCP_EXEC_ALLOWED_CWDS: "), "{allowed}: {e}");
            assert!(e.contains(why), "{allowed}: {e}");
        }
    }

    #[test]
    fn an_invalid_default_is_an_error_naming_the_variable() {
        let t = TempDir::new();
        for (allowed, default) in [
            (None, "rel"),
            (Some(t.text()), "rel"),
            (None, "/nonexistent"),
        ] {
            let e = CwdPolicy::from_settings(allowed.as_deref(), Some(default)).unwrap_err();
            assert!(e.starts_with("MCP_EXEC_DEFAULT_CWD"), "{default}: {e}");
        }
    }
}
