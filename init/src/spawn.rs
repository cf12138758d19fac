//! Starting jobs: `$SHELL -c <command>` (or an argv) in a new process group,
//! with three pipes, and registration with the reaper.
//!
//! The child gets: a new process group whose id is its pid; stdin, stdout and
//! stderr as pipes whose other ends the caller owns (never the server's own
//! stdio); no other descriptor (ours are created close-on-exec, and start-up
//! marked inherited ones so); the signal mask the server started with and
//! every signal at its default disposition, whatever the server inherited
//! (see `Origin`); the working directory [`Cwd`] says (the
//! server's, a path, or an open directory descriptor); the server's
//! environment with `env` layered on top; and the [`Setup`] it asks for
//! (user and groups, resource limits, `oom_score_adj`).
//! A terminal job ([`Init::spawn_terminal`]) gets a new session
//! instead of a new group, and a pseudo-terminal's slave as its stdin,
//! stdout, stderr and controlling terminal instead of the pipes.
//!
//! Every job is started by one path: a `clone(CLONE_VM | CLONE_VFORK)`
//! child of our own (`sys::clone_vfork`) — what glibc's `posix_spawnp` does,
//! plus the set-up steps it lacks. Everything is prepared before the clone
//! (argv, environment, the `PATH` candidates, the limits, the ids); the
//! child, which shares our memory while we are suspended, only makes raw
//! system calls on that data, then `execve`. So the set-up is race-free: it
//! is applied to the child before the command's first instruction, never to
//! a process that already runs; and a job without set-up costs no more than
//! a `posix_spawnp`. Not std's `Command`: std does not reset the signal
//! mask, so it would need a `pre_exec` hook, which forces a full `fork` per
//! job; and std's own reaping of a failed exec would be a second `wait`
//! beside the reaper. The container's main command (init mode), which needs
//! none of the set-up but a terminal hand-over, keeps glibc's `posix_spawnp`.
//!
//! The child's steps, in order: dispositions (every one to `SIG_DFL`),
//! `setpgid` (a terminal job: `setsid`, then `TIOCSCTTY` on the slave),
//! `oom_score_adj` (before the
//! identity changes: after it `/proc/self` belongs to root), resource
//! limits, `setgroups`/`setresgid`/`setresuid`, `chdir`/`fchdir` (as the
//! job's user, so it must be allowed in; before the descriptor copies, so a
//! directory descriptor numbered below 3 is used before a copy replaces it),
//! the descriptor copies onto 0, 1, 2 (a list: a caller can keep one more
//! open at a fixed number), the signal mask, `execve`.
//!
//! Failures to start (bad cwd, missing shell, exec error, a refused set-up
//! step) are returned as a [`SpawnError`] whose text reads like the Go
//! reference's (`chdir /x: no such file or directory`), never as a panic.
//!
//! # Invariants
//! - The reaper's registry lock is held from before the clone until the
//!   new pid is inserted, so the child cannot be reaped before its status has
//!   somewhere to go (the race is explained in [`crate::reaper`]); a child
//!   whose set-up failed is reaped inside the lock by the spawn itself.
//! - Owns no long-lived state: the start-up signal state (`Origin`) is read
//!   once by [`crate::prepare`] and the server's environment once, on the
//!   first spawn; the caller owns everything a spawn returns.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::Arc;

use nix::sys::signal::SigSet;
use tokio::sync::oneshot;

use crate::reaper::PendingExit;
use crate::sys::ChildStep;
use crate::{Init, Pid};

