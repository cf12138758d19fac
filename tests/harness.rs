//! The harness itself: every target starts, answers `initialize` and runs a command.

use serde_json::json;

use crate::support::{Server, Target};

fn a_target_answers_initialize_and_runs_a_command(t: Target) {
    let mut s = Server::start(t);
    let init = s.initialize("2024-11-05");
    assert_eq!(init["serverInfo"]["name"], json!("mcp-exec"));
    let r = s.exec("echo hi");
    assert_eq!(r["state"], json!("success"));
    assert_eq!(r["stdout"]["data"], json!("hi\n"));
}

crate::parity!(a_target_answers_initialize_and_runs_a_command);
