//! FIDs, layouts and the OST objects behind them.
//!
//! Each MDT keeps a pool of object ids precreated on every OST. A new file
//! takes its objects from the pools inside the create's own transaction
//! (the pool's new position is written in the same batch), so an id is
//! never used twice even across a crash; a pool is refilled from its OST
//! only when it runs dry.
//!
//! Unlinking a file's last name records its objects in the `destroy`
//! keyspace in the same batch; they are destroyed on the OSTs afterwards and
//! the record removed, so a crash in between leaves no orphan behind: the
//! records are replayed at start.

use super::records::meta;
use super::tx::{read_meta, store_err, Tx};
use super::{lock, MdtService};
use loom_proto::fid::MAX_INO_SEQ;
use loom_proto::layout::{DEFAULT_STRIPE_SIZE, MAX_STRIPE_COUNT};
use loom_proto::msg::{self, Reply, Request, Role, TargetId};
use loom_proto::{Errno, Fid, Layout, ObjRef, StripeSpec, WireError};
use loom_store::kv::{Batch, Space};
use std::collections::BTreeMap;
use std::time::Duration;

/// Objects asked of an OST per refill.
const PRECREATE_BATCH: u32 = 4096;
/// How long a refill may wait for its OST.
const PRECREATE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a destroy may wait for its OST before being left for later.
const DESTROY_TIMEOUT: Duration = Duration::from_secs(30);

impl MdtService {
    /// A new FID from this MDT's current sequence, recording the allocator's
    /// new position in `t`. MDT0 starts in sequence 0 (the root's); the
    /// others, and MDT0 once sequence 0 is used up, ask the MGS for one.
    pub(super) async fn alloc_fid(&self, t: &mut Tx<'_>) -> Result<Fid, WireError> {
        let cur = *lock(&self.fid_alloc);
        let (seq, oid) = match cur {
            Some((seq, oid)) if oid < u32::MAX => (seq, oid),
            None if self.index == 0 => (0, 2),
            _ => {
                let r = match self
                    .peers
                    .call_mgs(Request::AllocSeq { mdt: self.index })
                    .await?
                {
                    Reply::Seq(r) => r,
                    other => {
                        return Err(WireError::new(
                            Errno::EPROTO,
                            format!("AllocSeq answered {other:?}"),
                        ))
                    }
                };
                if r.start > MAX_INO_SEQ {
                    return Err(WireError::new(Errno::ENOSPC, "FID sequences exhausted"));
                }
                (r.start, 1)
            }
        };
        *lock(&self.fid_alloc) = Some((seq, oid + 1));
        t.put_meta(meta::FID_ALLOC, &(seq, oid + 1))?;
        Ok(Fid::new(seq, oid))
    }

    /// The striping that applies in directory `dir`: its own default, else
    /// the nearest ancestor's, else none.
    pub(super) fn default_stripe(&self, dir: Fid) -> Result<Option<StripeSpec>, WireError> {
        let mut fid = dir;
        // Bounded walk: a corrupt parent chain must not loop forever.
        for _ in 0..4096 {
            let r = super::tx::read_inode(&*self.store, fid)?;
            if r.default_stripe.is_some() {
                return Ok(r.default_stripe);
            }
            if fid == Fid::ROOT || r.parent == fid {
                return Ok(None);
            }
            fid = r.parent;
        }
        Ok(None)
    }

    /// Build a new file's layout from `spec`, taking objects from the pools.
    pub(super) async fn make_layout(
        &self,
        spec: &StripeSpec,
        t: &mut Tx<'_>,
    ) -> Result<Layout, WireError> {
        spec.validate()
            .map_err(|m| WireError::new(Errno::EINVAL, m))?;
        let cfg = self.peers.config().await?;
        let osts = cfg.indices(Role::Ost);
        if osts.is_empty() {
            return Err(WireError::new(Errno::ENOSPC, "no OSTs are registered"));
        }
        let n = osts.len();
        let count = match spec.count {
            -1 => n,
            0 => 1,
            c => (c as usize).min(n).min(MAX_STRIPE_COUNT as usize),
        };
        let size = if spec.size == 0 {
            DEFAULT_STRIPE_SIZE
        } else {
            spec.size
        };
        let start = if spec.start_ost >= 0 {
            osts.iter()
                .position(|&o| o == spec.start_ost as u32)
                .ok_or_else(|| {
                    WireError::new(
                        Errno::EINVAL,
                        format!("OST index {} does not exist", spec.start_ost),
                    )
                })?
        } else {
            self.rr.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as usize % n
        };
        let mut objects = Vec::with_capacity(count);
        for i in 0..count {
            let ost = osts[(start + i) % n];
            objects.push(ObjRef {
                ost,
                oid: self.take_object(ost, t).await?,
            });
        }
        let mut layout = Layout::raid0(size, objects);
        if let Some(c) = layout.components.first_mut() {
            c.pool = spec.pool.clone();
        }
        Ok(layout)
    }

