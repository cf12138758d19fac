//! The measured scenarios of issues 5 and 9, each paired with its physical
//! baseline.
//!
//! Where a figure has a baseline, the two are interleaved sample by sample
//! (one baseline run, one server run, …) or batch by batch (`rtt_spawn`:
//! baseline, server, baseline), so that a change in the machine's load during
//! the run hits both sides alike: on a shared box that matters more than the
//! order effects interleaving could introduce. Figures "minus ping" take the
//! median rtt of `ping` requests interleaved with the measured calls off
//! their rtt, leaving what the call costs beyond the transport; beside them
//! the server's own CPU time per call (its process CPU clock, all threads)
//! separates work from waiting, and does not move with the machine's load.
//!
//! Every scenario checks what the server answered (states, byte counts), so a
//! smoke run proves the harness and the server still speak the same protocol.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Error;
use crate::baseline;
use crate::client::{self, Server};
use crate::stats::Samples;

/// How long one ordinary call may take before the harness gives up.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Iteration counts and sizes of one run.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Fresh server processes for the startup figure.
    pub startup: usize,
    /// Sequential blocking `execute` of `true`.
    pub rtt: usize,
    /// Rounds of the posix_spawn comparison (baseline batch, server batch,
    /// baseline batch).
    pub spawn_rounds: usize,
    /// Calls per batch in those rounds.
    pub spawn_batch: usize,
    /// `tools/list` calls (each paired with a `ping`).
    pub list: usize,
    /// Runs of the throughput scenario.
    pub throughput_runs: usize,
    /// Bytes per throughput run.
    pub throughput_bytes: u64,
    /// Jobs per burst.
    pub burst_jobs: usize,
    /// Bursts.
    pub burst_runs: usize,
    /// Blocking `execute sleep 0.5` written at once in `burst_blocking`.
    pub blocking_burst_jobs: usize,
    /// Runs of `burst_blocking` (each with its baseline).
    pub blocking_burst_runs: usize,
    /// Delivery-latency runs.
    pub delivery: usize,
    /// Kill-latency runs.
    pub kill: usize,
    /// Concurrent idle jobs in one server (issue 10).
    pub idle_jobs: usize,
    /// `list_jobs` calls while they run.
    pub idle_list: usize,
    /// Runs of the deadline scenario.
    pub deadline_runs: usize,
    /// The deadline of each run, seconds.
    pub deadline_timeout: f64,
    /// Jobs per run of the admission-queue scenario.
    pub queue_jobs: usize,
    /// Runs of the admission-queue scenario.
    pub queue_runs: usize,
    /// `output` reads of the full window per server in the redaction scenario.
    pub redaction_reads: usize,
    /// Blocking `execute` over HTTP (and as many over stdio) in `http_rtt`.
    pub http_rtt: usize,
    /// Sequential blocking `execute` over HTTP with a token in `http_execute`.
    pub http_execute: usize,
    /// Concurrent HTTP clients in `http_concurrency`.
    pub http_clients: usize,
    /// Calls per client per run there.
    pub http_calls: usize,
    /// Runs there.
    pub http_runs: usize,
    /// Idle HTTP sessions held at once in `http_sessions`.
    pub http_sessions: usize,
    /// Jobs of the soak (issue 15), warm-up included.
    pub soak_jobs: usize,
    /// Legitimate calls in `http_abuse` (half alone, half under abuse).
    pub abuse_calls: usize,
    /// Wrong-token requests of the abuse there.
    pub abuse_wrong_tokens: usize,
    /// Requests per token holder in `listener_flood`, per flooded listener
    /// (and as many for the baseline).
    pub flood_requests: usize,
    /// `screen` calls (each paired with a `ping`) per size in `screen` (issue 21).
    pub screen_calls: usize,
    /// Idle PTY jobs with 1,000 lines of scrollback held at once in `screen_memory`.
    pub screen_jobs: usize,
    /// Keystrokes in `keystroke`.
    pub keystrokes: usize,
    /// Runs of `pty_throughput`.
    pub pty_runs: usize,
    /// Bytes through the terminal per run there.
    pub pty_bytes: u64,
    /// Fresh starts of each stdio server in `peers` (issue 26).
    pub peers_startup: usize,
    /// Calls of each server's tool running `true` there (and SDK calls).
    pub peers_rtt: usize,
    /// Rounds of `frontends` (issue 26): one `execute true` over every
    /// front-end and one C spawn each.
    pub frontends: usize,
    /// Idle task-augmented `execute`s held at once in `idle_tasks` (issue 26).
    pub idle_tasks: usize,
    /// Idle terminal jobs held at once in `pty_memory` (issue 26).
    pub pty_jobs: usize,
}

