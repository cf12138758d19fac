//! The only module of the init crate that uses `unsafe`.
//!
//! Everything here is a thin wrapper around one libc call whose safe
//! equivalent is missing from `nix`/`rustix` (raw signal numbers, including
//! real-time ones; querying a disposition without changing it; marking
//! inherited descriptors close-on-exec), plus the `pre_exec` hook that runs in
//! the forked child. Every block names the invariant it relies on.
#![expect(unsafe_code, reason = "the one module that talks to libc directly")]

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::libc;
use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};

/// Highest signal number the kernel knows on Linux (`SIGRTMAX`).
pub(crate) const MAX_SIGNAL: i32 = 64;

/// The signal state the process had when it started, restored in every job.
#[derive(Clone, Copy)]
pub(crate) struct Origin {
    /// The signal mask of the main thread before the init layer blocked anything.
    pub(crate) mask: SigSet,
    /// Signals whose disposition was `SIG_IGN` at start (bit `n` = signal `n`).
    /// SIGPIPE is never in it: Rust's runtime sets it to `SIG_IGN` before
    /// `main`, so its original disposition is unknowable; jobs get the default.
    pub(crate) ignored: u64,
}

impl Origin {
    /// Whether signal `n` was ignored when the process started.
    pub(crate) fn is_ignored(&self, n: i32) -> bool {
        (1..=MAX_SIGNAL).contains(&n) && self.ignored & (1u64 << (n - 1)) != 0
    }
}

/// Reads the current signal mask and the set of ignored signals.
pub(crate) fn capture_origin() -> Origin {
    let mask = SigSet::thread_get_mask().unwrap_or_else(|_| SigSet::empty());
    let mut ignored = 0u64;
    for n in 1..=MAX_SIGNAL {
        if n == libc::SIGPIPE || n == libc::SIGKILL || n == libc::SIGSTOP {
            continue;
        }
        let mut old = std::mem::MaybeUninit::<libc::sigaction>::zeroed();
        // SAFETY: a null `act` only queries the disposition; `old` is a valid,
        // writable `sigaction` that the kernel fills on success.
        let rc = unsafe { libc::sigaction(n, std::ptr::null(), old.as_mut_ptr()) };
        if rc == 0 {
            // SAFETY: zero-initialised and filled by a successful sigaction.
            let old = unsafe { old.assume_init() };
            if old.sa_sigaction == libc::SIG_IGN {
                ignored |= 1u64 << (n - 1);
            }
        }
    }
    Origin { mask, ignored }
}

/// Sends signal `sig` (0 = existence probe) to `pid` with kill(2) semantics:
/// `pid > 0` one process, `pid < -1` a process group, `-1` every process we
/// may signal. Raw numbers are used because jobs may be sent real-time signals,
/// which neither `nix::Signal` nor `rustix::Signal` can name safely.
pub(crate) fn kill_raw(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: kill(2) has no memory-safety preconditions; it only affects
    // other processes (or, with pid 0/-1, ones the caller decided to signal).
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Marks every descriptor above 2 close-on-exec, so that nothing the process
/// inherited (or opened without `O_CLOEXEC`) leaks into jobs.
pub(crate) fn cloexec_inherited_fds() -> io::Result<()> {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on
    // descriptors; it closes nothing, so no owned fd is invalidated.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC) };
    if rc == 0 {
        return Ok(());
    }
    // Kernels before 5.11: walk /proc/self/fd instead.
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let Some(fd) = entry?
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if fd > 2 {
            // SAFETY: F_SETFD on a number that may already be closed (the
            // read_dir fd itself) is harmless: it fails with EBADF.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
    Ok(())
}

/// Installs the hook that restores the start-up signal state in the child.
///
/// The forked child inherits the server's mask, which blocks every signal the
/// init layer reads from its signalfd; std's `Command` only resets SIGPIPE to
/// its default. The hook sets the whole mask back to the one the server
/// started with and re-ignores what was ignored then (SPEC §2.3). Dispositions of the signals the
/// server handles need no reset: the server never installs handlers (it
/// blocks them and reads a signalfd), and exec resets handlers anyway.
pub(crate) fn restore_signals_in_child(cmd: &mut Command, origin: Origin) {
    let hook = move || -> io::Result<()> {
        pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&origin.mask), None)?;
        for n in 1..=MAX_SIGNAL {
            if origin.is_ignored(n) {
                // SAFETY: called in the forked child before exec, where only
                // async-signal-safe functions are allowed: signal(2) is one.
                unsafe { libc::signal(n, libc::SIG_IGN) };
            }
        }
        Ok(())
    };
    // SAFETY: the hook runs between fork and exec in the child. It only calls
    // pthread_sigmask and signal, both async-signal-safe; it allocates
    // nothing and touches no lock (`origin` is a Copy value moved in).
    unsafe { cmd.pre_exec(hook) };
}

/// Registers a descriptor-owning value with tokio's reactor.
///
/// Panics if called outside a tokio runtime with IO enabled (a wiring bug,
/// caught by every test, never a runtime condition).
pub(crate) fn async_fd<T: std::os::fd::AsRawFd>(
    inner: T,
) -> io::Result<tokio::io::unix::AsyncFd<T>> {
    // SAFETY: `T` owns its descriptor (it closes it on drop) and the AsyncFd
    // owns `T`, so the descriptor stays open for as long as it is registered
    // and is deregistered before it is closed.
    unsafe { tokio::io::unix::AsyncFd::register(inner) }.map_err(|e| e.into_parts().1)
}
