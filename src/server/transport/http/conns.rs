//! The table of a listener's open connections: how many there are, which
//! are serving a request, which have shown the token, and which to drop when
//! a new one arrives at the limit (`MCP_EXEC_HTTP_MAX_CONNECTIONS`).
//!
//! # Why a table, not a semaphore
//! A permit taken *before* `accept()` let anyone who can reach the port lock
//! the listener: a process without the token held every slot with idle
//! connections, the accept loop stopped, the kernel's backlog filled and the
//! token holders' SYNs were dropped (issue 20, item 1). So the listener
//! always accepts, and the table decides at once what the new connection
//! costs: a free slot, or the slot of the connection least worth keeping,
//! or — when every open connection is worth keeping — a `503` and a close.
//!
//! # Who is evicted
//! Only a connection with no request in flight that has never carried the
//! token ([`Conn::authorized`]): one that has sent nothing yet (first, the
//! oldest first), then one that has sent bytes but no request the server is
//! serving (a head in progress, or idle between unauthenticated requests),
//! and last one whose task has not looked at its socket yet (the accept
//! loop drains the kernel's queue before the new tasks run, and a token
//! holder's request usually arrived with its connection: it must not be
//! taken for silent before anyone looked).
//! A connection of a token holder — or any connection while no token is set,
//! since then every request is authorized — is never evicted; neither is one
//! whose request is being served.
//!
//! # Invariants
//! - The table holds at most `max` entries: a new one enters only into a
//!   free slot or one just vacated by an eviction, under the same lock.
//! - An evicted entry leaves the table when chosen (its slot is the new
//!   connection's); its task drops the socket when it sees the token.
//! - An entry is marked busy under the lock that eviction takes, so a
//!   connection is never chosen once the server has started to serve it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::state::lock;

/// What a connection has sent, as far as its task has seen.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Heard {
    /// Its task waits for a first byte that has not come: evicted first.
    Nothing,
    /// It has sent bytes.
    Bytes,
    /// Its task has not run yet, so whether bytes wait in its socket is
    /// unknown: evicted last, as it may be a token holder's request that
    /// arrived with it.
    Unknown,
}

/// One open connection's entry.
struct Conn {
    /// Requests of it being served (their responses not yet dropped).
    busy: usize,
    heard: Heard,
    /// Whether any request on it carried the token.
    authorized: bool,
    /// Cancelled to evict it.
    evict: CancellationToken,
}

/// A listener's open connections, keyed by accept order (oldest first).
pub(super) struct Conns {
    max: usize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next: u64,
    open: BTreeMap<u64, Conn>,
}

/// What [`Conns::admit`] decided for a new connection.
pub(super) enum Admission {
    /// It has a slot: serve it until `evicted` is cancelled or it ends.
    Admitted(ConnSlot),
    /// Every slot is held by a connection worth keeping: answer `503`, close.
    Full,
}

impl Conns {
    /// A table of at most `max` connections (at least 1).
    pub(super) fn new(max: usize) -> Arc<Conns> {
        Arc::new(Conns {
            max: max.max(1),
            table: Mutex::default(),
        })
    }

    /// A slot for a connection just accepted: a free one, or one taken from
    /// the connection least worth keeping (see the module doc).
    pub(super) fn admit(self: &Arc<Conns>) -> Admission {
        let mut t = lock(&self.table);
        if t.open.len() >= self.max {
            // The lowest `Heard`, the oldest among equals (`min_by_key`
            // keeps the first of equal keys, and the map is in accept order).
            let victim = t
                .open
                .iter()
                .filter(|(_, c)| c.busy == 0 && !c.authorized)
                .min_by_key(|(_, c)| c.heard)
                .map(|(id, _)| *id);
            let Some(victim) = victim else {
                return Admission::Full;
            };
            if let Some(c) = t.open.remove(&victim) {
                c.evict.cancel();
                crate::metrics::http_connection_dropped("evicted");
            }
        }
        let id = t.next;
        t.next += 1;
        let evict = CancellationToken::new();
        t.open.insert(
            id,
            Conn {
                busy: 0,
                heard: Heard::Unknown,
                authorized: false,
                evict: evict.clone(),
            },
        );
        Admission::Admitted(ConnSlot {
            conns: Arc::clone(self),
            id,
            evict,
        })
    }