impl Plan {
    /// The full benchmark of issue 5.
    pub const FULL: Plan = Plan {
        startup: 20,
        rtt: 500,
        spawn_rounds: 40,
        spawn_batch: 25,
        list: 2000,
        throughput_runs: 10,
        throughput_bytes: 256 << 20,
        burst_jobs: 1000,
        burst_runs: 5,
        blocking_burst_jobs: 200,
        blocking_burst_runs: 5,
        delivery: 50,
        kill: 50,
        idle_jobs: 10_000,
        idle_list: 20,
        deadline_runs: 50,
        deadline_timeout: 1.0,
        queue_jobs: 1000,
        queue_runs: 5,
        redaction_reads: 30,
        http_rtt: 500,
        http_execute: 500,
        http_clients: 64,
        http_calls: 100,
        http_runs: 3,
        http_sessions: 10_000,
        soak_jobs: 100_000,
        abuse_calls: 400,
        abuse_wrong_tokens: 10_000,
        flood_requests: 40,
        screen_calls: 2000,
        screen_jobs: 50,
        keystrokes: 500,
        pty_runs: 1,
        pty_bytes: 256 << 20,
        // DesktopCommander takes seconds to start and ~1 s per call here (BENCHMARKS.md, "Peers").
        peers_startup: 5,
        peers_rtt: 100,
        frontends: 500,
        idle_tasks: 10_000,
        pty_jobs: 10_000,
    };

    /// A few iterations of each scenario: proves the harness works, in seconds.
    pub const SMOKE: Plan = Plan {
        startup: 3,
        rtt: 10,
        spawn_rounds: 2,
        spawn_batch: 3,
        list: 5,
        throughput_runs: 2,
        throughput_bytes: 16 << 20,
        burst_jobs: 20,
        burst_runs: 1,
        // Above the 32 job-starting calls a session admitted at once before
        // issue 19, so that a smoke run still goes through more than one wave.
        blocking_burst_jobs: 50,
        blocking_burst_runs: 1,
        delivery: 3,
        kill: 3,
        idle_jobs: 200,
        idle_list: 3,
        deadline_runs: 3,
        // Shorter than the full run's 1 s: the smoke run checks the shapes.
        deadline_timeout: 0.3,
        queue_jobs: 50,
        queue_runs: 1,
        redaction_reads: 3,
        http_rtt: 10,
        http_execute: 10,
        http_clients: 4,
        http_calls: 5,
        http_runs: 1,
        http_sessions: 20,
        soak_jobs: 1000,
        abuse_calls: 20,
        abuse_wrong_tokens: 500,
        flood_requests: 2,
        screen_calls: 5,
        screen_jobs: 2,
        keystrokes: 10,
        pty_runs: 1,
        pty_bytes: 4 << 20,
        peers_startup: 1,
        peers_rtt: 3,
        frontends: 5,
        idle_tasks: 50,
        pty_jobs: 20,
    };
}

/// A figure's samples and those of its baseline.
#[derive(Debug, Default)]
pub struct Paired {
    /// The server.
    pub server: Samples,
    /// The physical baseline.
    pub baseline: Samples,
}

pub fn expect_state(result: &Value, want: &str, what: &str) -> Result<(), Error> {
    if result["state"] == want {
        Ok(())
    } else {
        Err(Error(format!(
            "{what}: expected state {want:?}, got {result}"
        )))
    }
}

