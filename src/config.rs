//! Configuration from the environment (docs/configuration.md).
//!
//! Every tuning variable has a default; an invalid value is reported once at
//! start-up (returned as a warning, logged by `main`) and the default is
//! used. Security settings (the cwd policy, redaction) are kept raw here and
//! turned into policies by `main`, which stops the server with exit code 2
//! when one is invalid (security settings fail closed); a security switch that
//! cannot be read (`MCP_EXEC_HTTP_INSECURE=maybe`) is one of
//! [`Config::refusals`], which stop it the same way.
//!
//! A switch is on for `1`, `true`, `yes`, `on` and off for `0`, `false`,
//! `no`, `off` or empty (any case, see [`switch`]); nothing else is taken
//! silently as off.

use std::time::Duration;

/// The server's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// `MCP_EXEC_DEFAULT_TIMEOUT`: default `wait` timeout.
    pub default_timeout: Duration,
    /// `MCP_EXEC_MAX_OUTPUT_BYTES`: retained window per stream per job.
    pub max_output_bytes: usize,
    /// `MCP_EXEC_PROGRESS_INTERVAL`: seconds between progress notifications.
    pub progress_interval: Duration,
    /// `MCP_EXEC_SHUTDOWN_GRACE`: seconds between TERM and KILL at shutdown.
    pub shutdown_grace: Duration,
    /// `MCP_EXEC_LOG`: tracing filter for stderr.
    pub log: String,
    /// `MCP_EXEC_LOG_JOURNALD=1`: also log to journald when its socket exists.
    pub log_journald: bool,
    /// `MCP_EXEC_MAX_LINE_BYTES`: longest accepted request line.
    pub max_line_bytes: usize,
    /// `MCP_EXEC_JOB_TIMEOUT`: default job deadline (`None` = none).
    pub job_timeout: Option<Duration>,
    /// `MCP_EXEC_YIELD_AFTER`: a blocking `execute` returns a running job
    /// after this (`None` = never).
    pub yield_after: Option<Duration>,
    /// `MCP_EXEC_MAX_RUNNING`: jobs running at once.
    pub max_running: usize,
    /// The most connections one listener may hold open: its share of the
    /// descriptors ([`descriptor_budget`]); a listener's cap is the smaller
    /// of this and `MCP_EXEC_HTTP_MAX_CONNECTIONS`.
    pub connection_share: usize,
    /// `MCP_EXEC_MAX_QUEUED`: jobs waiting to start.
    pub max_queued: usize,
    /// `MCP_EXEC_TASK_TTL`: how long an MCP Task and its job are kept, the
    /// default and the maximum.
    pub task_ttl: Duration,
    /// `MCP_EXEC_MAX_TASKS`: MCP Tasks that hold a job or a result at once
    /// (docs/tasks.md).
    pub max_tasks: usize,
    /// `MCP_EXEC_MAX_WATCHES`: file watches open at once, every listener's
    /// together; `None`: a quarter of `fs.inotify.max_user_instances`
    /// (`files::watch::instance_budget`).
    pub max_watches: Option<usize>,
    /// `MCP_EXEC_MAX_OUTPUT_BYTES_LIMIT`: largest per-job `max_output_bytes`.
    pub max_output_bytes_limit: usize,
    /// `MCP_EXEC_BREAKER_FAILURES`: consecutive resource failures that open
    /// the breaker (0 = never).
    pub breaker_failures: u32,
    /// `MCP_EXEC_BREAKER_COOLDOWN`: how long an open breaker refuses jobs.
    pub breaker_cooldown: Duration,
    /// `MCP_EXEC_SHELL_SESSION_IDLE`: how long a shell session lives after
    /// its last job.
    pub shell_session_idle: Duration,
    /// `MCP_EXEC_ALLOWED_CWDS`, raw.
    pub allowed_cwds: Option<String>,
    /// `MCP_EXEC_DEFAULT_CWD`, raw.
    pub default_cwd: Option<String>,
    /// `MCP_EXEC_REDACT`, raw.
    pub redact: Option<String>,
    /// `MCP_EXEC_REDACT_PATTERNS_FILE`, raw.
    pub redact_patterns_file: Option<String>,
    /// `MCP_EXEC_HTTP` / `--http`: the Streamable HTTP listen address, raw.
    pub http: Option<String>,
    /// `MCP_EXEC_HTTP_TOKEN_FILE`, raw; set but empty is kept (and refused
    /// by the HTTP settings: an unset shell variable must not mean "no token").
    pub http_token_file: Option<String>,
    /// `MCP_EXEC_HTTP_TOKEN`, raw (never shown by `Debug`); set but empty is
    /// kept, like the file's.
    pub http_token: Option<Secret>,
    /// `MCP_EXEC_HTTP_ALLOWED_ORIGINS`, raw.
    pub http_allowed_origins: Option<String>,
    /// `MCP_EXEC_HTTP_INSECURE=1`: allow a non-loopback bind without a token.
    pub http_insecure: bool,
    /// `MCP_EXEC_PLATFORM_INSECURE=1`: allow a platform listener (sandboxd,
    /// envd) on a non-loopback address without a token.
    pub platform_insecure: bool,
    /// `MCP_EXEC_HTTP_SESSION_IDLE`: an HTTP session idle this long ends.
    pub http_session_idle: Duration,
    /// `MCP_EXEC_HTTP_MAX_CONNECTIONS`, raw (a limit: validated by `main`).
    pub http_max_connections: Option<String>,
    /// `MCP_EXEC_HTTP_MAX_SESSIONS`: HTTP sessions at most; past it the least
    /// recently used idle one ends.
    pub http_max_sessions: usize,
    /// `MCP_EXEC_HTTP_STALL_TIMEOUT`: how long a write to a client, or an
    /// upload's body frame, may make no progress, and a unary request body
    /// may take to arrive whole (every listener).
    pub http_stall_timeout: Duration,
    /// `MCP_EXEC_METRICS_LISTEN` / `--metrics-listen`, raw.
    pub metrics_listen: Option<String>,
    /// `MCP_EXEC_ENVD` / `--envd`, raw: E2B envd's listener.
    pub envd: Option<String>,
    /// `MCP_EXEC_SANDBOXD_GRPC` / `--sandboxd-grpc`, raw: sandboxd's
    /// `process.v1.ProcessService` over h2c.
    pub sandboxd_grpc: Option<String>,
    /// `MCP_EXEC_SANDBOXD_REST` / `--sandboxd-rest`: sandboxd's REST API, raw.
    pub sandboxd_rest: Option<String>,
    /// `MCP_EXEC_SANDBOXD_ROOT` / `--sandboxd-root`: the directory sandboxd
    /// paths are relative to, raw (default `/workspace`).
    pub sandboxd_root: String,
    /// `MCP_EXEC_SANDBOXD_METADATA_PREFIX` / `--sandboxd-metadata-prefix`:
    /// the environment `/v1/metadata` shows (default `SANDBOX_`).
    pub sandboxd_metadata_prefix: String,
    /// `--no-stdio`: serve no MCP on stdio (a flag only).
    pub no_stdio: bool,
    /// `MCP_EXEC_MAX_TRANSFER_BYTES`: the most file bytes one `upload` or
    /// `download` call carries (decoded). A tuning value.
    pub max_transfer_bytes: usize,
    /// `MCP_EXEC_FETCH_TIMEOUT`: the longest an `upload` of a `file` (an
    /// https URL) may take to fetch, redirects included.
    pub fetch_timeout: Duration,
    /// `MCP_EXEC_CA_FILE`, raw: a PEM file of the CA roots `upload`'s
    /// fetch trusts instead of the system bundle.
    pub ca_file: Option<String>,
    /// `MCP_EXEC_JOB_LIMITS`, raw (a security setting: validated by `main`).
    pub job_limits: Option<String>,
    /// `MCP_EXEC_JOB_OOM_SCORE_ADJ`: the `oom_score_adj` jobs get at least.
    pub job_oom_score_adj: i32,
    /// Security settings whose value cannot be read, one sentence each:
    /// `main` stops the server with exit code 2 naming them, instead of
    /// falling back to a default.
    pub refusals: Vec<String>,
}

