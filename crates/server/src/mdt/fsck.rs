//! What `loom fsck` asks of an MDT: the OST objects its records refer to
//! (the files' layouts, and the destroys still to send), a page at a time,
//! and the destroy of objects that no file of any MDT refers to.

use super::records::InodeRec;
use super::tx::{decode_record, store_err};
use super::MdtService;
use crate::error::ServerError;
use bytes::Bytes;
use loom_proto::msg::{OstRequest, Reply, ReqCtx, TargetId};
use loom_proto::{Errno, ObjRef};
use loom_store::kv::Space;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Inode records read per page.
const PAGE: usize = 1024;
/// How long one OST may take to destroy what fsck found.
const RECLAIM_TIMEOUT: Duration = Duration::from_secs(60);

impl MdtService {
    /// The objects referred to by a page of inode records after `after`
    /// (the first page also holds the objects of unlinked files whose
    /// destroy has not reached their OSTs yet).
    pub(super) fn list_objects(&self, after: &[u8]) -> Result<Reply, ServerError> {
        let mut objs = Vec::new();
        if after.is_empty() {
            for (_, v) in self
                .store
                .scan(Space::Destroy, &[], None, usize::MAX)
                .map_err(store_err)?
            {
                objs.extend(decode_record::<Vec<ObjRef>>(&v)?);
            }
        }
        let page = self
            .store
            .scan(
                Space::Inodes,
                &[],
                (!after.is_empty()).then_some(after),
                PAGE,
            )
            .map_err(store_err)?;
        for (_, v) in &page {
            let rec = InodeRec::decode(v)
                .map_err(|e| store_err(format!("an inode record: {}", e.msg)))?;
            if let Some(l) = &rec.layout {
                objs.extend(l.objects());
            }
        }
        let next = if page.len() == PAGE {
            page.last().map(|(k, _)| k.clone())
        } else {
            None
        };
        Ok(Reply::ObjectRefs { objs, next })
    }

    /// Destroy `objs`, which `loom fsck` found no file refers to: root's
    /// call only, since the MDT destroys them as a peer, which no client
    /// may.
    pub(super) async fn reclaim_objects(
        self: &Arc<Self>,
        ctx: &ReqCtx,
        objs: Vec<ObjRef>,
    ) -> Result<Reply, ServerError> {
        if ctx.uid != 0 {
            return Err(ServerError::refused(
                Errno::EPERM,
                "only root may reclaim objects (loom fsck --repair)",
            ));
        }
        let mut by_ost: BTreeMap<u32, Vec<ObjRef>> = BTreeMap::new();
        for o in objs {
            by_ost.entry(o.ost).or_default().push(o);
        }
        for (ost, objs) in by_ost {
            let n = objs.len();
            self.peers
                .call(
                    TargetId::ost(ost),
                    OstRequest::Destroy { objs },
                    Bytes::new(),
                    RECLAIM_TIMEOUT,
                )
                .await?;
            tracing::warn!(
                "MDT{:04x}: loom fsck reclaimed {n} objects no file refers to on OST{ost:04x}",
                self.index
            );
        }
        Ok(Reply::Ok)
    }
}
