//! A launch as a front-end asks for it, before the server's rules: the one
//! typed request every front-end builds, and the one step that applies the
//! rules and gives the [`Launch`] that [`Jobs::launch`](super::Jobs::launch)
//! takes.
//!
//! # Why here, in `jobs`
//! The rules are a job's, not a wire's: a program without NUL bytes,
//! variable names, a shell session's name, a label, the user and limits the
//! [`JobPolicy`] allows, a terminal's size, the retained window the
//! [`Config`] allows. Every front-end fills the same [`LaunchRequest`] from
//! its own wire — the MCP `execute` tool, `POST /exec` and Tasks from JSON
//! (`tools::execute::parse`), envd's `Start` and sandboxd's
//! `Execute`/`Start` from their proto fields, with no JSON in between — and
//! calls [`LaunchRequest::validate`]. In `jobs`, which names no protocol,
//! tool or server, the request cannot grow a wire shape, and no front-end
//! needs another's parser to reach the rules.
//!
//! # What it is not
//! It reads no wire: a field's JSON type (`"env" must be an object of
//! strings`), a revision that does not know a field, `command` against
//! `argv`, a blank `command` — those are the JSON reader's. It decides no
//! cwd: [`Jobs::launch`](super::Jobs::launch) resolves the cwd under the
//! policy, once, when the job starts.
//!
//! # Invariants
//! - The first rule broken is the answer, in this order: the program, the
//!   variables, the shell session's name, the label, the user and limits,
//!   the terminal's size, a terminal with a shell session, the window.
//! - Errors name the fields as `execute` calls them (`"argv"`, `"label"`,
//!   `"limits.cpu_seconds"`): the texts every front-end has always shown
//!   (envd and sandboxd too, prefixed `invalid arguments: ` as the tool's).
//! - An absent field takes the server's default: `MCP_EXEC_JOB_TIMEOUT`
//!   for the deadline, `MCP_EXEC_JOB_LIMITS` for the limits,
//!   `MCP_EXEC_MAX_OUTPUT_BYTES` for the window; a terminal job's capture
//!   is its one stream. An empty `cwd` or `stdin` is none.

use std::ffi::OsString;
use std::time::Duration;

use init::Program;

use super::launch::Launch;
use super::shell_session::valid_name;
use super::state::Owner;
use super::terminal::{DEFAULT_SIZE, TerminalError, window_size};
use crate::capture::CapturePolicy;
use crate::config::Config;
use crate::policy::identity::{JobLimits, JobPolicy};

/// The longest `label` (characters).
pub const MAX_LABEL: usize = 200;

/// The longest deadline a job is given (about 31 years): any longer one is
/// this, so that adding it to an instant cannot overflow.
pub const MAX_DEADLINE: Duration = Duration::from_secs(1_000_000_000);

/// A job as asked for: every field as given, `None` when absent.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchRequest {
    /// `$SHELL -c command`, or an argv (non-empty, no NUL bytes).
    pub program: Program,
    /// The working directory (empty: the default).
    pub cwd: Option<String>,
    /// Variables layered over the server's environment.
    pub env: Vec<(String, String)>,
    /// Written to its stdin once it runs (empty: nothing).
    pub stdin: Option<Vec<u8>>,
    /// Close stdin after writing.
    pub close_stdin: bool,
    /// Its deadline from when it starts (absent: `MCP_EXEC_JOB_TIMEOUT`).
    pub timeout: Option<Duration>,
    /// End it when it writes nothing for this long.
    pub idle_timeout: Option<Duration>,
    /// The shell session to run in, whose cwd and exports it starts with.
    pub shell_session: Option<String>,
    /// Shown with the job (at most [`MAX_LABEL`] characters, no control
    /// characters).
    pub label: Option<String>,
    /// Run as this user: `"name"`, `"uid"` or `"uid:gid"` (a root server's
    /// choice: `policy::identity`).
    pub user: Option<String>,
    /// The limits asked for, each at most the server's.
    pub limits: JobLimits,
    /// What its terminal result carries (absent: the default, or a
    /// terminal job's).
    pub capture: Option<CapturePolicy>,
    /// Its retained window per stream (absent: `MCP_EXEC_MAX_OUTPUT_BYTES`;
    /// at most `MCP_EXEC_MAX_OUTPUT_BYTES_LIMIT`).
    pub max_output_bytes: Option<u64>,
    /// Run it on a pseudo-terminal instead of pipes.
    pub tty: Option<TerminalSize>,
    /// Who receives its result.
    pub owner: Owner,
}

