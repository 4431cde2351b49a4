//! FIDs, layouts and the OST objects behind them.
//!
//! Each MDT keeps, in memory, ranges of object ids precreated on every OST
//! ([`Pools`]). A new file takes its objects from them before the namespace
//! lock is taken, so a create is one client round trip and never waits for
//! an OST while holding up other namespace changes. A pool is refilled in
//! the background when it runs low, from the OST's `Precreate`, which makes
//! its new high-water mark durable before answering: an id it returned is
//! never returned again. The pools are not persisted: after a restart the
//! MDT starts with empty pools and asks for fresh ranges, so an id handed
//! out before a crash (perhaps to a create that was lost) is never used
//! again. A restart wastes at most one range per OST.
//!
//! An OST whose refill failed recently is skipped when the MDT chooses
//! where a new file goes (explicit `-i` requests still wait for it).
//!
//! Unlinking a file's last name records its objects in the `destroy`
//! keyspace in the same batch ([`MdtService::record_destroy`]); see
//! `destroys` for what happens to them then.

use super::records::meta;
use super::tx::Tx;
use super::{lock, MdtService};
use crate::error::ServerError;
use bytes::Bytes;
use loom_proto::fid::MAX_INO_SEQ;
use loom_proto::layout::{Component, LayoutSpec, Pattern};
use loom_proto::layout::{DEFAULT_STRIPE_SIZE, MAX_STRIPE_COUNT};
use loom_proto::msg::{MgsRequest, OstRequest, Reply, Role, TargetId};
use loom_proto::{Compress, Errno, Fid, Layout, ObjRef, StripeSpec};
use loom_store::kv::Space;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// FIDs left in a sequence below which the next change fetches a new one
/// before taking the namespace lock: more than the creates that can be
/// between that check and their allocation at once.
const FID_HEADROOM: u32 = 1 << 16;

/// Objects asked of an OST per refill.
const PRECREATE_BATCH: u32 = 4096;
/// A pool with fewer ids than this is refilled in the background.
const LOW_WATER: u64 = PRECREATE_BATCH as u64 / 2;
/// How long a refill may wait for its OST.
const PRECREATE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long an OST whose refill failed is left out of new layouts.
const OST_SKIP_AFTER_FAILURE: Duration = Duration::from_secs(30);

/// Ids precreated on one OST.
#[derive(Default)]
struct Pool {
    /// Ranges [start, end) not yet handed out, oldest first.
    ranges: VecDeque<(u64, u64)>,
    /// A background refill is running.
    refilling: bool,
    /// When the last refill failed (cleared by a success).
    failed_at: Option<Instant>,
}

impl Pool {
    fn available(&self) -> u64 {
        self.ranges.iter().map(|(a, b)| b - a).sum()
    }

    fn take(&mut self) -> Option<u64> {
        let (start, end) = self.ranges.front_mut()?;
        let id = *start;
        *start += 1;
        if start == end {
            self.ranges.pop_front();
        }
        Some(id)
    }
}

/// The precreated ids of every OST, and one refill lock per OST.
#[derive(Default)]
pub struct Pools {
    pools: Mutex<HashMap<u32, Pool>>,
    refill_locks: Mutex<HashMap<u32, Arc<tokio::sync::Mutex<()>>>>,
}

impl Pools {
    fn with<T>(&self, ost: u32, f: impl FnOnce(&mut Pool) -> T) -> T {
        f(lock(&self.pools).entry(ost).or_default())
    }

    /// Whether the MDT may place new files on `ost` by its own choice.
    fn usable(&self, ost: u32) -> bool {
        self.with(ost, |p| {
            p.available() > 0
                || p.failed_at
                    .is_none_or(|t| t.elapsed() >= OST_SKIP_AFTER_FAILURE)
        })
    }

    fn refill_lock(&self, ost: u32) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.refill_locks).entry(ost).or_default().clone()
    }
}

