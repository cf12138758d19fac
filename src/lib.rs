//! mcp-exec: an MCP server (stdio and Streamable HTTP) that runs shell
//! commands as jobs, meant to be PID 1 of a container.
//!
//! The whole program is this library; the binary (`src/main.rs`) only calls
//! [`main`]. It is a library so that the fuzz targets (`fuzz/`) can reach
//! the parsers in process: the module tree below stays private, and only
//! [`main`] and the hidden [`fuzzing`] facade are public. New modules go in
//! the list below, not in `src/main.rs`.
//!
//! Modules, and the one direction their dependencies point:
//! `main → server (its state, sessions, transports → net) → tools, files,
//! tasks → jobs → policy, capture, init`, with `protocol` (the wire format),
//! `terminal` and `config` as leaves any of them may use. A lower module
//! never names a higher one (docs/ARCHITECTURE.md; `scripts/check-layers.sh`
//! checks it).
//!
//! `main` only wires things together, in an order that matters:
//! 1. `--help`/`--version` print and exit before anything else starts, and so
//!    does `health URL`; a `--` starts init mode (everything after it is the
//!    main command, see `init_mode`);
//! 2. `init::prepare()` (init mode: `prepare_forwarding()`) runs before any
//!    thread exists (it blocks signals that every later thread must inherit);
//! 3. logging (its writer thread now inherits the mask), configuration;
//! 4. the tokio runtime, `Boot::start` (init mode: the main command), the
//!    server's state (`server::app::App::new`), and `server::run` until
//!    its shutdown sequence ends;
//! 5. `process::exit(0)`, so no stray thread (a stdin reader blocked in
//!    `read`) can hold the process open.
//!
//! A fatal start-up error is said once (`fatal`): as a log line when the
//! log shows errors, else plainly on stderr. A bad argument is one line and
//! a pointer to `--help`, never the whole help.

mod capture;
mod config;
mod files;
#[doc(hidden)]
pub mod fuzzing;
mod init_mode;
mod jobs;
mod logging;
mod metrics;
mod net;
mod policy;
mod probe;
mod protocol;
mod random;
mod server;
mod tasks;
mod terminal;
mod tools;

use config::Config;

/// The program: parses the command line, starts the server (or init mode,
/// or `health`) and exits the process with its code; never returns.
pub fn main() {
    // Init mode and `health` (init_mode.rs, probe.rs): everything after the
    // first `--` is the main command; the flags before it keep their meaning.
    let (args, main_command) = init_mode::split_args(std::env::args_os().skip(1));
    if args.first().map(String::as_str) == Some("health") {
        std::process::exit(probe::main(&args[1..]));
    }
    if main_command.as_ref().is_some_and(Vec::is_empty) {
        usage_error("no command after \"--\"");
        std::process::exit(2);
    }
    let flags = match cli(args.into_iter()) {
        Ok(flags) => flags,
        Err(code) => std::process::exit(code),
    };
    let prepare = match main_command {
        Some(_) => init::prepare_forwarding,
        None => init::prepare,
    };
    let boot = match prepare() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("mcp-exec: {e}");
            std::process::exit(1);
        }
    };
    let soft_nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    // Flags win over the environment.
    let (mut config, mut warnings) = Config::from_lookup(
        |k| {
            flags
                .settings
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(k).ok())
        },
        soft_nofile,
    );
    // In init mode the main command owns stdin and stdout: MCP is served
    // over HTTP only, if at all.
    config.no_stdio = flags.no_stdio || (main_command.is_some() && config.http.is_some());
    // Pure init mode runs no jobs; the warning is for servers that do.
    let serves_jobs = main_command.is_none() || config.http.is_some();
    if serves_jobs && std::env::var_os("MCP_EXEC_MAX_RUNNING").is_none() && config.max_running < 256
    {
        warnings.push(format!(
            "the descriptor limit (soft RLIMIT_NOFILE {soft_nofile}) allows only {} jobs at once; \
             raise it (e.g. podman/docker run --ulimit nofile=65536:65536) or set MCP_EXEC_MAX_RUNNING",
            config.max_running
        ));
    }
    net::request::set_body_deadline(config.http_stall_timeout);
    if let Some(n) = config.max_watches {
        files::watch::set_instance_budget(n);
    }
    let (_log_guard, log_warning) = logging::init(&config);
    for w in boot.warnings.iter().chain(&warnings).chain(&log_warning) {
        tracing::warn!("{w}");
    }
    // Security settings fail closed: exit 2, naming them.
    let policies = match config.refusals.first() {
        Some(refusal) => Err(refusal.clone()),
        None => Policies::from_config(&config),
    };
    let policies = match policies {
        Ok(p) => p,
        Err(e) => {
            fatal(&e);
            drop(_log_guard);
            std::process::exit(2);
        }
    };
    if let Some(argv) = main_command.as_deref()
        && config.http.is_none()
    {
        // Pure init mode: no MCP at all.
        let code = init_mode::run(boot, &config, argv);
        drop(_log_guard);
        std::process::exit(code);
    }
    let code = match run(boot, config, policies, main_command) {
        Ok(code) => code,
        Err(e) => {
            fatal(&e.to_string());
            1
        }
    };
    drop(_log_guard);
    std::process::exit(code);
}

