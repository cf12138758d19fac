//! Init mode (docs/pid1.md): `mcp-exec [options] -- CMD [ARGS…]` runs CMD as the
//! container's main process, tini-style, so that
//! `ENTRYPOINT ["/mcp-exec","--"]` is a drop-in for `ENTRYPOINT ["/sbin/tini","--"]`.
//!
//! Owns the command line split at `--`, the run of the main command, and the
//! exit-code convention; the init crate does the process work
//! ([`init::prepare_forwarding`], [`init::Init::spawn_main`]): CMD inherits
//! our stdin/stdout/stderr, runs in its own process group (the terminal's
//! foreground group when stdin is our controlling terminal), and receives
//! every signal tini would forward, SIGTERM included; mcp-exec ends when CMD
//! does.
//!
//! Exit codes, as tini's: CMD's own exit code; 128+N when signal N killed it;
//! 127 when CMD is not found, 126 when it cannot be executed (tini: 1 for
//! exec errors other than `ENOENT`/`EACCES`; we say 126 for all of them,
//! see docs/pid1.md); 1 when mcp-exec itself fails.
//!
//! Without `--http`, no MCP is served at all (pure init): CMD owns stdin and
//! stdout.

use std::ffi::OsString;

use crate::config::Config;

/// Variables for mcp-exec only, removed from CMD's environment (the token
/// never reaches a job or CMD).
const SECRET_VARIABLES: [&str; 2] = ["MCP_EXEC_HTTP_TOKEN", "MCP_EXEC_HTTP_TOKEN_FILE"];

/// Splits the arguments at the first `--`: the flags before it (as text;
/// a non-UTF-8 flag is unknown anyway) and, if there was a `--`, CMD after it.
pub fn split_args(args: impl Iterator<Item = OsString>) -> (Vec<String>, Option<Vec<OsString>>) {
    let mut flags = Vec::new();
    let mut args = args.into_iter();
    for arg in args.by_ref() {
        if arg == "--" {
            return (flags, Some(args.collect()));
        }
        flags.push(arg.to_string_lossy().into_owned());
    }
    (flags, None)
}

/// The exit code for how CMD ended: its code, or 128+N for signal N.
pub fn exit_code(status: init::ExitStatus) -> i32 {
    match status {
        init::ExitStatus::Exited(code) => code,
        init::ExitStatus::Signaled(sig) => crate::jobs::result::signal_exit_code(sig.as_raw()),
    }
}

/// The exit code when CMD could not be started: 127 not found, else 126.
pub fn spawn_failure_code(e: &init::SpawnError) -> i32 {
    match e {
        init::SpawnError::Exec { errno: Some(n), .. }
            if std::io::Error::from_raw_os_error(*n).kind() == std::io::ErrorKind::NotFound =>
        {
            127
        }
        _ => 126,
    }
}

/// Starts CMD through `init` (made by [`init::prepare_forwarding`]); when it
/// cannot start, says why on stderr and returns the exit code (127/126).
pub fn start_main(init: &init::Init, argv: &[OsString]) -> Result<init::MainCommand, i32> {
    match init.spawn_main(argv, &SECRET_VARIABLES) {
        Ok(main) => {
            tracing::debug!(pid = %main.pid, pid1 = init.is_pid1(), "init mode: main command started");
            Ok(main)
        }
        Err(e) => {
            // tini's wording: "exec CMD failed: …"; ours names fork/exec.
            eprintln!("mcp-exec: {e}");
            Err(spawn_failure_code(&e))
        }
    }
}

/// The process's exit code for what `MainCommand::exit` resolved to.
pub fn code_of(exit: Result<init::ExitStatus, init::ReaperGone>) -> i32 {
    match exit {
        Ok(status) => {
            tracing::debug!(?status, "init mode: main command ended");
            exit_code(status)
        }
        Err(e) => {
            eprintln!("mcp-exec: {e}");
            1
        }
    }
}

/// Pure init mode: runs CMD (`argv`) to its end through the init layer
/// `boot` (made by [`init::prepare_forwarding`]), then shuts down what is
/// left (graceful shutdown) and returns the process's exit code.
///
/// HTTP: with `--http`, init mode serves MCP too, and this function is not
/// used; main does instead, in its runtime: `boot.start()`, [`start_main`]
/// (returning its `Err` code at once), the `server::app::App` as usual (jobs on the
/// same `Init`), and `server::run` **without stdio** (CMD owns stdin and
/// stdout), given `main.exit` as one more reason to end — e.g. an
/// `EndReason::MainExited(code_of(status))` arm in its `select!` — then
/// exits with that code after the usual graceful shutdown. In init mode the
/// intake forwards SIGTERM/INT/QUIT to CMD and sends no `init::Event` at
/// all, so CMD's exit is the only way the server is asked to end.
pub fn run(boot: init::Boot, config: &Config, argv: &[OsString]) -> i32 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mcp-exec: starting the runtime: {e}");
            return 1;
        }
    };
    runtime.block_on(async {
        let (init, _events) = match boot.start() {
            Ok(started) => started,
            Err(e) => {
                eprintln!("mcp-exec: {e}");
                return 1;
            }
        };
        let main = match start_main(&init, argv) {
            Ok(main) => main,
            Err(code) => return code,
        };
        let code = code_of(main.exit.await);
        let report = init.shutdown(Vec::new(), config.shutdown_grace).await;
        for s in &report.survived_term {
            tracing::warn!(survivor = %s, "outlived SIGTERM for the whole grace period and was sent SIGKILL");
        }
        for s in &report.survived_kill {
            tracing::warn!(survivor = %s, "still alive at exit");
        }
        code
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn everything_after_the_first_double_dash_is_the_command() {
        let (flags, cmd) = split_args(os(&["--http", "x", "--", "sh", "--", "-c"]).into_iter());
        assert_eq!(flags, ["--http", "x"]);
        assert_eq!(cmd, Some(os(&["sh", "--", "-c"])));
    }

    #[test]
    fn no_double_dash_means_no_command() {
        let (flags, cmd) = split_args(os(&["--help"]).into_iter());
        assert_eq!(flags, ["--help"]);
        assert_eq!(cmd, None);
        let (_, cmd) = split_args(os(&["--"]).into_iter());
        assert_eq!(cmd, Some(Vec::new()));
    }

    #[test]
    fn exit_codes_follow_tini() {
        assert_eq!(exit_code(init::ExitStatus::Exited(3)), 3);
        assert_eq!(
            exit_code(init::ExitStatus::Signaled(init::Signal::KILL)),
            137
        );
        let missing = init::SpawnError::Exec {
            program: "x".into(),
            reason: "no such file or directory".into(),
            errno: Some(2), // ENOENT
        };
        assert_eq!(spawn_failure_code(&missing), 127);
        let denied = init::SpawnError::Exec {
            program: "x".into(),
            reason: "permission denied".into(),
            errno: Some(13), // EACCES
        };
        assert_eq!(spawn_failure_code(&denied), 126);
    }
}
