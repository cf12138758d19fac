//! The only `unsafe` of the harness: libc calls that std does not offer.
//!
//! - [`spawn_wait`]: `posix_spawn` + `waitpid` exactly as a minimal C program
//!   writes them, for the baseline the server's spawn path is held against.
//! - [`PipedSpawner`]: the same spawn with the server's operating-system
//!   path around it and nothing else: what the server's design costs before
//!   any of its own code runs.
//! - [`process_cpu_time`]: another process's CPU time (all its threads) from
//!   its CPU-time clock, in nanoseconds; `/proc/<pid>/stat` only has 10 ms
//!   ticks, far too coarse for a few µs per request.
//! - [`set_nofile_before_exec`]: a server's descriptor limit, set in its
//!   child before `exec` (the server never changes its own).
#![expect(
    unsafe_code,
    reason = "the baseline is the bare libc call; std has no per-process CPU clock or rlimit hook"
)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

/// Spawns `argv` (`argv[0]` is the path, no `PATH` search) with
/// `posix_spawn(&pid, argv[0], NULL, NULL, argv, environ)` and waits for it
/// with `waitpid(pid, &status, 0)`; returns the raw wait status.
pub fn spawn_wait(argv: &[CString; 3]) -> io::Result<libc::c_int> {
    let ptrs: [*mut libc::c_char; 4] = [
        argv[0].as_ptr().cast_mut(),
        argv[1].as_ptr().cast_mut(),
        argv[2].as_ptr().cast_mut(),
        std::ptr::null_mut(),
    ];
    let mut pid: libc::pid_t = 0;
    // SAFETY: `ptrs` is a NULL-terminated array of pointers to NUL-terminated
    // strings that outlive the call (borrowed from `argv`); posix_spawn does
    // not write through them despite the `*mut` type. Null file actions and
    // attributes are allowed. `environ` is this process's environment, which
    // the harness never modifies (no `set_var`), so it is valid and not
    // written concurrently.
    let rc = unsafe {
        libc::posix_spawn(
            &mut pid,
            ptrs[0],
            std::ptr::null(),
            std::ptr::null(),
            ptrs.as_ptr(),
            libc::environ.cast_const(),
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `pid` is our own child, not waited for yet (nothing else in
        // the harness waits for arbitrary children); `status` is a valid
        // out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(status);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A `posix_spawn` error code (returned, not in `errno`) as a result.
fn spawn_check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid out-array of two descriptors.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded, so both are fresh descriptors nobody else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn epoll_add(epoll: &OwnedFd, fd: RawFd, events: u32) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events,
        u64: u64::try_from(fd).unwrap_or(u64::MAX),
    };
    // SAFETY: both descriptors are open; `ev` is a valid event.
    check(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) }).map(drop)
}

fn epoll_del(epoll: &OwnedFd, fd: RawFd) {
    // SAFETY: both descriptors are open; a null event is allowed for DEL.
    unsafe {
        libc::epoll_ctl(
            epoll.as_raw_fd(),
            libc::EPOLL_CTL_DEL,
            fd,
            std::ptr::null_mut(),
        )
    };
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: fcntl on an open descriptor with integer arguments.
    let flags = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(drop)
}

/// `posix_spawn` of `/bin/sh -c <cmd>` with the server's operating-system
/// path around it, on one thread, in C terms (see `init/src/spawn.rs`,
/// `init/src/sys.rs` and the job runner):
///
/// - three `O_CLOEXEC` pipes; file actions `dup2` them onto 0, 1, 2; attributes
///   `SETPGROUP` (own group), `SETSIGMASK` (empty), `SETSIGDEF` (SIGPIPE);
/// - the child's ends closed, ours made non-blocking and added to an epoll set
///   (stdin for `EPOLLOUT`, stdout/stderr for `EPOLLIN|EPOLLRDHUP`, all
///   edge-triggered, as tokio registers them);
/// - the exit seen through a descriptor in the same epoll set, then reaped
///   with `waitid`; stdout and stderr read to EOF; everything deregistered
///   and closed.
///
/// The one difference: the exit descriptor is a pidfd, not the server's
/// signalfd, because a signalfd needs SIGCHLD blocked in every thread of the
/// harness (and then in the children it starts). Both become readable at the
/// same point of the child's exit and cost one descriptor in the set; a C
/// version of both measured within 2 % of each other.
pub struct PipedSpawner {
    epoll: OwnedFd,
}

