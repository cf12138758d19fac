//! Awaiting input (docs/tools.md, "Awaiting input"): `wait` until
//! `{"input": true}`, and `awaiting_input: true` in `status` and
//! `list_jobs`, on every target.
//!
//! The negatives are the known false positives of every other tool: a
//! sleeping job, a TCP connect that is never answered, a shell waiting on
//! its child, a read of a file that is not the job's stdin, a shell reading
//! fd 0 pointed at another pipe (`read <&3`). Each waits a second and a
//! half for input and must end at the timeout with the job still running
//! and nothing reported. The positives (`read`, `python3 input()`, a
//! password prompt, a `[Y/n]` prompt) must be reported, and then the input
//! they get must end them with what they read, so a report cannot come from
//! a job that was not reading. A program a target lacks (`python3` and
//! `bash` in the scratch image) is skipped with a printed reason.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{LATEST, Server, Target};

/// How long a negative waits for input that must not be reported.
const NEGATIVE_WAIT: f64 = 1.5;

fn started(t: Target) -> Server {
    Server::started_in(t, &[], LATEST)
}

/// `wait` for `id` until it awaits input, for up to `timeout` seconds.
fn wait_input(s: &mut Server, id: &str, timeout: f64) -> Value {
    s.call(
        "wait",
        json!({"job_ids": [id], "timeout": timeout, "until": {"input": true}}),
    )
}

/// How a job runs: on pipes, or on a terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum On {
    Pipes,
    Terminal,
}

/// Starts `command` with `nowait`, on pipes or a terminal.
fn spawn(s: &mut Server, command: &str, on: On) -> String {
    let r = s.call(
        "execute",
        json!({"command": command, "nowait": true, "tty": on == On::Terminal}),
    );
    r["job_id"].as_str().expect("job_id").to_owned()
}

/// A running job's status as `on` shows it: a terminal job says `tty`.
fn running(id: &str, on: On, awaiting: bool) -> Value {
    let mut v = json!({"job_id": id, "state": "running"});
    if on == On::Terminal {
        v["tty"] = json!(true);
    }
    if awaiting {
        v["awaiting_input"] = json!(true);
    }
    v
}

