//! The replicas of OSTs this server hosts (see `loom_proto::replica` for
//! the rules): their roles as the MGS last gave them, the lease that
//! fences them, and the primary's part.
//!
//! - A primary serves clients. It does each change, then sends it to
//!   every other replica in sync or syncing ([`Request::Replica`], under
//!   its term) and answers once they all did, or once the MGS has agreed
//!   that one that failed is stale. Changes that meet are done in one
//!   order everywhere ([`order`]).
//! - A replica that is not the primary refuses clients (EREMCHG: they ask
//!   the MGS where the primary is) and does what its primary sends under
//!   the term it knows.
//! - A server whose renewal the MGS has not answered for
//!   [`LEASE_MS`] serves none of its replicas: the MGS may be handing
//!   their roles to others.
//! - A primary brings each syncing replica up to date ([`resync`]).

mod kv;
mod kv_resync;
mod kv_take;
mod order;
mod resync;

pub use kv::ReplicatedKv;

use crate::error::{Handled, ServerError};
use crate::ost::OstService;
use crate::peers::Peers;
use bytes::Bytes;
use loom_proto::msg::{
    Envelope, KvCopy, MgsRequest, OstRequest, Reply, ReqCtx, Request, TargetId, TargetInfo,
};
use loom_proto::replica::{Hosted, ReplicaState, FAILOVER_MS, HEARTBEAT_MS, LEASE_MS};
use loom_proto::requests::Effect;
use loom_proto::Errno;
use loom_rpc::Bulk;
use order::{Order, Span};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a renewal may wait for the MGS.
const RENEW_TIMEOUT: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One replica hosted here.
pub struct Held {
    /// The target.
    pub id: TargetId,
    /// Which replica.
    pub replica: u32,
    /// The target as the MGS last told it.
    info: Mutex<Option<TargetInfo>>,
    order: Order,
    /// Replicas this one, as primary, is bringing up to date: the bytes
    /// (for an MDT, records) each has left.
    syncing: Mutex<HashMap<u32, u64>>,
    /// An MDT's: its store, through which its primary writes.
    pub kv: OnceLock<Arc<ReplicatedKv>>,
}

impl Held {
    fn info(&self) -> Option<TargetInfo> {
        lock(&self.info).clone()
    }

    /// The term this replica is the primary under, if it is.
    fn primary_term(&self) -> Option<u64> {
        self.info()
            .filter(|i| i.primary == self.replica)
            .map(|i| i.term)
    }
}

/// Every replica this server hosts.
pub struct Replicas {
    peers: Arc<Peers>,
    addr: OnceLock<String>,
    held: Mutex<HashMap<TargetId, Arc<Held>>>,
    /// When the last renewal the MGS answered was sent.
    renewed: Mutex<Option<Instant>>,
    renew_now: tokio::sync::Notify,
}

impl Replicas {
    /// None hosted yet; the MGS reached through `peers`.
    pub fn new(peers: Arc<Peers>) -> Arc<Replicas> {
        Arc::new(Replicas {
            peers,
            addr: OnceLock::new(),
            held: Mutex::default(),
            renewed: Mutex::default(),
            renew_now: tokio::sync::Notify::new(),
        })
    }

    /// Host replica `replica` of `id`.
    pub fn hold(&self, id: TargetId, replica: u32) -> Arc<Held> {
        let h = Arc::new(Held {
            id,
            replica,
            info: Mutex::new(None),
            order: Order::default(),
            syncing: Mutex::default(),
            kv: OnceLock::new(),
        });
        lock(&self.held).insert(id, h.clone());
        h
    }

    /// The replica of `id` hosted here, if `id` is replicated.
    pub fn of(&self, id: TargetId) -> Option<Arc<Held>> {
        lock(&self.held).get(&id).cloned()
    }

    /// The MGS answered a renewal sent less than [`LEASE_MS`] ago.
    fn leased(&self) -> bool {
        lock(&self.renewed).is_some_and(|t| t.elapsed() < Duration::from_millis(LEASE_MS))
    }

