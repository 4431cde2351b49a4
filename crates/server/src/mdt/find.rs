//! `loom find` on an MDT: a scan of its directory entries in key order
//! (so a directory's entries come together), a page at a time, testing
//! each entry's name and, where its inode is kept here too, the inode and
//! its layout. The client runs one scan per MDT at once and builds the
//! paths of the matches from the directories every page carries.
//!
//! Who sees what: the entries of a directory object (a directory, or a
//! shard of a striped one, which carries its directory's mode and ACL)
//! are returned only if the caller may read and search it, as a walk
//! would list it; the directory is named among `denied` instead. The
//! client keeps only what hangs from its start through directories it
//! was shown, so a name below a directory the caller cannot list is not
//! shown even when the directory itself may be listed.

use super::perm::{may, Cred};
use super::records::{parse_dentry_key, DentryRec, InodeRec};
use super::tx::{decode_record, store_err};
use super::MdtService;
use crate::error::ServerError;
use loom_proto::find::{Candidate, FindQuery};
use loom_proto::msg::{access, FileKind, Found, Reply, ReqCtx, Scanned};
use loom_proto::Fid;
use loom_store::kv::Space;

/// A stored key and its value.
type KeyValue = (Vec<u8>, Vec<u8>);

/// Most entries one page scans, whatever the caller asks.
const MAX_PAGE: u32 = 8192;

impl MdtService {
    /// A page of the scan after `after` (see the module's comment).
    pub(super) fn find(
        &self,
        ctx: &ReqCtx,
        query: &FindQuery,
        after: &[u8],
        max: u32,
    ) -> Result<Reply, ServerError> {
        let cred = Cred::of(ctx);
        let needs_inode = query.needs_inode();
        let page = self.dentry_page(after, max)?;
        let mut items = Vec::new();
        let mut denied = Vec::new();
        // The directory object whose entries are being read, and whether
        // the caller may list it.
        let mut dir: Option<(Fid, bool)> = None;
        for (k, v) in &page {
            let (Some(parent), Some((_, name))) = (Fid::from_key(k), parse_dentry_key(k)) else {
                continue;
            };
            let listed = match dir {
                Some((d, ok)) if d == parent => ok,
                _ => {
                    let ok = self.may_list(&cred, parent)?;
                    if !ok {
                        denied.push(parent);
                    }
                    dir = Some((parent, ok));
                    ok
                }
            };
            if !listed {
                continue;
            }
            let e: DentryRec = decode_record(v)?;
            let is_dir = e.kind == FileKind::Dir;
            // Names and kinds are the entry's: the inode is read only
            // for the other tests, and for a directory's shards.
            let inode = if is_dir || needs_inode {
                self.local_inode(e.fid)?
            } else {
                None
            };
            let matched = match &inode {
                Some(r) => Some(query.matches(&Candidate {
                    name: name.as_bytes(),
                    kind: e.kind,
                    attr: Some(&r.attr),
                    layout: r.layout.as_ref().filter(|_| r.attr.kind == FileKind::File),
                    mdt: self.index,
                })),
                None if !needs_inode => Some(query.matches(&Candidate {
                    name: name.as_bytes(),
                    kind: e.kind,
                    attr: None,
                    layout: None,
                    mdt: self.index,
                })),
                None => None,
            };
            if matched == Some(false) && !is_dir {
                continue;
            }
            let shards = inode
                .as_ref()
                .and_then(|r| r.layout.as_ref())
                .and_then(|l| l.dir_shards())
                .map(<[Fid]>::to_vec)
                .unwrap_or_default();
            items.push(Found {
                dir: parent,
                name,
                fid: e.fid,
                kind: e.kind,
                matched,
                shards,
            });
        }
        let next = if page.len() == max.clamp(1, MAX_PAGE) as usize {
            page.last().map(|(k, _)| k.clone())
        } else {
            None
        };
        Ok(Reply::Found {
            items,
            denied,
            next,
        })
    }

    /// `CatalogScan`: a page of every entry after `after`, with the
    /// inodes kept here (root only: it shows every name).
    pub(super) fn catalog_scan(
        &self,
        ctx: &ReqCtx,
        after: &[u8],
        max: u32,
    ) -> Result<Reply, ServerError> {
        if ctx.uid != 0 {
            return Err(ServerError::refused(
                loom_proto::Errno::EPERM,
                "only root may scan the namespace for the policy catalog",
            ));
        }
        let max = max.clamp(1, MAX_PAGE) as usize;
        let page = self.dentry_page(after, max as u32)?;
        let mut items = Vec::with_capacity(page.len());
        for (k, v) in &page {
            let (Some(dir), Some((_, name))) = (Fid::from_key(k), parse_dentry_key(k)) else {
                continue;
            };
            let e: DentryRec = decode_record(v)?;
            let inode = self.local_inode(e.fid)?.map(|r| {
                let attr = super::remote::shown_attr(&r);
                (attr, r.layout)
            });
            items.push(Scanned {
                dir,
                name,
                fid: e.fid,
                kind: e.kind,
                inode,
            });
        }
        let next = (page.len() == max)
            .then(|| page.last().map(|(k, _)| k.clone()))
            .flatten();
        Ok(Reply::Scanned { items, next })
    }

    /// Up to `max` (at most [`MAX_PAGE`]) directory entries after key
    /// `after` (empty: from the first), in key order: a page of a scan.
    fn dentry_page(&self, after: &[u8], max: u32) -> Result<Vec<KeyValue>, ServerError> {
        self.names
            .store
            .scan(
                Space::Dentries,
                &[],
                (!after.is_empty()).then_some(after),
                max.clamp(1, MAX_PAGE) as usize,
            )
            .map_err(store_err)
    }

    /// Whether the caller may read and search directory object `dir` (a
    /// directory or shard kept here; one not found is not listed).
    fn may_list(&self, cred: &Cred<'_>, dir: Fid) -> Result<bool, ServerError> {
        Ok(self
            .local_inode(dir)?
            .is_some_and(|r| may(cred, &r, access::READ | access::EXEC).is_ok()))
    }

    /// Inode `fid` if this MDT keeps it.
    fn local_inode(&self, fid: Fid) -> Result<Option<InodeRec>, ServerError> {
        match self
            .names
            .store
            .get(Space::Inodes, &super::records::inode_key(fid))
            .map_err(store_err)?
        {
            None => Ok(None),
            Some(v) => InodeRec::decode(&v)
                .map(Some)
                .map_err(|e| store_err(format!("inode {fid}: {}", e.msg))),
        }
    }
}
