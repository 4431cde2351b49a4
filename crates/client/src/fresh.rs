//! What this client knows of inodes and names, and until when: what its
//! own changes did, as its MDTs said in their replies ([`Effects`]), and,
//! on a mount that takes leases, what its MDTs answered it.
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

use loom_proto::msg::{Attr, Effects, Lease};
use loom_proto::{Fid, Layout, Name};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries kept: past it, new answers are not kept (an answer from here
/// is an optimisation; a miss only costs a round trip). Nothing leased is
/// dropped to make room, so that everything the kernel was told to keep
/// long is known here when it must be dropped.
const CAPACITY: usize = 1 << 20;
/// Names of one directory kept as its whole list.
const LIST_MAX: usize = 1 << 16;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Fresh {
    inner: Mutex<Known>,
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
struct Known {
    attrs: HashMap<Fid, Item<Attr>>,
    names: HashMap<(Fid, Name), Item<Option<Fid>>>,
    /// Directories whose every name is known (in `names` or absent).
    lists: HashMap<Fid, Item<HashSet<Name>>>,
    /// Extended attributes of inodes whose attributes are leased: a
    /// change to one changes the inode's ctime, so it recalls the
    /// attributes, and these go with them.
    xattrs: HashMap<Fid, Xattrs>,
    /// Layouts of regular files (never changed after the create), kept
    /// with leased attributes: an open under the lease needs no MDT.
    layouts: HashMap<Fid, Layout>,
    /// For each inode whose attributes are leased, which lease: a lease
    /// that starts after none was held (or the one held ran out) gets a
    /// new number, a renewal keeps it. While the number stays, every
    /// change another client made to the inode was recalled here first.
    lease_gens: HashMap<Fid, u64>,
    next_gen: u64,
    /// Files this client made whose size it holds a lease on: it may
    /// report what it writes to them later (at release, or when recalled).
    /// Not bound by the lease time: the MDT recalls it before anyone else
    /// sees the size, and it goes with the connection.
    sizes: HashSet<Fid>,
    /// Recalls (and drops of everything) so far.
    recalls: u64,
    /// This client's own changes noted so far.
    changes: u64,
    /// The transaction number of the newest own change noted for each
    /// inode's attributes (see [`Validity::stamp`]).
    stamps: HashMap<Fid, u64>,
}

/// What is known of one inode's extended attributes.
#[derive(Debug, Default)]
struct Xattrs {
    /// Values by name (`None`: absent).
    names: HashMap<Name, Option<Vec<u8>>>,
    /// The inode has no others: this client made it (a new inode has
    /// none) and has not set or removed one since.
    complete: bool,
}

/// What a change of this client did to extended attributes. The MDT's
/// effects name the inodes a change touched, not what in them changed;
/// the request says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XattrsChanged {
    /// Nothing (a rename, a chmod, a link, ...).
    Nothing,
    /// It made inode `fid`, which has none yet.
    Made(Fid),
    /// It set or removed one of `fid`'s.
    Set(Fid),
    /// It changed `fid`'s owner or size, after which Linux drops a file
    /// capability (`security.capability`): asked again, if it had one.
    KillPriv(Fid),
}

/// The file capability, which a change of owner or size may drop.
const CAPABILITY: &[u8] = b"security.capability";

#[derive(Debug)]
struct Item<T> {
    v: T,
    until: Instant,
    leased: bool,
}

/// What is left until `until`, if anything.
fn left(until: Instant) -> Option<Duration> {
    until
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
}

impl Known {
    /// Until when an answer given under `v` is valid, and whether leased.
    fn until(&self, v: Validity, granted: bool) -> (Instant, bool) {
        match v.leased {
            Some(u) if granted && self.recalls == v.since => (u, true),
            _ => (v.short, false),
        }
    }

    /// As [`Known::until`], for a read's answer: not leased either if one
    /// of this client's own changes was noted while it was in flight.
    fn until_read(&self, v: Validity, granted: bool) -> (Instant, bool) {
        self.until(v, granted && self.changes == v.changes)
    }

    /// Forget what is known of inode `fid`.
    fn forget(&mut self, fid: Fid) {
        self.lease_gens.remove(&fid);
        self.attrs.remove(&fid);
        self.xattrs.remove(&fid);
        self.layouts.remove(&fid);
    }

    fn full(&self) -> bool {
        self.attrs.len() + self.names.len() >= CAPACITY
    }

    /// Note `a`, valid until `until`. An MDT's answer without a lease does
    /// not replace a leased one (it may predate it: a change would have
    /// recalled the lease first); the client's own change does (`own`).
    fn put_attr(&mut self, a: Attr, (until, leased): (Instant, bool), insert: bool, own: bool) {
        let full = self.full();
        let fid = a.fid;
        let held = self
            .attrs
            .get(&fid)
            .is_some_and(|e| e.leased && e.until > Instant::now());
        match self.attrs.get_mut(&a.fid) {
            Some(e) if !own && !leased && e.leased && e.until > Instant::now() => return,
            Some(e) => {
                *e = Item {
                    v: a,
                    until,
                    leased,
                }
            }
            None if insert && !full => {
                self.attrs.insert(
                    a.fid,
                    Item {
                        v: a,
                        until,
                        leased,
                    },
                );
            }
            None => return,
        }
        if !leased {
            self.lease_gens.remove(&fid);
        } else if !held || !self.lease_gens.contains_key(&fid) {
            self.next_gen += 1;
            let g = self.next_gen;
            self.lease_gens.insert(fid, g);
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
        let full = self.full();
        if let Some(l) = self.lists.get_mut(&dir) {
            match fid {
                Some(_) => {
                    l.v.insert(name.clone());
                }
                None => {
                    l.v.remove(&name);
                }
            }
        }
        match self.names.get_mut(&(dir, name.clone())) {
            Some(e) if !own && !leased && e.leased && e.until > Instant::now() => {}
            Some(e) => {
                *e = Item {
                    v: fid,
                    until,
                    leased,
                }
            }
            None if insert && !full => {
                self.names.insert(
                    (dir, name),
                    Item {
                        v: fid,
                        until,
                        leased,
                    },
                );
            }
            None => {}
        }
    }
}

impl Fresh {
    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
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
        let mut k = self.lock();
        k.changes += 1;
        for fid in e.removed {
            k.forget(fid);
        }
        for a in e.attrs {
            if v.stamp > 0 {
                if k.stamps.get(&a.fid).is_some_and(|s| *s > v.stamp) {
                    // A newer change of this client already said more.
                    continue;
                }
                if k.stamps.len() >= CAPACITY {
                    k.stamps.clear();
                }
                k.stamps.insert(a.fid, v.stamp);
            }
            let u = k.until(v, granted.contains(&Lease::Attr(a.fid)));
            k.put_attr(a, u, true, true);
        }
        for (dir, name, fid) in e.names {
            let u = k.until(v, granted.contains(&Lease::Name(dir, name.clone())));
            let old = k.names.get(&(dir, name.clone())).and_then(|i| i.v);
            k.put_name(dir, name, fid, u, true, true);
            if let (None, Some(old)) = (fid, old) {
                // The inode the removed name led to changed (its link
                // count) in a way this MDT may not have reported (it may
                // live on another MDT).
                k.attrs.remove(&old);
            }
        }
        match x {
            XattrsChanged::Nothing => {}
            XattrsChanged::Made(fid) => {
                let leased = k.attrs.get(&fid).is_some_and(|a| a.leased);
                if leased && k.xattrs.len() < CAPACITY {
                    k.xattrs.insert(
                        fid,
                        Xattrs {
                            names: HashMap::new(),
                            complete: true,
                        },
                    );
                }
            }
            XattrsChanged::Set(fid) => {
                k.xattrs.remove(&fid);
            }
            XattrsChanged::KillPriv(fid) => {
                // A capability it may have dropped is asked again; an
                // inode known to have none still has none.
                if let Some(x) = k.xattrs.get_mut(&fid) {
                    x.names.remove(&Name::from(CAPABILITY));
                }
            }
        }
        for l in granted {
            if let Lease::Size(fid) = l {
                if k.until(v, true).1 {
                    k.sizes.insert(*fid);
                }
            }
            if let Lease::List(dir) = l {
                let (until, leased) = k.until(v, true);
                if leased {
                    k.lists.insert(
                        *dir,
                        Item {
                            v: HashSet::new(),
                            until,
                            leased,
                        },
                    );
                }
            }
        }
    }

    /// An MDT answered `a`: newer than what this client knew. Kept (when
    /// not known yet) only if leased.
    pub fn seen(&self, a: &Attr, granted: bool, v: Validity) {
        let mut k = self.lock();
        let u = k.until_read(v, granted);
        k.put_attr(a.clone(), u, u.1, false);
    }

    /// An MDT found `name` in `dir` naming `fid` (or nothing).
    pub fn seen_name(&self, dir: Fid, name: &Name, fid: Option<Fid>, granted: bool, v: Validity) {
        let mut k = self.lock();
        let u = k.until_read(v, granted);
        k.put_name(dir, name.clone(), fid, u, u.1, false);
    }

    /// An MDT listed the whole of `dir` (its names were noted one by one
    /// with [`Fresh::seen_name`]), under a lease on its list.
    pub fn seen_list(&self, dir: Fid, names: HashSet<Name>, v: Validity) {
        let mut k = self.lock();
        let (until, leased) = k.until_read(v, true);
        if leased && names.len() <= LIST_MAX {
            k.lists.insert(
                dir,
                Item {
                    v: names,
                    until,
                    leased,
                },
            );
        }
    }

    /// An MDT said inode `fid` is gone: a name this client's change made
    /// may lead to it, so that name is not answered from here any more.
    pub fn vanished(&self, fid: Fid) {
        self.lock().forget(fid);
    }

    /// Forget what is known without a lease (something may have changed
    /// unseen; what is leased would have been recalled).
    pub fn clear(&self) {
        let mut k = self.lock();
        k.attrs.retain(|_, i| i.leased);
        let Known {
            attrs, lease_gens, ..
        } = &mut *k;
        lease_gens.retain(|f, _| attrs.contains_key(f));
        k.names.retain(|_, i| i.leased);
    }

    /// The MDT recalls `leases`: they are forgotten, and answers in
    /// flight are no longer taken as leased.
    pub fn recall(&self, leases: &[Lease]) {
        let mut k = self.lock();
        k.recalls += 1;
        for l in leases {
            match l {
                Lease::Attr(fid) => k.forget(*fid),
                Lease::Name(dir, name) => {
                    k.names.remove(&(*dir, name.clone()));
                }
                Lease::List(dir) => {
                    k.lists.remove(dir);
                }
                Lease::Size(fid) => {
                    k.sizes.remove(fid);
                }
            }
        }
    }

    /// Whether this client holds the size lease of `fid` (see
    /// [`Lease::Size`]).
    pub fn size_leased(&self, fid: Fid) -> bool {
        self.lock().sizes.contains(&fid)
    }

    /// Forget everything (the leases are gone: a connection to an MDT
    /// was lost); returns what was known, for the kernel to drop too.
    pub fn take_all(&self) -> Vec<Lease> {
        let mut k = self.lock();
        k.recalls += 1;
        let mut v: Vec<Lease> = k.attrs.drain().map(|(f, _)| Lease::Attr(f)).collect();
        v.extend(k.names.drain().map(|((d, n), _)| Lease::Name(d, n)));
        v.extend(k.sizes.drain().map(Lease::Size));
        k.lists.clear();
        k.xattrs.clear();
        k.layouts.clear();
        k.lease_gens.clear();
        k.stamps.clear();
        v
    }

    /// Extended attribute `name` of `fid` (`None`: it has none), while
    /// the inode's attributes are leased.
    pub fn xattr(&self, fid: Fid, name: &Name) -> Option<Option<Vec<u8>>> {
        let k = self.lock();
        let a = k.attrs.get(&fid)?;
        if !a.leased || left(a.until).is_none() {
            return None;
        }
        let x = k.xattrs.get(&fid)?;
        match x.names.get(name) {
            Some(v) => Some(v.clone()),
            None if x.complete => Some(None),
            None => None,
        }
    }

    /// The names of `fid`'s extended attributes, if all are known (it was
    /// made here) and its attributes are leased.
    pub fn xattr_names(&self, fid: Fid) -> Option<Vec<Name>> {
        let k = self.lock();
        let a = k.attrs.get(&fid)?;
        if !a.leased || left(a.until).is_none() {
            return None;
        }
        let x = k.xattrs.get(&fid).filter(|x| x.complete)?;
        let mut names: Vec<Name> = x
            .names
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(n, _)| n.clone())
            .collect();
        names.sort();
        Some(names)
    }

    /// An MDT answered extended attribute `name` of `fid` with `v`, for a
    /// request sent when [`Fresh::recalls`] was `since`: kept while the
    /// inode's attributes are leased.
    pub fn seen_xattr(&self, fid: Fid, name: &Name, v: Option<Vec<u8>>, since: u64) {
        let mut k = self.lock();
        if k.recalls != since {
            return;
        }
        let leased = k
            .attrs
            .get(&fid)
            .is_some_and(|a| a.leased && left(a.until).is_some());
        if leased && k.xattrs.len() < CAPACITY {
            k.xattrs
                .entry(fid)
                .or_default()
                .names
                .insert(name.clone(), v);
        }
    }

    /// An MDT answered `layout` for `fid`: kept, if `fid` is a regular
    /// file (a directory's layout lists its shards), while its attributes
    /// are leased.
    pub fn seen_layout(&self, fid: Fid, layout: &Layout) {
        let mut k = self.lock();
        let leased = k.attrs.get(&fid).is_some_and(|a| {
            a.leased && left(a.until).is_some() && a.v.kind == loom_proto::msg::FileKind::File
        });
        if leased && k.layouts.len() < CAPACITY && !k.layouts.contains_key(&fid) {
            k.layouts.insert(fid, layout.clone());
        }
    }

    /// The attributes and layout of regular file `fid` while its
    /// attributes are leased, and which lease ([`Fresh::lease_gen`]): all
    /// an open needs from the MDT (another client's change to the file
    /// recalls the lease first).
    pub fn leased_file(&self, fid: Fid) -> Option<(Attr, Layout, u64)> {
        let k = self.lock();
        let a = k.attrs.get(&fid)?;
        if !a.leased || left(a.until).is_none() {
            return None;
        }
        Some((
            a.v.clone(),
            k.layouts.get(&fid)?.clone(),
            *k.lease_gens.get(&fid)?,
        ))
    }

    /// Which lease this client holds on `fid`'s attributes, if any: the
    /// same number means it was held without a break in between.
    pub fn lease_gen(&self, fid: Fid) -> Option<u64> {
        let k = self.lock();
        let a = k.attrs.get(&fid)?;
        if !a.leased || left(a.until).is_none() {
            return None;
        }
        k.lease_gens.get(&fid).copied()
    }

    /// The attributes of `fid` while valid, and what is left.
    pub fn attr(&self, fid: Fid) -> Option<(Attr, Duration)> {
        let k = self.lock();
        let i = k.attrs.get(&fid)?;
        Some((i.v.clone(), left(i.until)?))
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
        let k = self.lock();
        let valid = |leased: bool, until: Instant| leased && left(until).is_some();
        let fid = match k.names.get(&(dir, name.clone())) {
            Some(i) if valid(i.leased, i.until) => i.v,
            _ => {
                let l = k.lists.get(&dir).filter(|_| plain)?;
                if !valid(l.leased, l.until) || l.v.contains(name) {
                    return None;
                }
                return Some(None);
            }
        };
        let Some(fid) = fid else {
            return Some(None);
        };
        let a = k.attrs.get(&fid).filter(|a| valid(a.leased, a.until))?;
        let layout = match a.v.kind {
            loom_proto::msg::FileKind::File => Some(k.layouts.get(&fid)?.clone()),
            _ => None,
        };
        Some(Some((a.v.clone(), layout)))
    }

    /// The attributes of `fid` while leased.
    pub fn leased_attr(&self, fid: Fid) -> Option<Attr> {
        let k = self.lock();
        let a = k.attrs.get(&fid)?;
        (a.leased && left(a.until).is_some()).then(|| a.v.clone())
    }

    /// What `name` in directory `dir` names (`None`: nothing) while
    /// valid, and what is left: known by itself, or (if `plain`: `dir` is
    /// known not to be striped) absent from the directory's leased list.
    /// A striped directory's master is also its shard 0, whose list holds
    /// only that shard's names.
    pub fn name(&self, dir: Fid, name: &Name, plain: bool) -> Option<(Option<Fid>, Duration)> {
        let k = self.lock();
        if let Some(i) = k.names.get(&(dir, name.clone())) {
            if let Some(l) = left(i.until) {
                return Some((i.v, l));
            }
        }
        let l = k.lists.get(&dir).filter(|_| plain)?;
        if l.v.contains(name) {
            return None;
        }
        Some((None, left(l.until)?))
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
                },
                &[Lease::Attr(file), Lease::Attr(dir)].into(),
                leased(f),
                x,
            )
        };
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
}
