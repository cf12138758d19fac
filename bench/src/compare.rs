//! `--compare OTHER`: the headline figures of two builds measured in the
//! same run, interleaved, so that the machine's load hits both alike (issue
//! 19: before and after, on a box where others compile).
//!
//! "This build" is `--binary`, "the other" is `--compare`. Each timed figure
//! starts one server of each build and alternates between them call by call
//! (or burst by burst), the order flipping every round: stdio `execute true`
//! rtt, the same over HTTP with a token (p50 and p99; a plain JSON answer,
//! then an event-stream answer to a call with a progress token), and the blocking
//! burst, whose libc baseline runs in the same rounds so that each build's
//! ratio to it is reported too. Size and memory are not timings and are
//! taken one build after the other: the binary's bytes, the idle RSS after
//! `initialize`, and the peak RSS over the throughput runs.
//!
//! Figures: `ab_*` keys, each with the other build as its baseline (the
//! ratio is this build / the other; for latencies `p99_ratio` is this p99 /
//! the other's p99), and `ab_burst_blocking{,_other}` against libc.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::Error;
use crate::baseline;
use crate::client::Server;
use crate::http;
use crate::report::Figure;
use crate::scenarios::{self, CALL_TIMEOUT, Paired, Plan, expect_state};
use crate::stats::Samples;

/// What the baselines of the A/B figures are.
const OTHER: &str = "the --compare build, interleaved";
const OTHER_VALUE: &str = "the --compare build";
const LIBC: &str = "as many posix_spawn+waitpid of the same sh -c at once (libc), same rounds";
/// How long a server may take to exit.
const STOP: Duration = Duration::from_secs(10);

fn started(binary: &Path, protocol: &str) -> Result<Server, Error> {
    let mut s = Server::spawn(binary)?;
    s.initialize(protocol, CALL_TIMEOUT)?;
    Ok(s)
}

fn execute_true(s: &mut Server) -> Result<Duration, Error> {
    let (took, result) = s.tool("execute", json!({"command": "true"}), CALL_TIMEOUT)?;
    expect_state(&result, "success", "compare rtt")?;
    Ok(took)
}

/// Calls `a` and `b` once each per round for `rounds` rounds, `a` first in
/// even rounds; their samples (ms) as `server` (a) and `baseline` (b).
fn alternate(
    rounds: usize,
    mut a: impl FnMut() -> Result<Duration, Error>,
    mut b: impl FnMut() -> Result<Duration, Error>,
) -> Result<Paired, Error> {
    let mut out = Paired::default();
    for i in 0..rounds {
        if i % 2 == 0 {
            out.server.push_ms(a()?);
            out.baseline.push_ms(b()?);
        } else {
            out.baseline.push_ms(b()?);
            out.server.push_ms(a()?);
        }
    }
    Ok(out)
}

/// Idle RSS after `initialize` and peak RSS over `runs` throughput runs of
/// `bytes` (MiB each), in a fresh server of `binary`.
fn memory(binary: &Path, protocol: &str, plan: &Plan) -> Result<(f64, f64), Error> {
    let mut s = started(binary, protocol)?;
    std::thread::sleep(Duration::from_millis(50));
    let idle = s.memory()?.rss_kib;
    let t = scenarios::throughput(&mut s, plan.throughput_runs, plan.throughput_bytes)?;
    s.shutdown(STOP)?;
    Ok((idle as f64 / 1024.0, t.peak_kib as f64 / 1024.0))
}

fn ab_latency(key: &'static str, label: String, ab: &Paired) -> Figure {
    let mut f = Figure::latency_vs(key, label, &ab.server, &ab.baseline, OTHER);
    f.p99_ratio = Some(ab.server.p99() / ab.baseline.p99());
    f
}

