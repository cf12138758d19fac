//! `wait_any`: until any listed job is terminal, prints what the caller
//! waits for, goes quiet, awaits input, listens on a port, or the
//! deadline.
//!
//! Terminal jobs are claimed in one critical section
//! ([`super::table::JobTable::claim_terminal_among`]): the answer delivers
//! each of them here and nowhere else. `until` adds three more reasons to
//! return, none of which delivers anything: a listed job still running
//! whose retained output at or after byte `from` matches `pattern` (with
//! redaction on, the pattern sees exactly what `output` would show of those
//! bytes: redacted with context on both sides, so a `from` inside a secret
//! shows the rest of it masked, not as text to probe a character at a time,
//! and ending before what could still begin a secret — capture's "The live
//! edge"), a listed job that has written nothing
//! for `quiet`, or (`input`) a listed job blocked reading its stdin or
//! terminal ([`super::awaiting`]). The entry of each job that triggered
//! says which condition it met; every condition met in the same look is
//! reported.
//!
//! Awaiting input has no event of its own: while a listed job is silent
//! and not reading, the one wait loop ([`super::table::JobTable::wait_for`])
//! looks again on a bounded backoff (5 ms doubling to 100 ms, from
//! [`super::awaiting`]), restarted by the job's next output, and ends on
//! the first look that finds it reading. Other wake-ups (any job's output)
//! do not make it look sooner than its backoff says.
//!
//! Listening on a port (`until.port`) has no event either: while a listed
//! job runs, the wait looks at the listening sockets
//! ([`super::ports`]) on the same kind of backoff (5 ms doubling to
//! 50 ms, and at least 4 times the last look's duration), restarted by any
//! listed job's output, and ends on the first look
//! that finds a listed job listening on the port, over `tcp` or `tcp6`; that
//! job's entry lists its ports.
//!
//! A job that the call listed and another request (a `kill`, another
//! `wait`) took while the call waited is answered as
//! [`WaitEntry::Elsewhere`] with how it ended; a job unknown
//! when the call starts fails the whole call.

use std::collections::HashMap;
use std::time::Duration;

use regex::bytes::Regex;
use tokio::time::Instant;

use super::awaiting::{self, Awaiting};
use super::ports;
use super::table::{Check, Gone, Job, Listed, TableEntry};
use super::{JobId, Jobs, Owner, Stream, TaskTag};
use crate::capture::{Redact, StreamSpec};

/// What `until` asks for.
#[derive(Debug)]
pub struct Until {
    /// Return when this matches a listed running job's output.
    pub pattern: Option<Regex>,
    /// The streams the pattern looks at.
    pub streams: &'static [Stream],
    /// The byte offset the pattern looks from.
    pub from: u64,
    /// Return when a listed job has written nothing for this long.
    pub quiet: Option<Duration>,
    /// Return when a listed job is blocked reading its stdin or terminal.
    pub input: bool,
    /// Return when a listed job listens on this TCP port.
    pub port: Option<u16>,
}

/// Where a pattern matched, in the raw stream.
#[derive(Debug, Clone, Copy)]
pub struct Matched {
    /// The stream.
    pub stream: Stream,
    /// Where the match starts.
    pub offset: u64,
    /// Its length.
    pub bytes: u64,
}

/// Why a running job ends the wait.
#[derive(Debug, Clone, Copy)]
pub enum Trigger {
    /// Its output matched.
    Matched(Matched),
    /// It has written nothing for this long.
    WentQuiet(Duration),
    /// It is blocked reading its stdin or terminal.
    AwaitingInput,
    /// It listens on the port `until` named (its entry lists its ports).
    Listening,
}

/// When a `wait` until a port looks at `/proc` again: a `listen()` makes no
/// event, so on a backoff, restarted by a listed job's output (a server
/// usually says it listens right after it does).
#[derive(Debug)]
struct PortLook {
    /// Not before then.
    at: Instant,
    /// The pause after the next look that finds nothing.
    pause: Duration,
    /// The listed jobs' `last_output` at the last look.
    outputs: Vec<Instant>,
}

/// When a `wait` looks again at a silent job that was not reading: the
/// backoff, restarted by the job's output.
#[derive(Debug, Clone, Copy)]
struct Relook {
    /// The job's `last_output` when the backoff started.
    since: Instant,
    /// Not before then.
    at: Instant,
    /// The pause after the next look that finds it not reading.
    pause: Duration,
}

/// One entry of a `wait_any` answer, in the order of the ids asked for.
#[derive(Debug)]
pub enum WaitEntry {
    /// Terminal and delivered here.
    Delivered(Box<Job>),
    /// A later duplicate of an id delivered earlier in the same answer.
    Repeat(Listed),
    /// Its result was taken by another request while this one waited.
    Elsewhere(Gone),
    /// Still queued or running; with what made it end the wait, if it did.
    Pending(Listed, Option<Trigger>),
}

