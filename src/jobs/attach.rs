//! `attach_writer`: the one attached terminal writer of a job (SPEC §20).
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
//! launch delivers, SPEC Part III).
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
    /// Makes the caller job `id`'s one attached writer. With another writer
    /// attached: [`AttachError::Busy`], or, with `takeover`, the other
    /// lease is revoked and this one replaces it.
    pub fn attach_writer(&self, id: JobId, takeover: bool) -> Result<WriterLease, AttachError> {
        let serial = NEXT_LEASE.fetch_add(1, Ordering::Relaxed);
        let revoke = CancellationToken::new();
        let mine = revoke.clone();
        self.shared
            .table
            .with_mut(id, |job| {
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
