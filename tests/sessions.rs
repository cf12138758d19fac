//! Shell sessions (docs/tools.md, "Shell sessions") end to end: what
//! carries from one job of a session to the next (cwd, exported variables,
//! unsets), what does not (killed and timed-out jobs, `argv` jobs, other
//! sessions), the serial lane and its `queued_for`, the state descriptor
//! that no descendant holds, the `shell_sessions` tool, revision gating,
//! and a session shared by a stdio and an HTTP client.
//!
//! The carry-over scenarios run under every POSIX shell the target has:
//! dash, bash and busybox ash on the host (bare, PID 1), busybox `/bin/sh`
//! in both images and `/bin/bash` in the tini image.

use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::support::{LATEST, Server, TIMEOUT, Target, wait_for};

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// A `sleep` duration no other process on this machine uses (the whole
/// part, 43, is this module's own), bounded so a leftover does not live long.
fn marker() -> String {
    format!(
        "43.{}{:04}",
        std::process::id(),
        MARKERS.fetch_add(1, Ordering::Relaxed)
    )
}

/// The POSIX shells of a target, as `SHELL` values.
fn shells(t: Target) -> Vec<String> {
    match t {
        // busybox only; the tini image also has bash-static.
        Target::Scratch => return vec!["/bin/sh".into()],
        Target::Tini => return vec!["/bin/sh".into(), "/bin/bash".into()],
        Target::Bare | Target::Pid1 => {}
    }
    // busybox runs as ash only under an applet name: a symlink called `ash`.
    let dir = std::env::temp_dir().join(format!("mcp-exec-sessions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ash = dir.join("ash");
    if !ash.exists() {
        std::os::unix::fs::symlink("/bin/busybox", &ash).unwrap();
    }
    vec![
        "/bin/dash".into(),
        "/bin/bash".into(),
        ash.to_string_lossy().into_owned(),
    ]
}

/// A server of `t` with `SHELL=shell` (and `env`), in the latest revision.
fn started(t: Target, shell: &str, env: &[(&str, &str)]) -> Server {
    let mut all = vec![("SHELL", shell)];
    all.extend_from_slice(env);
    Server::started_in(t, &all, LATEST)
}

/// A blocking `execute` of `command` in session `session`.
fn run(s: &mut Server, session: &str, command: &str) -> Value {
    s.call(
        "execute",
        json!({"command": command, "shell_session": session}),
    )
}

/// The stdout of a blocking `execute` of `command` in session `session`
/// (which must succeed).
fn out(s: &mut Server, session: &str, command: &str) -> String {
    let r = run(s, session, command);
    assert_eq!(r["state"], json!("success"), "{command}: {r}");
    r["stdout"]["data"].as_str().unwrap().to_owned()
}

/// The server's own working directory as a job without a session sees it.
fn home(s: &mut Server) -> String {
    s.exec("pwd")["stdout"]["data"].as_str().unwrap().to_owned()
}

fn cd_and_export_carry_to_the_next_job_in_every_shell(t: Target) {
    for shell in shells(t) {
        let mut s = started(t, &shell, &[]);
        let r = run(&mut s, "a", "cd /tmp; export A=1; B=unexported");
        assert_eq!(r["state"], json!("success"), "{shell}: {r}");
        assert_eq!(
            out(&mut s, "a", "pwd; echo \"$A ${B-none}\""),
            "/tmp\n1 none\n",
            "{shell}"
        );
    }
}

fn exit_n_and_exit_inside_a_function_still_carry_cd_in_every_shell(t: Target) {
    for shell in shells(t) {
        let mut s = started(t, &shell, &[]);
        let r = run(&mut s, "e", "cd /tmp; export E=1; exit 3");
        assert_eq!(r["exit_code"], json!(3), "{shell}: {r}");
        assert_eq!(out(&mut s, "e", "pwd; echo $E"), "/tmp\n1\n", "{shell}");
        let r = run(&mut s, "e", "f() { cd /; exit 4; }; f");
        assert_eq!(r["exit_code"], json!(4), "{shell}: {r}");
        assert_eq!(out(&mut s, "e", "pwd"), "/\n", "{shell}");
        // A user's IFS does not split the epilogue's own expansions.
        let r = run(&mut s, "e", "cd /tmp; IFS=0; f() { exit 10; }; f");
        assert_eq!(r["exit_code"], json!(10), "{shell}: {r}");
        assert_eq!(out(&mut s, "e", "pwd"), "/tmp\n", "{shell}");
        let r = run(&mut s, "e", "cd /; IFS=0; false; (exit 10)");
        assert_eq!(r["exit_code"], json!(10), "{shell}: {r}");
        assert_eq!(out(&mut s, "e", "pwd"), "/\n", "{shell}");
    }
}

fn a_set_e_failure_carries_in_every_shell(t: Target) {
    for shell in shells(t) {
        let mut s = started(t, &shell, &[]);
        let r = run(&mut s, "s", "set -e; cd /tmp; export S=1; false; cd /");
        assert_eq!(r["exit_code"], json!(1), "{shell}: {r}");
        assert_eq!(out(&mut s, "s", "pwd; echo $S"), "/tmp\n1\n", "{shell}");
    }
}

fn a_command_closing_its_stdout_and_stderr_or_all_descriptors_still_carries(t: Target) {
    for shell in shells(t) {
        let mut s = started(t, &shell, &[]);
        run(&mut s, "c", "cd /tmp; exec 1>&- 2>&-");
        assert_eq!(out(&mut s, "c", "pwd"), "/tmp\n", "{shell}");
        run(
            &mut s,
            "c",
            "cd /; exec 0<&- 1>&- 2>&- 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-",
        );
        assert_eq!(out(&mut s, "c", "pwd"), "/\n", "{shell}");
        run(
            &mut s,
            "c",
            "cd /tmp; exec 9>/dev/null; exec >/dev/null 2>&1",
        );
        assert_eq!(out(&mut s, "c", "pwd"), "/tmp\n", "{shell}");
    }
}

fn unset_carries_also_for_a_variable_of_the_servers_environment(t: Target) {
    let mut s = started(t, "/bin/sh", &[("SERVER_VAR", "x")]);
    run(&mut s, "u", "export U=1");
    assert_eq!(out(&mut s, "u", "echo $U $SERVER_VAR"), "1 x\n");
    run(&mut s, "u", "unset U SERVER_VAR");
    assert_eq!(
        out(&mut s, "u", "echo ${U-unset} ${SERVER_VAR-unset}"),
        "unset unset\n"
    );
    // Jobs outside the session still get the server's environment.
    assert_eq!(s.exec("echo $SERVER_VAR")["stdout"]["data"], json!("x\n"));
}

fn values_with_newlines_quotes_and_equals_signs_survive_in_every_shell(t: Target) {
    let value = "a\nb=c 'd' \"e\" \\f $g `h`\t\u{1}";
    for shell in shells(t) {
        let mut s = started(t, &shell, &[]);
        let r = s.call(
            "execute",
            json!({"command": "export M=\"$V\" N=", "shell_session": "v", "env": {"V": value}}),
        );
        assert_eq!(r["state"], json!("success"), "{shell}: {r}");
        assert_eq!(
            out(&mut s, "v", "printf '%s|%s' \"$M\" \"${N-unset}\""),
            format!("{value}|"),
            "{shell}"
        );
    }
}

fn a_killed_job_leaves_the_session_unchanged(t: Target) {
    let mut s = started(t, "/bin/sh", &[]);
    let home = home(&mut s);
    let r = s.call(
        "execute",
        json!({"command": format!("cd /tmp; export K=1; echo ready; sleep {}", marker()),
               "shell_session": "k", "nowait": true}),
    );
    let id = r["job_id"].as_str().unwrap().to_owned();
    let w = s.call(
        "wait",
        json!({"job_ids": [id], "timeout": 15, "until": {"pattern": "ready"}}),
    );
    assert!(w[0].get("matched").is_some(), "{w}");
    let k = s.call("kill", json!({"job_id": id}));
    assert_eq!(k["terminated"], json!(true), "{k}");
    assert_eq!(
        out(&mut s, "k", "pwd; echo ${K-unset}"),
        format!("{home}unset\n")
    );
}

fn a_timed_out_job_leaves_the_session_unchanged(t: Target) {
    let mut s = started(t, "/bin/sh", &[]);
    let home = home(&mut s);
    let r = s.call(
        "execute",
        json!({"command": "cd /tmp; export T=1; sleep 8", "shell_session": "t", "timeout": 1}),
    );
    assert_eq!(r["timed_out"], json!(true), "{r}");
    assert_eq!(
        out(&mut s, "t", "pwd; echo ${T-unset}"),
        format!("{home}unset\n")
    );
}

fn two_sessions_do_not_see_each_other(t: Target) {
    let mut s = started(t, "/bin/sh", &[]);
    let home = home(&mut s);
    run(&mut s, "one", "cd /tmp; export ONE=1");
    run(&mut s, "two", "cd /; export TWO=2");
    assert_eq!(
        out(&mut s, "one", "pwd; echo ${ONE-} ${TWO-unset}"),
        "/tmp\n1 unset\n"
    );
    assert_eq!(
        out(&mut s, "two", "pwd; echo ${ONE-unset} ${TWO-}"),
        "/\nunset 2\n"
    );
    assert_eq!(
        s.exec("pwd; echo ${ONE-unset}")["stdout"]["data"],
        json!(format!("{home}unset\n"))
    );
}

/// `/proc/uptime` in hundredths of a second.
const STAMP: &str = "read u _ < /proc/uptime; echo ${u%.*}${u#*.}";

fn jobs_of_one_session_never_overlap(t: Target) {
    let mut s = started(t, "/bin/sh", &[]);
    let ids: Vec<String> = (0..3)
        .map(|_| {
            let r = s.call(
                "execute",
                json!({"command": format!("{STAMP}; sleep 0.3; {STAMP}"),
                       "shell_session": "serial", "nowait": true}),
            );
            r["job_id"].as_str().unwrap().to_owned()
        })
        .collect();
    let mut spans = Vec::new();
    for id in &ids {
        let w = s.call("wait", json!({"job_ids": [id], "timeout": 15}));
        let text = w[0]["stdout"]["data"].as_str().unwrap().to_owned();
        let v: Vec<u64> = text.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(v.len(), 2, "{text}");
        spans.push((v[0], v[1]));
    }
    for pair in spans.windows(2) {
        assert!(
            pair[0].1 <= pair[1].0,
            "a later job started before the earlier ended: {spans:?}"
        );
    }
}

fn a_job_behind_its_session_is_queued_for_shell_session_without_blocking_others(t: Target) {
    let mut s = started(t, "/bin/sh", &[("MCP_EXEC_MAX_RUNNING", "2")]);
    let first = s.call(
        "execute",
        json!({"command": "read x; echo $x", "shell_session": "q", "nowait": true}),
    )["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let second = s.call(
        "execute",
        json!({"command": "echo second", "shell_session": "q", "nowait": true}),
    );
    assert_eq!(second["state"], json!("queued"), "{second}");
    assert_eq!(second["queued_for"], json!("shell_session"), "{second}");
    let second = second["job_id"].as_str().unwrap().to_owned();
    let listed = s.call("list_jobs", json!({}));
    let entry = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["job_id"] == json!(second))
        .cloned()
        .unwrap();
    assert_eq!(entry["queued_for"], json!("shell_session"), "{listed}");
    // One slot is free: a job outside the session runs at once.
    let other = s.exec("echo other");
    assert_eq!(other["stdout"]["data"], json!("other\n"), "{other}");
    s.call("input", json!({"job_id": first, "data": "go\n"}));
    let w = s.call("wait", json!({"job_ids": [first], "timeout": 15}));
    assert_eq!(w[0]["stdout"]["data"], json!("go\n"), "{w}");
    let w = s.call("wait", json!({"job_ids": [second], "timeout": 15}));
    assert_eq!(w[0]["stdout"]["data"], json!("second\n"), "{w}");
}

fn a_session_job_reading_stdin_gets_eof_and_does_not_wedge_the_session(t: Target) {
    let mut s = started(t, "/bin/sh", &[]);
    let r = s.call(
        "execute",
        json!({"command": "cd /tmp; cat; echo done", "shell_session": "in",
               "stdin": "data\n", "close_stdin": true}),
    );
    assert_eq!(r["stdout"]["data"], json!("data\ndone\n"), "{r}");
    assert_eq!(out(&mut s, "in", "pwd"), "/tmp\n");
}

fn a_jobs_own_cwd_and_env_override_the_session_for_that_job(t: Target) {
    let mut s = started(t, "/bin/sh", &[]);
    run(&mut s, "o", "cd /tmp; export A=1 B=1");
    let r = s.call(
        "execute",
        json!({"command": "pwd; echo $A $B", "shell_session": "o", "cwd": "/", "env": {"A": "2"}}),
    );
    assert_eq!(r["stdout"]["data"], json!("/\n2 1\n"), "{r}");
}

fn an_argv_job_runs_in_the_session_but_leaves_it_unchanged(t: Target) {
    let mut s = started(t, "/bin/sh", &[]);
    run(&mut s, "g", "cd /tmp; export G=1");
    let r = s.call(
        "execute",
        json!({"argv": ["sh", "-c", "pwd; echo $G; cd /; export G=2"], "shell_session": "g"}),
    );
    assert_eq!(r["stdout"]["data"], json!("/tmp\n1\n"), "{r}");
    assert_eq!(out(&mut s, "g", "pwd; echo $G"), "/tmp\n1\n");
}

fn no_descendant_of_a_session_job_holds_the_state_descriptor(t: Target) {
    let mut s = started(t, "/bin/sh", &[]);
    // What the command starts sees no descriptor but its stdio (and the
    // directory `ls` itself opens).
    let fds = out(&mut s, "d", "ls /proc/self/fd");
    let fds: Vec<&str> = fds.split_whitespace().collect();
    assert_eq!(fds, ["0", "1", "2", "3"], "{fds:?}");
    // A background sleep outlives its shell; the job still ends with the
    // shell, its state is adopted, and the sleep holds nothing of ours.
    let m = marker();
    let r = run(&mut s, "d", &format!("cd /tmp; sleep {m} & echo $!"));
    assert_eq!(r["state"], json!("success"), "{r}");
    let pid = r["stdout"]["data"].as_str().unwrap().trim().to_owned();
    assert_eq!(out(&mut s, "d", "pwd"), "/tmp\n");
    // Between its fork and its exec the child is still a shell, with the
    // shell's close-on-exec copy; from its exec on it holds nothing of ours.
    let execed = wait_for(TIMEOUT, || {
        s.exec(&format!("cat /proc/{pid}/comm"))["stdout"]["data"] == json!("sleep\n")
    });
    assert!(execed, "the background job never became sleep");
    let held = s.exec(&format!("ls /proc/{pid}/fd"));
    let held = held["stdout"]["data"].as_str().unwrap().to_owned();
    assert_eq!(
        held.split_whitespace().collect::<Vec<_>>(),
        ["0", "1", "2"],
        "{held}"
    );
    s.exec(&format!("kill {pid}"));
}

fn shell_sessions_lists_shows_names_only_resets_and_closes(t: Target) {
    let mut s = started(t, "/bin/sh", &[]);
    let home = home(&mut s);
    run(&mut s, "b", "true");
    run(&mut s, "a", "cd /tmp; export SECRET=hunter2");
    let list = s.call("shell_sessions", json!({"action": "list"}));
    let names: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["session"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"], "{list}");
    assert_eq!(list["sessions"][0]["cwd"], json!("/tmp"), "{list}");
    assert_eq!(list["sessions"][0]["busy"], json!(false), "{list}");
    let show = s.call("shell_sessions", json!({"action": "show", "session": "a"}));
    assert_eq!(show["cwd"], json!("/tmp"), "{show}");
    let vars: Vec<&str> = show["variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(vars.contains(&"SECRET"), "{show}");
    assert!(!vars.contains(&"PWD") && !vars.contains(&"SHLVL"), "{show}");
    assert!(!show.to_string().contains("hunter2"), "{show}");
    let r = s.call("shell_sessions", json!({"action": "reset", "session": "a"}));
    assert_eq!(r, json!({"session": "a", "reset": true}));
    assert_eq!(
        out(&mut s, "a", "pwd; echo ${SECRET-unset}"),
        format!("{home}unset\n")
    );
    let r = s.call("shell_sessions", json!({"action": "close", "session": "b"}));
    assert_eq!(r, json!({"session": "b", "closed": true}));
    let e = s.call_err("shell_sessions", json!({"action": "show", "session": "b"}));
    assert_eq!(e, "shell session \"b\" does not exist");
    let e = s.call_err("shell_sessions", json!({"action": "close", "session": "b"}));
    assert_eq!(e, "shell session \"b\" does not exist");
    let e = s.call_err("shell_sessions", json!({"action": "explode"}));
    assert!(e.contains("\"action\" must be one of"), "{e}");
}

fn a_sessions_cwd_goes_through_the_cwd_policy_when_its_next_job_starts(t: Target) {
    let mut s = started(
        t,
        "/bin/sh",
        &[
            ("MCP_EXEC_ALLOWED_CWDS", "/tmp"),
            ("MCP_EXEC_DEFAULT_CWD", "/tmp"),
        ],
    );
    run(
        &mut s,
        "p",
        "mkdir -p /tmp/sessions-policy && cd /tmp/sessions-policy",
    );
    assert_eq!(out(&mut s, "p", "pwd; cd /"), "/tmp/sessions-policy\n");
    let r = run(&mut s, "p", "pwd");
    assert_eq!(r["state"], json!("error"), "{r}");
    let why = r["start_error"].as_str().unwrap_or_default();
    assert!(why.contains("outside the allowed directories"), "{r}");
    // Its own cwd still works, and a reset session starts at the default.
    let r = s.call(
        "execute",
        json!({"command": "pwd", "shell_session": "p", "cwd": "/tmp"}),
    );
    assert_eq!(r["stdout"]["data"], json!("/tmp\n"), "{r}");
    s.call("shell_sessions", json!({"action": "reset", "session": "p"}));
    assert_eq!(out(&mut s, "p", "pwd"), "/tmp\n");
}

fn an_idle_session_expires(t: Target) {
    let mut s = started(t, "/bin/sh", &[("MCP_EXEC_SHELL_SESSION_IDLE", "0.5")]);
    run(&mut s, "idle", "cd /tmp");
    let listed =
        |s: &mut Server| s.call("shell_sessions", json!({"action": "list"}))["sessions"].clone();
    assert_eq!(listed(&mut s)[0]["session"], json!("idle"));
    let gone = wait_for(TIMEOUT, || listed(&mut s) == json!([]));
    assert!(gone, "the idle session is still listed");
    let e = s.call_err(
        "shell_sessions",
        json!({"action": "show", "session": "idle"}),
    );
    assert_eq!(e, "shell session \"idle\" does not exist");
}

fn a_bad_session_name_is_refused(t: Target) {
    let mut s = started(t, "/bin/sh", &[]);
    for bad in ["", "a b", "x/y", &"n".repeat(65)] {
        let e = s.call_err("execute", json!({"command": "true", "shell_session": bad}));
        assert!(
            e.contains("\"shell_session\" must be 1-64 characters"),
            "{e}"
        );
    }
}

fn a_2024_11_05_session_ignores_shell_session_and_lists_no_shell_sessions_tool(t: Target) {
    let mut s = Server::started_in(t, &[], "2024-11-05");
    let home = home(&mut s);
    run(&mut s, "old", "cd /tmp");
    assert_eq!(out(&mut s, "old", "pwd"), home);
    let tools = s.request("tools/list", json!({}));
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"shell_sessions"), "{names:?}");
    let id = s.send_call("shell_sessions", json!({"action": "list"}));
    let r = s.response(&id, TIMEOUT);
    assert_eq!(r["error"]["code"], json!(-32601), "{r}");
}

fn a_session_is_shared_by_a_stdio_and_an_http_client(t: Target) {
    let mut s = Server::start_with_cli(t, &[], &["--http", "127.0.0.1:0"]);
    s.initialize(LATEST);
    let mut port = None;
    let found = wait_for(TIMEOUT, || {
        let log = s.stderr.lock().unwrap();
        port = log
            .lines()
            .find_map(|l| l.split_once("listening for HTTP on "))
            .and_then(|(_, addr)| addr.trim().rsplit_once(':'))
            .and_then(|(_, p)| p.parse::<u16>().ok());
        port.is_some()
    });
    assert!(found, "no HTTP port on stderr");
    let server_pid = s.server_host_pid();
    run(&mut s, "shared", "cd /tmp; export H=1");
    let body = json!({"command": "pwd; echo $H; cd /", "shell_session": "shared"}).to_string();
    let reply = crate::support::http::request(
        port.unwrap(),
        "POST",
        "/exec",
        &[("Accept", "text/event-stream")],
        &body,
        TIMEOUT,
    )
    .expect("an HTTP exchange");
    assert_eq!(reply.status, 200, "{reply:?}");
    // The stdout events' data, in order (coalescing may split it).
    let mut stdout = String::new();
    let mut lines = reply.body.lines();
    while let Some(line) = lines.next() {
        if line == "event: stdout"
            && let Some(data) = lines.next().and_then(|l| l.strip_prefix("data: "))
        {
            let v: Value = serde_json::from_str(data).unwrap();
            stdout.push_str(v["data"].as_str().unwrap());
        }
    }
    assert_eq!(stdout, "/tmp\n1\n", "{}", reply.body);
    assert_eq!(out(&mut s, "shared", "pwd"), "/\n");
    if let Some(pid) = server_pid {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

crate::parity!(
    cd_and_export_carry_to_the_next_job_in_every_shell,
    exit_n_and_exit_inside_a_function_still_carry_cd_in_every_shell,
    a_set_e_failure_carries_in_every_shell,
    a_command_closing_its_stdout_and_stderr_or_all_descriptors_still_carries,
    unset_carries_also_for_a_variable_of_the_servers_environment,
    values_with_newlines_quotes_and_equals_signs_survive_in_every_shell,
    a_killed_job_leaves_the_session_unchanged,
    a_timed_out_job_leaves_the_session_unchanged,
    two_sessions_do_not_see_each_other,
    jobs_of_one_session_never_overlap,
    a_job_behind_its_session_is_queued_for_shell_session_without_blocking_others,
    a_session_job_reading_stdin_gets_eof_and_does_not_wedge_the_session,
    a_jobs_own_cwd_and_env_override_the_session_for_that_job,
    an_argv_job_runs_in_the_session_but_leaves_it_unchanged,
    no_descendant_of_a_session_job_holds_the_state_descriptor,
    shell_sessions_lists_shows_names_only_resets_and_closes,
    a_sessions_cwd_goes_through_the_cwd_policy_when_its_next_job_starts,
    an_idle_session_expires,
    a_bad_session_name_is_refused,
    a_2024_11_05_session_ignores_shell_session_and_lists_no_shell_sessions_tool,
);

/// HTTP on the host targets (the container targets would need the port
/// published).
mod http_targets {
    #[test]
    fn a_session_is_shared_by_a_stdio_and_an_http_client_bare() {
        if crate::support::Target::Bare.available() {
            super::a_session_is_shared_by_a_stdio_and_an_http_client(crate::support::Target::Bare);
        }
    }

    #[test]
    fn a_session_is_shared_by_a_stdio_and_an_http_client_pid1() {
        if crate::support::Target::Pid1.available() {
            super::a_session_is_shared_by_a_stdio_and_an_http_client(crate::support::Target::Pid1);
        }
    }
}