impl PipedSpawner {
    /// Creates the epoll set, once, as the server has one for its lifetime.
    pub fn new() -> io::Result<PipedSpawner> {
        // SAFETY: epoll_create1 has no memory preconditions.
        let fd = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: a fresh descriptor nobody else owns.
        Ok(PipedSpawner {
            epoll: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// One spawn of `argv` (as [`spawn_wait`]) until the child is reaped and
    /// its stdout and stderr are at EOF; returns its status encoded as
    /// `waitpid` does.
    pub fn run(&self, argv: &[CString; 3]) -> io::Result<libc::c_int> {
        let (stdin_r, stdin_w) = pipe()?;
        let (stdout_r, stdout_w) = pipe()?;
        let (stderr_r, stderr_w) = pipe()?;
        let pid = self.spawn(argv, [&stdin_r, &stdout_w, &stderr_w])?;
        drop((stdin_r, stdout_w, stderr_w));
        // SAFETY: pidfd_open on our own, not yet reaped child.
        let pidfd = check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as libc::c_int)?;
        // SAFETY: a fresh descriptor nobody else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        let et = libc::EPOLLET as u32;
        for (fd, events) in [
            (&stdin_w, libc::EPOLLOUT as u32 | et),
            (&stdout_r, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 | et),
            (&stderr_r, (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 | et),
        ] {
            set_nonblocking(fd)?;
            epoll_add(&self.epoll, fd.as_raw_fd(), events)?;
        }
        epoll_add(&self.epoll, pidfd.as_raw_fd(), libc::EPOLLIN as u32)?;
        let mut status = None;
        let mut out = Some(stdout_r);
        let mut err = Some(stderr_r);
        let mut buf = [0u8; 4096];
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        while status.is_none() || out.is_some() || err.is_some() {
            // SAFETY: `events` is a valid array of 8 entries.
            let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), 8, -1) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for ev in &events[..usize::try_from(n).unwrap_or(0)] {
                let fd = RawFd::try_from(ev.u64).unwrap_or(-1);
                if fd == pidfd.as_raw_fd() && status.is_none() {
                    // SAFETY: zeroed siginfo is a valid out-value for waitid.
                    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                    // SAFETY: `pidfd` refers to our unreaped child; `info` is valid.
                    check(unsafe {
                        libc::waitid(
                            libc::P_PIDFD,
                            pidfd.as_raw_fd() as libc::id_t,
                            &mut info,
                            libc::WEXITED,
                        )
                    })?;
                    // SAFETY: waitid filled in a CLD_* siginfo.
                    let code = unsafe { info.si_status() };
                    // Encoded as waitpid would: exit code in the second byte,
                    // or the signal in the low bits.
                    status = Some(if info.si_code == libc::CLD_EXITED {
                        code << 8
                    } else {
                        code & 0x7f
                    });
                    epoll_del(&self.epoll, pidfd.as_raw_fd());
                }
                for slot in [&mut out, &mut err] {
                    let Some(rx) = slot.as_ref() else { continue };
                    if rx.as_raw_fd() != fd {
                        continue;
                    }
                    loop {
                        // SAFETY: reading into a valid buffer of its length.
                        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
                        if r > 0 {
                            continue;
                        }
                        if r == 0 {
                            epoll_del(&self.epoll, fd);
                            *slot = None;
                        }
                        break;
                    }
                }
            }
        }
        epoll_del(&self.epoll, stdin_w.as_raw_fd());
        status.ok_or_else(|| io::Error::other("no exit status"))
    }

    fn spawn(&self, argv: &[CString; 3], stdio: [&OwnedFd; 3]) -> io::Result<libc::pid_t> {
        let ptrs: [*mut libc::c_char; 4] = [
            argv[0].as_ptr().cast_mut(),
            argv[1].as_ptr().cast_mut(),
            argv[2].as_ptr().cast_mut(),
            std::ptr::null_mut(),
        ];
        let mut actions = std::mem::MaybeUninit::<libc::posix_spawn_file_actions_t>::uninit();
        let mut attr = std::mem::MaybeUninit::<libc::posix_spawnattr_t>::uninit();
        // SAFETY: init on uninitialised storage is what these calls are for;
        // every later call gets the initialised object; both are destroyed
        // below whatever happens in between.
        unsafe {
            spawn_check(libc::posix_spawn_file_actions_init(actions.as_mut_ptr()))?;
            if let Err(e) = spawn_check(libc::posix_spawnattr_init(attr.as_mut_ptr())) {
                libc::posix_spawn_file_actions_destroy(actions.as_mut_ptr());
                return Err(e);
            }
        }
        let fa = actions.as_mut_ptr();
        let at = attr.as_mut_ptr();
        // SAFETY: `fa`/`at` are initialised (above); the descriptors are open;
        // the signal sets are initialised by sigemptyset before use; `ptrs`
        // and `environ` are as in `spawn_wait`.
        let result = unsafe {
            (|| -> io::Result<libc::pid_t> {
                for (fd, target) in stdio.iter().zip(0..) {
                    spawn_check(libc::posix_spawn_file_actions_adddup2(
                        fa,
                        fd.as_raw_fd(),
                        target,
                    ))?;
                }
                let flags = libc::POSIX_SPAWN_SETPGROUP
                    | libc::POSIX_SPAWN_SETSIGMASK
                    | libc::POSIX_SPAWN_SETSIGDEF;
                spawn_check(libc::posix_spawnattr_setflags(at, flags as libc::c_short))?;
                spawn_check(libc::posix_spawnattr_setpgroup(at, 0))?;
                let mut empty = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
                libc::sigemptyset(empty.as_mut_ptr());
                spawn_check(libc::posix_spawnattr_setsigmask(at, empty.as_ptr()))?;
                let mut def = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
                libc::sigemptyset(def.as_mut_ptr());
                libc::sigaddset(def.as_mut_ptr(), libc::SIGPIPE);
                spawn_check(libc::posix_spawnattr_setsigdefault(at, def.as_ptr()))?;
                let mut pid: libc::pid_t = 0;
                spawn_check(libc::posix_spawn(
                    &mut pid,
                    ptrs[0],
                    fa,
                    at,
                    ptrs.as_ptr(),
                    libc::environ.cast_const(),
                ))?;
                Ok(pid)
            })()
        };
        // SAFETY: both were initialised above and are destroyed once.
        unsafe {
            libc::posix_spawn_file_actions_destroy(fa);
            libc::posix_spawnattr_destroy(at);
        }
        result
    }
}

/// Makes `cmd`'s child set `RLIMIT_NOFILE` to (`soft`, `hard`) before it
/// `exec`s. Raising the hard limit needs `CAP_SYS_RESOURCE` (root); when the
/// call fails the child exits with the error instead of running with a
/// limit the caller did not ask for.
pub fn set_nofile_before_exec(cmd: &mut Command, (soft, hard): (u64, u64)) {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: the hook runs in the child between fork and exec, where only
    // async-signal-safe functions may be called: setrlimit is one (a plain
    // system call), and the closure allocates nothing and takes no lock
    // (`last_os_error` reads errno).
    unsafe {
        cmd.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
    }
}

/// CPU time consumed so far by every thread of process `pid`
/// (`clock_getcpuclockid` + `clock_gettime`).
pub fn process_cpu_time(pid: u32) -> io::Result<Duration> {
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid out-pointer; the call only reads `pid`.
    let rc = unsafe { libc::clock_getcpuclockid(pid, &mut clock) };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock` came from clock_getcpuclockid; `ts` is a valid out-pointer.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(ts.tv_nsec).unwrap_or(0);
    Ok(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_wait_returns_the_exit_status_of_the_shell() {
        let argv = |cmd: &str| -> [CString; 3] {
            [
                c"/bin/sh".into(),
                c"-c".into(),
                CString::new(cmd).unwrap_or_default(),
            ]
        };
        assert_eq!(
            spawn_wait(&argv("true")).ok().map(|s| libc::WEXITSTATUS(s)),
            Some(0)
        );
        assert_eq!(
            spawn_wait(&argv("exit 7"))
                .ok()
                .map(|s| libc::WEXITSTATUS(s)),
            Some(7)
        );
    }

    #[test]
    fn the_piped_spawner_returns_the_exit_status_and_reaps_the_child() {
        let Ok(spawner) = PipedSpawner::new() else {
            panic!("no epoll");
        };
        let argv = |cmd: &str| -> [CString; 3] {
            [
                c"/bin/sh".into(),
                c"-c".into(),
                CString::new(cmd).unwrap_or_default(),
            ]
        };
        for _ in 0..3 {
            let status = spawner.run(&argv("true"));
            assert_eq!(status.ok().map(|s| libc::WEXITSTATUS(s)), Some(0));
        }
        // Output on both streams is drained, and the exit code comes through.
        let status = spawner.run(&argv("echo out; echo err >&2; exit 3"));
        assert_eq!(status.ok().map(|s| libc::WEXITSTATUS(s)), Some(3));
    }

    #[test]
    fn cpu_time_of_this_process_grows_while_it_computes() {
        let me = std::process::id();
        let before = process_cpu_time(me).unwrap_or_default();
        let mut x = 0u64;
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        let after = process_cpu_time(me).unwrap_or_default();
        assert!(after > before, "{before:?} → {after:?}");
    }

    #[test]
    fn cpu_time_of_a_reaped_child_is_an_error() {
        let Ok(mut child) = std::process::Command::new("true").spawn() else {
            panic!("cannot spawn true");
        };
        let pid = child.id();
        assert!(child.wait().is_ok());
        assert!(process_cpu_time(pid).is_err());
    }
}
