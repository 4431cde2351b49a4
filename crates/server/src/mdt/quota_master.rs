//! The quota master, on MDT0: every id's limits, and the share of each
//! limit it granted each target (Lustre's QMT and its slaves): inode
//! limits to the MDTs, block limits to the OSTs.
//!
//! An MDT enforces a limit locally against what it was granted (an OST
//! likewise, see `ost::quota`): a
//! client's change that would take an id past its grant is held back
//! (`ServerError::QuotaShort`) while the MDT asks the master for more,
//! then run again. The master grants when the limits allow; when they do
//! not, it first takes back what other MDTs hold beyond their usage
//! (`QuotaRelease`), so that EDQUOT comes only when the usage over all
//! MDTs would pass the limit. Grants carry a little extra while far from
//! a limit, so that an id's creates do not each ask; none near it.
//!
//! A soft limit may be passed for its grace: the master notes when the
//! usage over all MDTs first went over it (from exact usages, taken back
//! from the MDTs) and refuses past the grace. Grants and those times are
//! committed before they are answered: a master that restarts never
//! grants what it granted before.
//!
//! Stored in MDT0's meta keyspace: `quota/limit/<u|g|p>/<id>`
//! ([`QuotaLimits`]), `quota/grant/<mdt>/<u|g|p>/<id>` and
//! `quota/ogrant/<ost>/<u|g|p>/<id>` (u64: inodes, bytes),
//! `quota/soft/<u|g|p>/<id>` and `quota/bsoft/<u|g|p>/<id>` (the [`Time`]
//! the soft inode or block limit was passed).

use super::quota::{id_under, scan_meta};
use super::tx::{decode_record, store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use crate::quota::{Res, MASTER_WAIT};
use loom_proto::msg::{OstRequest, PeerRequest, Reply, ReqCtx, Role, TargetId, Time};
use loom_proto::quota::{QuotaId, QuotaLimits};
use loom_proto::Errno;
use loom_store::kv::{KvStore, Space};
use std::collections::HashMap;
use std::sync::Arc;

/// Most extra inodes a grant carries while far from the limits (a
/// quarter of the room left, up to this): an MDT asks the master about
/// once per this many creates of a limited id.
const MAX_EXTRA: u64 = 1024;

/// The same for bytes: an OST asks about once per this many bytes
/// written of a limited id while far from its limits.
const MAX_EXTRA_BYTES: u64 = 1 << 30;

/// What the master keeps of one limit: its (soft, hard) for `res`, the
/// prefix of its soft-limit times, and the most extra a grant carries.
fn soft_hard(res: Res, l: &QuotaLimits) -> (u64, u64) {
    match res {
        Res::Inodes => (l.inode_soft, l.inode_hard),
        Res::Bytes => (l.block_soft, l.block_hard),
    }
}

fn soft_prefix(res: Res) -> &'static str {
    match res {
        Res::Inodes => SOFT_PREFIX,
        Res::Bytes => BSOFT_PREFIX,
    }
}

fn max_extra(res: Res) -> u64 {
    match res {
        Res::Inodes => MAX_EXTRA,
        Res::Bytes => MAX_EXTRA_BYTES,
    }
}

fn id_part(who: QuotaId) -> String {
    format!("{}/{:08x}", who.kind.letter(), who.id)
}

const LIMIT_PREFIX: &str = "quota/limit/";
const GRANT_PREFIX: &str = "quota/grant/";
const OGRANT_PREFIX: &str = "quota/ogrant/";
const BGRANT_PREFIX: &str = "quota/bgrant/";
const SOFT_PREFIX: &str = "quota/soft/";
const BSOFT_PREFIX: &str = "quota/bsoft/";

fn limit_key(who: QuotaId) -> String {
    format!("{LIMIT_PREFIX}{}", id_part(who))
}

/// Where grants to targets of `role` of `res` are kept: MDTs' inode
/// shares (`grant`), OSTs' byte shares (`ogrant`), MDTs' Data-on-MDT
/// byte shares (`bgrant`).
fn grant_prefix(role: Role, res: Res) -> &'static str {
    match (role, res) {
        (Role::Ost, _) => OGRANT_PREFIX,
        (_, Res::Bytes) => BGRANT_PREFIX,
        _ => GRANT_PREFIX,
    }
}

