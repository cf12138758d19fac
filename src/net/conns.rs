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
//! token ([`Conn::authorized`]). Whether a connection has sent bytes is
//! looked at when it is accepted (a token holder's request has usually
//! arrived by then) and then by its task. A newcomer that has sent bytes
//! takes the slot of a silent connection (the oldest first), else of one
//! that has sent bytes but has no request being served (a head in
//! progress, or idle between unauthenticated requests). A silent newcomer
//! takes only the slot of a silent connection older than [`GRACE`]: it has
//! no better claim than one whose bytes may be on their way. When it finds
//! none, the accept loop lets it wait up to [`GRACE`] for its first bytes
//! (a bounded number at once) and asks again as a newcomer that has sent
//! bytes: a token holder slow to send on a loaded machine is not refused.
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
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// How long a silent connection is safe from a silent newcomer: its
/// first bytes may be on their way (or seen by the kernel and not yet by
/// its task), and a newcomer that has sent nothing either has no better
/// claim to the slot.
pub const GRACE: Duration = Duration::from_millis(250);

/// One open connection's entry.
struct Conn {
    /// Requests of it being served (their responses not yet dropped).
    busy: usize,
    /// Whether it has sent any byte (looked at when it was accepted, then
    /// by its task).
    heard: bool,
    accepted: Instant,
    /// Whether any request on it carried the token.
    authorized: bool,
    /// Cancelled to evict it.
    evict: CancellationToken,
    /// Since when no request of it has been served (while `busy` is 0).
    idle_since: Instant,
}

/// A listener's open connections, keyed by accept order (oldest first).
pub struct Conns {
    /// The listener's name, for the metrics.
    listener: &'static str,
    max: usize,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next: u64,
    open: BTreeMap<u64, Conn>,
}

/// What [`Conns::admit`] decided for a new connection.
pub enum Admission {
    /// It has a slot: serve it until `evicted` is cancelled or it ends.
    Admitted(ConnSlot),
    /// Every slot is held by a connection worth keeping: answer `503`, close.
    Full,
}

impl Conns {
    /// A table of at most `max` connections (at least 1).
    pub fn new(listener: &'static str, max: usize) -> Arc<Conns> {
        Arc::new(Conns {
            listener,
            max: max.max(1),
            table: Mutex::default(),
        })
    }

