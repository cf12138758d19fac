//! The bounded-execution scenarios of issue 10: many idle jobs, deadline
//! precision, the admission queue, and the cost of redaction.
//!
//! Each scenario starts servers of its own, because each needs settings the
//! shared server of the other scenarios must not have (a raised descriptor
//! limit, `MCP_EXEC_MAX_RUNNING=4`, redaction on and off), and shuts them
//! down by closing stdin before it returns, so no job of one scenario is
//! alive during the next. As everywhere in the harness, every answer is
//! checked (states, labels, counts, what came back masked) and timings are
//! never asserted.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::Error;
use crate::baseline;
use crate::client::{Launch, Memory, Server};
use crate::scenarios::{CALL_TIMEOUT, Paired, collect, expect_state};
use crate::stats::Samples;

/// How long starting all idle jobs, or a shutdown that ends them, may take.
pub const MANY_JOBS_TIMEOUT: Duration = Duration::from_secs(600);

/// Descriptors an idle job holds in the server: the read ends of its
/// stdout and stderr pipes (a job holds three pipe ends; the jobs here are
/// started with `close_stdin`, as a `sleep` reads nothing, so the third is
/// closed at once and more of them fit under a given limit).
const FDS_PER_JOB: u64 = 2;
/// Descriptors kept free beyond the jobs' and the server's own at start:
/// a spawn holds three more (the child's ends) until it returns.
const FD_MARGIN: u64 = 16;
/// The descriptor limit the idle-jobs server gets at least, where it can.
const NOFILE: u64 = 65536;

/// The revision the scenarios that use Part II inputs (`timeout`, `label`,
/// `started_at`) negotiate: `protocol` from 2025-03-26 on, else the default.
pub fn part_two(protocol: &str) -> &str {
    // Revisions are dates: they compare as strings.
    if protocol >= "2025-03-26" {
        protocol
    } else {
        crate::client::DEFAULT_PROTOCOL
    }
}

// ---------------------------------------------------------------------------
// Idle jobs
// ---------------------------------------------------------------------------

/// What the idle-jobs scenario measured.
#[derive(Debug)]
pub struct IdleJobs {
    /// Jobs the plan asked for.
    pub asked: usize,
    /// Jobs started (the plan's count, or fewer if the descriptor limit
    /// could not be raised far enough; see `nofile`).
    pub jobs: usize,
    /// `RLIMIT_NOFILE` (soft, hard) the server was started with.
    pub nofile: (u64, u64),
    /// Jobs the server answered as running.
    pub started: usize,
    /// `sleep` processes with the scenario's marker as an argument once all
    /// were answered: the operating system's count of the same jobs.
    pub sleeps: usize,
    /// Processes with the marker anywhere in their argv (the shells too).
    pub processes: usize,
    /// From the first request written to the last answer read.
    pub start: Duration,
    /// The server's memory after `initialize`, before any job.
    pub before: Memory,
    /// The server's memory with every job running.
    pub after: Memory,
    /// `list_jobs` rtt with every job running (ms).
    pub list: Samples,
    /// Bytes of one `list_jobs` result (the JSON of its content).
    pub list_bytes: usize,
    /// From closing the server's stdin to its exit.
    pub shutdown: Duration,
    /// Marked processes (zombies included) still there after the exit.
    pub left: usize,
}

impl IdleJobs {
    /// RSS growth per job, KiB: (after − before) / jobs, of `pick`'s field.
    pub fn per_job(&self, pick: fn(&Memory) -> u64) -> f64 {
        (pick(&self.after) as f64 - pick(&self.before) as f64) / self.jobs.max(1) as f64
    }
}

/// The descriptor limit (soft, hard) to start a server with that must hold
/// `jobs` idle jobs, given the harness's own limit (`soft`, `hard`):
/// [`NOFILE`] or what the jobs need if more. Raising the hard limit needs
/// `CAP_SYS_RESOURCE` (`may_raise_hard`; root in a container may lack it);
/// without it the soft limit can only go up to the hard one.
pub fn nofile_plan(jobs: usize, (soft, hard): (u64, u64), may_raise_hard: bool) -> (u64, u64) {
    let need = FDS_PER_JOB * jobs as u64 + 1024;
    let want = need.max(NOFILE).max(soft);
    if may_raise_hard {
        (want, hard.max(want))
    } else {
        (want.min(hard), hard)
    }
}