/// Every kind of share the master grants.
const SLAVES: [(Role, Res); 3] = [
    (Role::Mdt, Res::Inodes),
    (Role::Mdt, Res::Bytes),
    (Role::Ost, Res::Bytes),
];

fn grant_key(target: TargetId, res: Res, who: QuotaId) -> String {
    let prefix = grant_prefix(target.role, res);
    format!("{prefix}{:08x}/{}", target.index, id_part(who))
}

fn soft_key(res: Res, who: QuotaId) -> String {
    format!("{}{}", soft_prefix(res), id_part(who))
}

/// The master's state (meaningful on MDT0 only).
#[derive(Default)]
pub struct Master {
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    limits: HashMap<QuotaId, QuotaLimits>,
    grants: HashMap<(QuotaId, TargetId, Res), u64>,
    soft_since: HashMap<(QuotaId, Res), Time>,
}

impl Master {
    /// Load the master's state (MDT0; an empty one elsewhere).
    pub fn load(store: &dyn KvStore, index: u32) -> Result<Master, ServerError> {
        let mut st = State::default();
        if index == 0 {
            for (k, v) in scan_meta(store, LIMIT_PREFIX)? {
                st.limits
                    .insert(id_under(&k, LIMIT_PREFIX)?, decode_record(&v)?);
            }
            for res in [Res::Inodes, Res::Bytes] {
                let prefix = soft_prefix(res);
                for (k, v) in scan_meta(store, prefix)? {
                    st.soft_since
                        .insert((id_under(&k, prefix)?, res), decode_record(&v)?);
                }
            }
            for (role, res) in SLAVES {
                let prefix = grant_prefix(role, res);
                for (k, v) in scan_meta(store, prefix)? {
                    // `<index, 8 hex digits>/<u|g|p>/<id>`
                    let index = k
                        .get(prefix.len()..prefix.len() + 8)
                        .and_then(|m| std::str::from_utf8(m).ok())
                        .and_then(|m| u32::from_str_radix(m, 16).ok())
                        .ok_or_else(|| {
                            store_err(format!("a quota key {:?}", String::from_utf8_lossy(&k)))
                        })?;
                    let who = id_under(&k, &format!("{prefix}{index:08x}/"))?;
                    let target = TargetId { role, index };
                    st.grants.insert((who, target, res), decode_record(&v)?);
                }
            }
        }
        Ok(Master {
            state: tokio::sync::Mutex::new(st),
        })
    }
}

fn not_master(what: &str) -> ServerError {
    ServerError::refused(
        Errno::EINVAL,
        format!("{what}: limits are kept by MDT0, the quota master"),
    )
}

impl MdtService {
    /// Set `who`'s limits (root only, on MDT0), then have every MDT give
    /// back its grant and forget what it knew of `who`.
    pub(super) async fn set_quota(
        self: &Arc<Self>,
        ctx: &super::Rq<'_>,
        who: QuotaId,
        limits: QuotaLimits,
    ) -> Handled {
        if ctx.ctx.uid != 0 {
            return Err(ServerError::refused(
                Errno::EPERM,
                "only root may set quota limits",
            ));
        }
        if self.index != 0 {
            return Err(not_master("setting a limit"));
        }
        if (limits.inode_soft > limits.inode_hard && limits.inode_hard != 0)
            || (limits.block_soft > limits.block_hard && limits.block_hard != 0)
        {
            return Err(ServerError::refused(
                Errno::EINVAL,
                "a soft limit above its hard limit",
            ));
        }
        let mut st = self.dne.quota_master.state.lock().await;
        let (mut t, g) = self.begin().await.into_parts();
        if limits.any() {
            t.put_meta(&limit_key(who), &limits)?;
        } else {
            t.batch.delete(Space::Meta, limit_key(who).into_bytes());
            for res in [Res::Inodes, Res::Bytes] {
                t.batch.delete(Space::Meta, soft_key(res, who).into_bytes());
            }
        }
        let ticket = self.apply(ctx, t, &Reply::Ok)?;
        drop(g);
        if limits.any() {
            st.limits.insert(who, limits);
        } else {
            st.limits.remove(&who);
            st.soft_since.retain(|(w, _), _| *w != who);
        }
        self.commit_through(ticket).await?;
        // Every MDT and OST asks again before its next change for `who`;
        // one that cannot be told now asks within `quota::UNLIMITED_FOR`.
        let config = self.peers.config().await?;
        for (role, res) in SLAVES {
            for index in config.indices(role) {
                let target = TargetId { role, index };
                if let Err(e) = self.take_back(&mut st, who, target, res, true).await {
                    tracing::warn!("MDT0000: {target} was not told of {who}'s limits: {e}");
                }
            }
        }
        Ok(Reply::Ok)
    }

