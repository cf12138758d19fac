//! The mcp-exec benchmark (issue 5): drives the **release static binary** over
//! real pipes as an MCP client, measures each figure together with the
//! machine's own baseline in the same run, prints a markdown table and writes
//! the same figures as JSON.
//!
//! ```text
//! RUSTFLAGS='-C target-feature=+crt-static -C relocation-model=static' cargo build --release --target x86_64-unknown-linux-gnu
//! cargo run --release -p bench                 # full run (~3 min)
//! cargo run --release -p bench -- --smoke      # a few iterations: the harness works
//! cargo run --release -p bench -- --write-current BENCHMARKS.md --from bench/results/latest.json
//! ```
//!
//! It builds nothing itself: the binary under test is whatever is at
//! `--binary` (default: the workspace's static release build). Timings are
//! never asserted; a smoke run fails only when a response is malformed or a
//! scenario cannot complete.
//!
//! Layout: [`client`] speaks JSON-RPC over the pipes, [`baseline`] measures
//! the machine, [`scenarios`] measures the server (one shared server; the
//! bounded-execution scenarios of issue 10 in [`bounded`] start their own),
//! [`http`] measures the Streamable HTTP transport (issue 11) over the
//! keep-alive client of [`http_client`], [`report`] compares them,
//! [`stats`] holds the statistics, [`smaps`] breaks the idle RSS down by
//! mapping, and [`sys`] holds the harness's only `unsafe` (two libc calls).
//! The robustness scenarios of issue 15: [`soak`] (many mixed jobs, RSS and
//! descriptors sampled) and [`abuse`] (a client's latency while others
//! abuse the HTTP listener). [`current`] turns a run's JSON into the
//! "Current figures" block of BENCHMARKS.md; [`compare`] measures the
//! headline figures of `--compare OTHER` interleaved with this build's.
//! [`terminal`] measures terminal jobs (issue 21): `screen`, idle PTY memory,
//! keystroke to screen, `yes` through a PTY. [`watch`] measures file watch
//! (issue 23): create → SSE event latency, a 10,000-file burst. [`peers`]
//! runs the peers a user would pick instead side by side with mcp-exec (issue 26).
//! [`frontends`] measures `execute true` over every front-end of one server
//! (stdio, both HTTP revisions, `POST /exec`, sandboxd, envd) round-robin
//! with the C spawn (issue 26).

mod abuse;
mod baseline;
mod bounded;
mod client;
mod compare;
mod current;
mod files;
mod flood;
mod frontends;
mod http;
mod http_client;
mod identity;
mod memory;
mod peers;
mod report;
mod scenarios;
mod smaps;
mod soak;
mod stats;
mod sys;
mod tasks;
mod terminal;
mod watch;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use report::Figure;
use scenarios::Plan;

/// A harness failure, with what was being done.
#[derive(Debug)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error(format!("JSON: {e}"))
    }
}

/// The workspace root (this crate's parent directory).
fn workspace() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

const DEFAULT_BINARY: &str = "target/x86_64-unknown-linux-gnu/release/mcp-exec";
const DEFAULT_JSON: &str = "bench/results/latest.json";
/// Smoke runs write elsewhere, so that CI never overwrites a full run's figures.
const DEFAULT_SMOKE_JSON: &str = "bench/results/smoke.json";
const BUILD: &str = "RUSTFLAGS='-C target-feature=+crt-static -C relocation-model=static' cargo build --release --target x86_64-unknown-linux-gnu";

const SCENARIOS: [&str; 39] = [
    "tasks",
    "size",
    "startup",
    "rtt",
    "rtt_spawn",
    "tools_list",
    "era",
    "throughput",
    "burst",
    "burst_blocking",
    "delivery",
    "kill",
    "idle_jobs",
    "deadline",
    "queue",
    "redaction",
    "http_rtt",
    "http_execute",
    "http_concurrency",
    "http_sessions",
    "http_files",
    "stdio_files",
    "watch",
    "session_rtt",
    "setup_rtt",
    "http_abuse",
    "listener_flood",
    "soak",
    "compare",
    "screen",
    "screen_memory",
    "keystroke",
    "pty_throughput",
    "peers",
    "frontends",
    "idle_tasks",
    "pty_memory",
    "private_memory",
    "v1_files",
];

struct Options {
    smoke: bool,
    binary: PathBuf,
    json: Option<PathBuf>,
    only: Vec<String>,
    protocol: String,
    compare: Option<PathBuf>,
    commit: Option<String>,
    compare_commit: Option<String>,
    write_current: Option<PathBuf>,
    from: Option<PathBuf>,
}

impl Options {
    fn wants(&self, scenario: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|s| s == scenario)
    }
}