/// The signal state a job starts with: the signal mask the process had when
/// it started, and every disposition at `SIG_DFL`.
///
/// The mask is recorded because the server blocks the signals it reads from
/// its signalfd, and a job must not inherit that. Dispositions are not
/// recorded: whatever the server inherited, every job (and init mode's main
/// command) starts with every signal at its default, as systemd starts its
/// services. A server started under `nohup`, or by a script that put it in
/// the background, inherits HUP, or INT and QUIT, ignored; an ignored
/// disposition survives `execve`, and a non-interactive shell that starts
/// with a signal ignored cannot even `trap` it, so passing the inherited
/// set on would make `kill -HUP` and the forwarded signals of init mode
/// silently do nothing to the very programs they are meant for. The server
/// itself still receives those signals: it blocks them, and a blocked
/// signal is queued for its signalfd even while its disposition is
/// `SIG_IGN`. (SIGPIPE is one of them: Rust's runtime ignores it before
/// `main`. glibc's internal signals 32 and 33 too: a job is a new program,
/// whose own libc sets them up as it needs.)
pub(crate) struct Origin {
    /// The signal mask of the main thread before the init layer blocked anything.
    mask: SigSet,
}

/// Every signal whose disposition can be set: `1..=64` but SIGKILL and SIGSTOP.
fn all_catchable() -> impl Iterator<Item = i32> {
    (1..=crate::sys::MAX_SIGNAL)
        .filter(|&sig| sig != nix::libc::SIGKILL && sig != nix::libc::SIGSTOP)
}

impl Origin {
    /// Reads the current signal mask; called by [`crate::prepare`] before it
    /// blocks anything.
    pub(crate) fn capture() -> Origin {
        Origin {
            mask: SigSet::thread_get_mask().unwrap_or_else(|_| SigSet::empty()),
        }
    }

    /// The signals a job resets to `SIG_DFL`: all of them.
    fn sigdefault(&self) -> Vec<i32> {
        all_catchable().collect()
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// `$SHELL -c <command>`; `/bin/sh` when `SHELL` is unset or empty.
    Shell(String),
    /// An explicit argv (first element is the program, looked up in `PATH`).
    Argv(Vec<OsString>),
}

/// Where a job starts.
#[derive(Debug, Clone, Default)]
pub enum Cwd {
    /// The server's working directory.
    #[default]
    Inherit,
    /// A directory by path (relative ones to the server's working
    /// directory), changed to in the child with `chdir`. It is checked
    /// before the spawn so that a bad one is a [`SpawnError::Chdir`] naming
    /// it; the check and the child's `chdir` are two lookups, so a path
    /// that is replaced in between is followed to wherever it then leads.
    Path(PathBuf),
    /// An open directory, changed to in the child with `fchdir` before
    /// `exec`: the job starts in exactly the directory that was opened,
    /// whatever has been renamed or replaced by a symlink since. Open it
    /// close-on-exec (std and rustix always do; `O_PATH` is enough), or the
    /// job inherits the descriptor. Shared (`Arc`) so that a
    /// [`SpawnSpec`] stays cheap to clone; the spawn only borrows it.
    Dir(Arc<OwnedFd>),
}

/// `None` is [`Cwd::Inherit`], `Some(path)` is [`Cwd::Path`].
impl From<Option<PathBuf>> for Cwd {
    fn from(cwd: Option<PathBuf>) -> Cwd {
        cwd.map_or(Cwd::Inherit, Cwd::Path)
    }
}

/// A job to start.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// The program.
    pub program: Program,
    /// Working directory.
    pub cwd: Cwd,
    /// Variables layered over the server's environment.
    pub env: Vec<(OsString, OsString)>,
    /// Identity, limits and `oom_score_adj`, applied in the child before it
    /// executes the program (default: none, the server's own).
    pub setup: Setup,
}

impl SpawnSpec {
    /// `$SHELL -c command` with the server's cwd and environment.
    pub fn shell(command: impl Into<String>) -> SpawnSpec {
        SpawnSpec {
            program: Program::Shell(command.into()),
            cwd: Cwd::Inherit,
            env: Vec::new(),
            setup: Setup::default(),
        }
    }
}