/// How many idle jobs fit under a soft limit of `soft` descriptors in a
/// server that holds `own` descriptors before its first job.
pub fn jobs_that_fit(soft: u64, own: u64) -> usize {
    let fit = soft.saturating_sub(own + FD_MARGIN) / FDS_PER_JOB;
    usize::try_from(fit).unwrap_or(usize::MAX)
}

/// Whether this process has `CAP_SYS_RESOURCE` (bit 24 of `CapEff` in
/// `/proc/self/status`), which raising a hard limit needs.
pub fn may_raise_hard_limits() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
            u64::from_str_radix(hex, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << 24) != 0)
}

/// Open descriptors of process `pid`.
pub fn open_fds(pid: u32) -> Result<u64, Error> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map_err(|e| Error(format!("reading /proc/{pid}/fd: {e}")))?;
    Ok(dir.count() as u64)
}

/// `jobs` concurrent `sleep 600` jobs (`nowait`) in one server started with
/// `MCP_EXEC_MAX_RUNNING=20000` and a descriptor limit that holds them; its
/// RSS growth per job, `list_jobs` with all of them, and a shutdown by
/// stdin EOF that must leave none of them behind.
pub fn idle_jobs(
    binary: &Path,
    protocol: &str,
    jobs: usize,
    list_calls: usize,
) -> Result<IdleJobs, Error> {
    let current = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let own = (
        current.current.unwrap_or(u64::MAX),
        current.maximum.unwrap_or(u64::MAX),
    );
    let nofile = nofile_plan(jobs, own, may_raise_hard_limits());
    let mut launch = Launch::with_env(&[("MCP_EXEC_MAX_RUNNING", "20000")]);
    launch.nofile = Some(nofile);
    let mut server = Server::launch(binary, &launch)?;
    server.initialize(protocol, CALL_TIMEOUT)?;
    std::thread::sleep(Duration::from_millis(50));
    let before = server.memory()?;
    let fit = jobs_that_fit(nofile.0, open_fds(server.pid())?);
    if fit < jobs {
        eprintln!(
            "bench: idle_jobs: the hard descriptor limit is {} and cannot be raised here \
             (no CAP_SYS_RESOURCE): {fit} jobs instead of {jobs}",
            own.1
        );
    }
    let asked = jobs;
    let jobs = jobs.min(fit);

    // A sleep length no other process has: it marks the jobs' processes.
    let marker = format!("600.{}{:06}", std::process::id(), nanos() % 1_000_000);
    let args = vec![
        json!({"command": format!("sleep {marker}"), "nowait": true, "close_stdin": true});
        jobs
    ];
    let batch = server.batch("execute", &args)?;
    let t0 = Instant::now();
    let answers = server.pipeline(batch, MANY_JOBS_TIMEOUT)?;
    let start = t0.elapsed();
    let started = answers.iter().filter(|r| r["state"] == "running").count();
    if let Some(other) = answers.iter().find(|r| r["state"] != "running") {
        eprintln!("bench: idle_jobs: a job did not start: {other}");
    }

    // Each job is a shell and its `sleep` (dash does not exec the last
    // command): wait until every job's `sleep` runs, then note every
    // process with the marker, shells included.
    let seen_by = Instant::now() + Duration::from_secs(10);
    let mut sleeps = with_arg(&marker, Match::Whole).len();
    while sleeps < started && Instant::now() < seen_by {
        std::thread::sleep(Duration::from_millis(50));
        sleeps = with_arg(&marker, Match::Whole).len();
    }
    let marked = with_arg(&marker, Match::Within);
    std::thread::sleep(Duration::from_millis(200));
    let after = server.memory()?;

    let mut list = Samples::default();
    let mut list_bytes = 0;
    for _ in 0..list_calls {
        let (took, result) = server.tool("list_jobs", json!({}), CALL_TIMEOUT)?;
        let Some(listed) = result["jobs"].as_array() else {
            return Err(Error(format!("list_jobs: no jobs array in {result}")));
        };
        let running = listed.iter().filter(|j| j["state"] == "running").count();
        if listed.len() != started || running != started {
            return Err(Error(format!(
                "list_jobs: {} jobs listed, {running} running; {started} were started",
                listed.len()
            )));
        }
        list.push_ms(took);
        list_bytes = serde_json::to_vec(&result)?.len();
    }

    let t0 = Instant::now();
    server.shutdown(MANY_JOBS_TIMEOUT)?;
    let shutdown = t0.elapsed();
    let mut left: Vec<(u32, u64)> = marked
        .iter()
        .copied()
        .filter(|&(pid, start)| start_time(pid) == Some(start))
        .collect();
    for p in with_arg(&marker, Match::Within) {
        if !left.contains(&p) {
            left.push(p);
        }
    }
    Ok(IdleJobs {
        asked,
        jobs,
        nofile,
        started,
        sleeps,
        processes: marked.len(),
        start,
        before,
        after,
        list,
        list_bytes,
        shutdown,
        left: left.len(),
    })
}

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// How an argument must carry a marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// The argument is the marker (`sleep`'s).
    Whole,
    /// The argument contains it (also the shell's `sleep <marker>`).
    Within,
}

