//! Block quotas on one OST: the bytes it holds per id (the object
//! store's counts, see `loom_store::owners`) and its share of each
//! limited id, granted by the quota master on MDT0.
//!
//! A write that may take bytes (its `grant::cost`) is admitted against
//! the share of each of its owner's ids. While the share leaves room for
//! [`NEAR`] beyond the write, it goes ahead at once. Otherwise the OST
//! asks the master for that room, then for the write alone; when the
//! master refuses both, a write the client waits for is refused EDQUOT
//! and one it sent behind (already acknowledged to its program) is
//! stored: a client then overshoots by at most what it sent behind,
//! which its space grant bounds. Every answer near a limit says so
//! (`Reply::Written::quota_near`), and the client sends that owner's
//! next writes here synchronously, so that EDQUOT is their error.
//!
//! Writes under way hold what they may take ([`Admitted`]) until they
//! are done, so that concurrent writes cannot all pass on the same room.
//! Root's writes are not limited, as on Linux. The shares of limited ids
//! are kept in the OST's directory ([`SHARES_FILE`], rewritten whole and
//! atomically when one changes), so a restarted OST holds a limited id
//! to its share also while MDT0 cannot be asked.

use crate::error::{Handled, ServerError};
use crate::peers::Peers;
use crate::quota::{may_see, Grant, Shares, MASTER_WAIT};
use loom_proto::grant;
use loom_proto::msg::{PeerRequest, Reply, ReqCtx, TargetId};
use loom_proto::quota::{Owner, QuotaId, QuotaUsage};
use loom_proto::Errno;
use loom_store::object::ObjectStore;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Room a share must leave beyond a write for the owner not to be near
/// its limit here: a client's full space grant, what it may send behind.
pub const NEAR: u64 = grant::TARGET;

/// The file in an OST's directory holding its shares of limited ids
/// (postcard: `Vec<(QuotaId, u64)>`).
pub const SHARES_FILE: &str = "quota-shares";

/// How long one question to the master may take.
const MASTER_TIMEOUT: Duration = Duration::from_secs(20);

/// The OST's quota state.
pub struct OstQuota {
    index: u32,
    /// Where the shares are kept.
    shares_file: std::path::PathBuf,
    /// Servers to reach the master through (none in tests of a lone OST:
    /// nothing is limited then).
    peers: OnceLock<Arc<Peers>>,
    shares: Shares,
    /// Bytes that writes under way may take, per id.
    pending: Mutex<HashMap<QuotaId, u64>>,
    /// One question to the master at a time: those waiting behind it
    /// find the answer.
    asking: tokio::sync::Mutex<()>,
    /// Held shared by every change, exclusively by `--check`, so that a
    /// recount sees what the counts say.
    pub(super) changes: tokio::sync::RwLock<()>,
}

/// A write's claim on its owner's shares while it runs.
pub struct Admitted<'a> {
    q: &'a OstQuota,
    held: Vec<QuotaId>,
    cost: u64,
    /// The owner is near a limit here.
    pub near: bool,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        let mut p = self.q.pending();
        for who in &self.held {
            if let Some(n) = p.get_mut(who) {
                *n = n.saturating_sub(self.cost);
                if *n == 0 {
                    p.remove(who);
                }
            }
        }
    }
}

/// What the master said to one question.
enum Asked {
    Granted,
    Refused(ServerError),
    Unreachable(ServerError),
}

impl std::fmt::Debug for OstQuota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OstQuota")
            .field("index", &self.index)
            .field("shares", &self.shares)
            .finish_non_exhaustive()
    }
}

