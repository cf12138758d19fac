//! Real interactive programs on a terminal job, driven as an agent drives them (issue 21 item 6):
//! `input` with `keys` and `resize`, the `screen` tool read back. A REPL keeps its state; `vi`
//! edits a file and reports the alternate screen; `top` draws its header; a password typed to
//! `read -s` never reaches the screen; `git add -p` takes an answer; `stty size` follows `resize`;
//! `C-c` interrupts a foreground `sleep`.
//!
//! The images have busybox `vi`, `top` and `sh` (the tini image also `bash`); `python3` and
//! `git` are the host's only, so those tests run on `bare` and `pid1`.
//!
//! No fixed sleep: [`screen_until`] reads the screen, and while it does not show what is
//! wanted, waits (`wait … until`) for the job's next output byte after the offset that screen
//! reflected, so every round ends on an event.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::support::{LATEST, Server, Target};

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// A number no other test process on this machine uses.
fn marker() -> String {
    format!(
        "{}{:04}",
        std::process::id(),
        MARKERS.fetch_add(1, Ordering::Relaxed)
    )
}

fn server(t: Target) -> Server {
    Server::started_in(t, &[("SHELL", "/bin/sh")], LATEST)
}

/// Starts a terminal job of 80×24 running `command` (with `extra` arguments); returns its id.
fn start(s: &mut Server, command: &str, extra: Value) -> String {
    let mut args = json!({"command": command, "tty": true, "cols": 80, "rows": 24, "nowait": true});
    if let (Some(a), Value::Object(extra)) = (args.as_object_mut(), extra) {
        a.extend(extra);
    }
    let r = s.call("execute", args);
    assert_eq!(r["tty"], json!(true), "{r}");
    r["job_id"].as_str().expect("job_id").to_owned()
}

fn keys(s: &mut Server, id: &str, keys: &[&str]) {
    s.call("input", json!({"job_id": id, "keys": keys}));
}