/// Reads a switch: `Some(true)` for 1/true/yes/on, `Some(false)` for
/// 0/false/no/off or blank, any case; `None` for anything else.
pub fn switch(raw: &str) -> Option<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "" | "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// What [`switch`] accepts, for messages.
const SWITCH_SPELLINGS: &str = "1/0, true/false, yes/no, on/off";

/// A secret setting: its `Debug` does not show it, so logging the
/// configuration cannot leak it.
#[derive(Clone)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<secret>")
    }
}

/// Descriptors kept for the server itself when the default
/// `MCP_EXEC_MAX_RUNNING` is derived from the descriptor limit.
const RESERVED_FDS: u64 = 64;
/// Each running job holds three pipe ends.
const FDS_PER_JOB: u64 = 3;

impl Config {
    /// `MCP_EXEC_HTTP_MAX_CONNECTIONS`, validated: its default 256 when
    /// unset, an error naming it when it is not a positive count. Every
    /// listener's cap comes from it, so the server checks it at start-up
    /// whenever any listener is configured (and exits 2).
    pub fn http_max_connections(&self) -> Result<usize, String> {
        match &self.http_max_connections {
            None => Ok(256),
            Some(raw) => match raw.trim().parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!(
                    "MCP_EXEC_HTTP_MAX_CONNECTIONS={raw:?} is not a positive count"
                )),
            },
        }
    }

    /// `MCP_EXEC_HTTP_MAX_CONNECTIONS` when it is a positive count, else its
    /// default, 256 (an invalid value has stopped the server at start-up:
    /// [`Config::http_max_connections`]).
    pub fn http_max_connections_or_default(&self) -> usize {
        self.http_max_connections
            .as_deref()
            .and_then(|raw| raw.trim().parse::<usize>().ok())
            .filter(|n| *n > 0)
            .unwrap_or(256)
    }

    /// One listener's connection cap: `MCP_EXEC_HTTP_MAX_CONNECTIONS`, or
    /// its share of the descriptors when that is smaller.
    pub fn listener_cap(&self) -> usize {
        self.http_max_connections_or_default()
            .min(self.connection_share)
    }
}

