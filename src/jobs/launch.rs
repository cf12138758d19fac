//! `launch`: how a job comes to run.
//!
//! One recipe for every front-end: the cwd policy, the shell session, the
//! queue, the breaker, the spawn and the runner. Its answer is typed: a
//! front-end maps [`LaunchError`] to its own wire (a tool error, an HTTP
//! status) by variant, never by message text.
//!
//! A job that the table admits is started in steps ([`Shared::start`]):
//! enter its shell session (cwd, environment, the state pipe), spawn it
//! (behind the breaker), hand its pipes to the reactor, record it started
//! and hand it to its runner. Every step that fails goes to the one failure
//! path, [`Shared::start_failed`]: the shell session's lane moves on, the
//! job becomes a terminal start error, and the next queued job is admitted.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use init::{Program, Setup, Signal, SpawnSpec};
use tokio::net::unix::pipe;
use tokio::time::Instant;

use super::runner::{self, ShellSessionRun};
use super::shell_session::{self, Refused};
use super::state::{JobState, ShellSessionUse};
use super::table::{Admitted, Claim, Job, QueueFull, StdinWriter};
use super::terminal::Terminal;
use super::{JobId, Jobs, Owner, Pending, Shared};
use crate::capture::CapturePolicy;
use crate::policy::cwd::Refusal;

/// Resolves a requested working directory under the cwd policy:
/// a job's `cwd` at launch (`None`: the default), a shell session's when a
/// job of it starts.
pub type CwdResolver = Box<dyn Fn(Option<&str>) -> Result<init::Cwd, Refusal> + Send + Sync>;

/// What a front-end asks to run.
#[derive(Debug)]
pub struct Launch {
    /// The program: `$SHELL -c command`, or an argv.
    pub program: Program,
    /// The requested working directory (checked by the cwd policy).
    pub cwd: Option<String>,
    /// Variables layered over the server's environment.
    pub env: Vec<(OsString, OsString)>,
    /// Its user, groups and limits.
    pub setup: Setup,
    /// Written to stdin once it runs.
    pub stdin: Option<Vec<u8>>,
    /// Close stdin after writing.
    pub close_stdin: bool,
    /// Its deadline, counted from when it starts.
    pub timeout: Option<Duration>,
    /// End it when it writes nothing for this long.
    pub idle_timeout: Option<Duration>,
    /// The shell session to run in.
    pub shell_session: Option<String>,
    /// What its terminal result carries.
    pub capture: CapturePolicy,
    /// Its label.
    pub label: Option<String>,
    /// Its retained window per stream.
    pub window: usize,
    /// Who receives its result.
    pub owner: Owner,
    /// Run it on a terminal of this size instead of pipes.
    pub tty: Option<init::WindowSize>,
}

/// How a launch went.
#[derive(Debug)]
pub enum Launched {
    /// It runs. Its stdin (the data it asked for, then closed if asked) is
    /// written by `jobs` in a task of its own, as a queued job's is when it
    /// starts: `stdin` is `None` and `close_stdin` `false`. Only from
    /// [`Jobs::launch_leaving_stdin`] are they what is still to write: that
    /// caller writes it with [`Jobs::write_stdin`], so that it can report a
    /// failed write and cancel a blocked one.
    Started {
        /// Its id.
        id: JobId,
        /// Data for its stdin, left to the caller.
        stdin: Option<Vec<u8>>,
        /// Close stdin after writing, left to the caller.
        close_stdin: bool,
    },
    /// It waits for capacity or for its shell session; its stdin is
    /// written when it starts.
    Queued {
        /// Its id.
        id: JobId,
    },
    /// It could not start (an unusable `cwd`, a failed spawn): its terminal
    /// result, already out of the table, for the caller to deliver.
    Ended(Box<Job>),
}

