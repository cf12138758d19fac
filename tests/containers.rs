//! Container-level behaviour of both images (issue 4, item 5):
//! `podman stop` and `podman kill --signal TERM` run the jobs' TERM traps
//! and the container exits 0 within the grace; a burst of orphans leaves no
//! zombie (seen through `podman exec`, from inside the container); a closed
//! stdin ends the container promptly with exit code 0.
//!
//! Each test runs for the scratch image (mcp-exec is PID 1) and the tini
//! image (tini is PID 1, mcp-exec its subreaping child).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::support::{Server, TIMEOUT, Target, wait_for};

/// The shutdown grace the containers run with (`MCP_EXEC_SHUTDOWN_GRACE`'s default).
const GRACE: Duration = Duration::from_secs(3);
/// Slack on top of the grace: podman's own start/stop work on a loaded
/// machine.
const SLACK: Duration = Duration::from_secs(20);

/// A host directory mounted at `/out` in the container, removed on drop.
struct OutDir(PathBuf);

impl OutDir {
    fn new(tag: &str) -> OutDir {
        let dir = std::env::temp_dir().join(format!(
            "mcp-exec-{tag}-{}-{}",
            std::process::id(),
            unique()
        ));
        std::fs::create_dir_all(&dir).expect("create the /out directory");
        OutDir(dir)
    }

    fn volume(&self) -> String {
        format!("{}:/out", self.0.display())
    }

    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.0.join(name)).ok()
    }
}

impl Drop for OutDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn podman(args: &[&str]) -> std::process::Output {
    crate::support::podman()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("podman {args:?}: {e}"))
}

/// Starts a container with `/out` mounted and a job whose TERM trap writes
/// `/out/trapped` and exits 0; returns once the trap is installed.
fn container_with_trapping_job(t: Target, out: &OutDir) -> Server {
    let mut s = Server::start_with_args(t, &[], &["-v", &out.volume()]);
    s.initialize("2024-11-05");
    let job = s.spawn_job(
        "trap 'echo trapped > /out/trapped; exit 0' TERM; echo ready; while :; do sleep 0.1; done",
    );
    let ready = wait_for(TIMEOUT, || {
        let r = s.call("output", json!({"job_id": job, "stdout": "all"}));
        r["stdout"]["data"]
            .as_str()
            .is_some_and(|d| d.contains("ready"))
    });
    assert!(ready, "the trapping job never became ready");
    s
}

