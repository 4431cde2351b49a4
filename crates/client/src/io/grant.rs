//! The space grants this client holds on each OST (`loom_proto::grant`).
//!
//! A write covered by the grant of every OST it goes to is sent behind:
//! `write(2)` returns before the OSTs answer, and nothing can make it fail
//! for lack of space later. A write not covered is waited for, so its
//! `ENOSPC` reaches `write(2)`. Each OST's answer to a write adds to the
//! grant; an answer from a new instance of the OST (it restarted and forgot
//! what it granted) replaces it.

use loom_proto::grant::CLIENT_DROPS_AFTER;
use loom_proto::quota::Owner;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

/// Grants by OST index.
#[derive(Debug, Default)]
pub struct Grants {
    held: Mutex<HashMap<u32, Held>>,
    /// Owners an OST said are near a block limit there: their writes to
    /// it are not sent behind until an answer of that OST to one of them
    /// says they are no longer near, so that EDQUOT is the write's error
    /// (and what a client stores past a limit is only what it had sent
    /// behind before the first such answer).
    near: Mutex<HashSet<(u32, Owner)>>,
}

#[derive(Debug)]
struct Held {
    /// The OST instance that granted it.
    boot: u64,
    bytes: u64,
    /// When an answer of that OST last said anything about it: the OST
    /// forgets an idle client's grant, and this client stops trusting it
    /// first.
    heard: Instant,
}

/// Grant taken for a write not sent yet: spent by the write's requests
/// ([`Taken::spend`]), the rest given back by [`Grants::give_back`].
#[derive(Debug, Default)]
pub struct Taken {
    /// (OST, its instance, bytes).
    parts: Vec<(u32, u64, u64)>,
}

impl Taken {
    /// Take `cost` bytes of what was taken on `ost` for one request; false
    /// if it holds less (the request then spends none of it).
    pub fn spend(&mut self, ost: u32, cost: u64) -> bool {
        match self.parts.iter_mut().find(|p| p.0 == ost) {
            Some(p) if p.2 >= cost => {
                p.2 -= cost;
                true
            }
            _ => false,
        }
    }

    /// Whether nothing is left in it.
    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(|p| p.2 == 0)
    }

    /// Hold what `other` holds too.
    pub fn absorb(&mut self, other: Taken) {
        for (ost, boot, c) in other.parts {
            match self.parts.iter_mut().find(|p| p.0 == ost && p.1 == boot) {
                Some(p) => p.2 += c,
                None => self.parts.push((ost, boot, c)),
            }
        }
    }
}

impl Grants {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take `costs` (bytes per OST, an OST may appear more than once) from
    /// the grants, all or nothing: `None` if any OST's grant is short.
    pub fn take(&self, costs: &[(u32, u64)]) -> Option<Taken> {
        let mut need: Vec<(u32, u64)> = Vec::new();
        for &(ost, c) in costs {
            match need.iter_mut().find(|n| n.0 == ost) {
                Some(n) => n.1 += c,
                None => need.push((ost, c)),
            }
        }
        let mut held = self.lock();
        let now = Instant::now();
        for (ost, c) in &need {
            match held.get(ost) {
                Some(h) if h.bytes >= *c && now.duration_since(h.heard) < CLIENT_DROPS_AFTER => {}
                _ => return None,
            }
        }
        let mut taken = Taken::default();
        for (ost, c) in need {
            if let Some(h) = held.get_mut(&ost) {
                h.bytes -= c;
                taken.parts.push((ost, h.boot, c));
            }
        }
        Some(taken)
    }

    /// Take `cost` bytes from the OST that holds the most (for bytes
    /// whose OST is not chosen yet); `None` if none holds that much.
    pub fn take_most(&self, cost: u64) -> Option<Taken> {
        let ost = {
            let held = self.lock();
            let now = Instant::now();
            held.iter()
                .filter(|(_, h)| now.duration_since(h.heard) < CLIENT_DROPS_AFTER)
                .max_by_key(|(_, h)| h.bytes)
                .map(|(ost, _)| *ost)?
        };
        self.take(&[(ost, cost)])
    }

