//! Process-level tests of the init crate: each test runs one scenario of the
//! `init-probe` helper (src/bin/init-probe.rs) in a process of its own —
//! signal masks, the subreaper flag and PID 1 are process-global — and asserts
//! on the `key=value` lines it prints. PID-1 runs use
//! `unshare --pid --fork --mount-proc --kill-child`.
//!
//! Every probe runs under a deadline: a probe that hangs is killed and its
//! test fails with whatever it printed. Tests that need a new pid namespace
//! (root and `unshare`) fail when `CI` is set and it is unavailable, and are
//! skipped with a printed reason otherwise.
#![allow(
    clippy::expect_used,
    reason = "test code: a failed set-up step should fail the test with its message"
)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const PROBE: &str = env!("CARGO_BIN_EXE_init-probe");

/// Bit `n - 1` of a `/proc/<pid>/status` signal mask is signal `n`.
fn mask_of(signals: &[Signal]) -> u64 {
    signals.iter().fold(0, |m, &s| m | 1 << (s as i32 - 1))
}

/// A running process (the probe, or `unshare` around it) under a deadline.
/// Its stdout arrives line by line; a fixture that is dropped before the
/// process exited kills it.
struct Running {
    pid: u32,
    what: String,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Receiver<String>,
    exit: Receiver<ExitStatus>,
    exited: bool,
}

/// What a finished process printed, and how it ended.
struct Finished {
    what: String,
    status: ExitStatus,
    lines: Vec<String>,
    stderr: String,
}

impl Running {
    /// Starts `cmd` with stdout and stderr captured.
    fn start(cmd: Command) -> Running {
        let what = format!("{cmd:?}");
        Running::try_start(cmd).unwrap_or_else(|e| panic!("starting {what}: {e}"))
    }