fn usage() -> String {
    let root = workspace();
    let root = root.display();
    format!(
        "Usage: cargo run --release -p bench -- [--smoke] [--binary PATH] [--json PATH] [--only LIST]\n       \
         [--protocol VERSION]\n\n\
         --smoke        a few iterations of each scenario (16 MiB throughput); checks that the\n               \
         harness works, never timings\n\
         --binary PATH  the server to measure (default {root}/{DEFAULT_BINARY},\n               \
         built with: {BUILD})\n\
         --json PATH    where to write the figures (default {root}/{DEFAULT_JSON},\n               \
         with --smoke {root}/{DEFAULT_SMOKE_JSON})\n\
         --only LIST    comma-separated subset of: {}\n\
         --protocol V   MCP revision to negotiate (default {}; 2024-11-05 = results\n               \
         without structuredContent, as the Go reference answers)\n\
         --compare PATH another build (e.g. the one before a change): its headline figures (size,\n               \
         idle and peak RSS, stdio and HTTP rtt, blocking burst) are measured\n               \
         interleaved with this one's (scenario `compare`, figures ab_*), and\n               \
         its direct `execute true` setup_rtt interleaves with this one's\n\
         --commit HASH  the commit the binary was built from, recorded in the JSON (default: the\n               \
         workspace's HEAD when --binary is the default build, else \"unknown\")\n\
         --compare-commit HASH  the same for --compare\n\n\
         --write-current FILE [--from JSON]\n               \
         measure nothing: rewrite the block between {} and {}\n               \
         of FILE (BENCHMARKS.md) from a run's JSON (default {root}/{DEFAULT_JSON})\n",
        SCENARIOS.join(","),
        client::DEFAULT_PROTOCOL,
        current::BEGIN,
        current::END,
    )
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut o = Options {
        smoke: false,
        binary: workspace().join(DEFAULT_BINARY),
        json: None,
        only: Vec::new(),
        protocol: client::DEFAULT_PROTOCOL.to_owned(),
        compare: None,
        commit: None,
        compare_commit: None,
        write_current: None,
        from: None,
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--smoke" => o.smoke = true,
            "--binary" => o.binary = PathBuf::from(value("--binary")?),
            "--json" => o.json = Some(PathBuf::from(value("--json")?)),
            "--protocol" => o.protocol = value("--protocol")?,
            "--compare" => o.compare = Some(PathBuf::from(value("--compare")?)),
            "--commit" => o.commit = Some(value("--commit")?),
            "--compare-commit" => o.compare_commit = Some(value("--compare-commit")?),
            "--write-current" => o.write_current = Some(PathBuf::from(value("--write-current")?)),
            "--from" => o.from = Some(PathBuf::from(value("--from")?)),
            "--only" => {
                o.only = value("--only")?.split(',').map(str::to_owned).collect();
                if let Some(bad) = o.only.iter().find(|s| !SCENARIOS.contains(&s.as_str())) {
                    return Err(format!("unknown scenario {bad:?}"));
                }
            }
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(o)
}

fn main() {
    let options = match parse_args(std::env::args().skip(1)) {
        Ok(o) => o,
        Err(msg) => {
            if msg.is_empty() {
                print!("{}", usage());
                std::process::exit(0);
            }
            eprintln!("bench: {msg}\n\n{}", usage());
            std::process::exit(2);
        }
    };
    let done = match &options.write_current {
        Some(markdown) => {
            let json = options
                .from
                .clone()
                .unwrap_or_else(|| workspace().join(DEFAULT_JSON));
            current::write(markdown, &json).map(|()| {
                eprintln!(
                    "bench: current figures of {} written to {}",
                    json.display(),
                    markdown.display()
                );
            })
        }
        None => run(&options),
    };
    if let Err(e) = done {
        eprintln!("bench: {e}");
        std::process::exit(1);
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn run(o: &Options) -> Result<(), Error> {
    if !o.binary.is_file() {
        return Err(Error(format!(
            "no server binary at {}.\nBuild the release static binary first (from the workspace root):\n    {BUILD}\nor pass --binary PATH.",
            o.binary.display()
        )));
    }
    if let Some(other) = o.compare.as_deref().filter(|p| !p.is_file()) {
        return Err(Error(format!("no --compare binary at {}", other.display())));
    }
    let binary = o.binary.canonicalize().unwrap_or_else(|_| o.binary.clone());
    let plan = if o.smoke { Plan::SMOKE } else { Plan::FULL };
    let load_start = scenarios::loadavg();
    eprintln!(
        "bench: {} run of {} (load average {})",
        if o.smoke { "smoke" } else { "full" },
        binary.display(),
        load_start.map_or("?".into(), |l| format!("{l:.2}"))
    );

    let mut figures = Vec::new();
    let mut notes = Map::new();

    if o.wants("size") {
        let s = scenarios::size(&binary)?;
        let bytes = s.bytes;
        figures.push(Figure::value(
            "size",
            format!(
                "size, {} {} binary ({bytes} B)",
                if s.stripped { "stripped" } else { "UNSTRIPPED" },
                if s.linked_static { "static" } else { "DYNAMIC" }
            ),
            "MiB",
            bytes as f64 / f64::from(1 << 20),
            Some(("≤ 2 MiB", 2.0)),
        ));
    }
    if o.wants("startup") {
        eprintln!("bench: startup ({} fresh servers)", plan.startup);
        let s = scenarios::startup(&binary, plan.startup, &o.protocol)?;
        figures.push(
            Figure::latency_vs(
                "startup",
                "startup: spawn → initialize response",
                &s.server,
                &s.baseline,
                "spawn → exit of the same static binary with --version",
            )
            .with_target("≤ 1 ms median", 1.0),
        );
    }

    let mut server = client::Server::spawn(&binary)?;
    server.initialize(&o.protocol, Duration::from_secs(30))?;
    std::thread::sleep(Duration::from_millis(50));
    let idle_init = server.memory()?;
    let private_init = memory::split_of(server.pid())?;

    if o.wants("rtt") {
        eprintln!("bench: rtt ({} sequential execute of `true`)", plan.rtt);
        let s = scenarios::rtt(&mut server, plan.rtt)?;
        figures.push(
            Figure::latency_vs(
                "rtt",
                "rtt: blocking execute of `true`",
                &s.server,
                &s.baseline,
                "spawn+wait of sh -c true (Rust loop)",
            )
            .with_ratio_targets("median ≤ 1.3×, p99 ≤ 3× baseline", 1.3, 3.0),
        );
    }
    if o.wants("session_rtt") {
        eprintln!(
            "bench: session_rtt ({} × execute `true` without and with a shell session, interleaved)",
            plan.rtt
        );
        let mut part_two = client::Server::spawn(&binary)?;
        part_two.initialize(bounded::part_two(&o.protocol), Duration::from_secs(30))?;
        let s = scenarios::session_rtt(&mut part_two, plan.rtt)?;
        figures.push(
            Figure::latency_vs(
                "session_rtt",
                "session rtt: blocking execute of `true` in a shell session",
                &s.server,
                &s.baseline,
                "the same execute without a session (same server, interleaved)",
            )
            .with_ratio_target("median ≤ 1.2× without a session", 1.2),
        );
    }
    if o.wants("rtt_spawn") {
        eprintln!(
            "bench: rtt vs posix_spawn ({} rounds of {n} spawns, {n} piped spawns, {n} ping+execute, {n} piped spawns, {n} spawns)",
            plan.spawn_rounds,
            n = plan.spawn_batch
        );
        let s = scenarios::rtt_spawn(&mut server, plan.spawn_rounds, plan.spawn_batch)?;
        let ping = s.ping.median();
        figures.push(
            Figure::latency_vs(
                "rtt_spawn_net",
                "rtt: execute `true` − median ping rtt",
                &s.execute_net(),
                &s.baseline,
                "posix_spawn+waitpid of /bin/sh -c true (libc, interleaved)",
            )
            .with_ratio_target("median ≤ 1.3× posix_spawn", 1.3),
        );
        figures.push(Figure::latency_vs(
            "rtt_spawn_piped",
            "  the same spawn with the server's pipes and epoll/pidfd reaping (libc, one thread)",
            &s.piped,
            &s.baseline,
            "posix_spawn+waitpid",
        ));
        figures.push(Figure::latency_vs(
            "rtt_spawn_vs_piped",
            "  execute `true` − median ping rtt, against that piped spawn",
            &s.execute_net(),
            &s.piped,
            "piped spawn (same rounds)",
        ));
        figures.push(Figure::latency(
            "rtt_spawn_execute",
            "  execute `true` rtt, whole (same rounds)",
            &s.execute,
            None,
        ));
        figures.push(Figure::latency(
            "rtt_spawn_ping",
            "  ping rtt (same rounds, one before each execute)",
            &s.ping,
            None,
        ));
        figures.push(Figure::latency_in(
            "rtt_spawn_cpu",
            "  server CPU per execute − median per ping (all its threads, not the job)",
            "µs",
            &s.execute_cpu.shifted(-s.ping_cpu.median()),
            None,
        ));
        notes.insert("rtt_spawn_ping_median_ms".into(), json!(ping));
        notes.insert(
            "rtt_spawn_ping_cpu_median_us".into(),
            json!(s.ping_cpu.median()),
        );
    }
    if o.wants("tools_list") {
        eprintln!(
            "bench: tools/list server time ({} × ping + tools/list)",
            plan.list
        );
        let l = scenarios::tools_list(&mut server, plan.list)?;
        figures.push(Figure::latency_in(
            "tools_list",
            format!(
                "tools/list server time: rtt − median ping rtt ({} B result)",
                l.bytes
            ),
            "µs",
            &l.server_time(),
            Some(("≤ 20 µs", 20.0)),
        ));
        figures.push(Figure::latency_in(
            "tools_list_cpu",
            "  server CPU per tools/list − median per ping",
            "µs",
            &l.list_cpu.shifted(-l.ping_cpu.median()),
            None,
        ));
        notes.insert("tools_list_rtt_median_us".into(), json!(l.list.median()));
        notes.insert(
            "tools_list_ping_cpu_median_us".into(),
            json!(l.ping_cpu.median()),
        );
        notes.insert("tools_list_ping_median_us".into(), json!(l.ping.median()));
    }
    if o.wants("screen") {
        eprintln!(
            "bench: screen server time ({} × ping + screen at 80×24 and 200×60)",
            plan.screen_calls
        );
        for (t, (_, _, goal)) in terminal::screen_time(&mut server, plan.screen_calls)?
            .iter()
            .zip(terminal::SIZES)
        {
            let (cols, rows) = t.size;
            let (key, target) = if cols == 80 {
                ("screen_80x24", "≤ 20 µs")
            } else {
                ("screen_200x60", "≤ 100 µs")
            };
            figures.push(Figure::latency_in(
                key,
                format!(
                    "screen server time at {cols}×{rows}, full: rtt − median ping rtt ({} B result)",
                    t.bytes
                ),
                "µs",
                &t.server_time(),
                Some((target, goal)),
            ));
        }
    }
    if o.wants("screen_memory") {
        for width in [79, 8] {
            eprintln!(
                "bench: screen memory ({} idle PTY jobs, 1,100 lines of {width} characters each)",
                plan.screen_jobs
            );
            let m = terminal::idle_memory(&mut server, plan.screen_jobs, width)?;
            let (anon, file, rss) = m.per_job_kib;
            figures.push(Figure::value(
                if width == 79 {
                    "screen_idle_rss_per_job"
                } else {
                    "screen_idle_rss_per_job_short"
                },
                format!(
                    "idle PTY job, 80×24, 1,000 lines of scrollback of {} characters ({} kept): \
                     server RSS growth per job (anon {anon:.1} + file {file:.1}; {} jobs)",
                    m.width, m.scrollback_lines, m.jobs
                ),
                "KiB",
                rss,
                Some(("≤ 256 KiB", 256.0)),
            ));
        }
    }
    if o.wants("keystroke") {
        eprintln!(
            "bench: keystroke to screen ({} × input of one character to cat, screen until shown)",
            plan.keystrokes
        );
        let k = terminal::keystroke(&mut server, plan.keystrokes)?;
        figures.push(
            Figure::latency_in(
                "keystroke_server",
                format!(
                    "keystroke to screen, in the server: input → screen showing it, less one \
                     median ping rtt per call ({:.1} screen calls per key)",
                    k.polls
                ),
                "ms",
                &k.server,
                Some(("p50 ≤ 2 ms, p99 ≤ 10 ms", 2.0)),
            )
            .with_p99_max(10.0),
        );
        figures.push(
            Figure::latency_vs(
                "keystroke_mcp",
                "keystroke to screen over MCP (stdio): input → the screen call that shows it",
                &k.total,
                &k.ping,
                "ping rtt (stdio, interleaved)",
            )
            .with_offset_target("≤ stdio rtt + 2 ms", 2.0),
        );
    }
    if o.wants("pty_throughput") {
        let size_mib = plan.pty_bytes >> 20;
        eprintln!(
            "bench: pty throughput ({} × {size_mib} MiB of `yes` through a PTY)",
            plan.pty_runs
        );
        let t = terminal::pty_throughput(&mut server, plan.pty_runs, plan.pty_bytes)?;
        let mib_through = t.bytes as f64 / f64::from(1 << 20);
        let rate = |wall: &stats::Samples| {
            let mut r = stats::Samples::default();
            for ms in wall.raw() {
                r.push(mib_through / (ms / 1e3));
            }
            r
        };
        figures.push(Figure::rate_vs(
            "pty_throughput",
            format!("pty throughput: blocking execute {{tty}} of `yes | head` ({mib_through:.0} MiB through the terminal)"),
            "MiB/s",
            &rate(&t.server_ms),
            &rate(&t.bare_ms),
            "a bare PTY reader of the same command",
            ("≥ 0.5× bare PTY reader", 0.5),
        ));
        figures.push(Figure::value(
            "pty_peak_rss",
            format!("  peak RSS during the {size_mib} MiB PTY runs"),
            "MiB",
            mib(t.peak_kib),
            Some(("≤ 16 MiB", 16.0)),
        ));
    }
    if o.wants("era") {
        eprintln!(
            "bench: dual era ({} × ping + server/discover + ping + 2026-07-28 tools/list; {} × execute `true` in 2025-11-25 and 2026-07-28, interleaved)",
            plan.list, plan.rtt
        );
        let mut dual = client::Server::spawn(&binary)?;
        dual.initialize("2025-11-25", Duration::from_secs(30))?;
        let e = scenarios::era(&mut dual, plan.list, plan.rtt)?;
        let ping = e.ping.median();
        figures.push(Figure::latency_in(
            "era_discover",
            "server/discover (2026-07-28) server time: rtt − median ping rtt",
            "µs",
            &e.discover.shifted(-ping),
            Some(("≤ 20 µs", 20.0)),
        ));
        figures.push(Figure::latency_in(
            "era_tools_list",
            format!(
                "tools/list (2026-07-28) server time: rtt − median ping rtt ({} B result)",
                e.list_bytes
            ),
            "µs",
            &e.list.shifted(-ping),
            Some(("≤ 20 µs", 20.0)),
        ));
        figures.push(
            Figure::latency_vs(
                "era_rtt",
                "rtt: blocking execute of `true` as a 2026-07-28 request (per-request _meta)",
                &e.rtt.server,
                &e.rtt.baseline,
                "the same call in the process's 2025-11-25 session (interleaved)",
            )
            .with_ratio_target("median ≤ 1.05× 2025-11-25 (no slower, within noise)", 1.05),
        );
        notes.insert("era_ping_median_us".into(), json!(ping));
        dual.shutdown(Duration::from_secs(30))?;
    }
    if o.wants("throughput") {
        let size_mib = plan.throughput_bytes >> 20;
        eprintln!(
            "bench: throughput ({} × {size_mib} MiB)",
            plan.throughput_runs
        );
        let t = scenarios::throughput(&mut server, plan.throughput_runs, plan.throughput_bytes)?;
        figures.push(Figure::latency_vs(
            "throughput_wall",
            format!("throughput: execute of head -c {size_mib} MiB, wall time"),
            &t.wall.server,
            &t.wall.baseline,
            "head | cat >/dev/null",
        ));
        let rate = |wall: &stats::Samples| {
            let mut r = stats::Samples::default();
            for ms in wall.raw() {
                r.push(size_mib as f64 / (ms / 1e3));
            }
            r
        };
        figures.push(Figure::rate_vs(
            "throughput",
            "throughput",
            "MiB/s",
            &rate(&t.wall.server),
            &rate(&t.wall.baseline),
            "raw pipe",
            ("≥ 0.5× raw pipe", 0.5),
        ));
        figures.push(Figure::value(
            "peak_rss",
            format!("peak RSS during the {size_mib} MiB runs (1 MiB window)"),
            "MiB",
            mib(t.peak_kib),
            Some(("≤ 12 MiB", 12.0)),
        ));
        notes.insert("peak_rss_was_reset".into(), json!(t.peak_was_reset));
    }
    if o.wants("burst") {
        eprintln!(
            "bench: burst ({} × {} nowait jobs, then wait)",
            plan.burst_runs, plan.burst_jobs
        );
        let s = scenarios::burst(&mut server, plan.burst_jobs, plan.burst_runs)?;
        figures.push(Figure::rate_vs(
            "burst",
            format!("burst: {} nowait `true` + wait", plan.burst_jobs),
            "jobs/s",
            &s.rate.server,
            &s.rate.baseline,
            "same spawns+waits (Rust loop)",
            ("≥ 0.8× baseline", 0.8),
        ));
        notes.insert("burst_submit_ms_median".into(), json!(s.submit_ms.median()));
    }
    if o.wants("burst_blocking") {
        let n = plan.blocking_burst_jobs;
        let sleep = scenarios::BLOCKING_SLEEP;
        eprintln!(
            "bench: burst_blocking ({} × {n} blocking execute `{sleep}` written at once, and {n} parallel posix_spawn)",
            plan.blocking_burst_runs
        );
        let s = scenarios::burst_blocking(&mut server, n, plan.blocking_burst_runs)?;
        figures.push(
            Figure::latency_vs(
                "burst_blocking",
                format!(
                    "burst: {n} blocking execute `{sleep}` written at once on one stdio session, until all answered"
                ),
                &s.server,
                &s.baseline,
                "as many posix_spawn+waitpid of the same sh -c at once (libc, a thread each)",
            )
            .with_ratio_target("≤ 1.25× baseline (≥ 0.8× its speed)", 1.25),
        );
    }
    if o.wants("delivery") {
        eprintln!("bench: delivery latency ({} runs)", plan.delivery);
        let d = scenarios::delivery(&mut server, plan.delivery)?;
        figures.push(Figure::latency(
            "delivery",
            "delivery latency: execute with a streaming orphan",
            &d.latency,
            Some(("≤ 5 ms", 5.0)),
        ));
        notes.insert("orphans_left_after_delivery".into(), json!(d.orphans_left));
    }
    if o.wants("kill") {
        eprintln!("bench: kill latency ({} runs)", plan.kill);
        let s = scenarios::kill(&mut server, plan.kill)?;
        figures.push(Figure::latency(
            "kill",
            "kill latency: TERM of `sleep 60`",
            &s,
            Some(("≤ 5 ms", 5.0)),
        ));
    }

    std::thread::sleep(Duration::from_millis(200));
    let idle_end = server.memory()?;
    let split = |m: &client::Memory| {
        format!(
            "anon {:.2} + file {:.2} MiB",
            mib(m.anon_kib),
            mib(m.file_kib)
        )
    };
    figures.push(Figure::value(
        "idle_rss_init",
        format!("idle RSS after initialize ({})", split(&idle_init)),
        "MiB",
        mib(idle_init.rss_kib),
        Some(("≤ 2 MiB", 2.0)),
    ));
    figures.push(Figure::value(
        "idle_rss_end",
        format!("idle RSS after all scenarios ({})", split(&idle_end)),
        "MiB",
        mib(idle_end.rss_kib),
        Some(("≤ 2 MiB", 2.0)),
    ));
    let idle_maps = smaps::of(server.pid())?;
    if o.wants("private_memory") {
        private_memory_figures(&mut server, &private_init, &mut figures, &mut notes)?;
    }
    notes.insert("idle_end_smaps".into(), smaps::json(&idle_maps));
    for (key, m) in [("idle_init", &idle_init), ("idle_end", &idle_end)] {
        notes.insert(
            format!("{key}_kib"),
            json!({"rss": m.rss_kib, "anon": m.anon_kib, "file": m.file_kib}),
        );
    }
    server.shutdown(Duration::from_secs(10))?;
    http_figures(o, &plan, &binary, &mut figures, &mut notes)?;
    files::figures(o, &binary, &mut figures, &mut notes)?;
    watch::figures(o, &binary, &mut figures, &mut notes)?;
    frontends::figures(o, plan.frontends, &binary, &mut figures, &mut notes)?;
    bounded_figures(o, &plan, &binary, &mut figures, &mut notes)?;
    identity_figures(o, &plan, &binary, &mut figures)?;
    if let Some(other) = o.compare.as_deref().filter(|_| o.wants("compare")) {
        eprintln!(
            "bench: compare (size, memory, {} × stdio rtt, {} × {} blocking burst, {} × HTTP rtt; this build and {}, interleaved)",
            plan.rtt,
            plan.blocking_burst_runs,
            plan.blocking_burst_jobs,
            plan.http_execute,
            other.display()
        );
        compare::figures(
            &binary,
            other,
            bounded::part_two(&o.protocol),
            &plan,
            &mut figures,
        )?;
    }
    if o.wants("tasks") {
        tasks_figures(o.smoke, &binary, &mut figures, &mut notes)?;
    }
    memory::figures(o, &plan, &binary, &mut figures, &mut notes)?;
    let curve = robustness_figures(o, &plan, &binary, &mut figures, &mut notes)?;
    if o.wants("peers") {
        peers::run(
            &binary,
            plan.peers_startup,
            plan.peers_rtt,
            &mut figures,
            &mut notes,
        )?;
    }
    let load_end = scenarios::loadavg();

    let table = report::markdown(&figures);
    println!("{table}");
    if let Some(curve) = curve {
        println!("soak: the server sampled every few jobs\n\n{curve}");
    }
    println!(
        "idle RSS after all scenarios by mapping (KiB resident, of KiB mapped): {}\n",
        smaps::summary(&idle_maps)
    );
    let load_idle = notes
        .get("loadavg_before_idle_jobs")
        .and_then(Value::as_f64)
        .map_or(String::new(), |l| format!(", {l:.2} before idle_jobs"));
    println!(
        "load average (1 min): {} at start{load_idle}, {} at end; {} CPUs",
        load_start.map_or("?".into(), |l| format!("{l:.2}")),
        load_end.map_or("?".into(), |l| format!("{l:.2}")),
        cpus()
    );

    let mut context = Map::new();
    context.insert("mode".into(), json!(if o.smoke { "smoke" } else { "full" }));
    context.insert("commit".into(), json!(commit_of(o)));
    if let Some(other) = &o.compare {
        context.insert(
            "compare".into(),
            json!({"binary": other.display().to_string(),
                   "commit": o.compare_commit.as_deref().unwrap_or("unknown")}),
        );
    }
    context.insert("binary".into(), json!(binary.display().to_string()));
    context.insert("protocol".into(), json!(o.protocol));
    context.insert(
        "unix_time".into(),
        json!(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        ),
    );
    context.insert(
        "machine".into(),
        json!({
            "cpus": cpus(),
            "kernel": scenarios::kernel(),
            "loadavg_start": load_start,
            "loadavg_end": load_end,
        }),
    );
    context.insert("plan".into(), json!(format!("{plan:?}")));
    context.insert("notes".into(), Value::Object(notes));
    let doc = report::json(context, &figures);
    let json_path = o.json.clone().unwrap_or_else(|| {
        workspace().join(if o.smoke {
            DEFAULT_SMOKE_JSON
        } else {
            DEFAULT_JSON
        })
    });
    if let Some(dir) = json_path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error(format!("creating {}: {e}", dir.display())))?;
    }
    let text = serde_json::to_string_pretty(&doc)?;
    std::fs::write(&json_path, text + "\n")
        .map_err(|e| Error(format!("writing {}: {e}", json_path.display())))?;
    eprintln!("bench: figures written to {}", json_path.display());
    if o.smoke {
        eprintln!("bench: smoke run OK (every response well-formed; timings are not asserted)");
    }
    Ok(())
}

/// The commit the measured binary was built from: `--commit`, else the
/// workspace's short HEAD (`+dirty` with uncommitted changes) when the
/// binary is the workspace's default build, else `unknown`.
fn commit_of(o: &Options) -> String {
    if let Some(c) = &o.commit {
        return c.clone();
    }
    if o.binary != workspace().join(DEFAULT_BINARY) {
        return "unknown".into();
    }
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(workspace())
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(head) if !head.is_empty() => {
            let dirty = git(&["status", "--porcelain"]).is_some_and(|s| !s.is_empty());
            if dirty { format!("{head}+dirty") } else { head }
        }
        _ => "unknown".into(),
    }
}

