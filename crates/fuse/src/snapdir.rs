//! `MOUNT/.snapshots/NAME/` (issue #30): every snapshot of the file
//! system, read-only, inside the live mount (as ZFS's `.zfs/snapshot`),
//! so users restore their own files under their own permissions (the
//! kernel checks the modes the snapshot holds: `default_permissions`).
//!
//! The directory is hidden: not listed in the root, found by its name
//! (the site's choice, `loom mount --snapdir`). Each snapshot is read by
//! a client of its own ([`Client::at_snapshot`]), connected at its first
//! use, whose requests the servers answer from that snapshot's images.
//! Its inodes are numbered from a table, in the sequences no FID has
//! ([`VIRT_INO_SEQ`]): the same FID in two snapshots is two inodes.

use crate::attr::file_attr;
use fuser::{FileAttr, FileType, INodeNo};
use loom_client::{Caller, Client, OpenFile};
use loom_proto::msg::{access, Attr};
use loom_proto::snapshot::{SnapState, SnapshotInfo};
use loom_proto::{Errno, Fid, VIRT_INO_SEQ};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

/// The first inode number no FID has.
const BASE: u64 = VIRT_INO_SEQ << 32;
/// The snapshot directory's own inode.
pub const DIR_INO: u64 = BASE;
/// How long a listing of the snapshots is reused (and the kernel keeps
/// the directory's entries): a new snapshot shows within this.
pub const LIST_TTL: Duration = Duration::from_secs(1);
/// How long the kernel keeps what a snapshot holds: it never changes.
pub const SNAP_TTL: Duration = Duration::from_secs(60);

/// What an inode number in the snapshot range stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// The snapshot directory.
    Dir,
    /// Inode `Fid` of snapshot `u32`.
    In(u32, Fid),
}

#[derive(Default)]
struct Table {
    by_ino: HashMap<u64, (u32, Fid)>,
    by_key: HashMap<(u32, Fid), u64>,
    next: u64,
}

type Listing = Option<(Instant, Vec<SnapshotInfo>)>;

/// The snapshot directory of one mount.
pub struct SnapDir {
    name: Vec<u8>,
    live: Arc<Client>,
    clients: tokio::sync::Mutex<HashMap<u32, Arc<Client>>>,
    table: Mutex<Table>,
    listed: Mutex<Listing>,
    files: Mutex<HashMap<u64, Arc<OpenFile>>>,
}

impl std::fmt::Debug for SnapDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapDir")
            .field("name", &String::from_utf8_lossy(&self.name))
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Set in the handles of snapshots' files: told apart from the live
/// file system's by their number alone, with no lock on the read path.
pub const FH_BIT: u64 = 1 << 63;

/// Whether `fh` is a handle of a snapshot's file.
pub fn is_snap_fh(fh: u64) -> bool {
    fh & FH_BIT != 0
}

/// Whether `ino` is in the snapshot range.
pub fn is_virtual(ino: u64) -> bool {
    ino >= BASE
}

impl SnapDir {
    /// The directory `name` in the root of the mount of `live`.
    pub fn new(live: Arc<Client>, name: Vec<u8>) -> SnapDir {
        SnapDir {
            name,
            live,
            clients: Default::default(),
            table: Mutex::new(Table {
                next: BASE + 1,
                ..Table::default()
            }),
            listed: Mutex::new(None),
            files: Mutex::new(HashMap::new()),
        }
    }

    /// Its name in the root.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// What `ino` stands for; ESTALE for a number not given out.
    pub fn node(&self, ino: u64) -> Result<Node, Errno> {
        if ino == DIR_INO {
            return Ok(Node::Dir);
        }
        lock(&self.table)
            .by_ino
            .get(&ino)
            .map(|(id, fid)| Node::In(*id, *fid))
            .ok_or(Errno::ESTALE)
    }

    fn ino_of(&self, id: u32, fid: Fid) -> u64 {
        let mut t = lock(&self.table);
        if let Some(i) = t.by_key.get(&(id, fid)) {
            return *i;
        }
        let i = t.next;
        t.next += 1;
        t.by_key.insert((id, fid), i);
        t.by_ino.insert(i, (id, fid));
        i
    }