impl MdtService {
    /// Make sure the FID allocator has a sequence with room, asking the MGS
    /// for a new one when this MDT has none yet (MDT0 starts in sequence 0,
    /// the root's; the others ask) or fewer than [`FID_HEADROOM`] ids are
    /// left. Called before the namespace lock is taken: no RPC is made
    /// under it, and [`Self::alloc_fid`] under it never needs to call out.
    pub(super) async fn ensure_fid_room(&self) -> Result<(), ServerError> {
        let cur = *lock(&self.names.fid_alloc);
        match cur {
            Some((_, oid)) if oid <= u32::MAX - FID_HEADROOM => return Ok(()),
            None if self.index == 0 => {
                let mut a = lock(&self.names.fid_alloc);
                if a.is_none() {
                    *a = Some((0, 2));
                }
                return Ok(());
            }
            _ => {}
        }
        let r = match self
            .peers
            .call_mgs(MgsRequest::AllocSeq { mdt: self.index })
            .await?
        {
            Reply::Seq(r) => r,
            other => {
                return Err(ServerError::peer(
                    Errno::EPROTO,
                    format!("AllocSeq answered {other:?}"),
                ))
            }
        };
        if r.start > MAX_INO_SEQ {
            return Err(ServerError::refused(
                Errno::ENOSPC,
                "FID sequences exhausted",
            ));
        }
        let mut a = lock(&self.names.fid_alloc);
        // Another task may have switched first: keep the newer sequence
        // (the MGS hands them out in rising order); a sequence fetched and
        // not used is wasted, as a restart wastes one.
        if a.is_none_or(|(seq, oid)| seq < r.start && oid > u32::MAX - FID_HEADROOM) {
            *a = Some((r.start, 1));
        }
        Ok(())
    }

    /// A new FID from this MDT's current sequence, recording the
    /// allocator's new position in `t`. Never calls out: the sequence was
    /// made ready by [`Self::ensure_fid_room`] before the namespace lock.
    pub(super) fn alloc_fid(&self, t: &mut Tx<'_>) -> Result<Fid, ServerError> {
        self.alloc_fids(t, 1)
    }

    /// The first of `count` consecutive new FIDs (a client's grant, see
    /// `grants`), as [`Self::alloc_fid`].
    pub(super) fn alloc_fids(&self, t: &mut Tx<'_>, count: u32) -> Result<Fid, ServerError> {
        let mut a = lock(&self.names.fid_alloc);
        let Some((seq, oid)) = *a else {
            return Err(ServerError::refused(
                Errno::EAGAIN,
                "no FID sequence yet (the MGS was not reached); try again",
            ));
        };
        let Some(next) = oid.checked_add(count) else {
            // More than FID_HEADROOM creates raced past one refill.
            return Err(ServerError::refused(
                Errno::EAGAIN,
                format!("FID sequence {seq:#x} used up; try again"),
            ));
        };
        *a = Some((seq, next));
        drop(a);
        t.put_meta(meta::FID_ALLOC, &(seq, next))?;
        Ok(Fid::new(seq, oid))
    }

    /// A replayed create makes `fid`, which an earlier instance handed out:
    /// allocate past it. That instance may have died before committing
    /// where its allocator stood, and this one started from the last
    /// position committed (plus `FID_SKIP_AT_START`): without this, the
    /// next instance after a second crash would start from the same place
    /// again and give the replayed FID to a new inode.
    pub(super) fn allocated_before(&self, t: &mut Tx<'_>, fid: Fid) -> Result<(), ServerError> {
        let mut a = lock(&self.names.fid_alloc);
        let Some((seq, oid)) = *a else {
            return Ok(());
        };
        if fid.seq != seq || fid.oid < oid {
            return Ok(());
        }
        let next = fid.oid.saturating_add(1);
        *a = Some((seq, next));
        drop(a);
        t.put_meta(meta::FID_ALLOC, &(seq, next))
    }

    /// The layout that applies in directory `dir`: its own default, else
    /// the nearest ancestor's, else none (a plain default striping is one
    /// component).
    pub(super) fn default_layout(&self, dir: Fid) -> Result<Option<LayoutSpec>, ServerError> {
        Ok(self.inherited(dir)?.layout)
    }

    /// The compression of new files' data in directory `dir`: its own
    /// default, else the nearest ancestor's (the root's is the file
    /// system's), else none. `Some(off)` where it was switched off.
    pub(super) fn default_compress(&self, dir: Fid) -> Result<Option<Compress>, ServerError> {
        Ok(self.inherited(dir)?.compress)
    }

    /// Every default that applies in directory `dir`, each from `dir` or
    /// the nearest ancestor on this MDT that sets it (see `defaults`).
    pub(super) fn inherited(&self, dir: Fid) -> Result<super::defaults::Inherited, ServerError> {
        self.names.defaults.of(&*self.names.store, dir)
    }

    /// The plain striping that applies in directory `dir` (none where a
    /// component layout applies).
    pub(super) fn default_stripe(&self, dir: Fid) -> Result<Option<StripeSpec>, ServerError> {
        Ok(self
            .default_layout(dir)?
            .and_then(|l| l.as_plain().cloned()))
    }

