//! Orphans: files whose last name is gone while a client still has them
//! open.
//!
//! POSIX lets a process go on reading and writing a file after its last
//! name was removed (temporary files, a log rotated under a writer, an
//! editor's rename over a file someone reads). A client that has files
//! open says so in its unlink or rename (`keep_orphan`); when that drops
//! the last link of a regular file, the MDT keeps the inode (nlink 0) and
//! its objects, records the FID in the `orphans` keyspace in the same
//! batch, and answers `Orphaned { fid }`. The client destroys it with
//! `ReleaseOrphan` when its last handle closes (at once if it does not
//! hold that file).
//!
//! A client that dies cannot release its orphans, so they are leased: the
//! client renews its orphans every `ORPHAN_RENEW` (a minute) and the MDT destroys
//! those not renewed for [`ORPHAN_LEASE`]. Lease times live in memory; a
//! restarted MDT gives every orphan a fresh lease.
//!
//! Only the unlinking client's handles are protected: a file open on
//! another client when its last name goes is destroyed (as on NFS).

use super::request::Rq;
use super::tx::{read_inode, store_err, Tx};
use super::{lock, MdtService};
use crate::error::{Handled, ServerError};
use loom_proto::msg::{FileKind, Reply, ReqCtx, Time};
use loom_proto::Fid;
use loom_store::kv::Space;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use loom_proto::msg::ORPHAN_LEASE;
/// How long an orphan no client holds is kept since it was made,
/// renewed or loaded at a restart (see [`MdtService::sweep_unheld`]).
const UNHELD_AFTER: Duration = Duration::from_secs(20);
/// How often the MDT looks for orphans whose lease ran out.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// Lease times of this MDT's orphans.
#[derive(Default)]
pub struct Orphans {
    renewed: Mutex<HashMap<Fid, Instant>>,
}

impl Orphans {
    /// Every orphan recorded in `store`, each with a fresh lease.
    pub fn load(store: &dyn loom_store::kv::KvStore) -> Result<Orphans, ServerError> {
        let o = Orphans::default();
        let now = Instant::now();
        for (k, _) in store
            .scan(Space::Orphans, &[], None, usize::MAX)
            .map_err(store_err)?
        {
            if let Some(fid) = Fid::from_key(&k) {
                lock(&o.renewed).insert(fid, now);
            }
        }
        Ok(o)
    }

    /// Number of orphans.
    pub fn len(&self) -> usize {
        lock(&self.renewed).len()
    }

    fn expired(&self, lease: Duration) -> Vec<Fid> {
        lock(&self.renewed)
            .iter()
            .filter(|(_, t)| t.elapsed() >= lease)
            .map(|(f, _)| *f)
            .collect()
    }
}

impl MdtService {
    /// Keep `fid` (its last link just went, in `t`) as an orphan of
    /// `client`: the inode stays, with nlink 0, and is recorded.
    pub(super) fn make_orphan(
        &self,
        t: &mut Tx<'_>,
        fid: Fid,
        client: u64,
    ) -> Result<(), ServerError> {
        let rec = super::tx::encode_record(&(client, Time::now()))?;
        t.batch.put(Space::Orphans, fid.to_key().to_vec(), rec);
        Ok(())
    }

    /// Note a new orphan once its batch is applied.
    pub(super) fn orphan_made(&self, fid: Fid) {
        lock(&self.names.orphans.renewed).insert(fid, Instant::now());
    }

    /// `fid` got a name again (a hard link to an open orphan): it is no
    /// orphan any more.
    pub(super) fn unorphan(&self, t: &mut Tx<'_>, fid: Fid) {
        if lock(&self.names.orphans.renewed).remove(&fid).is_some() {
            t.batch.delete(Space::Orphans, fid.to_key().to_vec());
        }
    }

    /// The calling client closed `fid` (an orphan it held, or a file it
    /// told it had open): an orphan no other client holds is destroyed,
    /// but not while clients may still tell their holds after a restart.
    pub(super) async fn release_orphan(self: &Arc<Self>, ctx: &Rq<'_>, fid: Fid) -> Handled {
        if self.names.leases.holds.release(fid, ctx.ctx.client_id) || self.holds_grace() {
            return Ok(Reply::Ok);
        }
        self.destroy_orphan(ctx, fid).await
    }

    /// Whether files losing their last name are kept whoever holds them:
    /// after a restart, until the clients that were here held their open
    /// files again or the grace period ended (see `holds`).
    pub(super) fn holds_grace(&self) -> bool {
        self.names.locks.in_grace()
    }

