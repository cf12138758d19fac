//! Listening TCP sockets and the processes holding them, from `/proc`
//! (SPEC §22: ports).
//!
//! One look, on demand ([`listening`]): the sockets in state `LISTEN`
//! (`0A`) of `/proc/net/tcp` and `/proc/net/tcp6` (this process's network
//! namespace: the container's), then, only if there is one, every
//! process's descriptors (`/proc/PID/fd/N` links of the form
//! `socket:[INODE]`) to find who holds each, and those holders' process
//! group and session (`/proc/PID/stat`).
//!
//! # Invariants
//! - Nothing runs in the background and nothing is cached: the caller
//!   decides when to look (a `GET /ports`, a `status`, a `wait` until a
//!   port), and no listener means no descriptor walk.
//! - Best effort, never an error: a process that vanishes mid-look, or
//!   whose descriptors cannot be read (another user's, without
//!   `CAP_SYS_PTRACE`), is simply no holder; a socket with no readable
//!   holder is still listed, with none.
//! - Addresses are the kernel's: `procfs` decodes the hex words of
//!   `/proc/net/tcp{,6}` (native byte order) into `SocketAddr`s.

use std::collections::HashMap;
use std::fs;
use std::net::{IpAddr, SocketAddr};

use procfs::net::{TcpNetEntry, TcpState};

/// Which table a socket came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Proto {
    /// `/proc/net/tcp`.
    Tcp,
    /// `/proc/net/tcp6` (a dual-stack `[::]` bind is here too).
    Tcp6,
}

impl Proto {
    /// `tcp` or `tcp6`.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Tcp6 => "tcp6",
        }
    }
}

/// A process holding a listening socket open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// Its pid.
    pub pid: i32,
    /// Its process group.
    pub pgrp: i32,
    /// Its session.
    pub session: i32,
}

/// One listening socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listening {
    /// The bound address and port.
    pub addr: SocketAddr,
    /// Its table.
    pub proto: Proto,
    /// The processes that hold it open, lowest pid first (several after a
    /// `fork`, none when none could be read).
    pub holders: Vec<Holder>,
}

impl Listening {
    /// Whether it accepts connections to a loopback address only
    /// (`127.0.0.0/8`, `::1`, or `::ffff:127.x.y.z`): not reachable from
    /// outside the container.
    pub fn loopback_only(&self) -> bool {
        is_loopback(self.addr.ip())
    }
}

/// Whether `ip` is a loopback address, a v4-mapped one included.
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Every listening TCP socket now, with its holders, sorted by port,
/// table and address.
pub fn listening() -> Vec<Listening> {
    let mut sockets: Vec<(TcpNetEntry, Proto)> = Vec::new();
    for (table, proto) in [
        (procfs::net::tcp(), Proto::Tcp),
        (procfs::net::tcp6(), Proto::Tcp6),
    ] {
        match table {
            Ok(entries) => sockets.extend(
                entries
                    .into_iter()
                    .filter(|e| e.state == TcpState::Listen)
                    .map(|e| (e, proto)),
            ),
            Err(e) => tracing::debug!(error = %e, table = proto.name(), "reading the TCP table"),
        }
    }
    if sockets.is_empty() {
        return Vec::new();
    }
    let holders = holders(&sockets.iter().map(|(e, _)| e.inode).collect::<Vec<_>>());
    let mut out: Vec<Listening> = sockets
        .into_iter()
        .map(|(e, proto)| Listening {
            addr: e.local_address,
            proto,
            holders: holders.get(&e.inode).cloned().unwrap_or_default(),
        })
        .collect();
    out.sort_by(|a, b| {
        (a.addr.port(), a.proto, a.addr.ip()).cmp(&(b.addr.port(), b.proto, b.addr.ip()))
    });
    out
}

/// The holders of each of the socket `inodes`: one walk of every
/// process's descriptors.
fn holders(inodes: &[u64]) -> HashMap<u64, Vec<Holder>> {
    let mut found: HashMap<u64, Vec<Holder>> = HashMap::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return found;
    };
    let mut pids: Vec<i32> = procs
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    let mut link = String::new();
    for pid in pids {
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let mut held: Vec<u64> = Vec::new();
        for fd in fds.flatten() {
            let Ok(target) = fs::read_link(fd.path()) else {
                continue;
            };
            link.clear();
            link.push_str(&target.to_string_lossy());
            if let Some(inode) = socket_inode(&link)
                && inodes.contains(&inode)
                && !held.contains(&inode)
            {
                held.push(inode);
            }
        }
        if held.is_empty() {
            continue;
        }
        let Some(holder) = holder(pid) else { continue };
        for inode in held {
            found.entry(inode).or_default().push(holder);
        }
    }
    found
}

/// The inode of a descriptor link `socket:[INODE]`.
fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// `pid`'s group and session, from its `stat`.
fn holder(pid: i32) -> Option<Holder> {
    let stat = procfs::process::Process::new(pid).ok()?.stat().ok()?;
    Some(Holder {
        pid,
        pgrp: stat.pgrp,
        session: stat.session,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr, TcpListener};

    #[test]
    fn a_socket_link_names_its_inode_and_nothing_else_does() {
        assert_eq!(socket_inode("socket:[12345]"), Some(12345));
        assert_eq!(socket_inode("pipe:[12345]"), None);
        assert_eq!(socket_inode("/dev/null"), None);
        assert_eq!(socket_inode("socket:[12x]"), None);
    }

    #[test]
    fn loopback_is_127_slash_8_and_colon_colon_1_mapped_or_not() {
        assert!(is_loopback(Ipv4Addr::new(127, 0, 0, 1).into()));
        assert!(is_loopback(Ipv4Addr::new(127, 1, 2, 3).into()));
        assert!(is_loopback(Ipv6Addr::LOCALHOST.into()));
        assert!(is_loopback(
            Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped().into()
        ));
        assert!(!is_loopback(Ipv4Addr::UNSPECIFIED.into()));
        assert!(!is_loopback(Ipv6Addr::UNSPECIFIED.into()));
        assert!(!is_loopback(Ipv4Addr::new(10, 0, 0, 1).into()));
    }

    #[test]
    fn a_listener_of_this_process_is_found_with_this_process_as_its_holder() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let me = i32::try_from(std::process::id()).expect("pid");
        let found = listening();
        let mine = found
            .iter()
            .find(|s| s.addr.port() == port && s.proto == Proto::Tcp)
            .expect("listed");
        assert!(mine.loopback_only());
        assert!(mine.holders.iter().any(|h| h.pid == me), "{mine:?}");
    }
}
