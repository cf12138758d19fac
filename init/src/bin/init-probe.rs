//! `init-probe`: runs one scenario of the init crate in a process of its own,
//! for the process-level tests in `init/tests/process.rs`.
//!
//! Signal masks, the child-subreaper flag and PID 1 are process-global, so
//! they cannot be exercised inside the test harness (whose threads exist long
//! before any test runs). This binary does what the real server does — calls
//! [`init::prepare`] first, before any thread exists, then starts a tokio
//! runtime and [`init::Boot::start`] — and runs the scenario named by its first
//! argument. It reports what it saw as `key=value` lines on stdout (one fact
//! per line; the tests parse them and do all the asserting) and exits 0 unless
//! a set-up step failed.
//!
//! Usage: `init-probe SCENARIO [ARGS…]`, or
//! `init-probe with-signal-state BLOCKED IGNORED SCENARIO [ARGS…]`, which sets
//! the signal mask to exactly `BLOCKED` and the disposition of every signal to
//! `SIG_IGN` for `IGNORED` and `SIG_DFL` for the rest (comma-separated names,
//! `-` for none), then re-executes itself with the scenario: the way to start
//! the probe "with TERM and USR1 blocked and INT ignored", exactly, whatever
//! the test harness's own signal state is (setting a disposition needs
//! `unsafe` code, which is kept here rather than in the tests).
//!
//! `init-probe orphan-maker COUNT SECONDS` is not a scenario but a job the
//! scenarios run: it starts COUNT `sleep`s and exits without waiting for them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test helper: a failed set-up step aborts the scenario loudly, and the tests check the exit status"
)]

use std::ffi::{CString, OsString};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use init::{
    Cwd, DeathWait, Escalation, Event, ExitStatus, Init, PendingExit, Pid, Program, Signal,
    SpawnSpec, Spawned, Step,
};
use tokio::sync::mpsc::UnboundedReceiver;

