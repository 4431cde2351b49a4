//! Leases: what a client may keep knowing until this MDT tells it
//! otherwise (see `docs/PROTOCOL.md`, "Leases").
//!
//! A client that subscribed (`Subscribe`) is granted, with each answer,
//! a lease on what the answer says: a name, an inode's attributes, a
//! directory's whole contents. A change by anyone else that touches a
//! leased thing first recalls it from its holders, on the connection they
//! subscribed on, and is applied only after they answered (they dropped
//! what they cached) or after [`Leases::recall_timeout`]: a holder that
//! does not answer loses its connection, and with it every lease it held
//! here; it drops everything when it finds the connection gone.
//!
//! **How a grant and a change cannot cross.** Changes are checked and
//! applied under this table's lock ([`Leases::apply`]). A read notes the
//! table's epoch before it reads and is granted its leases only if no
//! change applied since then touched them ([`Leases::grant_read`]);
//! otherwise it is answered without a lease (the client caches it only
//! for its attribute timeout). So either a change sees the holder, or the
//! reader's grant is refused. Things under recall are never granted, so a
//! recall ends.
//!
//! Grants are kept in memory only: a restarted MDT holds none, and its
//! clients, whose connections died with it, dropped what they cached.

use loom_proto::lease;
use loom_proto::msg::{ClientRequest, Effects, Envelope, Lease, Reply, ReqCtx, TargetId};
use loom_proto::Fid;
use loom_rpc::Channel;
use std::collections::{HashMap, VecDeque};

/// The table's maps hash with foldhash, seeded per process: every change
/// hashes each lease it touches several times under the table's lock,
/// where SipHash cost more than the lookups.
type Fast = foldhash::fast::RandomState;
type Map<K, V> = HashMap<K, V, Fast>;
type Set<K> = std::collections::HashSet<K, Fast>;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a holder may take to answer a recall before it loses its
/// leases (its connection is closed).
pub const DEFAULT_RECALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Leases one client may hold on one MDT: past it, the client's leases
/// are all revoked (bounded memory; the client drops its cache and takes
/// new ones).
const MAX_PER_CLIENT: usize = 1 << 20;
/// Changes remembered for reads in progress: a read that started before
/// the oldest is answered without a lease.
const RECENT: usize = 4096;

/// See the module documentation.
pub struct Leases {
    table: Mutex<Table>,
    target: TargetId,
    /// How long a recall may wait for a holder.
    pub recall_timeout: Duration,
    /// The files clients said they have open when their leases on them
    /// were recalled (see `holds`).
    pub holds: super::holds::Holds,
}

#[derive(Default)]
struct Table {
    subs: Map<u64, Sub>,
    holders: Map<Lease, Vec<u64>>,
    /// Under recall: granted to no one until the change is applied.
    busy: Map<Lease, usize>,
    /// Changes applied (one per change).
    epoch: u64,
    /// What the last changes touched, oldest first, with their epochs.
    recent: VecDeque<(u64, Vec<Lease>)>,
    /// The epoch of the newest change dropped from `recent`.
    forgotten: u64,
    /// Inodes being migrated: no lease on them (their attributes, size,
    /// or a directory's names and list) is granted (see `migrate`).
    frozen: Map<Fid, usize>,
    /// While a snapshot is taken, no size lease is granted: every size a
    /// client knows of is reported before the image (see `snapshots`).
    sizes_paused: usize,
}

/// A subscribed client.
struct Sub {
    ch: Arc<Channel>,
    held: Set<Lease>,
}

/// A read that may be granted leases: who asks, and the epoch it began at.
#[derive(Clone, Copy, Debug)]
pub struct ReadToken {
    client: u64,
    serial: u64,
    epoch: u64,
}

/// The leases a change touches and those its maker may keep.
#[derive(Debug, Default)]
pub struct Touched {
    /// Recalled from everyone else.
    pub conflicts: Vec<Lease>,
    /// Granted to the maker.
    pub grants: Vec<Lease>,
}

impl Touched {
    /// From what a change did and answered (see `loom_proto::lease`).
    pub fn of(reply: &Reply, e: &Effects) -> Touched {
        Touched {
            conflicts: lease::touched_by_change(e),
            grants: lease::granted_by_change(reply, e),
        }
    }
}

