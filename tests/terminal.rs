//! Terminal jobs (docs/tools.md, "Terminal jobs") end to end: a job on a
//! pseudo-terminal (`execute {tty: true}`), its one output stream with
//! absolute offsets and windows, `TERM` and the window size, `resize` (the
//! size `stty` reads, SIGWINCH), `keys`, `close` as `C-d`, `kill` reaching
//! the job's whole session, the `screen` tool on running and ended jobs and
//! in the delivered result, the errors, and revision gating.
//!
//! Every wait is `wait … until` a pattern in the job's output: no fixed
//! sleep anywhere.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::support::{LATEST, Server, Target};

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// A `sleep` duration no other process on this machine uses (the whole
/// part, 47, is this module's own).
fn marker() -> String {
    format!(
        "47.{}{:04}",
        std::process::id(),
        MARKERS.fetch_add(1, Ordering::Relaxed)
    )
}

/// A server of `t` in the latest revision, `/bin/sh` as its shell.
fn server(t: Target) -> Server {
    Server::started_in(t, &[("SHELL", "/bin/sh")], LATEST)
}

/// Starts a `nowait` terminal job (with `extra` arguments) and returns its id.
fn spawn_tty(s: &mut Server, command: &str, extra: Value) -> String {
    let mut args = json!({"command": command, "tty": true, "nowait": true});
    if let (Some(a), Value::Object(extra)) = (args.as_object_mut(), extra) {
        a.extend(extra);
    }
    let r = s.call("execute", args);
    assert_eq!(r["tty"], json!(true), "{r}");
    r["job_id"].as_str().expect("job_id").to_owned()
}

/// Waits (at most 10 s) until job `id`'s output matches `pattern`; panics
/// with the job's output if it never does.
fn wait_for_output(s: &mut Server, id: &str, pattern: &str) -> Value {
    let r = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 10, "until": {"pattern": pattern}}),
    );
    let entry = r[0].clone();
    if entry.get("matched").is_none() {
        let out = s.call("output", json!({"job_id": id, "stdout": "all"}));
        panic!("{pattern:?} never appeared in {id}: {entry} {out}");
    }
    entry
}

/// The whole retained stdout of job `id`.
fn stdout_of(s: &mut Server, id: &str) -> String {
    let r = s.call("output", json!({"job_id": id, "stdout": "all"}));
    r["stdout"]["data"].as_str().unwrap_or_default().to_owned()
}

fn a_tty_job_has_a_terminal_on_0_1_and_2_with_term_and_the_default_size(t: Target) {
    let mut s = server(t);
    let r = s.call(
        "execute",
        json!({"command": "[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo all-ttys; echo \"TERM=$TERM\"; stty size; echo oops >&2", "tty": true}),
    );
    assert_eq!(r["state"], json!("success"), "{r}");
    assert_eq!(r["tty"], json!(true), "{r}");
    let out = r["stdout"]["data"].as_str().unwrap();
    // The terminal's line discipline turns \n into \r\n (ONLCR).
    assert_eq!(
        out, "all-ttys\r\nTERM=xterm-256color\r\n40 120\r\noops\r\n",
        "{r}"
    );
    assert!(
        r.get("stderr").is_none(),
        "stderr is empty and not captured: {r}"
    );
}

fn a_pipe_job_has_no_terminal_and_no_tty_field(t: Target) {
    let mut s = server(t);
    let r = s.call(
        "execute",
        json!({"command": "if [ -t 0 ] || [ -t 1 ]; then echo tty; else echo pipes; fi", "tty": false}),
    );
    assert_eq!(r["stdout"]["data"], json!("pipes\n"), "{r}");
    assert!(r.get("tty").is_none(), "{r}");
    let id = s.spawn_job("sleep 30");
    let st = s.call("status", json!({"job_id": id}));
    assert!(st.get("tty").is_none(), "{st}");
    s.call("kill", json!({"job_id": id}));
}

fn cols_rows_and_term_are_the_jobs_own_when_given(t: Target) {
    let mut s = server(t);
    let r = s.call(
        "execute",
        json!({"command": "echo \"$TERM\"; stty size", "tty": true, "cols": 90, "rows": 20, "env": {"TERM": "vt100"}}),
    );
    assert_eq!(r["stdout"]["data"], json!("vt100\r\n20 90\r\n"), "{r}");
}

