//! The two threads that touch the MCP stream: a stdin reader and a stdout
//! writer.
//!
//! They are plain OS threads doing blocking I/O, not tokio tasks: tokio's
//! stdio uses its blocking pool, whose threads keep the runtime alive at exit,
//! and setting `O_NONBLOCK` on fds 0/1 would change them for whoever shares
//! the open file description (a terminal, the container runtime). Both
//! threads are started after `init::prepare`, so they inherit the blocked
//! signal mask.
//!
//! - The reader frames lines with [`LineSplitter`] (bounded memory) and sends
//!   them over a bounded channel; it ends with [`Input::Eof`].
//! - The writer receives whole messages, serialises each straight into a
//!   buffered stdout with its `\n`, and flushes when no more are queued. Writes of whole lines are therefore never
//!   interleaved.

use std::io::{BufWriter, Read, Write};
use std::thread;

use tokio::sync::{mpsc, oneshot};

use crate::protocol::Outgoing;
use crate::protocol::line::{Line, LineSplitter};

/// What the reader thread sends.
#[derive(Debug)]
pub enum Input {
    /// One framed line (or a too-long marker).
    Line(Line),
    /// stdin reached EOF (or failed).
    Eof,
}

/// Starts the stdin reader.
pub fn spawn_reader(max_line: usize) -> std::io::Result<mpsc::Receiver<Input>> {
    let (tx, rx) = mpsc::channel(64);
    thread::Builder::new().name("stdin".into()).spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut splitter = LineSplitter::new(max_line);
        let mut buf = vec![0u8; 64 * 1024];
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

/// A handle to the writer thread.
pub struct Writer {
    /// Queue of lines to write.
    pub tx: mpsc::Sender<Outgoing>,
    /// Fires when the writer has flushed everything and stopped (all senders
    /// dropped), or stdout failed.
    pub done: oneshot::Receiver<()>,
}

/// Starts the stdout writer.
pub fn spawn_writer() -> std::io::Result<Writer> {
    let (tx, mut rx) = mpsc::channel::<Outgoing>(1024);
    let (done_tx, done) = oneshot::channel();
    thread::Builder::new()
        .name("stdout".into())
        .spawn(move || {
            let mut out = BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
            'lines: while let Some(line) = rx.blocking_recv() {
                let mut next = Some(line);
                while let Some(line) = next {
                    if line
                        .write_to(&mut out)
                        .and_then(|()| out.write_all(b"\n"))
                        .is_err()
                    {
                        break 'lines;
                    }
                    next = rx.try_recv().ok();
                }
                if out.flush().is_err() {
                    break;
                }
            }
            let _ = out.flush();
            let _ = done_tx.send(());
        })?;
    Ok(Writer { tx, done })
}
