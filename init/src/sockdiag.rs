//! TCP socket diagnostics from the kernel: `NETLINK_SOCK_DIAG` with
//! `SOCK_DIAG_BY_FAMILY` requests (linux/sock_diag.h, linux/inet_diag.h),
//! the one place that writes and reads those structures.
//!
//! Two questions, one codec:
//! - [`dump`]: every TCP socket of one family in the given states (the
//!   listening sockets, for [`crate::listeners`]): the kernel walks only
//!   the tables those states live in.
//! - [`exact`]: the one socket with a given 4-tuple (the peer of a
//!   connection, for the server's peer rule): one request, one answer,
//!   whatever the number of sockets.
//!
//! # Invariants
//! - The structures are written and read as bytes at their documented
//!   offsets: native byte order for the netlink header, the state mask, the
//!   uid and the inode; network order for ports and addresses.
//! - A message is taken only whole (its length within what was received);
//!   a short or malformed answer is an error, never a guess.
//! - [`exact`] answers a socket only when it names exactly the 4-tuple
//!   asked for; "no such socket" (`ENOENT`) is `None`, not an error.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use rustix::net::netlink::{self, SocketAddrNetlink};
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const IPPROTO_TCP: u8 = 6;
/// `struct nlmsghdr`.
const HEADER: usize = 16;
/// `struct inet_diag_req_v2`.
const REQUEST: usize = 56;
/// `struct inet_diag_msg`.
const MESSAGE: usize = 72;
/// `ENOENT`: no socket with that 4-tuple.
const ENOENT: i32 = 2;

/// `TCP_LISTEN`, the state of a listening socket.
pub const TCP_LISTEN: u8 = 10;

/// The bit of `state` in a request's state mask (none for a state
/// number past the mask, which no TCP state is).
pub const fn state_bit(state: u8) -> u32 {
    match 1u32.checked_shl(state as u32) {
        Some(bit) => bit,
        None => 0,
    }
}

/// One TCP socket as the kernel describes it (`struct inet_diag_msg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Socket {
    /// Its TCP state (`TCP_LISTEN`, …).
    pub state: u8,
    /// Its local address (`idiag_src`, `idiag_sport`).
    pub local: SocketAddr,
    /// Its remote address (`idiag_dst`, `idiag_dport`).
    pub remote: SocketAddr,
    /// The uid that owns it.
    pub uid: u32,
    /// Its inode (`socket:[INODE]` in a holder's descriptor links).
    pub inode: u64,
}

/// Every TCP socket of the IPv4 (`v6` false) or IPv6 family whose state is
/// in `states` (a mask of [`state_bit`]s).
pub fn dump(v6: bool, states: u32) -> io::Result<Vec<Socket>> {
    let family = if v6 { AF_INET6 } else { AF_INET };
    let req = request(family, states, None, NLM_F_REQUEST | NLM_F_DUMP);
    exchange(&req, true)
}

/// The socket whose local end is `local` and whose remote end is `remote`,
/// in a state of `states`; `None` when this network namespace has none
/// (or it is in another state).
/// An IPv4 pair is looked up in the IPv4 table (unmap a dual-stack
/// listener's `::ffff:a.b.c.d` first).
pub fn exact(local: SocketAddr, remote: SocketAddr, states: u32) -> io::Result<Option<Socket>> {
    let family = if local.is_ipv4() { AF_INET } else { AF_INET6 };
    let req = request(family, states, Some((local, remote)), NLM_F_REQUEST);
    match exchange(&req, false) {
        Ok(found) => Ok(found
            .into_iter()
            // The kernel's exact lookup ignores the state mask: applied here.
            .find(|s| s.local == local && s.remote == remote && states & state_bit(s.state) != 0)),
        Err(e) if e.raw_os_error() == Some(ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// An `nlmsghdr` + `inet_diag_req_v2`: a dump when `id` is `None` (its
/// `inet_diag_sockid` all zero), else the exact lookup of that 4-tuple.
fn request(
    family: u8,
    states: u32,
    id: Option<(SocketAddr, SocketAddr)>,
    flags: u16,
) -> [u8; HEADER + REQUEST] {
    const LEN: usize = HEADER + REQUEST;
    let mut req = [0u8; LEN];
    req[0..4].copy_from_slice(&(LEN as u32).to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&flags.to_ne_bytes());
    req[8..12].copy_from_slice(&1u32.to_ne_bytes());
    let r = &mut req[HEADER..];
    r[0] = family;
    r[1] = IPPROTO_TCP;
    // idiag_ext 0, pad 0, then the states.
    r[4..8].copy_from_slice(&states.to_ne_bytes());
    if let Some((local, remote)) = id {
        let id = &mut r[8..];
        id[0..2].copy_from_slice(&local.port().to_be_bytes());
        id[2..4].copy_from_slice(&remote.port().to_be_bytes());
        id[4..20].copy_from_slice(&octets(local.ip()));
        id[20..36].copy_from_slice(&octets(remote.ip()));
        // idiag_if 0; idiag_cookie INET_DIAG_NOCOOKIE: look up by address.
        id[40..48].copy_from_slice(&[0xff; 8]);
    }
    req
}

/// Sends `req` and reads the answer: until `NLMSG_DONE` for a dump, the
/// first datagram otherwise. An `NLMSG_ERROR` is its errno.
fn exchange(req: &[u8], dump: bool) -> io::Result<Vec<Socket>> {
    let fd = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        Some(netlink::SOCK_DIAG),
    )?;
    rustix::net::sendto(&fd, req, SendFlags::empty(), &SocketAddrNetlink::new(0, 0))?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; if dump { 32 * 1024 } else { 512 }];
    loop {
        let n = rustix::net::recv(&fd, &mut buf[..], RecvFlags::empty())?.0;
        let got = &buf[..n.min(buf.len())];
        if got.is_empty() {
            return Ok(out);
        }
        if messages(got, &mut out)? || !dump {
            return Ok(out);
        }
    }
}

/// The messages of one datagram into `out`; whether it ended the answer
/// (`NLMSG_DONE`).
fn messages(got: &[u8], out: &mut Vec<Socket>) -> io::Result<bool> {
    let word = |o: usize| {
        got.get(o..o + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| io::Error::other("a short sock_diag answer"))
    };
    let mut at = 0;
    while at + HEADER <= got.len() {
        let len = word(at)? as usize;
        let kind = u16::from_ne_bytes([got[at + 4], got[at + 5]]);
        if len < HEADER || at + len > got.len() {
            return Err(io::Error::other("a malformed sock_diag answer"));
        }
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let errno = -(word(at + HEADER)? as i32);
                return Err(io::Error::from_raw_os_error(errno));
            }
            SOCK_DIAG_BY_FAMILY if len >= HEADER + MESSAGE => {
                if let Some(s) = socket(&got[at + HEADER..at + HEADER + MESSAGE]) {
                    out.push(s);
                }
            }
            SOCK_DIAG_BY_FAMILY => return Err(io::Error::other("a short sock_diag message")),
            _ => {}
        }
        at += (len + 3) & !3;
    }
    Ok(false)
}

