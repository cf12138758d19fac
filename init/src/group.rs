//! Process-group signalling and verified death.
//!
//! Owns no state: it reads the reaper's registry and asks the kernel.
//!
//! A job's signal goes to its whole group (`kill(-pgid, sig)`). "Dead" means
//! observed, never assumed: the group's leader (the job's direct child, whose
//! pid is the pgid) has been reaped — it is no longer registered with the
//! reaper — **and** `kill(-pgid, 0)` fails with `ESRCH`, which the kernel
//! only reports once every member, zombies included, has been reaped.
//!
//! [`Init::escalate`] is the one TERM → wait → KILL sequence: the `kill`
//! tool, the teardown of a cancelled `execute` and [`Init::shutdown`] (for all
//! groups at once) all run it. Every wait in it is `Init::wait_until`, woken
//! by the reaper.
//!
//! Every TERM of an escalation is followed by SIGCONT to the same group, so
//! that a member stopped by SIGSTOP/SIGTSTP acts on it at once (a stopped
//! process keeps TERM pending; only KILL ends it as it is).
//!
//! Members that left the group with `setsid()`/`setpgid()` are out of a group
//! signal's reach; only the PID-1 shutdown sweep (`kill(-1, …)`) still gets
//! them. A terminal job's child leads a session of its own, and
//! [`Init::escalate_session`] reaches every group of that session (a
//! job-control shell's jobs); a process that left the session with
//! `setsid()` is out of its reach too.

use std::io;
use std::time::Duration;

use tokio::time::Instant;

use crate::procinfo::{self, Survivor};
use crate::signal::Signal;
use crate::{Init, Pid};

/// Sends `sig` to every member of group `pgid`. Returns `Ok(false)` when the
/// group has no member left (`ESRCH`).
pub fn signal_group(pgid: Pid, sig: Signal) -> io::Result<bool> {
    match crate::sys::kill(-pgid.0, sig.as_raw()) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(nix::libc::ESRCH) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether group `pgid` still has a member (a zombie counts).
pub fn group_exists(pgid: Pid) -> bool {
    match crate::sys::kill(-pgid.0, 0) {
        Ok(()) => true,
        // EPERM: a member exists that we may not signal.
        Err(e) => e.raw_os_error() != Some(nix::libc::ESRCH),
    }
}

/// One step of an [escalation](Init::escalate): send `signal` to the group,
/// then wait up to `wait` for its death. A zero `wait` sends and checks once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The signal to send.
    pub signal: Signal,
    /// How long to wait for death after sending it.
    pub wait: Duration,
}

impl Step {
    /// Send `signal`, then wait up to `wait` for death.
    pub fn new(signal: Signal, wait: Duration) -> Step {
        Step { signal, wait }
    }
}

/// Which part of a death an escalation is waiting for; reported to its caller
/// as it changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeathWait {
    /// The group's leader (the job's direct child) has not been reaped yet.
    Exiting,
    /// The leader has been reaped; other members of the group remain.
    Draining,
}

/// The members of a group found alive when a step's wait ran out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Survived {
    /// The signal of that step.
    pub after: Signal,
    /// The members then alive, with their /proc diagnostics (empty when none
    /// could be read, e.g. only an unreaped leader that left the group).
    pub members: Vec<Survivor>,
}

/// How an [escalation](Init::escalate) ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Escalation {
    /// Death was observed: the leader reaped and the group empty.
    pub dead: bool,
    /// The group was already dead before the first step: nothing was sent.
    pub already_dead: bool,
    /// The signal of the last step that ran (`kill(2)` succeeded or found the
    /// group already empty); `None` when no step ran.
    pub last_signal: Option<Signal>,
    /// A step after the first ran, because the group outlived the wait of the
    /// one before it (ASSURED sent its SIGKILL).
    pub escalated: bool,
    /// For each step whose wait ran out with the group alive: who was alive.
    pub survived: Vec<Survived>,
}

/// Sending a step's signal failed (other than finding the group empty).
#[derive(Debug, thiserror::Error)]
#[error("sending {signal} to process group {pgid}: {source}")]
pub struct SignalError {
    /// The group.
    pub pgid: Pid,
    /// The signal.
    pub signal: Signal,
    /// What `kill(2)` said (`EPERM`: no member may be signalled by us).
    #[source]
    pub source: io::Error,
}

