//! Init mode (docs/pid1.md) side by side with tini: every case runs the same
//! command under `mcp-exec --` and under `tini --` (Debian's `tini-static`),
//! both bare (tini with `-s`, as mcp-exec makes itself a subreaper) and as a
//! real PID 1 under `unshare --pid --fork --mount-proc`, and asserts that
//! both give the expected exit code (and output, where the case is about
//! output). Signals are sent to the init by the command itself (`$PPID` is
//! the init in both places): from the init's point of view another process.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{self, binary, require};

/// How long one case may take before the test fails.
const CASE_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the init runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// A plain child of the test (subreaper).
    Bare,
    /// PID 1 of a new pid namespace.
    Pid1,
}

impl Place {
    fn available(self) -> bool {
        match self {
            Place::Bare => true,
            Place::Pid1 => support::Target::Pid1.available(),
        }
    }
}

/// The init under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Init {
    McpExec,
    Tini,
}

fn tini() -> Option<&'static str> {
    ["/usr/bin/tini-static", "/usr/bin/tini"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
}

/// The inits to compare: mcp-exec, and tini when installed (skipped with a
/// reason, or failing in CI, when not).
fn inits() -> Vec<Init> {
    let mut v = vec![Init::McpExec];
    if require(tini().ok_or("not installed".to_owned()).map(|_| ()), "tini") {
        v.push(Init::Tini);
    }
    v
}

/// What a run produced.
#[derive(Debug)]
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `argv` under `init` in `place` with `stdin` as its input; fails the
/// test if it takes longer than [`CASE_TIMEOUT`].
fn run_with(
    place: Place,
    init: Init,
    argv: &[&str],
    stdin: &[u8],
    env: &[(&str, &str)],
) -> Outcome {
    let mut words: Vec<String> = Vec::new();
    if place == Place::Pid1 {
        words.extend(["unshare", "--pid", "--fork", "--mount-proc"].map(String::from));
    }
    match init {
        Init::McpExec => words.push(binary().to_owned()),
        Init::Tini => {
            words.push(tini().expect("tini").to_owned());
            if place == Place::Bare {
                words.push("-s".into());
            }
        }
    }
    words.push("--".into());
    words.extend(argv.iter().map(|s| (*s).to_owned()));
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    run_words(&words, init, stdin, env)
}

