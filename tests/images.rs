//! What a job finds besides a shell (docs/images.md, issue 9): the usual
//! process tools, on every target. The offline images carry Debian's
//! busybox-static, which has no `pgrep` or `pkill` applet; they get procps'
//! instead (images/build-offline.sh), and these tests keep them at parity
//! with the host and the registry images.
//!
//! The job to find is a `sleep` whose duration is unique to the test
//! (`sleep 300.<test pid><n>`); the tools are given an extended regex with
//! the dot as `[.]`, which matches that `sleep` but not the command line of
//! the job that runs the tool.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::support::{Server, TIMEOUT, Target, wait_for};

/// Time allowed for a clean exit after EOF.
const EXIT: Duration = Duration::from_secs(30);

static MARKERS: AtomicU64 = AtomicU64::new(0);

/// A unique `sleep` duration and the regex that matches it alone.
fn marker() -> (String, String) {
    let n = format!(
        "{}{:04}",
        std::process::id(),
        MARKERS.fetch_add(1, Ordering::Relaxed)
    );
    (format!("300.{n}"), format!("300[.]{n}"))
}

/// Runs `command` to completion and returns (exit code, stdout, stderr).
fn run(s: &mut Server, command: &str) -> (i64, String, String) {
    let r = s.exec(command);
    let text = |stream: &str| r[stream]["data"].as_str().unwrap_or_default().to_owned();
    let code = r["exit_code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no exit code in {r}"));
    (code, text("stdout"), text("stderr"))
}

fn pgrep_and_pkill_find_and_signal_a_job_process_on_every_target(t: Target) {
    let mut s = Server::started(t);
    let (duration, pattern) = marker();
    // `exec` keeps the pid, so the shell's `$$` is the pid of the `sleep`.
    let job = s.spawn_job(&format!("echo $$; exec sleep {duration}"));
    let mut pid = String::new();
    let started = wait_for(TIMEOUT, || {
        let r = s.call("output", json!({"job_id": job, "stdout": "all"}));
        pid = r["stdout"]["data"].as_str().unwrap_or_default().to_owned();
        pid.ends_with('\n')
    });
    assert!(started, "{t:?}: the job never printed its pid");
    let pid = pid.trim();

    let (code, out, err) = run(&mut s, &format!("pgrep -f '{pattern}'"));
    assert_eq!(
        (code, out.trim()),
        (0, pid),
        "{t:?}: pgrep -f did not print exactly the job's pid; stderr: {err}"
    );

    let (code, out, err) = run(&mut s, &format!("pkill -f '{pattern}'"));
    assert_eq!(code, 0, "{t:?}: pkill -f matched nothing: {out}{err}");
    let w = s.call("wait", json!({"job_ids": [job], "timeout": 20}));
    assert_eq!(w[0]["state"], json!("error"), "{t:?}: {w}");
    assert_eq!(w[0]["exit_code"], json!(-1), "{t:?}: {w}");
    assert_eq!(w[0]["signal"], json!("terminated"), "{t:?}: {w}");

    let (code, out, err) = run(&mut s, &format!("pgrep -f '{pattern}'"));
    assert_eq!(
        (code, out.as_str()),
        (1, ""),
        "{t:?}: pgrep still finds the killed job; stderr: {err}"
    );
    s.finish(EXIT);
}

crate::parity!(pgrep_and_pkill_find_and_signal_a_job_process_on_every_target);
