//! The soak (issue 15, item 3): many jobs through one server, with its RSS
//! and open descriptors sampled as they go; both must be flat at the end.
//!
//! One server with stdio and HTTP on. The jobs come in cycles of ten, a mix
//! of what a long-lived server sees: six blocking `execute true` over
//! stdio, one that prints 64 KiB, one `nowait` job killed with `kill`, one
//! blocking `execute` cancelled by `notifications/cancelled`, and one
//! blocking `execute true` over HTTP, in an HTTP session that is replaced
//! (`DELETE`, then a new `initialize`) every [`SESSION_JOBS`] jobs. Every
//! answer is checked. The first sample is taken after a warm-up of
//! [`WARMUP`] jobs (allocator arenas, the first HTTP connection), so growth
//! is measured from a server that has seen every kind of job.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::Error;
use crate::client::{Launch, memory_of};
use crate::http_client::{Conn, HttpServer};
use crate::scenarios::{CALL_TIMEOUT, expect_state};

/// Jobs before the first sample.
pub const WARMUP: usize = 500;
/// Jobs per HTTP session before it is deleted and replaced.
pub const SESSION_JOBS: usize = 1000;
/// Samples over the run (after the warm-up one).
const SAMPLES: usize = 20;

/// One sample of the server.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Jobs finished so far.
    pub jobs: usize,
    /// Seconds since the soak started.
    pub secs: f64,
    /// Resident set, KiB.
    pub rss_kib: u64,
    /// Open descriptors.
    pub fds: usize,
}

/// The curve and the totals.
pub struct Soak {
    /// Samples: after the warm-up, then every `jobs / SAMPLES` jobs.
    pub samples: Vec<Sample>,
    /// Jobs run (warm-up included).
    pub jobs: usize,
    /// Jobs killed with `kill`.
    pub killed: usize,
    /// Of those, the ones whose group outlived TERM (a child the shell was
    /// forking), then ended with KILL.
    pub term_survivors: usize,
    /// Blocking calls cancelled.
    pub cancelled: usize,
    /// Jobs run over HTTP.
    pub http: usize,
    /// HTTP sessions used.
    pub sessions: usize,
}

impl Soak {
    /// RSS at the end minus RSS at the first sample, KiB.
    pub fn rss_growth_kib(&self) -> f64 {
        match (self.samples.first(), self.samples.last()) {
            (Some(a), Some(b)) => b.rss_kib as f64 - a.rss_kib as f64,
            _ => 0.0,
        }
    }

    /// Descriptors at the end minus at the first sample.
    pub fn fd_growth(&self) -> f64 {
        match (self.samples.first(), self.samples.last()) {
            (Some(a), Some(b)) => b.fds as f64 - a.fds as f64,
            _ => 0.0,
        }
    }

    /// The curve as a markdown table.
    pub fn markdown(&self) -> String {
        let mut t = String::from("| jobs done | s | RSS (KiB) | fds |\n|---:|---:|---:|---:|\n");
        for s in &self.samples {
            t.push_str(&format!(
                "| {} | {:.0} | {} | {} |\n",
                s.jobs, s.secs, s.rss_kib, s.fds
            ));
        }
        t
    }
}

fn open_fds(pid: u32) -> Result<usize, Error> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(Iterator::count)
        .map_err(|e| Error(format!("reading /proc/{pid}/fd: {e}")))
}