/// Runs `words` (an init and its command line) with `stdin` as its input;
/// fails the test if it takes longer than [`CASE_TIMEOUT`].
fn run_words(words: &[&str], init: Init, stdin: &[u8], env: &[(&str, &str)]) -> Outcome {
    let mut cmd = Command::new(words[0]);
    cmd.args(&words[1..]).envs(env.iter().copied());
    // Only mcp-exec is asked to reset what it inherited (issue 19 §5).
    let (mut cmd, mark) = support::guard::prepare(cmd, init == Init::McpExec);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own group, so that a timeout can kill the init and what it ran.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().expect("spawning the init");
    let _ended = mark.guard(child.id());
    {
        use std::io::Write;
        let mut input = child.stdin.take().expect("stdin");
        let _ = input.write_all(stdin);
    }
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut status = None;
    let done = support::wait_for(CASE_TIMEOUT, || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    if !done {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", child.id())])
            .status();
        let _ = child.wait();
        panic!("{words:?} did not end within {CASE_TIMEOUT:?}");
    }
    Outcome {
        code: status.and_then(|s| s.code()),
        stdout: reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

/// Asserts that `sh -c script` ends with `expected` under every init.
fn same_code(place: Place, script: &str, expected: i32) {
    for init in inits() {
        let out = run_with(place, init, &["sh", "-c", script], b"", &[]);
        assert_eq!(
            out.code,
            Some(expected),
            "{init:?} in {place:?}: `{script}`: {out:?}"
        );
    }
}

fn the_command_s_exit_code_is_the_init_s(place: Place) {
    same_code(place, "exit 3", 3);
}

fn death_by_sigkill_exits_137(place: Place) {
    same_code(place, "kill -KILL $$", 137);
}

/// The trap sleeps before exiting: the init must neither end on SIGTERM
/// nor kill the command, only pass the signal on and wait.
fn sigterm_to_the_init_goes_to_the_command_and_does_not_end_the_init(place: Place) {
    same_code(
        place,
        "trap 'sleep 0.3; exit 42' TERM; kill -TERM $PPID; while :; do sleep 0.05; done",
        42,
    );
}

fn sigint_to_the_init_goes_to_the_command(place: Place) {
    same_code(
        place,
        "trap 'exit 43' INT; kill -INT $PPID; while :; do sleep 0.05; done",
        43,
    );
}

/// Started as under `nohup` or from a backgrounding script (issue 19 §5):
/// mcp-exec inherits HUP, INT and QUIT ignored, and its command must not,
/// or the command's shell could not trap INT (a non-interactive shell
/// cannot trap a signal ignored when it started) and would sleep, exit 1.
fn sigint_goes_to_the_command_of_an_init_started_with_hup_int_and_quit_ignored(place: Place) {
    let mut words = vec!["sh", "-c", "trap '' HUP INT QUIT; exec \"$0\" \"$@\""];
    if place == Place::Pid1 {
        words.extend(["unshare", "--pid", "--fork", "--mount-proc"]);
    }
    words.extend([
        binary(),
        "--",
        "sh",
        "-c",
        "trap 'exit 43' INT; kill -INT $PPID; sleep 5; exit 1",
    ]);
    let out = run_words(&words, Init::McpExec, b"", &[]);
    assert_eq!(out.code, Some(43), "{place:?}: {out:?}");
}

fn sigusr1_to_the_init_goes_to_the_command(place: Place) {
    same_code(
        place,
        "trap 'exit 10' USR1; kill -USR1 $PPID; while :; do sleep 0.05; done",
        10,
    );
}

fn sigpipe_sent_by_another_process_goes_to_the_command(place: Place) {
    same_code(
        place,
        "trap 'exit 11' PIPE; kill -PIPE $PPID; while :; do sleep 0.05; done",
        11,
    );
}

/// A double fork leaves `sleep 0.6` orphaned: it must be re-parented to the
/// init (exit 5 otherwise) and, once it exits, reaped (exit 6: a zombie
/// child of the init is left).
const ORPHAN_SCRIPT: &str = r#"(sleep 0.6 &); sleep 0.3
ours=
for f in /proc/[0-9]*/stat; do
  read -r pid comm state ppid rest < "$f" 2>/dev/null || continue
  [ "$ppid" = "$PPID" ] && [ "$comm" = "(sleep)" ] && ours=1
done
[ -n "$ours" ] || exit 5
sleep 0.7
for f in /proc/[0-9]*/stat; do
  read -r pid comm state ppid rest < "$f" 2>/dev/null || continue
  [ "$ppid" = "$PPID" ] && [ "$state" = Z ] && exit 6
done
exit 0"#;

fn an_orphan_of_the_command_is_reaped(place: Place) {
    same_code(place, ORPHAN_SCRIPT, 0);
}

fn a_command_that_does_not_exist_exits_127(place: Place) {
    for init in inits() {
        let out = run_with(place, init, &["/nonexistent/command"], b"", &[]);
        assert_eq!(out.code, Some(127), "{init:?} in {place:?}: {out:?}");
        assert!(
            out.stderr.contains("/nonexistent/command"),
            "{init:?} names the command: {out:?}"
        );
    }
}

fn a_command_that_is_not_executable_exits_126(place: Place) {
    let file =
        std::env::temp_dir().join(format!("mcp-exec-initmode-noexec-{}", std::process::id()));
    std::fs::write(&file, "#!/bin/sh\nexit 0\n").expect("writing the file");
    let path = file.to_str().expect("utf-8 path").to_owned();
    for init in inits() {
        let out = run_with(place, init, &[&path], b"", &[]);
        assert_eq!(out.code, Some(126), "{init:?} in {place:?}: {out:?}");
    }
    let _ = std::fs::remove_file(&file);
}

fn the_command_owns_stdin_and_stdout(place: Place) {
    for init in inits() {
        let out = run_with(
            place,
            init,
            &["sh", "-c", "read line; echo \"got $line\"; echo err >&2"],
            b"abc\n",
            &[],
        );
        assert_eq!(out.code, Some(0), "{init:?} in {place:?}: {out:?}");
        assert_eq!(out.stdout, "got abc\n", "{init:?} in {place:?}");
        assert!(
            out.stderr.ends_with("err\n"),
            "{init:?} in {place:?}: {out:?}"
        );
    }
}

/// Field 5 of `/proc/self/stat` (after the command) is the process group.
fn the_command_leads_its_own_process_group(place: Place) {
    same_code(
        place,
        r#"read -r pid comm state ppid pgrp rest < /proc/$$/stat; [ "$pgrp" = "$$" ] && [ "$pgrp" != "$(cut -d' ' -f5 /proc/$PPID/stat)" ]"#,
        0,
    );
}

/// The HTTP token is for mcp-exec only, never the command's (tini passes everything on).
fn the_http_token_does_not_reach_the_command(place: Place) {
    let out = run_with(
        place,
        Init::McpExec,
        &[
            "sh",
            "-c",
            "[ -z \"$MCP_EXEC_HTTP_TOKEN$MCP_EXEC_HTTP_TOKEN_FILE\" ] && [ \"$OTHER\" = kept ]",
        ],
        b"",
        &[
            ("MCP_EXEC_HTTP_TOKEN", "secret"),
            ("MCP_EXEC_HTTP_TOKEN_FILE", "/nonexistent"),
            ("OTHER", "kept"),
        ],
    );
    assert_eq!(out.code, Some(0), "{out:?}");
}

/// The orphan case can fail: under a PID 1 that waits only for its own
/// child (Python's `subprocess.call`), the orphan is left a zombie.
#[test]
fn the_orphan_check_sees_the_zombie_an_init_that_does_not_reap_leaves() {
    if !Place::Pid1.available() {
        return;
    }
    let status = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "python3", "-c"])
        .arg("import subprocess, sys; sys.exit(subprocess.call(['sh', '-c', sys.argv[1]]))")
        .arg(ORPHAN_SCRIPT)
        .status()
        .expect("running python3 under unshare");
    assert_eq!(status.code(), Some(6));
}

/// `mcp-exec --` with nothing after it is a usage error.
#[test]
fn a_double_dash_without_a_command_is_a_usage_error() {
    let mut command = Command::new(binary());
    command.arg("--");
    let out = support::guard::output(command).expect("running mcp-exec");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no command after"));
}

macro_rules! in_both_places {
    ($($name:ident),* $(,)?) => {
        mod bare { $( #[test] fn $name() { super::$name(super::Place::Bare) } )* }
        mod pid1 { $( #[test] fn $name() { if super::Place::Pid1.available() { super::$name(super::Place::Pid1) } } )* }
    };
}

in_both_places!(
    the_command_s_exit_code_is_the_init_s,
    death_by_sigkill_exits_137,
    sigterm_to_the_init_goes_to_the_command_and_does_not_end_the_init,
    sigint_to_the_init_goes_to_the_command,
    sigint_goes_to_the_command_of_an_init_started_with_hup_int_and_quit_ignored,
    sigusr1_to_the_init_goes_to_the_command,
    sigpipe_sent_by_another_process_goes_to_the_command,
    an_orphan_of_the_command_is_reaped,
    a_command_that_does_not_exist_exits_127,
    a_command_that_is_not_executable_exits_126,
    the_command_owns_stdin_and_stdout,
    the_command_leads_its_own_process_group,
    the_http_token_does_not_reach_the_command,
);