/// The screen's lines as one text, for messages and `contains`.
fn text(view: &Value) -> String {
    view["lines"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Reads job `id`'s screen until `want` holds (at most 20 s); between reads, waits for the
/// job's next output after the offset the last screen reflected. Panics with the screen.
fn screen_until(s: &mut Server, id: &str, what: &str, want: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let view = s.call("screen", json!({"job_id": id}));
        if want(&view) {
            return view;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(
            !left.is_zero(),
            "the screen never showed {what}:\n{}\n{view}",
            text(&view)
        );
        let from = view["offset"].as_u64().expect("offset");
        let r = s.call(
            "wait",
            json!({"job_ids": [id], "timeout": left.as_secs_f64().max(0.1),
                   "until": {"pattern": "(?s).", "from": from}}),
        );
        // The job ended (and was delivered by this wait) or fell silent: its last screen is
        // what there is.
        if r[0].get("matched").is_none() {
            let last = r[0].get("screen").cloned().unwrap_or(view);
            assert!(
                want(&last),
                "the screen never showed {what}:\n{}\n{r}",
                text(&last)
            );
            return last;
        }
    }
}

fn shows(needle: &'static str) -> impl Fn(&Value) -> bool {
    move |v| text(v).contains(needle)
}

/// A line of the screen is exactly `line` (trailing blanks are trimmed by the server).
fn has_line(view: &Value, line: &str) -> bool {
    view["lines"]
        .as_array()
        .is_some_and(|l| l.iter().any(|x| x.as_str() == Some(line)))
}

/// The line the cursor is on.
fn cursor_line(view: &Value) -> &str {
    let row = view["cursor"]["row"].as_u64().unwrap_or(0) as usize;
    view["lines"][row].as_str().unwrap_or_default()
}

/// The shell's prompt is on the cursor's line, alone: the shell waits for a command.
fn at_prompt(view: &Value) -> bool {
    cursor_line(view) == "$"
}

/// An interactive `sh` with the prompt `$ ` (job control on: it has a terminal).
fn shell(s: &mut Server) -> String {
    let id = start(s, "exec /bin/sh -i", json!({"env": {"PS1": "$ "}}));
    screen_until(s, &id, "the prompt", at_prompt);
    id
}

fn python3_i_keeps_state_across_three_inputs(t: Target) {
    let mut s = server(t);
    let id = start(
        &mut s,
        "exec python3 -i -q",
        json!({"env": {"PYTHON_BASIC_REPL": "1"}}),
    );
    screen_until(&mut s, &id, "the >>> prompt", |v| has_line(v, ">>>"));
    keys(&mut s, &id, &["x = 20", "Enter"]);
    screen_until(&mut s, &id, "the second prompt", |v| {
        text(v).matches(">>>").count() == 2
    });
    keys(&mut s, &id, &["y = x + 22", "Enter"]);
    screen_until(&mut s, &id, "the third prompt", |v| {
        text(v).matches(">>>").count() == 3
    });
    keys(&mut s, &id, &["print(f'sum={x + y}')", "Enter"]);
    let view = screen_until(&mut s, &id, "sum=62", |v| has_line(v, "sum=62"));
    let lines = text(&view);
    assert!(
        lines.contains(">>> x = 20\n>>> y = x + 22\n>>> print(f'sum={x + y}')\nsum=62\n>>>"),
        "{lines}"
    );
    keys(&mut s, &id, &["C-d"]);
    let r = s.call("wait", json!({"job_ids": [id], "timeout": 10}));
    assert_eq!(r[0]["state"], json!("success"), "{r}");
}

fn vi_edits_a_file_and_wq_writes_it(t: Target) {
    let mut s = server(t);
    let file = format!("/tmp/mcp-exec-vi-{}.txt", marker());
    s.exec(&format!("printf 'old line\\nsecond\\n' > {file}"));
    let id = start(&mut s, &format!("exec vi {file}"), json!({}));
    screen_until(&mut s, &id, "the file in vi", |v| {
        has_line(v, "old line") && has_line(v, "second")
    });
    // Ex commands only: no Escape, which busybox vi would read together with the next bytes
    // as one escape sequence.
    keys(&mut s, &id, &[":1s/old/new/", "Enter", ":wq", "Enter"]);
    let r = s.call("wait", json!({"job_ids": [id], "timeout": 10}));
    assert_eq!(r[0]["state"], json!("success"), "{r}");
    let written = s.exec(&format!("cat {file}; rm -f {file}"));
    assert_eq!(
        written["stdout"]["data"],
        json!("new line\nsecond\n"),
        "{written}"
    );
}

fn the_alternate_screen_is_reported_while_vi_runs_and_gone_after(t: Target) {
    let mut s = server(t);
    let file = format!("/tmp/mcp-exec-alt-{}.txt", marker());
    s.exec(&format!("echo inside-vi > {file}"));
    let id = shell(&mut s);
    keys(&mut s, &id, &["echo before-vi", "Enter"]);
    screen_until(&mut s, &id, "before-vi", |v| has_line(v, "before-vi"));
    keys(&mut s, &id, &[&format!("vi {file}"), "Enter"]);
    let inside = screen_until(&mut s, &id, "vi on the alternate screen", |v| {
        v["alternate_screen"] == json!(true) && has_line(v, "inside-vi")
    });
    assert!(!text(&inside).contains("before-vi"), "{}", text(&inside));
    keys(&mut s, &id, &[":q!", "Enter"]);
    let after = screen_until(&mut s, &id, "the shell again", |v| {
        v["alternate_screen"] == json!(false) && at_prompt(v)
    });
    let lines = text(&after);
    assert!(
        lines.contains("before-vi"),
        "the primary screen is back: {lines}"
    );
    assert!(!lines.contains("inside-vi"), "{lines}");
    s.call("kill", json!({"job_id": id}));
    s.exec(&format!("rm -f {file}"));
}

fn tops_header_appears_on_the_screen(t: Target) {
    let mut s = server(t);
    let id = start(&mut s, "exec top", json!({}));
    // procps: "top - …", "Tasks:", "MiB Mem :"; busybox: "Mem: …", "CPU: …"; both a PID column.
    let view = screen_until(&mut s, &id, "top's header", |v| {
        let t = text(v);
        t.contains("Mem") && t.lines().any(|l| l.trim_start().starts_with("PID"))
    });
    assert_eq!(view["rows"], json!(24), "{view}");
    keys(&mut s, &id, &["q"]);
    let r = s.call("wait", json!({"job_ids": [id], "timeout": 10}));
    assert_eq!(r[0]["state"], json!("success"), "{r}");
}

fn read_s_gets_a_password_that_never_appears_on_the_screen(t: Target) {
    let mut s = server(t);
    let secret = format!("pw{}x", marker());
    let id = start(
        &mut s,
        // bash, or busybox sh where there is none (the scratch image); dash has no `read -s`.
        "exec \"$(command -v bash || echo sh)\" -c 'read -r -s -p \"Password: \" pw; echo; \
         if [ \"$pw\" = \"$EXPECTED\" ]; then echo password-ok; else echo password-wrong; fi; exec cat'",
        json!({"env": {"EXPECTED": secret}}),
    );
    screen_until(&mut s, &id, "the prompt", shows("Password:"));
    keys(&mut s, &id, &[&secret, "Enter"]);
    let view = screen_until(&mut s, &id, "the check", |v| {
        has_line(v, "password-ok") || has_line(v, "password-wrong")
    });
    assert!(has_line(&view, "password-ok"), "{}", text(&view));
    assert!(!text(&view).contains(&secret), "{}", text(&view));
    let with_scrollback = s.call("screen", json!({"job_id": id, "scrollback": 1000}));
    assert!(
        !with_scrollback.to_string().contains(&secret),
        "{with_scrollback}"
    );
    let raw = s.call("output", json!({"job_id": id, "stdout": "all"}));
    assert!(
        !raw.to_string().contains(&secret),
        "nor in the raw output: {raw}"
    );
    s.call("kill", json!({"job_id": id}));
}

fn git_add_p_is_answered_y(t: Target) {
    let mut s = server(t);
    let dir = format!("/tmp/mcp-exec-git-{}", marker());
    let setup = s.exec(&format!(
        "set -e; mkdir {dir}; cd {dir}; git init -q; git config user.email t@example.com; \
         git config user.name t; printf 'one\\n' > f; git add f; git commit -qm one; \
         printf 'one\\ntwo\\n' > f; echo ok"
    ));
    assert_eq!(setup["stdout"]["data"], json!("ok\n"), "{setup}");
    let id = start(
        &mut s,
        "git add -p && echo add-p-done && git diff --cached --stat && exec cat",
        json!({"cwd": dir, "env": {"GIT_PAGER": "cat", "PAGER": "cat", "GIT_CONFIG_NOSYSTEM": "1"}}),
    );
    screen_until(&mut s, &id, "the hunk prompt", shows("Stage this hunk"));
    keys(&mut s, &id, &["y", "Enter"]);
    let view = screen_until(
        &mut s,
        &id,
        "the staged diff",
        shows("1 file changed, 1 insertion(+)"),
    );
    assert!(has_line(&view, "add-p-done"), "{}", text(&view));
    s.call("kill", json!({"job_id": id}));
    let staged = s.exec(&format!(
        "cd {dir} && git diff --cached --numstat; rm -rf {dir}"
    ));
    assert_eq!(staged["stdout"]["data"], json!("1\t0\tf\n"), "{staged}");
}

fn stty_size_equals_the_last_resize(t: Target) {
    let mut s = server(t);
    let id = shell(&mut s);
    s.call(
        "input",
        json!({"job_id": id, "resize": {"cols": 100, "rows": 30}}),
    );
    s.call(
        "input",
        json!({"job_id": id, "resize": {"cols": 72, "rows": 20}}),
    );
    keys(&mut s, &id, &["stty size", "Enter"]);
    let view = screen_until(&mut s, &id, "20 72", |v| has_line(v, "20 72"));
    assert_eq!(
        (view["cols"].clone(), view["rows"].clone()),
        (json!(72), json!(20)),
        "{view}"
    );
    assert_eq!(view["lines"].as_array().map(Vec::len), Some(20), "{view}");
    s.call("kill", json!({"job_id": id}));
}

fn c_c_interrupts_sleep_100_in_a_pty_shell(t: Target) {
    let mut s = server(t);
    let m = marker();
    let id = shell(&mut s);
    // The child says it is about to become `sleep` (same pid, `exec`), so the C-c below finds
    // it in the foreground whichever it is by then.
    keys(
        &mut s,
        &id,
        &[
            &format!("sh -c 'echo sleeping; exec sleep 100.{m}'"),
            "Enter",
        ],
    );
    screen_until(&mut s, &id, "sleeping", |v| has_line(v, "sleeping"));
    keys(&mut s, &id, &["C-c"]);
    // The interrupt flushes the terminal's input queue: type on only at the new prompt.
    screen_until(&mut s, &id, "the prompt after ^C", |v| {
        text(v).contains("^C") && at_prompt(v)
    });
    keys(&mut s, &id, &["echo back-$((40+2))", "Enter"]);
    screen_until(&mut s, &id, "back-42", |v| has_line(v, "back-42"));
    let left = s.exec(&format!("pgrep -f '[s]leep 100.{m}' || echo none"));
    assert_eq!(left["stdout"]["data"], json!("none\n"), "{left}");
    let st = s.call("status", json!({"job_id": id}));
    assert_eq!(st["state"], json!("running"), "the shell lives on: {st}");
    s.call("kill", json!({"job_id": id}));
}

crate::parity!(
    vi_edits_a_file_and_wq_writes_it,
    the_alternate_screen_is_reported_while_vi_runs_and_gone_after,
    tops_header_appears_on_the_screen,
    read_s_gets_a_password_that_never_appears_on_the_screen,
    stty_size_equals_the_last_resize,
    c_c_interrupts_sleep_100_in_a_pty_shell,
);

/// Tests of programs only the host has (`python3`, `git`): the `bare` and `pid1` targets.
macro_rules! host_programs {
    ($($name:ident),* $(,)?) => {
        mod host_bare { $( #[test] fn $name() { if $crate::support::Target::Bare.available() { super::$name($crate::support::Target::Bare) } } )* }
        mod host_pid1 { $( #[test] fn $name() { if $crate::support::Target::Pid1.available() { super::$name($crate::support::Target::Pid1) } } )* }
    };
}

host_programs!(
    python3_i_keeps_state_across_three_inputs,
    git_add_p_is_answered_y
);
