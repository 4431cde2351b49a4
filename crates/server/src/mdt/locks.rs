//! File locks held across clients (flock, POSIX record locks, OFD locks):
//! the MDT of a file's inode keeps its locks, in memory.
//!
//! - **Grants.** A lock is granted when no lock of another owner in its
//!   range is in the way (shared locks coexist); an owner's own locks on
//!   the range are replaced, split or merged as POSIX says
//!   ([`loom_proto::lock::apply_own`]).
//! - **Waits.** A waiting request (F_SETLKW) is held here until the lock
//!   is granted or [`LOCK_POLL`] passed (then `Blocked`: the client asks
//!   again), woken by every release. While it waits its owner is noted as
//!   waiting for the owners in its way, and a wait that would close a
//!   cycle of owners answers EDEADLK (within this MDT's files).
//! - **Who is alive.** Each client's locks go with it: at its clean
//!   disconnect, at eviction, and when the connection it locked on has
//!   been dead for [`DEAD_CLIENT_AFTER`] without a reconnect (a client
//!   that reconnects sends its locks again, `ReclaimLocks`).
//! - **Restarts.** Locks are not stored; clients hold them again. The
//!   clients that took locks here are stored (`locker/CLIENT`, once per
//!   client, committed before its first grant), so after a restart no new
//!   lock is granted until each of them reclaimed or the grace period
//!   (the recovery window) ended: a lock held before the crash cannot be
//!   given to someone else meanwhile.

use super::tx::{store_err, Tx};
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::lock::{apply_own, FileLock, LockAnswer, LockOwner};
use loom_proto::msg::{Reply, ReqCtx};
use loom_proto::{Errno, Fid};
use loom_rpc::Channel;
use loom_store::kv::{KvStore, Space};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the MDT holds a waiting lock request before answering
/// `Blocked` (the client asks again at once).
pub const LOCK_POLL: Duration = Duration::from_secs(5);
/// A waiting owner counts as waiting this long after its last request
/// (it asks again within [`LOCK_POLL`]).
const WAIT_NOTED_FOR: Duration = Duration::from_secs(15);
/// A client whose lock connection is dead this long loses its locks.
pub const DEAD_CLIENT_AFTER: Duration = Duration::from_secs(5);
/// How often dead clients are looked for.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

const LOCKER: &str = "locker/";

fn locker_key(client: u64) -> String {
    format!("{LOCKER}{client:016x}")
}

/// The lock table (see the module notes).
pub struct Locks {
    inner: Mutex<Table>,
    /// Woken at every release and drop.
    released: tokio::sync::Notify,
}

#[derive(Default)]
struct Table {
    /// Every lock, per file.
    files: HashMap<Fid, Vec<FileLock>>,
    /// Owners waiting, for the owners in their way, until when.
    waits: HashMap<LockOwner, (Vec<LockOwner>, Instant)>,
    /// The connection each client last locked on, and since when it is
    /// seen dead.
    conns: HashMap<u64, (Arc<Channel>, Option<Instant>)>,
    /// Clients recorded in the store as lockers.
    recorded: HashSet<u64>,
    /// After a restart: the recorded lockers that have not reclaimed yet,
    /// and when the grace period ends regardless.
    grace: Option<(HashSet<u64>, Instant)>,
}

impl Table {
    fn conflict(&self, fid: Fid, want: &FileLock) -> Option<FileLock> {
        self.files
            .get(&fid)?
            .iter()
            .find(|l| l.conflicts(want))
            .copied()
    }

