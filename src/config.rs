//! Configuration from the environment (SPEC §6).
//!
//! Every variable has a default; an invalid value is reported once at
//! start-up (returned as a warning, logged by `main`) and the default is used.

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
        }
    }
}

/// The table printed by `--help`: name, default, meaning.
pub const VARIABLES: [(&str, &str, &str); 7] = [
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
        "seconds between TERM and KILL at shutdown",
    ),
    (
        "MCP_EXEC_LOG",
        "info",
        "log filter (tracing syntax), to stderr",
    ),
    (
        "MCP_EXEC_LOG_JOURNALD",
        "unset",
        "1: also log to journald when its socket exists",
    ),
    (
        "MCP_EXEC_MAX_LINE_BYTES",
        "67108864",
        "longest accepted request line",
    ),
];

impl Config {
    /// Reads the configuration through `get` (normally `std::env::var`),
    /// returning it with one warning per invalid value.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> (Config, Vec<String>) {
        let mut c = Config::default();
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
        if let Some(raw) = get("MCP_EXEC_LOG").filter(|s| !s.trim().is_empty()) {
            c.log = raw;
        }
        c.log_journald = get("MCP_EXEC_LOG_JOURNALD").is_some_and(|v| v.trim() == "1");
        (c, warnings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_values_warn_and_keep_the_default() {
        let (c, w) = Config::from_lookup(|k| match k {
            "MCP_EXEC_DEFAULT_TIMEOUT" => Some("soon".into()),
            "MCP_EXEC_MAX_OUTPUT_BYTES" => Some("-5".into()),
            "MCP_EXEC_SHUTDOWN_GRACE" => Some("0.5".into()),
            _ => None,
        });
        assert_eq!(c.default_timeout, Duration::from_secs(30));
        assert_eq!(c.max_output_bytes, 1 << 20);
        assert_eq!(c.shutdown_grace, Duration::from_millis(500));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("MCP_EXEC_DEFAULT_TIMEOUT"));
    }
}
