//! `stream`: the one loop of a front-end that owns a job's stream —
//! `POST /exec`, sandboxd's `Execute` and `Start`, envd's `Start`
//! and `Connect`.
//!
//! [`JobStream::next`] gives the front-end one [`Streamed`] at a time: the
//! job's events ([`Follow::next`]), a keep-alive when one is due, the
//! stream's own deadline, the job leaving the table without an end for
//! this stream, or its client being gone. The front-end renders and sends
//! each step; it writes no `select!` and no timer of its own.
//!
//! # Invariants
//! - **One client-gone policy, chosen by the front-end when it opens the
//!   stream** ([`ClientGone`]): when its client goes away — the future it
//!   gave resolves, or it says a send failed ([`JobStream::left`]) — or the
//!   stream's deadline passes, the policy is applied here, once:
//!   [`ClientGone::TearDown`] ends the job (TERM, grace, KILL, removed:
//!   nothing else could collect it), [`ClientGone::Retain`] leaves it
//!   running, detached, and once it has ended keeps it that long for a
//!   later stream to collect, then removes it. Once the server's shutdown
//!   (the token given) is under way a client that leaves changes nothing:
//!   the shutdown ends every job.
//! - **Keep-alives at the front-end's interval** ([`KeepAlive`]): either on
//!   a fixed beat, or only after that long without an event (the beat
//!   restarts when the front-end asks for the step after an event, that is
//!   once it has sent it).
//! - `next` is cancel-safe for the same reason `Follow::next` is, and the
//!   stream is the job's one deliverer: its `Exit` event carries the job,
//!   claimed.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::time::{Interval, Sleep};
use tokio_util::sync::CancellationToken;

use super::follow::Follow;
use super::{Event, JobId, Jobs};

/// What happens to a streamed job when its client goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientGone {
    /// End it: TERM, the grace, KILL to its group, removed.
    TearDown,
    /// Leave it running, detached; once it has ended, keep it this long
    /// for another stream to collect, then remove it.
    Retain(Duration),
}

/// When a quiet stream gets a keep-alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepAlive {
    /// On a fixed beat, whatever else is sent.
    Every(Duration),
    /// After this long without an event.
    WhenQuiet(Duration),
}

/// How a front-end streams a job.
pub struct Streaming<'a> {
    /// Its keep-alives, if it sends any.
    pub keep_alive: Option<KeepAlive>,
    /// The stream's own deadline ([`Streamed::Deadline`]; the job's is its own).
    pub deadline: Option<Duration>,
    /// What its client leaving does to the job.
    pub on_gone: ClientGone,
    /// The server's shutdown, if a client that leaves during it should
    /// change nothing.
    pub shutdown: Option<&'a CancellationToken>,
}

/// One step of a streamed job.
#[derive(Debug)]
pub enum Streamed {
    /// An event of the job; `Event::Exit` is the last.
    Event(Event),
    /// A keep-alive is due.
    KeepAlive,
    /// The stream's deadline passed: the client-gone policy is applied.
    Deadline,
    /// The job left the table without an end for this stream (another
    /// stream took it, or the server's shutdown tore it down), or its end
    /// was given already.
    Ended,
    /// The client went away: the client-gone policy is applied.
    ClientGone,
}

/// A job streamed to one client ([`Jobs::stream`]).
pub struct JobStream<'a> {
    jobs: &'a Jobs,
    id: JobId,
    follow: Follow<'a>,
    tick: Option<Interval>,
    quiet: bool,
    /// The last step was an event: a quiet beat restarts now.
    restart_tick: bool,
    deadline: Option<Pin<Box<Sleep>>>,
    gone: Pin<Box<dyn Future<Output = ()> + Send + 'a>>,
    on_gone: ClientGone,
    shutdown: Option<&'a CancellationToken>,
    left: bool,
}

impl Jobs {
    /// Streams job `id`'s events (`follow`, which the caller opened on it)
    /// to a client that is gone when `gone` resolves, as `how` says.
    pub fn stream<'a>(
        &'a self,
        id: JobId,
        follow: Follow<'a>,
        gone: impl Future<Output = ()> + Send + 'a,
        how: Streaming<'a>,
    ) -> JobStream<'a> {
        let (tick, quiet) = match how.keep_alive {
            None => (None, false),
            Some(KeepAlive::Every(d)) => (Some(d), false),
            Some(KeepAlive::WhenQuiet(d)) => (Some(d), true),
        };
        let tick = tick.map(|d| {
            let mut t = tokio::time::interval(d);
            // The first beat is one interval away, not now.
            t.reset();
            t
        });
        JobStream {
            jobs: self,
            id,
            follow,
            tick,
            quiet,
            restart_tick: false,
            deadline: how.deadline.map(|d| Box::pin(tokio::time::sleep(d))),
            gone: Box::pin(gone),
            on_gone: how.on_gone,
            shutdown: how.shutdown,
            left: false,
        }
    }
}