    /// A slot for a connection just accepted, which has already sent bytes
    /// (`heard`) or not: a free one, or one taken from the connection least
    /// worth keeping (see the module doc).
    pub fn admit(self: &Arc<Conns>, heard: bool) -> Admission {
        let now = Instant::now();
        let mut t = lock(&self.table);
        if t.open.len() >= self.max {
            let evictable = |c: &&Conn| c.busy == 0 && !c.authorized;
            // The map is in accept order: `find` takes the oldest.
            let silent_old = t
                .open
                .iter()
                .find(|(_, c)| evictable(c) && !c.heard && now.duration_since(c.accepted) >= GRACE);
            let victim = if heard {
                silent_old
                    .or_else(|| t.open.iter().find(|(_, c)| evictable(c) && !c.heard))
                    .or_else(|| t.open.iter().find(|(_, c)| evictable(c)))
            } else {
                silent_old
            }
            .map(|(id, _)| *id);
            let Some(victim) = victim else {
                return Admission::Full;
            };
            if let Some(c) = t.open.remove(&victim) {
                c.evict.cancel();
                crate::metrics::http_connection_dropped(self.listener, "evicted");
            }
        }
        let id = t.next;
        t.next += 1;
        let evict = CancellationToken::new();
        t.open.insert(
            id,
            Conn {
                busy: 0,
                heard,
                accepted: now,
                authorized: false,
                evict: evict.clone(),
                idle_since: now,
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
pub struct ConnSlot {
    conns: Arc<Conns>,
    id: u64,
    evict: CancellationToken,
}

impl ConnSlot {
    /// Cancelled when the connection is evicted.
    pub fn evicted(&self) -> &CancellationToken {
        &self.evict
    }

    /// The connection has sent its first byte.
    pub fn heard(&self) {
        self.conns.with(self.id, |c| c.heard = true);
    }

    /// A request of it is being served until the returned guard drops;
    /// `authorized` says whether it carried the token (then the connection
    /// is never evicted).
    pub fn serving(self: &Arc<ConnSlot>, authorized: bool) -> InUse {
        self.conns.with(self.id, |c| {
            c.busy += 1;
            c.heard = true;
            c.authorized |= authorized;
        });
        InUse(Arc::clone(self))
    }

    /// How long no request of it has been served, and whether any request
    /// on it carried the token; `None` while one is being served.
    #[cfg_attr(not(feature = "sandboxd"), allow(dead_code))]
    pub fn idle(&self) -> Option<(Duration, bool)> {
        let t = lock(&self.conns.table);
        let c = t.open.get(&self.id)?;
        (c.busy == 0).then(|| (c.idle_since.elapsed(), c.authorized))
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
        self.0.conns.with(self.0.id, |c| {
            c.busy = c.busy.saturating_sub(1);
            if c.busy == 0 {
                c.idle_since = Instant::now();
            }
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(conns: &Arc<Conns>, heard: bool) -> Arc<ConnSlot> {
        match conns.admit(heard) {
            Admission::Admitted(slot) => Arc::new(slot),
            Admission::Full => panic!("refused"),
        }
    }

    fn age(conns: &Conns, slot: &ConnSlot) {
        conns.with(slot.id, |c| c.accepted -= GRACE);
    }

    #[test]
    fn a_newcomer_that_has_sent_bytes_evicts_the_oldest_silent_connection_first() {
        let conns = Conns::new("test", 3);
        let spoke = admitted(&conns, true);
        let silent_old = admitted(&conns, false);
        let silent_new = admitted(&conns, false);
        let _fourth = admitted(&conns, true);
        assert!(silent_old.evicted().is_cancelled());
        assert!(!spoke.evicted().is_cancelled() && !silent_new.evicted().is_cancelled());
        assert_eq!(conns.len(), 3);
    }

    #[test]
    fn one_that_has_spoken_is_evicted_only_when_none_is_silent() {
        let conns = Conns::new("test", 2);
        let a = admitted(&conns, true);
        let b = admitted(&conns, false);
        b.heard();
        let _c = admitted(&conns, true);
        assert!(a.evicted().is_cancelled() && !b.evicted().is_cancelled());
    }

    #[test]
    fn a_silent_newcomer_evicts_only_a_silent_connection_older_than_the_grace() {
        let conns = Conns::new("test", 2);
        let spoke = admitted(&conns, true);
        let young = admitted(&conns, false);
        assert!(matches!(conns.admit(false), Admission::Full));
        age(&conns, &young);
        let _newcomer = admitted(&conns, false);
        assert!(young.evicted().is_cancelled() && !spoke.evicted().is_cancelled());
        assert!(matches!(conns.admit(false), Admission::Full));
    }

    #[test]
    fn a_token_holder_or_a_request_being_served_is_never_evicted_so_the_newcomer_is_refused() {
        let conns = Conns::new("test", 2);
        let holder = admitted(&conns, true);
        drop(holder.serving(true));
        let serving = admitted(&conns, true);
        let _in_flight = serving.serving(false);
        assert!(matches!(conns.admit(true), Admission::Full));
        assert!(!holder.evicted().is_cancelled() && !serving.evicted().is_cancelled());
        assert_eq!(conns.len(), 2);
    }

    #[test]
    fn a_closed_connection_frees_its_slot() {
        let conns = Conns::new("test", 1);
        let holder = admitted(&conns, true);
        drop(holder.serving(true));
        assert!(matches!(conns.admit(true), Admission::Full));
        drop(holder);
        assert!(matches!(conns.admit(true), Admission::Admitted(_)));
    }
}