/// How long any single awaited exit status may take before it counts as lost.
const STATUS_TIMEOUT: Duration = Duration::from_secs(10);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("with-signal-state") {
        // Runs before `prepare`: it never returns on success (it execs).
        return with_signal_state(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("orphan-maker") {
        return orphan_maker(&args[1..]);
    }
    // The signal state this process started with (reading a file starts no
    // thread), so the tests can check it is the one they asked for.
    let start = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    // First, before any thread exists (see `init::prepare`). Scenarios named
    // `main-…` are init mode's (`prepare_forwarding`).
    let forwarding = args.first().is_some_and(|s| s.starts_with("main-"));
    let prepare = if forwarding {
        init::prepare_forwarding
    } else {
        init::prepare
    };
    let boot = match prepare() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("init-probe: prepare: {e}");
            return ExitCode::from(2);
        }
    };
    for w in &boot.warnings {
        eprintln!("init-probe: warning: {w}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("building the tokio runtime");
    runtime.block_on(async move {
        let (init, events) = boot.start().expect("starting the init layer");
        println!("pid1={}", init.is_pid1());
        println!("subreaper={}", init.is_subreaper());
        println!("start_sigblk={}", status_field(&start, "SigBlk"));
        println!("start_sigign={}", status_field(&start, "SigIgn"));
        let scenario = args.first().map(String::as_str).unwrap_or("");
        let rest = args.get(1..).unwrap_or(&[]);
        match scenario {
            "exit-codes" => exit_codes(&init).await,
            "exit-immediately" => exit_immediately(&init).await,
            "orphans" => orphans(&init).await,
            "coalesced-sigchld" => coalesced_sigchld(&init).await,
            "signal-state" => signal_state(&init).await,
            "cwd" => cwd(&init, rest).await,
            "group-kill" => group_kill(&init).await,
            "escalate-term-ignored" => escalate_term_ignored(&init).await,
            "escalate-term-enough" => escalate_term_enough(&init).await,
            "escalate-member-survives" => escalate_member_survives(&init).await,
            "escalate-already-gone" => escalate_already_gone(&init).await,
            "escalate-timeout-0" => escalate_timeout_0(&init).await,
            "escalate-dropped" => escalate_dropped(&init).await,
            "shutdown-groups" => shutdown_groups(&init).await,
            "forward" => forward(&init, events, rest).await,
            "shutdown" => shutdown(&init, events, rest).await,
            "main-own-sigpipe" => main_own_sigpipe(&init).await,
            "main-signal-state" => main_signal_state(&init).await,
            other => {
                eprintln!("init-probe: unknown scenario {other:?}");
                return ExitCode::from(2);
            }
        }
        println!("done");
        ExitCode::SUCCESS
    })
}

/// `exited:N`, `signaled:N`, `lost` (no status within the timeout) or `gone`
/// (the reaper dropped the sender).
async fn await_status(exit: PendingExit) -> String {
    match tokio::time::timeout(STATUS_TIMEOUT, exit).await {
        Ok(Ok(ExitStatus::Exited(code))) => format!("exited:{code}"),
        Ok(Ok(ExitStatus::Signaled(sig))) => format!("signaled:{}", sig.as_raw()),
        Ok(Err(_gone)) => "gone".to_owned(),
        Err(_elapsed) => "lost".to_owned(),
    }
}

/// Spawns a job and keeps only its pid and pending exit: the pipes are closed at
/// once, so hundreds of jobs do not exhaust descriptors. Only for jobs that
/// write nothing (a write would die of SIGPIPE).
fn spawn_quiet(init: &Init, spec: &SpawnSpec) -> (Pid, PendingExit) {
    let Spawned { pid, exit, .. } = init.spawn(spec).expect("spawning a job");
    (pid, exit)
}

/// 500 jobs exit with `i % 256`, spawned from four tasks at once, while two
/// more tasks start 200 orphan makers whose `sleep` (10–90 ms) is orphaned and
/// dies around them. Lines: `child i=I pid=P status=S` and
/// `maker pid=P status=S`, then `makers_groups_empty=B` and `orphans_reaped=N`.
async fn exit_codes(init: &Init) {
    const CHILDREN: usize = 500;
    const SPAWNERS: usize = 4;
    const ORPHANS: usize = 200;
    const MAKERS: usize = 2;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..SPAWNERS {
        let init = init.clone();
        tasks.spawn(async move {
            let mut mine = Vec::new();
            for i in (t..CHILDREN).step_by(SPAWNERS) {
                let spec = SpawnSpec::shell(format!("exit {}", i % 256));
                mine.push((i, spawn_quiet(&init, &spec)));
                tokio::task::yield_now().await;
            }
            let mut lines = Vec::new();
            for (i, (pid, exit)) in mine {
                lines.push(format!(
                    "child i={i} pid={pid} status={}",
                    await_status(exit).await
                ));
            }
            (lines, Vec::new())
        });
    }
    for t in 0..MAKERS {
        let init = init.clone();
        tasks.spawn(async move {
            let mut mine = Vec::new();
            for i in (t..ORPHANS).step_by(MAKERS) {
                let secs = format!("0.0{}", i % 9 + 1);
                mine.push(spawn_quiet(&init, &orphan_maker_spec(1, &secs)));
                tokio::task::yield_now().await;
            }
            let mut lines = Vec::new();
            let mut groups = Vec::new();
            for (pid, exit) in mine {
                lines.push(format!(
                    "maker pid={pid} status={}",
                    await_status(exit).await
                ));
                groups.push(pid);
            }
            (lines, groups)
        });
    }
    let mut groups = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (lines, g) = joined.expect("a scenario task panicked");
        for l in lines {
            println!("{l}");
        }
        groups.extend(g);
    }
    // The orphaned sleeps stay in their maker's group: once every such group
    // is empty, every orphan has been reaped.
    let mut all_empty = true;
    for g in groups {
        all_empty &= init.wait_group_empty(g, STATUS_TIMEOUT).await;
    }
    println!("makers_groups_empty={all_empty}");
    println!("orphans_reaped={}", init.orphans_reaped());
}

/// A job that starts `count` × `sleep secs` and exits at once: see
/// [`orphan_maker`].
fn orphan_maker_spec(count: usize, secs: &str) -> SpawnSpec {
    let exe = std::env::current_exe().expect("finding our own executable");
    SpawnSpec {
        program: Program::Argv(vec![
            exe.into_os_string(),
            "orphan-maker".into(),
            count.to_string().into(),
            secs.into(),
        ]),
        cwd: Cwd::Inherit,
        env: Vec::new(),
        setup: Default::default(),
    }
}

/// Args: `COUNT SECONDS`. Starts COUNT `sleep SECONDS` and exits 0 without
/// waiting for them, so every one is orphaned to our parent's init layer.
///
/// A shell (`sleep 0.2 & … exit`) cannot be used for this: dash installs a
/// SIGCHLD handler once it has background jobs and reaps those that finished
/// between two commands, so under load some sleeps would never be orphans.
fn orphan_maker(args: &[String]) -> ExitCode {
    let [count, secs] = args else {
        eprintln!("usage: init-probe orphan-maker COUNT SECONDS");
        return ExitCode::from(2);
    };
    let count: usize = count.parse().expect("a count");
    for _ in 0..count {
        // Dropping a `Child` does not wait for it.
        #[expect(
            clippy::zombie_processes,
            reason = "orphaning them is the point: the init layer above reaps them"
        )]
        std::process::Command::new("sleep")
            .arg(secs)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("starting sleep");
    }
    ExitCode::SUCCESS
}

