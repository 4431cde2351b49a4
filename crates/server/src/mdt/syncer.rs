//! Commits: one thread makes the store durable, in the background and for
//! everyone waiting, and publishes how far it got.
//!
//! Every change is applied (visible) under the namespace lock with the next
//! transaction number ([`CommitState::applied`] pairs the number with the
//! store's ticket, in the same order). Most replies leave at once, carrying
//! the number and the last committed one; the client keeps the change until
//! a later reply says it is committed, and replays it if the MDT restarts
//! before that (see `recovery`). The syncer thread commits whatever was
//! applied within its interval ([`COMMIT_INTERVAL`] by default; and sleeps while nothing is
//! pending), and at once for a request
//! that must wait (a client's first change, fsync, cross-MDT steps): it
//! takes every waiter queued, syncs once (which covers everything applied
//! so far) and wakes them all, so N waiting changes cost one fsync, and a
//! wait costs an async task, not a blocking thread.

use loom_store::kv::{KvStore, Ticket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::oneshot;

/// The longest an applied change waits for its commit when nobody asks
/// for it sooner, by default.
pub const COMMIT_INTERVAL: Duration = Duration::from_millis(5);

type Waiter = (Ticket, oneshot::Sender<Result<(), String>>);

/// What the syncer thread is told.
enum Msg {
    /// Something was applied while nothing waited to be committed.
    Kick,
    /// Commit through the ticket, then answer.
    Wait(Waiter),
}

/// Transaction numbers of one MDT: what was applied and what is committed.
#[derive(Debug)]
pub struct CommitState {
    /// This instance of the MDT (random per start).
    pub boot: u64,
    /// The last transaction number committed when it started.
    pub started_at: u64,
    /// The last transaction number given and the store's ticket of its batch.
    applied: Mutex<(u64, Ticket)>,
    /// Every transaction up to this number is on stable storage.
    committed: AtomicU64,
    /// The same, for those who wait for a commit without asking for one.
    committed_tx: tokio::sync::watch::Sender<u64>,
    /// Commits made, changes they committed, and their fsync times.
    pub figures: CommitFigures,
    /// Set when a commit failed: what was applied since the last good
    /// commit may not be kept, so the MDT serves nothing more.
    failed: std::sync::OnceLock<String>,
}

/// What the commits of an MDT did, for statistics: how many, how many
/// changes each made durable (their batch size), how long each took.
#[derive(Debug, Default)]
pub struct CommitFigures {
    /// Commits that made at least one change durable.
    pub commits: AtomicU64,
    /// Changes they made durable.
    pub changes: AtomicU64,
    /// Microseconds they took, in all.
    pub micros: AtomicU64,
    /// Commits per duration bucket (`crate::stats::BUCKETS`, then above).
    pub buckets: [AtomicU64; crate::stats::BUCKETS.len() + 1],
}

impl CommitFigures {
    fn record(&self, changes: u64, took: std::time::Duration) {
        if changes == 0 {
            return;
        }
        let b = crate::stats::bucket_of(took.as_secs_f64());
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.changes.fetch_add(changes, Ordering::Relaxed);
        self.micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
        if let Some(c) = self.buckets.get(b) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The syncer thread's target, from its name (`mdt0-sync`).
fn name_of_thread() -> String {
    let t = std::thread::current();
    let n = t.name().unwrap_or("mdt");
    n.strip_suffix("-sync").unwrap_or(n).to_uppercase()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CommitState {
    /// The state after a start: `last` is the number the store holds, all
    /// of it committed.
    pub fn new(last: u64) -> CommitState {
        CommitState {
            boot: rand::random::<u64>() | 1,
            started_at: last,
            applied: Mutex::new((last, 0)),
            committed: AtomicU64::new(last),
            committed_tx: tokio::sync::watch::channel(last).0,
            figures: CommitFigures::default(),
            failed: std::sync::OnceLock::new(),
        }
    }

    /// Why commits failed, once one has: the MDT has stopped serving.
    pub fn failed(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }

    /// Give the next transaction number to the batch `apply` applies, under
    /// one lock, so numbers follow the store's order. `apply` gets the
    /// number (`forced`: a replayed change keeps its first one). Also says
    /// whether everything before was committed (the syncer sleeps then and
    /// must be woken).
    pub fn applied<E>(
        &self,
        forced: Option<u64>,
        apply: impl FnOnce(u64) -> Result<Ticket, E>,
    ) -> Result<(u64, Ticket, bool), E> {
        let mut a = lock(&self.applied);
        let transno = match forced {
            Some(n) => n.max(a.0 + 1),
            None => a.0 + 1,
        };
        let ticket = apply(transno)?;
        let was_idle = a.0 <= self.last_committed();
        *a = (transno, ticket.max(a.1));
        Ok((transno, ticket, was_idle))
    }

    /// Whether something applied is not committed yet.
    fn pending(&self) -> bool {
        lock(&self.applied).0 > self.last_committed()
    }

    /// The last number given and its ticket.
    pub fn last_applied(&self) -> (u64, Ticket) {
        *lock(&self.applied)
    }

    /// The last committed transaction number.
    pub fn last_committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    fn set_committed(&self, n: u64) {
        self.committed.fetch_max(n, Ordering::AcqRel);
        self.committed_tx.send_modify(|c| *c = (*c).max(n));
    }

    /// Wait, without hurrying the syncer, until transaction `n` is
    /// committed (work that must follow a commit but need not force one).
    pub async fn committed(&self, n: u64) {
        let mut rx = self.committed_tx.subscribe();
        let _ = rx.wait_for(|c| *c >= n).await;
    }
}

/// The syncer of one store. Dropping it stops its thread (after the syncs
/// already asked for), so the store can be reopened at once.
pub struct Syncer {
    tx: Option<mpsc::Sender<Msg>>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    /// Start the syncer thread of `store`, named after `name`.
    pub fn start(
        store: Arc<dyn KvStore>,
        state: Arc<CommitState>,
        name: &str,
        interval: Duration,
    ) -> std::io::Result<Syncer> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let thread = std::thread::Builder::new()
            .name(format!("{name}-sync"))
            .spawn(move || {
                // A clean stop commits what was applied.
                let last_commit = |state: &CommitState| {
                    let (transno, ticket) = state.last_applied();
                    match store.sync_through(ticket) {
                        Ok(()) => state.set_committed(transno),
                        Err(e) => tracing::error!("final commit: {e}"),
                    }
                };
                loop {
                    let mut waiters = Vec::new();
                    // Idle: sleep until something is applied or awaited.
                    if !state.pending() {
                        match rx.recv() {
                            Ok(Msg::Wait(w)) => waiters.push(w),
                            Ok(Msg::Kick) => {}
                            Err(_) => return last_commit(&state),
                        }
                    }
                    // Let more changes join the commit, for at most the
                    // interval, unless someone waits already.
                    // A kick only wakes an idle syncer: one queued by a
                    // change made just after the last commit must not cut
                    // this wait short (commits would stop grouping).
                    if waiters.is_empty() {
                        let deadline = std::time::Instant::now() + interval;
                        loop {
                            let left =
                                deadline.saturating_duration_since(std::time::Instant::now());
                            match rx.recv_timeout(left) {
                                Ok(Msg::Wait(w)) => {
                                    waiters.push(w);
                                    break;
                                }
                                Ok(Msg::Kick) => {}
                                Err(RecvTimeoutError::Timeout) => break,
                                Err(RecvTimeoutError::Disconnected) => return last_commit(&state),
                            }
                        }
                    }
                    waiters.extend(rx.try_iter().filter_map(|m| match m {
                        Msg::Wait(w) => Some(w),
                        Msg::Kick => None,
                    }));
                    // Read after the waiters: their batches are applied, so
                    // the ticket covers them.
                    let (transno, ticket) = state.last_applied();
                    let upto = waiters.iter().map(|w| w.0).max().unwrap_or(0).max(ticket);
                    let before = state.last_committed();
                    let t0 = std::time::Instant::now();
                    // fsync: every change applied before this point, and
                    // so every waiter's, is on stable storage after it.
                    let r = store.sync_through(upto).map_err(|e| e.to_string());
                    match &r {
                        Ok(()) => {
                            state
                                .figures
                                .record(transno.saturating_sub(before), t0.elapsed());
                            state.set_committed(transno)
                        }
                        Err(e) => {
                            // The batches applied since the last good commit
                            // may be lost: no more change may be answered.
                            if state.failed.set(e.clone()).is_ok() {
                                tracing::error!(
                                    "{}: a commit (fsync) failed: {e}; it stops serving: every \
                                     request is refused with EIO from now on, and changes not \
                                     committed are answered with EIO, not acknowledged. Restart \
                                     it once its disk is sound: clients replay the changes it \
                                     answered before",
                                    name_of_thread()
                                );
                            }
                        }
                    }
                    for (_, w) in waiters {
                        let _ = w.send(r.clone());
                    }
                }
            })?;
        Ok(Syncer {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Wait until the store is durable through `ticket`.
    pub async fn sync(&self, ticket: Ticket) -> Result<(), String> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .as_ref()
            .ok_or("the syncer is stopped")?
            .send(Msg::Wait((ticket, tx)))
            .map_err(|_| "the syncer thread is gone".to_string())?;
        rx.await
            .map_err(|_| "the syncer thread is gone".to_string())?
    }
}

impl Syncer {
    /// Wake the sleeping syncer: a change was applied after a quiet spell.
    pub fn kick(&self) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(Msg::Kick);
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_store::kv::{Batch, FjallStore, KvError, Pairs, Space};
    use std::sync::atomic::AtomicUsize;

    /// A real store that counts its syncs.
    struct Counting(FjallStore, AtomicUsize);

    impl KvStore for Counting {
        fn get(&self, s: Space, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
            self.0.get(s, key)
        }
        fn scan(
            &self,
            s: Space,
            prefix: &[u8],
            after: Option<&[u8]>,
            limit: usize,
        ) -> Result<Pairs, KvError> {
            self.0.scan(s, prefix, after, limit)
        }
        fn apply(&self, b: Batch) -> Result<Ticket, KvError> {
            self.0.apply(b)
        }
        fn apply_flushed(&self, b: Batch) -> Result<Ticket, KvError> {
            self.0.apply_flushed(b)
        }
        fn sync_through(&self, t: Ticket) -> Result<(), KvError> {
            self.1.fetch_add(1, Ordering::SeqCst);
            self.0.sync_through(t)
        }
    }

    fn change(store: &Counting, state: &CommitState, syncer: &Syncer, n: u8) -> Ticket {
        let (_, ticket, was_idle) = state
            .applied(None, |_| {
                let mut b = Batch::new();
                b.put(Space::Meta, vec![n], vec![n]);
                store.apply(b)
            })
            .expect("apply");
        if was_idle {
            syncer.kick();
        }
        ticket
    }

    #[tokio::test]
    async fn a_kick_wakes_the_syncer_but_does_not_cut_its_grouping_short() {
        let d = tempfile::tempdir().expect("tmp");
        let store = Arc::new(Counting(
            FjallStore::open(d.path()).expect("open"),
            AtomicUsize::new(0),
        ));
        let state = Arc::new(CommitState::new(0));
        // An interval no test outlives: only a waiter may end it.
        let syncer = Syncer::start(store.clone(), state.clone(), "t", Duration::from_secs(3600))
            .expect("syncer");
        let first = change(&store, &state, &syncer, 1);
        syncer.sync(first).await.expect("commit");
        // Idle again. The next change kicks the syncer awake; another kick
        // (as a change racing the end of a commit sends) must not end the
        // grouping wait: nothing commits until someone waits, however long
        // we look (a bound here only limits how long we look).
        let second = change(&store, &state, &syncer, 2);
        syncer.kick();
        let early = tokio::time::timeout(Duration::from_millis(300), state.committed(2)).await;
        assert!(early.is_err(), "a kick committed without a waiter");
        syncer.sync(second).await.expect("commit");
        assert_eq!(store.1.load(Ordering::SeqCst), 2, "one commit per waiter");
        assert_eq!(state.last_committed(), 2);
    }
}
