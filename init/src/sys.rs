//! The only module of the init crate that uses `unsafe`.
//!
//! Each function is a thin wrapper around one libc call (or one raw system
//! call), named after it, for what `nix`/`rustix` do not offer safely: raw
//! signal numbers including real-time ones (`kill`), querying a disposition
//! glibc refuses to touch (`rt_sigaction`), close-on-exec by range
//! (`close_range`, `fcntl`), glibc's allocator knobs (`mallopt`,
//! `malloc_trim`), `posix_spawnp` (with `chdir`/`fchdir`/`tcsetpgrp` file actions), `tcgetpgrp`, and tokio's `AsyncFd::register`. The
//! policy (which signals, which thresholds, why) lives with the callers.
//! Every `unsafe` block names the invariant it relies on.
#![expect(unsafe_code, reason = "the one module that talks to libc directly")]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::BorrowedFd;

use nix::libc;
use nix::sys::signal::SigSet;

/// Highest signal number the kernel knows on Linux (`SIGRTMAX`).
pub(crate) const MAX_SIGNAL: i32 = 64;

/// Whether signal `sig`'s disposition is `SIG_IGN`, read with the raw
/// `rt_sigaction` system call (a null new action: nothing changes). glibc's
/// `sigaction` refuses its internal signals 32 and 33.
pub(crate) fn rt_sigaction_is_ignored(sig: i32) -> bool {
    // The kernel's x86_64 `struct sigaction`: handler, flags, restorer, mask.
    let mut old = [0usize; 4];
    // SAFETY: a null new action only reads; `old` is writable and at least as
    // large as the kernel's struct for a sigset size of 8 bytes.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            std::ptr::null::<u8>(),
            old.as_mut_ptr(),
            8usize,
        )
    };
    rc == 0 && old[0] == libc::SIG_IGN
}

/// `mallopt(param, value)`; returns whether glibc accepted it.
pub(crate) fn mallopt(param: libc::c_int, value: libc::c_int) -> bool {
    // SAFETY: mallopt only sets allocator parameters. Callers call it from
    // `prepare`, before any other thread could be allocating.
    unsafe { libc::mallopt(param, value) == 1 }
}

/// `malloc_trim(0)`: returns free heap memory to the kernel.
pub(crate) fn malloc_trim() {
    // SAFETY: malloc_trim only releases memory that is free; it is
    // thread-safe (it locks each arena).
    unsafe { libc::malloc_trim(0) };
}