/// Startup: spawn → `initialize` response of fresh servers (ms), against
/// spawn → exit of `<binary> --version`.
pub fn startup(binary: &Path, runs: usize, protocol: &str) -> Result<Paired, Error> {
    let mut out = Paired::default();
    for _ in 0..runs {
        out.baseline.push_ms(baseline::startup(binary)?);
        let mut server = Server::spawn(binary)?;
        let sent = server.send("initialize", client::initialize_params(protocol))?;
        let (at, result) = server.response(sent.id, CALL_TIMEOUT)?;
        out.server.push_ms(at - server.started());
        client::check_initialize(&result, protocol)?;
        server.shutdown(Duration::from_secs(10))?;
    }
    Ok(out)
}

/// rtt: blocking `execute` of `true` (ms), against spawn+wait of `sh -c true`.
pub fn rtt(server: &mut Server, runs: usize) -> Result<Paired, Error> {
    let mut out = Paired::default();
    for _ in 0..runs {
        out.baseline.push_ms(baseline::spawn_true()?);
        let (took, result) = server.tool("execute", json!({"command": "true"}), CALL_TIMEOUT)?;
        expect_state(&result, "success", "rtt")?;
        out.server.push_ms(took);
    }
    Ok(out)
}

/// Blocking `execute` of `true` in a shell session (the wrapped command,
/// its epilogue, the state pipe and its parsing) against the same without
/// one, interleaved in one server. A server without sessions ignores
/// `shell_session`, so against one the ratio is about 1.
pub fn session_rtt(server: &mut Server, runs: usize) -> Result<Paired, Error> {
    let mut out = Paired::default();
    for _ in 0..runs {
        let (plain, result) = server.tool("execute", json!({"command": "true"}), CALL_TIMEOUT)?;
        expect_state(&result, "success", "session_rtt")?;
        out.baseline.push_ms(plain);
        let (took, result) = server.tool(
            "execute",
            json!({"command": "true", "shell_session": "bench"}),
            CALL_TIMEOUT,
        )?;
        expect_state(&result, "success", "session_rtt")?;
        out.server.push_ms(took);
    }
    Ok(out)
}

/// What the posix_spawn comparison measured (ms).
#[derive(Debug, Default)]
pub struct SpawnRtt {
    /// `posix_spawn` + `waitpid` of `/bin/sh -c true` straight from libc.
    pub baseline: Samples,
    /// The same spawn with the server's pipes, epoll registration and
    /// event-driven reaping around it ([`crate::sys::PipedSpawner`]).
    pub piped: Samples,
    /// Blocking `execute` of `true`, the whole rtt.
    pub execute: Samples,
    /// `ping`, one before each `execute`: the transport and the session
    /// loop alone (stdin thread → runtime → stdout thread and the pipes).
    pub ping: Samples,
    /// The server's own CPU time per `execute` (all its threads, not the
    /// job), µs.
    pub execute_cpu: Samples,
    /// The server's own CPU time per `ping`, µs.
    pub ping_cpu: Samples,
}

impl SpawnRtt {
    /// The `execute` rtt with the median `ping` rtt taken off: what running
    /// the job costs the server beyond answering any request.
    pub fn execute_net(&self) -> Samples {
        self.execute.shifted(-self.ping.median())
    }
}

/// The spawn cost against the bare libc loop: `rounds` × (a batch of
/// `posix_spawn`+`waitpid`, a batch of the piped spawn, a batch of `ping` +
/// `execute true` pairs, then the two baselines again in reverse order).
/// Batches rather than single samples keep each side's caches warm; the
/// baselines on both sides of every server batch make a change of load hit
/// all three alike.
pub fn rtt_spawn(server: &mut Server, rounds: usize, batch: usize) -> Result<SpawnRtt, Error> {
    let spawn = baseline::PosixSpawn::default();
    let piped = crate::sys::PipedSpawner::new()
        .map_err(|e| Error(format!("baseline piped spawn: epoll_create1: {e}")))?;
    let mut out = SpawnRtt::default();
    for _ in 0..rounds {
        for _ in 0..batch {
            out.baseline.push_ms(spawn.run()?);
        }
        for _ in 0..batch {
            out.piped.push_ms(spawn.run_piped(&piped)?);
        }
        for _ in 0..batch {
            let cpu0 = server.cpu_time()?;
            out.ping.push_ms(ping(server)?);
            let cpu1 = server.cpu_time()?;
            let (took, result) =
                server.tool("execute", json!({"command": "true"}), CALL_TIMEOUT)?;
            let cpu2 = server.cpu_time()?;
            expect_state(&result, "success", "rtt_spawn")?;
            out.execute.push_ms(took);
            out.ping_cpu.push_us(cpu1.saturating_sub(cpu0));
            out.execute_cpu.push_us(cpu2.saturating_sub(cpu1));
        }
        for _ in 0..batch {
            out.piped.push_ms(spawn.run_piped(&piped)?);
        }
        for _ in 0..batch {
            out.baseline.push_ms(spawn.run()?);
        }
    }
    Ok(out)
}

