//! File locks held across clients (flock, POSIX record locks, OFD locks):
//! asked of the MDT of the file's inode (see the server's `mdt::locks`).
//!
//! The client keeps what each of its owners holds, so that:
//! - a close that holds no lock needs no round trip (`holds`);
//! - after its connection to an MDT was lost (the MDT restarted, or the
//!   network), it holds the same locks again (`ReclaimLocks`), within the
//!   MDT's grace period;
//! - a wait whose owner went away (its process was killed while it
//!   waited: the kernel gave up the request and closed the files) gives
//!   up too, and drops the lock if it was granted meanwhile.

use crate::client::Client;
use crate::ctx::Caller;
use loom_proto::lock::{apply_own, FileLock, LockAnswer, LockKind, LockOwner};
use loom_proto::msg::{MdtRequest, Reply, TargetId};
use loom_proto::{Errno, Fid};
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, Weak};
use std::time::Duration;

/// How often connections to MDTs this client locked on are looked at for
/// a loss (then its locks there are reclaimed).
const RECLAIM_TICK: Duration = Duration::from_millis(250);

/// What this client's owners hold, and on which MDTs.
#[derive(Debug, Default)]
pub struct HeldLocks {
    inner: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    /// Per (file, owner): its locks, sorted, not overlapping.
    locks: HashMap<(Fid, u64), Vec<FileLock>>,
    /// The MDT of each file locked.
    mdt_of: HashMap<Fid, u32>,
    /// MDTs locked on, and the address and connection-loss count last
    /// seen for each (a replicated MDT's primary moves).
    mdts: HashMap<u32, (String, u64)>,
    /// Owners whose waits are to give up.
    cancelled: HashSet<(Fid, u64)>,
    /// Owners waiting now.
    waiting: HashMap<(Fid, u64), usize>,
    /// Whether the reclaim task runs.
    watching: bool,
    /// Files this client asked locks on (at most [`LOCKED_MAX`]): a
    /// mount answers their opens so that every close reaches it.
    ever: HashSet<Fid>,
}

/// Most files remembered as locked once; past it the set starts again
/// (an open of a file locked long ago then drops its locks at its
/// release rather than at the close).
const LOCKED_MAX: usize = 1 << 16;

impl HeldLocks {
    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `owner` holds any lock on `fid`, or waits for one.
    pub fn holds(&self, fid: Fid, owner: u64) -> bool {
        let h = self.lock();
        h.locks.contains_key(&(fid, owner)) || h.waiting.contains_key(&(fid, owner))
    }

    fn note(&self, fid: Fid, mdt: u32, owner: u64, new: Option<FileLock>, start: u64, end: u64) {
        let mut h = self.lock();
        let mine = h.locks.remove(&(fid, owner)).unwrap_or_default();
        let after = apply_own(&mine, new, start, end);
        if !after.is_empty() {
            h.locks.insert((fid, owner), after);
            h.mdt_of.insert(fid, mdt);
        } else if !h.locks.keys().any(|(f, _)| *f == fid) {
            h.mdt_of.remove(&fid);
        }
    }

    fn on_mdt(&self, mdt: u32) -> Vec<(Fid, FileLock)> {
        let h = self.lock();
        h.locks
            .iter()
            .filter(|((fid, _), _)| h.mdt_of.get(fid) == Some(&mdt))
            .flat_map(|((fid, _), ls)| ls.iter().map(move |l| (*fid, *l)))
            .collect()
    }
}

/// Marks an owner as waiting while it lives.
struct Waiting<'a> {
    held: &'a HeldLocks,
    key: (Fid, u64),
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut h = self.held.lock();
        if let Some(n) = h.waiting.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                h.waiting.remove(&self.key);
                h.cancelled.remove(&self.key);
            }
        }
    }
}

impl Client {
    /// Take a lock on `fid` for `owner` (a kernel lock owner of this
    /// client) from `start` to `end` (inclusive). Without `wait`, EAGAIN
    /// if another owner's lock is in the way; with it, wait until granted
    /// (EDEADLK if the wait would close a cycle of owners, EINTR if
    /// [`Client::unlock_owner`] gave the owner up meanwhile).
    #[allow(clippy::too_many_arguments)]
    pub async fn lock(
        &self,
        c: &Caller,
        fid: Fid,
        owner: u64,
        kind: LockKind,
        start: u64,
        end: u64,
        wait: bool,
    ) -> Result<(), Errno> {
        self.lock_unless(c, fid, owner, kind, start, end, wait, &|| false)
            .await
    }