const NO_HTTP: &str = "the server has no HTTP transport";

/// Reports a scenario that needs the HTTP transport as skipped.
fn http_skipped(
    key: &'static str,
    label: &str,
    unit: &'static str,
    target: &'static str,
    figures: &mut Vec<Figure>,
    notes: &mut Map<String, Value>,
) {
    eprintln!("bench: {key} skipped: {NO_HTTP}");
    figures.push(Figure::skipped(
        key,
        format!("{label} (skipped: {NO_HTTP})"),
        unit,
        target,
    ));
    notes.insert(format!("{key}_skipped"), json!(NO_HTTP));
}

/// The Streamable HTTP scenarios of issue 11, each with a server of its own
/// (`--http`). HTTP needs revision 2025-03-26 or later, so they negotiate
/// 2025-06-18 when `--protocol` is older. Against a server built without
/// the transport they are reported skipped.
fn http_figures(
    o: &Options,
    plan: &Plan,
    binary: &Path,
    figures: &mut Vec<Figure>,
    notes: &mut Map<String, Value>,
) -> Result<(), Error> {
    let protocol = bounded::part_two(&o.protocol);
    if o.wants("http_rtt") {
        eprintln!(
            "bench: http_rtt ({} × blocking execute `true` over HTTP keep-alive and over stdio, interleaved)",
            plan.http_rtt
        );
        const LABEL: &str =
            "http rtt: blocking execute of `true`, one session on one keep-alive connection";
        match http::rtt(binary, protocol, plan.http_rtt)? {
            None => http_skipped("http_rtt", LABEL, "ms", "≤ 1.5× stdio", figures, notes),
            Some(s) => {
                figures.push(
                    Figure::latency_vs(
                        "http_rtt",
                        LABEL,
                        &s.server,
                        &s.baseline,
                        "the same call over stdio, same server, interleaved",
                    )
                    .with_ratio_target("median ≤ 1.5× stdio", 1.5),
                );
                figures.push(Figure::latency(
                    "http_rtt_stdio",
                    "  the same call over stdio (same server, interleaved)",
                    &s.baseline,
                    None,
                ));
            }
        }
    }
    if o.wants("http_execute") {
        eprintln!(
            "bench: http_execute ({} × blocking execute `true` over HTTP with a token, sequential)",
            plan.http_execute
        );
        const LABEL: &str = "http rtt with a bearer token: blocking execute `true`, sequential, one keep-alive session";
        match http::execute(binary, protocol, plan.http_execute)? {
            None => http_skipped("http_execute", LABEL, "ms", "—", figures, notes),
            Some(s) => {
                const WHAT: &str =
                    "spawn+wait of sh -c true (Rust loop, interleaved), as for the stdio rtt";
                figures.push(Figure::latency_vs(
                    "http_execute",
                    LABEL,
                    &s.json,
                    &s.baseline,
                    WHAT,
                ));
                figures.push(Figure::latency_vs(
                    "http_execute_sse",
                    "  the same call with a progressToken: answered as an event stream (interleaved)",
                    &s.sse,
                    &s.baseline,
                    WHAT,
                ));
                notes.insert(
                    "http_execute_tail".into(),
                    json!({
                        "stall_threshold_ms": http::STALL_MS,
                        "json": http::tail(&s.json),
                        "sse": http::tail(&s.sse),
                        "baseline": http::tail(&s.baseline),
                    }),
                );
            }
        }
    }
    if o.wants("http_concurrency") {
        let (clients, calls) = (plan.http_clients, plan.http_calls);
        eprintln!(
            "bench: http_concurrency ({} × {clients} HTTP clients × {calls} execute `true`, and {clients} posix_spawn loops)",
            plan.http_runs
        );
        let label = format!(
            "http concurrency: {clients} clients (threads, own connection and session) × {calls} blocking execute `true`"
        );
        match http::concurrency(binary, protocol, clients, calls, plan.http_runs)? {
            None => http_skipped(
                "http_concurrency",
                &label,
                "calls/s",
                "≥ 0.8× baseline",
                figures,
                notes,
            ),
            Some(c) => {
                figures.push(Figure::rate_vs(
                    "http_concurrency",
                    label,
                    "calls/s",
                    &c.rate.server,
                    &c.rate.baseline,
                    "as many threads looping posix_spawn+waitpid of sh -c true (libc)",
                    ("≥ 0.8× baseline", 0.8),
                ));
                figures.push(Figure::latency_vs(
                    "http_concurrency_latency",
                    "  rtt of each call under that load",
                    &c.latency,
                    &c.spawn_latency,
                    "each posix_spawn+waitpid in those loops",
                ));
                figures.push(Figure::latency_in(
                    "http_concurrency_cpu",
                    "  server CPU per call (all its threads, not the jobs)",
                    "µs",
                    &c.cpu_per_call,
                    None,
                ));
                figures.push(Figure::latency_in(
                    "http_concurrency_client_cpu",
                    "  the harness's own CPU per call (its client threads share the cores)",
                    "µs",
                    &c.client_cpu_per_call,
                    None,
                ));
            }
        }
    }
    if o.wants("http_sessions") {
        let n = plan.http_sessions;
        eprintln!("bench: http_sessions ({n} sessions on {n} keep-alive connections held at once)");
        let label = format!("memory per idle HTTP session (own connection), RSS growth / {n}");
        match http::sessions(binary, protocol, n)? {
            None => http_skipped("http_sessions", &label, "KiB", "≤ 16 KiB", figures, notes),
            Some(s) => {
                figures.push(Figure::value(
                    "http_sessions",
                    format!(
                        "{label} (anon {:.2} + file {:.2}; {:.2} → {:.2} MiB)",
                        s.per_session(|m| m.anon_kib),
                        s.per_session(|m| m.file_kib),
                        mib(s.before.rss_kib),
                        mib(s.after.rss_kib)
                    ),
                    "KiB",
                    s.per_session(|m| m.rss_kib),
                    Some(("≤ 16 KiB", 16.0)),
                ));
                figures.push(Figure::value_at_least(
                    "http_sessions_held",
                    format!(
                        "  of them still held at the end, answering ping (RLIMIT_NOFILE {}:{})",
                        s.nofile.0, s.nofile.1
                    ),
                    "sessions",
                    s.answered as f64,
                    ("all held", s.sessions as f64),
                ));
                figures.push(Figure::value(
                    "http_sessions_open",
                    format!("  opening them: connect + initialize + initialized, {n} in turn"),
                    "sessions/s",
                    n as f64 / s.open.as_secs_f64(),
                    None,
                ));
            }
        }
    }
    Ok(())
}

