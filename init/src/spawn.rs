//! Starting jobs: `$SHELL -c <command>` (or an argv) in a new process group,
//! with three pipes, and registration with the reaper.
//!
//! The child gets: a new process group whose id is its pid; stdin, stdout and
//! stderr as pipes whose other ends the caller owns (never the server's own
//! stdio); no other descriptor (std opens everything `O_CLOEXEC` and start-up
//! marked inherited ones close-on-exec); the signal mask and ignored set the
//! server started with (see `sys::restore_signals_in_child`); `cwd` as given or
//! the server's; the server's environment with `env` layered on top.
//!
//! Failures to start (bad cwd, missing shell, exec error) are returned as a
//! [`SpawnError`] whose text reads like the Go reference's
//! (`chdir /x: no such file or directory`), never as a panic.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use tokio::sync::oneshot;

use crate::reaper::ExitWatch;
use crate::{Init, Pid};

/// What to run.
#[derive(Debug, Clone)]
pub enum Program {
    /// `$SHELL -c <command>`; `/bin/sh` when `SHELL` is unset or empty.
    Shell(String),
    /// An explicit argv (first element is the program, looked up in `PATH`).
    Argv(Vec<OsString>),
}

/// A job to start.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// The program.
    pub program: Program,
    /// Working directory; `None` = the server's.
    pub cwd: Option<PathBuf>,
    /// Variables layered over the server's environment.
    pub env: Vec<(OsString, OsString)>,
}

impl SpawnSpec {
    /// `$SHELL -c command` with the server's cwd and environment.
    pub fn shell(command: impl Into<String>) -> SpawnSpec {
        SpawnSpec {
            program: Program::Shell(command.into()),
            cwd: None,
            env: Vec::new(),
        }
    }
}

/// A started child.
#[derive(Debug)]
pub struct Spawned {
    /// Its pid, which is also its process-group id.
    pub pid: Pid,
    /// Write end of its stdin.
    pub stdin: OwnedFd,
    /// Read end of its stdout.
    pub stdout: OwnedFd,
    /// Read end of its stderr.
    pub stderr: OwnedFd,
    /// Resolves when the reaper has reaped it.
    pub exit: ExitWatch,
}

/// Why a job could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The working directory is unusable.
    #[error("chdir {path}: {reason}")]
    Chdir {
        /// The directory asked for.
        path: String,
        /// Lower-case errno text.
        reason: String,
    },
    /// fork/exec failed.
    #[error("fork/exec {program}: {reason}")]
    Exec {
        /// The program that could not be started.
        program: String,
        /// Lower-case errno text.
        reason: String,
    },
    /// A pipe end was missing after spawn (cannot happen with `Stdio::piped`).
    #[error("spawn: missing pipe for {0}")]
    MissingPipe(&'static str),
}

/// The text of an errno in the style of Go's `syscall.Errno.Error()`.
fn errno_text(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let s = nix::errno::Errno::from_raw(n).desc();
            let mut chars = s.chars();
            match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => s.to_owned(),
            }
        }
        None => e.to_string(),
    }
}

impl Init {
    /// Starts a job and registers it with the reaper.
    ///
    /// The registry lock is held across fork+exec+insert so that the reaper
    /// cannot reap the child before its status has somewhere to go (the
    /// reaper's module doc explains the race this closes).
    pub fn spawn(&self, spec: &SpawnSpec) -> Result<Spawned, SpawnError> {
        let (program, mut cmd) = match &spec.program {
            Program::Shell(command) => {
                let shell = std::env::var_os("SHELL")
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| OsString::from("/bin/sh"));
                let mut cmd = Command::new(&shell);
                cmd.arg("-c").arg(command);
                (shell, cmd)
            }
            Program::Argv(argv) => {
                let Some((first, rest)) = argv.split_first() else {
                    return Err(SpawnError::Exec {
                        program: String::new(),
                        reason: "empty argv".into(),
                    });
                };
                let mut cmd = Command::new(first);
                cmd.args(rest);
                (first.clone(), cmd)
            }
        };
        if let Some(cwd) = &spec.cwd {
            // Checked here so the error can name the directory: the child's
            // chdir failure would only come back as a bare errno.
            match std::fs::metadata(cwd) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(SpawnError::Chdir {
                        path: cwd.display().to_string(),
                        reason: "not a directory".into(),
                    });
                }
                Err(e) => {
                    return Err(SpawnError::Chdir {
                        path: cwd.display().to_string(),
                        reason: errno_text(&e),
                    });
                }
            }
            cmd.current_dir(cwd);
        }
        cmd.envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        crate::sys::restore_signals_in_child(&mut cmd, self.shared.origin);

        let mut registry = self.shared.reaper.lock();
        let mut child = cmd.spawn().map_err(|e| SpawnError::Exec {
            program: program.to_string_lossy().into_owned(),
            reason: errno_text(&e),
        })?;
        let raw = i32::try_from(child.id()).unwrap_or(i32::MAX);
        let (tx, rx) = oneshot::channel();
        registry.insert(raw, tx);
        drop(registry);

        // `child` is dropped below without waiting: only the reaper waits.
        let stdin = child.stdin.take().ok_or(SpawnError::MissingPipe("stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or(SpawnError::MissingPipe("stdout"))?;
        let stderr = child
            .stderr
            .take()
            .ok_or(SpawnError::MissingPipe("stderr"))?;
        Ok(Spawned {
            pid: Pid(raw),
            stdin: stdin.into(),
            stdout: stdout.into(),
            stderr: stderr.into(),
            exit: ExitWatch(rx),
        })
    }
}