/// One `ping`: its rtt, and a check that the result is `{}`.
pub fn ping(server: &mut Server) -> Result<Duration, Error> {
    let (took, result) = server.call("ping", json!({}), CALL_TIMEOUT)?;
    if result != json!({}) {
        return Err(Error(format!("ping: expected {{}}, got {result}")));
    }
    Ok(took)
}

/// What the `tools/list` scenario measured (µs).
#[derive(Debug, Default)]
pub struct ToolsList {
    /// `tools/list` rtt.
    pub list: Samples,
    /// `ping` rtt, one before each `tools/list`.
    pub ping: Samples,
    /// Bytes of one `tools/list` result.
    pub bytes: usize,
    /// The server's CPU time per `tools/list` (all its threads).
    pub list_cpu: Samples,
    /// The server's CPU time per `ping`.
    pub ping_cpu: Samples,
}

impl ToolsList {
    /// The `tools/list` rtt with the median `ping` rtt taken off: the server's
    /// time to build and serialise the list (plus moving its larger line
    /// through the pipe, a few µs).
    pub fn server_time(&self) -> Samples {
        self.list.shifted(-self.ping.median())
    }
}

/// `tools/list` server time: `calls` × (`ping`, `tools/list`), µs.
pub fn tools_list(server: &mut Server, calls: usize) -> Result<ToolsList, Error> {
    let mut out = ToolsList::default();
    for _ in 0..calls {
        let cpu0 = server.cpu_time()?;
        out.ping.push_us(ping(server)?);
        let cpu1 = server.cpu_time()?;
        let (took, result) = server.call("tools/list", json!({}), CALL_TIMEOUT)?;
        let cpu2 = server.cpu_time()?;
        out.ping_cpu.push_us(cpu1.saturating_sub(cpu0));
        out.list_cpu.push_us(cpu2.saturating_sub(cpu1));
        let names: Vec<&str> = result["tools"]
            .as_array()
            .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        if !names.contains(&"execute") {
            return Err(Error(format!("tools/list: no execute tool in {result}")));
        }
        out.list.push_us(took);
        out.bytes = serde_json::to_vec(&result)?.len();
    }
    Ok(out)
}

/// What the throughput scenario measured.
#[derive(Debug, Default)]
pub struct Throughput {
    /// Wall times (ms), server and raw pipe.
    pub wall: Paired,
    /// The server's `VmHWM` over all runs (KiB), reset before the first.
    pub peak_kib: u64,
    /// Whether the high-water mark could be reset first (else it is the
    /// process's lifetime peak).
    pub peak_was_reset: bool,
}

/// Throughput: blocking `execute` of `head -c N /dev/zero` with the default
/// capture (the result carries the last 1 MiB window), against
/// `head -c N /dev/zero | cat >/dev/null`.
pub fn throughput(server: &mut Server, runs: usize, bytes: u64) -> Result<Throughput, Error> {
    let peak_was_reset = server.reset_peak().is_ok();
    let mut wall = Paired::default();
    let command = format!("head -c {bytes} /dev/zero");
    for _ in 0..runs {
        wall.baseline.push_ms(baseline::pipe(bytes)?);
        let (took, result) = server.tool("execute", json!({"command": command}), CALL_TIMEOUT)?;
        expect_state(&result, "success", "throughput")?;
        if result["stdout"]["total_bytes"] != bytes {
            return Err(Error(format!(
                "throughput: stdout.total_bytes should be {bytes}, got {}",
                result["stdout"]["total_bytes"]
            )));
        }
        wall.server.push_ms(took);
    }
    Ok(Throughput {
        wall,
        peak_kib: server.memory()?.hwm_kib,
        peak_was_reset,
    })
}

