//! Listener floods: token holders' latency on every listener while one
//! listener at a time is flooded with silent connections, against the same
//! clients with no flood, and the server's descriptors at their peak.
//!
//! One server, its descriptor limit at 1024 (where an unbounded listener
//! ran the server out of descriptors before the floor), with every
//! listener on loopback and the token set: MCP HTTP, metrics, envd,
//! sandboxd REST and, when built, sandboxd gRPC. For each listener in
//! turn, a flooder holds [`FLOOD`] connections that send nothing, opening a
//! fresh batch every 300 ms (well past each listener's cap), while
//! [`CLIENTS`] token holders each make requests in turn to the four
//! HTTP/1.1 listeners, every request on a fresh connection (so each one
//! goes through the flooded server's `accept`). A request's latency is from
//! `connect` to its whole answer. The baseline is the same clients with no
//! flood, half before the floods and half after.
//!
//! The flooder and the clients are threads of this process on the same
//! two CPUs: part of the slowdown measured is theirs.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::Error;
use crate::client::Launch;
use crate::http_client::{Conn, HttpServer};
use crate::stats::Samples;

const TOKEN: &str = "bench-flood-token-0123456789abcdef";
/// Silent connections held by the flooder at a time.
const FLOOD: usize = 400;
/// Token holders measured at once.
pub const CLIENTS: usize = 20;
/// The server's descriptor limit (soft and hard).
pub const NOFILE: u64 = 1024;

/// One flooded listener's figures.
#[derive(Debug)]
pub struct Flooded {
    /// The listener flooded (its `listener` label).
    pub listener: &'static str,
    /// The token holders' latency meanwhile, ms.
    pub latency: Samples,
    /// Silent connections the flooder opened.
    pub opened: usize,
}

/// What the floods did.
#[derive(Debug, Default)]
pub struct Floods {
    /// One entry per flooded listener.
    pub flooded: Vec<Flooded>,
    /// The same clients with no flood, ms.
    pub baseline: Samples,
    /// The most descriptors the server held at once during any flood.
    pub peak_fds: usize,
    /// Requests not answered `200` (each fails the run).
    pub failed: Vec<String>,
}

/// A request a token holder sends to one listener.
struct Target {
    addr: SocketAddr,
    method: &'static str,
    path: &'static str,
    headers: Vec<(&'static str, String)>,
    body: &'static [u8],
}

fn served(t: &Target) -> Result<Duration, String> {
    let begun = Instant::now();
    let mut c = Conn::open(t.addr).map_err(|e| e.0)?;
    let headers: Vec<(&str, &str)> = t.headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = c
        .send(t.method, t.path, &headers, t.body)
        .map_err(|e| format!("{} {}: {}", t.method, t.path, e.0))?;
    let took = begun.elapsed();
    if r.status == 200 {
        Ok(took)
    } else {
        Err(format!("{} {}: status {}", t.method, t.path, r.status))
    }
}

/// `per_client` requests from each of [`CLIENTS`] threads at once, cycling
/// through `targets`.
fn measure(targets: &[Target], per_client: usize, into: &mut Samples, failed: &mut Vec<String>) {
    let results: Vec<Vec<Result<Duration, String>>> = std::thread::scope(|scope| {
        let each: Vec<_> = (0..CLIENTS)
            .map(|i| {
                scope.spawn(move || {
                    (0..per_client)
                        .map(|n| served(&targets[(i + n) % targets.len()]))
                        .collect()
                })
            })
            .collect();
        each.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec![Err("a client panicked".into())])
            })
            .collect()
    });
    for r in results.into_iter().flatten() {
        match r {
            Ok(d) => into.push_ms(d),
            Err(e) => failed.push(e),
        }
    }
}