/// The `ab_*` figures of `binary` against `other`.
pub fn figures(
    binary: &Path,
    other: &Path,
    protocol: &str,
    plan: &Plan,
    figures: &mut Vec<Figure>,
) -> Result<(), Error> {
    let size = |b: &Path| scenarios::size(b).map(|s| s.bytes as f64 / f64::from(1 << 20));
    figures.push(Figure::value_vs(
        "ab_size",
        "A/B: binary size",
        "MiB",
        size(binary)?,
        size(other)?,
        OTHER_VALUE,
    ));
    let (idle, peak) = memory(binary, protocol, plan)?;
    let (other_idle, other_peak) = memory(other, protocol, plan)?;
    figures.push(Figure::value_vs(
        "ab_idle_rss",
        "A/B: idle RSS after initialize",
        "MiB",
        idle,
        other_idle,
        OTHER_VALUE,
    ));
    figures.push(Figure::value_vs(
        "ab_peak_rss",
        format!(
            "A/B: peak RSS over {} × {} MiB throughput",
            plan.throughput_runs,
            plan.throughput_bytes >> 20
        ),
        "MiB",
        peak,
        other_peak,
        OTHER_VALUE,
    ));

    let (mut a, mut b) = (started(binary, protocol)?, started(other, protocol)?);
    for _ in 0..3 {
        execute_true(&mut a)?;
        execute_true(&mut b)?;
    }
    let rtt = alternate(plan.rtt, || execute_true(&mut a), || execute_true(&mut b))?;
    figures.push(ab_latency(
        "ab_rtt",
        "A/B: stdio rtt, blocking execute `true`".into(),
        &rtt,
    ));

    let n = plan.blocking_burst_jobs;
    let spawn = baseline::PosixSpawn::of(scenarios::BLOCKING_SLEEP)?;
    let (mut this, mut that, mut libc) =
        (Samples::default(), Samples::default(), Samples::default());
    for i in 0..plan.blocking_burst_runs {
        libc.push_ms(baseline::parallel_spawns_of(&spawn, n, n)?);
        if i % 2 == 0 {
            this.push_ms(scenarios::burst_blocking_once(&mut a, n)?);
            that.push_ms(scenarios::burst_blocking_once(&mut b, n)?);
        } else {
            that.push_ms(scenarios::burst_blocking_once(&mut b, n)?);
            this.push_ms(scenarios::burst_blocking_once(&mut a, n)?);
        }
    }
    a.shutdown(STOP)?;
    b.shutdown(STOP)?;
    let label = |who: &str| {
        format!(
            "A/B: {n} blocking execute `{}` at once on one stdio session, {who}",
            scenarios::BLOCKING_SLEEP
        )
    };
    for (key, who, s) in [
        ("ab_burst_blocking", "this build", &this),
        ("ab_burst_blocking_other", "the --compare build", &that),
    ] {
        figures.push(
            Figure::latency_vs(key, label(who), s, &libc, LIBC)
                .with_ratio_target("≤ 1.25× baseline (≥ 0.8× its speed)", 1.25),
        );
    }

    let sessions = (
        http::token_session(binary, protocol)?,
        http::token_session(other, protocol)?,
    );
    if let (Some(mut a), Some(mut b)) = sessions {
        let ab = alternate(
            plan.http_execute,
            || http::execute_true(&mut a.1, "compare http_execute"),
            || http::execute_true(&mut b.1, "compare http_execute"),
        )?;
        let sse = alternate(
            plan.http_execute,
            || http::execute_true_sse(&mut a.1, "compare http_execute_sse"),
            || http::execute_true_sse(&mut b.1, "compare http_execute_sse"),
        )?;
        http::end_session(a)?;
        http::end_session(b)?;
        figures.push(ab_latency(
            "ab_http_execute",
            "A/B: HTTP rtt with a token, blocking execute `true`, sequential".into(),
            &ab,
        ));
        figures.push(ab_latency(
            "ab_http_execute_sse",
            "A/B: the same with a progressToken (an event-stream answer)".into(),
            &sse,
        ));
    } else {
        eprintln!("bench: ab_http_execute skipped: a build has no HTTP transport");
    }
    Ok(())
}