/// `true`, 1000 times in a row. Lines: `arrived=N`, then one
/// `failed i=I status=S` per run whose status was not `exited:0`.
async fn exit_immediately(init: &Init) {
    let spec = SpawnSpec {
        program: Program::Argv(vec![OsString::from("true")]),
        cwd: Cwd::Inherit,
        env: Vec::new(),
        setup: Default::default(),
    };
    let mut arrived = 0;
    let mut failures = Vec::new();
    for i in 0..1000 {
        let (_, exit) = spawn_quiet(init, &spec);
        match await_status(exit).await.as_str() {
            "exited:0" => arrived += 1,
            other => failures.push(format!("failed i={i} status={other}")),
        }
    }
    println!("arrived={arrived}");
    for f in failures {
        println!("{f}");
    }
}

/// One job (an orphan maker) leaves 100 orphaned `sleep 0.2`s behind. Lines:
/// `job=S`, `group_empty=B` (its group drained, i.e. every sleep was reaped),
/// `orphans_reaped=N`, `zombies=N` and `children=N` (processes whose parent is
/// us, in state Z / in any state, from /proc).
async fn orphans(init: &Init) {
    let (pid, exit) = spawn_quiet(init, &orphan_maker_spec(100, "0.2"));
    println!("job={}", await_status(exit).await);
    println!(
        "group_empty={}",
        init.wait_group_empty(pid, STATUS_TIMEOUT).await
    );
    println!("orphans_reaped={}", init.orphans_reaped());
    let me = std::process::id() as i32;
    let mine: Vec<_> = procfs::process::all_processes()
        .expect("reading /proc")
        .flatten()
        .filter_map(|p| p.stat().ok())
        .filter(|s| s.ppid == me)
        .collect();
    println!("zombies={}", mine.iter().filter(|s| s.state == 'Z').count());
    println!("children={}", mine.len());
}

/// `sh -c 'sleep 0.01 & kill -9 $$'; sleep 0.0087`, 1000 times, eight at a
/// time: the inner shell's orphaned sleep and its killed parent make SIGCHLDs
/// coalesce with the job's own. Lines: `arrived=N`, then one
/// `failed i=I status=S` per run whose status was not `exited:0`.
async fn coalesced_sigchld(init: &Init) {
    const RUNS: usize = 1000;
    const LANES: usize = 8;
    let mut lanes = tokio::task::JoinSet::new();
    for lane in 0..LANES {
        let init = init.clone();
        lanes.spawn(async move {
            let spec = SpawnSpec::shell("sh -c 'sleep 0.01 & kill -9 $$'; sleep 0.0087");
            let mut arrived = 0;
            let mut failures = Vec::new();
            for i in (lane..RUNS).step_by(LANES) {
                // Keep the pipes open until it exits: the job's shell reports
                // the killed inner shell on stderr, and a closed stderr
                // would kill it with SIGPIPE.
                let spawned = init.spawn(&spec).expect("spawning a job");
                match await_status(spawned.exit).await.as_str() {
                    "exited:0" => arrived += 1,
                    other => failures.push(format!("failed i={i} status={other}")),
                }
            }
            (arrived, failures)
        });
    }
    let mut arrived = 0;
    let mut failures = Vec::new();
    while let Some(joined) = lanes.join_next().await {
        let (a, f) = joined.expect("a lane panicked");
        arrived += a;
        failures.extend(f);
    }
    println!("arrived={arrived}");
    for f in failures {
        println!("{f}");
    }
}

/// A job that is itself the reader of its `/proc/self/status`, then one that
/// sends itself SIGHUP. Lines: `own_sigblk=HEX` (this process, after the
/// init layer blocked its signals), `job_sigblk=HEX`, `job_sigign=HEX`,
/// `job=S`, `hup_job=S` (`signaled:1` unless HUP was ignored in it).
async fn signal_state(init: &Init) {
    let own = std::fs::read_to_string("/proc/thread-self/status").expect("reading own status");
    println!("own_sigblk={}", status_field(&own, "SigBlk"));
    let spawned = init
        .spawn(&SpawnSpec::shell("exec cat /proc/self/status"))
        .expect("spawning the job");
    let mut text = String::new();
    File::from(spawned.stdout)
        .read_to_string(&mut text)
        .expect("reading the job's output");
    println!("job_sigblk={}", status_field(&text, "SigBlk"));
    println!("job_sigign={}", status_field(&text, "SigIgn"));
    println!("job={}", await_status(spawned.exit).await);
    let hup = init
        .spawn(&SpawnSpec::shell("kill -HUP $$; exit 3"))
        .expect("spawning the HUP job");
    println!("hup_job={}", await_status(hup.exit).await);
}