/// One `inet_diag_msg`: family, state, timer, retrans, the sockid (ports,
/// addresses, interface, cookie), expires, rqueue, wqueue, uid, inode.
fn socket(m: &[u8]) -> Option<Socket> {
    let address = |at: usize, port: usize| -> Option<SocketAddr> {
        let port = u16::from_be_bytes([m[port], m[port + 1]]);
        let ip: IpAddr = match m[0] {
            AF_INET => Ipv4Addr::new(m[at], m[at + 1], m[at + 2], m[at + 3]).into(),
            AF_INET6 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(&m[at..at + 16]);
                Ipv6Addr::from(a).into()
            }
            _ => return None,
        };
        Some(SocketAddr::new(ip, port))
    };
    let word = |at: usize| u32::from_ne_bytes([m[at], m[at + 1], m[at + 2], m[at + 3]]);
    Some(Socket {
        state: m[1],
        local: address(8, 4)?,
        remote: address(24, 6)?,
        uid: word(64),
        inode: u64::from(word(68)),
    })
}

/// An address's 16 bytes as `inet_diag_sockid` holds it (network order;
/// IPv4 in the first four).
fn octets(ip: IpAddr) -> [u8; 16] {
    let mut out = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => out[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out = v6.octets(),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    fn own_uid() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    #[test]
    fn a_dump_of_listening_sockets_names_a_listener_of_ours_with_our_uid() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let all = dump(false, state_bit(TCP_LISTEN)).unwrap();
        let ours = all.iter().find(|s| s.local == addr).expect("our listener");
        assert_eq!(ours.state, TCP_LISTEN);
        assert_eq!(ours.uid, own_uid());
        assert_ne!(ours.inode, 0);
        assert!(all.iter().all(|s| s.state == TCP_LISTEN), "{all:?}");
    }

    #[test]
    fn an_exact_lookup_finds_the_client_end_of_a_connection_and_only_it() {
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(listener) = TcpListener::bind(bind) else {
                continue; // no IPv6 loopback here
            };
            let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (server_side, _) = listener.accept().unwrap();
            let (c, s) = (
                client.local_addr().unwrap(),
                server_side.local_addr().unwrap(),
            );
            let not_listening = !state_bit(TCP_LISTEN);
            let found = exact(c, s, not_listening)
                .unwrap()
                .expect("the client's socket");
            assert_eq!((found.local, found.remote, found.uid), (c, s, own_uid()));
            let nobody: SocketAddr = if c.is_ipv4() {
                "127.0.0.1:1"
            } else {
                "[::1]:1"
            }
            .parse()
            .unwrap();
            assert_eq!(exact(nobody, s, not_listening).unwrap(), None, "{bind}");
        }
    }

    #[test]
    fn a_truncated_answer_is_an_error_not_a_socket() {
        let mut got = vec![0u8; HEADER + 8];
        got[0..4].copy_from_slice(&((HEADER + MESSAGE) as u32).to_ne_bytes());
        got[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        assert!(messages(&got, &mut Vec::new()).is_err());
    }
}
