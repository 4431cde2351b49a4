//! The reply cache: a resent request is answered with the reply of its
//! first execution instead of being done twice.
//!
//! A client resends a request only after the connection it went out on
//! died, so the first execution may have been applied, and even made
//! durable, without its reply arriving. Done again, a create would answer
//! EEXIST and an unlink ENOENT for something that succeeded. So every
//! namespace or attribute change records its reply in the `replies`
//! keyspace, keyed by the request's client id and sequence number, in the
//! same batch as the change: the change and its reply survive a crash
//! together or not at all.
//!
//! - A resend that arrives while the first execution still runs waits for
//!   it ([`ReplyCache::enter`]), then finds its reply.
//! - Each request carries `acked_below`: the client has every reply below
//!   it, so records of that client under it are deleted in the next batch
//!   that records one of its replies. Records of clients that went away are
//!   deleted at start once older than [`REPLY_TTL`].
//! - Failed requests record nothing (they changed nothing) and run again.
//!
//! The record key is the request's, carried to
//! [`MdtService::apply`](super::MdtService) in its explicit request context
//! (`request::Rq`). Each record keeps the change's transaction number, so that a resend is
//! answered with it and the client keeps the change for replay until it
//! is committed.

use super::tx::store_err;
use crate::error::ServerError;
use loom_proto::msg::{self, Effect, MdtRequest, Reply, ReqCtx, Time};

use loom_store::kv::{Batch, KvStore, Space};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// Records older than this belong to clients that are long gone: a client
/// resends only within its call timeout.
pub const REPLY_TTL_SECS: i64 = 24 * 3600;
/// As a duration, for docs.
pub const REPLY_TTL: std::time::Duration = std::time::Duration::from_secs(REPLY_TTL_SECS as u64);

/// Which request's reply a change must record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReplyKey {
    /// The client instance.
    pub client: u64,
    /// The request's sequence number.
    pub seq: u64,
    /// The client has every reply below this sequence number.
    pub acked_below: u64,
}

impl ReplyKey {
    /// The key of a request, if it can be resent (the servers' own requests
    /// carry no sequence number and are never cached).
    pub fn of(ctx: &ReqCtx, req: &MdtRequest) -> Option<ReplyKey> {
        (ctx.client_id != 0 && ctx.seq != 0 && is_update(req)).then_some(ReplyKey {
            client: ctx.client_id,
            seq: ctx.seq,
            acked_below: ctx.acked_below,
        })
    }

    fn bytes(client: u64, seq: u64) -> Vec<u8> {
        let mut k = Vec::with_capacity(16);
        k.extend_from_slice(&client.to_be_bytes());
        k.extend_from_slice(&seq.to_be_bytes());
        k
    }
}

/// Whether `req` changes the MDT's state and must happen once, and so
/// records its reply (as declared with the request).
pub fn is_update(req: &MdtRequest) -> bool {
    req.op().effect == Effect::Once
}

/// The stored value: when, the change's transaction number, and the reply.
pub(super) type Record = (Time, u64, Reply);

/// Held by the execution of one request; its resends wait on it.
type Gate = Arc<tokio::sync::Mutex<()>>;

/// Per-MDT reply cache state (the records themselves are in the store).
#[derive(Default)]
pub struct ReplyCache {
    /// Requests executing now, so that a resend waits for its original.
    running: Mutex<HashMap<(u64, u64), Gate>>,
    /// Sequence numbers with a record, per client: what to prune.
    recorded: Mutex<HashMap<u64, BTreeSet<u64>>>,
}

