//! What the router counts: calls by role and by operation, lookups answered
//! from leases, changes on their way, and the request sequence numbers
//! still waiting for a reply.

use super::lock;
use loom_proto::msg::Role;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Counters kept on every request's path: lock-free.
pub(super) struct Counters {
    /// Calls made, by target role (MGS, MDT, OST), resends not counted.
    calls: [AtomicU64; 3],
    /// Requests sent, by opcode (resends not counted).
    ops: [AtomicU64; 256],
    /// Lookups answered from leases, with no server asked.
    lease_hits: AtomicU64,
    /// Changes on their way (see [`super::Router::changes_in_flight`]).
    changing: AtomicU64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            calls: Default::default(),
            ops: std::array::from_fn(|_| AtomicU64::new(0)),
            lease_hits: AtomicU64::new(0),
            changing: AtomicU64::new(0),
        }
    }
}

impl Counters {
    /// One call to a target of `role` sending opcode `op`.
    pub(super) fn sent(&self, role: Role, op: u16) {
        self.calls[role_slot(role)].fetch_add(1, Ordering::Relaxed);
        if let Some(n) = self.ops.get(usize::from(op)) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One change sent in a batch (counted by its operation; the batch is
    /// the call).
    pub(super) fn batched(&self, op: u16) {
        if let Some(n) = self.ops.get(usize::from(op)) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A change on its way until the guard drops.
    pub(super) fn changing(&self) -> InFlight<'_> {
        InFlight::new(&self.changing)
    }

    pub(super) fn changes_in_flight(&self) -> u64 {
        self.changing.load(Ordering::Acquire)
    }

    pub(super) fn lease_hit(&self) {
        self.lease_hits.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn lease_hits(&self) -> u64 {
        self.lease_hits.load(Ordering::Relaxed)
    }

    /// Requests sent so far, by operation, sorted.
    pub(super) fn ops_sent(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<(&'static str, u64)> = loom_proto::requests::all_ops()
            .filter_map(|op| {
                let n = self
                    .ops
                    .get(usize::from(op.opcode))?
                    .load(Ordering::Relaxed);
                (n > 0).then_some((op.name, n))
            })
            .collect();
        // An opcode that several services declare counts once.
        v.sort();
        v.dedup();
        v
    }

    /// Calls made to MDTs and to OSTs.
    pub(super) fn calls(&self) -> (u64, u64) {
        let n = |r: Role| self.calls[role_slot(r)].load(Ordering::Relaxed);
        (n(Role::Mdt), n(Role::Ost))
    }
}

fn role_slot(r: Role) -> usize {
    match r {
        Role::Mgs => 0,
        Role::Mdt => 1,
        Role::Ost => 2,
    }
}

/// Counts one request in a counter while it lives.
pub(super) struct InFlight<'a>(&'a AtomicU64);

impl<'a> InFlight<'a> {
    fn new(c: &'a AtomicU64) -> InFlight<'a> {
        c.fetch_add(1, Ordering::AcqRel);
        InFlight(c)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// This client's request sequence numbers and those still waiting.
pub(super) struct Sequences(Mutex<Waiting>);

struct Waiting {
    next: u64,
    waiting: BTreeSet<u64>,
}

impl Default for Sequences {
    fn default() -> Self {
        Sequences(Mutex::new(Waiting {
            next: 1,
            waiting: BTreeSet::new(),
        }))
    }
}

/// A call's sequence number, released when the call ends however it ends.
pub(super) struct SeqGuard<'a>(&'a Sequences, pub(super) u64);

impl Drop for SeqGuard<'_> {
    fn drop(&mut self) {
        lock(&self.0 .0).waiting.remove(&self.1);
    }
}

impl Sequences {
    /// Take the next sequence number; returns it with the lowest number
    /// still waiting (itself included). A number taken later is always
    /// higher, so no request at or above the mark can be one a server
    /// still has to answer from its cache.
    pub(super) fn begin(&self) -> (SeqGuard<'_>, u64) {
        let mut f = lock(&self.0);
        let seq = f.next;
        f.next += 1;
        f.waiting.insert(seq);
        let low = f.waiting.first().copied().unwrap_or(seq);
        (SeqGuard(self, seq), low)
    }

    /// Requests sent and not answered yet.
    pub(super) fn waiting(&self) -> u64 {
        lock(&self.0).waiting.len() as u64
    }
}
