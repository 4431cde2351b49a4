//! An MDT's part in snapshots (`loom_proto::snapshot`).
//!
//! - `Freeze`: every cross-MDT operation this MDT coordinates ends, and
//!   none starts (the distributed lock is held). Every MDT freezes before
//!   any quiesces, so the steps those operations ask of other MDTs still
//!   run: the image holds no operation half done across MDTs.
//! - `Quiesce`: the sizes clients hold under size leases are recalled
//!   (they report them), and none is leased again until the thaw; then
//!   every change in progress ends and none starts (the namespace lock
//!   is held).
//! - `Take`: the store's image, with every change applied so far
//!   (acknowledged or not), goes to `DIR/snapshots/ID/db`.

use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::msg::Reply;
use loom_proto::snapshot::SnapStep;
use loom_proto::Errno;
use loom_store::kv::{Batch, FjallStore, KvStore, Space};
use std::path::PathBuf;
use std::sync::Arc;

const FREEZE: &str = "freeze";
const QUIESCE: &str = "quiesce";

impl MdtService {
    /// Where snapshot `id`'s image is kept.
    pub fn snapshot_dir(&self, id: u32) -> PathBuf {
        self.dir.join("snapshots").join(id.to_string())
    }

    pub(super) async fn snapshot_step(self: &Arc<Self>, id: u32, step: SnapStep) -> Handled {
        match step {
            SnapStep::Freeze { ms } => {
                let me = self.clone();
                self.barriers
                    .raise(id, FREEZE, ms, move |h| async move {
                        let _g = me.dne.dist.lock().await;
                        h.keep().await;
                    })
                    .await?;
            }
            SnapStep::Quiesce { ms } => {
                // Sizes first: a file written and closed under a size
                // lease has its size at its client only. Recalled, the
                // clients report them (changes, which the barrier would
                // hold up); none is leased again until the thaw.
                let paused = self.names.leases.pause_sizes();
                let sizes = self.names.leases.held_sizes();
                if !sizes.is_empty() {
                    drop(self.names.leases.recall(0, sizes).await);
                }
                let me = self.clone();
                self.barriers
                    .raise(id, QUIESCE, ms, move |h| async move {
                        let _g = me.names.ns.lock().await;
                        let _paused = paused;
                        h.keep().await;
                    })
                    .await?;
            }
            SnapStep::Take => {
                if !(self.barriers.holds(id, FREEZE) && self.barriers.holds(id, QUIESCE)) {
                    return Err(ServerError::refused(
                        Errno::ETIMEDOUT,
                        format!(
                            "snapshot {id}: MDT{:04x}'s barrier ended before it was taken",
                            self.index
                        ),
                    ));
                }
                crate::fail::point("mdt_snapshot:take");
                let (store, dir) = (self.names.store.clone(), self.snapshot_dir(id));
                tokio::task::spawn_blocking(move || {
                    std::fs::create_dir_all(&dir)?;
                    store.checkpoint(&dir.join("db"))?;
                    mark_clean(&dir.join("db"))?;
                    loom_store::durable::sync_tree(&dir)?;
                    Ok::<(), anyhow::Error>(())
                })
                .await
                .map_err(|e| ServerError::internal(format!("snapshot task: {e}")))?
                .map_err(|e| ServerError::store(format!("snapshot {id}: {e:#}")))?;
            }
            SnapStep::Thaw => self.barriers.lift(id),
            SnapStep::Drop => {
                self.barriers.lift(id);
                lock(&self.images).remove(&id);
                let dir = self.snapshot_dir(id);
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(ServerError::store(format!(
                            "removing {}: {e}",
                            dir.display()
                        )))
                    }
                }
            }
            SnapStep::Usage => {
                let dir = self.snapshot_dir(id);
                let n = tokio::task::spawn_blocking(move || only_its_own(&dir))
                    .await
                    .map_err(|e| ServerError::internal(format!("snapshot task: {e}")))?;
                return Ok(Reply::Taken(n));
            }
        }
        Ok(Reply::Ok)
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Record in the image at `db` that it stopped cleanly: everything in it
/// is what the snapshot holds, and no client replays anything into it.
fn mark_clean(db: &std::path::Path) -> anyhow::Result<()> {
    let img = FjallStore::open(db)?;
    let transno = super::recovery::stored_transno(&img)?;
    let mut b = Batch::new();
    b.put(
        Space::Meta,
        super::recovery::CLEAN_STOP.as_bytes().to_vec(),
        super::tx::encode_record(&transno)?,
    );
    let t = img.apply(b)?;
    img.sync_through(t)?;
    Ok(())
}

impl MdtService {
    /// Snapshot `id`'s image of this MDT, opened to be read (once): a
    /// service of its own over the image's store, reaching the other
    /// MDTs' images of the same snapshot. ENOENT if this MDT has none.
    pub fn snapshot_image(self: &Arc<Self>, id: u32) -> Result<Arc<MdtService>, ServerError> {
        if let Some(m) = lock(&self.images).get(&id) {
            return Ok(m.clone());
        }
        let dir = self.snapshot_dir(id);
        if !dir.join("db").is_dir() {
            return Err(ServerError::refused(
                Errno::ENOENT,
                format!("MDT{:04x} holds no snapshot {id}", self.index),
            ));
        }
        let peers = Arc::new(self.peers.for_snapshot(id));
        let m = MdtService::open_with(self.index, &dir, peers, super::MdtOptions::default())
            .map_err(|e| ServerError::store(format!("opening snapshot {id}: {e:#}")))?;
        // Nothing to wait for: it stopped cleanly, and takes no changes.
        m.dne.recovered.send_replace(true);
        Ok(lock(&self.images).entry(id).or_insert(m).clone())
    }
}

/// Bytes under `dir` in files with no other name: what the image alone
/// holds (the tables it shares with the store are counted by the store).
fn only_its_own(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => only_its_own(&e.path()),
            Ok(m) if m.nlink() == 1 => m.blocks() * 512,
            _ => 0,
        })
        .sum()
}