/// Descriptors a listener may hold beyond its cap at once: the silent
/// newcomers waiting past it for their first bytes (net/accept.rs).
const LATE_FDS_PER_LISTENER: u64 = 64;

/// The descriptor budget of a server with `listeners` listeners under a
/// soft `RLIMIT_NOFILE` of `soft_nofile` (the limit it was given: it is kept,
/// not raised, so every job inherits the same): after [`RESERVED_FDS`] for
/// the server itself (which keeps a token holder's `accept` and a job's
/// spawn possible when every listener is full), half of the rest goes to
/// the listeners' connections, shared equally (each with its late waiters),
/// and the default running-job limit is what the descriptors left allow.
/// Returns (each listener's connection share, the default `MCP_EXEC_MAX_RUNNING`).
pub fn descriptor_budget(soft_nofile: u64, listeners: usize) -> (usize, usize) {
    let listeners = listeners as u64;
    if listeners == 0 {
        return (usize::MAX, max_running_for(soft_nofile));
    }
    let spare = soft_nofile.saturating_sub(RESERVED_FDS);
    let share = (spare / 2 / listeners)
        .saturating_sub(LATE_FDS_PER_LISTENER)
        .max(8);
    let held = listeners * (share + LATE_FDS_PER_LISTENER);
    let jobs = spare.saturating_sub(held) / FDS_PER_JOB;
    (
        usize::try_from(share).unwrap_or(usize::MAX),
        usize::try_from(jobs.max(1)).unwrap_or(usize::MAX),
    )
}

/// The default `MCP_EXEC_MAX_RUNNING` for a soft `RLIMIT_NOFILE` of
/// `soft_nofile`: as many jobs as its descriptors allow after a reserve.
pub fn max_running_for(soft_nofile: u64) -> usize {
    let jobs = soft_nofile.saturating_sub(RESERVED_FDS) / FDS_PER_JOB;
    usize::try_from(jobs.max(1)).unwrap_or(usize::MAX)
}

impl Default for Config {
    fn default() -> Config {
        Config {
            default_timeout: Duration::from_secs(30),
            max_output_bytes: 1 << 20,
            progress_interval: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(3),
            log: "info".into(),
            log_journald: false,
            max_line_bytes: 64 << 20,
            job_timeout: None,
            yield_after: Some(Duration::from_secs(50)),
            max_running: max_running_for(1024),
            connection_share: usize::MAX,
            max_queued: 1000,
            task_ttl: Duration::from_secs(3600),
            max_tasks: 1024,
            max_watches: None,
            max_output_bytes_limit: 64 << 20,
            breaker_failures: 20,
            breaker_cooldown: Duration::from_secs(10),
            shell_session_idle: Duration::from_secs(3600),
            allowed_cwds: None,
            default_cwd: None,
            redact: None,
            redact_patterns_file: None,
            http: None,
            http_token_file: None,
            http_token: None,
            http_allowed_origins: None,
            http_insecure: false,
            platform_insecure: false,
            http_session_idle: Duration::from_secs(3600),
            http_max_connections: None,
            http_max_sessions: 1024,
            http_stall_timeout: Duration::from_secs(30),
            metrics_listen: None,
            envd: None,
            sandboxd_grpc: None,
            sandboxd_rest: None,
            sandboxd_root: "/workspace".into(),
            sandboxd_metadata_prefix: "SANDBOX_".into(),
            no_stdio: false,
            max_transfer_bytes: 8 << 20,
            fetch_timeout: Duration::from_secs(120),
            ca_file: None,
            job_limits: None,
            job_oom_score_adj: 500,
            refusals: Vec::new(),
        }
    }
}