/// Why a wait was refused.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// No such job (never existed, or delivered before the call).
    #[error("unknown job {0}")]
    Unknown(JobId),
    /// A `POST /exec` stream owns it: only its stream delivers it.
    #[error("{0} is owned by an /exec stream")]
    OwnedByStream(JobId),
    /// A task owns it: the task delivers it.
    #[error("{0} is owned by task {1}")]
    OwnedByTask(JobId, TaskTag),
}

impl Jobs {
    /// Waits until one of `ids` is terminal (then claims every terminal one),
    /// an `until` trigger fires, or `deadline` (`None`: no deadline; a past
    /// one polls once). `redact` masks what `until`'s pattern sees. Cancel
    /// by dropping the future.
    pub async fn wait_any(
        &self,
        ids: &[JobId],
        deadline: Option<Instant>,
        until: Option<&Until>,
        redact: Option<&(dyn Redact + Sync)>,
    ) -> Result<Vec<WaitEntry>, WaitError> {
        let table = &self.shared.table;
        // Ownership is fixed at launch, so checking once is enough.
        match table.owned_among(ids) {
            Some((id, Owner::Task(task))) => return Err(WaitError::OwnedByTask(id, task)),
            Some((id, _)) => return Err(WaitError::OwnedByStream(id)),
            None => {}
        }
        let _waiter = table.register_waiter(ids).map_err(WaitError::Unknown)?;
        let mut relooks: HashMap<JobId, Relook> = HashMap::new();
        let mut port_look: Option<PortLook> = None;
        table
            .wait_for(until.is_some(), || {
                let entries = match table.claim_terminal_among(ids) {
                    Ok(entries) => entries,
                    Err(missing) => return Check::Done(Err(WaitError::Unknown(missing))),
                };
                let done = entries.iter().any(|e| !matches!(e, TableEntry::Pending(_)));
                let (mut triggers, mut next_quiet) = match (until, done) {
                    (Some(u), false) => self.triggers(ids, u, redact, &mut relooks),
                    _ => (HashMap::new(), None),
                };
                let mut listening = HashMap::new();
                if let (Some(port), false) = (until.and_then(|u| u.port), done) {
                    match self.port_look(ids, port, &mut port_look) {
                        Ok(found) => {
                            for (id, ports) in found {
                                triggers.entry(id).or_insert(Trigger::Listening);
                                listening.insert(id, ports);
                            }
                        }
                        Err(at) => next_quiet = Some(next_quiet.map_or(at, |n| n.min(at))),
                    }
                }
                let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
                if done || !triggers.is_empty() || timed_out {
                    return Check::Done(Ok(entries
                        .into_iter()
                        .map(|e| match e {
                            TableEntry::Delivered(job) => WaitEntry::Delivered(job),
                            TableEntry::Repeat(l) => WaitEntry::Repeat(l),
                            TableEntry::Elsewhere(g) => WaitEntry::Elsewhere(g),
                            TableEntry::Pending(mut l) => {
                                let trigger = triggers.get(&l.id).copied();
                                l.awaiting_input = matches!(trigger, Some(Trigger::AwaitingInput));
                                l.ports = listening.remove(&l.id).unwrap_or_default();
                                WaitEntry::Pending(l, trigger)
                            }
                        })
                        .collect()));
                }
                let until = match (next_quiet, deadline) {
                    (Some(q), Some(d)) => Some(q.min(d)),
                    (q, d) => q.or(d),
                };
                Check::Wait { until }
            })
            .await
    }

