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
//! What the intake task does with a signal:
//! - SIGTERM, SIGINT, SIGQUIT: [`Event::Shutdown`] for the application.
//! - SIGHUP, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT: forwarded to the process
//!   group of every running job, then reported as [`Event::Forwarded`].

use std::io;
use std::sync::Arc;

use nix::sys::signal::{SigSet, Signal as NixSignal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;

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
    loop {
        let mut guard = fd.readable().await?;
        let read = guard.try_io(|inner| match inner.get_ref().read_signal() {
            Ok(Some(info)) => Ok(info.ssi_signo),
            Ok(None) => Err(io::ErrorKind::WouldBlock.into()),
            Err(e) => Err(io::Error::from(e)),
        });
        match read {
            Ok(Ok(signo)) => {
                if let Some(sig) = i32::try_from(signo).ok().and_then(Signal::from_raw) {
                    return Ok(sig);
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
