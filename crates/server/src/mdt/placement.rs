//! Where new directories go: a directory's default placement of its
//! subdirectories (`loom setdirstripe -D`, Lustre's default LMV), inherited
//! down the tree, and the round robin over MDTs weighted by their free
//! inodes and space (`-i -1`, Lustre's QOS for MDTs).
//!
//! A new directory copies its parent's default (a remote one gets it in its
//! `DirObject`), so a default holds down the tree until set again; a
//! directory without one takes the nearest ancestor's on its MDT, so the
//! root's is the file system's default. The MDT that holds the parent
//! places the new directory: on itself (a plain mkdir) or elsewhere (a
//! cross-MDT mkdir, see `intents`).
//!
//! **Weights.** Every few seconds the MDT asks each MDT for its free inodes
//! and space. While every MDT has at least 90% of the freest one's (by the
//! lower of the two ratios), new directories go round robin; otherwise by
//! smooth weighted round robin on that ratio, so that a fuller MDT gets
//! proportionally fewer, never none.
//!
//! **New files' OSTs** are chosen the same way (Lustre's QOS allocator):
//! round robin while every OST has at least 83% of the freest one's free
//! space and inodes (Lustre's `qos_threshold_rr` of 17%), otherwise the
//! first stripe goes by smooth weighted round robin on that ratio and the
//! others follow it in index order. A full OST (weight 0) gets no new
//! file while another has room.

use super::{lock, MdtService};
use crate::error::ServerError;
use loom_proto::msg::{DirDefault, MdtRequest, OstRequest, Reply, Role, TargetId};
use loom_proto::Fid;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the MDTs' usage is trusted before it is asked again.
const USAGE_TTL: Duration = Duration::from_secs(5);
/// Below this share of the freest MDT, the round robin is weighted.
const BALANCED: f64 = 0.9;
/// Below this share of the freest OST, the round robin is weighted.
const OST_BALANCED: f64 = 0.83;
/// How long one MDT's usage may take to answer.
const STATFS_TIMEOUT: Duration = Duration::from_secs(5);

/// Each MDT's (free inodes, free bytes).
type Usage = HashMap<u32, (u64, u64)>;

/// The round robin over one role's targets.
#[derive(Default)]
struct Spread {
    /// Round-robin position.
    next: AtomicU64,
    /// The targets' (free inodes, free bytes), and when they were asked.
    usage: Mutex<Option<(Instant, Usage)>>,
    /// Smooth weighted round robin: each target's current credit.
    credit: Mutex<HashMap<u32, f64>>,
    /// A refresh of `usage` runs in the background (OSTs).
    refreshing: std::sync::atomic::AtomicBool,
}

/// This MDT's placement state: of new directories over MDTs, of new
/// files' objects over OSTs.
pub struct Placement {
    mdts: Spread,
    osts: Spread,
}

impl Default for Placement {
    fn default() -> Placement {
        let osts = Spread::default();
        // Each MDT starts its OST round robin somewhere else, so that the
        // first files of several MDTs do not all land on OST0.
        osts.next
            .store(u64::from(rand::random::<u16>()), Ordering::Relaxed);
        Placement {
            mdts: Spread::default(),
            osts,
        }
    }
}

impl MdtService {
    /// The site's rule for explicit remote and striped directories (site
    /// parameter `remote_dir_gid`): root, and the members of the group
    /// it names, or every user. A replay is not asked again.
    pub(super) async fn may_place_dirs(
        &self,
        rq: &super::request::Rq<'_>,
    ) -> Result<(), ServerError> {
        if rq.cur.is_some_and(|c| c.replay.is_some()) {
            return Ok(());
        }
        let Some(gid) = self.peers.config().await?.params.remote_dir_gid else {
            return Ok(());
        };
        let c = super::perm::Cred::of(rq.ctx);
        if c.is_root() || (gid != 0 && c.in_group(gid)) {
            return Ok(());
        }
        let who = match gid {
            0 => "root only".to_string(),
            g => format!("root and group {g} only"),
        };
        Err(ServerError::refused(
            loom_proto::Errno::EPERM,
            format!(
                "remote and striped directories are made by {who} here (site parameter remote_dir_gid)"
            ),
        ))
    }

    /// The default placement that applies to subdirectories made in `dir`:
    /// its own, else the nearest ancestor's on this MDT.
    pub(super) fn default_dir(&self, dir: Fid) -> Result<Option<DirDefault>, ServerError> {
        Ok(self.inherited(dir)?.dir)
    }

    /// The MDTs of a new directory under default `d` (its shards' MDTs,
    /// in shard order).
    pub(super) async fn place_new_dir(&self, d: &DirDefault) -> Result<Vec<u32>, ServerError> {
        let all = self.peers.config().await?.indices(Role::Mdt);
        if let Err(m) = d.validate(&all) {
            // Set when the file system had those MDTs: place as if unset.
            tracing::warn!(
                "MDT{:04x}: a default placement no longer fits: {m}",
                self.index
            );
            return Ok(vec![self.index]);
        }
        let count = d.count as usize;
        let list: Vec<u32> = match d.mdts.as_slice() {
            [] => {
                let start = self.weighted_next(&all).await;
                let pos = all.iter().position(|m| *m == start).unwrap_or(0);
                (0..count).map(|k| all[(pos + k) % all.len()]).collect()
            }
            [start] => {
                let pos = all.iter().position(|m| m == start).unwrap_or(0);
                (0..count).map(|k| all[(pos + k) % all.len()]).collect()
            }
            many => {
                let i = self.dne.placement.mdts.next.fetch_add(1, Ordering::Relaxed) as usize;
                (0..count).map(|k| many[(i + k) % many.len()]).collect()
            }
        };
        Ok(list)
    }