impl OstQuota {
    /// The quota state of OST `index` in directory `dir`, with the shares
    /// kept there.
    pub fn open(index: u32, dir: &std::path::Path) -> anyhow::Result<OstQuota> {
        let shares_file = dir.join(SHARES_FILE);
        let shares = Shares::default();
        match std::fs::read(&shares_file) {
            Ok(b) => match postcard::from_bytes::<Vec<(QuotaId, u64)>>(&b) {
                Ok(kept) => {
                    for (who, n) in kept {
                        shares.granted(who, true, n);
                    }
                }
                // What the master granted can be asked again: a damaged
                // file does not stop the OST.
                Err(e) => tracing::warn!(
                    "OST{index:04x}: {} is damaged ({e}): its quota shares are asked again",
                    shares_file.display()
                ),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => anyhow::bail!("OST{index:04x}: reading {}: {e}", shares_file.display()),
        }
        Ok(OstQuota {
            index,
            shares_file,
            peers: OnceLock::new(),
            shares,
            pending: Mutex::default(),
            asking: tokio::sync::Mutex::new(()),
            changes: tokio::sync::RwLock::new(()),
        })
    }

    /// Keep the shares of limited ids (after one changed), so that a
    /// restart still knows them. A failure is logged: the OST then asks
    /// the master again after a restart, as one without the file does.
    fn keep_shares(&self) {
        let kept = self.shares.limited();
        let r = postcard::to_allocvec(&kept)
            .map_err(std::io::Error::other)
            .and_then(|b| loom_store::durable::write_atomic(&self.shares_file, &b));
        if let Err(e) = r {
            tracing::warn!(
                "OST{:04x}: keeping quota shares in {}: {e}",
                self.index,
                self.shares_file.display()
            );
        }
    }

    /// Reach the master through `peers` from now on.
    pub fn use_peers(&self, peers: Arc<Peers>) {
        let _ = self.peers.set(peers);
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<QuotaId, u64>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What `who` holds here and may take with the writes under way.
    fn used(&self, store: &ObjectStore, who: QuotaId) -> u64 {
        store.id_usage(who) + self.pending().get(&who).copied().unwrap_or(0)
    }

    /// Admit a write that may take `cost` bytes of `owner`'s (see the
    /// module's comment); `behind` if the client already acknowledged it
    /// to its program (it spent its space grant on it). `exempt` callers
    /// (root) pass, but their bytes are counted all the same.
    pub async fn admit(
        &self,
        store: &ObjectStore,
        owner: Owner,
        cost: u64,
        behind: bool,
        exempt: bool,
    ) -> Result<Admitted<'_>, ServerError> {
        let mut a = Admitted {
            q: self,
            held: Vec::new(),
            cost,
            near: false,
        };
        if exempt || cost == 0 || self.peers.get().is_none() {
            return Ok(a);
        }
        for who in owner.ids() {
            let fits = |extra: u64| match self.shares.get(who) {
                Some(Grant::Unlimited(_)) => Some(true),
                Some(Grant::Up(g)) => Some(self.used(store, who) + cost + extra <= g),
                None => None,
            };
            if fits(NEAR) == Some(true) {
                self.hold(&mut a, who);
                continue;
            }
            let _asking = self.asking.lock().await;
            // Another write may have asked meanwhile.
            if fits(NEAR) != Some(true) {
                self.ask_for(store, who, cost, behind, &mut a).await?;
            }
            if fits(NEAR) == Some(false) {
                a.near = true;
            }
            self.hold(&mut a, who);
        }
        Ok(a)
    }

    fn hold(&self, a: &mut Admitted<'_>, who: QuotaId) {
        if matches!(self.shares.get(who), Some(Grant::Up(_))) {
            *self.pending().entry(who).or_default() += a.cost;
            a.held.push(who);
        }
    }

    /// Ask the master for room for this write and [`NEAR`] beyond, then
    /// for the write alone; EDQUOT when refused both, unless the write
    /// was sent behind. A master that cannot be asked holds a write back
    /// only for an id known to be limited, and for [`MASTER_WAIT`] at
    /// most (EAGAIN after).
    async fn ask_for(
        &self,
        store: &ObjectStore,
        who: QuotaId,
        cost: u64,
        behind: bool,
        a: &mut Admitted<'_>,
    ) -> Result<(), ServerError> {
        let deadline = Instant::now() + MASTER_WAIT;
        let mut pause = Duration::from_millis(50);
        loop {
            let e = match self.ask(store, who, cost + NEAR).await {
                Asked::Granted => return Ok(()),
                Asked::Refused(_) => match self.ask(store, who, cost).await {
                    Asked::Granted => {
                        a.near = true;
                        return Ok(());
                    }
                    Asked::Refused(e) if behind => {
                        tracing::info!(
                            "OST{:04x}: stored a write sent behind past a limit: {e}",
                            self.index
                        );
                        a.near = true;
                        return Ok(());
                    }
                    Asked::Refused(e) => return Err(e),
                    Asked::Unreachable(e) => e,
                },
                Asked::Unreachable(e) => e,
            };
            if !self.shares.known_limited(who) {
                tracing::warn!(
                    "OST{:04x}: the quota master did not answer for {who} ({e}); \
                     going on without limits for it",
                    self.index
                );
                self.shares.granted(who, false, 0);
                return Ok(());
            }
            if behind {
                a.near = true;
                return Ok(());
            }
            if Instant::now() + pause > deadline {
                return Err(ServerError::refused(
                    Errno::EAGAIN,
                    format!("{who} is limited and the quota master did not answer: {e}"),
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    /// One `QuotaAcquire` of `need` more bytes of `who`.
    async fn ask(&self, store: &ObjectStore, who: QuotaId, need: u64) -> Asked {
        let Some(peers) = self.peers.get() else {
            self.shares.granted(who, false, 0);
            return Asked::Granted;
        };
        let req = PeerRequest::QuotaAcquire {
            who,
            target: TargetId::ost(self.index),
            usage: self.used(store, who),
            need,
            bytes: true,
        };
        let timeout = MASTER_TIMEOUT;
        match peers
            .call(TargetId::mdt(0), req, bytes::Bytes::new(), timeout)
            .await
        {
            Ok((Reply::QuotaGrant { limited, granted }, _)) => {
                let was = self.shares.known_limited(who);
                self.shares.granted(who, limited, granted);
                if limited || was {
                    self.keep_shares();
                }
                Asked::Granted
            }
            Ok((other, _)) => Asked::Unreachable(ServerError::peer(
                Errno::EPROTO,
                format!("QuotaAcquire answered {other:?}"),
            )),
            Err(e) if e.errno() == Errno::EDQUOT => Asked::Refused(e),
            Err(e) => Asked::Unreachable(e),
        }
    }

    /// After a write exempt from limits (root's) of `owner`'s bytes: the
    /// master hears of every limited id it took past this OST's share
    /// (`QuotaAcquire` with `need` 0), so that other targets are not
    /// granted room the id no longer has.
    pub async fn after_exempt(&self, store: &ObjectStore, owner: Owner) {
        if self.peers.get().is_none() {
            return;
        }
        for who in owner.ids() {
            let over =
                matches!(self.shares.get(who), Some(Grant::Up(g)) if self.used(store, who) > g);
            if over {
                let _asking = self.asking.lock().await;
                if let Asked::Unreachable(e) | Asked::Refused(e) = self.ask(store, who, 0).await {
                    tracing::warn!(
                        "OST{:04x}: telling the quota master {who} is past its share: {e}",
                        self.index
                    );
                }
            }
        }
    }

    /// The master takes back `who`'s share beyond what this OST holds
    /// (`QuotaRelease`): answered with that usage.
    pub async fn release(&self, store: &ObjectStore, who: QuotaId, forget: bool) -> Handled {
        let _asking = self.asking.lock().await;
        // With what writes under way may still take: they were admitted.
        let used = self.used(store, who);
        self.shares.release(who, used, forget);
        self.keep_shares();
        Ok(Reply::QuotaGrant {
            limited: true,
            granted: used,
        })
    }

    /// The bytes this OST holds for `who`.
    pub fn usage(&self, ctx: &ReqCtx, store: &ObjectStore, who: QuotaId) -> Handled {
        may_see(ctx, who)?;
        Ok(Reply::QuotaUsage(QuotaUsage {
            inodes: 0,
            bytes: store.id_usage(who),
        }))
    }
}

/// Per-id sums of per-owner byte counts.
pub fn by_id(by_owner: &HashMap<Owner, u64>) -> HashMap<QuotaId, QuotaUsage> {
    let mut m: HashMap<QuotaId, QuotaUsage> = HashMap::new();
    for (o, n) in by_owner {
        for who in o.ids() {
            m.entry(who).or_default().bytes += n;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_of_limited_ids_outlive_a_restart() {
        let d = tempfile::tempdir().expect("tempdir");
        let q = OstQuota::open(3, d.path()).expect("open");
        let (a, b) = (QuotaId::user(65534), QuotaId::project(7));
        q.shares.granted(a, true, 8 << 20);
        q.shares.granted(b, false, 0);
        q.keep_shares();
        let again = OstQuota::open(3, d.path()).expect("reopen");
        assert_eq!(again.shares.get(a), Some(Grant::Up(8 << 20)));
        assert!(again.shares.known_limited(a));
        assert_eq!(again.shares.get(b), None, "no limit is not kept");
        // Forgotten (its limits changed), it is gone after a restart too.
        again.shares.release(a, 0, true);
        again.keep_shares();
        let third = OstQuota::open(3, d.path()).expect("reopen");
        assert!(!third.shares.known_limited(a));
        // A damaged file does not stop the OST: it asks the master again.
        std::fs::write(d.path().join(SHARES_FILE), b"\xff\xff\xff").expect("damage");
        let fourth = OstQuota::open(3, d.path()).expect("opens all the same");
        assert!(fourth.shares.limited().is_empty());
    }
}
