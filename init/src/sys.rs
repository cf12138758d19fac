//! The only module of the init crate that uses `unsafe`.
//!
//! Each function is a thin wrapper around one libc call (or one raw system
//! call), named after it, for what `nix`/`rustix` do not offer safely: raw
//! signal numbers including real-time ones (`kill`), close-on-exec by range
//! (`close_range`, `fcntl`), glibc's allocator knobs (`mallopt`,
//! `malloc_trim`), `posix_spawnp` (with `chdir`/`fchdir`/`tcsetpgrp` file
//! actions; init mode's main command), `clone(CLONE_VM | CLONE_VFORK)` with
//! a child that makes only raw system calls (every job), `waitpid` of such a
//! child whose set-up failed, `tcgetpgrp`, and tokio's `AsyncFd::register`. The
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
    /// `stdio` (a job's shell-session state pipe).
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

/// One `prlimit64` the [`clone_vfork`] child applies to itself.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rlimit {
    /// `RLIMIT_*`.
    pub(crate) resource: u32,
    /// The soft limit.
    pub(crate) soft: u64,
    /// The hard limit.
    pub(crate) hard: u64,
}

/// The identity the [`clone_vfork`] child takes before `exec`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Creds<'a> {
    /// Real, effective and saved user id.
    pub(crate) uid: u32,
    /// Real, effective and saved group id.
    pub(crate) gid: u32,
    /// Supplementary groups (replacing ours).
    pub(crate) groups: &'a [u32],
}

/// Which step of the [`clone_vfork`] child failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChildStep {
    /// `setpgid(0, 0)`.
    Setpgid,
    /// `setsid()` (a terminal job).
    Setsid,
    /// `ioctl(TIOCSCTTY)` on the terminal job's slave.
    Controlling,
    /// Writing `/proc/self/oom_score_adj`.
    OomScoreAdj,
    /// `prlimit64` of this resource.
    Rlimit(u32),
    /// `setgroups`.
    Setgroups,
    /// `setresgid`.
    Setgid,
    /// `setresuid`.
    Setuid,
    /// `chdir`/`fchdir`.
    Chdir,
    /// `dup3`/`fcntl` of the child's descriptors.
    Dup,
    /// `execve` of every candidate.
    Exec,
}

/// Everything the [`clone_vfork`] child does, prepared by the parent: the
/// child only reads it and makes system calls.
pub(crate) struct ChildPlan<'a> {
    /// Paths to `execve` in order (the `PATH` lookup is done already); the
    /// first that is not "not found" decides.
    pub(crate) programs: &'a [CString],
    /// NULL-terminated argv pointers into strings that outlive the call.
    pub(crate) argv: &'a [*const libc::c_char],
    /// NULL-terminated environment pointers, likewise.
    pub(crate) envp: &'a [*const libc::c_char],
    /// Directory to change to.
    pub(crate) cwd: Chdir<'a>,
    /// `(from, to)` descriptor copies, in order (stdio first, then any
    /// descriptor a caller keeps open at a fixed number); `from == to`
    /// clears close-on-exec instead, as `posix_spawn_file_actions_adddup2`.
    pub(crate) dup2: &'a [(i32, i32)],
    /// The child's signal mask (signal n at bit n-1).
    pub(crate) sigmask: u64,
    /// Signals reset to `SIG_DFL` whatever they are now (bit n-1).
    pub(crate) sigdefault: u64,
    /// Decimal text written to `/proc/self/oom_score_adj`, when set.
    pub(crate) oom_score_adj: Option<&'a [u8]>,
    /// Resource limits.
    pub(crate) rlimits: &'a [Rlimit],
    /// The identity to take.
    pub(crate) creds: Option<Creds<'a>>,
    /// A terminal job's slave: the child calls `setsid` instead of
    /// `setpgid` (a new session whose id, like its group's, is its pid)
    /// and makes this descriptor its controlling terminal (`TIOCSCTTY`)
    /// before the descriptor copies put it on 0, 1 and 2.
    pub(crate) terminal: Option<i32>,
}

