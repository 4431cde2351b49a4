//! [`NoopFs`]: a no-op in-memory file system, "the FUSE ceiling".
//!
//! It does the least work a correct file system can, so that a benchmark
//! run on it measures what the kernel, FUSE and fuser cost on this machine
//! and nothing else: `loom bench` puts it beside loomfs (target `noop:`),
//! and `loom mount-noop DIR` mounts it by hand for real tools (tar,
//! mdtest). It is mounted with loomfs's own settings
//! ([`crate::settings`]): the same worker threads and cloned fds, mount
//! options, `init` negotiation, readahead and attribute/entry timeouts.
//!
//! What it keeps, all in memory and lost at unmount:
//! - inodes in one `HashMap` behind one `Mutex` (every request takes it
//!   once); inode numbers are never reused (generation 0);
//! - per directory, its names (a `HashMap`) and their listing order (a
//!   `BTreeMap` by cookie): a name's cookie is given when the name is made
//!   and never changes, so a listing resumed at a cookie neither skips nor
//!   repeats names while others are added or removed;
//! - file data as a `Vec<u8>`, so what is written reads back and a
//!   benchmark's verification works (large `io` runs need the memory).
//!
//! Kernel caches and our replies:
//! - entries and attributes are given with the mount's `attr_timeout`, as
//!   loomfs gives them; negative lookups are not cached (plain ENOENT);
//! - opens reply without `FOPEN_KEEP_CACHE`, as loomfs's, so the kernel
//!   drops a file's cached pages at every open in both; creates and
//!   read-only opens reply `FOPEN_NOFLUSH`, as loomfs's;
//! - permissions are checked by the kernel (`default_permissions`);
//!   `access` answers yes;
//! - set-ID bits are cleared here on write, truncate and chown, by loomfs's
//!   rule (the kernel leaves it to the file system: HANDLE_KILLPRIV_V2),
//!   and an open with O_TRUNC truncates (ATOMIC_O_TRUNC);
//! - xattrs answer ENOSYS, after which the kernel stops sending them;
//! - an inode lives while it has a name, an open handle or a kernel
//!   reference (lookups not yet forgotten), so an unlinked file stays usable
//!   through its open handles.

use crate::settings;
use crate::MountOptions;
use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileAttr, FileHandle, FileType,
    Filesystem, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry,
    ReplyLseek, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

/// The subtype of a no-op mount: it shows as `fuse.loom-noop` in /proc/mounts.
pub const NOOP_SUBTYPE: &str = "loom-noop";

/// The root directory's inode.
const ROOT: u64 = 1;
/// Offsets of "." and ".." in a listing; names' cookies start above them.
const OFF_DOT: u64 = 1;
const OFF_DOTDOT: u64 = 2;
const FIRST_COOKIE: u64 = 3;
/// Inode numbers are never reused: generation 0.
const GEN: Generation = Generation(0);
/// Longest name, as on Linux's local file systems.
const NAME_MAX: usize = 255;
/// Block size reported by statfs (the unit of `df`'s counts).
const STATFS_FRSIZE: u32 = 4096;
/// What statfs reports as the size of the file system: nominal, since
/// everything lives in this process's memory.
const NOMINAL_BYTES: u64 = 1 << 40;
/// What statfs reports as the number of inodes: nominal.
const NOMINAL_INODES: u64 = 1 << 32;

type R<T> = Result<T, Errno>;

/// The no-op reference file system (see the module doc).
#[derive(Debug)]
pub struct NoopFs {
    ttl: Duration,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    /// Bytes held by all files (for statfs).
    bytes: u64,
}

#[derive(Debug)]
struct Inode {
    attr: FileAttr,
    body: Body,
    /// Lookups the kernel has not forgotten yet.
    lookups: u64,
    /// Open file handles.
    opens: u64,
}

#[derive(Debug)]
enum Body {
    File(Vec<u8>),
    Dir(Dir),
    Symlink(OsString),
    /// FIFO, socket, device: attributes only.
    Special,
}

#[derive(Debug)]
struct Dir {
    /// The directory's parent (the root is its own).
    parent: u64,
    names: HashMap<OsString, Entry>,
    /// Listing order: cookie -> name.
    order: BTreeMap<u64, OsString>,
    next_cookie: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    ino: u64,
    cookie: u64,
}

impl Dir {
    fn new(parent: u64) -> Dir {
        Dir {
            parent,
            names: HashMap::new(),
            order: BTreeMap::new(),
            next_cookie: FIRST_COOKIE,
        }
    }

