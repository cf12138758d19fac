//! `follow`: a job's life as a stream of events, for a
//! front-end that owns a stream (`POST /exec`, sandboxd, envd), through
//! [`Jobs::stream`].
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
//! an event, so [`Jobs::stream`] `select!`s it against the keep-alive
//! timer and the client's disconnection. `next` is private to `jobs`: a
//! front-end hands its follow to [`Jobs::stream`], the one loop. Output that the job's window
//! dropped before it was read (a slow client and a small window) is
//! skipped: the next event's offset shows the gap.

use crate::capture::{Slice, StreamSpec, Window};

use super::result::{Fields, JobResult, View};
use super::table::{Check, Claim, Job, Waiter};
use super::{JobId, Jobs, Owner, Stream};

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
    /// New output as raw bytes ([`Follow::raw_bytes`]: a front-end whose
    /// wire carries bytes, such as envd's `DataEvent`).
    Bytes {
        /// Which stream.
        stream: Stream,
        /// Absolute offset of `data[0]` (after a gap, the first byte still
        /// held).
        offset: u64,
        /// The bytes, exactly as written.
        data: Vec<u8>,
    },
    /// It is terminal: its result, delivered here.
    Exit(Box<Job>),
}

/// The next chunk of output, as the follow renders it.
enum Out {
    /// Sliced (UTF-8-sanitised, redacted per the view).
    Slice(Slice),
    /// Raw bytes from an offset.
    Raw(u64, Vec<u8>),
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
    raw: bool,
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
            raw: false,
        }
    }
}

impl Follow<'_> {
    /// Output comes as [`Event::Bytes`], the raw bytes, instead of
    /// [`Event::Output`] slices — unless the view redacts: raw bytes cannot
    /// be redacted, so a redacting follow keeps its slices.
    #[must_use]
    pub fn raw_bytes(mut self) -> Self {
        self.raw = self.view.redact.is_none();
        self
    }
}

/// What one look at the job saw.
struct Seen {
    queued: bool,
    pid: Option<init::Pid>,
    terminal: bool,
    /// The next output event's stream and chunk, when that is the next
    /// event (sliced, and redacted, only then).
    output: Option<(Stream, Out)>,
}

