//! The `fuser::Filesystem` implementation.
//!
//! Kernel caches, and what our replies do to them:
//! - Entry and attribute TTLs are `attr_timeout` (1 s by default): within
//!   it the kernel answers path walks and stats from its cache. Changes made
//!   through this mount update that cache through our replies; changes made
//!   on other mounts show in a stat after at most the TTL (0 makes every
//!   stat ask the MDT).
//! - Close-to-open holds whatever the TTL: every open fetches fresh
//!   attributes from the MDT and tells the kernel to drop the attributes it
//!   holds (a `FUSE_NOTIFY_INVAL_INODE` of attributes only, which takes no
//!   page locks, so it is safe inside the open), and opens reply without
//!   `FOPEN_KEEP_CACHE`, so the kernel drops the file's cached pages too:
//!   size and data written and closed elsewhere before our open are read
//!   fresh.
//! - A read-only open is answered with `FOPEN_NOFLUSH`: its close has
//!   nothing to flush and does not wait for a FUSE round trip (opens that
//!   may write keep the flush, which reports failed writes); unless this
//!   mount has locked the file: the kernel leaves the release of the
//!   closing process's POSIX locks to the FLUSH.
//! - Locks (flock, POSIX, OFD) are the cluster's (`loom_client::locks`):
//!   a blocking one waits off the FUSE worker; the locks of the closing
//!   process go at its flush; every lock taken through a handle goes at
//!   the handle's release (flock and OFD locks, and POSIX locks taken
//!   through a handle opened without a flush, before the mount locked
//!   the file).
//! - An inode that vanished (removed on another mount while our dentry
//!   was cached) answers ESTALE, not ENOENT: the kernel then walks the path
//!   again with revalidation and finds what the name is now.
//! - No kernel writeback cache: every write(2) is a FUSE write, sent to the
//!   OSTs before it returns (collected in the background under the
//!   mount's space grants, waited for without; see the client's
//!   `io::writeback` and `io::grant`), and the size reaches the MDT at
//!   close (flush), or, for a file this mount made (it holds the file's
//!   size lease), at the release, which close(2) does not wait for: its
//!   create answers `FOPEN_NOFLUSH`, so its close sends no FLUSH.
//!   A write to a file opened O_SYNC or O_DSYNC (or with RWF_DSYNC) is
//!   followed by an fsync request from the kernel itself, which makes the
//!   objects durable and reports the size before write(2) returns.
//! - What this mount's own changes just did is answered without a server:
//!   each change's reply says what it left (the attributes of the inodes
//!   it touched, the names it made and removed; `loom_client::fresh`),
//!   and a stat or lookup of those within the TTL is answered from that,
//!   with only what is left of the TTL for the kernel. The kernel asks
//!   such questions after every change (a create drops its directory's
//!   attributes, which the kernel's permission check needs before the
//!   next create there), so they cost no round trip.
//! - Other negative lookups are not cached (plain ENOENT), so a name
//!   created on another mount appears at once, unless this mount removed
//!   that name less than the TTL ago.

use crate::attr::{file_attr, file_type, wire_time};
use crate::kept::{Kept, KeptPages};
use crate::pagestore::PageStore;
use crate::snapdir::SnapDir;
use bytes::Bytes;
use fuser::{
    AccessFlags, BsdFileFlags, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    InitFlags, KernelConfig, LockOwner, Notifier, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyLock, ReplyOpen,
    ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use loom_client::ctx::GroupsCache;
use loom_client::{Allocation, Caller, Client, OpenFile};
use loom_proto::lock::LockKind;
use loom_proto::msg::{access, Attr, DirEntry, FileKind, SetAttr, SetTime, StatFs, Time};
use loom_proto::{Errno, Fid, Name};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::future::Future;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// Largest write the kernel sends in one request.
pub const MAX_WRITE: u32 = 1 << 20;
/// Readahead we ask for (the kernel may cap it lower).
pub const MAX_READAHEAD: u32 = 4 << 20;
/// Entries fetched from the MDT per readdir request.
const READDIR_BATCH: u32 = 128;
/// Entries per readdirplus request (each carries attributes, so fewer fit
/// in the kernel's buffer).
const READDIRPLUS_BATCH: u32 = 32;
/// Offsets of "." and ".." in a listing; entries' offsets are their MDT
/// cookies, which are never below 3 (`loom_proto::fid::name_hash`).
const OFF_DOT: u64 = 1;
const OFF_DOTDOT: u64 = 2;
/// Inodes are FIDs, never reused with another meaning: generation 0.
const GEN: Generation = Generation(0);
/// Block size reported by statfs (the unit of `df`'s counts).
const STATFS_FRSIZE: u32 = 4096;

/// loomfs as a FUSE file system.
#[derive(Debug)]
pub struct LoomFs {
    client: Arc<Client>,
    rt: tokio::runtime::Handle,
    ttl: Duration,
    files: Mutex<HashMap<u64, Arc<OpenFile>>>,
    next_fh: AtomicU64,
    /// Open directories whose listing the MDT said ends after the given
    /// kernel offset: the kernel's last READDIR, at that offset, needs no
    /// round trip.
    ended: Mutex<HashMap<u64, u64>>,
    /// The kernel's inode numbers of FIDs.
    inos: Inos,
    /// Sends cache invalidations to the kernel; set once the session
    /// exists (it is made from this file system).
    notifier: Arc<OnceLock<Notifier>>,
    /// What we told the kernel about each inode it holds (dropped when it
    /// forgets the inode).
    told: Mutex<HashMap<u64, Told>>,
    /// Supplementary groups of the processes calling (the kernel sends
    /// only uid, gid and pid; the MDT checks group permissions with them).
    groups: GroupsCache,
    /// Bytes written that the kernel holds in folios not up to date
    /// (`kept.rs`), and the open handles that may write.
    kept: Arc<KeptPages>,
    /// Stores kept bytes in the kernel's cache; set with the notifier.
    pages: Arc<OnceLock<PageStore>>,
    /// Open handles that may write: whether each may read too (O_RDWR).
    writable: Mutex<HashMap<u64, bool>>,
    /// Open handles whose close has no data to flush (read-only ones, and
    /// files made here under their size lease): their FLUSH, which the
    /// kernel sends for the POSIX lock owner's sake, only drops locks.
    quiet: Mutex<std::collections::HashSet<u64>>,
    /// The lock owners that locked through each open handle: at its
    /// release their locks on the file go (OFD locks, whose owner is the
    /// open file description, get no unlock from the kernel at close).
    lockers: Mutex<HashMap<u64, std::collections::HashSet<u64>>>,
    /// Files whose kept bytes the store thread hands to the kernel.
    to_store: Mutex<mpsc::Sender<u64>>,
    /// FUSE worker threads, and the one that may store from inside a
    /// WRITE (`store_while_writing`).
    workers: usize,
    storing: Mutex<()>,
    /// The kernel enforces POSIX ACLs (`FUSE_POSIX_ACL`, set at init):
    /// it then leaves the umask to the file system, and the MDT applies
    /// it, or a directory's default ACL instead.
    acls: bool,
    /// The snapshot directory (`MOUNT/.snapshots`), unless turned off or
    /// this mount is itself a snapshot's.
    snaps: Option<Box<SnapDir>>,
    /// Answers of `loom find` run through the mount (`finds.rs`).
    finds: crate::finds::Finds,
}

/// What this mount last told the kernel about one inode.
#[derive(Clone, Copy, Debug, Default)]
struct Told {
    /// Size and mtime in the last attributes the kernel was given: an open
    /// that finds the same on the MDT need not make the kernel refetch.
    size: u64,
    mtime: Time,
    /// The inode is known to have no `security.capability` xattr: the
    /// kernel asks before every write (to clear capabilities), and this
    /// answers without a round trip. Set at create and when the MDT said
    /// so; cleared when this mount sets or removes that xattr.
    no_caps: bool,
    /// The lease on the file's attributes ([`Client::lease_gen`]) under
    /// which the kernel's cached pages of it were last right: dropped by
    /// an open without `FOPEN_KEEP_CACHE`, or empty at its create. While
    /// the same lease holds, every other mount's change was recalled
    /// here, which drops the pages (`notify.rs`): an open may keep them.
    pages_lease: Option<u64>,
}

/// At the end of a release: a handle that may write is no longer open,
/// and if it was the file's last, what is kept of the file goes to the
/// kernel (after the release's own reports, which drop it on failure).
struct StoreAtEnd<'a> {
    fs: &'a LoomFs,
    ino: u64,
    /// Whether the handle could write, and read too.
    wrote: Option<bool>,
}

