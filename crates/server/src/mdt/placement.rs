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

use super::{lock, MdtService};
use crate::error::ServerError;
use loom_proto::msg::{DirDefault, MdtRequest, Reply, Role, TargetId};
use loom_proto::{Errno, Fid};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the MDTs' usage is trusted before it is asked again.
const USAGE_TTL: Duration = Duration::from_secs(5);
/// Below this share of the freest MDT, the round robin is weighted.
const BALANCED: f64 = 0.9;
/// How long one MDT's usage may take to answer.
const STATFS_TIMEOUT: Duration = Duration::from_secs(5);

/// Each MDT's (free inodes, free bytes).
type Usage = HashMap<u32, (u64, u64)>;

/// This MDT's placement state.
#[derive(Default)]
pub struct Placement {
    /// Round-robin position.
    next: AtomicU64,
    /// The MDTs' (free inodes, free bytes), and when they were asked.
    usage: Mutex<Option<(Instant, Usage)>>,
    /// Smooth weighted round robin: each MDT's current credit.
    credit: Mutex<HashMap<u32, f64>>,
}

impl MdtService {
    /// The default placement that applies to subdirectories made in `dir`:
    /// its own, else the nearest ancestor's on this MDT.
    pub(super) fn default_dir(&self, dir: Fid) -> Result<Option<DirDefault>, ServerError> {
        let mut fid = dir;
        // Bounded walk: a corrupt parent chain must not loop forever.
        for _ in 0..4096 {
            let r = match super::tx::read_inode(&*self.store, fid) {
                Ok(r) => r,
                // The parent is on another MDT: a directory made here by a
                // cross-MDT mkdir copied its parent's effective default.
                Err(e) if e.errno() == Errno::ENOENT && fid != dir => return Ok(None),
                Err(e) => return Err(e),
            };
            if r.default_dir.is_some() {
                return Ok(r.default_dir);
            }
            if fid == Fid::ROOT || r.parent == fid {
                return Ok(None);
            }
            fid = r.parent;
        }
        Ok(None)
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
                let i = self.placement.next.fetch_add(1, Ordering::Relaxed) as usize;
                (0..count).map(|k| many[(i + k) % many.len()]).collect()
            }
        };
        Ok(list)
    }

    /// The next MDT of the round robin over `all`, weighted by free inodes
    /// and space when they are out of balance.
    async fn weighted_next(&self, all: &[u32]) -> u32 {
        let usage = self.mdt_usage(all).await;
        let weights: Vec<(u32, f64)> = {
            let max_files = usage.values().map(|u| u.0).max().unwrap_or(0).max(1) as f64;
            let max_bytes = usage.values().map(|u| u.1).max().unwrap_or(0).max(1) as f64;
            all.iter()
                .map(|m| {
                    // Unknown (it did not answer): as the freest, so that a
                    // slow MDT is not starved for good.
                    let w = usage.get(m).map_or(1.0, |&(f, b)| {
                        (f as f64 / max_files).min(b as f64 / max_bytes)
                    });
                    (*m, w)
                })
                .collect()
        };
        let balanced = weights.iter().all(|(_, w)| *w >= BALANCED);
        if balanced {
            let i = self.placement.next.fetch_add(1, Ordering::Relaxed) as usize;
            return all[i % all.len()];
        }
        let mut credit = lock(&self.placement.credit);
        let total: f64 = weights.iter().map(|(_, w)| w).sum();
        let mut best = (all[0], f64::MIN);
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

    /// Free inodes and bytes of each MDT, asked again when older than
    /// [`USAGE_TTL`].
    async fn mdt_usage(&self, all: &[u32]) -> Usage {
        if let Some((at, u)) = lock(&self.placement.usage).as_ref() {
            if at.elapsed() < USAGE_TTL {
                return u.clone();
            }
        }
        let mut u = HashMap::new();
        for &m in all {
            let r = if m == self.index {
                self.statfs()
            } else {
                self.peers
                    .call(
                        TargetId::mdt(m),
                        MdtRequest::StatFs,
                        bytes::Bytes::new(),
                        STATFS_TIMEOUT,
                    )
                    .await
                    .map(|(r, _)| r)
            };
            if let Ok(Reply::StatFs(s)) = r {
                u.insert(m, (s.files_free, s.bytes_avail));
            }
        }
        *lock(&self.placement.usage) = Some((Instant::now(), u.clone()));
        u
    }
}