    fn try_start(mut cmd: Command) -> std::io::Result<Running> {
        let what = format!("{cmd:?}");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let pid = child.id();
        let stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let (line_tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (err_tx, stderr_rx) = mpsc::channel();
        thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            let _ = err_tx.send(text);
        });
        // The waiter owns the child; until it has reaped it, its pid cannot be
        // reused, so killing by pid on a deadline is safe.
        let (exit_tx, exit) = mpsc::channel();
        thread::spawn(move || {
            if let Ok(status) = child.wait() {
                let _ = exit_tx.send(status);
            }
        });
        Ok(Running {
            pid,
            what,
            lines,
            seen: Vec::new(),
            stderr: stderr_rx,
            exit,
            exited: false,
        })
    }

    /// Runs the probe with `args` directly (a child subreaper, not PID 1).
    fn probe(args: &[&str]) -> Running {
        let mut cmd = Command::new(PROBE);
        cmd.args(args);
        Running::start(cmd)
    }

    /// Runs the probe as PID 1 of a new pid namespace.
    fn probe_as_pid1(args: &[&str]) -> Running {
        let mut cmd = Command::new("unshare");
        cmd.args(["--pid", "--fork", "--mount-proc", "--kill-child", PROBE])
            .args(args);
        Running::start(cmd)
    }

    /// Waits up to `timeout` for the line `line`; fails with the output so far.
    fn expect_line(&mut self, line: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !self.seen.iter().any(|l| l == line) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(e) => self.fail(&format!("no line {line:?} ({e:?})")),
            }
        }
    }

    /// The pid of the probe inside `unshare --fork` (the child of `unshare`),
    /// as seen from outside the namespace.
    fn namespace_init(&mut self) -> Pid {
        let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.pid))
            .unwrap_or_default();
        match children.split_whitespace().next().map(str::parse) {
            Some(Ok(pid)) => Pid::from_raw(pid),
            _ => self.fail(&format!("unshare has no child: {children:?}")),
        }
    }

    /// Waits up to `timeout` for the process to exit and collects its output.
    fn finish(mut self, timeout: Duration) -> Finished {
        let status = match self.exit.recv_timeout(timeout) {
            Ok(s) => s,
            Err(_) => self.fail(&format!("still running after {timeout:?}")),
        };
        self.exited = true;
        // The pipes close when the process (and the namespace) is gone.
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(l);
        }
        Finished {
            what: std::mem::take(&mut self.what),
            status,
            lines: std::mem::take(&mut self.seen),
            stderr: self
                .stderr
                .recv_timeout(Duration::from_secs(5))
                .unwrap_or_default(),
        }
    }

    /// Kills the process and panics with `why` and everything it printed.
    fn fail(&mut self, why: &str) -> ! {
        self.kill();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(500)) {
            self.seen.push(l);
        }
        let stderr = self
            .stderr
            .recv_timeout(Duration::from_millis(500))
            .unwrap_or_default();
        panic!(
            "{}: {why}\n--- stdout ---\n{}\n--- stderr ---\n{stderr}",
            self.what,
            self.seen.join("\n")
        );
    }

    fn kill(&mut self) {
        if !self.exited {
            let pid = Pid::from_raw(i32::try_from(self.pid).unwrap_or(i32::MAX));
            let _ = kill(pid, Signal::SIGKILL);
            let _ = self.exit.recv_timeout(Duration::from_secs(5));
            self.exited = true;
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Finished {
    /// Fails unless the process exited 0 and said `done`.
    fn assert_completed(&self) -> &Finished {
        if !self.status.success() || !self.lines.iter().any(|l| l == "done") {
            self.fail("did not complete");
        }
        self
    }

    /// The value of the one `key=value` line.
    fn get(&self, key: &str) -> &str {
        let prefix = format!("{key}=");
        match self.lines.iter().find_map(|l| l.strip_prefix(&prefix)) {
            Some(v) => v,
            None => self.fail(&format!("no {key}= line")),
        }
    }

    /// A numeric `key=N` line.
    fn number(&self, key: &str) -> u64 {
        let v = self.get(key);
        v.parse()
            .unwrap_or_else(|_| self.fail(&format!("{key}={v} is not a number")))
    }

    /// A hexadecimal `key=HEX` line.
    fn hex(&self, key: &str) -> u64 {
        let v = self.get(key);
        u64::from_str_radix(v, 16)
            .unwrap_or_else(|_| self.fail(&format!("{key}={v} is not hexadecimal")))
    }

    /// Every line that starts with `word` and a space, without that prefix.
    fn records(&self, word: &str) -> Vec<&str> {
        let prefix = format!("{word} ");
        self.lines
            .iter()
            .filter_map(|l| l.strip_prefix(&prefix))
            .collect()
    }

    fn fail(&self, why: &str) -> ! {
        panic!(
            "{}: {why} (exit: {})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.what,
            self.status,
            self.lines.join("\n"),
            self.stderr
        );
    }
}

/// The value of `key` in a record such as `i=3 pid=17 status=exited:3`.
fn field<'a>(record: &'a str, key: &str) -> &'a str {
    record
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key} in {record:?}"))
}

/// Whether a new pid namespace can be made here (root and `unshare`). When
/// not: fails under `CI`, otherwise prints why the test is skipped.
fn pid_namespace_available() -> bool {
    static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
    let available = AVAILABLE.get_or_init(|| {
        let mut cmd = Command::new("unshare");
        cmd.args(["--pid", "--fork", "--mount-proc", "--kill-child", "true"]);
        let f = Running::try_start(cmd)
            .map_err(|e| format!("`unshare` could not be run: {e}"))?
            .finish(Duration::from_secs(10));
        if f.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`unshare --pid --fork --mount-proc true` failed ({}): {}",
                f.status,
                f.stderr.trim()
            ))
        }
    });
    match available {
        Ok(()) => true,
        Err(reason) if std::env::var_os("CI").is_some() => {
            panic!(
                "CI is set, but this test needs a new pid namespace (root and unshare): {reason}"
            )
        }
        Err(reason) => {
            eprintln!("skipped: this test needs a new pid namespace (root and unshare): {reason}");
            false
        }
    }
}