impl Drop for StoreAtEnd<'_> {
    fn drop(&mut self) {
        let Some(rdwr) = self.wrote else {
            return;
        };
        if self.fs.kept.writer_released(self.ino, rdwr) {
            let tx = self.fs.to_store.lock().unwrap_or_else(|p| p.into_inner());
            // The thread ends only with the session.
            let _ = tx.send(self.ino);
        }
    }
}

/// The xattr the kernel reads before every write to a file.
const CAPS_XATTR: &[u8] = b"security.capability";

type R<T> = Result<T, Errno>;

fn fe(e: Errno) -> fuser::Errno {
    fuser::Errno::from_i32(e.raw())
}

/// The kernel's inode numbers and the FIDs they stand for: a FID's own
/// number (`Fid::ino`), but the mount's root is the kernel's root
/// (FUSE_ROOT_ID) whatever its FID (a nodemap's fileset).
#[derive(Clone, Copy, Debug)]
pub struct Inos {
    root: Fid,
}

impl Inos {
    /// The numbering of a mount whose root is `root`.
    pub fn new(root: Fid) -> Inos {
        Inos { root }
    }

    /// The FID the kernel's `ino` stands for.
    pub fn fid(self, ino: INodeNo) -> Fid {
        match ino {
            INodeNo::ROOT => self.root,
            i => Fid::from_ino(i.0),
        }
    }

    /// The kernel's number for `fid`.
    pub fn ino(self, fid: Fid) -> INodeNo {
        match fid == self.root {
            true => INodeNo::ROOT,
            false => INodeNo(fid.ino()),
        }
    }

    /// The kernel's view of `a`, numbered so.
    pub fn attr(self, a: &Attr) -> fuser::FileAttr {
        fuser::FileAttr {
            ino: self.ino(a.fid),
            ..file_attr(a)
        }
    }
}

/// A name as the kernel gave it: bytes, not necessarily UTF-8.
fn bytes(name: &OsStr) -> R<&[u8]> {
    Ok(name.as_bytes())
}

/// For operations on an inode the kernel already knows: if it is gone,
/// the kernel's dentry is stale (ESTALE makes the VFS look the path up
/// again), not the name missing.
fn stale(e: Errno) -> Errno {
    if e == Errno::ENOENT {
        Errno::ESTALE
    } else {
        e
    }
}

fn kind_of_mode(mode: u32) -> R<FileKind> {
    FileKind::from_mode(mode).ok_or(Errno::EINVAL)
}

fn set_time(t: TimeOrNow) -> SetTime {
    match t {
        TimeOrNow::SpecificTime(t) => SetTime::At(wire_time(t)),
        TimeOrNow::Now => SetTime::Now,
    }
}

/// Attributes sent with "." and ".." in a READDIRPLUS reply: the kernel ignores
/// the attributes of "." and ".." there (it links no dentry for them), so
/// they need no round trip; only the inode number reaches `readdir(3)`.
fn dot_placeholder(fid: Fid) -> Attr {
    let t = Time::default();
    Attr {
        fid,
        kind: FileKind::Dir,
        perm: 0o755,
        nlink: 2,
        uid: 0,
        gid: 0,
        size: 0,
        atime: t,
        mtime: t,
        ctime: t,
        rdev: 0,
        projid: 0,
    }
}

impl LoomFs {
    /// A file system over `client`, running operations on `rt`, telling
    /// the kernel to trust attributes and entries for `ttl`.
    pub fn new(
        client: Arc<Client>,
        rt: tokio::runtime::Handle,
        ttl: Duration,
        notifier: Arc<OnceLock<Notifier>>,
        workers: usize,
        inos: Inos,
    ) -> std::io::Result<LoomFs> {
        let kept = Arc::new(KeptPages::new(crate::kept::CAP));
        let pages = Arc::new(OnceLock::new());
        let to_store = crate::notify::spawn_storer(pages.clone(), kept.clone(), client.clone())?;
        Ok(LoomFs {
            client,
            rt,
            ttl,
            files: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            ended: Mutex::new(HashMap::new()),
            inos,
            notifier,
            told: Mutex::new(HashMap::new()),
            groups: GroupsCache::default(),
            kept,
            pages,
            writable: Mutex::new(HashMap::new()),
            quiet: Mutex::new(Default::default()),
            lockers: Mutex::new(HashMap::new()),
            to_store: Mutex::new(to_store),
            workers,
            storing: Mutex::new(()),
            acls: false,
            snaps: None,
            finds: Default::default(),
        })
    }

    /// The bytes this mount keeps for the kernel (`kept.rs`): a lease
    /// recall drops a file's under its gate.
    pub fn kept(&self) -> Arc<KeptPages> {
        self.kept.clone()
    }

    /// Where the store of kept bytes writes, set once the session exists.
    pub fn pages(&self) -> Arc<OnceLock<PageStore>> {
        self.pages.clone()
    }

    /// `fh`, just opened on `ino`, may write (`rdwr`: read too): counted,
    /// so that no store of kept bytes at the release runs while it is
    /// open, and then `answer` runs; if such a store is running, both wait
    /// for its end, off this worker (`KeptPages::writer_opened`).
    fn may_write(&self, ino: u64, fh: FileHandle, rdwr: bool, answer: crate::kept::Then) {
        self.writable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(fh.0, rdwr);
        self.kept.writer_opened(ino, rdwr, answer);
    }

    /// Who made `req`: its uid, gid and pid from the kernel, and the
    /// process's supplementary groups.
    fn caller(&self, req: &Request) -> Caller {
        Caller::of_process(req.uid(), req.gid(), req.pid(), &self.groups)
    }

    /// Who makes an inode with `mode` under `umask`, and the mode to ask
    /// for: with ACLs, the kernel left the umask to the MDT (which uses
    /// the directory's default ACL instead, if any); without, it is
    /// applied here.
    fn maker(&self, req: &Request, mode: u32, umask: u32) -> (Caller, u32) {
        let mut c = self.caller(req);
        if self.acls {
            c.umask = Some(umask & 0o777);
            (c, mode & 0o7777)
        } else {
            (c, mode & 0o7777 & !umask)
        }
    }