/// What a job may get beyond its [`SpawnSpec`] (see [`Init::spawn_with`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras<'a> {
    /// A descriptor the child gets at this number, inherited (the one
    /// exception to "no other descriptor": a shell session's state pipe).
    /// Whoever passes it makes sure the child's own children do not keep it.
    pub fd: Option<(BorrowedFd<'a>, i32)>,
    /// `SpawnSpec::env` is the whole environment: the server's is not
    /// layered under it.
    pub complete_env: bool,
}

/// What a job's child sets up for itself before `exec`: never
/// applied to a child that already runs, so the job's first instruction
/// already runs with them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Setup {
    /// Run as this user (needs the server to be root).
    pub user: Option<Credentials>,
    /// Resource limits of the job's processes.
    pub limits: Vec<Limit>,
    /// The job's `oom_score_adj` (`-1000..=1000`); `None` inherits ours.
    pub oom_score_adj: Option<i32>,
}

/// A user identity: real, effective and saved ids all become these.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary groups (an empty list drops ours).
    pub groups: Vec<u32>,
}

/// A resource whose limit a job can be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// `RLIMIT_AS`: bytes of virtual address space.
    AddressSpace,
    /// `RLIMIT_NPROC`: processes of the job's real user (not enforced for root).
    Processes,
    /// `RLIMIT_CPU`: seconds of CPU time per process (SIGXCPU at the soft
    /// limit, SIGKILL at the hard one).
    CpuSeconds,
    /// `RLIMIT_FSIZE`: bytes a file may grow to (SIGXFSZ past it).
    FileSize,
    /// `RLIMIT_NOFILE`: one more than the highest descriptor number.
    OpenFiles,
}

impl Resource {
    /// The `RLIMIT_*` number.
    fn raw(self) -> u32 {
        use nix::libc;
        match self {
            Resource::AddressSpace => libc::RLIMIT_AS,
            Resource::Processes => libc::RLIMIT_NPROC,
            Resource::CpuSeconds => libc::RLIMIT_CPU,
            Resource::FileSize => libc::RLIMIT_FSIZE,
            Resource::OpenFiles => libc::RLIMIT_NOFILE,
        }
    }

    /// The kernel's name (`RLIMIT_AS`), for messages.
    pub fn name(self) -> &'static str {
        match self {
            Resource::AddressSpace => "RLIMIT_AS",
            Resource::Processes => "RLIMIT_NPROC",
            Resource::CpuSeconds => "RLIMIT_CPU",
            Resource::FileSize => "RLIMIT_FSIZE",
            Resource::OpenFiles => "RLIMIT_NOFILE",
        }
    }

    fn from_raw(raw: u32) -> Option<Resource> {
        [
            Resource::AddressSpace,
            Resource::Processes,
            Resource::CpuSeconds,
            Resource::FileSize,
            Resource::OpenFiles,
        ]
        .into_iter()
        .find(|r| r.raw() == raw)
    }
}

/// One resource limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// Which resource.
    pub resource: Resource,
    /// The soft limit (what the kernel enforces first).
    pub soft: u64,
    /// The hard limit (the ceiling the job cannot raise the soft one past).
    pub hard: u64,
}

/// A started child.
#[derive(Debug)]
pub struct Spawned {
    /// Its pid, which is also its process-group id.
    pub pid: Pid,
    /// Write end of its stdin.
    pub stdin: OwnedFd,
    /// Read end of its stdout.
    pub stdout: OwnedFd,
    /// Read end of its stderr.
    pub stderr: OwnedFd,
    /// Resolves when the reaper has reaped it.
    pub exit: PendingExit,
}

/// A started terminal job, from [`Init::spawn_terminal`].
#[derive(Debug)]
pub struct SpawnedTerminal {
    /// Its pid, which is also its process-group id and its session id.
    pub pid: Pid,
    /// The terminal's master: non-blocking and close-on-exec. Its input is
    /// the job's stdin, its output the job's stdout and stderr; it reads
    /// `EIO` once no process holds the slave any more.
    pub master: OwnedFd,
    /// The terminal the job runs on.
    pub device: crate::pty::TerminalDevice,
    /// Resolves when the reaper has reaped it.
    pub exit: PendingExit,
}

