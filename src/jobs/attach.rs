//! `attach_writer`: the one attached terminal writer of a job.
//!
//! A human attaches to a job's terminal (`GET /jobs/<id>/tty`) to read its
//! output and type into it. Two people typing into one terminal interleave
//! their keys, so a job has at most one attached writer at a time: a
//! [`WriterLease`]. A second attach is refused ([`AttachError::Busy`])
//! unless it takes over, which revokes the first lease (its holder sees
//! [`WriterLease::revoked`] fire and closes its connection) and installs
//! the new one in the same critical section — there is never a moment with
//! two writers, nor a lost takeover.
//!
//! # What it is not
//! The lease is a rule between attached terminals, not a lock on stdin:
//! MCP `input` and `POST /exec` still write through [`Jobs::write_stdin`].
//! It never takes the job's result (attaching observes; the owner set at
//! launch delivers it).
//!
//! # Invariants
//! - The lease lives in the job (`Job::writer`), changed only under the
//!   table's lock, so "is there a writer" and "install mine" are one step.
//! - Dropping a lease clears the job's writer only if it is still that
//!   lease (a serial number tells): a lease that was taken over never
//!   clears its successor.
//! - A job that leaves the table takes its writer with it; the lease's
//!   holder learns that from its follow ending, not from the lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use super::{JobId, Jobs, Shared};

/// Serial numbers of leases, process-wide, never reused.
static NEXT_LEASE: AtomicU64 = AtomicU64::new(1);

/// The writer recorded in a job.
#[derive(Debug)]
pub(super) struct Writer {
    /// Which lease holds it.
    serial: u64,
    /// Cancelled when another attach takes over.
    revoke: CancellationToken,
}

/// Why a writer lease was not granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    /// No such job (never existed, or delivered already).
    #[error("unknown job")]
    Unknown,
    /// The job runs on pipes: there is no terminal to attach to.
    #[error("the job has no terminal (it was not started with tty)")]
    NotTerminal,
    /// Another terminal is attached as its writer (take it over to attach).
    #[error("another terminal is attached to the job")]
    Busy,
}

/// The right to be a job's one attached writer; dropping it gives it up.
pub struct WriterLease {
    shared: Arc<Shared>,
    id: JobId,
    serial: u64,
    revoke: CancellationToken,
}

impl Jobs {
    /// Makes the caller job `id`'s one attached writer; only a terminal job
    /// has one ([`AttachError::NotTerminal`]). With another writer attached:
    /// [`AttachError::Busy`], or, with `takeover`, the other lease is revoked
    /// and this one replaces it.
    pub fn attach_writer(&self, id: JobId, takeover: bool) -> Result<WriterLease, AttachError> {
        let serial = NEXT_LEASE.fetch_add(1, Ordering::Relaxed);
        let revoke = CancellationToken::new();
        let mine = revoke.clone();
        self.shared
            .table
            .with_mut(id, |job| {
                if !job.tty.is_tty() {
                    return Err(AttachError::NotTerminal);
                }
                if let Some(old) = &job.writer {
                    if !takeover {
                        return Err(AttachError::Busy);
                    }
                    old.revoke.cancel();
                }
                job.writer = Some(Writer {
                    serial,
                    revoke: mine,
                });
                Ok(())
            })
            .unwrap_or(Err(AttachError::Unknown))?;
        tracing::info!(job = %id, takeover, "terminal writer attached");
        Ok(WriterLease {
            shared: Arc::clone(&self.shared),
            id,
            serial,
            revoke,
        })
    }
}

impl WriterLease {
    /// Completes when another attach took this lease over.
    pub fn revoked(&self) -> WaitForCancellationFuture<'_> {
        self.revoke.cancelled()
    }
}

