//! Renames, hard links and unlinks whose entries or inodes are on
//! different MDTs, made crash-safe by the intent log (see
//! [`super::intents`]).
//!
//! The MDT that receives the client's request coordinates: it holds the
//! source entry of a rename, the new name of a link, the entry of an
//! unlink. Inodes never move: a moved name (a file or a whole subtree)
//! is an entry on the new parent's MDT naming the inode where it is.
//!
//! A rename runs in this order, each part done once by its
//! [`IntentRef`] (see [`super::remote`]):
//!
//! 1. checks (entries, types, POSIX permissions), then the intent,
//!    durable;
//! 2. a rename that moves a directory to another parent takes MDT0's
//!    tree lock and checks that the new parent is not inside what moves
//!    (Lustre's "big filesystem lock": two such renames checked at once
//!    could each pass and together make a loop);
//! 3. a directory being replaced is sealed on its MDTs (empty, and takes
//!    no entries until destroyed);
//! 4. the new entry, if the target still names what the checks saw
//!    (EAGAIN otherwise: the whole rename runs again). This is the point
//!    of no return: before it, a failure undoes steps 2 and 3; after it,
//!    the rename is rolled forward, by the resolver if need be;
//! 5. the moved inode's parent (`..`) and ctime; 6. the replaced inode's
//!    link dropped (or its shards destroyed), or the exchanged inode's
//!    parent set; 7. the tree lock given back; 8. the source entry goes,
//!    in one batch with the intent's deletion and the reply.
//!
//! A link takes the inode's new link first, then the entry (undone if the
//! name was taken meanwhile); an unlink of an entry whose inode is
//! elsewhere drops the link, then the entry. Both roll forward.

use super::intents::IntentOp;
use super::namespace::{exists, not_found};
use super::perm::{self, Cred};
use super::records::DentryRec;
use super::remote::being_removed;
use super::request::Rq;
use super::tx::{read_dentry, read_inode, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use crate::fail;
use loom_proto::msg::{
    self, rename_flags, Attr, FileKind, IntentRef, PeerRequest, Reply, ReqCtx, Time,
};
use loom_proto::{Errno, Fid, Name};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a rename that moves a directory waits for the tree lock.
const TREE_LOCK_WAIT: Duration = Duration::from_secs(60);
/// Times a rename is tried again when its target changed under it.
const RENAME_TRIES: usize = 3;

/// One name of a rename: a directory (or shard) and an entry in it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Place {
    /// The MDT holding the directory.
    pub mdt: u32,
    /// The directory (or shard).
    pub dir: Fid,
    /// The entry.
    pub name: Name,
}

/// An inode a rename moves or replaces, and its MDT.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Named {
    /// The inode.
    pub fid: Fid,
    /// Its type.
    pub kind: FileKind,
    /// Its MDT.
    pub mdt: u32,
}

/// A rename across MDTs (an intent record's operation).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RenameIntent {
    /// The source entry (on the coordinator).
    pub from: Place,
    /// What it names.
    pub src: Named,
    /// The target entry.
    pub to: Place,
    /// What the target named, if anything: replaced, or exchanged.
    pub dst: Option<Named>,
    /// The objects of a directory being replaced (sealed, then destroyed).
    pub replaced: Vec<(u32, Fid)>,
    /// RENAME_EXCHANGE.
    pub exchange: bool,
    /// A client that may have the replaced file open.
    pub keep_for: Option<u64>,
    /// The client whose request this is.
    pub maker: u64,
    /// A directory changes parent: MDT0's tree lock is held.
    pub tree: bool,
    /// The request was answered with an error: undo, never finish.
    pub aborted: bool,
}

impl RenameIntent {
    fn moved(&self) -> bool {
        self.from.dir != self.to.dir
    }

    /// Link count changes of the target directory and the source one.
    fn nlinks(&self) -> (i32, i32) {
        let (mut to, mut from) = (0, 0);
        let dir = |n: &Named| n.kind == FileKind::Dir;
        if self.moved() && dir(&self.src) {
            to += 1;
            from -= 1;
        }
        if self.dst.as_ref().is_some_and(dir) {
            if !self.exchange {
                to -= 1;
            } else if self.moved() {
                to -= 1;
                from += 1;
            }
        }
        (to, from)
    }
}