/// One group's progress through an escalation.
pub(crate) struct Tracked {
    pub(crate) pgid: Pid,
    pub(crate) outcome: Escalation,
    /// The send that stopped this group's escalation, if one failed.
    pub(crate) error: Option<SignalError>,
}

impl Tracked {
    /// Still to be signalled and waited for.
    fn pending(&self) -> bool {
        !self.outcome.dead && self.error.is_none()
    }
}

/// Where a group stands, from the reaper's registry and the kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Standing {
    Exiting,
    Draining,
    Dead,
}

impl Init {
    /// Signals process group `pgid` step by step until death is observed,
    /// and reports what it took.
    ///
    /// `pgid` is a job's group: its leader is the job's direct child
    /// (started by [`Init::spawn`], registered with the reaper). Dead means
    /// the leader has been reaped **and** the group is empty; a group that is
    /// already dead is reported as such (`already_dead`) and sent nothing.
    /// Otherwise each step sends its signal to the whole group and waits up
    /// to its `wait` for death; the next step runs only if the group outlived
    /// that wait. So `[(TERM, t)]` is a plain kill, `[(TERM, t), (KILL, t)]`
    /// is ASSURED (KILL only if something survived TERM), and a zero wait
    /// sends and checks once without waiting. The waits are woken by the
    /// reaper (`Init::wait_until`); no extra polling.
    ///
    /// `on_wait` is told what the wait is waiting for whenever that changes:
    /// [`DeathWait::Exiting`] while the leader is unreaped, then
    /// [`DeathWait::Draining`] while other members remain.
    ///
    /// Cancel by dropping the future (e.g. in `tokio::select!` against a
    /// cancellation token): it holds no lock and no resource across an
    /// `.await`, so dropping it mid-wait only stops the waiting; signals
    /// already sent stay sent, and nothing else changes.
    ///
    /// Fails only when sending a signal fails for another reason than an
    /// empty group (`EPERM`); the escalation stops there.
    pub async fn escalate(
        &self,
        pgid: Pid,
        steps: &[Step],
        on_wait: impl FnMut(DeathWait),
    ) -> Result<Escalation, SignalError> {
        let mut tracked = self.escalate_groups(&[pgid], steps, on_wait).await;
        match tracked.pop() {
            Some(Tracked { error: Some(e), .. }) => Err(e),
            Some(t) => Ok(t.outcome),
            None => Ok(Escalation::default()),
        }
    }

    /// [`Init::escalate`] for a terminal job, whose child leads
    /// session `sid` as well as group `sid`: every step signals group `sid`
    /// and every other group of the session found when the escalation
    /// starts (the jobs of a job-control shell, `bash -i`, each in a group
    /// of its own), and dead means all of them are, as observed for a group.
    /// The outcome is group `sid`'s, with the other groups' survivors added
    /// to its step's survivors.
    pub async fn escalate_session(
        &self,
        sid: Pid,
        steps: &[Step],
        on_wait: impl FnMut(DeathWait),
    ) -> Result<Escalation, SignalError> {
        let mut groups = vec![sid];
        groups.extend(procinfo::session_groups(sid.0).into_iter().map(Pid));
        let mut tracked = self
            .escalate_groups(&groups, steps, on_wait)
            .await
            .into_iter();
        let Some(leader) = tracked.next() else {
            return Ok(Escalation::default());
        };
        if let Some(e) = leader.error {
            return Err(e);
        }
        let mut outcome = leader.outcome;
        for other in tracked {
            outcome.dead &= other.outcome.dead || other.error.is_some();
            outcome.already_dead &= other.outcome.already_dead;
            outcome.escalated |= other.outcome.escalated;
            for s in other.outcome.survived {
                match outcome.survived.iter_mut().find(|m| m.after == s.after) {
                    Some(mine) => mine.members.extend(s.members),
                    None => outcome.survived.push(s),
                }
            }
        }
        Ok(outcome)
    }