/// Why a job was not launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The cwd policy refuses its `cwd`.
    #[error("{0}")]
    CwdRefused(String),
    /// Its shell session belongs to another user.
    #[error(transparent)]
    ShellSession(#[from] Refused),
    /// The queue is full.
    #[error("the job queue is full ({running} running, {queued} queued)")]
    QueueFull {
        /// Jobs running.
        running: usize,
        /// Jobs queued.
        queued: usize,
    },
    /// The circuit breaker refuses jobs now. `ended` is the
    /// job as a terminal start error, out of the table, for a front-end that
    /// delivers it as a result.
    #[error("{refusal}")]
    BreakerOpen {
        /// The breaker's message.
        refusal: String,
        /// The job, ended.
        ended: Box<Job>,
    },
    /// It failed to start and another request took its result first.
    #[error("the result of {0} was delivered elsewhere")]
    DeliveredElsewhere(JobId),
}

/// A spawned child, on pipes or on a terminal.
enum Spawned {
    Pipes(init::Spawned),
    Terminal(init::SpawnedTerminal, init::WindowSize),
}

impl Spawned {
    fn pid(&self) -> init::Pid {
        match self {
            Spawned::Pipes(s) => s.pid,
            Spawned::Terminal(s, _) => s.pid,
        }
    }
}

/// The terminal type a terminal job's programs see: `TERM=xterm-256color`
/// (what the screen's parser understands), unless the job's own
/// environment names one.
const TERM: (&str, &str) = ("TERM", "xterm-256color");

/// `spec` with [`TERM`] under its own variables (a job's `env` wins).
fn with_term(spec: &SpawnSpec) -> SpawnSpec {
    let mut spec = spec.clone();
    if !spec.env.iter().any(|(k, _)| k == TERM.0) {
        spec.env.insert(0, (TERM.0.into(), TERM.1.into()));
    }
    spec
}

/// Our end of a job's pipe, made non-blocking for the reactor with one
/// `ioctl(FIONBIO)`. The end is known to be an anonymous pipe with the
/// right access (init's spawn made it), so tokio's `from_owned_fd` checks
/// (an `fstat` for the type, `F_GETFL` for the mode, `F_SETFL`) are three
/// system calls per pipe that prove nothing here; `from_owned_fd_unchecked`
/// then only registers it. The child's end stays blocking: `O_NONBLOCK`
/// lives on the open file description, and each end has its own.
fn nonblocking(end: OwnedFd) -> std::io::Result<OwnedFd> {
    rustix::io::ioctl_fionbio(&end, true)?;
    Ok(end)
}

/// Why a step of a start failed.
enum StartFailed {
    /// The breaker refused the spawn.
    Breaker(String),
    /// The step failed: the job's start error.
    Error(String),
    /// The job left the table while it was being started (shutdown).
    Gone,
}

impl Jobs {
    /// Launches a job: checks its `cwd`, joins its shell session, submits
    /// it (it starts now if there is capacity and nobody waits before it,
    /// else it joins the queue) and, if it starts now, starts it and writes
    /// its stdin (`stdin`, then closed when `close_stdin`) in a task of its
    /// own — a queued job's is written the same way when it starts.
    pub fn launch(&self, l: Launch) -> Result<Launched, LaunchError> {
        self.launch_with(l, false)
    }

    /// [`Jobs::launch`], but a job that starts now leaves its stdin to the
    /// caller ([`Launched::Started`] carries it), for a front-end that
    /// reports a failed write or cancels a blocked one (`execute`). A
    /// queued job's is still written by `jobs` when it starts.
    pub fn launch_leaving_stdin(&self, l: Launch) -> Result<Launched, LaunchError> {
        self.launch_with(l, true)
    }