    /// Before a removal: wait (at most the grace period) until the
    /// clients recorded before a restart held their open files again, so
    /// that a file whose last name goes is known to be open or not and is
    /// kept or freed at once. Replays do not wait: they were applied
    /// before, and recovery waits for them.
    pub(super) async fn wait_holds_grace(&self, ctx: &Rq<'_>) {
        if ctx.cur.is_some_and(|c| c.replay.is_some()) {
            return;
        }
        while self.holds_grace() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Destroy orphan `fid`. Anything else (a FID that is gone, or has a
    /// name again) is left alone: the request may be a resend.
    async fn destroy_orphan(self: &Arc<Self>, ctx: &Rq<'_>, fid: Fid) -> Handled {
        let (_, g) = self.begin().await.into_parts();
        let known = lock(&self.names.orphans.renewed).contains_key(&fid);
        let r = match read_inode(&*self.names.store, fid) {
            Ok(r) => r,
            Err(e) if e.errno() == loom_proto::Errno::ENOENT => {
                if known {
                    let mut t = Tx::new(&*self.names.store);
                    t.batch.delete(Space::Orphans, fid.to_key().to_vec());
                    self.apply(ctx, t, &Reply::Ok)?;
                    lock(&self.names.orphans.renewed).remove(&fid);
                }
                return Ok(Reply::Ok);
            }
            Err(e) => return Err(e),
        };
        if r.attr.nlink > 0 || r.attr.kind != FileKind::File || !known {
            return Ok(Reply::Ok);
        }
        let mut t = Tx::new(&*self.names.store);
        t.delete_inode(fid)?;
        t.batch.delete(Space::Orphans, fid.to_key().to_vec());
        let freed = match &r.layout {
            Some(l) => {
                self.record_destroy(&mut t, fid, l)?;
                Some((fid, l.objects()))
            }
            None => None,
        };
        let ticket = self.apply(ctx, t, &Reply::Ok)?;
        lock(&self.names.orphans.renewed).remove(&fid);
        self.names.leases.holds.forget(fid);
        drop(g);
        self.settle(ctx, ticket).await?;
        if let Some((fid, objs)) = freed {
            self.queue_destroy(
                fid.to_key().to_vec(),
                objs,
                ctx.cur.map_or(0, |c| c.transno()),
                ticket,
            );
        }
        tracing::debug!("MDT{:04x}: orphan {fid} released", self.index);
        Ok(Reply::Ok)
    }

    /// Renew the leases of `fids` (those that are orphans here), which
    /// the calling client holds (those that are regular files here).
    pub(super) fn renew_orphans(&self, ctx: &ReqCtx, fids: &[Fid]) -> Handled {
        self.hold_files(ctx.client_id, fids);
        let now = Instant::now();
        let mut m = lock(&self.names.orphans.renewed);
        for f in fids {
            if let Some(t) = m.get_mut(f) {
                *t = now;
            }
        }
        Ok(Reply::Ok)
    }

    /// `client` has `fids` open: those that are regular files here are
    /// held.
    pub(super) fn hold_files(&self, client: u64, fids: &[Fid]) {
        for f in fids {
            if read_inode(&*self.names.store, *f).is_ok_and(|r| r.attr.kind == FileKind::File) {
                self.names.leases.holds.hold(*f, client);
            }
        }
    }

    /// Destroy the orphans no client holds (their holders died, or they
    /// were kept during a grace period) and none renewed for
    /// [`UNHELD_AFTER`], once no grace period runs. The delay lets a
    /// client without leases (not recorded, so no grace waits for it)
    /// hold its orphans again after a restart.
    pub(super) async fn sweep_unheld(self: &Arc<Self>) {
        if self.holds_grace() {
            return;
        }
        let unheld: Vec<Fid> = lock(&self.names.orphans.renewed)
            .iter()
            .filter(|(f, t)| t.elapsed() >= UNHELD_AFTER && !self.names.leases.holds.held(**f))
            .map(|(f, _)| *f)
            .collect();
        for fid in unheld {
            tracing::info!(
                "MDT{:04x}: orphan {fid} is held by no client; destroying it",
                self.index
            );
            let none = ReqCtx::default();
            if let Err(e) = self.destroy_orphan(&Rq::plain(&none), fid).await {
                tracing::warn!("MDT{:04x}: destroying orphan {fid}: {e}", self.index);
            }
        }
    }

    /// Number of orphans on this MDT.
    pub fn orphan_count(&self) -> usize {
        self.names.orphans.len()
    }

    /// Destroy, every minute, the orphans whose lease ran out (their
    /// client died or lost touch). Stops when the MDT is dropped.
    pub(super) fn spawn_orphan_sweeper(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SWEEP_EVERY).await;
                let Some(mdt) = me.upgrade() else { return };
                mdt.sweep_orphans(ORPHAN_LEASE).await;
            }
        });
    }

    /// Destroy the orphans not renewed for `lease`.
    pub async fn sweep_orphans(self: &Arc<Self>, lease: Duration) {
        for fid in self.names.orphans.expired(lease) {
            tracing::info!(
                "MDT{:04x}: orphan {fid} was not renewed for {lease:?}; destroying it",
                self.index
            );
            let none = ReqCtx::default();
            if let Err(e) = self.destroy_orphan(&Rq::plain(&none), fid).await {
                tracing::warn!("MDT{:04x}: destroying orphan {fid}: {e}", self.index);
            }
        }
    }
}
