//! The metadata target: one shard of the namespace.
//!
//! Inodes, directory entries, xattrs and layouts live in the MDT's
//! key-value store (see [`records`]). Every change runs under one namespace
//! lock and is applied as one atomic batch with a transaction number. The
//! reply to a client leaves before the commit, carrying the number and the
//! last committed one; the client keeps the change until it is committed
//! and replays it if the MDT restarts first ([`syncer`], [`recovery`]):
//! an acknowledged change survives a crash of the MDT while its client
//! lives. Files get their layout at create from objects the MDT precreated
//! on the OSTs ([`objects`]), so a create is one client round trip.

mod acls;
mod attrs;
mod batch;
mod capas;
mod change;
pub mod changelog;
mod datamig;
mod defaults;
mod destroys;
mod dom;
mod fileset;
mod find;
mod fsck;
mod grants;
mod holds;
mod intents;
pub mod leases;
pub mod locks;
mod migrate;
mod moves;
mod namespace;
mod objects;
mod orphans;
mod owners;
mod perm;
mod placement;
mod quota;
mod quota_master;
#[cfg(test)]
mod reach;
pub mod records;
pub mod recovery;
mod remote;
pub mod replies;
pub mod request;
mod restripe;
mod snapshots;
mod staged;
pub mod stored;
pub mod syncer;
mod tx;
mod walk;
mod writeback;

use crate::error::{Handled, ServerError};
use loom_proto::msg::{
    Commit, Effect, FileKind, Lease, MdtRequest, PeerRequest, Reply, ReqCtx, Time,
};
use loom_proto::requests::Shows;
use loom_proto::{lease, Errno, Fid};
use loom_rpc::Channel;
use loom_store::kv::{FjallStore, KvStore, Ticket};
use records::{meta, InodeRec};
use recovery::{Recovery, Registered};
use replies::{ReplyCache, ReplyKey};
use request::{Current, Rq};
use staged::{Later, Session, Staged, Whole};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tx::{read_meta, store_err, Tx};

use crate::peers::Peers;

/// Recalls a change waits for before it is applied anyway, its
/// remaining recalls following it (readers racing it could otherwise
/// keep taking new leases).
const MAX_RECALL_ROUNDS: u32 = 4;