/// Args: `DIR` (an empty directory). Opens `DIR/opened` as an `O_PATH`
/// descriptor, renames it to `DIR/renamed`, and starts jobs there by
/// descriptor and by path. Lines: `dir_fd=N`; `by_fd_pwd=P`,
/// `by_fd_fd=open|closed` (whether the job has descriptor N),
/// `by_fd=S`; `by_path_pwd=P`, `by_path=S`; `missing=E` (the start error
/// of a path that does not exist); `file=E` (of a path that is a file).
async fn cwd(init: &Init, args: &[String]) {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::Arc;

    let dir = std::path::Path::new(args.first().expect("usage: cwd DIR"));
    std::fs::create_dir(dir.join("opened")).expect("creating DIR/opened");
    let fd: OwnedFd = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_PATH | nix::libc::O_DIRECTORY)
        .open(dir.join("opened"))
        .expect("opening DIR/opened")
        .into();
    std::fs::rename(dir.join("opened"), dir.join("renamed")).expect("renaming DIR/opened");
    let n = fd.as_raw_fd();
    println!("dir_fd={n}");

    let script = format!("pwd -P; if [ -e /proc/$$/fd/{n} ]; then echo open; else echo closed; fi");
    let mut spec = SpawnSpec::shell(script);
    spec.cwd = Cwd::Dir(Arc::new(fd));
    let spawned = init.spawn(&spec).expect("spawning the job by descriptor");
    let mut text = String::new();
    File::from(spawned.stdout)
        .read_to_string(&mut text)
        .expect("reading the job's output");
    let mut lines = text.lines();
    println!("by_fd_pwd={}", lines.next().unwrap_or(""));
    println!("by_fd_fd={}", lines.next().unwrap_or(""));
    println!("by_fd={}", await_status(spawned.exit).await);

    let mut spec = SpawnSpec::shell("pwd -P");
    spec.cwd = Cwd::Path(dir.join("renamed"));
    let spawned = init.spawn(&spec).expect("spawning the job by path");
    let mut text = String::new();
    File::from(spawned.stdout)
        .read_to_string(&mut text)
        .expect("reading the job's output");
    println!("by_path_pwd={}", text.trim_end());
    println!("by_path={}", await_status(spawned.exit).await);

    std::fs::write(dir.join("file"), "").expect("creating DIR/file");
    for (key, path) in [("missing", "missing"), ("file", "file")] {
        let mut spec = SpawnSpec::shell("true");
        spec.cwd = Cwd::Path(dir.join(path));
        match init.spawn(&spec) {
            Ok(_) => println!("{key}=started"),
            Err(e) => println!("{key}={e}"),
        }
    }
}

fn status_field<'a>(status: &'a str, key: &str) -> &'a str {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map_or("missing", str::trim)
}

/// Starts a group whose leader dies of TERM while a member ignores it, and
/// waits until both run. Prints `pgid=P` and `members_started=B`.
async fn spawn_term_ignoring_member(init: &Init) -> (Pid, PendingExit) {
    // The background sleep inherits TERM ignored (`trap ''` sets SIG_IGN,
    // which survives exec); the job then restores TERM and becomes a plain
    // sleep itself, so the direct child dies of TERM and the other survives.
    let spec = SpawnSpec::shell("trap '' TERM; sleep 30 & trap - TERM; exec sleep 31");
    let (pgid, exit) = spawn_quiet(init, &spec);
    println!("pgid={pgid}");
    // Both members must have exec'd `sleep` (the trap is in place) before TERM.
    let started = wait_for(Duration::from_secs(5), || {
        let members = init::procinfo::group_members(pgid.0);
        members.len() == 2 && members.iter().all(|m| m.comm == "sleep")
    })
    .await;
    println!("members_started={started}");
    (pgid, exit)
}

/// A group with a member that ignores TERM. Lines: `pgid=P`, `term_sent=B`,
/// `empty_after_term=B` (after a 300 ms wait), `direct=S` (the job itself),
/// one `survivor pid=P comm=C state=X` per member left, `survivor_text=…`,
/// `kill_sent=B`, `empty_after_kill=B`, `group_exists=B`.
async fn group_kill(init: &Init) {
    let (pgid, exit) = spawn_term_ignoring_member(init).await;
    println!(
        "term_sent={}",
        init::signal_group(pgid, Signal::TERM).expect("kill")
    );
    println!(
        "empty_after_term={}",
        init.wait_group_empty(pgid, Duration::from_millis(300))
            .await
    );
    println!("direct={}", await_status(exit).await);
    for s in init::procinfo::group_members(pgid.0) {
        println!("survivor pid={} comm={} state={}", s.pid, s.comm, s.state);
        println!("survivor_text={s}");
    }
    println!(
        "kill_sent={}",
        init::signal_group(pgid, Signal::KILL).expect("kill")
    );
    println!(
        "empty_after_kill={}",
        init.wait_group_empty(pgid, STATUS_TIMEOUT).await
    );
    println!("group_exists={}", init::group_exists(pgid));
}

