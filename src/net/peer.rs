//! Who is on the other end of a TCP connection, when it is a local
//! process: the uid that owns the peer's socket.
//!
//! # Why
//! A listener that checks no token (envd and sandboxd on loopback, or with
//! `MCP_EXEC_PLATFORM_INSECURE=1`; `--http` without a token) trusts whoever
//! can reach it. On a root server, a job started with `user: "nobody"` can
//! reach it too, and would act as root through it: the identity switch
//! would mean nothing. So every listener without a token refuses a peer
//! that is a local process of another uid than the server's (docs/security.md,
//! "Identity across listeners"). A peer that is not local (another pod, the
//! host through a port forward) has no socket here and is not refused: the
//! network is then the boundary, as the start-up rule says.
//!
//! # How
//! The peer's socket is the one whose local end is the connection's remote
//! end and whose remote end is our local end. The kernel looks it up
//! exactly for us (`NETLINK_SOCK_DIAG`, `SOCK_DIAG_BY_FAMILY` without a
//! dump: one request, one answer, whatever the number of sockets), and the
//! answer carries the uid that owns it (`idiag_uid`, as `/proc/net/tcp`
//! shows it). Where netlink's socket diagnostics are missing (some
//! sandboxed kernels), `/proc/net/tcp` and `tcp6` are read instead.
//!
//! # Invariants
//! - An answer is taken only when it names exactly the 4-tuple asked for
//!   (a listener on the peer's port is not the peer).
//! - A lookup that fails (neither source answers) is an error, and the
//!   caller refuses the connection: the rule fails closed.

use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use init::sockdiag;

/// The uid owning the local socket at the other end of a connection from
/// `peer` to our `local` address; `None` when the peer is not a socket of
/// this network namespace (a remote client).
pub fn owner(peer: SocketAddr, local: SocketAddr) -> io::Result<Option<u32>> {
    let (peer, local) = (unmapped(peer), unmapped(local));
    match diag(peer, local) {
        Ok(found) => Ok(found),
        Err(netlink_error) => proc_net(peer, local).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "looking up the owner of the peer {peer}: sock_diag: {netlink_error}; \
                     /proc/net/tcp: {e}"
                ),
            )
        }),
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 one (a dual-stack listener sees
/// IPv4 clients so; their sockets are IPv4 sockets).
fn unmapped(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// The exact lookup over `NETLINK_SOCK_DIAG` ([`init::sockdiag::exact`]):
/// the peer's socket has the peer as its local end, in any state but
/// `LISTEN` (a listening socket is never the peer).
fn diag(peer: SocketAddr, local: SocketAddr) -> io::Result<Option<u32>> {
    let not_listening = !sockdiag::state_bit(sockdiag::TCP_LISTEN);
    Ok(sockdiag::exact(peer, local, not_listening)?.map(|s| s.uid))
}

/// The same lookup by reading `/proc/net/tcp` (IPv4) or `tcp6`.
fn proc_net(peer: SocketAddr, local: SocketAddr) -> io::Result<Option<u32>> {
    let file = if peer.is_ipv4() {
        "/proc/net/tcp"
    } else {
        "/proc/net/tcp6"
    };
    let text = std::fs::read_to_string(file)?;
    let (want_local, want_remote) = (proc_address(peer), proc_address(local));
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        // sl local_address rem_address st tx:rx tr:when retrnsmt uid …
        let (Some(l), Some(r), Some(st), Some(uid)) =
            (cols.get(1), cols.get(2), cols.get(3), cols.get(7))
        else {
            continue;
        };
        if l.eq_ignore_ascii_case(&want_local)
            && r.eq_ignore_ascii_case(&want_remote)
            && *st != "0A"
        {
            return uid
                .parse()
                .map(Some)
                .map_err(|_| io::Error::other(format!("{file}: a uid of {uid:?}")));
        }
    }
    Ok(None)
}

/// An address as `/proc/net/tcp{,6}` prints it: each 32-bit word of the
/// address in host order, in hex, then `:` and the port in hex.
fn proc_address(a: SocketAddr) -> String {
    let words: Vec<[u8; 4]> = match a.ip() {
        IpAddr::V4(v4) => vec![v4.octets()],
        IpAddr::V6(v6) => Ipv6Addr::octets(&v6)
            .chunks_exact(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect(),
    };
    let mut s = String::new();
    for w in words {
        s.push_str(&format!("{:08X}", u32::from_ne_bytes(w)));
    }
    format!("{s}:{:04X}", a.port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    fn own_uid() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    #[test]
    fn the_owner_of_a_local_peer_is_found_by_netlink_and_by_proc_net_tcp_alike() {
        for bind in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(listener) = TcpListener::bind(bind) else {
                continue; // no IPv6 loopback here
            };
            let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (server_side, peer) = listener.accept().unwrap();
            let local = server_side.local_addr().unwrap();
            assert_eq!(peer, client.local_addr().unwrap());
            assert_eq!(diag(peer, local).unwrap(), Some(own_uid()), "{bind}");
            assert_eq!(proc_net(peer, local).unwrap(), Some(own_uid()), "{bind}");
            assert_eq!(owner(peer, local).unwrap(), Some(own_uid()), "{bind}");
        }
    }

    #[test]
    fn a_peer_with_no_socket_here_is_not_local() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        // Nobody connected from this address and port.
        let nobody: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(diag(nobody, local).unwrap(), None);
        assert_eq!(proc_net(nobody, local).unwrap(), None);
        // Our own listener is not the peer of a connection to itself.
        assert_eq!(owner(local, local).unwrap(), None);
    }

    #[test]
    fn proc_net_addresses_are_host_order_words_and_a_hex_port() {
        let a: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(proc_address(a), "0100007F:1F90");
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:80".parse().unwrap();
        assert_eq!(unmapped(mapped), "127.0.0.1:80".parse().unwrap());
    }
}
