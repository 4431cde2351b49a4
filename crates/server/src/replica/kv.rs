//! A replicated MDT's key-value store: the primary's MDT writes through
//! it, and its batches reach the other replicas in the primary's order.
//!
//! - Every batch the primary applies is numbered (from 1 in each term)
//!   and kept in a log while a replica still needs it.
//! - A commit (`sync_through`) is the point where the commit model
//!   acknowledges a change (clients keep what is not committed, and
//!   replay it after a failover as after a restart). So a commit ships
//!   every batch since the last one to each replica that streams, which
//!   applies them in order and makes them durable before it answers, and
//!   the commit completes once every such replica did, or the MGS agreed
//!   that one that failed is stale. A replica the MGS counts in sync that
//!   does not stream (a primary that just started) is set syncing first.
//! - A batch the MDT hands to the operating system before answering
//!   (`apply_flushed`: what must survive a crash of this process) is not
//!   enough to survive the loss of this server: the MDT commits it
//!   before answering instead ([`KvStore::replicated`]).
//! - Nothing here waits on the network from a runtime thread while the
//!   MDT may hold a lock: only commits ship, from the MDT's syncer
//!   thread (or its opening and clean stop, which hold none).
//! - Only a primary holding its lease writes: anything else is refused,
//!   so an MDT service left over from a role this server lost changes
//!   nothing.
//! - A replica streams only after its primary brought it up to date
//!   under the current term and set its base ([`super::kv_resync`]).

use super::{lock, Held, Replicas};
use crate::error::ServerError;
use bytes::Bytes;
use loom_proto::msg::{Envelope, KvCopy, ReqCtx, Request};
use loom_proto::replica::{kv_wire, KvOp, ReplicaState};
use loom_proto::Errno;
use loom_store::kv::{Batch, Checked, FjallStore, KvError, KvStore, Pairs, Space, Ticket};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Bytes of batches one shipment carries at most.
const SHIP_BYTES: usize = 4 << 20;
/// Bytes of batches kept for replicas being brought up to date; past it
/// their bringing up starts again (it is taking too long for the rate of
/// change).
const MAX_LOG_BYTES: usize = 256 << 20;

/// Batches applied by the primary that a replica still needs.
#[derive(Default)]
pub(super) struct Log {
    /// The term the numbers count in.
    term: u64,
    /// The number the next batch gets.
    next: u64,
    /// Numbered batches, oldest first.
    batches: VecDeque<(u64, Arc<Vec<KvOp>>, usize)>,
    bytes: usize,
    /// Replicas that take every batch: the next number each needs.
    pub(super) streams: HashMap<u32, u64>,
    /// Replicas being brought up to date: the first number each will
    /// need, kept for them meanwhile.
    pub(super) pending: HashMap<u32, u64>,
}

impl Log {
    /// Start counting anew under `term` (a new primary's term): no
    /// replica streams until it is brought up to date under it.
    fn renew(&mut self, term: u64) {
        if self.term != term {
            *self = Log {
                term,
                next: 1,
                ..Log::default()
            };
        }
    }

    /// The number of the last batch applied.
    pub(super) fn last(&self) -> u64 {
        self.next - 1
    }

    fn push(&mut self, ops: Vec<KvOp>) {
        let n = self.next;
        self.next += 1;
        if self.streams.is_empty() && self.pending.is_empty() {
            return;
        }
        let size = ops
            .iter()
            .map(|o| o.key.len() + o.value.as_ref().map_or(0, Vec::len) + 10)
            .sum();
        self.batches.push_back((n, Arc::new(ops), size));
        self.bytes += size;
        if self.bytes > MAX_LOG_BYTES && !self.pending.is_empty() {
            tracing::warn!(
                "{} MiB of changes kept for replicas being brought up to date: starting again",
                self.bytes >> 20
            );
            self.pending.clear();
            self.trim();
        }
    }

    /// The batches from number `from` on.
    fn since(&self, from: u64) -> Vec<Arc<Vec<KvOp>>> {
        self.batches
            .iter()
            .filter(|(n, _, _)| *n >= from)
            .map(|(_, b, _)| b.clone())
            .collect()
    }

    /// Forget batches no replica needs.
    fn trim(&mut self) {
        let keep = self
            .streams
            .values()
            .chain(self.pending.values())
            .min()
            .copied()
            .unwrap_or(self.next);
        while let Some((n, _, size)) = self.batches.front() {
            if *n >= keep {
                break;
            }
            self.bytes -= size;
            self.batches.pop_front();
        }
    }
}

