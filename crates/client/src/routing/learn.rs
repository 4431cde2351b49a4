//! What MDTs' answers teach this client's cache (`Fresh`): the effects of
//! a change, or what a read showed, each under the leases the answer
//! granted.

use super::Router;
use crate::fresh::{Validity, XattrsChanged};
use loom_proto::lease;
use loom_proto::msg::{Effect, Envelope, Lease, MdtRequest, Reply, Request};
use loom_proto::requests::Shows;
use loom_proto::{Errno, WireError};
use std::collections::HashSet;

impl Router {
    /// MDT `mdt`'s answer to `env`, with what it says taken note of (under
    /// the leases it grants when `leased`).
    pub(super) fn learn(
        &self,
        mdt: u32,
        env: &Envelope,
        result: Result<Reply, WireError>,
        leased: bool,
        v: Validity,
    ) -> Result<Reply, WireError> {
        let Request::Mdt(req) = &env.req else {
            return result;
        };
        let result = result.map(Reply::split);
        match &result {
            Ok((reply, Some(e))) => {
                let granted: HashSet<Lease> = if leased {
                    lease::granted_by_change(reply, e).into_iter().collect()
                } else {
                    HashSet::new()
                };
                self.fresh
                    .learn(e.clone(), &granted, v, xattrs_changed(req, reply));
                if let Reply::Entry {
                    attr,
                    layout: Some(l),
                } = reply
                {
                    self.fresh.seen_layout(attr.fid, l);
                }
            }
            // A change to names or inodes answered without its effects (a
            // resend answered from the reply cache): what it did is not
            // known here. (Sync, replay and the like change neither.)
            Ok((_, None)) if req.op().effect == Effect::Once => self.fresh.clear(),
            _ => {
                let cfg = self.config();
                let r = result.as_ref().map(|(r, _)| r).map_err(|e| e.errno);
                let granted: HashSet<Lease> = if leased {
                    lease::granted_by_read(req, r, |f| self.located(&cfg, f) == Some(mdt))
                        .into_iter()
                        .collect()
                } else {
                    HashSet::new()
                };
                self.learn_read(req, r, &granted, v);
            }
        }
        result.map(|(r, _)| r)
    }

    /// Note what an answer to read `req` says, under `granted`.
    fn learn_read(
        &self,
        req: &MdtRequest,
        r: Result<&Reply, Errno>,
        granted: &HashSet<Lease>,
        v: Validity,
    ) {
        let f = &self.fresh;
        // What the answer shows is declared with each operation.
        match req.op().shows {
            Shows::Nothing | Shows::Attrs => {}
            Shows::Entry => {
                for (parent, name) in req.dir_names() {
                    let Some(name) = name else { continue };
                    let g = granted.contains(&Lease::Name(parent, name.clone()));
                    match r {
                        Ok(Reply::Entry { attr, .. }) => {
                            f.seen_name(parent, name, Some(attr.fid), g, v)
                        }
                        Err(Errno::ENOENT) => f.seen_name(parent, name, None, g, v),
                        _ => {}
                    }
                }
                if let Ok(Reply::Entry { attr, layout }) = r {
                    f.seen(attr, granted.contains(&Lease::Attr(attr.fid)), v);
                    if let Some(l) = layout {
                        f.seen_layout(attr.fid, l);
                    }
                }
            }
            Shows::Attr => match r {
                Ok(Reply::Attr(a)) => f.seen(a, granted.contains(&Lease::Attr(a.fid)), v),
                Ok(Reply::Entry { attr: a, layout }) => {
                    f.seen(a, granted.contains(&Lease::Attr(a.fid)), v);
                    if let Some(l) = layout {
                        f.seen_layout(a.fid, l);
                    }
                }
                _ => {}
            },
            Shows::List => {
                let (Some((fid, _)), Ok(Reply::Dir { entries, .. })) = (req.listing(), r) else {
                    return;
                };
                for e in entries {
                    let g = granted.contains(&Lease::Name(fid, e.name.clone()));
                    f.seen_name(fid, &e.name, Some(e.attr.fid), g, v);
                    f.seen(&e.attr, granted.contains(&Lease::Attr(e.attr.fid)), v);
                }
                if granted.contains(&Lease::List(fid)) {
                    f.seen_list(fid, entries.iter().map(|e| e.name.clone()).collect(), v);
                }
            }
        }
    }
}

