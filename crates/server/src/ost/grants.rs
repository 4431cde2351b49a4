//! The space this OST has promised to clients (`loom_proto::grant`).
//!
//! Each client that writes here holds a grant: bytes the OST keeps free for
//! it, so that a write the client sent behind (already acknowledged to its
//! program) cannot fail for lack of space. The ledger is in memory only.
//! An OST that restarts starts with no grants and a new `boot`, which tells
//! each client its old grant is void.
//!
//! Space is counted from the disk's available bytes, minus what is granted
//! and minus what writes under way may still take ([`Spent`]): a write
//! without a grant goes ahead only if it fits in what is left after every
//! promise, so it can never eat a grant.

use loom_proto::grant::{OST_FORGETS_AFTER, TARGET};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// The grants of one OST.
#[derive(Debug)]
pub struct Grants {
    /// This instance, random at each start (`Reply::Written::boot`).
    boot: u64,
    state: Mutex<Ledger>,
}

#[derive(Debug)]
struct Ledger {
    clients: HashMap<u64, Held>,
    /// Sum of the clients' grants.
    granted: u64,
    /// Space writes under way may take (their costs, until they are done).
    pending: u64,
    /// When idle clients were last looked for.
    swept: Instant,
}

#[derive(Debug)]
struct Held {
    bytes: u64,
    seen: Instant,
}

/// A write's claim on space while it runs; giving it back (drop) when the
/// write is done leaves the disk's own count to say what it took.
#[derive(Debug)]
pub struct Spent<'a> {
    grants: &'a Grants,
    cost: u64,
}

impl Drop for Spent<'_> {
    fn drop(&mut self) {
        self.grants.lock().pending -= self.cost;
    }
}

/// Space figures of the disk underneath, as the ledger needs them.
#[derive(Clone, Copy, Debug)]
pub struct Disk {
    /// Bytes available to the OST now.
    pub avail: u64,
    /// The disk's size.
    pub total: u64,
}

impl Disk {
    /// Space never granted: 1% of the disk, at most 64 MiB, so that writes
    /// without a grant (a client's first, or one past its grant) still
    /// find room when grants are large.
    fn reserve(&self) -> u64 {
        (self.total / 100).min(64 << 20)
    }
}

impl Default for Grants {
    fn default() -> Self {
        Grants {
            boot: rand::random::<u64>() | 1,
            state: Mutex::new(Ledger {
                clients: HashMap::new(),
                granted: 0,
                pending: 0,
                swept: Instant::now(),
            }),
        }
    }
}

impl Grants {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This instance's identity, for the answers.
    pub fn boot(&self) -> u64 {
        self.boot
    }

    /// Admit a write of `cost` bytes (`grant::cost`) from `client`, which
    /// says it spends `used` bytes of its grant on it. What the grant does
    /// not cover (a write the client waits for, or a grant this OST no
    /// longer knows) must fit in the space nobody was promised, or the
    /// write is refused: `None`, answered ENOSPC. `disk` is read only
    /// then.
    pub fn spend(
        &self,
        client: u64,
        used: u64,
        cost: u64,
        disk: impl FnOnce() -> Option<Disk>,
    ) -> Option<Spent<'_>> {
        let mut l = self.lock();
        let covered = match l.clients.get_mut(&client) {
            Some(h) => {
                h.seen = Instant::now();
                let c = used.min(h.bytes).min(cost);
                h.bytes -= c;
                c
            }
            None => 0,
        };
        l.granted -= covered;
        let uncovered = cost - covered;
        if uncovered > 0 {
            // Promised to nobody: the disk's space less every grant and
            // every write under way (counted twice if the disk already
            // shows it: on the safe side).
            let free = disk().map_or(0, |d| d.avail);
            if free.saturating_sub(l.granted + l.pending) < uncovered {
                // The refused write keeps the grant it did not use.
                if let Some(h) = l.clients.get_mut(&client) {
                    h.bytes += covered;
                }
                l.granted += covered;
                return None;
            }
        }
        l.pending += cost;
        Some(Spent { grants: self, cost })
    }

    /// After a write of `client`'s: if its grant has run below half of
    /// [`TARGET`], the bytes granted to it now (added to its grant), at
    /// most half of the space left unpromised, so that grants shrink as
    /// the disk fills and the last bytes go to writes that are waited for.
    pub fn top_up(&self, client: u64, disk: impl FnOnce() -> Option<Disk>) -> u64 {
        let mut l = self.lock();
        let now = Instant::now();
        if now.duration_since(l.swept) >= OST_FORGETS_AFTER / 10 {
            l.forget_idle(now);
        }
        let held = l.clients.get(&client).map_or(0, |h| h.bytes);
        if held >= TARGET / 2 {
            if let Some(h) = l.clients.get_mut(&client) {
                h.seen = now;
            }
            return 0;
        }
        let Some(d) = disk() else {
            return 0;
        };
        let room = d.avail.saturating_sub(l.granted + l.pending + d.reserve());
        let add = (TARGET - held).min(room / 2);
        l.granted += add;
        let h = l.clients.entry(client).or_insert(Held {
            bytes: 0,
            seen: now,
        });
        h.bytes += add;
        h.seen = now;
        add
    }

    /// Bytes granted to all clients (for statistics and tests).
    pub fn granted(&self) -> u64 {
        self.lock().granted
    }
}

