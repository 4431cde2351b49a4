//! [`Inode`]: the one object this client keeps per inode it holds
//! anything of. It holds:
//! - what the client knows of the inode and until when ([`Known`]): its
//!   attributes, the lease on them, its layout, extended attributes and
//!   size lease; for a directory, the names known in it, its whole list
//!   and its shards;
//! - its open handles here, whether the MDT keeps it as this client's
//!   orphan, and a failure no close could report ([`Inode`]'s handle
//!   methods);
//! - its writes in flight ([`FileWrites`]).
//!
//! The objects live in one table, [`crate::fresh::Fresh`], which hands
//! them out and drops an object once nothing holds it and it holds
//! nothing. **Why one object:** a recall, a truncate, a stat and a close
//! each need several of these at once; kept in one place they cannot
//! drift apart (a handle of one map whose writes another map forgot),
//! and an inode's whole state is found with one lookup.

use crate::io::file::OpenFile;
use crate::io::writeback::FileWrites;
use loom_proto::msg::Attr;
use loom_proto::{Errno, Fid, Layout, Name};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

/// An answer, valid until `until`; `leased` if under a lease (else for
/// the attribute timeout).
#[derive(Debug)]
pub(crate) struct Item<T> {
    pub v: T,
    pub until: Instant,
    pub leased: bool,
}

impl<T> Item<T> {
    /// Whether it is leased and the lease has not run out.
    pub fn leased_now(&self) -> bool {
        self.leased && self.until > Instant::now()
    }
}

/// What is known of one inode's extended attributes.
#[derive(Debug, Default)]
pub(crate) struct Xattrs {
    /// Values by name (`None`: absent).
    pub names: HashMap<Name, Option<Vec<u8>>>,
    /// The inode has no others: this client made it (a new inode has
    /// none) and has not set or removed one since.
    pub complete: bool,
}

/// What this client knows of one inode (see [`crate::fresh`] for how
/// long each part is valid). Read and changed only under the table's
/// lock, so that a recall is atomic with every check of what is leased.
#[derive(Debug, Default)]
pub(crate) struct Known {
    pub attr: Option<Item<Attr>>,
    /// Which lease its attributes are under: a lease that starts after
    /// none was held (or the one held ran out) gets a new number, a
    /// renewal keeps it. While the number stays, every change another
    /// client made to the inode was recalled here first.
    pub gen: Option<u64>,
    /// The transaction number of the newest own change noted for its
    /// attributes (see [`crate::fresh::Validity::stamp`]); 0 for none.
    pub stamp: u64,
    /// Extended attributes, while the attributes are leased: a change to
    /// one changes the inode's ctime, so it recalls the attributes, and
    /// these go with them.
    pub xattrs: Option<Xattrs>,
    /// A regular file's layout (never changed after the create), kept
    /// with leased attributes: an open under the lease needs no MDT.
    pub layout: Option<Layout>,
    /// This client made the file and holds the lease on its size: it may
    /// report what it writes to it later (at release, or when recalled).
    /// Not bound by the lease time: the MDT recalls it before anyone else
    /// sees the size, and it goes with the connection.
    pub size_leased: bool,
    /// A directory's names known, each to an inode or to nothing.
    pub names: HashMap<Name, Item<Option<Fid>>>,
    /// A directory whose every name is known (in `names` or absent).
    pub list: Option<Item<HashSet<Name>>>,
    /// A directory's shards (`None` inside: not striped), once met.
    /// Layouts of directories do not change after they are made.
    pub shards: Option<Option<Arc<[Fid]>>>,
}

impl Known {
    /// Forget the attributes and what is kept with them.
    pub fn forget(&mut self) {
        self.attr = None;
        self.gen = None;
        self.xattrs = None;
        self.layout = None;
    }

    /// Drop what ran out by `now` (a lease that ran out, the kernel no
    /// longer keeps either); how many names went.
    pub fn drop_expired(&mut self, now: Instant) -> usize {
        if self.attr.as_ref().is_some_and(|a| a.until <= now) {
            self.forget();
        }
        if self.list.as_ref().is_some_and(|l| l.until <= now) {
            self.list = None;
        }
        let before = self.names.len();
        self.names.retain(|_, i| i.until > now);
        before - self.names.len()
    }

    /// Whether it holds nothing that must be kept: what remains (a stamp,
    /// a directory's shards) only saves work, and goes when the table is
    /// full.
    fn holds_nothing_needed(&self) -> bool {
        self.attr.is_none()
            && self.gen.is_none()
            && self.xattrs.is_none()
            && self.layout.is_none()
            && !self.size_leased
            && self.names.is_empty()
            && self.list.is_none()
    }