/// The size of the terminal asked for; an absent dimension is the default's
/// ([`DEFAULT_SIZE`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TerminalSize {
    /// Columns.
    pub cols: Option<u64>,
    /// Rows.
    pub rows: Option<u64>,
}

/// A rule the request breaks; the `Display` is the detail the front-ends
/// show.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A shell command with a NUL byte.
    #[error("\"command\" must not contain NUL bytes")]
    CommandNul,
    /// An empty argv, or an argument with a NUL byte.
    #[error("\"argv\" must be a non-empty array of strings")]
    Argv,
    /// A variable name that is empty or has `=` or NUL, or a value with NUL.
    #[error("env name {0:?} is not a valid variable name")]
    EnvName(String),
    /// Not a shell session's name.
    #[error("\"shell_session\" must be 1-64 characters of A-Z a-z 0-9 . _ -")]
    ShellSessionName,
    /// A label too long or with control characters.
    #[error("\"label\" must be at most {MAX_LABEL} characters without control characters")]
    Label,
    /// The job policy refuses the user or the limits (its text).
    #[error("{0}")]
    Identity(String),
    /// A terminal size of 0 or past the largest.
    #[error("{0}")]
    TerminalSize(TerminalError),
    /// A terminal job in a shell session (see [`TTY_AND_SHELL_SESSION`]).
    #[error("{TTY_AND_SHELL_SESSION}")]
    TtyAndShellSession,
    /// A window of 0 or past the server's limit.
    #[error("\"max_output_bytes\" must be between 1 and {limit}")]
    Window {
        /// `MCP_EXEC_MAX_OUTPUT_BYTES_LIMIT`.
        limit: usize,
    },
}

/// Why a terminal job cannot join a shell session: a session
/// hands a job's final cwd and exports to the next when the command ends
/// on its own, through an epilogue its shell runs; a terminal job is
/// interactive — what it leaves behind is whatever was typed into it, and
/// its shell is often one the user ends with `exit` or `C-d`, which skips
/// the epilogue. Run `cd`/`export` in the terminal itself instead.
const TTY_AND_SHELL_SESSION: &str = "\"tty\" cannot be combined with \"shell_session\": a terminal job is interactive, so a shell session could not take its cwd and exports from it; cd and export inside the terminal instead";

impl LaunchRequest {
    /// A request to run `program`, every other field absent, owned by its
    /// caller.
    pub fn new(program: Program) -> LaunchRequest {
        LaunchRequest {
            program,
            cwd: None,
            env: Vec::new(),
            stdin: None,
            close_stdin: false,
            timeout: None,
            idle_timeout: None,
            shell_session: None,
            label: None,
            user: None,
            limits: JobLimits::default(),
            capture: None,
            max_output_bytes: None,
            tty: None,
            owner: Owner::Caller,
        }
    }

