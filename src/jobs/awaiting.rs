//! Awaiting input (docs/tools.md, "Awaiting input"): whether a running
//! job is blocked reading its own stdin (a pipe job) or its own terminal
//! (a PTY job).
//!
//! # What it is
//! A look at `/proc`, on demand: for every process of the job (its process
//! group; a terminal job's whole session, whose job-control groups differ),
//! for every thread, first `/proc/PID/task/TID/syscall`. A thread counts as
//! reading the job's input when it sleeps in
//! - a `read` family call (`read`, `readv`, `pread64`, `preadv`,
//!   `preadv2`) on a descriptor, or
//! - a `poll`/`ppoll`/`select`/`pselect6` whose read set holds a descriptor
//!   (the set is read from `/proc/PID/task/TID/mem`), or an
//!   `epoll_wait`/`epoll_pwait`/`epoll_pwait2` whose epoll instance watches
//!   one for reading (its `fdinfo`),
//!
//! **whose open file is the job's input** ([`Input`]): the same pipe inode,
//! or the same terminal, found by `stat` through `/proc/PID/task/TID/fd/N`,
//! never by the descriptor's number (a shell's `read <&3` reads fd 0 after
//! pointing it at fd 3's file). A terminal job's `/dev/tty` counts when the
//! process's controlling terminal is the job's.
//!
//! When `syscall` cannot be read (it needs ptrace-attach rights), the
//! fallback is `wchan`: a sleep in a known tty, pipe or poll wait
//! (`n_tty_read`, `wait_woken`, `pipe_read`, `anon_pipe_read`,
//! `pipe_wait_readable`, `poll_schedule_timeout`, `do_select`, `ep_poll`,
//! …), and only when every descriptor the process holds open for reading
//! that could make a reader wait (a pipe, a socket, a terminal, an anonymous
//! inode such as an eventfd) is the job's input — the wait cannot then be
//! on anything else.
//!
//! # What it is not
//! Not a guess from silence: a sleeping job that is not reading its input
//! (`sleep`, a TCP connect, a shell in `wait4`, a read of another pipe) is
//! never reported; false positives are what sank every tool that tried
//! this. Unknown system calls, unreadable files, a vanished process: all
//! answer "not reading". A job with any thread runnable (`R`) is not
//! blocked, whatever another thread reads.
//!
//! # Invariants
//! - No cost when nobody asks: nothing here runs in the background; a look
//!   happens only for a `wait` with `until.input`, a `status`, a
//!   `list_jobs` or a metrics scrape, and only for a running job whose stdin
//!   is open, that has written nothing for [`SILENCE`], whose stdin
//!   pipe holds no unread byte (no write in progress either: the look
//!   holds the stdin slot, so no write can start under it), and whose
//!   output pipes (or terminal) hold no byte its runner has not read yet:
//!   a job is never reported before the prompt it printed reached its
//!   window (and screen).
//! - A `wait` re-looks at a silent job on a bounded backoff
//!   ([`FIRST_RECHECK`] doubling to [`LAST_RECHECK`]) and ends on the first
//!   look that finds it reading: no fixed settle delay.
//! - One answer reads the process list of `/proc` once ([`Processes`]),
//!   however many jobs it looks at (`list_jobs`, a scrape, a `wait` on
//!   many ids); each job then reads only its own processes' files.
//! - A look reads `syscall` again after checking the descriptors and
//!   requires the same line (same call, same stack pointer): the thread
//!   stayed in that one call through the whole look.

use std::fs;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::sync::Arc;
use std::time::Duration;

use init::Pid;
use tokio::time::Instant;

use super::state::{ExitOutcome, JobState};
use super::table::StdinWriter;
use super::{JobId, Shared};

/// How long a job must have written nothing before it is looked at.
pub(super) const SILENCE: Duration = Duration::from_millis(50);

/// The first re-look at a silent job that was not reading.
pub(super) const FIRST_RECHECK: Duration = Duration::from_millis(5);

/// The longest pause between two looks at a silent job.
pub(super) const LAST_RECHECK: Duration = Duration::from_millis(100);

/// Where a job stands, for awaiting input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Awaiting {
    /// Blocked reading its input, as `Source` showed.
    Yes(Source),
    /// Not now: not running, stdin closed or being written, bytes unread in
    /// it, or no process of the job reads it.
    No,
    /// It wrote something less than [`SILENCE`] ago: ask again then.
    NotBefore(Instant),
}

