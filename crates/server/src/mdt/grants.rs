//! FIDs granted to a client (`GrantFids`), which names the inodes it makes
//! ahead of the MDT with them (`MakeAt`: its metadata write-back, issue
//! #32).
//!
//! A grant is a run of FIDs of this MDT's current sequence. The allocator
//! moves past it in the grant's own change, committed before the answer,
//! so no instance of this MDT hands those FIDs out again. The runs a
//! client holds are recorded under `fids/CLIENT` (the last
//! [`RUNS_KEPT`]): a `MakeAt` names a FID of one of them, or is refused,
//! also when it is replayed after a restart. A FID whose inode exists is
//! refused too (EEXIST), so a client cannot make one twice.

use super::request::Rq;
use super::tx::read_meta;
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::msg::Reply;
use loom_proto::{Errno, Fid};

/// FIDs one grant gives at most (well under the allocator's headroom, so
/// that a grant never needs a new sequence under the namespace lock).
pub const MAX_GRANT: u32 = 4096;
/// Runs kept per client: the one in use and the one before it (whose
/// last FIDs may still be on their way in a batch).
const RUNS_KEPT: usize = 2;

/// One run: (sequence, first oid, count).
type Run = (u64, u32, u32);

/// The meta key of `client`'s runs.
pub fn key(client: u64) -> String {
    format!("fids/{client:016x}")
}

impl MdtService {
    /// `GrantFids`: `count` FIDs for the caller, committed before the answer.
    pub(super) async fn grant_fids(&self, rq: &Rq<'_>, count: u32) -> Handled {
        if count == 0 || count > MAX_GRANT {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("a grant is 1 to {MAX_GRANT} FIDs, not {count}"),
            ));
        }
        let client = rq.ctx.client_id;
        if client == 0 {
            return Err(ServerError::refused(
                Errno::EINVAL,
                "FIDs are granted to a client's session",
            ));
        }
        self.ensure_fid_room().await?;
        let (mut t, g) = self.begin().await.into_parts();
        let first = self.alloc_fids(&mut t, count)?;
        let (seq, first) = (first.seq, first.oid);
        let mut runs: Vec<Run> = read_meta(&*self.names.store, &key(client))?.unwrap_or_default();
        runs.push((seq, first, count));
        if runs.len() > RUNS_KEPT {
            runs.drain(..runs.len() - RUNS_KEPT);
        }
        t.put_meta(&key(client), &runs)?;
        let reply = Reply::Fids {
            first: Fid::new(seq, first),
            count,
        };
        let ticket = self.apply(rq, t, &reply)?;
        drop(g);
        self.commit_through(ticket).await?;
        Ok(reply)
    }

    /// Whether `fid` is in a run granted to `client` (EPERM otherwise).
    pub(super) fn check_granted(&self, client: u64, fid: Fid) -> Result<(), ServerError> {
        let runs: Vec<Run> = read_meta(&*self.names.store, &key(client))?.unwrap_or_default();
        let inside = runs.iter().any(|&(seq, first, count)| {
            fid.seq == seq
                && fid.oid >= first
                && u64::from(fid.oid) < u64::from(first) + u64::from(count)
        });
        if inside {
            Ok(())
        } else {
            Err(ServerError::refused(
                Errno::EPERM,
                format!("{fid} was not granted to this client"),
            ))
        }
    }
}