    fn insert(&mut self, name: &OsStr, ino: u64) {
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        self.names.insert(name.to_owned(), Entry { ino, cookie });
        self.order.insert(cookie, name.to_owned());
    }

    fn remove(&mut self, name: &OsStr) -> Option<u64> {
        let e = self.names.remove(name)?;
        self.order.remove(&e.cookie);
        Some(e.ino)
    }
}

fn time_of(t: TimeOrNow, now: SystemTime) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => now,
    }
}

/// `perm` without set-user-ID, and without set-group-ID if the group may
/// execute (a set-group-ID without group execute marks mandatory locking).
fn killed(perm: u16) -> u16 {
    let sgid_exec =
        u32::from(perm) & (libc::S_ISGID | libc::S_IXGRP) == libc::S_ISGID | libc::S_IXGRP;
    let mut p = u32::from(perm) & !libc::S_ISUID;
    if sgid_exec {
        p &= !libc::S_ISGID;
    }
    p as u16
}

fn check_name(name: &OsStr) -> R<()> {
    if name.as_bytes().len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    Ok(())
}

/// What a new inode is: its type and type-specific content.
enum NewKind {
    File,
    Dir,
    Symlink(OsString),
    Special(FileType, u32),
}

impl State {
    fn new(uid: u32, gid: u32) -> State {
        let now = SystemTime::now();
        let mut attr = new_attr(ROOT, FileType::Directory, 0o755, uid, gid, 0, now);
        attr.nlink = 2;
        let root = Inode {
            attr,
            body: Body::Dir(Dir::new(ROOT)),
            lookups: 0,
            opens: 0,
        };
        State {
            inodes: HashMap::from([(ROOT, root)]),
            next_ino: ROOT + 1,
            bytes: 0,
        }
    }

    fn inode(&self, ino: u64) -> R<&Inode> {
        self.inodes.get(&ino).ok_or(Errno::ENOENT)
    }