impl Shared {
    /// Whether job `id` is blocked reading its stdin or terminal now (the
    /// one look, for every verb that reports it). `procs` is the process
    /// list the look uses, read from `/proc` by the first look that needs
    /// it: a caller looking at many jobs at once (`list`) reads it once.
    pub(super) fn awaiting_input(&self, id: JobId, procs: &mut Option<Processes>) -> Awaiting {
        let found = self.table.with(id, |j| match (&j.state, j.input) {
            (
                JobState::Started {
                    pgid,
                    outcome: ExitOutcome::Running,
                    ..
                },
                Some(input),
            ) => Some((
                *pgid,
                input,
                j.last_output,
                Arc::clone(&j.stdin),
                j.output_pipes.clone(),
                j.tty.open().cloned(),
            )),
            _ => None,
        });
        let Some((leader, input, last_output, slot, pipes, terminal)) = found.flatten() else {
            return Awaiting::No;
        };
        // Output written and not read yet (a prompt on its way to the
        // window) is output: the job is not silent, and its answer would
        // come before the prompt.
        let unread = |n: rustix::io::Result<u64>| n.map_or(true, |n| n > 0);
        let pending = match (&pipes, &terminal) {
            (Some(p), _) => p
                .iter()
                .any(|rx| unread(rustix::io::ioctl_fionread(rx.as_ref()))),
            (None, Some(t)) => terminal_unread(t.master().get_ref().as_fd()),
            (None, None) => false,
        };
        if pending {
            return Awaiting::No;
        }
        let quiet_at = last_output + SILENCE;
        if Instant::now() < quiet_at {
            return Awaiting::NotBefore(quiet_at);
        }
        // Held through the look: no write starts under it. Held already: a
        // write is in progress, so input is on its way.
        let Ok(stdin) = slot.try_lock() else {
            return Awaiting::No;
        };
        match stdin.as_ref() {
            None => return Awaiting::No,
            // A reader woken by bytes still in the pipe is not waiting for
            // more. (A terminal's reader with a partial line in its queue
            // still waits for the rest.)
            Some(StdinWriter::Pipe(tx)) => {
                if rustix::io::ioctl_fionread(tx).map_or(true, |n| n > 0) {
                    return Awaiting::No;
                }
            }
            Some(StdinWriter::Terminal(_)) => {}
        }
        let procs = procs.get_or_insert_with(Processes::read);
        let found = look(procs.members(leader, input.kind), &input, Probes::Both);
        // Output the runner read during the look (its `read` had emptied
        // the pipe or terminal before the check above, its push came
        // after) is output: the prompt is not in the window yet.
        let wrote_since = self.table.with(id, |j| j.last_output != last_output);
        if wrote_since.unwrap_or(true) {
            return Awaiting::No;
        }
        found.map_or(Awaiting::No, Awaiting::Yes)
    }
}

/// Whether a terminal's master has bytes its runner has not read. Not
/// `FIONREAD`: a write to the slave reaches the master's queue from a
/// kernel work queue, so for a moment after a prompt is written (and the
/// program is already blocked reading its answer) the queue is empty.
/// `poll` on the master runs that pending hand-over first when it finds
/// no input (`n_tty_poll` flushes the port's buffer work), so a zero
/// timeout `poll` sees every byte written before it. An error counts as
/// unread (not awaiting: the safe answer).
fn terminal_unread(master: std::os::fd::BorrowedFd<'_>) -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let mut fds = [PollFd::new(&master, PollFlags::IN)];
    match poll(&mut fds, Some(&rustix::event::Timespec::default())) {
        Ok(_) => fds[0].revents().contains(PollFlags::IN),
        Err(_) => true,
    }
}

/// The open file that is a job's input: its stdin pipe, or its terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Input {
    /// The file's device and inode (a pipe's are its pipefs inode; a
    /// terminal's its devpts inode).
    dev: u64,
    ino: u64,
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A pipe job: the job is its process group.
    Pipe,
    /// A PTY job: the job is its session; `rdev` is the terminal's device.
    Terminal { rdev: u64 },
}

/// How a look found a job reading its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// From `/proc/PID/syscall` (exact: the call and its descriptor).
    Syscall,
    /// From `/proc/PID/wchan`, with every readable descriptor checked.
    Wchan,
}

