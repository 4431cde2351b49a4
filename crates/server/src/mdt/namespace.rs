//! Names: lookup, create, mkdir, unlink, rmdir, rename, link, symlink,
//! readdir and directory default striping.

use super::attrs::new_attr;
use super::change::Change;
use super::perm::{self, Cred};
use super::records::{
    dentry_prefix, dentry_resume_key, parse_dentry_key, DentryRec, InodeRec, INODE_REC_VERSION,
};
use super::remote::shown_attr;
use super::request::Rq;
use super::tx::{read_dentry, read_inode, store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::layout::LayoutSpec;
use loom_proto::msg::{self, rename_flags, DirDefault, DirEntry, FileKind, Reply, Role, Time};
use loom_proto::Name;
use loom_proto::{Compress, Errno, Fid, Layout, ObjRef, StripeSpec};
use loom_store::kv::Space;
use std::sync::Arc;

/// Longest name (Linux NAME_MAX).
const NAME_MAX: usize = 255;
/// Most entries one readdir reply carries.
const READDIR_MAX: u32 = 1024;
/// Most hard links to one inode.
const LINK_MAX: u32 = 65000;

/// What a new inode is made as.
struct NewInode {
    kind: FileKind,
    perm: u32,
    /// An explicit layout request (files only); else the parent's default.
    stripe: Option<StripeSpec>,
    /// What a client's `MakeAt` fixed itself; `None`: the MDT chooses.
    at: Option<MadeAt>,
}

/// What a `MakeAt` fixes of the inode it makes: the FID granted to the
/// client, owner, group, times, and a file's first bytes.
pub(super) struct MadeAt {
    pub fid: Fid,
    pub uid: u32,
    pub gid: u32,
    pub atime: Time,
    pub mtime: Time,
    pub ctime: Time,
    /// When the client made it: the parent's new mtime and ctime.
    pub made: Time,
    pub data: Vec<u8>,
}

/// The owner, group and mode a `MakeAt` asks for, as POSIX lets the
/// caller set them: its own uid (root: any), the group a create would
/// give or one it is in (root: any), set-group-ID dropped from a file
/// in a group the caller is not in.
fn made_owner(
    ctx: &Rq<'_>,
    o: &NewOwner,
    kind: FileKind,
    m: &MadeAt,
) -> Result<(u32, u32, u32), ServerError> {
    let c = Cred::of(ctx);
    if m.uid != o.uid && !c.is_root() {
        return Err(ServerError::refused(
            Errno::EPERM,
            format!("only root makes an inode owned by uid {}", m.uid),
        ));
    }
    if m.gid != o.gid && !c.is_root() && !c.in_group(m.gid) {
        return Err(ServerError::refused(
            Errno::EPERM,
            format!("the caller is not in group {}", m.gid),
        ));
    }
    let perm = if m.gid == o.gid {
        o.perm
    } else {
        perm::new_perm(&c, kind, o.perm, m.gid)
    };
    Ok((m.uid, m.gid, perm))
}

pub(super) fn check_name(name: &Name) -> Result<(), ServerError> {
    let b = name.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') || b.contains(&0) {
        return Err(ServerError::refused(
            Errno::EINVAL,
            format!("invalid name {name:?}"),
        ));
    }
    if name.len() > NAME_MAX {
        return Err(ServerError::refused(
            Errno::ENAMETOOLONG,
            format!("name of {} bytes", name.len()),
        ));
    }
    Ok(())
}

pub(super) fn exists(name: &Name) -> ServerError {
    ServerError::refused(Errno::EEXIST, format!("{name} exists"))
}

/// POSIX's rule for a rename onto an existing `new_name`: a directory
/// replaces only a directory, and a non-directory only a non-directory.
pub(super) fn may_replace(
    src_dir: bool,
    dst_dir: bool,
    new_name: &Name,
) -> Result<(), ServerError> {
    match (src_dir, dst_dir) {
        (true, false) => Err(ServerError::refused(
            Errno::ENOTDIR,
            format!("{new_name} is not a directory"),
        )),
        (false, true) => Err(ServerError::refused(
            Errno::EISDIR,
            format!("{new_name} is a directory"),
        )),
        _ => Ok(()),
    }
}

/// Whether inode `a` may take one more hard link: not a directory, and
/// below [`LINK_MAX`].
pub(super) fn may_add_link(a: &msg::Attr) -> Result<(), ServerError> {
    if a.kind == FileKind::Dir {
        return Err(ServerError::refused(
            Errno::EPERM,
            "hard links to directories are not allowed",
        ));
    }
    if a.nlink >= LINK_MAX {
        return Err(ServerError::refused(
            Errno::EMLINK,
            format!("{} has {} links", a.fid, a.nlink),
        ));
    }
    Ok(())
}

pub(super) fn not_found(name: &Name) -> ServerError {
    ServerError::refused(Errno::ENOENT, format!("no entry {name}"))
}

/// Update `fid`'s ctime if its inode is on this MDT (a remote directory's
/// is not).
fn touch(t: &mut Tx<'_>, fid: Fid, now: Time) -> Result<(), ServerError> {
    match t.inode(fid) {
        Ok(r) => {
            r.attr.ctime = now;
            Ok(())
        }
        Err(e) if e.errno() == Errno::ENOENT => Ok(()),
        Err(e) => Err(e),
    }
}