    fn inode_mut(&mut self, ino: u64) -> R<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }

    fn dir(&self, ino: u64) -> R<&Dir> {
        match &self.inode(ino)?.body {
            Body::Dir(d) => Ok(d),
            _ => Err(Errno::ENOTDIR),
        }
    }

    fn dir_mut(&mut self, ino: u64) -> R<&mut Dir> {
        match &mut self.inode_mut(ino)?.body {
            Body::Dir(d) => Ok(d),
            _ => Err(Errno::ENOTDIR),
        }
    }

    fn entry(&self, parent: u64, name: &OsStr) -> R<Entry> {
        self.dir(parent)?
            .names
            .get(name)
            .copied()
            .ok_or(Errno::ENOENT)
    }

    /// The kernel now holds one more reference to `ino`; returns its attributes.
    fn looked_up(&mut self, ino: u64) -> R<FileAttr> {
        let i = self.inode_mut(ino)?;
        i.lookups += 1;
        Ok(i.attr)
    }

    /// The kernel forgot `n` lookups of `ino`.
    fn forget(&mut self, ino: u64, n: u64) {
        if let Ok(i) = self.inode_mut(ino) {
            i.lookups = i.lookups.saturating_sub(n);
        }
        self.drop_if_unused(ino);
    }

    /// A change of `dir`'s names: its mtime and ctime.
    fn touch_dir(&mut self, dir: u64, now: SystemTime) {
        if let Ok(d) = self.inode_mut(dir) {
            d.attr.mtime = now;
            d.attr.ctime = now;
        }
    }

    /// Forgets `ino` once nothing refers to it: no name, no open handle,
    /// no kernel reference. The root stays.
    fn drop_if_unused(&mut self, ino: u64) {
        let unused = self
            .inodes
            .get(&ino)
            .is_some_and(|i| i.attr.nlink == 0 && i.lookups == 0 && i.opens == 0);
        if unused && ino != ROOT {
            if let Some(Inode {
                body: Body::File(data),
                ..
            }) = self.inodes.remove(&ino)
            {
                self.bytes -= data.len() as u64;
            }
        }
    }

    /// Makes `name` in `parent`, owned by the caller; the group and, for a
    /// directory, the set-group-ID bit come from a set-group-ID parent.
    fn make(
        &mut self,
        req: &Request,
        parent: u64,
        name: &OsStr,
        perm: u32,
        what: NewKind,
    ) -> R<FileAttr> {
        check_name(name)?;
        let (pgid, pperm) = {
            let p = self.inode(parent)?;
            (p.attr.gid, u32::from(p.attr.perm))
        };
        if self.dir(parent)?.names.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        let setgid = pperm & libc::S_ISGID != 0;
        let gid = if setgid { pgid } else { req.gid() };
        let mut perm = perm & 0o7777;
        let ino = self.next_ino;
        let now = SystemTime::now();
        let (kind, body, rdev, size) = match what {
            NewKind::File => (FileType::RegularFile, Body::File(Vec::new()), 0, 0),
            NewKind::Dir => {
                if setgid {
                    perm |= libc::S_ISGID;
                }
                (FileType::Directory, Body::Dir(Dir::new(parent)), 0, 0)
            }
            NewKind::Symlink(target) => {
                let len = target.len() as u64;
                (FileType::Symlink, Body::Symlink(target), 0, len)
            }
            NewKind::Special(kind, rdev) => (kind, Body::Special, rdev, 0),
        };
        let mut attr = new_attr(ino, kind, perm, req.uid(), gid, rdev, now);
        attr.size = size;
        if kind == FileType::Directory {
            attr.nlink = 2;
        }
        self.next_ino += 1;
        self.inodes.insert(
            ino,
            Inode {
                attr,
                body,
                lookups: 1,
                opens: 0,
            },
        );
        self.dir_mut(parent)?.insert(name, ino);
        if kind == FileType::Directory {
            self.inode_mut(parent)?.attr.nlink += 1;
        }
        self.touch_dir(parent, now);
        Ok(attr)
    }

    /// Resizes a file's data, keeping `bytes` and the attributes in step.
    fn resize(&mut self, ino: u64, size: u64, now: SystemTime) -> R<()> {
        let len = usize::try_from(size).map_err(|_| Errno::EFBIG)?;
        let i = self.inode_mut(ino)?;
        let Body::File(data) = &mut i.body else {
            return Err(if i.attr.kind == FileType::Directory {
                Errno::EISDIR
            } else {
                Errno::EINVAL
            });
        };
        let old = data.len() as u64;
        data.resize(len, 0);
        i.attr.size = size;
        i.attr.blocks = size.div_ceil(512);
        i.attr.mtime = now;
        i.attr.ctime = now;
        self.bytes = self.bytes - old + size;
        Ok(())
    }

    /// Takes away one name of `ino` (unlinked or replaced by a rename).
    fn unlinked(&mut self, ino: u64, now: SystemTime) {
        if let Ok(i) = self.inode_mut(ino) {
            i.attr.nlink = if i.attr.kind == FileType::Directory {
                0
            } else {
                i.attr.nlink.saturating_sub(1)
            };
            i.attr.ctime = now;
        }
        self.drop_if_unused(ino);
    }

    /// Whether `ino` is `dir` or below it.
    fn is_at_or_below(&self, mut ino: u64, dir: u64) -> bool {
        loop {
            if ino == dir {
                return true;
            }
            match self.dir(ino) {
                Ok(d) if d.parent != ino => ino = d.parent,
                _ => return false,
            }
        }
    }

    fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: RenameFlags,
    ) -> R<()> {
        if flags.contains(RenameFlags::RENAME_EXCHANGE)
            || (flags.bits() & !RenameFlags::RENAME_NOREPLACE.bits()) != 0
        {
            // Exchange and whiteout are not supported (EINVAL, as file
            // systems without them answer).
            return Err(Errno::EINVAL);
        }
        check_name(newname)?;
        let src = self.entry(parent, name)?;
        let src_is_dir = matches!(self.inode(src.ino)?.body, Body::Dir(_));
        let victim = match self.entry(newparent, newname) {
            Ok(e) => Some(e.ino),
            Err(e) if e == Errno::ENOENT => None,
            Err(e) => return Err(e),
        };
        if victim == Some(src.ino) {
            // Two names of one inode: POSIX says do nothing.
            return Ok(());
        }
        if src_is_dir && self.is_at_or_below(newparent, src.ino) {
            return Err(Errno::EINVAL);
        }
        if let Some(v) = victim {
            if flags.contains(RenameFlags::RENAME_NOREPLACE) {
                return Err(Errno::EEXIST);
            }
            match (&self.inode(v)?.body, src_is_dir) {
                (Body::Dir(d), true) if !d.names.is_empty() => return Err(Errno::ENOTEMPTY),
                (Body::Dir(_), true) => {}
                (Body::Dir(_), false) => return Err(Errno::EISDIR),
                (_, true) => return Err(Errno::ENOTDIR),
                (_, false) => {}
            }
        }
        let now = SystemTime::now();
        if let Some(v) = victim {
            self.dir_mut(newparent)?.remove(newname);
            if src_is_dir {
                self.inode_mut(newparent)?.attr.nlink -= 1;
            }
            self.unlinked(v, now);
        }
        self.dir_mut(parent)?.remove(name);
        self.dir_mut(newparent)?.insert(newname, src.ino);
        if src_is_dir && parent != newparent {
            self.dir_mut(src.ino)?.parent = newparent;
            self.inode_mut(parent)?.attr.nlink -= 1;
            self.inode_mut(newparent)?.attr.nlink += 1;
        }
        self.inode_mut(src.ino)?.attr.ctime = now;
        self.touch_dir(parent, now);
        self.touch_dir(newparent, now);
        Ok(())
    }
}