impl Follow<'_> {
    /// The next event; `None` when there are no more.
    pub(super) async fn next(&mut self) -> Option<Event> {
        if self.ended {
            return None;
        }
        let table = &self.jobs.shared.table;
        table
            .wait_for(true, || {
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
                match seen.output {
                    Some((stream, Out::Slice(slice))) => {
                        self.offsets[usize::from(stream == Stream::Stderr)] =
                            slice.offset + slice.bytes;
                        return Check::Done(Some(Event::Output { stream, slice }));
                    }
                    Some((stream, Out::Raw(offset, data))) => {
                        self.offsets[usize::from(stream == Stream::Stderr)] =
                            offset + data.len() as u64;
                        return Check::Done(Some(Event::Bytes {
                            stream,
                            offset,
                            data,
                        }));
                    }
                    None => {}
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
        let raw = |w: &Window, from: u64| {
            // Bytes the window dropped are skipped: the offset shows it.
            let from = from.max(w.dropped());
            (from < w.total()).then(|| Out::Raw(from, w.raw(from, self.chunk)))
        };
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
                    if self.raw {
                        return raw(w, self.offsets[i]).map(|o| (stream, o));
                    }
                    next(w, self.offsets[i])
                        .filter(|s| s.bytes > 0)
                        .map(|s| (stream, Out::Slice(s)))
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

/// One event of a job followed raw ([`Jobs::follow_raw`]).
#[derive(Debug)]
pub enum RawEvent {
    /// Bytes of stdout, exactly as written, starting at `offset`.
    Output {
        /// Absolute offset of `data[0]`.
        offset: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// Bytes `[from, to)` of stdout are gone: the window dropped them
    /// before they were read (or the result was delivered before they
    /// were). The next output starts at `to`.
    Gap {
        /// The first byte missed.
        from: u64,
        /// The first byte not missed.
        to: u64,
    },
    /// The job is terminal (the last event).
    End(Box<JobEnd>),
}

/// How a job that was followed raw ended.
#[derive(Debug)]
pub struct JobEnd {
    /// Its result without streams (timing only while the job was still in
    /// the table: a result delivered already shows its status and cause).
    pub result: JobResult,
    /// Who receives (or received) the result.
    pub owner: Owner,
    /// The owner has taken the result already.
    pub delivered: bool,
    /// Bytes it wrote to stdout in all.
    pub stdout_bytes: u64,
}

/// Why a job cannot be followed raw from where asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RawFollowError {
    /// No such job (never existed, or delivered already).
    #[error("unknown job")]
    Unknown,
    /// The offset is past what the job wrote so far.
    #[error("the job has written {total} bytes so far")]
    Ahead {
        /// Bytes written so far.
        total: u64,
    },
}

/// A job followed raw, without taking its result ([`Jobs::follow_raw`]).
pub struct RawFollow<'a> {
    jobs: &'a Jobs,
    id: JobId,
    fields: Fields,
    chunk: u64,
    offset: u64,
    ended: bool,
    /// Keeps the job's [`Gone`](super::table::Gone) record if its owner
    /// takes the result while this follows it.
    _waiter: Waiter<'a>,
}

impl Jobs {
    /// Follows job `id`'s stdout from byte `from`, as raw bytes in chunks of
    /// at most `chunk`, for a front-end that observes a job it does not own
    /// (terminal attach): it never takes the result; its last event
    /// says how the job ended and who holds the result (`fields` say which
    /// fields show). Nothing is skipped silently: bytes the window no longer
    /// holds are a [`RawEvent::Gap`]; a `from` past what the job wrote so far
    /// is refused, not waited for.
    ///
    /// `next` is cancel-safe, as [`Follow::next`] is.
    pub fn follow_raw(
        &self,
        id: JobId,
        from: u64,
        chunk: u64,
        fields: Fields,
    ) -> Result<RawFollow<'_>, RawFollowError> {
        let table = &self.shared.table;
        let waiter = table
            .register_waiter(&[id])
            .map_err(|_| RawFollowError::Unknown)?;
        let total = table
            .with(id, |j| j.stdout.total())
            .ok_or(RawFollowError::Unknown)?;
        if from > total {
            return Err(RawFollowError::Ahead { total });
        }
        Ok(RawFollow {
            jobs: self,
            id,
            fields,
            chunk: chunk.max(1),
            offset: from,
            ended: false,
            _waiter: waiter,
        })
    }
}

impl RawFollow<'_> {
    /// The next event; `None` after the end (or when the job left the table
    /// without a result: torn down).
    pub async fn next(&mut self) -> Option<RawEvent> {
        if self.ended {
            return None;
        }
        let table = &self.jobs.shared.table;
        let view = View {
            fields: self.fields,
            redact: None,
        };
        table
            .wait_for(true, || {
                let look = table.with(self.id, |j| {
                    let w = &j.stdout;
                    if self.offset < w.dropped() {
                        return Check::Done(Some(RawEvent::Gap {
                            from: self.offset,
                            to: w.dropped(),
                        }));
                    }
                    if self.offset < w.total() {
                        let data = w.raw(self.offset, self.chunk);
                        return Check::Done(Some(RawEvent::Output {
                            offset: self.offset,
                            data,
                        }));
                    }
                    if !j.state.is_terminal() {
                        return Check::AGAIN;
                    }
                    let none = StreamSpec::None;
                    Check::Done(Some(RawEvent::End(Box::new(JobEnd {
                        result: JobResult::with_streams(j, &none, &none, &view),
                        owner: j.owner,
                        delivered: false,
                        stdout_bytes: w.total(),
                    }))))
                });
                let look = look.unwrap_or_else(|| {
                    // Left the table: delivered (a record), or torn down.
                    Check::Done(table.gone(self.id).map(|g| {
                        if self.offset < g.stdout_bytes {
                            return RawEvent::Gap {
                                from: self.offset,
                                to: g.stdout_bytes,
                            };
                        }
                        RawEvent::End(Box::new(JobEnd {
                            result: JobResult::gone(&g, self.fields),
                            owner: g.owner,
                            delivered: true,
                            stdout_bytes: g.stdout_bytes,
                        }))
                    }))
                });
                match &look {
                    Check::Done(Some(RawEvent::Output { offset, data })) => {
                        self.offset = offset + data.len() as u64;
                    }
                    Check::Done(Some(RawEvent::Gap { to, .. })) => self.offset = *to,
                    Check::Done(Some(RawEvent::End(_)) | None) => self.ended = true,
                    Check::Wait { .. } => {}
                }
                look
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    //! `raw_bytes` and `find`, on a table whose jobs are started, fed and
    //! ended by hand (no process).

    use std::time::Duration;

    use init::{Pid, SpawnSpec};

    use super::*;
    use crate::capture::CapturePolicy;
    use crate::jobs::JobsSettings;
    use crate::jobs::state::{ExitOutcome, Pending};

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

    /// A running job with a `window`-byte window per stream, its process `pid`.
    fn start(jobs: &Jobs, window: usize, pid: i32, label: &str) -> JobId {
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
        let job = Job::queued(
            id,
            pending,
            CapturePolicy::default(),
            Some(label.into()),
            window,
        );
        assert_eq!(table.submit(job).map(|a| a.len()), Ok(1));
        assert!(table.started(id, Pid(pid), None, None));
        id
    }

    #[tokio::test]
    async fn raw_bytes_gives_each_streams_bytes_unsanitised_from_the_first_held_one_then_the_result()
     {
        let jobs = service();
        let table = &jobs.shared.table;
        let id = start(&jobs, 8, 300_000, "x");
        assert!(table.push_output(id, Stream::Stdout, b"0123456789\xff"));
        assert!(table.push_output(id, Stream::Stderr, b"e\xfe"));
        let view = View {
            fields: Fields::PartTwo,
            redact: None,
        };
        let mut follow = jobs.follow(id, 0, 4, view).raw_bytes();
        assert!(matches!(
            follow.next().await,
            Some(Event::Started { pid: Pid(300_000) })
        ));
        let mut out = Vec::new();
        let mut err = Vec::new();
        assert!(table.set_terminal(id, ExitOutcome::Exited(3)));
        loop {
            match follow.next().await {
                Some(Event::Bytes {
                    stream: Stream::Stdout,
                    offset,
                    data,
                }) => {
                    assert_eq!(offset, 3 + out.len() as u64, "from the first byte held");
                    assert!(data.len() <= 4);
                    out.extend(data);
                }
                Some(Event::Bytes {
                    stream: Stream::Stderr,
                    data,
                    ..
                }) => err.extend(data),
                Some(Event::Exit(job)) => {
                    assert_eq!(job.phase(), super::super::JobPhase::Exited(3));
                    break;
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(out, b"3456789\xff");
        assert_eq!(err, b"e\xfe");
        assert!(follow.next().await.is_none());
        assert!(matches!(jobs.deliver(id), Claim::Unknown), "delivered once");
    }

    #[test]
    fn find_names_the_newest_job_its_listing_entry_matches() {
        let jobs = service();
        let a = start(&jobs, 8, 300_001, "web");
        let b = start(&jobs, 8, 300_002, "web");
        assert_eq!(
            jobs.find(|l| l.label.as_deref() == Some("web"))
                .map(|l| l.id),
            Some(b)
        );
        let by_pid = jobs.find(|l| l.pid == Some(Pid(300_001))).unwrap();
        assert_eq!(
            (by_pid.id, by_pid.phase),
            (a, super::super::JobPhase::Running)
        );
        assert!(jobs.find(|l| l.pid == Some(Pid(1))).is_none());
    }
}
