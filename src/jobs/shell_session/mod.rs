//! Shell sessions (docs/tools.md, "Shell sessions"): named, serial lanes
//! of jobs that share a working directory and exported environment,
//! carried from one job's shell to the next.
//!
//! A session is not a long-lived shell: each `command` job of a session runs
//! in a fresh `$SHELL -c` whose command line is [`wrap`]ped. The wrapper runs
//! the caller's command and then an epilogue that writes the shell's final
//! `pwd` and `export -p` (builtins only: no `env` process per job, no `PATH`
//! dependence) between a start and an end marker to descriptor
//! [`STATE_FD`], a pipe only the server reads. The runner reads that pipe
//! while the job runs, and when the shell exited on its own (any status; not
//! signalled, not timed out) with the stream intact, the session adopts the
//! state ([`parse_state`]).
//!
//! # The state descriptor and descendants
//! The spawn places the pipe at [`STATE_FD`] in the shell only. The
//! caller's command runs inside `{ eval '…'; } 9>&-`: for its duration fd 9
//! is closed and the shells keep their saved copy close-on-exec (dash, bash
//! and busybox ash all save at fd ≥ 10 with `F_DUPFD_CLOEXEC`), so nothing
//! the command starts inherits it — a background `sleep` never holds the
//! pipe, and the job ends when the shell ends. When the compound ends, the
//! shell restores fd 9 and the epilogue writes it. (A forked subshell that
//! never `exec`s — `(sleep 9; echo) &` — keeps the close-on-exec copy while
//! it lives: no shell can give itself a descriptor its own `fork` does not
//! copy. It cannot hold anything up: the job ends when its shell is reaped,
//! and the server reads what is in the pipe then, never waiting for EOF; a
//! stray write there only makes the state not adopted.)
//!
//! The epilogue runs twice over, guarded so it writes once: inline after the
//! compound (so a command that installs its own `EXIT` trap still reports),
//! and from an `EXIT` trap (so `exit N`, a `set -e` failure or a fatal error
//! inside the command report too). dash and busybox ash undo the compound's
//! redirection before the `EXIT` trap runs; bash does not when `exit` is
//! called inside a function, so there fd 9 is still closed in the trap: the
//! epilogue then reopens the server's read end through
//! `/proc/$PPID/fd/<n>` (the shell's parent is the server; the same user may
//! open it). Where even that fails, nothing is written and the session is
//! left unchanged — the failure mode is always "unchanged", never "wrong".
//!
//! # Ownership
//! [`ShellSessions`] owns every session's state behind one short-held mutex; the
//! job table owns the serial lanes ([`lanes`]: which job of a session runs,
//! which wait).
//! A session's *generation* changes on `reset` and `close`, so a job that
//! was started before either cannot write its state over them.
//!
//! - [`epilogue`]: the wrapped command line and its state descriptor.
//! - [`state_parser`]: what the epilogue wrote, parsed or refused.
//! - [`lanes`]: the serial lanes of the job table (which job of a shell
//!   session runs, which wait).

pub mod epilogue;
pub mod lanes;
pub mod state_parser;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

pub use epilogue::{STATE_FD, wrap};
pub use state_parser::{MAX_STATE_BYTES, ReportedState, parse_state};

/// Whether `name` is a valid session name: 1–64 characters of
/// `[A-Za-z0-9._-]`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Who a session belongs to (the `user` of its first job; `None`
/// is the server's own user).
pub type ShellSessionOwner = Option<String>;

/// One session.
#[derive(Debug)]
struct ShellSession {
    owner: ShellSessionOwner,
    generation: u64,
    /// `None`: the server's defaults (never adopted, or reset).
    cwd: Option<PathBuf>,
    env: Option<Vec<(OsString, OsString)>>,
    last_used: Instant,
}

impl ShellSession {
    /// Session `name` of `sessions`, created with the defaults (owned by
    /// `owner`) when it does not exist.
    fn entry<'a>(
        sessions: &'a mut BTreeMap<String, ShellSession>,
        name: &str,
        owner: &ShellSessionOwner,
        generation: u64,
    ) -> &'a mut ShellSession {
        sessions
            .entry(name.to_owned())
            .or_insert_with(|| ShellSession {
                owner: owner.clone(),
                generation,
                cwd: None,
                env: None,
                last_used: Instant::now(),
            })
    }
}

/// What a session job starts with.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The session's generation when the job started.
    pub generation: u64,
    /// The session's working directory, if it has one of its own.
    pub cwd: Option<PathBuf>,
    /// The session's whole environment, if it has one of its own.
    pub env: Option<Vec<(OsString, OsString)>>,
}

/// A session as `shell_sessions` shows it.
#[derive(Debug, Clone)]
pub struct Shown {
    /// Its name.
    pub name: String,
    /// Its working directory (`None`: the server's default).
    pub cwd: Option<PathBuf>,
    /// Its variable names (`None`: the server's environment).
    pub variables: Option<Vec<String>>,
    /// Seconds since its last job started or ended.
    pub idle: Duration,
}