fn new_attr(
    ino: u64,
    kind: FileType,
    perm: u32,
    uid: u32,
    gid: u32,
    rdev: u32,
    now: SystemTime,
) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind,
        perm: (perm & 0o7777) as u16,
        nlink: 1,
        uid,
        gid,
        rdev,
        // As loomfs reports: tools size their buffers by it.
        blksize: loom_proto::layout::DEFAULT_STRIPE_SIZE,
        flags: 0,
    }
}

impl NoopFs {
    /// An empty file system whose root (mode 0755) belongs to `uid`:`gid`,
    /// telling the kernel to trust attributes and entries for `ttl`.
    pub fn new(ttl: Duration, uid: u32, gid: u32) -> NoopFs {
        NoopFs {
            ttl,
            state: Mutex::new(State::new(uid, gid)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Poisoning is ignored: no handler panics with the lock held, and
        // each change leaves the map consistent before the next begins.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry_reply(&self, reply: ReplyEntry, r: R<FileAttr>) {
        match r {
            Ok(a) => reply.entry(&self.ttl, &a, GEN),
            Err(e) => reply.error(e),
        }
    }

    fn attr_reply(&self, reply: ReplyAttr, r: R<FileAttr>) {
        match r {
            Ok(a) => reply.attr(&self.ttl, &a),
            Err(e) => reply.error(e),
        }
    }

    // ---- helpers: each returns a result, the trait methods reply ----

    fn do_lookup(&self, parent: INodeNo, name: &OsStr) -> R<FileAttr> {
        let mut st = self.lock();
        let e = st.entry(parent.0, name)?;
        st.looked_up(e.ino)
    }

    #[allow(clippy::too_many_arguments)]
    fn do_setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
    ) -> R<FileAttr> {
        let now = SystemTime::now();
        let mut st = self.lock();
        if let Some(size) = size {
            st.resize(ino.0, size, now)?;
        }
        let i = st.inode_mut(ino.0)?;
        let a = &mut i.attr;
        // HANDLE_KILLPRIV_V2 (settings::negotiate): set-ID bits are ours to
        // clear, by loomfs's rule. A chown of a non-directory clears them
        // (also by root, as Linux does), a truncate by a caller other than
        // root too; a mode given in the same request wins (Linux never
        // sends both).
        let chown = uid.is_some_and(|u| u != a.uid) || gid.is_some_and(|g| g != a.gid);
        let kill = mode.is_none()
            && ((chown && a.kind != FileType::Directory) || (size.is_some() && req.uid() != 0));
        if kill {
            a.perm = killed(a.perm);
        }
        if let Some(m) = mode {
            a.perm = (m & 0o7777) as u16;
        }
        if let Some(u) = uid {
            a.uid = u;
        }
        if let Some(g) = gid {
            a.gid = g;
        }
        if let Some(t) = atime {
            a.atime = time_of(t, now);
        }
        if let Some(t) = mtime {
            a.mtime = time_of(t, now);
        }
        a.ctime = now;
        Ok(*a)
    }

    fn do_open(&self, req: &Request, ino: INodeNo, flags: OpenFlags) -> R<FileHandle> {
        let mut st = self.lock();
        match st.inode(ino.0)?.body {
            Body::File(_) => {}
            Body::Dir(_) => return Err(Errno::EISDIR),
            _ => return Err(Errno::EINVAL),
        }
        if flags.0 & libc::O_TRUNC != 0 {
            // ATOMIC_O_TRUNC (settings::negotiate): the open truncates
            // (the kernel checked write permission), clearing set-ID bits
            // for a caller other than root as a truncate does.
            st.resize(ino.0, 0, SystemTime::now())?;
            if req.uid() != 0 {
                let a = &mut st.inode_mut(ino.0)?.attr;
                a.perm = killed(a.perm);
            }
        }
        let i = st.inode_mut(ino.0)?;
        i.opens += 1;
        // The handle is the inode: nothing else is kept per open.
        Ok(FileHandle(ino.0))
    }

    fn do_create(&self, req: &Request, parent: INodeNo, name: &OsStr, perm: u32) -> R<FileAttr> {
        let mut st = self.lock();
        let a = st.make(req, parent.0, name, perm, NewKind::File)?;
        st.inode_mut(a.ino.0)?.opens += 1;
        Ok(a)
    }

    fn do_mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        rdev: u32,
    ) -> R<FileAttr> {
        let what = match mode & libc::S_IFMT {
            libc::S_IFREG | 0 => NewKind::File,
            libc::S_IFIFO => NewKind::Special(FileType::NamedPipe, rdev),
            libc::S_IFCHR => NewKind::Special(FileType::CharDevice, rdev),
            libc::S_IFBLK => NewKind::Special(FileType::BlockDevice, rdev),
            libc::S_IFSOCK => NewKind::Special(FileType::Socket, rdev),
            _ => return Err(Errno::EINVAL),
        };
        self.lock().make(req, parent.0, name, mode, what)
    }