/// `/dev/tty`: major 5, minor 0, in the kernel's (and glibc's) encoding.
const DEV_TTY: u64 = 5 << 8;

impl Input {
    /// The input of a pipe job: `fd` is either end of its stdin pipe
    /// (both ends have the pipe's one inode). `None` if it is no pipe.
    pub(crate) fn pipe(fd: impl AsFd) -> Option<Input> {
        let st = rustix::fs::fstat(fd).ok()?;
        let fifo = rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Fifo;
        fifo.then_some(Input {
            dev: st.st_dev,
            ino: st.st_ino,
            kind: Kind::Pipe,
        })
    }

    /// The input of a PTY job: its terminal's slave, at `path` (its
    /// devpts inode, as every process that has it open sees it). `None` if
    /// it is no character device.
    pub(crate) fn terminal_at(path: &std::path::Path) -> Option<Input> {
        let meta = fs::metadata(path).ok()?;
        meta.file_type().is_char_device().then_some(Input {
            dev: meta.dev(),
            ino: meta.ino(),
            kind: Kind::Terminal { rdev: meta.rdev() },
        })
    }

    /// Whether the file open at `fd` of task `task` (a `/proc/PID/task/TID`
    /// directory) is this input, for a process whose controlling terminal
    /// is `tty_nr`.
    fn is_open_at(&self, task: &str, fd: i32, tty_nr: u64) -> bool {
        // `stat` follows the magic link to the open file itself.
        let Ok(meta) = fs::metadata(format!("{task}/fd/{fd}")) else {
            return false;
        };
        self.is(&meta, tty_nr)
    }

    fn is(&self, meta: &fs::Metadata, tty_nr: u64) -> bool {
        if (meta.dev(), meta.ino()) == (self.dev, self.ino) {
            return true;
        }
        match self.kind {
            Kind::Terminal { rdev } => {
                meta.file_type().is_char_device() && meta.rdev() == DEV_TTY && tty_nr == rdev
            }
            Kind::Pipe => false,
        }
    }
}

/// Which sources a look may use (tests force the fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probes {
    Both,
    #[cfg_attr(not(test), expect(dead_code, reason = "the fallback's own tests"))]
    WchanOnly,
}

/// Whether one of the job's processes `members` is blocked reading
/// `input` now, and how that was seen; `None` when not (or when it cannot
/// be told).
fn look(members: Vec<Member>, input: &Input, probes: Probes) -> Option<Source> {
    let mut found = None;
    for p in members {
        let Ok(tasks) = fs::read_dir(format!("/proc/{}/task", p.pid)) else {
            continue;
        };
        for task in tasks.flatten() {
            let Some(tid) = task
                .file_name()
                .to_str()
                .and_then(|t| t.parse::<i32>().ok())
            else {
                continue;
            };
            let dir = format!("/proc/{}/task/{tid}", p.pid);
            match fs::read_to_string(format!("{dir}/stat"))
                .ok()
                .as_deref()
                .and_then(ProcStat::parse)
            {
                // Something of the job runs: it is not blocked.
                Some(s) if s.state == 'R' => return None,
                Some(s) if s.state == 'S' => {}
                // Stopped, in disk sleep, a zombie, gone: not reading input.
                _ => continue,
            }
            if found.is_none() {
                found = task_reading(&dir, p.tty_nr, input, probes);
            }
        }
    }
    found
}

/// A process of the job.
struct Member {
    pid: i32,
    tty_nr: u64,
}

/// Every process, with the `stat` fields a look needs: read once per
/// answer, however many jobs it looks at.
pub(super) struct Processes(Vec<(i32, ProcStat)>);

impl Processes {
    /// The processes in `/proc` now (none if it cannot be read).
    fn read() -> Processes {
        let Ok(dir) = fs::read_dir("/proc") else {
            return Processes(Vec::new());
        };
        Processes(
            dir.flatten()
                .filter_map(|e| {
                    let pid: i32 = e.file_name().to_str()?.parse().ok()?;
                    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                    Some((pid, ProcStat::parse(&text)?))
                })
                .collect(),
        )
    }