/// Says a fatal error once: in the log (stderr, and journald when on) if it
/// shows errors, else plainly on stderr, so `MCP_EXEC_LOG=off` cannot hide
/// why the server stopped.
fn fatal(message: &str) {
    if tracing::enabled!(tracing::Level::ERROR) {
        tracing::error!("{message}");
    } else {
        eprintln!("mcp-exec: {message}");
    }
}

/// Says what is wrong with the command line, and where the usage is.
fn usage_error(message: &str) {
    eprintln!("mcp-exec: {message}\nTry 'mcp-exec --help' for the usage.");
}

/// The policies built from security settings.
struct Policies {
    cwd: policy::cwd::CwdPolicy,
    redact: Option<policy::redact::Redactor>,
    listeners: server::Listeners,
    jobs: policy::identity::JobPolicy,
}

impl Policies {
    fn from_config(config: &Config) -> Result<Policies, String> {
        let cwd = policy::cwd::CwdPolicy::from_settings(
            config.allowed_cwds.as_deref(),
            config.default_cwd.as_deref(),
        )?;
        // A sandboxd listener's root must lie within the cwd policy.
        let listeners = server::Listeners::from_config(config, &cwd)?;
        let http_without_token = listeners.http.as_ref().is_some_and(|h| h.token.is_none());
        Ok(Policies {
            jobs: policy::identity::JobPolicy::new(
                config.job_limits.as_deref(),
                rustix::process::geteuid().as_raw(),
                http_without_token,
            )?,
            cwd,
            redact: policy::redact::Redactor::from_settings(
                config.redact.as_deref(),
                config
                    .redact_patterns_file
                    .as_deref()
                    .map(std::path::Path::new),
            )?,
            listeners,
        })
    }
}

/// Runs the server until it ends; returns the process's exit code (0, or in
/// init mode the main command's).
fn run(
    boot: init::Boot,
    config: Config,
    policies: Policies,
    main_command: Option<Vec<std::ffi::OsString>>,
) -> std::io::Result<i32> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let pid1 = boot.is_pid1();
        let (init, events) = boot.start().map_err(std::io::Error::other)?;
        // Init mode with HTTP: the main command starts first; its exit is
        // one more reason for the server to end.
        let main = match &main_command {
            Some(argv) => match init_mode::start_main(&init, argv) {
                Ok(main) => Some(main.exit),
                Err(code) => return Ok(code),
            },
            None => None,
        };
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            pid1,
            "mcp-exec started"
        );
        let settings = jobs::JobsSettings {
            grace: config.shutdown_grace,
            max_running: config.max_running,
            max_queued: config.max_queued,
            breaker_failures: config.breaker_failures,
            breaker_cooldown: config.breaker_cooldown,
            shell_session_idle: config.shell_session_idle,
            // After the main command started (init mode): it keeps the
            // score it inherited, like everything tini starts.
            oom_score_adj: jobs::oom::ordering(config.job_oom_score_adj),
        };
        // Every `cwd` goes through the cwd policy (`App::new`).
        let app = server::app::App::new(
            jobs::Jobs::new(init, &settings),
            tasks::Tasks::new(config.task_ttl, config.max_tasks),
            policies.cwd,
            policies.redact,
            policies.jobs,
            config,
        );
        let reason = server::run(app, events, policies.listeners, main).await?;
        tracing::info!(?reason, "mcp-exec exiting");
        Ok(match reason {
            server::EndReason::MainExited(code) => code,
            _ => 0,
        })
    })
}

/// The command-line flags: settings that win over their environment
/// variables, and `--no-stdio`.
#[derive(Debug, Default)]
struct Flags {
    settings: Vec<(&'static str, String)>,
    no_stdio: bool,
}

/// What `--version` prints: the version, the commit it was built from
/// (build.rs), whether it is static, and the optional features built in.
fn version_line() -> String {
    let features: Vec<&str> = [
        ("https-fetch", cfg!(feature = "https-fetch")),
        ("sandboxd", cfg!(feature = "sandboxd")),
    ]
    .iter()
    .filter(|(_, on)| *on)
    .map(|(name, _)| *name)
    .collect();
    let linked = if cfg!(target_feature = "crt-static") {
        "static"
    } else {
        "dynamic"
    };
    let features = if features.is_empty() {
        "none".to_owned()
    } else {
        features.join(" ")
    };
    format!(
        "mcp-exec {} (commit {}, {linked}, features: {features})",
        env!("CARGO_PKG_VERSION"),
        env!("MCP_EXEC_COMMIT")
    )
}

/// Parses the flags; `Err` is the exit code when it printed (`--help`,
/// `--version`: 0; a bad argument: 2).
fn cli(mut args: impl Iterator<Item = String>) -> Result<Flags, i32> {
    let mut flags = Flags::default();
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        let variable = match name.as_str() {
            "--version" | "-V" => {
                println!("{}", version_line());
                return Err(0);
            }
            "--help" | "-h" => {
                print!("{}", help());
                return Err(0);
            }
            "--no-stdio" if inline.is_none() => {
                flags.no_stdio = true;
                continue;
            }
            "--http" => "MCP_EXEC_HTTP",
            "--metrics-listen" => "MCP_EXEC_METRICS_LISTEN",
            "--envd" => "MCP_EXEC_ENVD",
            "--sandboxd-grpc" => "MCP_EXEC_SANDBOXD_GRPC",
            "--sandboxd-rest" => "MCP_EXEC_SANDBOXD_REST",
            "--sandboxd-root" => "MCP_EXEC_SANDBOXD_ROOT",
            "--sandboxd-metadata-prefix" => "MCP_EXEC_SANDBOXD_METADATA_PREFIX",
            _ => {
                usage_error(&format!("unknown argument {arg:?}"));
                return Err(2);
            }
        };
        let Some(value) = inline.or_else(|| args.next()) else {
            usage_error(&format!("{name} needs a value"));
            return Err(2);
        };
        flags.settings.push((variable, value));
    }
    Ok(flags)
}

