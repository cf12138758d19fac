//! Logging to stderr, never blocking the server; optionally to journald, whose send can block.
//!
//! stderr goes through `tracing_appender::non_blocking` in lossy mode: a
//! worker thread writes, and when its bounded queue is full (nobody drains
//! our stderr) lines are dropped instead of stalling PID 1. Nothing but
//! protocol messages ever goes to stdout.

use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::Config;

/// Installs the subscriber; keep the guard alive until exit (it flushes).
pub fn init(config: &Config) -> WorkerGuard {
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(true)
        // The queue's slots are allocated and written up front (32 bytes
        // each): 256 lines keep it at 8 KiB resident instead of 128 KiB.
        // Logs are sparse; a burst beyond that is dropped, never waited for.
        .buffered_lines_limit(256)
        .finish(std::io::stderr());
    // `Targets` parses the `target=level,…` syntax without a regex engine
    // (EnvFilter's span/field directives would pull in ~240 KiB of regex).
    let filter = config.log.parse::<Targets>().unwrap_or_else(|e| {
        eprintln!(
            "mcp-exec: MCP_EXEC_LOG={:?} is invalid ({e}); using \"info\"",
            config.log
        );
        Targets::new().with_default(LevelFilter::INFO)
    });
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(false)
        .with_target(false);
    let journald =
        if config.log_journald && std::path::Path::new("/run/systemd/journal/socket").exists() {
            tracing_journald::layer().ok()
        } else {
            None
        };
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(journald)
        .try_init();
    guard
}