    /// Build a new file's component layout from `spec`: a Data-on-MDT
    /// component keeps its bytes here, each other takes its objects from
    /// the pools (as [`Self::make_layout`]).
    pub(super) async fn make_component_layout(
        self: &Arc<Self>,
        spec: &LayoutSpec,
    ) -> Result<Layout, ServerError> {
        spec.validate()
            .map_err(|m| ServerError::refused(Errno::EINVAL, m))?;
        let mut components = Vec::with_capacity(spec.components.len());
        let mut start = 0;
        for c in &spec.components {
            let (pattern, pool) = if c.on_mdt {
                (Pattern::Mdt, None)
            } else {
                let l = self.make_layout(&c.stripe).await?;
                let first = l.components.into_iter().next().ok_or_else(|| {
                    ServerError::internal("a RAID-0 layout without its component")
                })?;
                (first.pattern, first.pool)
            };
            components.push(Component {
                start,
                end: c.end,
                pattern,
                pool,
            });
            start = c.end;
        }
        Ok(Layout {
            generation: 0,
            components,
            compress: None,
        })
    }

    /// Build a new file's layout from `spec`, taking objects from the
    /// pools. Runs before the namespace lock is taken: it may wait for an
    /// OST to refill a pool. Ids taken for a create that then fails are
    /// simply never used.
    pub(super) async fn make_layout(
        self: &Arc<Self>,
        spec: &StripeSpec,
    ) -> Result<Layout, ServerError> {
        spec.validate()
            .map_err(|m| ServerError::refused(Errno::EINVAL, m))?;
        let cfg = match &spec.pool {
            // A pool's OSTs as the MGS had them at most a few seconds ago,
            // which `loom pool` waits out: a change holds when it returns.
            Some(_) => self.peers.config_fresh().await?,
            None => {
                self.peers
                    .config_where(|c| !c.indices(Role::Ost).is_empty())
                    .await?
            }
        };
        let registered = cfg.indices(Role::Ost);
        if registered.is_empty() {
            return Err(ServerError::refused(
                Errno::ENOSPC,
                "no OSTs are registered",
            ));
        }
        // A pool narrows the OSTs to its own. One destroyed or emptied
        // since a directory's default named it no longer does: the file
        // takes any OST, and no pool is recorded (as Lustre's).
        let mut pool = spec.pool.clone();
        let all: Vec<u32> = match pool
            .as_deref()
            .map(|p| (p, loom_proto::pool::find(&cfg.pools, p)))
        {
            None => registered.clone(),
            Some((_, Some(p))) if p.osts.iter().any(|o| registered.contains(o)) => p
                .osts
                .iter()
                .copied()
                .filter(|o| registered.contains(o))
                .collect(),
            Some((name, _)) => {
                tracing::warn!(
                    "MDT{:04x}: pool {name} is gone or empty; a new file takes any OST",
                    self.index
                );
                pool = None;
                registered.clone()
            }
        };
        let size = if spec.size == 0 {
            DEFAULT_STRIPE_SIZE
        } else {
            spec.size
        };
        let osts: Vec<u32> = if spec.start_ost >= 0 {
            // An explicit first OST: the stripes go there and on, in index
            // order, whether or not they answered lately.
            let start = all
                .iter()
                .position(|&o| o == spec.start_ost as u32)
                .ok_or_else(|| {
                    ServerError::refused(
                        Errno::EINVAL,
                        match &pool {
                            Some(p) => format!("OST index {} is not in pool {p}", spec.start_ost),
                            None => format!("OST index {} does not exist", spec.start_ost),
                        },
                    )
                })?;
            let count = stripe_count(spec.count, all.len());
            (0..count).map(|i| all[(start + i) % all.len()]).collect()
        } else {
            // Our choice: round robin over the OSTs that answer, weighted
            // by their free space when it is out of balance (`placement`).
            let mut live: Vec<u32> = all
                .iter()
                .copied()
                .filter(|&o| self.names.pools.usable(o))
                .collect();
            if live.is_empty() {
                live = all.clone();
            }
            let n = live.len();
            let count = stripe_count(spec.count, n);
            let first = self.weighted_ost(&registered, &live);
            let start = live.iter().position(|&o| o == first).unwrap_or(0);
            (0..count).map(|i| live[(start + i) % n]).collect()
        };
        let mut objects = Vec::with_capacity(osts.len());
        for ost in osts {
            objects.push(ObjRef {
                ost,
                oid: self.take_object(ost).await?,
            });
        }
        let mut layout = Layout::raid0(size, objects);
        if let Some(c) = layout.components.first_mut() {
            c.pool = pool;
        }
        Ok(layout)
    }