/// The table printed by `--help`: name, default, meaning.
pub const VARIABLES: [(&str, &str, &str); 43] = [
    (
        "MCP_EXEC_DEFAULT_TIMEOUT",
        "30",
        "default `wait` timeout, seconds (float)",
    ),
    (
        "MCP_EXEC_MAX_OUTPUT_BYTES",
        "1048576",
        "retained window per stream per job",
    ),
    (
        "MCP_EXEC_PROGRESS_INTERVAL",
        "10",
        "seconds between progress notifications",
    ),
    (
        "MCP_EXEC_SHUTDOWN_GRACE",
        "3",
        "seconds between TERM and KILL at shutdown and deadlines",
    ),
    (
        "MCP_EXEC_LOG",
        "info",
        "log filter (tracing syntax), to stderr",
    ),
    (
        "MCP_EXEC_LOG_JOURNALD",
        "unset",
        "1 (or true/yes/on): also log to journald when its socket exists",
    ),
    (
        "MCP_EXEC_MAX_LINE_BYTES",
        "67108864",
        "longest accepted request line",
    ),
    (
        "MCP_EXEC_MAX_TRANSFER_BYTES",
        "8388608",
        "most file bytes one upload or download call carries",
    ),
    (
        "MCP_EXEC_FETCH_TIMEOUT",
        "120",
        "seconds an upload of a file reference (https URL) may take to fetch",
    ),
    (
        "MCP_EXEC_CA_FILE",
        "system bundle",
        "PEM file of the CA roots upload's https fetch trusts instead",
    ),
    (
        "MCP_EXEC_JOB_TIMEOUT",
        "0",
        "default job deadline, seconds (0 = none)",
    ),
    (
        "MCP_EXEC_YIELD_AFTER",
        "50",
        "a blocking execute returns a running job after this (0 = never)",
    ),
    (
        "MCP_EXEC_MAX_RUNNING",
        "from nofile",
        "jobs running at once (default: soft RLIMIT_NOFILE - 64, / 3)",
    ),
    ("MCP_EXEC_MAX_QUEUED", "1000", "jobs waiting to start"),
    (
        "MCP_EXEC_TASK_TTL",
        "3600",
        "seconds an MCP Task and its job are kept: the default and the maximum TTL",
    ),
    (
        "MCP_EXEC_MAX_TASKS",
        "1024",
        "MCP Tasks holding a job or a result at once",
    ),
    (
        "MCP_EXEC_MAX_WATCHES",
        "a quarter of fs.inotify.max_user_instances",
        "file watches open at once, every listener's together (?watch streams, envd watchers and WatchDir streams)",
    ),
    (
        "MCP_EXEC_MAX_OUTPUT_BYTES_LIMIT",
        "67108864",
        "largest per-job max_output_bytes",
    ),
    (
        "MCP_EXEC_BREAKER_FAILURES",
        "20",
        "consecutive spawn failures for lack of resources that refuse new jobs",
    ),
    (
        "MCP_EXEC_BREAKER_COOLDOWN",
        "10",
        "seconds an open breaker refuses new jobs",
    ),
    (
        "MCP_EXEC_SHELL_SESSION_IDLE",
        "3600",
        "seconds a shell session lives after its last job",
    ),
    (
        "MCP_EXEC_ALLOWED_CWDS",
        "unset",
        "colon-separated directories jobs may start in (unset = anywhere)",
    ),
    (
        "MCP_EXEC_DEFAULT_CWD",
        "own cwd",
        "where jobs start when no cwd is given",
    ),
    (
        "MCP_EXEC_REDACT",
        "off",
        "builtin: mask well-known secret shapes in returned output",
    ),
    (
        "MCP_EXEC_REDACT_PATTERNS_FILE",
        "unset",
        "more redaction patterns, one regular expression per line",
    ),
    (
        "MCP_EXEC_HTTP",
        "unset",
        "--http ADDR: also serve Streamable HTTP on ADDR (e.g. 127.0.0.1:8080)",
    ),
    (
        "MCP_EXEC_HTTP_TOKEN_FILE",
        "unset",
        "file holding the HTTP bearer token (preferred)",
    ),
    ("MCP_EXEC_HTTP_TOKEN", "unset", "the HTTP bearer token"),
    (
        "MCP_EXEC_HTTP_ALLOWED_ORIGINS",
        "localhost",
        "comma-separated Origins allowed (default: localhost, 127.0.0.1, [::1])",
    ),
    (
        "MCP_EXEC_HTTP_INSECURE",
        "unset",
        "1 (or true/yes/on): allow a non-loopback --http address without a token",
    ),
    (
        "MCP_EXEC_PLATFORM_INSECURE",
        "unset",
        "1 (or true/yes/on): allow a non-loopback sandboxd/envd listener without a token (NetworkPolicy)",
    ),
    (
        "MCP_EXEC_HTTP_SESSION_IDLE",
        "3600",
        "seconds after which an idle HTTP session ends",
    ),
    (
        "MCP_EXEC_HTTP_MAX_CONNECTIONS",
        "256",
        "open HTTP connections per listener at most (past it an idle token-less one is evicted)",
    ),
    (
        "MCP_EXEC_HTTP_MAX_SESSIONS",
        "1024",
        "HTTP sessions at most (past it the least recently used idle one ends)",
    ),
    (
        "MCP_EXEC_HTTP_STALL_TIMEOUT",
        "30",
        "seconds a request body may take (unary) or pause (uploads), or a client read nothing",
    ),
    (
        "MCP_EXEC_METRICS_LISTEN",
        "unset",
        "--metrics-listen ADDR: /metrics, /healthz, /livez without a token",
    ),
    (
        "MCP_EXEC_ENVD",
        "unset",
        "--envd ADDR: E2B envd (Connect-RPC process and filesystem, /files; port 49983)",
    ),
    (
        "MCP_EXEC_SANDBOXD_GRPC",
        "unset",
        "--sandboxd-grpc ADDR: agent-sandbox's process.v1.ProcessService, gRPC over h2c",
    ),
    (
        "MCP_EXEC_SANDBOXD_REST",
        "unset",
        "--sandboxd-rest ADDR: serve agent-sandbox's sandboxd REST API (/v1/files, /v1/health, /v1/metadata)",
    ),
    (
        "MCP_EXEC_SANDBOXD_ROOT",
        "/workspace",
        "--sandboxd-root DIR: where sandboxd paths are relative to and gRPC jobs start; must exist",
    ),
    (
        "MCP_EXEC_SANDBOXD_METADATA_PREFIX",
        "SANDBOX_",
        "--sandboxd-metadata-prefix P: the variables /v1/metadata shows (credentials never)",
    ),
    (
        "MCP_EXEC_JOB_LIMITS",
        "unset",
        "JSON limits every job gets, also the maxima a call may ask for",
    ),
    (
        "MCP_EXEC_JOB_OOM_SCORE_ADJ",
        "500",
        "oom_score_adj of jobs (at least the inherited value; -1000..1000)",
    ),
];