    fn lock_quiet(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<u64>> {
        self.quiet.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_told(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Told>> {
        self.told.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The kernel is given `a`.
    fn note(&self, a: &Attr) {
        let mut t = self.lock_told();
        let e = t.entry(a.fid.ino()).or_default();
        e.size = a.size;
        e.mtime = a.mtime;
    }

    /// Whether the kernel's attributes of `a`'s inode may differ from `a`
    /// (then they are noted as given: the caller makes the kernel refetch).
    fn kernel_may_be_stale(&self, a: &Attr) -> bool {
        let mut t = self.lock_told();
        let e = t.entry(a.fid.ino()).or_default();
        let stale = e.size != a.size || e.mtime != a.mtime;
        e.size = a.size;
        e.mtime = a.mtime;
        stale
    }

    fn set_no_caps(&self, ino: INodeNo, v: bool) {
        self.lock_told().entry(ino.0).or_default().no_caps = v;
    }

    /// How long the kernel may keep `a`, fetched by a request that began
    /// when [`Client::recalls`] was `since`: as long as the client holds
    /// it valid (the lease, or the attribute timeout), and not at all if
    /// a recall came meanwhile (the kernel may already have dropped what
    /// the recall covered, and would keep this older answer).
    fn ttl_of(&self, a: &Attr, since: u64) -> Duration {
        if self.client.recalls() != since {
            return Duration::ZERO;
        }
        self.client
            .recent_attr(a.fid)
            .map_or(self.ttl, |(_, left)| left)
    }

    /// As [`Self::ttl_of`] for the entry `name` in `parent` leading to `a`.
    /// Answer a lookup of a name known absent for `left` more: a negative
    /// entry the kernel keeps that long (a recall of the name, or of its
    /// directory's list, drops it), unless a recall crossed the lookup.
    fn absent(&self, reply: ReplyEntry, left: Duration, since: u64) {
        if left.is_zero() || self.client.recalls() != since {
            return reply.error(fe(Errno::ENOENT));
        }
        reply.entry(&left, &crate::attr::negative_attr(), GEN)
    }

    fn entry_ttl(&self, parent: INodeNo, name: &[u8], a: &Attr, since: u64) -> Duration {
        if self.client.recalls() != since {
            return Duration::ZERO;
        }
        match self.client.recent_entry(self.inos.fid(parent), name) {
            Some((Some(known), left)) if known.fid == a.fid => left,
            _ => self.ttl.min(self.ttl_of(a, since)),
        }
    }

    /// Answer a change that made `name` in `parent`, which began when
    /// [`Client::recalls`] was `since`: the kernel keeps the entry and its
    /// attributes as long as this mount may (under the leases the change
    /// granted, not only the attribute timeout).
    fn entry_reply(
        &self,
        reply: ReplyEntry,
        parent: INodeNo,
        name: &OsStr,
        since: u64,
        r: R<Attr>,
    ) {
        match r {
            Ok(a) => {
                self.note(&a);
                let ttl = self.entry_ttl(parent, name.as_bytes(), &a, since);
                reply.entry(&ttl, &self.inos.attr(&a), GEN)
            }
            Err(e) => reply.error(fe(e)),
        }
    }

    fn attr_reply(&self, reply: ReplyAttr, r: R<Attr>, since: u64) {
        match r {
            Ok(a) => {
                self.note(&a);
                reply.attr(&self.ttl_of(&a, since), &self.inos.attr(&a))
            }
            Err(e) => reply.error(fe(e)),
        }
    }

    /// Make the kernel forget the attributes it caches for `ino`, so its
    /// next stat (or read past the size it knew) asks us.
    fn forget_cached_attrs(&self, ino: INodeNo) {
        if self.ttl.is_zero() {
            return;
        }
        if let Some(n) = self.notifier.get() {
            // Offset -1: attributes only, no page cache work.
            if let Err(e) = n.inval_inode(ino, -1, 0) {
                // ENOENT: the kernel holds no such inode; nothing to drop.
                if e.raw_os_error() != Some(libc::ENOENT) {
                    tracing::warn!(ino = ino.0, "invalidating cached attributes: {e}");
                }
            }
        }
    }

    /// Serve the snapshot directory `name` in the root (see `snapdir.rs`).
    pub fn set_snapdir(&mut self, name: Vec<u8>) {
        self.snaps = Some(Box::new(SnapDir::new(self.client.clone(), name)));
    }

    /// The snapshot directory, if `ino` is one of its inodes.
    fn snap_of(&self, ino: INodeNo) -> Option<&SnapDir> {
        self.snaps
            .as_deref()
            .filter(|_| crate::snapdir::is_virtual(ino.0))
    }

    /// Why a change of `name` in `parent` is refused, if it touches the
    /// snapshot directory: everything in it is read-only, and its name
    /// in the root is taken (`making`) or cannot go.
    fn snap_refusal(&self, parent: INodeNo, name: &OsStr, making: bool) -> Option<Errno> {
        let s = self.snaps.as_ref()?;
        if crate::snapdir::is_virtual(parent.0) {
            return Some(Errno::EROFS);
        }
        (parent == INodeNo::ROOT && name.as_bytes() == s.name()).then_some(if making {
            Errno::EEXIST
        } else {
            Errno::EBUSY
        })
    }

    fn run<T>(&self, f: impl Future<Output = T>) -> T {
        self.rt.block_on(f)
    }

    fn lock_files(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<OpenFile>>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn insert_file(&self, f: Arc<OpenFile>) -> FileHandle {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.lock_files().insert(fh, f);
        FileHandle(fh)
    }

    fn file(&self, fh: FileHandle) -> R<Arc<OpenFile>> {
        self.lock_files().get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    // ---- helpers: each returns a result, the trait methods reply ----

    fn do_lookup(&self, req: &Request, parent: INodeNo, name: &OsStr) -> R<Attr> {
        let name = bytes(name)?;
        let (attr, _) = self.run(self.client.lookup(
            &self.caller(req),
            self.inos.fid(parent),
            name,
        ))?;
        Ok(attr)
    }

    fn do_getattr(&self, req: &Request, ino: INodeNo) -> R<Attr> {
        self.run(self.client.getattr(&self.caller(req), self.inos.fid(ino)))
            .map_err(stale)
    }

    fn do_setattr(&self, req: &Request, ino: INodeNo, set: SetAttr) -> R<Attr> {
        self.run(
            self.client
                .setattr(&self.caller(req), self.inos.fid(ino), set),
        )
    }

    fn do_create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
    ) -> R<(Attr, FileHandle)> {
        let name = bytes(name)?;
        let (c, perm) = self.maker(req, mode, umask);
        let (attr, layout) = self.run(self.client.create(
            &c,
            self.inos.fid(parent),
            name,
            FileKind::File,
            perm,
            0,
            None,
        ))?;
        let layout = match layout {
            Some(l) => l,
            None => self.run(self.client.get_layout_as(&c, attr.fid))?,
        };
        let f = self.client.open_as(&c, attr.fid, layout, attr.size);
        f.note_attr(&attr);
        Ok((attr, self.insert_file(f)))
    }

    fn do_mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
    ) -> R<Attr> {
        let name = bytes(name)?;
        let kind = kind_of_mode(mode)?;
        let (c, perm) = self.maker(req, mode, umask);
        let (attr, _) =
            self.run(
                self.client
                    .create(&c, self.inos.fid(parent), name, kind, perm, rdev, None),
            )?;
        Ok(attr)
    }

    /// Open `ino`; also says whether the kernel may keep the pages it
    /// caches of the file (`FOPEN_KEEP_CACHE`), and whether the handle may
    /// write (`Some`, with whether it may read too).
    fn do_open(
        &self,
        req: &Request,
        ino: INodeNo,
        flags: OpenFlags,
    ) -> R<(FileHandle, bool, Option<bool>)> {
        let c = self.caller(req);
        let f = self.inos.fid(ino);
        let mut want = match flags.0 & libc::O_ACCMODE {
            libc::O_RDONLY => access::READ,
            libc::O_WRONLY => access::WRITE,
            _ => access::READ | access::WRITE,
        };
        let truncate = flags.0 & libc::O_TRUNC != 0;
        if truncate {
            // As Linux's open: O_TRUNC needs write permission, whatever
            // the access mode.
            want |= access::WRITE;
        }
        // Under a lease on the file's attributes (which the kernel checked
        // the permission on), none; otherwise one round trip: permission,
        // fresh attributes and the layout.
        let leased = if truncate {
            None
        } else {
            self.client.open_leased(&c, f, want & access::WRITE != 0)
        };
        let (mut attr, file, keep) = match leased {
            Some((attr, file, lease)) => {
                let mut told = self.lock_told();
                let t = told.entry(ino.0).or_default();
                let keep = t.pages_lease == Some(lease);
                t.pages_lease = Some(lease);
                (attr, file, keep)
            }
            None => {
                let (attr, file) =
                    self.run(self.client.open_checked(&c, f, want))
                        .map_err(|e| {
                            if e == Errno::EISDIR {
                                Errno::EINVAL
                            } else {
                                stale(e)
                            }
                        })?;
                // The kernel drops its pages at this open: they are right
                // under the lease the answer granted, if any.
                let lease = self.client.lease_gen(f);
                self.lock_told().entry(ino.0).or_default().pages_lease = lease;
                (attr, file, false)
            }
        };
        // ATOMIC_O_TRUNC: the kernel leaves O_TRUNC to the open, which has
        // just checked write access and holds the layout.
        if truncate {
            attr = self.run(self.client.truncate_at_open(&c, f, file.layout()))?;
            // A user's truncate may have cleared set-user-ID.
            file.note_attr(&attr);
        }
        // Close-to-open: what another mount wrote and closed before this
        // open (or this truncate) must show, whatever the kernel cached.
        if truncate || self.kernel_may_be_stale(&attr) {
            self.forget_cached_attrs(ino);
        }
        if truncate {
            self.kept.drop_file(ino.0);
        }
        let fh = self.insert_file(file);
        let write =
            (want & access::WRITE != 0).then_some(flags.0 & libc::O_ACCMODE == libc::O_RDWR);
        Ok((fh, keep && !truncate, write))
    }

    fn do_read(&self, fh: FileHandle, offset: u64, size: u32) -> R<Vec<u8>> {
        let f = self.file(fh)?;
        // A folio a ragged write left not up to date: from what was kept.
        let lease = || self.client.lease_gen(f.fid());
        if let Some(b) = self.kept.read(f.fid().ino(), lease, offset, size.into()) {
            return Ok(b);
        }
        self.run(f.read(offset, size as usize))
    }

    /// A write through a handle opened O_APPEND: at the end of the file
    /// as every client sees it (the kernel's offset, its idea of the end,
    /// is not used). Such a handle is opened for direct I/O, so the
    /// kernel keeps no pages of what it writes; pages of the file it
    /// holds from other handles are dropped at their next open.
    fn do_append(&self, fh: FileHandle, data: &[u8]) -> R<u32> {
        let f = self.file(fh)?;
        // A write drops the file's capabilities. Through the page cache
        // the kernel does it (it asks for them first); a direct write
        // leaves it to the file system (HANDLE_KILLPRIV_V2). As the
        // kernel's own removal, not the writer's: as root.
        let ino = INodeNo(f.fid().ino());
        if !self.lock_told().get(&ino.0).is_some_and(|t| t.no_caps) {
            let root = Caller::default();
            let had = match self.run(self.client.getxattr(&root, f.fid(), CAPS_XATTR)) {
                Ok(_) => true,
                Err(Errno::ENODATA) => false,
                Err(e) => return Err(e),
            };
            if had {
                match self.run(self.client.removexattr(&root, f.fid(), CAPS_XATTR)) {
                    Ok(()) | Err(Errno::ENODATA) => {}
                    Err(e) => return Err(e),
                }
            }
            self.set_no_caps(ino, true);
        }
        let r = self.run(f.append(data));
        self.pages_not_written(&f);
        r.map(|_| data.len() as u32)
    }

    fn do_write(&self, fh: FileHandle, offset: u64, data: &[u8], cache: bool) -> R<u32> {
        let f = self.file(fh)?;
        // The one copy of the bytes in this process: sent from, and kept.
        let data = Bytes::copy_from_slice(data);
        self.run(f.write_shared(offset, data.clone()))
            .inspect_err(|_| self.pages_not_written(&f))?;
        let (ino, lease) = (f.fid().ino(), self.client.lease_gen(f.fid()));
        if self.kept.wrote(ino, lease, offset, &data, cache) == Kept::Dropped {
            // Ragged folios stay behind that nothing will fill: the next
            // open drops the kernel's pages rather than read them one by one.
            if let Some(t) = self.lock_told().get_mut(&ino) {
                t.pages_lease = None;
            }
        } else if !cache && self.workers > 1 && self.kept.has_whole_chunks(ino) {
            self.store_while_writing(ino, lease, offset, offset + data.len() as u64);
        }
        Ok(data.len() as u32)
    }

    /// Store chunks of `ino` kept whole into the kernel's cache from
    /// inside a WRITE of `[start, end)`, before answering it, so that a
    /// read right after the writes finds them there (a store at the
    /// release comes too late for IOR, whose read phase starts at once).
    ///
    /// Safe: without a writeback cache the kernel holds the inode's lock
    /// through each write(2), and the writer is waiting for this answer,
    /// so no write(2) of this mount copies into the file meanwhile (mmap
    /// write-back keeps nothing, see `kept.rs`); the gate is only tried,
    /// never waited for (a recall holding it may wait for the writer's
    /// folio). The writer holds the folio its request ends in locked
    /// until the answer: chunks around the request are left for later.
    /// Pages changed through a shared writable map are not written, and
    /// not waited for: none is stored while a handle opened O_RDWR (the
    /// only kind that may map the file so) is open.
    /// A reader holds a folio locked until a worker answers its READ: one
    /// worker at most stores, and only with another to answer.
    fn store_while_writing(&self, ino: u64, lease: Option<u64>, start: u64, end: u64) {
        let Some(n) = self.pages.get() else {
            return;
        };
        let Ok(_one) = self.storing.try_lock() else {
            return;
        };
        let gate = self.kept.gate(ino);
        let Ok(_held) = gate.try_lock() else {
            return;
        };
        while let Some((at, pieces)) = self.kept.whole_chunk(ino, lease, start, end) {
            if let Err(e) = n.store(ino, at, &pieces) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(ino, "storing kept bytes in the kernel's cache: {e}");
                }
                self.kept.drop_file(ino);
                return;
            }
            self.kept.stored(ino, at, crate::kept::CHUNK);
        }
    }

    fn do_flush(&self, fh: FileHandle) -> R<()> {
        let f = self.file(fh)?;
        self.run(f.flush())
            .inspect_err(|_| self.pages_not_written(&f))
    }

    fn do_fsync(&self, fh: FileHandle) -> R<()> {
        let f = self.file(fh)?;
        self.run(f.fsync())
            .inspect_err(|_| self.pages_not_written(&f))
    }

    /// A write through `f` failed: the kernel's pages of the file may hold
    /// data its objects do not. The next open drops them.
    fn pages_not_written(&self, f: &OpenFile) {
        if let Some(t) = self.lock_told().get_mut(&f.fid().ino()) {
            t.pages_lease = None;
        }
        self.kept.drop_file(f.fid().ino());
    }

    fn do_fallocate(&self, fh: FileHandle, offset: u64, len: u64, mode: i32) -> R<()> {
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let what = match mode & !libc::FALLOC_FL_KEEP_SIZE {
            0 => Allocation::Reserve,
            libc::FALLOC_FL_PUNCH_HOLE => Allocation::Punch,
            libc::FALLOC_FL_ZERO_RANGE => Allocation::Zero,
            // Collapse and insert range would move data between objects.
            _ => return Err(Errno::EOPNOTSUPP),
        };
        let f = self.file(fh)?;
        self.kept.drop_file(f.fid().ino());
        self.run(f.fallocate(what, offset, len, keep_size))
    }

    fn do_release(&self, fh: FileHandle) -> R<()> {
        let Some(f) = self.lock_files().remove(&fh.0) else {
            return Err(Errno::EBADF);
        };
        let wrote = self
            .writable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&fh.0);
        let _store = StoreAtEnd {
            fs: self,
            ino: f.fid().ino(),
            wrote,
        };
        // What close(2) left to report: writes after the last flush
        // (through mmap, or when the flush failed), and for a file made
        // here, what was gathered and the size (see
        // `OpenFile::defer_reports`). The kernel does not wait for this
        // answer: a failure is logged, and the file's next fsync on this
        // mount reports it.
        self.run(f.report_now()).inspect_err(|e| {
            self.pages_not_written(&f);
            tracing::error!(fid = %f.fid(), "writes or size of a closed file failed: {e:?}; its next fsync here reports it");
            self.client.unseen_failure(f.fid(), *e);
        })
    }

    fn do_mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
    ) -> R<Attr> {
        let name = bytes(name)?;
        let (c, perm) = self.maker(req, mode, umask);
        self.run(self.client.mkdir(&c, self.inos.fid(parent), name, perm))
    }