/// Holds leases under recall until the change that recalled them is done.
pub struct Busy {
    leases: Arc<Leases>,
    held: Vec<Lease>,
}

/// A recall out to `client`: when dropped (answered or not), the recall
/// is over for [`super::holds::Holds`], which holds the files the client
/// answered it `held`.
struct RecallOut {
    leases: Arc<Leases>,
    client: u64,
    sent: u64,
    held: Vec<Fid>,
}

impl Drop for RecallOut {
    fn drop(&mut self) {
        let held = std::mem::take(&mut self.held);
        self.leases
            .holds
            .recall_answered(self.client, self.sent, &held);
    }
}

/// Inodes on which no lease is granted while it lives ([`Leases::freeze`]).
pub struct Frozen {
    leases: Arc<Leases>,
    fids: Vec<Fid>,
}

/// No size lease is granted while it lives (see [`Leases::pause_sizes`]).
pub struct SizesPaused {
    leases: Arc<Leases>,
}

impl Drop for SizesPaused {
    fn drop(&mut self) {
        let mut t = self.leases.lock();
        t.sizes_paused = t.sizes_paused.saturating_sub(1);
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let mut t = self.leases.lock();
        for f in &self.fids {
            unref(&mut t.frozen, f);
        }
    }
}

/// One holder fewer of `k` in a table of counts; gone at zero.
fn unref<K: std::hash::Hash + Eq>(m: &mut Map<K, usize>, k: &K) {
    if let Some(n) = m.get_mut(k) {
        *n -= 1;
        if *n == 0 {
            m.remove(k);
        }
    }
}

/// The inode a lease is on (a name's and a list's: the directory).
fn fid_of(l: &Lease) -> Fid {
    match l {
        Lease::Attr(f)
        | Lease::Size(f)
        | Lease::List(f)
        | Lease::Name(f, _)
        | Lease::WriteBack(f) => *f,
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut t = self.leases.lock();
        for l in &self.held {
            unref(&mut t.busy, l);
        }
    }
}

impl Table {
    fn drop_client(&mut self, client: u64) -> Option<Sub> {
        let sub = self.subs.remove(&client)?;
        for l in &sub.held {
            self.unhold(l, client);
        }
        Some(sub)
    }

    fn unhold(&mut self, l: &Lease, client: u64) {
        if let Some(v) = self.holders.get_mut(l) {
            v.retain(|c| *c != client);
            if v.is_empty() {
                self.holders.remove(l);
            }
        }
    }

    /// Grant `leases` to `client`, unless one is under recall (`busy`
    /// holds for a reader, not for the maker of a change just applied: it
    /// knows the state after it, and a change still recalling will find it
    /// as a holder). False when not granted.
    fn grant(&mut self, client: u64, leases: &[Lease], busy: bool) -> bool {
        if busy && leases.iter().any(|l| self.busy.contains_key(l)) {
            return false;
        }
        if !self.frozen.is_empty() && leases.iter().any(|l| self.frozen.contains_key(&fid_of(l))) {
            return false;
        }
        if self.sizes_paused > 0 && leases.iter().any(|l| matches!(l, Lease::Size(_))) {
            return false;
        }
        let Some(sub) = self.subs.get_mut(&client) else {
            return false;
        };
        let mut new = Vec::new();
        for l in leases {
            if sub.held.insert(l.clone()) {
                new.push(l.clone());
            }
        }
        let over = sub.held.len() > MAX_PER_CLIENT;
        for l in new {
            self.holders.entry(l).or_default().push(client);
        }
        if over {
            // Bounded memory: the client starts again with nothing.
            if let Some(sub) = self.drop_client(client) {
                tracing::info!(
                    client = format_args!("{client:#x}"),
                    "over {MAX_PER_CLIENT} leases: all revoked"
                );
                sub.ch.close();
            }
            return false;
        }
        true
    }
}

