//! Replicated targets at the MGS: which replicas a target has, which is
//! its primary, and the hand-over when a primary goes quiet (see
//! `loom_proto::replica` for the rules).
//!
//! What changes a target's members is persisted with the rest of the
//! state before it is answered. When each server was last heard from is
//! not: after a restart the MGS counts every replica as heard at its
//! start, so primaries keep their role if they renew within
//! [`FAILOVER_MS`].

use super::MgsState;
use crate::error::ServerError;
use loom_proto::msg::{TargetId, TargetInfo};
use loom_proto::replica::{Hosted, Replica, ReplicaOf, ReplicaState, FAILOVER_MS};
use loom_proto::Errno;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// When each replica's server was last heard from, and what a syncing
/// replica has left, by target and replica number.
#[derive(Debug)]
pub(super) struct Heard {
    started: Instant,
    at: HashMap<(TargetId, u32), Instant>,
    lag: HashMap<(TargetId, u32), u64>,
}

impl Heard {
    pub(super) fn new() -> Heard {
        Heard {
            started: Instant::now(),
            at: HashMap::new(),
            lag: HashMap::new(),
        }
    }

    fn since(&self, t: TargetId, r: u32, now: Instant) -> Duration {
        now.saturating_duration_since(*self.at.get(&(t, r)).unwrap_or(&self.started))
    }

    /// Heard from within [`FAILOVER_MS`].
    pub(super) fn live(&self, t: TargetId, r: u32, now: Instant) -> bool {
        self.since(t, r, now) < Duration::from_millis(FAILOVER_MS)
    }

    /// `info` with when each replica was heard from and its lag filled in.
    pub(super) fn fill(&self, mut info: TargetInfo, now: Instant) -> TargetInfo {
        for r in &mut info.replicas {
            r.heard_ms = Some(self.since(info.id, r.replica, now).as_millis() as u64);
            r.lag = match r.state {
                ReplicaState::Syncing => self.lag.get(&(info.id, r.replica)).copied().unwrap_or(0),
                _ => 0,
            };
        }
        info
    }
}