    fn do_unlink(&self, parent: INodeNo, name: &OsStr) -> R<()> {
        let mut st = self.lock();
        let e = st.entry(parent.0, name)?;
        if matches!(st.inode(e.ino)?.body, Body::Dir(_)) {
            return Err(Errno::EISDIR);
        }
        let now = SystemTime::now();
        st.dir_mut(parent.0)?.remove(name);
        st.touch_dir(parent.0, now);
        st.unlinked(e.ino, now);
        Ok(())
    }

    fn do_rmdir(&self, parent: INodeNo, name: &OsStr) -> R<()> {
        let mut st = self.lock();
        let e = st.entry(parent.0, name)?;
        if !st.dir(e.ino)?.names.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        let now = SystemTime::now();
        st.dir_mut(parent.0)?.remove(name);
        st.inode_mut(parent.0)?.attr.nlink -= 1;
        st.touch_dir(parent.0, now);
        st.unlinked(e.ino, now);
        Ok(())
    }

    fn do_link(&self, ino: INodeNo, newparent: INodeNo, newname: &OsStr) -> R<FileAttr> {
        check_name(newname)?;
        let mut st = self.lock();
        if matches!(st.inode(ino.0)?.body, Body::Dir(_)) {
            return Err(Errno::EPERM);
        }
        if st.dir(newparent.0)?.names.contains_key(newname) {
            return Err(Errno::EEXIST);
        }
        let now = SystemTime::now();
        st.dir_mut(newparent.0)?.insert(newname, ino.0);
        st.touch_dir(newparent.0, now);
        let i = st.inode_mut(ino.0)?;
        i.attr.nlink += 1;
        i.attr.ctime = now;
        st.looked_up(ino.0)
    }

    fn do_read(&self, ino: INodeNo, offset: u64, size: u32, reply: ReplyData) {
        let st = self.lock();
        match st.inode(ino.0).map(|i| &i.body) {
            Ok(Body::File(data)) => {
                let start = usize::try_from(offset)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                let end = start.saturating_add(size as usize).min(data.len());
                // Sent while the lock is held: no copy of the data.
                reply.data(&data[start..end]);
            }
            Ok(_) => reply.error(Errno::EINVAL),
            Err(e) => reply.error(e),
        }
    }

    /// Writes `buf` at `offset`; `kill` clears set-ID bits first (the
    /// kernel asks, for a caller without CAP_FSETID, under
    /// HANDLE_KILLPRIV_V2).
    fn do_write(&self, ino: INodeNo, offset: u64, buf: &[u8], kill: bool) -> R<u32> {
        let start = usize::try_from(offset).map_err(|_| Errno::EFBIG)?;
        let end = start.checked_add(buf.len()).ok_or(Errno::EFBIG)?;
        let now = SystemTime::now();
        let mut st = self.lock();
        let i = st.inode_mut(ino.0)?;
        let Body::File(data) = &mut i.body else {
            return Err(Errno::EINVAL);
        };
        if kill {
            i.attr.perm = killed(i.attr.perm);
        }
        let old = data.len();
        if start >= old {
            // Appending (the common case): no zero-fill of what is written.
            data.resize(start, 0);
            data.extend_from_slice(buf);
        } else {
            if end > old {
                data.resize(end, 0);
            }
            data[start..end].copy_from_slice(buf);
        }
        let len = data.len() as u64;
        i.attr.size = len;
        i.attr.blocks = len.div_ceil(512);
        i.attr.mtime = now;
        i.attr.ctime = now;
        st.bytes += len - old as u64;
        Ok(buf.len() as u32)
    }