/// The scenarios of issue 10, each with servers of its own; run after the
/// shared server has been measured and shut down, the idle jobs last.
/// `deadline` and `queue` need Part II inputs, so they negotiate 2025-06-18
/// when `--protocol` is older.
fn bounded_figures(
    o: &Options,
    plan: &Plan,
    binary: &Path,
    figures: &mut Vec<Figure>,
    notes: &mut Map<String, Value>,
) -> Result<(), Error> {
    if o.wants("deadline") {
        eprintln!(
            "bench: deadline ({} × execute `sleep 5` with timeout {} s)",
            plan.deadline_runs, plan.deadline_timeout
        );
        let d = bounded::deadline(
            binary,
            bounded::part_two(&o.protocol),
            plan.deadline_runs,
            plan.deadline_timeout,
        )?;
        let t = plan.deadline_timeout;
        figures.push(Figure::latency(
            "deadline_server",
            format!("deadline: `timeout: {t}` on `sleep 5`, duration_ms − {t} s (server's clock)"),
            &d.server,
            Some(("≤ 5 ms", 5.0)),
        ));
        figures.push(Figure::latency(
            "deadline_client",
            format!("  request → result − {t} s (client's clock)"),
            &d.client,
            Some(("≤ 5 ms", 5.0)),
        ));
    }
    if o.wants("queue") {
        let slots = bounded::QUEUE_SLOTS;
        eprintln!(
            "bench: admission queue ({} × {} nowait `echo $$` with MCP_EXEC_MAX_RUNNING={slots}, then wait)",
            plan.queue_runs, plan.queue_jobs
        );
        let q = bounded::queue(
            binary,
            bounded::part_two(&o.protocol),
            plan.queue_jobs,
            plan.queue_runs,
        )?;
        figures.push(Figure::rate_vs(
            "queue",
            format!(
                "queue: {} nowait jobs through {slots} slots, submit → all collected",
                plan.queue_jobs
            ),
            "jobs/s",
            &q.rate.server,
            &q.rate.baseline,
            "4 parallel posix_spawn+waitpid loops of sh -c true (libc)",
            ("≥ 0.8× baseline", 0.8),
        ));
        figures.push(Figure::latency_in(
            "queue_cpu",
            "  server CPU per job (all its threads, not the jobs)",
            "µs",
            &q.cpu_per_job,
            None,
        ));
        notes.insert("queue_submit_ms_median".into(), json!(q.submit_ms.median()));
        figures.push(Figure::value(
            "queue_lost",
            format!(
                "  jobs lost (of {}; {} were answered queued)",
                q.jobs, q.queued
            ),
            "jobs",
            q.lost as f64,
            Some(("0", 0.0)),
        ));
        figures.push(Figure::value(
            "queue_out_of_order",
            format!(
                "  jobs started before an earlier one (by pid; by started_at: {})",
                q.started_at_out_of_order
            ),
            "jobs",
            q.out_of_order as f64,
            Some(("0 (FIFO)", 0.0)),
        ));
    }
    if o.wants("redaction") {
        eprintln!(
            "bench: redaction ({} × output of a full 1 MiB window, redacting and plain servers)",
            plan.redaction_reads
        );
        match bounded::redaction(binary, &o.protocol, plan.redaction_reads)? {
            bounded::Redaction::Skipped(why) => {
                eprintln!("bench: redaction skipped: {why}");
                figures.push(Figure::skipped(
                    "redaction",
                    format!("redaction: output of a full 1 MiB window, redacted − plain rtt (skipped: {why})"),
                    "ms",
                    "≤ 5 ms",
                ));
                notes.insert("redaction_skipped".into(), json!(why));
            }
            bounded::Redaction::Measured(r) => {
                figures.push(Figure::latency(
                    "redaction",
                    format!(
                        "redaction: output of a full 1 MiB window, redacted − plain rtt \
                         ({} of {} secrets masked)",
                        r.masked, r.secrets
                    ),
                    &r.diff,
                    Some(("≤ 5 ms", 5.0)),
                ));
                figures.push(Figure::latency(
                    "redaction_read",
                    "  output rtt, MCP_EXEC_REDACT=builtin",
                    &r.redacted,
                    None,
                ));
                figures.push(Figure::latency(
                    "redaction_plain_read",
                    "  output rtt, no redaction",
                    &r.plain,
                    None,
                ));
                figures.push(Figure::latency_in(
                    "redaction_cpu",
                    "  server CPU per read, redacting − plain",
                    "µs",
                    &r.cpu_diff,
                    None,
                ));
            }
        }
    }
    // Last: its 20 000 processes raise the load average for a minute.
    if o.wants("idle_jobs") {
        notes.insert(
            "loadavg_before_idle_jobs".into(),
            json!(scenarios::loadavg()),
        );
        eprintln!(
            "bench: idle jobs ({} × nowait `sleep 600` in one server, {} list_jobs, then stdin EOF)",
            plan.idle_jobs, plan.idle_list
        );
        let s = bounded::idle_jobs(binary, &o.protocol, plan.idle_jobs, plan.idle_list)?;
        let n = s.jobs;
        figures.push(Figure::value_at_least(
            "idle_jobs_started",
            format!(
                "idle jobs: `sleep 600` nowait (stdin closed) answered running, of {n}{} \
                 ({} sleep processes, {} with the marker in all; RLIMIT_NOFILE {}:{})",
                if n < s.asked {
                    format!(" (asked {}; the descriptor limit holds {n})", s.asked)
                } else {
                    String::new()
                },
                s.sleeps,
                s.processes,
                s.nofile.0,
                s.nofile.1
            ),
            "jobs",
            s.started as f64,
            ("all started", n as f64),
        ));
        figures.push(Figure::value(
            "idle_jobs_rss_per_job",
            format!(
                "  server RSS growth per job (anon {:.2} + file {:.2}; {:.2} → {:.2} MiB)",
                s.per_job(|m| m.anon_kib),
                s.per_job(|m| m.file_kib),
                mib(s.before.rss_kib),
                mib(s.after.rss_kib)
            ),
            "KiB",
            s.per_job(|m| m.rss_kib),
            Some(("≤ 4 KiB", 4.0)),
        ));
        figures.push(Figure::latency(
            "idle_jobs_list",
            format!("  list_jobs rtt with {n} jobs ({} B result)", s.list_bytes),
            &s.list,
            Some(("≤ 20 ms", 20.0)),
        ));
        figures.push(Figure::value(
            "idle_jobs_start_rate",
            format!(
                "  starting them: {n} pipelined execute in {:.2} s",
                s.start.as_secs_f64()
            ),
            "jobs/s",
            n as f64 / s.start.as_secs_f64(),
            None,
        ));
        figures.push(Figure::value(
            "idle_jobs_shutdown",
            format!("  shutdown by stdin EOF with {n} running jobs → exit"),
            "ms",
            s.shutdown.as_secs_f64() * 1e3,
            None,
        ));
        figures.push(Figure::value(
            "idle_jobs_left",
            "  job processes left after the shutdown (zombies included)",
            "left",
            s.left as f64,
            Some(("0 left", 0.0)),
        ));
    }
    Ok(())
}