/// Requires `command` to be reported as awaiting input by `wait`, `status`
/// and `list_jobs` (a terminal job's wait entry with its screen, whose
/// rows hold `shown`); then sends `answer` and returns the job's result.
fn reported_then_answered(
    s: &mut Server,
    command: &str,
    on: On,
    shown: &str,
    answer: &str,
) -> Value {
    let id = spawn(s, command, on);
    let mut r = wait_input(s, &id, 15.0);
    if on == On::Terminal {
        let screen = r[0]
            .as_object_mut()
            .and_then(|e| e.remove("screen"))
            .unwrap_or_else(|| panic!("{command}: no screen in {r}"));
        let text = screen["lines"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default();
        assert!(text.contains(shown), "{command}: {shown:?} not on {screen}");
    }
    assert_eq!(r, json!([running(&id, on, true)]), "{command}");
    assert_eq!(
        s.call("status", json!({"job_id": id})),
        running(&id, on, true),
        "{command}"
    );
    let listed = s.call("list_jobs", json!({}));
    assert_eq!(listed["jobs"].as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed["jobs"][0]["awaiting_input"], json!(true), "{listed}");
    s.call("input", json!({"job_id": id, "data": answer}));
    let r = s.call("wait", json!({"job_ids": [id], "timeout": 15}));
    assert_eq!(r[0]["state"], json!("success"), "{command}: {r}");
    r[0].clone()
}

/// Requires the running job `id` not to be reported while it waits
/// [`NEGATIVE_WAIT`] seconds for input, nor by `status` after.
fn never_reported_on(s: &mut Server, id: &str, on: On, what: &str) {
    let r = wait_input(s, id, NEGATIVE_WAIT);
    assert_eq!(
        r,
        json!([running(id, on, false)]),
        "{what}: reported as awaiting input, or not running"
    );
    assert_eq!(
        s.call("status", json!({"job_id": id})),
        running(id, on, false),
        "{what}"
    );
    let listed = s.call("list_jobs", json!({}));
    assert_eq!(listed["jobs"].as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed["jobs"][0]["job_id"], json!(id), "{listed}");
    assert!(
        listed["jobs"][0].get("awaiting_input").is_none(),
        "{what}: {listed}"
    );
}

fn never_reported(s: &mut Server, id: &str, what: &str) {
    never_reported_on(s, id, On::Pipes, what);
}

/// Whether `program` exists in `t` (asked of the target itself).
fn has(s: &mut Server, program: &str) -> bool {
    let r = s.exec(&format!("command -v {program}"));
    r["exit_code"] == json!(0)
}

/// Whether `bash` is GNU bash (with `/dev/tcp`), not the scratch image's
/// shim that runs busybox's `sh` under that name (images/shims/bash).
fn has_gnu_bash(s: &mut Server) -> bool {
    let r = s.exec("bash -c 'echo ${BASH_VERSION:+gnu}'");
    r["stdout"]["data"]
        .as_str()
        .is_some_and(|o| o.trim() == "gnu")
}

fn skipped(t: Target, program: &str) {
    eprintln!("SKIPPED on {t:?}: no {program} in this target");
}

// ---------------------------------------------------------------------------
// false positives: none
// ---------------------------------------------------------------------------

fn sleep_is_not_reported(t: Target, on: On) {
    let mut s = started(t);
    let id = spawn(&mut s, "sleep 5", on);
    never_reported_on(&mut s, &id, on, "sleep 5");
}

fn shell_waiting_on_a_child_is_not_reported(t: Target, on: On) {
    let mut s = started(t);
    let id = spawn(&mut s, "sleep 5; echo done", on);
    never_reported_on(&mut s, &id, on, "a shell in wait4");
    let r = s.call("kill", json!({"job_id": id, "signal": "KILL"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    let id = spawn(&mut s, "(sleep 5); echo done", on);
    never_reported_on(&mut s, &id, on, "a shell waiting on a subshell");
}

/// A loopback listener nobody accepts on, its queue filled: a connect to
/// it is never answered (its SYNs are dropped).
struct Blackhole {
    addr: SocketAddr,
    _listener: TcpListener,
    _queued: Vec<TcpStream>,
}

impl Blackhole {
    fn new() -> Blackhole {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut queued = Vec::new();
        loop {
            match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(c) => queued.push(c),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => break,
                Err(e) => panic!("filling the accept queue: {e}"),
            }
            assert!(queued.len() < 10_000, "the accept queue never filled");
        }
        Blackhole {
            addr,
            _listener: listener,
            _queued: queued,
        }
    }
}

fn tcp_connect_never_answered_is_not_reported(t: Target, on: On) {
    let hole = Blackhole::new();
    // A container shares the host's loopback to reach it.
    let mut s = if t.is_container() {
        let mut s = Server::start_with_args(t, &[], &["--network=host"]);
        s.initialize(LATEST);
        s
    } else {
        started(t)
    };
    let port = hole.addr.port();
    let connect = if has_gnu_bash(&mut s) {
        format!("exec bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}'")
    } else {
        format!("exec nc 127.0.0.1 {port}")
    };
    let id = spawn(&mut s, &connect, on);
    never_reported_on(&mut s, &id, on, &connect);
}

fn cat_of_dev_null_is_not_reported(t: Target, on: On) {
    let mut s = started(t);
    let id = spawn(&mut s, "cat < /dev/null", on);
    let r = wait_input(&mut s, &id, 15.0);
    assert_eq!(r[0]["state"], json!("success"), "it ends, unreported: {r}");
    assert!(r[0].get("awaiting_input").is_none(), "{r}");
    // A cat reading another pipe, while the job's stdin is open.
    let id = spawn(&mut s, "sleep 5 | cat", on);
    never_reported_on(&mut s, &id, on, "cat reading a pipe from sleep");
}

fn read_of_fd_3_pointed_at_fd_0_is_not_reported(t: Target, on: On) {
    let mut s = started(t);
    // fd 0 is the job's input until `read <&3` points it at the other pipe.
    let id = spawn(
        &mut s,
        "exec 4<&0; sleep 5 | { exec 3<&0 0<&4; read x <&3; }",
        on,
    );
    never_reported_on(&mut s, &id, on, "read <&3");
}

// ---------------------------------------------------------------------------
// true positives
// ---------------------------------------------------------------------------

fn read_is_reported(t: Target, on: On) {
    let mut s = started(t);
    let r = reported_then_answered(
        &mut s,
        "printf 'name? '; read x; echo \"got $x\"",
        on,
        "name?",
        "hello\n",
    );
    assert!(
        r["stdout"]["data"]
            .as_str()
            .is_some_and(|d| d.ends_with("got hello\n") || d.ends_with("got hello\r\n")),
        "{r}"
    );
}

fn python_input_is_reported(t: Target, on: On) {
    let mut s = started(t);
    if !has(&mut s, "python3") {
        return skipped(t, "python3");
    }
    let r = reported_then_answered(
        &mut s,
        "python3 -c 'print(\"got\", input(\"name? \"))'",
        on,
        "name?",
        "hello\n",
    );
    assert!(
        r["stdout"]["data"]
            .as_str()
            .is_some_and(|d| d.contains("got hello")),
        "{r}"
    );
}

fn password_prompt_is_reported(t: Target, on: On) {
    let mut s = started(t);
    // dash (the host's sh) has no `read -s`; bash and busybox sh do.
    let shell = if has(&mut s, "bash") { "bash" } else { "sh" };
    let r = reported_then_answered(
        &mut s,
        &format!("printf 'Password: '; {shell} -c 'read -s pw; echo \"got ${{#pw}}\"'"),
        on,
        "Password:",
        "secret\n",
    );
    let out = r["stdout"]["data"].as_str().unwrap_or_default();
    assert!(out.contains("got 6"), "{r}");
    assert!(!out.contains("secret"), "read -s echoed the password: {r}");
}

fn yes_no_prompt_is_reported(t: Target, on: On) {
    let mut s = started(t);
    let r = reported_then_answered(
        &mut s,
        "printf 'Continue? [Y/n] '; read answer; echo \"answer=$answer\"",
        on,
        "Continue? [Y/n]",
        "n\n",
    );
    assert!(
        r["stdout"]["data"]
            .as_str()
            .is_some_and(|d| d.contains("answer=n")),
        "{r}"
    );
    // `read -p`'s own prompt (bash prints it only on a terminal).
    let shell = if has(&mut s, "bash") { "bash" } else { "sh" };
    let r = reported_then_answered(
        &mut s,
        &format!("{shell} -c 'read -p \"Proceed? [Y/n] \" a; echo \"a=$a\"'"),
        on,
        if on == On::Terminal {
            "Proceed? [Y/n]"
        } else {
            ""
        },
        "y\n",
    );
    assert!(
        r["stdout"]["data"]
            .as_str()
            .is_some_and(|d| d.contains("a=y")),
        "{r}"
    );
}

fn a_read_of_dev_tty_on_a_terminal_is_reported_as_awaiting_input(t: Target) {
    let mut s = started(t);
    // What sudo and ssh do for a password: open the controlling terminal.
    let r = reported_then_answered(
        &mut s,
        "printf 'tty? '; read x < /dev/tty; echo \"got $x\"",
        On::Terminal,
        "tty?",
        "yes\n",
    );
    assert!(
        r["stdout"]["data"]
            .as_str()
            .is_some_and(|d| d.contains("got yes")),
        "{r}"
    );
}

fn a_sleeping_job_is_never_reported_as_awaiting_input(t: Target) {
    sleep_is_not_reported(t, On::Pipes);
}
fn a_sleeping_terminal_job_is_never_reported_as_awaiting_input(t: Target) {
    sleep_is_not_reported(t, On::Terminal);
}
fn a_shell_waiting_on_its_child_is_never_reported_as_awaiting_input(t: Target) {
    shell_waiting_on_a_child_is_not_reported(t, On::Pipes);
}
fn a_terminal_shell_waiting_on_its_child_is_never_reported_as_awaiting_input(t: Target) {
    shell_waiting_on_a_child_is_not_reported(t, On::Terminal);
}
fn a_tcp_connect_that_is_never_answered_is_never_reported_as_awaiting_input(t: Target) {
    tcp_connect_never_answered_is_not_reported(t, On::Pipes);
}
fn a_terminal_tcp_connect_that_is_never_answered_is_never_reported_as_awaiting_input(t: Target) {
    tcp_connect_never_answered_is_not_reported(t, On::Terminal);
}
fn cat_of_dev_null_is_never_reported_as_awaiting_input(t: Target) {
    cat_of_dev_null_is_not_reported(t, On::Pipes);
}
fn cat_of_dev_null_on_a_terminal_is_never_reported_as_awaiting_input(t: Target) {
    cat_of_dev_null_is_not_reported(t, On::Terminal);
}
fn a_shell_reading_fd_3_pointed_at_fd_0_is_not_reported_as_awaiting_input(t: Target) {
    read_of_fd_3_pointed_at_fd_0_is_not_reported(t, On::Pipes);
}
fn a_terminal_shell_reading_fd_3_pointed_at_fd_0_is_not_reported_as_awaiting_input(t: Target) {
    read_of_fd_3_pointed_at_fd_0_is_not_reported(t, On::Terminal);
}
fn a_shell_read_is_reported_as_awaiting_input_and_ends_with_the_line(t: Target) {
    read_is_reported(t, On::Pipes);
}
fn a_shell_read_on_a_terminal_is_reported_with_its_screen_and_ends_with_the_line(t: Target) {
    read_is_reported(t, On::Terminal);
}
fn python_input_is_reported_as_awaiting_input(t: Target) {
    python_input_is_reported(t, On::Pipes);
}
fn python_input_on_a_terminal_is_reported_as_awaiting_input(t: Target) {
    python_input_is_reported(t, On::Terminal);
}
fn a_password_prompt_read_s_is_reported_as_awaiting_input(t: Target) {
    password_prompt_is_reported(t, On::Pipes);
}
fn a_password_prompt_read_s_on_a_terminal_is_reported_and_never_echoed(t: Target) {
    password_prompt_is_reported(t, On::Terminal);
}
fn a_yes_no_prompt_is_reported_as_awaiting_input_after_it_is_printed(t: Target) {
    yes_no_prompt_is_reported(t, On::Pipes);
}
fn a_yes_no_prompt_on_a_terminal_is_reported_with_the_prompt_on_its_screen(t: Target) {
    yes_no_prompt_is_reported(t, On::Terminal);
}

// ---------------------------------------------------------------------------
// the wait itself
// ---------------------------------------------------------------------------

fn input_combines_with_a_pattern_and_each_entry_says_which_condition_it_met(t: Target) {
    let mut s = started(t);
    let reader = s.spawn_job("read x");
    let talker = s.spawn_job("echo ready; sleep 5");
    // Each alone first, so that both conditions hold at the combined wait.
    let r = wait_input(&mut s, &reader, 15.0);
    assert_eq!(r[0]["awaiting_input"], json!(true), "{r}");
    let r = s.call(
        "wait",
        json!({"job_ids": [talker], "timeout": 15, "until": {"pattern": "ready"}}),
    );
    assert!(r[0].get("matched").is_some(), "{r}");
    let r = s.call(
        "wait",
        json!({"job_ids": [reader, talker], "timeout": 15,
               "until": {"input": true, "pattern": "ready"}}),
    );
    assert_eq!(
        r,
        json!([
            {"job_id": reader, "state": "running", "awaiting_input": true},
            {"job_id": talker, "state": "running",
             "matched": {"stream": "stdout", "offset": 0, "bytes": 5}}
        ])
    );
}

fn a_job_that_ends_while_waited_for_input_is_delivered(t: Target) {
    let mut s = started(t);
    let id = s.spawn_job("sleep 1; echo bye");
    let r = wait_input(&mut s, &id, 15.0);
    assert_eq!(r[0]["state"], json!("success"), "{r}");
    assert_eq!(r[0]["stdout"]["data"], json!("bye\n"), "{r}");
}

fn a_job_whose_stdin_is_closed_is_never_reported_as_awaiting_input(t: Target) {
    let mut s = started(t);
    // `cat` of a closed stdin exits at once; a shell that reads nothing
    // after its stdin closed is not waiting for it.
    let id = s.spawn_job("read x; sleep 5");
    let r = wait_input(&mut s, &id, 15.0);
    assert_eq!(r[0]["awaiting_input"], json!(true), "{r}");
    s.call("input", json!({"job_id": id, "data": "", "close": true}));
    never_reported(&mut s, &id, "after its stdin was closed");
}

fn until_input_in_a_2024_11_05_session_is_ignored_and_status_has_no_field(t: Target) {
    let mut s = Server::started(t);
    let id = s.spawn_job("read x");
    // Half a second: it would be reported by then in a later revision.
    let r = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 0.5, "until": {"input": true}}),
    );
    assert_eq!(r, json!([{"job_id": id, "state": "running"}]));
    assert_eq!(
        s.call("status", json!({"job_id": id})),
        json!({"job_id": id, "state": "running"})
    );
}