/// `kill(pid, sig)`: sends signal `sig` (0 = existence probe) with kill(2) semantics:
/// `pid > 0` one process, `pid < -1` a process group, `-1` every process we
/// may signal. Raw numbers are used because jobs may be sent real-time signals,
/// which neither `nix::Signal` nor `rustix::Signal` can name safely.
pub(crate) fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: kill(2) has no memory-safety preconditions; it only affects
    // other processes (or, with pid 0/-1, ones the caller decided to signal).
    let rc = unsafe { libc::kill(pid, sig) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `close_range(first, ~0, CLOSE_RANGE_CLOEXEC)`: marks every descriptor
/// from `first` on close-on-exec (Linux 5.11; `ENOSYS`/`EINVAL` before).
pub(crate) fn close_range_cloexec(first: u32) -> io::Result<()> {
    const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on
    // descriptors; it closes nothing, so no owned fd is invalidated.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, CLOSE_RANGE_CLOEXEC) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `fcntl(fd, F_SETFD, FD_CLOEXEC)` on a raw descriptor number that may not
/// be open (then it fails with `EBADF`).
pub(crate) fn fcntl_setfd_cloexec(fd: i32) -> io::Result<()> {
    // SAFETY: F_SETFD only sets a descriptor flag; on a number that is not
    // open it fails with EBADF and touches nothing.
    let rc = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `tcgetpgrp(fd)`: the foreground process group of the terminal `fd`,
/// which fails with `ENOTTY` unless `fd` is this process's controlling
/// terminal.
pub(crate) fn tcgetpgrp(fd: BorrowedFd<'_>) -> io::Result<i32> {
    use std::os::fd::AsRawFd;
    // SAFETY: tcgetpgrp only reads the terminal's state; the borrow keeps
    // the descriptor open for the call.
    let pgrp = unsafe { libc::tcgetpgrp(fd.as_raw_fd()) };
    if pgrp >= 0 {
        Ok(pgrp)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The working directory a [`posix_spawnp`] child changes to.
#[derive(Clone, Copy)]
pub(crate) enum Chdir<'a> {
    /// None: it keeps ours.
    Inherit,
    /// `chdir(path)` (`addchdir_np`, glibc 2.29).
    Path(&'a CStr),
    /// `fchdir(fd)` (`addfchdir_np`, glibc 2.29). The descriptor is
    /// close-on-exec, so the child's copy closes at `exec`.
    Fd(BorrowedFd<'a>),
}

/// What [`posix_spawnp`] starts.
pub(crate) struct SpawnArgs<'a> {
    /// The program, looked up in `PATH` when it has no `/`.
    pub(crate) program: &'a CStr,
    /// Its argv (`argv[0]` included).
    pub(crate) argv: &'a [CString],
    /// Its complete environment (`NAME=value`).
    pub(crate) envp: &'a [&'a CStr],
    /// Directory to change to in the child.
    pub(crate) cwd: Chdir<'a>,
    /// Descriptors that become the child's 0, 1 and 2; `None`: it
    /// inherits ours (init mode's main command).
    pub(crate) stdio: Option<[BorrowedFd<'a>; 3]>,
    /// One more descriptor placed at a fixed number in the child, after
    /// `stdio` (a job's shell-session state pipe, SPEC §17).
    pub(crate) extra_fd: Option<(BorrowedFd<'a>, i32)>,
    /// A terminal whose foreground process group becomes the child's new
    /// group (`addtcsetpgrp_np`, glibc 2.35), as tini does for its child.
    pub(crate) foreground: Option<BorrowedFd<'a>>,
    /// The child's signal mask.
    pub(crate) sigmask: &'a SigSet,
    /// Signals (`1..=64`) whose disposition the child resets to `SIG_DFL`.
    pub(crate) sigdefault: &'a [i32],
}

/// `posix_spawnp`: starts a child with glibc's `posix_spawnp` (a
/// `CLONE_VM|CLONE_VFORK` clone: no copy of the server's page tables, unlike
/// `fork`).
///
/// The child gets a new process group (`POSIX_SPAWN_SETPGROUP`, pgid = its
/// pid; with `foreground`, also the terminal's foreground group), `sigmask` (`SETSIGMASK`) and `SIG_DFL` for `sigdefault`
/// (`SETSIGDEF`); every other disposition is inherited unchanged. `stdio`, if given, is
/// dup'ed onto 0/1/2, and `cwd` is changed to (`addchdir_np` or
/// `addfchdir_np`, glibc 2.29) before those dups, so that a directory
/// descriptor numbered below 3 is used before a dup replaces it.
/// An exec failure comes back as the error, after glibc has reaped the
/// failed child (the caller holds the reaper's lock).
pub(crate) fn posix_spawnp(args: &SpawnArgs<'_>) -> io::Result<i32> {
    use std::mem::MaybeUninit;
    use std::os::fd::AsRawFd;

    fn check(rc: libc::c_int) -> io::Result<()> {
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(rc))
        }
    }

    /// Destroys an initialised attribute object on every exit path.
    struct Attr(MaybeUninit<libc::posix_spawnattr_t>);
    impl Drop for Attr {
        fn drop(&mut self) {
            // SAFETY: only constructed after posix_spawnattr_init succeeded.
            unsafe { libc::posix_spawnattr_destroy(self.0.as_mut_ptr()) };
        }
    }
    /// Destroys an initialised file-actions object on every exit path.
    struct Actions(MaybeUninit<libc::posix_spawn_file_actions_t>);
    impl Drop for Actions {
        fn drop(&mut self) {
            // SAFETY: only constructed after posix_spawn_file_actions_init succeeded.
            unsafe { libc::posix_spawn_file_actions_destroy(self.0.as_mut_ptr()) };
        }
    }

    let mut sigdefault = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set. glibc's sigaddset refuses its
    // internal signals 32 and 33, so bits are set directly: on Linux a
    // sigset_t is an array of unsigned longs with signal n at bit n-1 of word
    // 0 for n <= 64, and the set is at least one word long. Numbers outside
    // 1..=64 are skipped.
    let sigdefault = unsafe {
        libc::sigemptyset(sigdefault.as_mut_ptr());
        let word0 = sigdefault.as_mut_ptr().cast::<u64>();
        for &sig in args.sigdefault {
            if (1..=MAX_SIGNAL).contains(&sig) {
                *word0 |= 1u64 << (sig - 1);
            }
        }
        sigdefault.assume_init()
    };
    let flags =
        libc::POSIX_SPAWN_SETPGROUP | libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF;

    let argv: Vec<*mut libc::c_char> = args
        .argv
        .iter()
        .map(|a| a.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect();
    let envp: Vec<*mut libc::c_char> = args
        .envp
        .iter()
        .map(|e| e.as_ptr().cast_mut())
        .chain(std::iter::once(std::ptr::null_mut()))
        .collect();

    // The objects are boxed so that they never move after init: glibc does
    // not promise that they may be moved.
    let mut attr = Box::new(Attr(MaybeUninit::uninit()));
    // SAFETY: init on valid, writable storage; `attr` is destroyed by its
    // Drop only if init succeeded (otherwise we return before wrapping).
    let rc = unsafe { libc::posix_spawnattr_init(attr.0.as_mut_ptr()) };
    if rc != 0 {
        std::mem::forget(attr);
        return Err(io::Error::from_raw_os_error(rc));
    }
    let mut actions = Box::new(Actions(MaybeUninit::uninit()));
    // SAFETY: as above.
    let rc = unsafe { libc::posix_spawn_file_actions_init(actions.0.as_mut_ptr()) };
    if rc != 0 {
        std::mem::forget(actions);
        return Err(io::Error::from_raw_os_error(rc));
    }
    let a = attr.0.as_mut_ptr();
    let fa = actions.0.as_mut_ptr();
    // SAFETY: `a` and `fa` are initialised objects owned by this frame; the
    // sigsets are valid for the calls; the descriptors are open (borrowed for
    // the duration of the call, the cwd's too: glibc records only its
    // number, which the borrow keeps open until posix_spawnp has returned);
    // `cwd`, `program`, argv and envp are NUL-terminated strings kept alive
    // by `args` and the two pointer vectors, which are NULL-terminated.
    unsafe {
        check(libc::posix_spawnattr_setflags(a, flags as libc::c_short))?;
        check(libc::posix_spawnattr_setpgroup(a, 0))?;
        check(libc::posix_spawnattr_setsigmask(a, args.sigmask.as_ref()))?;
        check(libc::posix_spawnattr_setsigdefault(a, &sigdefault))?;
        match args.cwd {
            Chdir::Inherit => {}
            Chdir::Path(cwd) => {
                check(libc::posix_spawn_file_actions_addchdir_np(fa, cwd.as_ptr()))?;
            }
            Chdir::Fd(fd) => {
                check(libc::posix_spawn_file_actions_addfchdir_np(
                    fa,
                    fd.as_raw_fd(),
                ))?;
            }
        }
        for (fd, target) in args.stdio.iter().flatten().zip(0..) {
            check(libc::posix_spawn_file_actions_adddup2(
                fa,
                fd.as_raw_fd(),
                target,
            ))?;
        }
        if let Some((fd, target)) = args.extra_fd {
            check(libc::posix_spawn_file_actions_adddup2(
                fa,
                fd.as_raw_fd(),
                target,
            ))?;
        }
        if let Some(tty) = args.foreground {
            // Runs in the child after its `setpgid`, while glibc still has
            // every signal blocked there: SIGTTOU cannot stop it although
            // its new group is not yet in the foreground.
            check(libc::posix_spawn_file_actions_addtcsetpgrp_np(
                fa,
                tty.as_raw_fd(),
            ))?;
        }
        let mut pid: libc::pid_t = 0;
        check(libc::posix_spawnp(
            &mut pid,
            args.program.as_ptr(),
            fa,
            a,
            argv.as_ptr(),
            envp.as_ptr(),
        ))?;
        Ok(pid)
    }
}

/// `AsyncFd::register`: registers a descriptor-owning value with tokio's
/// reactor.
///
/// Panics if called outside a tokio runtime with IO enabled (a wiring bug,
/// caught by every test, never a runtime condition).
pub(crate) fn async_fd_register<T: std::os::fd::AsRawFd>(
    inner: T,
) -> io::Result<tokio::io::unix::AsyncFd<T>> {
    // SAFETY: `T` owns its descriptor (it closes it on drop) and the AsyncFd
    // owns `T`, so the descriptor stays open for as long as it is registered
    // and is deregistered before it is closed.
    unsafe { tokio::io::unix::AsyncFd::register(inner) }.map_err(|e| e.into_parts().1)
}