/// A job whose whole group ignores TERM (the exec'd `sleep` inherits the
/// `SIG_IGN`); returns once it is a `sleep`, so the trap is in place.
async fn spawn_term_ignoring(init: &Init) -> (Pid, PendingExit) {
    let (pgid, exit) = spawn_quiet(init, &SpawnSpec::shell("trap '' TERM; exec sleep 30"));
    let started = wait_for(Duration::from_secs(5), || {
        let members = init::procinfo::group_members(pgid.0);
        members.len() == 1 && members[0].comm == "sleep"
    })
    .await;
    println!("started={started}");
    (pgid, exit)
}

/// Runs `Init::escalate` on `pgid` and prints, prefixed with `name_`:
/// `dead`, `already_dead`, `last_signal` (number or `none`), `escalated`,
/// `survived` (`after:comm/comm…` per step whose wait ran out, `;`-joined, or
/// `none`), `phases` (comma-joined, or `none`), `ms` (how long it took), and
/// `error` when it failed.
async fn escalate(init: &Init, name: &str, pgid: Pid, steps: &[Step]) -> Option<Escalation> {
    let mut phases = Vec::new();
    let started = Instant::now();
    let result = init
        .escalate(pgid, steps, |p: DeathWait| phases.push(format!("{p:?}")))
        .await;
    println!("{name}_ms={}", started.elapsed().as_millis());
    let outcome = match result {
        Ok(o) => o,
        Err(e) => {
            println!("{name}_error={e}");
            return None;
        }
    };
    println!("{name}_dead={}", outcome.dead);
    println!("{name}_already_dead={}", outcome.already_dead);
    println!(
        "{name}_last_signal={}",
        outcome
            .last_signal
            .map_or("none".to_owned(), |s| s.as_raw().to_string())
    );
    println!("{name}_escalated={}", outcome.escalated);
    let survived: Vec<String> = outcome
        .survived
        .iter()
        .map(|s| {
            let comms: Vec<&str> = s.members.iter().map(|m| m.comm.as_str()).collect();
            format!("{}:{}", s.after.as_raw(), comms.join("/"))
        })
        .collect();
    println!("{name}_survived={}", or_none(&survived, ";"));
    println!("{name}_phases={}", or_none(&phases, ","));
    Some(outcome)
}

fn or_none(items: &[String], sep: &str) -> String {
    if items.is_empty() {
        "none".to_owned()
    } else {
        items.join(sep)
    }
}

/// ASSURED on a group that ignores TERM. Lines: `started=B`, the
/// `assured_*` lines of [`escalate`], `direct=S`, `group_exists=B`.
async fn escalate_term_ignored(init: &Init) {
    let (pgid, exit) = spawn_term_ignoring(init).await;
    let steps = [
        Step::new(Signal::TERM, Duration::from_millis(300)),
        Step::new(Signal::KILL, STATUS_TIMEOUT),
    ];
    escalate(init, "assured", pgid, &steps).await;
    println!("direct={}", await_status(exit).await);
    println!("group_exists={}", init::group_exists(pgid));
}

/// ASSURED on a job that dies of TERM. Lines: the `assured_*` lines of
/// [`escalate`], `direct=S`.
async fn escalate_term_enough(init: &Init) {
    let (pgid, exit) = spawn_quiet(init, &SpawnSpec::shell("exec sleep 30"));
    let steps = [
        Step::new(Signal::TERM, STATUS_TIMEOUT),
        Step::new(Signal::KILL, STATUS_TIMEOUT),
    ];
    escalate(init, "assured", pgid, &steps).await;
    println!("direct={}", await_status(exit).await);
}

/// TERM to a group whose leader dies of it while a member ignores it, then
/// KILL. Lines: `pgid=P`, `members_started=B`, the `term_*` lines of
/// [`escalate`], `direct=S`, `survivor_pids=P,…`, then the `kill_*` lines
/// and `group_exists=B`.
async fn escalate_member_survives(init: &Init) {
    let (pgid, exit) = spawn_term_ignoring_member(init).await;
    let term = [Step::new(Signal::TERM, Duration::from_millis(500))];
    let outcome = escalate(init, "term", pgid, &term).await;
    println!("direct={}", await_status(exit).await);
    let pids: Vec<String> = outcome
        .iter()
        .flat_map(|o| &o.survived)
        .flat_map(|s| &s.members)
        .map(|m| m.pid.to_string())
        .collect();
    println!("survivor_pids={}", pids.join(","));
    escalate(
        init,
        "kill",
        pgid,
        &[Step::new(Signal::KILL, STATUS_TIMEOUT)],
    )
    .await;
    println!("group_exists={}", init::group_exists(pgid));
}

