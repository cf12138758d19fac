//! Everything mcp-exec must do as PID 1 of a container, and nothing about MCP.
//! What it guarantees, and what it needs from the kernel: `init/README.md`.
//!
//! Use it in two steps:
//! 1. [`prepare`] on the main thread, **before any other thread exists**
//!    (before the tokio runtime and the log writer): it records the signal
//!    state the process started with, blocks the signals it handles (every
//!    later thread inherits that mask), becomes child subreaper when not PID 1,
//!    and marks inherited descriptors close-on-exec.
//! 2. [`Boot::start`] inside the tokio runtime: opens two signalfds and
//!    starts two tasks, the reaper (SIGCHLD → reap, route each status) and
//!    the intake (shutdown and forwarded signals). It returns the [`Init`]
//!    handle (spawn, group signalling, escalation with verified death,
//!    shutdown) and a channel of [`Event`]s for the application.
//!
//! **Init mode** (tini-style, the binary's `mcp-exec -- CMD`): start with
//! [`prepare_forwarding`] instead, then [`Init::spawn_main`] the container's
//! main command. Every catchable signal but SIGCHLD and the fault signals is
//! then forwarded to that command instead of becoming an [`Event`] (see
//! [`intake`]); its exit arrives on [`MainCommand::exit`], and the
//! application decides what follows (the binary shuts its jobs down and
//! exits with the command's status).
//!
//! # Modules
//! - [`reaper`]: the single reaper: the registry of children and the task
//!   that reaps on SIGCHLD.
//! - [`intake`]: the start-up signal mask, the signalfds, and the task that
//!   turns shutdown/forwarded signals into [`Event`]s.
//! - [`signal`]: the [`Signal`] number type: names, descriptions, parsing.
//! - [`spawn`]: starting a job in its own group with pipes, registered with
//!   the reaper.
//! - [`group`]: group signals, verified death, and [`Init::escalate`] (TERM →
//!   wait → KILL).
//! - [`procinfo`]: survivor diagnostics from /proc.
//! - [`listeners`]: listening TCP sockets and the processes holding them
//!   (sock_diag or /proc/net/tcp{,6}, descriptor links).
//! - [`sockdiag`]: the kernel's TCP socket diagnostics (`NETLINK_SOCK_DIAG`):
//!   a dump by state, and the exact lookup of one 4-tuple.
//! - [`shutdown`]: the bounded graceful-shutdown sequence.
//! - `sys`: the only `unsafe` code, one wrapper per libc call.
//!
//! # Which system crate does what
//! `nix` owns signal *sets*: masks, dispositions and the signalfd. `rustix`
//! owns everything addressed by pid or fd that it wraps safely: waiting,
//! `prctl`, `getpid`, pipes. `sys` wraps, with raw libc, what neither offers
//! safely: `kill` with raw signal numbers (jobs may be sent real-time
//! signals that neither crate's `Signal` type can name), `rt_sigaction` for
//! the signals glibc reserves, `close_range`/`fcntl` on inherited
//! descriptors, `posix_spawnp`, the `clone(CLONE_VM | CLONE_VFORK)` child
//! that starts every job, and glibc's `mallopt`/`malloc_trim`. `procfs`
//! parses /proc for diagnostics. No `nix`, `rustix` or `procfs` type appears
//! in this crate's public API.

pub mod group;
pub mod intake;
pub mod listeners;
pub mod procinfo;
pub mod pty;
pub mod reaper;
pub mod shutdown;
pub mod signal;
pub mod sockdiag;
pub mod spawn;
mod sys;

use std::fmt;
use std::sync::Arc;

use nix::sys::signal::{SigmaskHow, pthread_sigmask};
use tokio::sync::{mpsc, watch};

pub use group::{DeathWait, Escalation, SignalError, Step, Survived, group_exists, signal_group};
pub use intake::Event;
pub use procinfo::Survivor;
pub use pty::{TerminalDevice, WindowSize};
pub use reaper::{ExitStatus, PendingExit, PendingExitUsage, Reaped, ReaperGone};
pub use shutdown::ShutdownReport;
pub use signal::{ParseSignalError, Signal};
pub use spawn::{
    Credentials, Cwd, Extras, Limit, MainCommand, Program, Resource, Setup, SpawnError, SpawnSpec,
    Spawned, SpawnedTerminal, errno_text,
};