#[test]
fn five_hundred_concurrent_exit_codes_arrive_exact_while_two_hundred_orphans_die_around_them() {
    let out = Running::probe(&["exit-codes"]).finish(Duration::from_secs(45));
    out.assert_completed();
    let children = out.records("child");
    assert_eq!(children.len(), 500, "one status line per child");
    let mut seen = [false; 500];
    let mut pids = std::collections::HashSet::new();
    for c in &children {
        let i: usize = field(c, "i").parse().expect("an index");
        assert!(!std::mem::replace(&mut seen[i], true), "child {i} twice");
        assert!(pids.insert(field(c, "pid")), "pid reported twice: {c}");
        assert_eq!(
            field(c, "status"),
            format!("exited:{}", i % 256),
            "child {i} got another status (lost or misrouted): {c}"
        );
    }
    let makers = out.records("maker");
    assert_eq!(makers.len(), 200);
    for m in &makers {
        assert_eq!(field(m, "status"), "exited:0", "orphan maker: {m}");
    }
    assert_eq!(out.get("makers_groups_empty"), "true");
    assert_eq!(
        out.number("orphans_reaped"),
        200,
        "every orphaned sleep, and nothing else, is reaped as an orphan"
    );
}

#[test]
fn a_child_that_exits_immediately_delivers_its_status_all_1000_times() {
    let out = Running::probe(&["exit-immediately"]).finish(Duration::from_secs(40));
    out.assert_completed();
    assert_eq!(out.records("failed"), Vec::<&str>::new());
    assert_eq!(out.number("arrived"), 1000);
}

#[test]
fn coalesced_sigchld_never_leaves_a_status_hanging_in_1000_runs() {
    let out = Running::probe(&["coalesced-sigchld"]).finish(Duration::from_secs(50));
    out.assert_completed();
    assert_eq!(out.records("failed"), Vec::<&str>::new());
    assert_eq!(out.number("arrived"), 1000);
}

/// The orphan scenario's assertions, for both modes.
fn assert_orphans_leave_no_zombies(out: &Finished) {
    out.assert_completed();
    assert_eq!(out.get("job"), "exited:0");
    assert_eq!(
        out.get("group_empty"),
        "true",
        "the sleeps' group never drained"
    );
    assert_eq!(
        out.number("orphans_reaped"),
        100,
        "every orphaned sleep is reaped, as an orphan"
    );
    assert_eq!(out.number("zombies"), 0, "zombies left among our children");
    assert_eq!(out.number("children"), 0, "children left at all");
}

#[test]
fn a_hundred_orphaned_sleeps_leave_no_zombies_under_a_subreaper() {
    let out = Running::probe(&["orphans"]).finish(Duration::from_secs(20));
    assert_eq!(out.get("pid1"), "false");
    assert_eq!(out.get("subreaper"), "true");
    assert_orphans_leave_no_zombies(&out);
}

#[test]
fn a_hundred_orphaned_sleeps_leave_no_zombies_under_pid_1() {
    if !pid_namespace_available() {
        return;
    }
    let out = Running::probe_as_pid1(&["orphans"]).finish(Duration::from_secs(20));
    assert_eq!(out.get("pid1"), "true");
    assert_orphans_leave_no_zombies(&out);
}

