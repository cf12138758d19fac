//! The sandboxd gRPC front-end (`--sandboxd-grpc`, docs/sandboxd.md)
//! driven by real clients: the official agent-sandbox SDK (`k8s-agent-sandbox`,
//! `commands.run` through its `Sandbox` with a stand-in K8sHelper) and a
//! `grpcio` client of the SDK's own stubs, both pinned in
//! interop/sandboxd/requirements.txt and run from that venv by
//! interop/sandboxd/client.py (one JSON line per run). Each test also
//! checks the processes themselves: a job's group dead after a deadline, a
//! signal or a disconnect, no zombie after orphans.
//!
//! Every target: the server listens on loopback (`MCP_EXEC_SANDBOXD_GRPC=
//! 127.0.0.1:0`, the bound port read from stderr); the container targets
//! share the host's network (`--network host`) so the same port is
//! reachable. The sandbox root (`MCP_EXEC_SANDBOXD_ROOT`), where jobs
//! without a `cwd` start, is a fresh directory on the host (the container
//! targets: `/tmp` inside). Processes are found by a unique marker in their command line
//! in the host's /proc, which sees every target's processes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::http::bound_port;
use crate::lifecycle::{host_marker_alive, zombie_count};
use crate::support::{HostPath, LATEST, Server, TIMEOUT, Target, tool_json, wait_for};

/// The sandboxd venv's python, with the SDK and grpcio; `None` (skip) when
/// it is missing here — in CI that fails.
fn python() -> Option<&'static str> {
    crate::support::venv_python(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/interop/sandboxd/.venv/bin/python"
        ),
        "grpc, k8s_agent_sandbox.sandbox",
        "the agent-sandbox SDK venv",
        "--install-python",
    )
}

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/sandboxd/client.py");

/// The working-directory policy a [`Sandboxd`] server gets.
#[derive(Clone, Copy)]
enum Policy {
    /// None: jobs may start anywhere.
    None,
    /// `MCP_EXEC_ALLOWED_CWDS` is the sandbox root alone, and
    /// `MCP_EXEC_DEFAULT_CWD` a directory beneath it (the container
    /// targets: the root), so that what a gRPC `cwd` is relative to shows.
    RootOnly,
}

/// A server with the sandboxd gRPC listener (and MCP on stdio, unless
/// `--no-stdio`).
struct Sandboxd {
    server: Server,
    port: u16,
    python: &'static str,
    /// `MCP_EXEC_SANDBOXD_ROOT`, as the server sees it.
    root: String,
    /// The host directory behind `root`, removed when the test ends.
    _root_dir: Option<HostPath>,
}

impl Sandboxd {
    /// `None` to skip (no venv here).
    fn start(t: Target) -> Option<Sandboxd> {
        Sandboxd::start_with(t, &[], Policy::None)
    }

    /// With server arguments and a cwd policy; `None` to skip.
    fn start_with(t: Target, args: &[&str], policy: Policy) -> Option<Sandboxd> {
        let python = python()?;
        let (root, root_dir) = if t.is_container() {
            ("/tmp".to_owned(), None)
        } else {
            let dir = HostPath::new("sandboxd-grpc-root");
            std::fs::create_dir_all(&dir.0).unwrap();
            (dir.0.clone(), Some(dir))
        };
        let default = if t.is_container() {
            root.clone()
        } else {
            format!("{root}/default")
        };
        let mut all = vec![
            ("MCP_EXEC_SANDBOXD_GRPC", "127.0.0.1:0"),
            ("MCP_EXEC_SANDBOXD_ROOT", root.as_str()),
        ];
        if let Policy::RootOnly = policy {
            if !t.is_container() {
                std::fs::create_dir_all(&default).unwrap();
            }
            all.extend([
                ("MCP_EXEC_ALLOWED_CWDS", root.as_str()),
                ("MCP_EXEC_DEFAULT_CWD", default.as_str()),
            ]);
        }
        let mut server = if t.is_container() {
            Server::start_container(t, &all, &["--network", "host"], args)
        } else {
            Server::start_with_cli(t, &all, args)
        };
        let port = bound_port(&server, "sandboxd gRPC");
        if !args.contains(&"--no-stdio") {
            server.initialize(LATEST);
        }
        Some(Sandboxd {
            server,
            port,
            python,
            root,
            _root_dir: root_dir,
        })
    }