fn a_tty_jobs_output_is_stdout_with_absolute_offsets_and_a_window(t: Target) {
    let mut s = server(t);
    // 300 lines of "line N\r\n" with a window of 100 bytes.
    let r = s.call(
        "execute",
        json!({"command": "i=0; while [ $i -lt 300 ]; do echo line $i; i=$((i+1)); done", "tty": true, "max_output_bytes": 100}),
    );
    assert_eq!(r["state"], json!("success"), "{r}");
    let total: u64 = (0..300)
        .map(|i: u64| format!("line {i}\r\n").len() as u64)
        .sum();
    assert_eq!(r["stdout"]["total_bytes"], json!(total), "{r}");
    assert_eq!(r["stdout"]["offset"], json!(total - 100), "{r}");
    assert!(
        r["stdout"]["data"]
            .as_str()
            .unwrap()
            .ends_with("line 299\r\n"),
        "{r}"
    );

    // A running job: read at absolute offsets, as for pipes.
    let id = spawn_tty(&mut s, "echo abcdefghij; echo done; cat", json!({}));
    wait_for_output(&mut s, &id, "done");
    let r = s.call(
        "output",
        json!({"job_id": id, "stdout": {"from": 3, "length": 4}, "stderr": "all"}),
    );
    assert_eq!(r["stdout"]["data"], json!("defg"), "{r}");
    assert_eq!(r["stdout"]["offset"], json!(3), "{r}");
    assert_eq!(r["stderr"]["total_bytes"], json!(0), "{r}");
    let r = s.call("output", json!({"job_id": id, "stdout": {"tail": 1}}));
    assert_eq!(r["stdout"]["data"], json!("done\r\n"), "{r}");
    s.call("kill", json!({"job_id": id}));
}

fn stty_size_follows_resize_and_the_foreground_group_gets_sigwinch(t: Target) {
    let mut s = server(t);
    let id = spawn_tty(
        &mut s,
        // `read` interrupted by the trap fails in dash: the loop goes on.
        "trap 'echo got-WINCH' WINCH; echo ready; while :; do read l && eval \"$l\"; done",
        json!({}),
    );
    wait_for_output(&mut s, &id, "ready");
    let st = s.call(
        "input",
        json!({"job_id": id, "resize": {"cols": 100, "rows": 50}}),
    );
    assert_eq!(st["tty"], json!(true), "{st}");
    s.call("input", json!({"job_id": id, "data": "stty size\n"}));
    wait_for_output(&mut s, &id, "\r\n50 100\r\n");
    // The trap ran: the shell, in the terminal's foreground group, got SIGWINCH.
    assert!(
        stdout_of(&mut s, &id).contains("got-WINCH"),
        "{}",
        stdout_of(&mut s, &id)
    );
    s.call(
        "input",
        json!({"job_id": id, "resize": {"cols": 33, "rows": 11}, "data": "stty size\n"}),
    );
    wait_for_output(&mut s, &id, "\r\n11 33\r\n");
    s.call("kill", json!({"job_id": id}));
}

fn close_sends_c_d_and_cat_ends_at_that_eof(t: Target) {
    let mut s = server(t);
    let id = spawn_tty(&mut s, "cat; echo cat-ended", json!({}));
    s.call(
        "input",
        json!({"job_id": id, "data": "hello\n", "close": true}),
    );
    let r = s.call("wait", json!({"job_ids": [id], "timeout": 10}));
    let r = &r[0];
    assert_eq!(r["state"], json!("success"), "{r}");
    // Echoed by the terminal, then written back by cat, then the shell's line.
    assert_eq!(
        r["stdout"]["data"],
        json!("hello\r\nhello\r\ncat-ended\r\n"),
        "{r}"
    );
}