/// Why a job may not use a session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// It belongs to another user.
    #[error("shell session {0:?} belongs to another user")]
    OtherUser(String),
}

/// Every shell session of the server (process-wide).
#[derive(Debug)]
pub struct ShellSessions {
    inner: Mutex<BTreeMap<String, ShellSession>>,
    idle: Duration,
    next_generation: Mutex<u64>,
}

impl ShellSessions {
    /// No sessions; one expires `idle` after its last job.
    pub fn new(idle: Duration) -> ShellSessions {
        ShellSessions {
            inner: Mutex::new(BTreeMap::new()),
            idle,
            next_generation: Mutex::new(1),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, ShellSession>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn generation(&self) -> u64 {
        let mut g = self
            .next_generation
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *g += 1;
        *g
    }

    /// Drops sessions idle for longer than the idle time, except those
    /// `busy` says have jobs.
    pub fn expire(&self, busy: impl Fn(&str) -> bool) {
        let idle = self.idle;
        self.lock()
            .retain(|name, s| s.last_used.elapsed() < idle || busy(name));
    }

    /// A job of `owner` joins session `name`, creating it if needed.
    pub fn join(&self, name: &str, owner: &ShellSessionOwner) -> Result<(), Refused> {
        let generation = self.generation();
        let mut inner = self.lock();
        let session = ShellSession::entry(&mut inner, name, owner, generation);
        if session.owner != *owner {
            return Err(Refused::OtherUser(name.to_owned()));
        }
        session.last_used = Instant::now();
        Ok(())
    }

    /// What a job of session `name` starts with now (the defaults when the
    /// session was closed meanwhile: it is then created again).
    pub fn snapshot(&self, name: &str, owner: &ShellSessionOwner) -> Snapshot {
        let generation = self.generation();
        let mut inner = self.lock();
        let s = ShellSession::entry(&mut inner, name, owner, generation);
        s.last_used = Instant::now();
        Snapshot {
            generation: s.generation,
            cwd: s.cwd.clone(),
            env: s.env.clone(),
        }
    }

    /// A job of session `name` that started at `generation` ended; it
    /// reported `state` when it ended on its own with its state intact.
    pub fn finish(&self, name: &str, generation: u64, state: Option<ReportedState>) {
        let mut inner = self.lock();
        if let Some(s) = inner.get_mut(name) {
            s.last_used = Instant::now();
            if let Some(state) = state
                && s.generation == generation
            {
                s.cwd = Some(state.cwd);
                s.env = Some(state.env);
            }
        }
    }

    /// Every session, by name.
    pub fn list(&self) -> Vec<Shown> {
        self.lock().iter().map(|(n, s)| shown(n, s)).collect()
    }

    /// One session.
    pub fn show(&self, name: &str) -> Option<Shown> {
        self.lock().get(name).map(|s| shown(name, s))
    }

    /// Returns session `name` to the server's defaults; `false` if unknown.
    pub fn reset(&self, name: &str) -> bool {
        let generation = self.generation();
        match self.lock().get_mut(name) {
            Some(s) => {
                s.cwd = None;
                s.env = None;
                s.generation = generation;
                s.last_used = Instant::now();
                true
            }
            None => false,
        }
    }

    /// Ends session `name`; `false` if unknown. Jobs of it still queued or
    /// running go on; what they report is not adopted.
    pub fn close(&self, name: &str) -> bool {
        self.lock().remove(name).is_some()
    }
}

fn shown(name: &str, s: &ShellSession) -> Shown {
    Shown {
        name: name.to_owned(),
        cwd: s.cwd.clone(),
        variables: s.env.as_ref().map(|env| {
            env.iter()
                .map(|(k, _)| k.to_string_lossy().into_owned())
                .collect()
        }),
        idle: s.last_used.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_are_one_to_sixty_four_safe_characters() {
        for ok in ["a", "build-1", "x.y_z", &"n".repeat(64)] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "a b", "a/b", "ä", &"n".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_reset_session_does_not_adopt_what_an_older_job_reports() {
        let sessions = ShellSessions::new(Duration::from_secs(60));
        sessions.join("s", &None).unwrap();
        let snap = sessions.snapshot("s", &None);
        assert!(sessions.reset("s"));
        let state = ReportedState {
            cwd: PathBuf::from("/tmp"),
            env: Vec::new(),
        };
        sessions.finish("s", snap.generation, Some(state.clone()));
        assert_eq!(sessions.show("s").unwrap().cwd, None);
        let snap = sessions.snapshot("s", &None);
        sessions.finish("s", snap.generation, Some(state));
        assert_eq!(sessions.show("s").unwrap().cwd, Some(PathBuf::from("/tmp")));
    }

    #[test]
    fn a_session_refuses_a_job_of_another_user() {
        let sessions = ShellSessions::new(Duration::from_secs(60));
        sessions.join("s", &Some("alice".into())).unwrap();
        assert_eq!(
            sessions.join("s", &None),
            Err(Refused::OtherUser("s".into()))
        );
        assert!(sessions.join("s", &Some("alice".into())).is_ok());
    }
}
