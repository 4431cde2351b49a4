//! A primary brings a syncing replica up to date while changes go on.
//!
//! Changes made meanwhile reach the replica as they are made (the primary
//! sends them to syncing replicas too). The rest is found by difference:
//! object by object, bucket by bucket, the primary compares the crc32c of
//! each MiB of its copy with the replica's (`ObjDigest`) and sends only
//! the MiBs that differ, then the size, the owner, and the destruction of
//! objects it does not have. Each object is compared while it holds the
//! whole object in the change order ([`super::order`]), so a change to it
//! is never overtaken by an older copy of its bytes. Then the replica
//! counts as in sync (`SetReplica`).

use super::{lock, order::Span, Held, Replicas};
use crate::error::ServerError;
use crate::ost::OstService;
use bytes::Bytes;
use loom_proto::msg::{Envelope, OstRequest, Reply, ReqCtx, Request};
use loom_proto::replica::ReplicaState;
use loom_proto::{Errno, ObjRef};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Bytes one sum of a digest covers, and one copy sends.
const CHUNK: u32 = 1 << 20;
/// Bytes one digest covers.
const SPAN: u64 = 64 << 20;
/// How long one step may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// Bring replica `replica` of `h`'s target up to date, then tell the MGS.
/// A failure leaves it syncing; the next renewal starts again.
pub(super) async fn run(me: Arc<Replicas>, h: Arc<Held>, o: Arc<OstService>, replica: u32) {
    let t0 = std::time::Instant::now();
    tracing::info!(target = %h.id, replica, "bringing a replica up to date");
    let done = match bring(&me, &h, &o, replica).await {
        Ok((term, sent)) => match me.set_state(&h, term, replica, ReplicaState::InSync).await {
            Ok(()) => {
                tracing::info!(target = %h.id, replica, sent, secs = t0.elapsed().as_secs_f64(), "replica up to date: in sync");
                true
            }
            Err(e) => {
                tracing::warn!(target = %h.id, replica, "replica up to date, but the MGS did not take it: {e}");
                false
            }
        },
        Err(e) => {
            tracing::warn!(target = %h.id, replica, "bringing a replica up to date failed: {e}");
            false
        }
    };
    if !done {
        // Not at once again, at the next renewal but one.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    lock(&h.syncing).remove(&replica);
}

/// Compare and send everything; the term it was done under and the bytes
/// sent.
async fn bring(
    me: &Replicas,
    h: &Held,
    o: &Arc<OstService>,
    replica: u32,
) -> Result<(u64, u64), ServerError> {
    let term = me.serving(h)?;
    let addr = h
        .info()
        .and_then(|i| i.replicas.into_iter().find(|r| r.replica == replica))
        .map(|r| r.addr)
        .ok_or_else(|| {
            ServerError::refused(Errno::ENOENT, format!("{}: no replica {replica}", h.id))
        })?;
    let step = Step {
        me,
        h,
        term,
        addr: &addr,
    };
    let store = o.store().clone();
    step.send(
        OstRequest::RaiseWatermark {
            to: store.watermark(),
        },
        Bytes::new(),
    )
    .await?;
    // What is to compare, for the lag shown meanwhile.
    let s = store.clone();
    let mine = blocking(move || {
        (0..=255u8)
            .map(|b| Ok((b, s.list(b)?)))
            .collect::<Result<BTreeMap<u8, Vec<loom_proto::msg::ObjInfo>>, _>>()
    })
    .await?;
    let mut left: u64 = mine.values().flatten().map(|i| i.size).sum();
    lock(&h.syncing).insert(replica, left);
    let mut sent = 0;
    for (bucket, objs) in mine {
        let theirs = match step
            .send(OstRequest::ListObjects { bucket }, Bytes::new())
            .await?
        {
            Reply::Objects(v) => v,
            other => {
                return Err(ServerError::peer(
                    Errno::EPROTO,
                    format!("ListObjects answered with {other:?}"),
                ))
            }
        };
        let mut oids: Vec<u64> = objs.iter().chain(&theirs).map(|i| i.oid).collect();
        oids.sort_unstable();
        oids.dedup();
        for oid in oids {
            me.serving(h)?;
            sent += step.object(o, oid).await?;
            let size = objs.iter().find(|i| i.oid == oid).map_or(0, |i| i.size);
            left = left.saturating_sub(size);
            lock(&h.syncing).insert(replica, left);
        }
    }
    Ok((term, sent))
}

/// Run `f` on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, loom_store::object::ObjectError> + Send + 'static,
) -> Result<T, ServerError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ServerError::internal(format!("resync task failed: {e}")))?
        .map_err(ServerError::from)
}

