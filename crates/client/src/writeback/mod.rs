//! Metadata write-back (issue #32): a layer between the client's
//! operations (`meta`) and the router.
//!
//! A mount that makes a directory takes its write-back lease
//! (`TakeWriteBack`, granted only on an empty directory) and from then on
//! knows every name in it. Creates, mkdirs and symlinks there are
//! answered here under FIDs its MDT granted this client (`GrantFids`);
//! chmod, chown, utimens and truncate of an inode not sent yet fold into
//! it, and so do a small file's first bytes (up to its Data-on-MDT
//! component, or its first [`DATA_MAX`] bytes, a stripe, written to its first objects right
//! after it is sent). Each inode then goes as one `MakeAt`, many in one
//! `Batch`, in the order they were made. An unlink or rmdir of what was
//! never sent cancels it; of what was sent, it is queued too.
//!
//! Sent ([`WriteBack::flush`]):
//! - when another client's request names the directory: the MDT recalls
//!   the lease, and the flusher sends everything before it answers;
//! - at fsync of a file, or of a directory, and at `sync`;
//! - before any operation this layer does not answer that names what it
//!   holds (a rename, a link, an xattr, a layout);
//! - when [`FLUSH_AT`] changes wait for one MDT, [`BYTES_AT`] bytes of
//!   new files were kept since the last flush, or the oldest change
//!   waited [`DELAY`];
//! - when the FID grant runs out, before another is asked for (an MDT
//!   keeps a client's last two runs only).
//!
//! A lost connection takes the leases with it: nothing more is answered
//! here, and what waits is sent at once. A change refused at its flush
//! (the MDT checks everything again: permissions, quotas, space) is
//! reported at the next fsync of the file, or of any directory.
//!
//! **Locking.** One lock over the state; never held across an await. One
//! flush at a time (`flushing`), which an operation on an inode being
//! sent waits for.

mod flush;
mod local;
mod perms;
mod quota;
mod room;

use crate::ctx::Caller;
use loom_proto::layout::LayoutSpec;
use loom_proto::msg::{Attr, FileKind, Time};
use loom_proto::{Errno, Fid, Name};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

pub use flush::{DELAY, FLUSH_AT, GRANT_RUN};
pub(crate) use local::{provisional_layout, Absorbed};

/// Most bytes of a new file kept here before it is sent, when its layout
/// has no Data-on-MDT component (written to its objects after its
/// `MakeAt`); with one, that component's size.
/// (The default stripe: a file that fits is one object's write.)
pub const DATA_MAX: u64 = 1 << 20;

/// Bytes of new files kept since the last flush that start one (what a
/// mount holds stays bounded by about this and what is being sent).
pub const BYTES_AT: u64 = 32 << 20;

/// What this client writes back. See the module documentation.
#[derive(Debug, Default)]
pub struct WriteBack {
    /// Whether the client takes write-back leases at all.
    on: bool,
    state: Mutex<State>,
    /// Held by the one flush under way.
    flushing: tokio::sync::Mutex<()>,
    /// Held while FIDs are asked for: one run at a time (a third run
    /// would void the first, maybe still in use).
    refilling: tokio::sync::Mutex<()>,
    /// How long an MDT's answer on quota room is trusted (see `quota`).
    quota_trust: std::time::Duration,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    /// Directories whose every name is known here.
    dirs: HashMap<Fid, Held>,
    /// Inodes made here and not sent yet (or being sent).
    made: HashMap<Fid, Made>,
    /// Per MDT, the changes in the order they were made.
    queues: BTreeMap<u32, Vec<Op>>,
    /// Per MDT, FIDs granted and not used: runs of (first, count).
    fids: HashMap<u32, VecDeque<(Fid, u32)>>,
    /// When the oldest change waiting was made.
    oldest: Option<Instant>,
    /// Bytes of new files kept since the last flush began.
    kept_bytes: u64,
    /// A change refused at a flush, not reported yet by a directory's
    /// fsync (a file's own is reported by its fsync).
    failed: Option<Errno>,
    /// Per MDT and id, the inode quota room known (see `quota`).
    rooms: HashMap<(u32, loom_proto::quota::QuotaId), quota::Room>,
    /// Per MDT and id, the room known for Data-on-MDT bytes (see `room`).
    dom_rooms: HashMap<(u32, loom_proto::quota::QuotaId), quota::Room>,
    /// Per MDT, its free space known for Data-on-MDT bytes.
    dom_space: HashMap<u32, quota::Room>,
    /// Grants of first bytes no longer kept here, to give back.
    unspent: crate::io::grant::Taken,
}

/// A directory written back.
#[derive(Debug)]
pub(crate) struct Held {
    /// Its MDT, which grants the FIDs of what is made in it.
    mdt: u32,
    /// Its attributes as this client's changes left them.
    attr: Attr,
    /// Every name in it, and what it leads to.
    names: BTreeMap<Name, (Fid, FileKind)>,
    /// The layout its new files get (`None`: plain default striping).
    spec: Option<LayoutSpec>,
    /// Still answered here: false once its lease is recalled or lost (then
    /// sent, then forgotten).
    answering: bool,
    /// Its MDT holds the lease for this client (taken, or inherited by a
    /// `MakeAt` sent while its parent's lease was held).
    granted: bool,
}

impl Held {
    /// Bytes of a new file that go with its `MakeAt` (its Data-on-MDT
    /// component), or 0.
    fn dom_end(&self) -> u64 {
        self.spec
            .as_ref()
            .and_then(|s| s.components.first())
            .filter(|c| c.on_mdt)
            .map_or(0, |c| c.end)
    }

