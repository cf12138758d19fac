//! The physical baselines: what the machine itself does for each figure,
//! measured from a tight Rust loop in the same run as the server.
//!
//! Most spawn baselines use `std::process::Command` with no `pre_exec` hook,
//! so std takes its `posix_spawn` path (glibc: `clone(CLONE_VM|CLONE_VFORK)`);
//! those children get `/dev/null` for stdin, stdout and stderr, so no
//! terminal or pipe of ours is involved. [`PosixSpawn`] is the bare libc call
//! with nothing of std around it: the cheapest way a process can start
//! another, and the baseline of the `rtt_spawn` figure.

use std::ffi::CString;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::stats::Samples;
use crate::{Error, sys};

fn quiet(cmd: &mut Command) -> &mut Command {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
}

fn run(cmd: &mut Command, what: &str) -> Result<Duration, Error> {
    let t0 = Instant::now();
    let status = quiet(cmd)
        .status()
        .map_err(|e| Error(format!("{what}: {e}")))?;
    let took = t0.elapsed();
    if !status.success() {
        return Err(Error(format!("{what}: exited with {status}")));
    }
    Ok(took)
}

/// Spawn → exit of a trivial run of a static binary: `<binary> --version`.
pub fn startup(binary: &Path) -> Result<Duration, Error> {
    run(
        Command::new(binary).arg("--version"),
        "baseline startup (--version)",
    )
}

/// One spawn + exec + wait of `sh -c true`.
pub fn spawn_true() -> Result<Duration, Error> {
    run(
        Command::new("sh").args(["-c", "true"]),
        "baseline spawn (sh -c true)",
    )
}

/// `head -c <bytes> /dev/zero | cat >/dev/null`: the raw pipe.
pub fn pipe(bytes: u64) -> Result<Duration, Error> {
    run(
        Command::new("sh").args(["-c", &format!("head -c {bytes} /dev/zero | cat >/dev/null")]),
        "baseline pipe",
    )
}

/// `jobs` spawns of `sh -c true`, all started before any is waited for, then
/// all waited for: the machine's jobs/s for the same burst.
pub fn burst(jobs: usize) -> Result<Duration, Error> {
    let t0 = Instant::now();
    let mut children: Vec<Child> = Vec::with_capacity(jobs);
    for _ in 0..jobs {
        let child = quiet(Command::new("sh").args(["-c", "true"]))
            .spawn()
            .map_err(|e| Error(format!("baseline burst: {e}")))?;
        children.push(child);
    }
    for mut child in children {
        let status = child
            .wait()
            .map_err(|e| Error(format!("baseline burst: {e}")))?;
        if !status.success() {
            return Err(Error(format!("baseline burst: a job exited with {status}")));
        }
    }
    Ok(t0.elapsed())
}

/// `posix_spawn` + `waitpid` of `/bin/sh -c true`, called straight into libc
/// the way a minimal C program does it (see [`crate::sys::spawn_wait`]): no
/// attributes, no file actions, the caller's environment and stdio. This is
/// the spawn loop the 1.3× target compares the server against; std's
/// `Command` (see [`spawn_true`]) does more per spawn (a CLOEXEC pipe to report
/// exec errors, `/dev/null` opens, signal-mask handling), so it is a slower,
/// easier baseline.
pub struct PosixSpawn {
    argv: [CString; 3],
}

/// The argument strings are made once, as a C program would have them static.
impl Default for PosixSpawn {
    fn default() -> PosixSpawn {
        PosixSpawn {
            argv: [c"/bin/sh".into(), c"-c".into(), c"true".into()],
        }
    }
}

impl PosixSpawn {
    /// The spawn of `/bin/sh -c command` instead of `sh -c true`.
    pub fn of(command: &str) -> Result<PosixSpawn, Error> {
        let command = CString::new(command)
            .map_err(|_| Error(format!("baseline command {command:?} holds a NUL")))?;
        Ok(PosixSpawn {
            argv: [c"/bin/sh".into(), c"-c".into(), command],
        })
    }

