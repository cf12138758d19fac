//! The per-job runner task: owns the job's stdout/stderr pipes and its exit
//! watch, and moves bytes into the table.
//!
//! When the reaper reports the direct child's exit, the runner reads exactly
//! the bytes that are in the pipes at that moment (`FIONREAD`) and only then
//! marks the job terminal. Everything the child wrote before it exited is in
//! the pipe by then (a pipe write completes before `write` returns), so the
//! result is complete without any settle delay, even when a backgrounded
//! descendant keeps the pipe open and keeps writing. After that
//! the runner keeps capturing until EOF or until the job leaves the table.

use std::cell::RefCell;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;

use init::{ExitStatus, PendingExit, Reaped};
use tokio::net::unix::pipe;
use tokio_util::sync::CancellationToken;

use std::time::Duration;

use init::{Pid, Signal};
use tokio::time::Instant;

use super::terminal::Terminal;
use super::{Cause, ExitOutcome, JobId, JobTable, Shared, Stream, shell_session, sleep_until_opt};

/// Read size. One buffer per runtime thread, not per job: reads are
/// synchronous (`try_read` between awaits), so a thread-local is never
/// borrowed across a suspension point. It is allocated on first use and
/// released when the job table becomes empty ([`release_buffer`]): it is
/// its own mapping (larger than the mmap threshold), so an idle server
/// keeps none of the pages that a burst of output touched.
const CHUNK: usize = 256 * 1024;

/// Pipe capacity for a stream that fills its pipe. Pipes start at the kernel
/// default (64 KiB) and only a job whose read returns a full default pipe is
/// grown, once: a bulk writer then costs one wake-up per MiB instead of one
/// per 64 KiB, while a burst of quiet jobs does not pin MiBs of pipe buffers
/// (the per-user `pipe-user-pages-soft` budget). Best effort: a refusal
/// (`pipe-max-size`, budget) leaves the pipe as it was.
const BULK_PIPE: usize = 1024 * 1024;
const DEFAULT_PIPE: usize = 64 * 1024;

/// Upper bound on reads per wake-up, so one chatty job cannot starve others
/// on the same worker thread.
const READS_PER_WAKE: usize = 16;

thread_local! {
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on this thread's read buffer, allocating it if needed.
fn with_buffer<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    BUF.with_borrow_mut(|buf| {
        if buf.is_empty() {
            *buf = vec![0; CHUNK];
        }
        f(buf)
    })
}

/// Frees this thread's read buffer (the table calls it when it becomes
/// empty). A buffer in use is left alone.
pub fn release_buffer() {
    BUF.with(|buf| {
        if let Ok(mut buf) = buf.try_borrow_mut() {
            *buf = Vec::new();
        }
    });
}

/// The output and pending exit a runner owns.
pub struct Io {
    /// Where the job's output comes from.
    pub output: Output,
    /// The direct child's exit.
    pub exit: PendingExit,
}

/// A job's output: two pipes, or a terminal job's master, whose
/// bytes are its `stdout`.
pub enum Output {
    /// A pipe job's stdout and stderr read ends.
    Pipes {
        /// Read end of stdout (the job also holds it, to see bytes not read
        /// yet: [`super::awaiting`]).
        stdout: Arc<pipe::Receiver>,
        /// Read end of stderr (likewise).
        stderr: Arc<pipe::Receiver>,
    },
    /// A terminal job's terminal.
    Terminal(Arc<Terminal>),
}

#[derive(Debug, PartialEq, Eq)]
enum Read {
    Open,
    Eof,
    Gone,
}

