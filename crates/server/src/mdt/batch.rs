//! `Batch`: many changes of one client in one request (the client's
//! write-back, issue #32). Each change is taken exactly as if it had come
//! alone with its own sequence number, through `MdtService::handle`: its
//! fileset and permission checks, the recall of other clients' leases,
//! the reply cache (a resent batch is answered change by change from
//! it), its own transaction and its replay. What a batch saves is the
//! round trip and the wake-ups of each change, not any of its checks.

use super::MdtService;
use crate::error::{answer, ServerError};
use loom_proto::msg::{BatchResult, Batched, Commit, MdtRequest, Reply, ReqCtx, TargetId};
use loom_proto::requests::Effect;
use loom_proto::Errno;
use loom_rpc::Channel;
use std::sync::Arc;

/// Changes one batch may carry (a request stays well under the frame's
/// body limit with small ones; Data-on-MDT writes are bounded by it).
pub const MAX_BATCH: usize = 1024;

impl MdtService {
    /// Take `items` in order, each as a request of its own, until one
    /// fails or is answered where its inode went.
    pub(super) async fn batch(
        self: &Arc<Self>,
        ctx: &ReqCtx,
        items: Vec<Batched>,
        ch: Option<&Arc<Channel>>,
    ) -> (Result<Reply, ServerError>, Option<Commit>) {
        if items.len() > MAX_BATCH {
            let msg = format!(
                "a batch carries at most {MAX_BATCH} changes, not {}",
                items.len()
            );
            return (Err(ServerError::refused(Errno::EINVAL, msg)), None);
        }
        // Opens the window in which a batch is on its way (tests of what
        // its sender answers meanwhile).
        crate::fail::delay("batch").await;
        let target = TargetId::mdt(self.index);
        let mut results = Vec::with_capacity(items.len());
        for item in items {
            if let Err(e) = batchable(ctx, &item) {
                results.push(BatchResult {
                    result: Err(e.into()),
                    commit: None,
                });
                break;
            }
            let one = ReqCtx {
                seq: item.seq,
                ..ctx.clone()
            };
            let (r, commit) = Box::pin(self.handle(&one, item.req, ch)).await;
            let (result, ()) = answer(target, (r, ()));
            let ends = !matches!(
                result,
                Ok(ref r) if !matches!(r, Reply::Moved { .. } | Reply::Restriped { .. })
            );
            results.push(BatchResult { result, commit });
            if ends {
                break;
            }
        }
        (Ok(Reply::Batch { results }), Some(self.commit_state(0)))
    }
}

/// Whether `item` may travel in a batch sent as `ctx`: a change that
/// happens once, with a sequence number above the batch's own (the reply
/// cache's key; a number below `acked_below` would be forgotten at once).
fn batchable(ctx: &ReqCtx, item: &Batched) -> Result<(), ServerError> {
    let op = item.req.op();
    if op.effect != Effect::Once || matches!(item.req, MdtRequest::Batch { .. }) {
        let msg = format!("{} cannot travel in a batch", op.name);
        return Err(ServerError::refused(Errno::EINVAL, msg));
    }
    if item.seq == 0 || item.seq < ctx.acked_below {
        let msg = format!(
            "a batched change's sequence number {} is below the batch's mark {}",
            item.seq, ctx.acked_below
        );
        return Err(ServerError::refused(Errno::EINVAL, msg));
    }
    Ok(())
}