/// How long root's change that took an id past this MDT's share waits
/// for the quota master to hear of it before answering.
const OVERSHOOT_REPORT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Grants a change asks the quota master for before it gives up (each
/// round another change may have spent what the last one got).
const MAX_QUOTA_ROUNDS: u32 = 8;

/// How far the FID allocator skips ahead at start (see [`MdtService::open`]):
/// more than the creates that can be applied but not yet synced at once.
const FID_SKIP_AT_START: u32 = 1 << 16;

/// Shards an auto-split directory gets by default (capped by the MDTs).
pub const DEFAULT_SPLIT_COUNT: u32 = 4;

/// Settings of an MDT.
#[derive(Clone, Debug)]
pub struct MdtOptions {
    /// How long a restarted MDT waits for its clients to replay.
    pub recovery_window: std::time::Duration,
    /// The longest an applied change waits for its commit.
    pub commit_interval: std::time::Duration,
    /// How long a lease holder may take to answer a recall.
    pub recall_timeout: std::time::Duration,
    /// A plain directory past this many entries is striped by the MDT
    /// itself (0: never).
    pub split_entries: u64,
    /// Into this many shards (capped by the MDTs).
    pub split_count: u32,
}

impl Default for MdtOptions {
    fn default() -> Self {
        MdtOptions {
            recovery_window: recovery::DEFAULT_WINDOW,
            commit_interval: syncer::COMMIT_INTERVAL,
            recall_timeout: leases::DEFAULT_RECALL_TIMEOUT,
            split_entries: 0,
            split_count: DEFAULT_SPLIT_COUNT,
        }
    }
}

/// Counters of one MDT, by operation name.
#[derive(Default)]
pub struct MdtStats {
    ops: Mutex<HashMap<&'static str, u64>>,
}

impl MdtStats {
    fn count(&self, op: &'static str) {
        let mut m = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry(op).or_insert(0) += 1;
    }
    /// Snapshot of the counters.
    pub fn snapshot(&self) -> Vec<(String, u64)> {
        let m = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        let mut v: Vec<_> = m.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        v.sort();
        v
    }
}

/// One metadata target. Its state is in three parts, one role each;
/// the top holds only what names and counts the target.
pub struct MdtService {
    index: u32,
    dir: PathBuf,
    /// Connections to the MGS, the other MDTs and the OSTs.
    peers: Arc<Peers>,
    /// The namespace store: records, the lock changes take, and what
    /// lives beside the records (FIDs, objects, orphans, leases, locks).
    names: NameStore,
    /// Commit and recovery: making changes durable, answering for them
    /// after a crash, and what the commit step writes with each change.
    commit: CommitRecovery,
    /// The distributed namespace: the other MDTs, the cross-MDT
    /// operations coordinated here, and what moved or is moving.
    dne: Distributed,
    /// Operation counters.
    pub stats: MdtStats,
    /// The snapshot barriers it holds (`snapshots`).
    barriers: crate::barrier::Barriers,
    /// Its snapshots' images opened to be read, by snapshot.
    images: Mutex<std::collections::HashMap<u32, Arc<MdtService>>>,
    /// Verifies every record against its checksum (`loom scrub`).
    scrub: Arc<crate::scrub::Scrub>,
}

/// The namespace store of an MDT.
struct NameStore {
    store: Arc<dyn KvStore>,
    /// Serialises namespace changes (not reads); taken only through
    /// [`MdtService::begin`].
    ns: tokio::sync::Mutex<()>,
    /// (sequence, next oid) for new FIDs.
    fid_alloc: Mutex<Option<(u64, u32)>>,
    /// Object ids precreated on each OST, in memory only (see `objects`).
    pools: objects::Pools,
    /// File data migrations in progress (see `datamig`).
    datamigs: datamig::DataMigs,
    /// Unlinked files kept for the clients that have them open.
    orphans: orphans::Orphans,
    /// Files whose objects are to be destroyed once their unlink commits.
    destroys: Arc<destroys::Destroys>,
    /// A task tells OSTs the owners noted and not told yet (`owners`).
    owner_retrying: std::sync::atomic::AtomicBool,
    inode_count: AtomicU64,
    /// What clients may keep knowing until recalled.
    leases: Arc<leases::Leases>,
    /// File locks held by clients (see `locks`).
    locks: locks::Locks,
    /// What new entries inherit, per directory (see `defaults`).
    defaults: defaults::Defaults,
}

/// Commit and recovery of an MDT.
struct CommitRecovery {
    /// Makes applied changes durable, many at a time.
    syncer: syncer::Syncer,
    /// Transaction numbers given and committed.
    commits: Arc<syncer::CommitState>,
    /// Clients that may hold changes not yet committed.
    clients: Registered,
    /// The replays after a restart.
    recovery: Recovery,
    /// Replies of applied changes, for resends.
    replies: ReplyCache,
    /// Set by [`MdtService::stop`]: replies are held back.
    stopping: std::sync::atomic::AtomicBool,
    /// The record of committed changes, and its consumers.
    changelog: changelog::Changelog,
    /// The inodes held per user, group and project, and the grants.
    quotas: quota::Quotas,
}

/// The distributed namespace, as one MDT takes part in it.
struct Distributed {
    /// Serialises the cross-MDT operations this MDT coordinates (held
    /// across their steps on other MDTs, which the namespace lock is not).
    dist: tokio::sync::Mutex<()>,
    /// Next intent id (see `intents`).
    next_intent: AtomicU64,
    /// Directories of this MDT being removed by a coordinator.
    sealed: remote::Sealed,
    /// Inodes `loom migrate` moved away from this MDT, or here.
    located: migrate::Located,
    /// Directories restriped after they were made, and being restriped.
    restriped: restripe::Restriped,
    /// When a plain directory splits by itself.
    split: restripe::Split,
    /// Set while intents are being resolved.
    resolving: std::sync::atomic::AtomicBool,
    /// True once the intents found at start are resolved: client changes
    /// wait for it.
    recovered: tokio::sync::watch::Sender<bool>,
    /// Where new directories go (round robin over MDTs, their usage).
    placement: placement::Placement,
    /// Every limit and grant (MDT0 only).
    quota_master: quota_master::Master,
}

impl MdtService {
    /// The integrity counters (`checksum_errors.count`, `scrub.*`).
    pub fn scrub_counters(&self) -> Vec<(String, u64)> {
        self.scrub.counters()
    }

    /// Whether a commit failed: it serves nothing any more (a replicated
    /// MDT's primary is then opened afresh).
    pub fn failed(&self) -> bool {
        self.commit.commits.failed().is_some()
    }

    /// Its commits: how many, the changes they made durable, how long they
    /// took.
    pub fn commit_figures(&self) -> &syncer::CommitFigures {
        &self.commit.commits.figures
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Drop for MdtService {
    fn drop(&mut self) {
        self.names.destroys.close();
        self.stop();
    }
}

impl MdtService {
    /// Open MDT `index` whose target directory is `dir`; MDT0 creates the
    /// root directory on first start.
    pub fn open(index: u32, dir: &Path, peers: Arc<Peers>) -> anyhow::Result<Arc<MdtService>> {
        MdtService::open_with(index, dir, peers, MdtOptions::default())
    }

    /// As [`MdtService::open`], with settings.
    pub fn open_with(
        index: u32,
        dir: &Path,
        peers: Arc<Peers>,
        opts: MdtOptions,
    ) -> anyhow::Result<Arc<MdtService>> {
        let store: Arc<dyn KvStore> = Arc::new(FjallStore::open(&dir.join("db"))?);
        MdtService::open_on(index, dir, store, peers, opts)
    }

    /// As [`MdtService::open_with`], on `store` (the key-value store in
    /// `dir/db`, or one wrapping it: a test's that fails on demand).
    pub fn open_on(
        index: u32,
        dir: &Path,
        store: Arc<dyn KvStore>,
        peers: Arc<Peers>,
        opts: MdtOptions,
    ) -> anyhow::Result<Arc<MdtService>> {
        let walk_store = store.clone();
        // Skip ahead of FIDs that a crash may have lost after they were
        // handed out (applied, seen by a client, not yet synced): a FID is
        // never given to two files, even across a crash.
        let fid_alloc = read_meta::<(u64, u32)>(&*store, meta::FID_ALLOC)?
            .map(|(seq, oid)| (seq, oid.saturating_add(FID_SKIP_AT_START)));
        let (replies, kept, removed) = ReplyCache::load(&*store)?;
        let orphans = orphans::Orphans::load(&*store)?;
        let commits = Arc::new(syncer::CommitState::new(recovery::stored_transno(&*store)?));
        let syncer = syncer::Syncer::start(
            store.clone(),
            commits.clone(),
            &format!("mdt{index}"),
            opts.commit_interval,
        )?;
        let clients = Registered::load(&*store)?;
        // After a clean stop everything acknowledged is committed: no one
        // has anything to replay.
        let clean = read_meta::<u64>(&*store, recovery::CLEAN_STOP)?
            == Some(recovery::stored_transno(&*store)?);
        let waiting = if clean {
            Default::default()
        } else {
            clients.all()
        };
        if !waiting.is_empty() {
            tracing::info!(
                "MDT{index:04x}: waiting up to {:?} for {} clients to replay",
                opts.recovery_window,
                waiting.len()
            );
        }
        let recovery = Recovery::new(waiting, opts.recovery_window);
        tracing::info!("MDT{index:04x}: reply cache holds {kept} records ({removed} expired)");
        let inode_count = read_meta::<u64>(&*store, meta::INODE_COUNT)?.unwrap_or(0);
        let next_intent = MdtService::stored_next_intent(&*store)?;
        let sealed = remote::Sealed::load(&*store)?;
        let located = migrate::Located::load(&*store)?;
        let restriped = restripe::Restriped::load(&*store)?;
        let changelog = changelog::Changelog::load(&*store, index)?;
        let quotas = quota::Quotas::load(&*store, index)?;
        let quota_master = quota_master::Master::load(&*store, index)?;
        let locks = locks::Locks::load(&*store, opts.recovery_window)?;
        let mdt = Arc::new(MdtService {
            index,
            dir: dir.to_path_buf(),
            peers,
            names: NameStore {
                store,
                ns: tokio::sync::Mutex::new(()),
                fid_alloc: Mutex::new(fid_alloc),
                pools: objects::Pools::default(),
                datamigs: datamig::DataMigs::default(),
                orphans,
                destroys: Arc::default(),
                owner_retrying: Default::default(),
                inode_count: AtomicU64::new(inode_count),
                leases: Arc::new(leases::Leases::new(
                    loom_proto::msg::TargetId::mdt(index),
                    opts.recall_timeout,
                )),
                locks,
                defaults: Default::default(),
            },
            commit: CommitRecovery {
                syncer,
                commits,
                clients,
                recovery,
                replies,
                stopping: std::sync::atomic::AtomicBool::new(false),
                changelog,
                quotas,
            },
            dne: Distributed {
                dist: tokio::sync::Mutex::new(()),
                next_intent: AtomicU64::new(next_intent),
                sealed,
                located,
                restriped,
                split: restripe::Split::new(opts.split_entries, opts.split_count),
                resolving: std::sync::atomic::AtomicBool::new(false),
                recovered: tokio::sync::watch::channel(false).0,
                placement: Default::default(),
                quota_master,
            },
            stats: MdtStats::default(),
            barriers: Default::default(),
            images: Default::default(),
            scrub: crate::scrub::Scrub::open(
                format!("MDT{index:04x}"),
                dir,
                Arc::new(walk::MdtWalk {
                    store: walk_store,
                    dir: dir.join("db"),
                }),
            ),
        });
        if index == 0 && tx::read_inode(&*mdt.names.store, Fid::ROOT).is_err() {
            mdt.create_root()?;
        }
        Ok(mdt)
    }

    fn create_root(&self) -> anyhow::Result<()> {
        let now = Time::now();
        let mut t = Tx::new(&*self.names.store);
        t.create_inode(InodeRec::new(
            attrs::new_attr(Fid::ROOT, FileKind::Dir, 0o755, 0, 0, now),
            Fid::ROOT,
        ));
        let ticket = self.apply_step(t)?;
        self.names.store.sync_through(ticket)?;
        tracing::info!("MDT{:04x}: created the root directory", self.index);
        Ok(())
    }

    /// Apply a transaction (visible now, durable once committed) whose
    /// request `rq` will be answered with `reply`: the one commit step of
    /// every change. For a client's change the reply, its transaction
    /// number and (on the client's first change) its registration go into
    /// the same batch (see [`replies`], [`recovery`]).
    ///
    /// Where other clients hold leases on what the change touches, nothing
    /// is applied: it fails with [`ServerError::Recall`], and
    /// [`Self::handle`] recalls them and runs the change again.
    fn apply(&self, rq: &Rq<'_>, t: Tx<'_>, reply: &Reply) -> Result<Ticket, ServerError> {
        let late = rq.cur.is_some_and(|c| c.recall_after);
        self.apply_as(rq, rq.cur.map(|c| (c, reply)), t, false, late)
    }

    /// As [`Self::apply`] for the last step of a cross-MDT operation,
    /// which cannot be run again: applied whatever leases others hold,
    /// which are recalled before the reply leaves.
    fn apply_final(&self, rq: &Rq<'_>, t: Tx<'_>, reply: &Reply) -> Result<Ticket, ServerError> {
        self.apply_as(rq, rq.cur.map(|c| (c, reply)), t, false, true)
    }

    /// As [`Self::apply`] for a step that is not the answer to a client's
    /// request (an intent record, a peer's part, the MDT's own work): no
    /// reply is recorded.
    fn apply_step(&self, t: Tx<'_>) -> Result<Ticket, ServerError> {
        self.apply_batch(None, t, false, Vec::new())
    }

    /// As [`Self::apply`], with the batch handed to the operating system
    /// before returning (it survives a crash of this process, not of the
    /// machine).
    fn apply_flushed(&self, rq: &Rq<'_>, t: Tx<'_>, reply: &Reply) -> Result<Ticket, ServerError> {
        let late = rq.cur.is_some_and(|c| c.recall_after);
        self.apply_as(rq, rq.cur.map(|c| (c, reply)), t, true, late)
    }

    /// The commit step of every change begun by [`Self::begin`]: it is
    /// handed the operation (`rq.op`), the caller (`rq.ctx`: uid, gid,
    /// groups, job id, client) and the transaction with the before- and
    /// after-image of every inode and name it changes (`Tx::images`,
    /// `Tx::name_images`), from which the changelog's records, the quota
    /// counts and the leases to recall are derived.
    fn apply_as(
        &self,
        rq: &Rq<'_>,
        recorded_as: Option<(&Current, &Reply)>,
        mut t: Tx<'_>,
        flushed: bool,
        late: bool,
    ) -> Result<Ticket, ServerError> {
        tracing::trace!(
            op = rq.op.map_or("step", |o| o.name),
            uid = rq.ctx.uid,
            client = rq.ctx.client_id,
            inodes = t.images().count(),
            names = t.name_images().count(),
            "MDT{:04x}: commit step",
            self.index
        );
        let log = match rq.log {
            Some(p) if self.commit.changelog.recording() => p.records(&t, rq.ctx)?,
            _ => Vec::new(),
        };
        let touched = match recorded_as {
            Some((c, reply)) => {
                let e = t.take_effects();
                let touched = leases::Touched::of(reply, &e);
                c.set_effects(e);
                Some((c, touched))
            }
            None => None,
        };
        let Some((c, touched)) = touched else {
            return self.apply_batch(None, t, flushed, log);
        };
        // A client's change stays within this MDT's grants of every
        // limited id it adds to (root's are not limited, as on Linux). A
        // replay is not asked again: it was admitted when first applied,
        // and was acknowledged.
        let quota = quota::Deltas::of(&t);
        if rq.ctx.uid != 0 && c.replay.is_none() {
            self.commit.quotas.admit(&quota)?;
        } else if c.replay.is_none() && self.commit.quotas.any_limited() {
            self.commit.quotas.overshot(&quota);
        }
        let maker = rq.ctx.client_id;
        let r = self.names.leases.apply(maker, rq.tok, &touched, late, || {
            self.apply_counted(recorded_as, t, quota, flushed, log)
        })?;
        match r {
            Ok((ticket, granted, late)) => {
                c.set_leased(granted);
                c.recall_late(late);
                Ok(ticket)
            }
            Err(conflicts) => Err(ServerError::Recall(conflicts)),
        }
    }

    fn apply_batch(
        &self,
        recorded_as: Option<(&Current, &Reply)>,
        t: Tx<'_>,
        flushed: bool,
        log: Vec<loom_proto::changelog::ChangeRec>,
    ) -> Result<Ticket, ServerError> {
        let quota = quota::Deltas::of(&t);
        self.apply_counted(recorded_as, t, quota, flushed, log)
    }

    /// [`Self::apply_batch`] of `t`, whose quota counts `quota` moves
    /// (computed once by a caller that checked them already).
    fn apply_counted(
        &self,
        recorded_as: Option<(&Current, &Reply)>,
        t: Tx<'_>,
        quota: quota::Deltas,
        flushed: bool,
        log: Vec<loom_proto::changelog::ChangeRec>,
    ) -> Result<Ticket, ServerError> {
        let walks_changed = t
            .images()
            .any(|(before, after)| defaults::changes_walks(before, after));
        let (batch, delta) = t.into_batch()?;
        let mut batch = batch;
        let forced = recorded_as.and_then(|(c, _)| c.replay.as_ref().map(|r| r.0));
        let new_client = match recorded_as {
            Some((c, _)) => self.commit.clients.register(&mut batch, c.key.client)?,
            None => false,
        };
        // The count is read and written where batches are applied one at
        // a time: changes that do not share the namespace lock (an
        // adoption, see `migrate`) must not lose each other's.
        let (transno, ticket, was_idle) = self.commit.commits.applied(forced, |transno| {
            let count = if delta != 0 {
                let c =
                    (self.names.inode_count.load(Ordering::Acquire) as i64 + delta).max(0) as u64;
                batch.put(
                    loom_store::kv::Space::Meta,
                    meta::INODE_COUNT.as_bytes().to_vec(),
                    tx::encode_record(&c)?,
                );
                Some(c)
            } else {
                None
            };
            batch.put(
                loom_store::kv::Space::Meta,
                recovery::LAST_TRANSNO.as_bytes().to_vec(),
                tx::encode_record(&transno)?,
            );
            // The changelog's records go in the batch of the change:
            // numbered in commit order, kept exactly when the change is.
            let logged = self.commit.changelog.append(&mut batch, log)?;
            // So do the quota counts: exact whenever the change is kept.
            let counts = if quota.is_empty() {
                Vec::new()
            } else {
                self.commit.quotas.stage(&mut batch, &quota)?
            };
            let recorded = match recorded_as {
                Some((c, reply)) => Some((
                    c.key,
                    self.commit
                        .replies
                        .record(&mut batch, c.key, transno, reply)?,
                )),
                None => None,
            };
            let ticket = if flushed {
                self.names.store.apply_flushed(batch)
            } else {
                self.names.store.apply(batch)
            }
            .map_err(store_err)?;
            if let Some(c) = count {
                self.names.inode_count.store(c, Ordering::Release);
            }
            if let Some(next) = logged {
                self.commit.changelog.published(next);
            }
            if !counts.is_empty() {
                self.commit.quotas.published(counts);
            }
            if let Some((key, pruned)) = recorded {
                self.commit.replies.commit(key, &pruned);
            }
            Ok::<_, ServerError>(ticket)
        })?;
        if walks_changed {
            self.names.defaults.forget();
        }
        if was_idle {
            self.commit.syncer.kick();
        }
        if let Some((c, _)) = recorded_as {
            if new_client {
                self.commit.clients.registered(c.key.client);
            }
            c.applied(transno, new_client);
        }
        Ok(ticket)
    }

    /// A clean stop: no reply leaves after this, everything applied is
    /// committed, and the store says so, so that the next start does not
    /// wait for clients to replay. A change applied after it is never
    /// answered: its client sends it again to the next instance.
    pub fn stop(&self) {
        self.commit.stopping.store(true, Ordering::SeqCst);
        let (transno, _) = self.commit.commits.last_applied();
        let mut b = loom_store::kv::Batch::new();
        match tx::encode_record(&transno) {
            Ok(v) => b.put(
                loom_store::kv::Space::Meta,
                recovery::CLEAN_STOP.as_bytes().to_vec(),
                v,
            ),
            Err(_) => return,
        }
        let r = self
            .names
            .store
            .apply(b)
            .and_then(|t| self.names.store.sync_through(t));
        if let Err(e) = r {
            tracing::error!("MDT{:04x}: recording the clean stop: {e}", self.index);
        }
    }

    /// Wait until `ticket` is on stable storage.
    async fn commit_through(&self, ticket: Ticket) -> Result<(), ServerError> {
        self.commit.syncer.sync(ticket).await.map_err(store_err)
    }

    /// After a change is applied, before its reply: a client's change
    /// leaves at once (the client keeps it for replay until it is
    /// committed), unless it is the client's first (see `recovery`); a
    /// change without a client (a peer's, the MDT's own) waits for the
    /// commit.
    async fn settle(&self, rq: &Rq<'_>, ticket: Ticket) -> Result<(), ServerError> {
        let wait = rq.cur.is_none_or(|c| c.must_commit());
        if wait {
            self.commit_through(ticket).await
        } else {
            Ok(())
        }
    }

    /// Commit everything applied so far.
    async fn commit_all(&self) -> Result<(), ServerError> {
        let (_, ticket) = self.commit.commits.last_applied();
        self.commit_through(ticket).await
    }

    /// This MDT's commit state for a reply whose change got `transno`.
    fn commit_state(&self, transno: u64) -> Commit {
        Commit {
            boot: self.commit.commits.boot,
            transno,
            last_committed: self.commit.commits.last_committed(),
            started_at: self.commit.commits.started_at,
            leased: false,
        }
    }

    /// Start background work: destroy objects of files unlinked before a
    /// restart, and orphans whose lease runs out. After a restart the
    /// clients' replays are applied first (see `recovery`); cross-MDT
    /// operations a crash interrupted are resolved next (see `intents`);
    /// client changes are let in after both.
    pub fn start(self: &Arc<Self>) {
        // Before any request: a migration begun again must not meet the
        // undoing of the one a crash cut.
        self.undo_datamigs_at_start();
        self.spawn_destroyer();
        let me = self.clone();
        tokio::spawn(async move { me.resume_destroys().await });
        self.spawn_owner_retry();
        self.spawn_orphan_sweeper();
        self.spawn_lock_sweeper();
        let me = self.clone();
        tokio::spawn(async move {
            if !me.commit.recovery.is_open() {
                me.replay_all().await;
            }
            me.resolve_at_start();
        });
    }

    fn resolve_at_start(self: &Arc<Self>) {
        match self.has_intents() {
            Ok(false) => {
                self.dne.recovered.send_replace(true);
            }
            Ok(true) => {
                tracing::info!(
                    "MDT{:04x}: resolving interrupted cross-MDT operations",
                    self.index
                );
                self.spawn_resolver();
            }
            Err(e) => {
                // Changes stay shut out rather than risk the namespace.
                tracing::error!("MDT{:04x}: reading the intent log: {e}", self.index);
            }
        }
    }

    /// Wait for the clients' replays, apply them in transaction order,
    /// evict the clients that did not come, commit, and open.
    async fn replay_all(self: &Arc<Self>) {
        let (queue, evicted) = self.commit.recovery.close_when_ready().await;
        let (mut done, mut failed) = (0usize, 0usize);
        for e in queue {
            let key = ReplyKey {
                client: e.ctx.client_id,
                seq: e.ctx.seq,
                acked_below: e.ctx.acked_below,
            };
            let current = Current::replayed(key, e.transno, e.reply);
            let name = e.req.op().name;
            let planned = changelog::Planned::of(&e.req);
            let rq = Rq::change(&e.ctx, &current)
                .operation(e.req.op())
                .logging(planned.as_ref());
            match self.dispatch(&rq, e.req).await {
                Ok(_) => done += 1,
                Err(err) => {
                    failed += 1;
                    self.stats.count("replay_failed");
                    tracing::error!(
                        client = format_args!("{:#x}", key.client),
                        transno = e.transno,
                        "MDT{:04x}: replayed {name} failed: {err}",
                        self.index
                    );
                }
            }
        }
        let mut b = loom_store::kv::Batch::new();
        for c in &evicted {
            b.delete(loom_store::kv::Space::Meta, recovery::client_key(*c));
            self.commit.clients.forget(*c);
            tracing::warn!(
                "MDT{:04x}: evicted client {c:#x}: it did not replay within {:?}; changes it held uncommitted are lost",
                self.index,
                self.commit.recovery.window
            );
        }
        let r = match self.names.store.apply(b).map_err(store_err) {
            Ok(ticket) => self.commit_through(ticket).await,
            Err(e) => Err(e),
        };
        if let Err(e) = r {
            // Serving now could acknowledge changes on top of replays that
            // are not durable: stay shut.
            tracing::error!("MDT{:04x}: committing the replays: {e}", self.index);
            return;
        }
        // At the default log level: a recovery is an event operators want
        // to see.
        tracing::warn!(
            "MDT{:04x}: recovery done: {done} changes replayed, {failed} failed, {} clients evicted",
            self.index,
            evicted.len()
        );
        self.commit.recovery.open();
    }

    /// A session's own request (see [`Session`]), also answered while
    /// the MDT recovers.
    async fn session_request(
        &self,
        ctx: &ReqCtx,
        s: Session,
        ch: Option<&Arc<Channel>>,
    ) -> (Handled, Option<Commit>) {
        let r = match s {
            Session::CommitState => Ok(Reply::Ok),
            Session::Subscribe => match ch {
                Some(ch) => {
                    // Recorded, as a locker is: after a restart the files
                    // it has open are kept until it held them again.
                    match self.note_locker(ctx.client_id, Some(ch)).await {
                        Ok(()) => {
                            self.names.leases.subscribe(ctx.client_id, ch);
                            Ok(Reply::Ok)
                        }
                        Err(e) => Err(e),
                    }
                }
                None => Err(ServerError::refused(
                    Errno::EOPNOTSUPP,
                    "leases need a connection to call back on",
                )),
            },
            Session::Replay { entries, last } => {
                self.take_replay(ctx.client_id, entries, last).await
            }
            Session::Reclaim { locks, held } => {
                self.hold_files(ctx.client_id, &held);
                // Without this instance's commit state: a reclaim may come
                // before the client replayed to it, and a client that sees
                // a new instance outside its replay takes its unreplayed
                // changes for lost.
                let r = self.reclaim_locks(ctx, locks, ch).await;
                return (r, None);
            }
        };
        (r, Some(self.commit_state(0)))
    }

    /// Handle one request that came on connection `ch`; a client's gets
    /// this MDT's commit state with its answer. A change that can be
    /// resent runs once per (client, sequence): a resend waits for its
    /// first execution and gets its recorded reply.
    pub async fn handle(
        self: &Arc<Self>,
        ctx: &ReqCtx,
        req: MdtRequest,
        ch: Option<&Arc<Channel>>,
    ) -> (Handled, Option<Commit>) {
        self.stats.count(req.op().name);
        if let Some(e) = self.commit.commits.failed() {
            return (Err(self.stopped(e)), None);
        }
        if let Some(root) = ctx.fileset {
            if let Err(e) = self.confine(root, &req).await {
                return (Err(e), None);
            }
        }
        if ctx.client_id == 0 || ctx.seq == 0 {
            // A peer MDT or a tool without a sequence: no commit state.
            return (self.dispatch(&Rq::plain(ctx), req).await, None);
        }
        let op = req.op().name;
        let later = match Staged::of(req) {
            Staged::Session(s) => return self.session_request(ctx, s, ch).await,
            Staged::Batch(items) => return self.batch(ctx, items, ch).await,
            Staged::Later(l) => l,
        };
        if !self.commit.recovery.is_open() {
            self.commit.recovery.wait_open().await;
        }
        crate::fail::request(op);
        let req = match later {
            Later::Whole(Whole::Sync) => {
                let r = self.commit_all().await.map(|_| Reply::Ok);
                return (r, Some(self.commit_state(0)));
            }
            Later::Whole(Whole::Disconnect) => {
                self.names.leases.unsubscribe(ctx.client_id);
                self.names.locks.drop_client(ctx.client_id);
                // Its orphans go at the next sweep (`sweep_unheld`).
                self.names.leases.holds.drop_client(ctx.client_id);
                self.undo_datamigs_of(ctx.client_id).await;
                if let Err(e) = self.forget_lockers(&[ctx.client_id]).await {
                    return (Err(e), Some(self.commit_state(0)));
                }
                let r = self.disconnect(ctx.client_id).await.map(|_| Reply::Ok);
                return (r, Some(self.commit_state(0)));
            }
            Later::Op(r) => r,
            Later::Lock(l) => {
                let r = self.lock_request(ctx, l, ch).await;
                return (r, Some(self.commit_state(0)));
            }
        };
        // Every change waits for the intents a crash left to be resolved,
        // also one that is not answered from the reply cache (a restripe
        // or migrate resent after the restart would otherwise start over
        // beside the one being finished).
        if req.op().effect != Effect::Reads && !*self.dne.recovered.borrow() {
            let mut rx = self.dne.recovered.subscribe();
            let _ = rx.wait_for(|done| *done).await;
        }
        // A directory another client writes back: its changes are sent
        // before this request runs, which then sees them (see
        // `writeback`). Under recall until this is answered. (Asking for
        // the lease is not an access: it is refused while held.)
        let _written_back = {
            let named = match &req {
                MdtRequest::TakeWriteBack { .. } => Vec::new(),
                r => writeback::named_dirs(r),
            };
            let wb: Vec<Lease> = named.into_iter().map(Lease::WriteBack).collect();
            let held = self.names.leases.held_elsewhere(ctx.client_id, &wb);
            match held.is_empty() {
                true => None,
                false => Some(self.names.leases.recall(ctx.client_id, held).await),
            }
        };
        let tok = self.names.leases.reading(ctx.client_id, ch);
        let Some(key) = ReplyKey::of(ctx, &req) else {
            return self.read(ctx, req, tok).await;
        };
        let _running = self.commit.replies.enter(key).await;
        match self.commit.replies.lookup(&*self.names.store, key) {
            Ok(Some((transno, r))) => {
                self.stats.count("resent");
                tracing::debug!(
                    client = format_args!("{:#x}", key.client),
                    seq = key.seq,
                    "answered a resend from the reply cache"
                );
                return (Ok(r), Some(self.commit_state(transno)));
            }
            Ok(None) => {}
            Err(e) => return (Err(e), Some(self.commit_state(0))),
        }
        // Run the change; where others hold leases on what it touches,
        // recall them and run it again. The recalled leases stay under
        // recall (granted to no one) until the answer is built.
        let planned = changelog::Planned::of(&req);
        let mut recalled = Vec::new();
        let mut rounds = 0;
        let mut quota_rounds = 0;
        let (r, current) = loop {
            let mut current = Current::new(key);
            current.recall_after = rounds >= MAX_RECALL_ROUNDS;
            let rq = Rq::change(ctx, &current)
                .operation(req.op())
                .with_token(tok)
                .logging(planned.as_ref());
            match self.dispatch(&rq, req.clone()).await {
                Err(ServerError::Recall(leases)) => {
                    rounds += 1;
                    self.stats.count("recalled");
                    recalled.push(self.names.leases.recall(ctx.client_id, leases).await);
                }
                Err(ServerError::QuotaShort { who, need, res }) => {
                    quota_rounds += 1;
                    if let Err(e) = self.quota_round(who, need, res, quota_rounds).await {
                        break (Err(e), current);
                    }
                }
                r => break (r, current),
            }
        };
        let late = current.take_late();
        if !late.is_empty() {
            recalled.push(self.names.leases.recall(ctx.client_id, late).await);
        }
        let r = r.map(|reply| self.with_capa(&req, current.with_effects(reply)));
        drop(recalled);
        let transno = current.transno();
        if self.commit.stopping.load(Ordering::SeqCst) {
            // Perhaps applied after the clean stop's mark: the next
            // instance will not have it, so no reply may say it was done.
            std::future::pending::<()>().await;
        }
        if let Some(e) = self.commit.commits.failed() {
            // Applied, perhaps never to be committed: not acknowledged.
            return (Err(self.stopped(e)), None);
        }
        let mut commit = self.commit_state(transno);
        commit.leased = current.leased();
        (r, Some(commit))
    }

    /// A client's read: answered, and granted the leases its answer
    /// implies when the client subscribed and no change crossed it. The
    /// size of a file another client made and may still be writing is
    /// recalled from it first (it reports what it wrote), and the read
    /// runs again.
    async fn read(
        self: &Arc<Self>,
        ctx: &ReqCtx,
        req: MdtRequest,
        mut tok: Option<leases::ReadToken>,
    ) -> (Handled, Option<Commit>) {
        // Declared with each operation (`Op::shows`).
        if req.op().shows == Shows::Nothing {
            let r = self.dispatch(&Rq::plain(ctx), req).await;
            return (r, Some(self.commit_state(0)));
        }
        let me = self.index;
        let fldb = self.peers.config().await.ok();
        let local = |fid: Fid| {
            self.keeps(
                fid,
                fldb.as_ref().is_some_and(|c| c.mdt_of(fid) == Some(me)),
            )
        };
        let mut recalled = Vec::new();
        let mut rounds = 0;
        let r = loop {
            let r = self.dispatch(&Rq::plain(ctx), req.clone()).await;
            if rounds >= MAX_RECALL_ROUNDS {
                break r;
            }
            let shown = lease::recalled_by_read(&req, r.as_ref().map_err(|e| e.errno()), local);
            let held = self.names.leases.held_elsewhere(ctx.client_id, &shown);
            if held.is_empty() {
                break r;
            }
            rounds += 1;
            self.stats.count("recalled");
            recalled.push(self.names.leases.recall(ctx.client_id, held).await);
            tok = tok.map(|t| self.names.leases.restart_read(t));
        };
        let mut commit = self.commit_state(0);
        if let (Some(tok), Some(_)) = (tok, &fldb) {
            let granted = lease::granted_by_read(&req, r.as_ref().map_err(|e| e.errno()), local);
            commit.leased = self.names.leases.grant_read(tok, &granted);
        }
        drop(recalled);
        (r.map(|reply| self.with_capa(&req, reply)), Some(commit))
    }

    /// Handle a step of an operation another MDT coordinates (the
    /// transport has checked that the sender holds the cluster key).
    pub async fn handle_peer(self: &Arc<Self>, ctx: &ReqCtx, req: PeerRequest) -> Handled {
        self.stats.count(req.op().name);
        if let Some(e) = self.commit.commits.failed() {
            return Err(self.stopped(e));
        }
        self.participant(ctx, req).await
    }

    /// Take a client's replays (see `recovery`); its last waits until the
    /// MDT has applied and committed every client's.
    async fn take_replay(
        &self,
        client: u64,
        entries: Vec<loom_proto::msg::Replayed>,
        last: bool,
    ) -> Handled {
        let n = entries.len();
        match self.commit.recovery.accept(client, entries, last)? {
            recovery::Accepted::Queued => Ok(Reply::Ok),
            recovery::Accepted::Complete => {
                tracing::warn!(
                    "MDT{:04x}: client {client:#x} replayed ({n} in its last request); {} still awaited",
                    self.index,
                    self.commit.recovery.waiting()
                );
                self.commit.recovery.wait_open().await;
                Ok(Reply::Ok)
            }
        }
    }

    /// A client leaves: commit everything and forget its registration.
    async fn disconnect(&self, client: u64) -> Result<(), ServerError> {
        if self.commit.clients.contains(client) {
            let mut b = loom_store::kv::Batch::new();
            b.delete(loom_store::kv::Space::Meta, recovery::client_key(client));
            let ticket = self.names.store.apply(b).map_err(store_err)?;
            self.commit.clients.forget(client);
            return self.commit_through(ticket).await;
        }
        self.commit_all().await
    }

    /// Number of replies in the reply cache.
    pub fn recorded_replies(&self) -> usize {
        self.commit.replies.len()
    }

    /// Run `req` here, or answer where `loom migrate` moved the inode it
    /// is routed by: also when the move happened while it waited for the
    /// namespace lock (it then found nothing).
    async fn dispatch(self: &Arc<Self>, ctx: &Rq<'_>, req: MdtRequest) -> Handled {
        self.names.datamigs.touched(ctx.ctx.client_id, &req);
        let routed_by = req.routed_by();
        if let Some(moved) = self.moved_reply(routed_by) {
            return Ok(moved);
        }
        if let Some(restriped) = self.restriped_reply(&req).await? {
            return Ok(restriped);
        }
        // Derived from each request's declared changelog facts, which
        // are matched exhaustively (`changelog::Planned::of`).
        let splits = changelog::Planned::of(&req).and_then(|p| p.makes_in());
        let r = self.dispatch_here(ctx, req).await;
        if ctx.ctx.uid == 0 && self.commit.quotas.has_overshot() {
            // Root took an id past this MDT's share: the master hears of
            // it before the answer, unless it is slow to (then after).
            let me = self.clone();
            let report = tokio::spawn(async move { me.report_overshoot().await });
            let _ = tokio::time::timeout(OVERSHOOT_REPORT_WAIT, report).await;
        }
        match r {
            Err(e) if e.errno() == Errno::ENOENT => self.moved_reply(routed_by).ok_or(e),
            // Restriped since the client learned the layout (perhaps
            // while this waited for the namespace lock).
            Err(ServerError::Restriped { dir, layout }) => Ok(Reply::Restriped { dir, layout }),
            r => {
                if let (Some(dir), Ok(_)) = (splits, &r) {
                    self.maybe_split(dir);
                }
                r
            }
        }
    }

    async fn dispatch_here(self: &Arc<Self>, ctx: &Rq<'_>, req: MdtRequest) -> Handled {
        match req {
            MdtRequest::Migrate { fid, mdt } => self.migrate(ctx, fid, mdt).await,
            MdtRequest::Restripe { fid, mdts } => self.restripe(ctx, fid, mdts).await,
            MdtRequest::ReaddirShard { fid, cookie, max } => {
                self.readdir(ctx, fid, cookie, max).await
            }
            MdtRequest::Lookup { parent, name } => self.lookup(ctx, parent, &name).await,
            MdtRequest::GetAttr { fid } => Ok(Reply::Attr(remote::shown_attr(&tx::read_inode(
                &*self.names.store,
                fid,
            )?))),
            MdtRequest::Open { fid, access, hold } => {
                let r = tx::read_inode(&*self.names.store, fid)?;
                perm::may(&perm::Cred::of(ctx), &r, access)?;
                if hold && r.attr.kind == FileKind::File {
                    self.names.leases.holds.hold(fid, ctx.client_id);
                }
                Ok(Reply::Entry {
                    attr: remote::shown_attr(&r),
                    layout: r.layout,
                })
            }
            MdtRequest::SetAttr { fid, set } => self.setattr(ctx, fid, set).await,
            MdtRequest::Create {
                parent,
                name,
                kind,
                perm,
                rdev,
                stripe,
            } => {
                self.create(ctx, parent, &name, kind, perm, rdev, stripe)
                    .await
            }
            MdtRequest::Mkdir { parent, name, perm } => self.mkdir(ctx, parent, &name, perm).await,
            MdtRequest::MkdirStriped {
                parent,
                name,
                perm,
                stripe,
            } => {
                self.may_place_dirs(ctx).await?;
                self.mkdir_striped(ctx, parent, &name, perm, stripe).await
            }
            MdtRequest::Unlink {
                parent,
                name,
                keep_orphan,
            } => {
                let keep = keep_orphan.then_some(ctx.client_id);
                self.unlink(ctx, parent, &name, keep).await
            }
            MdtRequest::Rmdir { parent, name } => self.rmdir(ctx, parent, &name).await,
            MdtRequest::Rename {
                parent,
                name,
                new_parent,
                new_name,
                flags,
                keep_orphan,
            } => {
                let keep = keep_orphan.then_some(ctx.client_id);
                let to = (new_parent, &new_name);
                self.rename(ctx, (parent, &name), to, flags, keep).await
            }
            MdtRequest::ReleaseOrphan { fid } => self.release_orphan(ctx, fid).await,
            MdtRequest::RenewOrphans { fids } => self.renew_orphans(ctx.ctx, &fids),
            MdtRequest::Link { fid, parent, name } => self.link(ctx, fid, parent, &name).await,
            MdtRequest::Symlink {
                parent,
                name,
                target,
            } => self.symlink(ctx, parent, &name, &target).await,
            MdtRequest::Readlink { fid } => {
                let r = tx::read_inode(&*self.names.store, fid)?;
                r.symlink.map(Reply::Link).ok_or_else(|| {
                    ServerError::refused(Errno::EINVAL, format!("{fid} is not a symlink"))
                })
            }
            MdtRequest::Readdir { fid, cookie, max } => self.readdir(ctx, fid, cookie, max).await,
            MdtRequest::GetLayout { fid } => {
                let r = tx::read_inode(&*self.names.store, fid)?;
                r.layout.map(Reply::Layout).ok_or_else(|| {
                    ServerError::refused(Errno::ENODATA, format!("{fid} has no layout"))
                })
            }
            MdtRequest::SetDefaultStripe { fid, spec } => {
                self.set_default_stripe(ctx, fid, spec).await
            }
            MdtRequest::GetDefaultStripe { fid } => Ok(Reply::Stripe(self.default_stripe(fid)?)),
            MdtRequest::SetDefaultLayout { fid, spec } => {
                self.set_default_layout(ctx, fid, spec).await
            }
            MdtRequest::GetDefaultLayout { fid } => {
                Ok(Reply::LayoutSpec(self.default_layout(fid)?))
            }
            MdtRequest::DomWrite { fid, offset, data } => {
                self.dom_write(ctx, fid, offset, data).await
            }
            MdtRequest::DomRead { fid, offset, len } => self.dom_read(fid, offset, len),
            MdtRequest::DomPunch { fid, offset, len } => {
                self.dom_punch(ctx, fid, offset, len).await
            }
            MdtRequest::SetDirDefault { fid, spec } => self.set_dir_default(ctx, fid, spec).await,
            MdtRequest::GetDirDefault { fid } => Ok(Reply::DirDefault(self.default_dir(fid)?)),
            MdtRequest::SetDefaultCompress { fid, compress } => {
                self.set_default_compress(ctx, fid, compress).await
            }
            MdtRequest::GetDefaultCompress { fid } => {
                Ok(Reply::Compress(self.default_compress(fid)?))
            }
            MdtRequest::OpStats => Ok(Reply::OpStats(self.stats.snapshot())),
            MdtRequest::Scrub { cmd } => Ok(Reply::Scrub(self.scrub.command(cmd))),
            MdtRequest::ListObjects { after } => self.list_objects(&after),
            MdtRequest::ReclaimObjects { objs } => self.reclaim_objects(ctx, objs).await,
            MdtRequest::FsckScan { what, after } => self.fsck_scan(what, &after),
            MdtRequest::Find { query, after, max } => self.find(ctx, &query, &after, max),
            MdtRequest::CatalogScan { after, max } => self.catalog_scan(ctx, &after, max),
            MdtRequest::MigrateData { fid, layout } => self.migrate_data(ctx, fid, layout).await,
            MdtRequest::MigrateDataEnd { fid, commit } => {
                self.migrate_data_end(ctx, fid, commit).await
            }
            MdtRequest::FsckRepair { fix } => self.fsck_repair(ctx, fix).await,
            // The server process answers it before it reaches the MDT.
            MdtRequest::JobStats => Err(ServerError::refused(
                Errno::EOPNOTSUPP,
                "job statistics are the server process's",
            )),
            MdtRequest::SetXattr {
                fid,
                name,
                value,
                flags,
            } => self.setxattr(ctx, fid, &name, value, flags).await,
            MdtRequest::GetXattr { fid, name } => self.getxattr(ctx, fid, &name),
            MdtRequest::ListXattr { fid } => self.listxattr(ctx, fid),
            MdtRequest::RemoveXattr { fid, name } => self.removexattr(ctx, fid, &name).await,
            MdtRequest::StatFs => self.statfs(),
            MdtRequest::UpdateSize {
                fid,
                size,
                mtime,
                durable,
            } => self.update_size(ctx, fid, size, mtime, durable).await,
            MdtRequest::AppendReserve { fid, len } => self.append_reserve(ctx, fid, len).await,
            MdtRequest::GetCapa { fid, write } => self.get_capa(ctx, fid, write),
            MdtRequest::GetRoot => self.get_root(ctx.ctx.fileset).await,
            MdtRequest::GrantFids { count } => self.grant_fids(ctx, count).await,
            MdtRequest::TakeWriteBack { dir } => self.take_write_back(ctx, dir).await,
            MdtRequest::MakeAt {
                parent,
                name,
                fid,
                kind,
                perm,
                rdev,
                uid,
                gid,
                atime,
                mtime,
                ctime,
                made,
                target,
                data,
            } => {
                let at = namespace::MadeAt {
                    fid,
                    uid,
                    gid,
                    atime,
                    mtime,
                    ctime,
                    made,
                    data,
                };
                let r = self
                    .make_at(ctx, parent, &name, kind, perm, rdev, target, at)
                    .await;
                if let (FileKind::Dir, Ok(Reply::Entry { attr, .. })) = (kind, &r) {
                    self.inherit_write_back(ctx.ctx.client_id, parent, attr.fid);
                }
                r
            }
            // A client's is taken by `handle`, change by change.
            MdtRequest::Batch { .. } => Err(ServerError::refused(
                Errno::EINVAL,
                "a batch is taken only from a client's session",
            )),
            // A client's are answered by `handle` before this; these are
            // what a caller without a sequence (a peer, a tool) gets.
            MdtRequest::Sync | MdtRequest::Disconnect => self.commit_all().await.map(|_| Reply::Ok),
            MdtRequest::CommitState | MdtRequest::Subscribe => Ok(Reply::Ok),
            MdtRequest::ChangelogRead {
                since,
                max,
                wait_ms,
            } => self.changelog_read(ctx, since, max, wait_ms).await,
            MdtRequest::ChangelogRegister => self.changelog_register(ctx).await,
            MdtRequest::ChangelogClear { user, upto } => {
                self.changelog_clear(ctx, user, upto).await
            }
            MdtRequest::ChangelogDeregister { user } => self.changelog_deregister(ctx, user).await,
            MdtRequest::ChangelogState => Ok(Reply::ChangelogState(self.changelog_state())),
            MdtRequest::QuotaUsage { who } => self.quota_usage(ctx.ctx, who),
            MdtRequest::QuotaCheck => self.quota_check(ctx.ctx).await,
            MdtRequest::QuotaRoom { ids, want } => self.quota_room(ctx.ctx, &ids, want).await,
            MdtRequest::DomRoom { ids, want } => self.dom_room(ctx.ctx, &ids, want).await,
            MdtRequest::SetProject {
                fid,
                projid,
                inherit,
            } => self.set_project(ctx, fid, projid, inherit).await,
            MdtRequest::GetProject { fid } => self.get_project(fid),
            MdtRequest::SetQuota { who, limits } => self.set_quota(ctx, who, limits).await,
            MdtRequest::GetQuota { who } => self.get_quota(ctx.ctx, who).await,
            // Taken in `handle` (see `staged`): they need the connection.
            MdtRequest::Lock { .. }
            | MdtRequest::Unlock { .. }
            | MdtRequest::TestLock { .. }
            | MdtRequest::ReclaimLocks { .. } => Err(ServerError::refused(
                Errno::EPROTO,
                "lock requests come from clients with a sequence number",
            )),
            MdtRequest::Replay { .. } => Err(ServerError::refused(
                Errno::EPROTO,
                "a replay needs the client identity and sequence it was made under",
            )),
        }
    }

    /// The answer of an MDT whose commits failed (see `syncer`).
    fn stopped(&self, why: &str) -> ServerError {
        ServerError::store(format!(
            "MDT{:04x} stopped serving: a commit failed ({why})",
            self.index
        ))
    }

    /// The file system this MDT lives on: (bytes in all, bytes free,
    /// bytes free to this process).
    fn disk(&self) -> Result<(u64, u64, u64), ServerError> {
        let v = nix::sys::statvfs::statvfs(&self.dir).map_err(|e| ServerError::Store {
            errno: Errno(e as i32),
            msg: format!("statvfs {}: {e}", self.dir.display()),
        })?;
        let frsize = v.fragment_size() as u64;
        Ok((
            v.blocks() as u64 * frsize,
            v.blocks_free() as u64 * frsize,
            v.blocks_available() as u64 * frsize,
        ))
    }

    fn statfs(&self) -> Handled {
        let (total, free_bytes, avail) = self.disk()?;
        // An inode costs about 1 KiB in the store: free inodes follow free space.
        let used = self.names.inode_count.load(Ordering::Acquire);
        let free = avail / 1024;
        Ok(Reply::StatFs(loom_proto::msg::StatFs {
            target: Some(loom_proto::msg::TargetId::mdt(self.index)),
            bytes_total: total,
            bytes_free: free_bytes,
            bytes_avail: avail,
            files_total: used + free,
            files_free: free,
            ..loom_proto::msg::StatFs::default()
        }))
    }
}
