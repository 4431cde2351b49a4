//! `loom migrate`: a directory, its entries and the inodes of its files
//! move to another MDT while clients use them.
//!
//! An inode keeps its FID when it moves: what clients, the kernel and open
//! handles know of it stays true, and no entry anywhere changes. The MDT
//! it left keeps a record of where it went (`away/`) and answers
//! `Reply::Moved` to any request routed there by it; a client (or a peer
//! MDT) asks again there and remembers. The MDT it came to keeps a record
//! that it is here (`here/`), so that it grants leases on it.
//!
//! One directory at a time, coordinated by the directory's MDT, under its
//! namespace lock from the snapshot to the last batch, so no change
//! there falls between them:
//! 1. new leases on the directory and its inodes are refused, and those
//!    held are recalled (holders of a size report it first);
//! 2. snapshot: the directory's record, entries and xattrs, and each file
//!    named only there (one link, on this MDT, no Data-on-MDT bytes, no
//!    lease left);
//! 3. intent (durable), naming exactly what moves;
//! 4. `AdoptInodes` on the target, durable before its answer, done once
//!    per intent part;
//! 5. one batch: the inodes, xattrs and entries deleted, `away/`
//!    records, the intent's deletion. Then the lock goes, then commit.
//!
//! After a crash the resolver runs 4 and 5 again for the logged inodes:
//! a target that already adopted them answers Ok and keeps what it has
//! (clients may have changed it since), so it rolls forward.

