//! Terminal jobs (docs/tools.md, "Terminal jobs"): a job's
//! pseudo-terminal, as the job service holds it, and the verbs that only a
//! terminal job has.
//!
//! A terminal job's output is its `stdout` stream (the master's bytes, with
//! absolute offsets, windows and redaction as for a pipe); `stderr` stays
//! empty. Its stdin is the master too: [`Jobs::write_stdin`] writes there,
//! and closing a terminal's stdin sends `C-d` (the line discipline's EOF),
//! leaving the terminal itself open, as a key press would. Closing the
//! master would hang the job up instead (SIGHUP), which is what happens when
//! the job leaves the table.
//!
//! # Invariants
//! - [`Terminal`] is shared (`Arc`) by the job in the table (for `write`,
//!   `resize`, the device), its stdin slot and its runner (which reads the
//!   master): the master stays open while any of them holds it, and closes
//!   — hanging the terminal up — only when the job is gone and its runner
//!   has stopped.
//! - The reaper stays the only waiter: nothing here forks or waits.
//! - Reads and writes never block a runtime thread: the master is
//!   non-blocking and registered with the reactor.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;

use init::{TerminalDevice, WindowSize};
use tokio::io::unix::AsyncFd;

use super::{JobId, Jobs};
use crate::capture::Redact;
use crate::terminal::{Screen, ScreenView};

/// The default size of a terminal job: 120 columns, 40 rows.
pub const DEFAULT_SIZE: WindowSize = WindowSize {
    cols: 120,
    rows: 40,
};

/// The largest terminal dimension accepted (columns or rows): a screen of
/// 1000×1000 cells is already far past any real terminal.
pub const MAX_DIMENSION: u16 = 1000;

/// Lines of scrollback a terminal job's screen keeps above it (the most
/// `screen`'s `scrollback` returns).
pub const SCROLLBACK_LINES: usize = 1000;

/// The line discipline's EOF key (`C-d`, `VEOF` in the default termios).
const EOF_KEY: u8 = 0x04;

/// A terminal job's terminal: its master, registered with the reactor, and
/// what the job service knows of it — its device, its size and its screen.
///
/// The screen is fed by the runner, the master's only reader, with every
/// byte it reads, in order, *before* the bytes enter the job's `stdout`
/// window: so a screen never lags the window a reader of the window has
/// just seen, and its `offset` is the count of bytes it reflects.
pub(super) struct Terminal {
    master: AsyncFd<OwnedFd>,
    device: TerminalDevice,
    size: Mutex<WindowSize>,
    screen: Mutex<Screen>,
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminal")
            .field("device", &self.device)
            .field("size", &self.size())
            .finish_non_exhaustive()
    }
}

/// Whether a job runs on a terminal, and its terminal once started.
#[derive(Debug, Clone, Default)]
pub(super) enum Tty {
    /// A pipe job.
    #[default]
    No,
    /// A terminal job not started yet.
    Asked,
    /// A started terminal job.
    Open(std::sync::Arc<Terminal>),
}

impl Tty {
    /// Whether the job is a terminal job.
    pub(super) fn is_tty(&self) -> bool {
        !matches!(self, Tty::No)
    }

    /// Its terminal, once started.
    pub(super) fn open(&self) -> Option<&std::sync::Arc<Terminal>> {
        match self {
            Tty::Open(t) => Some(t),
            Tty::No | Tty::Asked => None,
        }
    }
}

impl Terminal {
    /// Takes over a spawned terminal's master (non-blocking already).
    pub(super) fn new(
        master: OwnedFd,
        device: TerminalDevice,
        size: WindowSize,
    ) -> io::Result<Terminal> {
        Ok(Terminal {
            master: init::pty::register(master)?,
            device,
            size: Mutex::new(size),
            screen: Mutex::new(Screen::new(size.cols, size.rows, SCROLLBACK_LINES)),
        })
    }

    /// The slave's path and device (what awaiting input compares a
    /// process's descriptors with).
    pub(super) fn device(&self) -> &TerminalDevice {
        &self.device
    }

    /// The master, registered with the reactor (the runner reads it).
    pub(super) fn master(&self) -> &AsyncFd<OwnedFd> {
        &self.master
    }

    /// The terminal's current size.
    pub(super) fn size(&self) -> WindowSize {
        *lock(&self.size)
    }

    /// Feeds bytes read from the master to the screen (the runner, before
    /// it puts them in the window).
    pub(super) fn feed(&self, bytes: &[u8]) {
        lock(&self.screen).feed(bytes);
    }