fn until_input_that_is_not_a_boolean_is_invalid_arguments(t: Target) {
    let mut s = started(t);
    let id = s.spawn_job("read x");
    assert_eq!(
        s.call_err("wait", json!({"job_ids": [id], "until": {"input": "yes"}})),
        "invalid arguments: \"until.input\" must be a boolean"
    );
    assert_eq!(
        s.call_err("wait", json!({"job_ids": [id], "until": {"input": false}})),
        "invalid arguments: \"until\" needs a \"pattern\", a \"quiet\" period, \"input\": true or a \"port\""
    );
}

crate::parity!(
    a_sleeping_job_is_never_reported_as_awaiting_input,
    a_sleeping_terminal_job_is_never_reported_as_awaiting_input,
    a_shell_waiting_on_its_child_is_never_reported_as_awaiting_input,
    a_terminal_shell_waiting_on_its_child_is_never_reported_as_awaiting_input,
    a_tcp_connect_that_is_never_answered_is_never_reported_as_awaiting_input,
    a_terminal_tcp_connect_that_is_never_answered_is_never_reported_as_awaiting_input,
    cat_of_dev_null_is_never_reported_as_awaiting_input,
    cat_of_dev_null_on_a_terminal_is_never_reported_as_awaiting_input,
    a_shell_reading_fd_3_pointed_at_fd_0_is_not_reported_as_awaiting_input,
    a_terminal_shell_reading_fd_3_pointed_at_fd_0_is_not_reported_as_awaiting_input,
    a_shell_read_is_reported_as_awaiting_input_and_ends_with_the_line,
    a_shell_read_on_a_terminal_is_reported_with_its_screen_and_ends_with_the_line,
    python_input_is_reported_as_awaiting_input,
    python_input_on_a_terminal_is_reported_as_awaiting_input,
    a_password_prompt_read_s_is_reported_as_awaiting_input,
    a_password_prompt_read_s_on_a_terminal_is_reported_and_never_echoed,
    a_yes_no_prompt_is_reported_as_awaiting_input_after_it_is_printed,
    a_yes_no_prompt_on_a_terminal_is_reported_with_the_prompt_on_its_screen,
    a_read_of_dev_tty_on_a_terminal_is_reported_as_awaiting_input,
    input_combines_with_a_pattern_and_each_entry_says_which_condition_it_met,
    a_job_that_ends_while_waited_for_input_is_delivered,
    a_job_whose_stdin_is_closed_is_never_reported_as_awaiting_input,
    until_input_in_a_2024_11_05_session_is_ignored_and_status_has_no_field,
    until_input_that_is_not_a_boolean_is_invalid_arguments,
);