    fn in_the_way(&self, fid: Fid, want: &FileLock) -> Vec<LockOwner> {
        let mut v: Vec<LockOwner> = self
            .files
            .get(&fid)
            .map(|ls| {
                ls.iter()
                    .filter(|l| l.conflicts(want))
                    .map(|l| l.owner)
                    .collect()
            })
            .unwrap_or_default();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Set `owner`'s locks on `fid` over `[start, end]` to `new` (None:
    /// unlocked there).
    fn apply(&mut self, fid: Fid, owner: LockOwner, new: Option<FileLock>, start: u64, end: u64) {
        let all = self.files.entry(fid).or_default();
        let (mine, mut others): (Vec<FileLock>, Vec<FileLock>) =
            all.drain(..).partition(|l| l.owner == owner);
        others.extend(apply_own(&mine, new, start, end));
        if others.is_empty() {
            self.files.remove(&fid);
        } else {
            *all = others;
        }
    }

    /// Whether `from` waiting for `holders` would close a cycle.
    fn closes_cycle(&self, from: LockOwner, holders: &[LockOwner]) -> bool {
        let now = Instant::now();
        let mut seen = HashSet::new();
        let mut stack: Vec<LockOwner> = holders.to_vec();
        while let Some(o) = stack.pop() {
            if o == from {
                return true;
            }
            if !seen.insert(o) {
                continue;
            }
            if let Some((next, until)) = self.waits.get(&o) {
                if *until > now {
                    stack.extend(next.iter().copied());
                }
            }
        }
        false
    }

    fn drop_client(&mut self, client: u64) -> usize {
        let mut n = 0;
        self.files.retain(|_, ls| {
            let before = ls.len();
            ls.retain(|l| l.owner.client != client);
            n += before - ls.len();
            !ls.is_empty()
        });
        self.waits.retain(|o, _| o.client != client);
        self.conns.remove(&client);
        n
    }

    fn in_grace(&mut self) -> Option<Instant> {
        let (waiting, until) = self.grace.as_ref()?;
        if waiting.is_empty() || Instant::now() >= *until {
            self.grace = None;
            return None;
        }
        Some(*until)
    }
}

/// What a lock request asks.
pub(super) enum LockReq {
    Lock {
        fid: Fid,
        lock: FileLock,
        wait: bool,
    },
    Unlock {
        fid: Fid,
        owner: u64,
        start: u64,
        end: u64,
    },
    Test {
        fid: Fid,
        lock: FileLock,
    },
}

impl Locks {
    /// Whether the grace period after a restart runs: recorded clients
    /// may still reclaim.
    pub fn in_grace(&self) -> bool {
        self.table().in_grace().is_some()
    }

    /// The table of an MDT opening `store`: the lockers recorded before a
    /// restart have `grace` to reclaim before new locks are granted.
    pub fn load(store: &dyn KvStore, grace: Duration) -> Result<Locks, ServerError> {
        let mut waiting = HashSet::new();
        for (k, _) in store
            .scan(Space::Meta, LOCKER.as_bytes(), None, usize::MAX)
            .map_err(store_err)?
        {
            let hex = k.get(LOCKER.len()..).unwrap_or_default();
            match std::str::from_utf8(hex)
                .ok()
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            {
                Some(c) => {
                    waiting.insert(c);
                }
                None => tracing::warn!("malformed locker record {k:?}: ignored"),
            }
        }
        let table = Table {
            recorded: waiting.clone(),
            grace: (!waiting.is_empty()).then(|| (waiting, Instant::now() + grace)),
            ..Table::default()
        };
        Ok(Locks {
            inner: Mutex::new(table),
            released: tokio::sync::Notify::new(),
        })
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Locks held, and owners waiting (for `loom stats`).
    pub fn counts(&self) -> (usize, usize) {
        let t = self.table();
        let now = Instant::now();
        (
            t.files.values().map(Vec::len).sum(),
            t.waits.values().filter(|(_, u)| *u > now).count(),
        )
    }

    /// Drop every lock of `client` (it left, or was evicted).
    pub fn drop_client(&self, client: u64) {
        let n = self.table().drop_client(client);
        if n > 0 {
            tracing::info!(
                client = format_args!("{client:#x}"),
                "dropped {n} file locks of a client that left"
            );
        }
        self.released.notify_waiters();
    }
}

impl MdtService {
    /// A lock request of the client `ctx` on connection `ch`.
    pub(super) async fn lock_request(
        self: &Arc<Self>,
        ctx: &ReqCtx,
        req: LockReq,
        ch: Option<&Arc<Channel>>,
    ) -> Handled {
        match req {
            LockReq::Lock {
                fid,
                mut lock,
                wait,
            } => {
                lock.owner.client = ctx.client_id;
                if let Some(moved) = self.moved_reply(Some(fid)) {
                    return Ok(moved);
                }
                self.lock_inode_here(fid)?;
                check_range(lock.start, lock.end)?;
                self.note_locker(ctx.client_id, ch).await?;
                self.take_lock(fid, lock, wait).await.map(Reply::Lock)
            }
            LockReq::Unlock {
                fid,
                owner,
                start,
                end,
            } => {
                check_range(start, end)?;
                let owner = LockOwner {
                    client: ctx.client_id,
                    owner,
                };
                self.names.locks.table().apply(fid, owner, None, start, end);
                self.names.locks.released.notify_waiters();
                Ok(Reply::Ok)
            }
            LockReq::Test { fid, mut lock } => {
                lock.owner.client = ctx.client_id;
                if let Some(moved) = self.moved_reply(Some(fid)) {
                    return Ok(moved);
                }
                self.lock_inode_here(fid)?;
                // What was held before a restart is known once reclaimed.
                self.wait_grace().await;
                let t = self.names.locks.table();
                Ok(Reply::Lock(match t.conflict(fid, &lock) {
                    Some(c) => LockAnswer::Conflict(c),
                    None => LockAnswer::Granted,
                }))
            }
        }
    }