impl JobStream<'_> {
    /// The next step. After `Deadline` or `ClientGone` (the policy applied)
    /// the front-end stops; after `Event::Exit` or `Ended` there are no more
    /// events.
    pub async fn next(&mut self) -> Streamed {
        if self.left {
            return Streamed::ClientGone;
        }
        if std::mem::take(&mut self.restart_tick)
            && let Some(t) = &mut self.tick
        {
            t.reset();
        }
        let Self {
            follow,
            tick,
            deadline,
            gone,
            ..
        } = self;
        let beat = async {
            match tick {
                Some(t) => {
                    t.tick().await;
                }
                None => std::future::pending().await,
            }
        };
        let deadline = async {
            match deadline {
                Some(d) => d.as_mut().await,
                None => std::future::pending().await,
            }
        };
        let step = tokio::select! {
            next = follow.next() => next.map_or(Streamed::Ended, Streamed::Event),
            () = gone.as_mut() => Streamed::ClientGone,
            () = deadline => Streamed::Deadline,
            () = beat => Streamed::KeepAlive,
        };
        match step {
            Streamed::ClientGone | Streamed::Deadline => self.left().await,
            Streamed::Event(_) => self.restart_tick = self.quiet,
            Streamed::KeepAlive | Streamed::Ended => {}
        }
        step
    }

    /// The front-end could not send to its client (it is gone): applies
    /// the client-gone policy, once.
    pub async fn left(&mut self) {
        if std::mem::replace(&mut self.left, true) {
            return;
        }
        let id = self.id;
        if self.shutdown.is_some_and(CancellationToken::is_cancelled) {
            return;
        }
        match self.on_gone {
            ClientGone::TearDown => {
                tracing::info!(job = %id, "stream: client gone, ending its job");
                self.jobs.teardown(id).await;
            }
            ClientGone::Retain(keep) => {
                tracing::info!(job = %id, "stream: detached, the job runs on");
                let jobs = Jobs {
                    shared: std::sync::Arc::clone(&self.jobs.shared),
                };
                let shutdown = self.shutdown.cloned();
                tokio::spawn(async move { jobs.retain(id, keep, shutdown).await });
            }
        }
    }
}

impl Jobs {
    /// Once job `id` has ended, keeps it `keep` for another stream to
    /// collect, then removes it if nobody did (or stops at the shutdown,
    /// which ends every job itself).
    async fn retain(&self, id: JobId, keep: Duration, shutdown: Option<CancellationToken>) {
        if !self.settled(id).await {
            return;
        }
        let shutdown = async {
            match &shutdown {
                Some(s) => s.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep(keep) => {}
            () = shutdown => return,
        }
        if self.shared.table.with(id, |_| ()).is_some() {
            tracing::info!(job = %id, "stream: nobody collected the ended job: removed");
            self.teardown(id).await;
        }
    }
}

#[cfg(test)]
mod tests {
    //! The loop and the client-gone policy, on a table whose jobs are
    //! started and ended by hand (no process), in paused time.

    use init::{Pid, SpawnSpec};
    use tokio::time::Instant;

    use super::*;
    use crate::capture::CapturePolicy;
    use crate::jobs::result::{Fields, View};
    use crate::jobs::state::{ExitOutcome, Pending};
    use crate::jobs::table::Job;
    use crate::jobs::{JobsSettings, Stream};

    fn service() -> Jobs {
        Jobs::refusing(&JobsSettings {
            grace: Duration::ZERO,
            max_running: 8,
            max_queued: 8,
            breaker_failures: 0,
            breaker_cooldown: Duration::ZERO,
            shell_session_idle: Duration::from_secs(60),
            oom_score_adj: None,
        })
    }

    /// A running job, its process `pid` (which nobody signals here).
    fn start(jobs: &Jobs, pid: i32) -> JobId {
        let table = &jobs.shared.table;
        let id = table.next_id();
        let pending = Pending {
            spec: SpawnSpec::shell("true"),
            stdin: None,
            close_stdin: false,
            terminal: None,
            timeout: None,
            idle_timeout: None,
            shell_session: None,
        };
        let job = Job::queued(id, pending, CapturePolicy::default(), None, 64);
        assert_eq!(table.submit(job).map(|a| a.len()), Ok(1));
        assert!(table.started(id, Pid(pid), None, None));
        id
    }

    const VIEW: View<'static> = View {
        fields: Fields::PartTwo,
        redact: None,
    };