    /// `who`'s limits and since when it is over its soft limits.
    pub(super) async fn get_quota(&self, ctx: &ReqCtx, who: QuotaId) -> Handled {
        crate::quota::may_see(ctx, who)?;
        if self.index != 0 {
            return Err(not_master("reading a limit"));
        }
        let st = self.dne.quota_master.state.lock().await;
        Ok(Reply::QuotaLimits {
            limits: st.limits.get(&who).copied().unwrap_or_default(),
            soft_since: st.soft_since.get(&(who, Res::Inodes)).copied(),
            block_soft_since: st.soft_since.get(&(who, Res::Bytes)).copied(),
        })
    }

    /// `target` gives back its grant of `who`'s `res` beyond its usage:
    /// its usage, which is its grant from now on.
    async fn take_back(
        self: &Arc<Self>,
        st: &mut State,
        who: QuotaId,
        target: TargetId,
        res: Res,
        forget: bool,
    ) -> Result<u64, ServerError> {
        // Straight to the target (not through `mdt_call`, which may run
        // the master's own handlers again).
        let timeout = super::remote::PEER_TIMEOUT;
        let bytes = res == Res::Bytes;
        let reply = if target == TargetId::mdt(self.index) {
            self.quota_release(who, forget, res).await?
        } else if target.role == Role::Ost {
            let req = OstRequest::QuotaRelease { who, forget };
            self.peers
                .call(target, req, bytes::Bytes::new(), timeout)
                .await?
                .0
        } else {
            let req = PeerRequest::QuotaRelease { who, forget, bytes };
            self.peers
                .call(target, req, bytes::Bytes::new(), timeout)
                .await?
                .0
        };
        let used = match reply {
            Reply::QuotaGrant { granted, .. } => granted,
            other => {
                return Err(ServerError::peer(
                    Errno::EPROTO,
                    format!("QuotaRelease answered {other:?}"),
                ))
            }
        };
        // Committed as an acquire's grant is: a restarted master must not
        // take the grant for less than the usage it found.
        let t = Tx::new(&*self.names.store);
        self.commit_grant(st, t, (who, target, res), used).await?;
        Ok(used)
    }

    /// Keep `granted` as the grant `key` names, with what else `t` holds,
    /// committed before the caller answers anyone.
    async fn commit_grant(
        &self,
        st: &mut State,
        mut t: Tx<'_>,
        key: (QuotaId, TargetId, Res),
        granted: u64,
    ) -> Result<(), ServerError> {
        let (who, target, res) = key;
        t.put_meta(&grant_key(target, res, who), &granted)?;
        let ticket = self.apply_step(t)?;
        self.commit_through(ticket).await?;
        st.grants.insert(key, granted);
        Ok(())
    }

    /// An MDT's part of `QuotaRelease`: between two changes (under the
    /// namespace lock), so none runs on the grant it gives back.
    pub(super) async fn quota_release(&self, who: QuotaId, forget: bool, res: Res) -> Handled {
        let (_, g) = self.begin().await.into_parts();
        let used = self.commit.quotas.release(who, res, forget);
        let ticket = self.keep_share(who, res, (!forget).then_some(used))?;
        drop(g);
        self.commit_through(ticket).await?;
        Ok(Reply::QuotaGrant {
            limited: true,
            granted: used,
        })
    }