/// How a cross-MDT operation failed.
enum Failed {
    /// Before its point of no return, and undone: the caller's answer.
    Undone(ServerError),
    /// After it, or while undoing: left to the resolver.
    Left(ServerError),
}

impl From<ServerError> for Failed {
    fn from(e: ServerError) -> Failed {
        Failed::Left(e)
    }
}

/// Whether `e` is a peer's (or this MDT's) answer rather than a failure
/// to reach it: a part refused is known not to have been done.
fn is_refusal(e: &ServerError) -> bool {
    matches!(e, ServerError::Refused { .. })
        || matches!(e, ServerError::Peer { errno, .. } if *errno != Errno::EIO)
}

/// A part on an inode that is gone (another name of it was unlinked
/// meanwhile) has nothing left to do: rolling forward must not stop there.
fn gone_is_done(r: Handled) -> Handled {
    match r {
        Err(e) if e.errno() == Errno::ENOENT => Ok(Reply::Ok),
        r => r,
    }
}

/// An inode read from whichever MDT holds it ([`MdtService::inode_anywhere`]).
pub(super) struct Found {
    /// The MDT that holds it.
    pub mdt: u32,
    /// Its attributes.
    pub attr: Attr,
    /// Its parent (a directory's "..").
    pub parent: Fid,
    /// Its access ACL.
    pub acl: Option<loom_proto::acl::Acl>,
}

impl Found {
    /// The inode as permission checks see it.
    pub fn inode(&self) -> perm::Inode<'_> {
        perm::Inode {
            attr: &self.attr,
            acl: self.acl.as_ref(),
        }
    }
}

impl MdtService {
    fn part(&self, id: u64, index: u32) -> IntentRef {
        IntentRef {
            coord: self.index,
            id,
            index,
        }
    }

    /// Inode `fid` wherever it is: its MDT, attributes, parent and access
    /// ACL.
    pub(super) async fn inode_anywhere(self: &Arc<Self>, fid: Fid) -> Result<Found, ServerError> {
        let mdt = self.owner_of(fid).await?;
        match self.mdt_call(mdt, PeerRequest::ReadInode { fid }).await? {
            Reply::Inode {
                attr, parent, acl, ..
            } => Ok(Found {
                mdt,
                attr,
                parent,
                acl,
            }),
            other => Err(ServerError::peer(
                Errno::EPROTO,
                format!("ReadInode answered {other:?}"),
            )),
        }
    }

    /// Whether `dir` is one of `objs` or lies below one, walking up
    /// through every MDT.
    async fn is_below(self: &Arc<Self>, mut dir: Fid, objs: &[Fid]) -> Result<bool, ServerError> {
        for _ in 0..4096 {
            if objs.contains(&dir) {
                return Ok(true);
            }
            if dir == Fid::ROOT {
                return Ok(false);
            }
            dir = match read_inode(&*self.names.store, dir) {
                Ok(r) => r.parent,
                Err(e) if e.errno() == Errno::ENOENT => self.inode_anywhere(dir).await?.parent,
                Err(e) => return Err(e),
            };
        }
        Err(ServerError::store("directory tree too deep or looped"))
    }

    /// A cross-MDT rename (see the module notes).
    pub(super) async fn rename_distributed(
        self: &Arc<Self>,
        rq: &Rq<'_>,
        from: (Fid, &Name),
        to: (Fid, &Name),
        flags: u32,
        keep_for: Option<u64>,
    ) -> Handled {
        let _one_at_a_time = self.dne.dist.lock().await;
        let mut tries = 0;
        loop {
            tries += 1;
            let Some(plan) = self.plan_rename(rq, from, to, flags, keep_for).await? else {
                return Ok(Reply::Ok);
            };
            let id = self.log_rename(rq, &plan).await?;
            fail::point("rename_distributed:logged");
            match self.do_rename(rq, id, &plan).await {
                Ok(r) => {
                    self.stats.count("dne_rename");
                    self.forget_parts(id, &plan);
                    return Ok(r);
                }
                Err(Failed::Undone(e)) if e.errno() == Errno::EAGAIN && tries < RENAME_TRIES => {}
                Err(Failed::Undone(e)) => return Err(e),
                Err(Failed::Left(e)) => {
                    tracing::warn!(id, "cross-MDT rename left to the resolver: {e}");
                    self.spawn_resolver();
                    return Err(e);
                }
            }
        }
    }