    /// The MDT of the round robin over `all`, weighted by free inodes and
    /// space when they are out of balance; waits for the MDTs' usage when
    /// it is stale (a mkdir can afford it, once every few seconds).
    async fn weighted_next(&self, all: &[u32]) -> u32 {
        let usage = self.usage(Role::Mdt, &self.dne.placement.mdts, all).await;
        pick(&self.dne.placement.mdts, &usage, all, BALANCED)
    }

    /// The first OST of a new file's stripes among `candidates` (a pool's
    /// OSTs, or every one that answers), as [`Self::weighted_next`] for
    /// MDTs, but never waiting: with the OSTs' usage stale, it uses what
    /// it knows (round robin if nothing) and refreshes that of `all` in
    /// the background, so that no create waits for the OSTs. Within a
    /// pool the weights are of its OSTs only.
    pub(super) fn weighted_ost(self: &Arc<Self>, all: &[u32], candidates: &[u32]) -> u32 {
        let spread = &self.dne.placement.osts;
        let (usage, stale) = match lock(&spread.usage).as_ref() {
            Some((at, u)) => (u.clone(), at.elapsed() >= USAGE_TTL),
            None => (Usage::new(), true),
        };
        if stale && !spread.refreshing.swap(true, Ordering::AcqRel) {
            let (me, all) = (self.clone(), all.to_vec());
            tokio::spawn(async move {
                me.usage_fetch(Role::Ost, &me.dne.placement.osts, &all)
                    .await;
                me.dne
                    .placement
                    .osts
                    .refreshing
                    .store(false, Ordering::Release);
            });
        }
        pick(spread, &usage, candidates, OST_BALANCED)
    }

    /// Free inodes and bytes of each target of `role` in `all`, asked
    /// again when older than [`USAGE_TTL`].
    async fn usage(&self, role: Role, spread: &Spread, all: &[u32]) -> Usage {
        if let Some((at, u)) = lock(&spread.usage).as_ref() {
            if at.elapsed() < USAGE_TTL {
                return u.clone();
            }
        }
        self.usage_fetch(role, spread, all).await
    }

    /// Ask each target of `role` in `all` for its free inodes and bytes,
    /// and keep the answers.
    async fn usage_fetch(&self, role: Role, spread: &Spread, all: &[u32]) -> Usage {
        let mut u = HashMap::new();
        for &m in all {
            let r = match role {
                Role::Mdt if m == self.index => self.statfs(),
                Role::Mdt => self
                    .peers
                    .call(
                        TargetId::mdt(m),
                        MdtRequest::StatFs,
                        bytes::Bytes::new(),
                        STATFS_TIMEOUT,
                    )
                    .await
                    .map(|(r, _)| r),
                _ => self
                    .peers
                    .call(
                        TargetId::ost(m),
                        OstRequest::StatFs,
                        bytes::Bytes::new(),
                        STATFS_TIMEOUT,
                    )
                    .await
                    .map(|(r, _)| r),
            };
            if let Ok(Reply::StatFs(s)) = r {
                u.insert(m, (s.files_free, s.bytes_avail));
            }
        }
        *lock(&spread.usage) = Some((Instant::now(), u.clone()));
        u
    }
}

/// The next of `all` by the round robin of `spread`: plain while every
/// target has at least `balanced_at` of the freest one's free inodes and
/// bytes (the lower ratio), smooth weighted on that ratio otherwise.
fn pick(spread: &Spread, usage: &Usage, all: &[u32], balanced_at: f64) -> u32 {
    let Some(&first) = all.first() else {
        return 0;
    };
    // Against the freest of `all`: within a pool, its own OSTs.
    let known = || all.iter().filter_map(|m| usage.get(m));
    let max_files = known().map(|u| u.0).max().unwrap_or(0).max(1) as f64;
    let max_bytes = known().map(|u| u.1).max().unwrap_or(0).max(1) as f64;
    let weights: Vec<(u32, f64)> = all
        .iter()
        .map(|m| {
            // Unknown (it did not answer): as the freest, so that a slow
            // target is not starved for good.
            let w = usage.get(m).map_or(1.0, |&(f, b)| {
                (f as f64 / max_files).min(b as f64 / max_bytes)
            });
            (*m, w)
        })
        .collect();
    if weights.iter().all(|(_, w)| *w >= balanced_at) {
        let i = spread.next.fetch_add(1, Ordering::Relaxed) as usize;
        return all[i % all.len()];
    }
    let mut credit = lock(&spread.credit);
    let total: f64 = weights.iter().map(|(_, w)| w).sum();
    let mut best = (first, f64::MIN);
    for (m, w) in &weights {
        let c = credit.entry(*m).or_insert(0.0);
        *c += w;
        if *c > best.1 {
            best = (*m, *c);
        }
    }
    if let Some(c) = credit.get_mut(&best.0) {
        *c -= total;
    }
    best.0
}