/// Sends the container a TERM from outside (`podman stop`/`podman kill`)
/// and checks: the job's trap ran, and the container exited 0 within the
/// grace (a SIGKILL from podman would make it 137).
fn outside_term_runs_the_trap_and_exits_0(t: Target, podman_args: &[&str]) {
    let out = OutDir::new("term");
    let mut s = container_with_trapping_job(t, &out);
    let name = s.container().expect("a container").to_owned();
    let mut args = podman_args.to_vec();
    args.push(&name);
    let sent = podman(&args);
    assert!(
        sent.status.success(),
        "podman {args:?}: {}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let status = s.wait_exit(GRACE + SLACK);
    assert!(
        status.is_some_and(|st| st.success()),
        "container exit after `podman {}`: {status:?} (137 = killed by podman); stderr:\n{}",
        podman_args.join(" "),
        s.stderr.lock().unwrap()
    );
    assert_eq!(
        out.read("trapped").as_deref(),
        Some("trapped\n"),
        "the job's TERM trap did not run"
    );
}

fn podman_stop_runs_the_jobs_term_trap_and_the_container_exits_0(t: Target) {
    outside_term_runs_the_trap_and_exits_0(t, &["stop", "-t", "10"]);
}

fn podman_kill_with_term_runs_the_jobs_term_trap_and_the_container_exits_0(t: Target) {
    outside_term_runs_the_trap_and_exits_0(t, &["kill", "--signal", "TERM"]);
}

/// Zombies in the container, counted by a `podman exec`'d busybox shell
/// from `/proc/*/stat` with builtins only (it forks nothing, so it makes no
/// zombie of its own).
fn zombies_in(name: &str) -> usize {
    let script = r#"n=0; for f in /proc/[0-9]*/stat; do read -r l 2>/dev/null < "$f" || continue; r=${l##*) }; [ "${r%% *}" = Z ] && n=$((n+1)); done; echo $n"#;
    let o = podman(&["exec", name, "/bin/sh", "-c", script]);
    assert!(
        o.status.success(),
        "podman exec: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("zombie count {text:?}: {e}"))
}

/// Live processes in the container whose command line contains `needle`.
fn live_with(name: &str, needle: &str) -> usize {
    let pattern = needle.replace('.', "[.]");
    let script = format!(
        "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -c '{pattern}' || true"
    );
    let o = podman(&["exec", name, "/bin/sh", "-c", &script]);
    let text = String::from_utf8_lossy(&o.stdout);
    text.trim()
        .parse()
        .unwrap_or_else(|e| panic!("count {text:?}: {e}"))
}

fn a_burst_of_100_orphans_leaves_zero_zombies_in_the_container(t: Target) {
    let mut s = Server::started(t);
    let name = s.container().expect("a container").to_owned();
    let marker = format!("0.4{}{:04}", std::process::id(), unique());
    // One job orphans 100 sleeps at once (each subshell exits at once, its
    // sleep is re-parented to the container's reaper).
    let r = s.exec(&format!(
        "i=0; while [ $i -lt 100 ]; do (sleep {marker} &); i=$((i+1)); done; echo spawned $i"
    ));
    assert_eq!(r["stdout"]["data"], json!("spawned 100\n"), "{r}");
    assert!(
        wait_for(Duration::from_secs(60), || live_with(&name, &marker) == 0),
        "the orphans never ended"
    );
    let mut zombies = usize::MAX;
    let reaped = wait_for(TIMEOUT, || {
        zombies = zombies_in(&name);
        zombies == 0
    });
    assert!(
        reaped,
        "{zombies} zombies left in the container after 100 orphans exited"
    );
    s.finish(GRACE + SLACK);
}

fn podman_run_with_stdin_closed_exits_promptly_with_code_0(t: Target) {
    let image = t.image().expect("a container target");
    let name = format!("mcp-exec-test-closed-{}-{}", std::process::id(), unique());
    let mut child = crate::support::podman()
        .args([
            "run",
            "-i",
            "--rm",
            "--name",
            &name,
            "--log-driver",
            "none",
            image,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("podman run");
    let mut status = None;
    let exited = wait_for(GRACE + SLACK, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    if !exited {
        let _ = crate::support::podman()
            .args(["rm", "-f", "-t", "0", &name])
            .status();
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(exited, "podman run -i with stdin closed did not exit");
    assert!(
        status.is_some_and(|st| st.success()),
        "exit status {status:?}"
    );
}

fn closing_stdin_with_a_running_job_exits_0_within_the_grace(t: Target) {
    let mut s = Server::started(t);
    let job = s.spawn_job("trap '' TERM; while :; do sleep 0.1; done");
    assert_eq!(
        s.call("status", json!({"job_id": job}))["state"],
        json!("running")
    );
    s.finish(GRACE + SLACK);
}

fn podman_kill_with_hup_usr1_usr2_winch_and_cont_reaches_every_job(t: Target) {
    let mut s = Server::started(t);
    let name = s.container().expect("a container").to_owned();
    crate::lifecycle::forwarded_signals_reach_every_running_jobs_group(&mut s, &|_, sig| {
        let o = podman(&["kill", "--signal", sig, &name]);
        assert!(
            o.status.success(),
            "podman kill --signal {sig}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    });
    s.finish(GRACE + SLACK);
}

macro_rules! container_tests {
    ($($name:ident),* $(,)?) => {
        mod scratch { use super::*; $( #[test] fn $name() { if Target::Scratch.available() { super::$name(Target::Scratch) } } )* }
        mod tini { use super::*; $( #[test] fn $name() { if Target::Tini.available() { super::$name(Target::Tini) } } )* }
    };
}

container_tests!(
    podman_stop_runs_the_jobs_term_trap_and_the_container_exits_0,
    podman_kill_with_term_runs_the_jobs_term_trap_and_the_container_exits_0,
    a_burst_of_100_orphans_leaves_zero_zombies_in_the_container,
    podman_run_with_stdin_closed_exits_promptly_with_code_0,
    closing_stdin_with_a_running_job_exits_0_within_the_grace,
    podman_kill_with_hup_usr1_usr2_winch_and_cont_reaches_every_job,
);
