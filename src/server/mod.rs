//! The server: its transports, its sessions, and the shutdown sequence.
//!
//! - [`session`]: one MCP session's protocol state and dispatch, for any
//!   transport.
//! - [`outbox`]: a transport's outgoing queue, bounded in bytes.
//! - [`transport`]: the framing and I/O of each transport (stdio now).
//! - [`progress`]: progress notifications of long calls.
//!
//! [`run`] is the server's actor: it feeds stdin's lines to the stdio
//! session, waits for the next line only while the outbox has room
//! (backpressure), and watches the init layer's events and stdout.
//!
//! # Shutdown (SPEC §2.5, §3)
//! - **stdin EOF**: stop reading; calls in flight get up to
//!   `MCP_EXEC_SHUTDOWN_GRACE` to finish and answer normally; the rest are
//!   then answered `-32800`.
//! - **SIGTERM/SIGINT/SIGQUIT**, or **stdout closed by the client**: calls
//!   in flight are answered `-32800` at once (stdout permitting).
//!
//! Then every job group gets TERM, the grace, KILL (PID 1: the `kill(-1)`
//! sweep); survivors are logged; every queued response is written whole,
//! and only then does the process exit. After EOF the writer may take as
//! long as the client needs to read (it ends at once if the client closes
//! stdout); a signal bounds that wait.

pub mod outbox;
pub mod progress;
pub mod session;
pub mod transport;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::tools::App;
use session::Session;
use transport::stdio::{self, Input};

/// Why the server ended.
#[derive(Debug, Clone, Copy)]
pub enum EndReason {
    /// stdin closed.
    Eof,
    /// A shutdown signal arrived.
    Signal(init::Signal),
    /// The client closed stdout.
    StdoutClosed,
}

/// How long calls cancelled at shutdown get to queue their `-32800`.
const ANSWER_WAIT: Duration = Duration::from_secs(2);
/// How long the writer gets to flush once a signal asked us to go.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// Serves MCP on stdio until EOF, a shutdown signal or a closed stdout, then
/// shuts down.
pub async fn run(
    app: Arc<App>,
    mut events: mpsc::UnboundedReceiver<init::Event>,
) -> std::io::Result<EndReason> {
    let mut stdio = stdio::start(app.config.max_line_bytes)?;
    let shutdown = CancellationToken::new();
    let session = Session::new(Arc::clone(&app), &shutdown);

    let reason = loop {
        tokio::select! {
            biased;
            Some(ev) = events.recv() => match on_event(Some(ev)) {
                Some(signal) => break EndReason::Signal(signal),
                None => continue,
            },
            () = stdio.broken.cancelled() => break EndReason::StdoutClosed,
            // Backpressure: take the next request only while the answers
            // already queued leave room.
            msg = async { stdio.outbox.room().await; stdio.input.recv().await } => match msg {
                Some(Input::Line(line)) => session.on_line(line, &stdio.outbox).await,
                Some(Input::Eof) | None => break EndReason::Eof,
            },
        }
    };
    match reason {
        EndReason::Eof => tracing::info!("stdin closed: shutting down"),
        EndReason::Signal(s) => tracing::info!(signal = %s, "shutting down on signal"),
        EndReason::StdoutClosed => tracing::info!("stdout closed: shutting down"),
    }

    // 1. Calls in flight: after EOF they get the grace to finish normally.
    let mut reason = reason;
    if let EndReason::Eof = reason {
        tokio::select! {
            biased;
            ev = next_shutdown_signal(&mut events) => reason = EndReason::Signal(ev),
            () = stdio.broken.cancelled() => reason = EndReason::StdoutClosed,
            _ = session.settle(app.config.shutdown_grace) => {}
        }
    }
    // The rest answer -32800, while stdout is still writable.
    shutdown.cancel();
    session.settle(ANSWER_WAIT).await;

    // 2–4. TERM, grace, KILL; as PID 1 the kill(-1) sweep.
    let report = app.jobs.shutdown().await;
    // 5. Survivors.
    for s in &report.survived_term {
        tracing::warn!(survivor = %s, "outlived SIGTERM for the whole grace period and was sent SIGKILL");
    }
    for s in &report.survived_kill {
        tracing::warn!(survivor = %s, "still alive at exit");
    }

    // Every queued response is written whole before we exit.
    stdio.outbox.finish();
    match reason {
        EndReason::Eof => {
            tokio::select! {
                _ = &mut stdio.written => {}
                _ = next_shutdown_signal(&mut events) => {
                    let _ = tokio::time::timeout(FLUSH_WAIT, &mut stdio.written).await;
                }
            }
        }
        EndReason::Signal(_) | EndReason::StdoutClosed => {
            let _ = tokio::time::timeout(FLUSH_WAIT, &mut stdio.written).await;
        }
    }
    Ok(reason)
}

/// Logs a forwarded signal; returns a shutdown signal.
fn on_event(ev: Option<init::Event>) -> Option<init::Signal> {
    match ev {
        Some(init::Event::Shutdown(sig)) => Some(sig),
        Some(init::Event::Forwarded { signal, groups }) => {
            tracing::info!(%signal, groups, "forwarded signal to job groups");
            None
        }
        None => None,
    }
}

/// The next shutdown signal (forever, if the init layer is gone).
async fn next_shutdown_signal(events: &mut mpsc::UnboundedReceiver<init::Event>) -> init::Signal {
    loop {
        match events.recv().await {
            Some(ev) => {
                if let Some(sig) = on_event(Some(ev)) {
                    return sig;
                }
            }
            None => std::future::pending::<()>().await,
        }
    }
}