    /// Refuse a striping a user asks for that names a pool the file
    /// system does not have, or one without OSTs (EINVAL), or a first
    /// OST outside its pool: a default that could never place its pool
    /// is better refused when set than ignored at each create.
    pub(super) async fn check_pools(&self, specs: &[&StripeSpec]) -> Result<(), ServerError> {
        let mut cfg = None;
        for s in specs {
            let Some(name) = &s.pool else { continue };
            if cfg.is_none() {
                cfg = Some(self.peers.config_fresh().await?);
            }
            let Some(cfg) = cfg.as_ref() else { continue };
            let refuse = |m: String| Err(ServerError::refused(Errno::EINVAL, m));
            match loom_proto::pool::find(&cfg.pools, name) {
                None => {
                    let names: Vec<&str> = cfg.pools.iter().map(|p| p.name.as_str()).collect();
                    return refuse(format!(
                        "no OST pool {name}; the pools are: {}",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ));
                }
                Some(p) if p.osts.is_empty() => {
                    return refuse(format!("OST pool {name} has no OSTs"));
                }
                Some(p) if s.start_ost >= 0 && !p.osts.contains(&(s.start_ost as u32)) => {
                    return refuse(format!(
                        "OST index {} is not in pool {name} ({})",
                        s.start_ost,
                        loom_proto::pool::list_osts(&p.osts)
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// One precreated id on `ost`; refills the pool in the background when
    /// it runs low, and waits for a refill when it is empty.
    async fn take_object(self: &Arc<Self>, ost: u32) -> Result<u64, ServerError> {
        loop {
            let (id, low) = self.names.pools.with(ost, |p| {
                let id = p.take();
                let low = p.available() < LOW_WATER && !p.refilling;
                if low {
                    p.refilling = true;
                }
                (id, low)
            });
            if low {
                let me = self.clone();
                tokio::spawn(async move {
                    if let Err(e) = me.refill(ost).await {
                        tracing::warn!("MDT{:04x}: precreating on OST{ost:04x}: {e}", me.index);
                    }
                    me.names.pools.with(ost, |p| p.refilling = false);
                });
            }
            match id {
                Some(id) => return Ok(id),
                None => self.refill(ost).await?,
            }
        }
    }

    /// Ask `ost` for a new range of ids, unless another refill already
    /// left the pool above its low-water mark.
    async fn refill(&self, ost: u32) -> Result<(), ServerError> {
        let l = self.names.pools.refill_lock(ost);
        let _one = l.lock().await;
        if self.names.pools.with(ost, |p| p.available()) >= LOW_WATER {
            return Ok(());
        }
        let res = self
            .peers
            .call(
                TargetId::ost(ost),
                OstRequest::Precreate {
                    count: PRECREATE_BATCH,
                },
                Bytes::new(),
                PRECREATE_TIMEOUT,
            )
            .await;
        let range = match res {
            Ok((Reply::Precreated { start, count }, _)) => Ok((start, start + u64::from(count))),
            Ok((other, _)) => Err(ServerError::peer(
                Errno::EPROTO,
                format!("Precreate answered {other:?}"),
            )),
            Err(e) => Err(e),
        };
        self.names.pools.with(ost, |p| match &range {
            Ok(r) => {
                p.ranges.push_back(*r);
                p.failed_at = None;
            }
            Err(_) => p.failed_at = Some(Instant::now()),
        });
        range.map(|_| ())
    }

    /// Record `fid`'s objects for destruction in the same batch as its unlink.
    pub(super) fn record_destroy(
        &self,
        t: &mut Tx<'_>,
        fid: Fid,
        layout: &Layout,
    ) -> Result<(), ServerError> {
        self.dom_drop(t, fid, layout);
        let objs = layout.objects();
        if !objs.is_empty() {
            t.batch.put(
                Space::Destroy,
                fid.to_key().to_vec(),
                super::tx::encode_record(&objs)?,
            );
        }
        Ok(())
    }
}

/// Stripes for a requested count over `n` OSTs: 0 is 1, -1 is all.
fn stripe_count(requested: i32, n: usize) -> usize {
    match requested {
        -1 => n,
        c if c <= 0 => 1,
        c => (c as usize).min(n).min(MAX_STRIPE_COUNT as usize),
    }
}
