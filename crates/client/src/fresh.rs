//! What this client knows of inodes and names, and until when: what its
//! own changes did, as its MDTs said in their replies ([`Effects`]), and,
//! on a mount that takes leases, what its MDTs answered it. Kept in the
//! client's table of [`Inode`] objects, one per inode, which also hold
//! the inode's open handles and writes in flight (see [`crate::inode`]).
//!
//! A mount answers a stat or a lookup from here while the answer is
//! valid, and tells the kernel to keep it only for what is left of that.
//! Without a lease an answer is valid for the attribute timeout, as long
//! as the kernel could cache it anyway: nothing another mount did is
//! hidden longer than that. The kernel asks again after each of this
//! mount's own changes (a create makes it drop its directory's
//! attributes, and with kernel permission checks it needs them before
//! the next create in that directory); those questions need no server.
//!
//! Under a lease (`loom_proto::lease`) an answer is valid until the MDT
//! recalls it, up to the lease time: another client's change waits until
//! this one dropped it ([`Fresh::recall`]). A directory whose whole list
//! is leased answers a lookup of a name it lacks (the kernel's lookup
//! before every create) without a server.
//!
//! Whatever this client cannot be sure of is dropped: a change answered
//! without its effects (a resend answered from the MDT's reply cache) or
//! not answered at all (a timeout: it may have been applied) drops what
//! was known without a lease; a lost connection to an MDT drops
//! everything ([`Fresh::take_all`]), as the MDT's leases went with it.
//! An answer that crossed a recall (sent before, answered after) is not
//! taken as leased: it may predate the change recalled.
//!
//! **Locking.** One lock over the table: a recall (which counts itself,
//! then forgets) is atomic with every check of an answer against the
//! recall count and with every read of what is leased. An inode's own
//! locks are taken under it, never the other way round.

use crate::inode::{Inode, Item, Known, Xattrs};
use loom_proto::msg::{Attr, Effects, Lease};
use loom_proto::{Fid, Layout, Name};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Inodes and names kept: past it, new answers are not kept (an answer
/// from here is an optimisation; a miss only costs a round trip). Nothing
/// leased is dropped to make room, so that everything the kernel was told
/// to keep long is known here when it must be dropped. Inodes with open
/// handles or writes are always kept.
const CAPACITY: usize = 1 << 20;
/// Names of one directory kept as its whole list.
const LIST_MAX: usize = 1 << 16;
/// Refused inserts between two sweeps of a full table for inodes that
/// hold nothing needed (a sweep reads every inode).
const SWEEP_EVERY: u32 = 1 << 16;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Fresh {
    inner: Mutex<Table>,
}

/// How long an answer is valid.
#[derive(Clone, Copy, Debug)]
pub struct Validity {
    /// Until when, if leased.
    pub leased: Option<Instant>,
    /// Until when, if not (the attribute timeout).
    pub short: Instant,
    /// [`Fresh::recalls`] when the request was sent.
    pub since: u64,
    /// [`Fresh::changes`] when the request was sent: a read answered
    /// after one of this client's own changes (which recall nothing from
    /// it) may predate it, and is not taken as leased.
    pub changes: u64,
    /// For a change's answer, its transaction number on the MDT (0 for a
    /// read): answers to this client's changes of one inode may be handled
    /// out of order, and an older one must not replace what a newer one
    /// said.
    pub stamp: u64,
}

#[derive(Debug, Default)]
struct Table {
    inodes: HashMap<Fid, Arc<Inode>>,
    /// Names known, in all directories (counted against [`CAPACITY`]).
    names: usize,
    next_gen: u64,
    /// Recalls (and drops of everything) so far.
    recalls: u64,
    /// This client's own changes noted so far.
    changes: u64,
    /// Inserts refused since the last sweep of a full table.
    refused: u32,
}

/// What a change of this client did to extended attributes. The MDT's
/// effects name the inodes a change touched, not what in them changed;
/// the request says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XattrsChanged {
    /// Nothing (a rename, a chmod, a link, ...).
    Nothing,
    /// It made inode `fid`, which has none yet (but the ACLs it
    /// inherited, if the effects say it has some).
    Made(Fid),
    /// It set or removed one of `fid`'s.
    Set(Fid),
    /// It changed `fid`'s owner or size, after which Linux drops a file
    /// capability (`security.capability`): asked again, if it had one.
    KillPriv(Fid),
}

/// The file capability, which a change of owner or size may drop.
const CAPABILITY: &[u8] = b"security.capability";