#[test]
fn a_job_starts_with_the_mask_the_server_started_with_and_every_signal_at_its_default_whatever_was_ignored()
 {
    // As under `nohup` or a backgrounding script, plus real-time signals.
    let out = Running::probe(&[
        "with-signal-state",
        "TERM,USR1",
        "HUP,INT,QUIT,USR2,34,64",
        "signal-state",
    ])
    .finish(Duration::from_secs(10));
    out.assert_completed();
    assert_eq!(out.get("job"), "exited:0");
    // The probe really started that way (SIGPIPE: Rust ignores it before main).
    assert_eq!(
        out.hex("start_sigblk"),
        mask_of(&[Signal::SIGTERM, Signal::SIGUSR1])
    );
    let realtime: u64 = (1 << 33) | (1 << 63);
    assert_eq!(
        out.hex("start_sigign"),
        mask_of(&[
            Signal::SIGHUP,
            Signal::SIGINT,
            Signal::SIGQUIT,
            Signal::SIGUSR2,
            Signal::SIGPIPE
        ]) | realtime
    );
    let handled = mask_of(&[
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGHUP,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGWINCH,
        Signal::SIGCONT,
    ]);
    // The server itself blocks what it reads from its signalfd, ignored
    // or not (a blocked signal is queued even while it is ignored) …
    let own = out.hex("own_sigblk");
    assert_eq!(
        own & handled,
        handled,
        "the probe did not block its signals: {own:#x}"
    );
    // … but its job gets the mask the server started with, and nothing ignored.
    let blocked = out.hex("job_sigblk");
    assert_eq!(
        blocked,
        mask_of(&[Signal::SIGTERM, Signal::SIGUSR1]),
        "job SigBlk {blocked:#x}"
    );
    let ignored = out.hex("job_sigign");
    assert_eq!(ignored, 0, "job SigIgn {ignored:#x}");
    assert_eq!(
        out.get("hup_job"),
        format!("signaled:{}", Signal::SIGHUP as i32),
        "a job's kill -HUP $$ ends it"
    );
}

#[test]
fn init_modes_main_command_starts_with_every_signal_at_its_default_whatever_the_init_inherited() {
    let out = Running::probe(&[
        "with-signal-state",
        "-",
        "HUP,INT,QUIT",
        "main-signal-state",
    ])
    .finish(Duration::from_secs(20));
    out.assert_completed();
    assert_eq!(
        out.hex("start_sigign"),
        mask_of(&[
            Signal::SIGHUP,
            Signal::SIGINT,
            Signal::SIGQUIT,
            Signal::SIGPIPE
        ])
    );
    assert_eq!(out.hex("main_sigign"), 0, "the command's SigIgn");
    assert_eq!(
        out.get("main"),
        "exited:43",
        "the command's shell could trap INT (exit 1: INT was still ignored)"
    );
}

#[test]
fn a_job_of_a_server_started_with_a_clean_signal_state_has_nothing_blocked_or_ignored() {
    let out = Running::probe(&["with-signal-state", "-", "-", "signal-state"])
        .finish(Duration::from_secs(10));
    out.assert_completed();
    assert_eq!(out.get("job"), "exited:0");
    assert_eq!(out.hex("start_sigblk"), 0);
    assert_eq!(out.hex("start_sigign"), mask_of(&[Signal::SIGPIPE]));
    assert_eq!(out.hex("job_sigblk"), 0);
    assert_eq!(out.hex("job_sigign"), 0);
    assert_eq!(
        out.get("hup_job"),
        format!("signaled:{}", Signal::SIGHUP as i32)
    );
}

#[test]
fn term_to_a_group_reports_the_member_that_ignores_it_and_kill_then_verifies_death() {
    let out = Running::probe(&["group-kill"]).finish(Duration::from_secs(20));
    out.assert_completed();
    assert_eq!(out.get("members_started"), "true");
    assert_eq!(out.get("term_sent"), "true");
    assert_eq!(
        out.get("empty_after_term"),
        "false",
        "a member ignores TERM"
    );
    assert_eq!(
        out.get("direct"),
        format!("signaled:{}", Signal::SIGTERM as i32)
    );
    let pgid = out.get("pgid");
    let survivors = out.records("survivor");
    assert_eq!(
        survivors.len(),
        1,
        "exactly the TERM-ignoring sleep survives"
    );
    let s = survivors[0];
    assert_ne!(field(s, "pid"), pgid, "the direct child is dead");
    assert_eq!(field(s, "comm"), "sleep");
    assert_eq!(field(s, "state"), "S");
    let text = out.get("survivor_text");
    assert!(text.contains("(sleep) state S: sleeping"), "{text}");
    assert_eq!(out.get("kill_sent"), "true");
    assert_eq!(out.get("empty_after_kill"), "true", "death not verified");
    assert_eq!(out.get("group_exists"), "false");
}