/// (pid, start time) of every process with an argument that carries `marker`.
pub fn with_arg(marker: &str, how: Match) -> Vec<(u32, u64)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| has_arg(&c, marker, how))
        })
        .filter_map(|pid| Some((pid, start_time(pid)?)))
        .collect()
}

/// Whether one of the NUL-separated arguments of `cmdline` carries `marker`.
fn has_arg(cmdline: &[u8], marker: &str, how: Match) -> bool {
    let m = marker.as_bytes();
    cmdline.split(|&b| b == 0).any(|arg| match how {
        Match::Whole => arg == m,
        Match::Within => arg.windows(m.len()).any(|w| w == m),
    })
}

/// A process's start time (clock ticks after boot, field 22 of
/// `/proc/<pid>/stat`): with the pid, it names one process even if the pid
/// is reused. `None` once the process is gone (a zombie still has one).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may contain spaces: state is
    // field 3, so the start time is the 20th after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

// ---------------------------------------------------------------------------
// Deadlines
// ---------------------------------------------------------------------------

/// What the deadline scenario measured: how far past its deadline a job
/// ended (ms), by the server's clock and by the client's.
#[derive(Debug, Default)]
pub struct Deadline {
    /// The result's `duration_ms` minus the deadline.
    pub server: Samples,
    /// From writing the request to reading the result, minus the deadline.
    pub client: Samples,
}

/// Blocking `execute` of `sleep 5` with `timeout` (seconds), `runs` times,
/// in a server whose shutdown grace (30 s) is long enough that TERM must be
/// what ends the job (`sleep` dies on it; a KILL would come 30 s later).
pub fn deadline(
    binary: &Path,
    protocol: &str,
    runs: usize,
    timeout: f64,
) -> Result<Deadline, Error> {
    let mut server = Server::launch(
        binary,
        &Launch::with_env(&[("MCP_EXEC_SHUTDOWN_GRACE", "30")]),
    )?;
    server.initialize(protocol, CALL_TIMEOUT)?;
    let deadline_ms = timeout * 1e3;
    let mut out = Deadline::default();
    for _ in 0..runs {
        let (took, r) = server.tool(
            "execute",
            json!({"command": "sleep 5", "timeout": timeout}),
            CALL_TIMEOUT,
        )?;
        expect_state(&r, "error", "deadline")?;
        if r["timed_out"] != true || r["cause"] != "timeout" || r["signal_number"] != 15 {
            return Err(Error(format!(
                "deadline: expected timed_out, cause timeout and SIGTERM, got {r}"
            )));
        }
        let Some(ran) = r["duration_ms"].as_u64() else {
            return Err(Error(format!("deadline: no duration_ms in {r}")));
        };
        out.server.push(ran as f64 - deadline_ms);
        out.client.push(took.as_secs_f64() * 1e3 - deadline_ms);
    }
    server.shutdown(Duration::from_secs(10))?;
    Ok(out)
}

// ---------------------------------------------------------------------------
// The admission queue
// ---------------------------------------------------------------------------

/// Jobs that run at once in the queue scenario, and loops of its baseline.
pub const QUEUE_SLOTS: usize = 4;