/// `listener_flood`: token holders on every listener while each listener in
/// turn is flooded with silent connections (docs/security.md, "What every
/// listener guarantees"), and the server's descriptors at their peak.
fn flood_figures(
    binary: &Path,
    plan: &Plan,
    figures: &mut Vec<Figure>,
    notes: &mut Map<String, Value>,
) -> Result<(), Error> {
    eprintln!(
        "bench: listener_flood ({} token holders × {} requests on fresh connections, while each listener in turn holds 400 silent connections; descriptor limit {})",
        flood::CLIENTS,
        plan.flood_requests,
        flood::NOFILE
    );
    let key = |listener: &str| match listener {
        "mcp" => "flood_mcp",
        "metrics" => "flood_metrics",
        "envd" => "flood_envd",
        "sandboxd-rest" => "flood_sandboxd_rest",
        _ => "flood_sandboxd_grpc",
    };
    let Some(f) = flood::floods(binary, plan.flood_requests)? else {
        http_skipped(
            "flood_mcp",
            "token holders under a listener flood",
            "ms",
            "median and p99 ≤ 1000 ms",
            figures,
            notes,
        );
        return Ok(());
    };
    if !f.failed.is_empty() {
        return Err(Error(format!(
            "listener_flood: {} requests of token holders failed, the first: {}",
            f.failed.len(),
            f.failed[0]
        )));
    }
    for one in &f.flooded {
        figures.push(
            Figure::latency_vs(
                key(one.listener),
                format!(
                    "token holders on every HTTP/1.1 listener (connect to answer) while {} is flooded ({} silent connections opened)",
                    one.listener, one.opened
                ),
                &one.latency,
                &f.baseline,
                "the same clients, no flood",
            )
            .with_target("median and p99 ≤ 1000 ms", 1000.0)
            .with_p99_max(1000.0),
        );
    }
    figures.push(Figure::value(
        "flood_peak_fds",
        format!(
            "the server's open descriptors at their peak during the floods (limit {})",
            flood::NOFILE
        ),
        "fds",
        f.peak_fds as f64,
        Some(("< the limit", (flood::NOFILE - 1) as f64)),
    ));
    notes.insert(
        "listener_flood".into(),
        json!({"clients": flood::CLIENTS, "requests_per_client": plan.flood_requests,
               "nofile": flood::NOFILE, "peak_fds": f.peak_fds}),
    );
    Ok(())
}

