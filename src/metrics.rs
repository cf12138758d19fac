//! Prometheus metrics: one process-wide registry, a leaf module.
//!
//! Counters are bumped where the event happens (`jobs` when a job starts or
//! ends, `server::session` when a request is answered) through the free
//! functions here; they cost an atomic add. Gauges that mirror state owned
//! elsewhere (the job table's counts, the breaker, the HTTP sessions, the
//! reaper's orphan count, the jobs awaiting input — looked at in `/proc`
//! only then) are not kept in step: the scraper hands their
//! values in a [`Snapshot`] and [`render`] sets them just before encoding.
//! The `process_*` gauges are read from `/proc/self` at scrape time.
//!
//! Planned, not yet exported: dropped bytes per stream,
//! redactions, zombies, request durations.

use std::sync::atomic::AtomicU64;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, &'static str)>;

struct Metrics {
    registry: Mutex<Registry>,
    jobs_started: Counter,
    jobs_finished: Family<Labels, Counter>,
    job_duration: Histogram,
    queue_wait: Histogram,
    requests: Family<Labels, Counter>,
    orphans_reaped: Counter,
    /// `[stdout, stderr]`, fetched from their family once.
    output_bytes: [Counter; 2],
    /// `[upload, download]`, fetched from their family once.
    transfer_bytes: [Counter; 2],
    spawn_failures: Family<Labels, Counter>,
    http_connections_dropped: Family<Labels, Counter>,
    cpu_seconds: Counter<f64, AtomicU64>,
    jobs_running: Gauge,
    jobs_queued: Gauge,
    jobs_awaiting_input: Gauge,
    jobs_capacity: Gauge,
    http_sessions: Gauge,
    tasks: Family<Labels, Gauge>,
    breaker_open: Gauge,
    resident: Gauge,
    open_fds: Gauge,
    start_time: Gauge,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let output: Family<Labels, Counter> = Family::default();
    // One statement each: the guard `get_or_create` returns holds the
    // family's read lock until the statement ends, and creating the second
    // label set needs its write lock.
    let stdout = output.get_or_create(&vec![("stream", "stdout")]).clone();
    let stderr = output.get_or_create(&vec![("stream", "stderr")]).clone();
    let transfer: Family<Labels, Counter> = Family::default();
    let upload = transfer
        .get_or_create(&vec![("direction", "upload")])
        .clone();
    let download = transfer
        .get_or_create(&vec![("direction", "download")])
        .clone();
    let m = Metrics {
        output_bytes: [stdout, stderr],
        transfer_bytes: [upload, download],
        spawn_failures: Family::default(),
        http_connections_dropped: Family::default(),
        cpu_seconds: Counter::default(),
        registry: Mutex::new(Registry::default()),
        jobs_started: Counter::default(),
        jobs_finished: Family::default(),
        job_duration: Histogram::new(BUCKETS),
        queue_wait: Histogram::new(BUCKETS),
        requests: Family::default(),
        orphans_reaped: Counter::default(),
        jobs_running: Gauge::default(),
        jobs_queued: Gauge::default(),
        jobs_awaiting_input: Gauge::default(),
        jobs_capacity: Gauge::default(),
        http_sessions: Gauge::default(),
        tasks: Family::default(),
        breaker_open: Gauge::default(),
        resident: Gauge::default(),
        open_fds: Gauge::default(),
        start_time: Gauge::default(),
    };
    {
        let mut r = m.registry.lock().unwrap_or_else(|p| p.into_inner());
        let mcp = r.sub_registry_with_prefix("mcp_exec");
        // `Counter`s get their `_total` suffix from the encoder.
        mcp.register("jobs_started", "Jobs started", m.jobs_started.clone());
        mcp.register(
            "jobs_finished",
            "Jobs that reached a terminal state, by outcome",
            m.jobs_finished.clone(),
        );
        mcp.register(
            "job_duration_seconds",
            "How long jobs ran, start to exit",
            m.job_duration.clone(),
        );
        mcp.register(
            "job_queue_wait_seconds",
            "How long jobs waited for capacity before they started",
            m.queue_wait.clone(),
        );
        mcp.register("jobs_running", "Jobs running now", m.jobs_running.clone());
        mcp.register(
            "jobs_queued",
            "Jobs waiting to start",
            m.jobs_queued.clone(),
        );
        mcp.register(
            "jobs_awaiting_input",
            "Running jobs blocked reading their stdin or terminal (looked at when scraped)",
            m.jobs_awaiting_input.clone(),
        );
        mcp.register(
            "jobs_capacity",
            "Jobs that may run at once (MCP_EXEC_MAX_RUNNING)",
            m.jobs_capacity.clone(),
        );
        mcp.register(
            "requests",
            "MCP requests answered, by transport, method and outcome",
            m.requests.clone(),
        );
        mcp.register(
            "http_sessions",
            "Open Streamable HTTP sessions",
            m.http_sessions.clone(),
        );
        mcp.register(
            "tasks",
            "Live MCP Tasks, by status (working, completed, failed, cancelled)",
            m.tasks.clone(),
        );
        mcp.register(
            "breaker_open",
            "1 while the spawn circuit breaker refuses new jobs",
            m.breaker_open.clone(),
        );
        mcp.register(
            "orphans_reaped",
            "Orphaned processes reaped (subreaper or PID 1)",
            m.orphans_reaped.clone(),
        );
        mcp.register(
            "output_bytes",
            "Bytes jobs wrote, by stream (before any window dropped some)",
            output,
        );
        mcp.register(
            "transfer_bytes",
            "File bytes written (upload) and read (download) by the file tools and /files",
            transfer,
        );
        mcp.register(
            "spawn_failures",
            "Jobs that could not start, by reason (breaker_open, spawn_error)",
            m.spawn_failures.clone(),
        );
        mcp.register(
            "http_connections_dropped",
            "Connections a listener dropped, by listener (mcp, metrics, envd, \
             sandboxd-rest, sandboxd-grpc) and reason (evicted, refused, silent, foreign)",
            m.http_connections_dropped.clone(),
        );
        let process = r.sub_registry_with_prefix("process");
        process.register(
            "cpu_seconds",
            "User and system CPU time of the server itself, seconds",
            m.cpu_seconds.clone(),
        );
        process.register(
            "resident_memory_bytes",
            "Resident memory size in bytes",
            m.resident.clone(),
        );
        process.register("open_fds", "Open file descriptors", m.open_fds.clone());
        process.register(
            "start_time_seconds",
            "Start time of the process since the Unix epoch, seconds",
            m.start_time.clone(),
        );
    }
    m
});