/// What change `req`, answered `reply`, did to extended attributes
/// (matched over every operation: a new one must say).
fn xattrs_changed(req: &MdtRequest, reply: &Reply) -> XattrsChanged {
    use MdtRequest as R;
    // Declared with the operation: it makes an inode.
    if req.op().makes {
        return match reply {
            Reply::Entry { attr, .. } => XattrsChanged::Made(attr.fid),
            _ => XattrsChanged::Nothing,
        };
    }
    match req {
        R::SetXattr { fid, .. } | R::RemoveXattr { fid, .. } => XattrsChanged::Set(*fid),
        R::SetAttr { fid, set } => {
            if set.uid.is_some() || set.gid.is_some() || set.size.is_some() || set.kill_suid {
                XattrsChanged::KillPriv(*fid)
            } else {
                XattrsChanged::Nothing
            }
        }
        R::Create { .. }
        | R::Mkdir { .. }
        | R::Symlink { .. }
        | R::MkdirStriped { .. }
        | R::Lookup { .. }
        | R::GetAttr { .. }
        | R::Unlink { .. }
        | R::Rmdir { .. }
        | R::Rename { .. }
        | R::Link { .. }
        | R::Readlink { .. }
        | R::Readdir { .. }
        | R::GetLayout { .. }
        | R::SetDefaultStripe { .. }
        | R::GetDefaultStripe { .. }
        | R::GetXattr { .. }
        | R::ListXattr { .. }
        | R::StatFs
        | R::UpdateSize { .. }
        | R::ReleaseOrphan { .. }
        | R::RenewOrphans { .. }
        | R::Open { .. }
        | R::Replay { .. }
        | R::Sync
        | R::Disconnect
        | R::CommitState
        | R::Subscribe
        | R::SetDefaultLayout { .. }
        | R::GetDefaultLayout { .. }
        | R::DomWrite { .. }
        | R::DomRead { .. }
        | R::DomPunch { .. }
        | R::SetDirDefault { .. }
        | R::GetDirDefault { .. }
        | R::OpStats
        | R::Scrub { .. }
        | R::ListObjects { .. }
        | R::ReclaimObjects { .. }
        | R::FsckScan { .. }
        | R::Find { .. }
        | R::CatalogScan { .. }
        | R::MigrateData { .. }
        | R::MigrateDataEnd { .. }
        | R::FsckRepair { .. }
        | R::JobStats
        | R::SetDefaultCompress { .. }
        | R::GetDefaultCompress { .. }
        | R::Migrate { .. }
        | R::Restripe { .. }
        | R::ReaddirShard { .. }
        | R::ChangelogRead { .. }
        | R::ChangelogRegister
        | R::ChangelogClear { .. }
        | R::ChangelogDeregister { .. }
        | R::ChangelogState
        | R::QuotaUsage { .. }
        | R::QuotaCheck
        | R::QuotaRoom { .. }
        | R::DomRoom { .. }
        | R::SetProject { .. }
        | R::GetProject { .. }
        | R::SetQuota { .. }
        | R::GetQuota { .. }
        | R::Lock { .. }
        | R::Unlock { .. }
        | R::TestLock { .. }
        | R::ReclaimLocks { .. }
        | R::AppendReserve { .. }
        | R::GetCapa { .. }
        | R::GetRoot
        | R::GrantFids { .. }
        | R::MakeAt { .. }
        | R::TakeWriteBack { .. }
        // Each change of a batch is learned from its own answer.
        | R::Batch { .. } => XattrsChanged::Nothing,
    }
}