    /// Store this MDT's share of `who` (`None`: not known to be limited),
    /// so that a restarted MDT still holds a limited id to it.
    fn keep_share(
        &self,
        who: QuotaId,
        res: Res,
        share: Option<u64>,
    ) -> Result<loom_store::kv::Ticket, ServerError> {
        let key = super::quota::share_key(who, res);
        let mut t = Tx::new(&*self.names.store);
        match share {
            Some(g) => t.put_meta(&key, &g)?,
            None => t.batch.delete(Space::Meta, key.into_bytes()),
        }
        self.apply_step(t)
    }

    /// The master's part of `QuotaAcquire`: grant `target`, which counts
    /// `usage` of `who`'s `res` (an OST's bytes, an MDT's inodes or
    /// Data-on-MDT bytes), `need` more, or EDQUOT.
    pub(super) async fn quota_acquire(
        self: &Arc<Self>,
        who: QuotaId,
        target: TargetId,
        res: Res,
        usage: u64,
        need: u64,
    ) -> Handled {
        if self.index != 0 {
            return Err(not_master("a grant"));
        }
        let unlimited = Ok(Reply::QuotaGrant {
            limited: false,
            granted: 0,
        });
        let mut st = self.dne.quota_master.state.lock().await;
        let Some(limits) = st.limits.get(&who).copied() else {
            return unlimited;
        };
        let (soft, hard) = soft_hard(res, &limits);
        if soft == 0 && hard == 0 {
            // Limits of the other resource only: nothing to hold back here.
            return unlimited;
        }
        if need == 0 {
            return self.overshot(&mut st, who, target, res, usage).await;
        }
        let want = usage + need;
        // The other shares of the same limit: every target's of `res` but
        // this one's (an MDT's Data-on-MDT bytes and the OSTs' bytes share
        // one block limit).
        let same = move |w: &QuotaId, t: &TargetId, r: &Res| {
            *w == who && *r == res && (*t, *r) != (target, res)
        };
        let others = |st: &State| -> u64 {
            st.grants
                .iter()
                .filter(|((w, t, r), _)| same(w, t, r))
                .map(|(_, g)| *g)
                .sum()
        };
        // Near a limit, the exact usage of every other target: what they
        // hold beyond it is taken back.
        let cap = if soft != 0 { soft } else { hard };
        if others(&st) + want > cap {
            let holders: Vec<TargetId> = st
                .grants
                .keys()
                .filter(|(w, t, r)| same(w, t, r))
                .map(|(_, t, _)| *t)
                .collect();
            for t in holders {
                self.take_back(&mut st, who, t, res, false).await?;
            }
        }
        let total = others(&st) + want;
        let now = Time::now();
        let mut t = Tx::new(&*self.names.store);
        if hard != 0 && total > hard {
            return Err(over(who, "hard", hard, res));
        }
        let over_soft = soft != 0 && total > soft;
        if over_soft {
            let since = *st.soft_since.entry((who, res)).or_insert(now);
            if now.sec.saturating_sub(since.sec) as u64 >= limits.grace() {
                return Err(over(who, "soft", soft, res));
            }
            t.put_meta(&soft_key(res, who), &since)?;
        } else if st.soft_since.remove(&(who, res)).is_some() {
            t.batch.delete(Space::Meta, soft_key(res, who).into_bytes());
        }
        // A little extra while far from every limit; none past the soft
        // one (each change then asks, and its grace is kept exactly).
        let room = if over_soft { 0 } else { cap - total.min(cap) };
        let granted = want + max_extra(res).min(room / 4);
        self.commit_grant(&mut st, t, (who, target, res), granted)
            .await?;
        Ok(Reply::QuotaGrant {
            limited: true,
            granted,
        })
    }

    /// A report, not a request (`QuotaAcquire` with `need` 0): `target`
    /// holds `usage` of `who`, past its share (root's change, which no
    /// limit holds back). Counted from now on, so that other targets are
    /// not granted room the id no longer has; never refused.
    async fn overshot(
        self: &Arc<Self>,
        st: &mut State,
        who: QuotaId,
        target: TargetId,
        res: Res,
        usage: u64,
    ) -> Handled {
        let held = st.grants.get(&(who, target, res)).copied().unwrap_or(0);
        let granted = held.max(usage);
        let t = Tx::new(&*self.names.store);
        self.commit_grant(st, t, (who, target, res), granted)
            .await?;
        Ok(Reply::QuotaGrant {
            limited: true,
            granted,
        })
    }

