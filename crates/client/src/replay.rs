//! Changes an MDT acknowledged but has not committed, kept for replay.
//!
//! An MDT answers a change before it is on stable storage (see the
//! server's `mdt/syncer.rs`); each reply carries the change's transaction
//! number and the MDT's last committed one. This client keeps every change
//! above the last committed number, with its request and reply, until a
//! later reply says it is committed. When an MDT restarts (its boot number
//! changes; a lost connection makes the client ask at once), the client
//! sends it those changes in transaction order within the MDT's recovery
//! window, before the MDT serves anything else. A client that comes back
//! after the window was evicted: its kept changes are dropped and the loss
//! is logged as an error.

use loom_proto::msg::{Commit, Envelope, Replayed, Reply, Request};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A change not committed for this long makes the client ask the MDT
/// (`CommitState`) how far it committed.
pub const ASK_AFTER: Duration = Duration::from_millis(100);

/// Replays sent in one request at most (requests stay well under the
/// frame's body limit).
pub const REPLAY_BATCH: usize = 256;

/// What this client knows of one MDT's commits.
#[derive(Debug, Default)]
pub struct MdtLog {
    /// The MDT instance the kept changes were acknowledged by (0: none seen).
    pub boot: u64,
    /// Every change up to here is committed.
    pub last_committed: u64,
    /// Kept changes, by transaction number.
    pub entries: BTreeMap<u64, Replayed>,
    /// A replay to this new instance is under way.
    pub replaying_to: Option<u64>,
    /// This client made a change there (the MDT waits for it after a
    /// restart, until it disconnects).
    pub registered: bool,
    /// When a reply from it last arrived.
    pub last_reply: Option<Instant>,
    /// Connections to it lost, as last seen by the recovery task
    /// (`u64::MAX`: ask again at the next tick, the last try failed).
    pub losses_seen: u64,
    /// A check by the recovery task is running.
    pub checking: bool,
    /// Its address as last seen by the recovery task: a replicated MDT's
    /// primary that moved is asked whether it restarted, like one whose
    /// connection was lost.
    pub addr_seen: Option<String>,
}

/// The logs of every MDT this client talks to.
#[derive(Debug, Default)]
pub struct ReplayLog {
    mdts: Mutex<HashMap<u32, MdtLog>>,
    /// Changes dropped because an MDT evicted this client.
    pub lost: std::sync::atomic::AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ReplayLog {
    /// Run `f` on MDT `mdt`'s log.
    pub fn with<R>(&self, mdt: u32, f: impl FnOnce(&mut MdtLog) -> R) -> R {
        f(lock(&self.mdts).entry(mdt).or_default())
    }

    /// MDTs with a log.
    pub fn mdts(&self) -> Vec<u32> {
        lock(&self.mdts).keys().copied().collect()
    }

    /// Take note of MDT `mdt`'s answer to `env`: keep the change if it is
    /// not committed yet, forget those that are.
    pub fn note(&self, mdt: u32, c: Commit, env: &Envelope, reply: Option<&Reply>) {
        let mut lost = 0;
        self.with(mdt, |l| {
            l.last_reply = Some(Instant::now());
            if l.boot == 0 {
                l.boot = c.boot;
            } else if c.boot != l.boot {
                if l.replaying_to == Some(c.boot) {
                    // The recovery task is finishing the replay to it.
                } else {
                    // The MDT restarted and is serving again, and this
                    // client did not replay to it: what it had committed
                    // before is safe, the rest is lost.
                    l.entries.retain(|t, _| *t > c.started_at);
                    lost = l.entries.len();
                    l.entries.clear();
                    l.boot = c.boot;
                    l.last_committed = 0;
                    l.registered = false;
                }
            }
            if c.boot != l.boot {
                return;
            }
            l.last_committed = l.last_committed.max(c.last_committed);
            if c.transno > 0 {
                l.registered = true;
                if let (Some(reply), Request::Mdt(req)) = (reply, &env.req) {
                    if c.transno > l.last_committed {
                        l.entries.insert(
                            c.transno,
                            Replayed {
                                transno: c.transno,
                                ctx: env.ctx.clone(),
                                req: req.clone(),
                                reply: reply.clone(),
                            },
                        );
                    }
                }
            }
            let keep = l.entries.split_off(&(l.last_committed + 1));
            l.entries = keep;
        });
        if lost > 0 {
            self.evicted(mdt, lost);
        }
    }

    /// Record that MDT `mdt` evicted this client, dropping `n` changes.
    pub fn evicted(&self, mdt: u32, n: usize) {
        self.lost
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        tracing::error!(
            "MDT{mdt:04x} evicted this client after a restart (it did not replay within the MDT's recovery window): {n} acknowledged changes that were not committed are lost"
        );
    }

    /// Changes kept for MDT `mdt` (for tests and statistics).
    pub fn kept(&self, mdt: u32) -> usize {
        self.with(mdt, |l| l.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_proto::msg::{MdtRequest, ReqCtx, TargetId};

    fn env(seq: u64) -> Envelope {
        Envelope {
            target: TargetId::mdt(0),
            ctx: ReqCtx {
                client_id: 9,
                seq,
                ..ReqCtx::default()
            },
            req: MdtRequest::Sync.into(),
            capa: None,
            snapshot: None,
        }
    }

    fn commit(boot: u64, transno: u64, last_committed: u64) -> Commit {
        Commit {
            boot,
            transno,
            last_committed,
            started_at: 0,
            leased: false,
        }
    }

    #[test]
    fn uncommitted_changes_are_kept_until_a_reply_says_committed() {
        let log = ReplayLog::default();
        log.note(0, commit(7, 10, 5), &env(1), Some(&Reply::Ok));
        log.note(0, commit(7, 11, 5), &env(2), Some(&Reply::Ok));
        assert_eq!(log.kept(0), 2);
        log.note(0, commit(7, 0, 10), &env(3), Some(&Reply::Ok));
        assert_eq!(log.kept(0), 1);
        // A change already committed when its reply came is not kept.
        log.note(0, commit(7, 12, 12), &env(4), Some(&Reply::Ok));
        assert_eq!(log.kept(0), 0);
        assert!(log.with(0, |l| l.registered));
    }

    #[test]
    fn a_new_instance_that_was_not_replayed_to_means_eviction() {
        let log = ReplayLog::default();
        log.note(0, commit(7, 10, 5), &env(1), Some(&Reply::Ok));
        log.with(0, |l| l.replaying_to = Some(8));
        // Replies from the instance being replayed to keep the entries.
        log.note(0, commit(8, 0, 3), &env(2), Some(&Reply::Ok));
        assert_eq!(log.kept(0), 1);
        log.with(0, |l| l.replaying_to = None);
        // Another instance: the entries are gone.
        log.note(0, commit(9, 0, 3), &env(3), Some(&Reply::Ok));
        assert_eq!(log.kept(0), 0);
        assert_eq!(log.lost.load(std::sync::atomic::Ordering::Relaxed), 1);
    }

    #[test]
    fn changes_committed_before_a_clean_restart_are_not_counted_lost() {
        let log = ReplayLog::default();
        log.note(0, commit(7, 10, 5), &env(1), Some(&Reply::Ok));
        log.note(0, commit(7, 11, 5), &env(2), Some(&Reply::Ok));
        // Restarted having committed through 10: 11 is lost.
        let c = Commit {
            started_at: 10,
            ..commit(9, 0, 10)
        };
        log.note(0, c, &env(3), Some(&Reply::Ok));
        assert_eq!(log.kept(0), 0);
        assert_eq!(log.lost.load(std::sync::atomic::Ordering::Relaxed), 1);
    }
}
