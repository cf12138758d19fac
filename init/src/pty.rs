//! Pseudo-terminals for terminal jobs: allocation, the window
//! size, and the identity of a job's terminal.
//!
//! A terminal is allocated with rustix's safe `pty` functions: `/dev/ptmx`
//! opened close-on-exec, unlocked, and its slave opened through the master
//! (`TIOCGPTPEER`, no path lookup; `ptsname` + `open` on kernels before
//! 4.13). Nothing here forks or waits: the job's child is started by the
//! one spawn path ([`crate::Init::spawn_terminal`]), which makes it a
//! session leader with the slave as its controlling terminal, and the
//! reaper stays the only waiter.
//!
//! # Invariants
//! - Both ends are close-on-exec: the child gets the slave only as its
//!   0, 1 and 2 (the spawn's descriptor copies), and no job inherits
//!   another job's master.
//! - The master is non-blocking (the server reads and writes it from its
//!   reactor); the slave is blocking, as a program expects its terminal.
//! - The slave is closed in the server as soon as the child has its copies
//!   (the caller drops [`Pty::slave`] after the spawn): the master then
//!   reads `EIO` once every process of the job has closed the terminal,
//!   which is the end of its output.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;
use rustix::termios::{InputModes, OptionalActions, Winsize};

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

/// Which terminal a job runs on: what `/proc/<pid>/fd/<n>` of its processes
/// links to, and the device number `stat` gives for it. Comparing
/// `st_rdev` (of `stat("/proc/<pid>/fd/<n>")`) with [`TerminalDevice::rdev`]
/// tells whether a descriptor is this terminal, whatever path it was opened
/// by (`/dev/tty`, a bind mount).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalDevice {
    /// The slave's path (`/dev/pts/3`).
    pub path: PathBuf,
    /// The slave's device number (`st_rdev`).
    pub rdev: u64,
}

/// A freshly allocated terminal.
#[derive(Debug)]
pub struct Pty {
    /// The server's end (non-blocking, close-on-exec).
    pub master: OwnedFd,
    /// The job's end (close-on-exec); drop it once the child has it.
    pub slave: OwnedFd,
    /// The slave's identity.
    pub device: TerminalDevice,
}

/// Allocates a terminal of `size`, with the kernel's default line
/// discipline (cooked mode, echo, `ONLCR`) plus `IUTF8`, so that the line
/// editor erases whole UTF-8 characters.
pub fn open(size: WindowSize) -> io::Result<Pty> {
    let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
    let master = rustix::pty::openpt(flags)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = match rustix::pty::ioctl_tiocgptpeer(&master, flags) {
        Ok(slave) => slave,
        // Before Linux 4.13.
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOTTY) => rustix::fs::open(
            name.as_c_str(),
            OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )?,
        Err(e) => return Err(e.into()),
    };
    let rdev = rustix::fs::fstat(&slave)?.st_rdev;
    if let Ok(mut termios) = rustix::termios::tcgetattr(&slave) {
        termios.input_modes |= InputModes::IUTF8;
        let _ = rustix::termios::tcsetattr(&slave, OptionalActions::Now, &termios);
    }
    set_size(&master, size)?;
    rustix::fs::fcntl_setfl(
        &master,
        rustix::fs::fcntl_getfl(&master)? | OFlags::NONBLOCK,
    )?;
    Ok(Pty {
        master,
        slave,
        device: TerminalDevice {
            path: PathBuf::from(OsString::from_vec(name.into_bytes())),
            rdev,
        },
    })
}

/// `TIOCSWINSZ` on a terminal: sets its size; when it changes, the kernel
/// sends `SIGWINCH` to the terminal's foreground process group.
pub fn set_size(tty: impl AsFd, size: WindowSize) -> io::Result<()> {
    rustix::termios::tcsetwinsize(
        tty,
        Winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        },
    )?;
    Ok(())
}

/// Registers a terminal's master with tokio's reactor (the server reads and
/// writes it from its runtime). Call it inside a tokio runtime with IO
/// enabled.
pub fn register(master: OwnedFd) -> io::Result<tokio::io::unix::AsyncFd<OwnedFd>> {
    crate::sys::async_fd_register(master)
}

/// `TIOCGWINSZ`: a terminal's size.
pub fn size(tty: impl AsFd) -> io::Result<WindowSize> {
    let ws = rustix::termios::tcgetwinsize(tty)?;
    Ok(WindowSize {
        cols: ws.ws_col,
        rows: ws.ws_row,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_terminal_has_the_size_asked_for_and_names_its_slave() {
        let pty = open(WindowSize {
            cols: 100,
            rows: 30,
        })
        .unwrap();
        assert_eq!(
            size(&pty.slave).unwrap(),
            WindowSize {
                cols: 100,
                rows: 30
            }
        );
        assert!(pty.device.path.starts_with("/dev/pts"), "{:?}", pty.device);
        let st = rustix::fs::stat(&pty.device.path).unwrap();
        assert_eq!(st.st_rdev, pty.device.rdev);
        set_size(&pty.master, WindowSize { cols: 80, rows: 24 }).unwrap();
        assert_eq!(size(&pty.slave).unwrap(), WindowSize { cols: 80, rows: 24 });
    }
}
