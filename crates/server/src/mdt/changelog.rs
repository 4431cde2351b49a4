//! The MDT's changelog (see [`loom_proto::changelog`]): what each client
//! operation records ([`Planned::of`], one exhaustive match over the
//! requests), the records the commit step writes in the batch of the
//! change itself ([`Changelog::append`]), and the consumers who read and
//! acknowledge them.
//!
//! Store layout: records in [`Space::Changelog`] under their number (8
//! bytes, big-endian, so a scan returns them in order); the next number
//! under meta key `changelog/next`, written with every record; consumers
//! under `changelog/user/<id>`. The MDT records while a consumer is
//! registered, as Lustre does, so a file system without one pays nothing.

use super::tx::{decode_record, encode_record, read_dentry, read_inode, read_meta, store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::changelog::{ns, set, ChangeKind, ChangeRec, ChangelogState, ChangelogUser};
use loom_proto::msg::{FileKind, MdtRequest, PeerRequest, Reply, ReqCtx, Time};
use loom_proto::{Errno, Fid, Name};
use loom_store::kv::{Batch, KvStore, Space};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Meta key of the number the next record gets.
const NEXT: &str = "changelog/next";
/// Meta key prefix of the consumers.
const USER_PREFIX: &str = "changelog/user/";
/// Records deleted per batch when purging.
const PURGE_BATCH: usize = 4096;
/// Most records one read returns.
pub const MAX_READ: u32 = 4096;
/// Longest a read waits for a first record.
const MAX_WAIT: Duration = Duration::from_secs(10);

fn user_key(id: u32) -> String {
    format!("{USER_PREFIX}{id:08x}")
}

fn rec_key(index: u64) -> Vec<u8> {
    index.to_be_bytes().to_vec()
}

/// What a client operation records, known from the request alone; the
/// FIDs only the change itself learns are filled in at the commit
/// ([`Planned::records`]).
#[derive(Clone, Debug)]
pub struct Planned {
    kind: Kind,
    flags: u32,
}

/// The facts of a planned record.
#[derive(Clone, Debug)]
enum Kind {
    /// A name made: (directory, name).
    Named(ChangeKind, Fid, Name),
    /// A name removed.
    Unnamed(ChangeKind, Fid, Name),
    /// A rename: (from dir, from name, to dir, to name).
    Moved(Fid, Name, Fid, Name),
    /// A change of inode `fid` (attributes, xattrs, layout, close; or its
    /// removal); the name is the xattr's.
    Inode(ChangeKind, Fid, Option<Name>),
    /// The inode the transaction makes, named in directory `parent` on
    /// another MDT (a remote directory, or a striped one's master).
    Made(ChangeKind, Fid),
    /// The inodes the transaction removes, made by a part it undoes.
    Unmade(ChangeKind),
}

impl Planned {
    /// What `req` records when it changes the namespace; `None` for
    /// reads, data, the MDT's own bookkeeping and the changelog's own
    /// requests. Every request is named here: one added later does not
    /// compile until it says what it records.
    pub fn of(req: &MdtRequest) -> Option<Planned> {
        use ChangeKind as K;
        let p = |kind, flags| Some(Planned { kind, flags });
        match req {
            MdtRequest::Create {
                parent, name, kind, ..
            } => {
                let k = if *kind == FileKind::File {
                    K::Create
                } else {
                    K::Mknod
                };
                p(Kind::Named(k, *parent, name.clone()), 0)
            }
            MdtRequest::Mkdir { parent, name, .. }
            | MdtRequest::MkdirStriped { parent, name, .. } => {
                p(Kind::Named(K::Mkdir, *parent, name.clone()), 0)
            }
            MdtRequest::MakeAt {
                parent, name, kind, ..
            } => {
                let k = match kind {
                    FileKind::File => K::Create,
                    FileKind::Dir => K::Mkdir,
                    FileKind::Symlink => K::Symlink,
                    _ => K::Mknod,
                };
                p(Kind::Named(k, *parent, name.clone()), 0)
            }
            MdtRequest::Symlink { parent, name, .. } => {
                p(Kind::Named(K::Symlink, *parent, name.clone()), 0)
            }
            MdtRequest::Link { parent, name, .. } => {
                p(Kind::Named(K::Link, *parent, name.clone()), 0)
            }
            MdtRequest::Unlink { parent, name, .. } => {
                p(Kind::Unnamed(K::Unlink, *parent, name.clone()), 0)
            }
            MdtRequest::Rmdir { parent, name } => {
                p(Kind::Unnamed(K::Rmdir, *parent, name.clone()), 0)
            }
            MdtRequest::Rename {
                parent,
                name,
                new_parent,
                new_name,
                flags,
                ..
            } => {
                let f = if flags & loom_proto::msg::rename_flags::EXCHANGE != 0 {
                    ns::EXCHANGE
                } else {
                    0
                };
                p(
                    Kind::Moved(*parent, name.clone(), *new_parent, new_name.clone()),
                    f,
                )
            }
            MdtRequest::SetProject { fid, .. } => {
                p(Kind::Inode(K::SetAttr, *fid, None), set::PROJID)
            }
            MdtRequest::SetAttr { fid, set: s } => {
                let mut f = 0;
                for (on, bit) in [
                    (s.perm.is_some(), set::MODE),
                    (s.uid.is_some(), set::UID),
                    (s.gid.is_some(), set::GID),
                    (s.size.is_some(), set::SIZE),
                    (s.atime.is_some(), set::ATIME),
                    (s.mtime.is_some(), set::MTIME),
                ] {
                    if on {
                        f |= bit;
                    }
                }
                let k = if s.size.is_some() {
                    K::Truncate
                } else {
                    K::SetAttr
                };
                p(Kind::Inode(k, *fid, None), f)
            }
            MdtRequest::SetXattr { fid, name, .. } => {
                p(Kind::Inode(K::Xattr, *fid, Some(name.clone())), 0)
            }
            MdtRequest::RemoveXattr { fid, name } => {
                p(Kind::Inode(K::Xattr, *fid, Some(name.clone())), ns::REMOVED)
            }
            MdtRequest::SetDefaultStripe { fid, .. }
            | MdtRequest::SetDefaultLayout { fid, .. }
            | MdtRequest::SetDirDefault { fid, .. }
            | MdtRequest::SetDefaultCompress { fid, .. }
            | MdtRequest::Restripe { fid, .. }
            | MdtRequest::MigrateDataEnd { fid, commit: true } => {
                p(Kind::Inode(K::Layout, *fid, None), 0)
            }
            MdtRequest::Migrate { fid, .. } => p(Kind::Inode(K::Migrate, *fid, None), 0),
            MdtRequest::UpdateSize { fid, durable, .. } => {
                let k = if *durable { K::Mtime } else { K::Close };
                p(Kind::Inode(k, *fid, None), 0)
            }
            // Data (as Lustre, writes are seen by their CLOSE), orphans
            // kept and released for open files (their UNLNK was logged),
            // repairs, reads and the MDT's own bookkeeping.
            MdtRequest::DomWrite { .. }
            | MdtRequest::DomPunch { .. }
            | MdtRequest::AppendReserve { .. }
            | MdtRequest::ReleaseOrphan { .. }
            | MdtRequest::RenewOrphans { .. }
            | MdtRequest::ReclaimObjects { .. }
            | MdtRequest::FsckRepair { .. }
            | MdtRequest::Lookup { .. }
            | MdtRequest::GetAttr { .. }
            | MdtRequest::Open { .. }
            | MdtRequest::Readlink { .. }
            | MdtRequest::Readdir { .. }
            | MdtRequest::ReaddirShard { .. }
            | MdtRequest::GetLayout { .. }
            | MdtRequest::GetDefaultStripe { .. }
            | MdtRequest::GetDefaultLayout { .. }
            | MdtRequest::GetDirDefault { .. }
            | MdtRequest::GetDefaultCompress { .. }
            | MdtRequest::GetXattr { .. }
            | MdtRequest::ListXattr { .. }
            | MdtRequest::DomRead { .. }
            | MdtRequest::StatFs
            | MdtRequest::OpStats
            | MdtRequest::Scrub { .. }
            | MdtRequest::ListObjects { .. }
            | MdtRequest::FsckScan { .. }
            | MdtRequest::Find { .. }
            | MdtRequest::CatalogScan { .. }
            // Begun or undone, a data migration changed nothing.
            | MdtRequest::MigrateData { .. }
            | MdtRequest::MigrateDataEnd { commit: false, .. }
            | MdtRequest::JobStats
            | MdtRequest::Replay { .. }
            | MdtRequest::Sync
            | MdtRequest::Disconnect
            | MdtRequest::CommitState
            | MdtRequest::Subscribe
            | MdtRequest::ChangelogRead { .. }
            | MdtRequest::ChangelogRegister
            | MdtRequest::ChangelogClear { .. }
            | MdtRequest::ChangelogDeregister { .. }
            | MdtRequest::ChangelogState
            | MdtRequest::QuotaUsage { .. }
            | MdtRequest::QuotaCheck
            | MdtRequest::QuotaRoom { .. }
            | MdtRequest::DomRoom { .. }
            | MdtRequest::GetProject { .. }
            | MdtRequest::GetCapa { .. }
            | MdtRequest::GetRoot
            // FIDs reserved: nothing in the namespace yet.
            | MdtRequest::GrantFids { .. }
            | MdtRequest::TakeWriteBack { .. }
            // Its changes record what they do, each as if sent alone.
            | MdtRequest::Batch { .. }
            | MdtRequest::SetQuota { .. }
            | MdtRequest::GetQuota { .. }
            // Locks are kept in memory: not changes of the namespace.
            | MdtRequest::Lock { .. }
            | MdtRequest::Unlock { .. }
            | MdtRequest::TestLock { .. }
            | MdtRequest::ReclaimLocks { .. } => None,
        }
    }

    /// The directory a new inode is named in, for a change that makes
    /// one (create, mknod, mkdir, symlink): what may grow a directory
    /// past its split threshold (see `restripe`).
    pub fn makes_in(&self) -> Option<Fid> {
        match &self.kind {
            Kind::Named(
                ChangeKind::Create | ChangeKind::Mknod | ChangeKind::Mkdir | ChangeKind::Symlink,
                dir,
                _,
            ) => Some(*dir),
            _ => None,
        }
    }

    /// The record kind of the client operation.
    pub fn change_kind(&self) -> ChangeKind {
        match &self.kind {
            Kind::Named(k, ..)
            | Kind::Unnamed(k, ..)
            | Kind::Inode(k, ..)
            | Kind::Made(k, _)
            | Kind::Unmade(k) => *k,
            Kind::Moved(..) => ChangeKind::Rename,
        }
    }

    /// What a step another MDT asks of this one records, as its part of
    /// a client's change of kind `of` (see `ReqCtx::step_of`): flagged
    /// [`ns::PART`], the rest of the change being recorded by the MDTs
    /// that did it. Every step is named here, as requests are in
    /// [`Planned::of`].
    pub fn of_step(req: &PeerRequest, of: ChangeKind) -> Option<Planned> {
        let p = |kind| {
            Some(Planned {
                kind,
                flags: ns::PART,
            })
        };
        match req {
            // A remote directory, or a striped one's master (part 0):
            // the directory itself. Other shards are its inner objects.
            PeerRequest::MakeDirObject { intent, dir, .. } if intent.index == 0 => {
                p(Kind::Made(of, dir.parent))
            }
            // Its undo: the directory goes, recorded as the made one was.
            PeerRequest::UndoDirObject { intent } if intent.index == 0 => p(Kind::Unmade(of)),
            PeerRequest::SetEntry { dir, name, to, .. } => match to {
                Some(_) => p(Kind::Named(of, *dir, name.clone())),
                None => p(Kind::Unnamed(of, *dir, name.clone())),
            },
            PeerRequest::Relink { fid, .. }
            | PeerRequest::DestroyDir { fid }
            | PeerRequest::AdoptInodes { dir: fid, .. } => p(Kind::Inode(of, *fid, None)),
            PeerRequest::MakeDirObject { .. }
            | PeerRequest::UndoDirObject { .. }
            | PeerRequest::SealDir { .. }
            | PeerRequest::UnsealDir { .. }
            | PeerRequest::ForgetIntent { .. }
            | PeerRequest::ReadInode { .. }
            | PeerRequest::ReadEntry { .. }
            | PeerRequest::TreeLock { .. }
            | PeerRequest::PutEntries { .. }
            | PeerRequest::QuotaAcquire { .. }
            | PeerRequest::QuotaRelease { .. }
            | PeerRequest::Snapshot { .. } => None,
        }
    }

    /// The records of this operation's transaction `t` (not yet applied,
    /// so the store still shows what it replaces), by `ctx`, without their
    /// numbers. Empty when `t` changes nothing the record is about (a
    /// cross-MDT operation's step that is not this MDT's part).
    pub fn records(&self, t: &Tx<'_>, ctx: &ReqCtx) -> Result<Vec<ChangeRec>, ServerError> {
        let rec = |kind, fid, parent, name| ChangeRec {
            index: 0,
            time: Time::now(),
            kind,
            flags: self.flags,
            fid,
            parent,
            name,
            source: None,
            replaced: None,
            uid: ctx.uid,
            gid: ctx.gid,
            jobid: ctx.jobid.clone(),
            client: ctx.client_id,
        };
        // What a name was before this change (the store is not changed yet).
        let before = |dir: Fid, name: &Name| -> Result<Option<Fid>, ServerError> {
            Ok(read_dentry(t.store(), dir, name)?.map(|d| d.fid))
        };
        let set_to = |dir: Fid, name: &Name| t.name_set(dir, name);
        let last_link = |fid: Fid| matches!(t.touched(fid), Some(None));
        Ok(match &self.kind {
            Kind::Named(k, dir, name) => match set_to(*dir, name) {
                Some(fid) => {
                    let mut r = rec(*k, fid, *dir, Some(name.clone()));
                    // The inode made or linked lives on another MDT.
                    if t.touched(fid).is_none() {
                        r.flags |= ns::PART;
                    }
                    vec![r]
                }
                None => Vec::new(),
            },
            Kind::Unnamed(k, dir, name) => {
                if !t.name_removed(*dir, name) {
                    return Ok(Vec::new());
                }
                match before(*dir, name)? {
                    Some(fid) => {
                        let mut r = rec(*k, fid, *dir, Some(name.clone()));
                        if last_link(fid) {
                            r.flags |= ns::LAST_LINK;
                        }
                        if t.touched(fid).is_none() {
                            r.flags |= ns::PART;
                        }
                        vec![r]
                    }
                    None => Vec::new(),
                }
            }
            Kind::Moved(from, from_name, to, to_name) => {
                let here_to = set_to(*to, to_name);
                let here_from =
                    t.name_removed(*from, from_name) || set_to(*from, from_name).is_some();
                let fid = match (here_to, here_from) {
                    (Some(fid), _) => fid,
                    (None, true) => match before(*from, from_name)? {
                        Some(fid) => fid,
                        None => return Ok(Vec::new()),
                    },
                    (None, false) => return Ok(Vec::new()),
                };
                let mut r = rec(ChangeKind::Rename, fid, *to, Some(to_name.clone()));
                r.source = Some((*from, from_name.clone()));
                if here_to.is_some() && self.flags & ns::EXCHANGE == 0 {
                    r.replaced = before(*to, to_name)?;
                    if r.replaced.is_some_and(last_link) {
                        r.flags |= ns::LAST_LINK;
                    }
                }
                if here_to.is_none() || !here_from {
                    r.flags |= ns::PART;
                }
                vec![r]
            }
            Kind::Inode(k, fid, name) => match t.touched(*fid) {
                Some(Some(r)) => vec![rec(*k, *fid, r.parent, name.clone())],
                // Removed: its parent as it was.
                Some(None) => {
                    let parent = read_inode(t.store(), *fid).map_or(Fid::new(0, 0), |r| r.parent);
                    let mut r = rec(*k, *fid, parent, name.clone());
                    // Gone from here, not from the namespace, when moved.
                    if *k != ChangeKind::Migrate {
                        r.flags |= ns::LAST_LINK;
                    }
                    vec![r]
                }
                None => Vec::new(),
            },
            Kind::Made(k, parent) => t
                .created()
                .iter()
                .map(|fid| rec(*k, *fid, *parent, None))
                .collect(),
            Kind::Unmade(k) => t
                .removed()
                .map(|(fid, was)| {
                    let mut r = rec(*k, fid, was.parent, None);
                    r.flags |= ns::LAST_LINK;
                    r
                })
                .collect(),
        })
    }
}

/// A step another MDT asks of this one for a client's change: the
/// client's context, and what the step records (nothing when it is not
/// part of a recorded change).
pub struct Step<'a> {
    /// The client's context, as the coordinating MDT sent it.
    pub ctx: &'a ReqCtx,
    /// What the step records.
    pub plan: Option<Planned>,
}

