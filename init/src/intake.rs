//! Signal intake: how signals enter the process, and the task that turns the
//! non-child ones into work.
//!
//! Owns the start-up signal mask (`handled_set`, blocked by
//! [`crate::prepare`]), the signalfds that read it, and the intake task, which
//! owns its signalfd and nothing else (it reads the reaper's registry to know
//! which groups to forward to).
//!
//! # Invariants
//! - Every handled signal is blocked in the main thread *before any other
//!   thread exists*, so every thread inherits the mask and no handled signal
//!   is ever delivered to a handler or a default action; it stays pending
//!   until a signalfd read takes it. Blocked signals are never discarded by
//!   the kernel, which is what makes this work as PID 1, where an unblocked
//!   signal without a handler would be dropped.
//! - Two signalfds with disjoint sets read the pending signals: SIGCHLD goes
//!   to the reaper's (see [`crate::reaper`]), everything else here, so neither
//!   task can take a signal meant for the other.
//! - The fault signals (SEGV, BUS, ILL, FPE, ABRT, TRAP, SYS) are never
//!   blocked: a fault in mcp-exec itself must still kill it.
//!
//! What the intake task does with a signal (server mode, [`crate::prepare`]):
//! - SIGTERM, SIGINT, SIGQUIT: [`Event::Shutdown`] for the application.
//! - SIGHUP, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT: forwarded to the process
//!   group of every running job, then reported as [`Event::Forwarded`].
//!
//! # Init mode ([`crate::prepare_forwarding`])
//! Like tini, the intake reads every catchable signal except SIGCHLD (the
//! reaper's) and the fault signals, and forwards each one to the main
//! command's pid ([`crate::Init::spawn_main`]) — SIGTERM, SIGINT and SIGQUIT
//! too: they never shut mcp-exec down, the main command's exit does. Jobs
//! get none of them, and no [`Event`] is sent. Three rules:
//! - The task waits for the main command's pid before it reads anything, so
//!   a signal that arrives before the command exists stays pending and is
//!   forwarded once it does (tini reads only after its spawn, too).
//! - Forwarding happens under the reaper's lock, and only while the main
//!   command is registered (not yet reaped): its pid cannot have been
//!   reused, because an unreaped zombie still holds it. After it was reaped,
//!   signals are dropped (the application is shutting down).
//! - SIGPIPE is forwarded only when another process sent it. A SIGPIPE that
//!   our own write to a broken pipe raised is blocked like the rest, so it
//!   reaches this signalfd too; the kernel sends it as `SI_USER` from the
//!   writer itself, so `ssi_pid` is our own pid. tini, which blocks the same
//!   set, cannot tell the two apart.

use std::io;
use std::sync::Arc;

use nix::sys::signal::{SigSet, Signal as NixSignal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, watch};

use crate::Shared;
use crate::signal::Signal;

/// Something the application should know about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// SIGTERM, SIGINT or SIGQUIT arrived: begin graceful shutdown.
    Shutdown(Signal),
    /// A signal was forwarded to `groups` running job groups.
    Forwarded {
        /// The signal.
        signal: Signal,
        /// How many groups it was sent to.
        groups: usize,
    },
}

/// Signals that begin shutdown.
pub const SHUTDOWN: [Signal; 3] = [Signal::TERM, Signal::INT, Signal::QUIT];
/// Signals forwarded to job groups.
pub const FORWARDED: [Signal; 5] = [
    Signal::HUP,
    Signal::USR1,
    Signal::USR2,
    Signal::WINCH,
    Signal::CONT,
];

/// The signals the intake task reads: [`SHUTDOWN`] and [`FORWARDED`].
fn intake_set() -> SigSet {
    let mut set = SigSet::empty();
    for sig in [
        NixSignal::SIGTERM,
        NixSignal::SIGINT,
        NixSignal::SIGQUIT,
        NixSignal::SIGHUP,
        NixSignal::SIGUSR1,
        NixSignal::SIGUSR2,
        NixSignal::SIGWINCH,
        NixSignal::SIGCONT,
    ] {
        set.add(sig);
    }
    set
}

/// The set blocked at start-up: the intake's signals and SIGCHLD.
pub(crate) fn handled_set() -> SigSet {
    let mut set = intake_set();
    set.add(NixSignal::SIGCHLD);
    set
}

/// The fault signals: never blocked, so that a fault in mcp-exec itself
/// still kills it (also never forwarded in init mode, as in tini).
const SYNCHRONOUS: [NixSignal; 7] = [
    NixSignal::SIGFPE,
    NixSignal::SIGILL,
    NixSignal::SIGSEGV,
    NixSignal::SIGBUS,
    NixSignal::SIGABRT,
    NixSignal::SIGTRAP,
    NixSignal::SIGSYS,
];