/// Runs `jobs` jobs (at least the warm-up) through one server; `None`
/// against a server without HTTP.
pub fn soak(binary: &Path, protocol: &str, jobs: usize) -> Result<Option<Soak>, Error> {
    let jobs = jobs.max(WARMUP + 10);
    let launch = Launch::with_env(&[("MCP_EXEC_SHUTDOWN_GRACE", "2")]);
    let Some(mut hs) = HttpServer::launch(binary, &launch, true)? else {
        return Ok(None);
    };
    hs.server.initialize(protocol, CALL_TIMEOUT)?;
    let pid = hs.server.pid();
    let mut conn: Conn = hs.session(protocol)?;
    let mut out = Soak {
        samples: Vec::new(),
        jobs: 0,
        killed: 0,
        term_survivors: 0,
        cancelled: 0,
        http: 0,
        sessions: 1,
    };
    let every = ((jobs - WARMUP) / SAMPLES).max(1);
    let start = Instant::now();
    let print = "head -c 65536 /dev/zero | tr '\\0' a";
    for n in 0..jobs {
        match n % 10 {
            6 => {
                let (_, r) = hs
                    .server
                    .tool("execute", json!({"command": print}), CALL_TIMEOUT)?;
                expect_state(&r, "success", "soak: 64 KiB")?;
                if r["stdout"]["total_bytes"] != 65536 {
                    return Err(Error(format!("soak: 64 KiB job printed {r}")));
                }
            }
            7 => {
                let (_, r) = hs.server.tool(
                    "execute",
                    json!({"command": "sleep 60", "nowait": true}),
                    CALL_TIMEOUT,
                )?;
                let id = r["job_id"].clone();
                let (_, k) =
                    hs.server
                        .tool("kill", json!({"job_id": id, "timeout": 10}), CALL_TIMEOUT)?;
                if k["terminated"] != true {
                    // A TERM that lands while the shell forks its child with
                    // signals blocked ends the shell but never reaches the
                    // child; the server says so and names the survivor (a
                    // one-in-tens-of-thousands race). What a client does
                    // then, as the answer says: KILL. Anything else fails.
                    let survived = k["detail"]
                        .as_str()
                        .is_some_and(|d| d.contains("survive SIGTERM"));
                    let (_, again) = hs.server.tool(
                        "kill",
                        json!({"job_id": id, "signal": "KILL", "timeout": 10}),
                        CALL_TIMEOUT,
                    )?;
                    if !survived || again["terminated"] != true {
                        return Err(Error(format!(
                            "soak: kill did not terminate: {k}, then KILL: {again}"
                        )));
                    }
                    out.term_survivors += 1;
                }
                out.killed += 1;
            }
            8 => {
                let sent = hs.server.send(
                    "tools/call",
                    json!({"name": "execute", "arguments": {"command": "sleep 60"}}),
                )?;
                hs.server.notify(
                    "notifications/cancelled",
                    json!({"requestId": sent.id, "reason": "soak"}),
                )?;
                match hs.server.response(sent.id, CALL_TIMEOUT) {
                    Err(e) if e.0.contains("-32800") => out.cancelled += 1,
                    Err(e) => return Err(e),
                    Ok((_, r)) => {
                        return Err(Error(format!("soak: a cancelled call answered {r}")));
                    }
                }
            }
            9 => {
                if out.http > 0 && out.http.is_multiple_of(SESSION_JOBS / 10) {
                    let status = conn.delete_session()?;
                    if status != 204 {
                        return Err(Error(format!("soak: DELETE of a session got {status}")));
                    }
                    conn = hs.session(protocol)?;
                    out.sessions += 1;
                }
                let (_, r) = conn.tool("execute", json!({"command": "true"}))?;
                expect_state(&r, "success", "soak over HTTP")?;
                out.http += 1;
            }
            _ => {
                let (_, r) = hs
                    .server
                    .tool("execute", json!({"command": "true"}), CALL_TIMEOUT)?;
                expect_state(&r, "success", "soak")?;
            }
        }
        out.jobs = n + 1;
        if out.jobs == WARMUP || (out.jobs > WARMUP && (out.jobs - WARMUP).is_multiple_of(every)) {
            // A job's pipes and pidfd are closed when its result is
            // delivered; nothing of the last job is left at this point.
            let memory = memory_of(pid)?;
            out.samples.push(Sample {
                jobs: out.jobs,
                secs: start.elapsed().as_secs_f64(),
                rss_kib: memory.rss_kib,
                fds: open_fds(pid)?,
            });
            eprintln!(
                "bench: soak {} jobs, {:.0} s, RSS {} KiB, {} fds",
                out.jobs,
                start.elapsed().as_secs_f64(),
                memory.rss_kib,
                out.samples.last().map_or(0, |s| s.fds)
            );
        }
    }
    drop(conn);
    hs.terminate(Duration::from_secs(10))?;
    Ok(Some(out))
}
