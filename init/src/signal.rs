//! The [`Signal`] type: Linux signal numbers, their names, descriptions and
//! parsing. Pure data: nothing here sends, blocks or reads a signal (that is
//! [`crate::group`] and [`crate::intake`]).
//!
//! `Signal` is a plain Linux signal number (1..=64, real-time ones included),
//! so that a job can be sent any signal the kernel accepts and a death by any
//! signal can be reported; a value outside that range cannot be constructed.
//! Names and descriptions follow glibc's `strsignal` wording for 1..=31 (what
//! the wire format promises); others read `signal N`.

use std::fmt;

/// A Linux signal number in `1..=64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signal(i32);

const NAMES: [&str; 31] = [
    "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2",
    "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG",
    "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS",
];

const DESCRIPTIONS: [&str; 31] = [
    "hangup",
    "interrupt",
    "quit",
    "illegal instruction",
    "trace/breakpoint trap",
    "aborted",
    "bus error",
    "floating point exception",
    "killed",
    "user defined signal 1",
    "segmentation fault",
    "user defined signal 2",
    "broken pipe",
    "alarm clock",
    "terminated",
    "stack fault",
    "child exited",
    "continued",
    "stopped (signal)",
    "stopped",
    "stopped (tty input)",
    "stopped (tty output)",
    "urgent I/O condition",
    "CPU time limit exceeded",
    "file size limit exceeded",
    "virtual timer expired",
    "profiling timer expired",
    "window changed",
    "I/O possible",
    "power failure",
    "bad system call",
];

/// Why a signal spec could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseSignalError {
    /// Neither a known name nor a number.
    #[error("unknown signal {0:?}")]
    Unknown(String),
    /// A number outside `1..=64`.
    #[error("invalid signal number {0}")]
    InvalidNumber(i64),
}

impl Signal {
    /// SIGHUP.
    pub const HUP: Signal = Signal(1);
    /// SIGINT.
    pub const INT: Signal = Signal(2);
    /// SIGQUIT.
    pub const QUIT: Signal = Signal(3);
    /// SIGKILL.
    pub const KILL: Signal = Signal(9);
    /// SIGUSR1.
    pub const USR1: Signal = Signal(10);
    /// SIGUSR2.
    pub const USR2: Signal = Signal(12);
    /// SIGPIPE.
    pub const PIPE: Signal = Signal(13);
    /// SIGTERM.
    pub const TERM: Signal = Signal(15);
    /// SIGCHLD.
    pub const CHLD: Signal = Signal(17);
    /// SIGCONT.
    pub const CONT: Signal = Signal(18);
    /// SIGXCPU (`RLIMIT_CPU`'s soft limit).
    pub const XCPU: Signal = Signal(24);
    /// SIGXFSZ (`RLIMIT_FSIZE`).
    pub const XFSZ: Signal = Signal(25);
    /// SIGWINCH.
    pub const WINCH: Signal = Signal(28);

    /// The signal with number `n`, if `n` is in `1..=64`.
    pub fn from_raw(n: i32) -> Option<Signal> {
        (1..=crate::sys::MAX_SIGNAL)
            .contains(&n)
            .then_some(Signal(n))
    }

    /// The signal number.
    pub fn as_raw(self) -> i32 {
        self.0
    }

    /// The short name without `SIG` (`"TERM"`), or `None` past 31.
    pub fn name(self) -> Option<&'static str> {
        NAMES.get(usize::try_from(self.0 - 1).ok()?).copied()
    }

    /// The human description (`"terminated"`), or `"signal N"` for unnamed ones.
    pub fn description(self) -> String {
        match usize::try_from(self.0 - 1)
            .ok()
            .and_then(|i| DESCRIPTIONS.get(i))
        {
            Some(d) => (*d).to_owned(),
            None => format!("signal {}", self.0),
        }
    }

    /// Parses `"TERM"`, `"SIGTERM"`, `"term"`, `"IOT"`/`"POLL"`/`"CLD"` aliases,
    /// or a decimal number (`"9"`).
    pub fn parse(spec: &str) -> Result<Signal, ParseSignalError> {
        let trimmed = spec.trim();
        if let Ok(n) = trimmed.parse::<i64>() {
            return i32::try_from(n)
                .ok()
                .and_then(Signal::from_raw)
                .ok_or(ParseSignalError::InvalidNumber(n));
        }
        let upper = trimmed.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        let alias = match bare {
            "IOT" => "ABRT",
            "POLL" => "IO",
            "CLD" => "CHLD",
            other => other,
        };
        NAMES
            .iter()
            .position(|n| *n == alias)
            .and_then(|i| i32::try_from(i + 1).ok())
            .map(Signal)
            .ok_or_else(|| ParseSignalError::Unknown(spec.to_owned()))
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "SIG{n}"),
            None => write!(f, "signal {}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_case_insensitively_with_or_without_the_sig_prefix() {
        for s in ["TERM", "term", "SIGTERM", "sigterm", " Term "] {
            assert_eq!(Signal::parse(s), Ok(Signal::TERM), "{s}");
        }
        assert_eq!(Signal::parse("9"), Ok(Signal::KILL));
        assert_eq!(Signal::parse("iot"), Ok(Signal(6)));
    }

    #[test]
    fn zero_and_out_of_range_numbers_are_invalid() {
        assert_eq!(Signal::parse("0"), Err(ParseSignalError::InvalidNumber(0)));
        assert_eq!(
            Signal::parse("65"),
            Err(ParseSignalError::InvalidNumber(65))
        );
        assert_eq!(
            Signal::parse("-3"),
            Err(ParseSignalError::InvalidNumber(-3))
        );
        assert!(matches!(
            Signal::parse("NOPE"),
            Err(ParseSignalError::Unknown(_))
        ));
    }

    #[test]
    fn descriptions_match_the_wire_contract() {
        assert_eq!(Signal(15).description(), "terminated");
        assert_eq!(Signal(9).description(), "killed");
        assert_eq!(Signal(5).description(), "trace/breakpoint trap");
        assert_eq!(Signal(31).description(), "bad system call");
        assert_eq!(Signal(34).description(), "signal 34");
    }
}