/// A file (not a directory) renamed into `dir`: its inode records the
/// directory, where a fileset finds it (`fileset`). An inode on another
/// MDT than its name keeps the directory it had.
fn moved_into(t: &mut Tx<'_>, fid: Fid, dir: Fid) -> Result<(), ServerError> {
    match t.inode(fid) {
        Ok(r) => {
            r.parent = dir;
            Ok(())
        }
        Err(e) if e.errno() == Errno::ENOENT => Ok(()),
        Err(e) => Err(e),
    }
}

/// What dropping a link did.
pub(super) enum Dropped {
    /// Other links remain (or nothing was dropped).
    Linked,
    /// The inode is gone; these objects are to be destroyed.
    Freed(Option<(Fid, Vec<ObjRef>)>),
    /// The inode is kept as an orphan while a client may have it open:
    /// the unlinking client is told (it holds it, or lets go).
    Orphaned(Fid),
}

/// Who owns a new inode and what it allows ([`MdtService::owner`]).
pub(super) struct NewOwner {
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Mode bits.
    pub perm: u32,
    /// Access ACL, inherited.
    pub acl: Option<loom_proto::acl::Acl>,
    /// Default ACL (directories), inherited.
    pub default_acl: Option<loom_proto::acl::Acl>,
}

impl MdtService {
    pub(super) async fn lookup(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        parent: Fid,
        name: &Name,
    ) -> Handled {
        if name.len() > NAME_MAX {
            return Err(ServerError::refused(
                Errno::ENAMETOOLONG,
                format!("name of {} bytes; at most {NAME_MAX}", name.len()),
            ));
        }
        // A path walk must tell "not a directory" from "no such entry",
        // and needs search permission on every directory it passes.
        let p = read_inode(&*self.names.store, parent)?;
        if p.attr.kind != FileKind::Dir {
            return Err(ServerError::refused(
                Errno::ENOTDIR,
                format!("{parent} is not a directory"),
            ));
        }
        perm::may_search(&Cred::of(ctx), &p)?;
        belongs_here(&p, parent, name)?;
        let Some(d) = read_dentry(&*self.names.store, parent, name)? else {
            return Err(not_found(name));
        };
        match read_inode(&*self.names.store, d.fid) {
            Ok(r) => Ok(Reply::Entry {
                attr: shown_attr(&r),
                layout: r.layout,
            }),
            // A remote directory: its inode is on another MDT.
            Err(e) if e.errno() == Errno::ENOENT => self.remote_entry(d.fid).await,
            Err(e) => Err(e),
        }
    }

    /// Owner, group, mode and ACLs of a new inode: the caller's, but the
    /// parent's group when the parent is set-group-ID (and new directories
    /// keep the bit); a new file in a group the caller is not in loses
    /// set-group-ID. The mode is cut by the parent's default ACL, which
    /// the inode inherits, or else by the caller's umask
    /// ([`perm::new_acls`]).
    pub(super) fn owner(ctx: &Rq<'_>, parent: &InodeRec, kind: FileKind, perm: u32) -> NewOwner {
        let mut perm = perm;
        let (acl, default_acl) =
            perm::new_acls(parent.default_acl.as_ref(), kind, &mut perm, ctx.umask);
        let (gid, perm) = if parent.attr.perm & 0o2000 != 0 {
            let perm = if kind == FileKind::Dir {
                perm | 0o2000
            } else {
                perm
            };
            (parent.attr.gid, perm)
        } else {
            (ctx.gid, perm)
        };
        let perm = perm::new_perm(&Cred::of(ctx), kind, perm, gid);
        NewOwner {
            uid: ctx.uid,
            gid,
            perm,
            acl,
            default_acl,
        }
    }

