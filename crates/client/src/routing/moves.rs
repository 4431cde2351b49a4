//! Following inodes that moved: `loom migrate` moves an inode to another
//! MDT (its FID stays), and a directory restriped since this client
//! learned its layout sends its names to shards. An MDT that no longer
//! keeps what a request is routed by answers `Moved` or `Restriped`,
//! having done nothing; the request goes on to where that answer points.

use super::Router;
use loom_proto::msg::{ClusterConfig, Envelope, MdtRequest, Reply, Request, TargetId};
use loom_proto::{Errno, Fid, WireError};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Moves followed for one request (an inode migrated several times).
const MAX_MOVED_HOPS: u32 = 8;

/// Inodes `loom migrate` moved off the MDT their FID names, and where they
/// are now (learned from `Reply::Moved`).
#[derive(Default)]
pub(super) struct Moves(RwLock<HashMap<Fid, u32>>);

impl Moves {
    /// Where `fid` moved to, if it did.
    fn get(&self, fid: Fid) -> Option<u32> {
        let moved = self.0.read().unwrap_or_else(|p| p.into_inner());
        if moved.is_empty() {
            return None;
        }
        moved.get(&fid).copied()
    }

    fn note(&self, fid: Fid, mdt: u32) {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(fid, mdt);
    }
}

impl Router {
    /// The MDT that keeps `fid` as far as this client knows: where it was
    /// moved to, else what the FLDB says.
    pub(super) fn located(&self, cfg: &ClusterConfig, fid: Fid) -> Option<u32> {
        self.moves.get(fid).or_else(|| cfg.mdt_of(fid))
    }

    /// The MDT that keeps `fid`: where it moved to, else what the FLDB
    /// says (refreshed once if its sequence is unknown). ESTALE if the FLDB
    /// stays silent: no MDT can own that FID.
    pub async fn mdt_of(&self, fid: Fid) -> Result<TargetId, Errno> {
        if let Some(m) = self.moves.get(fid) {
            return Ok(TargetId::mdt(m));
        }
        self.addrs.fldb_mdt(fid).await.map(TargetId::mdt)
    }

    /// Where `env` must go instead, if an MDT's `result` says that what it
    /// is routed by moved (`None`: the answer stands). `hops` counts the
    /// moves followed for this request; past [`MAX_MOVED_HOPS`], EIO.
    pub(super) async fn redirect(
        &self,
        env: &mut Envelope,
        result: &Result<Reply, WireError>,
        hops: &mut u32,
    ) -> Option<Result<TargetId, Errno>> {
        if !matches!(result, Ok(Reply::Moved { .. } | Reply::Restriped { .. })) {
            return None;
        }
        if *hops >= MAX_MOVED_HOPS {
            return Some(Err(Errno::EIO));
        }
        *hops += 1;
        let to = match result {
            Ok(Reply::Moved { fid, mdt }) => {
                // Remember, and ask there (nothing was done where it was).
                let (fid, mdt) = (*fid, *mdt);
                tracing::debug!(%fid, from = %env.target, to = mdt, "inode moved");
                self.moves.note(fid, mdt);
                self.fresh.moved(fid);
                Ok(TargetId::mdt(mdt))
            }
            Ok(Reply::Restriped { dir, layout }) => {
                // Send the request to the shard of its name (a listing: the
                // caller lists the shards).
                let (dir, layout) = (*dir, layout.clone());
                let shards = layout.dir_shards().map(Arc::<[Fid]>::from);
                self.fresh.set_shards(dir, shards);
                let Request::Mdt(req) = &mut env.req else {
                    return Some(Err(Errno::EPROTO));
                };
                match reshard(req, dir, &layout) {
                    Some(parent) => self.mdt_of(parent).await,
                    None => Err(Errno::ESTALE),
                }
            }
            _ => return None,
        };
        if let Ok(t) = to {
            env.target = t;
        }
        Some(to)
    }
}

/// Point `req`'s names in directory `dir` at the shards of `layout` they
/// hash to; the directory object the request now goes to (`None` for a
/// listing, which the caller must redo over the shards).
fn reshard(req: &mut MdtRequest, dir: Fid, layout: &loom_proto::Layout) -> Option<Fid> {
    if req.listing().is_some() {
        return None;
    }
    req.reroute_names(|d, name| {
        if d == dir {
            layout.shard_for(name.as_bytes()).unwrap_or(dir)
        } else {
            d
        }
    });
    req.dir_names().first().map(|(d, _)| *d)
}
