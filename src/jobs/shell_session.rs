//! Shell sessions (SPEC §17): named, serial lanes of jobs that share a
//! working directory and exported environment, carried from one job's shell
//! to the next.
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
//! job table owns the serial lanes (which job of a session runs, which wait).
//! A session's *generation* changes on `reset` and `close`, so a job that
//! was started before either cannot write its state over them.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The descriptor number of the state pipe in a session job's shell.
pub const STATE_FD: i32 = 9;

/// The most state bytes read from one job; more and the state is dropped
/// (an environment that large cannot be passed to `exec` anyway).
pub const MAX_STATE_BYTES: usize = 4 * 1024 * 1024;

/// Variables a session never carries: the shell maintains them itself.
const NOT_CARRIED: [&str; 4] = ["PWD", "OLDPWD", "SHLVL", "_"];

const START: &[u8] = b"MCPX";
const END: &[u8] = b"MCPX-END\n";

/// Whether `name` is a valid session name: 1–64 characters of
/// `[A-Za-z0-9._-]`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `s` as one single-quoted shell word.
fn single_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}

/// The shell command line that runs `command` and then reports the shell's
/// state on [`STATE_FD`]. `server_fd` is the number of the server's read
/// end of the state pipe (bash's fallback, see the module doc).
pub fn wrap(command: &str, server_fd: i32) -> String {
    // Builtins only, each through `command` so a function of the same name
    // cannot replace it. Written once (`mcp_exec_done`): inline after the
    // command, else from the EXIT trap. `set +ex` so the user's `-x` does
    // not trace it and `-e` does not cut it short; expansions quoted, so a
    // user's `IFS` cannot split them. `[ -e /proc/self/fd/9 ]`
    // costs one `stat`, where probing with a redirection would cost an
    // `open` of /dev/null and four `dup`s per job.
    let report = format!(
        "mcp_exec_done=1; \
         [ -e /proc/self/fd/{fd} ] || {{ command exec {fd}>\"/proc/$PPID/fd/{server_fd}\"; }} 2>/dev/null; \
         {{ command printf 'MCPX\\0'; command pwd; command printf '\\0'; command export -p; command printf '\\0MCPX-END\\n'; }} >&{fd}",
        fd = STATE_FD
    );
    let trap =
        format!("if [ -z \"${{mcp_exec_done-}}\" ]; then {{ set +ex; }} 2>/dev/null; {report}; fi");
    format!(
        "trap {trap} 0\n{{ eval {cmd}\n}} {fd}>&-\n\
         {{ mcp_exec_rc=$?; set +ex; }} 2>/dev/null; if [ -z \"${{mcp_exec_done-}}\" ]; then {report}; fi\n\
         exit \"$mcp_exec_rc\"\n",
        trap = single_quote(&trap),
        cmd = single_quote(command),
        fd = STATE_FD,
    )
}

/// A shell's final state, as reported by the epilogue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct State {
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its exported variables (without [`NOT_CARRIED`]), sorted by name.
    pub env: Vec<(OsString, OsString)>,
}

/// Parses what the epilogue wrote: `MCPX\0<pwd>\n\0<export -p>\0MCPX-END\n`
/// and nothing else. `None` when it is not exactly that (a killed shell, a
/// truncated write, an `exec`ed command, …).
pub fn parse_state(bytes: &[u8]) -> Option<State> {
    let mut parts = bytes.split(|&b| b == 0);
    let (start, pwd, exports, end) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if start != START || end != END || parts.next().is_some() {
        return None;
    }
    let pwd = pwd.strip_suffix(b"\n")?;
    if !pwd.starts_with(b"/") {
        return None;
    }
    let mut env = parse_exports(exports)?;
    env.retain(|(k, _)| !NOT_CARRIED.iter().any(|n| k.as_os_str() == OsStr::new(n)));
    env.sort();
    env.dedup_by(|a, b| a.0 == b.0);
    Some(State {
        cwd: PathBuf::from(OsStr::from_bytes(pwd)),
        env,
    })
}

