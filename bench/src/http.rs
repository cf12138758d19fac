//! The Streamable HTTP scenarios of issue 11, over the keep-alive client of
//! [`crate::http_client`]:
//!
//! - [`rtt`]: a blocking `execute true` over HTTP against the same call over
//!   stdio, to the same server, interleaved call by call (the order
//!   alternating, so neither side always runs on a cache the other warmed).
//! - [`execute`]: `execute true` round trips, one after another, on one
//!   keep-alive session initialized with a bearer token (the deployed
//!   shape), for their p50 and p99, each round beside a spawn+wait of
//!   `sh -c true` as in the stdio rtt; and the same call with a progress
//!   token, answered as an event stream written in several pieces, where a
//!   socket without `TCP_NODELAY` stalls for a delayed ACK (issue 19: about
//!   40 ms; a plain JSON answer leaves in one write and never does).
//! - [`concurrency`]: many clients, each a thread with its own connection
//!   and session, calling `execute true` back to back; calls/s against as
//!   many threads each looping `posix_spawn` + `waitpid` of the same
//!   command, run by run, baseline first.
//! - [`sessions`]: the server's RSS growth per idle session, each created by
//!   `initialize` on a connection of its own and all held open at once, and
//!   whether every one of them still answers a `ping` at the end.
//!
//! Each starts a server of its own with the settings it needs and ends it
//! with SIGTERM. Against a server without the transport each returns `None`
//! (the caller reports the scenario skipped). As everywhere in the harness,
//! every answer is checked and timings are never asserted.

use std::path::Path;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::Error;
use crate::baseline;
use crate::client::{self, Launch, Memory};
use crate::http_client::{Conn, HttpServer};
use crate::scenarios::{Paired, expect_state};
use crate::stats::Samples;

/// How long a server may take to exit after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Calls on each side before the measured ones (connections, caches, the
/// server's first spawn).
const WARMUP: usize = 3;

pub fn execute_true(conn: &mut Conn, what: &str) -> Result<Duration, Error> {
    let (took, result) = conn.tool("execute", json!({"command": "true"}))?;
    expect_state(&result, "success", what)?;
    Ok(took)
}

/// `runs` blocking `execute true` over HTTP (one session, one keep-alive
/// connection; `server`) and as many over the same server's stdio
/// (`baseline`), in ms, alternating which goes first.
pub fn rtt(binary: &Path, protocol: &str, runs: usize) -> Result<Option<Paired>, Error> {
    let Some(mut hs) = HttpServer::launch(binary, &Launch::default(), true)? else {
        return Ok(None);
    };
    hs.server
        .initialize(protocol, crate::scenarios::CALL_TIMEOUT)?;
    let mut conn = hs.session(protocol)?;
    fn stdio(hs: &mut HttpServer) -> Result<Duration, Error> {
        let (took, result) = hs.server.tool(
            "execute",
            json!({"command": "true"}),
            crate::scenarios::CALL_TIMEOUT,
        )?;
        expect_state(&result, "success", "http_rtt over stdio")?;
        Ok(took)
    }
    for _ in 0..WARMUP {
        stdio(&mut hs)?;
        execute_true(&mut conn, "http_rtt")?;
    }
    let mut out = Paired::default();
    for i in 0..runs {
        if i % 2 == 0 {
            out.baseline.push_ms(stdio(&mut hs)?);
            out.server.push_ms(execute_true(&mut conn, "http_rtt")?);
        } else {
            out.server.push_ms(execute_true(&mut conn, "http_rtt")?);
            out.baseline.push_ms(stdio(&mut hs)?);
        }
    }
    drop(conn);
    hs.terminate(STOP_TIMEOUT)?;
    Ok(Some(out))
}

/// A call at least this slow (ms) in [`execute`] counts as a stall: a
/// delayed ACK holds a second small segment for about 40 ms.
pub const STALL_MS: f64 = 35.0;

/// How many of `samples` (ms) look like a stall, and the slowest.
pub fn tail(samples: &Samples) -> serde_json::Value {
    let raw = samples.raw();
    json!({
        "over_threshold": raw.iter().filter(|&&ms| ms >= STALL_MS).count(),
        "max_ms": raw.iter().copied().fold(0.0, f64::max),
    })
}

/// The bearer token of [`execute`]'s server.
const TOKEN: &str = "bench-http-execute-token-0123456789abcdef";

/// A server of `binary` with HTTP only and [`TOKEN`] required, and one
/// keep-alive connection carrying a session initialized with that token and
/// warmed by a few calls; `None` without the transport.
pub fn token_session(binary: &Path, protocol: &str) -> Result<Option<(HttpServer, Conn)>, Error> {
    let settings = Launch::with_env(&[("MCP_EXEC_HTTP_TOKEN", TOKEN)]);
    let Some(hs) = HttpServer::launch(binary, &settings, false)? else {
        return Ok(None);
    };
    let mut conn = hs.connect()?;
    conn.set_token(TOKEN);
    conn.initialize(protocol)?;
    for _ in 0..WARMUP {
        execute_true(&mut conn, "http_execute")?;
    }
    Ok(Some((hs, conn)))
}

