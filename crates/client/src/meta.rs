//! Metadata operations.
//!
//! Each is one request to the MDT that owns the FID involved (found through
//! the FLDB), except where noted: `setattr` with a size first resizes the
//! file's objects on the OSTs, `statfs` asks every target, `resolve_path`
//! looks up each component. Attributes returned for a file this client has
//! open include its writes not yet reported to the MDT, so a `stat` after a
//! `write` sees the new size before `close`.

use crate::ctx::Caller;
use crate::io::file::unexpected;
use crate::Client;
use bytes::Bytes;
use loom_proto::layout::{object_size_for, LayoutSpec, Pattern};
use loom_proto::msg::{
    rename_flags, Attr, DirDefault, DirEntry, FileKind, FsckFix, FsckItem, FsckScan, JobUsage,
    Lease, MdtRequest, ObjInfo, OpUsage, OstRequest, Reply, Request, Role, ScrubCmd, ScrubStatus,
    SetAttr, StatFs, TargetId,
};
use loom_proto::{Compress, Errno, Fid, Layout, Name, ObjRef, StripeSpec};
use std::time::Duration;
use tokio::task::JoinSet;

/// How long statfs waits for one target before leaving it out.
pub const STATFS_TIMEOUT: Duration = Duration::from_secs(5);

/// One target's answer to statfs.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct TargetUsage {
    /// The MDT or OST.
    pub target: TargetId,
    /// Its usage, or why it has none (EIO: did not answer in time).
    pub usage: Result<StatFs, Errno>,
}

/// What one target served (`loom stats`, `loom jobstats`, `loom top`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// Per operation, since the target's server started.
    pub ops: Vec<OpUsage>,
    /// Per job, recently.
    pub jobs: Vec<JobUsage>,
    /// Per client, recently.
    pub clients: Vec<JobUsage>,
}

/// An MDT's operation counters: (operation name, count), by name.
pub type OpCounts = Vec<(String, u64)>;

/// Longest name a directory entry may have.
pub const NAME_MAX: usize = 255;