    /// Give back what `taken` did not spend (to the instance that granted
    /// it only).
    pub fn give_back(&self, taken: Taken) {
        let mut held = self.lock();
        for (ost, boot, c) in taken.parts {
            if let Some(h) = held.get_mut(&ost).filter(|h| h.boot == boot) {
                h.bytes += c;
            }
        }
    }

    /// OST `ost`, instance `boot`, answered a write and granted `added`.
    pub fn credit(&self, ost: u32, boot: u64, added: u64) {
        let now = Instant::now();
        let mut held = self.lock();
        let h = held.entry(ost).or_insert(Held {
            boot,
            bytes: 0,
            heard: now,
        });
        if h.boot != boot {
            tracing::info!(
                ost,
                "OST restarted: the space it had granted this client is void"
            );
            h.boot = boot;
            h.bytes = 0;
        }
        h.bytes += added;
        h.heard = now;
    }

    /// Bytes held on `ost` (for tests and statistics).
    pub fn held(&self, ost: u32) -> u64 {
        self.lock().get(&ost).map_or(0, |h| h.bytes)
    }
}

impl Grants {
    /// OST `ost` answered a write of `owner`'s bytes, near a block limit
    /// there or not.
    pub fn quota_answer(&self, ost: u32, owner: Owner, near: bool) {
        let mut m = self.near.lock().unwrap_or_else(|p| p.into_inner());
        if near {
            m.insert((ost, owner));
        } else if !m.is_empty() {
            m.remove(&(ost, owner));
        }
    }

    /// Whether `owner` is near a block limit on any OST.
    pub fn near_anywhere(&self, owner: Owner) -> bool {
        let m = self.near.lock().unwrap_or_else(|p| p.into_inner());
        m.iter().any(|(_, o)| *o == owner)
    }

    /// Whether `owner`'s writes to `ost` must be waited for (near a limit).
    pub fn quota_near(&self, ost: u32, owner: Owner) -> bool {
        let m = self.near.lock().unwrap_or_else(|p| p.into_inner());
        !m.is_empty() && m.contains(&(ost, owner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_takes_grant_on_every_ost_or_none() {
        let g = Grants::default();
        assert!(g.take(&[(0, 1)]).is_none(), "nothing granted yet");
        g.credit(0, 9, 100);
        g.credit(1, 9, 10);
        assert!(g.take(&[(0, 50), (1, 11)]).is_none());
        assert_eq!((g.held(0), g.held(1)), (100, 10), "all or nothing");
        // The same OST twice counts twice.
        assert!(g.take(&[(0, 60), (0, 60)]).is_none());
        let mut t = g.take(&[(0, 60), (1, 10)]).expect("covered");
        assert!(t.spend(0, 40));
        assert!(!t.spend(1, 11));
        assert!(t.spend(1, 10));
        assert!(!t.is_empty());
        g.give_back(t);
        assert_eq!((g.held(0), g.held(1)), (60, 0));
    }

    #[test]
    fn a_restarted_ost_voids_its_grant() {
        let g = Grants::default();
        g.credit(2, 1, 100);
        let t = g.take(&[(2, 30)]).expect("covered");
        g.credit(2, 5, 7);
        assert_eq!(g.held(2), 7);
        // What was taken from the old instance does not come back.
        g.give_back(t);
        assert_eq!(g.held(2), 7);
    }

    #[test]
    fn a_grant_not_heard_of_for_long_is_not_spent() {
        let g = Grants::default();
        g.credit(3, 1, 100);
        g.lock().get_mut(&3).expect("held").heard =
            Instant::now() - CLIENT_DROPS_AFTER - std::time::Duration::from_secs(1);
        assert!(g.take(&[(3, 1)]).is_none());
        // A fresh answer brings it back.
        g.credit(3, 1, 0);
        assert!(g.take(&[(3, 1)]).is_some());
    }
}