    /// [`Client::lock`], whose wait also gives up (EINTR) once `gave_up`
    /// says so, looked at each time the MDT answers (at least every few
    /// seconds: the MDT answers a wait it holds with `Blocked`): a FUSE mount asks whether the waiting
    /// process was killed, since the kernel waits for the answer even
    /// then.
    #[allow(clippy::too_many_arguments)]
    pub async fn lock_unless(
        &self,
        c: &Caller,
        fid: Fid,
        owner: u64,
        kind: LockKind,
        start: u64,
        end: u64,
        wait: bool,
        gave_up: &(dyn Fn() -> bool + Send + Sync),
    ) -> Result<(), Errno> {
        let lock = self.lock_of(c, owner, kind, start, end);
        {
            let mut h = self.locks.lock();
            if h.ever.len() >= LOCKED_MAX {
                h.ever.clear();
            }
            h.ever.insert(fid);
        }
        let _waiting = wait.then(|| {
            let mut h = self.locks.lock();
            *h.waiting.entry((fid, owner)).or_default() += 1;
            Waiting {
                held: &self.locks,
                key: (fid, owner),
            }
        });
        loop {
            let target = self.router.mdt_of(fid).await?;
            // The MDT notes this client as a locker at its first request,
            // and after a restart waits for its reclaim, even if empty.
            self.watch_mdt(target.index);
            let req = MdtRequest::Lock { fid, lock, wait };
            let answer = match self.mdt_call(c, fid, req).await? {
                Reply::Lock(a) => a,
                other => return Err(crate::io::file::unexpected("Lock", &other)),
            };
            let gave_up =
                wait && (self.locks.lock().cancelled.contains(&(fid, owner)) || gave_up());
            match answer {
                LockAnswer::Granted => {
                    self.locks
                        .note(fid, target.index, owner, Some(lock), start, end);
                    if gave_up {
                        self.unlock(c, fid, owner, start, end).await?;
                        return Err(Errno::EINTR);
                    }
                    return Ok(());
                }
                LockAnswer::Conflict(_) => return Err(Errno::EAGAIN),
                LockAnswer::Blocked if !wait => return Err(Errno::EAGAIN),
                LockAnswer::Blocked if gave_up => return Err(Errno::EINTR),
                LockAnswer::Blocked => continue,
            }
        }
    }

    /// Drop what `owner` holds on `fid` from `start` to `end` (a lock
    /// across either end is split).
    pub async fn unlock(
        &self,
        c: &Caller,
        fid: Fid,
        owner: u64,
        start: u64,
        end: u64,
    ) -> Result<(), Errno> {
        let target = self.router.mdt_of(fid).await?;
        let req = MdtRequest::Unlock {
            fid,
            owner,
            start,
            end,
        };
        self.mdt_call(c, fid, req).await?;
        self.locks.note(fid, target.index, owner, None, start, end);
        Ok(())
    }

    /// The first lock of another owner in the way of the one described
    /// (F_GETLK), if any.
    pub async fn test_lock(
        &self,
        c: &Caller,
        fid: Fid,
        owner: u64,
        kind: LockKind,
        start: u64,
        end: u64,
    ) -> Result<Option<FileLock>, Errno> {
        let lock = self.lock_of(c, owner, kind, start, end);
        match self
            .mdt_call(c, fid, MdtRequest::TestLock { fid, lock })
            .await?
        {
            Reply::Lock(LockAnswer::Conflict(l)) => Ok(Some(l)),
            Reply::Lock(_) => Ok(None),
            other => Err(crate::io::file::unexpected("TestLock", &other)),
        }
    }

    /// `owner` is done with `fid` (the process closed it, or the open
    /// file description went): everything it holds there goes, and a wait
    /// of it gives up. No round trip if it holds nothing.
    pub async fn unlock_owner(&self, c: &Caller, fid: Fid, owner: u64) -> Result<(), Errno> {
        let holds = {
            let mut h = self.locks.lock();
            if h.waiting.contains_key(&(fid, owner)) {
                h.cancelled.insert((fid, owner));
            }
            h.locks.contains_key(&(fid, owner))
        };
        if !holds {
            return Ok(());
        }
        self.unlock(c, fid, owner, 0, u64::MAX).await
    }

    /// The lock `owner` of this client (for `c`'s process) asks for.
    fn lock_of(&self, c: &Caller, owner: u64, kind: LockKind, start: u64, end: u64) -> FileLock {
        FileLock {
            owner: LockOwner {
                client: self.ctxs.client_id(),
                owner,
            },
            pid: c.pid,
            kind,
            start,
            end,
        }
    }