/// A signal set as the kernel's 64-bit mask (signal n at bit n-1).
pub(crate) fn sigset_bits(set: &SigSet) -> u64 {
    let raw: &libc::sigset_t = set.as_ref();
    // SAFETY: on Linux a sigset_t is an array of unsigned longs (128 bytes in
    // glibc) with signal n at bit n-1 of word 0 for n <= 64; word 0 is in bounds.
    unsafe { *(raw as *const libc::sigset_t).cast::<u64>() }
}

/// What the parent and the [`clone_vfork`] child share (`CLONE_VM`).
struct Shared<'a> {
    plan: &'a ChildPlan<'a>,
    /// Set by the child when a step failed: which, and the errno.
    failed: Option<(ChildStep, i32)>,
}

/// The [`clone_vfork`] child's stack. The child runs only `child_steps`: a
/// few frames of raw system calls.
const CHILD_STACK: usize = 64 * 1024;

/// `clone(CLONE_VM | CLONE_VFORK | SIGCHLD)`: starts a child that shares our
/// memory and runs [`ChildPlan`] (signal dispositions reset, new process
/// group, `oom_score_adj`, resource limits, groups, gid, uid, working
/// directory, descriptors, signal mask, `execve`; a terminal job's child
/// `setsid` and `TIOCSCTTY` in place of `setpgid`) with raw system calls only,
/// while this thread is suspended by the kernel until the child has
/// executed or exited. This is what glibc's `posix_spawn` does, with the set-up
/// steps `posix_spawn` lacks. Every signal is blocked in this thread around
/// the clone, so that no handler of ours can run in the child (which shares
/// our memory) before it has reset the dispositions.
///
/// On a failed step the child exits with 127 and the error comes back with
/// its step; the caller must then reap the child (it holds the reaper's lock,
/// see [`waitpid_blocking`]).
pub(crate) fn clone_vfork(plan: &ChildPlan<'_>) -> Result<i32, (ChildStep, i32, Option<i32>)> {
    extern "C" fn entry(arg: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `arg` is the `Shared` of `clone_vfork`, whose frame is
        // alive and suspended until this child executes or exits
        // (CLONE_VFORK); nobody else touches it meanwhile.
        let shared = unsafe { &mut *arg.cast::<Shared<'_>>() };
        let failure = child_steps(shared.plan);
        shared.failed = Some(failure);
        // SAFETY: exit_group ends only this child (it is its own thread
        // group: no CLONE_THREAD); it never returns.
        unsafe { libc::syscall(libc::SYS_exit_group, 127) };
        127
    }

    let mut shared = Shared { plan, failed: None };
    let mut stack = vec![0u128; CHILD_STACK / 16];
    let all: u64 = !0;
    let mut old: u64 = 0;
    // SAFETY: the raw rt_sigprocmask only changes this thread's mask (all
    // signals, glibc's internal ones included, as glibc's posix_spawn does);
    // both pointers are to valid 8-byte words.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &all as *const u64,
            &mut old as *mut u64,
            8usize,
        );
    }
    // SAFETY: the stack is a live, writable allocation of CHILD_STACK bytes,
    // 16-byte aligned at its top (clone wants the highest address); it and
    // `shared` outlive the child's use of them, because CLONE_VFORK suspends
    // us until the child has executed or exited. The child runs `entry`,
    // which only makes raw system calls (no allocation, no lock, no TLS but
    // errno, which is this suspended thread's), with every signal blocked.
    let pid = unsafe {
        let top = stack.as_mut_ptr().add(stack.len()).cast::<libc::c_void>();
        libc::clone(
            entry,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut shared as *mut Shared<'_>).cast(),
        )
    };
    let clone_errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
    // SAFETY: restores this thread's previous mask; pointer to a valid word.
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &old as *const u64,
            std::ptr::null_mut::<u64>(),
            8usize,
        );
    }
    drop(stack);
    if pid < 0 {
        return Err((ChildStep::Exec, clone_errno, None));
    }
    match shared.failed {
        None => Ok(pid),
        Some((step, errno)) => Err((step, errno, Some(pid))),
    }
}

