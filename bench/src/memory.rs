//! Memory that a fleet pays (issue 26, Deliver 1's memory rows and Deliver 3):
//! what one more idle task and one more idle PTY job cost the server at
//! 10,000 of each (`idle_tasks`, `pty_memory`), and the server's idle memory
//! split into what each sandbox pays for itself and what every sandbox on
//! the same image shares (`private_memory`).
//!
//! Private is anonymous memory plus file-backed pages the process dirtied;
//! shared is the rest of the resident set: clean file-backed pages (the
//! binary's text and read-only data), which the page cache holds once for
//! every process of the same image. Both come from
//! `/proc/<pid>/smaps_rollup`. Beside them: the server's threads (each has a
//! stack and, without an arena limit, a malloc arena of its own) and the
//! malloc arenas other than the main one (heaps of 64 MiB reservations,
//! found in `/proc/<pid>/smaps` by their alignment).
//!
//! Each count scenario starts a server of its own with the limits it needs
//! raised, measures its RSS growth / count (anonymous and file-backed, from
//! `/proc/<pid>/status`), then closes its stdin (the server ends every job)
//! and counts the marked processes left, which must be none. `pty_memory`
//! raises `kernel.pty.max` for its run when it must (as root) and puts the
//! old value back when it ends, also on failure.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Error;
use crate::bounded::{
    MANY_JOBS_TIMEOUT, Match, jobs_that_fit, may_raise_hard_limits, nofile_plan, open_fds,
    start_time, with_arg,
};
use crate::client::{Launch, Memory, Server};
use crate::scenarios::CALL_TIMEOUT;

/// A process's resident memory, private against shared, KiB.
#[derive(Debug, Clone, Copy, Default)]
pub struct Split {
    /// The whole resident set.
    pub rss: u64,
    /// Anonymous + dirty file-backed: what this process alone costs.
    pub private: u64,
    /// Clean file-backed: shared by every process of the same image.
    pub shared: u64,
    /// The anonymous part of `private`.
    pub anon: u64,
    /// Threads of the process.
    pub threads: usize,
    /// Malloc arenas besides the main one (their heaps in smaps).
    pub arenas: usize,
    /// Resident KiB of those arenas' heaps.
    pub arena_kib: u64,
}

impl Split {
    /// `private 225 + shared 2570 KiB; 4 threads, 0 arenas besides the main`.
    pub fn describe(&self) -> String {
        format!(
            "private {} (anon {}) + shared {} KiB; {} threads, {} malloc arenas besides the main{}",
            self.private,
            self.anon,
            self.shared,
            self.threads,
            self.arenas,
            if self.arenas > 0 {
                format!(" ({} KiB)", self.arena_kib)
            } else {
                String::new()
            }
        )
    }

    /// The split as JSON (KiB).
    pub fn json(&self) -> Value {
        json!({"rss": self.rss, "private": self.private, "shared": self.shared, "anon": self.anon,
            "threads": self.threads, "arenas": self.arenas, "arena_kib": self.arena_kib})
    }
}

/// The fields of `/proc/<pid>/smaps_rollup` this needs, KiB.
fn rollup(text: &str) -> (u64, u64, u64) {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let dirty = field("Private_Dirty:") + field("Shared_Dirty:");
    (field("Rss:"), field("Anonymous:"), dirty)
}

/// The heap size glibc reserves for each arena but the main one, and aligns
/// them to (`HEAP_MAX_SIZE` on 64-bit: 2 × the 32 MiB `DEFAULT_MMAP_THRESHOLD_MAX`).
const ARENA_HEAP: u64 = 64 << 20;

/// Process `pid`'s memory, private against shared.
pub fn split_of(pid: u32) -> Result<Split, Error> {
    let path = format!("/proc/{pid}/smaps_rollup");
    let text = std::fs::read_to_string(&path).map_err(|e| Error(format!("reading {path}: {e}")))?;
    let (rss, anon, dirty) = rollup(&text);
    // A private file mapping's written pages are anonymous (copy on write):
    // dirty pages beyond the anonymous ones are shared-file pages written.
    let private = anon + dirty.saturating_sub(anon);
    let heaps: Vec<_> = crate::smaps::of(pid)?
        .into_iter()
        .filter(|m| m.name == "[anon]" && m.perms == "rw-p" && m.start % ARENA_HEAP == 0)
        .collect();
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count);
    Ok(Split {
        rss,
        private,
        shared: rss.saturating_sub(private),
        anon,
        threads,
        arenas: heaps.len(),
        arena_kib: heaps.iter().map(|m| m.rss_kib).sum(),
    })
}