/// What the admission-queue scenario measured.
#[derive(Debug, Default)]
pub struct Queue {
    /// jobs/s: the server, and [`QUEUE_SLOTS`] parallel `posix_spawn` loops.
    pub rate: Paired,
    /// Jobs submitted over all runs.
    pub jobs: usize,
    /// Jobs answered `queued` when submitted, over all runs.
    pub queued: usize,
    /// Jobs whose result did not come back as a success with their label
    /// and their pid, over all runs.
    pub lost: usize,
    /// Jobs that started before one submitted earlier (by pid), over all runs.
    pub out_of_order: usize,
    /// The same by `started_at` (milliseconds, so ties are common).
    pub started_at_out_of_order: usize,
    /// Per run: until every `execute` had been answered (ms).
    pub submit_ms: Samples,
    /// Per run: the server's CPU time per job, µs (all its threads, not
    /// the jobs; from the first request to the last result).
    pub cpu_per_job: Samples,
}

/// `runs` × `jobs` pipelined `execute … nowait` of `echo $$` (the job
/// prints its pid: pids are handed out in increasing order, so they give
/// the order the jobs started in at no cost beyond `true`), each with a
/// label, in a server with `MCP_EXEC_MAX_RUNNING=4`; then `wait` until
/// every result is collected. Against the same number of `sh -c true` run
/// by [`QUEUE_SLOTS`] `posix_spawn` + `waitpid` loops, one run before each.
pub fn queue(binary: &Path, protocol: &str, jobs: usize, runs: usize) -> Result<Queue, Error> {
    let slots = QUEUE_SLOTS.to_string();
    let capacity = jobs.to_string();
    let mut server = Server::launch(
        binary,
        &Launch::with_env(&[
            ("MCP_EXEC_MAX_RUNNING", &slots),
            ("MCP_EXEC_MAX_QUEUED", &capacity),
        ]),
    )?;
    server.initialize(protocol, CALL_TIMEOUT)?;
    let mut out = Queue::default();
    for run in 0..runs {
        let base = baseline::parallel_spawns(QUEUE_SLOTS, jobs)?;
        out.rate.baseline.push(jobs as f64 / base.as_secs_f64());

        let labels: Vec<String> = (0..jobs).map(|i| format!("q{run}-{i:05}")).collect();
        let args: Vec<Value> = labels
            .iter()
            .map(|l| json!({"command": "echo $$", "nowait": true, "label": l}))
            .collect();
        let batch = server.batch("execute", &args)?;
        let cpu0 = server.cpu_time()?;
        let t0 = Instant::now();
        let answers = server.pipeline(batch, CALL_TIMEOUT)?;
        let mut ids = Vec::with_capacity(jobs);
        for (a, label) in answers.iter().zip(&labels) {
            match a["state"].as_str() {
                Some("queued") => out.queued += 1,
                Some("running") => {}
                _ => return Err(Error(format!("queue: execute answered {a}"))),
            }
            if a["label"] != label.as_str() {
                return Err(Error(format!("queue: expected label {label} in {a}")));
            }
            let Some(id) = a["job_id"].as_str() else {
                return Err(Error(format!("queue: no job_id in {a}")));
            };
            ids.push(id.to_owned());
        }
        // The last job first: once it is terminal, FIFO has started every
        // other, so the next `wait` collects nearly all at once (a `wait`
        // per finished job, each over every id, would be quadratic).
        let (earlier, last) = ids.split_at(jobs.saturating_sub(1));
        out.submit_ms.push_ms(t0.elapsed());
        let mut results = collect(&mut server, last, "queue")?;
        let mut rest = collect(&mut server, earlier, "queue")?;
        let took = t0.elapsed();
        let cpu = server.cpu_time()?.saturating_sub(cpu0);
        out.cpu_per_job.push(cpu.as_secs_f64() * 1e6 / jobs as f64);
        rest.append(&mut results);
        out.rate.server.push(jobs as f64 / took.as_secs_f64());

        let mut pids = Vec::with_capacity(jobs);
        let mut started_at = Vec::with_capacity(jobs);
        for (r, label) in rest.iter().zip(&labels) {
            let pid = r["stdout"]["data"]
                .as_str()
                .and_then(|d| d.trim().parse::<u32>().ok());
            match pid {
                Some(pid) if r["state"] == "success" && r["label"] == label.as_str() => {
                    pids.push(pid);
                    started_at.push(r["started_at"].as_str().unwrap_or("").to_owned());
                }
                _ => out.lost += 1,
            }
        }
        out.jobs += jobs;
        out.out_of_order += fifo_violations(&pids, pid_max());
        out.started_at_out_of_order += started_at.windows(2).filter(|w| w[1] < w[0]).count();
    }
    server.shutdown(Duration::from_secs(10))?;
    Ok(out)
}