/// The robustness scenarios of issue 15 (`http_abuse`, `soak`); returns the
/// soak's curve as a markdown table when it ran.
fn robustness_figures(
    o: &Options,
    plan: &Plan,
    binary: &Path,
    figures: &mut Vec<Figure>,
    notes: &mut Map<String, Value>,
) -> Result<Option<String>, Error> {
    let protocol = bounded::part_two(&o.protocol);
    if o.wants("http_abuse") {
        eprintln!(
            "bench: http_abuse ({} execute `true` over HTTP, half alone, half under {} wrong tokens, slow heads, oversize bodies, garbage sessions)",
            plan.abuse_calls, plan.abuse_wrong_tokens
        );
        const LABEL: &str =
            "http under abuse: blocking execute `true`, a legitimate keep-alive client";
        match abuse::abuse(binary, protocol, plan.abuse_calls, plan.abuse_wrong_tokens)? {
            None => http_skipped("http_abuse", LABEL, "ms", "≤ 2× alone", figures, notes),
            Some(a) => {
                figures.push(
                    Figure::latency_vs(
                        "http_abuse",
                        LABEL,
                        &a.latency.server,
                        &a.latency.baseline,
                        "the same client alone (before and after)",
                    )
                    .with_ratio_target("median ≤ 2× alone", 2.0),
                );
                notes.insert(
                    "http_abuse_requests".into(),
                    json!({"wrong_tokens": a.wrong_tokens, "slow_connections": a.slow,
                           "oversize_bodies": a.oversize, "garbage_sessions": a.garbage}),
                );
            }
        }
    }
    if o.wants("listener_flood") {
        flood_figures(binary, plan, figures, notes)?;
    }
    if !o.wants("soak") {
        return Ok(None);
    }
    eprintln!(
        "bench: soak ({} mixed jobs: stdio, 64 KiB, kill, cancel, HTTP; RSS and fds sampled)",
        plan.soak_jobs
    );
    let Some(s) = soak::soak(binary, protocol, plan.soak_jobs)? else {
        http_skipped(
            "soak_rss",
            "soak: RSS growth",
            "KiB",
            "≤ 1024 KiB (flat)",
            figures,
            notes,
        );
        return Ok(None);
    };
    figures.push(Figure::value(
        "soak_rss",
        format!(
            "soak: RSS growth over {} jobs ({} killed, {} of them with KILL after their group outlived TERM; {} cancelled, {} over HTTP in {} sessions), after a {}-job warm-up",
            s.jobs,
            s.killed,
            s.term_survivors,
            s.cancelled,
            s.http,
            s.sessions,
            soak::WARMUP
        ),
        "KiB",
        s.rss_growth_kib(),
        Some(("≤ 1024 KiB (flat)", 1024.0)),
    ));
    figures.push(Figure::value(
        "soak_fds",
        "  open descriptors at the end − after the warm-up",
        "fds",
        s.fd_growth(),
        Some(("0", 0.0)),
    ));
    notes.insert(
        "soak_curve".into(),
        json!(
            s.samples
                .iter()
                .map(
                    |x| json!({"jobs": x.jobs, "secs": x.secs, "rss_kib": x.rss_kib, "fds": x.fds})
                )
                .collect::<Vec<_>>()
        ),
    );
    Ok(Some(s.markdown()))
}