/// The store of one replicated MDT hosted here.
pub struct ReplicatedKv {
    pub(super) store: Arc<FjallStore>,
    /// The target directory (resync checkpoints go under it).
    pub(super) dir: PathBuf,
    pub(super) held: Arc<Held>,
    pub(super) replicas: Arc<Replicas>,
    rt: tokio::runtime::Handle,
    pub(super) log: Mutex<Log>,
    /// One shipment at a time, so batches leave in their order.
    shipping: tokio::sync::Mutex<()>,
    /// As a replica: the term and the number of the next batch it takes,
    /// once its primary set its base.
    pub(super) base: Mutex<Option<(u64, u64)>>,
}

impl ReplicatedKv {
    /// The store in `dir/db`, of replica `held` hosted here.
    pub fn open(
        dir: &Path,
        held: Arc<Held>,
        replicas: Arc<Replicas>,
    ) -> anyhow::Result<Arc<ReplicatedKv>> {
        let store = Arc::new(FjallStore::open(&dir.join("db"))?);
        Ok(Arc::new(ReplicatedKv {
            store,
            dir: dir.to_path_buf(),
            held,
            replicas,
            rt: tokio::runtime::Handle::current(),
            log: Mutex::default(),
            shipping: tokio::sync::Mutex::new(()),
            base: Mutex::default(),
        }))
    }

    fn refused(&self, e: impl std::fmt::Display) -> KvError {
        KvError::Backend {
            path: self.dir.join("db"),
            msg: e.to_string(),
        }
    }

    /// The term this server writes under: its lease holds and it is the
    /// primary.
    fn writable(&self) -> Result<u64, KvError> {
        self.replicas
            .serving(&self.held)
            .map_err(|e| self.refused(e))
    }

    /// Run `f` to its end from synchronous code, inside the runtime or
    /// not.
    fn block_on<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        match tokio::runtime::Handle::try_current() {
            Ok(h) => tokio::task::block_in_place(|| h.block_on(f)),
            Err(_) => self.rt.block_on(f),
        }
    }

    fn apply_as(&self, b: Batch, flushed: bool) -> Result<Ticket, KvError> {
        let term = self.writable()?;
        let ops: Vec<KvOp> = b
            .ops()
            .map(|(s, k, v)| KvOp {
                space: s.number(),
                key: k.to_vec(),
                value: v.map(<[u8]>::to_vec),
            })
            .collect();
        let mut log = lock(&self.log);
        log.renew(term);
        let t = if flushed {
            self.store.apply_flushed(b)?
        } else {
            self.store.apply(b)?
        };
        log.push(ops);
        Ok(t)
    }

    /// Send every batch not sent yet to each replica that streams (with
    /// `sync`, made durable there); `Ok` once each took them or is agreed
    /// stale by the MGS.
    pub(super) async fn ship(&self, sync: bool) -> Result<(), ServerError> {
        let _one = self.shipping.lock().await;
        let h = &self.held;
        let term = self.replicas.serving(h)?;
        let Some(info) = h.info() else {
            return Ok(());
        };
        let (sends, upto) = {
            let mut log = lock(&self.log);
            log.renew(term);
            let sends: Vec<_> = log
                .streams
                .iter()
                .map(|(r, from)| (*r, *from, log.since(*from)))
                .collect();
            (sends, log.last())
        };
        // In sync for the MGS, yet not taking batches: it may miss this
        // commit, so it may not take over.
        let lagging: Vec<u32> = info
            .replicas
            .iter()
            .filter(|r| {
                r.replica != h.replica
                    && r.state == ReplicaState::InSync
                    && !sends.iter().any(|(s, _, _)| *s == r.replica)
            })
            .map(|r| r.replica)
            .collect();
        for r in lagging {
            self.demote(term, r, ReplicaState::Syncing).await?;
        }
        let mut sent = tokio::task::JoinSet::new();
        for (r, from, batches) in sends {
            let addr = info
                .replicas
                .iter()
                .find(|x| x.replica == r)
                .map(|x| x.addr.clone());
            let (peers, target) = (self.replicas.peers.clone(), h.id);
            sent.spawn(async move {
                let Some(addr) = addr else {
                    return (r, Err(ServerError::internal("not a member any more")));
                };
                let env = |from| Envelope {
                    target,
                    ctx: ReqCtx::default(),
                    req: Request::KvReplica {
                        term,
                        req: KvCopy::Ship { from, sync },
                    },
                    capa: None,
                    snapshot: None,
                };
                (r, ship_to(&peers, &addr, from, &batches, sync, env).await)
            });
        }
        let mut failed = Vec::new();
        while let Some(done) = sent.join_next().await {
            match done {
                Ok((r, Ok(()))) => {
                    let mut log = lock(&self.log);
                    if let Some(next) = log.streams.get_mut(&r) {
                        *next = upto + 1;
                    }
                    log.trim();
                }
                Ok((r, Err(e))) => failed.push((r, e)),
                Err(e) => return Err(ServerError::internal(format!("shipping batches: {e}"))),
            }
        }
        for (r, e) in failed {
            tracing::warn!(target = %h.id, replica = r, "a replica did not take the batches: {e}; marking it stale");
            lock(&self.log).streams.remove(&r);
            self.demote(term, r, ReplicaState::Stale).await?;
        }
        Ok(())
    }

    /// Have the MGS count replica `r` as `state`, no longer in sync.
    async fn demote(&self, term: u64, r: u32, state: ReplicaState) -> Result<(), ServerError> {
        self.replicas
            .set_state(&self.held, term, r, state)
            .await
            .map_err(|m| {
                ServerError::refused(
                    Errno::EREMCHG,
                    format!(
                        "{}: replica {r} does not hold every change and the MGS did not agree it is {}: {m}",
                        self.held.id,
                        state.name()
                    ),
                )
            })
    }

    fn ship_blocking(&self, sync: bool) -> Result<(), KvError> {
        self.block_on(self.ship(sync)).map_err(|e| self.refused(e))
    }
}