/// The container's main command in init mode, started by
/// [`Init::spawn_main`].
#[derive(Debug)]
pub struct MainCommand {
    /// Its pid, which is also its process-group id.
    pub pid: Pid,
    /// Resolves when the reaper has reaped it.
    pub exit: PendingExit,
}

/// Why a job could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The working directory is unusable.
    #[error("chdir {path}: {reason}")]
    Chdir {
        /// The directory asked for.
        path: String,
        /// Lower-case errno text.
        reason: String,
    },
    /// fork/exec failed.
    #[error("fork/exec {program}: {reason}")]
    Exec {
        /// The program that could not be started.
        program: String,
        /// Lower-case errno text.
        reason: String,
        /// The errno, when the kernel gave one.
        errno: Option<i32>,
    },
    /// Creating a pipe failed (descriptor limit).
    #[error("creating pipes: {0}")]
    Pipe(#[source] io::Error),
    /// A string that must go to the kernel contains a NUL byte.
    #[error("{0} contains a NUL byte")]
    Nul(&'static str),
    /// A terminal could not be allocated (no free pseudo-terminal:
    /// `EAGAIN`; no `/dev/ptmx`: `ENOENT`).
    #[error("allocating a terminal: {0}")]
    Terminal(#[source] io::Error),
    /// A set-up step of the child ([`Setup`]) failed before `exec`.
    #[error("setting up the job: {step}: {reason}")]
    Setup {
        /// The step (`setuid`, `setrlimit RLIMIT_NPROC`, `oom_score_adj`, …).
        step: String,
        /// Lower-case errno text.
        reason: String,
        /// The errno.
        errno: i32,
    },
}

impl SpawnError {
    /// Whether the spawn failed for lack of resources (processes, memory,
    /// descriptors: `EAGAIN`, `ENOMEM`, `EMFILE`, `ENFILE`), as opposed to
    /// a problem of the job itself (a missing program or directory).
    pub fn lacks_resources(&self) -> bool {
        let errno = match self {
            SpawnError::Exec { errno, .. } => *errno,
            SpawnError::Setup { errno, .. } => Some(*errno),
            SpawnError::Pipe(e) | SpawnError::Terminal(e) => e.raw_os_error(),
            SpawnError::Chdir { .. } | SpawnError::Nul(_) => None,
        };
        use nix::libc::{EAGAIN, EMFILE, ENFILE, ENOMEM};
        matches!(errno, Some(EAGAIN | ENOMEM | EMFILE | ENFILE))
    }
}

/// An argv as C strings: the program's name for messages, the program,
/// and every argument (the program again first). An empty argv is refused.
fn c_argv(argv: &[OsString]) -> Result<(String, CString, Vec<CString>), SpawnError> {
    let Some(first) = argv.first() else {
        return Err(SpawnError::Exec {
            program: String::new(),
            reason: "empty argv".into(),
            errno: None,
        });
    };
    let argv_c = argv
        .iter()
        .map(|a| cstring(a, "an argument"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((
        first.to_string_lossy().into_owned(),
        cstring(first, "the program")?,
        argv_c,
    ))
}

/// The text of an errno in the style of Go's `syscall.Errno.Error()`.
pub fn errno_text(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let s = nix::errno::Errno::from_raw(n).desc();
            let mut chars = s.chars();
            match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => s.to_owned(),
            }
        }
        None => e.to_string(),
    }
}

/// Variables of the server's environment that no job ever gets: the HTTP
/// bearer token and where it is. Withheld here, where every
/// job's environment is built, rather than removed from the process
/// environment: `remove_var` is unsafe once threads exist, and would not
/// hide it anyway — `/proc/<server>/environ` shows the environment the
/// server was started with to any job of the same user. That is why
/// `MCP_EXEC_HTTP_TOKEN_FILE` (a root-only file) is the preferred way.
pub const WITHHELD: [&str; 2] = ["MCP_EXEC_HTTP_TOKEN", "MCP_EXEC_HTTP_TOKEN_FILE"];

/// The server's own environment as `NAME=value` strings, read once: the
/// server never changes its environment, and re-reading it for every job
/// would cost ~60 allocations per spawn. [`WITHHELD`] variables are left out.
fn base_environment() -> &'static [(OsString, CString)] {
    static BASE: std::sync::OnceLock<Vec<(OsString, CString)>> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        std::env::vars_os()
            .filter(|(k, _)| !WITHHELD.iter().any(|w| k.as_os_str() == *w))
            .filter_map(|(k, v)| {
                let mut entry = k.clone().into_vec();
                entry.push(b'=');
                entry.extend_from_slice(v.as_bytes());
                CString::new(entry).ok().map(|c| (k, c))
            })
            .collect()
    })
}

