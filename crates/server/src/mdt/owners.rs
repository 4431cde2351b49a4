//! Telling a file's OSTs its new owner, group or project, so that their
//! block usage follows a chown, chgrp or `loom project` (Lustre's OSP
//! setattr, kept in an llog until the OSTs have it).
//!
//! The change that gives a file with OST objects a new owner also puts
//! `owner/<fid>` in `meta` in its own batch. Once the change is settled
//! (and answered: the change does not wait for OSTs) the MDT sends
//! `ObjSetOwner` to each OST of the file and deletes the
//! record when all have it; an OST that cannot be told is asked again in
//! the background (backing off to every 30 s) and at the next start. So
//! a kill -9 of the MDT or an OST between the change and the OSTs leaves
//! the bytes counted for the old owner only until the retry reaches them.
//! The retry sends the file's owner as it is then: a later chown wins.

use super::tx::{decode_record, read_inode, store_err, Tx};
use super::MdtService;
use crate::error::ServerError;
use bytes::Bytes;
use loom_proto::msg::{OstRequest, TargetId};
use loom_proto::quota::Owner;
use loom_proto::{Fid, Layout, ObjRef};
use loom_store::kv::Space;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// How long the MDT waits for an OST to take a file's new owner.
const OWNER_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest pause between retries.
const RETRY_MAX: Duration = Duration::from_secs(30);
const PREFIX: &str = "owner/";

fn key(fid: Fid) -> String {
    let hex: String = fid.to_key().iter().map(|b| format!("{b:02x}")).collect();
    format!("{PREFIX}{hex}")
}

/// Whom a file's bytes on the OSTs count against.
pub(super) fn file_owner(a: &loom_proto::msg::Attr) -> Owner {
    Owner {
        uid: a.uid,
        gid: a.gid,
        projid: a.projid,
    }
}

impl MdtService {
    /// In `t`, a change that gives file `fid` (with `layout`) a new owner:
    /// note that its OSTs are to be told, in the change's batch. Returns
    /// what [`MdtService::tell_owner`] needs once the change is settled.
    pub(super) fn note_owner(
        &self,
        t: &mut Tx<'_>,
        fid: Fid,
        layout: Option<&Layout>,
        owner: Owner,
    ) -> Result<Option<(Fid, Layout, Owner)>, ServerError> {
        let Some(l) = layout.filter(|l| !l.objects().is_empty()) else {
            return Ok(None);
        };
        t.put_meta(&key(fid), &fid)?;
        Ok(Some((fid, l.clone(), owner)))
    }

    /// Tell the OSTs of a file noted by [`MdtService::note_owner`], once
    /// its change is settled: in the background (a chown does not wait
    /// for OSTs, which may be down), left to the retry when one cannot be
    /// told.
    pub(super) fn tell_owner(self: &Arc<Self>, told: Option<(Fid, Layout, Owner)>) {
        let Some((fid, layout, owner)) = told else {
            return;
        };
        let me = self.clone();
        tokio::spawn(async move {
            if me.owner_to_objects(&layout, owner).await {
                me.owner_told(fid, owner).await;
            } else {
                me.spawn_owner_retry();
            }
        });
    }

    /// Every OST of `layout` counts its objects' bytes for `owner`; false
    /// if one could not be told (logged).
    async fn owner_to_objects(&self, layout: &Layout, owner: Owner) -> bool {
        let mut by_ost: BTreeMap<u32, Vec<ObjRef>> = BTreeMap::new();
        for o in layout.objects() {
            by_ost.entry(o.ost).or_default().push(o);
        }
        let mut calls = tokio::task::JoinSet::new();
        for (ost, objs) in by_ost {
            let peers = self.peers.clone();
            calls.spawn(async move {
                let req = OstRequest::ObjSetOwner { objs, owner };
                let r = peers
                    .call(TargetId::ost(ost), req, Bytes::new(), OWNER_TIMEOUT)
                    .await;
                (ost, r)
            });
        }
        let mut all = true;
        while let Some(done) = calls.join_next().await {
            match done {
                Ok((_, Ok(_))) => {}
                Ok((ost, Err(e))) => {
                    tracing::warn!(
                        "MDT{:04x}: OST{ost:04x} was not told a file's new owner {owner:?} ({e}); will retry",
                        self.index
                    );
                    all = false;
                }
                Err(_) => all = false,
            }
        }
        all
    }

    /// The OSTs have `fid`'s owner `owner`: its record goes, unless a
    /// later change of owner is still to be told.
    async fn owner_told(&self, fid: Fid, owner: Owner) {
        let (_, _g) = self.begin().await.into_parts();
        let still = read_inode(&*self.names.store, fid).map(|r| file_owner(&r.attr));
        if still.as_ref().is_ok_and(|o| *o != owner) {
            return;
        }
        let mut t = Tx::new(&*self.names.store);
        t.batch.delete(Space::Meta, key(fid).into_bytes());
        if let Err(e) = self.apply_step(t) {
            tracing::warn!("MDT{:04x}: dropping an owner record: {e}", self.index);
        }
    }

    /// Tell the OSTs every owner still noted, now and again until none
    /// is left (at start, and after a failure).
    pub(super) fn spawn_owner_retry(self: &Arc<Self>) {
        if self
            .names
            .owner_retrying
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(500);
            loop {
                let Some(mdt) = me.upgrade() else { return };
                match mdt.retry_owners().await {
                    Ok(0) => {
                        mdt.names
                            .owner_retrying
                            .store(false, std::sync::atomic::Ordering::Release);
                        // One noted meanwhile may have missed this task.
                        if mdt.retry_owners().await.unwrap_or(1) == 0 {
                            return;
                        }
                        if mdt
                            .names
                            .owner_retrying
                            .swap(true, std::sync::atomic::Ordering::AcqRel)
                        {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!("MDT{:04x}: owner records: {e}", mdt.index),
                }
                drop(mdt);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RETRY_MAX);
            }
        });
    }

    /// One pass over the owner records: each file's OSTs told its owner
    /// as it is now. How many are left.
    async fn retry_owners(&self) -> Result<usize, ServerError> {
        let recs = self
            .names
            .store
            .scan(Space::Meta, PREFIX.as_bytes(), None, usize::MAX)
            .map_err(store_err)?;
        let mut left = 0;
        for (k, v) in recs {
            let fid: Fid = decode_record(&v)?;
            let Ok(r) = read_inode(&*self.names.store, fid) else {
                // Removed (its objects destroyed) or moved away: nothing
                // to tell from here.
                let mut t = Tx::new(&*self.names.store);
                t.batch.delete(Space::Meta, k);
                self.apply_step(t)?;
                continue;
            };
            let owner = file_owner(&r.attr);
            match r.layout {
                Some(l) if self.owner_to_objects(&l, owner).await => {
                    self.owner_told(fid, owner).await
                }
                Some(_) => left += 1,
                None => self.owner_told(fid, owner).await,
            }
        }
        Ok(left)
    }
}