/// A job that has exited and been reaped, group empty. Lines: `direct=S`,
/// `group_empty=B`, then the `gone_*` lines of [`escalate`].
async fn escalate_already_gone(init: &Init) {
    let (pgid, exit) = spawn_quiet(init, &SpawnSpec::shell("exit 3"));
    println!("direct={}", await_status(exit).await);
    println!(
        "group_empty={}",
        init.wait_group_empty(pgid, STATUS_TIMEOUT).await
    );
    let steps = [
        Step::new(Signal::TERM, STATUS_TIMEOUT),
        Step::new(Signal::KILL, STATUS_TIMEOUT),
    ];
    escalate(init, "gone", pgid, &steps).await;
}

/// A zero wait: TERM to a TERM-ignoring group, then KILL with a zero wait,
/// then a wait for death. Lines: `started=B`, the `term0_*` lines of
/// [`escalate`], `kill0_*`, then `direct=S` and the `after_*` lines of a
/// last escalation (a zero-wait SIGKILL to the dead group).
async fn escalate_timeout_0(init: &Init) {
    let (pgid, exit) = spawn_term_ignoring(init).await;
    escalate(
        init,
        "term0",
        pgid,
        &[Step::new(Signal::TERM, Duration::ZERO)],
    )
    .await;
    escalate(
        init,
        "kill0",
        pgid,
        &[Step::new(Signal::KILL, Duration::ZERO)],
    )
    .await;
    println!("direct={}", await_status(exit).await);
    wait_for(STATUS_TIMEOUT, || !init::group_exists(pgid)).await;
    escalate(
        init,
        "after",
        pgid,
        &[Step::new(Signal::KILL, Duration::ZERO)],
    )
    .await;
}

/// An escalation dropped mid-wait (as `tokio::select!` against a cancel
/// does), then a fresh one. Lines: `started=B`, `dropped=B` (the first did
/// not finish within 300 ms), the `kill_*` lines of [`escalate`], `direct=S`,
/// `next=S` (a later job's status still arrives).
async fn escalate_dropped(init: &Init) {
    let (pgid, exit) = spawn_term_ignoring(init).await;
    let steps = [Step::new(Signal::TERM, STATUS_TIMEOUT)];
    let first = tokio::time::timeout(
        Duration::from_millis(300),
        init.escalate(pgid, &steps, |_| {}),
    )
    .await;
    println!("dropped={}", first.is_err());
    escalate(
        init,
        "kill",
        pgid,
        &[Step::new(Signal::KILL, STATUS_TIMEOUT)],
    )
    .await;
    println!("direct={}", await_status(exit).await);
    let (_, next) = spawn_quiet(init, &SpawnSpec::shell("exit 4"));
    println!("next={}", await_status(next).await);
}

/// Args: none. `Init::shutdown` (not PID 1) over three groups: two ignore
/// TERM, one dies of it, with a 500 ms grace. Lines: `started=B` (twice),
/// `shutdown_ms=N`, `groups=N`, `survived_term=comm,…`, `survived_kill=N`,
/// `direct=S` per job in order. `ignoring=P,P` names the two TERM-ignoring
/// groups.
async fn shutdown_groups(init: &Init) {
    let a = spawn_term_ignoring(init).await;
    let b = spawn_term_ignoring(init).await;
    let c = spawn_quiet(init, &SpawnSpec::shell("exec sleep 30"));
    println!("ignoring={},{}", a.0, b.0);
    let started = Instant::now();
    let report = init
        .shutdown([a.0, b.0, c.0], Duration::from_millis(500))
        .await;
    println!("shutdown_ms={}", started.elapsed().as_millis());
    println!("groups={}", report.groups);
    let term: Vec<String> = report
        .survived_term
        .iter()
        .map(|s| format!("{}:{}", s.pid, s.comm))
        .collect();
    println!("survived_term={}", term.join(","));
    println!("survived_kill={}", report.survived_kill.len());
    for (_, exit) in [a, b, c] {
        println!("direct={}", await_status(exit).await);
    }
}

