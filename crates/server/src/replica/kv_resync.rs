//! A replicated MDT's primary brings a replica up to date while changes
//! go on, by difference.
//!
//! 1. It takes a checkpoint of its store (hard links; no batch applies
//!    meanwhile), and from then on keeps every new batch for the replica.
//! 2. Keyspace by keyspace, it cuts the checkpoint's records into ranges
//!    (up to [`RANGE_RECORDS`] records or [`RANGE_BYTES`]), asks the
//!    replica for the crc32c and count of each range (`KvCopy::Digest`),
//!    and sends only the ranges that differ, whole (`KvCopy::Fill`: the
//!    range then holds exactly those records). The replica takes no
//!    batch meanwhile.
//! 3. It sets the replica's base to the checkpoint's last batch
//!    (`KvCopy::Base`), and the replica streams: the next commit ships it
//!    every batch kept for it. Once one did, the MGS is told it is in
//!    sync.
//!
//! The records left to compare show as the replica's lag.

use super::kv::ReplicatedKv;
use super::kv_take::{sum_range, Summer};
use super::lock;
use crate::error::ServerError;
use bytes::Bytes;
use loom_proto::msg::{Envelope, KvCopy, Reply, ReqCtx, Request};
use loom_proto::replica::{kv_wire, KvOp, KvRange, ReplicaState};
use loom_proto::Errno;
use loom_store::kv::{FjallStore, KvStore, Space};
use std::sync::Arc;
use std::time::Duration;