/// The `--help` text. Its tools come from the tool table, so it names every
/// tool a session of the newest revision lists.
fn help() -> String {
    let mut s = format!(
        "mcp-exec {} — an MCP server (stdio and Streamable HTTP) that runs shell commands as jobs,\n\
         also for E2B's envd and agent-sandbox's sandboxd clients; meant to be PID 1 of a container.\n\n\
         Usage: mcp-exec [--http ADDR] [--metrics-listen ADDR] [--envd ADDR] [--sandboxd-grpc ADDR]\n                \
         [--sandboxd-rest ADDR] [--sandboxd-root DIR] [--sandboxd-metadata-prefix P] [--no-stdio]\n       \
         mcp-exec [--http ADDR] [--metrics-listen ADDR] -- CMD [ARGS…]\n                           \
         init mode: run CMD as the container's main process, tini-style; signals go to CMD,\n                           \
         and mcp-exec exits with its status (128+N: signal N; 127 not found; 126 not executable);\n                           \
         with --http it also serves MCP over HTTP (never on stdio, which CMD owns)\n       \
         mcp-exec health URL\n                           \
         GET an http:// URL (for probes); exit 0 when it answers 200, else 1\n       \
         mcp-exec --help | --version\n\n\
         Serves MCP on stdin/stdout until EOF or SIGTERM; with --http also (or, with\n\
         --no-stdio, only) Streamable HTTP on ADDR, until SIGTERM.\n\n\
         Flags (they win over their environment variables):\n  \
         --http ADDR             MCP_EXEC_HTTP\n  \
         --metrics-listen ADDR   MCP_EXEC_METRICS_LISTEN\n  \
         --envd ADDR             MCP_EXEC_ENVD: E2B envd (SDK default port 49983)\n  \
         --sandboxd-grpc ADDR    MCP_EXEC_SANDBOXD_GRPC (agent-sandbox sandboxd gRPC, h2c)\n  \
         --sandboxd-rest ADDR    MCP_EXEC_SANDBOXD_REST (agent-sandbox's REST API)\n  \
         --sandboxd-root DIR     MCP_EXEC_SANDBOXD_ROOT\n  \
         --sandboxd-metadata-prefix P  MCP_EXEC_SANDBOXD_METADATA_PREFIX\n  \
         --no-stdio              serve no MCP on stdio (needs --http, --envd, --sandboxd-grpc\n                          \
         or --sandboxd-rest; --metrics-listen alone serves no job)\n\n\
         Tools (upload, download, shell_sessions and screen from protocol revision 2025-03-26 on):\n",
        env!("CARGO_PKG_VERSION")
    );
    let tools = tools::TOOLS.iter().chain(&tools::PART_TWO_TOOLS);
    let width = tools.clone().map(|t| t.name.len()).max().unwrap_or(0);
    for tool in tools {
        s.push_str(&format!("  {:<width$}  {}\n", tool.name, tool.title));
    }
    s.push_str("\nEnvironment:\n");
    let name_width = config::VARIABLES
        .iter()
        .map(|v| v.0.len())
        .max()
        .unwrap_or(0);
    let default_width = config::VARIABLES
        .iter()
        .map(|v| v.1.len())
        .max()
        .unwrap_or(0);
    for (name, default, meaning) in config::VARIABLES {
        s.push_str(&format!(
            "  {name:<name_width$}  {default:<default_width$}  {meaning}\n"
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_names_every_tool_of_the_tool_table_with_its_title() {
        let text = help();
        for tool in tools::TOOLS.iter().chain(&tools::PART_TWO_TOOLS) {
            assert!(
                text.lines()
                    .any(|l| l.trim_start().starts_with(tool.name) && l.ends_with(tool.title)),
                "{} is missing from:\n{text}",
                tool.name
            );
        }
        assert!(text.contains("stdio and Streamable HTTP"), "{text}");
    }
}
