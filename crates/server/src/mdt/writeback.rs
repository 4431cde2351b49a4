//! Directories a client writes back (issue #32): it holds
//! `Lease::WriteBack` on an empty directory, answers the changes in it
//! itself, and sends them later in batches (`Batch`, `MakeAt`).
//!
//! Coherence is the recall: any other client's request that names the
//! directory (the inode it is routed by, a directory whose names it
//! addresses, the directory it lists) recalls the lease first, in
//! `handle`, and the holder sends what it has not sent before it
//! answers. The request then runs on the directory as the holder left
//! it, and the lease stays under recall (granted to no one) until it is
//! answered. A directory the holder makes in one it writes back is
//! written back too: no one else can have seen it.
//!
//! Only an empty directory is given: the holder then knows every name in
//! it. The check and the grant are made under the namespace lock, so no
//! change can slip between them. Tools that scan an MDT (`loom find`,
//! fsck, the policy engine's scan) see what was sent.

use super::perm::{self, Cred};
use super::request::Rq;
use super::tx::read_inode;
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::msg::{FileKind, Lease, MdtRequest, Reply};
use loom_proto::{Errno, Fid};

impl MdtService {
    /// `TakeWriteBack`: the caller writes back empty directory `dir`.
    pub(super) async fn take_write_back(&self, rq: &Rq<'_>, dir: Fid) -> Handled {
        let client = rq.ctx.client_id;
        let (t, _locked) = self.begin().await.into_parts();
        let r = read_inode(&*self.names.store, dir)?;
        if r.attr.kind != FileKind::Dir {
            return Err(ServerError::refused(
                Errno::ENOTDIR,
                format!("{dir} is not a directory"),
            ));
        }
        if r.layout.as_ref().is_some_and(|l| l.dir_shards().is_some()) {
            return Err(ServerError::refused(
                Errno::EOPNOTSUPP,
                format!("{dir} is striped: its names are on several MDTs"),
            ));
        }
        perm::may_change_dir(&Cred::of(rq), &r)?;
        if !t.dir_is_empty(dir)? {
            return Err(ServerError::refused(
                Errno::ENOTEMPTY,
                format!("{dir} has names: only an empty directory is written back"),
            ));
        }
        // The holder gives its new inodes their final modes itself: a
        // default ACL would cut them in ways it does not compute.
        if r.default_acl.is_some() {
            return Err(ServerError::refused(
                Errno::EOPNOTSUPP,
                format!("{dir} has a default ACL"),
            ));
        }
        if !self.names.leases.grant_writeback(client, dir) {
            return Err(ServerError::refused(
                Errno::EBUSY,
                format!("{dir} is written back by another client, or this client takes no leases"),
            ));
        }
        // The layout its new files get: what of their first bytes the
        // holder may send with them (a Data-on-MDT component's).
        Ok(Reply::LayoutSpec(self.default_layout(dir)?))
    }

    /// A directory made by the client that writes back its parent is
    /// written back by it too (called once the change is applied).
    pub(super) fn inherit_write_back(&self, client: u64, parent: Fid, made: Fid) {
        if self.names.leases.holds(client, &Lease::WriteBack(parent)) {
            self.names.leases.grant_writeback(client, made);
        }
    }
}

/// The directories `req` names, whose write-back leases another client's
/// request recalls: the inode it is routed by, the directories of the
/// names it addresses, the directory it lists.
pub(super) fn named_dirs(req: &MdtRequest) -> Vec<Fid> {
    let mut v: Vec<Fid> = req.routed_by().into_iter().collect();
    v.extend(req.dir_names().iter().map(|(d, _)| *d));
    if let Some((d, _)) = req.listing() {
        v.push(d);
    }
    v.sort_unstable();
    v.dedup();
    v
}