/// How many jobs started out of submission order, given their pids in
/// submission order. Pids increase with every process created, so FIFO
/// starts give an increasing sequence, except where the pid counter wraps
/// around at `pid_max`: a drop by more than half of `pid_max` is that wrap
/// (a few hundred jobs span far less), and is in order once.
pub fn fifo_violations(pids: &[u32], pid_max: u32) -> usize {
    let mut wraps = 0;
    let mut violations = 0;
    for w in pids.windows(2) {
        if w[1] >= w[0] {
            continue;
        }
        if w[0] - w[1] > pid_max / 2 && wraps == 0 {
            wraps += 1;
        } else {
            violations += 1;
        }
    }
    violations
}

/// `/proc/sys/kernel/pid_max` (the kernel's default if unreadable).
fn pid_max() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(32768)
}

// ---------------------------------------------------------------------------
// Redaction
// ---------------------------------------------------------------------------

/// A fake AWS access key id (AWS's own documentation example).
pub const AWS_KEY_ID: &str = "AKIAIOSFODNN7EXAMPLE";
/// A fake GitHub token of the right shape: `ghp_` and 36 letters and digits.
pub const GITHUB_TOKEN: &str = "ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d";
/// The server's default window per stream (`MCP_EXEC_MAX_OUTPUT_BYTES`).
pub const WINDOW: usize = 1 << 20;

/// What the redaction scenario measured, or why it could not.
#[derive(Debug)]
pub enum Redaction {
    /// The server does not redact; the reason says what came back.
    Skipped(String),
    /// Both servers read the same window.
    Measured(RedactionCost),
}

/// The cost of redacting a full window (ms, µs for CPU).
#[derive(Debug, Default)]
pub struct RedactionCost {
    /// Per pair of reads: the redacted read's rtt minus the plain one's.
    pub diff: Samples,
    /// `output` rtt with `MCP_EXEC_REDACT=builtin`.
    pub redacted: Samples,
    /// `output` rtt without redaction.
    pub plain: Samples,
    /// Per pair: the redacting server's CPU for its read minus the plain
    /// server's, µs.
    pub cpu_diff: Samples,
    /// Secrets printed inside the window.
    pub secrets: usize,
    /// The `redacted` count of the redacted slice.
    pub masked: u64,
}

/// The `output` of a full 1 MiB window of log lines with a few fake secrets
/// in them, from a server with `MCP_EXEC_REDACT=builtin` and one without,
/// `reads` pairs of reads in alternating order. Skipped (not failed) when
/// the first server returns the AWS key id unmasked: redaction is not in
/// every build of the server.
pub fn redaction(binary: &Path, protocol: &str, reads: usize) -> Result<Redaction, Error> {
    let (text, secrets) = log_text(WINDOW + WINDOW / 8);
    let file = TempFile::new("redaction.log", text.as_bytes())?;
    let path = file.0.display().to_string();
    let mut redacting =
        Server::launch(binary, &Launch::with_env(&[("MCP_EXEC_REDACT", "builtin")]))?;
    let mut plain = Server::spawn(binary)?;
    let mut jobs = Vec::new();
    for server in [&mut redacting, &mut plain] {
        server.initialize(protocol, CALL_TIMEOUT)?;
        jobs.push(finished_job(server, &path, text.len())?);
    }
    let read = |server: &mut Server, job: &str| -> Result<(Duration, Duration, Value), Error> {
        let cpu0 = server.cpu_time()?;
        let (took, r) = server.tool(
            "output",
            json!({"job_id": job, "stdout": "all"}),
            CALL_TIMEOUT,
        )?;
        let cpu = server.cpu_time()?.saturating_sub(cpu0);
        if r["stdout"]["bytes"] != WINDOW {
            return Err(Error(format!(
                "redaction: expected a full window of {WINDOW} bytes, got {}",
                r["stdout"]["bytes"]
            )));
        }
        Ok((took, cpu, r))
    };

    let (_, _, masked) = read(&mut redacting, &jobs[0])?;
    let (_, _, exact) = read(&mut plain, &jobs[1])?;
    let exact = exact["stdout"]["data"].as_str().unwrap_or("");
    if !text.ends_with(exact) || !exact.contains(AWS_KEY_ID) {
        return Err(Error(
            "redaction: without MCP_EXEC_REDACT the window is not the file's last MiB".into(),
        ));
    }
    let data = masked["stdout"]["data"].as_str().unwrap_or("");
    if let Some(why) = not_redacting(data)? {
        redacting.shutdown(Duration::from_secs(10))?;
        plain.shutdown(Duration::from_secs(10))?;
        return Ok(Redaction::Skipped(why));
    }
    let mut out = RedactionCost {
        secrets,
        masked: masked["stdout"]["redacted"].as_u64().unwrap_or(0),
        ..RedactionCost::default()
    };
    for i in 0..reads {
        let (r, p) = if i % 2 == 0 {
            let r = read(&mut redacting, &jobs[0])?;
            (r, read(&mut plain, &jobs[1])?)
        } else {
            let p = read(&mut plain, &jobs[1])?;
            (read(&mut redacting, &jobs[0])?, p)
        };
        out.redacted.push_ms(r.0);
        out.plain.push_ms(p.0);
        out.diff.push((r.0.as_secs_f64() - p.0.as_secs_f64()) * 1e3);
        out.cpu_diff
            .push((r.1.as_secs_f64() - p.1.as_secs_f64()) * 1e6);
    }
    redacting.shutdown(Duration::from_secs(10))?;
    plain.shutdown(Duration::from_secs(10))?;
    Ok(Redaction::Measured(out))
}