/// A fresh directory for marker files, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("init-probe-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating a temp dir");
        TempDir(dir)
    }

    fn marker(&self) -> String {
        self.0.join("marker").display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_job_started_by_directory_descriptor_runs_in_that_directory_and_does_not_inherit_it() {
    let tmp = TempDir::new("cwd");
    let dir = tmp.0.display().to_string();
    let out = Running::probe(&["cwd", &dir]).finish(Duration::from_secs(20));
    out.assert_completed();
    // Resolved like `pwd -P` does: the temp dir itself may be behind a symlink.
    let renamed = std::fs::canonicalize(tmp.0.join("renamed")).expect("canonical temp dir");
    let renamed = renamed.display().to_string();
    assert_eq!(
        out.get("by_fd_pwd"),
        renamed,
        "the job must start in the opened directory, which was renamed after it was opened"
    );
    assert_eq!(
        out.get("by_fd_fd"),
        "closed",
        "the directory descriptor leaked into the job"
    );
    assert_eq!(out.get("by_fd"), "exited:0");
    assert_eq!(out.get("by_path_pwd"), renamed);
    assert_eq!(out.get("by_path"), "exited:0");
    assert_eq!(
        out.get("missing"),
        format!("chdir {dir}/missing: no such file or directory")
    );
    assert_eq!(
        out.get("file"),
        format!("chdir {dir}/file: not a directory")
    );
}

#[test]
fn as_pid_1_sigusr1_from_outside_reaches_a_running_jobs_group() {
    if !pid_namespace_available() {
        return;
    }
    let dir = TempDir::new("usr1");
    let marker = dir.marker();
    let mut probe = Running::probe_as_pid1(&["forward", &marker]);
    probe.expect_line("ready", Duration::from_secs(10));
    kill(probe.namespace_init(), Signal::SIGUSR1).expect("sending SIGUSR1");
    let out = probe.finish(Duration::from_secs(15));
    out.assert_completed();
    assert_eq!(out.get("pid1"), "true");
    assert_eq!(
        out.get("event"),
        "Some(Forwarded { signal: Signal(10), groups: 1 })"
    );
    assert_eq!(out.get("job"), "exited:7", "the job's USR1 trap exits 7");
    let written = std::fs::read_to_string(&marker).unwrap_or_default();
    assert_eq!(
        written.trim(),
        "USR1",
        "the job's USR1 trap wrote the marker"
    );
}

#[test]
fn as_pid_1_sigterm_from_outside_runs_the_jobs_term_trap_and_exits_within_the_grace() {
    if !pid_namespace_available() {
        return;
    }
    const GRACE: Duration = Duration::from_secs(3);
    let dir = TempDir::new("term");
    let marker = dir.marker();
    let grace_ms = GRACE.as_millis().to_string();
    let mut probe = Running::probe_as_pid1(&["shutdown", &marker, &grace_ms]);
    probe.expect_line("ready", Duration::from_secs(10));
    let sent = Instant::now();
    kill(probe.namespace_init(), Signal::SIGTERM).expect("sending SIGTERM");
    let out = probe.finish(GRACE + Duration::from_secs(10));
    let took = sent.elapsed();
    out.assert_completed();
    assert_eq!(out.get("pid1"), "true");
    assert_eq!(out.get("event"), "Some(Shutdown(Signal(15)))");
    assert_eq!(out.get("groups"), "1");
    assert_eq!(out.get("job"), "exited:7", "the job's TERM trap exits 7");
    assert_eq!(out.number("survived_term"), 0);
    assert_eq!(out.number("survived_kill"), 0);
    let written = std::fs::read_to_string(&marker).unwrap_or_default();
    assert_eq!(
        written.trim(),
        "TERM",
        "the job's TERM trap wrote the marker"
    );
    assert!(
        out.number("shutdown_ms") < 1000,
        "shutdown waited for a job that had already exited"
    );
    assert!(
        took < GRACE,
        "the process took {took:?} to exit after SIGTERM (grace {GRACE:?})"
    );
}

// ---------------------------------------------------------------------------
// Init::escalate: TERM → wait → KILL with observed death
// ---------------------------------------------------------------------------

/// Runs an escalation scenario of the probe (not PID 1) and checks it ran.
fn escalation(scenario: &str) -> Finished {
    let out = Running::probe(&[scenario]).finish(Duration::from_secs(30));
    out.assert_completed();
    out
}

#[test]
fn assured_escalation_sends_kill_to_a_group_that_ignores_term_and_observes_its_death() {
    let out = escalation("escalate-term-ignored");
    assert_eq!(out.get("started"), "true");
    assert_eq!(out.get("assured_already_dead"), "false");
    assert_eq!(out.get("assured_dead"), "true", "death not observed");
    assert_eq!(out.get("assured_last_signal"), "9");
    assert_eq!(out.get("assured_escalated"), "true");
    assert_eq!(
        out.get("assured_survived"),
        "15:sleep",
        "the TERM step's wait ran out with the sleep alive, the KILL step's did not"
    );
    assert!(
        out.number("assured_ms") >= 300,
        "KILL was sent before the TERM step's wait ran out"
    );
    assert_eq!(out.get("assured_phases"), "Exiting");
    assert_eq!(out.get("direct"), "signaled:9");
    assert_eq!(out.get("group_exists"), "false");
}

#[test]
fn assured_escalation_stops_at_term_when_term_is_enough() {
    let out = escalation("escalate-term-enough");
    assert_eq!(out.get("assured_dead"), "true");
    assert_eq!(out.get("assured_last_signal"), "15");
    assert_eq!(out.get("assured_escalated"), "false", "KILL was not needed");
    assert_eq!(out.get("assured_survived"), "none");
    assert!(
        out.number("assured_ms") < 5000,
        "death by TERM was only seen when a wait ran out"
    );
    assert_eq!(out.get("direct"), "signaled:15");
}

#[test]
fn a_group_whose_leader_died_while_a_member_survives_is_not_dead_until_that_member_is() {
    let out = escalation("escalate-member-survives");
    assert_eq!(out.get("members_started"), "true");
    assert_eq!(out.get("direct"), "signaled:15", "the leader died of TERM");
    assert_eq!(
        out.get("term_dead"),
        "false",
        "dead although a member lives"
    );
    assert_eq!(out.get("term_last_signal"), "15");
    assert_eq!(out.get("term_survived"), "15:sleep");
    let survivors = out.get("survivor_pids");
    assert!(
        !survivors.is_empty() && survivors != out.get("pgid"),
        "the survivor is the member, not the leader: {survivors}"
    );
    // The phase follows the leader's reaping: exiting while the leader is
    // unreaped, then draining. A quick reaper may have reaped the leader
    // (which TERM kills at once) before the step's first check, and then
    // only the draining phase is waited through.
    let term_phases = out.get("term_phases");
    assert!(
        ["Exiting,Draining", "Draining"].contains(&term_phases),
        "the phase follows the leader's reaping: {term_phases}"
    );
    assert_eq!(out.get("kill_already_dead"), "false");
    assert_eq!(out.get("kill_dead"), "true");
    // KILL is not ignorable: when the reaper is quick, the member is already
    // reaped at the step's first check and no phase is waited through.
    let kill_phases = out.get("kill_phases");
    assert!(
        ["Draining", "none"].contains(&kill_phases),
        "the KILL step can only be draining: {kill_phases}"
    );
    assert_eq!(out.get("group_exists"), "false");
}

#[test]
fn an_already_gone_group_is_reported_as_such_and_sent_nothing() {
    let out = escalation("escalate-already-gone");
    assert_eq!(out.get("direct"), "exited:3");
    assert_eq!(out.get("group_empty"), "true");
    assert_eq!(out.get("gone_already_dead"), "true");
    assert_eq!(out.get("gone_dead"), "true");
    assert_eq!(out.get("gone_last_signal"), "none", "a signal was sent");
    assert_eq!(out.get("gone_escalated"), "false");
    assert_eq!(out.get("gone_phases"), "none");
}

#[test]
fn a_zero_wait_sends_and_reports_at_once_whether_the_group_is_dead() {
    let out = escalation("escalate-timeout-0");
    assert_eq!(out.get("started"), "true");
    assert_eq!(out.get("term0_dead"), "false");
    assert_eq!(out.get("term0_last_signal"), "15");
    assert_eq!(out.get("term0_survived"), "15:sleep");
    // Nothing to wait for, so well under any step's time; a generous bound
    // for a loaded machine.
    assert!(out.number("term0_ms") < 1000, "a zero wait waited");
    assert_eq!(out.get("kill0_last_signal"), "9");
    assert!(out.number("kill0_ms") < 1000, "a zero wait waited");
    assert_eq!(out.get("direct"), "signaled:9");
    assert_eq!(out.get("after_already_dead"), "true");
    assert_eq!(out.get("after_dead"), "true");
    assert_eq!(out.get("after_last_signal"), "none");
}

#[test]
fn dropping_an_escalation_mid_wait_leaves_the_group_and_the_reaper_usable() {
    let out = escalation("escalate-dropped");
    assert_eq!(out.get("started"), "true");
    assert_eq!(out.get("dropped"), "true", "the first escalation finished");
    assert_eq!(out.get("kill_already_dead"), "false");
    assert_eq!(out.get("kill_dead"), "true");
    assert_eq!(out.get("direct"), "signaled:9");
    assert_eq!(out.get("next"), "exited:4");
}

#[test]
fn shutdown_terms_every_group_under_one_shared_grace_and_kills_the_survivors() {
    let out = escalation("shutdown-groups");
    assert_eq!(out.get("groups"), "3");
    let ignoring: Vec<&str> = out.get("ignoring").split(',').collect();
    let term: Vec<&str> = out.get("survived_term").split(',').collect();
    assert_eq!(
        term,
        ignoring
            .iter()
            .map(|p| format!("{p}:sleep"))
            .collect::<Vec<_>>(),
        "exactly the two TERM-ignoring sleeps outlive the grace"
    );
    assert_eq!(out.number("survived_kill"), 0);
    let ms = out.number("shutdown_ms");
    assert!(ms >= 500, "KILL came before the grace ran out ({ms} ms)");
    assert!(
        ms < 1000,
        "two TERM-ignoring groups took {ms} ms: one grace each, not one shared"
    );
    let directs: Vec<&str> = out
        .lines
        .iter()
        .filter_map(|l| l.strip_prefix("direct="))
        .collect();
    assert_eq!(directs, ["signaled:9", "signaled:9", "signaled:15"]);
}

#[test]
fn init_mode_forwards_signals_to_the_main_command_but_not_a_sigpipe_of_its_own() {
    let out = Running::probe(&["main-own-sigpipe"]).finish(Duration::from_secs(20));
    out.assert_completed();
    assert_eq!(out.get("traps_set"), "true");
    assert_eq!(
        out.get("main"),
        "exited:12",
        "11: our own SIGPIPE was forwarded; lost: USR1 was not"
    );
}