/// Send `batches`, numbered from `from`, to the replica at `addr` in
/// shipments of at most [`SHIP_BYTES`]; the last with `sync` asks for
/// them durable. An empty list still asks for the sync.
async fn ship_to(
    peers: &crate::peers::Peers,
    addr: &str,
    from: u64,
    batches: &[Arc<Vec<KvOp>>],
    sync: bool,
    env: impl Fn(u64) -> Envelope,
) -> Result<(), ServerError> {
    let mut at = 0;
    loop {
        let mut end = at;
        let mut bytes = 0;
        while end < batches.len() && (end == at || bytes < SHIP_BYTES) {
            bytes += batches[end]
                .iter()
                .map(|o| o.key.len() + o.value.as_ref().map_or(0, Vec::len) + 10)
                .sum::<usize>();
            end += 1;
        }
        let last = end == batches.len();
        if at == end && !(last && sync) {
            return Ok(());
        }
        let wire = kv_wire::encode(batches[at..end].iter().map(|b| b.as_slice()));
        let mut e = env(from + at as u64);
        if let Request::KvReplica {
            req: KvCopy::Ship { sync: s, .. },
            ..
        } = &mut e.req
        {
            *s = sync && last;
        }
        super::copy_one(peers, &e, addr, Bytes::from(wire)).await?;
        if last {
            return Ok(());
        }
        at = end;
    }
}

impl KvStore for ReplicatedKv {
    fn get(&self, s: Space, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        self.store.get(s, key)
    }

    fn scan(
        &self,
        s: Space,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Pairs, KvError> {
        self.store.scan(s, prefix, after, limit)
    }

    fn apply(&self, b: Batch) -> Result<Ticket, KvError> {
        self.apply_as(b, false)
    }

    fn apply_flushed(&self, b: Batch) -> Result<Ticket, KvError> {
        // Not shipped here: this runs under the MDT's locks, where waiting
        // on the network would stall every request (the MDT commits what
        // must survive this server instead, see `replicated`).
        self.apply_as(b, true)
    }

    fn replicated(&self) -> bool {
        true
    }

    fn sync_through(&self, t: Ticket) -> Result<(), KvError> {
        self.writable()?;
        // Here and on the replicas at once.
        std::thread::scope(|s| {
            let there = s.spawn(|| self.ship_blocking(true));
            let here = self.store.sync_through(t);
            let there = there
                .join()
                .unwrap_or_else(|_| Err(self.refused("shipping to replicas panicked")));
            here.and(there)
        })
    }

    fn verify_scan(
        &self,
        s: Space,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Checked>, KvError> {
        self.store.verify_scan(s, after, limit)
    }

    fn checkpoint(&self, dst: &Path) -> Result<(), KvError> {
        let _log = lock(&self.log);
        self.store.checkpoint(dst)
    }

    fn damage_seen(&self) -> (u64, Vec<(Space, Vec<u8>)>) {
        self.store.damage_seen()
    }
}