    /// Shared tail of every operation that makes a new name.
    async fn add_inode(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        parent: Fid,
        name: &Name,
        new: NewInode,
        fill: impl FnOnce(&mut InodeRec),
    ) -> Handled {
        let NewInode {
            kind,
            perm,
            stripe,
            at,
        } = new;
        check_name(name)?;
        // Check what the caller asked for before it is merged with the
        // directory's default, which would hide a bad field.
        if let Some(s) = &stripe {
            s.validate()
                .map_err(|m| ServerError::refused(Errno::EINVAL, m))?;
        }
        // A replayed create makes the inode its first execution made: same
        // FID, objects, owner, mode and times.
        let replayed = ctx.replayed_entry();
        // Objects are chosen before the lock: that may wait for an OST.
        let layout = if let Some((_, layout)) = &replayed {
            layout.clone()
        } else if kind == FileKind::File {
            self.check_pools(&stripe.iter().collect::<Vec<_>>()).await?;
            if read_dentry(&*self.names.store, parent, name)?.is_some() {
                // Spare the objects of a create that is bound to fail.
                return Err(exists(name));
            }
            // An explicit striping for the file, or the directory's
            // default: plain striping (unset fields inherited) or
            // components.
            // One look at the directory's defaults, for both.
            let defaults = self.inherited(parent)?;
            let inherited = defaults.layout;
            if let Some(m) = &at {
                // Refused before objects are taken for it.
                let dom = inherited.as_ref().and_then(|l| l.components.first());
                let keeps = dom.filter(|c| c.on_mdt).map_or(0, |c| c.end);
                if m.data.len() as u64 > keeps {
                    return Err(ServerError::refused(
                        Errno::EINVAL,
                        format!(
                            "{} bytes do not fit the Data-on-MDT component ({keeps} bytes) of the layout {} gives",
                            m.data.len(),
                            parent
                        ),
                    ));
                }
            }
            let inherited_compress = defaults.compress.and_then(Compress::if_on);
            match (stripe, inherited.as_ref().map(|l| (l.as_plain(), l))) {
                (Some(s), Some((Some(p), _))) => Some(self.make_layout(&s.inherit(p)).await?),
                (Some(s), _) => Some(self.make_layout(&s).await?),
                (None, Some((Some(p), _))) => Some(self.make_layout(p).await?),
                (None, Some((None, l))) => Some(self.make_component_layout(l).await?),
                (None, None) => Some(self.make_layout(&StripeSpec::default()).await?),
            }
            .map(|l| Layout {
                compress: inherited_compress,
                ..l
            })
        } else {
            None
        };
        self.ensure_fid_room().await?;
        let mut c = self.begin().await;
        let p = c.new_name(&Cred::of(ctx), parent, name)?;
        let t = &mut c.t;
        let now = Time::now();
        let (fid, attr, acls) = match &replayed {
            Some((a, _)) => {
                if read_inode(&*self.names.store, a.fid).is_ok() {
                    return Err(ServerError::refused(
                        Errno::EEXIST,
                        format!("replayed FID {} is in use", a.fid),
                    ));
                }
                self.allocated_before(t, a.fid)?;
                let mut attr = new_attr(a.fid, kind, a.perm, a.uid, a.gid, a.ctime);
                (attr.atime, attr.mtime) = (a.atime, a.mtime);
                // The mode is the one first made, already cut by the
                // default ACL: inheriting again gives the same ACLs.
                let mut perm = a.perm;
                let acls = perm::new_acls(p.default_acl.as_ref(), kind, &mut perm, None);
                (a.fid, attr, acls)
            }
            None => {
                let o = Self::owner(ctx, &p, kind, perm);
                match &at {
                    None => {
                        let fid = self.alloc_fid(t)?;
                        let attr = new_attr(fid, kind, o.perm, o.uid, o.gid, now);
                        (fid, attr, (o.acl, o.default_acl))
                    }
                    Some(m) => {
                        self.check_granted(ctx.ctx.client_id, m.fid)?;
                        if read_inode(&*self.names.store, m.fid).is_ok() {
                            return Err(ServerError::refused(
                                Errno::EEXIST,
                                format!("{} is in use", m.fid),
                            ));
                        }
                        let (uid, gid, perm) = made_owner(ctx, &o, kind, m)?;
                        let mut attr = new_attr(m.fid, kind, perm, uid, gid, m.ctime);
                        (attr.atime, attr.mtime) = (m.atime, m.mtime);
                        (m.fid, attr, (o.acl, o.default_acl))
                    }
                }
            }
        };
        let mut rec = InodeRec {
            version: INODE_REC_VERSION,
            attr,
            parent,
            layout,
            symlink: None,
            // New directories inherit the parent's explicit default.
            default_stripe: if kind == FileKind::Dir {
                p.default_stripe.clone()
            } else {
                None
            },
            default_layout: if kind == FileKind::Dir {
                p.default_layout.clone()
            } else {
                None
            },
            default_dir: if kind == FileKind::Dir {
                p.default_dir.clone()
            } else {
                None
            },
            default_compress: if kind == FileKind::Dir {
                p.default_compress
            } else {
                None
            },
            // A directory that passes its project id on passes the
            // passing on too (as ext4's and Lustre's PROJINHERIT).
            proj_inherit: kind == FileKind::Dir && p.proj_inherit,
            acl: acls.0,
            default_acl: acls.1,
        };
        if p.proj_inherit {
            rec.attr.projid = p.attr.projid;
        }
        fill(&mut rec);
        if let Some(m) = at.as_ref().filter(|m| !m.data.is_empty()) {
            if kind != FileKind::File {
                return Err(ServerError::refused(
                    Errno::EINVAL,
                    "only a regular file is made with bytes",
                ));
            }
            rec.attr.size = self.dom_fill(t, fid, rec.layout.as_ref(), &m.data)?;
        }
        t.put_dentry(parent, name, &DentryRec { fid, kind })?;
        // A client's `MakeAt` gives the time the directory changed at, as
        // it showed it (also when replayed); else the MDT's clock.
        let changed = at.as_ref().map_or(now, |m| m.made);
        let pr = t.inode(parent)?;
        pr.attr.mtime = changed;
        pr.attr.ctime = changed;
        if kind == FileKind::Dir {
            pr.attr.nlink += 1;
        }
        let reply = Reply::Entry {
            attr: shown_attr(&rec),
            layout: rec.layout.clone(),
        };
        t.create_inode(rec);
        c.commit(ctx, reply).await
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn create(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        parent: Fid,
        name: &Name,
        kind: FileKind,
        perm: u32,
        rdev: u32,
        stripe: Option<StripeSpec>,
    ) -> Handled {
        if matches!(kind, FileKind::Dir | FileKind::Symlink) {
            return Err(ServerError::refused(
                Errno::EINVAL,
                "create makes files, FIFOs, devices and sockets",
            ));
        }
        let new = NewInode {
            kind,
            perm,
            stripe,
            at: None,
        };
        self.add_inode(ctx, parent, name, new, |r| r.attr.rdev = rdev)
            .await
    }

    /// A client's plain mkdir: where the parent's default placement (if
    /// any) says, else here. A replay makes it here again (a directory made
    /// elsewhere was committed before its answer: it is never replayed).
    pub(super) async fn mkdir(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        parent: Fid,
        name: &Name,
        perm: u32,
    ) -> Handled {
        if ctx.replayed_entry().is_none() {
            if let Some(d) = self.default_dir(parent)? {
                let mdts = self.place_new_dir(&d).await?;
                if mdts != [self.index] {
                    check_name(name)?;
                    return self.mkdir_placed(ctx, parent, name, perm, mdts).await;
                }
            }
        }
        self.mkdir_here(ctx, parent, name, perm).await
    }

    /// A plain directory on this MDT.
    pub(super) async fn mkdir_here(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        parent: Fid,
        name: &Name,
        perm: u32,
    ) -> Handled {
        let new = NewInode {
            kind: FileKind::Dir,
            perm,
            stripe: None,
            at: None,
        };
        self.add_inode(ctx, parent, name, new, |_| {}).await
    }

    pub(super) async fn symlink(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        parent: Fid,
        name: &Name,
        target: &Name,
    ) -> Handled {
        if target.is_empty() || target.len() > 4095 {
            return Err(ServerError::refused(
                Errno::ENAMETOOLONG,
                "symlink target must be 1 to 4095 bytes",
            ));
        }
        let target = target.clone();
        let new = NewInode {
            kind: FileKind::Symlink,
            perm: 0o777,
            stripe: None,
            at: None,
        };
        self.add_inode(ctx, parent, name, new, |r| {
            r.attr.size = target.len() as u64;
            r.symlink = Some(target);
        })
        .await
    }

    /// `MakeAt`: a whole inode under a FID granted to the caller, with its
    /// final owner, mode and times, and a file's first bytes, in one
    /// change. A directory is made here, whatever the parent's default
    /// placement (the client named it with this MDT's FID).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn make_at(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        parent: Fid,
        name: &Name,
        kind: FileKind,
        perm: u32,
        rdev: u32,
        target: Option<Name>,
        at: MadeAt,
    ) -> Handled {
        let target = match (kind, target) {
            (FileKind::Symlink, Some(t)) if !t.is_empty() && t.len() <= 4095 => Some(t),
            (FileKind::Symlink, _) => {
                return Err(ServerError::refused(
                    Errno::ENAMETOOLONG,
                    "symlink target must be 1 to 4095 bytes",
                ))
            }
            (_, Some(_)) => {
                return Err(ServerError::refused(
                    Errno::EINVAL,
                    "only a symlink is made with a target",
                ))
            }
            (_, None) => None,
        };
        let perm = if kind == FileKind::Symlink {
            0o777
        } else {
            perm
        };
        let new = NewInode {
            kind,
            perm,
            stripe: None,
            at: Some(at),
        };
        self.add_inode(ctx, parent, name, new, |r| {
            r.attr.rdev = rdev;
            if let Some(t) = target {
                r.attr.size = t.len() as u64;
                r.symlink = Some(t);
            }
        })
        .await
    }