    fn do_fallocate(&self, ino: INodeNo, offset: u64, len: u64, mode: i32) -> R<()> {
        let keep_size = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
        let end = offset.checked_add(len).ok_or(Errno::EFBIG)?;
        let now = SystemTime::now();
        let mut st = self.lock();
        let size = st.inode(ino.0)?.attr.size;
        let zero = match mode & !libc::FALLOC_FL_KEEP_SIZE {
            0 => false,
            libc::FALLOC_FL_PUNCH_HOLE if keep_size => true,
            libc::FALLOC_FL_ZERO_RANGE => true,
            _ => return Err(Errno::EOPNOTSUPP),
        };
        if !keep_size && end > size {
            st.resize(ino.0, end, now)?;
        }
        if zero {
            let Body::File(data) = &mut st.inode_mut(ino.0)?.body else {
                return Err(Errno::EINVAL);
            };
            let len = data.len();
            let start = usize::try_from(offset).unwrap_or(usize::MAX).min(len);
            let stop = usize::try_from(end).unwrap_or(usize::MAX).min(len);
            data[start..stop].fill(0);
        }
        Ok(())
    }

    fn do_release(&self, ino: INodeNo) {
        let mut st = self.lock();
        if let Ok(i) = st.inode_mut(ino.0) {
            i.opens = i.opens.saturating_sub(1);
        }
        st.drop_if_unused(ino.0);
    }

    /// Whether "." and ".." are still to be given in a listing resumed at
    /// kernel offset `offset`; names follow from the first cookie above
    /// both it and ".."'s offset.
    fn listing_start(offset: u64) -> (bool, bool) {
        (offset < OFF_DOT, offset < OFF_DOTDOT)
    }
}