impl Leases {
    /// An empty table for MDT `target`.
    pub fn new(target: TargetId, recall_timeout: Duration) -> Leases {
        Leases {
            table: Mutex::new(Table::default()),
            target,
            recall_timeout,
            holds: Default::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // Every update leaves the maps consistent before it can panic.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `client` takes leases on connection `ch`; what it held on an
    /// earlier connection is void.
    pub fn subscribe(&self, client: u64, ch: &Arc<Channel>) {
        let mut t = self.lock();
        t.drop_client(client);
        t.subs.insert(
            client,
            Sub {
                ch: ch.clone(),
                held: Set::default(),
            },
        );
    }

    /// The client leaves: its leases go.
    pub fn unsubscribe(&self, client: u64) {
        self.lock().drop_client(client);
    }

    /// A request from `client` on `ch` may be granted leases if the client
    /// subscribed on that connection: note when its read begins.
    pub fn reading(&self, client: u64, ch: Option<&Arc<Channel>>) -> Option<ReadToken> {
        let ch = ch?;
        let t = self.lock();
        let sub = t.subs.get(&client)?;
        (sub.ch.serial() == ch.serial() && !ch.is_dead()).then_some(ReadToken {
            client,
            serial: ch.serial(),
            epoch: t.epoch,
        })
    }

    /// The same read, begun again now (after a recall it waited for: the
    /// changes the holders made meanwhile do not cross it).
    pub fn restart_read(&self, tok: ReadToken) -> ReadToken {
        ReadToken {
            epoch: self.lock().epoch,
            ..tok
        }
    }

    /// Grant the leases a read's answer implies, unless a change applied
    /// since the read began touched one of them, or one is under recall.
    /// True when granted.
    pub fn grant_read(&self, tok: ReadToken, leases: &[Lease]) -> bool {
        if leases.is_empty() {
            return false;
        }
        let mut t = self.lock();
        if t.subs.get(&tok.client).map(|s| s.ch.serial()) != Some(tok.serial) {
            return false;
        }
        if tok.epoch != t.epoch {
            if tok.epoch < t.forgotten {
                return false;
            }
            let touched = t
                .recent
                .iter()
                .filter(|(e, _)| *e > tok.epoch)
                .any(|(_, ls)| ls.iter().any(|l| leases.contains(l)));
            if touched {
                return false;
            }
        }
        t.grant(tok.client, leases, true)
    }

    /// Apply a change by `maker` that touches `touched`, with `apply`,
    /// unless someone else holds a lease on what it touches: then nothing
    /// is applied and the leases to recall are returned. With `late`, it
    /// is applied anyway, and those leases are returned with it, to be
    /// recalled before the reply. The maker (if `tok` is its subscribed
    /// connection) is granted what it may keep; the bool says whether.
    #[allow(clippy::type_complexity)]
    pub fn apply<T, E>(
        &self,
        maker: u64,
        tok: Option<ReadToken>,
        touched: &Touched,
        late: bool,
        apply: impl FnOnce() -> Result<T, E>,
    ) -> Result<Result<(T, bool, Vec<Lease>), Vec<Lease>>, E> {
        let mut t = self.lock();
        let held = |l: &Lease| {
            t.holders
                .get(l)
                .is_some_and(|hs| hs.iter().any(|c| *c != maker))
        };
        let mut conflicts: Vec<Lease> = touched
            .conflicts
            .iter()
            .filter(|l| held(l))
            .cloned()
            .collect();
        // A holder of a directory's list knew the changed names absent
        // (its kernel may keep them as negative entries): they go with
        // the list's recall, held by anyone or not.
        let lists: Vec<Fid> = conflicts
            .iter()
            .filter_map(|l| match l {
                Lease::List(d) => Some(*d),
                _ => None,
            })
            .collect();
        for l in &touched.conflicts {
            if let Lease::Name(d, _) = l {
                if lists.contains(d) && !conflicts.contains(l) {
                    conflicts.push(l.clone());
                }
            }
        }
        if !conflicts.is_empty() && !late {
            return Ok(Err(conflicts));
        }
        let v = apply()?;
        t.epoch += 1;
        let epoch = t.epoch;
        if !touched.conflicts.is_empty() {
            t.recent.push_back((epoch, touched.conflicts.clone()));
            if t.recent.len() > RECENT {
                if let Some((e, _)) = t.recent.pop_front() {
                    t.forgotten = e;
                }
            }
        }
        let granted = match tok {
            Some(tok) if t.subs.get(&maker).map(|s| s.ch.serial()) == Some(tok.serial) => {
                t.grant(maker, &touched.grants, false)
            }
            _ => false,
        };
        Ok(Ok((v, granted, conflicts)))
    }

    /// Recall `leases` from every holder but `maker`: they are granted to
    /// no one until the returned guard is dropped (after the change is
    /// applied). Holders answer, or lose every lease they hold here (and
    /// their connection) after [`Leases::recall_timeout`].
    pub async fn recall(self: &Arc<Self>, maker: u64, leases: Vec<Lease>) -> Busy {
        let mut calls: HashMap<u64, (Arc<Channel>, Vec<Lease>)> = HashMap::new();
        {
            let mut t = self.lock();
            for l in &leases {
                *t.busy.entry(l.clone()).or_insert(0) += 1;
                let holders: Vec<u64> = t
                    .holders
                    .get(l)
                    .map(|hs| hs.iter().copied().filter(|c| *c != maker).collect())
                    .unwrap_or_default();
                for c in holders {
                    t.unhold(l, c);
                    if let Some(sub) = t.subs.get_mut(&c) {
                        sub.held.remove(l);
                        let e = calls
                            .entry(c)
                            .or_insert_with(|| (sub.ch.clone(), Vec::new()));
                        e.1.push(l.clone());
                    }
                }
            }
        }
        let busy = Busy {
            leases: self.clone(),
            held: leases.clone(),
        };
        let mut set = tokio::task::JoinSet::new();
        for (client, (ch, mut items)) in calls {
            // A holder of a directory's list learns which names changed.
            for l in &leases {
                if matches!(l, Lease::Name(..)) && !items.contains(l) {
                    items.push(l.clone());
                }
            }
            let env = Envelope {
                target: self.target,
                ctx: ReqCtx::default(),
                req: ClientRequest::Recall { leases: items }.into(),
                capa: None,
                snapshot: None,
            };
            let timeout = self.recall_timeout;
            let out = RecallOut {
                leases: self.clone(),
                client,
                sent: self.holds.recall_sent(client),
                held: Vec::new(),
            };
            set.spawn(async move { (out, ch.clone(), ch.call(&env, timeout).await) });
        }
        while let Some(r) = set.join_next().await {
            let Ok((mut out, ch, r)) = r else { continue };
            let client = out.client;
            if let Ok(Reply::Held { fids }) = &r {
                out.held = fids.clone();
            }
            drop(out);
            if let Err(e) = r {
                tracing::warn!(
                    client = format_args!("{client:#x}"),
                    "{}: recall not answered ({e}); the client loses its leases",
                    self.target
                );
                let mut t = self.lock();
                if t.subs
                    .get(&client)
                    .is_some_and(|s| s.ch.serial() == ch.serial())
                {
                    t.drop_client(client);
                }
                drop(t);
                ch.close();
            }
        }
        busy
    }

    /// Grant `client` the write-back lease on directory `dir` (see
    /// `writeback`): only to a subscribed client, while no other client
    /// holds it and it is not under recall. True when granted.
    pub fn grant_writeback(&self, client: u64, dir: Fid) -> bool {
        let l = Lease::WriteBack(dir);
        let mut t = self.lock();
        if t.holders
            .get(&l)
            .is_some_and(|hs| hs.iter().any(|c| *c != client))
        {
            return false;
        }
        t.grant(client, &[l], true)
    }

    /// Whether `client` holds `lease`.
    pub fn holds(&self, client: u64, lease: &Lease) -> bool {
        self.lock()
            .holders
            .get(lease)
            .is_some_and(|hs| hs.contains(&client))
    }

    /// Those of `leases` that a client other than `client` holds.
    pub fn held_elsewhere(&self, client: u64, leases: &[Lease]) -> Vec<Lease> {
        let t = self.lock();
        if t.holders.is_empty() {
            return Vec::new();
        }
        leases
            .iter()
            .filter(|l| {
                t.holders
                    .get(*l)
                    .is_some_and(|hs| hs.iter().any(|c| *c != client))
            })
            .cloned()
            .collect()
    }

    /// Grant no lease on `fids` until the guard is dropped.
    pub fn freeze(self: &Arc<Self>, fids: Vec<Fid>) -> Frozen {
        let mut t = self.lock();
        for f in &fids {
            *t.frozen.entry(*f).or_insert(0) += 1;
        }
        Frozen {
            leases: self.clone(),
            fids,
        }
    }

    /// Every lease held on `fids`: their attributes and sizes, and a
    /// directory's names and list.
    pub fn held_on(&self, fids: &[Fid]) -> Vec<Lease> {
        let t = self.lock();
        if t.holders.is_empty() {
            return Vec::new();
        }
        let set: Set<Fid> = fids.iter().copied().collect();
        t.holders
            .keys()
            .filter(|l| set.contains(&fid_of(l)))
            .cloned()
            .collect()
    }

    /// Grant no size lease until the guard is dropped.
    pub fn pause_sizes(self: &Arc<Self>) -> SizesPaused {
        self.lock().sizes_paused += 1;
        SizesPaused {
            leases: self.clone(),
        }
    }

    /// Every size lease held: what clients may have written past the
    /// sizes this MDT knows.
    pub fn held_sizes(&self) -> Vec<Lease> {
        self.lock()
            .holders
            .keys()
            .filter(|l| matches!(l, Lease::Size(_)))
            .cloned()
            .collect()
    }

    /// Number of leases held, for tests and statistics.
    pub fn held(&self) -> usize {
        self.lock().subs.values().map(|s| s.held.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_proto::Fid;

    fn table() -> Leases {
        Leases::new(TargetId::mdt(0), Duration::from_secs(1))
    }

    /// A channel on a real loopback connection (its other end is dropped:
    /// nothing is sent on it here).
    async fn channel() -> Arc<Channel> {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = l.local_addr().expect("addr");
        let (c, s) = tokio::join!(tokio::net::TcpStream::connect(addr), l.accept());
        drop(c);
        let (_, wr) = s.expect("accept").0.into_split();
        Arc::new(Channel::for_tests(wr))
    }

    fn touched(conflicts: Vec<Lease>, grants: Vec<Lease>) -> Touched {
        Touched { conflicts, grants }
    }

    #[tokio::test]
    async fn a_read_crossed_by_a_change_to_what_it_read_is_not_granted() {
        let t = table();
        let ch = channel().await;
        t.subscribe(7, &ch);
        let a = Lease::Attr(Fid::new(1, 1));
        let other = Lease::Attr(Fid::new(1, 2));
        let tok = t.reading(7, Some(&ch)).expect("subscribed");
        // A change by client 9 to `a` lands while the read runs.
        let r = t.apply(9, None, &touched(vec![a.clone()], vec![]), false, || {
            Ok::<_, ()>(())
        });
        assert!(matches!(r, Ok(Ok(_))), "no holder yet: applied");
        assert!(
            !t.grant_read(tok, std::slice::from_ref(&a)),
            "crossed: not granted"
        );
        assert!(
            t.grant_read(tok, std::slice::from_ref(&other)),
            "untouched: granted"
        );
        // Now 7 holds `other`: a change to it by 9 must recall first.
        let r = t.apply(
            9,
            None,
            &touched(vec![other.clone()], vec![]),
            false,
            || Ok::<_, ()>(()),
        );
        assert_eq!(r, Ok(Err(vec![other.clone()])));
        // The maker itself is no conflict.
        let r = t.apply(
            7,
            None,
            &touched(vec![other.clone()], vec![]),
            false,
            || Ok::<_, ()>(()),
        );
        assert!(matches!(r, Ok(Ok(_))));
        // A read from another connection of the same client gets nothing.
        let ch2 = channel().await;
        assert!(t.reading(7, Some(&ch2)).is_none());
        assert!(t.reading(8, Some(&ch)).is_none(), "not subscribed");
    }

    #[tokio::test]
    async fn a_holder_that_cannot_answer_loses_every_lease() {
        let t = Arc::new(table());
        let ch = channel().await;
        t.subscribe(7, &ch);
        let (a, b) = (Lease::Attr(Fid::new(1, 1)), Lease::Attr(Fid::new(1, 2)));
        let tok = t.reading(7, Some(&ch)).expect("subscribed");
        assert!(t.grant_read(tok, &[a.clone(), b.clone()]));
        assert_eq!(t.held(), 2);
        // Under recall, `a` is granted to no reader.
        let busy = t.recall(9, vec![a.clone()]).await;
        let tok = t.reading(7, Some(&ch));
        assert!(tok.is_none(), "its connection was closed: no answer came");
        assert_eq!(t.held(), 0, "b went too");
        assert!(ch.is_dead());
        drop(busy);
        let r = t.apply(9, None, &touched(vec![a, b], vec![]), false, || {
            Ok::<_, ()>(())
        });
        assert!(matches!(r, Ok(Ok(_))), "nothing left to recall");
    }
}