    /// The checks of a rename, and what it will do (`None`: nothing, as
    /// POSIX says for two names of one inode).
    async fn plan_rename(
        self: &Arc<Self>,
        rq: &Rq<'_>,
        (parent, name): (Fid, &Name),
        (new_parent, new_name): (Fid, &Name),
        flags: u32,
        keep_for: Option<u64>,
    ) -> Result<Option<RenameIntent>, ServerError> {
        let c = Cred::of(rq.ctx);
        let exchange = flags & rename_flags::EXCHANGE != 0;
        let from_rec = read_inode(&*self.names.store, parent)?;
        let from_dir = &from_rec.attr;
        let src = read_dentry(&*self.names.store, parent, name)?.ok_or_else(|| not_found(name))?;
        let to_mdt = self.owner_of(new_parent).await?;
        let (to_dir, to_acl, dst, sealed) = match self
            .mdt_call(
                to_mdt,
                PeerRequest::ReadEntry {
                    dir: new_parent,
                    name: new_name.clone(),
                },
            )
            .await?
        {
            Reply::EntryOf {
                dir,
                dir_acl,
                entry,
                sealed,
            } => (dir, dir_acl, entry, sealed),
            other => {
                return Err(ServerError::peer(
                    Errno::EPROTO,
                    format!("ReadEntry answered {other:?}"),
                ))
            }
        };
        if to_dir.kind != FileKind::Dir {
            return Err(ServerError::refused(
                Errno::ENOTDIR,
                format!("{new_parent} is not a directory"),
            ));
        }
        if sealed {
            return Err(being_removed(new_parent));
        }
        let src_found = self.inode_anywhere(src.fid).await?;
        let (src_mdt, src_attr) = (src_found.mdt, &src_found.attr);
        let dst = match dst {
            Some((fid, kind)) => {
                let found = self.inode_anywhere(fid).await?;
                let mdt = found.mdt;
                Some((Named { fid, kind, mdt }, found))
            }
            None => None,
        };
        match &dst {
            Some(_) if flags & rename_flags::NOREPLACE != 0 => return Err(exists(new_name)),
            None if exchange => return Err(not_found(new_name)),
            Some((d, _)) if d.fid == src.fid && !exchange => return Ok(None),
            _ => {}
        }
        // As a rename on one MDT (`namespace::same_project`), from the
        // attributes: a directory with a project id passes it on.
        let other_project = |dir: &msg::Attr, projid: u32, n: &Name| {
            if dir.projid != 0 && dir.projid != projid {
                return Err(ServerError::refused(
                    Errno::EXDEV,
                    format!(
                        "{n} is in project {projid}; the directory is in project {}",
                        dir.projid
                    ),
                ));
            }
            Ok(())
        };
        other_project(&to_dir, src_attr.projid, name)?;
        if let (true, Some((_, a))) = (exchange, &dst) {
            other_project(from_dir, a.attr.projid, new_name)?;
        }
        let src_dir = src.kind == FileKind::Dir;
        if let (Some((d, _)), false) = (&dst, exchange) {
            super::namespace::may_replace(src_dir, d.kind == FileKind::Dir, new_name)?;
        }
        let moved = parent != new_parent;
        if !c.is_root() {
            let to = perm::Inode {
                attr: &to_dir,
                acl: to_acl.as_ref(),
            };
            perm::may_delete(&c, &from_rec, name, Some(src_attr.uid))?;
            perm::may_change_dir(&c, to)?;
            if let Some((_, a)) = &dst {
                perm::may_delete(&c, to, new_name, Some(a.attr.uid))?;
            }
            if moved && src_dir {
                perm::may(&c, src_found.inode(), msg::access::WRITE)?;
            }
            if let Some((d, a)) = &dst {
                if exchange && moved && d.kind == FileKind::Dir {
                    perm::may(&c, a.inode(), msg::access::WRITE)?;
                }
            }
        }
        let replaced = match &dst {
            Some((d, _)) if !exchange && d.kind == FileKind::Dir => self.dir_objects(d.fid).await?,
            _ => Vec::new(),
        };
        let dst = dst.map(|(d, _)| d);
        let tree = moved && (src_dir || (exchange && dst.is_some_and(|d| d.kind == FileKind::Dir)));
        Ok(Some(RenameIntent {
            from: Place {
                mdt: self.index,
                dir: parent,
                name: name.clone(),
            },
            src: Named {
                fid: src.fid,
                kind: src.kind,
                mdt: src_mdt,
            },
            to: Place {
                mdt: to_mdt,
                dir: new_parent,
                name: new_name.clone(),
            },
            dst,
            replaced,
            exchange,
            keep_for,
            maker: rq.ctx.client_id,
            tree,
            aborted: false,
        }))
    }