    /// Most bytes of a new file kept here.
    fn data_max(&self) -> u64 {
        match self.dom_end() {
            0 => DATA_MAX,
            n => n,
        }
    }
}

/// An inode made here, not sent yet.
#[derive(Debug)]
pub(crate) struct Made {
    parent: Fid,
    name: Name,
    attr: Attr,
    /// A symbolic link's target.
    target: Option<Name>,
    /// A file's first bytes.
    data: Vec<u8>,
    /// When it was made here: its directory's mtime and ctime then.
    made: Time,
    /// Who makes it at the MDT (its maker, or root after root changed it).
    caller: Caller,
    /// In the flush under way.
    sending: bool,
    /// The OST grant its first bytes are kept under (see `room`).
    taken: crate::io::grant::Taken,
}

/// One change waiting for its MDT.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// Make this inode (as it is when sent).
    Make(Fid),
    /// Remove a name that was sent.
    Unlink {
        parent: Fid,
        name: Name,
        caller: Caller,
        keep_orphan: bool,
    },
    /// Change the attributes of a directory that was sent.
    SetAttr {
        fid: Fid,
        set: loom_proto::msg::SetAttr,
        caller: Caller,
    },
    /// Remove an empty directory that was sent.
    Rmdir {
        parent: Fid,
        name: Name,
        caller: Caller,
    },
}

impl WriteBack {
    /// A layer that takes write-back leases if `on`, and trusts an MDT's
    /// answer on quota room for `quota_trust`.
    pub fn new(on: bool, quota_trust: std::time::Duration) -> WriteBack {
        WriteBack {
            on,
            quota_trust,
            ..WriteBack::default()
        }
    }

    /// Whether this client writes back.
    pub fn is_on(&self) -> bool {
        self.on
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `fid` is an inode or a directory this layer holds: an
    /// operation it does not answer must send what waits first.
    pub fn knows(&self, fid: Fid) -> bool {
        let s = self.lock();
        s.made.contains_key(&fid) || s.dirs.contains_key(&fid)
    }

    /// Whether `fid` was made here and not sent yet.
    pub fn is_pending(&self, fid: Fid) -> bool {
        self.lock().made.contains_key(&fid)
    }

    /// Changes waiting, all MDTs.
    pub fn waiting(&self) -> usize {
        self.lock().queues.values().map(Vec::len).sum()
    }

    /// Directories written back now.
    pub fn held_dirs(&self) -> usize {
        self.lock().dirs.len()
    }

    /// The first change refused at a flush since the last call.
    pub(crate) fn take_failure(&self) -> Option<Errno> {
        self.lock().failed.take()
    }

    /// `name` was removed from `dir` the usual way (a file open here).
    pub(crate) fn removed(&self, dir: Fid, name: &Name) {
        let mut s = self.lock();
        if let Some(h) = s.dirs.get_mut(&dir) {
            if let Some((fid, _)) = h.names.remove(name) {
                s.dirs.remove(&fid);
            }
        }
    }

    /// Stop answering for `dir` (its names are about to change by a path
    /// this layer does not follow: a rename, a link, a layout). The MDT's
    /// lease stays; its recall then finds nothing to send.
    pub(crate) fn forget_dir(&self, dir: Fid) {
        let mut s = self.lock();
        if let Some(h) = s.dirs.get_mut(&dir) {
            h.answering = false;
        }
        s.forget_quiet();
    }
}

/// Whom an inode with attributes `a` counts against.
fn owner_of(a: &Attr) -> loom_proto::quota::Owner {
    loom_proto::quota::Owner {
        uid: a.uid,
        gid: a.gid,
        projid: a.projid,
    }
}

impl State {
    fn push(&mut self, mdt: u32, op: Op) {
        self.queues.entry(mdt).or_default().push(op);
        self.oldest.get_or_insert_with(Instant::now);
    }

    /// Drop a `Make` not sent yet from its queue.
    fn cancel(&mut self, mdt: u32, fid: Fid) {
        if let Some(q) = self.queues.get_mut(&mdt) {
            q.retain(|op| !matches!(op, Op::Make(f) if *f == fid));
        }
        self.drop_made(fid);
    }

    /// Forget inode `fid` made here; the grant its bytes were kept under
    /// is given back by the client ([`Client::wb_give_back`]).
    fn drop_made(&mut self, fid: Fid) -> Option<Made> {
        let mut m = self.made.remove(&fid)?;
        self.unspent.absorb(std::mem::take(&mut m.taken));
        Some(m)
    }

    /// Directories no longer answered whose names are all sent: forgotten.
    fn forget_quiet(&mut self) {
        let made = &self.made;
        self.dirs.retain(|fid, h| {
            h.answering
                || made.contains_key(fid)
                || h.names.values().any(|(f, _)| made.contains_key(f))
        });
    }

    /// Whether MDT `mdt`'s FID run in use is half taken and none waits
    /// behind it: the time to ask for the next.
    fn fids_low(&self, mdt: u32) -> bool {
        self.fids
            .get(&mdt)
            .is_none_or(|r| r.len() < 2 && r.front().is_none_or(|x| x.1 < GRANT_RUN / 2))
    }

    /// Whether a flush is due: `FLUSH_AT` changes for one MDT, or the
    /// oldest waited `DELAY`.
    fn due(&self, now: Instant) -> bool {
        self.queues.values().any(|q| q.len() >= FLUSH_AT)
            || self.kept_bytes >= BYTES_AT
            || self.oldest.is_some_and(|t| now.duration_since(t) >= DELAY)
    }
}