fn kill_ends_the_session_including_a_background_child(t: Target) {
    let mut s = server(t);
    let m = marker();
    let id = spawn_tty(
        &mut s,
        &format!("sleep {m} & echo started; wait"),
        json!({}),
    );
    wait_for_output(&mut s, &id, "started");
    let r = s.call("kill", json!({"job_id": id}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    assert_eq!(r["result"]["tty"], json!(true), "{r}");
    let left = s.exec(&format!("pgrep -f '[s]leep {m}' || echo none"));
    assert_eq!(left["stdout"]["data"], json!("none\n"), "{left}");
}

fn kill_reaches_the_groups_of_a_job_control_shell(t: Target) {
    let mut s = server(t);
    let (m1, m2) = (marker(), marker());
    // An interactive shell on a terminal has job control: each background
    // job gets a process group of its own inside the job's session.
    let id = spawn_tty(&mut s, "exec /bin/sh -i", json!({"env": {"PS1": "$ "}}));
    s.call(
        "input",
        json!({"job_id": id, "data": format!("sleep {m1} & sleep {m2} & echo bg-$((1+1))\n")}),
    );
    wait_for_output(&mut s, &id, "bg-2");
    // Both sleeps run (once both have executed), each in a group of its own.
    let mut pgids = Vec::new();
    let both = crate::support::wait_for(crate::support::TIMEOUT, || {
        let groups = s.exec(&format!(
            "for p in $(pgrep -f '[s]leep {m1}|[s]leep {m2}'); do cut -d' ' -f5 /proc/$p/stat; done"
        ));
        // The pgid is field 5 of /proc/PID/stat (busybox ps has no -o pgid).
        pgids = groups["stdout"]["data"]
            .as_str()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        pgids.len() == 2
    });
    assert!(both, "{pgids:?}");
    assert_ne!(pgids[0], pgids[1], "{pgids:?}");
    let r = s.call("kill", json!({"job_id": id, "signal": "ASSURED"}));
    assert_eq!(r["terminated"], json!(true), "{r}");
    let left = s.exec(&format!(
        "pgrep -f '[s]leep {m1}|[s]leep {m2}' || echo none"
    ));
    assert_eq!(left["stdout"]["data"], json!("none\n"), "{left}");
}

fn shutdown_ends_the_groups_of_the_job_control_shells_of_every_terminal_job(t: Target) {
    let mut s = server(t);
    let marks = [marker(), marker()];
    for m in &marks {
        let id = spawn_tty(&mut s, "exec /bin/sh -i", json!({"env": {"PS1": "$ "}}));
        // A background job in a group of its own that ignores the hangup the
        // shell's end sends: only shutdown's TERM to that group ends it.
        s.call(
            "input",
            json!({"job_id": id, "data": format!("(trap '' HUP; exec sleep {m}) & echo bg-$((1+1))\n")}),
        );
        wait_for_output(&mut s, &id, "bg-2");
    }
    let pattern = format!("[s]leep {}|[s]leep {}", marks[0], marks[1]);
    let both = crate::support::wait_for(crate::support::TIMEOUT, || {
        let n = s.exec(&format!("pgrep -f '{pattern}' | wc -l"));
        n["stdout"]["data"].as_str().map(str::trim) == Some("2")
    });
    assert!(both, "both background sleeps never ran");
    s.close_stdin();
    let status = s.wait_exit(crate::support::TIMEOUT);
    assert!(
        status.is_some(),
        "the server did not exit after end of input"
    );
    let left = std::process::Command::new("pgrep")
        .args(["-f", &pattern])
        .output()
        .expect("pgrep runs");
    assert!(
        !left.status.success(),
        "left running after shutdown: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

fn keys_reach_the_program_and_cat_echoes_them(t: Target) {
    let mut s = server(t);
    let id = spawn_tty(&mut s, "echo ready; cat", json!({}));
    wait_for_output(&mut s, &id, "ready");
    s.call(
        "input",
        json!({"job_id": id, "data": "typed ", "keys": ["hello", "Space", "world", "Enter"]}),
    );
    // Echoed by the terminal, then written back by cat.
    wait_for_output(&mut s, &id, "typed hello world\r\ntyped hello world\r\n");
    // C-c is the interrupt character: the terminal sends SIGINT.
    s.call("input", json!({"job_id": id, "keys": ["C-c"]}));
    let r = s.call("wait", json!({"job_ids": [id], "timeout": 10}));
    assert_eq!(r[0]["signal_number"], json!(2), "{r}");
}

fn the_screen_shows_a_running_and_an_ended_job_until_delivery(t: Target) {
    let mut s = server(t);
    let id = spawn_tty(
        &mut s,
        "printf '\\033]0;the title\\007'; i=1; while [ $i -le 30 ]; do echo row $i; i=$((i+1)); done; echo ready; cat",
        json!({"cols": 40, "rows": 5}),
    );
    wait_for_output(&mut s, &id, "ready");
    let sc = s.call("screen", json!({"job_id": id, "scrollback": 3}));
    assert_eq!(sc["cols"], json!(40), "{sc}");
    assert_eq!(sc["rows"], json!(5), "{sc}");
    assert_eq!(
        sc["lines"],
        json!(["row 28", "row 29", "row 30", "ready", ""]),
        "{sc}"
    );
    assert_eq!(
        sc["cursor"],
        json!({"row": 4, "col": 0, "visible": true}),
        "{sc}"
    );
    assert_eq!(sc["alternate_screen"], json!(false), "{sc}");
    assert_eq!(sc["title"], json!("the title"), "{sc}");
    assert_eq!(
        sc["scrollback"],
        json!(["row 25", "row 26", "row 27"]),
        "{sc}"
    );
    let total = s.call("output", json!({"job_id": id, "stdout": {"tail": 1}}));
    assert_eq!(sc["offset"], total["stdout"]["total_bytes"], "{sc} {total}");
    // The alternate screen, and resize reaching the screen.
    s.call(
        "input",
        json!({"job_id": id, "resize": {"cols": 20, "rows": 3}, "data": "x\n"}),
    );
    wait_for_output(&mut s, &id, "x\r\nx\r\n");
    let sc = s.call("screen", json!({"job_id": id}));
    assert_eq!(
        (sc["cols"].clone(), sc["rows"].clone()),
        (json!(20), json!(3)),
        "{sc}"
    );
    assert!(sc.get("scrollback").is_none(), "{sc}");
    // Ended, not yet delivered: the screen is still there.
    s.call("input", json!({"job_id": id, "close": true}));
    assert!(
        crate::support::wait_for(crate::support::TIMEOUT, || {
            s.call("status", json!({"job_id": id}))["state"] == json!("success")
        }),
        "the job did not end"
    );
    let ended = s.call("screen", json!({"job_id": id}));
    assert_eq!(ended["lines"][1], json!("x"), "{ended}");
    // Delivery carries the last screen; after it, the job is gone.
    let r = s.call("wait", json!({"job_ids": [id], "timeout": 10}));
    assert_eq!(r[0]["screen"], ended, "{r}");
    let e = s.call_err("screen", json!({"job_id": id}));
    assert_eq!(e, format!("unknown job_id \"{id}\""));
}

fn a_full_screen_program_shows_as_the_alternate_screen(t: Target) {
    let mut s = server(t);
    let id = spawn_tty(
        &mut s,
        "printf '\\033[?1049h\\033[Hfull screen\\n'; echo in-alt; read x; printf '\\033[?1049l'; echo back",
        json!({}),
    );
    wait_for_output(&mut s, &id, "in-alt");
    let sc = s.call("screen", json!({"job_id": id}));
    assert_eq!(sc["alternate_screen"], json!(true), "{sc}");
    assert_eq!(sc["lines"][0], json!("full screen"), "{sc}");
    s.call("input", json!({"job_id": id, "keys": ["Enter"]}));
    let r = s.call("wait", json!({"job_ids": [id], "timeout": 10}));
    assert_eq!(r[0]["screen"]["alternate_screen"], json!(false), "{r}");
}

fn bad_key_names_and_screen_of_a_pipe_job_are_errors_naming_them(t: Target) {
    let mut s = server(t);
    let id = spawn_tty(&mut s, "cat", json!({}));
    let e = s.call_err(
        "input",
        json!({"job_id": id, "keys": ["Enter", "C-NoSuchKey"]}),
    );
    assert!(e.contains("\"C-NoSuchKey\""), "{e}");
    let e = s.call_err("input", json!({"job_id": id, "keys": ["F99"]}));
    assert!(e.contains("\"F99\""), "{e}");
    let e = s.call_err("input", json!({"job_id": id, "keys": "Enter"}));
    assert!(e.contains("\"keys\" must be an array of strings"), "{e}");
    // A refused item sends nothing, not even the valid items before it.
    let out = s.call("output", json!({"job_id": id, "stdout": "all"}));
    assert_eq!(out["stdout"]["total_bytes"], json!(0), "{out}");
    s.call("kill", json!({"job_id": id}));
    let pipe = s.spawn_job("sleep 30");
    let e = s.call_err("screen", json!({"job_id": pipe}));
    assert_eq!(
        e,
        format!("job \"{pipe}\" has no terminal (start it with \"tty\": true)")
    );
    s.call("kill", json!({"job_id": pipe}));
}

fn resize_of_a_pipe_job_and_bad_terminal_arguments_are_clear_errors(t: Target) {
    let mut s = server(t);
    let id = s.spawn_job("sleep 30");
    let e = s.call_err(
        "input",
        json!({"job_id": id, "resize": {"cols": 80, "rows": 24}}),
    );
    assert_eq!(
        e,
        format!("job \"{id}\" has no terminal (start it with \"tty\": true)")
    );
    s.call("kill", json!({"job_id": id}));
    let e = s.call_err("execute", json!({"command": "true", "cols": 80}));
    assert!(
        e.contains("need \\\"tty\\\": true") || e.contains("need \"tty\": true"),
        "{e}"
    );
    let e = s.call_err(
        "execute",
        json!({"command": "true", "tty": true, "rows": 0}),
    );
    assert!(e.contains("between 1 and 1000"), "{e}");
    let e = s.call_err(
        "execute",
        json!({"command": "true", "tty": true, "shell_session": "x"}),
    );
    assert!(
        e.contains("\"tty\" cannot be combined with \"shell_session\""),
        "{e}"
    );
    let id = spawn_tty(&mut s, "cat", json!({}));
    let e = s.call_err("input", json!({"job_id": id, "resize": {"cols": 80}}));
    assert!(e.contains("\"resize\" must be"), "{e}");
    s.call("kill", json!({"job_id": id}));
}

fn a_tty_job_of_another_user_can_reopen_its_terminal_by_name(t: Target) {
    let mut s = server(t);
    // As `ssh` and `sudo` do: open the terminal by the name `tty` prints.
    let r = s.call(
        "execute",
        json!({"command": "id -u; echo via-name > \"$(tty)\"", "tty": true, "user": "nobody"}),
    );
    assert_eq!(r["state"], json!("success"), "{r}");
    assert_eq!(r["stdout"]["data"], json!("65534\r\nvia-name\r\n"), "{r}");
}

fn a_2024_11_05_session_ignores_tty(t: Target) {
    let mut s = Server::started_in(t, &[("SHELL", "/bin/sh")], "2024-11-05");
    let r = s.call(
        "execute",
        json!({"command": "if [ -t 1 ]; then echo tty; else echo pipes; fi", "tty": true}),
    );
    assert_eq!(r["stdout"]["data"], json!("pipes\n"), "{r}");
    assert!(r.get("tty").is_none(), "{r}");
}

crate::parity!(
    a_tty_job_has_a_terminal_on_0_1_and_2_with_term_and_the_default_size,
    a_pipe_job_has_no_terminal_and_no_tty_field,
    cols_rows_and_term_are_the_jobs_own_when_given,
    a_tty_jobs_output_is_stdout_with_absolute_offsets_and_a_window,
    stty_size_follows_resize_and_the_foreground_group_gets_sigwinch,
    close_sends_c_d_and_cat_ends_at_that_eof,
    kill_ends_the_session_including_a_background_child,
    kill_reaches_the_groups_of_a_job_control_shell,
    shutdown_ends_the_groups_of_the_job_control_shells_of_every_terminal_job,
    resize_of_a_pipe_job_and_bad_terminal_arguments_are_clear_errors,
    keys_reach_the_program_and_cat_echoes_them,
    the_screen_shows_a_running_and_an_ended_job_until_delivery,
    a_full_screen_program_shows_as_the_alternate_screen,
    bad_key_names_and_screen_of_a_pipe_job_are_errors_naming_them,
    a_tty_job_of_another_user_can_reopen_its_terminal_by_name,
    a_2024_11_05_session_ignores_tty,
);