    /// Whether it holds nothing at all.
    fn is_empty(&self) -> bool {
        self.holds_nothing_needed() && self.stamp == 0 && self.shards.is_none()
    }
}

/// The handles side of an inode.
#[derive(Debug, Default)]
struct Handles {
    open: Vec<Weak<OpenFile>>,
    /// The MDT keeps the file (its last name is gone) while a handle here
    /// has it open; released at the last close.
    orphan: bool,
    /// A failure of a close here that no close could report (writes or a
    /// size sent at a release): the next fsync here reports it.
    unseen: Option<Errno>,
}

/// One inode as this client holds it. See the module documentation.
#[derive(Debug)]
pub struct Inode {
    fid: Fid,
    known: Mutex<Known>,
    handles: Mutex<Handles>,
    writes: Arc<FileWrites>,
}

/// What a handle's close left behind ([`Inode::closed`]).
pub(crate) struct Closed {
    /// Handles still open.
    pub survivors: Vec<Arc<OpenFile>>,
    /// It was the last handle of an orphan: release it on the MDT.
    pub release_orphan: bool,
}

impl Inode {
    pub(crate) fn new(fid: Fid) -> Inode {
        Inode {
            fid,
            known: Mutex::new(Known::default()),
            handles: Mutex::new(Handles::default()),
            writes: Arc::new(FileWrites::default()),
        }
    }

    /// Its FID.
    pub fn fid(&self) -> Fid {
        self.fid
    }

    /// What is known of it; only under the table's lock.
    pub(crate) fn known(&self) -> MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn handles(&self) -> MutexGuard<'_, Handles> {
        self.handles.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Its writes in flight through this client.
    pub(crate) fn writes(&self) -> Arc<FileWrites> {
        self.writes.clone()
    }

    /// Count `f` among its open handles.
    pub(crate) fn opened(&self, f: &Arc<OpenFile>) {
        let mut h = self.handles();
        h.open.retain(|w| w.strong_count() > 0);
        h.open.push(Arc::downgrade(f));
    }

    /// Its handles open here.
    pub(crate) fn open_handles(&self) -> Vec<Arc<OpenFile>> {
        self.handles()
            .open
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// A handle of it was dropped: the ones still open, and whether that
    /// was the last handle of an orphan (then no longer held).
    pub(crate) fn closed(&self) -> Closed {
        let mut h = self.handles();
        h.open.retain(|w| w.strong_count() > 0);
        let survivors: Vec<_> = h.open.iter().filter_map(Weak::upgrade).collect();
        let release_orphan = h.open.is_empty() && std::mem::take(&mut h.orphan);
        Closed {
            survivors,
            release_orphan,
        }
    }

    /// The MDT kept it as this client's orphan, or is told this client
    /// has it open (see the MDT's `holds`): held (true) while a handle
    /// here has it open, and released on the MDT at the last close. Under
    /// the handles' lock, so that a last close cannot slip between the
    /// check and the mark.
    pub(crate) fn hold_orphan(&self) -> bool {
        let mut h = self.handles();
        let held = h.open.iter().any(|w| w.strong_count() > 0);
        h.orphan |= held;
        held
    }

    /// Whether a handle here has it open.
    pub(crate) fn is_open(&self) -> bool {
        self.handles().open.iter().any(|w| w.strong_count() > 0)
    }

    /// Whether the MDT keeps it as this client's orphan.
    pub(crate) fn is_orphan(&self) -> bool {
        self.handles().orphan
    }

    /// Keep failure `e` for the next fsync; false if one was not kept yet.
    pub(crate) fn set_unseen(&self, e: Errno) -> bool {
        self.handles().unseen.replace(e).is_none()
    }

    /// The failure kept for the next fsync, now reported.
    pub(crate) fn take_unseen(&self) -> Option<Errno> {
        self.handles().unseen.take()
    }

    /// Whether the table may drop it: only the table holds it (no handle,
    /// no call in progress has it), no writes are in flight, nothing must
    /// be reported, and it knows nothing (`strict`) or nothing needed.
    pub(crate) fn removable(self: &Arc<Self>, strict: bool) -> bool {
        if Arc::strong_count(self) > 1 || self.writes.busy() {
            return false;
        }
        {
            let h = self.handles();
            if !h.open.is_empty() && h.open.iter().any(|w| w.strong_count() > 0) {
                return false;
            }
            if h.orphan || h.unseen.is_some() {
                return false;
            }
        }
        let k = self.known();
        if strict {
            k.is_empty()
        } else {
            k.holds_nothing_needed()
        }
    }
}