impl Filesystem for NoopFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        settings::negotiate(config);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.do_lookup(parent, name) {
            // A negative entry for the same time as a positive one, as a
            // loomfs mount answers an absent name it holds a lease on.
            Err(e) if e == Errno::ENOENT => {
                reply.entry(&self.ttl, &crate::attr::negative_attr(), GEN)
            }
            r => self.entry_reply(reply, r),
        }
    }

    // batch_forget: fuser's default calls this once per inode.
    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.lock().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let r = self.lock().inode(ino.0).map(|i| i.attr);
        self.attr_reply(reply, r);
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
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        // Who may change what was checked by the kernel
        // (default_permissions), which also strips set-ID bits as needed.
        let r = self.do_setattr(req, ino, mode, uid, gid, size, atime, mtime);
        self.attr_reply(reply, r);
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        let st = self.lock();
        match st.inode(ino.0).map(|i| &i.body) {
            Ok(Body::Symlink(t)) => reply.data(t.as_bytes()),
            Ok(_) => reply.error(Errno::EINVAL),
            Err(e) => reply.error(e),
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
        let mode = (mode & libc::S_IFMT) | (mode & 0o7777 & !umask);
        self.entry_reply(reply, self.do_mknod(req, parent, name, mode, rdev));
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
        let r = self
            .lock()
            .make(req, parent.0, name, mode & !umask, NewKind::Dir);
        self.entry_reply(reply, r);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.do_unlink(parent, name));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        reply_empty(reply, self.do_rmdir(parent, name));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let what = NewKind::Symlink(target.as_os_str().to_owned());
        let r = self.lock().make(req, parent.0, link_name, 0o777, what);
        self.entry_reply(reply, r);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let r = self
            .lock()
            .rename(parent.0, name, newparent.0, newname, flags);
        reply_empty(reply, r);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.entry_reply(reply, self.do_link(ino, newparent, newname));
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        // The same open flags as loomfs (settings.rs).
        match self.do_open(req, ino, flags) {
            Ok(fh) => reply.opened(fh, crate::settings::open_reply_flags(flags)),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.do_read(ino, offset, size, reply);
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        match self.do_write(ino, offset, data, kill) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // Nothing is buffered: every write is in memory when it returns.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.do_release(ino);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Memory is as durable as this file system gets.
        reply.ok();
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
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        reply_empty(reply, self.do_fallocate(ino, offset, length, mode));
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // Listings are stateless (offsets are cookies): no handle.
        reply.opened(FileHandle(0), FopenFlags::empty());
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let (dot, dotdot) = Self::listing_start(offset);
        let st = self.lock();
        let d = match st.dir(ino.0) {
            Ok(d) => d,
            Err(e) => return reply.error(e),
        };
        // A full buffer (add returns true): the kernel asks again from the
        // last offset added.
        let full = (dot && reply.add(ino, OFF_DOT, FileType::Directory, "."))
            || (dotdot && reply.add(INodeNo(d.parent), OFF_DOTDOT, FileType::Directory, ".."));
        if !full {
            for (&cookie, name) in d.order.range(offset.max(OFF_DOTDOT).saturating_add(1)..) {
                let Some(i) = d.names.get(name).and_then(|e| st.inodes.get(&e.ino)) else {
                    continue;
                };
                if reply.add(i.attr.ino, cookie, i.attr.kind, name) {
                    break;
                }
            }
        }
        drop(st);
        reply.ok();
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        let (dot, dotdot) = Self::listing_start(offset);
        let mut st = self.lock();
        let (dir_attr, parent_attr) = match (st.dir(ino.0), st.inode(ino.0)) {
            (Ok(d), Ok(i)) => (i.attr, st.inode(d.parent).map(|p| p.attr).unwrap_or(i.attr)),
            (Err(e), _) | (_, Err(e)) => return reply.error(e),
        };
        // "." and ".." are not counted as lookups by the kernel.
        let full = (dot && reply.add(ino, OFF_DOT, ".", &self.ttl, &dir_attr, GEN))
            || (dotdot
                && reply.add(
                    parent_attr.ino,
                    OFF_DOTDOT,
                    "..",
                    &self.ttl,
                    &parent_attr,
                    GEN,
                ));
        let mut given = Vec::new();
        if !full {
            if let Ok(d) = st.dir(ino.0) {
                for (&cookie, name) in d.order.range(offset.max(OFF_DOTDOT).saturating_add(1)..) {
                    let Some(i) = d.names.get(name).and_then(|e| st.inodes.get(&e.ino)) else {
                        continue;
                    };
                    if reply.add(i.attr.ino, cookie, name, &self.ttl, &i.attr, GEN) {
                        break;
                    }
                    given.push(i.attr.ino.0);
                }
            }
        }
        // Every entry given is a lookup the kernel will forget.
        for g in given {
            let _ = st.looked_up(g);
        }
        drop(st);
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
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
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let (bytes, inodes) = {
            let st = self.lock();
            (st.bytes, st.inodes.len() as u64)
        };
        let f = u64::from(STATFS_FRSIZE);
        let total = NOMINAL_BYTES / f;
        let free = total.saturating_sub(bytes.div_ceil(f));
        reply.statfs(
            total,
            free,
            free,
            NOMINAL_INODES,
            NOMINAL_INODES.saturating_sub(inodes),
            STATFS_FRSIZE,
            NAME_MAX as u32,
            STATFS_FRSIZE,
        );
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        // ENOSYS: the kernel stops asking (see the module doc).
        reply.error(Errno::ENOSYS);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOSYS);
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::ENOSYS);
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
        _flags: i32,
        reply: ReplyCreate,
    ) {
        match self.do_create(req, parent, name, mode & 0o7777 & !umask) {
            Ok(a) => reply.created(
                &self.ttl,
                &a,
                GEN,
                FileHandle(a.ino.0),
                settings::create_reply_flags(),
            ),
            Err(e) => reply.error(e),
        }
    }

    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: i64,
        _whence: i32,
        reply: ReplyLseek,
    ) {
        // SEEK_DATA/SEEK_HOLE: the kernel falls back to "all data" (as
        // loomfs, which does not answer them either), quietly.
        reply.error(Errno::ENOSYS);
    }

    fn copy_file_range(
        &self,
        _req: &Request,
        _ino_in: INodeNo,
        _fh_in: FileHandle,
        _offset_in: u64,
        _ino_out: INodeNo,
        _fh_out: FileHandle,
        _offset_out: u64,
        _len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        // The kernel falls back to reads and writes, as on loomfs.
        reply.error(Errno::ENOSYS);
    }
}