    /// The inode is kept here (locks live with the inode).
    fn lock_inode_here(&self, fid: Fid) -> Result<(), ServerError> {
        super::tx::read_inode(&*self.names.store, fid).map(|_| ())
    }

    /// Record `client` as a locker (once), and the connection it locks on.
    pub(super) async fn note_locker(
        &self,
        client: u64,
        ch: Option<&Arc<Channel>>,
    ) -> Result<(), ServerError> {
        let first = {
            let mut t = self.names.locks.table();
            if let Some(ch) = ch {
                t.conns.insert(client, (ch.clone(), None));
            }
            !t.recorded.contains(&client)
        };
        if first {
            let mut t = Tx::new(&*self.names.store);
            t.put_meta(&locker_key(client), &())?;
            let ticket = self.apply_step(t)?;
            self.commit_through(ticket).await?;
            self.names.locks.table().recorded.insert(client);
        }
        Ok(())
    }

    async fn take_lock(
        &self,
        fid: Fid,
        lock: FileLock,
        wait: bool,
    ) -> Result<LockAnswer, ServerError> {
        let deadline = tokio::time::Instant::now() + LOCK_POLL;
        loop {
            let released = self.names.locks.released.notified();
            tokio::pin!(released);
            // Registered before the check: a release after it wakes us.
            released.as_mut().enable();
            let grace = {
                let mut t = self.names.locks.table();
                match t.in_grace() {
                    Some(until) => Some(until),
                    None => {
                        let holders = t.in_the_way(fid, &lock);
                        if holders.is_empty() {
                            t.apply(fid, lock.owner, Some(lock), lock.start, lock.end);
                            t.waits.remove(&lock.owner);
                            return Ok(LockAnswer::Granted);
                        }
                        let first = t.conflict(fid, &lock);
                        if !wait {
                            return Ok(first.map_or(LockAnswer::Blocked, LockAnswer::Conflict));
                        }
                        if t.closes_cycle(lock.owner, &holders) {
                            t.waits.remove(&lock.owner);
                            return Err(ServerError::refused(
                                Errno::EDEADLK,
                                format!(
                                    "waiting for the lock on {fid} would deadlock with {holders:?}"
                                ),
                            ));
                        }
                        t.waits
                            .insert(lock.owner, (holders, Instant::now() + WAIT_NOTED_FOR));
                        None
                    }
                }
            };
            if let Some(until) = grace {
                if !wait {
                    // As a lock in the way: the caller may try again.
                    return Ok(LockAnswer::Blocked);
                }
                let until = tokio::time::Instant::from_std(until).min(deadline);
                tokio::select! {
                    _ = tokio::time::sleep_until(until) => {}
                    _ = &mut released => {}
                }
            } else {
                tokio::select! {
                    _ = tokio::time::sleep_until(deadline) => {}
                    _ = &mut released => {}
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(LockAnswer::Blocked);
            }
        }
    }

    /// Until the grace period after a restart ends (every locker
    /// reclaimed, or the time passed).
    async fn wait_grace(&self) {
        loop {
            let released = self.names.locks.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let Some(until) = self.names.locks.table().in_grace() else {
                return;
            };
            tokio::select! {
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(until)) => {}
                _ = &mut released => {}
            }
        }
    }

