//! The file workers: the bounded share of tokio's blocking pool that every
//! file operation and every transferred chunk runs on.
//!
//! # Invariants
//! - At most [`FILE_WORKERS`] file tasks run at once, whoever started them.
//! - No file task waits for a client: a transfer takes a worker per chunk
//!   and gives it back, so stalled clients cannot take them all.

use super::super::error::{FileError, Kind};

/// How many file tasks run at once: the disk work of every
/// request and every transfer's chunk shares them, so a flood of requests
/// cannot grow the blocking pool without bound, and — since no task waits
/// on a client — stalled transfers cannot take them all.
pub const FILE_WORKERS: usize = 16;

static WORKERS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(FILE_WORKERS);

/// Runs blocking file work on tokio's blocking pool, at most
/// [`FILE_WORKERS`] at a time.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, FileError> + Send + 'static,
) -> Result<T, FileError> {
    let Ok(_worker) = WORKERS.acquire().await else {
        return Err(FileError::new(Kind::Io, "the file workers are closed"));
    };
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(FileError::new(Kind::Io, format!("file task failed: {e}"))))
}

/// Starts `f` on the blocking pool once one of the [`FILE_WORKERS`] is
/// free, without waiting for it to finish (the permit goes with it).
pub(super) async fn start_blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, FileError> + Send + 'static,
) -> Result<tokio::task::JoinHandle<Result<T, FileError>>, FileError> {
    let Ok(worker) = WORKERS.acquire().await else {
        return Err(FileError::new(Kind::Io, "the file workers are closed"));
    };
    Ok(tokio::task::spawn_blocking(move || {
        let _worker = worker;
        f()
    }))
}
