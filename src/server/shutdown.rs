//! The shutdown sequence: what the server does, in order, once
//! [`run`](super::run)'s loop has decided why it ends ([`EndReason`]), and
//! how the stdio session alone ends while a listener serves on.
//!
//! # The sequence ([`Serving::shut_down`])
//! 1. **Calls in flight settle** ([`Serving::settle_calls`]). After stdin's
//!    EOF they get up to `MCP_EXEC_SHUTDOWN_GRACE` to finish and answer
//!    normally; a signal or a closed stdout during that grace cuts it short
//!    (and becomes the reason). After a signal, a closed stdout or the main
//!    command's exit there is no grace.
//! 2. **The rest are cancelled** ([`Serving::cancel_calls`]): the shutdown
//!    token is cancelled and every call still running, of the stdio session
//!    and of every HTTP session, gets [`ANSWER_WAIT`] to queue its `-32800`
//!    while stdout and the HTTP streams are still writable.
//! 3. **Every job ends** ([`Serving::end_jobs`]): every job group gets TERM,
//!    the grace, KILL (as PID 1 the `kill(-1)` sweep); survivors are logged.
//! 4. **Every queued answer is written** ([`Serving::flush`]): HTTP's within
//!    [`FLUSH_WAIT`]; stdio's whole after EOF (the writer takes as long as
//!    the client needs to read, unless a signal arrives, which bounds it to
//!    `FLUSH_WAIT`), within `FLUSH_WAIT` after any other reason.
//!
//! Only then does `run` return, and the process exits.
//!
//! # The stdio session alone ([`end_stdio_session`])
//! With a listener serving, stdin's EOF or a closed stdout ends the stdio
//! session only: its calls get the grace (after EOF), are cancelled, get
//! `ANSWER_WAIT` to answer, and its outbox is written out; the server and
//! every other session serve on.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::app::App;
use super::session::McpSession;
use super::transport::http::Http;
use super::transport::stdio::Stdio;
use super::{EndReason, on_event};

/// How long calls cancelled at shutdown get to queue their `-32800`.
const ANSWER_WAIT: Duration = Duration::from_secs(2);
/// How long the writer gets to flush once a signal asked us to go.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// What is serving when the shutdown begins.
pub(super) struct Serving {
    /// The shared state (the jobs to end, the grace).
    pub app: Arc<App>,
    /// The stdio session (idle without stdio).
    pub session: Arc<McpSession>,
    /// stdio's I/O, unless stdio does not serve or has ended already.
    pub stdio: Option<Stdio>,
    /// The HTTP listeners, when any serves.
    pub http: Option<Http>,
    /// The shutdown token every session's calls descend from.
    pub cancel: CancellationToken,
}

impl Serving {
    /// The whole sequence, in the order of the module doc; returns the
    /// reason the server ended (a signal or a closed stdout during the EOF
    /// grace replaces EOF).
    pub(super) async fn shut_down(
        self,
        reason: EndReason,
        events: &mut mpsc::UnboundedReceiver<init::Event>,
    ) -> EndReason {
        log(reason);
        let reason = self.settle_calls(reason, events).await;
        self.cancel_calls().await;
        self.end_jobs().await;
        self.flush(reason, events).await;
        reason
    }

    /// Phase 1: after EOF, the calls in flight get the grace to finish normally.
    async fn settle_calls(
        &self,
        reason: EndReason,
        events: &mut mpsc::UnboundedReceiver<init::Event>,
    ) -> EndReason {
        let mut reason = reason;
        if let (EndReason::Eof, Some(io)) = (reason, &self.stdio) {
            tokio::select! {
                biased;
                ev = next_shutdown_signal(events) => reason = EndReason::Signal(ev),
                () = io.broken.cancelled() => reason = EndReason::StdoutClosed,
                _ = self.session.settle(self.app.config.shutdown_grace) => {}
            }
        }
        reason
    }

    /// Phase 2: the rest answer -32800, while stdout and the HTTP streams are
    /// still writable.
    async fn cancel_calls(&self) {
        self.cancel.cancel();
        self.session.settle(ANSWER_WAIT).await;
        if let Some(http) = &self.http {
            http.settle(ANSWER_WAIT).await;
        }
    }

    /// Phase 3: TERM, grace, KILL; as PID 1 the kill(-1) sweep; the survivors
    /// logged.
    async fn end_jobs(&self) {
        let report = self.app.jobs.shutdown().await;
        for s in &report.survived_term {
            tracing::warn!(survivor = %s, "outlived SIGTERM for the whole grace period and was sent SIGKILL");
        }
        for s in &report.survived_kill {
            tracing::warn!(survivor = %s, "still alive at exit");
        }
    }

    /// Phase 4: every queued response is written whole before we exit.
    async fn flush(self, reason: EndReason, events: &mut mpsc::UnboundedReceiver<init::Event>) {
        if let Some(http) = &self.http {
            http.drained(FLUSH_WAIT).await;
        }
        let Some(mut io) = self.stdio else {
            return;
        };
        io.outbox.finish();
        match reason {
            EndReason::Eof => {
                tokio::select! {
                    _ = &mut io.written => {}
                    _ = next_shutdown_signal(events) => {
                        let _ = tokio::time::timeout(FLUSH_WAIT, &mut io.written).await;
                    }
                }
            }
            EndReason::Signal(_) | EndReason::StdoutClosed | EndReason::MainExited(_) => {
                let _ = tokio::time::timeout(FLUSH_WAIT, &mut io.written).await;
            }
        }
    }
}

/// Says why the server shuts down.
fn log(reason: EndReason) {
    match reason {
        EndReason::Eof => tracing::info!("stdin closed: shutting down"),
        EndReason::Signal(s) => tracing::info!(signal = %s, "shutting down on signal"),
        EndReason::StdoutClosed => tracing::info!("stdout closed: shutting down"),
        EndReason::MainExited(code) => {
            tracing::info!(code, "the main command exited: shutting down");
        }
    }
}

/// Ends the stdio session alone (`ended`: stdin's EOF or a closed stdout)
/// while a listener serves on, in a task of its own: after EOF its calls
/// get `grace`; then they are cancelled, get [`ANSWER_WAIT`] to answer,
/// and its outbox is written out.
pub(super) fn end_stdio_session(
    io: Stdio,
    session: &Arc<McpSession>,
    ended: EndReason,
    grace: Duration,
) {
    tracing::info!(reason = ?ended, "the stdio session ends; HTTP serves on");
    let session = Arc::clone(session);
    tokio::spawn(async move {
        if let EndReason::Eof = ended {
            session.settle(grace).await;
        }
        session.end();
        session.settle(ANSWER_WAIT).await;
        io.outbox.finish();
        let _ = io.written.await;
    });
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
