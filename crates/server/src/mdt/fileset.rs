//! Filesets: the subtree a nodemap confines its clients to (Lustre's
//! fileset, `loom_proto::nodemap::Fileset`). The server process puts the
//! fileset's directory in the context of each such client's request
//! (`ReqCtx::fileset`); the MDT then refuses (EACCES) every request that
//! names an inode outside it, before anything else runs, and answers the
//! client's `GetRoot` with the fileset's directory, which its mount shows
//! as its root.
//!
//! Where an inode hangs is found by walking up the tree: a directory by
//! its parent (`..`), through every MDT; a shard of a striped directory
//! also by its master (shard 0); any other inode by the directory its
//! name was made in or last renamed into (its inode's `parent`). A hard
//! link made elsewhere does not bring a file into a fileset: it is
//! reached from the fileset only if its first name (or the last rename)
//! put it there.
//!
//! What the requests name comes from their declared facts (the inode a
//! request is routed by, the directories of its names); a `Link` also
//! names the inode it links, and a `Replay` the requests it carries.
//! Requests that name no inode are served when they show nothing of the
//! tree (statfs, commit state, sessions, its quota); the others
//! (changelog, fsck, scrub, object lists, quota reports) are refused to
//! a confined client (EPERM), which could read names outside its
//! fileset through them.

use super::tx::read_inode;
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::msg::{FileKind, MdtRequest, PeerRequest, Reply};
use loom_proto::{Errno, Fid};
use std::sync::Arc;

/// Deepest walk up the tree before the tree is called looped.
const MAX_DEPTH: usize = 4096;

/// Where an inode hangs: the directory to walk up from, and the master
/// of a shard (which a shard's `parent` skips).
struct Place {
    dir: Fid,
    master: Option<Fid>,
}

impl MdtService {
    /// Refuse `req` from a client confined to `root` unless everything it
    /// names is inside.
    pub(super) async fn confine(
        self: &Arc<Self>,
        root: Fid,
        req: &MdtRequest,
    ) -> Result<(), ServerError> {
        let mut named: Vec<Fid> = req.routed_by().into_iter().collect();
        named.extend(req.dir_names().iter().map(|(d, _)| *d));
        match req {
            MdtRequest::Link { fid, .. } => named.push(*fid),
            // Each change of a batch is confined when it is taken.
            MdtRequest::Batch { .. } => return Ok(()),
            MdtRequest::Replay { entries, .. } => {
                for e in entries {
                    Box::pin(self.confine(root, &e.req)).await?;
                }
                return Ok(());
            }
            _ => {}
        }
        if named.is_empty() && !subtree_safe(req) {
            return Err(ServerError::refused(
                Errno::EPERM,
                format!(
                    "{}: a client confined to a fileset sees only its subtree",
                    req.op().name
                ),
            ));
        }
        named.sort_unstable();
        named.dedup();
        for fid in named {
            if !self.within(root, fid).await? {
                return Err(ServerError::refused(
                    Errno::EACCES,
                    format!("{fid} is outside the fileset {root} this client is confined to"),
                ));
            }
        }
        Ok(())
    }

    /// `GetRoot`: the caller's fileset, or the file system's root.
    pub(super) async fn get_root(self: &Arc<Self>, fileset: Option<Fid>) -> Handled {
        let fid = fileset.unwrap_or(Fid::ROOT);
        match read_inode(&*self.names.store, fid) {
            Ok(r) => Ok(Reply::Entry {
                attr: super::remote::shown_attr(&r),
                layout: None,
            }),
            Err(e) if e.errno() == Errno::ENOENT => self.remote_entry(fid).await,
            Err(e) => Err(e),
        }
    }

    /// Whether `fid` is `root` or lies below it. An inode found nowhere
    /// passes: the request fails on it (or follows it where `loom
    /// migrate` moved it, and is checked there).
    async fn within(self: &Arc<Self>, root: Fid, fid: Fid) -> Result<bool, ServerError> {
        if fid == root {
            return Ok(true);
        }
        let Some((kind, place)) = self.place(fid).await? else {
            return Ok(true);
        };
        let mut at = match kind {
            FileKind::Dir => Place {
                dir: fid,
                master: place.master,
            },
            _ => Place {
                dir: place.dir,
                master: None,
            },
        };
        for _ in 0..MAX_DEPTH {
            if at.dir == root || at.master == Some(root) {
                return Ok(true);
            }
            if at.dir == Fid::ROOT {
                return Ok(false);
            }
            let Some((_, up)) = self.place(at.dir).await? else {
                // A directory on the way up is gone (removed meanwhile):
                // nothing is reached through it.
                return Ok(false);
            };
            at = match at.master {
                // A shard's parent is its master's: the master first.
                Some(m) if m != at.dir => Place {
                    dir: m,
                    master: None,
                },
                _ => up,
            };
        }
        Err(ServerError::store("directory tree too deep or looped"))
    }

    /// An inode's type and where it hangs; `None` if no MDT has it.
    async fn place(self: &Arc<Self>, fid: Fid) -> Result<Option<(FileKind, Place)>, ServerError> {
        let (kind, parent, layout) = match read_inode(&*self.names.store, fid) {
            Ok(r) => (r.attr.kind, r.parent, r.layout),
            Err(e) if e.errno() == Errno::ENOENT => {
                let Ok(mdt) = self.owner_of(fid).await else {
                    return Ok(None);
                };
                if mdt == self.index {
                    return Ok(None);
                }
                match self.mdt_call(mdt, PeerRequest::ReadInode { fid }).await {
                    Ok(Reply::Inode {
                        attr,
                        layout,
                        parent,
                        ..
                    }) => (attr.kind, parent, layout),
                    Ok(other) => {
                        return Err(ServerError::peer(
                            Errno::EPROTO,
                            format!("ReadInode answered {other:?}"),
                        ))
                    }
                    Err(e) if e.errno() == Errno::ENOENT => return Ok(None),
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        let master = layout
            .as_ref()
            .and_then(|l| l.dir_shards())
            .and_then(|s| s.first().copied())
            .filter(|m| *m != fid);
        Ok(Some((
            kind,
            Place {
                dir: parent,
                master,
            },
        )))
    }
}

/// Whether a request that names no inode keeps to what a confined client
/// may see: its own session, statfs, its quota. Fail-closed: a request
/// not listed, which names no inode, is refused to it.
fn subtree_safe(req: &MdtRequest) -> bool {
    use MdtRequest as R;
    matches!(
        req,
        R::StatFs
            | R::RenewOrphans { .. }
            | R::Sync
            | R::Disconnect
            | R::CommitState
            | R::Subscribe
            | R::JobStats
            | R::OpStats
            | R::ReclaimLocks { .. }
            | R::GetQuota { .. }
            | R::GetRoot
            | R::GrantFids { .. }
            | R::QuotaRoom { .. }
            | R::DomRoom { .. }
    )
}
