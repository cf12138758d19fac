//! The MCP Tasks scenario (issue 25 figures): `tasks/get` server time, what
//! a live task costs above its job, and `tasks/cancel`'s answer and
//! verified kill.
//!
//! Each part starts a 2025-11-25 server of its own and closes it before the
//! next. Every answer is checked (statuses, that the job died), timings are
//! never asserted.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Error;
use crate::client::{Launch, Server};
use crate::scenarios::CALL_TIMEOUT;
use crate::stats::Samples;

const REVISION: &str = "2025-11-25";

/// The grace the cancel part's server runs with (`MCP_EXEC_SHUTDOWN_GRACE`).
pub const GRACE_MS: f64 = 500.0;

/// What the scenario measured.
#[derive(Debug, Default)]
pub struct Tasks {
    /// `ping` rtt, µs (interleaved with `get`).
    pub ping: Samples,
    /// `tasks/get` rtt, µs.
    pub get: Samples,
    /// Tasks and jobs in the memory part.
    pub live: usize,
    /// RSS growth per job for `live` terminal nowait jobs, KiB.
    pub per_job_kib: f64,
    /// RSS growth per task for `live` terminal tasks (each with its job), KiB.
    pub per_task_kib: f64,
    /// `tasks/cancel` rtt, ms.
    pub cancel: Samples,
    /// From sending `tasks/cancel` to a `tasks/get` whose message says the
    /// group is verified dead, minus the grace, ms.
    pub dead_after_grace: Samples,
}

fn start(binary: &Path, env: &[(&'static str, &str)]) -> Result<Server, Error> {
    let mut server = Server::launch(binary, &Launch::with_env(env))?;
    server.initialize(REVISION, CALL_TIMEOUT)?;
    Ok(server)
}

fn create(server: &mut Server, command: &str) -> Result<String, Error> {
    let (_, r) = server.call(
        "tools/call",
        json!({"name": "execute", "arguments": {"command": command, "close_stdin": true}, "task": {}}),
        CALL_TIMEOUT,
    )?;
    r["task"]["taskId"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| Error(format!("no task in {r}")))
}

fn get(server: &mut Server, id: &str) -> Result<(Duration, Value), Error> {
    server.call("tasks/get", json!({"taskId": id}), CALL_TIMEOUT)
}

/// RSS (KiB) of `server` after `n` `make`s, each checked.
fn grow(
    server: &mut Server,
    n: usize,
    mut make: impl FnMut(&mut Server) -> Result<(), Error>,
) -> Result<f64, Error> {
    let before = server.memory()?.rss_kib;
    for _ in 0..n {
        make(server)?;
    }
    // Let the last jobs end (their runners' buffers are freed by then).
    std::thread::sleep(Duration::from_millis(500));
    let after = server.memory()?.rss_kib;
    Ok(after.saturating_sub(before) as f64 / n as f64)
}

/// Runs the scenario: `gets` × (ping, tasks/get), `live` tasks against as
/// many jobs, `cancels` × cancel.
pub fn run(binary: &Path, gets: usize, live: usize, cancels: usize) -> Result<Tasks, Error> {
    let mut out = Tasks {
        live,
        ..Tasks::default()
    };

    let mut server = start(binary, &[])?;
    let id = create(&mut server, "true")?;
    for _ in 0..gets {
        let (ping, _) = server.call("ping", json!({}), CALL_TIMEOUT)?;
        out.ping.push_us(ping);
        let (rtt, task) = get(&mut server, &id)?;
        if task["taskId"] != json!(id) {
            return Err(Error(format!("tasks/get answered {task}")));
        }
        out.get.push_us(rtt);
    }
    server.shutdown(CALL_TIMEOUT)?;

    let many = live.to_string();
    let env = [
        ("MCP_EXEC_MAX_TASKS", many.as_str()),
        ("MCP_EXEC_MAX_QUEUED", many.as_str()),
    ];
    let mut jobs = start(binary, &env)?;
    out.per_job_kib = grow(&mut jobs, live, |s| {
        let (_, r) = s.call(
            "tools/call",
            json!({"name": "execute", "arguments": {"command": "true", "nowait": true}}),
            CALL_TIMEOUT,
        )?;
        if r["isError"] != json!(false) {
            return Err(Error(format!("nowait execute failed: {r}")));
        }
        Ok(())
    })?;
    jobs.shutdown(Duration::from_secs(120))?;
    let mut tasks = start(binary, &env)?;
    out.per_task_kib = grow(&mut tasks, live, |s| create(s, "true").map(|_| ()))?;
    tasks.shutdown(Duration::from_secs(120))?;

    let grace = format!("{}", GRACE_MS / 1000.0);
    let mut server = start(binary, &[("MCP_EXEC_SHUTDOWN_GRACE", grace.as_str())])?;
    for _ in 0..cancels {
        // The whole group ignores TERM: the kill must wait out the grace and KILL.
        let id = create(&mut server, "trap '' TERM; echo ready; sleep 60")?;
        let ready = Instant::now();
        loop {
            let (_, task) = get(&mut server, &id)?;
            let job = task["statusMessage"]
                .as_str()
                .unwrap_or("")
                .split(' ')
                .next()
                .unwrap_or("")
                .to_owned();
            let (_, o) = server.call(
                "tools/call",
                json!({"name": "output", "arguments": {"job_id": job, "stdout": "all"}}),
                CALL_TIMEOUT,
            )?;
            if o["structuredContent"]["stdout"]["data"] == json!("ready\n") {
                break;
            }
            if ready.elapsed() > CALL_TIMEOUT {
                return Err(Error("the job never printed ready".into()));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let sent = Instant::now();
        let (rtt, task) = server.call("tasks/cancel", json!({"taskId": id}), CALL_TIMEOUT)?;
        if task["status"] != json!("cancelled") {
            return Err(Error(format!("tasks/cancel answered {task}")));
        }
        out.cancel.push(rtt.as_secs_f64() * 1e3);
        loop {
            let (_, task) = get(&mut server, &id)?;
            let message = task["statusMessage"].as_str().unwrap_or("");
            if message.contains("verified") {
                out.dead_after_grace
                    .push(sent.elapsed().as_secs_f64() * 1e3 - GRACE_MS);
                break;
            }
            if message.contains("still alive") || sent.elapsed() > CALL_TIMEOUT {
                return Err(Error(format!("the group was not verified dead: {task}")));
            }
        }
    }
    server.shutdown(CALL_TIMEOUT)?;
    Ok(out)
}