    fn do_unlink(&self, req: &Request, parent: INodeNo, name: &OsStr) -> R<()> {
        self.run(
            self.client
                .unlink(&self.caller(req), self.inos.fid(parent), bytes(name)?),
        )
    }

    fn do_rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr) -> R<()> {
        self.run(
            self.client
                .rmdir(&self.caller(req), self.inos.fid(parent), bytes(name)?),
        )
    }

    fn do_rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
    ) -> R<()> {
        // Bits pass through as Linux numbers them; the client refuses
        // unknown ones (RENAME_WHITEOUT) with EINVAL.
        self.run(self.client.rename(
            &self.caller(req),
            self.inos.fid(parent),
            bytes(name)?,
            self.inos.fid(newparent),
            bytes(newname)?,
            flags.bits(),
        ))
    }

    fn do_link(&self, req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr) -> R<Attr> {
        self.run(self.client.link(
            &self.caller(req),
            self.inos.fid(ino),
            self.inos.fid(newparent),
            bytes(newname)?,
        ))
    }

    fn do_symlink(&self, req: &Request, parent: INodeNo, name: &OsStr, target: &Path) -> R<Attr> {
        let target = target.as_os_str().as_bytes();
        self.run(self.client.symlink(
            &self.caller(req),
            self.inos.fid(parent),
            bytes(name)?,
            target,
        ))
    }

    fn do_readlink(&self, req: &Request, ino: INodeNo) -> R<Name> {
        self.run(self.client.readlink(&self.caller(req), self.inos.fid(ino)))
    }

    /// Where a listing resumes on the MDT for a kernel offset, and whether
    /// "." and ".." are still to be given.
    fn listing_start(offset: u64) -> (bool, bool, u64) {
        match offset {
            0 => (true, true, 0),
            OFF_DOT => (false, true, 0),
            OFF_DOTDOT => (false, false, 0),
            cookie => (false, false, cookie),
        }
    }

    /// One page of directory `ino` from kernel offset `offset`, and
    /// whether the listing ends with it.
    fn do_readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        offset: u64,
        max: u32,
    ) -> R<(Vec<DirEntry>, bool)> {
        let (_, _, cookie) = Self::listing_start(offset);
        self.run(
            self.client
                .readdir(&self.caller(req), self.inos.fid(ino), cookie, max),
        )
    }

    fn lock_ended(&self) -> std::sync::MutexGuard<'_, HashMap<u64, u64>> {
        self.ended.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the listing of open directory `fh` is known to end at
    /// kernel offset `offset`.
    fn listing_ended(&self, fh: FileHandle, offset: u64) -> bool {
        self.lock_ended().get(&fh.0) == Some(&offset)
    }

    /// A reply to the kernel held every entry up to the listing's end,
    /// the last at kernel offset `last`: the kernel's next READDIR of
    /// `fh`, from there, is answered empty (the end) without the MDT.
    fn note_listing_end(&self, fh: FileHandle, last: u64) {
        self.lock_ended().insert(fh.0, last);
    }

    fn do_statfs(&self) -> R<StatFs> {
        self.run(self.client.statfs())
    }

    fn do_setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
    ) -> R<()> {
        let name = bytes(name)?;
        if name.starts_with(crate::tools::PREFIX) {
            let kind = self.do_getattr(req, ino)?.kind;
            let c = self.caller(req);
            self.run(crate::tools::set(
                &self.client,
                &c,
                self.inos.fid(ino),
                kind,
                name,
                value,
            ))?;
            if name == b"loom.mkdir" || name == b"loom.create" {
                self.forget_entry_later(ino, value);
            }
            return Ok(());
        }
        if name == CAPS_XATTR {
            self.set_no_caps(ino, false);
        }
        self.run(self.client.setxattr(
            &self.caller(req),
            self.inos.fid(ino),
            name,
            value,
            flags as u32,
        ))
    }

    /// A page of `loom find` asked through the mount by `name`
    /// (`finds.rs`): the find runs as the caller at its first page.
    fn find_page(&self, req: &Request, ino: INodeNo, name: &[u8], size: u32) -> R<Vec<u8>> {
        let (pid, uid) = (req.pid(), req.uid());
        if !self.finds.has(pid, uid, ino.0, name) {
            let asked = crate::finds::asked(name)?;
            let c = self.caller(req);
            let r = self.run(self.client.find_as(
                &c,
                self.inos.fid(ino),
                &asked.start_name,
                &asked.query,
            ))?;
            self.finds.keep(pid, uid, ino.0, name, &r);
        }
        self.finds.page(pid, uid, ino.0, name, size)
    }

    /// A directory or file made through `loom.mkdir` or `loom.create`
    /// (`asked`) in `parent`, behind
    /// the kernel's back: it may hold the name as absent. Dropped once
    /// this request is answered (the kernel holds `parent` locked until
    /// then), from a thread of its own.
    fn forget_entry_later(&self, parent: INodeNo, asked: &[u8]) {
        // Both `MkdirAsked` and `CreateAsked` name it.
        #[derive(serde::Deserialize)]
        struct Named {
            name: String,
        }
        let (Some(n), Ok(m)) = (
            self.notifier.get().cloned(),
            serde_json::from_slice::<Named>(asked),
        ) else {
            return;
        };
        std::thread::spawn(move || {
            if let Err(e) = n.inval_entry(parent, OsStr::new(&m.name)) {
                if e.raw_os_error() != Some(libc::ENOENT) {
                    tracing::debug!("dropping the kernel's entry of {}: {e}", m.name);
                }
            }
        });
    }

    fn do_getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr) -> R<Vec<u8>> {
        let name = bytes(name)?;
        if name.starts_with(crate::tools::PREFIX) {
            let kind = self.do_getattr(req, ino)?.kind;
            let c = self.caller(req);
            return self.run(crate::tools::get(
                &self.client,
                &c,
                self.inos.fid(ino),
                kind,
                name,
            ));
        }
        let caps = name == CAPS_XATTR;
        if caps && self.lock_told().get(&ino.0).is_some_and(|t| t.no_caps) {
            return Err(Errno::ENODATA);
        }
        let r = self.run(
            self.client
                .getxattr(&self.caller(req), self.inos.fid(ino), name),
        );
        if caps && r == Err(Errno::ENODATA) {
            self.set_no_caps(ino, true);
        }
        r
    }

    fn do_listxattr(&self, req: &Request, ino: INodeNo) -> R<Vec<u8>> {
        let names = self.run(self.client.listxattr(&self.caller(req), self.inos.fid(ino)))?;
        // The kernel's format: each name NUL-terminated, back to back.
        let mut out = Vec::new();
        for n in names {
            out.extend_from_slice(n.as_bytes());
            out.push(0);
        }
        Ok(out)
    }

    fn do_removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr) -> R<()> {
        let name = bytes(name)?;
        if name == CAPS_XATTR {
            self.set_no_caps(ino, false);
        }
        self.run(
            self.client
                .removexattr(&self.caller(req), self.inos.fid(ino), name),
        )
    }
}