    fn how(keep_alive: Option<KeepAlive>, on_gone: ClientGone) -> Streaming<'static> {
        Streaming {
            keep_alive,
            deadline: None,
            on_gone,
            shutdown: None,
        }
    }

    fn in_table(jobs: &Jobs, id: JobId) -> bool {
        jobs.shared.table.with(id, |_| ()).is_some()
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_beat_restarts_after_each_event_and_a_fixed_one_does_not() {
        let jobs = service();
        let id = start(&jobs, 300_020);
        let beat = Duration::from_secs(10);
        let quiet = KeepAlive::WhenQuiet(beat);
        let pending = std::future::pending::<()>();
        let mut s = jobs.stream(
            id,
            jobs.follow(id, 0, 64, VIEW),
            pending,
            how(Some(quiet), ClientGone::TearDown),
        );
        let t0 = Instant::now();
        assert!(matches!(
            s.next().await,
            Streamed::Event(Event::Started { .. })
        ));
        assert!(matches!(s.next().await, Streamed::KeepAlive));
        assert_eq!(t0.elapsed(), beat, "a beat after the last event");
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert!(jobs.shared.table.push_output(id, Stream::Stdout, b"x"));
        assert!(matches!(
            s.next().await,
            Streamed::Event(Event::Output { .. })
        ));
        let t1 = Instant::now();
        assert!(matches!(s.next().await, Streamed::KeepAlive));
        assert_eq!(t1.elapsed(), beat, "restarted by the event");
        drop(s);

        let id = start(&jobs, 300_021);
        let every = KeepAlive::Every(beat);
        let pending = std::future::pending::<()>();
        let mut s = jobs.stream(
            id,
            jobs.follow(id, 0, 64, VIEW),
            pending,
            how(Some(every), ClientGone::TearDown),
        );
        let t0 = Instant::now();
        assert!(matches!(
            s.next().await,
            Streamed::Event(Event::Started { .. })
        ));
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert!(jobs.shared.table.push_output(id, Stream::Stdout, b"x"));
        assert!(matches!(
            s.next().await,
            Streamed::Event(Event::Output { .. })
        ));
        assert!(matches!(s.next().await, Streamed::KeepAlive));
        assert_eq!(t0.elapsed(), beat, "on the beat, whatever was sent");
    }

    #[tokio::test(start_paused = true)]
    async fn a_retained_job_outlives_its_client_and_is_removed_its_keep_after_it_ended() {
        let jobs = service();
        let id = start(&jobs, 300_022);
        let keep = Duration::from_secs(600);
        let mut s = jobs.stream(
            id,
            jobs.follow(id, 0, 64, VIEW),
            std::future::ready(()),
            how(None, ClientGone::Retain(keep)),
        );
        // The client is gone at once (or the job's start comes first).
        loop {
            match s.next().await {
                Streamed::ClientGone => break,
                Streamed::Event(Event::Started { .. }) => {}
                other => panic!("{other:?}"),
            }
        }
        assert!(
            matches!(s.next().await, Streamed::ClientGone),
            "it stays gone"
        );
        drop(s);
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(in_table(&jobs, id), "running, detached, kept");
        assert!(jobs.shared.table.set_terminal(id, ExitOutcome::Exited(0)));
        tokio::time::sleep(keep - Duration::from_secs(1)).await;
        assert!(in_table(&jobs, id), "ended, kept for another stream");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!in_table(&jobs, id), "nobody collected it: removed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_torn_down_job_is_removed_when_its_client_leaves() {
        let jobs = service();
        let id = start(&jobs, 300_023);
        // Ended already, so the teardown signals nothing.
        assert!(jobs.shared.table.set_terminal(id, ExitOutcome::Exited(0)));
        let mut s = jobs.stream(
            id,
            jobs.follow(id, 0, 64, VIEW),
            std::future::pending(),
            how(None, ClientGone::TearDown),
        );
        s.left().await;
        assert!(!in_table(&jobs, id), "removed, never delivered");
        assert!(matches!(s.next().await, Streamed::ClientGone));
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_gone_during_the_shutdown_changes_nothing() {
        let jobs = service();
        let id = start(&jobs, 300_024);
        assert!(jobs.shared.table.set_terminal(id, ExitOutcome::Exited(0)));
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        let mut how = how(None, ClientGone::TearDown);
        how.shutdown = Some(&shutdown);
        let mut s = jobs.stream(
            id,
            jobs.follow(id, 0, 64, VIEW),
            std::future::pending(),
            how,
        );
        s.left().await;
        assert!(in_table(&jobs, id), "left to the shutdown");
    }
}
