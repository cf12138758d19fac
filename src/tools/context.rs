//! What a tool call can reach: the shared server state ([`App`]) and the
//! call's own context ([`Call`]): its cancellation, its progress text, the
//! revision it is served in and what its client declared. Nothing here names a session or a transport.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::jobs::Jobs;
use crate::jobs::result::{Fields, View};
use crate::policy::cwd::CwdPolicy;
use crate::policy::identity::JobPolicy;
use crate::policy::redact::Redactor;
use crate::protocol::era::Client;
use crate::protocol::version::Revision;

/// The state every session shares: the job service, the policies and the
/// settings.
pub struct App {
    /// The job service (process-wide table, spawning, signalling).
    pub jobs: Jobs,
    /// The MCP Tasks (SPEC §19): records beside the jobs they own.
    pub tasks: crate::tasks::Tasks,
    /// Where jobs may start (SPEC §12.5).
    pub cwd: CwdPolicy,
    /// Secret redaction of returned output, when on (SPEC §12.6).
    pub redact: Option<Redactor>,
    /// What `user` and `limits` may ask for (SPEC §16).
    pub job_policy: JobPolicy,
    /// Settings.
    pub config: Config,
}

/// One running tool call.
pub struct Call {
    /// Shared state.
    pub app: Arc<App>,
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

impl App {
    /// Shares the state, with the job service checking every `cwd` (a job's
    /// at launch, a shell session's when a job of it starts) under the cwd
    /// policy (SPEC §12.5, §17). Weak: the job service is part of the App.
    pub fn share(app: App) -> Arc<App> {
        let app = Arc::new(app);
        let weak = Arc::downgrade(&app);
        app.jobs
            .set_cwd_resolver(Box::new(move |cwd| match weak.upgrade() {
                Some(app) => app.cwd.resolve(cwd),
                None => Ok(cwd.map_or(init::Cwd::Inherit, |c| init::Cwd::Path(c.into()))),
            }));
        app
    }

    /// How results are rendered for a session of `revision`, with this
    /// server's redaction.
    pub fn view(&self, revision: Revision) -> View<'_> {
        View {
            fields: fields(revision),
            redact: self
                .redact
                .as_ref()
                .map(|r| r as &(dyn crate::capture::Redact + Sync)),
        }
    }
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
        self.app.view(self.revision)
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