/// Parses `export -p` as dash and busybox ash print it (`export NAME='v'`,
/// quotes as `'"'"'`) and as bash does (`declare -x NAME="v"`, or
/// `NAME=$'…'` with ANSI-C escapes when the value has control characters).
/// An exported variable without a value (`export NAME`) is not in the
/// environment and is skipped. `None` on anything else.
fn parse_exports(text: &[u8]) -> Option<Vec<(OsString, OsString)>> {
    let mut p = Parser { s: text, i: 0 };
    let mut out = Vec::new();
    loop {
        p.skip_space();
        if p.i >= p.s.len() {
            return Some(out);
        }
        let word = p.bare_word();
        match word {
            b"export" => {}
            b"declare" => {
                p.skip_space();
                let flags = p.bare_word();
                if !flags.starts_with(b"-") || !flags.contains(&b'x') {
                    return None;
                }
            }
            _ => return None,
        }
        p.skip_space();
        let name = p.name();
        if name.is_empty() {
            return None;
        }
        let name = OsString::from_vec(name.to_vec());
        if p.peek() == Some(b'=') {
            p.i += 1;
            let value = p.value()?;
            out.push((name, OsString::from_vec(value)));
        }
        match p.peek() {
            None | Some(b'\n') => {}
            _ => return None,
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\t')) {
            self.i += 1;
        }
    }

    fn bare_word(&mut self) -> &[u8] {
        let start = self.i;
        while matches!(self.peek(), Some(c) if !matches!(c, b' ' | b'\n' | b'\t')) {
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    fn name(&mut self) -> &[u8] {
        let start = self.i;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_') {
            self.i += 1;
        }
        &self.s[start..self.i]
    }

    /// A shell word made of quoted segments, up to a blank or the end.
    fn value(&mut self) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None | Some(b' ' | b'\n' | b'\t') => return Some(out),
                Some(b'\'') => {
                    self.i += 1;
                    let end = self.s[self.i..].iter().position(|&b| b == b'\'')?;
                    out.extend_from_slice(&self.s[self.i..self.i + end]);
                    self.i += end + 1;
                }
                Some(b'"') => {
                    self.i += 1;
                    loop {
                        match self.peek()? {
                            b'"' => {
                                self.i += 1;
                                break;
                            }
                            b'\\'
                                if matches!(
                                    self.s.get(self.i + 1),
                                    Some(b'"' | b'\\' | b'$' | b'`' | b'\n')
                                ) =>
                            {
                                out.push(self.s[self.i + 1]);
                                self.i += 2;
                            }
                            c => {
                                out.push(c);
                                self.i += 1;
                            }
                        }
                    }
                }
                Some(b'$') if self.s.get(self.i + 1) == Some(&b'\'') => {
                    self.i += 2;
                    self.ansi_c(&mut out)?;
                }
                Some(c) if c != b'\\' && c != b'$' && c != b'`' && c != b'"' => {
                    out.push(c);
                    self.i += 1;
                }
                Some(_) => return None,
            }
        }
    }

    /// The body of `$'…'` after its opening quote.
    fn ansi_c(&mut self, out: &mut Vec<u8>) -> Option<()> {
        loop {
            match self.peek()? {
                b'\'' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => {
                    self.i += 1;
                    let c = self.peek()?;
                    self.i += 1;
                    let simple = match c {
                        b'a' => Some(7),
                        b'b' => Some(8),
                        b'e' | b'E' => Some(27),
                        b'f' => Some(12),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        b'v' => Some(11),
                        b'\\' | b'\'' | b'"' | b'?' => Some(c),
                        _ => None,
                    };
                    if let Some(b) = simple {
                        out.push(b);
                    } else if (b'0'..=b'7').contains(&c) {
                        let mut v = u32::from(c - b'0');
                        for _ in 0..2 {
                            match self.peek() {
                                Some(d @ b'0'..=b'7') => {
                                    v = v * 8 + u32::from(d - b'0');
                                    self.i += 1;
                                }
                                _ => break,
                            }
                        }
                        out.push(u8::try_from(v & 0xff).ok()?);
                    } else if c == b'x' {
                        let mut v = 0u32;
                        let mut n = 0;
                        while n < 2 {
                            match self.peek().and_then(|d| (d as char).to_digit(16)) {
                                Some(d) => {
                                    v = v * 16 + d;
                                    self.i += 1;
                                    n += 1;
                                }
                                None => break,
                            }
                        }
                        if n == 0 {
                            return None;
                        }
                        out.push(u8::try_from(v).ok()?);
                    } else {
                        return None;
                    }
                }
                c => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }
}

/// Who a session belongs to (SPEC §16: the `user` of its first job; `None`
/// is the server's own user).
pub type Owner = Option<String>;

/// One session.
#[derive(Debug)]
struct ShellSession {
    owner: Owner,
    generation: u64,
    /// `None`: the server's defaults (never adopted, or reset).
    cwd: Option<PathBuf>,
    env: Option<Vec<(OsString, OsString)>>,
    last_used: Instant,
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

/// Every shell session of the server (process-wide, SPEC §17).
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
    pub fn join(&self, name: &str, owner: &Owner) -> Result<(), Refused> {
        let generation = self.generation();
        let mut inner = self.lock();
        let session = inner
            .entry(name.to_owned())
            .or_insert_with(|| ShellSession {
                owner: owner.clone(),
                generation,
                cwd: None,
                env: None,
                last_used: Instant::now(),
            });
        if session.owner != *owner {
            return Err(Refused::OtherUser(name.to_owned()));
        }
        session.last_used = Instant::now();
        Ok(())
    }

    /// What a job of session `name` starts with now (the defaults when the
    /// session was closed meanwhile: it is then created again).
    pub fn snapshot(&self, name: &str, owner: &Owner) -> Snapshot {
        let generation = self.generation();
        let mut inner = self.lock();
        let s = inner
            .entry(name.to_owned())
            .or_insert_with(|| ShellSession {
                owner: owner.clone(),
                generation,
                cwd: None,
                env: None,
                last_used: Instant::now(),
            });
        s.last_used = Instant::now();
        Snapshot {
            generation: s.generation,
            cwd: s.cwd.clone(),
            env: s.env.clone(),
        }
    }

    /// A job of session `name` that started at `generation` ended; it
    /// reported `state` when it ended on its own with its state intact.
    pub fn finish(&self, name: &str, generation: u64, state: Option<State>) {
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

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

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
    fn dash_style_exports_with_quotes_and_newlines_parse() {
        let text = b"export A='x'\"'\"'y'\nexport B='l1\nl2=3'\nexport E\nexport PWD='/tmp'\nexport D=''\n";
        let state = parse_state(&[b"MCPX\0/tmp\n\0".as_slice(), text, b"\0MCPX-END\n"].concat());
        assert_eq!(
            state,
            Some(State {
                cwd: PathBuf::from("/tmp"),
                env: env(&[("A", "x'y"), ("B", "l1\nl2=3"), ("D", "")]),
            })
        );
    }

    #[test]
    fn bash_style_exports_with_double_quotes_and_ansi_c_escapes_parse() {
        let text = b"declare -x A=\"x'y\\$\\\"\"\ndeclare -x B=$'l1\\nl2\\\\$`\"q\\001'\ndeclare -rx C=\"1\"\ndeclare -x OLDPWD\ndeclare -x SHLVL=\"1\"\n";
        let state = parse_state(&[b"MCPX\0/\n\0".as_slice(), text, b"\0MCPX-END\n"].concat());
        assert_eq!(
            state,
            Some(State {
                cwd: PathBuf::from("/"),
                env: env(&[("A", "x'y$\""), ("B", "l1\nl2\\$`\"q\u{1}"), ("C", "1")]),
            })
        );
    }

    #[test]
    fn a_stream_without_its_end_marker_or_with_more_is_not_adopted() {
        assert_eq!(parse_state(b"MCPX\0/tmp\n\0export A='1'\n"), None);
        assert_eq!(parse_state(b"MCPX\0/tmp\n\0export A='1'\n\0MCPX-END"), None);
        assert_eq!(
            parse_state(b"MCPX\0/tmp\n\0\0MCPX-END\nMCPX\0/\n\0\0MCPX-END\n"),
            None
        );
        assert_eq!(parse_state(b"MCPX\0tmp\n\0\0MCPX-END\n"), None);
        assert!(parse_state(b"MCPX\0/tmp\n\0\0MCPX-END\n").is_some());
    }

    #[test]
    fn a_reset_session_does_not_adopt_what_an_older_job_reports() {
        let sessions = ShellSessions::new(Duration::from_secs(60));
        sessions.join("s", &None).unwrap();
        let snap = sessions.snapshot("s", &None);
        assert!(sessions.reset("s"));
        let state = State {
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