/// Records one compared range holds at most.
const RANGE_RECORDS: usize = 512;
/// Bytes one compared range holds at most (a fill sends it whole).
const RANGE_BYTES: usize = 2 << 20;
/// Ranges asked about in one digest.
const RANGES_PER_DIGEST: usize = 64;
/// How long one step may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// Bring replica `replica` up to date, then tell the MGS. A failure
/// leaves it syncing (or stale); the next renewal starts again.
pub(super) async fn run(kv: Arc<ReplicatedKv>, replica: u32) {
    let h = kv.held.clone();
    let t0 = std::time::Instant::now();
    tracing::info!(target = %h.id, replica, "bringing an MDT replica up to date");
    let ckpt = kv.dir.join(format!("resync-{replica}"));
    let r = bring(&kv, replica, &ckpt).await;
    let left = ckpt.clone();
    let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(left)).await;
    let done = match r {
        Ok((term, sent)) => {
            match kv
                .replicas
                .set_state(&h, term, replica, ReplicaState::InSync)
                .await
            {
                Ok(()) => {
                    tracing::info!(target = %h.id, replica, records_sent = sent, secs = t0.elapsed().as_secs_f64(), "MDT replica up to date: in sync");
                    true
                }
                Err(e) => {
                    tracing::warn!(target = %h.id, replica, "MDT replica up to date, but the MGS did not take it: {e}");
                    false
                }
            }
        }
        Err(e) => {
            tracing::warn!(target = %h.id, replica, "bringing an MDT replica up to date failed: {e}");
            false
        }
    };
    if !done {
        {
            let mut log = lock(&kv.log);
            log.pending.remove(&replica);
            log.streams.remove(&replica);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    lock(&h.syncing).remove(&replica);
}

/// Compare and send everything; the term it was done under and the
/// records sent.
async fn bring(
    kv: &Arc<ReplicatedKv>,
    replica: u32,
    ckpt: &std::path::Path,
) -> Result<(u64, u64), ServerError> {
    let h = &kv.held;
    let term = kv.replicas.serving(h)?;
    let addr = h
        .info()
        .and_then(|i| i.replicas.into_iter().find(|r| r.replica == replica))
        .map(|r| r.addr)
        .ok_or_else(|| {
            ServerError::refused(Errno::ENOENT, format!("{}: no replica {replica}", h.id))
        })?;
    // The image, and the batches after it kept for the replica.
    let (k, dst) = (kv.clone(), ckpt.to_path_buf());
    let (image, seq) = tokio::task::spawn_blocking(move || {
        if dst.exists() {
            std::fs::remove_dir_all(&dst)?;
        }
        let mut log = lock(&k.log);
        k.store.checkpoint(&dst)?;
        let seq = log.last();
        log.pending.insert(replica, seq + 1);
        drop(log);
        Ok::<_, anyhow::Error>((FjallStore::open(&dst)?, seq))
    })
    .await
    .map_err(|e| ServerError::internal(format!("resync checkpoint: {e}")))?
    .map_err(|e| ServerError::internal(format!("resync checkpoint: {e}")))?;
    let image = Arc::new(image);
    let step = Step {
        kv,
        term,
        addr: &addr,
    };
    // What is to compare, for the lag shown meanwhile.
    let mut left = 0u64;
    for s in Space::ALL {
        let r = whole(s);
        let img = image.clone();
        left += blocking(move || sum_range(&*img, &r)).await?.1;
    }
    lock(&h.syncing).insert(replica, left);
    let mut sent = 0;
    for s in Space::ALL {
        let img = image.clone();
        let ranges = blocking(move || cut(&*img, s)).await?;
        for group in ranges.chunks(RANGES_PER_DIGEST) {
            kv.replicas.serving(h)?;
            let asked: Vec<KvRange> = group.iter().map(|(r, _)| r.clone()).collect();
            let theirs = match step
                .send(KvCopy::Digest { ranges: asked }, Bytes::new())
                .await?
            {
                Reply::KvSums(v) if v.len() == group.len() => v,
                other => {
                    return Err(ServerError::peer(
                        Errno::EPROTO,
                        format!("KvDigest answered with {other:?}"),
                    ))
                }
            };
            for ((range, mine), theirs) in group.iter().zip(theirs) {
                if *mine != theirs {
                    let (img, r) = (image.clone(), range.clone());
                    let pairs = blocking(move || {
                        let mut v = Vec::new();
                        super::kv_take::each_in(&*img, &r, |k, val| {
                            v.push(KvOp {
                                space: r.space,
                                key: k.to_vec(),
                                value: Some(val.to_vec()),
                            })
                        })?;
                        Ok(v)
                    })
                    .await?;
                    sent += pairs.len() as u64;
                    let wire = kv_wire::encode([pairs.as_slice()]);
                    step.send(
                        KvCopy::Fill {
                            range: range.clone(),
                        },
                        Bytes::from(wire),
                    )
                    .await?;
                }
                left = left.saturating_sub(mine.1);
            }
            lock(&h.syncing).insert(replica, left);
        }
    }
    drop(image);
    step.send(KvCopy::Base { seq }, Bytes::new()).await?;
    {
        let mut log = lock(&kv.log);
        if log.pending.remove(&replica).is_none() {
            return Err(ServerError::internal(
                "the changes kept for the replica were dropped (too many, or a new term)",
            ));
        }
        log.streams.insert(replica, seq + 1);
    }
    // Everything kept for it, made durable there.
    kv.ship(true).await?;
    if !lock(&kv.log).streams.contains_key(&replica) {
        return Err(ServerError::internal(
            "the replica did not take the batches kept for it",
        ));
    }
    Ok((term, sent))
}

/// Every key of keyspace `s`.
fn whole(s: Space) -> KvRange {
    KvRange {
        space: s.number(),
        after: None,
        through: None,
    }
}

/// A range to compare, and the crc32c and count of its records here.
type Summed = (KvRange, (u32, u64));

/// `s`'s records in `img` cut into ranges, each with its sum; the last
/// range runs to the end of the keyspace.
fn cut(img: &dyn KvStore, s: Space) -> Result<Vec<Summed>, ServerError> {
    let mut out = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    let (mut sum, mut bytes) = (Summer::default(), 0usize);
    super::kv_take::each_in(img, &whole(s), |k, v| {
        sum.add(k, v);
        bytes += k.len() + v.len();
        if sum.count as usize >= RANGE_RECORDS || bytes >= RANGE_BYTES {
            let range = KvRange {
                space: s.number(),
                after: after.take(),
                through: Some(k.to_vec()),
            };
            out.push((range, (sum.crc, sum.count)));
            after = Some(k.to_vec());
            (sum, bytes) = (Summer::default(), 0);
        }
    })?;
    out.push((
        KvRange {
            space: s.number(),
            after,
            through: None,
        },
        (sum.crc, sum.count),
    ));
    Ok(out)
}

/// Run `f` on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ServerError> + Send + 'static,
) -> Result<T, ServerError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ServerError::internal(format!("resync task failed: {e}")))?
}

/// What a resync sends one replica.
struct Step<'a> {
    kv: &'a ReplicatedKv,
    term: u64,
    addr: &'a str,
}

impl Step<'_> {
    async fn send(&self, req: KvCopy, bulk: Bytes) -> Result<Reply, ServerError> {
        let env = Envelope {
            target: self.kv.held.id,
            ctx: ReqCtx::default(),
            req: Request::KvReplica {
                term: self.term,
                req,
            },
            capa: None,
            snapshot: None,
        };
        Ok(self
            .kv
            .replicas
            .peers
            .call_at(self.addr, &env, bulk, STEP_TIMEOUT)
            .await?
            .0)
    }
}
