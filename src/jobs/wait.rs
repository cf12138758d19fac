//! `wait_any`: until any listed job is terminal (SPEC §4.3), prints what
//! the caller waits for, or goes quiet (SPEC §12.9), or the deadline.
//!
//! Terminal jobs are claimed in one critical section
//! ([`super::table::JobTable::claim_terminal_among`]): the answer delivers
//! each of them here and nowhere else. `until` adds two more reasons to
//! return, neither of which delivers anything: a listed job still running
//! whose retained output at or after byte `from` matches `pattern` (matched
//! on the text the caller would see, redacted when redaction is on, so a
//! pattern cannot probe a secret), or a listed job that has written nothing
//! for `quiet`.
//!
//! A job that the call listed and another request (a `kill`, another
//! `wait`) took while the call waited is answered as
//! [`WaitEntry::Elsewhere`] with how it ended (SPEC §4.8a); a job unknown
//! when the call starts fails the whole call.

use std::collections::HashMap;
use std::time::Duration;

use regex::bytes::Regex;
use tokio::time::Instant;

use super::table::{Check, Gone, Job, Listed, TableEntry};
use super::{JobId, Jobs, Owner, Stream, TaskTag};
use crate::capture::Redact;

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
    /// A task owns it (SPEC §19): the task delivers it.
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
        table
            .watch(until.is_some(), || {
                let entries = match table.claim_terminal_among(ids) {
                    Ok(entries) => entries,
                    Err(missing) => return Check::Done(Err(WaitError::Unknown(missing))),
                };
                let done = entries.iter().any(|e| !matches!(e, TableEntry::Pending(_)));
                let (triggers, next_quiet) = match (until, done) {
                    (Some(u), false) => self.triggers(ids, u, redact),
                    _ => (HashMap::new(), None),
                };
                let timed_out = deadline.is_some_and(|d| Instant::now() >= d);
                if done || !triggers.is_empty() || timed_out {
                    return Check::Done(Ok(entries
                        .into_iter()
                        .map(|e| match e {
                            TableEntry::Delivered(job) => WaitEntry::Delivered(job),
                            TableEntry::Repeat(l) => WaitEntry::Repeat(l),
                            TableEntry::Elsewhere(g) => WaitEntry::Elsewhere(g),
                            TableEntry::Pending(l) => {
                                let trigger = triggers.get(&l.id).copied();
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

    /// Which listed running jobs trigger `until` now, and when the next one
    /// could go quiet.
    fn triggers(
        &self,
        ids: &[JobId],
        until: &Until,
        redact: Option<&(dyn Redact + Sync)>,
    ) -> (HashMap<JobId, Trigger>, Option<Instant>) {
        let table = &self.shared.table;
        let mut triggers = HashMap::new();
        let mut next_quiet: Option<Instant> = None;
        let now = Instant::now();
        for &id in ids {
            if triggers.contains_key(&id) {
                continue;
            }
            let found = table.with(id, |job| {
                if job.state.is_queued() {
                    return (None, None);
                }
                if let Some(pattern) = &until.pattern {
                    for &stream in until.streams {
                        let window = match stream {
                            Stream::Stdout => &job.stdout,
                            Stream::Stderr => &job.stderr,
                        };
                        let (start, raw) = window.retained_from(until.from);
                        // With redaction on, offsets count redacted text
                        // after `start`.
                        let redacted;
                        let bytes: &[u8] = match redact {
                            Some(r) => {
                                redacted = r.redact(&raw, 0..raw.len()).0;
                                redacted.as_bytes()
                            }
                            None => &raw,
                        };
                        if let Some(m) = pattern.find(bytes) {
                            let matched = Matched {
                                stream,
                                offset: start + m.start() as u64,
                                bytes: (m.end() - m.start()) as u64,
                            };
                            return (Some(Trigger::Matched(matched)), None);
                        }
                    }
                }
                if let Some(quiet) = until.quiet {
                    let silent = now.saturating_duration_since(job.last_output);
                    if silent >= quiet {
                        return (Some(Trigger::WentQuiet(silent)), None);
                    }
                    return (None, Some(job.last_output + quiet));
                }
                (None, None)
            });
            if let Some((trigger, quiet_at)) = found {
                if let Some(t) = trigger {
                    triggers.insert(id, t);
                }
                if let Some(q) = quiet_at {
                    next_quiet = Some(next_quiet.map_or(q, |n| n.min(q)));
                }
            }
        }
        (triggers, next_quiet)
    }
}