    /// Drop one link of `fid` (a non-directory), deleting it at zero,
    /// unless `keep_for` names a client that may have it open: then a
    /// regular file becomes an orphan of that client (see [`super::orphans`]).
    pub(super) fn drop_link(
        &self,
        t: &mut Tx<'_>,
        fid: Fid,
        now: Time,
        keep_for: Option<u64>,
    ) -> Result<Dropped, ServerError> {
        let r = t.inode(fid)?;
        r.attr.nlink = r.attr.nlink.saturating_sub(1);
        r.attr.ctime = now;
        if r.attr.nlink > 0 {
            return Ok(Dropped::Linked);
        }
        // Kept while the unlinking client, or another that told it has
        // the file open (see `holds`), may have it open; after a restart,
        // until those clients told again, whatever it was (but a replay,
        // before recovery ends, does what it did the first time).
        let holds = &self.names.leases.holds;
        let grace = self.holds_grace() && self.intents_resolved();
        if r.attr.kind == FileKind::File
            && (keep_for.is_some() || holds.held_by_other(fid, keep_for) || grace)
        {
            self.make_orphan(t, fid, keep_for.unwrap_or(0))?;
            if let Some(client) = keep_for {
                holds.hold(fid, client);
            }
            return Ok(Dropped::Orphaned(fid));
        }
        let layout = r.layout.clone();
        t.delete_inode(fid)?;
        match layout {
            Some(l) => {
                self.record_destroy(t, fid, &l)?;
                Ok(Dropped::Freed(Some((fid, l.objects()))))
            }
            None => Ok(Dropped::Freed(None)),
        }
    }

    /// Remove the empty directory `fid` whose entry is in `parent`.
    fn drop_dir(&self, t: &mut Tx<'_>, parent: Fid, fid: Fid) -> Result<(), ServerError> {
        if !t.dir_is_empty(fid)? {
            return Err(ServerError::refused(
                Errno::ENOTEMPTY,
                format!("directory {fid} is not empty"),
            ));
        }
        t.delete_inode(fid)?;
        let p = t.inode(parent)?;
        p.attr.nlink = p.attr.nlink.saturating_sub(1);
        Ok(())
    }