    /// Tell the master of every id a change exempt from limits (root's)
    /// took past this MDT's share (see `Quotas::overshot`).
    pub(super) async fn report_overshoot(self: &Arc<Self>) {
        for (who, res) in self.commit.quotas.take_overshot() {
            if let Err(e) = self.acquire_quota(who, 0, res).await {
                tracing::warn!(
                    "MDT{:04x}: telling the quota master {who} is past its share: {e}",
                    self.index
                );
            }
        }
    }

    /// [`Self::acquire_quota`], for a change held back by
    /// `ServerError::QuotaShort` in its `round` (from 1): EDQUOT when the
    /// limits refuse or after too many rounds. When the master cannot be
    /// asked and `who` had no `res` limit, the change goes on (an MDT0
    /// outage stops no one) and the master is asked again later.
    pub(super) async fn quota_round(
        self: &Arc<Self>,
        who: QuotaId,
        need: u64,
        res: Res,
        round: u32,
    ) -> Result<(), ServerError> {
        if round > super::MAX_QUOTA_ROUNDS {
            return Err(ServerError::refused(
                Errno::EDQUOT,
                format!(
                    "{who}: no grant held after {} tries",
                    super::MAX_QUOTA_ROUNDS
                ),
            ));
        }
        self.stats.count("quota_acquired");
        let shares = self.commit.quotas.shares(res);
        let deadline = std::time::Instant::now() + MASTER_WAIT;
        let mut pause = std::time::Duration::from_millis(50);
        loop {
            let e = match self.acquire_quota(who, need, res).await {
                Ok(()) => return Ok(()),
                Err(e) if e.errno() == Errno::EDQUOT => return Err(e),
                Err(e) => e,
            };
            if !shares.known_limited(who) {
                tracing::warn!(
                    "MDT{:04x}: the quota master did not answer for {who} ({e}); \
                     going on without limits for it",
                    self.index
                );
                shares.granted(who, false, 0);
                return Ok(());
            }
            // Limited, and its share is spent: the change waits for the
            // master (restarting, say) rather than pass the limit.
            if std::time::Instant::now() + pause > deadline {
                return Err(ServerError::refused(
                    Errno::EAGAIN,
                    format!("{who} is limited and the quota master did not answer: {e}"),
                ));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(std::time::Duration::from_secs(2));
        }
    }

    /// Ask the master for `need` more of `who`'s `res` than this MDT was
    /// granted, and keep its answer (EDQUOT when the limits refuse).
    pub(super) async fn acquire_quota(
        self: &Arc<Self>,
        who: QuotaId,
        need: u64,
        res: Res,
    ) -> Result<(), ServerError> {
        let usage = res.of_usage(&self.commit.quotas.usage(who));
        let target = TargetId::mdt(self.index);
        let req = PeerRequest::QuotaAcquire {
            who,
            target,
            usage,
            need,
            bytes: res == Res::Bytes,
        };
        // Straight to the master (not through `mdt_call`, whose local
        // case runs peer handlers that may come back here).
        let reply = if self.index == 0 {
            self.quota_acquire(who, target, res, usage, need).await?
        } else {
            let target = loom_proto::msg::TargetId::mdt(0);
            let timeout = super::remote::PEER_TIMEOUT;
            self.peers
                .call(target, req, bytes::Bytes::new(), timeout)
                .await?
                .0
        };
        match reply {
            Reply::QuotaGrant { limited, granted } => {
                let shares = self.commit.quotas.shares(res);
                let was_limited = shares.known_limited(who);
                shares.granted(who, limited, granted);
                // Kept for a restart; not waited for (a share lost to a
                // crash is asked for again). An id that never had limits
                // has nothing stored to remove.
                if limited || was_limited {
                    self.keep_share(who, res, limited.then_some(granted))?;
                }
                Ok(())
            }
            other => Err(ServerError::peer(
                Errno::EPROTO,
                format!("QuotaAcquire answered {other:?}"),
            )),
        }
    }
}

fn over(who: QuotaId, which: &str, limit: u64, res: Res) -> ServerError {
    ServerError::refused(
        Errno::EDQUOT,
        format!("{who} is at its {which} limit of {limit} {}", res.unit()),
    )
}