/// Polls `cond` every 10 ms until it holds or `timeout` passes. Only for
/// waiting on other processes' progress, which raises no event we can see.
async fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A job's pid, pending exit, and the pipe ends that must stay open while it
/// runs: its shell reports a signalled child on stderr, and a closed pipe
/// would kill it with SIGPIPE instead of letting its trap run.
struct Running {
    pid: Pid,
    exit: PendingExit,
    _pipes: (OwnedFd, BufReader<File>, OwnedFd),
}

/// Starts a job that traps `signal`, writes `<signal>` to `marker` from the
/// trap and exits 7; returns once the trap is installed (the job says `ready`).
async fn spawn_trapping(init: &Init, signal: &str, marker: &str) -> Running {
    let mut spec = SpawnSpec::shell(format!(
        "trap 'echo {signal} > \"$MARKER\"; exit 7' {signal}; echo ready; while :; do sleep 0.05; done"
    ));
    spec.env.push(("MARKER".into(), marker.into()));
    let Spawned {
        pid,
        stdin,
        stdout,
        stderr,
        exit,
    } = init.spawn(&spec).expect("spawning the job");
    let read = tokio::task::spawn_blocking(move || {
        let mut reader = BufReader::new(File::from(stdout));
        let mut line = String::new();
        reader.read_line(&mut line).map(|_| (line, reader))
    });
    let (line, stdout) = tokio::time::timeout(STATUS_TIMEOUT, read)
        .await
        .expect("the job never said ready")
        .expect("reader task")
        .expect("reading the job's stdout");
    assert_eq!(line.trim(), "ready", "unexpected first line of the job");
    Running {
        pid,
        exit,
        _pipes: (stdin, stdout, stderr),
    }
}

/// Waits for the next event, with the status timeout.
async fn next_event(events: &mut UnboundedReceiver<Event>) -> Option<Event> {
    tokio::time::timeout(STATUS_TIMEOUT, events.recv())
        .await
        .ok()
        .flatten()
}

/// Args: `MARKER`. A job traps USR1; after `ready`, the test sends SIGUSR1 to
/// this process. Lines: `ready`, `event=…` (the first event, Debug-formatted),
/// `job=S`.
async fn forward(init: &Init, mut events: UnboundedReceiver<Event>, args: &[String]) {
    let marker = args.first().expect("usage: forward MARKER");
    let job = spawn_trapping(init, "USR1", marker).await;
    println!("ready");
    println!("event={:?}", next_event(&mut events).await);
    println!("job={}", await_status(job.exit).await);
}

/// Args: `MARKER GRACE_MS`. A job traps TERM; after `ready`, the test sends
/// SIGTERM to this process, which runs `Init::shutdown` on the Shutdown event
/// as the server does. Lines: `ready`, `event=…`, `shutdown_ms=N`,
/// `groups=N`, `survived_term=N`, `survived_kill=N`, `job=S`.
async fn shutdown(init: &Init, mut events: UnboundedReceiver<Event>, args: &[String]) {
    let marker = args.first().expect("usage: shutdown MARKER GRACE_MS");
    let grace: u64 = args
        .get(1)
        .and_then(|g| g.parse().ok())
        .expect("usage: shutdown MARKER GRACE_MS");
    let job = spawn_trapping(init, "TERM", marker).await;
    println!("ready");
    let event = next_event(&mut events).await;
    println!("event={event:?}");
    if !matches!(event, Some(Event::Shutdown(_))) {
        return;
    }
    let started = Instant::now();
    let report = init.shutdown([job.pid], Duration::from_millis(grace)).await;
    println!("shutdown_ms={}", started.elapsed().as_millis());
    println!("groups={}", report.groups);
    println!("survived_term={}", report.survived_term.len());
    println!("survived_kill={}", report.survived_kill.len());
    println!("job={}", await_status(job.exit).await);
}

/// See the module doc. Runs before `init::prepare`, single-threaded.
fn with_signal_state(args: &[String]) -> ExitCode {
    use nix::libc;
    use nix::sys::signal::{SigSet, SigmaskHow, pthread_sigmask};

    let [blocked, ignored, scenario @ ..] = args else {
        eprintln!("usage: init-probe with-signal-state BLOCKED IGNORED SCENARIO [ARGS…]");
        return ExitCode::from(2);
    };
    let parse = |list: &str| -> Vec<i32> {
        list.split(',')
            .filter(|s| !s.is_empty() && *s != "-")
            .map(|s| Signal::parse(s).expect("a signal name").as_raw())
            .collect()
    };
    let (blocked, ignored) = (parse(blocked), parse(ignored));
    let mut mask = SigSet::empty();
    for &n in &blocked {
        mask.add(n.try_into().expect("a standard signal"));
    }
    pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&mask), None).expect("setting the mask");
    for n in 1..=64 {
        if n == libc::SIGKILL || n == libc::SIGSTOP {
            continue;
        }
        let handler = if ignored.contains(&n) {
            libc::SIG_IGN
        } else {
            libc::SIG_DFL
        };
        set_disposition(n, handler);
    }
    let exe = std::env::current_exe().expect("finding our own executable");
    let exe = CString::new(exe.as_os_str().as_bytes()).expect("a path without NUL");
    let mut argv = vec![exe.clone()];
    argv.extend(
        scenario
            .iter()
            .map(|a| CString::new(a.as_str()).expect("an argument without NUL")),
    );
    // nix's execv, not std's `Command::exec`: std makes no promise about the
    // signal mask it hands to the new program.
    let err = nix::unistd::execv(&exe, &argv).unwrap_err();
    eprintln!("init-probe: exec: {err}");
    ExitCode::from(2)
}