/// Private against shared memory of the shared server (issue 26): after
/// `initialize`, after every stdio scenario, and after claiming the jobs it
/// still holds (its table empties: the server trims its heap then), which
/// shows how much of the private memory was free but held by malloc.
fn private_memory_figures(
    server: &mut client::Server,
    init: &memory::Split,
    figures: &mut Vec<Figure>,
    notes: &mut Map<String, Value>,
) -> Result<(), Error> {
    let end = memory::split_of(server.pid())?;
    let threads = memory::thread_names(server.pid());
    let claimed = memory::claim_all(server)?;
    std::thread::sleep(Duration::from_millis(200));
    let trimmed = memory::split_of(server.pid())?;
    figures.push(Figure::value(
        "private_memory_init",
        format!("private memory after initialize ({})", init.describe()),
        "KiB",
        init.private as f64,
        Some(("≤ 512 KiB", 512.0)),
    ));
    figures.push(Figure::value(
        "private_memory_end",
        format!(
            "private memory after all stdio scenarios ({}; threads: {threads})",
            end.describe()
        ),
        "KiB",
        end.private as f64,
        Some(("≤ 1024 KiB", 1024.0)),
    ));
    figures.push(Figure::value(
        "private_memory_claimed",
        format!(
            "  the same after claiming the {claimed} jobs it still held (table empty: the server's malloc_trim; {})",
            trimmed.describe()
        ),
        "KiB",
        trimmed.private as f64,
        None,
    ));
    notes.insert(
        "private_memory_kib".into(),
        json!({"init": init.json(), "end": end.json(), "claimed": trimmed.json(), "jobs_claimed": claimed}),
    );
    Ok(())
}

