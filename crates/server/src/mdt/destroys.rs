//! Destroying the OST objects of unlinked files, many files at a time.
//!
//! Unlinking a file's last name records its objects in the `destroy`
//! keyspace in the unlink's own batch ([`MdtService::record_destroy`]).
//! Once that batch is committed the objects are destroyed on their OSTs
//! and the record deleted, so a crash in between leaves no orphan behind:
//! the records found at start are destroyed again.
//!
//! One task per MDT does this for everything queued so far at once: one
//! `Destroy` request per OST (of at most [`MAX_OBJECTS_PER_REQUEST`]
//! objects) and one batch deleting the records, however many files were
//! unlinked meanwhile. **Why batched:** with a task, a request per OST and
//! a store write per file, an `rm -rf` of small files cost the MDT and the
//! OSTs about as much CPU again as the unlinks themselves.
//! **Why after the commit:** an unlink that a crash took back must find
//! its file's data still there.

use super::tx::store_err;
use super::MdtService;
use bytes::Bytes;
use loom_proto::msg::{OstRequest, TargetId};
use loom_proto::{Fid, ObjRef};
use loom_store::kv::{Batch, Space, Ticket};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How long a destroy may wait for its OST before being left for later.
const DESTROY_TIMEOUT: Duration = Duration::from_secs(30);
/// Objects named in one `Destroy` request.
const MAX_OBJECTS_PER_REQUEST: usize = 4096;

/// A file whose objects are to be destroyed once its unlink is committed.
struct Pending {
    /// Its record's key: the file's FID (a migration's: and more).
    key: Vec<u8>,
    objs: Vec<ObjRef>,
    /// The unlink's transaction number (0: not a client's change).
    transno: u64,
    /// The store's ticket of the unlink's batch.
    ticket: Ticket,
}

/// The queue of files whose objects are to be destroyed.
#[derive(Default)]
pub(super) struct Destroys {
    pending: Mutex<Vec<Pending>>,
    wake: tokio::sync::Notify,
}

impl Destroys {
    fn push(&self, p: Pending) {
        super::lock(&self.pending).push(p);
        self.wake.notify_one();
    }

    fn take(&self) -> Vec<Pending> {
        std::mem::take(&mut *super::lock(&self.pending))
    }

    /// Wake the task to find the MDT gone (it is being dropped), so it
    /// ends.
    pub(super) fn close(&self) {
        self.wake.notify_one();
    }
}

impl MdtService {
    /// Destroy `fid`'s objects once its unlink (transaction `transno`,
    /// applied as `ticket`) is committed. A client's unlink waits for the
    /// next commit rather than forcing one (one fsync per unlink
    /// otherwise); others (`transno` 0) force it.
    pub(super) fn queue_destroy(
        &self,
        key: Vec<u8>,
        objs: Vec<ObjRef>,
        transno: u64,
        ticket: Ticket,
    ) {
        self.names.destroys.push(Pending {
            key,
            objs,
            transno,
            ticket,
        });
    }

    /// Start the task that destroys what is queued; it holds the MDT only
    /// while it works, and ends when the MDT is dropped.
    pub(super) fn spawn_destroyer(self: &Arc<Self>) {
        let me: Weak<MdtService> = Arc::downgrade(self);
        let queue = self.names.destroys.clone();
        tokio::spawn(async move {
            loop {
                queue.wake.notified().await;
                let Some(mdt) = me.upgrade() else { return };
                loop {
                    let batch = queue.take();
                    if batch.is_empty() {
                        break;
                    }
                    mdt.destroy_batch(batch).await;
                }
            }
        });
    }

    /// Destroy the objects of `batch` once every unlink in it is
    /// committed, then delete the records of the files done. The records
    /// of files with objects on an OST that failed stay for the next start.
    async fn destroy_batch(&self, batch: Vec<Pending>) {
        let transno = batch.iter().map(|p| p.transno).max().unwrap_or(0);
        self.commit.commits.committed(transno).await;
        let forced = batch
            .iter()
            .filter(|p| p.transno == 0)
            .map(|p| p.ticket)
            .max();
        if let Some(ticket) = forced {
            if let Err(e) = self.commit_through(ticket).await {
                // The records stay; the next start destroys them.
                tracing::error!(
                    "MDT{:04x}: objects of {} files left for the next start: {e}",
                    self.index,
                    batch.len()
                );
                return;
            }
        }
        let mut by_ost: BTreeMap<u32, Vec<ObjRef>> = BTreeMap::new();
        for o in batch.iter().flat_map(|p| p.objs.iter()) {
            by_ost.entry(o.ost).or_default().push(*o);
        }
        let mut calls = tokio::task::JoinSet::new();
        for (ost, objs) in by_ost {
            for chunk in objs.chunks(MAX_OBJECTS_PER_REQUEST) {
                let peers = self.peers.clone();
                let objs = chunk.to_vec();
                calls.spawn(async move {
                    let r = peers
                        .call(
                            TargetId::ost(ost),
                            OstRequest::Destroy { objs },
                            Bytes::new(),
                            DESTROY_TIMEOUT,
                        )
                        .await;
                    (ost, r)
                });
            }
        }
        let mut failed = BTreeSet::new();
        while let Some(done) = calls.join_next().await {
            match done {
                Ok((_, Ok(_))) => {}
                Ok((ost, Err(e))) => {
                    // The records stay; the next start retries.
                    tracing::warn!(
                        "MDT{:04x}: destroying objects on OST{ost:04x}: {e}",
                        self.index
                    );
                    failed.insert(ost);
                }
                Err(e) => {
                    tracing::error!("MDT{:04x}: a destroy task died: {e}", self.index);
                    return;
                }
            }
        }
        let mut b = Batch::new();
        for p in &batch {
            if p.objs.iter().any(|o| failed.contains(&o.ost)) {
                self.stats.count("destroy_deferred");
            } else {
                self.stats.count("destroy_done");
                b.delete(Space::Destroy, p.key.clone());
            }
        }
        // No fsync needed: if this is lost the destroys are simply repeated.
        if let Err(e) = self.names.store.apply(b) {
            tracing::warn!("MDT{:04x}: clearing destroy records: {e}", self.index);
        }
    }

    /// Files whose objects are recorded for destruction and not destroyed
    /// yet (an OST was away): what the next start will retry.
    pub fn pending_destroys(&self) -> Result<Vec<Fid>, crate::error::ServerError> {
        let recs = self
            .names
            .store
            .scan(Space::Destroy, &[], None, usize::MAX)
            .map_err(store_err)?;
        Ok(recs.iter().filter_map(|(k, _)| Fid::from_key(k)).collect())
    }

    /// Queue the destroys recorded before this start.
    pub(super) async fn resume_destroys(self: Arc<Self>) {
        let pending = match self
            .names
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
        if pending.is_empty() {
            return;
        }
        for (k, v) in pending {
            let (Some(_), Ok(objs)) = (
                Fid::from_key(&k),
                super::tx::decode_record::<Vec<ObjRef>>(&v),
            ) else {
                tracing::warn!("MDT{:04x}: unreadable destroy record", self.index);
                continue;
            };
            self.queue_destroy(k, objs, 0, 0);
        }
    }
}