    /// The screen now, with up to `scrollback` lines above it.
    fn view(&self, scrollback: usize) -> ScreenView {
        lock(&self.screen).view(scrollback)
    }

    /// Whether the program asked for application cursor keys (DECCKM).
    fn application_cursor(&self) -> bool {
        lock(&self.screen).application_cursor()
    }

    /// Writes all of `data` to the terminal's input, waiting while its
    /// input queue is full. Cancel by dropping the future (what was written
    /// stays written).
    pub(super) async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let mut guard = self.master.writable().await?;
            match guard.try_io(|fd| Ok(rustix::io::write(fd.get_ref(), data)?)) {
                Ok(Ok(n)) => data = &data[n..],
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
        Ok(())
    }

    /// `C-d`: the end of input for a program reading a line.
    pub(super) async fn send_eof(&self) -> io::Result<()> {
        self.write_all(&[EOF_KEY]).await
    }

    /// Sets the size (`TIOCSWINSZ`: the kernel sends SIGWINCH to the
    /// terminal's foreground group when it changes).
    fn resize(&self, size: WindowSize) -> io::Result<()> {
        let mut now = lock(&self.size);
        init::pty::set_size(self.master.get_ref().as_fd(), size)?;
        *now = size;
        // Before the program can redraw: it learns the size from SIGWINCH,
        // and its output is fed after this returns.
        lock(&self.screen).resize(size.cols, size.rows);
        Ok(())
    }
}

/// A mutex's guard; a poisoned one is taken as is (its data is a screen or
/// a size, consistent after any panic of a reader).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Why a terminal verb was refused.
#[derive(Debug, thiserror::Error)]
pub enum TerminalError {
    /// No such job.
    #[error("unknown job")]
    Unknown,
    /// The job runs on pipes, not a terminal.
    #[error("the job has no terminal (it was not started with tty)")]
    NotTerminal,
    /// The job waits for capacity and has no terminal yet.
    #[error("the job has not started")]
    Queued,
    /// The job is terminal.
    #[error("the job is no longer running")]
    NotRunning,
    /// A size of 0 or past [`MAX_DIMENSION`].
    #[error("cols and rows must be between 1 and {MAX_DIMENSION}")]
    BadSize,
    /// The kernel refused.
    #[error("resizing the terminal: {0}")]
    Failed(io::Error),
}

/// A valid terminal size, or [`TerminalError::BadSize`].
pub fn window_size(cols: u64, rows: u64) -> Result<WindowSize, TerminalError> {
    let dim = |n: u64| {
        u16::try_from(n)
            .ok()
            .filter(|n| (1..=MAX_DIMENSION).contains(n))
    };
    match (dim(cols), dim(rows)) {
        (Some(cols), Some(rows)) => Ok(WindowSize { cols, rows }),
        _ => Err(TerminalError::BadSize),
    }
}

