//! The only `unsafe` of the harness: two libc calls that std does not offer.
//!
//! - [`spawn_wait`]: `posix_spawn` + `waitpid` exactly as a minimal C program
//!   writes them, for the baseline the server's spawn path is held against.
//! - [`process_cpu_time`]: another process's CPU time (all its threads) from
//!   its CPU-time clock, in nanoseconds; `/proc/<pid>/stat` only has 10 ms
//!   ticks, far too coarse for a few µs per request.
#![expect(
    unsafe_code,
    reason = "the baseline is the bare libc call; std has no per-process CPU clock"
)]

use std::ffi::CString;
use std::io;
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
