//! An OST's part in snapshots (`loom_proto::snapshot`): its barrier stops
//! every change (writes, truncates, destroys) until the snapshot is
//! taken; taking it makes the object store keep what later changes
//! overwrite (`loom_store::snaps`).

use super::OstService;
use crate::error::{Handled, ServerError};
use loom_proto::msg::{Reply, ReqCtx};
use loom_proto::snapshot::SnapStep;
use loom_proto::Errno;
use std::sync::Arc;

const QUIESCE: &str = "quiesce";

impl OstService {
    pub(super) async fn snapshot(
        self: &Arc<Self>,
        _ctx: &ReqCtx,
        id: u32,
        step: SnapStep,
    ) -> Handled {
        match step {
            // Nothing crosses OSTs.
            SnapStep::Freeze { .. } => Ok(Reply::Ok),
            SnapStep::Quiesce { ms } => {
                let gate = self.gate.clone();
                self.barriers
                    .raise(id, QUIESCE, ms, move |h| async move {
                        let _g = gate.write().await;
                        h.keep().await;
                    })
                    .await?;
                Ok(Reply::Ok)
            }
            SnapStep::Take => {
                if !self.barriers.holds(id, QUIESCE) {
                    return Err(ServerError::refused(
                        Errno::ETIMEDOUT,
                        format!(
                            "snapshot {id}: OST{:04x}'s barrier ended before it was taken",
                            self.index
                        ),
                    ));
                }
                crate::fail::point("ost_snapshot:take");
                let store = self.store.clone();
                tokio::task::spawn_blocking(move || store.snapshot_take(id))
                    .await
                    .map_err(|e| ServerError::internal(format!("snapshot task: {e}")))??;
                Ok(Reply::Ok)
            }
            SnapStep::Thaw => {
                self.barriers.lift(id);
                Ok(Reply::Ok)
            }
            SnapStep::Drop => {
                self.barriers.lift(id);
                let store = self.store.clone();
                tokio::task::spawn_blocking(move || store.snapshot_drop(id))
                    .await
                    .map_err(|e| ServerError::internal(format!("snapshot task: {e}")))??;
                Ok(Reply::Ok)
            }
            SnapStep::Usage => {
                let store = self.store.clone();
                let n = tokio::task::spawn_blocking(move || store.snapshot_taken(id))
                    .await
                    .map_err(|e| ServerError::internal(format!("snapshot task: {e}")))?;
                // A snapshot this OST does not hold takes nothing here.
                Ok(Reply::Taken(n.unwrap_or(0)))
            }
        }
    }
}

impl OstService {
    /// `ObjRead` of object `obj` as snapshot `id` saw it (empty if the
    /// object did not exist then).
    pub async fn read_snapshot(
        &self,
        id: u32,
        obj: loom_proto::ObjRef,
        offset: u64,
        len: u32,
    ) -> Result<Vec<u8>, ServerError> {
        let oid = self.check(obj)?;
        if len > super::MAX_READ {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!(
                    "read of {len} bytes exceeds the limit of {} per request",
                    super::MAX_READ
                ),
            ));
        }
        let r = self
            .blocking(move |s| s.read_snapshot(id, oid, offset, len))
            .await?;
        Ok(r.map(|(_, b)| b).unwrap_or_default())
    }

    /// `ObjGetSize` of object `obj` as snapshot `id` saw it.
    pub async fn size_in_snapshot(&self, id: u32, obj: loom_proto::ObjRef) -> Handled {
        let oid = self.check(obj)?;
        let r = self
            .blocking(move |s| s.read_snapshot(id, oid, 0, 0))
            .await?;
        Ok(Reply::Size(r.map_or(0, |(size, _)| size)))
    }
}