/// Histogram buckets, seconds: from a quick command to an hour-long build.
const BUCKETS: [f64; 12] = [
    0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// A job ran this long.
pub fn job_duration(d: Duration) {
    METRICS.job_duration.observe(d.as_secs_f64());
}

/// A job waited this long in the queue before it started (0: it did not).
pub fn queue_wait(d: Duration) {
    METRICS.queue_wait.observe(d.as_secs_f64());
}

/// A job wrote `n` bytes to stdout (or stderr).
pub fn output_bytes(stderr: bool, n: usize) {
    METRICS.output_bytes[usize::from(stderr)].inc_by(n as u64);
}

/// `n` file bytes were committed by an upload (`download: false`) or sent
/// by a download.
pub fn transfer_bytes(download: bool, n: u64) {
    METRICS.transfer_bytes[usize::from(download)].inc_by(n);
}

/// A job could not start.
pub fn spawn_failed(reason: &'static str) {
    METRICS
        .spawn_failures
        .get_or_create(&vec![("reason", reason)])
        .inc();
}

/// A listener (`mcp`, `metrics`, `envd`, `sandboxd-rest`, `sandboxd-grpc`)
/// dropped a connection: `evicted` for a newcomer at the limit, `refused`
/// (the newcomer, when none could be evicted), `silent` (it sent nothing
/// within its first deadline), `foreign` (a local process of another user
/// on a listener without a token).
pub fn http_connection_dropped(listener: &'static str, reason: &'static str) {
    METRICS
        .http_connections_dropped
        .get_or_create(&vec![("listener", listener), ("reason", reason)])
        .inc();
}

/// A job was spawned.
pub fn job_started() {
    METRICS.jobs_started.inc();
}

/// A job reached a terminal state: `success`, `error`, `signal`,
/// `timeout`, `start_error`; `cause` (why it ended) is a label only when known.
pub fn job_finished(outcome: &'static str, cause: Option<&'static str>) {
    let mut labels = vec![("outcome", outcome)];
    if let Some(cause) = cause {
        labels.push(("cause", cause));
    }
    METRICS.jobs_finished.get_or_create(&labels).inc();
}

/// A request was answered on `transport` (`stdio`, `http`); `method` is
/// one of the server's methods or `other`; `outcome` `ok` or `error`.
pub fn request(transport: &'static str, method: &'static str, outcome: &'static str) {
    METRICS
        .requests
        .get_or_create(&vec![
            ("transport", transport),
            ("method", method),
            ("outcome", outcome),
        ])
        .inc();
}

/// A live MCP Task moved from status `from` (`None`: it was created) to
/// `to` (`None`: it was removed).
pub fn task_moved(from: Option<&'static str>, to: Option<&'static str>) {
    if let Some(from) = from {
        METRICS.tasks.get_or_create(&vec![("status", from)]).dec();
    }
    if let Some(to) = to {
        METRICS.tasks.get_or_create(&vec![("status", to)]).inc();
    }
}

/// State owned elsewhere, read by the scraper.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Jobs running.
    pub running: usize,
    /// Jobs queued.
    pub queued: usize,
    /// Running jobs blocked reading their input.
    pub awaiting_input: usize,
    /// `MCP_EXEC_MAX_RUNNING`.
    pub capacity: usize,
    /// Open HTTP sessions.
    pub http_sessions: usize,
    /// Whether the breaker is open.
    pub breaker_open: bool,
    /// Orphans reaped so far (monotonic).
    pub orphans_reaped: u64,
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The text exposition (OpenMetrics text, which Prometheus reads) with
/// `snapshot`'s values and the process gauges read now.
pub fn render(snapshot: &Snapshot) -> String {
    let m = &*METRICS;
    m.jobs_running.set(gauge(snapshot.running));
    m.jobs_queued.set(gauge(snapshot.queued));
    m.jobs_awaiting_input.set(gauge(snapshot.awaiting_input));
    m.jobs_capacity.set(gauge(snapshot.capacity));
    m.http_sessions.set(gauge(snapshot.http_sessions));
    m.breaker_open.set(i64::from(snapshot.breaker_open));
    let seen = m.orphans_reaped.get();
    m.orphans_reaped
        .inc_by(snapshot.orphans_reaped.saturating_sub(seen));
    let process = process_stats();
    m.resident.set(process.resident);
    m.open_fds.set(process.open_fds);
    m.start_time.set(process.start_time);
    let seen = m.cpu_seconds.get();
    if process.cpu_seconds > seen {
        m.cpu_seconds.inc_by(process.cpu_seconds - seen);
    }
    let mut out = String::new();
    let registry = m.registry.lock().unwrap_or_else(|p| p.into_inner());
    // Writing into a String does not fail.
    let _ = encode(&mut out, &registry);
    out
}

#[derive(Default)]
struct ProcessStats {
    resident: i64,
    open_fds: i64,
    start_time: i64,
    cpu_seconds: f64,
}

/// Reads `/proc/self`; a value that cannot be read is reported as 0.
fn process_stats() -> ProcessStats {
    let page = i64::try_from(rustix::param::page_size()).unwrap_or(4096);
    let resident = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<i64>().ok())
        .map_or(0, |pages| pages.saturating_mul(page));
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .map(|d| gauge(d.count().saturating_sub(1)))
        .unwrap_or(0);
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which may itself contain spaces and ')';
    // field N of stat(5) is `fields[N - 3]`.
    let fields: Vec<&str> = stat
        .rfind(')')
        .map(|i| stat[i + 1..].split_whitespace().collect())
        .unwrap_or_default();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    let hz = rustix::param::clock_ticks_per_second().max(1);
    let cpu_ticks = field(14).unwrap_or(0) + field(15).unwrap_or(0);
    ProcessStats {
        resident,
        open_fds,
        start_time: field(22).and_then(start_time).unwrap_or(0),
        cpu_seconds: cpu_ticks as f64 / hz as f64,
    }
}

