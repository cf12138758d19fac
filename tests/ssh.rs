//! mcp-exec on a remote host over SSH: `ssh -T host mcp-exec` is a
//! stdio MCP server there. A real OpenSSH server (Debian's `openssh-server`)
//! on a loopback port, with a throwaway host key, client key, authorized
//! keys and known-hosts file, and the official Python SDK's stdio client
//! (interop/.venv, interop/python/ssh_client.py) driving
//! `ssh -T -p PORT -i KEY user@127.0.0.1 /path/to/mcp-exec`: tools, a
//! command, `nowait` + `wait`, and that closing the client ends the remote
//! server and its jobs. Bare target: the "remote" host is this one, so its
//! processes can be checked in `/proc`.
//!
//! Cleanup: sshd is started through [`guard::prepare`] and hands the same
//! mark to every session (`SetEnv` in its config), so a failing test still
//! ends sshd, the sessions, the remote server and its jobs.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::guard::{self, Guard};
use crate::support::{HostPath, TIMEOUT, binary, require, wait_for};

const SSHD: &str = "/usr/sbin/sshd";
const VENV_PYTHON: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/.venv/bin/python");
const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/interop/python/ssh_client.py");

/// What the test needs on this machine: sshd, ssh, ssh-keygen and the
/// SDK's venv (missing → skipped; in CI → a failure).
fn tools_available() -> Result<(), String> {
    for (tool, how) in [
        (
            SSHD,
            "Debian's openssh-server (scripts/setup.sh installs it)",
        ),
        ("/usr/bin/ssh", "Debian's openssh-client"),
        ("/usr/bin/ssh-keygen", "Debian's openssh-client"),
    ] {
        if !Path::new(tool).is_file() {
            return Err(format!("no {tool}: {how}"));
        }
    }
    let sdk = Command::new(VENV_PYTHON)
        .args(["-c", "import mcp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match sdk {
        Ok(s) if s.success() => Ok(()),
        other => Err(format!(
            "{VENV_PYTHON}: no mcp module ({other:?}); run interop/run.sh --install-python"
        )),
    }
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {out:?}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn user() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn alive(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(") ")
            .is_some_and(|(_, r)| !r.starts_with('Z'))
    })
}

/// The long job's shell is running (its command line, not the client's
/// argument that names the marker).
fn carrying(marker: &str) -> bool {
    Command::new("pgrep")
        .args(["-f", &format!("sleep 300; : {marker}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A throwaway OpenSSH server on a loopback port.
struct Sshd {
    port: u16,
    dir: HostPath,
    /// Ends sshd, its sessions and whatever they started.
    _guard: Guard,
}

impl Sshd {
    fn start() -> Sshd {
        let dir = HostPath::new("sshd");
        std::fs::create_dir(&dir.0).unwrap();
        let d = &dir.0;
        run(
            "ssh-keygen",
            &[
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-f",
                &format!("{d}/host_key"),
            ],
        );
        run(
            "ssh-keygen",
            &[
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-f",
                &format!("{d}/client_key"),
            ],
        );
        std::fs::copy(
            format!("{d}/client_key.pub"),
            format!("{d}/authorized_keys"),
        )
        .unwrap();
        let port = free_port();
        let host_pub = std::fs::read_to_string(format!("{d}/host_key.pub")).unwrap();
        std::fs::write(
            format!("{d}/known_hosts"),
            format!("[127.0.0.1]:{port} {host_pub}"),
        )
        .unwrap();
        // sshd as root wants its privilege-separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let mut command = Command::new(SSHD);
        command.args(["-D", "-e", "-f", &format!("{d}/sshd_config")]);
        let (mut command, mark) = guard::prepare(command, false);
        // Every session carries the mark too (sshd clears the environment).
        let marks: Vec<String> = command
            .get_envs()
            .filter(|(k, _)| {
                *k == std::ffi::OsStr::new(guard::SERVER_VAR)
                    || *k == std::ffi::OsStr::new(guard::RUN_VAR)
            })
            .filter_map(|(k, v)| Some(format!("{}={}", k.to_str()?, v?.to_str()?)))
            .collect();
        std::fs::write(
            format!("{d}/sshd_config"),
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                 AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nPidFile none\n\
                 UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PubkeyAuthentication yes\nPermitRootLogin prohibit-password\n\
                 SetEnv {}\n",
                marks.join(" ")
            ),
        )
        .unwrap();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting sshd");
        let guard = mark.guard(child.id());
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().unwrap();
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&(line + "\n"));
            }
        });
        let listening = format!("Server listening on 127.0.0.1 port {port}");
        let up = wait_for(TIMEOUT, || log.lock().unwrap().contains(&listening));
        assert!(up, "sshd did not start:\n{}", log.lock().unwrap());
        // Reaped when it is killed (by the guard).
        std::thread::spawn(move || {
            let _ = child.wait();
        });
        Sshd {
            port,
            dir,
            _guard: guard,
        }
    }

    /// `ssh -T -p PORT -i KEY user@127.0.0.1 mcp-exec`, with only this
    /// test's files (no user or system configuration).
    fn command_line(&self, remote: &str) -> Vec<String> {
        let d = &self.dir.0;
        let mut v: Vec<String> = vec!["ssh".into(), "-T".into()];
        for opt in [
            "-F",
            "/dev/null",
            "-p",
            &self.port.to_string(),
            "-i",
            &format!("{d}/client_key"),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            &format!("UserKnownHostsFile={d}/known_hosts"),
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "LogLevel=ERROR",
        ] {
            v.push(opt.to_owned());
        }
        v.push(format!("{}@127.0.0.1", user()));
        v.push(remote.to_owned());
        v
    }
}

