//! The physical baselines: what the machine itself does for each figure,
//! measured from a tight Rust loop in the same run as the server.
//!
//! The spawn baselines use `std::process::Command` with no `pre_exec` hook,
//! so std takes its `posix_spawn` path (glibc: `clone(CLONE_VM|CLONE_VFORK)`):
//! the cheapest way a process can start another. Every baseline child gets
//! `/dev/null` for stdin, stdout and stderr, so no terminal or pipe of ours is
//! involved.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Error;

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