/// Init mode's intake set: every signal glibc lets us block (`sigfillset`
/// leaves out its internal 32 and 33) but SIGCHLD, the fault signals, and
/// SIGKILL/SIGSTOP (which cannot be blocked or read).
fn forwarding_set() -> SigSet {
    let mut set = SigSet::all();
    for sig in
        SYNCHRONOUS
            .into_iter()
            .chain([NixSignal::SIGCHLD, NixSignal::SIGKILL, NixSignal::SIGSTOP])
    {
        set.remove(sig);
    }
    set
}

/// The set blocked at start-up in init mode: the forwarding set and SIGCHLD.
pub(crate) fn forwarding_handled_set() -> SigSet {
    let mut set = forwarding_set();
    set.add(NixSignal::SIGCHLD);
    set
}

/// Init mode's signalfd.
pub(crate) fn open_forwarding() -> io::Result<AsyncFd<SignalFd>> {
    signalfd(&forwarding_set())
}

/// Opens a non-blocking, close-on-exec signalfd for `set` and registers it
/// with tokio's reactor.
pub(crate) fn signalfd(set: &SigSet) -> io::Result<AsyncFd<SignalFd>> {
    let fd = SignalFd::with_flags(set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
    crate::sys::async_fd_register(fd)
}

/// The intake task's signalfd.
pub(crate) fn open() -> io::Result<AsyncFd<SignalFd>> {
    signalfd(&intake_set())
}

/// Waits for and reads the next signal from `fd`. Fails only when waiting on
/// the descriptor itself fails (the caller's task then stops); a failed read
/// is logged and retried.
pub(crate) async fn next_signal(fd: &AsyncFd<SignalFd>) -> io::Result<Signal> {
    next_siginfo(fd).await.map(|info| info.signal)
}

/// A signal read from a signalfd, with who sent it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Received {
    pub(crate) signal: Signal,
    /// `ssi_pid`: the sender's pid in our pid namespace (0 when it is
    /// outside it, or for most signals the kernel raises).
    pub(crate) pid: u32,
}

/// [`next_signal`], with the sender.
pub(crate) async fn next_siginfo(fd: &AsyncFd<SignalFd>) -> io::Result<Received> {
    loop {
        let mut guard = fd.readable().await?;
        let read = guard.try_io(|inner| match inner.get_ref().read_signal() {
            Ok(Some(info)) => Ok((info.ssi_signo, info.ssi_pid)),
            Ok(None) => Err(io::ErrorKind::WouldBlock.into()),
            Err(e) => Err(io::Error::from(e)),
        });
        match read {
            Ok(Ok((signo, pid))) => {
                if let Some(signal) = i32::try_from(signo).ok().and_then(Signal::from_raw) {
                    return Ok(Received { signal, pid });
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "reading signalfd"),
            Err(_would_block) => {}
        }
    }
}

/// The intake task: runs until the process exits (events nobody receives any
/// more are dropped).
pub(crate) async fn run(
    shared: Arc<Shared>,
    fd: AsyncFd<SignalFd>,
    events: mpsc::UnboundedSender<Event>,
) {
    loop {
        let sig = match next_signal(&fd).await {
            Ok(sig) => sig,
            Err(e) => {
                tracing::error!(error = %e, "signalfd failed; signals are no longer handled");
                return;
            }
        };
        if SHUTDOWN.contains(&sig) {
            let _ = events.send(Event::Shutdown(sig));
        } else if FORWARDED.contains(&sig) {
            let groups = shared.reaper.running();
            for &pgid in &groups {
                let _ = crate::sys::kill(-pgid, sig.as_raw());
            }
            let _ = events.send(Event::Forwarded {
                signal: sig,
                groups: groups.len(),
            });
        }
    }
}

/// Init mode's intake task: forwards every signal it reads to the main
/// command (see the module doc), until the process exits.
pub(crate) async fn run_forwarding(
    shared: Arc<Shared>,
    fd: AsyncFd<SignalFd>,
    mut main: watch::Receiver<Option<i32>>,
) {
    let main = match main.wait_for(Option::is_some).await {
        Ok(pid) => pid.unwrap_or(0),
        // The application dropped its handle without starting a command.
        Err(_) => return,
    };
    let me = std::process::id();
    loop {
        let received = match next_siginfo(&fd).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "signalfd failed; signals are no longer forwarded");
                return;
            }
        };
        let sig = received.signal;
        if sig == Signal::PIPE && received.pid == me {
            tracing::debug!("SIGPIPE raised by our own write: not forwarded");
            continue;
        }
        // Under the lock: a registered pid is unreaped, so not reused.
        let registry = shared.reaper.lock();
        if registry.contains_key(&main) {
            let sent = crate::sys::kill(main, sig.as_raw());
            drop(registry);
            match sent {
                Ok(()) => {
                    tracing::debug!(signal = %sig, pid = main, "forwarded to the main command")
                }
                Err(e) => {
                    tracing::warn!(signal = %sig, pid = main, error = %e, "forwarding to the main command failed")
                }
            }
        } else {
            drop(registry);
            tracing::debug!(signal = %sig, "the main command has exited: signal dropped");
        }
    }
}