/// Ends what [`token_session`] started.
pub fn end_session((hs, conn): (HttpServer, Conn)) -> Result<(), Error> {
    drop(conn);
    hs.terminate(STOP_TIMEOUT)
}

/// What [`execute`] measured (ms).
#[derive(Debug, Default)]
pub struct Execute {
    /// Plain calls, answered `application/json`.
    pub json: Samples,
    /// The same call with a `progressToken`, answered as an event stream
    /// (head, event and end written as the job goes: the response that
    /// crosses the socket in more than one write).
    pub sse: Samples,
    /// A spawn+wait of `sh -c true` before each pair.
    pub baseline: Samples,
}

/// One `execute true` with `_meta.progressToken`: an SSE answer.
pub fn execute_true_sse(conn: &mut Conn, what: &str) -> Result<Duration, Error> {
    let (took, result) = conn.call(
        "tools/call",
        json!({"name": "execute", "arguments": {"command": "true"},
               "_meta": {"progressToken": "bench"}}),
    )?;
    expect_state(&client::tool_json(&result, "execute")?, "success", what)?;
    Ok(took)
}

/// `runs` rounds, one after another, on one session initialized with a
/// bearer token on one keep-alive connection: a spawn+wait of `sh -c true`
/// (`baseline`), a blocking `execute true` (`json`) and the same with a
/// progress token (`sse`), the two calls alternating which goes first.
pub fn execute(binary: &Path, protocol: &str, runs: usize) -> Result<Option<Execute>, Error> {
    let Some(mut session) = token_session(binary, protocol)? else {
        return Ok(None);
    };
    execute_true_sse(&mut session.1, "http_execute_sse warm-up")?;
    let mut out = Execute::default();
    for i in 0..runs {
        out.baseline.push_ms(baseline::spawn_true()?);
        if i % 2 == 0 {
            out.json
                .push_ms(execute_true(&mut session.1, "http_execute")?);
            out.sse
                .push_ms(execute_true_sse(&mut session.1, "http_execute_sse")?);
        } else {
            out.sse
                .push_ms(execute_true_sse(&mut session.1, "http_execute_sse")?);
            out.json
                .push_ms(execute_true(&mut session.1, "http_execute")?);
        }
    }
    end_session(session)?;
    Ok(Some(out))
}

/// What the concurrency scenario measured.
#[derive(Debug, Default)]
pub struct Concurrency {
    /// Calls/s of each run (`server`) and spawns/s of the libc loops run
    /// just before it (`baseline`).
    pub rate: Paired,
    /// Every call's rtt under that load (ms).
    pub latency: Samples,
    /// Every `posix_spawn` + `waitpid`'s time in the baseline loops (ms).
    pub spawn_latency: Samples,
    /// The server's own CPU time per call (all its threads, not the jobs), µs.
    pub cpu_per_call: Samples,
    /// The harness's own CPU time per call (its client threads, on the same
    /// cores as the server), µs: what the clients take from the server.
    pub client_cpu_per_call: Samples,
}

/// `runs` × (`clients` threads each looping `posix_spawn` + `waitpid` of
/// `sh -c true` for `clients × calls` spawns in all, then `clients` HTTP
/// clients each making `calls` blocking `execute true` at once, released
/// together by a barrier). The server runs with `MCP_EXEC_MAX_RUNNING=256`,
/// so no call waits for a slot.
pub fn concurrency(
    binary: &Path,
    protocol: &str,
    clients: usize,
    calls: usize,
    runs: usize,
) -> Result<Option<Concurrency>, Error> {
    let settings = Launch::with_env(&[("MCP_EXEC_MAX_RUNNING", "256")]);
    let Some(hs) = HttpServer::launch(binary, &settings, false)? else {
        return Ok(None);
    };
    let mut conns = (0..clients)
        .map(|_| hs.session(protocol))
        .collect::<Result<Vec<_>, _>>()?;
    for c in &mut conns {
        execute_true(c, "http_concurrency warm-up")?;
    }
    let mut out = Concurrency::default();
    let total = clients * calls;
    for _ in 0..runs {
        let (wall, spawns) = baseline::parallel_spawn_times(clients, total)?;
        out.rate.baseline.push(total as f64 / wall.as_secs_f64());
        for &t in spawns.raw() {
            out.spawn_latency.push(t);
        }

        let barrier = Barrier::new(clients + 1);
        let cpu0 = hs.server.cpu_time()?;
        let own0 = own_cpu_time()?;
        let (wall, times) = std::thread::scope(|s| -> Result<_, Error> {
            let threads: Vec<_> = conns
                .iter_mut()
                .map(|conn| {
                    let barrier = &barrier;
                    s.spawn(move || -> Result<Vec<Duration>, Error> {
                        barrier.wait();
                        (0..calls)
                            .map(|_| execute_true(conn, "http_concurrency"))
                            .collect()
                    })
                })
                .collect();
            barrier.wait();
            let t0 = Instant::now();
            let mut times = Vec::with_capacity(total);
            for t in threads {
                times.extend(
                    t.join()
                        .map_err(|_| Error("an HTTP client thread panicked".into()))??,
                );
            }
            Ok((t0.elapsed(), times))
        })?;
        let cpu = hs.server.cpu_time()?.saturating_sub(cpu0);
        let own = own_cpu_time()?.saturating_sub(own0);
        let per = |d: Duration| d / u32::try_from(total).unwrap_or(u32::MAX);
        out.rate.server.push(total as f64 / wall.as_secs_f64());
        out.cpu_per_call.push_us(per(cpu));
        out.client_cpu_per_call.push_us(per(own));
        for t in times {
            out.latency.push_ms(t);
        }
    }
    drop(conns);
    hs.terminate(STOP_TIMEOUT)?;
    Ok(Some(out))
}

