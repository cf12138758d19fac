//! envd's files half (docs/envd.md) driven by the official `e2b` Python SDK
//! (pinned in interop/e2b/requirements.txt, its own venv) in debug mode:
//! interop/e2b/fs_suite.py runs `files.write` (str, bytes, file-like,
//! iterable, `write_files`), `read` (text, bytes, stream, missing),
//! relative paths, `exists`, `get_info`, `list` (depth 1 and 2), `rename`,
//! `remove`, `make_dir` (True then False), `watch_dir` polling (events
//! checked after create, append, rename, remove, mkdir) and `watch_dir` on
//! `AsyncSandbox` (the `WatchDir` stream), comparing every value, and
//! prints `ok <check>` per check. The server runs on each target with
//! `--envd 127.0.0.1:0` (the containers share the host's network, so the
//! loopback port is reachable); it is killed when the test ends, also when
//! it fails, and so is the script.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::{Server, Target};

/// The e2b venv's python; `None` (skip) when it is missing here — in CI
/// that fails.
fn python() -> Option<&'static str> {
    crate::support::venv_python(
        concat!(env!("CARGO_MANIFEST_DIR"), "/interop/e2b/.venv/bin/python"),
        "e2b",
        "the e2b Python SDK",
        "--install-e2b",
    )
}

/// A server with an envd listener; killed on drop.
struct Envd {
    server: Server,
    port: u16,
    host_pid: Option<u32>,
}

impl Drop for Envd {
    fn drop(&mut self) {
        // With a listener, stdin EOF does not end the server.
        if let Some(pid) = self.host_pid {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

impl Envd {
    fn start(t: Target, home: &str) -> Envd {
        Envd::start_with(t, &[("HOME", home)])
    }

    fn start_with(t: Target, env: &[(&str, &str)]) -> Envd {
        let server = if t.is_container() {
            let mut all = env.to_vec();
            all.push(("MCP_EXEC_ENVD", "127.0.0.1:0"));
            Server::start_with_args(t, &all, &["--network", "host"])
        } else {
            Server::start_with_cli(t, env, &["--envd", "127.0.0.1:0"])
        };
        let port = crate::http::bound_port(&server, "envd");
        let host_pid = server.server_host_pid();
        Envd {
            server,
            port,
            host_pid,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// A fresh directory name for this test process.
fn fresh(what: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "mcp-exec-e2b-{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Removes a host directory on drop.
struct HostDir(std::path::PathBuf);

impl Drop for HostDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const CHECKS: &[&str] = &[
    "make_dir",
    "write",
    "read",
    "relative",
    "get_info",
    "list",
    "rename",
    "remove",
    "watch_dir sync",
    "watch_dir async",
    "cleanup",
];

fn the_e2b_sdks_files_calls_work_against_envd_and_return_what_was_written(t: Target) {
    let Some(python) = python() else { return };
    // The home (relative paths resolve against it) exists; the work
    // directory is made through the SDK.
    let (home, _host_dir) = if t.is_container() {
        ("/tmp".to_owned(), None)
    } else {
        let dir = std::env::temp_dir().join(fresh("home"));
        std::fs::create_dir_all(&dir).unwrap();
        (dir.display().to_string(), Some(HostDir(dir)))
    };
    let work = format!("{home}/{}", fresh("work"));
    let envd = Envd::start(t, &home);
    let passed = run_script(t, python, &envd, &["suite", &envd.url(), &work, &home]);
    assert_eq!(passed, CHECKS, "{t:?}: checks passed, in order");
}

/// Runs fs_suite.py with `args`; requires exit 0 within 2 minutes and
/// answers the names of the checks it passed.
fn run_script(t: Target, python: &str, envd: &Envd, args: &[&str]) -> Vec<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/e2b/fs_suite.py");
    let mut child = Command::new(python)
        .arg(script)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the e2b suite");
    let mut done = None;
    let finished = crate::support::wait_for(std::time::Duration::from_secs(120), || {
        done = child.try_wait().ok().flatten();
        done.is_some()
    });
    if !finished {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("the suite's output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let server_log = envd.server.stderr.lock().unwrap().clone();
    assert!(
        finished && out.status.success(),
        "{t:?}: the e2b suite failed ({:?}):\n{stdout}\n{stderr}\nserver:\n{server_log}",
        out.status
    );
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("ok ").map(str::to_owned))
        .collect()
}

/// The working-directory policy through envd: with `MCP_EXEC_ALLOWED_CWDS`
/// set, every files call outside it (write both ways, read, list, stat,
/// mkdir, remove, a rename out, a watch) is refused naming the policy, and
/// inside works.
fn every_files_call_outside_the_allowed_directories_is_refused(t: Target) {
    let Some(python) = python() else { return };
    let dir = std::env::temp_dir().join(fresh("policy"));
    std::fs::create_dir_all(dir.join("inside")).unwrap();
    std::fs::create_dir_all(dir.join("outside")).unwrap();
    let _host_dir = HostDir(dir.clone());
    let inside = dir.join("inside").display().to_string();
    let outside = dir.join("outside").display().to_string();
    let envd = Envd::start_with(
        t,
        &[
            ("HOME", &inside),
            ("MCP_EXEC_ALLOWED_CWDS", &inside),
            ("MCP_EXEC_DEFAULT_CWD", &inside),
        ],
    );
    let passed = run_script(
        t,
        python,
        &envd,
        &["policy", &envd.url(), &inside, &outside],
    );
    assert_eq!(passed, ["policy"], "{t:?}");
    assert!(
        !dir.join("outside/x.txt").exists() && !dir.join("outside/d").exists(),
        "nothing was written outside"
    );
}

/// The policy test needs host directories: bare and PID 1.
mod policy {
    #[test]
    fn bare() {
        super::every_files_call_outside_the_allowed_directories_is_refused(
            crate::support::Target::Bare,
        );
    }

    #[test]
    fn pid1() {
        if crate::support::Target::Pid1.available() {
            super::every_files_call_outside_the_allowed_directories_is_refused(
                crate::support::Target::Pid1,
            );
        }
    }
}

crate::parity!(the_e2b_sdks_files_calls_work_against_envd_and_return_what_was_written);