/// The `NAME=value` strings of `overrides` (a later override of the same
/// name wins).
fn override_entries(overrides: &[(OsString, OsString)]) -> Result<Vec<CString>, SpawnError> {
    let mut out = Vec::with_capacity(overrides.len());
    for (i, (k, v)) in overrides.iter().enumerate() {
        if overrides[i + 1..].iter().any(|(later, _)| later == k) {
            continue;
        }
        let mut entry = k.clone().into_vec();
        entry.push(b'=');
        entry.extend_from_slice(v.as_bytes());
        out.push(CString::new(entry).map_err(|_| SpawnError::Nul("an environment variable"))?);
    }
    Ok(out)
}

/// The child's environment: the server's, with `overrides` layered on top.
fn environment<'a>(overrides: &[(OsString, OsString)], entries: &'a [CString]) -> Vec<&'a CStr> {
    base_environment()
        .iter()
        .filter(|(name, _)| !overrides.iter().any(|(k, _)| k == name))
        .map(|(_, entry)| entry.as_c_str())
        .chain(entries.iter().map(CString::as_c_str))
        .collect()
}

fn cstring(s: &OsStr, what: &'static str) -> Result<CString, SpawnError> {
    CString::new(s.as_bytes()).map_err(|_| SpawnError::Nul(what))
}

fn pipe() -> Result<(OwnedFd, OwnedFd), SpawnError> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| SpawnError::Pipe(std::io::Error::from(e)))
}

impl Init {
    /// Starts a job and registers it with the reaper.
    ///
    /// The registry lock is held across spawn+insert so that the reaper
    /// cannot reap the child before its status has somewhere to go (the
    /// reaper's module doc explains the race this closes).
    pub fn spawn(&self, spec: &SpawnSpec) -> Result<Spawned, SpawnError> {
        self.spawn_with(spec, Extras::default())
    }

    /// [`Init::spawn`] with [`Extras`].
    pub fn spawn_with(&self, spec: &SpawnSpec, extras: Extras<'_>) -> Result<Spawned, SpawnError> {
        let (stdin_r, stdin_w) = pipe()?;
        let (stdout_r, stdout_w) = pipe()?;
        let (stderr_r, stderr_w) = pipe()?;
        let stdio = [
            stdin_r.as_raw_fd(),
            stdout_w.as_raw_fd(),
            stderr_w.as_raw_fd(),
        ];
        let (pid, exit) = self.spawn_child(spec, extras, stdio, None)?;
        // The child's ends are closed here; the child has its own copies.
        Ok(Spawned {
            pid: Pid(pid),
            stdin: stdin_w,
            stdout: stdout_r,
            stderr: stderr_r,
            exit,
        })
    }