/// Judges the window read from the server started with
/// `MCP_EXEC_REDACT=builtin`: `Some(reason)` when it does not redact at all
/// (the AWS key id is there: a server from before redaction ignores the
/// setting), an error when it redacts only part of what it should (a
/// server bug, not a reason to skip), `None` when both kinds of secret are
/// masked and a `[REDACTED]` marks them.
fn not_redacting(data: &str) -> Result<Option<String>, Error> {
    if data.contains(AWS_KEY_ID) {
        return Ok(Some(format!(
            "the server does not redact: {AWS_KEY_ID} came back unmasked with MCP_EXEC_REDACT=builtin"
        )));
    }
    if data.contains(GITHUB_TOKEN) || !data.contains("[REDACTED]") {
        return Err(Error(format!(
            "redaction: the AWS key id was masked but the GitHub token was not, or no \
             [REDACTED] marks a match ({} bytes of data)",
            data.len()
        )));
    }
    Ok(None)
}

/// Starts `cat <path>` (`nowait`) and polls `status` until it has finished
/// (the job stays in the table: `status` never delivers); returns its id.
fn finished_job(server: &mut Server, path: &str, bytes: usize) -> Result<String, Error> {
    // `command`, not `argv`: 2024-11-05 sessions have no Part II inputs.
    if path.contains('\'') {
        return Err(Error(format!("redaction: cannot quote the path {path:?}")));
    }
    let (_, r) = server.tool(
        "execute",
        json!({"command": format!("cat '{path}'"), "nowait": true}),
        CALL_TIMEOUT,
    )?;
    let Some(id) = r["job_id"].as_str().map(str::to_owned) else {
        return Err(Error(format!("redaction: no job_id in {r}")));
    };
    let give_up = Instant::now() + CALL_TIMEOUT;
    loop {
        let (_, s) = server.tool("status", json!({"job_id": id}), CALL_TIMEOUT)?;
        match s["state"].as_str() {
            Some("success") => break,
            Some("running") if Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => return Err(Error(format!("redaction: cat ended as {s}"))),
        }
    }
    let (_, o) = server.tool(
        "output",
        json!({"job_id": id, "stdout": {"tail": 0}}),
        CALL_TIMEOUT,
    )?;
    if o["stdout"]["total_bytes"] != bytes {
        return Err(Error(format!(
            "redaction: cat wrote {} bytes of {bytes}",
            o["stdout"]["total_bytes"]
        )));
    }
    Ok(id)
}