/// Returns free heap memory to the kernel; call when the application goes
/// idle (glibc otherwise keeps freed memory of every arena).
pub fn trim_heap() {
    sys::malloc_trim();
}

/// Registers a descriptor with tokio's reactor, so it can be awaited (the
/// safe face of `AsyncFd::register`: the `AsyncFd` owns the descriptor, so
/// it is deregistered before it is closed). Call it inside a tokio runtime
/// with IO enabled; the server's file watch (`src/files/watch.rs`) uses it
/// for its inotify descriptor.
pub fn register_fd(
    fd: std::os::fd::OwnedFd,
) -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    sys::async_fd_register(fd)
}

/// A process id (also used as a process-group id: a job's pgid is its pid).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pid(pub i32);

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Errors of the start-up steps.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// Blocking the handled signals failed.
    #[error("blocking signals: {0}")]
    BlockSignals(#[source] std::io::Error),
    /// Creating the signalfd failed.
    #[error("creating signalfd: {0}")]
    SignalFd(#[source] std::io::Error),
}

/// The result of [`prepare`]: start-up facts, ready to [`start`](Boot::start).
pub struct Boot {
    origin: spawn::Origin,
    forwarding: bool,
    pid1: bool,
    subreaper: bool,
    /// Problems that did not stop start-up (log them once logging is up).
    pub warnings: Vec<String>,
}

/// The first start-up step; see the crate doc. Must run before any thread is
/// spawned: a thread created earlier would keep an unblocked mask, and a
/// SIGTERM delivered to it would kill the process instead of being read.
pub fn prepare() -> Result<Boot, InitError> {
    prepare_mode(false)
}

/// [`prepare`] for init mode: blocks every catchable signal but SIGCHLD and
/// the fault signals, so that the intake can forward them all to the main
/// command ([`Init::spawn_main`]) instead of turning any into an [`Event`].
/// The same rule applies: before any other thread exists.
pub fn prepare_forwarding() -> Result<Boot, InitError> {
    prepare_mode(true)
}

fn prepare_mode(forwarding: bool) -> Result<Boot, InitError> {
    fix_malloc_thresholds();
    let origin = spawn::Origin::capture();
    let mut warnings = Vec::new();
    let pid1 = rustix::process::getpid().is_init();
    let mut subreaper = false;
    if !pid1 {
        match rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
            Ok(()) => subreaper = true,
            Err(e) => warnings.push(format!(
                "PR_SET_CHILD_SUBREAPER failed ({}): orphaned descendants of jobs will not be reaped by mcp-exec",
                std::io::Error::from(e)
            )),
        }
    }
    let blocked = if forwarding {
        intake::forwarding_handled_set()
    } else {
        intake::handled_set()
    };
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&blocked), None)
        .map_err(|e| InitError::BlockSignals(e.into()))?;
    if let Err(e) = cloexec_inherited_fds() {
        warnings.push(format!(
            "marking inherited descriptors close-on-exec failed: {e}"
        ));
    }
    Ok(Boot {
        origin,
        forwarding,
        pid1,
        subreaper,
        warnings,
    })
}

/// Fixes glibc malloc's thresholds at 128 KiB (its defaults' starting point).
///
/// By default glibc raises the mmap threshold to the size of every large block
/// that is freed (up to 32 MiB), so after one big response all later big
/// buffers come from the heap, and the heap is only trimmed from its top: a
/// 256 MiB capture left ~45 MiB resident while idle. Fixing the thresholds
/// keeps big buffers in their own mappings, returned to the kernel on free.
///
/// One arena: the process has a handful of threads (I/O, logging) that
/// allocate little, and an arena per thread kept a partly used 132 KiB heap
/// each, resident for good.
/// Called by [`prepare`], before any thread exists.
fn fix_malloc_thresholds() {
    const THRESHOLD: nix::libc::c_int = 128 * 1024;
    sys::mallopt(nix::libc::M_MMAP_THRESHOLD, THRESHOLD);
    sys::mallopt(nix::libc::M_TRIM_THRESHOLD, THRESHOLD);
    sys::mallopt(nix::libc::M_ARENA_MAX, 1);
}