/// Held while a request executes; a resend of it waits.
pub struct Running<'a> {
    cache: &'a ReplyCache,
    key: (u64, u64),
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        lock(&self.cache.running).remove(&self.key);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ReplyCache {
    /// Load the index of records, deleting those older than
    /// [`REPLY_TTL`]. Returns how many were kept and removed.
    pub fn load(store: &dyn KvStore) -> Result<(ReplyCache, usize, usize), ServerError> {
        let cache = ReplyCache::default();
        let now = Time::now();
        let mut stale = Batch::new();
        let (mut kept, mut removed) = (0, 0);
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = store
                .scan(Space::Replies, &[], after.as_deref(), 4096)
                .map_err(store_err)?;
            for (k, v) in &page {
                let (Some(client), Some(seq)) = (be_u64(k, 0), be_u64(k, 8)) else {
                    stale.delete(Space::Replies, k.clone());
                    removed += 1;
                    continue;
                };
                // A record of another format (an older version) is dropped
                // like an expired one.
                let old = match super::tx::decode_record::<Record>(v) {
                    Ok((t, _, _)) => now.sec - t.sec > REPLY_TTL_SECS,
                    Err(_) => true,
                };
                if old {
                    stale.delete(Space::Replies, k.clone());
                    removed += 1;
                } else {
                    lock(&cache.recorded).entry(client).or_default().insert(seq);
                    kept += 1;
                }
            }
            if page.len() < 4096 {
                break;
            }
            after = page.last().map(|(k, _)| k.clone());
        }
        if !stale.is_empty() {
            // Not synced: deleting them again after a crash costs nothing.
            store.apply(stale).map_err(store_err)?;
        }
        Ok((cache, kept, removed))
    }

    /// Wait until no other execution of `key` runs, and mark it running.
    pub async fn enter(&self, key: ReplyKey) -> Running<'_> {
        let k = (key.client, key.seq);
        let m = lock(&self.running).entry(k).or_default().clone();
        let guard = m.clone().lock_owned().await;
        // The one we waited for removed the entry as it finished: put ours
        // back for whoever comes next.
        lock(&self.running).entry(k).or_insert(m);
        Running {
            cache: self,
            key: k,
            _guard: guard,
        }
    }

    /// The recorded reply of `key` and its transaction number, if its
    /// first execution was applied.
    pub fn lookup(
        &self,
        store: &dyn KvStore,
        key: ReplyKey,
    ) -> Result<Option<(u64, Reply)>, ServerError> {
        if !lock(&self.recorded)
            .get(&key.client)
            .is_some_and(|s| s.contains(&key.seq))
        {
            return Ok(None);
        }
        match store
            .get(Space::Replies, &ReplyKey::bytes(key.client, key.seq))
            .map_err(store_err)?
        {
            None => Ok(None),
            Some(v) => {
                let (_, transno, reply) = msg::decode::<Record>(&v)
                    .map_err(|e| store_err(format!("reply record: {}", e.msg)))?;
                Ok(Some((transno, reply)))
            }
        }
    }

    /// Add the record of `reply` for `key` to `batch`, with deletions of
    /// the client's records below its `acked_below`. Returns what to
    /// [`ReplyCache::commit`] once the batch is applied.
    pub fn record(
        &self,
        batch: &mut Batch,
        key: ReplyKey,
        transno: u64,
        reply: &Reply,
    ) -> Result<Vec<u64>, ServerError> {
        batch.put(
            Space::Replies,
            ReplyKey::bytes(key.client, key.seq),
            super::tx::encode_record(&(Time::now(), transno, reply))?,
        );
        let prune: Vec<u64> = lock(&self.recorded)
            .get(&key.client)
            .map(|s| s.range(..key.acked_below).copied().collect())
            .unwrap_or_default();
        for seq in &prune {
            batch.delete(Space::Replies, ReplyKey::bytes(key.client, *seq));
        }
        Ok(prune)
    }

    /// The batch with `key`'s record (and the `pruned` deletions) applied.
    pub fn commit(&self, key: ReplyKey, pruned: &[u64]) {
        let mut r = lock(&self.recorded);
        let set = r.entry(key.client).or_default();
        for s in pruned {
            set.remove(s);
        }
        set.insert(key.seq);
    }

    /// Number of records (for tests and statistics).
    pub fn len(&self) -> usize {
        lock(&self.recorded).values().map(BTreeSet::len).sum()
    }

    /// Whether there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn be_u64(b: &[u8], at: usize) -> Option<u64> {
    let s: [u8; 8] = b.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_be_bytes(s))
}