    /// Starts a terminal job: a new pseudo-terminal of `size`
    /// ([`crate::pty::open`]) whose slave is the child's stdin, stdout,
    /// stderr and controlling terminal, the child a session leader
    /// (`setsid`: its session id and process-group id are its pid, so a
    /// group signal reaches it as it reaches a pipe job). Everything else is
    /// [`Init::spawn_with`]'s. The server keeps only the master.
    pub fn spawn_terminal(
        &self,
        spec: &SpawnSpec,
        extras: Extras<'_>,
        size: crate::pty::WindowSize,
    ) -> Result<SpawnedTerminal, SpawnError> {
        let pty = crate::pty::open(size).map_err(SpawnError::Terminal)?;
        if let Some(user) = &spec.setup.user {
            // A job of another user can then reopen its own terminal by
            // name (`ttyname`, as `ssh` and `sudo` do), as a login's can.
            rustix::fs::fchown(&pty.slave, Some(rustix::fs::Uid::from_raw(user.uid)), None)
                .map_err(|e| SpawnError::Terminal(e.into()))?;
        }
        let slave = pty.slave.as_raw_fd();
        let (pid, exit) = self.spawn_child(spec, extras, [slave; 3], Some(slave))?;
        // The slave goes here: from now on only the job's processes hold
        // it, and the master reads EIO when the last of them closes it.
        drop(pty.slave);
        Ok(SpawnedTerminal {
            pid: Pid(pid),
            master: pty.master,
            device: pty.device,
            exit,
        })
    }

    /// The one spawn path: prepares the child's plan (argv, environment,
    /// `PATH` candidates, limits, identity, descriptors `stdio` onto 0, 1,
    /// 2, and a terminal to make controlling) and clones the child with the
    /// reaper's registry locked.
    fn spawn_child(
        &self,
        spec: &SpawnSpec,
        extras: Extras<'_>,
        stdio: [i32; 3],
        terminal: Option<i32>,
    ) -> Result<(i32, PendingExit), SpawnError> {
        let argv: Vec<OsString> = match &spec.program {
            Program::Shell(command) => {
                let shell = std::env::var_os("SHELL")
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| OsString::from("/bin/sh"));
                vec![shell, OsString::from("-c"), OsString::from(command)]
            }
            Program::Argv(argv) => argv.clone(),
        };
        let (program_name, program, argv) = c_argv(&argv)?;
        let entries = override_entries(&spec.env)?;
        let envp = if extras.complete_env {
            entries.iter().map(CString::as_c_str).collect()
        } else {
            environment(&spec.env, &entries)
        };
        let path_cwd;
        let cwd = match &spec.cwd {
            Cwd::Inherit => crate::sys::Chdir::Inherit,
            Cwd::Dir(fd) => crate::sys::Chdir::Fd(fd.as_fd()),
            Cwd::Path(cwd) => {
                // Checked here so the error can name the directory: a failed
                // chdir in the child would only come back as a bare errno.
                match std::fs::metadata(cwd) {
                    Ok(m) if m.is_dir() => {}
                    Ok(_) => {
                        return Err(SpawnError::Chdir {
                            path: cwd.display().to_string(),
                            reason: "not a directory".into(),
                        });
                    }
                    Err(e) => {
                        return Err(SpawnError::Chdir {
                            path: cwd.display().to_string(),
                            reason: errno_text(&e),
                        });
                    }
                }
                path_cwd = cstring(cwd.as_os_str(), "the working directory")?;
                crate::sys::Chdir::Path(&path_cwd)
            }
        };
        let origin = &self.shared.origin;
        let programs = exec_candidates(&program);
        let argv_p = pointers(argv.iter().map(CString::as_c_str));
        let envp_p = pointers(envp.iter().copied());
        // In order, like posix_spawn's file actions: the three stdio
        // descriptors, then the one extra descriptor a shell session's
        // epilogue writes to.
        let mut dup2 = vec![(stdio[0], 0), (stdio[1], 1), (stdio[2], 2)];
        dup2.extend(extras.fd.map(|(fd, target)| (fd.as_raw_fd(), target)));
        let oom_text = spec.setup.oom_score_adj.map(|v| v.to_string());
        let rlimits: Vec<crate::sys::Rlimit> = spec
            .setup
            .limits
            .iter()
            .map(|l| crate::sys::Rlimit {
                resource: l.resource.raw(),
                soft: l.soft,
                hard: l.hard,
            })
            .collect();
        let plan = crate::sys::ChildPlan {
            programs: &programs,
            argv: &argv_p,
            envp: &envp_p,
            cwd,
            dup2: &dup2,
            sigmask: crate::sys::sigset_bits(&origin.mask),
            sigdefault: origin
                .sigdefault()
                .into_iter()
                .fold(0u64, |bits, sig| bits | 1u64 << (sig - 1)),
            oom_score_adj: oom_text.as_deref().map(str::as_bytes),
            rlimits: &rlimits,
            creds: spec.setup.user.as_ref().map(|u| crate::sys::Creds {
                uid: u.uid,
                gid: u.gid,
                groups: &u.groups,
            }),
            terminal,
        };