impl Ledger {
    /// Drop the grants of clients not heard from for
    /// [`OST_FORGETS_AFTER`] (they stop spending them after half of it).
    fn forget_idle(&mut self, now: Instant) {
        let before = self.clients.len();
        let mut freed = 0;
        self.clients.retain(|_, h| {
            let keep = now.duration_since(h.seen) < OST_FORGETS_AFTER;
            if !keep {
                freed += h.bytes;
            }
            keep
        });
        self.granted -= freed;
        self.swept = now;
        if freed > 0 {
            tracing::info!(
                clients = before - self.clients.len(),
                bytes = freed,
                "forgot the space grants of idle clients"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn disk(avail: u64) -> impl FnOnce() -> Option<Disk> {
        move || {
            // No reserve: the figures below are exact halves.
            Some(Disk { avail, total: 0 })
        }
    }

    #[test]
    fn a_first_write_is_checked_against_the_disk_and_earns_a_grant() {
        let g = Grants::default();
        let s = g.spend(1, 0, MIB, disk(100 * MIB)).expect("fits");
        drop(s);
        // Half of what is unpromised, up to the target.
        assert_eq!(g.top_up(1, disk(1000 * MIB)), TARGET);
        assert_eq!(g.granted(), TARGET);
        // Spending it needs no look at the disk.
        let s = g.spend(1, MIB, MIB, || panic!("covered writes do not look"));
        assert!(s.is_some());
        assert_eq!(g.granted(), TARGET - MIB);
        // Above half the target: nothing more yet.
        drop(s);
        assert_eq!(g.top_up(1, || panic!("no top-up needed")), 0);
    }

    #[test]
    fn writes_without_a_grant_cannot_take_anothers_grant() {
        let g = Grants::default();
        // Client 1 holds 40 MiB of a 100 MiB disk (half of 80 unpromised,
        // with the reserve of a 2 GiB disk).
        let d = |avail| {
            move || {
                Some(Disk {
                    avail,
                    total: 2 << 30,
                })
            }
        };
        let got = g.top_up(1, d(100 * MIB));
        assert!(got > 30 * MIB && got <= 50 * MIB, "{got}");
        // Client 2, without a grant, may use what is left, not more.
        let left = 100 * MIB - got;
        assert!(g.spend(2, 0, left + 1, d(100 * MIB)).is_none());
        let s = g.spend(2, 0, left, d(100 * MIB)).expect("fits beside it");
        // While it runs, its space is taken too.
        assert!(g.spend(3, 0, 1, d(100 * MIB)).is_none());
        drop(s);
        // Client 1 spends its grant whatever the disk says.
        assert!(g.spend(1, got, got, disk(0)).is_some());
    }

    #[test]
    fn a_grant_this_ost_does_not_know_is_checked_like_none() {
        // After a restart, a client spends a grant of the earlier instance.
        let g = Grants::default();
        assert!(g.spend(7, MIB, MIB, disk(MIB / 2)).is_none());
        assert!(g.spend(7, MIB, MIB, disk(2 * MIB)).is_some());
        // A refused write keeps what it held.
        assert_eq!(g.top_up(7, disk(10 * MIB)), 5 * MIB);
        assert!(g.spend(7, 6 * MIB, 6 * MIB, disk(0)).is_none());
        assert_eq!(g.granted(), 5 * MIB);
    }

    #[test]
    fn grants_shrink_as_the_disk_fills() {
        let g = Grants::default();
        let mut last = u64::MAX;
        for c in 0..8 {
            let got = g.top_up(c, disk(64 * MIB));
            assert!(got <= last, "client {c} got {got} after {last}");
            last = got;
        }
        assert!(g.granted() <= 64 * MIB);
        assert!(last < MIB, "the last grants are small: {last}");
    }

    #[test]
    fn idle_clients_lose_their_grants() {
        let g = Grants::default();
        g.top_up(1, disk(1 << 40));
        {
            let mut l = g.lock();
            let old = Instant::now() - OST_FORGETS_AFTER - std::time::Duration::from_secs(1);
            l.clients.get_mut(&1).expect("held").seen = old;
            l.swept = old;
        }
        // Client 2's top-up sweeps client 1 away.
        g.top_up(2, disk(1 << 40));
        assert_eq!(g.granted(), TARGET);
    }
}
