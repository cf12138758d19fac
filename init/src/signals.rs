//! Signal intake: one task reads a signalfd and turns signals into work.
//!
//! At start-up ([`crate::prepare`]) the handled signals are blocked in the
//! main thread *before any other thread exists*, so every thread inherits the
//! mask and no signal is ever delivered to a handler or default action; they
//! stay pending until this task reads them from the signalfd. Blocked signals
//! are never discarded by the kernel, which is what makes this work as PID 1,
//! where an unblocked signal without a handler would be dropped.
//!
//! - SIGCHLD: a reap sweep (the reaper loops, so coalesced signals are fine).
//! - SIGTERM, SIGINT, SIGQUIT: [`Event::Shutdown`] for the application.
//! - SIGHUP, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT: forwarded to the process
//!   group of every running job, then reported as [`Event::Forwarded`].
//!
//! The fault signals (SEGV, BUS, ILL, FPE, ABRT, TRAP, SYS) are never blocked.

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

/// The set blocked at start-up and read from the signalfd.
pub(crate) fn handled_set() -> SigSet {
    let mut set = SigSet::empty();
    for sig in [
        NixSignal::SIGCHLD,
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

pub(crate) fn open_signalfd() -> io::Result<AsyncFd<SignalFd>> {
    let fd = SignalFd::with_flags(
        &handled_set(),
        SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC,
    )?;
    crate::sys::async_fd(fd)
}

/// The signal task: runs until the application drops its event receiver and
/// the process exits.
pub(crate) async fn run(
    shared: Arc<Shared>,
    fd: AsyncFd<SignalFd>,
    events: mpsc::UnboundedSender<Event>,
) {
    // Children may have exited before the signalfd existed.
    shared.reaper.sweep();
    loop {
        let mut guard = match fd.readable().await {
            Ok(g) => g,
            Err(e) => {
                tracing::error!(error = %e, "signalfd failed; signals are no longer handled");
                return;
            }
        };
        let read = guard.try_io(|inner| match inner.get_ref().read_signal() {
            Ok(Some(info)) => Ok(info.ssi_signo),
            Ok(None) => Err(io::ErrorKind::WouldBlock.into()),
            Err(e) => Err(io::Error::from(e)),
        });
        let signo = match read {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "reading signalfd");
                continue;
            }
            Err(_would_block) => continue,
        };
        let Some(sig) = i32::try_from(signo).ok().and_then(Signal::from_raw) else {
            continue;
        };
        if sig == Signal::CHLD {
            shared.reaper.sweep();
        } else if SHUTDOWN.contains(&sig) {
            let _ = events.send(Event::Shutdown(sig));
        } else if FORWARDED.contains(&sig) {
            let groups = shared.reaper.running();
            for &pgid in &groups {
                let _ = crate::sys::kill_raw(-pgid, sig.as_raw());
            }
            let _ = events.send(Event::Forwarded {
                signal: sig,
                groups: groups.len(),
            });
        }
    }
}