/// Reply to a getxattr/listxattr with the size-probe protocol: a 0-byte
/// buffer asks for the size; a too-small one is ERANGE.
fn reply_xattr(reply: ReplyXattr, size: u32, value: R<Vec<u8>>) {
    match value {
        Ok(v) if size == 0 => reply.size(v.len() as u32),
        Ok(v) if v.len() > size as usize => reply.error(fuser::Errno::from_i32(libc::ERANGE)),
        Ok(v) => reply.data(&v),
        Err(e) => reply.error(fe(e)),
    }
}

fn reply_empty(reply: ReplyEmpty, r: R<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(fe(e)),
    }
}

impl LoomFs {
    /// A create that found the name made: open the file there as open(2)
    /// would (its permission checked by the MDT, O_TRUNC done), and
    /// answer the kernel's CREATE with it.
    fn open_made_meanwhile(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        flags: i32,
        since: u64,
        reply: ReplyCreate,
    ) {
        let a = match self.do_lookup(req, parent, name) {
            Ok(a) if a.kind == FileKind::Dir => return reply.error(fe(Errno::EISDIR)),
            Ok(a) => a,
            Err(e) => return reply.error(fe(e)),
        };
        let ino = INodeNo(a.fid.ino());
        let (fh, keep, write) = match self.do_open(req, ino, OpenFlags(flags)) {
            Ok(o) => o,
            Err(e) => return reply.error(fe(e)),
        };
        let a = match self.do_getattr(req, ino) {
            Ok(a) => a,
            Err(e) => {
                let _ = self.do_release(fh);
                return reply.error(fe(e));
            }
        };
        self.note(&a);
        let mut f = crate::settings::open_reply_flags(OpenFlags(flags));
        if keep {
            f |= FopenFlags::FOPEN_KEEP_CACHE;
        }
        if flags & libc::O_APPEND != 0 {
            f |= FopenFlags::FOPEN_DIRECT_IO;
        }
        if self.client.ever_locked(a.fid) {
            f.remove(FopenFlags::FOPEN_NOFLUSH);
        }
        let ttl = self.entry_ttl(parent, name.as_bytes(), &a, since);
        let attr = self.inos.attr(&a);
        match write {
            Some(rdwr) => self.may_write(
                ino.0,
                fh,
                rdwr,
                Box::new(move || reply.created(&ttl, &attr, GEN, fh, f)),
            ),
            None => {
                self.lock_quiet().insert(fh.0);
                reply.created(&ttl, &attr, GEN, fh, f)
            }
        }
    }
}

/// Whether thread `pid` has SIGKILL pending (it is being killed): from
/// the pending-signal masks in `/proc/PID/status`. A thread that is gone
/// counts as killed.
fn killed(pid: u32) -> bool {
    const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return true;
    };
    status.lines().any(|l| {
        let mask = l
            .strip_prefix("SigPnd:")
            .or_else(|| l.strip_prefix("ShdPnd:"));
        mask.and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .is_some_and(|m| m & SIGKILL_BIT != 0)
    })
}

/// The lock kind of an F_RDLCK or F_WRLCK.
fn lock_kind(typ: i32) -> Option<LockKind> {
    match typ {
        libc::F_RDLCK => Some(LockKind::Read),
        libc::F_WRLCK => Some(LockKind::Write),
        _ => None,
    }
}