    /// One spawn + wait; the time from just before `posix_spawn` to the return
    /// of `waitpid`.
    pub fn run(&self) -> Result<Duration, Error> {
        let t0 = Instant::now();
        let status = sys::spawn_wait(&self.argv).map_err(|e| {
            Error(format!(
                "baseline posix_spawn of sh -c {:?}: {e}",
                self.argv[2]
            ))
        })?;
        let took = t0.elapsed();
        exited_zero(status, "posix_spawn", &self.argv[2])?;
        Ok(took)
    }

    /// The same spawn with the server's operating-system path around it (see
    /// [`sys::PipedSpawner`]): the time from just before the first `pipe2` to
    /// the child reaped and both output pipes at EOF.
    pub fn run_piped(&self, spawner: &sys::PipedSpawner) -> Result<Duration, Error> {
        let t0 = Instant::now();
        let status = spawner.run(&self.argv).map_err(|e| {
            Error(format!(
                "baseline piped posix_spawn of sh -c {:?}: {e}",
                self.argv[2]
            ))
        })?;
        let took = t0.elapsed();
        exited_zero(status, "piped posix_spawn", &self.argv[2])?;
        Ok(took)
    }
}

fn exited_zero(status: libc::c_int, what: &str, command: &CString) -> Result<(), Error> {
    if status == 0 {
        Ok(())
    } else {
        Err(Error(format!(
            "baseline {what}: sh -c {command:?} ended with wait status {status:#x}"
        )))
    }
}

/// `jobs` spawns of `/bin/sh -c true` by `slots` threads, each a loop of
/// `posix_spawn` + `waitpid` (as [`PosixSpawn::run`]) taking the next job
/// until none is left: a job queue with `slots` running at once, in C terms.
/// Returns the wall time of the whole.
pub fn parallel_spawns(slots: usize, jobs: usize) -> Result<Duration, Error> {
    parallel_spawns_of(&PosixSpawn::default(), slots, jobs)
}

/// [`parallel_spawns`] of `spawn`'s command: `jobs` spawns by `slots`
/// threads (with `slots == jobs`, all of them at once); the wall time.
pub fn parallel_spawns_of(
    spawn: &PosixSpawn,
    slots: usize,
    jobs: usize,
) -> Result<Duration, Error> {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let next = AtomicUsize::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| -> Result<(), Error> {
        let loops: Vec<_> = (0..slots.max(1))
            .map(|_| {
                s.spawn(|| -> Result<(), Error> {
                    while next.fetch_add(1, Ordering::Relaxed) < jobs {
                        spawn.run()?;
                    }
                    Ok(())
                })
            })
            .collect();
        for l in loops {
            l.join()
                .map_err(|_| Error("baseline spawn loop panicked".into()))??;
        }
        Ok(())
    })?;
    Ok(t0.elapsed())
}

/// [`parallel_spawns`] with every spawn's own time kept: `jobs` spawns of
/// `/bin/sh -c true` by `slots` threads, each a `posix_spawn` + `waitpid`
/// loop. Returns the wall time of the whole and each spawn's time (ms), the
/// latency a caller of such a loop sees under that much parallelism.
pub fn parallel_spawn_times(slots: usize, jobs: usize) -> Result<(Duration, Samples), Error> {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let spawn = PosixSpawn::default();
    let next = AtomicUsize::new(0);
    let t0 = Instant::now();
    let times = std::thread::scope(|s| -> Result<Vec<Duration>, Error> {
        let loops: Vec<_> = (0..slots.max(1))
            .map(|_| {
                s.spawn(|| -> Result<Vec<Duration>, Error> {
                    let mut mine = Vec::new();
                    while next.fetch_add(1, Ordering::Relaxed) < jobs {
                        mine.push(spawn.run()?);
                    }
                    Ok(mine)
                })
            })
            .collect();
        let mut all = Vec::with_capacity(jobs);
        for l in loops {
            all.extend(
                l.join()
                    .map_err(|_| Error("baseline spawn loop panicked".into()))??,
            );
        }
        Ok(all)
    })?;
    let wall = t0.elapsed();
    let mut samples = Samples::default();
    for t in times {
        samples.push_ms(t);
    }
    Ok((wall, samples))
}