/// What the burst scenario measured.
#[derive(Debug, Default)]
pub struct Burst {
    /// jobs/s, server and Rust loop.
    pub rate: Paired,
    /// Time until every `execute … nowait` had been answered (ms): the
    /// spawning half of the server's burst; the rest is collecting.
    pub submit_ms: Samples,
}

/// Burst: `jobs` pipelined `execute … nowait` of `true`, then `wait` until all
/// are collected (jobs/s), against the same spawns+waits from a Rust loop.
pub fn burst(server: &mut Server, jobs: usize, runs: usize) -> Result<Burst, Error> {
    let mut out = Burst::default();
    for _ in 0..runs {
        let base = baseline::burst(jobs)?;
        out.rate.baseline.push(jobs as f64 / base.as_secs_f64());
        let (took, submitted) = burst_once(server, jobs)?;
        out.rate.server.push(jobs as f64 / took.as_secs_f64());
        out.submit_ms.push_ms(submitted);
    }
    Ok(out)
}

/// One burst; returns the total time and the time until all `execute`s
/// had been answered.
fn burst_once(server: &mut Server, jobs: usize) -> Result<(Duration, Duration), Error> {
    let args = vec![json!({"command": "true", "nowait": true}); jobs];
    let batch = server.batch("execute", &args)?;
    let t0 = Instant::now();
    let answers = server.pipeline(batch, CALL_TIMEOUT)?;
    let submitted = t0.elapsed();
    let mut remaining = Vec::with_capacity(jobs);
    for result in &answers {
        expect_state(result, "running", "burst execute")?;
        let Some(job) = result["job_id"].as_str() else {
            return Err(Error(format!("burst: no job_id in {result}")));
        };
        remaining.push(job.to_owned());
    }
    for r in collect(server, &remaining, "burst")? {
        expect_state(&r, "success", "burst job")?;
    }
    Ok((t0.elapsed(), submitted))
}

/// What `burst_blocking` sleeps in each job (and in each baseline spawn).
pub const BLOCKING_SLEEP: &str = "sleep 0.5";

/// Blocking burst (issue 19): `jobs` blocking `execute` of
/// [`BLOCKING_SLEEP`] written at once on one stdio session, until every one
/// has been answered `success` (wall ms, `server`), against `jobs`
/// `posix_spawn` + `waitpid` of `sh -c` the same command in as many threads
/// at once (`baseline`), run by run, the order alternating. What a client
/// sending many parallel tool calls waits for; a per-session cap on
/// job-starting calls shows as waves of 0.5 s.
pub fn burst_blocking(server: &mut Server, jobs: usize, runs: usize) -> Result<Paired, Error> {
    let spawn = baseline::PosixSpawn::of(BLOCKING_SLEEP)?;
    let mut out = Paired::default();
    for i in 0..runs {
        if i % 2 == 0 {
            out.baseline
                .push_ms(baseline::parallel_spawns_of(&spawn, jobs, jobs)?);
            out.server.push_ms(burst_blocking_once(server, jobs)?);
        } else {
            out.server.push_ms(burst_blocking_once(server, jobs)?);
            out.baseline
                .push_ms(baseline::parallel_spawns_of(&spawn, jobs, jobs)?);
        }
    }
    Ok(out)
}

/// One blocking burst of `jobs` on `server`; the time until all answered.
pub fn burst_blocking_once(server: &mut Server, jobs: usize) -> Result<Duration, Error> {
    let args = vec![json!({"command": BLOCKING_SLEEP}); jobs];
    let batch = server.batch("execute", &args)?;
    let t0 = Instant::now();
    let answers = server.pipeline(batch, CALL_TIMEOUT)?;
    let took = t0.elapsed();
    for result in &answers {
        expect_state(result, "success", "burst_blocking execute")?;
    }
    Ok(took)
}