/// At least `bytes` of plausible service log lines (requests, queries,
/// retries, cache misses, failed jobs: long hex ids and key=value pairs,
/// the text a secret scanner has to look through), deterministic, ending
/// in a newline. Six lines carry a fake secret, alternately [`AWS_KEY_ID`]
/// and [`GITHUB_TOKEN`], all in the last 7/8 of the text. Returns the text
/// and the number of secrets.
pub fn log_text(bytes: usize) -> (String, usize) {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut out = String::with_capacity(bytes + 256);
    let mut ms: u64 = 0;
    let secret_at = [0.15, 0.3, 0.45, 0.6, 0.75, 0.9].map(|f| (f * bytes as f64) as usize);
    let mut secrets = 0;
    while out.len() < bytes {
        ms += rng.below(40);
        let ts = format!(
            "2025-03-14T09:{:02}:{:02}.{:03}Z",
            (ms / 60_000) % 60,
            (ms / 1000) % 60,
            ms % 1000
        );
        if secrets < secret_at.len() && out.len() >= secret_at[secrets] {
            out.push_str(&if secrets % 2 == 0 {
                format!(
                    "{ts} DEBUG config: loaded credentials from environment \
                     aws_access_key_id={AWS_KEY_ID} region=eu-west-1 profile=deploy\n"
                )
            } else {
                format!(
                    "{ts} WARN  git{{remote=origin}}: push rejected, retrying with \
                     token={GITHUB_TOKEN} scope=repo\n"
                )
            });
            secrets += 1;
            continue;
        }
        let line = match rng.below(6) {
            0 | 1 => format!(
                "{ts} INFO  http{{method={} path=/api/v1/{}/{} request_id={:016x}}}: request completed \
                 status={} bytes={} elapsed_ms={}.{}\n",
                ["GET", "POST", "PUT", "DELETE"][rng.below(4) as usize],
                ["orders", "users", "items", "invoices"][rng.below(4) as usize],
                rng.below(100_000),
                rng.next(),
                [200, 200, 201, 204, 404, 500][rng.below(6) as usize],
                rng.below(50_000),
                rng.below(300),
                rng.below(10)
            ),
            2 => format!(
                "{ts} DEBUG db{{pool=primary}}: query ok table={} rows={} elapsed_ms={}.{} \
                 sql_hash={:016x}\n",
                ["orders", "users", "sessions", "events"][rng.below(4) as usize],
                rng.below(500),
                rng.below(80),
                rng.below(10),
                rng.next()
            ),
            3 => format!(
                "{ts} WARN  upstream{{service={}}}: retrying after error attempt={} backoff_ms={} \
                 error=\"connection reset by peer\"\n",
                ["payments", "search", "mailer"][rng.below(3) as usize],
                rng.below(5) + 1,
                rng.below(2000)
            ),
            4 => format!(
                "{ts} INFO  cache: miss key=user:{}:profile ttl_s=300 size={}\n",
                rng.below(1_000_000),
                rng.below(8192)
            ),
            _ => format!(
                "{ts} ERROR worker{{queue=emails id={:08x}-{:04x}-4{:03x}-{:04x}-{:012x}}}: job failed: \
                 smtp 451 4.7.1 try again later\n",
                rng.next() as u32,
                rng.below(0x1_0000),
                rng.below(0x1000),
                rng.below(0x1_0000),
                rng.next() & 0xffff_ffff_ffff
            ),
        };
        out.push_str(&line);
    }
    (out, secrets)
}

