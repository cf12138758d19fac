//! `signal`: signal a job's process group and verify its death.
//!
//! "Dead" is observed, never assumed: init's [`init::Init::escalate`] sends
//! each step's signal and waits until the direct child is reaped **and**
//! its group is empty, a later step only if something outlived the earlier
//! one's wait. A job still queued is cancelled before it starts instead.
//!
//! The answer says who holds the result ([`Delivery`]): a job its caller
//! owns is claimed here once it is terminal — while it is signalled, a
//! concurrent `wait` leaves it to this call (and answers that the result
//! went elsewhere); a `wait` that claimed it before the signal
//! leaves `Elsewhere` here —; one a stream owns is never
//! claimed, its stream delivers it. Which of its kinds the answer is, is its type
//! ([`Signalled`]): a front-end renders it and decides nothing.

use std::time::Duration;

use init::{DeathWait, Pid, Signal, Step, Survivor};

use super::state::JobPhase;
use super::table::{Cancelled, Check, Claim, Job};
use super::{Cause, JobId, Jobs, Owner};

/// What to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// One signal.
    One(Signal),
    /// `ASSURED`: TERM, then KILL if anything outlived it.
    Assured,
}

/// Who holds a signalled job's result.
#[derive(Debug)]
pub enum Delivery {
    /// Delivered here (removed from the table).
    Here(Box<Job>),
    /// Another request took it, or the stream that owns the job delivers it.
    Elsewhere,
}

/// How a `signal` ended.
#[derive(Debug)]
pub enum Signalled {
    /// It was still queued: it never runs.
    CancelledBeforeStart(Delivery),
    /// It was fully gone before any signal was sent.
    AlreadyTerminated(Delivery),
    /// It died after the signal.
    Died {
        /// The last signal sent.
        sent: Signal,
        /// `ASSURED` had to send KILL.
        escalated: bool,
        /// Who holds its result.
        delivery: Delivery,
    },
    /// Something of it outlived the last step's wait; the job stays.
    Survived {
        /// The last signal sent.
        sent: Signal,
        /// `ASSURED` had to send KILL.
        escalated: bool,
        /// Its process group.
        pgid: Pid,
        /// Its state now (the direct child runs while it is not terminal).
        phase: JobPhase,
        /// Why it is ending, when known.
        cause: Option<Cause>,
        /// The group members seen alive when the last wait ran out.
        members: Vec<Survivor>,
    },
}

/// Why `Jobs::signal` could not signal a job (init's `SignalError` is the kernel's refusal, one of its causes).
#[derive(Debug, thiserror::Error)]
pub enum JobSignalError {
    /// No such job (never existed, or delivered already).
    #[error("unknown job {0}")]
    Unknown(JobId),
    /// The kernel refused the signal.
    #[error(transparent)]
    Failed(#[from] init::SignalError),
}

/// Where the look before any signal left the job.
enum Before {
    /// Nothing to signal: this is the answer.
    Answered(Signalled),
    /// Signal this group.
    Signal(Pid),
}

impl Jobs {
    /// Signals job `id` per `plan`, waiting up to `wait` for death after
    /// each signal; `on_wait` hears which part of the death is awaited.
    /// Cancel by dropping the future.
    pub async fn signal(
        &self,
        id: JobId,
        plan: Plan,
        wait: Duration,
        on_wait: impl FnMut(DeathWait),
    ) -> Result<Signalled, JobSignalError> {
        let shared = &self.shared;
        let table = &shared.table;
        let owner = table.with(id, |j| j.owner).unwrap_or(Owner::Caller);
        let before = table
            .wait_for(false, || {
                let early = |s| Check::Done(Ok(Before::Answered(s)));
                match table.cancel_queued(id) {
                    Some(Cancelled::InPlace) => {
                        return early(Signalled::CancelledBeforeStart(Delivery::Elsewhere));
                    }
                    Some(Cancelled::Removed(job)) => {
                        return early(Signalled::CancelledBeforeStart(Delivery::Here(job)));
                    }
                    None => {}
                }
                match table.with(id, |j| (j.state.pgid(), j.state.is_terminal())) {
                    None => Check::Done(Err(JobSignalError::Unknown(id))),
                    Some((Some(pgid), false)) => Check::Done(Ok(Before::Signal(pgid))),
                    Some((Some(pgid), true)) if init::group_exists(pgid) => {
                        Check::Done(Ok(Before::Signal(pgid)))
                    }
                    Some((_, true)) => {
                        Check::Done(self.already_terminated(id, owner).map(Before::Answered))
                    }
                    // Being started right now: wait for its process group.
                    Some((None, false)) => Check::AGAIN,
                }
            })
            .await?;
        let pgid = match before {
            Before::Answered(s) => return Ok(s),
            Before::Signal(pgid) => pgid,
        };
        // The result of a death this call causes is this call's answer.
        let _reserved = owner.is_caller().then(|| table.reserve(id));
        let steps = match plan {
            Plan::One(sig) => vec![Step::new(sig, wait)],
            Plan::Assured => vec![Step::new(Signal::TERM, wait), Step::new(Signal::KILL, wait)],
        };
        // Noted before any is sent: a death by one of them is `cause: "killed"`.
        for step in &steps {
            table.note_kill(id, step.signal);
        }
        let mut done = shared.escalate(id, pgid, &steps, on_wait).await?;
        if done.already_dead {
            shared.terminal(id).await;
            return self.already_terminated(id, owner);
        }
        let sent = done.last_signal.unwrap_or(steps[0].signal);
        if done.dead {
            return Ok(Signalled::Died {
                sent,
                escalated: done.escalated,
                delivery: self.collect(id, owner).await,
            });
        }
        let (phase, cause) = table
            .with(id, |j| (j.phase(), j.cause))
            .unwrap_or((JobPhase::Running, None));
        Ok(Signalled::Survived {
            sent,
            escalated: done.escalated,
            pgid,
            phase,
            cause,
            members: done.survived.pop().map(|s| s.members).unwrap_or_default(),
        })
    }

    /// The answer for a job fully gone before any signal: its result (or,
    /// for a job a stream owns, that the stream delivers it).
    fn already_terminated(&self, id: JobId, owner: Owner) -> Result<Signalled, JobSignalError> {
        let delivery = match owner {
            Owner::JobStream | Owner::Task(_) => Delivery::Elsewhere,
            Owner::Caller => match self.shared.table.claim(id) {
                Claim::Delivered(job) => Delivery::Here(job),
                Claim::Running | Claim::Unknown => return Err(JobSignalError::Unknown(id)),
            },
        };
        Ok(Signalled::AlreadyTerminated(delivery))
    }

    /// Once a dead job is terminal (its runner reads the last output
    /// first): claimed here if its caller owns it and nobody took it first.
    async fn collect(&self, id: JobId, owner: Owner) -> Delivery {
        let table = &self.shared.table;
        if !owner.is_caller() {
            self.shared.terminal(id).await;
            return Delivery::Elsewhere;
        }
        table
            .wait_for(false, || match table.claim(id) {
                Claim::Delivered(job) => Check::Done(Delivery::Here(job)),
                Claim::Unknown => Check::Done(Delivery::Elsewhere),
                Claim::Running => Check::AGAIN,
            })
            .await
    }
}
