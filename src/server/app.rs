//! The server's shared state ([`App`]): the one job service, the MCP Tasks
//! beside it, the policies and the settings. One per process, built once by
//! `main`'s wiring with [`App::new`] and shared (`Arc<App>`) by every MCP
//! session, every transport and the shutdown sequence.
//!
//! # Invariants
//! - Every `cwd` a job or a shell session starts in is checked under the cwd
//!   policy: [`App::new`] gives the job service its resolver before the
//!   `App` exists, so no job can launch unchecked. The resolver holds the
//!   policy itself (shared with `App::cwd`), not the `App`: the job service
//!   is part of the `App`, and a resolver holding the `App` would be a cycle.
//! - A tool sees this state only through [`tools::Host`]: the job service,
//!   the policies, the settings and the rendering — never the Tasks.

use std::sync::Arc;

use crate::config::Config;
use crate::jobs::Jobs;
use crate::jobs::result::View;
use crate::policy::cwd::CwdPolicy;
use crate::policy::identity::JobPolicy;
use crate::policy::redact::Redactor;
use crate::protocol::version::Revision;
use crate::tasks::Tasks;
use crate::tools;

/// The state every session shares: the job service, the Tasks, the
/// policies and the settings.
pub struct App {
    /// The job service (process-wide table, spawning, signalling).
    pub jobs: Jobs,
    /// The MCP Tasks: records beside the jobs they own (docs/tasks.md).
    pub tasks: Tasks,
    /// Where jobs may start, and files may be read or written.
    pub cwd: Arc<CwdPolicy>,
    /// Secret redaction of returned output, when on.
    pub redact: Option<Redactor>,
    /// What `user` and `limits` may ask for.
    pub job_policy: JobPolicy,
    /// Settings.
    pub config: Config,
}

impl App {
    /// The shared state, with the job service checking every `cwd` (a job's
    /// at launch, a shell session's when a job of it starts) under `cwd`.
    pub fn new(
        jobs: Jobs,
        tasks: Tasks,
        cwd: CwdPolicy,
        redact: Option<Redactor>,
        job_policy: JobPolicy,
        config: Config,
    ) -> Arc<App> {
        let cwd = Arc::new(cwd);
        let policy = Arc::clone(&cwd);
        jobs.set_cwd_resolver(Box::new(move |dir| policy.resolve(dir)));
        Arc::new(App {
            jobs,
            tasks,
            cwd,
            redact,
            job_policy,
            config,
        })
    }

    /// How results are rendered for a session of `revision`, with this
    /// server's redaction.
    pub fn view(&self, revision: Revision) -> View<'_> {
        View {
            fields: tools::context::fields(revision),
            redact: self
                .redact
                .as_ref()
                .map(|r| r as &(dyn crate::capture::Redact + Sync)),
        }
    }
}

impl tools::Host for App {
    fn jobs(&self) -> &Jobs {
        &self.jobs
    }

    fn cwd(&self) -> &CwdPolicy {
        &self.cwd
    }

    fn job_policy(&self) -> &JobPolicy {
        &self.job_policy
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn view(&self, revision: Revision) -> View<'_> {
        App::view(self, revision)
    }
}