    /// Log the rename's intent (durable) if its source entry is as
    /// planned and no other cross-MDT operation holds it.
    async fn log_rename(
        self: &Arc<Self>,
        rq: &Rq<'_>,
        plan: &RenameIntent,
    ) -> Result<u64, ServerError> {
        let (_, g) = self.begin().await.into_parts();
        let now = read_dentry(&*self.names.store, plan.from.dir, &plan.from.name)?;
        if now.is_none_or(|d| d.fid != plan.src.fid) {
            return Err(ServerError::refused(
                Errno::EAGAIN,
                format!("{} changed meanwhile", plan.from.name),
            ));
        }
        self.not_pending(plan.from.dir, &plan.from.name)?;
        let mut t = Tx::new(&*self.names.store);
        let id = self.log_intent(rq, &mut t, IntentOp::Rename(Box::new(plan.clone())))?;
        let ticket = self.apply_step(t)?;
        drop(g);
        self.commit_through(ticket).await?;
        Ok(id)
    }

    /// Take MDT0's tree lock for intent `id`, waiting while another holds
    /// it (up to [`TREE_LOCK_WAIT`]).
    async fn take_tree_lock(self: &Arc<Self>, id: u64) -> Result<(), ServerError> {
        let root = self.owner_of(Fid::ROOT).await?;
        let start = Instant::now();
        let mut pause = Duration::from_millis(2);
        loop {
            let req = PeerRequest::TreeLock {
                coord: self.index,
                id,
                lock: true,
            };
            match self.mdt_call(root, req).await {
                Err(e) if e.errno() == Errno::EBUSY && start.elapsed() < TREE_LOCK_WAIT => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                r => return r.map(|_| ()),
            }
        }
    }

    async fn give_tree_lock(self: &Arc<Self>, id: u64) -> Result<(), ServerError> {
        let root = self.owner_of(Fid::ROOT).await?;
        let req = PeerRequest::TreeLock {
            coord: self.index,
            id,
            lock: false,
        };
        self.mdt_call(root, req).await.map(|_| ())
    }