/// What is left until `until`, if anything.
fn left(until: Instant) -> Option<Duration> {
    until
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

/// Whether `i` is leased and not run out.
fn valid<T>(i: &Item<T>) -> bool {
    i.leased && left(i.until).is_some()
}

/// The attributes in `k`, if leased and not run out.
fn leased_attr(k: &Known) -> Option<&Attr> {
    k.attr.as_ref().filter(|a| valid(a)).map(|a| &a.v)
}

impl Table {
    /// Until when an answer given under `v` is valid, and whether leased.
    fn until(&self, v: Validity, granted: bool) -> (Instant, bool) {
        match v.leased {
            Some(u) if granted && self.recalls == v.since => (u, true),
            _ => (v.short, false),
        }
    }

    /// As [`Table::until`], for a read's answer: not leased either if one
    /// of this client's own changes was noted while it was in flight.
    fn until_read(&self, v: Validity, granted: bool) -> (Instant, bool) {
        self.until(v, granted && self.changes == v.changes)
    }

    fn full(&self) -> bool {
        self.inodes.len() + self.names >= CAPACITY
    }

    /// The object of `fid`, made if it has none.
    fn obtain(&mut self, fid: Fid) -> &Arc<Inode> {
        self.inodes
            .entry(fid)
            .or_insert_with(|| Arc::new(Inode::new(fid)))
    }

    /// The object of `fid`, made if it has none and `make`.
    fn object(&mut self, fid: Fid, make: bool) -> Option<&Arc<Inode>> {
        if make {
            return Some(self.obtain(fid));
        }
        self.inodes.get(&fid)
    }

    /// Whether a new inode or name may be kept. A full table is swept
    /// now and then of what ran out and of inodes that hold nothing
    /// needed.
    fn room(&mut self) -> bool {
        if !self.full() {
            return true;
        }
        self.refused += 1;
        if self.refused >= SWEEP_EVERY {
            self.refused = 0;
            let now = Instant::now();
            let dropped: usize = self
                .inodes
                .values()
                .map(|i| i.known().drop_expired(now))
                .sum();
            self.names -= dropped;
            self.inodes.retain(|_, i| !i.removable(false));
        }
        !self.full()
    }

    /// Drop `fid`'s object if nothing holds it and it holds nothing.
    fn sweep(&mut self, fid: Fid) {
        if self.inodes.get(&fid).is_some_and(|i| i.removable(true)) {
            self.inodes.remove(&fid);
        }
    }

    fn sweep_all(&mut self) {
        self.inodes.retain(|_, i| !i.removable(true));
    }

    /// Forget what is known of inode `fid`.
    fn forget(&mut self, fid: Fid) {
        if let Some(i) = self.inodes.get(&fid) {
            i.known().forget();
            self.sweep(fid);
        }
    }

    /// Note `a`, valid until `until`. An MDT's answer without a lease does
    /// not replace a leased one (it may predate it: a change would have
    /// recalled the lease first); the client's own change does (`own`).
    fn put_attr(&mut self, a: Attr, (until, leased): (Instant, bool), insert: bool, own: bool) {
        let fid = a.fid;
        let room = insert && self.room();
        let Some(i) = self.object(fid, room).cloned() else {
            return;
        };
        let mut k = i.known();
        let held = k.attr.as_ref().is_some_and(|e| e.leased_now());
        match &mut k.attr {
            Some(e) if !own && !leased && e.leased_now() => return,
            Some(e) => {
                *e = Item {
                    v: a,
                    until,
                    leased,
                }
            }
            None if room => {
                k.attr = Some(Item {
                    v: a,
                    until,
                    leased,
                })
            }
            None => return,
        }
        if !leased {
            k.gen = None;
        } else if !held || k.gen.is_none() {
            self.next_gen += 1;
            k.gen = Some(self.next_gen);
        }
    }

    fn put_name(
        &mut self,
        dir: Fid,
        name: Name,
        fid: Option<Fid>,
        (until, leased): (Instant, bool),
        insert: bool,
        own: bool,
    ) {
        let room = insert && self.room();
        let Some(d) = self.object(dir, room).cloned() else {
            return;
        };
        let mut k = d.known();
        if let Some(l) = &mut k.list {
            match fid {
                Some(_) => {
                    l.v.insert(name.clone());
                }
                None => {
                    l.v.remove(&name);
                }
            }
        }
        match k.names.get_mut(&name) {
            Some(e) if !own && !leased && e.leased_now() => {}
            Some(e) => {
                *e = Item {
                    v: fid,
                    until,
                    leased,
                }
            }
            None if room => {
                k.names.insert(
                    name,
                    Item {
                        v: fid,
                        until,
                        leased,
                    },
                );
                drop(k);
                self.names += 1;
            }
            None => {}
        }
    }

    /// Read what is known of `fid`.
    fn read<T>(&self, fid: Fid, f: impl FnOnce(&Known) -> Option<T>) -> Option<T> {
        f(&self.inodes.get(&fid)?.known())
    }
}

impl Fresh {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The object of inode `fid`, made if this client holds nothing of it
    /// yet (it is dropped again, once nothing holds it and it holds
    /// nothing, by [`Fresh::sweep`]).
    pub fn inode(&self, fid: Fid) -> Arc<Inode> {
        self.lock().obtain(fid).clone()
    }

    /// The object of inode `fid`, if this client holds anything of it.
    pub fn get(&self, fid: Fid) -> Option<Arc<Inode>> {
        self.lock().inodes.get(&fid).cloned()
    }

    /// Drop `fid`'s object if nothing holds it and it holds nothing (call
    /// after letting go of it, when a handle closed or a failure was
    /// reported).
    pub fn sweep(&self, fid: Fid) {
        self.lock().sweep(fid)
    }

    /// Inodes this client holds an object for.
    pub fn len(&self) -> usize {
        self.lock().inodes.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The inodes whose objects satisfy `f`.
    pub(crate) fn select(&self, f: impl Fn(&Inode) -> bool) -> Vec<Fid> {
        let t = self.lock();
        t.inodes
            .iter()
            .filter(|(_, i)| f(i))
            .map(|(fid, _)| *fid)
            .collect()
    }

    /// A directory's shards as met (`Some(None)`: not striped).
    pub(crate) fn shards(&self, dir: Fid) -> Option<Option<Arc<[Fid]>>> {
        self.lock().read(dir, |k| k.shards.clone())
    }

    /// Forget directory `dir`'s shards (it was restriped since): asked
    /// again when next needed.
    pub(crate) fn forget_shards(&self, dir: Fid) {
        if let Some(i) = self.lock().inodes.get(&dir) {
            i.known().shards = None;
        }
    }

    /// Note directory `dir`'s shards (`None`: not striped).
    pub(crate) fn set_shards(&self, dir: Fid, shards: Option<Arc<[Fid]>>) {
        let mut t = self.lock();
        let room = t.room();
        if let Some(i) = t.object(dir, room) {
            i.known().shards = Some(shards);
        }
    }

    /// Recalls so far: noted when a request is sent, so that an answer
    /// that crossed a recall is not taken as leased.
    pub fn recalls(&self) -> u64 {
        self.lock().recalls
    }

    /// This client's own changes noted so far (see [`Validity::changes`]).
    pub fn changes(&self) -> u64 {
        self.lock().changes
    }

    /// Take note of what a change did; `granted` tells which leases its
    /// answer carries, `x` what it did to extended attributes.
    pub fn learn(&self, e: Effects, granted: &HashSet<Lease>, v: Validity, x: XattrsChanged) {
        let mut t = self.lock();
        t.changes += 1;
        for fid in e.removed {
            t.forget(fid);
        }
        for a in e.attrs {
            if v.stamp > 0 {
                if t.read(a.fid, |k| Some(k.stamp > v.stamp)) == Some(true) {
                    // A newer change of this client already said more.
                    continue;
                }
                let room = t.room();
                if let Some(i) = t.object(a.fid, room) {
                    i.known().stamp = v.stamp;
                }
            }
            let u = t.until(v, granted.contains(&Lease::Attr(a.fid)));
            t.put_attr(a, u, true, true);
        }
        let with_acls = e.with_acls;
        for (dir, name, fid) in e.names {
            let u = t.until(v, granted.contains(&Lease::Name(dir, name.clone())));
            let old = t.read(dir, |k| k.names.get(&name).and_then(|i| i.v));
            t.put_name(dir, name, fid, u, true, true);
            if let (None, Some(old)) = (fid, old) {
                // The inode the removed name led to changed (its link
                // count) in a way this MDT may not have reported (it may
                // live on another MDT).
                if let Some(i) = t.inodes.get(&old) {
                    i.known().attr = None;
                }
                t.sweep(old);
            }
        }
        match x {
            // One that inherited ACLs has those: asked when wanted.
            XattrsChanged::Made(fid) if !with_acls.contains(&fid) => {
                if let Some(i) = t.inodes.get(&fid) {
                    let mut k = i.known();
                    if k.attr.as_ref().is_some_and(|a| a.leased) {
                        k.xattrs = Some(Xattrs {
                            names: HashMap::new(),
                            complete: true,
                        });
                    }
                }
            }
            XattrsChanged::Nothing | XattrsChanged::Made(_) => {}
            XattrsChanged::Set(fid) => {
                if let Some(i) = t.inodes.get(&fid) {
                    i.known().xattrs = None;
                }
            }
            XattrsChanged::KillPriv(fid) => {
                // A capability it may have dropped is asked again; an
                // inode known to have none still has none.
                if let Some(i) = t.inodes.get(&fid) {
                    if let Some(x) = &mut i.known().xattrs {
                        x.names.remove(&Name::from(CAPABILITY));
                    }
                }
            }
        }
        for l in granted {
            if let Lease::Size(fid) = l {
                if t.until(v, true).1 {
                    t.obtain(*fid).known().size_leased = true;
                }
            }
            if let Lease::List(dir) = l {
                let (until, leased) = t.until(v, true);
                if leased {
                    t.obtain(*dir).known().list = Some(Item {
                        v: HashSet::new(),
                        until,
                        leased,
                    });
                }
            }
        }
    }

    /// An MDT answered `a`: newer than what this client knew. Kept (when
    /// not known yet) only if leased.
    pub fn seen(&self, a: &Attr, granted: bool, v: Validity) {
        let mut t = self.lock();
        let u = t.until_read(v, granted);
        t.put_attr(a.clone(), u, u.1, false);
    }

    /// An MDT found `name` in `dir` naming `fid` (or nothing).
    pub fn seen_name(&self, dir: Fid, name: &Name, fid: Option<Fid>, granted: bool, v: Validity) {
        let mut t = self.lock();
        let u = t.until_read(v, granted);
        t.put_name(dir, name.clone(), fid, u, u.1, false);
    }

    /// An MDT listed the whole of `dir` (its names were noted one by one
    /// with [`Fresh::seen_name`]), under a lease on its list.
    pub fn seen_list(&self, dir: Fid, names: HashSet<Name>, v: Validity) {
        let mut t = self.lock();
        let (until, leased) = t.until_read(v, true);
        if leased && names.len() <= LIST_MAX {
            let room = t.room();
            if let Some(i) = t.object(dir, room) {
                i.known().list = Some(Item {
                    v: names,
                    until,
                    leased,
                });
            }
        }
    }

    /// An MDT said inode `fid` is gone: a name this client's change made
    /// may lead to it, so that name is not answered from here any more.
    pub fn vanished(&self, fid: Fid) {
        self.lock().forget(fid);
    }

    /// `loom migrate` moved inode `fid` to another MDT: what is known of
    /// it came from the one it left, and the transaction numbers its
    /// answers are ordered by are that MDT's, not comparable with the new
    /// one's.
    pub fn moved(&self, fid: Fid) {
        let mut t = self.lock();
        if let Some(i) = t.inodes.get(&fid) {
            let mut k = i.known();
            k.forget();
            k.stamp = 0;
        }
        t.sweep(fid);
    }

    /// Forget what is known without a lease (something may have changed
    /// unseen; what is leased would have been recalled).
    pub fn clear(&self) {
        let mut t = self.lock();
        let mut dropped = 0;
        for i in t.inodes.values() {
            let mut k = i.known();
            if k.attr.as_ref().is_some_and(|a| !a.leased) {
                k.attr = None;
            }
            if k.attr.is_none() {
                k.gen = None;
            }
            let before = k.names.len();
            k.names.retain(|_, i| i.leased);
            dropped += before - k.names.len();
        }
        t.names -= dropped;
        t.sweep_all();
    }

    /// The MDT recalls `leases`: they are forgotten, and answers in
    /// flight are no longer taken as leased.
    pub fn recall(&self, leases: &[Lease]) {
        let mut t = self.lock();
        t.recalls += 1;
        for l in leases {
            let fid = match l {
                Lease::Attr(fid) => {
                    t.forget(*fid);
                    continue;
                }
                Lease::Name(dir, name) => {
                    let removed = t
                        .inodes
                        .get(dir)
                        .is_some_and(|i| i.known().names.remove(name).is_some());
                    if removed {
                        t.names -= 1;
                    }
                    *dir
                }
                Lease::List(dir) => {
                    if let Some(i) = t.inodes.get(dir) {
                        i.known().list = None;
                    }
                    *dir
                }
                Lease::Size(fid) => {
                    if let Some(i) = t.inodes.get(fid) {
                        i.known().size_leased = false;
                    }
                    *fid
                }
                // Sent before the recall is answered; nothing is cached
                // under it.
                Lease::WriteBack(_) => continue,
            };
            t.sweep(fid);
        }
    }

    /// Whether this client holds the size lease of `fid` (see
    /// [`Lease::Size`]).
    pub fn size_leased(&self, fid: Fid) -> bool {
        self.lock().read(fid, |k| Some(k.size_leased)) == Some(true)
    }

    /// Forget everything (the leases are gone: a connection to an MDT
    /// was lost); returns what was known, for the kernel to drop too.
    pub fn take_all(&self) -> Vec<Lease> {
        let mut t = self.lock();
        t.recalls += 1;
        let (mut attrs, mut names, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
        for (fid, i) in &t.inodes {
            let mut k = i.known();
            if k.attr.is_some() {
                attrs.push(Lease::Attr(*fid));
            }
            names.extend(k.names.drain().map(|(n, _)| Lease::Name(*fid, n)));
            if std::mem::take(&mut k.size_leased) {
                sizes.push(Lease::Size(*fid));
            }
            k.forget();
            k.list = None;
            k.stamp = 0;
        }
        t.names = 0;
        t.sweep_all();
        attrs.extend(names);
        attrs.extend(sizes);
        attrs
    }

    /// Extended attribute `name` of `fid` (`None`: it has none), while
    /// the inode's attributes are leased.
    pub fn xattr(&self, fid: Fid, name: &Name) -> Option<Option<Vec<u8>>> {
        self.lock().read(fid, |k| {
            leased_attr(k)?;
            let x = k.xattrs.as_ref()?;
            match x.names.get(name) {
                Some(v) => Some(v.clone()),
                None if x.complete => Some(None),
                None => None,
            }
        })
    }

    /// The names of `fid`'s extended attributes, if all are known (it was
    /// made here) and its attributes are leased.
    pub fn xattr_names(&self, fid: Fid) -> Option<Vec<Name>> {
        self.lock().read(fid, |k| {
            leased_attr(k)?;
            let x = k.xattrs.as_ref().filter(|x| x.complete)?;
            let mut names: Vec<Name> = x
                .names
                .iter()
                .filter(|(_, v)| v.is_some())
                .map(|(n, _)| n.clone())
                .collect();
            names.sort();
            Some(names)
        })
    }

    /// An MDT answered extended attribute `name` of `fid` with `v`, for a
    /// request sent when [`Fresh::recalls`] was `since`: kept while the
    /// inode's attributes are leased.
    pub fn seen_xattr(&self, fid: Fid, name: &Name, v: Option<Vec<u8>>, since: u64) {
        let t = self.lock();
        if t.recalls != since {
            return;
        }
        if let Some(i) = t.inodes.get(&fid) {
            let mut k = i.known();
            if leased_attr(&k).is_some() {
                k.xattrs
                    .get_or_insert_with(Xattrs::default)
                    .names
                    .insert(name.clone(), v);
            }
        }
    }

    /// An MDT answered `layout` for `fid`: kept, if `fid` is a regular
    /// file (a directory's layout lists its shards), while its attributes
    /// are leased.
    pub fn seen_layout(&self, fid: Fid, layout: &Layout) {
        let t = self.lock();
        if let Some(i) = t.inodes.get(&fid) {
            let mut k = i.known();
            let file = leased_attr(&k).is_some_and(|a| a.kind == loom_proto::msg::FileKind::File);
            if file && k.layout.is_none() {
                k.layout = Some(layout.clone());
            }
        }
    }

    /// The attributes and layout of regular file `fid` while its
    /// attributes are leased, and which lease ([`Fresh::lease_gen`]): all
    /// an open needs from the MDT (another client's change to the file
    /// recalls the lease first).
    pub fn leased_file(&self, fid: Fid) -> Option<(Attr, Layout, u64)> {
        self.lock().read(fid, |k| {
            Some((leased_attr(k)?.clone(), k.layout.clone()?, k.gen?))
        })
    }

    /// Which lease this client holds on `fid`'s attributes, if any: the
    /// same number means it was held without a break in between.
    pub fn lease_gen(&self, fid: Fid) -> Option<u64> {
        self.lock().read(fid, |k| {
            leased_attr(k)?;
            k.gen
        })
    }

    /// The attributes of `fid` while valid, and what is left.
    pub fn attr(&self, fid: Fid) -> Option<(Attr, Duration)> {
        self.lock().read(fid, |k| {
            let i = k.attr.as_ref()?;
            Some((i.v.clone(), left(i.until)?))
        })
    }

    /// What `name` in directory `dir` is under leases only (not the
    /// attribute timeout): `Some(None)` known absent, `Some(Some((attr,
    /// layout)))` known with its attributes (and, for a regular file, its
    /// layout), `None` if not all of it is leased. What a library lookup
    /// may answer without its MDT.
    pub fn leased_entry(
        &self,
        dir: Fid,
        name: &Name,
        plain: bool,
    ) -> Option<Option<(Attr, Option<Layout>)>> {
        let t = self.lock();
        let fid = t.read(dir, |k| match k.names.get(name) {
            Some(i) if valid(i) => Some(i.v),
            _ => {
                let l = k.list.as_ref().filter(|_| plain)?;
                if !valid(l) || l.v.contains(name) {
                    return None;
                }
                Some(None)
            }
        })?;
        let Some(fid) = fid else {
            return Some(None);
        };
        t.read(fid, |k| {
            let a = leased_attr(k)?;
            let layout = match a.kind {
                loom_proto::msg::FileKind::File => Some(k.layout.clone()?),
                _ => None,
            };
            Some(Some((a.clone(), layout)))
        })
    }

    /// Every name of directory `dir` with its inode's attributes, if its
    /// whole list (of at most `max` names), each name in it and each
    /// named inode's attributes are leased; `None` otherwise.
    pub fn leased_listing(&self, dir: Fid, max: usize) -> Option<Vec<(Name, Attr)>> {
        let t = self.lock();
        let named: Vec<(Name, Fid)> = t.read(dir, |k| {
            let l = k.list.as_ref().filter(|l| valid(l) && l.v.len() <= max)?;
            l.v.iter()
                .map(|n| {
                    let i = k.names.get(n).filter(|i| valid(i))?;
                    Some((n.clone(), i.v?))
                })
                .collect()
        })?;
        named
            .into_iter()
            .map(|(n, fid)| Some((n, t.read(fid, |k| leased_attr(k).cloned())?)))
            .collect()
    }

    /// The attributes of `fid` while leased.
    pub fn leased_attr(&self, fid: Fid) -> Option<Attr> {
        self.lock().read(fid, |k| leased_attr(k).cloned())
    }

    /// What `name` in directory `dir` names (`None`: nothing) while
    /// valid, and what is left: known by itself, or (if `plain`: `dir` is
    /// known not to be striped) absent from the directory's leased list.
    /// A striped directory's master is also its shard 0, whose list holds
    /// only that shard's names.
    pub fn name(&self, dir: Fid, name: &Name, plain: bool) -> Option<(Option<Fid>, Duration)> {
        self.lock().read(dir, |k| {
            if let Some(i) = k.names.get(name) {
                if let Some(l) = left(i.until) {
                    return Some((i.v, l));
                }
            }
            let l = k.list.as_ref().filter(|_| plain)?;
            if l.v.contains(name) {
                return None;
            }
            Some((None, left(l.until)?))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_proto::msg::FileKind;

    fn attr(fid: Fid, size: u64) -> Attr {
        let t = loom_proto::msg::Time::default();
        Attr {
            fid,
            kind: FileKind::File,
            perm: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            size,
            atime: t,
            mtime: t,
            ctime: t,
            rdev: 0,
            projid: 0,
        }
    }

    fn short(f: &Fresh, d: Duration) -> Validity {
        Validity {
            leased: None,
            short: Instant::now() + d,
            since: f.recalls(),
            changes: f.changes(),
            stamp: 0,
        }
    }

    fn leased(f: &Fresh) -> Validity {
        Validity {
            leased: Some(Instant::now() + Duration::from_secs(600)),
            short: Instant::now() + Duration::from_secs(1),
            since: f.recalls(),
            changes: f.changes(),
            stamp: 0,
        }
    }

    #[test]
    fn an_older_change_answered_late_does_not_undo_a_newer_one() {
        let f = Fresh::default();
        let file = Fid::new(1, 2);
        let change = |size: u64, stamp: u64| {
            f.learn(
                Effects {
                    attrs: vec![attr(file, size)],
                    removed: vec![],
                    names: vec![],
                    with_acls: vec![],
                },
                &[Lease::Attr(file)].into_iter().collect(),
                Validity {
                    stamp,
                    ..leased(&f)
                },
                XattrsChanged::Nothing,
            )
        };
        // Two reports of one file, the newer (transaction 7) answered first.
        change(512, 7);
        change(256, 5);
        assert_eq!(f.attr(file).map(|(a, _)| a.size), Some(512));
        change(1024, 9);
        assert_eq!(f.attr(file).map(|(a, _)| a.size), Some(1024));
    }

    #[test]
    fn a_read_that_crossed_an_own_change_does_not_undo_it() {
        let f = Fresh::default();
        let (dir, file) = (Fid::new(1, 1), Fid::new(1, 2));
        let name = Name::from(&b"new"[..]);
        // Sent before this client's create, answered (absent) after it.
        let read = leased(&f);
        let all = |leases: Vec<Lease>| leases.into_iter().collect::<HashSet<_>>();
        f.learn(
            Effects {
                attrs: vec![attr(dir, 0), attr(file, 0)],
                removed: vec![],
                names: vec![(dir, name.clone(), Some(file))],
                with_acls: vec![],
            },
            &all(vec![Lease::Name(dir, name.clone()), Lease::Attr(file)]),
            leased(&f),
            XattrsChanged::Made(file),
        );
        f.seen_layout(file, &Layout::default());
        f.seen_name(dir, &name, None, true, read);
        assert_eq!(
            f.leased_entry(dir, &name, true)
                .map(|e| e.map(|(a, _)| a.fid)),
            Some(Some(file)),
            "the create stands"
        );
        // A read sent after it is taken as leased.
        f.seen_name(dir, &name, Some(file), true, leased(&f));
        assert!(f.leased_entry(dir, &name, true).is_some());
    }

    #[test]
    fn what_a_change_did_is_known_for_the_time_given_and_no_longer() {
        let f = Fresh::default();
        let (dir, file) = (Fid::new(1, 1), Fid::new(1, 2));
        let name = Name::from(&b"a"[..]);
        let e = Effects {
            attrs: vec![attr(dir, 1), attr(file, 5)],
            removed: vec![],
            names: vec![(dir, name.clone(), Some(file))],
            with_acls: vec![],
        };
        f.learn(
            e.clone(),
            &HashSet::new(),
            short(&f, Duration::from_secs(60)),
            XattrsChanged::Nothing,
        );
        let (a, left) = f.attr(file).expect("known");
        assert_eq!(a.size, 5);
        assert!(left <= Duration::from_secs(60));
        assert_eq!(f.name(dir, &name, true).map(|n| n.0), Some(Some(file)));
        assert!(f.name(dir, &Name::from(&b"b"[..]), true).is_none());
        let g = Fresh::default();
        g.learn(
            e,
            &HashSet::new(),
            short(&g, Duration::ZERO),
            XattrsChanged::Nothing,
        );
        assert!(g.attr(file).is_none(), "no time left");
    }

    #[test]
    fn a_removed_name_drops_its_inode_and_is_known_absent() {
        let f = Fresh::default();
        let (dir, file) = (Fid::new(1, 1), Fid::new(1, 2));
        let name = Name::from(&b"a"[..]);
        let v = short(&f, Duration::from_secs(60));
        let none = HashSet::new();
        f.learn(
            Effects {
                attrs: vec![attr(file, 5)],
                removed: vec![],
                names: vec![(dir, name.clone(), Some(file))],
                with_acls: vec![],
            },
            &none,
            v,
            XattrsChanged::Nothing,
        );
        f.learn(
            Effects {
                attrs: vec![attr(dir, 0)],
                removed: vec![],
                names: vec![(dir, name.clone(), None)],
                with_acls: vec![],
            },
            &none,
            v,
            XattrsChanged::Nothing,
        );
        assert!(f.attr(file).is_none(), "its link count changed");
        assert_eq!(f.name(dir, &name, true).map(|n| n.0), Some(None));
        f.learn(
            Effects {
                attrs: vec![attr(file, 5)],
                ..Effects::default()
            },
            &none,
            v,
            XattrsChanged::Nothing,
        );
        f.learn(
            Effects {
                removed: vec![file],
                ..Effects::default()
            },
            &none,
            v,
            XattrsChanged::Nothing,
        );
        assert!(f.attr(file).is_none(), "removed");
        f.clear();
        assert!(f.attr(dir).is_none());
    }

    #[test]
    fn a_leased_list_answers_absent_names_until_recalled() {
        let f = Fresh::default();
        let (parent, dir, file) = (Fid::new(1, 1), Fid::new(1, 3), Fid::new(1, 4));
        let made = Name::from(&b"d"[..]);
        let granted: HashSet<Lease> = [Lease::List(dir), Lease::Attr(dir)].into();
        f.learn(
            Effects {
                attrs: vec![attr(dir, 0)],
                removed: vec![],
                names: vec![(parent, made, Some(dir))],
                with_acls: vec![],
            },
            &granted,
            leased(&f),
            XattrsChanged::Nothing,
        );
        let x = Name::from(&b"x"[..]);
        let (absent, left) = f.name(dir, &x, true).expect("the list is leased");
        assert_eq!(absent, None);
        assert!(
            f.name(dir, &x, false).is_none(),
            "not from the list of a striped one"
        );
        assert!(
            left > Duration::from_secs(60),
            "for the lease, not the timeout"
        );
        // Its own create keeps the list whole.
        let granted: HashSet<Lease> = [Lease::Name(dir, x.clone()), Lease::Attr(file)].into();
        f.learn(
            Effects {
                attrs: vec![attr(file, 0)],
                removed: vec![],
                names: vec![(dir, x.clone(), Some(file))],
                with_acls: vec![],
            },
            &granted,
            leased(&f),
            XattrsChanged::Nothing,
        );
        assert_eq!(f.name(dir, &x, true).map(|n| n.0), Some(Some(file)));
        let y = Name::from(&b"y"[..]);
        assert_eq!(f.name(dir, &y, true).map(|n| n.0), Some(None));
        // Another client makes "y": recalled, the list goes.
        f.recall(&[Lease::Name(dir, y.clone()), Lease::List(dir)]);
        assert!(f.name(dir, &y, true).is_none(), "ask the MDT");
        assert_eq!(f.name(dir, &x, true).map(|n| n.0), Some(Some(file)));
    }

    #[test]
    fn extended_attributes_are_kept_only_with_leased_attributes() {
        let f = Fresh::default();
        let (a, b) = (Fid::new(1, 2), Fid::new(1, 3));
        let acl = Name::from(&b"system.posix_acl_access"[..]);
        f.seen(&attr(a, 1), true, leased(&f));
        f.seen(&attr(b, 1), false, short(&f, Duration::from_secs(60)));
        f.seen_xattr(a, &acl, None, f.recalls());
        f.seen_xattr(b, &acl, None, f.recalls());
        assert_eq!(f.xattr(a, &acl), Some(None), "absent, known");
        assert_eq!(f.xattr(b, &acl), None, "not leased: ask");
        f.recall(&[Lease::Attr(a)]);
        assert_eq!(f.xattr(a, &acl), None, "recalled with the attributes");
        f.seen(&attr(a, 1), true, leased(&f));
        let since = f.recalls();
        f.recall(&[Lease::Attr(b)]);
        f.seen_xattr(a, &acl, Some(b"x".to_vec()), since);
        assert_eq!(f.xattr(a, &acl), None, "crossed a recall: not kept");
    }

    #[test]
    fn a_file_made_here_has_no_extended_attributes_until_one_is_set() {
        let f = Fresh::default();
        let (dir, file) = (Fid::new(1, 1), Fid::new(1, 4));
        let (acl, label) = (
            Name::from(&b"system.posix_acl_access"[..]),
            Name::from(&b"security.selinux"[..]),
        );
        let made = |f: &Fresh, x| {
            f.learn(
                Effects {
                    attrs: vec![attr(dir, 0), attr(file, 0)],
                    removed: vec![],
                    names: vec![(dir, Name::from(&b"f"[..]), Some(file))],
                    with_acls: vec![],
                },
                &[Lease::Attr(file), Lease::Attr(dir)].into(),
                leased(f),
                x,
            )
        };
        // Made where it inherited ACLs (the MDT says so): not known.
        let g = Fresh::default();
        g.learn(
            Effects {
                attrs: vec![attr(dir, 0), attr(file, 0)],
                removed: vec![],
                names: vec![(dir, Name::from(&b"f"[..]), Some(file))],
                with_acls: vec![file],
            },
            &[Lease::Attr(file), Lease::Attr(dir)].into(),
            leased(&g),
            XattrsChanged::Made(file),
        );
        assert_eq!(g.xattr(file, &acl), None, "its inherited ACL is asked for");
        assert_eq!(g.xattr_names(file), None);
        made(&f, XattrsChanged::Made(file));
        assert_eq!(f.xattr(file, &acl), Some(None), "a new file has none");
        assert_eq!(f.xattr_names(file), Some(vec![]));
        assert_eq!(f.xattr(dir, &acl), None, "its directory's are not known");
        // A chmod (another change to its attributes) keeps that.
        made(&f, XattrsChanged::Nothing);
        assert_eq!(f.xattr(file, &label), Some(None));
        // A chown may drop a file capability; it had none to drop.
        let caps = Name::from(&b"security.capability"[..]);
        made(&f, XattrsChanged::KillPriv(file));
        assert_eq!(f.xattr(file, &caps), Some(None));
        assert_eq!(f.xattr_names(file), Some(vec![]));
        // One that had one (known from the MDT, not made here): asked
        // again after the chown, the others kept.
        f.seen(&attr(dir, 0), true, leased(&f));
        f.seen_xattr(dir, &caps, Some(b"c".to_vec()), f.recalls());
        f.seen_xattr(dir, &label, None, f.recalls());
        made(&f, XattrsChanged::KillPriv(dir));
        assert_eq!(f.xattr(dir, &caps), None);
        assert_eq!(f.xattr(dir, &label), Some(None));
        // Setting one: nothing is known until asked.
        made(&f, XattrsChanged::Made(file));
        made(&f, XattrsChanged::Set(file));
        assert_eq!(f.xattr(file, &acl), None);
        // Not leased: nothing kept.
        let g = Fresh::default();
        g.learn(
            Effects {
                attrs: vec![attr(file, 0)],
                ..Effects::default()
            },
            &HashSet::new(),
            short(&g, Duration::from_secs(60)),
            XattrsChanged::Made(file),
        );
        assert_eq!(g.xattr(file, &acl), None);
    }

    #[test]
    fn an_answer_that_crossed_a_recall_is_not_leased() {
        let f = Fresh::default();
        let file = Fid::new(1, 2);
        let v = leased(&f);
        f.recall(&[Lease::Attr(file)]);
        f.seen(&attr(file, 7), true, v);
        assert!(
            f.attr(file).is_none(),
            "not kept: it may predate the recall"
        );
        f.seen(&attr(file, 8), true, leased(&f));
        assert_eq!(f.attr(file).map(|a| a.0.size), Some(8));
        let all = f.take_all();
        assert_eq!(all, vec![Lease::Attr(file)]);
        assert!(f.attr(file).is_none());
    }

    #[tokio::test]
    async fn an_inode_has_one_object_while_anything_holds_it() {
        let f = Fresh::default();
        let (dir, file) = (Fid::new(1, 1), Fid::new(1, 4));
        let a = Name::from(&b"a"[..]);
        let granted: HashSet<Lease> = [
            Lease::Attr(file),
            Lease::Name(dir, a.clone()),
            Lease::Size(file),
        ]
        .into();
        f.learn(
            Effects {
                attrs: vec![attr(dir, 0), attr(file, 0)],
                removed: vec![],
                names: vec![(dir, a.clone(), Some(file))],
                with_acls: vec![],
            },
            &granted,
            leased(&f),
            XattrsChanged::Made(file),
        );
        let i = f.inode(file);
        let same = f.get(file).expect("known");
        assert!(Arc::ptr_eq(&i, &same), "one object per inode");
        assert_eq!(f.len(), 2, "the directory and the file");
        drop(same);
        // Its attributes recalled: still held for its size lease.
        f.recall(&[Lease::Attr(file)]);
        assert!(f.get(file).is_some() && f.size_leased(file));
        // A call in progress (holding it) keeps it; writes in flight too.
        f.recall(&[Lease::Size(file)]);
        assert!(f.get(file).is_some(), "held by the caller");
        let t = i.writes().admit(0, 10).await;
        drop(i);
        f.sweep(file);
        assert!(f.get(file).is_some(), "a write is in flight");
        f.get(file).expect("kept").writes().finish(t, Ok(()));
        f.sweep(file);
        assert!(f.get(file).is_none(), "holds nothing: gone");
        // The directory: its name recalled, its unleased attributes
        // cleared, nothing left.
        f.recall(&[Lease::Name(dir, a)]);
        f.clear();
        assert!(f.is_empty(), "no object left: {f:?}");
    }

    #[test]
    fn a_lost_connection_leaves_only_what_needs_no_lease() {
        let f = Fresh::default();
        let (dir, file) = (Fid::new(1, 1), Fid::new(1, 4));
        let a = Name::from(&b"a"[..]);
        f.learn(
            Effects {
                attrs: vec![attr(file, 0)],
                removed: vec![],
                names: vec![(dir, a.clone(), Some(file))],
                with_acls: vec![],
            },
            &[
                Lease::Attr(file),
                Lease::Name(dir, a.clone()),
                Lease::List(dir),
            ]
            .into(),
            leased(&f),
            XattrsChanged::Nothing,
        );
        f.set_shards(dir, None);
        let mut all = f.take_all();
        all.sort_by_key(|l| format!("{l:?}"));
        assert_eq!(all, vec![Lease::Attr(file), Lease::Name(dir, a.clone())]);
        assert!(f.name(dir, &a, true).is_none(), "the list went too");
        assert_eq!(f.shards(dir), Some(None), "a directory's shards stay");
        assert_eq!(f.len(), 1);
    }
}