/// Check a single path component.
pub fn check_name(name: &[u8]) -> Result<(), Errno> {
    if name.len() > NAME_MAX {
        return Err(Errno::ENAMETOOLONG);
    }
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// Whether `c` may search directory `dir` (its x bit for the caller's
/// class; root always may), as the MDT checks a lookup.
fn may_search(c: &Caller, dir: &Attr) -> bool {
    may_dir(c, dir, 0o1)
}

/// Whether `c` may do what `bit` (0o4 read, 0o1 search) stands for in
/// directory `dir`, by its mode bits for the caller's class; root always
/// may.
fn may_dir(c: &Caller, dir: &Attr, bit: u32) -> bool {
    if dir.kind != FileKind::Dir {
        return false;
    }
    if c.uid == 0 {
        return true;
    }
    let shift = if c.uid == dir.uid {
        6
    } else if c.gid == dir.gid || c.groups.contains(&dir.gid) {
        3
    } else {
        0
    };
    dir.perm & (bit << shift) != 0
}

/// Most names of a directory listed from its lease rather than its MDT:
/// each batch sorts them all.
const LEASED_LISTING_MAX: usize = 4096;

impl Client {
    /// Wait for the size reports of `fid`'s handles on their way (see
    /// [`OpenFile::report_landed`]) before a change to its attributes.
    ///
    /// [`OpenFile::report_landed`]: crate::io::file::OpenFile
    async fn reports_landed(&self, fid: Fid) {
        for h in self.open_handles(fid) {
            h.report_landed().await;
        }
    }

    /// Include this client's unreported writes in `attr`'s size and times.
    pub(crate) fn with_local_size(&self, mut attr: Attr) -> Attr {
        if attr.kind == FileKind::File {
            for f in self.open_handles(attr.fid) {
                attr.size = attr.size.max(f.written_end());
                if let Some(t) = f.unreported_mtime() {
                    attr.mtime = attr.mtime.max(t);
                    attr.ctime = attr.ctime.max(t);
                }
            }
        }
        attr
    }

    fn entry(&self, r: Reply, op: &str) -> Result<(Attr, Option<Layout>), Errno> {
        match r {
            Reply::Entry { attr, layout } => {
                self.note_dir(&attr, layout.as_ref());
                Ok((self.with_local_size(attr), layout))
            }
            other => Err(unexpected(op, &other)),
        }
    }

    /// The reply to an unlink or rename: the MDT may have kept a file
    /// whose last name went as our orphan.
    async fn name_dropped(&self, r: Reply, op: &str) -> Result<(), Errno> {
        match r {
            Reply::Ok => Ok(()),
            Reply::Orphaned { fid } => {
                self.adopt_orphan(fid).await;
                Ok(())
            }
            other => Err(unexpected(op, &other)),
        }
    }

    fn ok(r: Reply, op: &str) -> Result<(), Errno> {
        match r {
            Reply::Ok => Ok(()),
            other => Err(unexpected(op, &other)),
        }
    }

    /// Find `name` in directory `parent`: its attributes, and its layout if
    /// it is a regular file.
    pub async fn lookup(
        &self,
        c: &Caller,
        parent: Fid,
        name: impl AsRef<[u8]>,
    ) -> Result<(Attr, Option<Layout>), Errno> {
        if name.as_ref().len() > NAME_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        if let Some(r) = self.wb_lookup(c, parent, &Name::from(name.as_ref())) {
            let attr = r?;
            let layout = (attr.kind == FileKind::File).then(crate::writeback::provisional_layout);
            return Ok((attr, layout));
        }
        // A directory no longer answered here (its lease recalled or
        // lost) whose names are still on their way: its MDT must see them
        // before this question, or a name made here is not found there.
        self.wb_settle(&[parent]).await;
        let parent = self.name_dir(c, parent, name.as_ref()).await?;
        let name = Name::from(name.as_ref());
        // Under leases (a client that takes them), and with none of its own
        // changes on their way: answered here, after the search permission
        // the MDT would check.
        let settled = self.router.changes_in_flight() == 0;
        if let Some(dir) = self.router.fresh.leased_attr(parent).filter(|_| settled) {
            if may_search(c, &dir) {
                let plain = self.dir_is_plain(parent);
                match self.router.fresh.leased_entry(parent, &name, plain) {
                    Some(Some((attr, layout))) => {
                        self.router.lease_hit();
                        return Ok((self.with_local_size(attr), layout));
                    }
                    Some(None) => {
                        self.router.lease_hit();
                        return Err(Errno::ENOENT);
                    }
                    None => {}
                }
            }
        }
        let req = MdtRequest::Lookup {
            parent,
            name: name.clone(),
        };
        let r = self.mdt_call(c, parent, req).await?;
        self.entry(r, "Lookup")
    }

    /// Fresh attributes and layout of `fid` for an open, in one round trip
    /// (the layout is `None` for anything but a regular file). The MDT
    /// checks `access` (`loom_proto::msg::access::READ | WRITE`, 0 for
    /// none) against the mode bits for `c`: EACCES if refused.
    pub async fn open_entry(
        &self,
        c: &Caller,
        fid: Fid,
        access: u32,
    ) -> Result<(Attr, Option<Layout>), Errno> {
        if self.wb.is_pending(fid) {
            if let Some(attr) = self.wb_attr(fid) {
                return self.open_made_here(c, attr, access);
            }
        }
        self.wb_settle(&[fid]).await;
        let r = self
            .mdt_call(
                c,
                fid,
                MdtRequest::Open {
                    fid,
                    access,
                    hold: !self.router.takes_leases(),
                },
            )
            .await
            .inspect_err(|e| self.vanished(fid, *e))?;
        self.entry(r, "Open")
    }

    /// After an MDT's answer `e` about inode `fid`: if the inode is gone
    /// (removed on another mount), what this client knew of it goes too,
    /// so that the kernel's next lookup of a name that led to it (it looks
    /// again after ESTALE) asks the MDT.
    fn vanished(&self, fid: Fid, e: Errno) {
        if e == Errno::ENOENT || e == Errno::ESTALE {
            self.router.fresh.vanished(fid);
        }
    }

    /// The attributes of `fid` as this client knows them (see
    /// [`crate::fresh`]), with its unreported writes, and how long they
    /// stay valid.
    pub fn recent_attr(&self, fid: Fid) -> Option<(Attr, Duration)> {
        if let Some(a) = self.wb_attr(fid) {
            return Some((self.with_local_size(a), self.router.caching().attr_timeout));
        }
        let (a, left) = self.router.fresh.attr(fid)?;
        Some((self.with_local_size(a), left))
    }

    /// What `name` in directory `dir` is as this client knows it:
    /// `Some(attributes)`, or `None` for no such name; with how long that
    /// stays valid.
    pub fn recent_entry(&self, dir: Fid, name: &[u8]) -> Option<(Option<Attr>, Duration)> {
        if let Some(r) = self.wb_lookup(&Caller::default(), dir, &Name::from(name)) {
            let ttl = self.router.caching().attr_timeout;
            return Some((r.ok(), ttl));
        }
        // Names made here on their way to the MDT: what the leases say of
        // the directory does not have them yet (`lookup` waits for them).
        if self.wb.knows(dir) {
            return None;
        }
        let plain = self.dir_is_plain(dir);
        let (fid, left) = self.router.fresh.name(dir, &Name::from(name), plain)?;
        match fid {
            None => Some((None, left)),
            Some(fid) => {
                let (a, left_a) = self.recent_attr(fid)?;
                Some((Some(a), left.min(left_a)))
            }
        }
    }

    /// Recalls received so far: an answer computed before a recall that
    /// arrives later must not be given to the kernel to keep.
    pub fn recalls(&self) -> u64 {
        self.router.fresh.recalls()
    }

    /// Drop what the kernel caches with `f` when leases are recalled or
    /// lost (a mount sets it once).
    pub fn set_invalidator(&self, f: crate::routing::Invalidator) {
        self.router.set_invalidator(f);
    }

    /// Attributes of `fid`.
    pub async fn getattr(&self, c: &Caller, fid: Fid) -> Result<Attr, Errno> {
        if let Some(a) = self.wb_attr(fid) {
            return Ok(self.with_local_size(a));
        }
        let r = self
            .mdt_call(c, fid, MdtRequest::GetAttr { fid })
            .await
            .inspect_err(|e| self.vanished(fid, *e))?;
        match r {
            Reply::Attr(a) => Ok(self.with_local_size(a)),
            other => Err(unexpected("GetAttr", &other)),
        }
    }

    /// Change attributes, under POSIX's rules for `c` (checked by the MDT).
    /// With a size on a regular file (truncate), every stripe object is
    /// resized on its OST first, then the MDT records the size; this
    /// client's open handles of the file learn the new size. The mode and
    /// owner of a striped directory are set on each of its shards too,
    /// where the names live and are checked.
    pub async fn setattr(&self, c: &Caller, fid: Fid, mut set: SetAttr) -> Result<Attr, Errno> {
        if let Some(r) = self.wb_setattr(c, fid, &set).await {
            return r;
        }
        if self.wb.knows(fid) {
            self.wb_settle(&[fid]).await;
            // A written-back directory's attributes change by its MDT now.
            self.wb.forget_dir(fid);
        }
        self.reports_landed(fid).await;
        // Writes not yet reported would bring their own mtime at the next
        // flush and undo an explicit one (`cp -p`, `touch -r`): they are
        // reported in the same request (or, with a truncate, first).
        let mut reporting = Vec::new();
        if set.mtime.is_some() && set.size.is_some() {
            for f in self.open_handles(fid) {
                f.report_now().await?;
            }
        } else if set.mtime.is_some() {
            for f in self.open_handles(fid) {
                match f.take_unreported().await {
                    Ok(Some((end, g))) => {
                        set.written = Some(set.written.unwrap_or(0).max(end));
                        reporting.push((f, g));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        reporting.iter().for_each(|(f, _)| f.unreported());
                        return Err(e);
                    }
                }
            }
        }
        if let Some(size) = set.size {
            // Writes in flight land first, then the truncate cuts them.
            self.wait_writes(fid).await;
            // One round trip for the kind, the layout and the permission
            // to write, before any object is touched.
            let access = if set.by_write_handle {
                0
            } else {
                loom_proto::msg::access::WRITE
            };
            let (attr, layout) = self.open_entry(c, fid, access).await?;
            match (attr.kind, layout) {
                (FileKind::File, Some(layout)) => {
                    self.truncate_objects(c, fid, &layout, size).await?;
                }
                (FileKind::Dir, _) => return Err(Errno::EISDIR),
                _ => return Err(Errno::EINVAL),
            }
        }
        let size = set.size;
        let owner_or_mode = set.perm.is_some() || set.uid.is_some() || set.gid.is_some();
        let shard_set = SetAttr {
            perm: set.perm,
            uid: set.uid,
            gid: set.gid,
            ..SetAttr::default()
        };
        let r = self
            .mdt_call(c, fid, MdtRequest::SetAttr { fid, set })
            .await
            .inspect_err(|e| {
                reporting.iter().for_each(|(f, _)| f.unreported());
                self.vanished(fid, *e)
            })?;
        drop(reporting);
        if let Some(s) = size {
            self.note_truncate(fid, s);
        }
        let attr = match r {
            Reply::Attr(a) => self.with_local_size(a),
            other => return Err(unexpected("SetAttr", &other)),
        };
        if owner_or_mode && attr.kind == FileKind::Dir {
            self.set_on_shards(c, fid, shard_set).await?;
        }
        Ok(attr)
    }

    /// Truncate regular file `fid`, whose layout is `layout`, to zero for
    /// an open with O_TRUNC that was just granted write access
    /// ([`Client::open_entry`] with WRITE): the objects, then the size,
    /// two round trips where a setattr would ask for the layout again.
    pub async fn truncate_at_open(
        &self,
        c: &Caller,
        fid: Fid,
        layout: &Layout,
    ) -> Result<Attr, Errno> {
        let set = SetAttr {
            size: Some(0),
            by_write_handle: true,
            ..SetAttr::default()
        };
        if let Some(r) = self.wb_setattr(c, fid, &set).await {
            return r;
        }
        self.wait_writes(fid).await;
        self.truncate_objects(c, fid, layout, 0).await?;
        let set = SetAttr {
            size: Some(0),
            by_write_handle: true,
            ..SetAttr::default()
        };
        let r = self
            .mdt_call(c, fid, MdtRequest::SetAttr { fid, set })
            .await
            .inspect_err(|e| self.vanished(fid, *e))?;
        self.note_truncate(fid, 0);
        match r {
            Reply::Attr(a) => Ok(self.with_local_size(a)),
            other => Err(unexpected("SetAttr", &other)),
        }
    }

    /// Give shards 1.. of striped directory `dir` the mode and owner just
    /// set on its master (shard 0). Not atomic with the master's change: a
    /// failure here is reported, and setting the attributes again repairs
    /// it.
    async fn set_on_shards(&self, c: &Caller, dir: Fid, set: SetAttr) -> Result<(), Errno> {
        let Some(shards) = self.dir_shards(c, dir).await? else {
            return Ok(());
        };
        for &shard in shards.iter().filter(|s| **s != dir) {
            let req = MdtRequest::SetAttr {
                fid: shard,
                set: set.clone(),
            };
            match self.mdt_call(c, shard, req).await? {
                Reply::Attr(_) => {}
                other => return Err(unexpected("SetAttr", &other)),
            }
        }
        Ok(())
    }

    /// Resize every object of `layout` for a file of `size` bytes, in
    /// parallel.
    async fn truncate_objects(
        &self,
        c: &Caller,
        fid: Fid,
        layout: &Layout,
        size: u64,
    ) -> Result<(), Errno> {
        let mut reqs = Vec::new();
        for comp in &layout.components {
            // A component's objects hold its extent's bytes only (stripe
            // maths on file offsets): sized for the part of the file that
            // falls in it; the MDT cuts a Data-on-MDT component itself.
            if let Pattern::Raid0 {
                stripe_size,
                objects,
            } = &comp.pattern
            {
                let part = size.min(comp.end);
                for (i, obj) in objects.iter().enumerate() {
                    let size = object_size_for(*stripe_size, objects.len(), i, part);
                    reqs.push((
                        obj.ost,
                        OstRequest::ObjTruncate {
                            obj: *obj,
                            size,
                            pack: layout.compress,
                            // A truncate takes no blocks; the next write
                            // names the owner.
                            owner: None,
                        },
                    ));
                }
            }
        }
        self.ost_call_each(c, fid, reqs, "ObjTruncate").await
    }

    /// Create a non-directory `name` in `parent`: a regular file (which
    /// gets a layout, from `stripe` or the directory's default), FIFO,
    /// device (`rdev`) or socket. `perm` is after the umask, unless the
    /// caller gives its umask ([`Caller::umask`]): then the MDT cuts it by
    /// the umask, or by the directory's default ACL if it has one.
    #[allow(clippy::too_many_arguments)]
    pub async fn create(
        &self,
        c: &Caller,
        parent: Fid,
        name: impl AsRef<[u8]>,
        kind: FileKind,
        perm: u32,
        rdev: u32,
        stripe: Option<StripeSpec>,
    ) -> Result<(Attr, Option<Layout>), Errno> {
        check_name(name.as_ref())?;
        if kind == FileKind::Dir {
            return Err(Errno::EINVAL);
        }
        if stripe.is_none() {
            let n = Name::from(name.as_ref());
            if let Some(r) = self.wb_make(c, parent, &n, kind, perm, rdev, None).await {
                return r;
            }
        }
        let parent = self.name_dir(c, parent, name.as_ref()).await?;
        let req = MdtRequest::Create {
            parent,
            name: Name::from(name.as_ref()),
            kind,
            perm: perm & 0o7777,
            rdev,
            stripe,
        };
        let r = self.mdt_call(c, parent, req).await?;
        self.entry(r, "Create")
    }

    /// Make directory `name` in `parent`; `perm` as for [`Self::create`].
    pub async fn mkdir(
        &self,
        c: &Caller,
        parent: Fid,
        name: impl AsRef<[u8]>,
        perm: u32,
    ) -> Result<Attr, Errno> {
        check_name(name.as_ref())?;
        let n = Name::from(name.as_ref());
        if let Some(r) = self
            .wb_make(c, parent, &n, FileKind::Dir, perm, 0, None)
            .await
        {
            return r.map(|(a, _)| a);
        }
        let (parent, name) = self.entry_at(c, parent, name.as_ref()).await?;
        let req = MdtRequest::Mkdir {
            parent,
            name,
            perm: perm & 0o7777,
        };
        let r = self.mdt_call(c, parent, req).await?;
        let (attr, layout) = self.entry(r, "Mkdir")?;
        if layout.is_none() {
            self.wb_take(c, &attr).await;
        }
        // Placed on another MDT (a default placement): its own MDT leases
        // its (empty) list at a first listing, and then every create in it
        // is one round trip, not a lookup and a create.
        if self.router.takes_leases() && layout.is_none() {
            let (here, there) = (
                self.router.mdt_of(parent).await,
                self.router.mdt_of(attr.fid).await,
            );
            if matches!((here, there), (Ok(h), Ok(t)) if h != t) {
                let _ = self.readdir(c, attr.fid, 0, 1).await;
            }
        }
        Ok(attr)
    }

    /// Remove non-directory `name` from `parent` (the MDT destroys the
    /// objects when the last link goes).
    pub async fn unlink(
        &self,
        c: &Caller,
        parent: Fid,
        name: impl AsRef<[u8]>,
    ) -> Result<(), Errno> {
        check_name(name.as_ref())?;
        let n = Name::from(name.as_ref());
        if let Some(r) = self.wb_remove(c, parent, &n, false).await {
            return r;
        }
        self.wb_settle(&[parent]).await;
        let (dir, name) = self.entry_at(c, parent, name.as_ref()).await?;
        let req = MdtRequest::Unlink {
            parent: dir,
            name,
            keep_orphan: self.has_open_files(),
        };
        let r = self.mdt_call(c, dir, req).await?;
        self.wb.removed(parent, &n);
        self.name_dropped(r, "Unlink").await
    }

    /// Remove empty directory `name` from `parent`.
    pub async fn rmdir(
        &self,
        c: &Caller,
        parent: Fid,
        name: impl AsRef<[u8]>,
    ) -> Result<(), Errno> {
        check_name(name.as_ref())?;
        let n = Name::from(name.as_ref());
        if let Some(r) = self.wb_remove(c, parent, &n, true).await {
            return r;
        }
        // The names in it may have been removed here and not sent yet.
        self.wb_settle_all().await;
        let (dir, name) = self.entry_at(c, parent, name.as_ref()).await?;
        let req = MdtRequest::Rmdir { parent: dir, name };
        Self::ok(self.mdt_call(c, dir, req).await?, "Rmdir")?;
        self.wb.removed(parent, &n);
        Ok(())
    }

    /// Rename `parent/name` to `new_parent/new_name` with
    /// [`rename_flags`] NOREPLACE or EXCHANGE; other flag bits are EINVAL.
    pub async fn rename(
        &self,
        c: &Caller,
        parent: Fid,
        name: impl AsRef<[u8]>,
        new_parent: Fid,
        new_name: impl AsRef<[u8]>,
        flags: u32,
    ) -> Result<(), Errno> {
        check_name(name.as_ref())?;
        check_name(new_name.as_ref())?;
        let known = rename_flags::NOREPLACE | rename_flags::EXCHANGE;
        if flags & !known != 0 || flags == known {
            return Err(Errno::EINVAL);
        }
        let (name, new_name) = (name.as_ref(), new_name.as_ref());
        // Names this layer does not follow change: what it holds goes
        // first, and the two directories are no longer answered here.
        self.wb_settle_all().await;
        self.wb.forget_dir(parent);
        self.wb.forget_dir(new_parent);
        match self
            .rename_once(c, parent, name, new_parent, new_name, flags)
            .await
        {
            // A directory on another MDT was restriped since its layout
            // was learned here (its MDT refused the new name): learn it
            // again and go on.
            Err(Errno::ESTALE) => {
                self.router.fresh.forget_shards(parent);
                self.router.fresh.forget_shards(new_parent);
                self.rename_once(c, parent, name, new_parent, new_name, flags)
                    .await
            }
            r => r,
        }
    }

    async fn rename_once(
        &self,
        c: &Caller,
        parent: Fid,
        name: &[u8],
        new_parent: Fid,
        new_name: &[u8],
        flags: u32,
    ) -> Result<(), Errno> {
        let parent = self.name_dir(c, parent, name).await?;
        let new_parent = self.name_dir(c, new_parent, new_name).await?;
        let (name, new_name) = (Name::from(name), Name::from(new_name));
        let req = MdtRequest::Rename {
            parent,
            name: name.clone(),
            new_parent,
            new_name: new_name.clone(),
            flags,
            keep_orphan: self.has_open_files(),
        };
        // The inodes the two names lead to, as far as known here.
        let known = |dir, n: &Name| self.router.fresh.name(dir, n, false).and_then(|(f, _)| f);
        let inodes = [known(parent, &name), known(new_parent, &new_name)];
        let r = self.mdt_call(c, parent, req).await;
        let across = self.router.mdt_of(parent).await? != self.router.mdt_of(new_parent).await?;
        if across || parent != new_parent {
            // Across MDTs (or a directory moving to another parent on a
            // file system of several MDTs, which its MDT makes a
            // distributed rename even when both parents are its own), the
            // source's MDT coordinated and told what it changed; what the
            // others changed (the target's name and directory, the
            // parents' link counts, the inodes' links and parents) is
            // forgotten here. They did not recall it from this client,
            // whose kernel holds the directories' locks until this answer.
            let mut gone = vec![Lease::Attr(parent), Lease::Attr(new_parent)];
            if across {
                gone.push(Lease::Name(new_parent, new_name));
                gone.push(Lease::List(new_parent));
            }
            gone.extend(inodes.into_iter().flatten().map(Lease::Attr));
            self.router.fresh.recall(&gone);
        }
        let r = r?;
        self.name_dropped(r, "Rename").await
    }

    /// New hard link `parent/name` to `fid`.
    pub async fn link(
        &self,
        c: &Caller,
        fid: Fid,
        parent: Fid,
        name: impl AsRef<[u8]>,
    ) -> Result<Attr, Errno> {
        self.wb_settle_all().await;
        self.wb.forget_dir(parent);
        let (parent, name) = self.entry_at(c, parent, name.as_ref()).await?;
        if self.router.mdt_of(fid).await? != self.router.mdt_of(parent).await? {
            // The inode's MDT counts the link, unseen by this client.
            self.router.fresh.recall(&[Lease::Attr(fid)]);
        }
        let req = MdtRequest::Link { fid, parent, name };
        let r = self.mdt_call(c, parent, req).await?;
        self.entry(r, "Link").map(|(a, _)| a)
    }

    /// Make symbolic link `parent/name` pointing to `target`.
    pub async fn symlink(
        &self,
        c: &Caller,
        parent: Fid,
        name: impl AsRef<[u8]>,
        target: impl AsRef<[u8]>,
    ) -> Result<Attr, Errno> {
        check_name(name.as_ref())?;
        if target.as_ref().is_empty() {
            return Err(Errno::ENOENT);
        }
        if (1..=4095).contains(&target.as_ref().len()) {
            let (n, t) = (Name::from(name.as_ref()), Name::from(target.as_ref()));
            let kind = FileKind::Symlink;
            if let Some(r) = self.wb_make(c, parent, &n, kind, 0o777, 0, Some(t)).await {
                return r.map(|(a, _)| a);
            }
        }
        let parent = self.name_dir(c, parent, name.as_ref()).await?;
        let req = MdtRequest::Symlink {
            parent,
            name: Name::from(name.as_ref()),
            target: Name::from(target.as_ref()),
        };
        let r = self.mdt_call(c, parent, req).await?;
        self.entry(r, "Symlink").map(|(a, _)| a)
    }

    /// The target of symbolic link `fid`.
    pub async fn readlink(&self, c: &Caller, fid: Fid) -> Result<Name, Errno> {
        if let Some(t) = self.wb_readlink(fid) {
            return Ok(t);
        }
        match self.mdt_call(c, fid, MdtRequest::Readlink { fid }).await? {
            Reply::Link(t) => Ok(t),
            other => Err(unexpected("Readlink", &other)),
        }
    }

    /// Up to `max` entries of directory `fid` after `cookie` (0 = from the
    /// start), and whether the listing is complete. No "." or "..": resume
    /// with the last entry's cookie.
    pub async fn readdir(
        &self,
        c: &Caller,
        fid: Fid,
        cookie: u64,
        max: u32,
    ) -> Result<(Vec<DirEntry>, bool), Errno> {
        if let Some(r) = self.wb_listing(c, fid, cookie, max) {
            return r;
        }
        self.wb_settle(&[fid]).await;
        let reply = match self.dir_shards(c, fid).await? {
            Some(shards) => {
                let (entries, eof) = self.readdir_shards(c, &shards, cookie, max).await?;
                Reply::Dir { entries, eof }
            }
            None => match self.leased_listing(c, fid, cookie, max) {
                Some(r) => r,
                None => match self
                    .mdt_call(c, fid, MdtRequest::Readdir { fid, cookie, max })
                    .await
                {
                    // Striped since its layout was learned (now noted):
                    // list its shards.
                    Err(Errno::ESTALE) if self.dir_shards(c, fid).await?.is_some() => {
                        return Box::pin(self.readdir(c, fid, cookie, max)).await;
                    }
                    r => r?,
                },
            },
        };
        match reply {
            Reply::Dir { mut entries, eof } => {
                for e in &mut entries {
                    e.attr = self.with_local_size(e.attr.clone());
                }
                Ok((entries, eof))
            }
            other => Err(unexpected("Readdir", &other)),
        }
    }

    /// The entries of plain directory `fid` after `cookie`, answered
    /// without its MDT when this client holds leases on its whole list,
    /// on every name in it and on each named inode's attributes (as after
    /// making the tree, or listing it once): what the MDT would answer,
    /// in its order (by name hash, the cookie) and with its cookies. Only
    /// while none of this client's changes is on its way (one could be
    /// applied and not yet noted), and after the read permission the MDT
    /// would check (refused here: the MDT answers). `None`: ask the MDT.
    fn leased_listing(&self, c: &Caller, fid: Fid, cookie: u64, max: u32) -> Option<Reply> {
        if self.router.changes_in_flight() != 0 || !self.dir_is_plain(fid) {
            return None;
        }
        let dir = self.router.fresh.leased_attr(fid)?;
        if !may_dir(c, &dir, 0o4) {
            return None;
        }
        let all = self.router.fresh.leased_listing(fid, LEASED_LISTING_MAX)?;
        let (entries, eof) = listing_page(all, cookie, max);
        self.router.lease_hit();
        Some(Reply::Dir { entries, eof })
    }

    /// The layout of regular file `fid`, asked as the current process.
    pub async fn get_layout(&self, fid: Fid) -> Result<Layout, Errno> {
        self.get_layout_as(&Caller::current(), fid).await
    }

    /// The layout of regular file `fid`.
    pub async fn get_layout_as(&self, c: &Caller, fid: Fid) -> Result<Layout, Errno> {
        self.wb_settle(&[fid]).await;
        match self.mdt_call(c, fid, MdtRequest::GetLayout { fid }).await? {
            Reply::Layout(l) => Ok(l),
            other => Err(unexpected("GetLayout", &other)),
        }
    }

    /// Set (or with `None` remove) directory `fid`'s default striping, as
    /// the current process.
    pub async fn set_default_stripe(
        &self,
        fid: Fid,
        spec: Option<StripeSpec>,
    ) -> Result<(), Errno> {
        self.set_default_stripe_as(&Caller::current(), fid, spec)
            .await
    }

    /// As [`Client::set_default_stripe`], as `c`.
    pub async fn set_default_stripe_as(
        &self,
        c: &Caller,
        fid: Fid,
        spec: Option<StripeSpec>,
    ) -> Result<(), Errno> {
        self.wb_leave(fid).await;
        if let Some(s) = &spec {
            s.validate().map_err(|_| Errno::EINVAL)?;
        }
        self.on_every_shard(c, fid, "SetDefaultStripe", |dir| {
            MdtRequest::SetDefaultStripe {
                fid: dir,
                spec: spec.clone(),
            }
        })
        .await
    }

    /// Send `req(shard)` to every shard of directory `fid` (itself if not
    /// striped), the master last, as the one that is read back: names, and
    /// so files and subdirectories, are made in the shards, and each keeps
    /// the directory's defaults. Each answer must be `Ok`.
    async fn on_every_shard(
        &self,
        c: &Caller,
        fid: Fid,
        op: &str,
        req: impl Fn(Fid) -> MdtRequest,
    ) -> Result<(), Errno> {
        self.on_every_shard_answered(c, fid, op, req, |r| matches!(r, Reply::Ok))
            .await
    }

    /// As [`Self::on_every_shard`], for a request whose every answer
    /// `done` accepts.
    pub(crate) async fn on_every_shard_answered(
        &self,
        c: &Caller,
        fid: Fid,
        op: &str,
        req: impl Fn(Fid) -> MdtRequest,
        done: impl Fn(&Reply) -> bool,
    ) -> Result<(), Errno> {
        let mut dirs = match self.dir_shards(c, fid).await? {
            Some(shards) => shards.to_vec(),
            None => vec![fid],
        };
        dirs.reverse();
        for dir in dirs {
            let r = self.mdt_call(c, dir, req(dir)).await?;
            if !done(&r) {
                return Err(unexpected(op, &r));
            }
        }
        Ok(())
    }

    /// Set where directory `fid`'s new subdirectories go, and theirs in
    /// turn (`setdirstripe -D`), as `c`; `None` removes it. Set on every
    /// shard of a striped directory (each places the directories named in
    /// it).
    pub async fn set_dir_default_as(
        &self,
        c: &Caller,
        fid: Fid,
        spec: Option<DirDefault>,
    ) -> Result<(), Errno> {
        self.wb_leave(fid).await;
        self.on_every_shard(c, fid, "SetDirDefault", |dir| MdtRequest::SetDirDefault {
            fid: dir,
            spec: spec.clone(),
        })
        .await
    }

    /// Where directory `fid`'s new subdirectories go: its default, or the
    /// nearest ancestor's on its MDT; `None` if none applies.
    pub async fn get_dir_default(&self, c: &Caller, fid: Fid) -> Result<Option<DirDefault>, Errno> {
        match self
            .mdt_call(c, fid, MdtRequest::GetDirDefault { fid })
            .await?
        {
            Reply::DirDefault(d) => Ok(d),
            other => Err(unexpected("GetDirDefault", &other)),
        }
    }

    /// Set directory `fid`'s default component layout (progressive
    /// layouts, Data-on-MDT) for its new files, as `c`; `None` removes
    /// it, and any default striping.
    pub async fn set_default_layout_as(
        &self,
        c: &Caller,
        fid: Fid,
        spec: Option<LayoutSpec>,
    ) -> Result<(), Errno> {
        self.wb_leave(fid).await;
        if let Some(s) = &spec {
            s.validate().map_err(|_| Errno::EINVAL)?;
        }
        self.on_every_shard(c, fid, "SetDefaultLayout", |dir| {
            MdtRequest::SetDefaultLayout {
                fid: dir,
                spec: spec.clone(),
            }
        })
        .await
    }

    /// Directory `fid`'s default layout, explicit or inherited (a plain
    /// default striping as one component); `None` if none is set anywhere
    /// up the tree. Asked as the current process.
    pub async fn get_default_layout(&self, fid: Fid) -> Result<Option<LayoutSpec>, Errno> {
        self.get_default_layout_as(&Caller::current(), fid).await
    }

    /// [`Client::get_default_layout`], asked as `c`.
    pub async fn get_default_layout_as(
        &self,
        c: &Caller,
        fid: Fid,
    ) -> Result<Option<LayoutSpec>, Errno> {
        match self
            .mdt_call(c, fid, MdtRequest::GetDefaultLayout { fid })
            .await?
        {
            Reply::LayoutSpec(s) => Ok(s),
            other => Err(unexpected("GetDefaultLayout", &other)),
        }
    }

    /// Set how the data of directory `fid`'s new files is compressed on
    /// the OSTs, as `c` (its owner or root): `Some(off)` switches off a
    /// default from above, `None` removes the directory's own. On the
    /// root it is the file system's default.
    pub async fn set_default_compress_as(
        &self,
        c: &Caller,
        fid: Fid,
        compress: Option<Compress>,
    ) -> Result<(), Errno> {
        self.wb_leave(fid).await;
        if let Some(x) = &compress {
            x.validate().map_err(|_| Errno::EINVAL)?;
        }
        self.on_every_shard(c, fid, "SetDefaultCompress", |dir| {
            MdtRequest::SetDefaultCompress { fid: dir, compress }
        })
        .await
    }

    /// The compression directory `fid`'s new files get, explicit or
    /// inherited; `None` if none is set anywhere up the tree.
    pub async fn get_default_compress(
        &self,
        c: &Caller,
        fid: Fid,
    ) -> Result<Option<Compress>, Errno> {
        match self
            .mdt_call(c, fid, MdtRequest::GetDefaultCompress { fid })
            .await?
        {
            Reply::Compress(x) => Ok(x),
            other => Err(unexpected("GetDefaultCompress", &other)),
        }
    }

    /// Directory `fid`'s default striping, explicit or inherited; `None` if
    /// none is set anywhere up the tree. Asked as the current process.
    pub async fn get_default_stripe(&self, fid: Fid) -> Result<Option<StripeSpec>, Errno> {
        let c = Caller::current();
        match self
            .mdt_call(&c, fid, MdtRequest::GetDefaultStripe { fid })
            .await?
        {
            Reply::Stripe(s) => Ok(s),
            other => Err(unexpected("GetDefaultStripe", &other)),
        }
    }

    /// Set extended attribute `name` of `fid` with
    /// [`xattr_flags`](loom_proto::msg::xattr_flags) CREATE / REPLACE.
    pub async fn setxattr(
        &self,
        c: &Caller,
        fid: Fid,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: u32,
    ) -> Result<(), Errno> {
        self.wb_leave(fid).await;
        self.reports_landed(fid).await;
        let name = Name::from(name.as_ref());
        let req = MdtRequest::SetXattr {
            fid,
            name: name.clone(),
            value: value.to_vec(),
            flags,
        };
        Self::ok(self.mdt_call(c, fid, req).await?, "SetXattr")?;
        self.acl_on_shards(c, fid, &name, Some(value)).await
    }

    /// Give shards 1.. of striped directory `dir` ACL `name` just set
    /// (`value`) or removed on its master: each shard checks the
    /// permissions of its entries and gives new ones their inherited
    /// ACLs from its own copy. As [`Self::set_on_shards`], not atomic
    /// with the master's change. Nothing for other names or inodes.
    async fn acl_on_shards(
        &self,
        c: &Caller,
        dir: Fid,
        name: &Name,
        value: Option<&[u8]>,
    ) -> Result<(), Errno> {
        if !loom_proto::acl::is_acl_name(name.as_bytes()) {
            return Ok(());
        }
        let Some(shards) = self.dir_shards(c, dir).await? else {
            return Ok(());
        };
        for &shard in shards.iter().filter(|s| **s != dir) {
            let name = name.clone();
            let req = match value {
                Some(v) => MdtRequest::SetXattr {
                    fid: shard,
                    name,
                    value: v.to_vec(),
                    flags: 0,
                },
                None => MdtRequest::RemoveXattr { fid: shard, name },
            };
            match self.mdt_call(c, shard, req).await {
                Ok(_) | Err(Errno::ENODATA) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Extended attribute `name` of `fid`; ENODATA if it has none.
    pub async fn getxattr(
        &self,
        c: &Caller,
        fid: Fid,
        name: impl AsRef<[u8]>,
    ) -> Result<Vec<u8>, Errno> {
        if self.wb.is_pending(fid) {
            return Err(Errno::ENODATA);
        }
        let name = Name::from(name.as_ref());
        // Names every user may read (security labels, ACLs: what `ls -l`
        // asks of every file) are kept while the inode's attributes are
        // leased; others are checked per caller by the MDT each time.
        let shared =
            name.as_bytes().starts_with(b"security.") || name.as_bytes().starts_with(b"system.");
        if shared {
            if let Some(v) = self.router.fresh.xattr(fid, &name) {
                return v.ok_or(Errno::ENODATA);
            }
        }
        let since = self.router.fresh.recalls();
        let req = MdtRequest::GetXattr {
            fid,
            name: name.clone(),
        };
        let r = match self.mdt_call(c, fid, req).await {
            Ok(Reply::Xattr(v)) => Ok(v),
            Ok(other) => Err(unexpected("GetXattr", &other)),
            Err(e) => Err(e),
        };
        if shared {
            match &r {
                Ok(v) => self
                    .router
                    .fresh
                    .seen_xattr(fid, &name, Some(v.clone()), since),
                Err(Errno::ENODATA) => self.router.fresh.seen_xattr(fid, &name, None, since),
                Err(_) => {}
            }
        }
        r
    }

    /// Names of `fid`'s extended attributes.
    pub async fn listxattr(&self, c: &Caller, fid: Fid) -> Result<Vec<Name>, Errno> {
        if self.wb.is_pending(fid) {
            return Ok(Vec::new());
        }
        // All of a file this client made are known while it is leased.
        if let Some(names) = self.router.fresh.xattr_names(fid) {
            return Ok(names);
        }
        match self.mdt_call(c, fid, MdtRequest::ListXattr { fid }).await? {
            Reply::XattrNames(v) => Ok(v),
            other => Err(unexpected("ListXattr", &other)),
        }
    }

    /// Remove extended attribute `name` of `fid`; ENODATA if it has none.
    pub async fn removexattr(
        &self,
        c: &Caller,
        fid: Fid,
        name: impl AsRef<[u8]>,
    ) -> Result<(), Errno> {
        self.wb_leave(fid).await;
        self.reports_landed(fid).await;
        let name = Name::from(name.as_ref());
        let req = MdtRequest::RemoveXattr {
            fid,
            name: name.clone(),
        };
        Self::ok(self.mdt_call(c, fid, req).await?, "RemoveXattr")?;
        self.acl_on_shards(c, fid, &name, None).await
    }

    /// Usage of the file system: bytes summed over the OSTs, files over the
    /// MDTs (`target` is `None`). Targets that do not answer within
    /// [`STATFS_TIMEOUT`] are left out (as `df` on Lustre skips an inactive
    /// OST); EIO only if none answers.
    pub async fn statfs(&self) -> Result<StatFs, Errno> {
        let mut sum = StatFs::default();
        let mut answered = 0;
        for u in self.target_statfs().await {
            let Ok(s) = u.usage else { continue };
            answered += 1;
            match u.target.role {
                Role::Ost => {
                    sum.bytes_total += s.bytes_total;
                    sum.bytes_free += s.bytes_free;
                    sum.bytes_avail += s.bytes_avail;
                }
                Role::Mdt => {
                    sum.files_total += s.files_total;
                    sum.files_free += s.files_free;
                }
                Role::Mgs => {}
            }
        }
        if answered == 0 {
            return Err(Errno::EIO);
        }
        Ok(sum)
    }

    /// Usage of every MDT and OST in the configuration, MDTs first, in
    /// index order, asked in parallel; a target that does not answer
    /// within [`STATFS_TIMEOUT`] has an error as its usage.
    pub async fn target_statfs(&self) -> Vec<TargetUsage> {
        let all = self
            .ask_targets(
                None,
                |id| Request::statfs(id.role),
                |id, r| match r {
                    Reply::StatFs(mut s) => {
                        s.target = Some(id);
                        Ok(s)
                    }
                    other => Err(unexpected("StatFs", &other)),
                },
            )
            .await;
        all.into_iter()
            .map(|(target, usage)| TargetUsage { target, usage })
            .collect()
    }

    /// Send every MDT and OST (or only `only`) the request `req` makes for
    /// it, in parallel, and read each reply with `read`: per target, MDTs
    /// first in index order, what `read` made of its reply, or why it did
    /// not answer within [`STATFS_TIMEOUT`] (EIO when nothing came back).
    async fn ask_targets<T: Send + 'static>(
        &self,
        only: Option<TargetId>,
        req: impl Fn(TargetId) -> Request,
        read: impl Fn(TargetId, Reply) -> Result<T, Errno>,
    ) -> Vec<(TargetId, Result<T, Errno>)> {
        self.ask_targets_within(only, STATFS_TIMEOUT, req, read)
            .await
    }

    /// As [`Client::ask_targets`], each allowed `timeout`.
    pub(crate) async fn ask_targets_within<T: Send + 'static>(
        &self,
        only: Option<TargetId>,
        timeout: Duration,
        req: impl Fn(TargetId) -> Request,
        read: impl Fn(TargetId, Reply) -> Result<T, Errno>,
    ) -> Vec<(TargetId, Result<T, Errno>)> {
        self.ask_targets_as(&Caller::current(), only, timeout, req, read)
            .await
    }

    /// [`Client::ask_targets_within`], asked as `c`.
    pub(crate) async fn ask_targets_as<T: Send + 'static>(
        &self,
        c: &Caller,
        only: Option<TargetId>,
        timeout: Duration,
        req: impl Fn(TargetId) -> Request,
        read: impl Fn(TargetId, Reply) -> Result<T, Errno>,
    ) -> Vec<(TargetId, Result<T, Errno>)> {
        let config = self.router.config();
        let mut ids: Vec<TargetId> = config
            .targets
            .iter()
            .map(|t| t.id)
            .filter(|id| matches!(id.role, Role::Mdt | Role::Ost))
            .filter(|id| only.is_none_or(|o| o == *id))
            .collect();
        ids.sort();
        let mut set = JoinSet::new();
        for (i, id) in ids.iter().enumerate() {
            let (router, ctx, id, req) = (self.router_handle(), self.ctx(c), *id, req(*id));
            set.spawn(async move {
                let r = router
                    .call_within(id, ctx, req, Bytes::new(), timeout)
                    .await;
                (i, r)
            });
        }
        let mut replies: Vec<Result<Reply, Errno>> = ids.iter().map(|_| Err(Errno::EIO)).collect();
        while let Some(r) = set.join_next().await {
            let Ok((i, r)) = r else {
                continue;
            };
            replies[i] = r.map(|(reply, _)| reply);
        }
        ids.into_iter()
            .zip(replies)
            .map(|(id, r)| (id, r.and_then(|reply| read(id, reply))))
            .collect()
    }

    /// Each MDT's operation counters since it started (by operation name),
    /// or why it did not answer, in MDT order.
    pub async fn mdt_op_stats(&self) -> Vec<(u32, Result<OpCounts, Errno>)> {
        let config = self.router.config();
        let mut mdts: Vec<u32> = config
            .targets
            .iter()
            .filter(|t| t.id.role == Role::Mdt)
            .map(|t| t.id.index)
            .collect();
        mdts.sort();
        let c = Caller::current();
        let mut out = Vec::with_capacity(mdts.len());
        for m in mdts {
            let id = TargetId::mdt(m);
            let r = self
                .router_handle()
                .call_within(
                    id,
                    self.ctx(&c),
                    MdtRequest::OpStats,
                    Bytes::new(),
                    STATFS_TIMEOUT,
                )
                .await;
            out.push((
                m,
                match r {
                    Ok((Reply::OpStats(v), _)) => Ok(v),
                    Ok((other, _)) => Err(unexpected("OpStats", &other)),
                    Err(e) => Err(e),
                },
            ));
        }
        out
    }

    /// Run `cmd` on the scrub of every MDT and OST (or only of target
    /// `only`), in parallel: each target's scrub state after it, or why it
    /// did not answer, MDTs first, in index order.
    pub async fn scrub(
        &self,
        cmd: ScrubCmd,
        only: Option<TargetId>,
    ) -> Vec<(TargetId, Result<ScrubStatus, Errno>)> {
        self.ask_targets(
            only,
            |id| match id.role {
                Role::Mdt => Request::Mdt(MdtRequest::Scrub { cmd }),
                _ => Request::Ost(OstRequest::Scrub { cmd }),
            },
            |_, r| match r {
                Reply::Scrub(st) => Ok(st),
                other => Err(unexpected("Scrub", &other)),
            },
        )
        .await
    }

    /// What each MDT and OST served: per operation since it started, per
    /// job and per client recently (Lustre's `md_stats`, `job_stats`),
    /// asked in parallel, MDTs first; or why a target did not answer.
    pub async fn job_stats(&self) -> Vec<(TargetId, Result<Served, Errno>)> {
        self.ask_targets(
            None,
            |id| match id.role {
                Role::Mdt => Request::Mdt(MdtRequest::JobStats),
                _ => Request::Ost(OstRequest::JobStats),
            },
            |_, r| match r {
                Reply::JobStats { ops, jobs, clients } => Ok(Served { ops, jobs, clients }),
                other => Err(unexpected("JobStats", &other)),
            },
        )
        .await
    }

    /// Every OST object the files of every MDT refer to (and those of
    /// unlinked files whose destroy is still on its way), for `loom fsck`.
    pub async fn referenced_objects(&self) -> Result<Vec<ObjRef>, Errno> {
        let config = self.router.config();
        let mut mdts: Vec<u32> = config
            .targets
            .iter()
            .filter(|t| t.id.role == Role::Mdt)
            .map(|t| t.id.index)
            .collect();
        mdts.sort();
        let c = Caller::current();
        let mut out = Vec::new();
        for m in mdts {
            let mut after = Vec::new();
            loop {
                let (r, _) = self
                    .router
                    .call(
                        TargetId::mdt(m),
                        self.ctx(&c),
                        MdtRequest::ListObjects { after },
                        Bytes::new(),
                    )
                    .await?;
                let Reply::ObjectRefs { objs, next } = r else {
                    return Err(unexpected("ObjectRefs", &r));
                };
                out.extend(objs);
                match next {
                    Some(n) => after = n,
                    None => break,
                }
            }
        }
        Ok(out)
    }

    /// The objects on OST `ost` in its bucket `bucket` (0..=255).
    pub async fn ost_objects(&self, ost: u32, bucket: u8) -> Result<Vec<ObjInfo>, Errno> {
        let c = Caller::current();
        match self
            // It names no object: no file's capability.
            .ost_call(
                &c,
                Fid::ROOT,
                ost,
                OstRequest::ListObjects { bucket },
                Bytes::new(),
            )
            .await?
        {
            (Reply::Objects(v), _) => Ok(v),
            (other, _) => Err(unexpected("Objects", &other)),
        }
    }

    /// A page of MDT `mdt`'s namespace after `after` (empty: the first),
    /// and the cursor of the next (`None` after the last), for `loom fsck`.
    pub async fn fsck_scan(
        &self,
        mdt: u32,
        what: FsckScan,
        after: Vec<u8>,
    ) -> Result<(Vec<FsckItem>, Option<Vec<u8>>), Errno> {
        let c = Caller::current();
        let (r, _) = self
            .router
            .call(
                TargetId::mdt(mdt),
                self.ctx(&c),
                MdtRequest::FsckScan { what, after },
                Bytes::new(),
            )
            .await?;
        match r {
            Reply::FsckPage { items, next } => Ok((items, next)),
            other => Err(unexpected("FsckPage", &other)),
        }
    }

    /// Ask MDT `mdt` to repair its namespace (root only).
    pub async fn fsck_repair(&self, mdt: u32, fix: FsckFix) -> Result<(), Errno> {
        let c = Caller::current();
        self.router
            .call(
                TargetId::mdt(mdt),
                self.ctx(&c),
                MdtRequest::FsckRepair { fix },
                Bytes::new(),
            )
            .await
            .map(|_| ())
    }

    /// The MDT that keeps inode `fid` now, asked of the MDT its FID names
    /// (which says where `loom migrate` moved it, if it did).
    pub async fn locate(&self, fid: Fid) -> Result<u32, Errno> {
        self.locate_as(&Caller::current(), fid).await
    }

    /// [`Client::locate`], asked as `c`.
    pub async fn locate_as(&self, c: &Caller, fid: Fid) -> Result<u32, Errno> {
        self.mdt_call(c, fid, MdtRequest::GetAttr { fid }).await?;
        Ok(self.router.mdt_of(fid).await?.index)
    }

    /// Move plain directory `fid`, its entries and the inodes of its
    /// files to MDT `mdt` as `c` (root only; `loom migrate`): (inodes moved,
    /// inodes named in it that stayed where they were).
    pub async fn migrate_dir(&self, c: &Caller, fid: Fid, mdt: u32) -> Result<(u64, u64), Errno> {
        self.wb_settle_all().await;
        self.wb.forget_dir(fid);
        match self
            .mdt_call(c, fid, MdtRequest::Migrate { fid, mdt })
            .await?
        {
            Reply::Migrated { moved, stayed } => {
                // What this client knew of it came from where it was.
                self.router.fresh.clear();
                Ok((moved, stayed))
            }
            _ => Err(Errno::EPROTO),
        }
    }

    /// Stripe plain directory `fid` over `mdts` (its own MDT first) as
    /// `c` (root only; `loom migrate -c`): the entries moved to other
    /// shards.
    pub async fn restripe_dir(&self, c: &Caller, fid: Fid, mdts: Vec<u32>) -> Result<u64, Errno> {
        self.wb_settle_all().await;
        self.wb.forget_dir(fid);
        match self
            .mdt_call(c, fid, MdtRequest::Restripe { fid, mdts })
            .await?
        {
            Reply::Migrated { moved, .. } => {
                self.router.fresh.clear();
                Ok(moved)
            }
            _ => Err(Errno::EPROTO),
        }
    }

    /// Destroy `objs`, which no file refers to (root only), through MDT0.
    pub async fn reclaim_objects(&self, objs: Vec<ObjRef>) -> Result<(), Errno> {
        let c = Caller::current();
        self.router
            .call(
                TargetId::mdt(0),
                self.ctx(&c),
                MdtRequest::ReclaimObjects { objs },
                Bytes::new(),
            )
            .await
            .map(|_| ())
    }

    /// Attributes of the file at `path`, relative to the file system's root
    /// ("" or "/" is the root), by looking up each component as the current
    /// process. Symbolic links are not followed; ".." goes up the path as
    /// written.
    pub async fn resolve_path(&self, path: impl AsRef<[u8]>) -> Result<Attr, Errno> {
        self.resolve_path_as(&Caller::current(), path).await
    }

    /// As [`Client::resolve_path`], as `c`. The path is bytes: names need
    /// not be UTF-8.
    pub async fn resolve_path_as(&self, c: &Caller, path: impl AsRef<[u8]>) -> Result<Attr, Errno> {
        let root = self.root().await?;
        let root = match self.router.fresh.leased_attr(root) {
            Some(a) => a,
            None => self.getattr(c, root).await?,
        };
        let mut stack: Vec<Attr> = vec![root];
        for comp in path.as_ref().split(|b| *b == b'/') {
            match comp {
                b"" | b"." => {}
                b".." => {
                    if stack.len() > 1 {
                        stack.pop();
                    }
                }
                name => {
                    let Some(dir) = stack.last() else {
                        return Err(Errno::ENOENT);
                    };
                    if dir.kind != FileKind::Dir {
                        return Err(Errno::ENOTDIR);
                    }
                    let (attr, _) = self.lookup(c, dir.fid, name).await?;
                    stack.push(attr);
                }
            }
        }
        stack.pop().ok_or(Errno::ENOENT)
    }

    /// Size of object `obj` of file `fid`, as its OST reports it (for
    /// tools and checks).
    pub async fn object_size(&self, fid: Fid, obj: ObjRef) -> Result<u64, Errno> {
        let c = Caller::current();
        match self
            .ost_call(
                &c,
                fid,
                obj.ost,
                OstRequest::ObjGetSize { obj },
                Bytes::new(),
            )
            .await?
        {
            (Reply::Size(s), _) => Ok(s),
            (other, _) => Err(unexpected("ObjGetSize", &other)),
        }
    }
}

/// A page of a directory's entries as its MDT would answer it: those
/// after `cookie` in its order (by name hash, the cookie), at most `max`,
/// and whether none is left after them.
pub(crate) fn listing_page(
    named: impl IntoIterator<Item = (Name, Attr)>,
    cookie: u64,
    max: u32,
) -> (Vec<DirEntry>, bool) {
    let mut after: Vec<(u64, Name, Attr)> = named
        .into_iter()
        .map(|(name, attr)| (loom_proto::fid::name_hash(name.as_bytes()), name, attr))
        .filter(|(hash, _, _)| *hash > cookie)
        .collect();
    after.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let max = max.max(1) as usize;
    let eof = after.len() <= max;
    let entries = after
        .into_iter()
        .take(max)
        .map(|(cookie, name, attr)| DirEntry { name, attr, cookie })
        .collect();
    (entries, eof)
}