impl MgsState {
    /// Register replica `of.replica` of `t` at `t.addr`. The first replica
    /// of a target to register is its primary; one that joins later is
    /// brought up to date by it. `Ok(false)` if nothing changed.
    pub(super) fn register_replica(
        &mut self,
        t: TargetInfo,
        of: ReplicaOf,
    ) -> Result<bool, ServerError> {
        if of.of < 2 || of.replica >= of.of {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!(
                    "{}: replica {} of {} is not a replica",
                    t.id, of.replica, of.of
                ),
            ));
        }
        let i = match self.targets.binary_search_by_key(&t.id, |x| x.id) {
            Ok(i) if self.targets[i].replicas.is_empty() => {
                return Err(ServerError::refused(
                    Errno::EEXIST,
                    format!(
                        "{} is registered without replicas, but replica {} of {} asked",
                        t.id, of.replica, of.of
                    ),
                ))
            }
            Ok(i) => i,
            Err(i) => {
                self.targets.insert(
                    i,
                    TargetInfo {
                        term: 0,
                        ..TargetInfo::single(t.id, &t.uuid, &t.addr)
                    },
                );
                i
            }
        };
        let cur = &mut self.targets[i];
        match cur.replicas.iter_mut().find(|r| r.replica == of.replica) {
            Some(r) => {
                if r.uuid != t.uuid {
                    return Err(ServerError::refused(
                        Errno::EEXIST,
                        format!(
                            "{} replica {} is registered with uuid {} but uuid {} asked: \
                             two replicas were formatted with the same number",
                            t.id, of.replica, r.uuid, t.uuid
                        ),
                    ));
                }
                if r.addr == t.addr {
                    return Ok(false);
                }
                r.addr = t.addr.clone();
                if cur.primary == of.replica {
                    cur.addr = t.addr;
                }
            }
            None => {
                let first = cur.replicas.is_empty();
                cur.replicas.push(Replica {
                    replica: of.replica,
                    uuid: t.uuid.clone(),
                    addr: t.addr.clone(),
                    state: if first {
                        ReplicaState::InSync
                    } else {
                        ReplicaState::Syncing
                    },
                    lag: 0,
                    heard_ms: None,
                });
                cur.replicas.sort_by_key(|r| r.replica);
                if first {
                    cur.term = 1;
                    cur.primary = of.replica;
                    cur.addr = t.addr;
                    cur.uuid = t.uuid;
                }
            }
        }
        self.generation += 1;
        Ok(true)
    }

    /// A server at `addr` renewed: its stale replicas whose primary is
    /// live start to be brought up to date. `Ok(true)` if that changed
    /// anything.
    pub(super) fn renewed(
        &mut self,
        addr: &str,
        hosted: &[Hosted],
        heard: &Heard,
        now: Instant,
    ) -> bool {
        let mut changed = false;
        for h in hosted {
            let Some(t) = self.targets.iter_mut().find(|t| t.id == h.target) else {
                continue;
            };
            let primary_live = heard.live(t.id, t.primary, now);
            if let Some(r) = t
                .replicas
                .iter_mut()
                .find(|r| r.replica == h.replica && r.addr == addr)
            {
                if r.state == ReplicaState::Stale && primary_live && h.replica != t.primary {
                    r.state = ReplicaState::Syncing;
                    changed = true;
                }
            }
        }
        if changed {
            self.generation += 1;
        }
        changed
    }

    /// Hand each quiet primary's role to a live replica in sync: a new
    /// term, the old primary stale, the other replicas in sync brought up
    /// to date by the new primary (they may hold a change the new one
    /// never got, which no one acknowledged). What was handed over.
    pub(super) fn fail_over(&mut self, heard: &Heard, now: Instant) -> Vec<(TargetId, u32, u32)> {
        let mut moved = Vec::new();
        for t in self.targets.iter_mut().filter(|t| t.term > 0) {
            if heard.live(t.id, t.primary, now) {
                continue;
            }
            let Some(next) = t
                .replicas
                .iter()
                .find(|r| {
                    r.replica != t.primary
                        && r.state == ReplicaState::InSync
                        && heard.live(t.id, r.replica, now)
                })
                .map(|r| (r.replica, r.addr.clone()))
            else {
                continue;
            };
            let old = t.primary;
            for r in &mut t.replicas {
                if r.replica == old {
                    r.state = ReplicaState::Stale;
                } else if r.replica != next.0 && r.state == ReplicaState::InSync {
                    r.state = ReplicaState::Syncing;
                }
            }
            t.primary = next.0;
            t.addr = next.1;
            t.term += 1;
            moved.push((t.id, old, next.0));
        }
        if !moved.is_empty() {
            self.generation += 1;
        }
        moved
    }

    /// The primary of `target` under `term` says where replica `replica`
    /// stands. EREMCHG if that term is over (the sender is not the
    /// primary any more).
    pub(super) fn set_replica(
        &mut self,
        target: TargetId,
        term: u64,
        replica: u32,
        state: ReplicaState,
    ) -> Result<bool, ServerError> {
        let Some(t) = self.targets.iter_mut().find(|t| t.id == target) else {
            return Err(ServerError::refused(
                Errno::ENOENT,
                format!("{target} is not registered"),
            ));
        };
        if t.term == 0 || term != t.term {
            return Err(ServerError::refused(
                Errno::EREMCHG,
                format!(
                    "{target}: term {term} is over; the target is at term {}",
                    t.term
                ),
            ));
        }
        if replica == t.primary {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("{target}: replica {replica} is the primary"),
            ));
        }
        let Some(r) = t.replicas.iter_mut().find(|r| r.replica == replica) else {
            return Err(ServerError::refused(
                Errno::ENOENT,
                format!("{target} has no replica {replica}"),
            ));
        };
        let allowed = match state {
            ReplicaState::Stale => true,
            ReplicaState::InSync => r.state == ReplicaState::Syncing,
            ReplicaState::Syncing => r.state == ReplicaState::Stale,
        };
        if !allowed {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!(
                    "{target} replica {replica} is {} and cannot become {}",
                    r.state.name(),
                    state.name()
                ),
            ));
        }
        if r.state == state {
            return Ok(false);
        }
        r.state = state;
        self.generation += 1;
        Ok(true)
    }
}