    fn launch_with(&self, l: Launch, leave_stdin: bool) -> Result<Launched, LaunchError> {
        let shared = &self.shared;
        let cwd = match shared.resolve_cwd(l.cwd.as_deref()) {
            Ok(cwd) => cwd,
            Err(Refusal::Outside(why)) => return Err(LaunchError::CwdRefused(why)),
            Err(Refusal::Unusable(why)) => {
                return Ok(Launched::Ended(Box::new(self.not_started(l, why))));
            }
        };
        let shell_session = match &l.shell_session {
            None => None,
            Some(name) => {
                // The uid is the key, so `"nobody"` and `"65534"` are one owner.
                let owner = l.setup.user.as_ref().map(|c| c.uid.to_string());
                self.shell_sessions().join(name, &owner)?;
                Some(ShellSessionUse {
                    name: name.clone(),
                    owner,
                    own_cwd: l.cwd.is_some(),
                })
            }
        };
        let pending = Pending {
            spec: SpawnSpec {
                program: l.program,
                cwd,
                env: l.env,
                setup: l.setup,
            },
            stdin: l.stdin,
            close_stdin: l.close_stdin,
            timeout: l.timeout,
            idle_timeout: l.idle_timeout,
            shell_session,
            terminal: l.tty,
        };
        let id = shared.table.next_id();
        let mut job = Job::queued(id, pending, l.capture, l.label, l.window);
        job.owner = l.owner;
        let admitted = shared
            .table
            .submit(job)
            .map_err(|QueueFull { running, queued }| LaunchError::QueueFull { running, queued })?;
        let mut mine = None;
        for a in admitted {
            if a.id == id {
                mine = Some(a);
            } else {
                shared.start_admitted(a);
            }
        }
        let Some(a) = mine else {
            return Ok(Launched::Queued { id });
        };
        let mut pending = *a.pending;
        let stdin = pending.stdin.take();
        let close_stdin = pending.close_stdin;
        let failed = match shared.start(id, pending) {
            Ok(()) if !leave_stdin => {
                shared.write_initial_stdin(id, stdin, close_stdin);
                return Ok(Launched::Started {
                    id,
                    stdin: None,
                    close_stdin: false,
                });
            }
            Ok(()) => {
                return Ok(Launched::Started {
                    id,
                    stdin,
                    close_stdin,
                });
            }
            Err(failed) => failed,
        };
        match (self.deliver(id), failed) {
            (Claim::Delivered(ended), StartFailed::Breaker(refusal)) => {
                Err(LaunchError::BreakerOpen { refusal, ended })
            }
            (Claim::Delivered(ended), _) => Ok(Launched::Ended(ended)),
            (Claim::Running | Claim::Unknown, _) => Err(LaunchError::DeliveredElsewhere(id)),
        }
    }

    /// A job that cannot start at all (its `cwd` is unusable): it gets an
    /// id and a terminal start error but never enters the table.
    fn not_started(&self, l: Launch, error: String) -> Job {
        let pending = Pending {
            spec: SpawnSpec::shell(""),
            stdin: None,
            close_stdin: false,
            timeout: None,
            idle_timeout: None,
            shell_session: None,
            terminal: l.tty,
        };
        let mut job = Job::queued(self.shared.table.next_id(), pending, l.capture, l.label, 0);
        job.owner = l.owner;
        tracing::info!(job = %job.id, %error, "job failed to start");
        job.state = JobState::NotStarted { error };
        job
    }
}

impl Shared {
    /// A requested working directory under the cwd policy (as is without
    /// one: the fuzz facade and unit tests).
    fn resolve_cwd(&self, cwd: Option<&str>) -> Result<init::Cwd, Refusal> {
        match self.resolve_cwd.get() {
            Some(resolve) => resolve(cwd),
            None => Ok(cwd
                .filter(|c| !c.is_empty())
                .map_or(init::Cwd::Inherit, |c| init::Cwd::Path(c.into()))),
        }
    }

    /// Starts a job the table admitted from the queue, and writes the stdin
    /// it asked for in a task of its own.
    pub(super) fn start_admitted(self: &Arc<Self>, admitted: Admitted) {
        let Admitted { id, pending } = admitted;
        let mut pending = *pending;
        let data = pending.stdin.take();
        let close = pending.close_stdin;
        if self.start(id, pending).is_ok() {
            self.write_initial_stdin(id, data, close);
        }
    }

