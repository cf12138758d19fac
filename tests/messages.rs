//! What the binary tells a person at start-up and on the command line: one
//! line per mistake, naming the setting, never a wall of help or a silent
//! default. Bare binary only: the words do not depend on the target.

use std::process::{Command, Output, Stdio};

use serde_json::json;

use crate::support::http::request;
use crate::support::{LATEST, Server, TIMEOUT, Target, binary, wait_for};

/// Runs the binary with stdin closed (a stdio server ends at once).
fn run(env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(binary())
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn help_names_every_tool_that_tools_list_lists_and_both_transports() {
    let mut s = Server::started_in(Target::Bare, &[], LATEST);
    let listed = s.request("tools/list", json!({}));
    let names: Vec<String> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.len(), 11, "{listed}");
    let out = run(&[], &["--help"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for name in &names {
        assert!(
            help.lines()
                .any(|l| l.split_whitespace().next() == Some(name.as_str())),
            "--help does not name {name}:\n{help}"
        );
    }
    assert!(help.contains("stdio and Streamable HTTP"), "{help}");
}

/// `--version` is one line: the version, the commit (the test build is a
/// debug build, which says so), how it is linked, and the optional
/// features built in — the same for `-V`.
#[test]
fn version_is_one_line_naming_the_version_the_build_and_the_features() {
    for flag in ["--version", "-V"] {
        let out = run(&[], &[flag]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let want = format!(
            "mcp-exec {} (commit debug build, {}, features: {})\n",
            env!("CARGO_PKG_VERSION"),
            if cfg!(target_feature = "crt-static") {
                "static"
            } else {
                "dynamic"
            },
            match (cfg!(feature = "https-fetch"), cfg!(feature = "sandboxd")) {
                (true, true) => "https-fetch sandboxd",
                (true, false) => "https-fetch",
                (false, true) => "sandboxd",
                (false, false) => "none",
            }
        );
        assert_eq!(text, want, "{flag}");
    }
}

/// `--help` says on its first line which clients it serves (MCP, envd,
/// sandboxd), and its usage names every flag its flag list explains.
#[test]
fn help_names_every_front_end_first_and_every_flag_in_its_usage() {
    let out = run(&[], &["--help"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let first: String = help.lines().take(2).collect::<Vec<_>>().join(" ");
    for name in ["MCP", "envd", "sandboxd"] {
        assert!(
            first.contains(name),
            "the first lines do not name {name}:\n{help}"
        );
    }
    let usage: String = help
        .lines()
        .skip_while(|l| !l.starts_with("Usage:"))
        .take_while(|l| !l.starts_with("Serves MCP"))
        .collect::<Vec<_>>()
        .join("\n");
    let flags: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Flags"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| w.starts_with("--"))
        .collect();
    assert!(flags.len() >= 8, "the flag list: {flags:?}\n{help}");
    for flag in flags {
        assert!(
            usage.contains(&format!("[{flag}")),
            "the usage does not show {flag}:\n{usage}"
        );
    }
}

#[test]
fn a_mistyped_flag_is_one_line_and_a_pointer_to_help() {
    for args in [&["--bogus"][..], &["--http"][..], &["--"][..]] {
        let out = run(&[], args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = stderr(&out);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 2, "{args:?}:\n{err}");
        assert!(lines[0].starts_with("mcp-exec: "), "{err}");
        assert!(lines[1].contains("--help"), "{err}");
        assert!(out.stdout.is_empty(), "{out:?}");
    }
}

#[test]
fn a_fatal_start_up_error_is_said_once_also_with_the_log_off() {
    for log in ["info", "off"] {
        let out = run(
            &[("MCP_EXEC_LOG", log), ("MCP_EXEC_ALLOWED_CWDS", "relative")],
            &[],
        );
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = stderr(&out);
        let mentions = err
            .lines()
            .filter(|l| l.contains("MCP_EXEC_ALLOWED_CWDS"))
            .count();
        assert_eq!(mentions, 1, "MCP_EXEC_LOG={log}:\n{err}");
    }
}

#[test]
fn a_log_filter_that_does_not_parse_is_said_and_logging_goes_on_at_info() {
    let out = run(&[("MCP_EXEC_LOG", "verbose")], &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.lines()
            .any(|l| l.contains("WARN")
                && l.contains("MCP_EXEC_LOG=\"verbose\" is not a log filter")),
        "{err}"
    );
    assert!(
        err.contains("mcp-exec started"),
        "info lines still show:\n{err}"
    );
}

#[test]
fn zero_jobs_running_at_once_is_refused_as_a_number_of_jobs() {
    let err = stderr(&run(&[("MCP_EXEC_MAX_RUNNING", "0")], &[]));
    assert!(
        err.contains("MCP_EXEC_MAX_RUNNING=\"0\" is not a whole number of at least 1"),
        "{err}"
    );
    assert!(!err.contains("byte count"), "{err}");
}

#[test]
fn switches_take_yes_and_on_and_refuse_what_is_neither() {
    // Read as on: a non-loopback bind without a token is then allowed.
    let mut s = Server::start_with_cli(
        Target::Bare,
        &[("MCP_EXEC_HTTP_INSECURE", "yes")],
        &["--http", "0.0.0.0:0", "--no-stdio"],
    );
    assert!(
        wait_for(TIMEOUT, || s
            .stderr
            .lock()
            .unwrap()
            .contains("listening for HTTP")),
        "{}",
        s.stderr.lock().unwrap()
    );
    assert!(s.wait_exit(std::time::Duration::from_millis(200)).is_none());
    drop(s);
    let out = run(
        &[("MCP_EXEC_HTTP_INSECURE", "maybe")],
        &["--http", "0.0.0.0:0"],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("MCP_EXEC_HTTP_INSECURE=\"maybe\" is neither on nor off"),
        "{err}"
    );
    let err = stderr(&run(&[("MCP_EXEC_LOG_JOURNALD", "sure")], &[]));
    assert!(
        err.contains("MCP_EXEC_LOG_JOURNALD=\"sure\" is neither on nor off"),
        "{err}"
    );
    let err = stderr(&run(&[("MCP_EXEC_LOG_JOURNALD", "On")], &[]));
    assert!(!err.contains("MCP_EXEC_LOG_JOURNALD"), "{err}");
}

#[test]
fn no_stdio_with_only_the_metrics_listener_is_refused_because_it_serves_no_job() {
    let out = run(&[], &["--no-stdio", "--metrics-listen", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = stderr(&out);
    for listener in ["--http", "--envd", "--sandboxd-grpc", "--sandboxd-rest"] {
        assert!(
            err.contains(listener),
            "the refusal names {listener}:\n{err}"
        );
    }
    assert!(
        err.contains("--metrics-listen (MCP_EXEC_METRICS_LISTEN) serves only metrics and health, no job or file"),
        "the refusal says why the metrics listener does not count:\n{err}"
    );
    // Without the metrics listener the reason is not given.
    let err = stderr(&run(&[], &["--no-stdio"]));
    assert!(err.contains("nothing would serve"), "{err}");
    assert!(!err.contains("serves only metrics"), "{err}");
}

#[test]
fn the_oom_ordering_is_one_info_line_at_start_up() {
    let err = stderr(&run(&[], &[]));
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("oom_score_adj"))
        .collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains(" INFO "), "{err}");
    assert!(!err.contains(" WARN "), "{err}");
}

#[test]
fn a_missing_a_malformed_and_a_wrong_token_get_different_texts() {
    let s = Server::start_with_cli(
        Target::Bare,
        &[("MCP_EXEC_HTTP_TOKEN", "s3cret")],
        &["--http", "127.0.0.1:0"],
    );
    let mut port = None;
    wait_for(TIMEOUT, || {
        port = s
            .stderr
            .lock()
            .unwrap()
            .lines()
            .find_map(|l| l.split_once("listening for HTTP on "))
            .and_then(|(_, a)| a.trim().rsplit_once(':'))
            .and_then(|(_, p)| p.parse::<u16>().ok());
        port.is_some()
    });
    let port = port.expect("the HTTP port on stderr");
    let body = |auth: Option<&str>| {
        let h: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        let r = request(port, "GET", "/metrics", &h, "", TIMEOUT).unwrap();
        assert_eq!(r.status, 401, "{auth:?}: {r:?}");
        r.json()["error"].as_str().unwrap().to_owned()
    };
    let missing = body(None);
    let malformed = body(Some("s3cret"));
    let wrong = body(Some("Bearer guess"));
    assert!(missing.contains("required"), "{missing}");
    assert!(malformed.contains("Bearer <token>"), "{malformed}");
    assert!(wrong.contains("wrong"), "{wrong}");
    assert!(
        missing != wrong && malformed != wrong && missing != malformed,
        "{missing} / {malformed} / {wrong}"
    );
}
