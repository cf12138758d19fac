//! What a tool call can reach: its server, narrowed to what a tool needs
//! ([`Host`]: the job service, the policies, the settings, the rendering),
//! and the call's own context ([`Call`]): its cancellation, its progress
//! text, the revision it is served in and what its client declared.
//!
//! Nothing here names a session, a transport or the server's state: the
//! server implements [`Host`] and hands each call an `Arc<dyn Host>`, so
//! the dependency points from `server` to `tools` only.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::jobs::Jobs;
use crate::jobs::result::{Fields, View};
use crate::policy::cwd::CwdPolicy;
use crate::policy::identity::JobPolicy;
use crate::protocol::era::Client;
use crate::protocol::version::Revision;

/// What a tool reaches of the server that hosts it: the job service, the
/// cwd and job policies, the settings, and how results are rendered. The
/// server's shared state is the one implementation; a tool sees only this,
/// never the MCP Tasks, a session or a listener.
pub trait Host: Send + Sync {
    /// The job service (process-wide table, spawning, signalling).
    fn jobs(&self) -> &Jobs;
    /// Where jobs may start and files may be read or written.
    fn cwd(&self) -> &CwdPolicy;
    /// What `user` and `limits` may ask for.
    fn job_policy(&self) -> &JobPolicy;
    /// Settings.
    fn config(&self) -> &Config;
    /// How results are rendered for a request of `revision`, with this
    /// server's redaction.
    fn view(&self, revision: Revision) -> View<'_>;
}

/// One running tool call.
pub struct Call {
    /// What the call reaches of its server.
    pub host: Arc<dyn Host>,
    /// Cancelled by `notifications/cancelled` for this request, by the end
    /// of its session, and by server shutdown.
    pub cancel: CancellationToken,
    /// Cancelled when the server shuts down: the server then tears every job
    /// down itself, so a cancelled call must not start a teardown of its own.
    pub shutdown: CancellationToken,
    /// The text progress notifications report while the call blocks.
    pub progress: ProgressText,
    /// The revision the request is served in (what the result may carry):
    /// its own per-request one, or its session's (see
    /// [`Era`](crate::protocol::era::Era)).
    pub revision: Revision,
    /// What the request's client declared (per request in 2026-07-28, its
    /// session's `initialize` before).
    #[allow(dead_code, reason = "for the Tasks extension (issue 25 item 3)")]
    pub client: Arc<Client>,
}

/// The job-result fields a session of `revision` sees.
pub fn fields(revision: Revision) -> Fields {
    if revision.has_part_two() {
        Fields::PartTwo
    } else {
        Fields::PartOne
    }
}

impl Call {
    /// How this call's results are rendered.
    pub fn view(&self) -> View<'_> {
        self.host.view(self.revision)
    }

    /// The job-result fields this call's session sees.
    pub fn fields(&self) -> Fields {
        fields(self.revision)
    }
}

/// The "still running" text of a blocking call (what it is waiting for),
/// read by the session's progress ticker. No text set = not blocking yet,
/// no tick.
#[derive(Clone, Default, Debug)]
pub struct ProgressText(Arc<Mutex<Option<Cow<'static, str>>>>);

impl ProgressText {
    /// Sets the text for what the call now waits for (a fixed text, or one that
    /// names its job, e.g. `"job-7 still running"`).
    pub fn set(&self, message: impl Into<Cow<'static, str>>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(message.into());
    }

    /// The current message.
    pub fn current(&self) -> Option<Cow<'static, str>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}