/// Reads what is available now (up to `READS_PER_WAKE` chunks).
fn read_ready(table: &JobTable, id: JobId, stream: Stream, rx: &pipe::Receiver) -> Read {
    with_buffer(|buf| {
        for _ in 0..READS_PER_WAKE {
            match rx.try_read(buf) {
                Ok(0) => return Read::Eof,
                Ok(n) => {
                    if n == DEFAULT_PIPE {
                        grow(rx);
                    }
                    if !table.push_output(id, stream, &buf[..n]) {
                        return Read::Gone;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Read::Open,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(job = %id, error = %e, "reading job output");
                    return Read::Eof;
                }
            }
        }
        Read::Open
    })
}

fn grow(rx: &pipe::Receiver) {
    if rustix::pipe::fcntl_getpipe_size(rx.as_fd()).is_ok_and(|size| size < BULK_PIPE) {
        let _ = rustix::pipe::fcntl_setpipe_size(rx.as_fd(), BULK_PIPE);
    }
}

/// Reads the bytes that are in the pipe right now, bypassing tokio's
/// readiness cache (which may not have seen them yet).
fn drain_present(table: &JobTable, id: JobId, stream: Stream, rx: &pipe::Receiver) {
    let Ok(mut left) = rustix::io::ioctl_fionread(rx.as_fd()) else {
        return;
    };
    with_buffer(|buf| {
        while left > 0 {
            let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            match rustix::io::read(rx.as_fd(), &mut buf[..want]) {
                Ok(0) => return,
                Ok(n) => {
                    left = left.saturating_sub(n as u64);
                    if !table.push_output(id, stream, &buf[..n]) {
                        return;
                    }
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return,
            }
        }
    });
}

/// A shell-session job's state pipe and where its state goes.
#[derive(Debug)]
pub struct ShellSessionRun {
    /// The session.
    pub name: String,
    /// The session's generation when the job started.
    pub generation: u64,
    /// The read end of the state pipe (`None` for an `argv` job, which
    /// leaves the session unchanged).
    pub state: Option<pipe::Receiver>,
}

/// What a session job's shell reported so far, bounded by
/// [`shell_session::MAX_STATE_BYTES`] (past it, nothing is adopted).
#[derive(Default)]
struct StateBuf {
    bytes: Vec<u8>,
    overflow: bool,
}

impl StateBuf {
    fn push(&mut self, chunk: &[u8]) {
        if self.bytes.len() + chunk.len() > shell_session::MAX_STATE_BYTES {
            self.overflow = true;
            self.bytes = Vec::new();
        } else if !self.overflow {
            self.bytes.extend_from_slice(chunk);
        }
    }

    /// Reads what is available; `false` at EOF or on an error.
    fn read(&mut self, rx: &pipe::Receiver) -> bool {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match rx.try_read(&mut chunk) {
                Ok(0) => return false,
                Ok(n) => self.push(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    /// Reads the bytes in the pipe right now (the shell has exited: all it
    /// wrote is there).
    fn drain_present(&mut self, rx: &pipe::Receiver) {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match rustix::io::read(rx.as_fd(), &mut chunk) {
                Ok(0) => return,
                Ok(n) => self.push(&chunk[..n]),
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return,
            }
        }
    }
}

/// The deadlines a runner enforces, and what it needs to tell why the job
/// ended.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// When the job is ended as timed out.
    pub deadline: Option<Instant>,
    /// End the job when it writes nothing for this long.
    pub idle: Option<Duration>,
    /// The memory cgroup's OOM-kill counter read just before the spawn.
    pub oom_kills: Option<u64>,
    /// The job's `cpu_seconds` limit (its soft `RLIMIT_CPU`).
    pub cpu_seconds: Option<u64>,
}

/// How the direct child ended, as the reaper reported it.
struct Ended {
    outcome: ExitOutcome,
    /// Its CPU time (`wait4`), when its status arrived.
    cpu: Option<Duration>,
}

/// Why a job whose direct child ended with `end` did, as the kernel says —
/// when the server has not already recorded a cause of its own (`ours`): a
/// signal our `kill` sent (`kill_signals`), a resource-limit signal, a
/// SIGKILL while the OOM-kill counter rose past `limits.oom_kills` (read
/// again now), or a SIGKILL with the child's CPU time at its `cpu_seconds`
/// (the hard limit, one second above, when it ignored SIGXCPU). Anything
/// else has no known cause: an exit code is never a cause.
fn kernel_cause(
    end: &Ended,
    (ours, kill_signals): (Option<Cause>, u128),
    limits: &Limits,
    counter: Option<&super::oom::OomCounter>,
) -> Option<Cause> {
    if ours.is_some() {
        return None;
    }
    let before = limits.oom_kills;
    match end.outcome {
        ExitOutcome::Signaled(s)
            if u32::try_from(s.as_raw())
                .is_ok_and(|bit| kill_signals & 1u128.checked_shl(bit).unwrap_or(0) != 0) =>
        {
            Some(Cause::Killed)
        }
        ExitOutcome::Signaled(s) if s == Signal::XCPU => Some(Cause::CpuLimit),
        ExitOutcome::Signaled(s) if s == Signal::XFSZ => Some(Cause::FileSizeLimit),
        ExitOutcome::Signaled(s) if s == Signal::KILL => {
            let oom = counter
                .and_then(super::oom::OomCounter::read)
                .zip(before)
                .is_some_and(|(now, before)| now > before);
            let at_cpu_limit = end
                .cpu
                .zip(limits.cpu_seconds)
                .is_some_and(|(cpu, max)| cpu >= Duration::from_secs(max));
            if oom {
                Some(Cause::Oom)
            } else if at_cpu_limit {
                Some(Cause::CpuLimit)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Runs until both pipes hit EOF after the child exited, or the job is
/// removed from the table. Enforces the job's deadlines while the child
/// runs: at either one the job is marked with its cause and its group is
/// ended (TERM, grace, KILL) in a task of its own, while this one keeps
/// reading until the child is reaped.
///
/// A shell-session job's state pipe is read alongside (so a large
/// environment cannot block the shell's epilogue on a full pipe); when the
/// shell exits on its own — not signalled, not ended at a deadline — and
/// the state arrived intact, the session adopts it *before* the job is
/// marked terminal, so the session's next job starts with it.
pub(crate) async fn run(
    shared: Arc<Shared>,
    id: JobId,
    pgid: Pid,
    io: Io,
    removed: CancellationToken,
    limits: Limits,
    mut session: Option<ShellSessionRun>,
) {
    let Io { output, exit } = io;
    let mut exit = exit.with_usage();
    let table = &shared.table;
    let (mut out, mut err, term) = match output {
        Output::Pipes { stdout, stderr } => (Some(stdout), Some(stderr), None),
        Output::Terminal(t) => (None, None, Some(t)),
    };
    // `term` itself never changes (a readiness guard borrows it); this
    // says whether its output is still open.
    let mut term_open = term.is_some();
    let mut exited = false;
    let mut expired = false;
    let mut last_output = Instant::now();
    let started = last_output;
    let mut state_rx = session.as_mut().and_then(|s| s.state.take());
    let mut state = StateBuf::default();
    loop {
        let idle_deadline = limits.idle.map(|idle| last_output + idle);
        tokio::select! {
            () = removed.cancelled() => return,
            status = &mut exit, if !exited => {
                exited = true;
                for (stream, rx) in [(Stream::Stdout, &out), (Stream::Stderr, &err)] {
                    if let Some(rx) = rx {
                        drain_present(table, id, stream, rx.as_ref());
                    }
                }
                if let Some(t) = term.as_deref().filter(|_| term_open)
                    && drain_terminal(table, id, t) == Read::Eof
                {
                    term_open = false;
                }
                let ended = match status {
                    Ok(Reaped { status: ExitStatus::Exited(code), cpu }) => Ended {
                        outcome: ExitOutcome::Exited(code),
                        cpu: Some(cpu),
                    },
                    Ok(Reaped { status: ExitStatus::Signaled(signal), cpu }) => Ended {
                        outcome: ExitOutcome::Signaled(signal),
                        cpu: Some(cpu),
                    },
                    Err(e) => {
                        tracing::error!(job = %id, error = %e, "exit status lost");
                        Ended { outcome: ExitOutcome::Lost, cpu: None }
                    }
                };
                let end = ended.outcome;
                let ours = table.with(id, |j| (j.cause, j.kill_signals)).unwrap_or((None, 0));
                let kernel = kernel_cause(&ended, ours, &limits, shared.oom.as_ref());
                let ours = ours.0;
                if let Some(cause) = kernel {
                    tracing::info!(job = %id, cause = cause.name(), "job ended by the kernel");
                    table.set_cause(id, cause);
                }
                if let Some(run) = session.take() {
                    if let Some(rx) = state_rx.take() {
                        state.drain_present(&rx);
                    }
                    let on_its_own = matches!(end, ExitOutcome::Exited(_))
                        && !expired
                        && table.with(id, |j| j.cause.is_none()).unwrap_or(false);
                    let adopted = (on_its_own && !state.overflow)
                        .then(|| shell_session::parse_state(&state.bytes))
                        .flatten();
                    tracing::debug!(job = %id, session = %run.name, adopted = adopted.is_some(), "session job ended");
                    shared.shell_sessions.finish(&run.name, run.generation, adopted);
                    state = StateBuf::default();
                }
                if table.set_terminal(id, end) {
                    shared.admit_next();
                }
                crate::metrics::job_duration(started.elapsed());
                crate::metrics::job_finished(
                    match end {
                        _ if expired => "timeout",
                        ExitOutcome::Exited(0) => "success",
                        ExitOutcome::Signaled(_) => "signal",
                        ExitOutcome::Exited(_) | ExitOutcome::Lost | ExitOutcome::Running => "error",
                    },
                    ours.or(kernel).map(Cause::name),
                );
            }
            () = sleep_until_opt(limits.deadline), if !exited && !expired => {
                expired = true;
                shared.expire(id, pgid, Cause::Timeout);
            }
            () = sleep_until_opt(idle_deadline), if !exited && !expired => {
                expired = true;
                shared.expire(id, pgid, Cause::IdleTimeout);
            }
            ready = readable(out.as_deref()), if out.is_some() => {
                last_output = Instant::now();
                if !on_readable(table, id, Stream::Stdout, &mut out, ready) {
                    return;
                }
            }
            ready = readable(state_rx.as_ref()), if state_rx.is_some() => {
                let open = ready.is_ok() && state_rx.as_ref().is_some_and(|rx| state.read(rx));
                if !open {
                    state_rx = None;
                }
            }
            ready = readable(err.as_deref()), if err.is_some() => {
                last_output = Instant::now();
                if !on_readable(table, id, Stream::Stderr, &mut err, ready) {
                    return;
                }
            }
            ready = terminal_readable(term.as_deref()), if term_open => {
                last_output = Instant::now();
                let read = match (ready, term.as_deref()) {
                    (Ok(guard), Some(t)) => read_terminal(table, id, t, guard),
                    _ => Read::Eof,
                };
                match read {
                    Read::Open => {}
                    Read::Eof => term_open = false,
                    Read::Gone => return,
                }
            }
        }
        if exited && out.is_none() && err.is_none() && !term_open {
            return;
        }
    }
}

/// Reads a stream that became readable; closes it (`None`) at EOF or on an
/// error. Returns `false` when the job has left the table.
fn on_readable(
    table: &JobTable,
    id: JobId,
    stream: Stream,
    slot: &mut Option<Arc<pipe::Receiver>>,
    ready: io::Result<()>,
) -> bool {
    let read = match (ready, slot.as_deref()) {
        (Ok(()), Some(rx)) => read_ready(table, id, stream, rx),
        _ => Read::Eof,
    };
    match read {
        Read::Open => true,
        Read::Gone => false,
        Read::Eof => {
            *slot = None;
            true
        }
    }
}

async fn readable(rx: Option<&pipe::Receiver>) -> io::Result<()> {
    match rx {
        Some(rx) => rx.readable().await,
        None => std::future::pending().await,
    }
}

async fn terminal_readable(
    t: Option<&Terminal>,
) -> io::Result<tokio::io::unix::AsyncFdReadyGuard<'_, std::os::fd::OwnedFd>> {
    match t {
        Some(t) => t.master().readable().await,
        None => std::future::pending().await,
    }
}

/// Reads what a terminal's master has now (up to `READS_PER_WAKE` chunks)
/// into the job's `stdout`. `EIO` is the end of the output, not an error:
/// the master reads it once no process holds the slave any more (the
/// job's processes have all exited or closed their terminal).
fn read_terminal(
    table: &JobTable,
    id: JobId,
    t: &Terminal,
    mut guard: tokio::io::unix::AsyncFdReadyGuard<'_, std::os::fd::OwnedFd>,
) -> Read {
    with_buffer(|buf| {
        for _ in 0..READS_PER_WAKE {
            match guard.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut *buf)?)) {
                Err(_would_block) => return Read::Open,
                Ok(Ok(0)) => return Read::Eof,
                Ok(Ok(n)) => {
                    // The screen first: see `Terminal`'s invariant.
                    t.feed(&buf[..n]);
                    if !table.push_output(id, Stream::Stdout, &buf[..n]) {
                        return Read::Gone;
                    }
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) if e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => {
                    return Read::Eof;
                }
                Ok(Err(e)) => {
                    tracing::warn!(job = %id, error = %e, "reading a terminal job's output");
                    return Read::Eof;
                }
            }
        }
        Read::Open
    })
}

/// The most a terminal job's exit drains before it is marked terminal:
/// more than a terminal's buffers hold (the line discipline's 4 KiB and
/// the pty's flip buffers, 64 KiB), so everything the child wrote before
/// it exited is read, while a descendant that keeps writing cannot hold
/// the result back.
const TERMINAL_DRAIN: usize = 4 * CHUNK;

/// Reads what a terminal job wrote before its direct child exited. Unlike
/// a pipe's, a terminal's bytes may still be on their way from the slave
/// to the master when the child is reaped (the pty hands them on from a
/// kernel work queue); a read of the master waits for that hand-over
/// before it answers `EAGAIN` (`n_tty_read` flushes the port's buffer
/// work first), so reading until `EAGAIN` (or `EIO`, the end) gets them
/// all, with no settle delay. Bounded by [`TERMINAL_DRAIN`].
fn drain_terminal(table: &JobTable, id: JobId, t: &Terminal) -> Read {
    let fd = t.master().get_ref();
    let mut read = 0;
    with_buffer(|buf| {
        while read < TERMINAL_DRAIN {
            match rustix::io::read(fd, &mut *buf) {
                Ok(0) | Err(rustix::io::Errno::IO) => return Read::Eof,
                Ok(n) => {
                    read += n;
                    t.feed(&buf[..n]);
                    if !table.push_output(id, Stream::Stdout, &buf[..n]) {
                        return Read::Gone;
                    }
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return Read::Open,
            }
        }
        Read::Open
    })
}