/// Sets the disposition of signal `n` to `SIG_IGN` or `SIG_DFL` with the raw
/// `rt_sigaction` system call: glibc refuses signals 32 and 33 (it reserves
/// them), yet an environment may hand them to us ignored, and an ignored
/// disposition survives exec.
fn set_disposition(n: i32, handler: nix::libc::sighandler_t) {
    use nix::libc;

    /// The kernel's `struct sigaction` (x86_64, aarch64 and the other
    /// architectures with the generic layout).
    #[repr(C)]
    struct KernelSigaction {
        handler: libc::sighandler_t,
        flags: libc::c_ulong,
        restorer: usize,
        mask: u64,
    }
    let act = KernelSigaction {
        handler,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    #[expect(
        unsafe_code,
        reason = "no crate wraps rt_sigaction for signals glibc reserves"
    )]
    // SAFETY: `act` is a valid kernel sigaction that lives across the call;
    // the old action is not asked for (null). SIG_IGN and SIG_DFL install no
    // handler code, so nothing can run in signal context, and this process is
    // still single-threaded.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            n,
            &raw const act,
            std::ptr::null_mut::<KernelSigaction>(),
            std::mem::size_of::<u64>(),
        )
    };
    if rc != 0 {
        eprintln!(
            "init-probe: rt_sigaction({n}): {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Init mode: a SIGPIPE the process raised itself is not forwarded to the
/// main command, a USR1 it sent itself is. `kill(getpid(), SIGPIPE)` reads
/// from the signalfd exactly as the SIGPIPE of a write to a broken pipe does
/// (`SI_USER`, `ssi_pid` = our pid), but arrives on whichever thread reads,
/// which a write's thread-directed one would not in this multi-threaded
/// runtime. The command exits 11 on PIPE, 12 on USR1.
async fn main_own_sigpipe(init: &Init) {
    // The shell creates the marker ($0) once its traps are set.
    let marker = std::env::temp_dir().join(format!("init-probe-traps-{}", std::process::id()));
    let argv: Vec<OsString> = vec![
        "sh".into(),
        "-c".into(),
        "trap 'exit 11' PIPE; trap 'exit 12' USR1; : > \"$0\"; while :; do sleep 0.05; done".into(),
        marker.clone().into_os_string(),
    ];
    let main = init
        .spawn_main(&argv, &[])
        .expect("spawning the main command");
    println!("main_pid={}", main.pid);
    let ready = wait_for(STATUS_TIMEOUT, || marker.exists()).await;
    println!("traps_set={ready}");
    let _ = std::fs::remove_file(&marker);
    let me = nix::unistd::Pid::this();
    nix::sys::signal::kill(me, nix::sys::signal::Signal::SIGPIPE).expect("kill PIPE");
    // Time for a wrongly forwarded SIGPIPE to arrive before USR1 does.
    tokio::time::sleep(Duration::from_millis(500)).await;
    nix::sys::signal::kill(me, nix::sys::signal::Signal::SIGUSR1).expect("kill USR1");
    println!("main={}", await_status(main.exit).await);
}

/// Init mode: the main command reports its own ignored set
/// (`main_sigign=HEX`, printed by the command itself on our stdout, which
/// it inherits), then traps INT and sends it to itself: `main=exited:43`
/// unless INT was ignored when its shell started (a non-interactive shell
/// cannot trap a signal it started with ignored), then it would sleep and
/// exit 1.
async fn main_signal_state(init: &Init) {
    let argv: Vec<OsString> = vec![
        "sh".into(),
        "-c".into(),
        "echo main_sigign=$(awk '/^SigIgn:/ {print $2}' /proc/$$/status); \
         trap 'exit 43' INT; kill -INT $$; sleep 5; exit 1"
            .into(),
    ];
    let main = init
        .spawn_main(&argv, &[])
        .expect("spawning the main command");
    println!("main={}", await_status(main.exit).await);
}