    /// `ReclaimLocks`: hold again what the client held before its
    /// connection was lost.
    pub(super) async fn reclaim_locks(
        &self,
        ctx: &ReqCtx,
        locks: Vec<(Fid, FileLock)>,
        ch: Option<&Arc<Channel>>,
    ) -> Handled {
        let client = ctx.client_id;
        self.note_locker(client, ch).await?;
        let mut refused = None;
        {
            let mut t = self.names.locks.table();
            // What it held here before is replaced by what it says now.
            t.files.retain(|_, ls| {
                ls.retain(|l| l.owner.client != client);
                !ls.is_empty()
            });
            for (fid, mut l) in locks {
                l.owner.client = client;
                match t.conflict(fid, &l) {
                    None => t.apply(fid, l.owner, Some(l), l.start, l.end),
                    Some(c) => {
                        tracing::warn!(
                            client = format_args!("{client:#x}"),
                            "a reclaimed lock on {fid} is held by another owner meanwhile"
                        );
                        refused.get_or_insert(c);
                    }
                }
            }
            if let Some((waiting, _)) = t.grace.as_mut() {
                waiting.remove(&client);
            }
        }
        self.names.locks.released.notify_waiters();
        Ok(match refused {
            None => Reply::Ok,
            Some(c) => Reply::Lock(LockAnswer::Conflict(c)),
        })
    }

    /// Every [`SWEEP_EVERY`]: the locks of clients whose connection has
    /// been dead for [`DEAD_CLIENT_AFTER`] go, with their locker records;
    /// after the grace period, so do the records of lockers that never
    /// came back.
    pub(super) fn spawn_lock_sweeper(self: &Arc<Self>) {
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_EVERY);
            loop {
                tick.tick().await;
                let Some(me) = me.upgrade() else { return };
                if me
                    .commit
                    .stopping
                    .load(std::sync::atomic::Ordering::Acquire)
                {
                    return;
                }
                let gone = {
                    let mut t = me.names.locks.table();
                    let now = Instant::now();
                    // Waits whose owner stopped asking (it gave up).
                    t.waits.retain(|_, (_, until)| *until > now);
                    let mut gone = Vec::new();
                    for (client, (ch, since)) in t.conns.iter_mut() {
                        if !ch.is_dead() {
                            *since = None;
                            continue;
                        }
                        let s = *since.get_or_insert(now);
                        if now.duration_since(s) >= DEAD_CLIENT_AFTER {
                            gone.push(*client);
                        }
                    }
                    if t.in_grace().is_none() {
                        // Lockers that never reclaimed after a restart.
                        let live: HashSet<u64> = t
                            .files
                            .values()
                            .flatten()
                            .map(|l| l.owner.client)
                            .chain(t.conns.keys().copied())
                            .collect();
                        let stale: Vec<u64> = t
                            .recorded
                            .iter()
                            .filter(|c| !live.contains(c))
                            .copied()
                            .collect();
                        gone.extend(stale);
                    }
                    gone.sort_unstable();
                    gone.dedup();
                    gone
                };
                // Orphans whose holders died, or kept during the grace.
                me.sweep_unheld().await;
                if gone.is_empty() {
                    continue;
                }
                for c in &gone {
                    me.names.locks.drop_client(*c);
                    me.names.leases.holds.drop_client(*c);
                    me.undo_datamigs_of(*c).await;
                }
                if let Err(e) = me.forget_lockers(&gone).await {
                    tracing::warn!("MDT{:04x}: forgetting lockers: {e}", me.index);
                }
            }
        });
    }

    /// Delete the locker records of `clients` (their locks are gone).
    pub(super) async fn forget_lockers(&self, clients: &[u64]) -> Result<(), ServerError> {
        let mut t = Tx::new(&*self.names.store);
        let mut any = false;
        {
            let mut tab = self.names.locks.table();
            for c in clients {
                if tab.recorded.remove(c) {
                    t.batch.delete(Space::Meta, locker_key(*c).into_bytes());
                    any = true;
                }
            }
        }
        if !any {
            // A client that never locked here: nothing to write.
            return Ok(());
        }
        let ticket = self.apply_step(t)?;
        self.commit_through(ticket).await
    }
}

fn check_range(start: u64, end: u64) -> Result<(), ServerError> {
    if start > end {
        return Err(ServerError::refused(
            Errno::EINVAL,
            format!("a lock range ends ({end}) before it starts ({start})"),
        ));
    }
    Ok(())
}