    /// Applies the rules (the module doc's order) and the server's defaults
    /// from `config`; `policy` says what `user` and `limits` may ask for.
    pub fn validate(self, config: &Config, policy: &JobPolicy) -> Result<Launch, RequestError> {
        check_program(&self.program)?;
        let env = self
            .env
            .into_iter()
            .map(|(k, v)| {
                if k.is_empty() || k.contains(['=', '\0']) || v.contains('\0') {
                    Err(RequestError::EnvName(k))
                } else {
                    Ok((OsString::from(k), OsString::from(v)))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(name) = &self.shell_session
            && !valid_name(name)
        {
            return Err(RequestError::ShellSessionName);
        }
        if let Some(label) = &self.label
            && (label.chars().count() > MAX_LABEL || label.chars().any(char::is_control))
        {
            return Err(RequestError::Label);
        }
        let setup = policy
            .setup(self.user.as_deref(), &self.limits)
            .map_err(RequestError::Identity)?;
        let tty = match self.tty {
            None => None,
            Some(size) => Some(
                window_size(
                    size.cols.unwrap_or(DEFAULT_SIZE.cols.into()),
                    size.rows.unwrap_or(DEFAULT_SIZE.rows.into()),
                )
                .map_err(RequestError::TerminalSize)?,
            ),
        };
        if tty.is_some() && self.shell_session.is_some() {
            return Err(RequestError::TtyAndShellSession);
        }
        let limit = config.max_output_bytes_limit;
        let window = match self.max_output_bytes {
            None => config.max_output_bytes,
            Some(n) if n >= 1 && n <= limit as u64 => usize::try_from(n).unwrap_or(limit),
            Some(_) => return Err(RequestError::Window { limit }),
        };
        let capture = self.capture.unwrap_or_else(|| match tty {
            Some(_) => CapturePolicy::terminal(),
            None => CapturePolicy::default(),
        });
        Ok(Launch {
            program: self.program,
            cwd: self.cwd.filter(|c| !c.is_empty()),
            env,
            setup,
            stdin: self.stdin.filter(|d| !d.is_empty()),
            close_stdin: self.close_stdin,
            timeout: match self.timeout {
                Some(t) => Some(t.min(MAX_DEADLINE)),
                None => config.job_timeout,
            },
            idle_timeout: self.idle_timeout.map(|t| t.min(MAX_DEADLINE)),
            shell_session: self.shell_session,
            capture,
            label: self.label,
            window,
            owner: self.owner,
            tty,
        })
    }
}

/// A shell command without NUL; an argv non-empty, without NUL.
fn check_program(program: &Program) -> Result<(), RequestError> {
    match program {
        Program::Shell(command) if command.contains('\0') => Err(RequestError::CommandNul),
        Program::Shell(_) => Ok(()),
        Program::Argv(argv)
            if argv.is_empty() || argv.iter().any(|a| a.as_encoded_bytes().contains(&0)) =>
        {
            Err(RequestError::Argv)
        }
        Program::Argv(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(items: &[&str]) -> Program {
        Program::Argv(items.iter().map(OsString::from).collect())
    }

    fn refused(req: LaunchRequest) -> String {
        match req.validate(&Config::default(), &JobPolicy::default()) {
            Ok(_) => panic!("the request was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn an_absent_field_takes_the_servers_default() {
        let config = Config {
            job_timeout: Some(Duration::from_secs(7)),
            max_output_bytes: 4096,
            ..Config::default()
        };
        let mut req = LaunchRequest::new(Program::Shell("true".into()));
        req.cwd = Some(String::new());
        req.stdin = Some(Vec::new());
        let l = req.validate(&config, &JobPolicy::default()).unwrap();
        assert_eq!(l.timeout, Some(Duration::from_secs(7)));
        assert_eq!(l.window, 4096);
        assert_eq!((l.cwd, l.stdin, l.tty), (None, None, None));
        assert_eq!(l.capture, CapturePolicy::default());
        assert_eq!(l.owner, Owner::Caller);
    }

    #[test]
    fn a_terminal_takes_the_default_size_and_its_one_stream_as_capture() {
        let mut req = LaunchRequest::new(argv(&["bash"]));
        req.tty = Some(TerminalSize {
            cols: Some(80),
            rows: None,
        });
        let l = req
            .validate(&Config::default(), &JobPolicy::default())
            .unwrap();
        let size = l.tty.unwrap();
        assert_eq!((size.cols, size.rows), (80, DEFAULT_SIZE.rows));
        assert_eq!(l.capture, CapturePolicy::terminal());
    }

    #[test]
    fn asked_deadlines_are_at_most_the_longest() {
        let mut req = LaunchRequest::new(argv(&["true"]));
        req.timeout = Some(Duration::from_secs(u64::MAX));
        req.idle_timeout = Some(Duration::from_secs(u64::MAX));
        let l = req
            .validate(&Config::default(), &JobPolicy::default())
            .unwrap();
        assert_eq!(
            (l.timeout, l.idle_timeout),
            (Some(MAX_DEADLINE), Some(MAX_DEADLINE))
        );
    }

    #[test]
    fn each_rule_refuses_with_the_text_the_front_ends_show() {
        let base = || LaunchRequest::new(argv(&["true"]));
        let cases: Vec<(LaunchRequest, String)> = vec![
            (
                LaunchRequest::new(Program::Shell("a\0b".into())),
                "\"command\" must not contain NUL bytes".into(),
            ),
            (
                LaunchRequest::new(argv(&[])),
                "\"argv\" must be a non-empty array of strings".into(),
            ),
            (
                LaunchRequest::new(argv(&["echo", "a\0"])),
                "\"argv\" must be a non-empty array of strings".into(),
            ),
            (
                LaunchRequest {
                    env: vec![("A=B".into(), "1".into())],
                    ..base()
                },
                "env name \"A=B\" is not a valid variable name".into(),
            ),
            (
                LaunchRequest {
                    env: vec![("A".into(), "\0".into())],
                    ..base()
                },
                "env name \"A\" is not a valid variable name".into(),
            ),
            (
                LaunchRequest {
                    shell_session: Some("a b".into()),
                    ..base()
                },
                "\"shell_session\" must be 1-64 characters of A-Z a-z 0-9 . _ -".into(),
            ),
            (
                LaunchRequest {
                    label: Some("x".repeat(MAX_LABEL + 1)),
                    ..base()
                },
                "\"label\" must be at most 200 characters without control characters".into(),
            ),
            (
                LaunchRequest {
                    tty: Some(TerminalSize {
                        cols: Some(0),
                        rows: None,
                    }),
                    ..base()
                },
                "cols and rows must be between 1 and 1000".into(),
            ),
            (
                LaunchRequest {
                    tty: Some(TerminalSize::default()),
                    shell_session: Some("s".into()),
                    ..base()
                },
                TTY_AND_SHELL_SESSION.into(),
            ),
            (
                LaunchRequest {
                    max_output_bytes: Some(0),
                    ..base()
                },
                format!(
                    "\"max_output_bytes\" must be between 1 and {}",
                    Config::default().max_output_bytes_limit
                ),
            ),
        ];
        for (req, text) in cases {
            assert_eq!(refused(req), text);
        }
    }

    #[test]
    fn the_job_policy_decides_on_user_and_limits() {
        let policy = JobPolicy {
            limits: JobLimits {
                cpu_seconds: Some(10),
                ..JobLimits::default()
            },
            user_refused: Some("no users here".into()),
        };
        let mut req = LaunchRequest::new(argv(&["true"]));
        req.user = Some("nobody".into());
        let e = req.validate(&Config::default(), &policy).unwrap_err();
        assert_eq!(e.to_string(), "no users here");
        let mut req = LaunchRequest::new(argv(&["true"]));
        req.limits.cpu_seconds = Some(11);
        let e = req.validate(&Config::default(), &policy).unwrap_err();
        assert!(
            e.to_string().contains("above the server's maximum 10"),
            "{e}"
        );
    }

    #[test]
    fn the_first_rule_broken_is_the_answer() {
        let mut req = LaunchRequest::new(argv(&["true"]));
        req.label = Some("\u{7}".into());
        req.max_output_bytes = Some(0);
        assert!(refused(req).starts_with("\"label\""));
    }
}