use super::intents::IntentOp;
use super::records::{dentry_prefix, parse_dentry_key, xattr_key, DentryRec, InodeRec};
use super::request::Rq;
use super::tx::{decode_record, read_inode, read_meta, store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::msg::{
    FileKind, IntentRef, MdtRequest, MovedInode, PeerRequest, Reply, ReqCtx, Role,
};
use loom_proto::{Errno, Fid, Name};
use loom_store::kv::{KvStore, Space};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A migration of one directory that this MDT coordinates.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MigrateIntent {
    /// The directory.
    pub dir: Fid,
    /// Where it goes.
    pub to: u32,
    /// The inodes that go with it (the directory first).
    pub fids: Vec<Fid>,
}

const AWAY: &str = "away/";
const HERE: &str = "here/";

fn away_key(fid: Fid) -> String {
    format!("{AWAY}{fid}")
}

fn here_key(fid: Fid) -> String {
    format!("{HERE}{fid}")
}

/// Where the inodes that moved are: those that left this MDT (and the MDT
/// they went to) and those that came to it, from their records in `meta`.
#[derive(Default)]
pub struct Located {
    /// Set once anything moved away or here: until then (the common
    /// case) the checks on every request take no lock.
    any: AtomicBool,
    inner: Mutex<Places>,
    /// Serialises adoptions, in place of the namespace lock: an MDT
    /// moving a directory holds its own namespace lock while it asks
    /// another to adopt, so two moving toward each other must not wait
    /// for each other's. What is adopted is new here: no change reads it.
    pub(super) adopting: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Places {
    away: HashMap<Fid, u32>,
    here: HashSet<Fid>,
}

impl Located {
    /// The records of `store`.
    pub fn load(store: &dyn KvStore) -> Result<Located, ServerError> {
        let mut p = Places::default();
        for (prefix, is_away) in [(AWAY, true), (HERE, false)] {
            for (_, v) in store
                .scan(Space::Meta, prefix.as_bytes(), None, usize::MAX)
                .map_err(store_err)?
            {
                let (fid, mdt): (Fid, u32) = decode_record(&v)?;
                if is_away {
                    p.away.insert(fid, mdt);
                } else {
                    p.here.insert(fid);
                }
            }
        }
        Ok(Located {
            any: AtomicBool::new(!p.away.is_empty() || !p.here.is_empty()),
            inner: Mutex::new(p),
            adopting: tokio::sync::Mutex::new(()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Places> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where `fid` went, if it left this MDT.
    pub fn away(&self, fid: Fid) -> Option<u32> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        self.lock().away.get(&fid).copied()
    }

    /// Whether `fid` came here from another MDT.
    pub fn here(&self, fid: Fid) -> bool {
        self.any.load(Ordering::Acquire) && self.lock().here.contains(&fid)
    }

    /// `fids` are leaving for MDT `to` (where they went wins over
    /// having come here, until [`Located::gone`]).
    fn leaving(&self, fids: &[Fid], to: u32) {
        let mut p = self.lock();
        self.any.store(true, Ordering::Release);
        for f in fids {
            p.away.insert(*f, to);
        }
    }

    /// They left.
    fn gone(&self, fids: &[Fid]) {
        let mut p = self.lock();
        for f in fids {
            p.here.remove(f);
        }
    }

    /// They did not leave after all.
    fn stayed(&self, fids: &[Fid]) {
        let mut p = self.lock();
        for f in fids {
            p.away.remove(f);
        }
    }

    fn arrived(&self, fids: &[Fid]) {
        let mut p = self.lock();
        self.any.store(true, Ordering::Release);
        for f in fids {
            p.away.remove(f);
            p.here.insert(*f);
        }
    }
}

/// What one migration takes: the inodes (the directory first) and the
/// directory's entries, as read under the namespace lock.
struct Snapshot {
    inodes: Vec<MovedInode>,
    entries: Vec<(Name, Fid, FileKind)>,
    stayed: u64,
}

impl MdtService {
    /// `Reply::Moved` if `fid` left this MDT.
    pub(super) fn moved_reply(&self, fid: Option<Fid>) -> Option<Reply> {
        let fid = fid?;
        let mdt = self.dne.located.away(fid)?;
        // How often requests still come here for what moved (`loom df -i`).
        self.stats.count("moved_answers");
        Some(Reply::Moved { fid, mdt })
    }

    /// Whether inode `fid` is kept on this MDT (its FID's sequence is
    /// this MDT's and it did not leave, or it came here).
    pub(super) fn keeps(&self, fid: Fid, fldb_says_here: bool) -> bool {
        self.dne.located.away(fid).is_none() && (fldb_says_here || self.dne.located.here(fid))
    }

    /// Move directory `dir` (on this MDT) to MDT `to`: see the module notes.
    pub(super) async fn migrate(self: &Arc<Self>, ctx: &Rq<'_>, dir: Fid, to: u32) -> Handled {
        if ctx.ctx.uid != 0 {
            return Err(ServerError::refused(
                Errno::EPERM,
                "only root may migrate directories (loom migrate)",
            ));
        }
        let mdts = self.peers.config().await?.indices(Role::Mdt);
        if !mdts.contains(&to) {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("MDT index {to} is not in the file system (MDTs: {mdts:?})"),
            ));
        }
        self.plain_dir(dir, "migrated (the tree under it is)")?;
        if to == self.index {
            return Ok(Reply::Migrated {
                moved: 0,
                stayed: 0,
            });
        }
        let _one_at_a_time = self.dne.dist.lock().await;
        if self.finish_intents_on(dir).await? > 0 {
            // The directory may have left this MDT with it.
            self.plain_dir(dir, "migrated (the tree under it is)")?;
        }
        let started = std::time::Instant::now();
        // 1. No new leases on it; the ones held are taken back (a size
        // is reported to this MDT before its recall is answered).
        // The directory first: a file made in it from now on gets no
        // lease (a change's leases are granted all or none), so the list
        // of its files read next holds every one that may have a lease.
        let frozen_dir = self.names.leases.freeze(vec![dir]);
        let candidates = self.candidates(dir)?;
        let frozen = self.names.leases.freeze(candidates.clone());
        let held = self.names.leases.held_on(&candidates);
        let recalled = self.names.leases.recall(0, held).await;
        let recall_took = started.elapsed();
        // 2. Snapshot, 3. intent, 4. adopt, 5. batch, under the lock.
        let (_, g) = self.begin().await.into_parts();
        let snap = self.snapshot(dir, true)?;
        let fids: Vec<Fid> = snap.inodes.iter().map(|m| m.fid).collect();
        let mut t = Tx::new(&*self.names.store);
        // Recorded in the changelog (MIGRT) on both MDTs, as the caller's;
        // the intent keeps the caller for a roll-forward.
        let planned = super::changelog::Planned::of(&MdtRequest::Migrate { fid: dir, mdt: to });
        let id = self.log_intent(
            &Rq::plain(ctx.ctx).logging(planned.as_ref()),
            &mut t,
            IntentOp::Migrate(MigrateIntent {
                dir,
                to,
                fids: fids.clone(),
            }),
        )?;
        let ticket = self.apply_step(t)?;
        self.commit_through(ticket).await?;
        crate::fail::point("migrate:logged");
        let logged_at = started.elapsed();
        let moved = fids.len() as u64;
        let stayed = snap.stayed;
        // Left to the resolver if a step fails: it rolls forward.
        let r = self.move_out(id, dir, to, snap, g, Some(ctx.ctx)).await;
        self.resolve_on_error(r)?;
        tracing::debug!(
            %dir,
            to,
            moved,
            stayed,
            recall_ms = recall_took.as_millis() as u64,
            logged_ms = logged_at.as_millis() as u64,
            total_ms = started.elapsed().as_millis() as u64,
            "MDT{:04x}: directory migrated",
            self.index
        );
        drop(recalled);
        drop(frozen);
        drop(frozen_dir);
        self.stats.count("migrated_dirs");
        Ok(Reply::Migrated { moved, stayed })
    }

    /// Directory `dir` of this MDT, if it may be moved or restriped: not
    /// the root, plain (`what` says what a striped one is not), not being
    /// removed.
    pub(super) fn plain_dir(&self, dir: Fid, what: &str) -> Result<InodeRec, ServerError> {
        if dir == Fid::ROOT {
            return Err(ServerError::refused(
                Errno::EINVAL,
                format!("the root directory is not {what}: it stays on MDT0000"),
            ));
        }
        let r = read_inode(&*self.names.store, dir)?;
        if r.attr.kind != FileKind::Dir {
            return Err(ServerError::refused(
                Errno::ENOTDIR,
                format!("{dir} is not a directory"),
            ));
        }
        if r.layout.as_ref().and_then(|l| l.dir_shards()).is_some() {
            return Err(ServerError::refused(
                Errno::EOPNOTSUPP,
                format!("{dir} is striped: a striped directory is not {what}"),
            ));
        }
        if self.dne.sealed.contains(dir) {
            return Err(ServerError::refused(
                Errno::EBUSY,
                format!("{dir} is being removed"),
            ));
        }
        Ok(r)
    }

    /// The directory and the inodes named in it that this MDT keeps.
    fn candidates(&self, dir: Fid) -> Result<Vec<Fid>, ServerError> {
        let mut out = vec![dir];
        for (_, v) in self
            .names
            .store
            .scan(Space::Dentries, &dentry_prefix(dir), None, usize::MAX)
            .map_err(store_err)?
        {
            let d: DentryRec = decode_record(&v)?;
            if d.kind != FileKind::Dir {
                out.push(d.fid);
            }
        }
        Ok(out)
    }

    /// What moves with `dir` now (under the namespace lock). With `leased`,
    /// a file another client holds a lease on stays.
    fn snapshot(&self, dir: Fid, leased: bool) -> Result<Snapshot, ServerError> {
        let mut rec = read_inode(&*self.names.store, dir)?;
        // What it inherits from above goes with it, as a remote mkdir
        // gives its directory: its ancestors may not be where it goes.
        if rec.default_stripe.is_none() {
            rec.default_stripe = self.default_stripe(dir)?;
        }
        if rec.default_dir.is_none() {
            rec.default_dir = self.default_dir(dir)?;
        }
        if rec.default_compress.is_none() {
            rec.default_compress = self.default_compress(dir)?;
        }
        let mut s = Snapshot {
            inodes: vec![self.moved_inode(dir, &rec)?],
            entries: Vec::new(),
            stayed: 0,
        };
        for (k, v) in self
            .names
            .store
            .scan(Space::Dentries, &dentry_prefix(dir), None, usize::MAX)
            .map_err(store_err)?
        {
            let Some((_, name)) = parse_dentry_key(&k) else {
                return Err(store_err(format!("malformed entry key in {dir}")));
            };
            let d: DentryRec = decode_record(&v)?;
            s.entries.push((name, d.fid, d.kind));
            if d.kind == FileKind::Dir {
                // Moved by its own migration (the tool goes depth first).
                continue;
            }
            let goes = match read_inode(&*self.names.store, d.fid) {
                Ok(r) => (r.attr.nlink == 1
                    && r.layout.as_ref().is_none_or(|l| l.dom_end() == 0)
                    && (!leased || self.names.leases.held_on(&[d.fid]).is_empty()))
                .then_some(r),
                Err(e) if e.errno() == Errno::ENOENT => None,
                Err(e) => return Err(e),
            };
            match goes {
                Some(r) => s.inodes.push(self.moved_inode(d.fid, &r)?),
                None => s.stayed += 1,
            }
        }
        Ok(s)
    }

    fn moved_inode(&self, fid: Fid, rec: &InodeRec) -> Result<MovedInode, ServerError> {
        let mut xattrs = Vec::new();
        let prefix = fid.to_key();
        for (k, v) in self
            .names
            .store
            .scan(Space::Xattrs, &prefix, None, usize::MAX)
            .map_err(store_err)?
        {
            let name = Name::from(k.get(prefix.len()..).unwrap_or_default());
            xattrs.push((name, v));
        }
        Ok(MovedInode {
            fid,
            record: super::tx::encode_record(rec)?,
            xattrs,
        })
    }

    /// Steps 4 and 5 of intent `id`, under the namespace lock `g`.
    async fn move_out(
        self: &Arc<Self>,
        id: u64,
        dir: Fid,
        to: u32,
        snap: Snapshot,
        g: tokio::sync::MutexGuard<'_, ()>,
        caller: Option<&ReqCtx>,
    ) -> Result<(), ServerError> {
        let fids: Vec<Fid> = snap.inodes.iter().map(|m| m.fid).collect();
        let planned = super::changelog::Planned::of(&MdtRequest::Migrate { fid: dir, mdt: to });
        let planned = planned.filter(|_| caller.is_some());
        let adopt = PeerRequest::AdoptInodes {
            intent: IntentRef {
                coord: self.index,
                id,
                index: 0,
            },
            dir,
            inodes: snap.inodes,
            entries: snap.entries.clone(),
        };
        let step = super::intents::step_for(caller, planned.as_ref());
        match self.mdt_call_as(to, adopt, step).await? {
            Reply::Ok => {}
            other => {
                return Err(ServerError::peer(
                    Errno::EPROTO,
                    format!("MDT{to:04x} answered AdoptInodes with {other:?}"),
                ))
            }
        }
        crate::fail::point("migrate:adopted");
        let mut t = Tx::new(&*self.names.store);
        for f in &fids {
            t.delete_inode(*f)?;
            t.put_meta(&away_key(*f), &(*f, to))?;
            t.batch.delete(Space::Meta, here_key(*f).into_bytes());
        }
        for (name, _, _) in &snap.entries {
            t.delete_dentry(dir, name)?;
        }
        t.batch
            .delete(Space::Intents, super::intents::intent_key(id));
        // Where they went is known before they go: a read that finds
        // them gone (it takes no lock) must find where they are.
        self.dne.located.leaving(&fids, to);
        let log = match (&planned, caller) {
            (Some(p), Some(c)) if self.changelog_recording() => p.records(&t, c)?,
            _ => Vec::new(),
        };
        let ticket = match self.apply_batch(None, t, false, log) {
            Ok(t) => t,
            Err(e) => {
                self.dne.located.stayed(&fids);
                return Err(e);
            }
        };
        self.dne.located.gone(&fids);
        drop(g);
        self.commit_through(ticket).await?;
        self.forget_later(id, vec![to]);
        Ok(())
    }

    /// Finish migration intent `id` after a crash: what it names still
    /// here goes (the target keeps what it adopted already).
    pub(super) async fn resolve_migrate(
        self: &Arc<Self>,
        id: u64,
        m: &MigrateIntent,
        caller: Option<&ReqCtx>,
    ) -> Result<(), ServerError> {
        let (_, g) = self.begin().await.into_parts();
        if read_inode(&*self.names.store, m.dir).is_err() {
            // Its last batch was applied: only the record is left.
            drop(g);
            return self.set_intent(id, None).await;
        }
        let mut snap = self.snapshot(m.dir, false)?;
        snap.inodes.retain(|i| m.fids.contains(&i.fid));
        self.move_out(id, m.dir, m.to, snap, g, caller).await
    }

    /// Take what another MDT moves here (`PeerRequest::AdoptInodes`).
    pub(super) async fn adopt_inodes(
        self: &Arc<Self>,
        step: &super::changelog::Step<'_>,
        intent: IntentRef,
        dir: Fid,
        inodes: Vec<MovedInode>,
        entries: Vec<(Name, Fid, FileKind)>,
    ) -> Handled {
        let g = self.dne.located.adopting.lock().await;
        crate::fail::point("adopt_inodes");
        let made = super::remote::made_key(intent);
        if read_meta::<Fid>(&*self.names.store, &made)?.is_some() {
            // Sent again: taken already, and perhaps changed since.
            return Ok(Reply::Ok);
        }
        let mut t = Tx::new(&*self.names.store);
        let mut fids = Vec::with_capacity(inodes.len());
        for m in inodes {
            let rec = InodeRec::decode(&m.record).map_err(|e| {
                ServerError::peer(Errno::EPROTO, format!("inode {}: {}", m.fid, e.msg))
            })?;
            if rec.attr.fid != m.fid {
                return Err(ServerError::peer(
                    Errno::EPROTO,
                    format!("inode record of {} names {}", m.fid, rec.attr.fid),
                ));
            }
            for (name, value) in m.xattrs {
                t.batch.put(Space::Xattrs, xattr_key(m.fid, &name), value);
            }
            t.create_inode(rec);
            t.put_meta(&here_key(m.fid), &(m.fid, self.index))?;
            t.batch.delete(Space::Meta, away_key(m.fid).into_bytes());
            fids.push(m.fid);
        }
        for (name, fid, kind) in entries {
            t.put_dentry(dir, &name, &DentryRec { fid, kind })?;
        }
        t.put_meta(&made, &dir)?;
        let log = self.step_records(step, &t)?;
        let ticket = self.apply_batch(None, t, false, log)?;
        self.dne.located.arrived(&fids);
        drop(g);
        self.commit_through(ticket).await?;
        Ok(Reply::Ok)
    }
}