    /// Every process of the job: those in `leader`'s process group (a pipe
    /// job), or in its session (a PTY job: an interactive shell puts each
    /// command in a group of its own).
    fn members(&self, leader: Pid, kind: Kind) -> Vec<Member> {
        self.0
            .iter()
            .filter(|(_, stat)| match kind {
                Kind::Pipe => stat.pgrp == leader.0,
                Kind::Terminal { .. } => stat.session == leader.0,
            })
            .map(|&(pid, ref stat)| Member {
                pid,
                tty_nr: stat.tty_nr,
            })
            .collect()
    }
}

/// The fields of `/proc/PID/stat` a look needs.
#[derive(Debug, PartialEq, Eq)]
struct ProcStat {
    state: char,
    pgrp: i32,
    session: i32,
    tty_nr: u64,
}

impl ProcStat {
    /// Parses a `stat` line; the fields are counted after the *last* `)`,
    /// so a command name with spaces or parentheses cannot shift them.
    fn parse(text: &str) -> Option<ProcStat> {
        let rest = &text[text.rfind(')')? + 1..];
        let mut f = rest.split_ascii_whitespace();
        let state = f.next()?.chars().next()?;
        let _ppid = f.next()?;
        let pgrp = f.next()?.parse().ok()?;
        let session = f.next()?.parse().ok()?;
        let tty_nr = f.next()?.parse::<i64>().ok()?;
        Some(ProcStat {
            state,
            pgrp,
            session,
            tty_nr: u64::try_from(tty_nr).unwrap_or(0),
        })
    }
}