        // The lock is held from before the clone until the pid is
        // registered (see the module doc); a child whose set-up failed
        // is reaped here, inside it, as glibc's posix_spawn does.
        let mut registry = self.shared.reaper.lock();
        match crate::sys::clone_vfork(&plan) {
            Ok(pid) => {
                let (tx, rx) = oneshot::channel();
                registry.insert(pid, tx);
                Ok((pid, PendingExit(rx)))
            }
            Err((step, errno, child)) => {
                if let Some(child) = child {
                    crate::sys::waitpid_blocking(child);
                }
                drop(registry);
                Err(child_error(step, errno, program_name, &spec.cwd))
            }
        }
    }
}

/// The error of a failed step of the child.
fn child_error(step: ChildStep, errno: i32, program: String, cwd: &Cwd) -> SpawnError {
    let reason = errno_text(&io::Error::from_raw_os_error(errno));
    let setup = |step: &str| SpawnError::Setup {
        step: step.to_owned(),
        reason: reason.clone(),
        errno,
    };
    match step {
        ChildStep::Exec => SpawnError::Exec {
            program,
            reason,
            errno: Some(errno),
        },
        ChildStep::Chdir => match cwd {
            Cwd::Path(path) => SpawnError::Chdir {
                path: path.display().to_string(),
                reason,
            },
            // The descriptor's path is the caller's to know; as before, the
            // failure reads as the exec's.
            Cwd::Dir(_) | Cwd::Inherit => SpawnError::Exec {
                program,
                reason,
                errno: Some(errno),
            },
        },
        ChildStep::Setpgid => setup("setpgid"),
        ChildStep::Setsid => setup("setsid"),
        ChildStep::Controlling => setup("TIOCSCTTY"),
        ChildStep::OomScoreAdj => setup("oom_score_adj"),
        ChildStep::Rlimit(raw) => setup(&format!(
            "setrlimit {}",
            Resource::from_raw(raw).map_or("?", Resource::name)
        )),
        ChildStep::Setgroups => setup("setgroups"),
        ChildStep::Setgid => setup("setgid"),
        ChildStep::Setuid => setup("setuid"),
        ChildStep::Dup => setup("dup2"),
    }
}

/// NULL-terminated pointers to `strings`, which must outlive their use.
fn pointers<'a>(strings: impl Iterator<Item = &'a CStr>) -> Vec<*const nix::libc::c_char> {
    strings
        .map(CStr::as_ptr)
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// The directories of the server's `PATH` (glibc's default `/bin:/usr/bin`
/// when unset), read once: the server never changes its environment. As
/// with `posix_spawnp`, a job's own `PATH` does not change where its
/// program is looked up.
fn search_path() -> &'static [Vec<u8>] {
    static DIRS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    DIRS.get_or_init(|| {
        let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/bin:/usr/bin"));
        path.as_bytes()
            .split(|&b| b == b':')
            .map(<[u8]>::to_vec)
            .collect()
    })
}