    async fn finish(self: &Arc<Self>, ctx: &Rq<'_>, c: Change<'_>, dropped: Dropped) -> Handled {
        let reply = match dropped {
            Dropped::Orphaned(fid) => Reply::Orphaned { fid },
            _ => Reply::Ok,
        };
        let (t, g) = c.into_parts();
        let ticket = self.apply(ctx, t, &reply)?;
        if let Dropped::Orphaned(fid) = dropped {
            self.orphan_made(fid);
        }
        drop(g);
        self.settle(ctx, ticket).await?;
        if let Dropped::Freed(Some((fid, objs))) = dropped {
            self.queue_destroy(
                fid.to_key().to_vec(),
                objs,
                ctx.cur.map_or(0, |c| c.transno()),
                ticket,
            );
        }
        Ok(reply)
    }

    pub(super) async fn unlink(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        parent: Fid,
        name: &Name,
        keep_for: Option<u64>,
    ) -> Handled {
        self.wait_holds_grace(ctx).await;
        let mut c = self.begin().await;
        let dir = c.name(parent, name)?;
        let t = &mut c.t;
        let d = t.dentry(parent, name)?.ok_or_else(|| not_found(name))?;
        if d.kind == FileKind::Dir {
            return Err(ServerError::refused(
                Errno::EISDIR,
                format!("{name} is a directory"),
            ));
        }
        let Some(victim) = self.local_uid(t, d.fid)? else {
            // Its inode is on another MDT (it was renamed or linked here).
            drop(c);
            return self.unlink_distributed(ctx, parent, name, keep_for).await;
        };
        let victim = Some(victim);
        perm::may_delete(&Cred::of(ctx), &dir, name, victim)?;
        let now = Time::now();
        t.delete_dentry(parent, name)?;
        let dropped = self.drop_link(t, d.fid, now, keep_for)?;
        let p = t.inode(parent)?;
        p.attr.mtime = now;
        p.attr.ctime = now;
        self.finish(ctx, c, dropped).await
    }

    pub(super) async fn rmdir(self: &Arc<Self>, ctx: &Rq<'_>, parent: Fid, name: &Name) -> Handled {
        if name == "." {
            return Err(ServerError::refused(Errno::EINVAL, "rmdir of ."));
        }
        if name == ".." {
            return Err(ServerError::refused(Errno::ENOTEMPTY, "rmdir of .."));
        }
        let cred = Cred::of(ctx);
        let mut c = self.begin().await;
        let dir = c.name(parent, name)?;
        let t = &mut c.t;
        let d = t.dentry(parent, name)?.ok_or_else(|| not_found(name))?;
        if d.kind != FileKind::Dir {
            return Err(ServerError::refused(
                Errno::ENOTDIR,
                format!("{name} is not a directory"),
            ));
        }
        let here = read_inode(&*self.names.store, d.fid).ok();
        if here
            .as_ref()
            .is_none_or(|r| r.layout.as_ref().is_some_and(|l| l.dir_shards().is_some()))
        {
            // On other MDTs, or striped: a cross-MDT removal. Its owner
            // may have to be asked of another MDT, not under the lock.
            drop(c);
            let victim = self.uid_anywhere(d.fid).await?;
            perm::may_delete(&cred, &dir, name, Some(victim))?;
            return self.rmdir_distributed(ctx, parent, name).await;
        }
        perm::may_delete(&cred, &dir, name, here.map(|r| r.attr.uid))?;
        let now = Time::now();
        self.drop_dir(t, parent, d.fid)?;
        t.delete_dentry(parent, name)?;
        let p = t.inode(parent)?;
        p.attr.mtime = now;
        p.attr.ctime = now;
        self.finish(ctx, c, Dropped::Freed(None)).await
    }

    /// Whether the entry's inode is on this MDT, and not a striped
    /// directory: a rename within this MDT can change it.
    fn movable_here(&self, d: &DentryRec) -> bool {
        read_inode(&*self.names.store, d.fid)
            .is_ok_and(|r| r.layout.as_ref().and_then(|l| l.dir_shards()).is_none())
    }