    /// Renew with the MGS every [`HEARTBEAT_MS`] (sooner when a replica
    /// hears of a term it does not know), as the server at `addr`, and
    /// after each answer call `roles` with each replica hosted here (it
    /// opens or closes what the roles say, and starts bringing up to date
    /// the replicas of the targets this server is primary of). Runs until
    /// the process ends.
    pub async fn renew(self: Arc<Self>, addr: String, roles: impl Fn(&Arc<Held>)) {
        let _ = self.addr.set(addr.clone());
        let mut failing = false;
        loop {
            let sent = Instant::now();
            let held: Vec<Arc<Held>> = lock(&self.held).values().cloned().collect();
            let hosted = held
                .iter()
                .map(|h| Hosted {
                    target: h.id,
                    replica: h.replica,
                    syncing: lock(&h.syncing).iter().map(|(r, l)| (*r, *l)).collect(),
                })
                .collect();
            let req = MgsRequest::Heartbeat {
                addr: addr.clone(),
                hosted,
            };
            match self.peers.call_mgs_within(req, RENEW_TIMEOUT).await {
                Ok(Reply::Members(infos)) => {
                    *lock(&self.renewed) = Some(sent);
                    if failing {
                        tracing::info!("renewal answered by the MGS again");
                        failing = false;
                    }
                    for info in infos {
                        let Some(h) = held.iter().find(|h| h.id == info.id) else {
                            continue;
                        };
                        self.learn(h, info);
                        roles(h);
                    }
                }
                Ok(other) => tracing::warn!("renewal answered with {other:?}"),
                Err(e) => {
                    if !failing {
                        tracing::warn!("renewal not answered by the MGS: {e}; this server stops serving its replicas {LEASE_MS} ms after its last renewal");
                    }
                    failing = true;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(HEARTBEAT_MS)) => {}
                _ = self.renew_now.notified() => {}
            }
        }
    }

    /// Take `info` as what the MGS says of `h`'s target, logging a change
    /// of role.
    fn learn(&self, h: &Held, info: TargetInfo) {
        let mut cur = lock(&h.info);
        let was = cur.as_ref().map(|i| (i.term, i.primary == h.replica));
        let now = (info.term, info.primary == h.replica);
        if was != Some(now) {
            let state = info
                .replicas
                .iter()
                .find(|r| r.replica == h.replica)
                .map_or("unknown", |r| r.state.name());
            tracing::info!(target = %h.id, replica = h.replica, term = info.term, primary = info.primary, state, "replica role");
        }
        *cur = Some(info);
    }

    /// Start bringing each syncing replica of `h`'s target up to date, if
    /// this one is its primary and not doing so already: an OST's
    /// through `o`, an MDT's through its store.
    pub fn bring_up(self: &Arc<Self>, h: &Arc<Held>, o: Option<&Arc<OstService>>) {
        let (Some(info), true) = (h.info(), self.leased()) else {
            return;
        };
        if info.primary != h.replica {
            return;
        }
        for r in info
            .replicas
            .iter()
            .filter(|r| r.state == ReplicaState::Syncing)
        {
            let mut syncing = lock(&h.syncing);
            if syncing.contains_key(&r.replica) {
                continue;
            }
            match (o, h.kv.get()) {
                (Some(o), _) => {
                    tokio::spawn(resync::run(self.clone(), h.clone(), o.clone(), r.replica));
                }
                (None, Some(kv)) => {
                    tokio::spawn(kv_resync::run(kv.clone(), r.replica));
                }
                (None, None) => continue,
            }
            syncing.insert(r.replica, 0);
        }
    }

    /// `Ok` if this server is `h`'s primary, holding its lease: it may
    /// serve the target; EREMCHG otherwise.
    pub fn serving_now(&self, h: &Held) -> Result<(), ServerError> {
        self.serving(h).map(|_| ())
    }

    /// Whether the MGS names a replica other than this one `h`'s primary.
    pub fn replaced(&self, h: &Held) -> bool {
        h.info().is_some_and(|i| i.primary != h.replica)
    }

    /// EREMCHG unless this server may serve `h`'s target as its primary
    /// now: the term it does.
    fn serving(&self, h: &Held) -> Result<u64, ServerError> {
        if !self.leased() {
            return Err(ServerError::refused(
                Errno::EREMCHG,
                format!(
                    "{} replica {}: this server's lease from the MGS has run out",
                    h.id, h.replica
                ),
            ));
        }
        h.primary_term().ok_or_else(|| {
            let whose = h.info().map_or("not known yet".to_string(), |i| {
                format!("replica {} at {} (term {})", i.primary, i.addr, i.term)
            });
            ServerError::refused(
                Errno::EREMCHG,
                format!("{} replica {} is not its primary: {whose}", h.id, h.replica),
            )
        })
    }