/// A small deterministic generator (xorshift64*): the same log every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A file in the temporary directory, removed on drop.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, contents: &[u8]) -> Result<TempFile, Error> {
        let path =
            std::env::temp_dir().join(format!("mcp-exec-bench-{}-{name}", std::process::id()));
        std::fs::write(&path, contents)
            .map_err(|e| Error(format!("writing {}: {e}", path.display())))?;
        Ok(TempFile(path))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_two_scenarios_never_negotiate_a_revision_before_part_two() {
        assert_eq!(part_two("2024-11-05"), crate::client::DEFAULT_PROTOCOL);
        assert_eq!(part_two("2025-03-26"), "2025-03-26");
        assert_eq!(part_two("2025-11-25"), "2025-11-25");
    }

    #[test]
    fn pids_in_increasing_order_are_fifo() {
        assert_eq!(fifo_violations(&[10, 11, 15, 40], 32768), 0);
        assert_eq!(fifo_violations(&[], 32768), 0);
        assert_eq!(fifo_violations(&[7], 32768), 0);
    }

    #[test]
    fn a_pid_counter_that_wraps_once_is_still_fifo() {
        assert_eq!(fifo_violations(&[32760, 32766, 301, 305], 32768), 0);
    }

    #[test]
    fn a_job_started_before_an_earlier_one_is_counted() {
        assert_eq!(fifo_violations(&[10, 12, 11, 13], 32768), 1);
        // Two jobs swapped across the wrap: 32766 (second) started before 301.
        assert_eq!(fifo_violations(&[32760, 301, 32766, 305], 32768), 1);
        // A reversed sequence is not a wrap.
        assert_eq!(fifo_violations(&[13, 12, 11, 10], 32768), 3);
        // Nor is a second drop across the whole range.
        assert_eq!(fifo_violations(&[32000, 100, 32100, 200], 32768), 1);
    }

    #[test]
    fn with_cap_sys_resource_both_limits_are_raised() {
        assert_eq!(nofile_plan(10_000, (1024, 20_000), true), (65536, 65536));
        // A higher hard limit is kept.
        assert_eq!(nofile_plan(10_000, (1024, 1 << 20), true), (65536, 1 << 20));
        // More jobs than the default limit holds get what they need.
        assert_eq!(nofile_plan(40_000, (1024, 20_000), true).0, 81_024);
    }

    #[test]
    fn without_cap_sys_resource_the_hard_limit_caps_the_soft_one() {
        assert_eq!(nofile_plan(10_000, (1024, 20_000), false), (20_000, 20_000));
        assert_eq!(nofile_plan(200, (1024, 1 << 20), false), (65536, 1 << 20));
    }

    #[test]
    fn jobs_fit_in_what_the_server_has_not_opened_yet() {
        assert_eq!(
            jobs_that_fit(20_000, 12),
            (20_000 - 12 - FD_MARGIN as usize) / 2
        );
        assert!(jobs_that_fit(65536, 12) >= 10_000);
        assert_eq!(jobs_that_fit(10, 12), 0);
    }

    #[test]
    fn a_marker_is_found_in_any_argument_of_a_cmdline() {
        let sleep = b"sleep\x00600.123\x00";
        let shell = b"sh\x00-c\x00sleep 600.123\x00";
        assert!(has_arg(sleep, "600.123", Match::Whole));
        assert!(has_arg(sleep, "600.123", Match::Within));
        assert!(!has_arg(shell, "600.123", Match::Whole));
        assert!(has_arg(shell, "600.123", Match::Within));
        assert!(!has_arg(b"sleep\x00600\x00", "600.123", Match::Within));
        assert!(!has_arg(b"", "600.123", Match::Within));
    }

    #[test]
    fn this_process_has_a_start_time_and_a_gone_one_has_none() {
        assert!(start_time(std::process::id()).is_some());
        let Ok(mut child) = std::process::Command::new("true").spawn() else {
            panic!("cannot spawn true");
        };
        let pid = child.id();
        assert!(child.wait().is_ok());
        assert_eq!(start_time(pid), None);
    }

    #[test]
    fn a_window_with_the_key_id_in_it_means_no_redaction_and_a_skip() {
        let raw = format!("a\nkey={AWS_KEY_ID}\ntoken={GITHUB_TOKEN}\n");
        let verdict = not_redacting(&raw);
        assert!(matches!(verdict, Ok(Some(ref why)) if why.contains(AWS_KEY_ID)));
    }

    #[test]
    fn a_window_with_both_secrets_masked_is_measured() {
        let masked = "a\nkey=[REDACTED]\ntoken=[REDACTED]\n";
        assert!(matches!(not_redacting(masked), Ok(None)));
    }

    #[test]
    fn a_window_with_only_the_key_id_masked_is_an_error() {
        let half = format!("a\nkey=[REDACTED]\ntoken={GITHUB_TOKEN}\n");
        assert!(not_redacting(&half).is_err());
        assert!(not_redacting("nothing to see\n").is_err());
    }

    #[test]
    fn the_log_has_its_secrets_in_the_window_and_is_the_same_every_time() {
        let (text, secrets) = log_text(WINDOW + WINDOW / 8);
        assert!(text.len() >= WINDOW + WINDOW / 8);
        assert!(text.ends_with('\n'));
        assert_eq!(secrets, 6);
        let window = &text[text.len() - WINDOW..];
        assert_eq!(window.matches(AWS_KEY_ID).count(), 3);
        assert_eq!(window.matches(GITHUB_TOKEN).count(), 3);
        assert_eq!(log_text(WINDOW + WINDOW / 8).0, text);
        assert!(text.lines().all(|l| l.len() < 300), "lines are log-sized");
    }
}