impl Heard {
    /// Note that the server at `addr`, hosting `hosted`, renewed now:
    /// only replicas registered at that address count.
    pub(super) fn note(&mut self, st: &MgsState, addr: &str, hosted: &[Hosted], now: Instant) {
        for h in hosted {
            let registered = st.targets.iter().any(|t| {
                t.id == h.target
                    && t.replicas
                        .iter()
                        .any(|r| r.replica == h.replica && r.addr == addr)
            });
            if !registered {
                continue;
            }
            self.at.insert((h.target, h.replica), now);
            for &(r, lag) in &h.syncing {
                self.lag.insert((h.target, r), lag);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(replica: u32) -> ReplicaOf {
        ReplicaOf { replica, of: 2 }
    }

    fn reg(st: &mut MgsState, r: u32, addr: &str) -> Result<bool, ServerError> {
        let t = TargetInfo::single(TargetId::ost(0), &format!("uuid{r}"), addr);
        st.register_replica(t, of(r))
    }

    fn hosted(r: u32) -> Vec<Hosted> {
        vec![Hosted {
            target: TargetId::ost(0),
            replica: r,
            syncing: vec![],
        }]
    }

    fn state(st: &MgsState, r: u32) -> ReplicaState {
        st.targets[0].replicas[r as usize].state
    }

    #[test]
    fn the_first_replica_is_primary_and_the_next_syncs() {
        let mut st = MgsState::new("fs");
        assert!(reg(&mut st, 1, "b:1").expect("first"));
        assert!(reg(&mut st, 0, "a:1").expect("second"));
        let t = &st.targets[0];
        assert_eq!((t.term, t.primary, t.addr.as_str()), (1, 1, "b:1"));
        assert_eq!(state(&st, 0), ReplicaState::Syncing);
        assert_eq!(state(&st, 1), ReplicaState::InSync);
        // Again at the same address: nothing; another uuid: refused.
        assert!(!reg(&mut st, 0, "a:1").expect("again"));
        let t = TargetInfo::single(TargetId::ost(0), "other", "a:1");
        assert_eq!(
            st.register_replica(t, of(0)).expect_err("uuid").errno(),
            Errno::EEXIST
        );
        // Unreplicated, the same target is refused.
        let t = TargetInfo::single(TargetId::ost(0), "uuid0", "a:1");
        assert_eq!(st.register(t).expect_err("single").errno(), Errno::EEXIST);
        let t = TargetInfo::single(TargetId::ost(0), "uuid0", "a:1");
        let bad = ReplicaOf { replica: 2, of: 2 };
        assert_eq!(
            st.register_replica(t, bad).expect_err("range").errno(),
            Errno::EINVAL
        );
    }

    #[test]
    fn a_quiet_primary_is_replaced_only_by_a_live_replica_in_sync() {
        let mut st = MgsState::new("fs");
        reg(&mut st, 0, "a:1").expect("0");
        reg(&mut st, 1, "b:1").expect("1");
        let mut heard = Heard::new();
        let t0 = Instant::now();
        let late = t0 + Duration::from_millis(FAILOVER_MS + 1);
        // Replica 1 is still syncing: no one takes over.
        heard.note(&st, "b:1", &hosted(1), late);
        assert!(st.fail_over(&heard, late).is_empty());
        assert!(st
            .set_replica(TargetId::ost(0), 1, 1, ReplicaState::InSync)
            .expect("in sync"));
        // A renewal from an address the replica is not at does not count.
        let mut other = Heard::new();
        other.note(&st, "c:1", &hosted(1), late);
        assert!(st.clone().fail_over(&other, late).is_empty());
        // Both renew within the time: nothing moves.
        heard.note(
            &st,
            "a:1",
            &hosted(0),
            t0 + Duration::from_millis(FAILOVER_MS),
        );
        assert!(st.fail_over(&heard, late).is_empty());
        // The primary goes quiet: replica 1 takes over under a new term.
        let later = late + Duration::from_millis(FAILOVER_MS);
        heard.note(&st, "b:1", &hosted(1), later);
        let gen = st.generation;
        assert_eq!(st.fail_over(&heard, later), vec![(TargetId::ost(0), 0, 1)]);
        let t = &st.targets[0];
        assert_eq!((t.term, t.primary, t.addr.as_str()), (2, 1, "b:1"));
        assert_eq!(state(&st, 0), ReplicaState::Stale);
        assert!(st.generation > gen);
        // The old primary's term is over: it cannot change members.
        let e = st
            .set_replica(TargetId::ost(0), 1, 0, ReplicaState::InSync)
            .expect_err("old term");
        assert_eq!(e.errno(), Errno::EREMCHG);
        // Once back, it is brought up to date by the new primary.
        heard.note(&st, "a:1", &hosted(0), later);
        assert!(st.renewed("a:1", &hosted(0), &heard, later));
        assert_eq!(state(&st, 0), ReplicaState::Syncing);
        let e = st
            .set_replica(TargetId::ost(0), 2, 1, ReplicaState::Stale)
            .expect_err("the primary itself");
        assert_eq!(e.errno(), Errno::EINVAL);
    }

    #[test]
    fn only_a_syncing_replica_becomes_in_sync() {
        let mut st = MgsState::new("fs");
        reg(&mut st, 0, "a:1").expect("0");
        reg(&mut st, 1, "b:1").expect("1");
        let t = TargetId::ost(0);
        assert!(st.set_replica(t, 1, 1, ReplicaState::Stale).expect("stale"));
        assert_eq!(
            st.set_replica(t, 1, 1, ReplicaState::InSync)
                .expect_err("from stale")
                .errno(),
            Errno::EINVAL
        );
        assert!(st
            .set_replica(t, 1, 1, ReplicaState::Syncing)
            .expect("syncing"));
        assert!(st
            .set_replica(t, 1, 1, ReplicaState::InSync)
            .expect("in sync"));
        assert!(!st
            .set_replica(t, 1, 1, ReplicaState::InSync)
            .expect_err("again")
            .to_string()
            .is_empty());
    }
}
