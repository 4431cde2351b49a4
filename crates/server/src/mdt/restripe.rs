//! Restriping a plain directory over several MDTs, online: `loom migrate
//! -c`, and the MDT's own auto-split of a directory that passed a
//! configured number of entries (Lustre's `enable_dir_auto_split`).
//!
//! The directory keeps its FID and becomes the master (shard 0); the
//! other shards are made on their MDTs as for a striped mkdir; each entry
//! whose name hashes to another shard moves there (`PutEntries`), and a
//! moved subdirectory's `..` names its shard. Inodes stay where they are:
//! an entry may name an inode on another MDT. Clients that still take the
//! directory for a plain one send a name of another shard, or a listing,
//! to the master: it answers `Reply::Restriped` with the layout, and they
//! send it on (striped listings use `ReaddirShard`).
//!
//! Steps, under an intent: the shards made (their FIDs logged) → new
//! leases on the directory refused, those held recalled → under the
//! namespace lock: the entries read, put in their shards, moved
//! subdirectories' parents set, then one batch: the moved entries gone,
//! the layout striped, the intent deleted → committed before the lock
//! goes and before any client is told (`busy` holds their requests), so
//! that no change reaches a shard the crash of this MDT could take back.
//! After a crash the resolver does it again: the shards are the logged
//! ones, the entries put again (no client could reach the shards yet).

use super::intents::{IntentOp, IntentRec};
use super::records::{dentry_prefix, parse_dentry_key, DentryRec};
use super::request::Rq;
use super::tx::{decode_record, read_inode, store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::msg::{
    DirObject, FileKind, IntentRef, MdtRequest, PeerRequest, Reply, ReqCtx, Role,
};
use loom_proto::{Errno, Fid, Layout, Name};
use loom_store::kv::{KvStore, Space};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// A restripe this MDT coordinates.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RestripeIntent {
    /// The directory.
    pub dir: Fid,
    /// Its shards' MDTs, its own first.
    pub mdts: Vec<u32>,
    /// The shards made so far (empty until all are).
    pub shards: Vec<Fid>,
}

const RESTRIPED: &str = "restriped/";

/// Meta key marking `fid` as a shard (not the master) of a striped
/// directory.
pub fn shard_key(fid: Fid) -> String {
    format!("shard/{fid}")
}

/// Directories of this MDT restriped after they were made (clients may
/// still take them for plain ones), and those being restriped now.
#[derive(Default)]
pub struct Restriped {
    /// Set once a directory here is (being) restriped: until then the
    /// check on every request takes no lock.
    any: std::sync::atomic::AtomicBool,
    inner: Mutex<(HashSet<Fid>, HashSet<Fid>)>,
    changed: tokio::sync::Notify,
}

