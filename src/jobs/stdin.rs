//! `write_stdin`: the one writer of a job's stdin.
//!
//! `execute`'s `stdin`, `input`, `POST /exec`'s body and a queued job's
//! stdin all go through [`Jobs::write_stdin`]. The write happens outside the
//! table's lock, holding only the job's own stdin slot, so a child that
//! does not read blocks only its writer; dropping the future cancels it. A
//! failed write closes stdin: what was written of it is unknown.
//!
//! A terminal job's stdin is its terminal: `close` sends `C-d`,
//! the line discipline's end of input, and leaves the terminal open (a
//! program that reads on after an EOF, as a shell does, can be written to
//! again; each `close` is one more `C-d`).

use tokio::io::AsyncWriteExt;

use super::table::StdinWriter;
use super::{JobId, Jobs, Shared};

/// Why stdin was not written.
#[derive(Debug, thiserror::Error)]
pub enum StdinError {
    /// No such job.
    #[error("unknown job")]
    Unknown,
    /// The job is terminal.
    #[error("the job is no longer running")]
    NotRunning,
    /// The job waits for capacity and has no stdin yet.
    #[error("the job has not started")]
    Queued,
    /// Its stdin is closed already.
    #[error("stdin is already closed")]
    Closed,
    /// The write failed; stdin is closed now. `ended`: the job is terminal
    /// by now (the write most likely failed because it exited).
    #[error("writing stdin: {error}")]
    Write {
        /// The error.
        error: std::io::Error,
        /// The job is terminal (or gone) after the failure.
        ended: bool,
    },
}

impl Jobs {
    /// Writes `data` to job `id`'s stdin (nothing if empty), then closes it
    /// if `close`. Cancel by dropping the future.
    pub async fn write_stdin(&self, id: JobId, data: &[u8], close: bool) -> Result<(), StdinError> {
        self.shared.write_stdin(id, data, close).await
    }
}

impl Shared {
    pub(super) async fn write_stdin(
        &self,
        id: JobId,
        data: &[u8],
        close: bool,
    ) -> Result<(), StdinError> {
        let (terminal, queued, slot) = self
            .table
            .with(id, |j| {
                (j.state.is_terminal(), j.state.is_queued(), j.stdin.clone())
            })
            .ok_or(StdinError::Unknown)?;
        if terminal {
            return Err(StdinError::NotRunning);
        }
        if queued {
            return Err(StdinError::Queued);
        }
        let mut guard = slot.lock().await;
        let Some(tx) = guard.as_mut() else {
            return Err(StdinError::Closed);
        };
        let written = match tx {
            StdinWriter::Pipe(tx) if !data.is_empty() => tx.write_all(data).await,
            StdinWriter::Pipe(_) => Ok(()),
            StdinWriter::Terminal(t) => t.write_all(data).await,
        };
        if let Err(error) = written {
            *guard = None;
            return Err(StdinError::Write {
                error,
                ended: self.is_terminal(id),
            });
        }
        if close {
            match guard.as_ref() {
                Some(StdinWriter::Terminal(t)) => {
                    if let Err(error) = t.send_eof().await {
                        return Err(StdinError::Write {
                            error,
                            ended: self.is_terminal(id),
                        });
                    }
                }
                _ => *guard = None,
            }
        }
        Ok(())
    }
}

impl Shared {
    /// Whether job `id` is terminal by now (or gone).
    fn is_terminal(&self, id: JobId) -> bool {
        self.table
            .with(id, |j| j.state.is_terminal())
            .unwrap_or(true)
    }
}