    /// Whether this client asked for a lock on `fid` (since it started,
    /// or since [`LOCKED_MAX`] files were).
    pub fn ever_locked(&self, fid: Fid) -> bool {
        self.locks.lock().ever.contains(&fid)
    }

    /// Whether `owner` holds or waits for a lock on `fid`.
    pub fn holds_locks(&self, fid: Fid, owner: u64) -> bool {
        self.locks.holds(fid, owner)
    }

    /// Watch the connection to MDT `mdt`: when it is lost, hold this
    /// client's locks there again.
    fn watch_mdt(&self, mdt: u32) {
        let mut h = self.locks.lock();
        if let std::collections::hash_map::Entry::Vacant(e) = h.mdts.entry(mdt) {
            if let Some(now) = self.mdt_losses(mdt) {
                e.insert(now);
            }
        }
    }

    /// Start the task that holds this client's locks and open files
    /// again on each MDT whose connection was lost (once per client).
    pub(crate) fn start_reclaimer(&self) {
        let start = !std::mem::replace(&mut self.locks.lock().watching, true);
        if start {
            if let Some(me) = self.me.get() {
                self.rt.spawn(reclaimer(me.clone()));
            }
        }
    }

    /// The address of MDT `mdt` (a replicated MDT's primary moves) and
    /// the losses so far of the connection to it (0 before one is made:
    /// an idle mount whose MDT moved holds its files at the new primary
    /// too, or removals there wait out the grace for it).
    fn mdt_losses(&self, mdt: u32) -> Option<(String, u64)> {
        let addr = self
            .router
            .config()
            .target(TargetId::mdt(mdt))
            .map(|t| t.addr.clone())?;
        let losses = self.router.losses_of(&addr).unwrap_or(0);
        Some((addr, losses))
    }

    /// Send MDT `mdt` what this client holds there: its locks, and the
    /// files it has open (held from now on, see `Inode::hold_orphan`:
    /// its leases on them went with the connection).
    pub(crate) async fn reclaim(&self, mdt: u32) -> Result<(), Errno> {
        let locks = self.locks.on_mdt(mdt);
        let n = locks.len();
        let mut held = Vec::new();
        for fid in self.router.fresh.select(|i| i.is_open()) {
            if self.router.mdt_of(fid).await.ok() != Some(TargetId::mdt(mdt)) {
                continue;
            }
            if self.inode(fid).is_some_and(|i| i.hold_orphan()) {
                held.push(fid);
            }
        }
        let files = held.len();
        let c = Caller::default();
        let (reply, _) = self
            .router
            .call(
                TargetId::mdt(mdt),
                self.ctx(&c),
                MdtRequest::ReclaimLocks { locks, held },
                bytes::Bytes::new(),
            )
            .await?;
        match reply {
            Reply::Ok => {
                tracing::info!("held {n} file locks and {files} open files again on MDT{mdt:04x}");
                Ok(())
            }
            Reply::Lock(LockAnswer::Conflict(l)) => {
                // Another owner took it after the grace period: the
                // holder's process is not told (as NFS without a grace).
                tracing::error!(
                    "MDT{mdt:04x}: a lock this client held is held by another meanwhile: {l:?}"
                );
                Ok(())
            }
            other => Err(crate::io::file::unexpected("ReclaimLocks", &other)),
        }
    }
}

/// Reclaims this client's locks and open files on each MDT whose
/// connection was lost (and so tells a restarted MDT it is back, which
/// ends its grace period early).
async fn reclaimer(me: Weak<Client>) {
    let mut tick = tokio::time::interval(RECLAIM_TICK);
    loop {
        tick.tick().await;
        let Some(client) = me.upgrade() else { return };
        for mdt in client.router.config().indices(loom_proto::msg::Role::Mdt) {
            client.watch_mdt(mdt);
        }
        let mdts: Vec<(u32, (String, u64))> = client
            .locks
            .lock()
            .mdts
            .iter()
            .map(|(m, s)| (*m, s.clone()))
            .collect();
        for (mdt, seen) in mdts {
            let Some(now) = client.mdt_losses(mdt) else {
                continue;
            };
            if now == seen {
                continue;
            }
            // In line with the holds and releases of open files, so that
            // a close racing the reclaim releases after it.
            let (done, outcome) = tokio::sync::oneshot::channel();
            client.tell(crate::client::Tell::Reclaim { mdt, done });
            match outcome.await.unwrap_or(Err(Errno::EIO)) {
                Ok(()) => {
                    client.locks.lock().mdts.insert(mdt, now);
                }
                Err(e) => tracing::warn!("reclaiming file locks on MDT{mdt:04x}: {e}"),
            }
        }
    }
}