    async fn take_object(&self, ost: u32, t: &mut Tx<'_>) -> Result<u64, WireError> {
        let cur = lock(&self.pools).get(&ost).copied();
        let (next, end) = match cur {
            Some(p) => p,
            None => read_meta::<(u64, u64)>(&*self.store, &meta::pool(ost))?.unwrap_or((0, 0)),
        };
        let (next, end) = if next < end {
            (next, end)
        } else {
            // Called under the namespace lock: at most one refill at a time.
            let (r, _) = self
                .peers
                .call(
                    TargetId::ost(ost),
                    Request::Precreate {
                        count: PRECREATE_BATCH,
                    },
                    &[],
                    PRECREATE_TIMEOUT,
                )
                .await?;
            match r {
                Reply::Precreated { start, count } => (start, start + u64::from(count)),
                other => {
                    return Err(WireError::new(
                        Errno::EPROTO,
                        format!("Precreate answered {other:?}"),
                    ))
                }
            }
        };
        lock(&self.pools).insert(ost, (next + 1, end));
        t.put_meta(&meta::pool(ost), &(next + 1, end))?;
        Ok(next)
    }

    /// Record `fid`'s objects for destruction in the same batch as its unlink.
    pub(super) fn record_destroy(
        &self,
        t: &mut Tx<'_>,
        fid: Fid,
        layout: &Layout,
    ) -> Result<(), WireError> {
        let objs = layout.objects();
        if !objs.is_empty() {
            t.batch
                .put(Space::Destroy, fid.to_key().to_vec(), msg::encode(&objs)?);
        }
        Ok(())
    }

    /// Destroy recorded objects in the background (after the unlink is durable).
    pub(super) fn spawn_destroy(self: &std::sync::Arc<Self>, fid: Fid, objs: Vec<ObjRef>) {
        let me = self.clone();
        tokio::spawn(async move { me.destroy(fid, objs).await });
    }

    async fn destroy(&self, fid: Fid, objs: Vec<ObjRef>) {
        let mut by_ost: BTreeMap<u32, Vec<ObjRef>> = BTreeMap::new();
        for o in objs {
            by_ost.entry(o.ost).or_default().push(o);
        }
        for (ost, objs) in by_ost {
            if let Err(e) = self
                .peers
                .call(
                    TargetId::ost(ost),
                    Request::Destroy { objs },
                    &[],
                    DESTROY_TIMEOUT,
                )
                .await
            {
                // The record stays; the next start retries.
                tracing::warn!(
                    "MDT{:04x}: destroying objects of {fid} on OST{ost:04x}: {e}",
                    self.index
                );
                return;
            }
        }
        let mut b = Batch::new();
        b.delete(Space::Destroy, fid.to_key().to_vec());
        // No fsync needed: if this is lost the destroy is simply repeated.
        if let Err(e) = self.store.apply(b) {
            tracing::warn!(
                "MDT{:04x}: clearing destroy record of {fid}: {e}",
                self.index
            );
        }
    }

    pub(super) async fn resume_destroys(self: std::sync::Arc<Self>) {
        let pending = match self
            .store
            .scan(Space::Destroy, &[], None, usize::MAX)
            .map_err(store_err)
        {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("MDT{:04x}: reading destroy records: {e}", self.index);
                return;
            }
        };
        for (k, v) in pending {
            let (Some(fid), Ok(objs)) = (Fid::from_key(&k), msg::decode::<Vec<ObjRef>>(&v)) else {
                tracing::warn!("MDT{:04x}: unreadable destroy record", self.index);
                continue;
            };
            self.destroy(fid, objs).await;
        }
    }
}