/// Holds [`FLOOD`] silent connections to `addr`, a fresh batch every
/// 300 ms, until `stop`.
fn flood(addr: SocketAddr, stop: &AtomicBool, opened: &AtomicUsize) {
    let mut held: Vec<TcpStream> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        held.clear();
        for _ in 0..FLOOD {
            if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                held.push(s);
            }
        }
        opened.fetch_add(held.len(), Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// Runs the floods; `None` against a binary without HTTP.
pub fn floods(binary: &Path, per_client: usize) -> Result<Option<Floods>, Error> {
    let root = std::env::temp_dir();
    let mut launch = Launch::with_env(&[
        ("MCP_EXEC_HTTP_TOKEN", TOKEN),
        ("MCP_EXEC_SANDBOXD_ROOT", &root.display().to_string()),
    ]);
    launch.nofile = Some((NOFILE, NOFILE));
    for flag in ["--metrics-listen", "--envd", "--sandboxd-rest"] {
        launch
            .args
            .extend([flag.to_owned(), "127.0.0.1:0".to_owned()]);
    }
    // sandboxd gRPC is in the default build; a build without it refuses the
    // flag, so it is tried first and dropped when refused.
    let mut with_grpc = launch.clone();
    with_grpc
        .args
        .extend(["--sandboxd-grpc".to_owned(), "127.0.0.1:0".to_owned()]);
    let (hs, grpc) = match HttpServer::launch(binary, &with_grpc, false) {
        Ok(Some(hs)) => (hs, true),
        Ok(None) => return Ok(None),
        Err(_) => match HttpServer::launch(binary, &launch, false)? {
            Some(hs) => (hs, false),
            None => return Ok(None),
        },
    };
    let bearer = format!("Bearer {TOKEN}");
    let metrics = hs.listener("metrics")?;
    let envd = hs.listener("envd")?;
    let rest = hs.listener("sandboxd REST")?;
    let targets = [
        Target {
            addr: hs.addr,
            method: "GET",
            path: "/ports",
            headers: vec![("Authorization", bearer.clone())],
            body: b"",
        },
        Target {
            addr: metrics,
            method: "GET",
            path: "/healthz",
            headers: Vec::new(),
            body: b"",
        },
        Target {
            addr: envd,
            method: "POST",
            path: "/process.Process/List",
            headers: vec![
                ("X-Access-Token", TOKEN.to_owned()),
                ("Content-Type", "application/json".to_owned()),
            ],
            body: b"{}",
        },
        Target {
            addr: rest,
            method: "GET",
            path: "/v1/metadata",
            headers: vec![("Authorization", bearer.clone())],
            body: b"",
        },
    ];
    let mut flooded: Vec<(&'static str, SocketAddr)> = vec![
        ("mcp", hs.addr),
        ("metrics", metrics),
        ("envd", envd),
        ("sandboxd-rest", rest),
    ];
    if grpc {
        flooded.push(("sandboxd-grpc", hs.listener("sandboxd gRPC")?));
    }
    let pid = hs.server.pid();
    let mut out = Floods::default();
    let mut failed = Vec::new();
    // Warm-up, then the first half of the baseline.
    measure(&targets, 2, &mut Samples::default(), &mut failed);
    let half = per_client.div_ceil(2);
    measure(&targets, half, &mut out.baseline, &mut failed);
    for &(listener, addr) in &flooded {
        let stop = AtomicBool::new(false);
        let opened = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let mut latency = Samples::default();
        std::thread::scope(|scope| {
            let (stop, opened, peak) = (&stop, &opened, &peak);
            let flooder = scope.spawn(move || flood(addr, stop, opened));
            let sampler = scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(open_fds(pid), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
            // Let the flood fill the listener's table first.
            std::thread::sleep(Duration::from_millis(800));
            measure(&targets, per_client, &mut latency, &mut failed);
            stop.store(true, Ordering::Relaxed);
            let _ = flooder.join();
            let _ = sampler.join();
        });
        out.peak_fds = out.peak_fds.max(peak.load(Ordering::Relaxed));
        out.flooded.push(Flooded {
            listener,
            latency,
            opened: opened.load(Ordering::Relaxed),
        });
        // The flood's connections close with the flooder; let the server
        // see them go before the next listener's.
        std::thread::sleep(Duration::from_millis(300));
    }
    measure(&targets, per_client - half, &mut out.baseline, &mut failed);
    out.failed = failed;
    hs.terminate(Duration::from_secs(10))?;
    Ok(Some(out))
}
