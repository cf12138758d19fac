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

/// The level names a directive without `=` must be. `Targets` reads any
/// other bare word as a target name enabled at every level, so a mistyped
/// level (`verbose`) would silence everything the server logs.
const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// Parses `MCP_EXEC_LOG`: comma-separated directives, each a level or
/// `target=level`; `Err` says why not, in a sentence naming the variable.
pub fn filter(raw: &str) -> Result<Targets, String> {
    let refuse = |why: String| {
        format!(
            "MCP_EXEC_LOG={raw:?} is not a log filter ({why}); \
             give a level (trace, debug, info, warn, error, off) or target=level,…; using \"info\""
        )
    };
    for directive in raw.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let level = directive.rsplit_once('=').map_or(directive, |(_, l)| l);
        if !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(level.trim())) {
            return Err(refuse(format!("{level:?} is not a level")));
        }
    }
    raw.parse::<Targets>().map_err(|e| refuse(e.to_string()))
}

/// Installs the subscriber; keep the guard alive until exit (it flushes).
/// The second value is a warning to log (an unusable `MCP_EXEC_LOG`).
pub fn init(config: &Config) -> (WorkerGuard, Option<String>) {
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(true)
        // The queue's slots are allocated and written up front (32 bytes
        // each): 256 lines keep it at 8 KiB resident instead of 128 KiB.
        // Logs are sparse; a burst beyond that is dropped, never waited for.
        .buffered_lines_limit(256)
        .finish(std::io::stderr());
    // `Targets` parses the `target=level,…` syntax without a regex engine
    // (EnvFilter's span/field directives would pull in ~240 KiB of regex).
    let (filter, warning) = match filter(&config.log) {
        Ok(f) => (f, None),
        Err(why) => (Targets::new().with_default(LevelFilter::INFO), Some(why)),
    };
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
    (guard, warning)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_target_directives_are_filters() {
        for ok in [
            "info",
            "DEBUG",
            "warn,mcp_exec=trace",
            "off",
            "mcp_exec::jobs=debug, info",
        ] {
            assert!(filter(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn a_word_that_is_no_level_is_refused_naming_the_variable_instead_of_silencing_the_log() {
        for bad in ["verbose", "info,loud", "mcp_exec=chatty", "=", "warn=x=y"] {
            let err = filter(bad)
                .err()
                .unwrap_or_else(|| panic!("{bad} was accepted"));
            assert!(err.starts_with("MCP_EXEC_LOG="), "{err}");
            assert!(err.contains("using \"info\""), "{err}");
        }
    }
}
