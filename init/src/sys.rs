//! The only module of the init crate that uses `unsafe`.
//!
//! Everything here is a thin wrapper around one libc call whose safe
//! equivalent is missing from `nix`/`rustix` (raw signal numbers, including
//! real-time ones; querying a disposition without changing it; marking
//! inherited descriptors close-on-exec), plus the `pre_exec` hook that runs in
//! the forked child. Every block names the invariant it relies on.
#![expect(unsafe_code, reason = "the one module that talks to libc directly")]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::BorrowedFd;

use nix::libc;
use nix::sys::signal::SigSet;

/// Highest signal number the kernel knows on Linux (`SIGRTMAX`).
pub(crate) const MAX_SIGNAL: i32 = 64;

/// The signal state the process had when it started, restored in every job.
///
/// Only the mask needs recording: dispositions are inherited by `posix_spawn`
/// unchanged, and the server never changes any (it installs no handlers), so
/// the ignored set a job gets is the one the server started with. The one
/// exception is SIGPIPE, which Rust's runtime sets to `SIG_IGN` before `main`
/// (its original disposition is unknowable); jobs get its default.
#[derive(Clone, Copy)]
pub(crate) struct Origin {
    /// The signal mask of the main thread before the init layer blocked anything.
    pub(crate) mask: SigSet,
    /// Whether glibc's internal signals 32 and 33 were ignored at start.
    /// glibc's `posix_spawn` child sets them to `SIG_IGN` unless they are in
    /// the reset-to-default set, so their start-up state is recorded to be
    /// put back exactly.
    pub(crate) internal_ignored: [bool; 2],
}

/// glibc's internal real-time signals (SIGCANCEL, SIGSETXID).
const GLIBC_INTERNAL: [i32; 2] = [32, 33];

/// Reads the current signal mask and the dispositions of signals 32 and 33.
pub(crate) fn capture_origin() -> Origin {
    let mask = SigSet::thread_get_mask().unwrap_or_else(|_| SigSet::empty());
    Origin {
        mask,
        internal_ignored: GLIBC_INTERNAL.map(kernel_disposition_is_ignore),
    }
}

/// Queries a disposition with the raw `rt_sigaction` syscall: glibc's
/// `sigaction` refuses signals 32 and 33.
fn kernel_disposition_is_ignore(sig: i32) -> bool {
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

/// Fixes glibc malloc's thresholds at 128 KiB (its defaults' starting point).
///
/// By default glibc raises the mmap threshold to the size of every large block
/// that is freed (up to 32 MiB), so after one big response all later big
/// buffers come from the heap, and the heap is only trimmed from its top: a
/// 256 MiB capture left ~45 MiB resident while idle. Fixing the thresholds
/// keeps big buffers in their own mappings, returned to the kernel on free.
/// Called before any thread exists.
pub(crate) fn tune_malloc() {
    const THRESHOLD: libc::c_int = 128 * 1024;
    // SAFETY: mallopt only sets allocator parameters; it is called from
    // `prepare`, before any other thread could be allocating.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, THRESHOLD);
    }
}

/// Returns free heap memory to the kernel (`malloc_trim(0)`): glibc keeps
/// freed blocks of every thread's arena otherwise, so a burst of jobs would
/// leave the idle server several MiB larger than before it.
pub(crate) fn trim_heap() {
    // SAFETY: malloc_trim only releases memory that is free; it is
    // thread-safe (it locks each arena).
    unsafe { libc::malloc_trim(0) };
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

/// What [`posix_spawn`] starts.
pub(crate) struct SpawnArgs<'a> {
    /// The program, looked up in `PATH` when it has no `/`.
    pub(crate) program: &'a CStr,
    /// Its argv (argv[0] included).
    pub(crate) argv: &'a [CString],
    /// Its complete environment (`NAME=value`).
    pub(crate) envp: &'a [&'a CStr],
    /// Directory to change to in the child.
    pub(crate) cwd: Option<&'a CStr>,
    /// Descriptors that become the child's 0, 1 and 2.
    pub(crate) stdio: [BorrowedFd<'a>; 3],
    /// The signal state to give the child.
    pub(crate) origin: Origin,
}

/// Starts a child with glibc's `posix_spawnp` (a `CLONE_VM|CLONE_VFORK`
/// clone: no copy of the server's page tables, unlike `fork`).
///
/// The child gets a new process group (`POSIX_SPAWN_SETPGROUP`, pgid = its
/// pid), the signal mask the server started with (`SETSIGMASK`: the server's
/// own mask blocks everything it reads from its signalfd, and that must not
/// leak into jobs), SIGPIPE reset to default (`SETSIGDEF`: Rust's runtime set
/// it to `SIG_IGN`); every other disposition is inherited unchanged, so what
/// was ignored at start stays ignored and nothing else is (the server installs
/// no handlers). `stdio` is dup'ed onto 0/1/2; every other descriptor of the
/// server is close-on-exec. An exec failure comes back as the error, after
/// glibc has reaped the failed child (the caller holds the reaper's lock).
pub(crate) fn posix_spawn(args: &SpawnArgs<'_>) -> io::Result<i32> {
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

    // Reset to default in the child: SIGPIPE (see `Origin`), and glibc's
    // internal signals unless they were ignored at start (glibc's spawn child
    // would otherwise leave them `SIG_IGN` across exec).
    let mut sigdefault = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set. glibc's sigaddset refuses its
    // internal signals, so their bits are set directly: on Linux a sigset_t
    // is an array of unsigned longs with signal n at bit n-1 of word 0 for
    // n <= 64, and the set is at least one word long.
    let sigdefault = unsafe {
        libc::sigemptyset(sigdefault.as_mut_ptr());
        libc::sigaddset(sigdefault.as_mut_ptr(), libc::SIGPIPE);
        let word0 = sigdefault.as_mut_ptr().cast::<u64>();
        for (sig, ignored) in GLIBC_INTERNAL.into_iter().zip(args.origin.internal_ignored) {
            if !ignored {
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
    // the duration of the call); `cwd`, `program`, argv and envp are
    // NUL-terminated strings kept alive by `args` and the two pointer
    // vectors, which are NULL-terminated.
    unsafe {
        check(libc::posix_spawnattr_setflags(a, flags as libc::c_short))?;
        check(libc::posix_spawnattr_setpgroup(a, 0))?;
        check(libc::posix_spawnattr_setsigmask(
            a,
            args.origin.mask.as_ref(),
        ))?;
        check(libc::posix_spawnattr_setsigdefault(a, &sigdefault))?;
        for (fd, target) in args.stdio.iter().zip(0..) {
            check(libc::posix_spawn_file_actions_adddup2(
                fa,
                fd.as_raw_fd(),
                target,
            ))?;
        }
        if let Some(cwd) = args.cwd {
            check(libc::posix_spawn_file_actions_addchdir_np(fa, cwd.as_ptr()))?;
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
