//! `follow`: a job's life as a stream of events (SPEC §11.2, §18), for a
//! front-end that owns a stream (`POST /exec`; later gRPC and Connect).
//!
//! [`Follow::next`] gives, in order: [`Event::Queued`] when the job had to
//! wait for capacity, [`Event::Started`] once it has a process,
//! [`Event::Output`] for each new chunk of either stream (redacted as the
//! view says, at most the chunk size the caller chose, never splitting a
//! UTF-8 character and, with redaction on, never showing the newest bytes
//! that later output could still turn into a secret until the job is
//! terminal: capture's "The live edge"), and last [`Event::Exit`] with
//! the job itself, claimed — the stream that owns a job is its one
//! deliverer. `None` after the exit, or when the job left the table some
//! other way (torn down at shutdown: nothing to deliver).
//!
//! `next` is cancel-safe: its state changes only in the step that returns
//! an event, so a front-end may `select!` it against its own keep-alive
//! timer and its client's disconnection. Output that the job's window
//! dropped before it was read (a slow client and a small window) is
//! skipped: the next event's offset shows the gap.

use crate::capture::{Slice, StreamSpec, Window};

use super::result::View;
use super::table::{Check, Claim, Job};
use super::{JobId, Jobs, Stream};

/// One event of a followed job.
#[derive(Debug)]
pub enum Event {
    /// It waits for capacity (first, only when it had to wait).
    Queued,
    /// It has a process.
    Started {
        /// Its pid (which is its process group).
        pid: init::Pid,
    },
    /// New output.
    Output {
        /// Which stream.
        stream: Stream,
        /// The chunk, at raw offsets, redacted per the view.
        slice: Slice,
    },
    /// It is terminal: its result, delivered here.
    Exit(Box<Job>),
}

/// A followed job ([`Jobs::follow`]).
pub struct Follow<'a> {
    jobs: &'a Jobs,
    id: JobId,
    view: View<'a>,
    chunk: u64,
    offsets: [u64; 2],
    queued_seen: bool,
    started_seen: bool,
    ended: bool,
}

impl Jobs {
    /// Follows job `id` from byte `from` of both streams, in chunks of at
    /// most `chunk` bytes, rendered as `view` says.
    pub fn follow<'a>(&'a self, id: JobId, from: u64, chunk: u64, view: View<'a>) -> Follow<'a> {
        Follow {
            jobs: self,
            id,
            view,
            chunk: chunk.max(1),
            offsets: [from; 2],
            queued_seen: false,
            started_seen: false,
            ended: false,
        }
    }
}

/// What one look at the job saw.
struct Seen {
    queued: bool,
    pid: Option<init::Pid>,
    terminal: bool,
    /// The next output event's stream and slice, when that is the next
    /// event (sliced, and redacted, only then).
    output: Option<(Stream, Slice)>,
}

impl Follow<'_> {
    /// The next event; `None` when there are no more.
    pub async fn next(&mut self) -> Option<Event> {
        if self.ended {
            return None;
        }
        let table = &self.jobs.shared.table;
        table
            .watch(true, || {
                let Some(seen) = table.with(self.id, |j| self.look(j)) else {
                    self.ended = true;
                    return Check::Done(None);
                };
                if !self.queued_seen {
                    self.queued_seen = true;
                    if seen.queued {
                        return Check::Done(Some(Event::Queued));
                    }
                }
                if let (false, Some(pid)) = (self.started_seen, seen.pid) {
                    self.started_seen = true;
                    return Check::Done(Some(Event::Started { pid }));
                }
                if let Some((stream, slice)) = seen.output {
                    self.offsets[usize::from(stream == Stream::Stderr)] =
                        slice.offset + slice.bytes;
                    return Check::Done(Some(Event::Output { stream, slice }));
                }
                if !seen.terminal {
                    return Check::AGAIN;
                }
                self.ended = true;
                match table.claim(self.id) {
                    Claim::Delivered(job) => Check::Done(Some(Event::Exit(job))),
                    // Removed by a teardown: nothing to deliver.
                    Claim::Unknown | Claim::Running => Check::Done(None),
                }
            })
            .await
    }

    /// The job's start, its waiting, and — when no `Queued` or `Started`
    /// comes first — the next chunk of output (stdout before stderr), so
    /// that each chunk is sliced and redacted once, when it is sent.
    fn look(&self, job: &Job) -> Seen {
        let terminal = job.state.is_terminal();
        let queued = job.queued_at.is_some();
        let pid = job.state.pgid();
        let announces = (!self.queued_seen && queued) || (!self.started_seen && pid.is_some());
        let redact = self.view.redact.map(|r| r as &dyn crate::capture::Redact);
        let next = |w: &Window, from: u64| {
            if from >= w.total() {
                return None;
            }
            let spec = |unaligned| StreamSpec::From {
                from,
                length: Some(self.chunk),
                unaligned,
            };
            if terminal {
                match w.slice_with(&spec(false), redact) {
                    // Only an incomplete character is left: send it as it is.
                    Some(s) if s.bytes == 0 => w.slice_with(&spec(true), redact),
                    other => other,
                }
            } else {
                // Stops before an incomplete character and before what could
                // still begin a secret: the rest waits for more output.
                w.slice_live(&spec(false), redact)
            }
        };
        let output = if announces {
            None
        } else {
            [(Stream::Stdout, &job.stdout), (Stream::Stderr, &job.stderr)]
                .into_iter()
                .enumerate()
                .find_map(|(i, (stream, w))| {
                    next(w, self.offsets[i])
                        .filter(|s| s.bytes > 0)
                        .map(|s| (stream, s))
                })
        };
        Seen {
            queued,
            pid,
            terminal,
            output,
        }
    }
}