fn reply_empty(reply: ReplyEmpty, r: R<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

/// Mounts an empty [`NoopFs`] on `mountpoint` with loomfs's FUSE settings
/// ([`settings::fuser_config`] with subtype [`NOOP_SUBTYPE`], the same
/// `init` negotiation and readahead), `opts.attr_timeout` as attribute and
/// entry timeout, its root owned by the calling process's user and group.
/// It serves from background threads until the returned session is
/// dropped or the mount is unmounted; everything in it is lost then.
pub fn mount_noop(
    mountpoint: &Path,
    opts: MountOptions,
) -> std::io::Result<fuser::BackgroundSession> {
    let cfg = settings::fuser_config(&opts, NOOP_SUBTYPE);
    let fs = NoopFs::new(
        opts.attr_timeout,
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    let session = fuser::Session::new(fs, mountpoint, &cfg)?;
    let bg = session.spawn()?;
    settings::apply_readahead(mountpoint, &opts);
    Ok(bg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_give_dot_entries_only_before_their_offsets() {
        assert_eq!(NoopFs::listing_start(0), (true, true));
        assert_eq!(NoopFs::listing_start(OFF_DOT), (false, true));
        assert_eq!(NoopFs::listing_start(OFF_DOTDOT), (false, false));
        assert_eq!(NoopFs::listing_start(FIRST_COOKIE), (false, false));
    }

    #[test]
    fn killing_privileges_clears_suid_and_executable_sgid_only() {
        assert_eq!(killed(0o4755), 0o755);
        assert_eq!(killed(0o2755), 0o755);
        assert_eq!(killed(0o6775), 0o775);
        // Set-group-ID without group execute stays (mandatory locking).
        assert_eq!(killed(0o2644), 0o2644);
        assert_eq!(killed(0o1777), 0o1777);
    }

    #[test]
    fn a_name_keeps_its_cookie_while_others_come_and_go() {
        let mut d = Dir::new(ROOT);
        for n in ["a", "b", "c"] {
            d.insert(OsStr::new(n), 10);
        }
        let b = d.names[OsStr::new("b")].cookie;
        assert_eq!(d.remove(OsStr::new("a")), Some(10));
        d.insert(OsStr::new("d"), 11);
        assert_eq!(d.names[OsStr::new("b")].cookie, b);
        let after_b: Vec<&OsString> = d.order.range(b + 1..).map(|(_, n)| n).collect();
        assert_eq!(after_b, ["c", "d"]);
        assert_eq!(d.remove(OsStr::new("a")), None);
    }

    #[test]
    fn renaming_a_directory_below_itself_is_refused_and_link_counts_follow_moves() {
        let mut st = State::new(0, 0);
        let mk = |st: &mut State, parent: u64, name: &str| -> u64 {
            let ino = st.next_ino;
            st.next_ino += 1;
            let mut attr = new_attr(ino, FileType::Directory, 0o755, 0, 0, 0, SystemTime::now());
            attr.nlink = 2;
            st.inodes.insert(
                ino,
                Inode {
                    attr,
                    body: Body::Dir(Dir::new(parent)),
                    lookups: 0,
                    opens: 0,
                },
            );
            st.dir_mut(parent)
                .expect("parent")
                .insert(OsStr::new(name), ino);
            st.inode_mut(parent).expect("parent").attr.nlink += 1;
            ino
        };
        let a = mk(&mut st, ROOT, "a");
        let b = mk(&mut st, a, "b");
        let none = RenameFlags::empty();
        assert_eq!(
            st.rename(ROOT, OsStr::new("a"), b, OsStr::new("x"), none),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            st.rename(a, OsStr::new("b"), ROOT, OsStr::new("b"), none),
            Ok(())
        );
        assert_eq!(st.inode(a).expect("a").attr.nlink, 2);
        assert_eq!(st.inode(ROOT).expect("root").attr.nlink, 4);
        assert_eq!(st.dir(b).expect("b").parent, ROOT);
        // Replacing an empty directory drops it (no kernel reference here).
        assert_eq!(
            st.rename(
                ROOT,
                OsStr::new("b"),
                ROOT,
                OsStr::new("a"),
                RenameFlags::RENAME_NOREPLACE
            ),
            Err(Errno::EEXIST)
        );
        assert_eq!(
            st.rename(ROOT, OsStr::new("b"), ROOT, OsStr::new("a"), none),
            Ok(())
        );
        assert!(st.inode(a).is_err(), "the replaced directory is gone");
        assert_eq!(st.inode(ROOT).expect("root").attr.nlink, 3);
        assert_eq!(
            st.rename(
                ROOT,
                OsStr::new("a"),
                ROOT,
                OsStr::new("c"),
                RenameFlags::RENAME_EXCHANGE
            ),
            Err(Errno::EINVAL)
        );
    }
}