    /// How many connections are open.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.table).open.len()
    }

    fn with(&self, id: u64, f: impl FnOnce(&mut Conn)) {
        if let Some(c) = lock(&self.table).open.get_mut(&id) {
            f(c);
        }
    }
}

/// A connection's place in the table; dropping it frees the slot.
pub(super) struct ConnSlot {
    conns: Arc<Conns>,
    id: u64,
    evict: CancellationToken,
}

impl ConnSlot {
    /// Cancelled when the connection is evicted.
    pub(super) fn evicted(&self) -> &CancellationToken {
        &self.evict
    }

    /// The connection's task waits for its first byte.
    pub(super) fn waiting(&self) {
        self.conns.with(self.id, |c| c.heard = Heard::Nothing);
    }

    /// The connection has sent its first byte.
    pub(super) fn heard(&self) {
        self.conns.with(self.id, |c| c.heard = Heard::Bytes);
    }

    /// A request of it is being served until the returned guard drops;
    /// `authorized` says whether it carried the token (then the connection
    /// is never evicted).
    pub(super) fn serving(self: &Arc<ConnSlot>, authorized: bool) -> InUse {
        self.conns.with(self.id, |c| {
            c.busy += 1;
            c.heard = Heard::Bytes;
            c.authorized |= authorized;
        });
        InUse(Arc::clone(self))
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        lock(&self.conns.table).open.remove(&self.id);
    }
}

/// A request being served on a connection (it travels in the response body).
pub struct InUse(Arc<ConnSlot>);

impl Drop for InUse {
    fn drop(&mut self) {
        self.0
            .conns
            .with(self.0.id, |c| c.busy = c.busy.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(conns: &Arc<Conns>) -> Arc<ConnSlot> {
        match conns.admit() {
            Admission::Admitted(slot) => Arc::new(slot),
            Admission::Full => panic!("refused"),
        }
    }

    #[test]
    fn a_new_connection_at_the_limit_evicts_the_oldest_silent_one_first() {
        let conns = Conns::new(3);
        let spoke = admitted(&conns);
        spoke.heard();
        let silent_old = admitted(&conns);
        silent_old.waiting();
        let silent_new = admitted(&conns);
        silent_new.waiting();
        let _fourth = admitted(&conns);
        assert!(silent_old.evicted().is_cancelled());
        assert!(!spoke.evicted().is_cancelled() && !silent_new.evicted().is_cancelled());
        assert_eq!(conns.len(), 3);
    }

    #[test]
    fn one_that_has_spoken_is_evicted_only_when_none_is_silent() {
        let conns = Conns::new(2);
        let a = admitted(&conns);
        a.heard();
        let b = admitted(&conns);
        b.heard();
        let _c = admitted(&conns);
        assert!(a.evicted().is_cancelled() && !b.evicted().is_cancelled());
    }

    #[test]
    fn one_whose_task_has_not_looked_yet_is_evicted_last() {
        let conns = Conns::new(3);
        let unknown = admitted(&conns);
        let spoke = admitted(&conns);
        spoke.heard();
        let silent = admitted(&conns);
        silent.waiting();
        let _d = admitted(&conns);
        assert!(silent.evicted().is_cancelled());
        let _e = admitted(&conns);
        assert!(spoke.evicted().is_cancelled() && !unknown.evicted().is_cancelled());
    }

    #[test]
    fn a_token_holder_or_a_request_being_served_is_never_evicted_so_the_newcomer_is_refused() {
        let conns = Conns::new(2);
        let holder = admitted(&conns);
        drop(holder.serving(true));
        let serving = admitted(&conns);
        let _in_flight = serving.serving(false);
        assert!(matches!(conns.admit(), Admission::Full));
        assert!(!holder.evicted().is_cancelled() && !serving.evicted().is_cancelled());
        assert_eq!(conns.len(), 2);
    }

    #[test]
    fn a_closed_connection_frees_its_slot() {
        let conns = Conns::new(1);
        let holder = admitted(&conns);
        drop(holder.serving(true));
        assert!(matches!(conns.admit(), Admission::Full));
        drop(holder);
        assert!(matches!(conns.admit(), Admission::Admitted(_)));
    }
}