/// `wait`s until every job of `ids` is terminal; returns their results in
/// the order of `ids`. Each `wait` returns as soon as one listed job is
/// terminal, with every terminal one delivered; the rest are waited for
/// again.
pub fn collect(server: &mut Server, ids: &[String], what: &str) -> Result<Vec<Value>, Error> {
    let mut out: Vec<Option<Value>> = vec![None; ids.len()];
    let mut remaining: Vec<usize> = (0..ids.len()).collect();
    while !remaining.is_empty() {
        let job_ids: Vec<&str> = remaining.iter().map(|&i| ids[i].as_str()).collect();
        let (_, results) = server.tool(
            "wait",
            json!({"job_ids": job_ids, "timeout": 30}),
            CALL_TIMEOUT,
        )?;
        // An array; from 2025-06-18 on wrapped as `{"results": […]}`, because
        // structured content must be an object.
        let results = results.get("results").unwrap_or(&results);
        let Some(results) = results.as_array() else {
            return Err(Error(format!(
                "{what}: wait did not return an array: {results}"
            )));
        };
        if results.len() != remaining.len() {
            return Err(Error(format!(
                "{what}: wait returned a different number of entries"
            )));
        }
        let mut still = Vec::new();
        for (&i, r) in remaining.iter().zip(results) {
            if r["job_id"] != ids[i].as_str() {
                return Err(Error(format!(
                    "{what}: wait answered {} for {}",
                    r["job_id"], ids[i]
                )));
            }
            match r["state"].as_str() {
                Some("running" | "queued") => still.push(i),
                Some("success" | "error") => out[i] = Some(r.clone()),
                _ => return Err(Error(format!("{what}: job {} is {r}", ids[i]))),
            }
        }
        if still.len() == remaining.len() {
            return Err(Error(format!(
                "{what}: wait timed out with every job still running"
            )));
        }
        remaining = still;
    }
    Ok(out.into_iter().flatten().collect())
}

/// What the delivery-latency scenario measured.
#[derive(Debug, Default)]
pub struct Delivery {
    /// Time to the result (ms).
    pub latency: Samples,
    /// Orphans (children of the server) still alive 100 ms after the last
    /// delivery; they are then killed so later scenarios start clean.
    pub orphans_left: usize,
}

/// The command of the delivery scenario: the direct child exits at once and
/// leaves a descendant that keeps the pipe open and keeps writing.
pub const STREAMING_ORPHAN: &str = "(while :; do echo x; sleep 0.01; done) & exit 0";

/// Delivery latency: blocking `execute` of [`STREAMING_ORPHAN`] (ms).
pub fn delivery(server: &mut Server, runs: usize) -> Result<Delivery, Error> {
    let mut latency = Samples::default();
    for _ in 0..runs {
        let (took, result) = server.tool(
            "execute",
            json!({"command": STREAMING_ORPHAN}),
            CALL_TIMEOUT,
        )?;
        expect_state(&result, "success", "delivery")?;
        latency.push_ms(took);
    }
    std::thread::sleep(Duration::from_millis(100));
    let orphans_left = kill_children(server.pid());
    Ok(Delivery {
        latency,
        orphans_left,
    })
}

/// Kill latency: `kill` TERM of a running `sleep 60` job: time to the reply (ms).
pub fn kill(server: &mut Server, runs: usize) -> Result<Samples, Error> {
    let mut out = Samples::default();
    for _ in 0..runs {
        let (_, started) = server.tool(
            "execute",
            json!({"command": "sleep 60", "nowait": true}),
            CALL_TIMEOUT,
        )?;
        let Some(job) = started["job_id"].as_str() else {
            return Err(Error(format!("kill: no job_id in {started}")));
        };
        // Let the shell exec `sleep`, so the signal hits a sleeping process.
        std::thread::sleep(Duration::from_millis(20));
        let (took, result) = server.tool(
            "kill",
            json!({"job_id": job, "signal": "TERM"}),
            CALL_TIMEOUT,
        )?;
        if result["terminated"] != true {
            return Err(Error(format!("kill: job not terminated: {result}")));
        }
        out.push_ms(took);
    }
    Ok(out)
}