impl Jobs {
    /// Whether job `id` is a terminal job (`None`: no such job). Known from
    /// launch on, queued jobs included.
    #[allow(
        dead_code,
        reason = "a verb for the terminal front-ends (attach, awaiting input)"
    )]
    pub fn is_tty(&self, id: JobId) -> Option<bool> {
        self.shared.table.with(id, |j| j.tty.is_tty())
    }

    /// The terminal a started terminal job runs on: its slave's path and
    /// device number, to compare with what a process's descriptors are.
    /// `None` for a pipe job, a queued one, or no such job.
    #[allow(
        dead_code,
        reason = "a verb for the terminal front-ends (attach, awaiting input)"
    )]
    pub fn terminal_device(&self, id: JobId) -> Option<TerminalDevice> {
        self.shared
            .table
            .with(id, |j| j.tty.open().map(|t| t.device.clone()))
            .flatten()
    }

    /// The current size of a started terminal job's terminal.
    #[allow(
        dead_code,
        reason = "a verb for the terminal front-ends (attach, awaiting input)"
    )]
    pub fn terminal_size(&self, id: JobId) -> Option<WindowSize> {
        self.shared
            .table
            .with(id, |j| j.tty.open().map(|t| t.size()))
            .flatten()
    }

    /// Resizes a running terminal job's terminal to `cols` × `rows`
    /// (`TIOCSWINSZ` on the master, so the kernel sends SIGWINCH to its
    /// foreground process group).
    pub fn resize(&self, id: JobId, cols: u16, rows: u16) -> Result<(), TerminalError> {
        let size = window_size(cols.into(), rows.into())?;
        let (tty, terminal) = self
            .shared
            .table
            .with(id, |j| (j.tty.clone(), j.state.is_terminal()))
            .ok_or(TerminalError::Unknown)?;
        match tty {
            Tty::No => Err(TerminalError::NotTerminal),
            _ if terminal => Err(TerminalError::NotRunning),
            // Between admission and start too: no terminal yet.
            Tty::Asked => Err(TerminalError::Queued),
            Tty::Open(t) => t.resize(size).map_err(TerminalError::Failed),
        }
    }

    /// A terminal job's screen: the visible rows, cursor,
    /// alternate-screen flag, title and the raw offset it reflects, with up
    /// to `scrollback` lines from above it (at most [`SCROLLBACK_LINES`]).
    /// Works while the job runs and after it ended, until it is delivered.
    /// With `redact`, each line (and the title) is redacted as output is;
    /// a secret split across two lines is matched only in its parts.
    pub fn screen(
        &self,
        id: JobId,
        scrollback: usize,
        redact: Option<&(dyn Redact + Sync)>,
    ) -> Result<ScreenView, TerminalError> {
        let terminal = self
            .shared
            .table
            .with(id, |j| j.tty.clone())
            .ok_or(TerminalError::Unknown)?;
        match terminal {
            Tty::No => Err(TerminalError::NotTerminal),
            Tty::Asked => Err(TerminalError::Queued),
            Tty::Open(t) => Ok(redacted(t.view(scrollback), redact)),
        }
    }

    /// Whether a terminal job's program asked for application cursor keys
    /// (DECCKM): `input`'s `keys` then sends the cursor keys as xterm does
    /// in that mode. `false` for a pipe job or no such job.
    pub fn application_cursor(&self, id: JobId) -> bool {
        self.shared
            .table
            .with(id, |j| j.tty.open().map(|t| t.application_cursor()))
            .flatten()
            .unwrap_or(false)
    }
}

/// The screen of a delivered terminal job (its last screen), for its
/// result; `None` for a pipe job.
pub(super) fn last_screen(tty: &Tty, redact: Option<&(dyn Redact + Sync)>) -> Option<ScreenView> {
    tty.open().map(|t| redacted(t.view(0), redact))
}

/// `view` with each line, scrollback line and the title redacted.
fn redacted(mut view: ScreenView, redact: Option<&(dyn Redact + Sync)>) -> ScreenView {
    let Some(r) = redact else {
        return view;
    };
    let one = |line: &mut String| {
        let bytes = std::mem::take(line).into_bytes();
        *line = r.redact(&bytes, 0..bytes.len()).0;
    };
    view.lines.iter_mut().for_each(one);
    if let Some(lines) = view.scrollback.as_mut() {
        lines.iter_mut().for_each(one);
    }
    if let Some(title) = view.title.as_mut() {
        one(title);
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_size_is_one_to_a_thousand_cells_each_way() {
        assert_eq!(
            window_size(1, 1).ok(),
            Some(WindowSize { cols: 1, rows: 1 })
        );
        assert_eq!(
            window_size(1000, 1000).ok(),
            Some(WindowSize {
                cols: 1000,
                rows: 1000
            })
        );
        for (cols, rows) in [(0, 24), (80, 0), (1001, 24), (80, 70_000), (u64::MAX, 1)] {
            assert!(
                matches!(window_size(cols, rows), Err(TerminalError::BadSize)),
                "{cols}x{rows}"
            );
        }
    }

    /// Redacts every "secret" to "[REDACTED]".
    struct Secret;
    impl Redact for Secret {
        fn redact(&self, text: &[u8], data: std::ops::Range<usize>) -> (String, u64) {
            let s = String::from_utf8_lossy(&text[data]).into_owned();
            let n = s.matches("secret").count() as u64;
            (s.replace("secret", "[REDACTED]"), n)
        }
    }

    #[test]
    fn a_redacted_screen_hides_secrets_in_lines_scrollback_and_title() {
        let mut screen = Screen::new(20, 2, 10);
        screen.feed(b"\x1b]0;a secret title\x07one secret\r\ntwo\r\nthree secret");
        let view = redacted(screen.view(5), Some(&Secret));
        assert_eq!(view.lines, ["two", "three [REDACTED]"]);
        assert_eq!(view.scrollback, Some(vec!["one [REDACTED]".to_owned()]));
        assert_eq!(view.title.as_deref(), Some("a [REDACTED] title"));
        assert_eq!(view.offset, screen.offset());
    }
}
