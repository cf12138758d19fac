//! Ports (docs/tools.md, "Ports"): every listening TCP socket in the
//! container, each attributed to the job whose processes hold it.
//!
//! The look at `/proc` is `init::listeners` (the sockets of
//! `/proc/net/tcp{,6}`, their holders by descriptor); this module adds what
//! only the table knows: which job a holder belongs to. A holder belongs to
//! a job when it is in the job's process group (a pipe job) or its session
//! (a terminal job, whose shell gives each command a group of its own), as
//! the table recorded them at start. A socket held by several processes
//! (a server that forked after `listen`) goes to the first holder that
//! belongs to a job, else to its lowest pid; one this server holds is
//! its own listener and is left out.
//!
//! # Invariants
//! - No cost when nobody asks: a look happens for `GET /ports`, a proxied
//!   request, a `status` or `list_jobs` that shows a running job, and a
//!   `wait` with `until.port` — that one on a bounded backoff
//!   ([`FIRST_RELOOK`] doubling to [`LAST_RELOOK`], restarted by a listed
//!   job's output, and never shorter than [`LOOK_SHARE`] times the last
//!   look), since a `listen()` makes no event.
//! - A process that left its job's group and session (`setsid`, a
//!   daemon's double fork) is no longer the job's: its sockets are listed
//!   with `job_id: null`, never guessed.

use std::collections::HashMap;
use std::time::Duration;

use init::listeners::{self, Listening};
use serde::Serialize;

use super::{JobId, Jobs, Shared};

/// The first re-look for a `wait` until a port.
pub(super) const FIRST_RELOOK: Duration = Duration::from_millis(5);

/// The longest pause between two looks for a `wait` until a port: a listener
/// shows within this (plus one look) of its `listen()`.
pub(super) const LAST_RELOOK: Duration = Duration::from_millis(50);

/// A pause is at least this many times the last look's duration, so that a
/// slow look (a busy host's `/proc`) costs a waiter at most a fifth of a
/// core.
pub(super) const LOOK_SHARE: u32 = 4;

/// One listening socket, as `GET /ports` and a job's `ports` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Port {
    /// The port.
    pub port: u16,
    /// `tcp` or `tcp6`.
    pub proto: &'static str,
    /// The bound address (`0.0.0.0`, `::`, `127.0.0.1`, …).
    pub addr: String,
    /// Bound to a loopback address only: unreachable from outside the
    /// container (the proxy still reaches it).
    pub loopback_only: bool,
    /// The process that holds it (`null` when none could be read).
    pub pid: Option<i32>,
    /// The job that process belongs to (`null`: none in the table).
    pub job_id: Option<JobId>,
}

/// One look for the preview proxy: the ports `GET /ports` lists, and the
/// port numbers this server itself listens on (on any address), which the
/// proxy never reaches whatever else listens on them.
#[derive(Debug, Default)]
pub struct ProxyLook {
    /// Every listening TCP socket but this server's own.
    pub ports: Vec<Port>,
    /// The ports of this server's own listeners.
    pub own: Vec<u16>,
}

impl Jobs {
    /// Every listening TCP socket in the container but this server's own,
    /// by port (docs/http.md, "Ports").
    pub fn ports(&self) -> Vec<Port> {
        self.shared.look_ports().ports
    }

    /// [`Jobs::ports`], and the ports of this server's own listeners.
    pub fn proxy_look(&self) -> ProxyLook {
        self.shared.look_ports()
    }
}

impl Shared {
    /// One look: the listening sockets, attributed.
    pub(super) fn ports(&self) -> Vec<Port> {
        self.look_ports().ports
    }

    fn look_ports(&self) -> ProxyLook {
        let found = listeners::listening();
        if found.is_empty() {
            return ProxyLook::default();
        }
        // The newest job wins a group id the table holds twice (an old
        // terminal job's group, its number reused).
        let mut groups: HashMap<i32, JobId> = HashMap::new();
        let mut sessions: HashMap<i32, JobId> = HashMap::new();
        for (id, pgid, tty) in self.table.groups() {
            if tty {
                sessions.insert(pgid.0, id);
            } else {
                groups.insert(pgid.0, id);
            }
        }
        let me = rustix::process::getpid().as_raw_nonzero().get();
        let (own, others): (Vec<_>, Vec<_>) = found
            .into_iter()
            .partition(|s| s.holders.iter().any(|h| h.pid == me));
        let mut own: Vec<u16> = own.iter().map(|s| s.addr.port()).collect();
        own.sort_unstable();
        own.dedup();
        ProxyLook {
            ports: others
                .iter()
                .map(|s| attribute(s, &groups, &sessions))
                .collect(),
            own,
        }
    }
}

/// Which job (if any) holds socket `s`, and through which process.
fn attribute(s: &Listening, groups: &HashMap<i32, JobId>, sessions: &HashMap<i32, JobId>) -> Port {
    let job_of = |h: &listeners::Holder| {
        groups
            .get(&h.pgrp)
            .or_else(|| sessions.get(&h.session))
            .copied()
    };
    let (pid, job_id) = s
        .holders
        .iter()
        .find_map(|h| job_of(h).map(|j| (Some(h.pid), Some(j))))
        .unwrap_or((s.holders.first().map(|h| h.pid), None));
    Port {
        port: s.addr.port(),
        proto: s.proto.name(),
        addr: s.addr.ip().to_string(),
        loopback_only: s.loopback_only(),
        pid,
        job_id,
    }
}

/// The ports of job `id` among `all`.
pub(super) fn of(all: &[Port], id: JobId) -> Vec<Port> {
    all.iter()
        .filter(|p| p.job_id == Some(id))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use init::listeners::{Holder, Proto};

    fn socket(holders: &[(i32, i32, i32)]) -> Listening {
        Listening {
            addr: "127.0.0.1:8080".parse().expect("addr"),
            proto: Proto::Tcp,
            holders: holders
                .iter()
                .map(|&(pid, pgrp, session)| Holder { pid, pgrp, session })
                .collect(),
        }
    }

    #[test]
    fn a_holder_in_a_pipe_jobs_group_or_a_terminal_jobs_session_is_that_jobs() {
        let groups = HashMap::from([(100, JobId(1))]);
        let sessions = HashMap::from([(200, JobId(2))]);
        let p = attribute(&socket(&[(101, 100, 1)]), &groups, &sessions);
        assert_eq!((p.pid, p.job_id), (Some(101), Some(JobId(1))));
        let p = attribute(&socket(&[(205, 205, 200)]), &groups, &sessions);
        assert_eq!((p.pid, p.job_id), (Some(205), Some(JobId(2))));
        assert!(p.loopback_only);
        assert_eq!(
            (p.port, p.proto, p.addr.as_str()),
            (8080, "tcp", "127.0.0.1")
        );
    }

    #[test]
    fn a_shared_socket_goes_to_the_holder_in_a_job_and_an_unowned_one_to_its_lowest_pid() {
        let groups = HashMap::from([(100, JobId(1))]);
        let p = attribute(
            &socket(&[(50, 50, 50), (101, 100, 1)]),
            &groups,
            &HashMap::new(),
        );
        assert_eq!((p.pid, p.job_id), (Some(101), Some(JobId(1))));
        let p = attribute(
            &socket(&[(50, 50, 50), (60, 60, 60)]),
            &groups,
            &HashMap::new(),
        );
        assert_eq!((p.pid, p.job_id), (Some(50), None));
        let p = attribute(&socket(&[]), &groups, &HashMap::new());
        assert_eq!((p.pid, p.job_id), (None, None));
    }
}