    /// Which listed running jobs trigger `until` now, and when to look
    /// again without an event (the next job that could go quiet, or that
    /// is due another look for input).
    fn triggers(
        &self,
        ids: &[JobId],
        until: &Until,
        redact: Option<&(dyn Redact + Sync)>,
        relooks: &mut HashMap<JobId, Relook>,
    ) -> (HashMap<JobId, Trigger>, Option<Instant>) {
        let table = &self.shared.table;
        let mut triggers = HashMap::new();
        let mut next_quiet: Option<Instant> = None;
        let mut procs = None;
        let now = Instant::now();
        for &id in ids {
            if triggers.contains_key(&id) {
                continue;
            }
            let found = table.with(id, |job| {
                if job.state.is_queued() {
                    return (None, None, None);
                }
                if let Some(pattern) = &until.pattern {
                    for &stream in until.streams {
                        let window = match stream {
                            Stream::Stdout => &job.stdout,
                            Stream::Stderr => &job.stderr,
                        };
                        // With redaction on, offsets count redacted text
                        // after `start`.
                        let (start, text) = match redact {
                            Some(r) => {
                                let spec = StreamSpec::From {
                                    from: until.from,
                                    length: None,
                                    unaligned: true,
                                };
                                match window.slice_live(&spec, Some(r)) {
                                    Some(s) => (s.offset, s.data.into_bytes()),
                                    None => continue,
                                }
                            }
                            None => window.retained_from(until.from),
                        };
                        let bytes: &[u8] = &text;
                        if let Some(m) = pattern.find(bytes) {
                            let matched = Matched {
                                stream,
                                offset: start + m.start() as u64,
                                bytes: (m.end() - m.start()) as u64,
                            };
                            return (Some(Trigger::Matched(matched)), None, None);
                        }
                    }
                }
                let running = (!job.state.is_terminal()).then_some(job.last_output);
                if let Some(quiet) = until.quiet {
                    let silent = now.saturating_duration_since(job.last_output);
                    if silent >= quiet {
                        return (Some(Trigger::WentQuiet(silent)), None, None);
                    }
                    return (None, Some(job.last_output + quiet), running);
                }
                (None, None, running)
            });
            let mut next = |at: Instant| next_quiet = Some(next_quiet.map_or(at, |n| n.min(at)));
            let Some((trigger, quiet_at, last_output)) = found else {
                continue;
            };
            if let Some(q) = quiet_at {
                next(q);
            }
            if let Some(t) = trigger {
                triggers.insert(id, t);
            } else if until.input
                && let Some(last_output) = last_output
            {
                match self.input_look(id, last_output, now, relooks, &mut procs) {
                    Ok(()) => {
                        triggers.insert(id, Trigger::AwaitingInput);
                    }
                    Err(Some(at)) => next(at),
                    Err(None) => {}
                }
            }
        }
        (triggers, next_quiet)
    }

    /// Looks for listed running jobs listening on `port`, unless the backoff
    /// says not yet: `Ok` with each such job's ports (empty: none listens),
    /// or when to look again.
    fn port_look(
        &self,
        ids: &[JobId],
        port: u16,
        look: &mut Option<PortLook>,
    ) -> Result<HashMap<JobId, Vec<super::Port>>, Instant> {
        let table = &self.shared.table;
        let running: Vec<(JobId, Instant)> = ids
            .iter()
            .filter_map(|&id| {
                table
                    .with(id, |j| {
                        (matches!(j.phase(), super::JobPhase::Running))
                            .then_some((id, j.last_output))
                    })
                    .flatten()
            })
            .collect();
        if running.is_empty() {
            // Nothing could listen yet (queued) or any more: the next
            // change (a start, an end) wakes the wait.
            *look = None;
            return Ok(HashMap::new());
        }
        let now = Instant::now();
        let outputs: Vec<Instant> = running.iter().map(|&(_, o)| o).collect();
        let pause = match look.as_ref() {
            Some(l) if l.outputs == outputs && now < l.at => return Err(l.at),
            Some(l) if l.outputs == outputs => (l.pause * 2).min(ports::LAST_RELOOK),
            _ => ports::FIRST_RELOOK,
        };
        let all = self.shared.ports();
        let took = now.elapsed();
        let found: HashMap<JobId, Vec<super::Port>> = running
            .iter()
            .filter(|&&(id, _)| all.iter().any(|p| p.job_id == Some(id) && p.port == port))
            .map(|&(id, _)| (id, ports::of(&all, id)))
            .collect();
        if !found.is_empty() {
            return Ok(found);
        }
        let pause = pause.max(took * ports::LOOK_SHARE);
        let at = Instant::now() + pause;
        *look = Some(PortLook { at, pause, outputs });
        Err(at)
    }

    /// Looks at running job `id` for input, unless its backoff says not yet:
    /// `Ok` when it is reading; else when to look again (`None`: never, it
    /// cannot await input).
    fn input_look(
        &self,
        id: JobId,
        last_output: Instant,
        now: Instant,
        relooks: &mut HashMap<JobId, Relook>,
        procs: &mut Option<awaiting::Processes>,
    ) -> Result<(), Option<Instant>> {
        let due = relooks
            .get(&id)
            .filter(|r| r.since == last_output && now < r.at);
        if let Some(r) = due {
            return Err(Some(r.at));
        }
        match self.shared.awaiting_input(id, procs) {
            Awaiting::Yes(source) => {
                tracing::debug!(job = %id, ?source, "awaiting input");
                Ok(())
            }
            Awaiting::NotBefore(at) => {
                relooks.remove(&id);
                Err(Some(at))
            }
            Awaiting::No => {
                let pause = match relooks.get(&id) {
                    Some(r) if r.since == last_output => (r.pause * 2).min(awaiting::LAST_RECHECK),
                    _ => awaiting::FIRST_RECHECK,
                };
                let at = now + pause;
                relooks.insert(
                    id,
                    Relook {
                        since: last_output,
                        at,
                        pause,
                    },
                );
                Err(Some(at))
            }
        }
    }
}