/// The paths `execvp` would try for `program`: itself when it names a path
/// (has a `/`), else each `PATH` directory joined with it (an empty entry
/// is the working directory).
fn exec_candidates(program: &CStr) -> Vec<CString> {
    let name = program.to_bytes();
    if name.contains(&b'/') {
        return vec![program.to_owned()];
    }
    search_path()
        .iter()
        .filter_map(|dir| {
            let mut full = Vec::with_capacity(dir.len() + 1 + name.len());
            full.extend_from_slice(dir);
            if !dir.is_empty() {
                full.push(b'/');
            }
            full.extend_from_slice(name);
            CString::new(full).ok()
        })
        .collect()
}

impl Init {
    /// `posix_spawnp` with the reaper's registry locked from before the fork
    /// until the pid is registered, so that no sweep can reap the child
    /// before its status has somewhere to go (see the reaper's invariants).
    fn spawn_registered(
        &self,
        args: &crate::sys::SpawnArgs<'_>,
        program: String,
    ) -> Result<(i32, PendingExit), SpawnError> {
        let mut registry = self.shared.reaper.lock();
        let pid = crate::sys::posix_spawnp(args).map_err(|e| SpawnError::Exec {
            program,
            reason: errno_text(&e),
            errno: e.raw_os_error(),
        })?;
        let (tx, rx) = oneshot::channel();
        registry.insert(pid, tx);
        Ok((pid, PendingExit(rx)))
    }

    /// Starts the container's main command (init mode), tini-style: `argv[0]`
    /// looked up in `PATH`, in a new process group (pgid = its pid) that
    /// becomes the foreground group of our controlling terminal if stdin is
    /// one (as tini does, so that an interactive shell can read it); with our
    /// stdin, stdout and stderr themselves (no pipes), our environment and
    /// working directory (minus the variables named in `unset`: secrets meant
    /// for mcp-exec only), the signal mask we started with and every signal
    /// at its default disposition (see `Origin`: a signal we inherited
    /// ignored could not even be trapped by a shell CMD). It is
    /// registered with the reaper like a job, and from now on the forwarding
    /// intake sends it the signals we receive ([`crate::prepare_forwarding`]).
    ///
    /// Call it once. A failed exec is a [`SpawnError::Exec`] with the errno
    /// (`ENOENT`: not found); nothing is left running then.
    pub fn spawn_main(&self, argv: &[OsString], unset: &[&str]) -> Result<MainCommand, SpawnError> {
        let (program_name, program, argv) = c_argv(argv)?;
        let envp: Vec<&CStr> = base_environment()
            .iter()
            .filter(|(name, _)| !unset.iter().any(|u| name == OsStr::new(u)))
            .map(|(_, entry)| entry.as_c_str())
            .collect();
        // Only a controlling terminal can be handed over: tcgetpgrp fails
        // with ENOTTY on any other descriptor, and glibc would then fail the
        // whole spawn (tini tolerates that failure in its child instead).
        let stdin = std::io::stdin();
        let foreground = crate::sys::tcgetpgrp(stdin.as_fd())
            .is_ok()
            .then(|| stdin.as_fd());
        let origin = &self.shared.origin;
        let sigdefault = origin.sigdefault();
        let args = crate::sys::SpawnArgs {
            program: &program,
            argv: &argv,
            envp: &envp,
            cwd: crate::sys::Chdir::Inherit,
            stdio: None,
            extra_fd: None,
            foreground,
            sigmask: &origin.mask,
            sigdefault: &sigdefault,
        };

        let (pid, exit) = self.spawn_registered(&args, program_name)?;
        self.shared.main.send_replace(Some(pid));
        Ok(MainCommand {
            pid: Pid(pid),
            exit,
        })
    }
}
