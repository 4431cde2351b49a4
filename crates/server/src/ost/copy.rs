//! A replica's side of a replicated OST: the changes its primary made,
//! done here as they were there, and the digests it asks for.
//!
//! The primary admitted each change (space grants, block quotas) before
//! it did it; a replica does it as told. Its own counts of the bytes each
//! owner holds follow from the objects, as on the primary.

use super::{OstService, Write};
use crate::error::{Handled, ServerError};
use loom_proto::msg::{OstRequest, Reply, ReqCtx};
use loom_proto::{Errno, ObjRef};
use loom_rpc::Bulk;
use loom_store::object::{DIGEST_CHUNKS, MAX_DIGEST};
use std::sync::Arc;

impl OstService {
    /// Do `req`, sent by this OST's primary, as it did it.
    pub async fn apply_copy(
        self: &Arc<Self>,
        ctx: &ReqCtx,
        req: OstRequest,
        bulk: Bulk,
    ) -> Handled {
        match req {
            OstRequest::ObjWrite {
                obj,
                offset,
                pack,
                grant_used: _,
                owner,
            } => {
                let _gate = self.gate.read().await;
                let _change = self.quota.changes.read().await;
                let w = Write {
                    obj,
                    offset,
                    pack: super::checked_pack(pack)?,
                    grant_used: 0,
                    owner,
                };
                let oid = self.check(w.obj)?;
                let Bulk { data, sums } = bulk;
                let (pack, owner) = (w.pack, w.owner);
                self.blocking(move |s| s.write_summed(oid, offset, &data, &sums, pack, owner))
                    .await?;
                Ok(Reply::Written {
                    boot: self.grants.boot(),
                    grant: 0,
                    quota_near: false,
                })
            }
            OstRequest::ObjAllocate {
                obj,
                offset,
                len,
                owner,
            } => {
                let _gate = self.gate.read().await;
                let _change = self.quota.changes.read().await;
                self.reserve(self.check(obj)?, offset, len, owner).await
            }
            other => self.handle(ctx, other, bulk).await.0,
        }
    }

    /// The size of `obj` and the crc32c of each `chunk` bytes of its
    /// range.
    pub(super) async fn digest(&self, obj: ObjRef, offset: u64, len: u64, chunk: u32) -> Handled {
        let oid = self.check(obj)?;
        if !DIGEST_CHUNKS.contains(&chunk)
            || !offset.is_multiple_of(u64::from(chunk))
            || len > MAX_DIGEST
        {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!(
                    "a digest of {len} bytes at {offset} by {chunk}: chunks are 4 KiB to 4 MiB, \
                     the start a multiple of one, at most {MAX_DIGEST} bytes"
                ),
            ));
        }
        let (size, sums) = self
            .blocking(move |s| s.digest(oid, offset, len, chunk))
            .await?;
        Ok(Reply::Digest { size, sums })
    }

    /// Raise the object id watermark to the primary's.
    pub(super) async fn raise_watermark(&self, to: u64) -> Handled {
        self.blocking(move |s| s.raise_watermark(to)).await?;
        Ok(Reply::Ok)
    }
}
