//! The MDT's side of the distributed namespace (DNE): asking other MDTs,
//! and doing the parts of cross-MDT operations that other MDTs coordinate.
//!
//! A directory entry may name an inode on another MDT (a remote
//! directory, or a shard of a striped one). Lookups and listings that meet
//! such an entry ask the inode's MDT for its attributes, so clients see
//! one namespace. The parts an MDT does for a coordinator
//! (`MakeDirObject`, `UndoDirObject`, `SealDir`, `UnsealDir`,
//! `DestroyDir`) are each repeatable: a part is recorded under its
//! [`IntentRef`] in the same batch as its effect (meta keys `made/...`),
//! so the coordinator may send it again after a crash, or undo it, without
//! doing it twice. A sealed directory (meta keys `sealed/...`) is empty and
//! takes no new entries until the coordinator destroys or unseals it.

use super::attrs::new_attr;
use super::changelog::{Planned, Step};
use super::leases::Touched;
use super::records::{DentryRec, InodeRec, INODE_REC_VERSION};
use super::tx::{read_inode, read_meta, store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::changelog::ChangeRec;
use loom_proto::lease;
use loom_proto::msg::{
    DirObject, FileKind, IntentRef, MdtRequest, PeerRequest, Reply, ReqCtx, TargetId, Time,
};
use loom_proto::{Errno, Fid, Layout, Name};
use loom_store::kv::{Space, Ticket};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one MDT waits for another to answer a step.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(20);

/// Meta key prefix of the parts done for intent `id` of MDT `coord`.
fn made_prefix(coord: u32, id: u64) -> String {
    format!("made/{coord:08x}/{id:016x}/")
}

/// The `made/` record of a part that was undone (no FID is all zeros).
const UNDONE: Fid = Fid::new(0, 0);

pub(super) fn made_key(i: IntentRef) -> String {
    format!("{}{:08x}", made_prefix(i.coord, i.id), i.index)
}

/// Meta key of the file system's tree lock (on MDT0): the (MDT, intent)
/// that holds it.
const TREE_LOCK: &str = "tree_lock";

/// The steps of one client change sent to other MDTs: each MDT records
/// its part once, with its first step (a rename may send two to one MDT);
/// the coordinating MDT records the change itself.
pub(super) struct StepLog {
    ctx: Option<ReqCtx>,
    recorded: Vec<u32>,
}

impl StepLog {
    /// The steps of `rq`'s change on MDT `me` (see [`MdtService::step_ctx`]).
    pub(super) fn new(rq: &super::Rq<'_>, me: u32) -> StepLog {
        StepLog {
            ctx: MdtService::step_ctx(rq),
            recorded: vec![me],
        }
    }

    /// The context of the next step sent to `mdt`: recorded there only
    /// if it is the first.
    pub(super) fn to(&mut self, mdt: u32) -> Option<ReqCtx> {
        if self.recorded.contains(&mdt) {
            return None;
        }
        self.recorded.push(mdt);
        self.ctx.clone()
    }
}

/// What a `SetEntry` part changes.
struct SetEntry {
    dir: Fid,
    name: Name,
    expect: Option<Fid>,
    to: Option<(Fid, FileKind)>,
    nlink: i32,
}

fn sealed_key(fid: Fid) -> String {
    format!("sealed/{:016x}:{:08x}:{:08x}", fid.seq, fid.oid, fid.ver)
}

/// Directories of this MDT that are being removed (kept in memory; the
/// `sealed/` meta keys make them survive a restart).
#[derive(Default)]
pub struct Sealed(Mutex<HashSet<Fid>>);

impl Sealed {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<Fid>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The sealed directories recorded in `store`.
    pub fn load(store: &dyn loom_store::kv::KvStore) -> Result<Sealed, ServerError> {
        let s = Sealed::default();
        for (_, v) in store
            .scan(Space::Meta, b"sealed/", None, usize::MAX)
            .map_err(store_err)?
        {
            let fid: Fid = super::tx::decode_record(&v)?;
            s.set().insert(fid);
        }
        Ok(s)
    }

    /// Whether `dir` refuses new entries.
    pub fn contains(&self, dir: Fid) -> bool {
        self.set().contains(&dir)
    }
}

/// The error for a new entry in a directory that is being removed, as
/// Linux answers for a directory removed while a process sits in it.
pub fn being_removed(dir: Fid) -> ServerError {
    ServerError::refused(Errno::ENOENT, format!("directory {dir} is being removed"))
}

/// The attributes a client is shown: a striped directory's link count is
/// spread over its shards, so it is reported as 1 ("not counted"), which
/// tools such as find(1) take to mean they must not guess subdirectories
/// from it.
pub fn shown_attr(r: &InodeRec) -> loom_proto::msg::Attr {
    let mut a = r.attr.clone();
    if r.layout.as_ref().and_then(|l| l.dir_shards()).is_some() {
        a.nlink = 1;
    }
    a
}

impl MdtService {
    /// Whether directory `fid` is being removed by a coordinator (it
    /// takes no new entries).
    pub(super) fn is_sealed(&self, fid: Fid) -> bool {
        self.dne.sealed.contains(fid)
    }

    /// The MDT that owns `fid`, from the FLDB (fetched again once if the
    /// sequence is new); ESTALE if no MDT owns it.
    pub(super) async fn owner_of(&self, fid: Fid) -> Result<u32, ServerError> {
        // Moved by `loom migrate`: its FID's sequence no longer says.
        if let Some(i) = self.dne.located.away(fid) {
            return Ok(i);
        }
        if self.dne.located.here(fid) {
            return Ok(self.index);
        }
        if let Some(i) = self.peers.config().await?.mdt_of(fid) {
            return Ok(i);
        }
        self.peers
            .refresh()
            .await?
            .mdt_of(fid)
            .ok_or_else(|| ServerError::refused(Errno::ESTALE, format!("no MDT owns {fid}")))
    }

    /// The context a step of `rq`'s change is sent under: the client's,
    /// not resendable, with what the change records (see
    /// `ReqCtx::step_of`); `None` for a change that records nothing.
    pub(super) fn step_ctx(rq: &super::Rq<'_>) -> Option<ReqCtx> {
        super::intents::step_for(Some(rq.ctx), rq.log)
    }

    /// As [`Self::mdt_call`], for a step of a client's change sent under
    /// `step` (see [`Self::step_ctx`]): another MDT records its part.
    pub(super) async fn mdt_call_as(
        self: &Arc<Self>,
        mdt: u32,
        req: PeerRequest,
        step: Option<ReqCtx>,
    ) -> Handled {
        match step {
            Some(ctx) if mdt != self.index => {
                let (reply, _) = self
                    .peers
                    .call_as(
                        TargetId::mdt(mdt),
                        ctx,
                        req,
                        bytes::Bytes::new(),
                        PEER_TIMEOUT,
                    )
                    .await?;
                Ok(reply)
            }
            _ => self.mdt_call(mdt, req).await,
        }
    }

    /// Send a part of a cross-MDT operation to MDT `mdt` (done here
    /// directly when that is this MDT).
    pub(super) async fn mdt_call(self: &Arc<Self>, mdt: u32, req: PeerRequest) -> Handled {
        if mdt == self.index {
            // In a task of its own, as a peer's request would run.
            let me = self.clone();
            let again = req.clone();
            // Not recorded as a step (no `step_of`): the change's own
            // record on this MDT covers it.
            let r = tokio::spawn(async move { me.participant(&ReqCtx::default(), req).await })
                .await
                .map_err(|e| ServerError::internal(format!("cross-MDT step failed: {e}")))?;
            return match r {
                // `loom migrate` moved what it names: ask there.
                Ok(Reply::Moved { mdt, .. }) if mdt != self.index => {
                    Box::pin(self.mdt_call(mdt, again)).await
                }
                r => r,
            };
        }
        let (reply, _) = self
            .peers
            .call(TargetId::mdt(mdt), req, bytes::Bytes::new(), PEER_TIMEOUT)
            .await?;
        Ok(reply)
    }

    /// Attributes and layout of `fid` when it lives on another MDT (a
    /// remote directory's entry): asked of its MDT. ENOENT when `fid` is
    /// neither here nor anywhere.
    pub(super) async fn remote_entry(self: &Arc<Self>, fid: Fid) -> Handled {
        let owner = self.owner_of(fid).await?;
        if owner == self.index {
            return Err(ServerError::refused(
                Errno::ENOENT,
                format!("no inode {fid}"),
            ));
        }
        let open = MdtRequest::Open {
            fid,
            access: 0,
            hold: false,
        };
        let (reply, _) = self
            .peers
            .call(
                TargetId::mdt(owner),
                open,
                bytes::Bytes::new(),
                PEER_TIMEOUT,
            )
            .await?;
        match reply {
            r @ Reply::Entry { .. } => Ok(r),
            other => Err(ServerError::peer(
                Errno::EPROTO,
                format!("MDT{owner:04x} answered Open with {other:?}"),
            )),
        }
    }

    /// Handle one part of an operation another MDT (or this one)
    /// coordinates.
    pub(super) async fn participant(self: &Arc<Self>, ctx: &ReqCtx, req: PeerRequest) -> Handled {
        let routed_by = req.routed_by();
        if let Some(moved) = self.moved_reply(routed_by) {
            return Ok(moved);
        }
        // Moved while it waited for the namespace lock: it found nothing.
        match self.participant_here(ctx, req).await {
            Err(e) if e.errno() == Errno::ENOENT => self.moved_reply(routed_by).ok_or(e),
            r => r,
        }
    }

    async fn participant_here(self: &Arc<Self>, ctx: &ReqCtx, req: PeerRequest) -> Handled {
        let step = Step {
            ctx,
            plan: ctx.step_of.and_then(|k| Planned::of_step(&req, k)),
        };
        match req {
            PeerRequest::Snapshot { id, step } => self.snapshot_step(id, step).await,
            PeerRequest::AdoptInodes {
                intent,
                dir,
                inodes,
                entries,
            } => self.adopt_inodes(&step, intent, dir, inodes, entries).await,
            PeerRequest::PutEntries { dir, entries, .. } => self.put_entries(dir, entries).await,
            PeerRequest::MakeDirObject { intent, dir, quota } => {
                self.make_dir_object(&step, intent, dir, quota).await
            }
            PeerRequest::UndoDirObject { intent } => self.undo_dir_object(&step, intent).await,
            PeerRequest::SealDir { fid } => self.seal_dir(fid).await,
            PeerRequest::QuotaAcquire {
                who,
                target,
                usage,
                need,
                bytes,
            } => {
                let res = crate::quota::Res::of(bytes);
                self.quota_acquire(who, target, res, usage, need).await
            }
            PeerRequest::QuotaRelease { who, forget, bytes } => {
                self.quota_release(who, forget, crate::quota::Res::of(bytes))
                    .await
            }
            PeerRequest::UnsealDir { fid } => self.unseal_dir(fid).await,
            PeerRequest::DestroyDir { fid } => self.destroy_dir(&step, fid).await,
            PeerRequest::ForgetIntent { coord, id } => self.forget_intent(coord, id).await,
            PeerRequest::ReadInode { fid } => {
                let r = read_inode(&*self.names.store, fid)?;
                Ok(Reply::Inode {
                    attr: shown_attr(&r),
                    layout: r.layout,
                    parent: r.parent,
                    acl: r.acl,
                })
            }
            PeerRequest::ReadEntry { dir, name } => {
                let r = read_inode(&*self.names.store, dir)?;
                let entry = super::tx::read_dentry(&*self.names.store, dir, &name)?;
                Ok(Reply::EntryOf {
                    dir: r.attr,
                    dir_acl: r.acl,
                    entry: entry.map(|d| (d.fid, d.kind)),
                    sealed: self.dne.sealed.contains(dir),
                })
            }
            PeerRequest::SetEntry {
                intent,
                dir,
                name,
                expect,
                to,
                nlink,
                maker,
            } => {
                let set = SetEntry {
                    dir,
                    name,
                    expect,
                    to,
                    nlink,
                };
                self.set_entry(&step, intent, set, maker).await
            }
            PeerRequest::Relink {
                intent,
                fid,
                nlink,
                parent,
                keep_for,
                maker,
            } => {
                self.relink(&step, intent, fid, nlink, parent, keep_for, maker)
                    .await
            }
            PeerRequest::TreeLock { coord, id, lock } => self.tree_lock(coord, id, lock).await,
        }
    }

    /// Apply a step's batch, then `applied` (memory that mirrors the
    /// store), release the namespace lock and answer `reply` once durable.
    async fn commit_step(
        &self,
        t: Tx<'_>,
        g: tokio::sync::MutexGuard<'_, ()>,
        reply: Reply,
        applied: impl FnOnce(),
    ) -> Handled {
        self.commit_logged(t, g, reply, Vec::new(), applied).await
    }

    /// As [`Self::commit_step`], with the step's changelog records.
    async fn commit_logged(
        &self,
        t: Tx<'_>,
        g: tokio::sync::MutexGuard<'_, ()>,
        reply: Reply,
        log: Vec<ChangeRec>,
        applied: impl FnOnce(),
    ) -> Handled {
        let ticket = self.apply_batch(None, t, false, log)?;
        applied();
        drop(g);
        self.commit_through(ticket).await?;
        Ok(reply)
    }

    async fn make_dir_object(
        self: &Arc<Self>,
        step: &Step<'_>,
        intent: IntentRef,
        new: DirObject,
        quota: bool,
    ) -> Handled {
        self.ensure_fid_room().await?;
        let mut rounds = 0;
        let g = loop {
            let (_, g) = self.begin().await.into_parts();
            if !quota || step.ctx.uid == 0 || self.made(intent)? {
                break g;
            }
            // A client's mkdir: held to its caller's quota on this MDT,
            // as a local one is (see `handle`).
            let d = super::quota::Deltas::new_inode(new.uid, new.gid, new.projid);
            match self.commit.quotas.admit(&d) {
                Ok(()) => break g,
                Err(ServerError::QuotaShort { who, need, res }) => {
                    drop(g);
                    rounds += 1;
                    self.quota_round(who, need, res, rounds).await?;
                }
                Err(e) => return Err(e),
            }
        };
        if let Some(fid) = read_meta::<Fid>(&*self.names.store, &made_key(intent))? {
            if fid == UNDONE {
                // A late copy of a part that was undone must not make it again.
                return Err(ServerError::refused(
                    Errno::ESTALE,
                    format!(
                        "part {} of intent {} of MDT{:04x} was undone",
                        intent.index, intent.id, intent.coord
                    ),
                ));
            }
            // Sent again: answer what the first sending made.
            let r = read_inode(&*self.names.store, fid)?;
            return Ok(Reply::Entry {
                attr: shown_attr(&r),
                layout: r.layout,
            });
        }
        let mut t = Tx::new(&*self.names.store);
        let fid = self.alloc_fid(&mut t)?;
        let layout = new.others.map(|o| {
            let mut shards = vec![fid];
            shards.extend(o);
            Layout::dir_striped(shards)
        });
        let rec = InodeRec {
            version: INODE_REC_VERSION,
            attr: loom_proto::msg::Attr {
                projid: new.projid,
                ..new_attr(fid, FileKind::Dir, new.perm, new.uid, new.gid, new.time)
            },
            parent: new.parent,
            layout,
            symlink: None,
            default_stripe: new.default_stripe,
            // A remote directory inherits its parent's plain striping
            // only (`DirObject` carries no component layout yet).
            default_layout: None,
            default_dir: new.default_dir,
            default_compress: new.default_compress,
            proj_inherit: new.proj_inherit,
            acl: new.acl,
            default_acl: new.default_acl,
        };
        let reply = Reply::Entry {
            attr: shown_attr(&rec),
            layout: rec.layout.clone(),
        };
        t.create_inode(rec);
        t.put_meta(&made_key(intent), &fid)?;
        if intent.index > 0 {
            // Parts after the first are shards of a striped directory:
            // never split by themselves (see `restripe`).
            t.put_meta(&super::restripe::shard_key(fid), &fid)?;
        }
        let log = self.step_records(step, &t)?;
        self.commit_logged(t, g, reply, log, || {}).await
    }

    /// Whether part `intent` was made (or undone) already.
    fn made(&self, intent: IntentRef) -> Result<bool, ServerError> {
        Ok(read_meta::<Fid>(&*self.names.store, &made_key(intent))?.is_some())
    }

    /// Remove what part `intent` made, if anything; recorded as `step`
    /// says (the undo of a part that recorded what it made).
    async fn undo_dir_object(self: &Arc<Self>, step: &Step<'_>, intent: IntentRef) -> Handled {
        let (_, g) = self.begin().await.into_parts();
        let key = made_key(intent);
        let fid = read_meta::<Fid>(&*self.names.store, &key)?;
        if fid == Some(UNDONE) {
            return Ok(Reply::Ok);
        }
        let mut t = Tx::new(&*self.names.store);
        // Marked, not forgotten, until the coordinator's ForgetIntent.
        t.put_meta(&key, &UNDONE)?;
        let Some(fid) = fid else {
            return self.commit_step(t, g, Reply::Ok, || {}).await;
        };
        if read_inode(&*self.names.store, fid).is_ok() {
            if t.dir_is_empty(fid)? {
                t.delete_inode(fid)?;
            } else {
                // Nobody could name it yet, so nothing should be inside:
                // keep it rather than lose what is.
                tracing::error!(%fid, "not undoing a directory that has entries");
            }
        }
        let log = self.step_records(step, &t)?;
        self.commit_logged(t, g, Reply::Ok, log, || {}).await
    }

    async fn seal_dir(self: &Arc<Self>, fid: Fid) -> Handled {
        let (mut t, g) = self.begin().await.into_parts();
        t.dir(fid)?;
        if self.dne.sealed.contains(fid) {
            return Ok(Reply::Ok);
        }
        if !t.dir_is_empty(fid)? {
            return Err(ServerError::refused(
                Errno::ENOTEMPTY,
                format!("directory {fid} is not empty"),
            ));
        }
        t.put_meta(&sealed_key(fid), &fid)?;
        self.commit_step(t, g, Reply::Ok, || {
            self.dne.sealed.set().insert(fid);
        })
        .await
    }

    async fn unseal_dir(self: &Arc<Self>, fid: Fid) -> Handled {
        let (_, g) = self.begin().await.into_parts();
        if !self.dne.sealed.contains(fid) {
            return Ok(Reply::Ok);
        }
        let mut t = Tx::new(&*self.names.store);
        t.batch.delete(Space::Meta, sealed_key(fid).into_bytes());
        self.commit_step(t, g, Reply::Ok, || {
            self.dne.sealed.set().remove(&fid);
        })
        .await
    }

    async fn destroy_dir(self: &Arc<Self>, step: &Step<'_>, fid: Fid) -> Handled {
        let (_, g) = self.begin().await.into_parts();
        if read_inode(&*self.names.store, fid).is_err() {
            return Ok(Reply::Ok);
        }
        if !self.dne.sealed.contains(fid) {
            // Only a sealed directory is known to stay empty.
            return Err(ServerError::refused(
                Errno::EBUSY,
                format!("directory {fid} is not sealed for removal"),
            ));
        }
        crate::fail::point("destroy_dir");
        let mut t = Tx::new(&*self.names.store);
        t.delete_inode(fid)?;
        t.batch.delete(Space::Meta, sealed_key(fid).into_bytes());
        let log = self.step_records(step, &t)?;
        self.commit_logged(t, g, Reply::Ok, log, || {
            self.dne.sealed.set().remove(&fid);
        })
        .await
    }

    async fn forget_intent(self: &Arc<Self>, coord: u32, id: u64) -> Handled {
        let prefix = made_prefix(coord, id);
        let keys = self
            .names
            .store
            .scan(Space::Meta, prefix.as_bytes(), None, usize::MAX)
            .map_err(store_err)?;
        if keys.is_empty() {
            return Ok(Reply::Ok);
        }
        let (mut t, g) = self.begin().await.into_parts();
        for (k, _) in keys {
            t.batch.delete(Space::Meta, k);
        }
        // Losing this batch in a crash only leaves the records behind.
        self.apply_batch(None, t, true, Vec::new())?;
        drop(g);
        Ok(Reply::Ok)
    }

    /// Apply a part of another MDT's operation that changes names or
    /// inodes clients may hold leases on: applied at once (it cannot be
    /// run again), then recalled from every holder but `maker` (whose
    /// own request waits for this part: recalling from it would wait on
    /// its kernel, which holds the directories' locks), then committed.
    async fn commit_part(
        &self,
        step: &Step<'_>,
        mut t: Tx<'_>,
        g: tokio::sync::MutexGuard<'_, ()>,
        maker: u64,
        reply: Reply,
    ) -> Result<(Reply, Ticket), ServerError> {
        let log = self.step_records(step, &t)?;
        let e = t.take_effects();
        let touched = Touched {
            conflicts: lease::touched_by_change(&e),
            grants: Vec::new(),
        };
        let applied = self.names.leases.apply(maker, None, &touched, true, || {
            self.apply_batch(None, t, false, log)
        })?;
        let (ticket, _, late) =
            applied.map_err(|_| ServerError::internal("a late change was refused for leases"))?;
        drop(g);
        let recalled = self.names.leases.recall(maker, late).await;
        self.commit_through(ticket).await?;
        drop(recalled);
        Ok((reply, ticket))
    }

    /// The answer recorded for part `intent` if it was done already.
    fn done_part(&self, intent: IntentRef) -> Result<Option<Reply>, ServerError> {
        read_meta::<Reply>(&*self.names.store, &made_key(intent))
    }

    async fn set_entry(
        self: &Arc<Self>,
        step: &Step<'_>,
        intent: IntentRef,
        s: SetEntry,
        maker: u64,
    ) -> Handled {
        let mut c = self.begin().await;
        if let Some(r) = self.done_part(intent)? {
            return Ok(r);
        }
        // A new name: the guards of a name added (a directory restriped
        // since the client learned its layout is refused, ESTALE to the
        // coordinator, and the client renames again with the new layout).
        match s.to {
            Some(_) => c.target(s.dir, &s.name)?,
            None => c.t.dir(s.dir)?.clone(),
        };
        let (mut t, g) = c.into_parts();
        let now = t.dentry(s.dir, &s.name)?.map(|d| d.fid);
        if now != s.expect {
            return Err(ServerError::refused(
                Errno::EAGAIN,
                format!("entry {} of {} changed meanwhile", s.name, s.dir),
            ));
        }
        match s.to {
            Some((fid, kind)) => t.put_dentry(s.dir, &s.name, &DentryRec { fid, kind })?,
            None => t.delete_dentry(s.dir, &s.name)?,
        }
        t.dir_changed(s.dir, s.nlink, Time::now())?;
        t.put_meta(&made_key(intent), &Reply::Ok)?;
        crate::fail::point("set_entry");
        Ok(self.commit_part(step, t, g, maker, Reply::Ok).await?.0)
    }

    #[allow(clippy::too_many_arguments)]
    async fn relink(
        self: &Arc<Self>,
        step: &Step<'_>,
        intent: IntentRef,
        fid: Fid,
        nlink: i32,
        parent: Option<Fid>,
        keep_for: Option<u64>,
        maker: u64,
    ) -> Handled {
        let (_, g) = self.begin().await.into_parts();
        if let Some(r) = self.done_part(intent)? {
            return Ok(r);
        }
        let mut t = Tx::new(&*self.names.store);
        let now = Time::now();
        let r = t.inode(fid)?;
        if let Some(p) = parent {
            r.parent = p;
        }
        r.attr.ctime = now;
        let (reply, freed) = match nlink {
            1 => {
                super::namespace::may_add_link(&r.attr)?;
                let was_orphan = r.attr.nlink == 0;
                r.attr.nlink += 1;
                let reply = Reply::Entry {
                    attr: r.attr.clone(),
                    layout: r.layout.clone(),
                };
                if was_orphan {
                    self.unorphan(&mut t, fid);
                }
                (reply, None)
            }
            -1 => match self.drop_link(&mut t, fid, now, keep_for)? {
                super::namespace::Dropped::Orphaned(f) => (Reply::Orphaned { fid: f }, None),
                super::namespace::Dropped::Freed(objs) => (Reply::Ok, objs),
                super::namespace::Dropped::Linked => (Reply::Ok, None),
            },
            _ => (Reply::Ok, None),
        };
        t.put_meta(&made_key(intent), &reply)?;
        crate::fail::point("relink");
        let orphan = match &reply {
            Reply::Orphaned { fid } => Some(*fid),
            _ => None,
        };
        let (r, ticket) = self.commit_part(step, t, g, maker, reply).await?;
        if let Some(f) = orphan {
            self.orphan_made(f);
        }
        if let Some((fid, objs)) = freed {
            // Committed above: the objects may go.
            self.queue_destroy(fid.to_key().to_vec(), objs, 0, ticket);
        }
        Ok(r)
    }

    /// MDT0's tree lock (see `PeerRequest::TreeLock`).
    async fn tree_lock(self: &Arc<Self>, coord: u32, id: u64, lock: bool) -> Handled {
        let (_, g) = self.begin().await.into_parts();
        let held = read_meta::<(u32, u64)>(&*self.names.store, TREE_LOCK)?;
        let mut t = Tx::new(&*self.names.store);
        match (lock, held) {
            (true, Some(h)) if h == (coord, id) => return Ok(Reply::Ok),
            (true, Some((c, i))) => {
                return Err(ServerError::refused(
                    Errno::EBUSY,
                    format!("the tree lock is held by intent {i} of MDT{c:04x}"),
                ))
            }
            (true, None) => {
                crate::fail::point("tree_lock");
                t.put_meta(TREE_LOCK, &(coord, id))?
            }
            (false, Some(h)) if h == (coord, id) => {
                t.batch.delete(Space::Meta, TREE_LOCK.as_bytes().to_vec())
            }
            (false, _) => return Ok(Reply::Ok),
        }
        self.commit_step(t, g, Reply::Ok, || {}).await
    }
}