/// CPU time this process (every thread) has used so far.
fn own_cpu_time() -> Result<Duration, Error> {
    crate::sys::process_cpu_time(std::process::id())
        .map_err(|e| Error(format!("reading the harness's CPU clock: {e}")))
}

/// What the sessions scenario measured.
#[derive(Debug)]
pub struct Sessions {
    /// Sessions opened (each on a connection of its own, all held).
    pub sessions: usize,
    /// Of those, how many answered a `ping` on their connection at the end.
    pub answered: usize,
    /// The server's memory with one warm-up session, before the others.
    pub before: Memory,
    /// The server's memory with every session open and idle.
    pub after: Memory,
    /// Connecting and initializing them all, one after another.
    pub open: Duration,
    /// `RLIMIT_NOFILE` (soft, hard) of the server.
    pub nofile: (u64, u64),
}

impl Sessions {
    /// Growth per session of one of the memory figures, KiB.
    pub fn per_session(&self, field: impl Fn(&Memory) -> u64) -> f64 {
        (field(&self.after) as f64 - field(&self.before) as f64) / self.sessions.max(1) as f64
    }
}

/// Descriptors each side keeps beyond one per connection.
const FD_HEADROOM: u64 = 256;

/// Raises this process's soft descriptor limit to hold `need`, as far as
/// the hard limit allows; returns the (soft, hard) limit now in force.
fn raise_own_nofile(need: u64) -> (u64, u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let now = getrlimit(Resource::Nofile);
    let (soft, hard) = (
        now.current.unwrap_or(u64::MAX),
        now.maximum.unwrap_or(u64::MAX),
    );
    if soft >= need {
        return (soft, hard);
    }
    let want = need.min(hard);
    let raised = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(want),
            maximum: now.maximum,
        },
    );
    if raised.is_ok() {
        (want, hard)
    } else {
        (soft, hard)
    }
}

/// `sessions` sessions, each by `initialize` (and `initialized`) on a
/// keep-alive connection of its own, all held open at once in a server
/// started with `MCP_EXEC_HTTP_MAX_CONNECTIONS` above their number and a
/// descriptor limit that holds them; the server's RSS before and after,
/// and a `ping` on every connection at the end.
pub fn sessions(binary: &Path, protocol: &str, sessions: usize) -> Result<Option<Sessions>, Error> {
    let need = sessions as u64 + FD_HEADROOM;
    let (soft, hard) = raise_own_nofile(need);
    if soft < need {
        return Err(Error(format!(
            "http_sessions: {sessions} connections need {need} descriptors, \
             and this process's limit is {soft} (hard {hard})"
        )));
    }
    let nofile = (soft, hard);
    let max_connections = (sessions + 1000).to_string();
    // Sessions past MCP_EXEC_HTTP_MAX_SESSIONS would end the least recently used.
    let mut settings = Launch::with_env(&[
        ("MCP_EXEC_HTTP_MAX_CONNECTIONS", &max_connections),
        ("MCP_EXEC_HTTP_MAX_SESSIONS", &max_connections),
    ]);
    settings.nofile = Some(nofile);
    let Some(hs) = HttpServer::launch(binary, &settings, false)? else {
        return Ok(None);
    };
    // One session first, so that what any first session allocates once
    // (lazy statics, the runtime's first connection task) is not counted.
    let mut first = hs.session(protocol)?;
    first.ping()?;
    std::thread::sleep(Duration::from_millis(50));
    let before = hs.server.memory()?;

    let t0 = Instant::now();
    let mut conns = Vec::with_capacity(sessions);
    for i in 0..sessions {
        let conn = hs.session(protocol).map_err(|e| {
            Error(format!(
                "http_sessions: session {} of {sessions}: {e}",
                i + 1
            ))
        })?;
        conns.push(conn);
    }
    let open = t0.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    let after = hs.server.memory()?;

    let mut answered = 0;
    for c in &mut conns {
        if c.ping().is_ok() {
            answered += 1;
        }
    }
    first.ping()?;
    drop(conns);
    drop(first);
    hs.terminate(STOP_TIMEOUT)?;
    Ok(Some(Sessions {
        sessions,
        answered,
        before,
        after,
        open,
        nofile,
    }))
}