/// The changelog of one MDT, in memory: its bounds and consumers (the
/// records themselves are only in the store).
pub struct Changelog {
    state: Mutex<ChangelogState>,
    /// The next record number, published once its batch is applied:
    /// readers following the log wait on it.
    published: tokio::sync::watch::Sender<u64>,
}

impl Changelog {
    /// The changelog of MDT `mdt` as `store` holds it.
    pub fn load(store: &dyn KvStore, mdt: u32) -> Result<Changelog, ServerError> {
        let next = read_meta::<u64>(store, NEXT)?.unwrap_or(1);
        let first = match store
            .scan(Space::Changelog, &[], None, 1)
            .map_err(store_err)?
            .first()
        {
            Some((k, _)) => key_index(k)?,
            None => next,
        };
        let mut users = Vec::new();
        for (_, v) in store
            .scan(Space::Meta, USER_PREFIX.as_bytes(), None, usize::MAX)
            .map_err(store_err)?
        {
            users.push(decode_record::<ChangelogUser>(&v)?);
        }
        Ok(Changelog {
            state: Mutex::new(ChangelogState {
                mdt,
                first,
                next,
                users,
            }),
            published: tokio::sync::watch::channel(next).0,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ChangelogState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether changes are recorded (a consumer is registered).
    pub fn recording(&self) -> bool {
        self.lock().recording()
    }

    /// The log's bounds and consumers.
    pub fn state(&self) -> ChangelogState {
        self.lock().clone()
    }

    /// Number `recs` and add them to `batch`, with the next number.
    /// Called where batches are applied one at a time, so numbers follow
    /// the commit order; returns the next number, to [`Self::published`]
    /// once the batch is applied.
    pub fn append(
        &self,
        batch: &mut Batch,
        recs: Vec<ChangeRec>,
    ) -> Result<Option<u64>, ServerError> {
        if recs.is_empty() {
            return Ok(None);
        }
        let mut next = self.lock().next;
        for mut r in recs {
            r.index = next;
            batch.put(Space::Changelog, rec_key(next), encode_record(&r)?);
            next += 1;
        }
        batch.put(Space::Meta, NEXT.as_bytes().to_vec(), encode_record(&next)?);
        Ok(Some(next))
    }

    /// The batch that [`Self::append`] numbered up to `next` is applied.
    pub fn published(&self, next: u64) {
        self.lock().next = next;
        self.published.send_replace(next);
    }
}

fn key_index(k: &[u8]) -> Result<u64, ServerError> {
    let b: [u8; 8] = k
        .try_into()
        .map_err(|_| store_err(format!("a changelog key of {} bytes", k.len())))?;
    Ok(u64::from_be_bytes(b))
}

fn root_only(ctx: &ReqCtx, what: &str) -> Result<(), ServerError> {
    if ctx.uid == 0 {
        Ok(())
    } else {
        Err(ServerError::refused(
            Errno::EPERM,
            format!("only root may {what} the changelog"),
        ))
    }
}

impl MdtService {
    /// Records from `since` on, at most `max`; waits up to `wait_ms` for
    /// a first one.
    pub(super) async fn changelog_read(
        &self,
        ctx: &ReqCtx,
        since: u64,
        max: u32,
        wait_ms: u32,
    ) -> Handled {
        root_only(ctx, "read")?;
        let max = max.clamp(1, MAX_READ) as usize;
        let wait = Duration::from_millis(wait_ms.into()).min(MAX_WAIT);
        let mut rx = self.commit.changelog.published.subscribe();
        let since = since.max(1);
        if *rx.borrow_and_update() <= since && !wait.is_zero() {
            let _ = tokio::time::timeout(wait, rx.wait_for(|next| *next > since)).await;
        }
        // The state first: a record purged between the two reads is then
        // below `first`, never silently missing.
        let state = self.commit.changelog.state();
        let from = since.max(state.first);
        let after = from.checked_sub(1).map(rec_key);
        let mut records = Vec::new();
        for (k, v) in self
            .names
            .store
            .scan(Space::Changelog, &[], after.as_deref(), max)
            .map_err(store_err)?
        {
            let r: ChangeRec = decode_record(&v)?;
            if key_index(&k)? != r.index {
                return Err(store_err(format!(
                    "changelog record {} stored under {}",
                    r.index,
                    key_index(&k)?
                )));
            }
            records.push(r);
        }
        Ok(Reply::Changelog { records, state })
    }

    /// Register a consumer: it has read nothing before the next record.
    pub(super) async fn changelog_register(&self, rq: &super::Rq<'_>) -> Handled {
        root_only(rq.ctx, "register a consumer of")?;
        let (_, g) = self.begin().await.into_parts();
        let (id, cleared) = {
            let s = self.commit.changelog.lock();
            let id = s.users.iter().map(|u| u.id).max().unwrap_or(0) + 1;
            (id, s.next.saturating_sub(1))
        };
        let user = ChangelogUser {
            id,
            cleared,
            registered: Time::now(),
        };
        let mut t = Tx::new(&*self.names.store);
        t.put_meta(&user_key(id), &user)?;
        // In memory first: a change applied from now on is recorded (one
        // applied before the registration's batch is a record the new
        // consumer skips, as it has `cleared` up to before it).
        self.commit.changelog.lock().users.push(user);
        let reply = Reply::ChangelogUser(id);
        let ticket = match self.apply(rq, t, &reply) {
            Ok(t) => t,
            Err(e) => {
                self.commit.changelog.lock().users.retain(|u| u.id != id);
                return Err(e);
            }
        };
        drop(g);
        self.commit_through(ticket).await?;
        tracing::info!(
            "MDT{:04x}: changelog consumer cl{id} registered",
            self.index
        );
        Ok(reply)
    }

    /// Consumer `user` read up to `upto` (0: every record so far).
    pub(super) async fn changelog_clear(
        self: &Arc<Self>,
        rq: &super::Rq<'_>,
        user: u32,
        upto: u64,
    ) -> Handled {
        root_only(rq.ctx, "acknowledge records of")?;
        let (_, g) = self.begin().await.into_parts();
        let (mut u, last) = {
            let s = self.commit.changelog.lock();
            let u = s.users.iter().find(|u| u.id == user).cloned();
            (
                u.ok_or_else(|| unknown_user(user))?,
                s.next.saturating_sub(1),
            )
        };
        if upto > last {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("record {upto} is not written yet (the last is {last})"),
            ));
        }
        let upto = if upto == 0 { last } else { upto };
        u.cleared = u.cleared.max(upto);
        let mut t = Tx::new(&*self.names.store);
        t.put_meta(&user_key(user), &u)?;
        let ticket = self.apply(rq, t, &Reply::Ok)?;
        {
            let mut s = self.commit.changelog.lock();
            if let Some(x) = s.users.iter_mut().find(|x| x.id == user) {
                *x = u;
            }
        }
        drop(g);
        self.commit_through(ticket).await?;
        self.purge_changelog().await?;
        Ok(Reply::Ok)
    }

    /// Forget consumer `user`.
    pub(super) async fn changelog_deregister(
        self: &Arc<Self>,
        rq: &super::Rq<'_>,
        user: u32,
    ) -> Handled {
        root_only(rq.ctx, "deregister a consumer of")?;
        let (_, g) = self.begin().await.into_parts();
        if !self
            .commit
            .changelog
            .lock()
            .users
            .iter()
            .any(|u| u.id == user)
        {
            return Err(unknown_user(user));
        }
        let mut t = Tx::new(&*self.names.store);
        t.batch.delete(Space::Meta, user_key(user).into_bytes());
        let ticket = self.apply(rq, t, &Reply::Ok)?;
        self.commit.changelog.lock().users.retain(|u| u.id != user);
        drop(g);
        self.commit_through(ticket).await?;
        tracing::info!(
            "MDT{:04x}: changelog consumer cl{user} deregistered",
            self.index
        );
        self.purge_changelog().await?;
        Ok(Reply::Ok)
    }

    /// Delete the records every consumer has read (all of them when none
    /// is registered), a batch at a time.
    pub(super) async fn purge_changelog(&self) -> Result<(), ServerError> {
        loop {
            let upto = {
                let s = self.commit.changelog.lock();
                match s.users.iter().map(|u| u.cleared).min() {
                    Some(c) => c,
                    None => s.next.saturating_sub(1),
                }
            };
            let page = self
                .names
                .store
                .scan(Space::Changelog, &[], None, PURGE_BATCH)
                .map_err(store_err)?;
            let mut b = Batch::new();
            let mut first = None;
            for (k, _) in &page {
                let i = key_index(k)?;
                if i > upto {
                    first = Some(i);
                    break;
                }
                b.delete(Space::Changelog, k.clone());
            }
            let done = first.is_some() || page.len() < PURGE_BATCH;
            if !b.is_empty() {
                let ticket = self.names.store.apply(b).map_err(store_err)?;
                self.commit_through(ticket).await?;
            }
            if done {
                let mut s = self.commit.changelog.lock();
                // Not `next`: a record numbered after the scan (or whose
                // batch is not applied yet) is not purged, and must stay
                // readable.
                s.first = first.unwrap_or(upto.saturating_add(1));
                return Ok(());
            }
        }
    }

    /// The records of step `step`'s transaction `t`, when this MDT
    /// records.
    pub(super) fn step_records(
        &self,
        step: &Step<'_>,
        t: &Tx<'_>,
    ) -> Result<Vec<ChangeRec>, ServerError> {
        match &step.plan {
            Some(p) if self.commit.changelog.recording() => p.records(t, step.ctx),
            _ => Ok(Vec::new()),
        }
    }

    /// Whether this MDT records changes (a consumer is registered).
    pub(super) fn changelog_recording(&self) -> bool {
        self.commit.changelog.recording()
    }

    /// This MDT's changelog bounds and consumers.
    pub fn changelog_state(&self) -> ChangelogState {
        self.commit.changelog.state()
    }
}

fn unknown_user(user: u32) -> ServerError {
    ServerError::refused(
        Errno::ENOENT,
        format!("no changelog consumer cl{user} is registered"),
    )
}