    /// [`Init::escalate`] for many groups at once: each step signals every
    /// group still alive, then one shared wait runs until all are dead or the
    /// step's time is up. `on_wait` reports [`DeathWait::Exiting`] while any
    /// leader is unreaped. Returns one entry per group, in order.
    pub(crate) async fn escalate_groups(
        &self,
        groups: &[Pid],
        steps: &[Step],
        mut on_wait: impl FnMut(DeathWait),
    ) -> Vec<Tracked> {
        let mut tracked: Vec<Tracked> = groups
            .iter()
            .map(|&pgid| {
                let dead = self.standing(pgid) == Standing::Dead;
                Tracked {
                    pgid,
                    outcome: Escalation {
                        dead,
                        already_dead: dead,
                        ..Escalation::default()
                    },
                    error: None,
                }
            })
            .collect();
        let mut reported = None;
        for (i, step) in steps.iter().enumerate() {
            if !tracked.iter().any(Tracked::pending) {
                break;
            }
            for t in tracked.iter_mut().filter(|t| t.pending()) {
                match signal_group(t.pgid, step.signal) {
                    Ok(alive) => {
                        if alive && step.signal == Signal::TERM {
                            // A stopped member keeps TERM pending until it
                            // is continued: without CONT a job that stopped
                            // itself (SIGSTOP) would sit out the whole wait
                            // and need KILL (systemd's SendSIGCONT).
                            let _ = signal_group(t.pgid, Signal::CONT);
                        }
                        t.outcome.last_signal = Some(step.signal);
                        t.outcome.escalated |= i > 0;
                    }
                    Err(source) => {
                        t.error = Some(SignalError {
                            pgid: t.pgid,
                            signal: step.signal,
                            source,
                        });
                    }
                }
            }
            let mut alive: Vec<Pid> = tracked
                .iter()
                .filter(|t| t.pending())
                .map(|t| t.pgid)
                .collect();
            self.wait_until(Instant::now() + step.wait, || {
                let mut exiting = false;
                alive.retain(|&g| match self.standing(g) {
                    Standing::Exiting => {
                        exiting = true;
                        true
                    }
                    Standing::Draining => true,
                    Standing::Dead => false,
                });
                let awaited = if exiting {
                    DeathWait::Exiting
                } else {
                    DeathWait::Draining
                };
                if !alive.is_empty() && reported != Some(awaited) {
                    reported = Some(awaited);
                    on_wait(awaited);
                }
                alive.is_empty()
            })
            .await;
            for t in tracked.iter_mut().filter(|t| t.pending()) {
                // Checked again: the last check may be a nap old.
                if self.standing(t.pgid) == Standing::Dead {
                    t.outcome.dead = true;
                } else {
                    t.outcome.survived.push(Survived {
                        after: step.signal,
                        members: procinfo::group_members(t.pgid.0),
                    });
                }
            }
        }
        tracked
    }

    /// Where group `pgid` stands. The registry is asked first: a leader that
    /// is still registered is alive (or an unreaped zombie) whatever the
    /// group looks like.
    fn standing(&self, pgid: Pid) -> Standing {
        if self.shared.reaper.is_unreaped(pgid.0) {
            Standing::Exiting
        } else if group_exists(pgid) {
            Standing::Draining
        } else {
            Standing::Dead
        }
    }

    /// Waits until group `pgid` is empty or `timeout` passes; returns whether
    /// it is empty. (Used by the init-probe; the server uses
    /// [`Init::escalate`], which also requires the leader to be reaped.)
    #[doc(hidden)]
    pub async fn wait_group_empty(&self, pgid: Pid, timeout: Duration) -> bool {
        self.wait_until(Instant::now() + timeout, || !group_exists(pgid))
            .await
    }

    /// Waits until `done()` holds or `deadline` passes; returns the last
    /// answer of `done()`.
    ///
    /// Re-checks on every reap sweep: the usual way a process goes is that
    /// we reap it, as its parent, subreaper or init. A process can also go
    /// without any event we see (`setsid`, or reaped by a parent outside
    /// the group), so a backing-off re-check (1 ms doubling to 200 ms) covers
    /// those cases.
    ///
    /// Dropping the future mid-wait is harmless: it holds only a watch
    /// receiver and a timer.
    pub(crate) async fn wait_until(
        &self,
        deadline: Instant,
        mut done: impl FnMut() -> bool,
    ) -> bool {
        const FALLBACK_MAX: Duration = Duration::from_millis(200);
        let mut reaped = self.shared.reaper.subscribe();
        let mut fallback = Duration::from_millis(1);
        loop {
            // Mark the current generation seen *before* checking, so a reap
            // that happens after the check still wakes us.
            reaped.borrow_and_update();
            if done() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let nap = (now + fallback).min(deadline);
            tokio::select! {
                changed = reaped.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep_until(nap).await;
                    }
                }
                () = tokio::time::sleep_until(nap) => {
                    fallback = (fallback * 2).min(FALLBACK_MAX);
                }
            }
        }
    }
}