/// Boot time (`btime` in /proc/stat) plus the process's start in clock
/// `ticks` after boot (field 22 of /proc/self/stat).
fn start_time(ticks: u64) -> Option<i64> {
    let btime: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
    let hz = rustix::param::clock_ticks_per_second().max(1);
    i64::try_from(btime + ticks / hz).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_every_required_family_and_ends_with_eof() {
        job_started();
        job_finished("success", None);
        job_finished("signal", Some("oom"));
        request("stdio", "ping", "ok");
        let text = render(&Snapshot {
            running: 2,
            awaiting_input: 1,
            capacity: 8,
            ..Snapshot::default()
        });
        for name in [
            "mcp_exec_jobs_started_total",
            "mcp_exec_jobs_finished_total{outcome=\"success\"}",
            "mcp_exec_jobs_finished_total{outcome=\"signal\",cause=\"oom\"}",
            "mcp_exec_jobs_running 2",
            "mcp_exec_job_duration_seconds_bucket{le=\"0.01\"}",
            "mcp_exec_job_queue_wait_seconds_count",
            "mcp_exec_jobs_queued 0",
            "mcp_exec_jobs_awaiting_input 1",
            "mcp_exec_jobs_capacity 8",
            "mcp_exec_requests_total{transport=\"stdio\",method=\"ping\",outcome=\"ok\"}",
            "mcp_exec_http_sessions 0",
            "mcp_exec_breaker_open 0",
            "mcp_exec_orphans_reaped_total",
            "process_resident_memory_bytes",
            "process_open_fds",
            "process_start_time_seconds",
            "process_cpu_seconds_total",
            "mcp_exec_output_bytes_total{stream=\"stdout\"}",
        ] {
            assert!(text.contains(name), "{name} missing from:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