/// The names of process `pid`'s threads, with how many of each
/// (`mcp-exec ×1, stdin ×1, …`).
pub fn thread_names(pid: u32) -> String {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| {
                let comm = std::fs::read_to_string(e.ok()?.path().join("comm")).ok()?;
                Some(comm.trim().to_owned())
            })
            .collect()
        })
        .unwrap_or_default();
    names.sort();
    let mut out: Vec<(String, usize)> = Vec::new();
    for n in names {
        match out.last_mut() {
            Some((last, count)) if *last == n => *count += 1,
            _ => out.push((n, 1)),
        }
    }
    out.iter()
        .map(|(n, c)| format!("{n} ×{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Claims every job left in `server`'s table (kills the running ones, then
/// `wait`s for all), so that the table empties (where the server hands its
/// free heap back to the kernel, `malloc_trim`); returns how many there were.
pub fn claim_all(server: &mut Server) -> Result<usize, Error> {
    let (_, listed) = server.tool("list_jobs", json!({}), CALL_TIMEOUT)?;
    let ids: Vec<String> = listed["jobs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|j| j["job_id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    for j in listed["jobs"].as_array().into_iter().flatten() {
        if (j["state"] == "running" || j["state"] == "queued")
            && let Some(id) = j["job_id"].as_str()
        {
            // Already ended between the list and the kill: fine.
            let _ = server.tool(
                "kill",
                json!({"job_id": id, "signal": "KILL"}),
                CALL_TIMEOUT,
            );
        }
    }
    let until = Instant::now() + CALL_TIMEOUT;
    while Instant::now() < until {
        let (_, listed) = server.tool("list_jobs", json!({}), CALL_TIMEOUT)?;
        let left: Vec<&str> = listed["jobs"]
            .as_array()
            .map(|a| a.iter().filter_map(|j| j["job_id"].as_str()).collect())
            .unwrap_or_default();
        if left.is_empty() {
            return Ok(ids.len());
        }
        server.tool("wait", json!({"job_ids": left, "timeout": 5}), CALL_TIMEOUT)?;
    }
    Err(Error(format!(
        "private_memory: the {} jobs left were not all claimed",
        ids.len()
    )))
}

/// What one count scenario measured.
#[derive(Debug)]
pub struct Idle {
    /// Units (tasks, PTY jobs) the plan asked for.
    pub asked: usize,
    /// Units the server answered as started.
    pub reached: usize,
    /// Why `reached` may be below `asked` (a limit that could not be raised).
    pub limited: Option<String>,
    /// `RLIMIT_NOFILE` (soft, hard) of the server.
    pub nofile: (u64, u64),
    /// The server's memory before the first unit and with all of them.
    pub before: Memory,
    /// With all of them.
    pub after: Memory,
    /// The private/shared split, before and with all of them.
    pub split: (Split, Split),
    /// From the first request to the last answer.
    pub start: Duration,
    /// Marked processes left after the server's exit (zombies included).
    pub left: usize,
    /// What the run changed and put back (`kernel.pty.max 4096 → 10200 for the run`),
    /// and how the shutdown went.
    pub note: String,
}

impl Idle {
    /// Growth per unit of one field, KiB.
    pub fn per(&self, pick: fn(&Memory) -> u64) -> f64 {
        (pick(&self.after) as f64 - pick(&self.before) as f64) / self.reached.max(1) as f64
    }

    /// Growth per unit of private memory, KiB.
    pub fn per_private(&self) -> f64 {
        (self.split.1.private as f64 - self.split.0.private as f64) / self.reached.max(1) as f64
    }
}

/// A sleep length no other process has: it marks a scenario's processes.
fn marker() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("600.{}{:06}", std::process::id(), nanos % 1_000_000)
}

/// Writes `lines` (JSON-RPC requests, ids `first..`) from a writer thread
/// while this one reads as many answers; returns the `result`s in order.
fn pipeline_raw(server: &mut Server, lines: Vec<Vec<u8>>, first: u64) -> Result<Vec<Value>, Error> {
    let n = lines.len();
    server.arm(MANY_JOBS_TIMEOUT);
    let (stdin, mut reader) = server.halves()?;
    let out = std::thread::scope(|s| -> Result<Vec<Value>, Error> {
        let writer = s.spawn(move || -> Result<(), Error> {
            for l in &lines {
                stdin
                    .write_all(l)
                    .map_err(|e| Error(format!("pipelining requests: {e}")))?;
            }
            Ok(())
        });
        let mut results = vec![Value::Null; n];
        for _ in 0..n {
            let (id, result) = reader.next_response()?;
            let slot = id
                .checked_sub(first)
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| results.get_mut(i))
                .ok_or_else(|| Error(format!("unexpected response id {id}")))?;
            *slot = result;
        }
        writer
            .join()
            .map_err(|_| Error("the writer thread panicked".into()))??;
        Ok(results)
    });
    server.disarm();
    out
}

/// Waits (up to 30 s) until `want` processes carry `marker` as an argument.
fn await_processes(marker: &str, want: usize) -> usize {
    let by = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = with_arg(marker, Match::Whole).len();
        if seen >= want || Instant::now() > by {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Closes the server's stdin and counts the marked processes left after it
/// exits, as (left, how the shutdown went). A shutdown that outlasts
/// `timeout` is reported, not fatal: the server is killed then (its jobs'
/// terminals and pipes close with it), and what is left is counted after up
/// to 10 s more.
fn end(server: Server, marker: &str, timeout: Duration) -> (usize, String) {
    let marked = with_arg(marker, Match::Within);
    let t0 = Instant::now();
    let how = match server.shutdown_draining(timeout) {
        Ok(()) => format!(
            "shutdown by stdin EOF in {:.1} s",
            t0.elapsed().as_secs_f64()
        ),
        Err(e) => format!("{e}: killed"),
    };
    let by = Instant::now() + Duration::from_secs(10);
    loop {
        let mut left: Vec<(u32, u64)> = marked
            .iter()
            .copied()
            .filter(|&(pid, start)| start_time(pid) == Some(start))
            .collect();
        for p in with_arg(marker, Match::Within) {
            if !left.contains(&p) {
                left.push(p);
            }
        }
        if left.is_empty() || Instant::now() > by {
            return (left.len(), how);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A server for `units` idle units: descriptors raised as far as this
/// process may, `MCP_EXEC_MAX_RUNNING` above them and `extra` settings;
/// returns it with its limit and how many units fit under it.
fn server_for(
    binary: &Path,
    revision: &str,
    units: usize,
    extra: &[(&'static str, String)],
) -> Result<(Server, (u64, u64), usize), Error> {
    let now = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let own = (
        now.current.unwrap_or(u64::MAX),
        now.maximum.unwrap_or(u64::MAX),
    );
    let nofile = nofile_plan(units, own, may_raise_hard_limits());
    let running = (units * 2).max(20_000).to_string();
    let mut launch = Launch::with_env(&[("MCP_EXEC_MAX_RUNNING", &running)]);
    launch.env.extend(extra.iter().cloned());
    launch.nofile = Some(nofile);
    let mut server = Server::launch(binary, &launch)?;
    server.initialize(revision, CALL_TIMEOUT)?;
    std::thread::sleep(Duration::from_millis(50));
    let fit = jobs_that_fit(nofile.0, open_fds(server.pid())?);
    Ok((server, nofile, fit))
}

/// `tasks` task-augmented `tools/call`s (2025-11-25 Tasks) of `execute
/// sleep 600.<marker>` held at once in one server: RSS growth per task,
/// its job included.
pub fn idle_tasks(binary: &Path, tasks: usize) -> Result<Idle, Error> {
    let many = (tasks + 16).to_string();
    let extra = [
        ("MCP_EXEC_MAX_TASKS", many.clone()),
        ("MCP_EXEC_MAX_QUEUED", many),
    ];
    let (mut server, nofile, fit) = server_for(binary, "2025-11-25", tasks, &extra)?;
    let n = tasks.min(fit);
    let limited = (n < tasks).then(|| {
        format!(
            "the descriptor limit ({}) holds {n} (no CAP_SYS_RESOURCE)",
            nofile.0
        )
    });
    let before = server.memory()?;
    let split0 = split_of(server.pid())?;
    let marker = marker();
    let first = server.fresh_id() + 1;
    let mut lines = Vec::with_capacity(n);
    for _ in 0..n {
        let id = server.fresh_id();
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "execute", "task": {},
            "arguments": {"command": format!("sleep {marker}"), "close_stdin": true}}});
        let mut line = serde_json::to_vec(&msg)?;
        line.push(b'\n');
        lines.push(line);
    }
    let t0 = Instant::now();
    let answers = pipeline_raw(&mut server, lines, first)?;
    let start = t0.elapsed();
    let reached = answers
        .iter()
        .filter(|r| r["task"]["status"] == "working")
        .count();
    if let Some(other) = answers.iter().find(|r| r["task"]["status"] != "working") {
        eprintln!("bench: idle_tasks: a task is not working: {other}");
    }
    await_processes(&marker, reached);
    std::thread::sleep(Duration::from_millis(200));
    let after = server.memory()?;
    let split1 = split_of(server.pid())?;
    eprintln!("bench: idle_tasks: {reached} tasks: {before:?} → {after:?}");
    let (left, how) = end(server, &marker, MANY_JOBS_TIMEOUT);
    Ok(Idle {
        asked: tasks,
        reached,
        limited,
        nofile,
        before,
        after,
        split: (split0, split1),
        start,
        left,
        note: how,
    })
}

const PTY_MAX: &str = "/proc/sys/kernel/pty/max";

fn read_count(path: &str) -> Option<usize> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `kernel.pty.max` raised for a run; the old value is written back on drop.
struct PtyMax {
    old: Option<usize>,
}

impl PtyMax {
    /// Makes room for `more` terminals beyond those open now (and the
    /// reserve of the initial devpts instance); returns the guard and how
    /// many fit.
    fn raise(more: usize) -> (PtyMax, usize, String) {
        let (Some(max), Some(nr)) = (read_count(PTY_MAX), read_count("/proc/sys/kernel/pty/nr"))
        else {
            return (
                PtyMax { old: None },
                more,
                "kernel.pty.max unreadable".into(),
            );
        };
        let reserve = read_count("/proc/sys/kernel/pty/reserve").unwrap_or(0);
        let need = nr + reserve + more + 64;
        if max >= need {
            return (PtyMax { old: None }, more, format!("kernel.pty.max {max}"));
        }
        match std::fs::write(PTY_MAX, need.to_string()) {
            Ok(()) => (
                PtyMax { old: Some(max) },
                more,
                format!("kernel.pty.max {max} → {need} for the run, then back"),
            ),
            Err(e) => {
                let fit = max.saturating_sub(nr + reserve + 64);
                (
                    PtyMax { old: None },
                    fit.min(more),
                    format!("kernel.pty.max {max} could not be raised ({e}): {fit} terminals fit"),
                )
            }
        }
    }
}

impl Drop for PtyMax {
    fn drop(&mut self) {
        if let Some(old) = self.old
            && let Err(e) = std::fs::write(PTY_MAX, old.to_string())
        {
            eprintln!("bench: pty_memory: could not put kernel.pty.max back to {old}: {e}");
        }
    }
}

/// `jobs` idle terminal jobs (80×24, `nowait`), each a shell blocked reading
/// its terminal (`exec sh -c 'read line' <marker>`, the marker as `$0`)
/// held at once in one server: RSS growth per PTY job. Not an interactive
/// shell: that one ignores TERM, and the shutdown would wait out the grace
/// of every job before its KILL.
pub fn pty_jobs(binary: &Path, protocol: &str, jobs: usize) -> Result<Idle, Error> {
    let (guard, pty_fit, note) = PtyMax::raise(jobs);
    let (mut server, nofile, fit) = server_for(binary, protocol, jobs, &[])?;
    let n = jobs.min(fit).min(pty_fit);
    let limited = (n < jobs).then(|| {
        if pty_fit < jobs {
            note.clone()
        } else {
            format!("the descriptor limit ({}) holds {n}", nofile.0)
        }
    });
    let before = server.memory()?;
    let split0 = split_of(server.pid())?;
    let marker = marker();
    let args = vec![
        json!({"command": format!("exec sh -c 'read line' {marker}"), "tty": true, "cols": 80,
            "rows": 24, "nowait": true});
        n
    ];
    let batch = server.batch("execute", &args)?;
    let t0 = Instant::now();
    let answers = server.pipeline(batch, MANY_JOBS_TIMEOUT)?;
    let start = t0.elapsed();
    let reached = answers.iter().filter(|r| r["state"] == "running").count();
    if let Some(other) = answers.iter().find(|r| r["state"] != "running") {
        eprintln!("bench: pty_memory: a job did not start: {other}");
    }
    await_processes(&marker, reached);
    std::thread::sleep(Duration::from_millis(500));
    let after = server.memory()?;
    let split1 = split_of(server.pid())?;
    eprintln!("bench: pty_memory: {reached} jobs: {before:?} → {after:?}");
    let (left, how) = end(server, &marker, Duration::from_secs(120));
    drop(guard);
    Ok(Idle {
        asked: jobs,
        reached,
        limited,
        nofile,
        before,
        after,
        split: (split0, split1),
        start,
        left,
        note: format!("{note}; {how}"),
    })
}

/// The rows of one count scenario.
fn push_idle(
    figures: &mut Vec<crate::report::Figure>,
    notes: &mut serde_json::Map<String, Value>,
    key: &'static str,
    what: &str,
    i: &Idle,
) {
    use crate::report::Figure;
    let reached = match &i.limited {
        Some(why) => format!("{} of {} asked: {why}", i.reached, i.asked),
        None => format!("{} held", i.reached),
    };
    figures.push(Figure::value(
        key,
        format!(
            "memory per {what}, RSS growth / {} (anon {:.2} + file {:.2}; private {:.2}; \
             {:.2} → {:.2} MiB; {reached})",
            i.reached,
            i.per(|m| m.anon_kib),
            i.per(|m| m.file_kib),
            i.per_private(),
            crate::mib(i.before.rss_kib),
            crate::mib(i.after.rss_kib),
        ),
        "KiB",
        i.per(|m| m.rss_kib),
        (key != "pty_memory").then_some(("≤ 4 KiB", 4.0)),
    ));
    figures.push(Figure::value(
        match key {
            "idle_tasks" => "idle_tasks_left",
            _ => "pty_memory_left",
        },
        format!(
            "  their processes left after the server's exit (started in {:.2} s; RLIMIT_NOFILE {}:{}{})",
            i.start.as_secs_f64(),
            i.nofile.0,
            i.nofile.1,
            if i.note.is_empty() {
                String::new()
            } else {
                format!("; {}", i.note)
            }
        ),
        "left",
        i.left as f64,
        Some(("0 left", 0.0)),
    ));
    notes.insert(
        format!("{key}_split_kib"),
        json!({"before": i.split.0.json(), "after": i.split.1.json()}),
    );
}

/// The `idle_tasks` and `pty_memory` scenarios (each a server of its own).
pub fn figures(
    o: &crate::Options,
    plan: &crate::scenarios::Plan,
    binary: &Path,
    figures: &mut Vec<crate::report::Figure>,
    notes: &mut serde_json::Map<String, Value>,
) -> Result<(), Error> {
    if o.wants("idle_tasks") {
        let n = plan.idle_tasks;
        eprintln!("bench: idle_tasks ({n} task-augmented execute `sleep 600` held at once)");
        let i = idle_tasks(binary, n)?;
        push_idle(
            figures,
            notes,
            "idle_tasks",
            "idle task (2025-11-25, its job included)",
            &i,
        );
    }
    if o.wants("pty_memory") {
        let n = plan.pty_jobs;
        eprintln!("bench: pty_memory ({n} idle terminal jobs, each a shell, held at once)");
        let i = pty_jobs(binary, &o.protocol, n)?;
        push_idle(
            figures,
            notes,
            "pty_memory",
            "idle PTY job (80×24, a shell)",
            &i,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rollup_gives_rss_anonymous_and_dirty() {
        let text = "00400000-7ffd0000 ---p 00000000 00:00 0  [rollup]\n\
            Rss:                2800 kB\nPss:                2800 kB\n\
            Shared_Clean:          0 kB\nShared_Dirty:          4 kB\n\
            Private_Clean:      2500 kB\nPrivate_Dirty:       296 kB\n\
            Anonymous:           290 kB\n";
        assert_eq!(rollup(text), (2800, 290, 300));
    }

    #[test]
    fn this_process_has_private_and_shared_memory() {
        let s = split_of(std::process::id()).expect("own smaps_rollup");
        assert!(s.private > 0 && s.shared > 0, "{s:?}");
        assert_eq!(s.private + s.shared, s.rss);
        assert!(s.threads >= 1);
    }
}