    /// The kernel's view of inode `a` of snapshot `id`.
    pub fn attr(&self, id: u32, a: &Attr) -> FileAttr {
        FileAttr {
            ino: INodeNo(self.ino_of(id, a.fid)),
            ..file_attr(a)
        }
    }

    /// The snapshot directory's attributes: root's, read-only, its time
    /// the newest snapshot's.
    pub fn dir_attr(&self, newest: u64) -> FileAttr {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(newest);
        FileAttr {
            ino: INodeNo(DIR_INO),
            size: 0,
            blocks: 0,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind: FileType::Directory,
            perm: 0o555,
            nlink: 2,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// The snapshots that can be read, oldest first: asked of the MGS
    /// when `fresh` (a listing), else at most once per [`LIST_TTL`] (a
    /// lookup of each name in a path).
    pub async fn snapshots(&self, fresh: bool) -> Result<Vec<SnapshotInfo>, Errno> {
        if let Some((at, v)) = lock(&self.listed).as_ref() {
            if !fresh && at.elapsed() < LIST_TTL {
                return Ok(v.clone());
            }
        }
        let v: Vec<SnapshotInfo> = self
            .live
            .snapshots(&Caller::default())
            .await?
            .into_iter()
            .filter(|s| s.state == SnapState::Ready)
            .collect();
        *lock(&self.listed) = Some((Instant::now(), v.clone()));
        Ok(v)
    }

    /// The client reading snapshot `id`, connected at its first use.
    pub async fn client(&self, id: u32) -> Result<Arc<Client>, Errno> {
        let mut m = self.clients.lock().await;
        if let Some(c) = m.get(&id) {
            return Ok(c.clone());
        }
        let c = self.live.at_snapshot(id).await.map_err(|e| {
            tracing::warn!(snapshot = id, "cannot read the snapshot: {e}");
            Errno::EIO
        })?;
        m.insert(id, c.clone());
        Ok(c)
    }

    /// Attributes of `ino`.
    pub async fn getattr(&self, c: &Caller, ino: u64) -> Result<(FileAttr, Duration), Errno> {
        match self.node(ino)? {
            Node::Dir => {
                let newest = self.snapshots(false).await?.last().map_or(0, |s| s.created);
                Ok((self.dir_attr(newest), LIST_TTL))
            }
            Node::In(id, fid) => {
                let a = self.client(id).await?.getattr(c, fid).await?;
                Ok((self.attr(id, &a), SNAP_TTL))
            }
        }
    }

    /// `name` in directory `parent` (a virtual one).
    pub async fn lookup(
        &self,
        c: &Caller,
        parent: u64,
        name: &[u8],
    ) -> Result<(FileAttr, Duration), Errno> {
        match self.node(parent)? {
            Node::Dir => {
                // A name not in the last listing may be a snapshot just
                // taken: asked again before it is absent.
                let mut snaps = self.snapshots(false).await?;
                if !snaps.iter().any(|s| s.name.as_bytes() == name) {
                    snaps = self.snapshots(true).await?;
                }
                let s = snaps
                    .iter()
                    .find(|s| s.name.as_bytes() == name)
                    .ok_or(Errno::ENOENT)?;
                let client = self.client(s.id).await?;
                let root = client.root().await?;
                let a = client.getattr(c, root).await?;
                Ok((self.attr(s.id, &a), LIST_TTL))
            }
            Node::In(id, dir) => {
                let (a, _) = self.client(id).await?.lookup(c, dir, name).await?;
                Ok((self.attr(id, &a), SNAP_TTL))
            }
        }
    }

    /// Up to `max` entries of directory `ino` after MDT cookie `cookie`
    /// (the snapshot directory's are numbered from 3): inode, cookie,
    /// name and attributes; and whether the listing ends there.
    #[allow(clippy::type_complexity)]
    pub async fn readdir(
        &self,
        c: &Caller,
        ino: u64,
        cookie: u64,
        max: u32,
    ) -> Result<(Vec<(u64, Vec<u8>, FileAttr)>, bool), Errno> {
        match self.node(ino)? {
            Node::Dir => {
                let snaps = self.snapshots(cookie == 0).await?;
                let mut out = Vec::new();
                for (i, s) in snaps.iter().enumerate() {
                    let off = i as u64 + 3;
                    if off <= cookie {
                        continue;
                    }
                    let client = self.client(s.id).await?;
                    let root = client.root().await?;
                    let a = client.getattr(c, root).await?;
                    out.push((off, s.name.as_bytes().to_vec(), self.attr(s.id, &a)));
                    if out.len() as u32 >= max {
                        return Ok((out, i + 1 == snaps.len()));
                    }
                }
                Ok((out, true))
            }
            Node::In(id, dir) => {
                let client = self.client(id).await?;
                let (entries, eof) = client.readdir(c, dir, cookie, max).await?;
                Ok((
                    entries
                        .into_iter()
                        .filter(|e| !matches!(e.name.as_bytes(), b"." | b".."))
                        .map(|e| (e.cookie, e.name.as_bytes().to_vec(), self.attr(id, &e.attr)))
                        .collect(),
                    eof,
                ))
            }
        }
    }

    /// Snapshot `ino`'s client and FID (not the directory itself).
    async fn inside(&self, ino: u64) -> Result<(Arc<Client>, Fid), Errno> {
        match self.node(ino)? {
            Node::Dir => Err(Errno::EISDIR),
            Node::In(id, fid) => Ok((self.client(id).await?, fid)),
        }
    }

    /// The target of symbolic link `ino`.
    pub async fn readlink(&self, c: &Caller, ino: u64) -> Result<Vec<u8>, Errno> {
        let (client, fid) = self.inside(ino).await.map_err(|_| Errno::EINVAL)?;
        Ok(client.readlink(c, fid).await?.as_bytes().to_vec())
    }

    /// Extended attribute `name` of `ino`.
    pub async fn getxattr(&self, c: &Caller, ino: u64, name: &[u8]) -> Result<Vec<u8>, Errno> {
        if ino == DIR_INO {
            return Err(Errno::ENODATA);
        }
        let (client, fid) = self.inside(ino).await?;
        client.getxattr(c, fid, name).await
    }

    /// Names of `ino`'s extended attributes, NUL-terminated.
    pub async fn listxattr(&self, c: &Caller, ino: u64) -> Result<Vec<u8>, Errno> {
        if ino == DIR_INO {
            return Ok(Vec::new());
        }
        let (client, fid) = self.inside(ino).await?;
        let mut out = Vec::new();
        for n in client.listxattr(c, fid).await? {
            out.extend_from_slice(n.as_bytes());
            out.push(0);
        }
        Ok(out)
    }

    /// Open file `ino` for reading as `c` (the MDT checks the mode bits
    /// the snapshot holds): handle `fh`. Writing is EROFS.
    pub async fn open(&self, c: &Caller, ino: u64, flags: i32, fh: u64) -> Result<(), Errno> {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            return Err(Errno::EROFS);
        }
        let (client, fid) = self.inside(ino).await?;
        let (_, f) = client.open_checked(c, fid, access::READ).await?;
        lock(&self.files).insert(fh, f);
        Ok(())
    }

    /// Read `size` bytes of open file `fh` at `offset`.
    pub async fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        let f = lock(&self.files).get(&fh).cloned().ok_or(Errno::EBADF)?;
        f.read(offset, size as usize).await
    }

    /// Close handle `fh`; whether it was one of these.
    pub fn release(&self, fh: u64) -> bool {
        lock(&self.files).remove(&fh).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_fid_the_mgs_hands_out_has_a_virtual_number() {
        let last = Fid::new(loom_proto::MAX_INO_SEQ, u32::MAX);
        assert!(!is_virtual(last.ino()));
        assert!(is_virtual(DIR_INO));
        assert!(!is_virtual(Fid::ROOT.ino()));
    }
}