/// MCP Tasks (issue 25): `tasks/get` server time, a live task's cost above
/// its job, `tasks/cancel`'s answer and verified kill.
fn tasks_figures(
    smoke: bool,
    binary: &Path,
    figures: &mut Vec<Figure>,
    notes: &mut Map<String, Value>,
) -> Result<(), Error> {
    let (gets, live, cancels) = if smoke {
        (50, 200, 2)
    } else {
        (2000, 10_000, 20)
    };
    eprintln!(
        "bench: tasks ({gets} × ping + tasks/get; {live} live tasks vs {live} jobs; {cancels} × tasks/cancel of a TERM-ignoring group)"
    );
    let t = tasks::run(binary, gets, live, cancels)?;
    let ping = t.ping.median();
    figures.push(Figure::latency_in(
        "tasks_get",
        "tasks/get (2025-11-25) server time: rtt − median ping rtt",
        "µs",
        &t.get.shifted(-ping),
        Some(("≤ 20 µs", 20.0)),
    ));
    figures.push(Figure::value(
        "tasks_live_kib",
        format!(
            "{} live tasks: RSS per task above its job ({:.2} KiB per task with its job − {:.2} KiB per nowait job)",
            t.live, t.per_task_kib, t.per_job_kib
        ),
        "KiB",
        t.per_task_kib - t.per_job_kib,
        Some(("≤ 4 KiB", 4.0)),
    ));
    figures.push(Figure::latency(
        "tasks_cancel",
        "tasks/cancel answer (rtt)",
        &t.cancel,
        Some(("≤ 5 ms", 5.0)),
    ));
    figures.push(Figure::latency(
        "tasks_cancel_dead",
        format!(
            "  cancel → group verified dead (TERM ignored: grace {} ms, KILL), minus the grace",
            tasks::GRACE_MS
        ),
        &t.dead_after_grace,
        Some(("≤ 100 ms", 100.0)),
    ));
    notes.insert("tasks_ping_median_us".into(), json!(ping));
    Ok(())
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(0, usize::from)
}

/// The set-up path of issue 14: `user` + `limits` against the direct path,
/// and the direct path against `--compare` (main's build) in the same rounds.
fn identity_figures(
    o: &Options,
    plan: &Plan,
    binary: &Path,
    figures: &mut Vec<Figure>,
) -> Result<(), Error> {
    if !o.wants("setup_rtt") {
        return Ok(());
    }
    if !rustix::process::geteuid().is_root() {
        eprintln!("bench: setup_rtt skipped: `user` needs the server to run as root");
        figures.push(Figure::skipped(
            "setup_rtt",
            "rtt: execute `true` with user + limits",
            "ms",
            "≤ 1.5× direct",
        ));
        return Ok(());
    }
    let n = plan.spawn_batch;
    let compared = if o.compare.is_some() {
        format!(", {n} on --compare")
    } else {
        String::new()
    };
    eprintln!(
        "bench: setup_rtt ({} rounds of {n} direct, {n} with user+limits{compared})",
        plan.spawn_rounds
    );
    let compare = o.compare.as_deref();
    let s = identity::setup_rtt(
        binary,
        compare,
        bounded::part_two(&o.protocol),
        plan.spawn_rounds,
        plan.spawn_batch,
    )?;
    figures.push(
        Figure::latency_vs(
            "setup_rtt",
            "rtt: execute `true` as user nobody with all five limits",
            &s.setup,
            &s.direct,
            "execute `true`, same server, interleaved",
        )
        .with_ratio_target("median ≤ 1.5× direct", 1.5),
    );
    if compare.is_some() {
        figures.push(
            Figure::latency_vs(
                "setup_rtt_direct_vs_compare",
                "  execute `true` (direct path) against the --compare build",
                &s.direct,
                &s.compared,
                "execute `true` on --compare, same rounds",
            )
            .with_ratio_target("median ≤ 1.1× (not slower)", 1.1),
        );
    }
    Ok(())
}