#[test]
fn over_ssh_the_python_sdk_lists_executes_waits_and_closing_ends_the_remote_server_and_its_jobs() {
    if !require(tools_available(), "OpenSSH (sshd, ssh) and the Python SDK") {
        return;
    }
    let sshd = Sshd::start();
    let marker = format!("ssh-job-marker-{}", std::process::id());
    let remote = std::fs::canonicalize(binary()).unwrap();
    let line = serde_json::to_string(&sshd.command_line(remote.to_str().unwrap())).unwrap();
    let mut command = Command::new(VENV_PYTHON);
    command.args([CLIENT, &line, &marker]);
    let (mut command, mark) = guard::prepare(command, false);
    let mut client = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting the SDK client");
    let _client_guard = mark.guard(client.id());
    let mut to_client = client.stdin.take().unwrap();
    let (tx, lines) = mpsc::channel::<String>();
    let stdout = client.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let seen: Value = serde_json::from_str(
        &lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the client's report"),
    )
    .unwrap();
    let tools = seen["tools"].as_array().unwrap();
    for tool in ["execute", "wait", "status", "output", "kill", "list_jobs"] {
        assert!(tools.contains(&json!(tool)), "{tool} missing: {seen}");
    }
    assert_eq!(seen["hello"], json!("hello over ssh"), "{seen}");
    assert_eq!(seen["exit_code"], json!(0), "{seen}");
    assert_eq!(seen["nowait_state"], json!("running"), "{seen}");
    assert_eq!(
        seen["waited"],
        json!({"state": "success", "stdout": "late\n"}),
        "{seen}"
    );
    assert_eq!(seen["long_state"], json!("running"), "{seen}");
    let server = seen["server_pid"].as_i64().unwrap();
    assert!(alive(server), "the remote server is not running: {seen}");
    assert!(carrying(&marker), "the long job is not running");

    // Close the client: ssh's stdin ends, then the remote server's.
    writeln!(to_client, "close").unwrap();
    let closed = lines
        .recv_timeout(Duration::from_secs(30))
        .expect("the client closed");
    assert_eq!(closed, r#"{"closed": true}"#);
    let status = client.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        wait_for(Duration::from_secs(15), || !alive(server)),
        "the remote server outlived its client"
    );
    assert!(
        wait_for(Duration::from_secs(15), || !carrying(&marker)),
        "the remote server's job outlived its client"
    );
}
