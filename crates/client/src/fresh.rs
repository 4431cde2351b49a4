//! What this client has just made or changed, as its MDTs said in their
//! replies ([`Effects`]): the attributes of every inode a change touched
//! and the names it set or removed, each with the moment it was learned.
//!
//! A mount answers a stat or a lookup from here while the answer is
//! younger than the time its kernel may cache the same (the attribute
//! timeout), and tells the kernel to keep it only for what is left of
//! that time. The kernel asks again after each of this mount's own
//! changes (a create makes it drop its directory's attributes, and with
//! kernel permission checks it needs them before the next create in that
//! directory); those questions need no server. Nothing another mount did
//! is hidden for longer than the kernel's cache could hide it anyway.
//!
//! Whatever this client cannot be sure of is dropped: a change answered
//! without its effects (a resend answered from the MDT's reply cache) or
//! not answered at all (a timeout: it may have been applied) clears
//! everything.

use loom_proto::msg::{Attr, Effects};
use loom_proto::{Fid, Name};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries kept before everything is dropped (an answer from here is an
/// optimisation; a miss only costs a round trip).
const CAPACITY: usize = 1 << 16;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Fresh {
    inner: Mutex<Known>,
}

#[derive(Debug, Default)]
struct Known {
    attrs: HashMap<Fid, (Attr, Instant)>,
    names: HashMap<(Fid, Name), (Option<Fid>, Instant)>,
}

/// What is left of `within` for something learned at `at`, if anything.
fn left(at: Instant, within: Duration) -> Option<Duration> {
    within.checked_sub(at.elapsed()).filter(|d| !d.is_zero())
}

impl Fresh {
    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take note of what a change did, now.
    pub fn learn(&self, e: Effects) {
        let now = Instant::now();
        let mut k = self.lock();
        if k.attrs.len() + e.attrs.len() > CAPACITY || k.names.len() + e.names.len() > CAPACITY {
            *k = Known::default();
        }
        for fid in e.removed {
            k.attrs.remove(&fid);
        }
        for a in e.attrs {
            k.attrs.insert(a.fid, (a, now));
        }
        for (dir, name, fid) in e.names {
            let old = k.names.insert((dir, name), (fid, now));
            if let (None, Some((Some(old), _))) = (fid, old) {
                // The inode the removed name led to changed (its link
                // count) in a way this MDT may not have reported (it may
                // live on another MDT).
                k.attrs.remove(&old);
            }
        }
    }

    /// An MDT answered with `a` just now: if this client knows `a`'s
    /// inode from its own change, `a` is newer (a change on another mount
    /// may be in it).
    pub fn seen(&self, a: &Attr) {
        let mut k = self.lock();
        if let Some(e) = k.attrs.get_mut(&a.fid) {
            *e = (a.clone(), Instant::now());
        }
    }

    /// An MDT found `name` in `dir` naming `fid` (or nothing) just now.
    pub fn seen_name(&self, dir: Fid, name: &Name, fid: Option<Fid>) {
        let mut k = self.lock();
        if let Some(e) = k.names.get_mut(&(dir, name.clone())) {
            *e = (fid, Instant::now());
        }
    }

    /// An MDT said inode `fid` is gone: a name this client's change made
    /// may lead to it, so that name is not answered from here any more.
    pub fn vanished(&self, fid: Fid) {
        self.lock().attrs.remove(&fid);
    }

    /// Forget everything (something may have changed unseen).
    pub fn clear(&self) {
        *self.lock() = Known::default();
    }

    /// The attributes of `fid` learned less than `within` ago, and what
    /// is left of `within`.
    pub fn attr(&self, fid: Fid, within: Duration) -> Option<(Attr, Duration)> {
        let k = self.lock();
        let (a, at) = k.attrs.get(&fid)?;
        Some((a.clone(), left(*at, within)?))
    }

    /// What `name` in directory `dir` was made to name (`None`: removed)
    /// less than `within` ago, and what is left of `within`.
    pub fn name(&self, dir: Fid, name: &Name, within: Duration) -> Option<(Option<Fid>, Duration)> {
        let k = self.lock();
        let (fid, at) = k.names.get(&(dir, name.clone()))?;
        Some((*fid, left(*at, within)?))
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

    #[test]
    fn what_a_change_did_is_known_for_the_time_asked_and_no_longer() {
        let f = Fresh::default();
        let (dir, file) = (Fid::new(1, 1), Fid::new(1, 2));
        let name = Name::from(&b"a"[..]);
        f.learn(Effects {
            attrs: vec![attr(dir, 1), attr(file, 5)],
            removed: vec![],
            names: vec![(dir, name.clone(), Some(file))],
        });
        let (a, left) = f.attr(file, Duration::from_secs(60)).expect("known");
        assert_eq!(a.size, 5);
        assert!(left <= Duration::from_secs(60));
        assert_eq!(
            f.name(dir, &name, Duration::from_secs(60)).map(|n| n.0),
            Some(Some(file))
        );
        assert!(f.attr(file, Duration::ZERO).is_none(), "older than asked");
        assert!(f
            .name(dir, &Name::from(&b"b"[..]), Duration::from_secs(60))
            .is_none());
    }

    #[test]
    fn a_removed_name_drops_its_inode_and_is_known_absent() {
        let f = Fresh::default();
        let (dir, file) = (Fid::new(1, 1), Fid::new(1, 2));
        let name = Name::from(&b"a"[..]);
        let long = Duration::from_secs(60);
        f.learn(Effects {
            attrs: vec![attr(file, 5)],
            removed: vec![],
            names: vec![(dir, name.clone(), Some(file))],
        });
        f.learn(Effects {
            attrs: vec![attr(dir, 0)],
            removed: vec![],
            names: vec![(dir, name.clone(), None)],
        });
        assert!(f.attr(file, long).is_none(), "its link count changed");
        assert_eq!(f.name(dir, &name, long).map(|n| n.0), Some(None));
        f.learn(Effects {
            attrs: vec![attr(file, 5)],
            ..Effects::default()
        });
        f.learn(Effects {
            removed: vec![file],
            ..Effects::default()
        });
        assert!(f.attr(file, long).is_none(), "removed");
        f.clear();
        assert!(f.attr(dir, long).is_none());
    }
}