impl Restriped {
    /// The records of `store`.
    pub fn load(store: &dyn KvStore) -> Result<Restriped, ServerError> {
        let mut done = HashSet::new();
        for (_, v) in store
            .scan(Space::Meta, RESTRIPED.as_bytes(), None, usize::MAX)
            .map_err(store_err)?
        {
            done.insert(decode_record::<Fid>(&v)?);
        }
        Ok(Restriped {
            any: (!done.is_empty()).into(),
            inner: Mutex::new((done, HashSet::new())),
            changed: tokio::sync::Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (HashSet<Fid>, HashSet<Fid>)> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether anything was ever restriped here (the fast path).
    fn none(&self) -> bool {
        !self.any.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl MdtService {
    /// `Reply::Restriped` if `req` takes a restriped directory of this MDT
    /// for a plain one; waits while one it names is being restriped.
    pub(super) async fn restriped_reply(
        &self,
        req: &MdtRequest,
    ) -> Result<Option<Reply>, ServerError> {
        if self.dne.restriped.none() {
            return Ok(None);
        }
        let dirs = req.dir_names();
        loop {
            let notified = self.dne.restriped.changed.notified();
            let (busy, done): (bool, Vec<(Fid, Option<&Name>)>) = {
                let g = self.dne.restriped.lock();
                (
                    dirs.iter().any(|(d, _)| g.1.contains(d)),
                    dirs.iter()
                        .filter(|(d, _)| g.0.contains(d))
                        .cloned()
                        .collect(),
                )
            };
            if busy {
                notified.await;
                continue;
            }
            for (dir, name) in done {
                let Some(layout) = read_inode(&*self.names.store, dir)?.layout else {
                    continue;
                };
                let elsewhere = match name {
                    None => true,
                    Some(n) => layout.shard_for(n.as_bytes()).is_some_and(|s| s != dir),
                };
                if elsewhere {
                    return Ok(Some(Reply::Restriped { dir, layout }));
                }
            }
            return Ok(None);
        }
    }

    /// Stripe plain directory `dir` over `mdts` (see the module notes).
    pub(super) async fn restripe(
        self: &Arc<Self>,
        ctx: &Rq<'_>,
        dir: Fid,
        mdts: Vec<u32>,
    ) -> Handled {
        if ctx.ctx.uid != 0 {
            return Err(ServerError::refused(
                Errno::EPERM,
                "only root may restripe directories (loom migrate -c)",
            ));
        }
        self.restripe_as_mdt(dir, mdts, ctx.ctx.clone()).await
    }

    /// [`Self::restripe`] for `caller` (the MDT itself, with a default
    /// context, for an auto-split): recorded as its change (LYOUT).
    pub(super) async fn restripe_as_mdt(
        self: &Arc<Self>,
        dir: Fid,
        mdts: Vec<u32>,
        caller: ReqCtx,
    ) -> Handled {
        let all = self.peers.config().await?.indices(Role::Mdt);
        let mut seen = HashSet::new();
        if mdts.len() < 2
            || mdts.first() != Some(&self.index)
            || mdts.iter().any(|m| !all.contains(m) || !seen.insert(*m))
        {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!(
                    "a restripe needs 2 or more distinct MDTs of {all:?}, the directory's own (MDT{:04x}) first; got {mdts:?}",
                    self.index
                ),
            ));
        }
        if self.striped_over(dir, &mdts).await? {
            // Done already: this request resent after a crash, or again.
            return Ok(Reply::Migrated {
                moved: 0,
                stayed: 0,
            });
        }
        self.plain_dir(dir, "restriped again")?;
        if super::tx::read_meta::<Fid>(&*self.names.store, &shard_key(dir))?.is_some() {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("{dir} is a shard of a striped directory"),
            ));
        }
        let _one_at_a_time = self.dne.dist.lock().await;
        if self.finish_intents_on(dir).await? > 0 {
            if self.striped_over(dir, &mdts).await? {
                return Ok(Reply::Migrated {
                    moved: 0,
                    stayed: 0,
                });
            }
            self.plain_dir(dir, "restriped again")?;
        }
        let mut t = Tx::new(&*self.names.store);
        let m = RestripeIntent {
            dir,
            mdts,
            shards: Vec::new(),
        };
        let planned = super::changelog::Planned::of(&MdtRequest::Restripe {
            fid: dir,
            mdts: m.mdts.clone(),
        });
        let id = self.log_intent(
            &Rq::plain(&caller).logging(planned.as_ref()),
            &mut t,
            IntentOp::Restripe(m.clone()),
        )?;
        let ticket = self.apply_step(t)?;
        self.commit_through(ticket).await?;
        let r = self.run_restripe(id, m, Some(caller)).await;
        self.resolve_on_error(r)
    }

    /// Whether `dir` is striped over `mdts` already, in that order.
    async fn striped_over(&self, dir: Fid, mdts: &[u32]) -> Result<bool, ServerError> {
        let rec = read_inode(&*self.names.store, dir)?;
        let Some(shards) = rec.layout.as_ref().and_then(|l| l.dir_shards()) else {
            return Ok(false);
        };
        if shards.len() != mdts.len() {
            return Ok(false);
        }
        for (shard, mdt) in shards.iter().zip(mdts) {
            if self.owner_of(*shard).await? != *mdt {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The steps of restripe intent `id` from wherever it stands.
    pub(super) async fn run_restripe(
        self: &Arc<Self>,
        id: u64,
        mut m: RestripeIntent,
        caller: Option<ReqCtx>,
    ) -> Handled {
        let rec = read_inode(&*self.names.store, m.dir)?;
        if rec.layout.as_ref().and_then(|l| l.dir_shards()).is_some() {
            // Its last batch was applied: only the record was left.
            self.set_intent(id, None).await?;
            return Ok(Reply::Migrated {
                moved: 0,
                stayed: 0,
            });
        }
        if m.shards.len() != m.mdts.len() {
            // As a striped mkdir makes its shards: with the directory's
            // effective defaults (its own or inherited), so that a shard on
            // another MDT never walks up the tree for them.
            let shape = DirObject {
                parent: rec.parent,
                perm: rec.attr.perm,
                uid: rec.attr.uid,
                gid: rec.attr.gid,
                time: rec.attr.ctime,
                default_stripe: self.default_stripe(m.dir)?,
                others: None,
                default_dir: self.default_dir(m.dir)?,
                default_compress: self.default_compress(m.dir)?,
                projid: rec.attr.projid,
                proj_inherit: rec.proj_inherit,
                acl: rec.acl.clone(),
                default_acl: rec.default_acl.clone(),
            };
            let mut shards = vec![m.dir];
            for (k, mdt) in m.mdts.iter().enumerate().skip(1) {
                let part = PeerRequest::MakeDirObject {
                    intent: IntentRef {
                        coord: self.index,
                        id,
                        index: k as u32,
                    },
                    dir: shape.clone(),
                    // A restripe is root's (or the MDT's own).
                    quota: false,
                };
                match self.mdt_call(*mdt, part).await? {
                    Reply::Entry { attr, .. } => shards.push(attr.fid),
                    other => {
                        return Err(ServerError::peer(
                            Errno::EPROTO,
                            format!("MakeDirObject answered {other:?}"),
                        ))
                    }
                }
            }
            m.shards = shards;
            let rec = IntentRec {
                caller: caller.clone(),
                ..IntentRec::new(None, IntentOp::Restripe(m.clone()))
            };
            self.set_intent(id, Some(&rec)).await?;
        }
        crate::fail::point("restripe:shards_made");
        let layout = Layout::dir_striped(m.shards.clone());
        // No lease on the directory's names from now on; those held go.
        let frozen = self.names.leases.freeze(vec![m.dir]);
        let held = self.names.leases.held_on(&[m.dir]);
        let recalled = self.names.leases.recall(0, held).await;
        let (_, g) = self.begin().await.into_parts();
        self.dne.restriped.lock().1.insert(m.dir);
        self.dne
            .restriped
            .any
            .store(true, std::sync::atomic::Ordering::Release);
        let r = self.move_entries(id, &m, &layout, caller.as_ref()).await;
        let done = match r {
            Ok((ticket, moved)) => {
                let c = self.commit_through(ticket).await;
                c.map(|()| moved)
            }
            Err(e) => Err(e),
        };
        {
            let mut s = self.dne.restriped.lock();
            s.1.remove(&m.dir);
            if done.is_ok() {
                s.0.insert(m.dir);
            }
        }
        self.dne.restriped.changed.notify_waiters();
        drop(g);
        drop(recalled);
        drop(frozen);
        let moved = done?;
        self.stats.count("restriped_dirs");
        self.forget_later(id, m.mdts.clone());
        Ok(Reply::Migrated { moved, stayed: 0 })
    }

    /// Under the namespace lock: each entry of another shard put there,
    /// moved subdirectories' parents set, then the last batch applied.
    async fn move_entries(
        self: &Arc<Self>,
        id: u64,
        m: &RestripeIntent,
        layout: &Layout,
        caller: Option<&ReqCtx>,
    ) -> Result<(loom_store::kv::Ticket, u64), ServerError> {
        let mut per_shard: Vec<Vec<(Name, Fid, FileKind)>> = vec![Vec::new(); m.shards.len()];
        for (k, v) in self
            .names
            .store
            .scan(Space::Dentries, &dentry_prefix(m.dir), None, usize::MAX)
            .map_err(store_err)?
        {
            let Some((_, name)) = parse_dentry_key(&k) else {
                return Err(store_err(format!("malformed entry key in {}", m.dir)));
            };
            let d: DentryRec = decode_record(&v)?;
            let Some(shard) = layout.shard_for(name.as_bytes()) else {
                continue;
            };
            if let Some(i) = m.shards.iter().position(|s| *s == shard).filter(|i| *i > 0) {
                per_shard[i].push((name, d.fid, d.kind));
            }
        }
        let mut t = Tx::new(&*self.names.store);
        let mut moved = 0u64;
        let mut relinks = 0u32;
        for (i, entries) in per_shard.iter().enumerate().skip(1) {
            if entries.is_empty() {
                continue;
            }
            let put = PeerRequest::PutEntries {
                intent: IntentRef {
                    coord: self.index,
                    id,
                    index: 0x1000 + i as u32,
                },
                dir: m.shards[i],
                entries: entries.clone(),
            };
            self.mdt_call(m.mdts[i], put).await?;
            for (name, fid, kind) in entries {
                t.delete_dentry(m.dir, name)?;
                moved += 1;
                if *kind != FileKind::Dir {
                    continue;
                }
                // Its `..` is its shard now.
                let dir = t.inode(m.dir)?;
                dir.attr.nlink = dir.attr.nlink.saturating_sub(1);
                let here = match t.inode(*fid) {
                    Ok(sub) => {
                        sub.parent = m.shards[i];
                        true
                    }
                    Err(e) if e.errno() == Errno::ENOENT => false,
                    Err(e) => return Err(e),
                };
                if !here {
                    relinks += 1;
                    let relink = PeerRequest::Relink {
                        intent: IntentRef {
                            coord: self.index,
                            id,
                            index: 0x10_0000 + relinks,
                        },
                        fid: *fid,
                        nlink: 0,
                        parent: Some(m.shards[i]),
                        keep_for: None,
                        maker: 0,
                    };
                    let owner = self.owner_of(*fid).await?;
                    self.mdt_call(owner, relink).await?;
                }
            }
        }
        crate::fail::point("restripe:entries_put");
        t.inode(m.dir)?.layout = Some(layout.clone());
        t.put_meta(&format!("{RESTRIPED}{}", m.dir), &m.dir)?;
        t.batch
            .delete(Space::Intents, super::intents::intent_key(id));
        // The directory's layout changed: recorded (LYOUT) in this batch.
        let planned = super::changelog::Planned::of(&MdtRequest::Restripe {
            fid: m.dir,
            mdts: m.mdts.clone(),
        });
        let log = match (planned, caller) {
            (Some(p), Some(c)) if self.changelog_recording() => p.records(&t, c)?,
            _ => Vec::new(),
        };
        Ok((self.apply_batch(None, t, false, log)?, moved))
    }

    /// Put entries a restripe moves into shard `dir` of this MDT.
    pub(super) async fn put_entries(
        self: &Arc<Self>,
        dir: Fid,
        entries: Vec<(Name, Fid, FileKind)>,
    ) -> Handled {
        // Not the namespace lock: the coordinator holds its own while it
        // asks (see `migrate`). No client reaches the shard yet.
        let g = self.dne.located.adopting.lock().await;
        crate::fail::point("put_entries");
        let mut t = Tx::new(&*self.names.store);
        t.dir(dir)?;
        let mut subdirs = 0u32;
        for (name, fid, kind) in entries {
            let had = t.dentry(dir, &name)?;
            if had.is_none() && kind == FileKind::Dir {
                subdirs += 1;
            }
            t.put_dentry(dir, &name, &DentryRec { fid, kind })?;
        }
        let d = t.inode(dir)?;
        d.attr.nlink = d.attr.nlink.saturating_add(subdirs);
        let ticket = self.apply_step(t)?;
        drop(g);
        self.commit_through(ticket).await?;
        Ok(Reply::Ok)
    }

    /// A plain directory that passed the configured number of entries
    /// after a change in it: restripe it in the background.
    pub(super) fn maybe_split(self: &Arc<Self>, dir: Fid) {
        let Some(limit) = self.dne.split.entries else {
            return;
        };
        // Counting costs a scan of up to `limit` keys: every 64th change.
        let tick = self
            .dne
            .split
            .ticks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if !tick.is_multiple_of(64) {
            return;
        }
        let Ok(r) = read_inode(&*self.names.store, dir) else {
            return;
        };
        let shard = super::tx::read_meta::<Fid>(&*self.names.store, &shard_key(dir));
        if r.layout.is_some() || dir == Fid::ROOT || !matches!(shard, Ok(None)) {
            return;
        }
        let Ok(n) = self
            .names
            .store
            .scan(
                Space::Dentries,
                &dentry_prefix(dir),
                None,
                limit as usize + 1,
            )
            .map(|v| v.len())
        else {
            return;
        };
        if (n as u64) <= limit
            || !self
                .dne
                .split
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(dir)
        {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            let mdts = match me.peers.config().await {
                Ok(c) => c.indices(Role::Mdt),
                Err(_) => Vec::new(),
            };
            let pos = mdts.iter().position(|m| *m == me.index).unwrap_or(0);
            let count = (me.dne.split.count as usize).min(mdts.len());
            let pick: Vec<u32> = (0..count).map(|k| mdts[(pos + k) % mdts.len()]).collect();
            match me.restripe_as_mdt(dir, pick, ReqCtx::default()).await {
                Ok(_) => tracing::info!(
                    "MDT{:04x}: directory {dir} passed {limit} entries: split over {count} MDTs",
                    me.index
                ),
                Err(e) => tracing::warn!("MDT{:04x}: auto-split of {dir}: {e}", me.index),
            }
            me.dne
                .split
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&dir);
        });
    }
}

/// Auto-split settings and state.
#[derive(Default)]
pub struct Split {
    /// Split a plain directory past this many entries (None: never).
    pub entries: Option<u64>,
    /// Into this many shards (capped by the MDTs).
    pub count: u32,
    ticks: std::sync::atomic::AtomicU64,
    running: Mutex<HashSet<Fid>>,
}

impl Split {
    /// Settings: past `entries` (0: never), into `count` shards.
    pub fn new(entries: u64, count: u32) -> Split {
        Split {
            entries: (entries > 0).then_some(entries),
            count: count.max(2),
            ..Split::default()
        }
    }
}
