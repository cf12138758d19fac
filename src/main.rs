//! mcp-exec: an MCP server on stdio that runs shell commands as jobs, meant
//! to be PID 1 of a container.
//!
//! Modules, and the one direction their dependencies point:
//! `main → server (sessions, transports) → tools → jobs → capture / init`,
//! with `protocol` (the wire format) and `config` as leaves any of them may
//! use. A lower module never names a higher one.
//!
//! `main` only wires things together, in an order that matters:
//! 1. `--help`/`--version` print and exit before anything else starts;
//! 2. `init::prepare()` runs before any thread exists (it blocks signals that
//!    every later thread must inherit);
//! 3. logging (its writer thread now inherits the mask), configuration;
//! 4. the tokio runtime, `Boot::start`, and the session until shutdown;
//! 5. `process::exit(0)`, so no stray thread (a stdin reader blocked in
//!    `read`) can hold the process open.

mod capture;
mod config;
mod jobs;
mod logging;
mod policy;
mod protocol;
mod server;
mod tools;

use std::sync::Arc;

use config::Config;

fn main() {
    if let Some(code) = cli(std::env::args().skip(1)) {
        std::process::exit(code);
    }
    let boot = match init::prepare() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("mcp-exec: {e}");
            std::process::exit(1);
        }
    };
    let (config, warnings) = Config::from_lookup(|k| std::env::var(k).ok());
    let _log_guard = logging::init(&config);
    for w in boot.warnings.iter().chain(&warnings) {
        tracing::warn!("{w}");
    }
    let code = match run(boot, config) {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("mcp-exec: {e}");
            1
        }
    };
    drop(_log_guard);
    std::process::exit(code);
}

fn run(boot: init::Boot, config: Config) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let pid1 = boot.is_pid1();
        let (init, events) = boot.start().map_err(std::io::Error::other)?;
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            pid1,
            "mcp-exec started"
        );
        let app = Arc::new(tools::App {
            jobs: jobs::Jobs::new(init, config.max_output_bytes, config.shutdown_grace),
            config,
        });
        let reason = server::run(app, events).await?;
        tracing::info!(?reason, "mcp-exec exiting");
        Ok(())
    })
}

/// Handles `--help`/`--version`; returns the exit code when it printed.
fn cli(mut args: impl Iterator<Item = String>) -> Option<i32> {
    let arg = args.next()?;
    match arg.as_str() {
        "--version" | "-V" => {
            println!("mcp-exec {}", env!("CARGO_PKG_VERSION"));
            Some(0)
        }
        "--help" | "-h" => {
            print!("{}", help());
            Some(0)
        }
        other => {
            eprintln!("mcp-exec: unknown argument {other:?}\n\n{}", help());
            Some(2)
        }
    }
}

fn help() -> String {
    let mut s = format!(
        "mcp-exec {} — an MCP server (stdio) that runs shell commands as jobs; meant to be PID 1 of a container.\n\n\
         Usage: mcp-exec            serve MCP on stdin/stdout until EOF or SIGTERM\n       \
         mcp-exec --help | --version\n\n\
         Tools: execute, wait, status, output, input, kill, list_jobs.\n\n\
         Environment:\n",
        env!("CARGO_PKG_VERSION")
    );
    for (name, default, meaning) in config::VARIABLES {
        s.push_str(&format!("  {name:<28} {default:<9} {meaning}\n"));
    }
    s
}