impl Drop for WriterLease {
    fn drop(&mut self) {
        let serial = self.serial;
        self.shared.table.with_mut(self.id, |job| {
            if job.writer.as_ref().is_some_and(|w| w.serial == serial) {
                job.writer = None;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    //! The writer lease and the raw follow, on a table whose jobs are
    //! started, fed and ended by hand (no process).

    use std::time::Duration;

    use init::{Pid, SpawnSpec};

    use super::*;
    use crate::capture::CapturePolicy;
    use crate::jobs::result::Fields;
    use crate::jobs::state::{ExitOutcome, Pending};
    use crate::jobs::table::{Claim, Job};
    use crate::jobs::{JobsSettings, RawEvent, RawFollowError, Stream};

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

    /// A running terminal job with a `window`-byte window.
    fn running(jobs: &Jobs, window: usize) -> JobId {
        start(jobs, window, true)
    }

    /// A running job, on a terminal when `tty` (its terminal itself is not
    /// opened: nothing here reads or writes it).
    fn start(jobs: &Jobs, window: usize, tty: bool) -> JobId {
        let table = &jobs.shared.table;
        let id = table.next_id();
        let pending = Pending {
            spec: SpawnSpec::shell("true"),
            stdin: None,
            close_stdin: false,
            terminal: tty.then_some(init::WindowSize { cols: 80, rows: 24 }),
            timeout: None,
            idle_timeout: None,
            shell_session: None,
        };
        let job = Job::queued(id, pending, CapturePolicy::default(), None, window);
        assert_eq!(table.submit(job).map(|a| a.len()), Ok(1));
        assert!(table.started(id, Pid(200_000), None, None));
        id
    }

    #[test]
    fn a_second_writer_is_refused_unless_it_takes_over_which_revokes_the_first() {
        let jobs = service();
        let id = running(&jobs, 64);
        let first = jobs.attach_writer(id, false).unwrap();
        assert_eq!(jobs.attach_writer(id, false).err(), Some(AttachError::Busy));
        assert!(
            !first.revoke.is_cancelled(),
            "a refused attach revokes nothing"
        );
        let second = jobs.attach_writer(id, true).unwrap();
        assert!(first.revoke.is_cancelled());
        assert!(!second.revoke.is_cancelled());
    }

    #[test]
    fn a_lease_taken_over_never_clears_its_successor_and_the_last_one_frees_the_job() {
        let jobs = service();
        let id = running(&jobs, 64);
        let first = jobs.attach_writer(id, false).unwrap();
        let second = jobs.attach_writer(id, true).unwrap();
        drop(first);
        assert_eq!(
            jobs.attach_writer(id, false).err(),
            Some(AttachError::Busy),
            "the successor still holds the job"
        );
        drop(second);
        assert!(jobs.attach_writer(id, false).is_ok());
    }

    #[test]
    fn a_pipe_job_has_no_writer() {
        let jobs = service();
        let id = start(&jobs, 64, false);
        assert_eq!(
            jobs.attach_writer(id, true).err(),
            Some(AttachError::NotTerminal)
        );
    }

    #[test]
    fn an_unknown_job_has_no_writer_and_no_raw_follow() {
        let jobs = service();
        assert_eq!(
            jobs.attach_writer(JobId(99), true).err(),
            Some(AttachError::Unknown)
        );
        assert_eq!(
            jobs.follow_raw(JobId(99), 0, 8, Fields::PartTwo).err(),
            Some(RawFollowError::Unknown)
        );
    }

    #[tokio::test]
    async fn a_raw_follow_replays_from_an_offset_says_gaps_and_ends_without_taking_the_result() {
        let jobs = service();
        let table = &jobs.shared.table;
        let id = running(&jobs, 8);
        assert!(table.push_output(id, Stream::Stdout, b"0123456789\xff"));
        assert_eq!(
            jobs.follow_raw(id, 12, 4, Fields::PartTwo).err(),
            Some(RawFollowError::Ahead { total: 11 })
        );
        let mut follow = jobs.follow_raw(id, 1, 4, Fields::PartTwo).unwrap();
        // Bytes 0..3 are gone from the 8-byte window: said, not skipped.
        assert!(matches!(
            follow.next().await,
            Some(RawEvent::Gap { from: 1, to: 3 })
        ));
        let mut got = Vec::new();
        while got.len() < 8 {
            match follow.next().await {
                Some(RawEvent::Output { offset, data }) => {
                    assert_eq!(offset, 3 + got.len() as u64);
                    assert!(data.len() <= 4);
                    got.extend(data);
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(got, b"3456789\xff", "raw bytes, unsanitised");
        assert!(table.set_terminal(id, ExitOutcome::Exited(2)));
        match follow.next().await {
            Some(RawEvent::End(end)) => {
                assert_eq!(end.result.status.exit_code, Some(2));
                assert_eq!(end.stdout_bytes, 11);
                assert_eq!(end.owner.name(), "caller");
                assert!(!end.delivered);
            }
            other => panic!("{other:?}"),
        }
        assert!(follow.next().await.is_none());
        assert!(
            matches!(jobs.deliver(id), Claim::Delivered(_)),
            "the owner still gets the result"
        );
    }

    #[tokio::test]
    async fn a_raw_follow_of_a_result_taken_meanwhile_reports_the_missed_tail_and_the_taker() {
        let jobs = service();
        let table = &jobs.shared.table;
        let id = running(&jobs, 64);
        assert!(table.push_output(id, Stream::Stdout, b"abc"));
        let mut follow = jobs.follow_raw(id, 0, 64, Fields::PartTwo).unwrap();
        assert!(table.push_output(id, Stream::Stdout, b"def"));
        assert!(table.set_terminal(id, ExitOutcome::Exited(0)));
        assert!(matches!(jobs.deliver(id), Claim::Delivered(_)));
        assert!(matches!(
            follow.next().await,
            Some(RawEvent::Gap { from: 0, to: 6 })
        ));
        match follow.next().await {
            Some(RawEvent::End(end)) => {
                assert!(end.delivered);
                assert_eq!(end.result.status.state, "success");
                assert_eq!(end.stdout_bytes, 6);
            }
            other => panic!("{other:?}"),
        }
    }
}
