//! The stdio transport: newline-framed JSON-RPC on stdin/stdout.
//!
//! Three pieces, started by [`start`]:
//! - a **reader thread** frames stdin into lines with [`LineSplitter`]
//!   (bounded memory) and sends them over a bounded channel, ending with
//!   [`Input::Eof`];
//! - a **writer thread** takes whole messages from the [`Outbox`] queue and
//!   writes each with its `\n` into a buffered stdout, flushing when no more
//!   are queued; lines are never interleaved or cut. It stops after
//!   [`Outbox::finish`] once everything before it is written, or when a
//!   write fails;
//! - a **watcher** thread on stdout that notices the client closing its
//!   read end (`POLLERR` on the pipe) even while nothing is being written.
//!
//! Either way of learning that stdout is broken cancels [`Stdio::broken`]:
//! the client is gone, and the server shuts down at once.
//!
//! The reader and writer are plain OS threads doing blocking I/O, not tokio
//! tasks: tokio's stdio uses its blocking pool, whose threads keep the
//! runtime alive at exit, and setting `O_NONBLOCK` on fds 0/1 would change
//! them for whoever shares the open file description (a terminal, the
//! container runtime). Both threads are started after `init::prepare`, so
//! they inherit the blocked signal mask; so does the watcher.

use std::io::{BufWriter, Read, Write};
use std::thread;

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::protocol::line::{Line, LineSplitter};
use crate::server::outbox::{self, Inbox, Outbox, Outgoing};

/// The reader's read size and the writer's buffer. Small on purpose: both
/// stay resident for the life of the server, a line longer than the writer's
/// buffer is written straight through, and a long request line just takes
/// more reads.
const IO_BUFFER: usize = 16 * 1024;

/// What the reader thread sends.
#[derive(Debug)]
pub enum Input {
    /// One framed line (or a too-long marker).
    Line(Line),
    /// stdin reached EOF (or failed).
    Eof,
}

/// The running transport.
pub struct Stdio {
    /// Framed lines from stdin.
    pub input: mpsc::Receiver<Input>,
    /// Where messages for stdout go.
    pub outbox: Outbox,
    /// Cancelled when stdout is broken (the client closed it).
    pub broken: CancellationToken,
    /// Fires when the writer has stopped: everything before
    /// [`Outbox::finish`] is written and flushed, or stdout failed.
    pub written: oneshot::Receiver<()>,
}

/// Starts the reader, the writer and the watcher.
pub fn start(max_line: usize) -> std::io::Result<Stdio> {
    let input = spawn_reader(max_line)?;
    let (outbox, inbox) = outbox::new(outbox::BUDGET);
    let broken = CancellationToken::new();
    let written = spawn_writer(inbox, broken.clone())?;
    stdout_hangup(broken.clone())?;
    Ok(Stdio {
        input,
        outbox,
        broken,
        written,
    })
}

fn spawn_reader(max_line: usize) -> std::io::Result<mpsc::Receiver<Input>> {
    let (tx, rx) = mpsc::channel(64);
    thread::Builder::new().name("stdin".into()).spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut splitter = LineSplitter::new(max_line);
        let mut buf = vec![0u8; IO_BUFFER];
        let mut send = |l: Line| {
            // The session may already be gone; then nobody cares.
            let _ = tx.blocking_send(Input::Line(l));
        };
        loop {
            match stdin.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => splitter.push(&buf[..n], &mut send),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(error = %e, "reading stdin");
                    break;
                }
            }
        }
        splitter.finish(&mut send);
        let _ = tx.blocking_send(Input::Eof);
    })?;
    Ok(rx)
}

fn spawn_writer(
    mut inbox: Inbox,
    broken: CancellationToken,
) -> std::io::Result<oneshot::Receiver<()>> {
    let (done_tx, done) = oneshot::channel();
    thread::Builder::new()
        .name("stdout".into())
        .spawn(move || {
            let mut out = BufWriter::with_capacity(IO_BUFFER, std::io::stdout().lock());
            let ok = 'write: loop {
                let Some(first) = inbox.rx.blocking_recv() else {
                    break 'write out.flush().is_ok();
                };
                let mut next = Some(first);
                while let Some(msg) = next {
                    match msg {
                        Outgoing::Message(message, permit) => {
                            let written = message
                                .write_to(&mut out)
                                .and_then(|()| out.write_all(b"\n"));
                            drop(permit);
                            if written.is_err() {
                                break 'write false;
                            }
                            // In the buffer: a flush that fails now means
                            // the client is gone and the server ends.
                            message.sent();
                        }
                        Outgoing::Finish => break 'write out.flush().is_ok(),
                    }
                    next = inbox.rx.try_recv().ok();
                }
                if out.flush().is_err() {
                    break 'write false;
                }
            };
            if !ok {
                tracing::info!("stdout is closed: the client is gone");
                broken.cancel();
            }
            inbox.close();
            let _ = done_tx.send(());
        })?;
    Ok(done)
}

/// Waits on fd 1 for the error condition a pipe's write end gets when its
/// last reader closes (`POLLERR`; `POLLHUP` for a socket or terminal). A
/// small thread blocks in `poll` asking for no event at all, so only those
/// conditions wake it; stdout that cannot report them (a regular file,
/// `/dev/null`) never does, and the writer's EPIPE is the only signal.
fn stdout_hangup(broken: CancellationToken) -> std::io::Result<()> {
    use rustix::event::{PollFd, PollFlags, poll};
    thread::Builder::new()
        .name("stdout-hangup".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let stdout = rustix::stdio::stdout();
            loop {
                let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
                match poll(&mut fds, None) {
                    Ok(_) => {
                        let seen = fds[0].revents();
                        if seen.intersects(PollFlags::ERR | PollFlags::HUP) {
                            tracing::info!("stdout reader closed: the client is gone");
                            broken.cancel();
                            return;
                        }
                        if seen.contains(PollFlags::NVAL) {
                            return;
                        }
                    }
                    Err(rustix::io::Errno::INTR) => {}
                    Err(_) => return,
                }
            }
        })?;
    Ok(())
}