/// Pids whose parent is `pid`.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    // Fields after the command name, which may contain spaces.
                    let rest = &s[s.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

/// SIGKILLs every child of `pid` (and its group), repeatedly, until none is
/// left or a second has passed; returns how many there were at first.
fn kill_children(pid: u32) -> usize {
    let first = children_of(pid).len();
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let children = children_of(pid);
        if children.is_empty() || Instant::now() > deadline {
            break;
        }
        for c in children {
            if let Some(p) = i32::try_from(c)
                .ok()
                .and_then(rustix::process::Pid::from_raw)
            {
                let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
                let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    first
}

/// What the size figure reports of the binary.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    /// Its bytes.
    pub bytes: u64,
    /// It has no symbol table.
    pub stripped: bool,
    /// It has no `.interp` section: no dynamic loader, statically linked.
    pub linked_static: bool,
}

/// The binary's size, and whether it is stripped and statically linked.
pub fn size(binary: &Path) -> Result<Size, Error> {
    let bytes =
        std::fs::read(binary).map_err(|e| Error(format!("reading {}: {e}", binary.display())))?;
    let has = |section: &[u8]| bytes.windows(section.len()).any(|w| w == section);
    Ok(Size {
        bytes: bytes.len() as u64,
        stripped: !has(b".symtab\0"),
        // A dynamically linked binary names its loader in `.interp`.
        linked_static: !has(b".interp\0"),
    })
}

/// The machine's 1-minute load average, from `/proc/loadavg`.
pub fn loadavg() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `uname -r`.
pub fn kernel() -> Option<String> {
    let out = Command::new("uname").arg("-r").output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The per-request `_meta` of a 2026-07-28 request.
fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {},
           "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"}})
}

/// What the dual-era scenario measured.
#[derive(Debug, Default)]
pub struct Era {
    /// `ping` rtt (the session's legacy revision), one before each modern
    /// `server/discover` and `tools/list`, µs.
    pub ping: Samples,
    /// `server/discover` rtt, µs.
    pub discover: Samples,
    /// 2026-07-28 `tools/list` rtt, µs.
    pub list: Samples,
    /// Bytes of one 2026-07-28 `tools/list` result.
    pub list_bytes: usize,
    /// Blocking `execute` of `true`: `server` in 2026-07-28 (per-request
    /// `_meta`), `baseline` in the session's 2025-11-25, interleaved, ms.
    pub rtt: Paired,
}

/// Dual era, on one stdio server `initialize`d as 2025-11-25: `calls` ×
/// (`ping`, `server/discover`, `ping`, 2026-07-28 `tools/list`), then `runs`
/// × (2025-11-25 `execute true`, 2026-07-28 `execute true`).
pub fn era(server: &mut Server, calls: usize, runs: usize) -> Result<Era, Error> {
    let mut out = Era::default();
    let meta = modern_meta();
    for _ in 0..calls {
        out.ping.push_us(ping(server)?);
        let (took, result) =
            server.call("server/discover", json!({"_meta": meta}), CALL_TIMEOUT)?;
        if result["supportedVersions"][0] != "2026-07-28" || result["resultType"] != "complete" {
            return Err(Error(format!("server/discover: unexpected {result}")));
        }
        out.discover.push_us(took);
        out.ping.push_us(ping(server)?);
        let (took, result) = server.call("tools/list", json!({"_meta": meta}), CALL_TIMEOUT)?;
        if result["resultType"] != "complete" || !result["ttlMs"].is_u64() {
            return Err(Error(format!(
                "tools/list 2026-07-28: no caching hints in {result}"
            )));
        }
        out.list.push_us(took);
        out.list_bytes = serde_json::to_vec(&result)?.len();
    }
    for _ in 0..runs {
        let (took, result) = server.tool("execute", json!({"command": "true"}), CALL_TIMEOUT)?;
        expect_state(&result, "success", "era rtt 2025-11-25")?;
        out.rtt.baseline.push_ms(took);
        let params = json!({"name": "execute", "arguments": {"command": "true"}, "_meta": meta});
        let (took, result) = server.call("tools/call", params, CALL_TIMEOUT)?;
        if result["resultType"] != "complete" {
            return Err(Error(format!(
                "execute 2026-07-28: no resultType in {result}"
            )));
        }
        expect_state(
            &client::tool_json(&result, "execute")?,
            "success",
            "era rtt 2026-07-28",
        )?;
        out.rtt.server.push_ms(took);
    }
    Ok(out)
}