/// Whether the thread at `task` is blocked reading `input`.
fn task_reading(task: &str, tty_nr: u64, input: &Input, probes: Probes) -> Option<Source> {
    if probes == Probes::Both {
        match fs::read_to_string(format!("{task}/syscall")) {
            Ok(line) => {
                let call = Call::parse(&line)?;
                let hit = call
                    .read_fds(task)
                    .into_iter()
                    .any(|fd| input.is_open_at(task, fd, tty_nr));
                // Still in that same call (same stack pointer) after the
                // descriptors were checked.
                let still = fs::read_to_string(format!("{task}/syscall")).ok()? == line;
                return (hit && still).then_some(Source::Syscall);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            // No ptrace rights over it: the fallback.
            Err(_) => {}
        }
    }
    wchan_reading(task, tty_nr, input)
}

/// A system call a thread sleeps in, from its `syscall` line.
#[derive(Debug, PartialEq, Eq)]
enum Call {
    /// A read of one descriptor.
    Read { fd: i32 },
    /// `poll`/`ppoll`: an array of `struct pollfd`.
    Poll { fds: u64, nfds: u64 },
    /// `select`/`pselect6`: a read set of `nfds` bits.
    Select { nfds: u64, readfds: u64 },
    /// An epoll wait on an epoll descriptor.
    Epoll { epfd: i32 },
}

/// The system call numbers of this architecture.
#[cfg(target_arch = "x86_64")]
mod nr {
    pub const READS: &[i64] = &[0, 17, 19, 295, 327]; // read pread64 readv preadv preadv2
    pub const POLLS: &[i64] = &[7, 271]; // poll ppoll
    pub const SELECTS: &[i64] = &[23, 270]; // select pselect6
    pub const EPOLLS: &[i64] = &[232, 281, 441]; // epoll_wait epoll_pwait epoll_pwait2
}
#[cfg(target_arch = "aarch64")]
mod nr {
    pub const READS: &[i64] = &[63, 65, 67, 69, 286]; // read readv pread64 preadv preadv2
    pub const POLLS: &[i64] = &[73]; // ppoll
    pub const SELECTS: &[i64] = &[72]; // pselect6
    pub const EPOLLS: &[i64] = &[22, 441]; // epoll_pwait epoll_pwait2
}
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod nr {
    pub const READS: &[i64] = &[];
    pub const POLLS: &[i64] = &[];
    pub const SELECTS: &[i64] = &[];
    pub const EPOLLS: &[i64] = &[];
}

/// More descriptors than this in one wait are not looked through.
const MAX_FDS: u64 = 4096;

impl Call {
    /// Parses `nr arg0 … arg5 sp pc` (hex arguments). `running`, `-1 …`
    /// (blocked outside a system call) and calls that read nothing are
    /// `None`.
    fn parse(line: &str) -> Option<Call> {
        let mut f = line.split_ascii_whitespace();
        let nr: i64 = f.next()?.parse().ok()?;
        let mut arg = || u64::from_str_radix(f.next()?.trim_start_matches("0x"), 16).ok();
        let a0 = arg()?;
        let a1 = arg()?;
        let fd = |a: u64| i32::try_from(a).ok();
        if nr::READS.contains(&nr) {
            Some(Call::Read { fd: fd(a0)? })
        } else if nr::POLLS.contains(&nr) {
            Some(Call::Poll { fds: a0, nfds: a1 })
        } else if nr::SELECTS.contains(&nr) {
            Some(Call::Select {
                nfds: a0,
                readfds: a1,
            })
        } else if nr::EPOLLS.contains(&nr) {
            Some(Call::Epoll { epfd: fd(a0)? })
        } else {
            None
        }
    }

    /// The descriptors the call waits to read.
    fn read_fds(&self, task: &str) -> Vec<i32> {
        match *self {
            Call::Read { fd } => vec![fd],
            Call::Poll { fds, nfds } => {
                let n = usize::try_from(nfds.min(MAX_FDS)).unwrap_or(0);
                read_mem(task, fds, n * 8).map_or_else(Vec::new, |b| poll_readers(&b))
            }
            Call::Select { nfds, readfds } if readfds != 0 => {
                let n = usize::try_from(nfds.min(MAX_FDS)).unwrap_or(0);
                read_mem(task, readfds, n.div_ceil(8)).map_or_else(Vec::new, |b| set_bits(&b, n))
            }
            Call::Select { .. } => Vec::new(),
            Call::Epoll { epfd } => fs::read_to_string(format!("{task}/fdinfo/{epfd}"))
                .map_or_else(|_| Vec::new(), |t| epoll_readers(&t)),
        }
    }
}

/// `len` bytes of the thread's memory at `addr` (the thread sleeps in the
/// call, so its arguments hold still).
fn read_mem(task: &str, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mem = fs::File::open(format!("{task}/mem")).ok()?;
    let mut buf = vec![0; len];
    mem.read_exact_at(&mut buf, addr).ok()?;
    Some(buf)
}

/// `POLLIN | POLLPRI | POLLRDNORM`.
const POLL_READ: i16 = 0x1 | 0x2 | 0x40;

/// The descriptors of a `struct pollfd` array (`int fd; short events;
/// short revents`, native endian) that wait to read.
fn poll_readers(raw: &[u8]) -> Vec<i32> {
    raw.chunks_exact(8)
        .filter_map(|p| {
            let fd = i32::from_ne_bytes([p[0], p[1], p[2], p[3]]);
            let events = i16::from_ne_bytes([p[4], p[5]]);
            (fd >= 0 && events & POLL_READ != 0).then_some(fd)
        })
        .collect()
}

/// The descriptors below `n` set in an `fd_set` (bit `fd % 8` of byte
/// `fd / 8`: the kernel's `unsigned long` words are little endian on the
/// architectures above).
fn set_bits(raw: &[u8], n: usize) -> Vec<i32> {
    (0..n)
        .filter(|&fd| raw.get(fd / 8).is_some_and(|b| b & (1 << (fd % 8)) != 0))
        .filter_map(|fd| i32::try_from(fd).ok())
        .collect()
}

/// The descriptors an epoll instance's `fdinfo` watches for reading
/// (`tfd: N events: HEX data: …` lines; `EPOLLIN` is `0x1`).
fn epoll_readers(fdinfo: &str) -> Vec<i32> {
    fdinfo
        .lines()
        .filter_map(|l| {
            let mut f = l.split_ascii_whitespace();
            (f.next()? == "tfd:").then_some(())?;
            let fd: i32 = f.next()?.parse().ok()?;
            (f.next()? == "events:").then_some(())?;
            let events = u32::from_str_radix(f.next()?, 16).ok()?;
            (events & 0x1 != 0).then_some(fd)
        })
        .collect()
}

/// The kernel functions a thread sleeps in while it waits to read a tty, a
/// pipe, or a set of descriptors (names vary by kernel version; a
/// `.constprop.0`-style suffix is ignored).
const READ_WAITS: &[&str] = &[
    "n_tty_read",
    "wait_woken",
    "pipe_read",
    "anon_pipe_read",
    "pipe_wait_readable",
    "fifo_read",
    "poll_schedule_timeout",
    "do_select",
    "core_sys_select",
    "do_sys_poll",
    "ep_poll",
    "do_epoll_wait",
];

/// The fallback: the thread sleeps in a read wait and the job's input is
/// the only thing it holds open for reading that could make it wait.
fn wchan_reading(task: &str, tty_nr: u64, input: &Input) -> Option<Source> {
    let wchan = fs::read_to_string(format!("{task}/wchan")).ok()?;
    let name = wchan.trim().split('.').next().unwrap_or_default();
    if !READ_WAITS.contains(&name) {
        return None;
    }
    let mut holds_input = false;
    for entry in fs::read_dir(format!("{task}/fd")).ok()?.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|f| f.parse::<i32>().ok())
        else {
            continue;
        };
        if !open_for_reading(task, fd) {
            continue;
        }
        let Ok(meta) = fs::metadata(entry.path()) else {
            continue;
        };
        if input.is(&meta, tty_nr) {
            holds_input = true;
        } else if could_make_a_reader_wait(&meta) {
            return None;
        }
    }
    holds_input.then_some(Source::Wchan)
}