impl Filesystem for LoomFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // The same capabilities as the no-op reference (settings.rs), so
        // that benchmarks compare like with like.
        crate::settings::negotiate(config);
        // Locks through the file system, held across every client (see
        // `loom_client::locks`); the no-op reference takes none, and its
        // locks stay the kernel's own (this costs the benchmarks nothing:
        // no lock is taken by them).
        if let Err(missing) =
            config.add_capabilities(InitFlags::FUSE_POSIX_LOCKS | InitFlags::FUSE_FLOCK_LOCKS)
        {
            tracing::warn!(
                "kernel lacks FUSE lock capabilities {missing:?}: locks are this node's only"
            );
        }
        // POSIX ACLs: the kernel checks them too, from the ACL xattrs it
        // reads and caches (dropped with the attributes at a recall);
        // the MDT checks them for every client, the library included.
        // The umask is left to the MDT (DONT_MASK), which applies a
        // directory's default ACL in its place.
        match config.add_capabilities(InitFlags::FUSE_POSIX_ACL | InitFlags::FUSE_DONT_MASK) {
            Ok(()) => self.acls = true,
            Err(_) => tracing::warn!(
                "kernel lacks FUSE_POSIX_ACL or FUSE_DONT_MASK: ACLs are enforced by the MDT only, and new \
                 entries take the umask, not a default ACL"
            ),
        }
        Ok(())
    }

    fn lookup(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        // What this mount knows (its own changes, and under leases what
        // its MDTs answered): no server (the kernel has checked search
        // permission on `parent`). An absent name is given to the kernel
        // as a negative entry for as long as it is known absent: another
        // mount's create of it recalls the name (or the directory's list),
        // and the recall drops the entry (waiting at most
        // KERNEL_DROP_WAIT for the directory's lock, as for any entry).
        // A name no directory may hold is not merely absent.
        if name.len() > loom_client::meta::NAME_MAX {
            return reply.error(fe(Errno::ENAMETOOLONG));
        }
        if let Some(s) = &self.snaps {
            // Only names in the root or under the snapshot directory
            // are looked at here: nothing is asked of other lookups.
            let r = if parent == INodeNo::ROOT && name.as_bytes() == s.name() {
                Some(self.run(s.getattr(&self.caller(req), crate::snapdir::DIR_INO)))
            } else if crate::snapdir::is_virtual(parent.0) {
                Some(self.run(s.lookup(&self.caller(req), parent.0, name.as_bytes())))
            } else {
                None
            };
            match r {
                Some(Ok((a, ttl))) => return reply.entry(&ttl, &a, GEN),
                Some(Err(e)) => return reply.error(fe(e)),
                None => {}
            }
        }
        let since = self.client.recalls();
        match self
            .client
            .recent_entry(self.inos.fid(parent), name.as_bytes())
        {
            Some((Some(a), left)) => {
                self.client.router().lease_hit();
                self.note(&a);
                let ttl = if self.client.recalls() == since {
                    left
                } else {
                    Duration::ZERO
                };
                reply.entry(&ttl, &self.inos.attr(&a), GEN)
            }
            Some((None, left)) => {
                self.client.router().lease_hit();
                self.absent(reply, left, since)
            }
            None => match self.do_lookup(req, parent, name) {
                Ok(a) => {
                    self.note(&a);
                    let ttl = self.entry_ttl(parent, name.as_bytes(), &a, since);
                    reply.entry(&ttl, &self.inos.attr(&a), GEN)
                }
                Err(Errno::ENOENT) => {
                    // Known absent for as long as the answer's lease (or
                    // the attribute timeout) allows.
                    let left = match self
                        .client
                        .recent_entry(self.inos.fid(parent), name.as_bytes())
                    {
                        Some((None, left)) => left,
                        _ => Duration::ZERO,
                    };
                    self.absent(reply, left, since)
                }
                Err(e) => reply.error(fe(e)),
            },
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, _nlookup: u64) {
        // The kernel dropped the inode: what we told it no longer matters.
        // (Inodes are FIDs; nothing else is kept per inode.)
        self.lock_told().remove(&ino.0);
        self.kept.forget(ino.0);
    }

    fn getattr(&self, req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        if let Some(s) = self.snap_of(ino) {
            return match self.run(s.getattr(&self.caller(req), ino.0)) {
                Ok((a, ttl)) => reply.attr(&ttl, &a),
                Err(e) => reply.error(fe(e)),
            };
        }
        // Attributes this mount's own change just left: the kernel asks
        // for them after each change (and, for permission checks, before
        // the next create in the same directory). Kept by the kernel for
        // what is left of the timeout, so no answer lives longer than one
        // from the MDT would.
        let since = self.client.recalls();
        if let Some((a, left)) = self.client.recent_attr(self.inos.fid(ino)) {
            self.client.router().lease_hit();
            self.note(&a);
            let ttl = if self.client.recalls() == since {
                left
            } else {
                Duration::ZERO
            };
            return reply.attr(&ttl, &self.inos.attr(&a));
        }
        self.attr_reply(reply, self.do_getattr(req, ino), since);
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        if self.snap_of(ino).is_some() {
            return reply.error(fe(Errno::EROFS));
        }
        let set = SetAttr {
            perm: mode.map(|m| m & 0o7777),
            uid,
            gid,
            size,
            atime: atime.map(set_time),
            mtime: mtime.map(set_time),
            kill_suid: false,
            // ftruncate, or open with O_TRUNC: the kernel checked write
            // permission when the handle was opened.
            by_write_handle: fh.is_some() && size.is_some(),
            // The library adds this handle's unreported writes.
            written: None,
        };
        let since = self.client.recalls();
        if size.is_none() {
            return self.attr_reply(reply, self.do_setattr(req, ino, set), since);
        }
        // A size change: what is kept of the file goes, and a store of it
        // at the release running now ends before the kernel cuts its
        // pages at our answer (which waits for it off this worker).
        self.kept.drop_file(ino.0);
        let answer: crate::kept::Then = match self.do_setattr(req, ino, set) {
            Ok(a) => {
                self.note(&a);
                let (ttl, attr) = (self.ttl_of(&a, since), self.inos.attr(&a));
                Box::new(move || reply.attr(&ttl, &attr))
            }
            Err(e) => Box::new(move || reply.error(fe(e))),
        };
        self.kept.size_changed(ino.0, answer);
    }

    fn readlink(&self, req: &Request, ino: INodeNo, reply: ReplyData) {
        if let Some(s) = self.snap_of(ino) {
            return match self.run(s.readlink(&self.caller(req), ino.0)) {
                Ok(t) => reply.data(&t),
                Err(e) => reply.error(fe(e)),
            };
        }
        match self.do_readlink(req, ino) {
            Ok(t) => reply.data(t.as_bytes()),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        if let Some(e) = self.snap_refusal(parent, name, true) {
            return reply.error(fe(e));
        }
        let since = self.client.recalls();
        let r = self.do_mknod(req, parent, name, mode, umask, rdev);
        self.entry_reply(reply, parent, name, since, r);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        if let Some(e) = self.snap_refusal(parent, name, true) {
            return reply.error(fe(e));
        }
        let since = self.client.recalls();
        let r = self.do_mkdir(req, parent, name, mode, umask);
        self.entry_reply(reply, parent, name, since, r);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let Some(e) = self.snap_refusal(parent, name, false) {
            return reply.error(fe(e));
        }
        reply_empty(reply, self.do_unlink(req, parent, name));
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let Some(e) = self.snap_refusal(parent, name, false) {
            return reply.error(fe(e));
        }
        reply_empty(reply, self.do_rmdir(req, parent, name));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        if let Some(e) = self.snap_refusal(parent, link_name, true) {
            return reply.error(fe(e));
        }
        let since = self.client.recalls();
        let r = self.do_symlink(req, parent, link_name, target);
        self.entry_reply(reply, parent, link_name, since, r);
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let refused = self
            .snap_refusal(parent, name, false)
            .or_else(|| self.snap_refusal(newparent, newname, false));
        if let Some(e) = refused {
            return reply.error(fe(e));
        }
        reply_empty(
            reply,
            self.do_rename(req, parent, name, newparent, newname, flags),
        );
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let refused = self
            .snap_of(ino)
            .map(|_| Errno::EXDEV)
            .or_else(|| self.snap_refusal(newparent, newname, true));
        if let Some(e) = refused {
            return reply.error(fe(e));
        }
        let since = self.client.recalls();
        let r = self.do_link(req, ino, newparent, newname);
        self.entry_reply(reply, newparent, newname, since, r);
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if let Some(s) = self.snap_of(ino) {
            let fh = self.next_fh.fetch_add(1, Ordering::Relaxed) | crate::snapdir::FH_BIT;
            // What a snapshot holds never changes: the kernel's pages stay.
            return match self.run(s.open(&self.caller(req), ino.0, flags.0, fh)) {
                Ok(()) => reply.opened(FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE),
                Err(e) => reply.error(fe(e)),
            };
        }
        // The same open flags as the no-op reference (settings.rs).
        match self.do_open(req, ino, flags) {
            Ok((fh, keep, write)) => {
                if write.is_none() {
                    self.lock_quiet().insert(fh.0);
                }
                let mut f = crate::settings::open_reply_flags(flags);
                if self.client.ever_locked(self.inos.fid(ino)) {
                    // Its close must drop the closing process's locks.
                    f.remove(FopenFlags::FOPEN_NOFLUSH);
                }
                if keep {
                    f |= FopenFlags::FOPEN_KEEP_CACHE;
                }
                if flags.0 & libc::O_APPEND != 0 {
                    // Appends land where the MDT says: not through pages.
                    f |= FopenFlags::FOPEN_DIRECT_IO;
                }
                match write {
                    Some(rdwr) => {
                        self.may_write(ino.0, fh, rdwr, Box::new(move || reply.opened(fh, f)))
                    }
                    None => reply.opened(fh, f),
                }
            }
            Err(e) => reply.error(fe(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let r = match self
            .snaps
            .as_ref()
            .filter(|_| crate::snapdir::is_snap_fh(fh.0))
        {
            Some(s) => self.run(s.read(fh.0, offset, size)),
            None => self.do_read(fh, offset, size),
        };
        match r {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        // The kernel's write-back of mmap'ed pages.
        let cache = write_flags.contains(WriteFlags::FUSE_WRITE_CACHE);
        let r = if flags.0 & libc::O_APPEND != 0 && !cache {
            self.do_append(fh, data)
        } else {
            self.do_write(fh, offset, data, cache)
        };
        match r {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn flush(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        if crate::snapdir::is_snap_fh(fh.0) {
            return reply.ok();
        }
        // Every close(2): the POSIX locks of the closing process go (the
        // kernel sends no unlock of its own at close: FUSE leaves that to
        // the flush). Then, if it may have written: the data has landed,
        // and the size reached the MDT, before close returns (unless the
        // size waits under the file's size lease, see `do_create`).
        // Asked here first, so that a close with no lock (nearly every
        // one) neither looks up the caller's groups nor enters the runtime.
        if self.client.holds_locks(self.inos.fid(ino), lock_owner.0) {
            let c = self.caller(req);
            if let Err(e) = self.run(
                self.client
                    .unlock_owner(&c, self.inos.fid(ino), lock_owner.0),
            ) {
                return reply.error(fe(e));
            }
        }
        if self.lock_quiet().contains(&fh.0) {
            return reply.ok();
        }
        reply_empty(reply, self.do_flush(fh));
    }

    fn release(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if crate::snapdir::is_snap_fh(fh.0) {
            if let Some(s) = &self.snaps {
                s.release(fh.0);
            }
            return reply.ok();
        }
        self.lock_quiet().remove(&fh.0);
        // The open file description went: its flock and OFD locks go (the
        // POSIX locks of each process went at its close's flush).
        let mut owners = self
            .lockers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&fh.0)
            .unwrap_or_default();
        owners.extend(lock_owner.map(|o| o.0));
        owners.retain(|o| self.client.holds_locks(self.inos.fid(ino), *o));
        if !owners.is_empty() {
            let c = self.caller(req);
            for owner in owners {
                if let Err(e) = self.run(self.client.unlock_owner(&c, self.inos.fid(ino), owner)) {
                    tracing::warn!(ino = ino.0, "dropping the locks of a closed file: {e:?}");
                }
            }
        }
        reply_empty(reply, self.do_release(fh));
    }

    fn getlk(
        &self,
        req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        reply: ReplyLock,
    ) {
        let Some(kind) = lock_kind(typ) else {
            return reply.error(fe(Errno::EINVAL));
        };
        let c = self.caller(req);
        let r =
            self.run(
                self.client
                    .test_lock(&c, self.inos.fid(ino), lock_owner.0, kind, start, end),
            );
        match r {
            Ok(Some(l)) => {
                let typ = match l.kind {
                    LockKind::Read => libc::F_RDLCK,
                    LockKind::Write => libc::F_WRLCK,
                };
                reply.locked(l.start, l.end, typ, l.pid)
            }
            Ok(None) => reply.locked(start, end, libc::F_UNLCK, 0),
            Err(e) => reply.error(fe(e)),
        }
    }

    fn setlk(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        lock_owner: LockOwner,
        start: u64,
        end: u64,
        typ: i32,
        _pid: u32,
        sleep: bool,
        reply: ReplyEmpty,
    ) {
        let c = self.caller(req);
        let (client, fid, owner) = (self.client.clone(), self.inos.fid(ino), lock_owner.0);
        if typ != libc::F_UNLCK {
            self.lockers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(fh.0)
                .or_default()
                .insert(owner);
        }
        if typ == libc::F_UNLCK {
            return reply_empty(reply, self.run(client.unlock(&c, fid, owner, start, end)));
        }
        let Some(kind) = lock_kind(typ) else {
            return reply.error(fe(Errno::EINVAL));
        };
        if !sleep {
            return reply_empty(
                reply,
                self.run(client.lock(&c, fid, owner, kind, start, end, false)),
            );
        }
        // A wait may last: off the FUSE worker, which serves others
        // meanwhile. A process killed while it waits closes its files,
        // whose flush gives the wait up (`unlock_owner`).
        // The kernel waits for the answer even when the process is killed
        // (FUSE interrupts are not served): the wait gives up once the
        // process has SIGKILL pending.
        let pid = req.pid();
        self.rt.spawn(async move {
            let killed = move || killed(pid);
            let r = client
                .lock_unless(&c, fid, owner, kind, start, end, true, &killed)
                .await;
            reply_empty(reply, r);
        });
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.do_fsync(fh));
    }

    /// No ioctl is a loomfs one: ENOTTY, as a local file system answers
    /// an ioctl it does not know (programs ask `TCGETS` of every file
    /// they open, to see whether it is a terminal; fuser's default logs
    /// each as a warning).
    #[allow(clippy::too_many_arguments)]
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        reply.error(fuser::Errno::from_i32(libc::ENOTTY));
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.do_fallocate(fh, offset, length, mode));
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // Offsets are MDT cookies, so a listing needs no state; the handle
        // only remembers where the listing was seen to end.
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        reply.opened(FileHandle(fh), FopenFlags::empty());
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if self.listing_ended(fh, offset) {
            return reply.ok();
        }
        let (dot, dotdot, cookie) = Self::listing_start(offset);
        if let Some(s) = self.snap_of(ino) {
            let (entries, _) =
                match self.run(s.readdir(&self.caller(req), ino.0, cookie, READDIR_BATCH)) {
                    Ok(e) => e,
                    Err(e) => return reply.error(fe(e)),
                };
            let dots = [(dot, OFF_DOT, "."), (dotdot, OFF_DOTDOT, "..")];
            for (_, off, name) in dots.iter().filter(|d| d.0) {
                if reply.add(ino, *off, FileType::Directory, name) {
                    return reply.ok();
                }
            }
            for (off, name, a) in entries {
                if reply.add(a.ino, off, a.kind, OsStr::from_bytes(&name)) {
                    break;
                }
            }
            return reply.ok();
        }
        let (entries, eof) = match self.do_readdir(req, ino, offset, READDIR_BATCH) {
            Ok(e) => e,
            Err(e) => return reply.error(fe(e)),
        };
        let mut last = offset;
        // ".." carries the directory's own inode: the parent is not known
        // here. The kernel resolves ".." by its dcache, never by d_ino;
        // only tools that print d_ino (ls -ai) see the difference.
        if dot {
            if reply.add(ino, OFF_DOT, FileType::Directory, ".") {
                return reply.ok();
            }
            last = OFF_DOT;
        }
        if dotdot {
            if reply.add(ino, OFF_DOTDOT, FileType::Directory, "..") {
                return reply.ok();
            }
            last = OFF_DOTDOT;
        }
        for e in entries {
            // A full buffer: the kernel asks again from the last offset added.
            if reply.add(
                INodeNo(e.attr.fid.ino()),
                e.cookie,
                file_type(e.attr.kind),
                &e.name,
            ) {
                return reply.ok();
            }
            last = e.cookie;
        }
        if eof {
            self.note_listing_end(fh, last);
        }
        reply.ok();
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        if self.listing_ended(fh, offset) {
            return reply.ok();
        }
        let (dot, dotdot, cookie) = Self::listing_start(offset);
        if let Some(s) = self.snap_of(ino) {
            let c = self.caller(req);
            let (entries, _) = match self.run(s.readdir(&c, ino.0, cookie, READDIRPLUS_BATCH)) {
                Ok(e) => e,
                Err(e) => return reply.error(fe(e)),
            };
            let me = match self.run(s.getattr(&c, ino.0)) {
                Ok((a, _)) => a,
                Err(e) => return reply.error(fe(e)),
            };
            let ttl = crate::snapdir::SNAP_TTL;
            let dots = [(dot, OFF_DOT, "."), (dotdot, OFF_DOTDOT, "..")];
            for (_, off, name) in dots.iter().filter(|d| d.0) {
                if reply.add(ino, *off, name, &ttl, &me, GEN) {
                    return reply.ok();
                }
            }
            for (off, name, a) in entries {
                if reply.add(a.ino, off, OsStr::from_bytes(&name), &ttl, &a, GEN) {
                    break;
                }
            }
            return reply.ok();
        }
        let since = self.client.recalls();
        let dir = (dot || dotdot).then(|| dot_placeholder(self.inos.fid(ino)));
        let (entries, eof) = match self.do_readdir(req, ino, offset, READDIRPLUS_BATCH) {
            Ok(e) => e,
            Err(e) => return reply.error(fe(e)),
        };
        let mut last = offset;
        if let Some(d) = &dir {
            if dot {
                if reply.add(ino, OFF_DOT, ".", &self.ttl, &self.inos.attr(d), GEN) {
                    return reply.ok();
                }
                last = OFF_DOT;
            }
            if dotdot {
                if reply.add(ino, OFF_DOTDOT, "..", &self.ttl, &self.inos.attr(d), GEN) {
                    return reply.ok();
                }
                last = OFF_DOTDOT;
            }
        }
        // Each entry added here counts as a lookup for the kernel, which is
        // free for us: inodes are FIDs and hold no state to forget.
        for e in entries {
            let ttl = self.entry_ttl(ino, e.name.as_bytes(), &e.attr, since);
            if reply.add(
                INodeNo(e.attr.fid.ino()),
                e.cookie,
                &e.name,
                &ttl,
                &self.inos.attr(&e.attr),
                GEN,
            ) {
                return reply.ok();
            }
            self.note(&e.attr);
            last = e.cookie;
        }
        if eof {
            self.note_listing_end(fh, last);
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.lock_ended().remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Changes are answered before their commit: wait for it.
        reply_empty(reply, self.run(self.client.sync_all()));
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match self.do_statfs() {
            Ok(s) => {
                let f = u64::from(STATFS_FRSIZE);
                reply.statfs(
                    s.bytes_total / f,
                    s.bytes_free / f,
                    s.bytes_avail / f,
                    s.files_total,
                    s.files_free,
                    loom_proto::layout::DEFAULT_STRIPE_SIZE,
                    loom_client::meta::NAME_MAX as u32,
                    STATFS_FRSIZE,
                )
            }
            Err(e) => reply.error(fe(e)),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        if self.snap_of(ino).is_some() {
            return reply.error(fe(Errno::EROFS));
        }
        reply_empty(reply, self.do_setxattr(req, ino, name, value, flags));
    }

    fn getxattr(&self, req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if let Some(s) = self.snap_of(ino) {
            let r = self.run(s.getxattr(&self.caller(req), ino.0, name.as_bytes()));
            return reply_xattr(reply, size, r);
        }
        if name.as_bytes().starts_with(crate::finds::PREFIX) {
            let page = self.find_page(req, ino, name.as_bytes(), size);
            return reply_xattr(reply, size, page);
        }
        reply_xattr(reply, size, self.do_getxattr(req, ino, name));
    }

    fn listxattr(&self, req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        if let Some(s) = self.snap_of(ino) {
            return reply_xattr(reply, size, self.run(s.listxattr(&self.caller(req), ino.0)));
        }
        reply_xattr(reply, size, self.do_listxattr(req, ino));
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if self.snap_of(ino).is_some() {
            return reply.error(fe(Errno::EROFS));
        }
        reply_empty(reply, self.do_removexattr(req, ino, name));
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        // default_permissions: the kernel has checked the mode bits.
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        if let Some(e) = self.snap_refusal(parent, name, true) {
            return reply.error(fe(e));
        }
        let since = self.client.recalls();
        let made = self
            .do_create(req, parent, name, mode, umask)
            .and_then(|(a, fh)| {
                if flags & libc::O_ACCMODE != libc::O_RDONLY {
                    // A new inode: no store of it runs, nothing waits.
                    let rdwr = flags & libc::O_ACCMODE == libc::O_RDWR;
                    self.may_write(a.fid.ino(), fh, rdwr, Box::new(|| {}));
                }
                // O_SYNC/O_DSYNC: the new name is durable when open returns
                // (the data is, at each write: the kernel fsyncs then).
                if flags & (libc::O_SYNC | libc::O_DSYNC) != 0 {
                    if let Err(e) = self.run(self.client.sync_all()) {
                        self.lock_files().remove(&fh.0);
                        return Err(e);
                    }
                }
                Ok((a, fh))
            });
        match made {
            // The name was made by another client since the kernel looked
            // it up: open(2) without O_EXCL opens what is there (as NFS's
            // unchecked create), rather than fail with EEXIST (two nodes'
            // `>>` to one new log).
            Err(Errno::EEXIST) if flags & libc::O_EXCL == 0 => {
                self.open_made_meanwhile(req, parent, name, flags, since, reply)
            }
            Ok((a, fh)) => {
                self.note(&a);
                // A new file has no xattrs, and the kernel no pages of it.
                self.set_no_caps(INodeNo(a.fid.ino()), true);
                let lease = self.client.lease_gen(a.fid);
                self.lock_told().entry(a.fid.ino()).or_default().pages_lease = lease;
                // Kept by the kernel under the leases the create granted.
                let ttl = self.entry_ttl(parent, name.as_bytes(), &a, since);
                // Under the size lease, close(2) has nothing to do: what
                // was written went behind under space grants or was waited
                // for, and the release (or a recall, when another client
                // looks at the file) sends what was gathered and the size.
                // No lease (a mount without leases): close reports.
                let mut reply_flags = match self.file(fh) {
                    Ok(f) if f.defer_reports() => crate::settings::create_reply_flags(),
                    _ => FopenFlags::empty(),
                };
                if flags & libc::O_APPEND != 0 {
                    reply_flags |= FopenFlags::FOPEN_DIRECT_IO;
                }
                reply.created(&ttl, &self.inos.attr(&a), GEN, fh, reply_flags)
            }
            Err(e) => reply.error(fe(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_offsets_resume_after_dot_entries_and_at_cookies() {
        assert_eq!(LoomFs::listing_start(0), (true, true, 0));
        assert_eq!(LoomFs::listing_start(OFF_DOT), (false, true, 0));
        assert_eq!(LoomFs::listing_start(OFF_DOTDOT), (false, false, 0));
        assert_eq!(LoomFs::listing_start(12345), (false, false, 12345));
    }

    #[test]
    fn entry_cookies_never_collide_with_dot_offsets() {
        for name in ["a", "b", "", "x".repeat(255).as_str()] {
            assert!(loom_proto::fid::name_hash(name.as_bytes()) > OFF_DOTDOT);
        }
    }

    #[test]
    fn proto_errnos_become_the_same_kernel_errnos() {
        assert_eq!(fe(Errno::ENOENT).code(), libc::ENOENT);
        assert_eq!(fe(Errno::ENODATA).code(), libc::ENODATA);
        assert_eq!(fe(Errno::ENOTEMPTY).code(), libc::ENOTEMPTY);
    }

    #[test]
    fn file_kinds_come_from_mode_type_bits() {
        assert_eq!(kind_of_mode(libc::S_IFIFO | 0o644), Ok(FileKind::Fifo));
        assert_eq!(kind_of_mode(libc::S_IFCHR | 0o600), Ok(FileKind::CharDev));
        assert_eq!(kind_of_mode(0o644), Err(Errno::EINVAL));
    }
}