impl Config {
    /// Reads the configuration through `get` (normally `std::env::var`),
    /// returning it with one warning per invalid value.
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
        soft_nofile: u64,
    ) -> (Config, Vec<String>) {
        let mut c = Config {
            max_running: max_running_for(soft_nofile),
            ..Config::default()
        };
        let mut warnings = Vec::new();
        let mut seconds = |name: &str, slot: &mut Duration, allow_zero: bool| {
            if let Some(raw) = get(name) {
                match raw.trim().parse::<f64>() {
                    Ok(v) if v.is_finite() && (v > 0.0 || (allow_zero && v == 0.0)) && v < 1e9 => {
                        *slot = Duration::from_secs_f64(v);
                    }
                    _ => warnings.push(format!(
                        "{name}={raw:?} is not a valid number of seconds; using the default {}",
                        slot.as_secs_f64()
                    )),
                }
            }
        };
        seconds("MCP_EXEC_DEFAULT_TIMEOUT", &mut c.default_timeout, true);
        seconds(
            "MCP_EXEC_PROGRESS_INTERVAL",
            &mut c.progress_interval,
            false,
        );
        seconds("MCP_EXEC_SHUTDOWN_GRACE", &mut c.shutdown_grace, true);
        seconds(
            "MCP_EXEC_HTTP_SESSION_IDLE",
            &mut c.http_session_idle,
            false,
        );
        seconds(
            "MCP_EXEC_HTTP_STALL_TIMEOUT",
            &mut c.http_stall_timeout,
            false,
        );
        seconds("MCP_EXEC_FETCH_TIMEOUT", &mut c.fetch_timeout, false);
        let mut bytes = |name: &str, slot: &mut usize| {
            if let Some(raw) = get(name) {
                match raw.trim().parse::<usize>() {
                    Ok(v) if v > 0 => *slot = v,
                    _ => warnings.push(format!(
                        "{name}={raw:?} is not a valid positive byte count; using the default {slot}"
                    )),
                }
            }
        };
        bytes("MCP_EXEC_MAX_OUTPUT_BYTES", &mut c.max_output_bytes);
        bytes("MCP_EXEC_MAX_LINE_BYTES", &mut c.max_line_bytes);
        bytes("MCP_EXEC_MAX_TRANSFER_BYTES", &mut c.max_transfer_bytes);
        bytes(
            "MCP_EXEC_MAX_OUTPUT_BYTES_LIMIT",
            &mut c.max_output_bytes_limit,
        );
        let mut count = |name: &str, slot: &mut usize, least: usize| {
            if let Some(raw) = get(name) {
                match raw.trim().parse::<usize>() {
                    Ok(v) if v >= least => *slot = v,
                    _ => warnings.push(format!(
                        "{name}={raw:?} is not a whole number of at least {least}; using the default {slot}"
                    )),
                }
            }
        };
        // No job could ever run with 0: a count of jobs, not of bytes.
        count("MCP_EXEC_MAX_RUNNING", &mut c.max_running, 1);
        count("MCP_EXEC_MAX_QUEUED", &mut c.max_queued, 0);
        count("MCP_EXEC_HTTP_MAX_SESSIONS", &mut c.http_max_sessions, 1);
        count("MCP_EXEC_MAX_TASKS", &mut c.max_tasks, 0);
        let mut failures = usize::try_from(c.breaker_failures).unwrap_or(usize::MAX);
        count("MCP_EXEC_BREAKER_FAILURES", &mut failures, 0);
        c.breaker_failures = u32::try_from(failures).unwrap_or(u32::MAX);
        if let Some(raw) = get("MCP_EXEC_MAX_WATCHES") {
            match raw.trim().parse::<usize>() {
                Ok(v) if v >= 1 => c.max_watches = Some(v),
                _ => warnings.push(format!(
                    "MCP_EXEC_MAX_WATCHES={raw:?} is not a whole number of at least 1; using the \
                     default (a quarter of fs.inotify.max_user_instances)"
                )),
            }
        }
        let mut optional = |name: &str, slot: &mut Option<Duration>| {
            let mut d = slot.unwrap_or(Duration::ZERO);
            if let Some(raw) = get(name) {
                match raw.trim().parse::<f64>() {
                    Ok(v) if (0.0..1e9).contains(&v) => {
                        d = Duration::from_secs_f64(v);
                    }
                    _ => warnings.push(format!(
                        "{name}={raw:?} is not a valid number of seconds; using the default {}",
                        d.as_secs_f64()
                    )),
                }
            }
            *slot = (!d.is_zero()).then_some(d);
        };
        optional("MCP_EXEC_JOB_TIMEOUT", &mut c.job_timeout);
        optional("MCP_EXEC_YIELD_AFTER", &mut c.yield_after);
        let mut cooldown = Some(c.breaker_cooldown);
        optional("MCP_EXEC_BREAKER_COOLDOWN", &mut cooldown);
        c.breaker_cooldown = cooldown.unwrap_or(Duration::ZERO);
        let mut ttl = Some(c.task_ttl);
        optional("MCP_EXEC_TASK_TTL", &mut ttl);
        // A task must outlive its creation: 0 keeps the default.
        c.task_ttl = ttl.unwrap_or(Duration::from_secs(3600));
        let mut idle = Some(c.shell_session_idle);
        optional("MCP_EXEC_SHELL_SESSION_IDLE", &mut idle);
        c.shell_session_idle = idle.unwrap_or(Duration::ZERO);
        let raw = |name: &str| get(name).filter(|v| !v.is_empty());
        c.allowed_cwds = raw("MCP_EXEC_ALLOWED_CWDS");
        c.default_cwd = raw("MCP_EXEC_DEFAULT_CWD");
        c.redact = raw("MCP_EXEC_REDACT");
        c.redact_patterns_file = raw("MCP_EXEC_REDACT_PATTERNS_FILE");
        c.http = raw("MCP_EXEC_HTTP");
        c.http_token_file = get("MCP_EXEC_HTTP_TOKEN_FILE");
        c.http_token = get("MCP_EXEC_HTTP_TOKEN").map(Secret);
        c.http_allowed_origins = raw("MCP_EXEC_HTTP_ALLOWED_ORIGINS");
        for (name, slot) in [
            ("MCP_EXEC_HTTP_INSECURE", &mut c.http_insecure),
            ("MCP_EXEC_PLATFORM_INSECURE", &mut c.platform_insecure),
        ] {
            if let Some(raw) = get(name) {
                match switch(&raw) {
                    Some(on) => *slot = on,
                    None => c.refusals.push(format!(
                        "{name}={raw:?} is neither on nor off ({SWITCH_SPELLINGS})"
                    )),
                }
            }
        }
        c.http_max_connections = raw("MCP_EXEC_HTTP_MAX_CONNECTIONS");
        c.metrics_listen = raw("MCP_EXEC_METRICS_LISTEN");
        c.envd = raw("MCP_EXEC_ENVD");
        c.sandboxd_grpc = raw("MCP_EXEC_SANDBOXD_GRPC");
        c.sandboxd_rest = raw("MCP_EXEC_SANDBOXD_REST");
        if let Some(root) = raw("MCP_EXEC_SANDBOXD_ROOT") {
            c.sandboxd_root = root;
        }
        if let Some(prefix) = raw("MCP_EXEC_SANDBOXD_METADATA_PREFIX") {
            c.sandboxd_metadata_prefix = prefix;
        }
        c.ca_file = raw("MCP_EXEC_CA_FILE");
        c.job_limits = raw("MCP_EXEC_JOB_LIMITS");
        if let Some(raw) = get("MCP_EXEC_JOB_OOM_SCORE_ADJ") {
            match raw.trim().parse::<i32>() {
                Ok(v) if (-1000..=1000).contains(&v) => c.job_oom_score_adj = v,
                _ => warnings.push(format!(
                    "MCP_EXEC_JOB_OOM_SCORE_ADJ={raw:?} is not a number from -1000 to 1000; \
                     using the default {}",
                    c.job_oom_score_adj
                )),
            }
        }
        if let Some(raw) = get("MCP_EXEC_LOG").filter(|s| !s.trim().is_empty()) {
            c.log = raw;
        }
        if let Some(raw) = get("MCP_EXEC_LOG_JOURNALD") {
            match switch(&raw) {
                Some(on) => c.log_journald = on,
                None => warnings.push(format!(
                    "MCP_EXEC_LOG_JOURNALD={raw:?} is neither on nor off ({SWITCH_SPELLINGS}); \
                     logging to stderr only"
                )),
            }
        }
        let listeners = [
            &c.http,
            &c.metrics_listen,
            &c.envd,
            &c.sandboxd_grpc,
            &c.sandboxd_rest,
        ]
        .iter()
        .filter(|l| l.is_some())
        .count();
        let (share, jobs) = descriptor_budget(soft_nofile, listeners);
        c.connection_share = share;
        if get("MCP_EXEC_MAX_RUNNING").is_none() {
            c.max_running = jobs;
        }
        (c, warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_values_warn_and_keep_the_default() {
        let (c, w) = Config::from_lookup(
            |k| match k {
                "MCP_EXEC_DEFAULT_TIMEOUT" => Some("soon".into()),
                "MCP_EXEC_MAX_OUTPUT_BYTES" => Some("-5".into()),
                "MCP_EXEC_SHUTDOWN_GRACE" => Some("0.5".into()),
                _ => None,
            },
            1024,
        );
        assert_eq!(c.default_timeout, Duration::from_secs(30));
        assert_eq!(c.max_output_bytes, 1 << 20);
        assert_eq!(c.shutdown_grace, Duration::from_millis(500));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("MCP_EXEC_DEFAULT_TIMEOUT"));
    }

    #[test]
    fn listeners_share_half_the_descriptors_after_the_reserve_and_jobs_get_what_is_left() {
        assert_eq!(descriptor_budget(1024, 0), (usize::MAX, 320));
        // One listener at 1024: (960 / 2 − 64) = 416 connections, 64 late
        // waiters, (960 − 480) / 3 = 160 jobs.
        assert_eq!(descriptor_budget(1024, 1), (416, 160));
        assert_eq!(descriptor_budget(20_000, 5), (1929, 3323));
        // Never below 8 connections a listener or one job.
        assert_eq!(descriptor_budget(100, 5), (8, 1));
        let (c, _) = Config::from_lookup(
            |k| match k {
                "MCP_EXEC_ENVD" | "MCP_EXEC_HTTP" => Some("127.0.0.1:0".to_owned()),
                _ => None,
            },
            1024,
        );
        assert_eq!((c.connection_share, c.max_running), (176, 160));
        let (c, _) = Config::from_lookup(
            |k| match k {
                "MCP_EXEC_ENVD" => Some("127.0.0.1:0".to_owned()),
                "MCP_EXEC_MAX_RUNNING" => Some("7".to_owned()),
                _ => None,
            },
            1024,
        );
        assert_eq!(c.max_running, 7, "an explicit limit wins");
    }

    #[test]
    fn the_default_concurrency_follows_the_descriptor_limit_and_zero_means_never() {
        assert_eq!(max_running_for(1024), 320);
        assert_eq!(max_running_for(20_000), 6645);
        assert_eq!(max_running_for(10), 1);
        let (c, w) = Config::from_lookup(
            |k| match k {
                "MCP_EXEC_YIELD_AFTER" => Some("0".into()),
                "MCP_EXEC_JOB_TIMEOUT" => Some("2.5".into()),
                "MCP_EXEC_MAX_QUEUED" => Some("many".into()),
                _ => None,
            },
            20_000,
        );
        assert_eq!(c.yield_after, None);
        assert_eq!(c.job_timeout, Some(Duration::from_millis(2500)));
        assert_eq!(c.max_queued, 1000);
        assert_eq!(c.max_running, 6645);
        assert_eq!(w.len(), 1, "{w:?}");
    }

    #[test]
    fn zero_jobs_running_at_once_is_refused_as_a_count_of_jobs_not_of_bytes() {
        let (c, w) =
            Config::from_lookup(|k| (k == "MCP_EXEC_MAX_RUNNING").then(|| "0".into()), 1024);
        assert_eq!(c.max_running, 320);
        assert_eq!(
            w,
            [
                "MCP_EXEC_MAX_RUNNING=\"0\" is not a whole number of at least 1; using the default 320"
            ]
        );
    }

    #[test]
    fn switches_take_the_usual_spellings_in_any_case() {
        for on in ["1", "true", "YES", "On", " yes "] {
            assert_eq!(switch(on), Some(true), "{on}");
        }
        for off in ["0", "false", "No", "OFF", ""] {
            assert_eq!(switch(off), Some(false), "{off}");
        }
        for neither in ["2", "y", "enable", "truee"] {
            assert_eq!(switch(neither), None, "{neither}");
        }
        let (c, w) = Config::from_lookup(
            |k| match k {
                "MCP_EXEC_HTTP_INSECURE" => Some("yes".into()),
                "MCP_EXEC_PLATFORM_INSECURE" => Some("On".into()),
                "MCP_EXEC_LOG_JOURNALD" => Some("TRUE".into()),
                _ => None,
            },
            1024,
        );
        assert!(
            c.http_insecure && c.platform_insecure && c.log_journald,
            "{c:?}"
        );
        assert!(
            w.is_empty() && c.refusals.is_empty(),
            "{w:?} {:?}",
            c.refusals
        );
    }

    #[test]
    fn an_unreadable_insecure_switch_is_a_refusal_and_an_unreadable_journald_switch_a_warning() {
        let (c, w) = Config::from_lookup(
            |k| match k {
                "MCP_EXEC_HTTP_INSECURE" => Some("maybe".into()),
                "MCP_EXEC_PLATFORM_INSECURE" => Some("perhaps".into()),
                "MCP_EXEC_LOG_JOURNALD" => Some("sure".into()),
                _ => None,
            },
            1024,
        );
        assert!(!c.http_insecure && !c.platform_insecure && !c.log_journald);
        assert_eq!(c.refusals.len(), 2, "{:?}", c.refusals);
        assert!(
            c.refusals[0].starts_with("MCP_EXEC_HTTP_INSECURE=\"maybe\""),
            "{:?}",
            c.refusals
        );
        assert!(
            c.refusals[1].starts_with("MCP_EXEC_PLATFORM_INSECURE=\"perhaps\""),
            "{:?}",
            c.refusals
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].starts_with("MCP_EXEC_LOG_JOURNALD=\"sure\""), "{w:?}");
    }
}