/// Whether descriptor `fd` is open for reading (its `fdinfo` `flags`,
/// octal, are not `O_WRONLY`); unknown counts as reading.
fn open_for_reading(task: &str, fd: i32) -> bool {
    let Ok(info) = fs::read_to_string(format!("{task}/fdinfo/{fd}")) else {
        return true;
    };
    info.lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        .is_none_or(|flags| flags & 0o3 != 0o1)
}

/// Whether a read of this file may block: a pipe, a socket, a character
/// device other than the memory devices (`/dev/null`, `/dev/zero`, …: major
/// 1), or an anonymous inode (no file type: eventfd, signalfd, timerfd,
/// inotify, epoll). Regular files and directories never make a reader wait.
fn could_make_a_reader_wait(meta: &fs::Metadata) -> bool {
    let t = meta.file_type();
    if t.is_fifo() || t.is_socket() {
        return true;
    }
    if t.is_char_device() {
        return rustix::fs::major(meta.rdev()) != 1;
    }
    !(t.is_file() || t.is_dir() || t.is_block_device() || t.is_symlink())
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command, Stdio};
    use std::time::Instant;

    use super::*;

    #[test]
    fn a_stat_line_is_read_after_the_last_parenthesis() {
        let line = "4242 (a) b (c)) S 1 4242 4200 34817 4242 4194560 0 0";
        assert_eq!(
            ProcStat::parse(line),
            Some(ProcStat {
                state: 'S',
                pgrp: 4242,
                session: 4200,
                tty_nr: 34817
            })
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn syscall_lines_name_the_reads_and_waits_and_nothing_else() {
        let parse = Call::parse;
        assert_eq!(
            parse("0 0x0 0x7ffd 0x1 0x8 0x0 0x0 0x7ffe 0x7f"),
            Some(Call::Read { fd: 0 })
        );
        assert_eq!(
            parse("7 0x7ffebe8bbd48 0x1 0xffffffff 0x0 0x0 0x0 0x1 0x2"),
            Some(Call::Poll {
                fds: 0x7ffe_be8b_bd48,
                nfds: 1
            })
        );
        assert_eq!(
            parse("270 0x1 0x7ffed7ca70f0 0x0 0x0 0x0 0x0 0x1 0x2"),
            Some(Call::Select {
                nfds: 1,
                readfds: 0x7ffe_d7ca_70f0
            })
        );
        assert_eq!(
            parse("232 0x5 0x1 0x2 0x3 0x0 0x0 0x1 0x2"),
            Some(Call::Epoll { epfd: 5 })
        );
        // nanosleep, wait4, connect; blocked outside a call; running.
        for line in [
            "230 0x0 0x0 0x7ffc 0x7ffc 0x0 0x0 0x1 0x2",
            "61 0xffffffff 0x7ffd 0x0 0x0 0x0 0x0 0x1 0x2",
            "42 0x3 0x7ffd 0x10 0x0 0x0 0x0 0x1 0x2",
            "-1 0x7ffd 0x7f",
            "running",
        ] {
            assert_eq!(parse(line), None, "{line}");
        }
    }

    #[test]
    fn poll_arrays_select_sets_and_epoll_fdinfo_give_their_read_descriptors() {
        let mut raw = Vec::new();
        for (fd, events) in [(0i32, 0x1i16), (3, 0x4), (-1, 0x1), (7, 0x40)] {
            raw.extend(fd.to_ne_bytes());
            raw.extend(events.to_ne_bytes());
            raw.extend(0i16.to_ne_bytes());
        }
        assert_eq!(poll_readers(&raw), [0, 7]);
        assert_eq!(set_bits(&[0b0000_1001, 0b1], 9), [0, 3, 8]);
        assert_eq!(set_bits(&[0b0000_1001, 0b1], 8), [0, 3]);
        let fdinfo = "pos:\t0\nflags:\t02\nmnt_id:\t16\nino:\t1057\n\
            tfd:        0 events:       19 data:                0  pos:0 ino:4d5 sdev:e\n\
            tfd:        4 events:        4 data:                4  pos:0 ino:4d6 sdev:e\n";
        assert_eq!(epoll_readers(fdinfo), [0]);
    }

    /// `sh -c script` in a process group of its own, stdin a pipe we hold.
    struct Job {
        child: Child,
        input: Input,
    }

    impl Job {
        fn start(script: &str) -> Job {
            let child = Command::new("sh")
                .args(["-c", script])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .unwrap();
            let input = Input::pipe(child.stdin.as_ref().unwrap()).unwrap();
            Job { child, input }
        }

        fn leader(&self) -> Pid {
            Pid(i32::try_from(self.child.id()).unwrap())
        }

        /// Looks until `probes` sees it reading, for up to `limit`.
        fn seen_within(&self, probes: Probes, limit: Duration) -> Option<Source> {
            let until = Instant::now() + limit;
            loop {
                let members = Processes::read().members(self.leader(), Kind::Pipe);
                if let Some(s) = look(members, &self.input, probes) {
                    return Some(s);
                }
                if Instant::now() >= until {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    impl Drop for Job {
        fn drop(&mut self) {
            let _ = rustix::process::kill_process_group(
                rustix::process::Pid::from_raw(self.leader().0).unwrap(),
                rustix::process::Signal::KILL,
            );
            let _ = self.child.wait();
        }
    }

    #[test]
    fn a_shell_reading_its_stdin_is_seen_by_syscall_and_by_wchan() {
        let job = Job::start("read x");
        assert_eq!(
            job.seen_within(Probes::Both, Duration::from_secs(10)),
            Some(Source::Syscall)
        );
        assert_eq!(
            job.seen_within(Probes::WchanOnly, Duration::from_secs(10)),
            Some(Source::Wchan)
        );
    }

    #[test]
    fn a_job_that_got_its_line_and_sleeps_is_not_reading() {
        let mut job = Job::start("read x; exec sleep 30");
        assert!(
            job.seen_within(Probes::Both, Duration::from_secs(10))
                .is_some()
        );
        job.child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(b"line\n")
            .unwrap();
        // Once the shell became `sleep`, neither source may see a read.
        let sleeping = (0..2000).any(|_| {
            std::thread::sleep(Duration::from_millis(5));
            fs::read_to_string(format!("/proc/{}/comm", job.leader().0))
                .is_ok_and(|c| c.trim() == "sleep")
        });
        assert!(sleeping);
        for probes in [Probes::Both, Probes::WchanOnly] {
            assert_eq!(
                job.seen_within(probes, Duration::from_millis(300)),
                None,
                "{probes:?}"
            );
        }
    }

    #[test]
    fn reading_another_pipe_pointed_at_fd_0_is_not_reading_the_input() {
        // fd 0 is the job's pipe until `read <&3` points it at fd 3's.
        let job = Job::start("exec 4<&0; sleep 30 | { exec 3<&0 0<&4; read x <&3; }");
        // The case is real: a thread of the job sleeps in read(0, …).
        let reads_fd_0 = || {
            Processes::read()
                .members(job.leader(), Kind::Pipe)
                .iter()
                .any(|m| {
                    fs::read_to_string(format!("/proc/{}/syscall", m.pid))
                        .is_ok_and(|l| Call::parse(&l) == Some(Call::Read { fd: 0 }))
                })
        };
        let until = Instant::now() + Duration::from_secs(10);
        while !reads_fd_0() {
            assert!(Instant::now() < until, "the shell never reads fd 0");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            job.seen_within(Probes::Both, Duration::from_millis(500)),
            None
        );
        assert_eq!(
            job.seen_within(Probes::WchanOnly, Duration::from_millis(500)),
            None
        );
    }
}
