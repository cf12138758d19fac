//! Fuzz target `dispatch` (`fuzz/fuzz_targets/dispatch.rs`): JSON-RPC decode
//! and dispatch (server::session, tools). What it checks, and how it reads its
//! input: [`dispatch`](fn@dispatch).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::Input;
use crate::config::Config;
use crate::jobs::{Jobs, JobsSettings};
use crate::policy::cwd::CwdPolicy;
use crate::policy::identity::JobPolicy;
use crate::policy::redact::Redactor;
use crate::protocol::line::LineSplitter;
use crate::server::app::App;
use crate::server::outbox::{self, Outgoing};
use crate::server::session::McpSession;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => panic!("a tokio runtime: {e}"),
        }
    })
}

/// The one directory the file tools of [`dispatch`] may touch, under the
/// temporary directory (one for all runs, so that runs leave no trail).
fn fuzz_root() -> &'static std::path::Path {
    static ROOT: OnceLock<std::path::PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let dir = std::env::temp_dir().join("mcp-exec-fuzz");
        if let Err(e) = std::fs::create_dir_all(&dir) {
            panic!("creating {}: {e}", dir.display());
        }
        dir
    })
}

/// The server state [`dispatch`] runs on, one per variant (the policy's root
/// spelled two ways, redaction on or off), reused while its table is empty: building the
/// builtin redactor costs milliseconds, and a failed job is delivered by its
/// `execute` at once, so the table is normally empty between inputs.
fn app(flags: u8) -> Arc<App> {
    static APPS: [Mutex<Option<Arc<App>>>; 4] = [const { Mutex::new(None) }; 4];
    let variant = usize::from(flags & 3);
    let mut slot = APPS[variant].lock().unwrap_or_else(|p| p.into_inner());
    if let Some(app) = slot.as_ref()
        && app.jobs.list().is_empty()
    {
        return Arc::clone(app);
    }
    let config = Config {
        max_line_bytes: 4096,
        max_output_bytes: 64,
        max_output_bytes_limit: 1024,
        ..Config::default()
    };
    let settings = JobsSettings {
        grace: Duration::ZERO,
        max_running: 2,
        max_queued: 2,
        breaker_failures: 0,
        breaker_cooldown: Duration::ZERO,
        shell_session_idle: Duration::from_secs(3600),
        oom_score_adj: None,
    };
    // Always a policy, rooted in a private directory (also the default
    // cwd): `upload` and `download` are dispatched like every tool, and a
    // fuzzed path must never write or read anything outside it. The variants
    // differ in whether the root is given as a symlink-free path or with a
    // trailing `/` (both must resolve to the same root).
    let root = fuzz_root().to_string_lossy().into_owned();
    let spelled = if variant & 1 == 0 {
        root.clone()
    } else {
        format!("{root}/")
    };
    let cwd = CwdPolicy::from_settings(Some(&spelled), Some(&root));
    let Ok(cwd) = cwd else {
        panic!("the cwd policy builds");
    };
    let redact = if variant & 2 == 0 {
        None
    } else {
        Redactor::from_settings(Some("builtin"), None)
            .ok()
            .flatten()
    };
    let app = App::new(
        Jobs::refusing(&settings),
        crate::tasks::Tasks::new(config.task_ttl, config.max_tasks),
        cwd,
        redact,
        JobPolicy::default(),
        config,
    );
    *slot = Some(Arc::clone(&app));
    app
}

/// `dispatch`: the input is what a client writes on stdin; each line goes
/// through a real session to the real tools, over a job service that starts
/// nothing (every `execute` is a start error, which `wait`, `status`,
/// `output`, `kill`, `input` and `list_jobs` then see). Every call
/// finishes, and every line written back is one JSON-RPC 2.0 message.
///
/// Input: a flags byte (bit 0 the cwd policy `/tmp`, bit 1 builtin
/// redaction), then the lines.
pub fn dispatch(data: &[u8]) {
    let mut input = Input { data };
    let flags = input.byte();
    let lines = input.data;
    let app = app(flags);
    let max_line = app.config.max_line_bytes;
    runtime().block_on(async move {
        let shutdown = CancellationToken::new();
        let session = McpSession::new(app, &shutdown, "fuzz");
        let (out, mut inbox) = outbox::new(outbox::BUDGET);
        let reader = tokio::spawn(async move {
            let mut written = Vec::new();
            while let Some(Outgoing::Message(message, permit)) = inbox.rx.recv().await {
                written.push(message.into_line());
                drop(permit);
            }
            written
        });
        let mut framed = Vec::new();
        let mut splitter = LineSplitter::new(max_line);
        splitter.push(lines, &mut |l| framed.push(l));
        splitter.finish(&mut |l| framed.push(l));
        for line in framed {
            session.on_line(line, &out).await;
        }
        assert!(
            session.settle(Duration::from_secs(10)).await,
            "a call did not finish"
        );
        out.finish();
        let written = match reader.await {
            Ok(w) => w,
            Err(e) => panic!("the reader: {e}"),
        };
        for line in written {
            let value: Value = match serde_json::from_str(&line) {
                Ok(v) => v,
                Err(e) => panic!("not JSON ({e}): {line}"),
            };
            let messages = match value {
                Value::Array(items) => items,
                one => vec![one],
            };
            for m in messages {
                assert_eq!(m["jsonrpc"], "2.0", "{m}");
                let is_response =
                    m.get("result").is_some() != m.get("error").is_some() && m.get("id").is_some();
                let is_notification = m.get("method").is_some() && m.get("id").is_none();
                assert!(is_response || is_notification, "{m}");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn dispatch_answers_every_line_with_json_rpc_and_spawns_nothing() {
        crate::fuzzing::stable::drive("dispatch", super::dispatch, 400);
    }
}