    /// A client's or a server's request to `h`'s target: done here if this
    /// is its primary, each change then copied to the other replicas.
    pub async fn serve(
        &self,
        h: &Held,
        o: &Arc<OstService>,
        ctx: &ReqCtx,
        req: OstRequest,
        bulk: Bulk,
    ) -> (Handled, Vec<u8>) {
        let term = match self.serving(h) {
            Ok(t) => t,
            Err(e) => return (Err(e), Vec::new()),
        };
        let Some(spans) = spans_of(&req, bulk.data.len() as u64) else {
            return o.handle(ctx, req, bulk).await;
        };
        let _order = h.order.enter(spans).await;
        if matches!(req, OstRequest::ObjSync { .. }) {
            // An fsync changes no byte and may be done twice: here and on
            // the replicas at once, not one disk's flush after another's.
            let (here, copied) = tokio::join!(
                o.handle(ctx, req.clone(), bulk),
                self.copy(h, term, ctx, req, Bytes::new())
            );
            return match copied {
                Ok(()) => here,
                Err(e) => (Err(e), Vec::new()),
            };
        }
        // Its bytes for the replicas: the OST takes the bulk.
        let copy = Bytes::copy_from_slice(&bulk.data);
        let (res, out) = o.handle(ctx, req.clone(), bulk).await;
        let reply = match res {
            Ok(r) => r,
            Err(e) => return (Err(e), out),
        };
        let req = match (&req, &reply) {
            // The ids handed out, never handed out again by another.
            (OstRequest::Precreate { .. }, Reply::Precreated { start, count }) => {
                OstRequest::RaiseWatermark {
                    to: start + u64::from(*count),
                }
            }
            _ => req,
        };
        if let Err(e) = self.copy(h, term, ctx, req, copy).await {
            return (Err(e), Vec::new());
        }
        (Ok(reply), out)
    }

    /// Send `req`, done here, to every other replica in sync or syncing;
    /// `Ok` once each did it or is agreed stale by the MGS.
    async fn copy(
        &self,
        h: &Held,
        term: u64,
        ctx: &ReqCtx,
        req: OstRequest,
        bulk: Bytes,
    ) -> Result<(), ServerError> {
        let Some(info) = h.info() else {
            return Ok(());
        };
        let env = Envelope {
            target: h.id,
            ctx: ctx.clone(),
            req: Request::Replica { term, req },
            capa: None,
            snapshot: None,
        };
        let to: Vec<_> = info
            .replicas
            .iter()
            .filter(|r| {
                r.replica != h.replica
                    && matches!(r.state, ReplicaState::InSync | ReplicaState::Syncing)
            })
            .cloned()
            .collect();
        let mut sent = tokio::task::JoinSet::new();
        for (i, r) in to.iter().enumerate() {
            let (peers, env, addr, bulk) = (
                self.peers.clone(),
                env.clone(),
                r.addr.clone(),
                bulk.clone(),
            );
            sent.spawn(async move { (i, copy_one(&peers, &env, &addr, bulk).await) });
        }
        let mut failed = Vec::new();
        while let Some(done) = sent.join_next().await {
            match done {
                Ok((_, Ok(()))) => {}
                Ok((i, Err(e))) => failed.push((i, e)),
                Err(e) => {
                    return Err(ServerError::internal(format!(
                        "{}: sending a change to a replica: {e}",
                        h.id
                    )))
                }
            }
        }
        for (i, e) in failed {
            let r = &to[i];
            tracing::warn!(target = %h.id, replica = r.replica, op = env.req.name(), "a replica did not take a change: {e}; marking it stale");
            self.set_state(h, term, r.replica, ReplicaState::Stale)
                .await
                .map_err(|m| {
                    ServerError::refused(
                        Errno::EREMCHG,
                        format!("{}: replica {} missed a change and the MGS did not agree it is stale: {m}", h.id, r.replica),
                    )
                })?;
        }
        Ok(())
    }