/// What a resync sends one replica.
struct Step<'a> {
    me: &'a Replicas,
    h: &'a Held,
    term: u64,
    addr: &'a str,
}

impl Step<'_> {
    async fn send(&self, req: OstRequest, bulk: Bytes) -> Result<Reply, ServerError> {
        let env = Envelope {
            target: self.h.id,
            ctx: ReqCtx::default(),
            req: Request::Replica {
                term: self.term,
                req,
            },
            capa: None,
            snapshot: None,
        };
        Ok(self
            .me
            .peers
            .call_at(self.addr, &env, bulk, STEP_TIMEOUT)
            .await?
            .0)
    }

    /// Make the replica's object `oid` the same as this one's, holding
    /// it whole meanwhile; the bytes sent.
    async fn object(&self, o: &Arc<OstService>, oid: u64) -> Result<u64, ServerError> {
        let obj = ObjRef {
            ost: self.h.id.index,
            oid,
        };
        let _held = self.h.order.enter(vec![Span::whole(oid)]).await;
        let store = o.store().clone();
        let s = store.clone();
        let here = blocking(move || {
            if !s.object_path(oid).exists() {
                return Ok(None);
            }
            Ok(Some((s.size(oid)?, s.compression(oid)?, s.owner(oid)?)))
        })
        .await?;
        let Some((size, pack, owner)) = here else {
            self.send(OstRequest::Destroy { objs: vec![obj] }, Bytes::new())
                .await?;
            return Ok(0);
        };
        let mut sent = 0;
        let mut their_size = None;
        // The replica's copy could not be read (a damaged block): it is
        // replaced whole.
        let mut replaced = false;
        let mut at = 0;
        while at < size {
            let digest = OstRequest::ObjDigest {
                obj,
                offset: at,
                len: SPAN,
                chunk: CHUNK,
            };
            let theirs = if replaced {
                Vec::new()
            } else {
                match self.send(digest, Bytes::new()).await {
                    Ok(Reply::Digest { size, sums }) => {
                        their_size = Some(size);
                        sums
                    }
                    Ok(other) => {
                        return Err(ServerError::peer(
                            Errno::EPROTO,
                            format!("ObjDigest answered with {other:?}"),
                        ))
                    }
                    Err(e) if e.errno() == Errno::EIO => {
                        tracing::warn!(target = %self.h.id, oid, "a replica's copy is damaged ({e}); replacing it whole");
                        self.send(OstRequest::Destroy { objs: vec![obj] }, Bytes::new())
                            .await?;
                        (replaced, their_size) = (true, None);
                        Vec::new()
                    }
                    Err(e) => return Err(e),
                }
            };
            let s = store.clone();
            let (_, mine) = blocking(move || s.digest(oid, at, SPAN, CHUNK)).await?;
            for (i, sum) in mine.iter().enumerate() {
                if theirs.get(i) == Some(sum) {
                    continue;
                }
                let offset = at + i as u64 * u64::from(CHUNK);
                let s = store.clone();
                let data = blocking(move || s.read(oid, offset, CHUNK)).await?;
                sent += data.len() as u64;
                let write = OstRequest::ObjWrite {
                    obj,
                    offset,
                    pack,
                    grant_used: 0,
                    owner: Some(owner),
                };
                self.send(write, Bytes::from(data)).await?;
            }
            at += SPAN;
        }
        if their_size != Some(size) {
            // Shorter or longer there, or never compared (empty here).
            self.send(
                OstRequest::ObjTruncate {
                    obj,
                    size,
                    pack,
                    owner: Some(owner),
                },
                Bytes::new(),
            )
            .await?;
        }
        self.send(
            OstRequest::ObjSetOwner {
                objs: vec![obj],
                owner,
            },
            Bytes::new(),
        )
        .await?;
        Ok(sent)
    }
}