/// Marks every descriptor above 2 close-on-exec, so that nothing the process
/// inherited (or opened without `O_CLOEXEC`) leaks into jobs.
fn cloexec_inherited_fds() -> std::io::Result<()> {
    if sys::close_range_cloexec(3).is_ok() {
        return Ok(());
    }
    // Kernels before 5.11: walk /proc/self/fd instead. The directory's own
    // descriptor is among them; marking it is harmless.
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let fd = entry?
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok());
        if let Some(fd) = fd.filter(|&fd| fd > 2) {
            let _ = sys::fcntl_setfd_cloexec(fd);
        }
    }
    Ok(())
}

impl Boot {
    /// Whether this process is PID 1.
    pub fn is_pid1(&self) -> bool {
        self.pid1
    }

    /// Whether this is init mode ([`prepare_forwarding`]).
    pub fn is_forwarding(&self) -> bool {
        self.forwarding
    }

    /// The second start-up step; must run inside a tokio runtime (with IO and
    /// time enabled).
    pub fn start(self) -> Result<(Init, mpsc::UnboundedReceiver<Event>), InitError> {
        let chld = reaper::open_signalfd().map_err(InitError::SignalFd)?;
        let fd = if self.forwarding {
            intake::open_forwarding()
        } else {
            intake::open()
        }
        .map_err(InitError::SignalFd)?;
        let shared = Arc::new(Shared {
            reaper: reaper::Reaper::new(),
            origin: self.origin,
            pid1: self.pid1,
            subreaper: self.subreaper,
            main: watch::Sender::new(None),
        });
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(reaper::run(Arc::clone(&shared), chld));
        if self.forwarding {
            let main = shared.main.subscribe();
            tokio::spawn(intake::run_forwarding(Arc::clone(&shared), fd, main));
        } else {
            tokio::spawn(intake::run(Arc::clone(&shared), fd, tx));
        }
        Ok((Init { shared }, rx))
    }
}

/// State shared by the reaper and intake tasks and every [`Init`] handle.
pub(crate) struct Shared {
    pub(crate) reaper: reaper::Reaper,
    pub(crate) origin: spawn::Origin,
    pub(crate) pid1: bool,
    pub(crate) subreaper: bool,
    /// Init mode: the main command's pid, once started (the forwarding
    /// intake waits for it).
    pub(crate) main: watch::Sender<Option<i32>>,
}

/// The handle the application uses: cheap to clone.
#[derive(Clone)]
pub struct Init {
    shared: Arc<Shared>,
}

impl Init {
    /// Whether this process is PID 1 (of its pid namespace).
    pub fn is_pid1(&self) -> bool {
        self.shared.pid1
    }

    /// Whether this process is a child subreaper (when not PID 1).
    pub fn is_subreaper(&self) -> bool {
        self.shared.subreaper
    }

    /// Pids of spawned children that have not been reaped yet. (Not used by
    /// the server; kept for the init-probe and diagnostics.)
    #[doc(hidden)]
    pub fn running_children(&self) -> Vec<Pid> {
        self.shared.reaper.running().into_iter().map(Pid).collect()
    }

    /// Orphans reaped so far (descendants that were not registered jobs).
    /// (For the init-probe's tests.)
    #[doc(hidden)]
    pub fn orphans_reaped(&self) -> u64 {
        self.shared.reaper.orphans_reaped()
    }

    /// A handle with no reaper and no signal intake behind it, and without
    /// [`prepare`]'s process-wide effects (signal mask, subreaper, malloc
    /// settings): for exercising the layers above in process (mcp-exec's fuzz
    /// targets). Nothing would reap a child spawned through it, so its user
    /// must never spawn; mcp-exec's refuses every job before it gets here.
    #[doc(hidden)]
    pub fn inert() -> Init {
        Init {
            shared: Arc::new(Shared {
                reaper: reaper::Reaper::new(),
                origin: spawn::Origin::capture(),
                pid1: false,
                subreaper: false,
                main: watch::Sender::new(None),
            }),
        }
    }
}