    /// Steps 2 to 8 of the module notes, for the request `rq` (a resend's
    /// when the resolver finishes it).
    async fn do_rename(
        self: &Arc<Self>,
        rq: &Rq<'_>,
        id: u64,
        p: &RenameIntent,
    ) -> Result<Reply, Failed> {
        if let Err(e) = self.rename_checks(id, p).await {
            return Err(self.undo_rename(id, p, e).await);
        }
        let (to_nlink, from_nlink) = p.nlinks();
        let mut steps = super::remote::StepLog::new(rq, self.index);
        let set = PeerRequest::SetEntry {
            intent: self.part(id, 0),
            dir: p.to.dir,
            name: p.to.name.clone(),
            expect: p.dst.map(|d| d.fid),
            to: Some((p.src.fid, p.src.kind)),
            nlink: to_nlink,
            maker: p.maker,
        };
        match self.mdt_call_as(p.to.mdt, set, steps.to(p.to.mdt)).await {
            Ok(_) => {}
            Err(e) if is_refusal(&e) => return Err(self.undo_rename(id, p, e).await),
            Err(e) => return Err(Failed::Left(e)),
        }
        fail::point("rename_distributed:target_set");
        let moved = p.moved();
        let relink = |index, fid, nlink, parent, keep_for| PeerRequest::Relink {
            intent: self.part(id, index),
            fid,
            nlink,
            parent,
            keep_for,
            maker: p.maker,
        };
        let parent = moved.then_some(p.to.dir);
        gone_is_done(
            self.mdt_call_as(
                p.src.mdt,
                relink(1, p.src.fid, 0, parent, None),
                steps.to(p.src.mdt),
            )
            .await,
        )?;
        fail::point("rename_distributed:inode_moved");
        let mut reply = Reply::Ok;
        match p.dst {
            Some(d) if p.exchange => {
                let parent = moved.then_some(p.from.dir);
                gone_is_done(
                    self.mdt_call_as(d.mdt, relink(2, d.fid, 0, parent, None), steps.to(d.mdt))
                        .await,
                )?;
            }
            Some(d) if d.kind == FileKind::Dir => {
                let first = p.replaced.first().map_or(self.index, |(m, _)| *m);
                self.destroy_all(&p.replaced, steps.to(first)).await?
            }
            Some(d) => {
                let r = gone_is_done(
                    self.mdt_call_as(
                        d.mdt,
                        relink(2, d.fid, -1, None, p.keep_for),
                        steps.to(d.mdt),
                    )
                    .await,
                )?;
                if let Reply::Orphaned { .. } = r {
                    reply = r;
                }
            }
            None => {}
        }
        fail::point("rename_distributed:replaced");
        if p.tree {
            self.give_tree_lock(id).await?;
        }
        self.finish_rename(rq, id, p, from_nlink, &reply).await?;
        Ok(reply)
    }

