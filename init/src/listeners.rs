//! Listening TCP sockets and the processes holding them, from `/proc`
//! (the ports of `GET /ports` and of jobs).
//!
//! One look, on demand ([`listening`]): the sockets in state `LISTEN` of
//! this process's network namespace (the container's), asked of the kernel
//! with one `NETLINK_SOCK_DIAG` dump for `TCPF_LISTEN` (`ss -lt` does the
//! same: the kernel then walks its listening hash only, where reading
//! `/proc/net/tcp` makes it walk every bucket of the established hash too —
//! milliseconds on a big host), or, where `sock_diag` is not available,
//! the `0A` rows of `/proc/net/tcp` and `/proc/net/tcp6`; then, only if
//! there is a listener, every
//! process's descriptors (`/proc/PID/fd/N` links of the form
//! `socket:[INODE]`) to find who holds each, and those holders' process
//! group and session (`/proc/PID/stat`).
//!
//! # Invariants
//! - Nothing runs in the background: the caller decides when to look (a
//!   `GET /ports`, a `status`, a `list`, a `wait` until a port), and no
//!   listener means no descriptor walk.
//! - The descriptor walk is the one cost that grows with the process count
//!   (10,000 jobs: ~700 ms a look), so its answer is kept for as long as it
//!   can be shown to hold: while the set of listening socket inodes is the
//!   one it was made for and every holder it named is still alive in the
//!   group and session it had (one `stat` each). A new or closed listener,
//!   a holder gone or moved, walks again. What a kept answer can miss: a
//!   process that came to hold a socket already listed (a fork, a passed
//!   descriptor) while its first holder lives — it is in that holder's
//!   group unless it moved, and a job's ports are found by group.
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

/// A listening socket before its holders are known.
struct Socket {
    addr: SocketAddr,
    proto: Proto,
    inode: u64,
}

/// Every listening TCP socket now, with its holders, sorted by port,
/// table and address.
pub fn listening() -> Vec<Listening> {
    let sockets = match from_diag() {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!(error = %e, "sock_diag: reading /proc/net/tcp instead");
            from_proc()
        }
    };
    if sockets.is_empty() {
        return Vec::new();
    }
    let mut inodes: Vec<u64> = sockets.iter().map(|s| s.inode).collect();
    inodes.sort_unstable();
    let holders = kept_holders(inodes);
    let mut out: Vec<Listening> = sockets
        .into_iter()
        .map(|s| Listening {
            addr: s.addr,
            proto: s.proto,
            holders: holders.get(&s.inode).cloned().unwrap_or_default(),
        })
        .collect();
    out.sort_by(|a, b| {
        (a.addr.port(), a.proto, a.addr.ip()).cmp(&(b.addr.port(), b.proto, b.addr.ip()))
    });
    out
}

/// The listening sockets of `/proc/net/tcp{,6}`.
fn from_proc() -> Vec<Socket> {
    let mut sockets = Vec::new();
    for (table, proto) in [
        (procfs::net::tcp(), Proto::Tcp),
        (procfs::net::tcp6(), Proto::Tcp6),
    ] {
        match table {
            Ok(entries) => sockets.extend(
                entries
                    .into_iter()
                    .filter(|e: &TcpNetEntry| e.state == TcpState::Listen)
                    .map(|e| Socket {
                        addr: e.local_address,
                        proto,
                        inode: e.inode,
                    }),
            ),
            Err(e) => tracing::debug!(error = %e, table = proto.name(), "reading the TCP table"),
        }
    }
    sockets
}

/// The listening TCP sockets of both families, from one
/// `NETLINK_SOCK_DIAG` dump each ([`crate::sockdiag`]).
fn from_diag() -> std::io::Result<Vec<Socket>> {
    let mut out = Vec::new();
    for (v6, proto) in [(false, Proto::Tcp), (true, Proto::Tcp6)] {
        let listening =
            crate::sockdiag::dump(v6, crate::sockdiag::state_bit(crate::sockdiag::TCP_LISTEN))?;
        out.extend(listening.into_iter().map(|s| Socket {
            addr: s.local,
            proto,
            inode: s.inode,
        }));
    }
    Ok(out)
}

/// The last walk: the sorted inodes it was for, and what it found.
type Walk = (Vec<u64>, HashMap<u64, Vec<Holder>>);

static LAST_WALK: std::sync::Mutex<Option<Walk>> = std::sync::Mutex::new(None);

/// [`holders`] of the sorted `inodes`, from the last walk while it holds
/// (see the module's invariants), else from a new one.
fn kept_holders(inodes: Vec<u64>) -> HashMap<u64, Vec<Holder>> {
    let mut last = LAST_WALK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((kept, found)) = last.as_ref()
        && *kept == inodes
        && found.values().flatten().all(|h| holder(h.pid) == Some(*h))
    {
        return found.clone();
    }
    let found = holders(&inodes);
    *last = Some((inodes, found.clone()));
    found
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
    fn sock_diag_and_proc_net_tcp_agree_on_this_processs_listeners() {
        // Other processes' sockets come and go meanwhile: compare ours.
        let v4 = TcpListener::bind("127.0.0.1:0").expect("bind");
        let v6 = TcpListener::bind("[::]:0").expect("bind v6");
        let ours = [
            (v4.local_addr().expect("addr"), Proto::Tcp),
            (v6.local_addr().expect("addr"), Proto::Tcp6),
        ];
        let pick = |all: Vec<Socket>| -> Vec<(SocketAddr, Proto, u64)> {
            let mut v: Vec<_> = all
                .into_iter()
                .filter(|s| ours.contains(&(s.addr, s.proto)))
                .map(|s| (s.addr, s.proto, s.inode))
                .collect();
            v.sort();
            v
        };
        let diag = pick(from_diag().expect("sock_diag"));
        assert_eq!(diag.len(), 2, "{diag:?}");
        assert_eq!(diag, pick(from_proc()));
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