/// What [`wait4_any`] reaped.
pub(crate) struct Waited {
    /// The child.
    pub(crate) pid: i32,
    /// Its raw wait status.
    pub(crate) status: i32,
    /// Its user + system CPU time (its own, and that of the descendants it
    /// waited for).
    pub(crate) cpu: std::time::Duration,
}

/// `wait4(-1, &status, WNOHANG, &usage)`: reaps any child that has exited,
/// with its resource usage. `Ok(None)`: children exist, none has exited.
pub(crate) fn wait4_any() -> io::Result<Option<Waited>> {
    let mut status = 0;
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: wait4 writes only `status` and `usage`, both valid and
    // writable for the call; a zeroed rusage is a valid value.
    let pid = unsafe { libc::wait4(-1, &mut status, libc::WNOHANG, usage.as_mut_ptr()) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        return Ok(None);
    }
    // SAFETY: zero-initialised, and filled by the kernel on success.
    let usage = unsafe { usage.assume_init() };
    let time = |t: libc::timeval| {
        std::time::Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + std::time::Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    Ok(Some(Waited {
        pid,
        status,
        cpu: time(usage.ru_utime) + time(usage.ru_stime),
    }))
}

/// `waitpid(pid, 0)`: reaps one child that has exited or is about to (a
/// [`clone_vfork`] child whose set-up failed). Retries on `EINTR`.
pub(crate) fn waitpid_blocking(pid: i32) {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes only `status`, a valid int.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// The errno of the last failed raw system call of this thread (in the
/// [`clone_vfork`] child: the suspended parent thread's errno word, which it
/// shares).
fn errno() -> i32 {
    // SAFETY: __errno_location returns this thread's errno address, always valid.
    unsafe { *libc::__errno_location() }
}

/// A raw system call that returns 0 or -1; `Err(errno)` on failure.
macro_rules! raw {
    ($($arg:expr),+ $(,)?) => {{
        // SAFETY (for every use): the arguments are integers or pointers to
        // live data of the plan, prepared and NUL-terminated by the parent.
        let rc = unsafe { libc::syscall($($arg),+) };
        if rc < 0 { Err(errno()) } else { Ok(rc) }
    }};
}

/// The kernel's x86_64 `struct sigaction`.
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

/// The child's side of [`clone_vfork`]: raw system calls only. Returns only
/// on failure, with the step and errno.
fn child_steps(plan: &ChildPlan<'_>) -> (ChildStep, i32) {
    // Dispositions first: no handler of the parent's may run here. As glibc's
    // posix_spawn child: `sigdefault` → SIG_DFL; glibc's internal signals
    // (32, 33) → SIG_IGN otherwise; any other signal with a handler → SIG_DFL.
    for sig in 1..=MAX_SIGNAL {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        let new = if plan.sigdefault & (1u64 << (sig - 1)) != 0 {
            libc::SIG_DFL
        } else if sig == 32 || sig == 33 {
            libc::SIG_IGN
        } else {
            let mut old = KernelSigaction {
                handler: 0,
                flags: 0,
                restorer: 0,
                mask: 0,
            };
            let null = std::ptr::null::<KernelSigaction>();
            if raw!(
                libc::SYS_rt_sigaction,
                sig,
                null,
                &mut old as *mut KernelSigaction,
                8usize
            )
            .is_err()
                || old.handler == libc::SIG_DFL
                || old.handler == libc::SIG_IGN
            {
                continue;
            }
            libc::SIG_DFL
        };
        let act = KernelSigaction {
            handler: new,
            flags: 0,
            restorer: 0,
            mask: 0,
        };
        let null = std::ptr::null_mut::<KernelSigaction>();
        let _ = raw!(
            libc::SYS_rt_sigaction,
            sig,
            &act as *const KernelSigaction,
            null,
            8usize
        );
    }
    match plan.terminal {
        None => {
            if let Err(e) = raw!(libc::SYS_setpgid, 0, 0) {
                return (ChildStep::Setpgid, e);
            }
        }
        Some(slave) => {
            // setsid also makes the child its group's leader (pgid = pid),
            // so a group kill reaches the job as it reaches a pipe job.
            if let Err(e) = raw!(libc::SYS_setsid) {
                return (ChildStep::Setsid, e);
            }
            // A new session has no controlling terminal: this one becomes
            // it, and the child's group its foreground group.
            if let Err(e) = raw!(libc::SYS_ioctl, slave, libc::TIOCSCTTY, 0) {
                return (ChildStep::Controlling, e);
            }
        }
    }
    // Before the identity changes: once it has, /proc/self belongs to root
    // (the process is no longer dumpable) and the write would be refused.
    if let Some(text) = plan.oom_score_adj {
        let path = c"/proc/self/oom_score_adj";
        let fd = match raw!(
            libc::SYS_openat,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC
        ) {
            Ok(fd) => fd,
            Err(e) => return (ChildStep::OomScoreAdj, e),
        };
        let written = raw!(libc::SYS_write, fd, text.as_ptr(), text.len());
        let _ = raw!(libc::SYS_close, fd);
        if let Err(e) = written {
            return (ChildStep::OomScoreAdj, e);
        }
    }
    for limit in plan.rlimits {
        let new = [limit.soft, limit.hard];
        let null = std::ptr::null_mut::<u64>();
        if let Err(e) = raw!(libc::SYS_prlimit64, 0, limit.resource, new.as_ptr(), null) {
            return (ChildStep::Rlimit(limit.resource), e);
        }
    }
    if let Some(creds) = plan.creds {
        // Groups, then gid, then uid: each later step needs the privilege
        // that the uid change gives up. Raw calls change only this thread's
        // credentials, and this child is a single thread.
        if let Err(e) = raw!(
            libc::SYS_setgroups,
            creds.groups.len(),
            creds.groups.as_ptr()
        ) {
            return (ChildStep::Setgroups, e);
        }
        if let Err(e) = raw!(libc::SYS_setresgid, creds.gid, creds.gid, creds.gid) {
            return (ChildStep::Setgid, e);
        }
        if let Err(e) = raw!(libc::SYS_setresuid, creds.uid, creds.uid, creds.uid) {
            return (ChildStep::Setuid, e);
        }
    }
    // After the identity change (the user must be able to enter it), before
    // the dups (a directory descriptor below 3 is used before a dup replaces it).
    let chdir = match plan.cwd {
        Chdir::Inherit => Ok(0),
        Chdir::Path(path) => raw!(libc::SYS_chdir, path.as_ptr()),
        Chdir::Fd(fd) => {
            use std::os::fd::AsRawFd;
            raw!(libc::SYS_fchdir, fd.as_raw_fd())
        }
    };
    if let Err(e) = chdir {
        return (ChildStep::Chdir, e);
    }
    for &(from, to) in plan.dup2 {
        let done = if from == to {
            raw!(libc::SYS_fcntl, to, libc::F_SETFD, 0)
        } else {
            raw!(libc::SYS_dup3, from, to, 0)
        };
        if let Err(e) = done {
            return (ChildStep::Dup, e);
        }
    }
    let null = std::ptr::null_mut::<u64>();
    let _ = raw!(
        libc::SYS_rt_sigprocmask,
        libc::SIG_SETMASK,
        &plan.sigmask as *const u64,
        null,
        8usize
    );
    // execvp's rules (glibc's posix_spawnp): go on past "not found" and
    // "permission denied" (remembered), stop at any other error.
    let mut error = libc::ENOENT;
    let mut eacces = false;
    for program in plan.programs {
        let Err(e) = raw!(
            libc::SYS_execve,
            program.as_ptr(),
            plan.argv.as_ptr(),
            plan.envp.as_ptr()
        ) else {
            continue;
        };
        error = e;
        match e {
            libc::EACCES => eacces = true,
            libc::ENOENT | libc::ESTALE | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT => {}
            _ => return (ChildStep::Exec, e),
        }
    }
    (ChildStep::Exec, if eacces { libc::EACCES } else { error })
}
