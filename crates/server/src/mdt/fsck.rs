//! What `loom fsck` asks of an MDT: the OST objects its records refer to
//! (the files' layouts, and the destroys still to send), a page at a time,
//! and the destroy of objects that no file of any MDT refers to; its
//! namespace (inodes, entries, open-unlinked files), a page at a time, and
//! the repairs of what the tool found wrong in it.

use super::records::{parse_dentry_key, DentryRec, InodeRec};
use super::tx::{decode_record, store_err, Tx};
use super::MdtService;
use crate::error::ServerError;
use bytes::Bytes;
use loom_proto::layout::Pattern;
use loom_proto::lease::Lease;
use loom_proto::msg::{FileKind, FsckFix, FsckItem, FsckScan, OstRequest, Reply, ReqCtx, TargetId};
use loom_proto::{Errno, Fid, ObjRef};
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
    /// destroy has not reached their OSTs yet, and of migrations in
    /// progress).
    pub(super) fn list_objects(&self, after: &[u8]) -> Result<Reply, ServerError> {
        let mut objs = Vec::new();
        if after.is_empty() {
            for (_, v) in self
                .names
                .store
                .scan(Space::Destroy, &[], None, usize::MAX)
                .map_err(store_err)?
            {
                objs.extend(decode_record::<Vec<ObjRef>>(&v)?);
            }
            // And those a file data migration in progress writes.
            objs.extend(self.migrating_objects()?);
        }
        let page = self
            .names
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

/// Records read per page of a namespace scan.
const SCAN_PAGE: usize = 1024;

impl MdtService {
    /// A page of this MDT's namespace after `after` (empty: from the
    /// start), as `loom fsck` checks it: inodes, entries, or open-unlinked
    /// files.
    pub(super) fn fsck_scan(&self, what: FsckScan, after: &[u8]) -> Result<Reply, ServerError> {
        let space = match what {
            FsckScan::Inodes => Space::Inodes,
            FsckScan::Entries => Space::Dentries,
            FsckScan::Orphans => Space::Orphans,
        };
        let page = self
            .names
            .store
            .scan(space, &[], (!after.is_empty()).then_some(after), SCAN_PAGE)
            .map_err(store_err)?;
        let mut items = Vec::with_capacity(page.len());
        for (k, v) in &page {
            let bad_key = || store_err(format!("a {} key of {} bytes", space.name(), k.len()));
            items.push(match what {
                FsckScan::Inodes => {
                    let r = InodeRec::decode(v)
                        .map_err(|e| store_err(format!("an inode record: {}", e.msg)))?;
                    let shards = match r.layout.as_ref().and_then(|l| l.components.first()) {
                        Some(c) => match &c.pattern {
                            Pattern::DirShards { shards, .. } => shards.clone(),
                            _ => Vec::new(),
                        },
                        None => Vec::new(),
                    };
                    FsckItem::Inode {
                        fid: r.attr.fid,
                        kind: r.attr.kind,
                        nlink: r.attr.nlink,
                        size: r.attr.size,
                        parent: r.parent,
                        shards,
                    }
                }
                FsckScan::Entries => {
                    let parent = Fid::from_key(k).ok_or_else(bad_key)?;
                    let (_, name) = parse_dentry_key(k).ok_or_else(bad_key)?;
                    let d: DentryRec = decode_record(v)?;
                    FsckItem::Entry {
                        parent,
                        name,
                        fid: d.fid,
                        kind: d.kind,
                    }
                }
                FsckScan::Orphans => FsckItem::Orphan {
                    fid: Fid::from_key(k).ok_or_else(bad_key)?,
                },
            });
        }
        let next = if page.len() == SCAN_PAGE {
            page.last().map(|(k, _)| k.clone())
        } else {
            None
        };
        Ok(Reply::FsckPage { items, next })
    }

    /// Apply a repair `loom fsck --repair` chose (root only), after
    /// recalling what clients cache of what it changes.
    pub(super) async fn fsck_repair(
        self: &Arc<Self>,
        ctx: &ReqCtx,
        fix: FsckFix,
    ) -> Result<Reply, ServerError> {
        if ctx.uid != 0 {
            return Err(ServerError::refused(
                Errno::EPERM,
                "only root may repair the namespace (loom fsck --repair)",
            ));
        }
        let recalled = match &fix {
            FsckFix::DropEntry { parent, name } => {
                vec![Lease::List(*parent), Lease::Name(*parent, name.clone())]
            }
            FsckFix::SetNlink { fid, .. } => vec![Lease::Attr(*fid)],
            FsckFix::Adopt { fid, dir, name } => vec![
                Lease::List(*dir),
                Lease::Name(*dir, name.clone()),
                Lease::Attr(*dir),
                Lease::Attr(*fid),
            ],
            FsckFix::PutEntry { parent, name, .. } => vec![
                Lease::List(*parent),
                Lease::Name(*parent, name.clone()),
                Lease::Attr(*parent),
            ],
            FsckFix::SetParent { fid, .. } => vec![Lease::Attr(*fid)],
        };
        let _busy = self.names.leases.recall(0, recalled).await;
        let (_, _ns) = self.begin().await.into_parts();
        let mut t = Tx::new(&*self.names.store);
        match &fix {
            FsckFix::DropEntry { parent, name } => {
                let Some(d) = t.dentry(*parent, name)? else {
                    return Err(ServerError::refused(
                        Errno::ENOENT,
                        format!("{parent} has no entry {name}"),
                    ));
                };
                t.delete_dentry(*parent, name)?;
                if d.kind == FileKind::Dir {
                    // Its parent counted it as a subdirectory.
                    let p = t.inode(*parent)?;
                    p.attr.nlink = p.attr.nlink.saturating_sub(1).max(2);
                }
            }
            FsckFix::PutEntry {
                parent,
                name,
                fid,
                kind,
            } => {
                if t.dentry(*parent, name)?.is_some() {
                    return Err(ServerError::refused(
                        Errno::EEXIST,
                        format!("{parent} has an entry {name}"),
                    ));
                }
                let p = t.dir(*parent)?;
                if *kind == FileKind::Dir {
                    p.attr.nlink += 1;
                }
                t.put_dentry(
                    *parent,
                    name,
                    &DentryRec {
                        fid: *fid,
                        kind: *kind,
                    },
                )?;
            }
            FsckFix::SetParent { fid, parent } => {
                t.dir(*fid)?.parent = *parent;
            }
            FsckFix::SetNlink { fid, nlink } => {
                t.inode(*fid)?.attr.nlink = *nlink;
            }
            FsckFix::Adopt { fid, dir, name } => {
                if t.dentry(*dir, name)?.is_some() {
                    return Err(ServerError::refused(
                        Errno::EEXIST,
                        format!("{dir} has an entry {name}"),
                    ));
                }
                let kind = {
                    let r = t.inode(*fid)?;
                    if r.attr.kind == FileKind::Dir {
                        r.parent = *dir;
                    }
                    r.attr.nlink =
                        r.attr
                            .nlink
                            .max(if r.attr.kind == FileKind::Dir { 2 } else { 1 });
                    r.attr.kind
                };
                let d = t.dir(*dir)?;
                if kind == FileKind::Dir {
                    d.attr.nlink += 1;
                }
                t.put_dentry(*dir, name, &DentryRec { fid: *fid, kind })?;
                // No longer an open-unlinked file kept for a client.
                t.batch.delete(Space::Orphans, fid.to_key().to_vec());
            }
        }
        let ticket = self.apply_step(t)?;
        drop(_ns);
        self.commit_through(ticket).await?;
        tracing::warn!("MDT{:04x}: loom fsck repaired: {fix:?}", self.index);
        Ok(Reply::Ok)
    }
}