    /// Runs client.py `mode` with `args`; its JSON line.
    fn client(&self, mode: &str, args: &[&str]) -> Value {
        let out = Command::new("timeout")
            .args(["120", self.python, SCRIPT, mode, &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("running the sandboxd client");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "client.py {mode} {args:?}: {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }

    /// The SDK's `commands.run` against this server (REST port: only
    /// configuration, distinct from the gRPC port as the SDK demands).
    fn sdk(&self, mode: &str, args: &[&str]) -> Value {
        let rest = (self.port.wrapping_add(1)).max(1).to_string();
        let mut all = vec![rest.as_str()];
        all.extend_from_slice(args);
        self.client(mode, &all)
    }
}

/// A client process, killed when the test ends (also when it fails).
struct Client(std::process::Child);

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A number no other process's command line has: `sleep <marker>`.
fn marker() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("{}.{:03}{n:03}", 300 + n, std::process::id() % 1000)
}

fn sdk_commands_run_returns_output_exit_code_env_and_cwd(t: Target) {
    let Some(s) = Sandboxd::start(t) else {
        return;
    };
    let dir = "/tmp";
    let r = s.sdk(
        "sdk",
        &[
            "echo hi; echo err >&2; echo \"$GREETING\"; pwd; exit 3",
            r#"{"GREETING": "hello from env"}"#,
            dir,
        ],
    );
    assert_eq!(r["stdout"], json!("hi\nhello from env\n/tmp\n"), "{r}");
    assert_eq!(r["stderr"], json!("err\n"), "{r}");
    assert_eq!(r["exit_code"], json!(3), "{r}");
    let ok = s.sdk("sdk", &["true"]);
    assert_eq!(ok["exit_code"], json!(0), "{ok}");
}

fn sdk_commands_run_without_a_cwd_runs_in_the_sandbox_root_and_a_relative_cwd_under_it(t: Target) {
    let Some(s) = Sandboxd::start(t) else {
        return;
    };
    // Not the server's own directory (the test's, or the image's `/`).
    let r = s.sdk("sdk", &["mkdir -p sub && pwd"]);
    assert_eq!(r["stdout"], json!(format!("{}\n", s.root)), "{r}");
    assert_eq!(r["exit_code"], json!(0), "{r}");
    let sub = s.sdk("sdk", &["pwd", "{}", "sub"]);
    assert_eq!(sub["stdout"], json!(format!("{}/sub\n", s.root)), "{sub}");
    // A relative cwd that is missing under the root says where it looked.
    let missing = s.sdk("sdk", &["pwd", "{}", "nope"]);
    let error = missing["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("FAILED_PRECONDITION") && error.contains(&format!("{}/nope", s.root)),
        "{missing}"
    );
}

fn a_relative_cwd_that_leaves_the_cwd_policy_is_refused_as_permission_denied(t: Target) {
    let Some(s) = Sandboxd::start_with(t, &[], Policy::RootOnly) else {
        return;
    };
    // The root, not MCP_EXEC_DEFAULT_CWD, is where a gRPC job starts.
    let inside = s.sdk("sdk", &["pwd"]);
    assert_eq!(inside["stdout"], json!(format!("{}\n", s.root)), "{inside}");
    // `..` of the root (not of the default) is outside the policy, which
    // decides as for any cwd.
    let out = s.sdk("sdk", &["pwd", "{}", ".."]);
    let error = out["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("PERMISSION_DENIED") && error.contains("outside the allowed directories"),
        "{out}"
    );
}

fn with_no_stdio_the_grpc_listener_alone_starts_and_serves_an_execute(t: Target) {
    let Some(mut s) = Sandboxd::start_with(t, &["--no-stdio"], Policy::None) else {
        return;
    };
    let r = s.client("execute", &[r#"["sh", "-c", "echo served"]"#]);
    assert_eq!(r["exit_code"], json!(0), "{r}");
    assert_eq!(r["stdout_head"], json!("served\n"), "{r}");
    assert!(
        s.server.wait_exit(Duration::from_millis(200)).is_none(),
        "the server serves on without stdio"
    );
}

fn sdk_command_timeout_answers_124_and_ends_the_jobs_group(t: Target) {
    let Some(s) = Sandboxd::start(t) else {
        return;
    };
    let m = marker();
    let r = s.sdk(
        "sdk-timeout",
        &[&format!("sleep {m} & sleep {m}; wait"), "1"],
    );
    assert_eq!(r["exit_code"], json!(124), "{r}");
    assert_eq!(r["timed_out"], json!(true), "{r}");
    assert!(
        wait_for(TIMEOUT, || !host_marker_alive(&m)),
        "a process of the timed-out command survived its deadline"
    );
}

fn start_streams_init_stdout_stderr_and_exit_in_order_and_the_job_id_in_trailers(t: Target) {
    let Some(s) = Sandboxd::start(t) else {
        return;
    };
    let r = s.client(
        "start",
        &[r#"["sh", "-c", "echo out; sleep 0.1; echo err >&2; exit 2"]"#],
    );
    let events = r["events"].as_array().unwrap();
    let pid = events[0]["init"].as_i64().expect("init first");
    assert_eq!(
        &events[1..],
        &[
            json!({"stdout": "out\n"}),
            json!({"stderr": "err\n"}),
            json!({"exit": 2})
        ],
        "{r}"
    );
    assert_eq!(r["code"], json!("OK"), "{r}");
    assert_eq!(
        r["trailers"]["x-mcp-exec-job-id"],
        json!(format!("job-{pid}")),
        "{r}"
    );
}

fn write_stdin_bytes_then_eof_reach_cat_which_then_exits(t: Target) {
    let Some(s) = Sandboxd::start(t) else {
        return;
    };
    let r = s.client("stdin", &[]);
    let events = r["events"].as_array().unwrap();
    let out: String = events.iter().filter_map(|e| e["stdout"].as_str()).collect();
    assert_eq!(out, "hello world\n", "{r}");
    assert_eq!(events.last(), Some(&json!({"exit": 0})), "{r}");
}

fn send_signal_term_ends_the_whole_group_with_exit_143_and_sigterm_in_the_trailers(t: Target) {
    let Some(s) = Sandboxd::start(t) else {
        return;
    };
    let m = marker();
    let argv = json!(["sh", "-c", format!("echo up; sleep {m} & sleep {m}; wait")]).to_string();
    let r = s.client("signal", &[&argv]);
    assert_eq!(
        r["events"].as_array().unwrap().last(),
        Some(&json!({"exit": 143})),
        "{r}"
    );
    assert_eq!(r["trailers"]["x-mcp-exec-signal"], json!("SIGTERM"), "{r}");
    assert_eq!(r["trailers"]["x-mcp-exec-cause"], json!("killed"), "{r}");
    // SendSignal answered after the group's death was verified.
    assert!(
        !host_marker_alive(&m),
        "a member of the signalled group is alive"
    );
}

fn resize_tty_changes_the_size_that_stty_reports_in_a_pty_job(t: Target) {
    let Some(s) = Sandboxd::start(t) else {
        return;
    };
    let r = s.client("resize", &[]);
    let out = r["output"].as_str().unwrap();
    assert!(out.contains("24 80"), "the asked size first: {r}");
    assert!(out.contains("30 100"), "then the new size: {r}");
    assert_eq!(r["exit"], json!(0), "{r}");
}

fn unknown_process_ids_are_not_found_and_resizing_a_pipe_job_is_a_failed_precondition(t: Target) {
    let Some(s) = Sandboxd::start(t) else {
        return;
    };
    let r = s.client("unknown", &[]);
    assert_eq!(r["signal"], json!("NOT_FOUND"), "{r}");
    assert_eq!(r["stdin"], json!("NOT_FOUND"), "{r}");
    assert_eq!(r["resize"], json!("NOT_FOUND"), "{r}");
    assert_eq!(r["resize_pipe"], json!("FAILED_PRECONDITION"), "{r}");
    assert_eq!(
        r["killed_exit"],
        json!({"exit": 137}),
        "SIGKILL is 128+9: {r}"
    );
}

fn a_start_job_is_listed_by_list_jobs_and_a_client_that_disconnects_leaves_no_process(t: Target) {
    let Some(mut s) = Sandboxd::start(t) else {
        return;
    };
    let m = marker();
    let argv = json!(["sh", "-c", format!("echo up; sleep {m} & sleep {m}; wait")]).to_string();
    let mut child = Client(
        Command::new(s.python)
            .args([SCRIPT, "hold", &s.port.to_string(), &argv])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting the client"),
    );
    let child = &mut child.0;
    let mut stdin = child.stdin.take().unwrap();
    let mut first = String::new();
    // Kept open until the client exits: it prints a last line.
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut first).unwrap();
    let held: Value = serde_json::from_str(&first).unwrap_or_else(|e| panic!("{e}: {first}"));
    let pid = held["events"][0]["init"].as_i64().expect("init");
    let listed = tool_json(&s.server.call_result("list_jobs", json!({})));
    let job = format!("job-{pid}");
    assert!(
        listed.to_string().contains(&format!("\"{job}\"")),
        "{job} is not listed: {listed}"
    );
    assert!(
        host_marker_alive(&m),
        "the job runs while its client holds the stream"
    );
    stdin.write_all(b"go\n").unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    drop(stdout);
    assert!(
        wait_for(TIMEOUT, || !host_marker_alive(&m)),
        "a process of the job outlived its client's disconnect"
    );
}

fn execute_of_64_mib_is_bounded_by_the_window_and_says_so_in_the_trailers(t: Target) {
    let Some(s) = Sandboxd::start(t) else {
        return;
    };
    let r = s.client(
        "execute",
        &[r#"["sh", "-c", "head -c 67108864 /dev/zero; echo done >&2"]"#],
    );
    assert_eq!(r["exit_code"], json!(0), "{r}");
    assert_eq!(
        r["stdout_len"],
        json!(1 << 20),
        "MCP_EXEC_MAX_OUTPUT_BYTES: {r}"
    );
    assert_eq!(r["stderr_len"], json!(5), "{r}");
    let trailers = &r["trailers"];
    assert_eq!(
        trailers["x-mcp-exec-stdout-bytes"],
        json!("67108864"),
        "{r}"
    );
    assert_eq!(
        trailers["x-mcp-exec-stdout-truncated"],
        json!(((64 << 20) - (1 << 20)).to_string()),
        "{r}"
    );
    assert!(trailers.get("x-mcp-exec-stderr-truncated").is_none(), "{r}");
}

fn a_signal_death_through_execute_is_128_plus_n_with_the_signal_in_the_trailers(t: Target) {
    let Some(s) = Sandboxd::start(t) else {
        return;
    };
    let r = s.client("execute", &[r#"["sh", "-c", "kill -KILL $$"]"#]);
    assert_eq!(r["exit_code"], json!(137), "{r}");
    assert_eq!(r["trailers"]["x-mcp-exec-signal"], json!("SIGKILL"), "{r}");
}

fn no_zombie_is_left_after_1000_orphaned_grandchildren_started_through_execute(t: Target) {
    if !t.server_is_pid1() {
        // Orphans reparent to the real init elsewhere: nothing to test here.
        return;
    }
    let Some(mut s) = Sandboxd::start(t) else {
        return;
    };
    let r = s.client(
        "execute",
        &[r#"["sh", "-c", "i=0; while [ $i -lt 1000 ]; do (true &) ; i=$((i+1)); done; echo started"]"#],
    );
    assert_eq!(r["exit_code"], json!(0), "{r}");
    assert_eq!(r["stdout_head"], json!("started\n"), "{r}");
    let mut zombies = usize::MAX;
    assert!(
        wait_for(Duration::from_secs(30), || {
            zombies = zombie_count(&mut s.server);
            zombies == 0
        }),
        "{zombies} zombies left after 1,000 orphans exited"
    );
}

#[test]
fn a_non_loopback_sandboxd_listener_without_a_token_refuses_to_start_with_exit_2() {
    let mut command = Command::new(crate::support::binary());
    command
        .args(["--sandboxd-grpc", "0.0.0.0:0"])
        .stdin(Stdio::null());
    let out = crate::support::guard::output(command).unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MCP_EXEC_SANDBOXD_GRPC") && err.contains("MCP_EXEC_PLATFORM_INSECURE"),
        "{err}"
    );
}

#[test]
fn a_missing_sandbox_root_with_only_the_grpc_listener_exits_2_naming_the_setting() {
    let missing = HostPath::new("sandboxd-missing-root");
    let mut command = Command::new(crate::support::binary());
    command
        .args([
            "--sandboxd-grpc",
            "127.0.0.1:0",
            "--sandboxd-root",
            &missing.0,
        ])
        .stdin(Stdio::null());
    let out = crate::support::guard::output(command).unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MCP_EXEC_SANDBOXD_ROOT (--sandboxd-root)")
            && err.contains(&missing.0)
            && err.contains("no such file or directory"),
        "{err}"
    );
    assert!(!err.contains("listening for sandboxd gRPC"), "{err}");
}

/// With our token set, a call must carry it (`authorization:
/// Bearer`); without it, or with a wrong one, it is `UNAUTHENTICATED`.
#[test]
fn with_a_token_set_a_call_without_it_is_unauthenticated_and_one_with_it_runs() {
    let Some(python) = python() else {
        return;
    };
    let root = HostPath::new("sandboxd-grpc-root");
    std::fs::create_dir_all(&root.0).unwrap();
    let server = Server::start_with_cli(
        Target::Bare,
        &[
            ("MCP_EXEC_SANDBOXD_GRPC", "127.0.0.1:0"),
            ("MCP_EXEC_SANDBOXD_ROOT", &root.0),
            ("MCP_EXEC_HTTP_TOKEN", "grpc-test-token"),
        ],
        &[],
    );
    let s = Sandboxd {
        port: bound_port(&server, "sandboxd gRPC"),
        server,
        python,
        root: root.0.clone(),
        _root_dir: Some(root),
    };
    let r = s.client("auth", &["grpc-test-token"]);
    assert_eq!(r["none"]["code"], json!("UNAUTHENTICATED"), "{r}");
    assert_eq!(r["wrong"]["code"], json!("UNAUTHENTICATED"), "{r}");
    assert_eq!(r["bearer"], json!({"code": "OK", "exit_code": 0}), "{r}");
    drop(s.server);
}

crate::parity!(
    sdk_commands_run_returns_output_exit_code_env_and_cwd,
    sdk_commands_run_without_a_cwd_runs_in_the_sandbox_root_and_a_relative_cwd_under_it,
    a_relative_cwd_that_leaves_the_cwd_policy_is_refused_as_permission_denied,
    with_no_stdio_the_grpc_listener_alone_starts_and_serves_an_execute,
    sdk_command_timeout_answers_124_and_ends_the_jobs_group,
    start_streams_init_stdout_stderr_and_exit_in_order_and_the_job_id_in_trailers,
    write_stdin_bytes_then_eof_reach_cat_which_then_exits,
    send_signal_term_ends_the_whole_group_with_exit_143_and_sigterm_in_the_trailers,
    resize_tty_changes_the_size_that_stty_reports_in_a_pty_job,
    unknown_process_ids_are_not_found_and_resizing_a_pipe_job_is_a_failed_precondition,
    a_start_job_is_listed_by_list_jobs_and_a_client_that_disconnects_leaves_no_process,
    execute_of_64_mib_is_bounded_by_the_window_and_says_so_in_the_trailers,
    a_signal_death_through_execute_is_128_plus_n_with_the_signal_in_the_trailers,
    no_zombie_is_left_after_1000_orphaned_grandchildren_started_through_execute,
);