    /// Steps 2 and 3: the tree lock and the loop check, the seals.
    async fn rename_checks(self: &Arc<Self>, id: u64, p: &RenameIntent) -> Result<(), ServerError> {
        if p.tree {
            self.take_tree_lock(id).await?;
            fail::point("rename_distributed:locked");
            let into_itself = |f: Fid| {
                ServerError::refused(
                    Errno::EINVAL,
                    format!("cannot move directory {f} into itself"),
                )
            };
            if p.src.kind == FileKind::Dir {
                let objs: Vec<Fid> = self
                    .dir_objects(p.src.fid)
                    .await?
                    .iter()
                    .map(|o| o.1)
                    .collect();
                if self.is_below(p.to.dir, &objs).await? {
                    return Err(into_itself(p.src.fid));
                }
            }
            if let Some(d) = p.dst.filter(|d| p.exchange && d.kind == FileKind::Dir) {
                let objs: Vec<Fid> = self.dir_objects(d.fid).await?.iter().map(|o| o.1).collect();
                if self.is_below(p.from.dir, &objs).await? {
                    return Err(into_itself(d.fid));
                }
            }
        }
        for (mdt, fid) in &p.replaced {
            match self
                .mdt_call(*mdt, PeerRequest::SealDir { fid: *fid })
                .await
            {
                Ok(_) => {}
                // Destroyed already: this rename got past its entry
                // before a crash (the resolver runs these steps again).
                Err(e) if e.errno() == Errno::ENOENT => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Undo a rename that failed before its point of no return with
    /// `e`: marked aborted first, so that a resolver taking over undoes
    /// it too.
    async fn undo_rename(self: &Arc<Self>, id: u64, p: &RenameIntent, e: ServerError) -> Failed {
        let aborted = RenameIntent {
            aborted: true,
            ..p.clone()
        };
        let rec = super::intents::IntentRec::new(None, IntentOp::Rename(Box::new(aborted)));
        let undone = match self.set_intent(id, Some(&rec)).await {
            Ok(()) => self.unwind_rename(id, p).await,
            Err(u) => Err(u),
        };
        match undone {
            Ok(()) => Failed::Undone(e),
            Err(u) => {
                tracing::warn!(id, "undoing a cross-MDT rename: {u}; will retry");
                self.spawn_resolver();
                Failed::Undone(e)
            }
        }
    }

    /// What an aborted rename undoes: its seals, its tree lock, its intent.
    async fn unwind_rename(self: &Arc<Self>, id: u64, p: &RenameIntent) -> Result<(), ServerError> {
        for (mdt, fid) in &p.replaced {
            self.mdt_call(*mdt, PeerRequest::UnsealDir { fid: *fid })
                .await?;
        }
        if p.tree {
            self.give_tree_lock(id).await?;
        }
        self.set_intent(id, None).await
    }

    /// Step 8: the source entry, with the intent's deletion and the reply.
    async fn finish_rename(
        &self,
        rq: &Rq<'_>,
        id: u64,
        p: &RenameIntent,
        nlink: i32,
        reply: &Reply,
    ) -> Result<(), ServerError> {
        let (mut t, g) = self.begin().await.into_parts();
        if t.dentry(p.from.dir, &p.from.name)?
            .is_some_and(|d| d.fid == p.src.fid)
        {
            match p.dst.filter(|_| p.exchange) {
                Some(d) => {
                    let e = DentryRec {
                        fid: d.fid,
                        kind: d.kind,
                    };
                    t.put_dentry(p.from.dir, &p.from.name, &e)?;
                }
                None => t.delete_dentry(p.from.dir, &p.from.name)?,
            }
            t.dir_changed(p.from.dir, nlink, Time::now())?;
        }
        self.finish_intent(rq, t, g, id, reply).await
    }

    /// Tell the MDTs a finished rename touched that they may forget its
    /// parts.
    fn forget_parts(self: &Arc<Self>, id: u64, p: &RenameIntent) {
        let mut mdts = vec![p.to.mdt, p.src.mdt];
        mdts.extend(p.dst.map(|d| d.mdt));
        self.forget_later(id, mdts);
    }

    /// Resolve rename intent `id` after a crash or a failed step.
    pub(super) async fn resolve_rename(
        self: &Arc<Self>,
        id: u64,
        rq: Rq<'_>,
        p: &RenameIntent,
    ) -> Result<(), ServerError> {
        if p.aborted {
            self.unwind_rename(id, p).await?;
            tracing::info!(id, "MDT{:04x}: undid a failed cross-MDT rename", self.index);
            return Ok(());
        }
        match self.do_rename(&rq, id, p).await {
            Ok(_) => {
                self.forget_parts(id, p);
                tracing::info!(
                    id,
                    "MDT{:04x}: completed an interrupted cross-MDT rename",
                    self.index
                );
                Ok(())
            }
            Err(Failed::Undone(e)) => {
                tracing::info!(
                    id,
                    "MDT{:04x}: undid an interrupted cross-MDT rename ({e})",
                    self.index
                );
                Ok(())
            }
            Err(Failed::Left(e)) => Err(e),
        }
    }

    /// EBUSY if entry `name` of `dir` is part of a cross-MDT operation
    /// this MDT has not finished: it keeps its name until then.
    pub(super) fn not_pending(&self, dir: Fid, name: &Name) -> Result<(), ServerError> {
        if self.name_in_intent(dir, name)? {
            return Err(ServerError::refused(
                Errno::EBUSY,
                format!("{name} is being moved or removed across MDTs"),
            ));
        }
        Ok(())
    }

    /// A hard link to an inode on another MDT: the link count there, then
    /// the entry here.
    pub(super) async fn link_distributed(
        self: &Arc<Self>,
        rq: &Rq<'_>,
        fid: Fid,
        parent: Fid,
        name: &Name,
    ) -> Handled {
        let _one_at_a_time = self.dne.dist.lock().await;
        let c = Cred::of(rq.ctx);
        let found = self.inode_anywhere(fid).await?;
        perm::may_link(&c, found.inode())?;
        let (mdt, attr) = (found.mdt, found.attr);
        super::namespace::may_add_link(&attr)?;
        let op = LinkIntent {
            fid,
            kind: attr.kind,
            mdt,
            parent,
            name: name.clone(),
            maker: rq.ctx.client_id,
            aborted: false,
        };
        let mut ch = self.begin().await;
        ch.new_name(&c, parent, name)?;
        self.not_pending(parent, name)?;
        // Read only: a fresh transaction logs the intent.
        let (_, g) = ch.into_parts();
        let mut t = Tx::new(&*self.names.store);
        let id = self.log_intent(rq, &mut t, IntentOp::Link(op.clone()))?;
        let ticket = self.apply_step(t)?;
        drop(g);
        self.commit_through(ticket).await?;
        fail::point("link_distributed:logged");
        match self.do_link(rq, id, &op).await {
            Ok(r) => {
                self.stats.count("dne_link");
                self.forget_later(id, vec![mdt]);
                Ok(r)
            }
            Err(Failed::Undone(e)) => Err(e),
            Err(Failed::Left(e)) => {
                self.spawn_resolver();
                Err(e)
            }
        }
    }

    async fn do_link(
        self: &Arc<Self>,
        rq: &Rq<'_>,
        id: u64,
        op: &LinkIntent,
    ) -> Result<Reply, Failed> {
        let add = PeerRequest::Relink {
            intent: self.part(id, 0),
            fid: op.fid,
            nlink: 1,
            parent: None,
            keep_for: None,
            maker: op.maker,
        };
        let step = Self::step_ctx(rq);
        let reply = match self.mdt_call_as(op.mdt, add, step.clone()).await {
            Ok(r @ Reply::Entry { .. }) => r,
            Ok(other) => {
                return Err(Failed::Left(ServerError::peer(
                    Errno::EPROTO,
                    format!("Relink answered {other:?}"),
                )))
            }
            Err(e) if is_refusal(&e) => {
                self.set_intent(id, None).await?;
                return Err(Failed::Undone(e));
            }
            Err(e) => return Err(Failed::Left(e)),
        };
        fail::point("link_distributed:linked");
        let (mut t, g) = self.begin().await.into_parts();
        let free = t.dir(op.parent).is_ok()
            && !self.dne.sealed.contains(op.parent)
            && t.dentry(op.parent, &op.name)?
                .is_none_or(|d| d.fid == op.fid);
        if !free {
            drop(t);
            drop(g);
            // Taken meanwhile (or the directory removed): the link goes.
            let aborted = LinkIntent {
                aborted: true,
                ..op.clone()
            };
            let rec = super::intents::IntentRec::new(None, IntentOp::Link(aborted));
            self.set_intent(id, Some(&rec)).await?;
            // The link count it recorded is recorded going back.
            let undo = step.map(|c| ReqCtx {
                step_of: Some(loom_proto::changelog::ChangeKind::Unlink),
                ..c
            });
            self.unlink_part(id, op, undo).await?;
            return Err(Failed::Undone(exists(&op.name)));
        }
        let e = DentryRec {
            fid: op.fid,
            kind: op.kind,
        };
        t.put_dentry(op.parent, &op.name, &e)?;
        t.dir_changed(op.parent, 0, Time::now())?;
        self.finish_intent(rq, t, g, id, &reply).await?;
        Ok(reply)
    }

    /// Undo a link's new link count (part 1), then its intent.
    async fn unlink_part(
        self: &Arc<Self>,
        id: u64,
        op: &LinkIntent,
        step: Option<ReqCtx>,
    ) -> Result<(), ServerError> {
        let req = PeerRequest::Relink {
            intent: self.part(id, 1),
            fid: op.fid,
            nlink: -1,
            parent: None,
            keep_for: None,
            maker: op.maker,
        };
        self.mdt_call_as(op.mdt, req, step).await?;
        self.set_intent(id, None).await
    }

    /// Resolve link intent `id`.
    pub(super) async fn resolve_link(
        self: &Arc<Self>,
        id: u64,
        rq: Rq<'_>,
        op: &LinkIntent,
    ) -> Result<(), ServerError> {
        if op.aborted {
            return self.unlink_part(id, op, None).await;
        }
        match self.do_link(&rq, id, op).await {
            Ok(_) | Err(Failed::Undone(_)) => {
                self.forget_later(id, vec![op.mdt]);
                Ok(())
            }
            Err(Failed::Left(e)) => Err(e),
        }
    }

    /// Unlink of an entry here whose inode is on another MDT: the link
    /// there, then the entry.
    pub(super) async fn unlink_distributed(
        self: &Arc<Self>,
        rq: &Rq<'_>,
        parent: Fid,
        name: &Name,
        keep_for: Option<u64>,
    ) -> Handled {
        let _one_at_a_time = self.dne.dist.lock().await;
        let dir = read_inode(&*self.names.store, parent)?;
        let d = read_dentry(&*self.names.store, parent, name)?.ok_or_else(|| not_found(name))?;
        if d.kind == FileKind::Dir {
            return Err(ServerError::refused(
                Errno::EISDIR,
                format!("{name} is a directory"),
            ));
        }
        let Found { mdt, attr, .. } = self.inode_anywhere(d.fid).await?;
        perm::may_delete(&Cred::of(rq.ctx), &dir, name, Some(attr.uid))?;
        let op = UnlinkIntent {
            parent,
            name: name.clone(),
            fid: d.fid,
            mdt,
            keep_for,
            maker: rq.ctx.client_id,
        };
        let (_, g) = self.begin().await.into_parts();
        if read_dentry(&*self.names.store, parent, name)?.is_none_or(|now| now.fid != d.fid) {
            return Err(not_found(name));
        }
        self.not_pending(parent, name)?;
        let mut t = Tx::new(&*self.names.store);
        let id = self.log_intent(rq, &mut t, IntentOp::Unlink(op.clone()))?;
        let ticket = self.apply_step(t)?;
        drop(g);
        self.commit_through(ticket).await?;
        fail::point("unlink_distributed:logged");
        match self.do_unlink(rq, id, &op).await {
            Ok(r) => {
                self.stats.count("dne_unlink");
                self.forget_later(id, vec![mdt]);
                Ok(r)
            }
            Err(e) => {
                self.spawn_resolver();
                Err(e)
            }
        }
    }

    async fn do_unlink(self: &Arc<Self>, rq: &Rq<'_>, id: u64, op: &UnlinkIntent) -> Handled {
        let req = PeerRequest::Relink {
            intent: self.part(id, 0),
            fid: op.fid,
            nlink: -1,
            parent: None,
            keep_for: op.keep_for,
            maker: op.maker,
        };
        let reply = match self.mdt_call_as(op.mdt, req, Self::step_ctx(rq)).await {
            Ok(r @ Reply::Orphaned { .. }) => r,
            Ok(_) => Reply::Ok,
            // The inode is gone: only its entry is left to remove.
            Err(e) if e.errno() == Errno::ENOENT => Reply::Ok,
            Err(e) => return Err(e),
        };
        fail::point("unlink_distributed:dropped");
        let (mut t, g) = self.begin().await.into_parts();
        if t.dentry(op.parent, &op.name)?
            .is_some_and(|d| d.fid == op.fid)
        {
            t.delete_dentry(op.parent, &op.name)?;
            t.dir_changed(op.parent, 0, Time::now())?;
        }
        self.finish_intent(rq, t, g, id, &reply).await?;
        Ok(reply)
    }

    /// Resolve unlink intent `id`: always rolled forward.
    pub(super) async fn resolve_unlink(
        self: &Arc<Self>,
        id: u64,
        rq: Rq<'_>,
        op: &UnlinkIntent,
    ) -> Result<(), ServerError> {
        self.do_unlink(&rq, id, op).await?;
        self.forget_later(id, vec![op.mdt]);
        Ok(())
    }
}

/// A hard link to an inode on another MDT (an intent's operation).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LinkIntent {
    /// The inode.
    pub fid: Fid,
    /// Its type.
    pub kind: FileKind,
    /// Its MDT.
    pub mdt: u32,
    /// The directory of the new name (on the coordinator).
    pub parent: Fid,
    /// The new name.
    pub name: Name,
    /// The client whose request this is.
    pub maker: u64,
    /// The name was taken: undo the link count, never finish.
    pub aborted: bool,
}

/// Unlink of an entry whose inode is on another MDT (an intent's
/// operation).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UnlinkIntent {
    /// The directory (on the coordinator).
    pub parent: Fid,
    /// The entry.
    pub name: Name,
    /// The inode it names.
    pub fid: Fid,
    /// Its MDT.
    pub mdt: u32,
    /// A client that may have the file open.
    pub keep_for: Option<u64>,
    /// The client whose request this is.
    pub maker: u64,
}