    /// Writes a started job's initial stdin, `data` and then EOF when
    /// `close`, in a task of its own: a job that does not read its stdin
    /// blocks only that task, never the launch or the front-end's stream.
    fn write_initial_stdin(self: &Arc<Self>, id: JobId, data: Option<Vec<u8>>, close: bool) {
        if data.is_none() && !close {
            return;
        }
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            let data = data.unwrap_or_default();
            // A job that already ended or closed its stdin needs none.
            if let Err(e @ super::StdinError::Write { .. }) =
                shared.write_stdin(id, &data, close).await
            {
                tracing::info!(job = %id, error = %e, "writing a job's initial stdin");
            }
        });
    }

    /// Starts an admitted job, step by step; a failed step goes to the one
    /// failure path.
    fn start(self: &Arc<Self>, id: JobId, pending: Pending) -> Result<(), StartFailed> {
        let mut run = None;
        let started = self.try_start(id, pending, &mut run);
        if let Err(failed) = &started {
            self.start_failed(id, run.as_ref(), failed);
        }
        started
    }

    fn try_start(
        self: &Arc<Self>,
        id: JobId,
        pending: Pending,
        run: &mut Option<ShellSessionRun>,
    ) -> Result<(), StartFailed> {
        let Pending {
            mut spec,
            timeout,
            idle_timeout,
            shell_session,
            terminal,
            ..
        } = pending;
        let (state_pipe, complete_env) = match shell_session {
            Some(using) => self.enter_shell_session(&mut spec, using, run)?,
            None => (None, false),
        };
        if spec.setup.oom_score_adj.is_none() {
            spec.setup.oom_score_adj = self.oom_score_adj;
        }
        // Read before the spawn: a rise after it is the job's.
        let oom_kills = self.oom.as_ref().and_then(super::oom::OomCounter::read);
        let cpu_seconds = spec
            .setup
            .limits
            .iter()
            .find(|l| l.resource == init::Resource::CpuSeconds)
            .map(|l| l.soft);
        let spawned = self.spawn(id, &spec, state_pipe.as_ref(), complete_env, terminal);
        // The child has its copy of the write end; ours must go, or the
        // state pipe would never reach EOF.
        if let (Some(run), Some((read, _write))) = (run.as_mut(), state_pipe) {
            run.state = pipe::Receiver::from_owned_fd(read).ok();
        }
        let spawned = spawned?;
        let pid = spawned.pid();
        let registered = (|| -> std::io::Result<_> {
            Ok(match spawned {
                Spawned::Pipes(s) => {
                    let stdout = Arc::new(pipe::Receiver::from_owned_fd_unchecked(nonblocking(
                        s.stdout,
                    )?)?);
                    let stderr = Arc::new(pipe::Receiver::from_owned_fd_unchecked(nonblocking(
                        s.stderr,
                    )?)?);
                    self.table
                        .set_output_pipes(id, [Arc::clone(&stdout), Arc::clone(&stderr)]);
                    let output = runner::Output::Pipes { stdout, stderr };
                    let stdin = StdinWriter::Pipe(pipe::Sender::from_owned_fd_unchecked(
                        nonblocking(s.stdin)?,
                    )?);
                    (stdin, None, output, s.exit)
                }
                Spawned::Terminal(s, size) => {
                    let t = Arc::new(Terminal::new(s.master, s.device, size)?);
                    let stdin = StdinWriter::Terminal(Arc::clone(&t));
                    let output = runner::Output::Terminal(Arc::clone(&t));
                    (stdin, Some(t), output, s.exit)
                }
            })
        })();
        let (stdin, terminal, output, exit) = registered.map_err(|e| {
            // Registering fresh descriptors with the reactor does not fail
            // in practice; do not leave the child behind if it does. Its
            // pending exit is dropped, so the reaper treats it as an orphan.
            let _ = init::signal_group(pid, Signal::KILL);
            StartFailed::Error(format!("setting up pipes: {e}"))
        })?;
        let removed = self.table.with(id, |j| j.removed.clone());
        let (true, Some(removed)) = (self.table.started(id, pid, Some(stdin), terminal), removed)
        else {
            let _ = init::signal_group(pid, Signal::KILL);
            return Err(StartFailed::Gone);
        };
        let io = runner::Io { output, exit };
        let limits = runner::Limits {
            deadline: timeout.map(|t| Instant::now() + t),
            idle: idle_timeout,
            oom_kills,
            cpu_seconds,
        };
        tokio::spawn(runner::run(
            Arc::clone(self),
            id,
            pid,
            io,
            removed,
            limits,
            run.take(),
        ));
        tracing::debug!(job = %id, pid = pid.0, "job started");
        Ok(())
    }

    /// A job of a shell session starts with the shell session's cwd (unless
    /// it gave its own) and environment, and a `command` job with the
    /// epilogue and its state pipe. Sets `run` before anything
    /// can fail, so the failure path ends the job's turn in the lane.
    fn enter_shell_session(
        &self,
        spec: &mut SpawnSpec,
        using: ShellSessionUse,
        run: &mut Option<ShellSessionRun>,
    ) -> Result<(Option<(OwnedFd, OwnedFd)>, bool), StartFailed> {
        let snap = self.shell_sessions.snapshot(&using.name, &using.owner);
        *run = Some(ShellSessionRun {
            name: using.name,
            generation: snap.generation,
            state: None,
        });
        if !using.own_cwd
            && let Some(cwd) = snap.cwd
        {
            spec.cwd = match self.resolve_cwd.get() {
                Some(resolve) => resolve(Some(&cwd.to_string_lossy())).map_err(|r| match r {
                    Refusal::Outside(why) | Refusal::Unusable(why) => StartFailed::Error(why),
                })?,
                None => init::Cwd::Path(cwd),
            };
        }
        let mut complete_env = false;
        if let Some(mut env) = snap.env {
            env.append(&mut spec.env);
            spec.env = env;
            complete_env = true;
        }
        let mut state_pipe = None;
        if let Program::Shell(command) = &spec.program {
            let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
                .map_err(|e| StartFailed::Error(format!("creating pipes: {e}")))?;
            spec.program = Program::Shell(shell_session::wrap(command, read.as_raw_fd()));
            state_pipe = Some((read, write));
        }
        Ok((state_pipe, complete_env))
    }

    /// Spawns the job behind the breaker, on pipes or on a
    /// terminal of size `terminal`.
    fn spawn(
        &self,
        id: JobId,
        spec: &SpawnSpec,
        state_pipe: Option<&(OwnedFd, OwnedFd)>,
        complete_env: bool,
        terminal: Option<init::WindowSize>,
    ) -> Result<Spawned, StartFailed> {
        if let Err(refusal) = self.breaker.check() {
            crate::metrics::spawn_failed("breaker_open");
            return Err(StartFailed::Breaker(refusal));
        }
        let extras = init::Extras {
            fd: state_pipe.map(|(_, w)| (w.as_fd(), shell_session::STATE_FD)),
            complete_env,
        };
        let spawned = match terminal {
            None => self.init.spawn_with(spec, extras).map(Spawned::Pipes),
            Some(size) => self
                .init
                .spawn_terminal(&with_term(spec), extras, size)
                .map(|s| Spawned::Terminal(s, size)),
        };
        let spawned = spawned.map_err(|e| {
            self.breaker.failed(&e);
            crate::metrics::spawn_failed("spawn_error");
            StartFailed::Error(e.to_string())
        })?;
        self.breaker.succeeded();
        crate::metrics::job_started();
        let waited = self.table.with(id, |j| j.queued_at).flatten();
        crate::metrics::queue_wait(waited.map_or(Duration::ZERO, |q| q.elapsed()));
        Ok(spawned)
    }

    /// The one failure path of a start: the shell session's lane moves on,
    /// the job becomes a terminal start error (unless it already left the
    /// table), and the next queued job is admitted.
    fn start_failed(
        self: &Arc<Self>,
        id: JobId,
        run: Option<&ShellSessionRun>,
        failed: &StartFailed,
    ) {
        if let Some(run) = run {
            self.shell_sessions.finish(&run.name, run.generation, None);
        }
        let error = match failed {
            StartFailed::Breaker(error) | StartFailed::Error(error) => error,
            StartFailed::Gone => return,
        };
        tracing::info!(job = %id, %error, "job failed to start");
        crate::metrics::job_finished("start_error", None);
        self.table.start_failed(id, error.clone());
        self.admit_next();
    }
}