    /// Tell the MGS, as `h`'s primary under `term`, that `replica` is
    /// `state` now; what it answers is learned.
    async fn set_state(
        &self,
        h: &Held,
        term: u64,
        replica: u32,
        state: ReplicaState,
    ) -> Result<(), ServerError> {
        let req = MgsRequest::SetReplica {
            target: h.id,
            term,
            replica,
            state,
        };
        match self
            .peers
            .call_mgs_within(req, Duration::from_millis(LEASE_MS))
            .await?
        {
            Reply::Members(infos) => {
                for i in infos.into_iter().filter(|i| i.id == h.id) {
                    self.learn(h, i);
                }
                Ok(())
            }
            other => Err(ServerError::peer(
                Errno::EPROTO,
                format!("SetReplica answered with {other:?}"),
            )),
        }
    }

    /// `Ok` if `term` is the one this replica knows and it is not the
    /// primary: it takes what the primary sends under it.
    fn copy_term(&self, h: &Held, term: u64) -> Result<(), ServerError> {
        let known = h.info().map(|i| (i.term, i.primary));
        match known {
            Some((t, p)) if t == term && p != h.replica => Ok(()),
            _ => {
                if known.is_none_or(|(t, _)| t < term) {
                    // A term this replica has not heard of: ask now.
                    self.renew_now.notify_one();
                }
                Err(ServerError::refused(
                    Errno::EREMCHG,
                    format!(
                        "{} replica {}: a copy under term {term}, but this replica knows {known:?} (term, primary)",
                        h.id, h.replica
                    ),
                ))
            }
        }
    }

    /// What an MDT's primary sent under `term` to its replica `h`.
    pub async fn take_kv(&self, h: &Held, term: u64, req: KvCopy, bulk: Bulk) -> Handled {
        self.copy_term(h, term)?;
        let Some(kv) = h.kv.get().cloned() else {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("{} is not a replicated MDT here", h.id),
            ));
        };
        tokio::task::spawn_blocking(move || kv.take(term, req, &bulk.data))
            .await
            .map_err(|e| ServerError::internal(format!("taking a copy: {e}")))?
    }

    /// A request `h`'s primary sent under `term`: done if that is the
    /// term this replica knows and it is not the primary.
    pub async fn apply(
        &self,
        h: &Held,
        o: &Arc<OstService>,
        term: u64,
        ctx: &ReqCtx,
        req: OstRequest,
        bulk: Bulk,
    ) -> (Handled, Vec<u8>) {
        if let Err(e) = self.copy_term(h, term) {
            return (Err(e), Vec::new());
        }
        if req.op().effect == Effect::Reads {
            return o.handle(ctx, req, bulk).await;
        }
        (o.apply_copy(ctx, req, bulk).await, Vec::new())
    }
}

/// What of its objects a change holds while it is done here and on the
/// replicas (see [`order`]); `None` for a request done on the primary
/// alone (reads, and what only the primary keeps: grants' releases,
/// statistics, snapshots).
fn spans_of(req: &OstRequest, len: u64) -> Option<Vec<Span>> {
    if req.op().effect == Effect::Reads {
        return None;
    }
    Some(match req {
        OstRequest::ObjWrite {
            obj, offset, pack, ..
        } => {
            let packed = pack.is_some_and(|c| c.is_on());
            vec![Span::range(obj.oid, *offset, len, packed)]
        }
        OstRequest::ObjPunch { obj, offset, len }
        | OstRequest::ObjAllocate {
            obj, offset, len, ..
        } => {
            vec![Span::range(obj.oid, *offset, *len, true)]
        }
        OstRequest::ObjTruncate { obj, .. } => vec![Span::whole(obj.oid)],
        OstRequest::Destroy { objs } | OstRequest::ObjSetOwner { objs, .. } => {
            objs.iter().map(|o| Span::whole(o.oid)).collect()
        }
        OstRequest::ObjSync { .. }
        | OstRequest::Precreate { .. }
        | OstRequest::RaiseWatermark { .. } => Vec::new(),
        OstRequest::QuotaRelease { .. } | OstRequest::Snapshot { .. } => return None,
        _ => return None,
    })
}

/// Send one copy to the replica at `addr`, again while it does not know
/// the term yet, for at most [`FAILOVER_MS`].
async fn copy_one(
    peers: &Peers,
    env: &Envelope,
    addr: &str,
    bulk: Bytes,
) -> Result<(), ServerError> {
    let deadline = Instant::now() + Duration::from_millis(FAILOVER_MS);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match peers.call_at(addr, env, bulk.clone(), left).await {
            Ok(_) => return Ok(()),
            Err(e) if e.errno() == Errno::EREMCHG && !left.is_zero() => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e),
        }
    }
}