    /// Owner of `fid` if its inode is on this MDT (a remote directory's
    /// is not: `None`).
    fn local_uid(&self, t: &mut Tx<'_>, fid: Fid) -> Result<Option<u32>, ServerError> {
        match t.inode(fid) {
            Ok(r) => Ok(Some(r.attr.uid)),
            Err(e) if e.errno() == Errno::ENOENT => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Owner of `fid`, asked of its MDT if it is not this one. Never
    /// called under the namespace lock (it may make an RPC).
    async fn uid_anywhere(self: &Arc<Self>, fid: Fid) -> Result<u32, ServerError> {
        match read_inode(&*self.names.store, fid) {
            Ok(r) => Ok(r.attr.uid),
            Err(e) if e.errno() == Errno::ENOENT => match self.remote_entry(fid).await? {
                Reply::Entry { attr, .. } => Ok(attr.uid),
                other => Err(ServerError::peer(
                    Errno::EPROTO,
                    format!("remote entry of {fid}: {other:?}"),
                )),
            },
            Err(e) => Err(e),
        }
    }

    /// POSIX's rules for a rename: the source and destination directories
    /// written and searched; the source (and a replaced or exchanged
    /// destination) removable under the sticky rule; and a directory that
    /// changes parent must itself be writable (its ".." changes).
    fn may_rename(
        &self,
        t: &mut Tx<'_>,
        c: &Cred<'_>,
        (from_dir, name, src): (&InodeRec, &Name, &DentryRec),
        (to_dir, new_name, dst): (&InodeRec, &Name, Option<&DentryRec>),
        flags: u32,
    ) -> Result<(), ServerError> {
        if c.is_root() {
            return Ok(());
        }
        let moves = from_dir.attr.fid != to_dir.attr.fid;
        perm::may_delete(c, from_dir, name, self.local_uid(t, src.fid)?)?;
        perm::may_change_dir(c, to_dir)?;
        if let Some(d) = dst {
            perm::may_delete(c, to_dir, new_name, self.local_uid(t, d.fid)?)?;
        }
        let mut moved = vec![src];
        if flags & rename_flags::EXCHANGE != 0 {
            moved.extend(dst);
        }
        for d in moved {
            if moves && d.kind == FileKind::Dir {
                if let Ok(r) = t.inode(d.fid) {
                    perm::may(c, &*r, msg::access::WRITE)?;
                }
            }
        }
        Ok(())
    }

    /// Whether `dir` is `ancestor` or lies below it.
    fn is_within(&self, t: &mut Tx<'_>, mut dir: Fid, ancestor: Fid) -> Result<bool, ServerError> {
        for _ in 0..4096 {
            if dir == ancestor {
                return Ok(true);
            }
            if dir == Fid::ROOT {
                return Ok(false);
            }
            dir = match t.inode(dir) {
                Ok(r) => r.parent,
                // Renames that move directories on a file system of
                // several MDTs go through `rename_distributed`: here every
                // inode is on this MDT.
                Err(e) if e.errno() == Errno::ENOENT => {
                    return Err(store_err(format!("directory {dir} has no inode here")))
                }
                Err(e) => return Err(e),
            };
        }
        Err(store_err("directory tree too deep or looped"))
    }

    pub(super) async fn rename(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        (parent, name): (Fid, &Name),
        (new_parent, new_name): (Fid, &Name),
        flags: u32,
        keep_for: Option<u64>,
    ) -> Handled {
        self.wait_holds_grace(ctx).await;
        let known = rename_flags::NOREPLACE | rename_flags::EXCHANGE;
        if flags & !known != 0 || flags == known {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("unsupported rename flags {flags:#x}"),
            ));
        }
        check_name(new_name)?;
        let one_mdt = self.peers.config().await?.indices(Role::Mdt).len() == 1;
        let mut c = self.begin().await;
        let from_rec = c.name(parent, name)?;
        let src = c.t.dentry(parent, name)?.ok_or_else(|| not_found(name))?;
        if parent == new_parent && name == new_name {
            return Ok(Reply::Ok);
        }
        let exchange = flags & rename_flags::EXCHANGE != 0;
        let moved = parent != new_parent;
        let to_here = match c.t.dir(new_parent) {
            Err(e) if e.errno() == Errno::ENOENT => false,
            r => r.map(|_| true)?,
        };
        let dst = if to_here {
            c.t.dentry(new_parent, new_name)?
        } else {
            None
        };
        // Across MDTs: the target directory, or an inode that must
        // change, is elsewhere; or a directory moves to another parent on
        // a file system of several MDTs (the check that it does not move
        // into itself may have to walk through other MDTs, under the tree
        // lock).
        let moves_dir = |d: &DentryRec| moved && d.kind == FileKind::Dir;
        let across = !to_here
            || (!self.movable_here(&src) && (moved || src.kind != FileKind::Dir))
            || dst
                .as_ref()
                .is_some_and(|d| !self.movable_here(d) && (!exchange || moved))
            || (!one_mdt && (moves_dir(&src) || (exchange && dst.as_ref().is_some_and(moves_dir))));
        if across {
            drop(c);
            return self
                .rename_distributed(ctx, (parent, name), (new_parent, new_name), flags, keep_for)
                .await;
        }
        let to_rec = c.target(new_parent, new_name)?;
        self.not_pending(new_parent, new_name)?;
        let t = &mut c.t;
        self.may_rename(
            t,
            &Cred::of(ctx),
            (&from_rec, name, &src),
            (&to_rec, new_name, dst.as_ref()),
            flags,
        )?;
        // Into a directory of another project: EXDEV. Only where the
        // directory passes an id on and the inode is here (a remote
        // directory's inode is on its own MDT; it stays in its project).
        let projid_here = |t: &mut Tx<'_>, fid: Fid| -> Result<Option<u32>, ServerError> {
            match t.inode(fid) {
                Ok(r) => Ok(Some(r.attr.projid)),
                Err(e) if e.errno() == Errno::ENOENT => Ok(None),
                Err(e) => Err(e),
            }
        };
        if to_rec.proj_inherit {
            if let Some(p) = projid_here(t, src.fid)? {
                same_project(&to_rec, p, name)?;
            }
        }
        if let (true, true, Some(d)) = (exchange, from_rec.proj_inherit, &dst) {
            if let Some(p) = projid_here(t, d.fid)? {
                same_project(&from_rec, p, new_name)?;
            }
        }
        let now = Time::now();
        let src_dir = src.kind == FileKind::Dir;
        if src_dir && parent != new_parent && self.is_within(t, new_parent, src.fid)? {
            return Err(ServerError::refused(
                Errno::EINVAL,
                "cannot move a directory into itself",
            ));
        }
        let mut dropped = Dropped::Freed(None);
        if flags & rename_flags::EXCHANGE != 0 {
            let dst = dst.ok_or_else(|| not_found(new_name))?;
            let dst_dir = dst.kind == FileKind::Dir;
            if dst_dir && parent != new_parent && self.is_within(t, parent, dst.fid)? {
                return Err(ServerError::refused(
                    Errno::EINVAL,
                    "cannot move a directory into itself",
                ));
            }
            t.put_dentry(parent, name, &dst)?;
            t.put_dentry(new_parent, new_name, &src)?;
            if parent != new_parent {
                if src_dir {
                    t.inode(src.fid)?.parent = new_parent;
                    t.inode(parent)?.attr.nlink -= 1;
                    t.inode(new_parent)?.attr.nlink += 1;
                }
                if dst_dir {
                    t.inode(dst.fid)?.parent = parent;
                    t.inode(new_parent)?.attr.nlink -= 1;
                    t.inode(parent)?.attr.nlink += 1;
                }
                if !src_dir {
                    moved_into(t, src.fid, new_parent)?;
                }
                if !dst_dir {
                    moved_into(t, dst.fid, parent)?;
                }
            }
            touch(t, dst.fid, now)?;
        } else {
            if let Some(dst) = dst {
                if flags & rename_flags::NOREPLACE != 0 {
                    return Err(exists(new_name));
                }
                if dst.fid == src.fid {
                    // Two names of one inode: POSIX says do nothing.
                    return Ok(Reply::Ok);
                }
                may_replace(src_dir, dst.kind == FileKind::Dir, new_name)?;
                match src_dir {
                    true => self.drop_dir(t, new_parent, dst.fid)?,
                    false => dropped = self.drop_link(t, dst.fid, now, keep_for)?,
                }
            }
            t.delete_dentry(parent, name)?;
            t.put_dentry(new_parent, new_name, &src)?;
            if src_dir && parent != new_parent {
                t.inode(src.fid)?.parent = new_parent;
                t.inode(parent)?.attr.nlink -= 1;
                t.inode(new_parent)?.attr.nlink += 1;
            } else if parent != new_parent {
                moved_into(t, src.fid, new_parent)?;
            }
        }
        touch(t, src.fid, now)?;
        for p in [parent, new_parent] {
            let r = t.inode(p)?;
            r.attr.mtime = now;
            r.attr.ctime = now;
        }
        self.finish(ctx, c, dropped).await
    }

    pub(super) async fn link(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        fid: Fid,
        parent: Fid,
        name: &Name,
    ) -> Handled {
        check_name(name)?;
        if self.owner_of(fid).await? != self.index {
            return self.link_distributed(ctx, fid, parent, name).await;
        }
        let cred = Cred::of(ctx);
        let mut c = self.begin().await;
        c.new_name(&cred, parent, name)?;
        self.not_pending(parent, name)?;
        let t = &mut c.t;
        let now = Time::now();
        let r = t.inode(fid)?;
        perm::may_link(&cred, &*r)?;
        may_add_link(&r.attr)?;
        let was_orphan = r.attr.nlink == 0;
        r.attr.nlink += 1;
        r.attr.ctime = now;
        let kind = r.attr.kind;
        let reply = Reply::Entry {
            attr: r.attr.clone(),
            layout: r.layout.clone(),
        };
        t.put_dentry(parent, name, &DentryRec { fid, kind })?;
        if was_orphan {
            // linkat(2) of an open, unlinked file gives it a name again.
            self.unorphan(t, fid);
        }
        let p = t.inode(parent)?;
        p.attr.mtime = now;
        p.attr.ctime = now;
        c.commit(ctx, reply).await
    }

    pub(super) async fn readdir(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        dir: Fid,
        cookie: u64,
        max: u32,
    ) -> Handled {
        let r = read_inode(&*self.names.store, dir)?;
        if r.attr.kind != FileKind::Dir {
            return Err(ServerError::refused(
                Errno::ENOTDIR,
                format!("{dir} is not a directory"),
            ));
        }
        perm::may(&Cred::of(ctx), &r, msg::access::READ)?;
        let limit = max.clamp(1, READDIR_MAX) as usize;
        let prefix = dentry_prefix(dir);
        let resume = (cookie != 0).then(|| dentry_resume_key(dir, cookie));
        let page = self
            .names
            .store
            .scan(Space::Dentries, &prefix, resume.as_deref(), limit)
            .map_err(store_err)?;
        let eof = page.len() < limit;
        let mut entries = Vec::with_capacity(page.len());
        for (k, v) in page {
            let Some((hash, name)) = parse_dentry_key(&k) else {
                continue;
            };
            let d: DentryRec = super::tx::decode_record(&v)?;
            let attr = match read_inode(&*self.names.store, d.fid) {
                Ok(r) => Some(shown_attr(&r)),
                // An inode on another MDT (a remote directory, a name
                // moved or linked here): asked of its MDT.
                Err(e) if e.errno() == Errno::ENOENT => match self.remote_entry(d.fid).await {
                    Ok(Reply::Entry { attr, .. }) => Some(attr),
                    Err(e) if e.errno() != Errno::ENOENT => return Err(e),
                    _ => None,
                },
                Err(_) => None,
            };
            // An entry removed since the scan is simply not listed.
            if let Some(attr) = attr {
                entries.push(DirEntry {
                    name,
                    attr,
                    cookie: hash,
                });
            }
        }
        Ok(Reply::Dir { entries, eof })
    }

    /// `setstripe` on a directory: the plain striping of its new files.
    pub(super) async fn set_default_stripe(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        dir: Fid,
        spec: Option<StripeSpec>,
    ) -> Handled {
        if let Some(s) = &spec {
            s.validate()
                .map_err(|m| ServerError::refused(Errno::EINVAL, m))?;
        }
        self.check_pools(&spec.iter().collect::<Vec<_>>()).await?;
        self.set_dir_defaults(ctx, dir, "striping", |r| {
            (r.default_stripe, r.default_layout) = (spec, None)
        })
        .await
    }

    /// `setdirstripe -D` on a directory: where its new subdirectories go
    /// (they copy it, and so on down).
    pub(super) async fn set_dir_default(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        dir: Fid,
        spec: Option<DirDefault>,
    ) -> Handled {
        if let Some(s) = &spec {
            let all = self.peers.config().await?.indices(Role::Mdt);
            s.validate(&all)
                .map_err(|m| ServerError::refused(Errno::EINVAL, m))?;
        }
        self.set_dir_defaults(ctx, dir, "placement", |r| r.default_dir = spec)
            .await
    }

    /// `setstripe -E ...` on a directory: its new files (and those of new
    /// subdirectories, which copy it) get this component layout.
    pub(super) async fn set_default_layout(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        dir: Fid,
        spec: Option<LayoutSpec>,
    ) -> Handled {
        if let Some(s) = &spec {
            s.validate()
                .map_err(|m| ServerError::refused(Errno::EINVAL, m))?;
            let stripes: Vec<&StripeSpec> = s.components.iter().map(|c| &c.stripe).collect();
            self.check_pools(&stripes).await?;
        }
        // One component on OSTs is plain striping: kept as such.
        let (stripe, layout) = match spec.as_ref().map(|s| (s.as_plain(), s)) {
            Some((Some(p), _)) => (Some(p.clone()), None),
            Some((None, s)) => (None, Some(s.clone())),
            None => (None, None),
        };
        self.set_dir_defaults(ctx, dir, "layout", |r| {
            (r.default_stripe, r.default_layout) = (stripe, layout)
        })
        .await
    }

    /// `setstripe --compress` on a directory: how its new files' data is
    /// compressed (new subdirectories copy it; on the root, the file
    /// system's default).
    pub(super) async fn set_default_compress(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        dir: Fid,
        compress: Option<Compress>,
    ) -> Handled {
        if let Some(c) = &compress {
            c.validate()
                .map_err(|m| ServerError::refused(Errno::EINVAL, m))?;
        }
        self.set_dir_defaults(ctx, dir, "compression", |r| r.default_compress = compress)
            .await
    }

    /// Change directory `dir`'s defaults with `set`, as its owner or root
    /// (`what` names them in the refusal); the ctime moves.
    async fn set_dir_defaults(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        dir: Fid,
        what: &str,
        set: impl FnOnce(&mut InodeRec),
    ) -> Handled {
        let mut c = self.begin().await;
        let r = c.t.dir(dir)?;
        if !Cred::of(ctx).owns(&r.attr) {
            return Err(ServerError::refused(
                Errno::EPERM,
                format!("only the owner of {dir} or root may set its default {what}"),
            ));
        }
        set(r);
        r.attr.ctime = Time::now();
        self.finish(ctx, c, Dropped::Freed(None)).await
    }
}

/// EXDEV when `name`, of project `projid`, would move into directory `to`
/// that passes on another project id (as ext4 and Lustre): its usage
/// would escape the project's count. `mv` then copies, and the copies
/// take the directory's project.
pub(super) fn same_project(to: &InodeRec, projid: u32, name: &Name) -> Result<(), ServerError> {
    if !to.proj_inherit || to.attr.projid == projid {
        return Ok(());
    }
    Err(ServerError::refused(
        Errno::EXDEV,
        format!(
            "{name} is in project {projid}; the directory gives its entries project {}",
            to.attr.projid
        ),
    ))
}

/// `ServerError::Restriped` if `name` belongs in another shard of
/// striped directory `dir` (record `r`): the request was routed by a
/// layout from before a restripe, perhaps one that finished while it
/// waited for the namespace lock (see `restripe`).
pub(super) fn belongs_here(r: &InodeRec, dir: Fid, name: &Name) -> Result<(), ServerError> {
    match &r.layout {
        Some(l) if l.shard_for(name.as_bytes()).is_some_and(|s| s != dir) => {
            Err(ServerError::Restriped {
                dir,
                layout: l.clone(),
            })
        }
        _ => Ok(()),
    }
}
