//! `loom receive`: apply a send stream to a tree of another file system.
//!
//! What a receive keeps lives beside the tree, in the receiving file
//! system's `/.loom-receive/ID/` (ID names the tree's directory):
//! * `stage/`, where the Remove pass moves inodes that come back under
//!   another name in the Place pass;
//! * `state`, the checkpoint of a receive under way: which stream, how
//!   many of its records are applied and committed, and the checksum
//!   chain there. A receive that stopped (killed, a damaged or cut
//!   stream, a server gone) is resumed by sending the same stream again:
//!   its applied records are read and checked, not applied again. Every
//!   step within a pass may run twice (see `send::plan`), so a checkpoint
//!   need only be older than what was applied;
//! * `ledger`, the last snapshot received whole: an incremental stream
//!   is accepted only on top of its base.
//!
//! Once a stream is applied, the receiver takes a snapshot of its own
//! file system under the sent snapshot's name, so the replica has the
//! same point to mount, and to receive the next increment on.

use super::format::{FileLayout, Header, Phase, Reader, Record, StreamError, VERSION};
use super::image::STATE_DIR;
use super::{fs, show, SendError, Step};
use crate::ctx::Caller;
use crate::io::file::Allocation;
use crate::{Client, OpenFile};
use loom_proto::layout::{Layout, LayoutSpec};
use loom_proto::msg::{rename_flags, Attr, DirStripe, FileKind, Role, SetAttr, SetTime};
use loom_proto::{Errno, Fid};
use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a receive records how far it got.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(2);
/// The state file's fixed size: one line, padded.
const STATE_LEN: usize = 512;

/// What a receive did.
#[derive(Clone, Debug, Default)]
pub struct Received {
    /// Records of the stream read (applied, or skipped as applied before).
    pub records: u64,
    /// Of them, skipped as applied by an earlier, stopped receive.
    pub resumed_at: u64,
    /// File bytes written.
    pub data: u64,
    /// Stream bytes read.
    pub stream: u64,
    /// The stream's header.
    pub header: Option<Header>,
    /// It was received whole before: nothing was applied.
    pub already: bool,
}

fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|&b| b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (b"", path),
    }
}

/// Staging's name for the sender's inode `fid`.
fn staged(fid: Fid) -> String {
    format!("{:x}-{:x}-{:x}", fid.seq, fid.oid, fid.ver)
}

/// A receive's checkpoint, as its `state` file holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Checkpoint {
    stream: String,
    records: u64,
    chain: u32,
}

impl Checkpoint {
    fn line(&self) -> String {
        format!(
            "stream {} records {} chain {:08x}\n",
            self.stream, self.records, self.chain
        )
    }

    fn parse(s: &str) -> Option<Checkpoint> {
        let w: Vec<&str> = s.split_whitespace().collect();
        match w.as_slice() {
            ["stream", stream, "records", n, "chain", c, ..] => Some(Checkpoint {
                stream: stream.to_string(),
                records: n.parse().ok()?,
                chain: u32::from_str_radix(c, 16).ok()?,
            }),
            _ => None,
        }
    }
}

/// Which stream: its snapshot and its base.
fn stream_id(h: &Header) -> String {
    match &h.base {
        Some(b) => format!("{}+{}", h.snapshot.guid(), b.guid()),
        None => h.snapshot.guid(),
    }
}

/// The file the data records are for.
struct Open {
    path: Vec<u8>,
    file: Arc<OpenFile>,
    /// The size it must have once its data is written: a tail of zeros
    /// (a hole) is not sent, so the size is set at the end if the writes
    /// fell short of it.
    size: u64,
    /// Its writes in flight, at most [`WRITES_IN_FLIGHT`].
    writes: tokio::task::JoinSet<Result<(), Errno>>,
}

/// Data records written at once: a large file streams as the library's
/// writes allow, not one round trip at a time.
const WRITES_IN_FLIGHT: usize = 8;

impl Open {
    /// Wait for its writes in flight; the first failure.
    async fn landed(&mut self) -> Result<(), SendError> {
        while let Some(r) = self.writes.join_next().await {
            r.map_err(|e| SendError::Refused(format!("a write failed: {e}")))?
                .map_err(fs(format!("writing {}", show(&self.path))))?;
        }
        Ok(())
    }
}

struct Applier<'a> {
    client: &'a Arc<Client>,
    c: Caller,
    into: Fid,
    stage: Fid,
    dirs: HashMap<Vec<u8>, Fid>,
    /// What this receive made or looked up, by path, with a file's
    /// layout: the passes after Place address each inode again, and a
    /// new file's size (0) and owner are known without asking.
    known: HashMap<Vec<u8>, (Attr, Option<Layout>)>,
    /// Each directory's defaults as set here for files made in it.
    made_with: HashMap<Fid, FileLayout>,
    open: Option<Open>,
    mdts: Vec<u32>,
    osts: usize,
    data: u64,
}

impl Applier<'_> {
    /// The directory at `path`.
    async fn dir(&mut self, path: &[u8]) -> Result<Fid, Errno> {
        if let Some(f) = self.dirs.get(path) {
            return Ok(*f);
        }
        let (parent, name) = split(path);
        let p = Box::pin(self.dir(parent)).await?;
        let (attr, _) = self.client.lookup(&self.c, p, name).await?;
        if attr.kind != FileKind::Dir {
            return Err(Errno::ENOTDIR);
        }
        self.dirs.insert(path.to_vec(), attr.fid);
        Ok(attr.fid)
    }

    /// What is at `path`.
    async fn node(&mut self, path: &[u8]) -> Result<Attr, Errno> {
        Ok(self.node_and_layout(path).await?.0)
    }

    /// What is at `path`, and its layout if it is a regular file.
    async fn node_and_layout(&mut self, path: &[u8]) -> Result<(Attr, Option<Layout>), Errno> {
        if let Some(k) = self.known.get(path) {
            return Ok(k.clone());
        }
        let found = if path.is_empty() {
            (self.client.getattr(&self.c, self.into).await?, None)
        } else {
            let (parent, name) = split(path);
            let p = self.dir(parent).await?;
            self.client.lookup(&self.c, p, name).await?
        };
        self.known.insert(path.to_vec(), found.clone());
        Ok(found)
    }

    /// Forget what is known at and under `path` (moved or removed).
    fn forget(&mut self, path: &[u8]) {
        let under = |k: &Vec<u8>| {
            k.as_slice() == path || (k.starts_with(path) && k.get(path.len()) == Some(&b'/'))
        };
        self.dirs.retain(|k, _| !under(k));
        self.known.retain(|k, _| !under(k));
    }

    /// Remove whatever is at `name` in `dir` (a step run again after a
    /// resume finding another kind there), a tree included.
    async fn remove(&mut self, dir: Fid, name: &[u8]) -> Result<(), Errno> {
        let (attr, _) = self.client.lookup(&self.c, dir, name).await?;
        if attr.kind == FileKind::Dir {
            remove_tree(self.client, &self.c, attr.fid).await?;
            self.dirs.clear();
            self.known.clear();
            self.client.rmdir(&self.c, dir, name).await
        } else {
            self.client.unlink(&self.c, dir, name).await
        }
    }

    async fn close_file(&mut self) -> Result<(), SendError> {
        if let Some(mut o) = self.open.take() {
            o.landed().await?;
            let what = || fs(format!("writing {}", show(&o.path)));
            o.file.flush().await.map_err(what())?;
            if o.file.size() < o.size {
                let set = SetAttr {
                    size: Some(o.size),
                    ..SetAttr::default()
                };
                self.client
                    .setattr(&self.c, o.file.fid(), set)
                    .await
                    .map_err(what())?;
            }
        }
        Ok(())
    }

    /// Make `parent`'s defaults those `want` was made with, so a file
    /// made in it gets that layout (the directory's own defaults come in
    /// the Content pass, after every file made in it).
    async fn made_as(&mut self, parent: Fid, want: &FileLayout) -> Result<(), Errno> {
        let want = FileLayout {
            spec: self.fit_layout(want.spec.clone()),
            compress: want.compress,
        };
        if self.made_with.get(&parent) == Some(&want) {
            return Ok(());
        }
        self.client
            .set_default_layout_as(&self.c, parent, Some(want.spec.clone()))
            .await?;
        self.client
            .set_default_compress_as(&self.c, parent, want.compress)
            .await?;
        self.made_with.insert(parent, want);
        Ok(())
    }

    async fn apply(&mut self, r: Record) -> Result<(), SendError> {
        let c = self.c.clone();
        let cl = self.client;
        match r {
            Record::Header(_) | Record::End { .. } => {}
            Record::Phase(_) => self.close_file().await?,
            Record::Stage { path, fid } => {
                let (p, name) = split(&path);
                let what = || fs(format!("moving {} aside", show(&path)));
                match self.dir(p).await {
                    Ok(d) => {
                        let flags = rename_flags::NOREPLACE;
                        match cl.rename(&c, d, name, self.stage, staged(fid), flags).await {
                            Ok(()) | Err(Errno::ENOENT) | Err(Errno::EEXIST) => {}
                            Err(e) => return Err(what()(e)),
                        }
                    }
                    // Its parent went before it: done before a resume.
                    Err(Errno::ENOENT) => {}
                    Err(e) => return Err(what()(e)),
                }
                self.forget(&path);
            }
            Record::Unlink { path } | Record::Rmdir { path } => {
                let (p, name) = split(&path);
                let what = || fs(format!("removing {}", show(&path)));
                match self.dir(p).await {
                    Ok(d) => match self.client.lookup(&c, d, name).await {
                        Ok((a, _)) => {
                            let r = if a.kind == FileKind::Dir {
                                cl.rmdir(&c, d, name).await
                            } else {
                                cl.unlink(&c, d, name).await
                            };
                            match r {
                                Ok(()) | Err(Errno::ENOENT) => {}
                                Err(e) => return Err(what()(e)),
                            }
                        }
                        Err(Errno::ENOENT) => {}
                        Err(e) => return Err(what()(e)),
                    },
                    Err(Errno::ENOENT) => {}
                    Err(e) => return Err(what()(e)),
                }
                self.forget(&path);
            }
            Record::Unstage { fid, path } => {
                let (p, name) = split(&path);
                let what = || fs(format!("moving {} into place", show(&path)));
                let d = self.dir(p).await.map_err(what())?;
                let flags = rename_flags::NOREPLACE;
                self.forget(&path);
                match cl.rename(&c, self.stage, staged(fid), d, name, flags).await {
                    Ok(()) | Err(Errno::ENOENT) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(what()(e)),
                }
            }
            Record::Mkdir { path, perm, place } => {
                let (p, name) = split(&path);
                let what = || fs(format!("making directory {}", show(&path)));
                let d = self.dir(p).await.map_err(what())?;
                let here = cl.router().mdt_of(d).await.map_err(what())?.index;
                let count = place.count.clamp(1, self.mdts.len().max(1) as u32);
                let mdt = if self.mdts.contains(&place.mdt) {
                    place.mdt
                } else {
                    here
                };
                let made = if count > 1 || mdt != here {
                    let stripe = DirStripe {
                        count,
                        start_mdt: mdt as i32,
                    };
                    cl.mkdir_striped(&c, d, name, perm, stripe).await
                } else {
                    cl.mkdir(&c, d, name, perm).await
                };
                let fid = match made {
                    Ok(a) => a.fid,
                    Err(Errno::EEXIST) => {
                        let (a, _) = cl.lookup(&c, d, name).await.map_err(what())?;
                        if a.kind != FileKind::Dir {
                            self.remove(d, name).await.map_err(what())?;
                            return Box::pin(self.apply(Record::Mkdir { path, perm, place })).await;
                        }
                        a.fid
                    }
                    Err(e) => return Err(what()(e)),
                };
                self.dirs.insert(path.clone(), fid);
            }
            Record::Create {
                path,
                kind,
                perm,
                rdev,
                layout,
            } => {
                let (p, name) = split(&path);
                let what = || fs(format!("making {}", show(&path)));
                let d = self.dir(p).await.map_err(what())?;
                if let Some(l) = &layout {
                    self.made_as(d, l).await.map_err(what())?;
                }
                let made = match cl.create(&c, d, name, kind, perm, rdev, None).await {
                    Ok(made) => made,
                    Err(Errno::EEXIST) => {
                        let found = cl.lookup(&c, d, name).await.map_err(what())?;
                        if found.0.kind == kind {
                            found
                        } else {
                            self.remove(d, name).await.map_err(what())?;
                            self.forget(&path);
                            cl.create(&c, d, name, kind, perm, rdev, None)
                                .await
                                .map_err(what())?
                        }
                    }
                    Err(e) => return Err(what()(e)),
                };
                self.known.insert(path.clone(), made);
            }
            Record::Symlink { path, target } => {
                let (p, name) = split(&path);
                let what = || fs(format!("making symbolic link {}", show(&path)));
                let d = self.dir(p).await.map_err(what())?;
                match cl.symlink(&c, d, name, &target).await {
                    Ok(_) => {}
                    Err(Errno::EEXIST) => {
                        let (a, _) = cl.lookup(&c, d, name).await.map_err(what())?;
                        let same = a.kind == FileKind::Symlink
                            && cl.readlink(&c, a.fid).await.map_err(what())?.as_bytes() == target;
                        if !same {
                            self.remove(d, name).await.map_err(what())?;
                            cl.symlink(&c, d, name, &target).await.map_err(what())?;
                        }
                    }
                    Err(e) => return Err(what()(e)),
                }
            }
            Record::Link { path, to } => {
                let (p, name) = split(&path);
                let what = || fs(format!("linking {} to {}", show(&path), show(&to)));
                let target = self.node(&to).await.map_err(what())?;
                let d = self.dir(p).await.map_err(what())?;
                match cl.link(&c, target.fid, d, name).await {
                    Ok(_) => {}
                    Err(Errno::EEXIST) => {
                        let (a, _) = cl.lookup(&c, d, name).await.map_err(what())?;
                        if a.fid != target.fid {
                            self.remove(d, name).await.map_err(what())?;
                            cl.link(&c, target.fid, d, name).await.map_err(what())?;
                        }
                    }
                    Err(e) => return Err(what()(e)),
                }
            }
            Record::Open { path, size } => {
                self.close_file().await?;
                let what = || fs(format!("writing {}", show(&path)));
                let (a, layout) = self.node_and_layout(&path).await.map_err(what())?;
                // Cut now, before the writes; grown at the close, if the
                // writes do not reach the size.
                let mut now = a.size;
                if size < a.size {
                    let set = SetAttr {
                        size: Some(size),
                        ..SetAttr::default()
                    };
                    cl.setattr(&c, a.fid, set).await.map_err(what())?;
                    now = size;
                }
                let layout = match layout {
                    Some(l) => l,
                    None => cl.get_layout_as(&c, a.fid).await.map_err(what())?,
                };
                let file = cl.open_as(&c, a.fid, layout, now);
                self.open = Some(Open {
                    path,
                    file,
                    size,
                    writes: tokio::task::JoinSet::new(),
                });
            }
            Record::Data { offset, bytes } => {
                let Some(o) = &mut self.open else {
                    return Err(SendError::Refused("a data record before its file".into()));
                };
                while o.writes.len() >= WRITES_IN_FLIGHT {
                    if let Some(r) = o.writes.join_next().await {
                        r.map_err(|e| SendError::Refused(format!("a write failed: {e}")))?
                            .map_err(fs(format!("writing {}", show(&o.path))))?;
                    }
                }
                let f = o.file.clone();
                let n = bytes.len() as u64;
                o.writes.spawn(async move { f.write(offset, &bytes).await });
                self.data += n;
            }
            Record::Zero { offset, len } => {
                let Some(o) = &mut self.open else {
                    return Err(SendError::Refused("a data record before its file".into()));
                };
                o.landed().await?;
                o.file
                    .fallocate(Allocation::Punch, offset, len, true)
                    .await
                    .map_err(fs(format!("punching {}", show(&o.path))))?;
            }
            Record::Xattrs { path, set } => {
                let what = || {
                    fs(format!(
                        "setting the extended attributes of {}",
                        show(&path)
                    ))
                };
                let fid = self.node(&path).await.map_err(what())?.fid;
                let have = cl.listxattr(&c, fid).await.map_err(what())?;
                for n in have {
                    if !set.iter().any(|(k, _)| k.as_slice() == n.as_bytes()) {
                        match cl.removexattr(&c, fid, n.as_bytes()).await {
                            Ok(()) | Err(Errno::ENODATA) => {}
                            Err(e) => return Err(what()(e)),
                        }
                    }
                }
                for (k, v) in &set {
                    cl.setxattr(&c, fid, k, v, 0).await.map_err(what())?;
                }
            }
            Record::DirDefaults {
                path,
                layout,
                compress,
                dirs,
            } => {
                let what = || fs(format!("setting the defaults of {}", show(&path)));
                let fid = self.dir(&path).await.map_err(what())?;
                let layout = layout.map(|l| self.fit_layout(l));
                cl.set_default_layout_as(&c, fid, layout)
                    .await
                    .map_err(what())?;
                cl.set_default_compress_as(&c, fid, compress)
                    .await
                    .map_err(what())?;
                let dirs = dirs.map(|mut d| {
                    // MDTs this file system lacks: round robin instead.
                    if !d.mdts.iter().all(|m| self.mdts.contains(m)) {
                        d.mdts.clear();
                    }
                    d.count = d.count.clamp(1, self.mdts.len().max(1) as u32);
                    d
                });
                cl.set_dir_default_as(&c, fid, dirs).await.map_err(what())?;
                self.made_with.remove(&fid);
            }
            Record::Attr {
                path,
                uid,
                gid,
                perm,
                atime,
                mtime,
            } => {
                let what = || {
                    fs(format!(
                        "setting the owner, mode and times of {}",
                        show(&path)
                    ))
                };
                let a = self.node(&path).await.map_err(what())?;
                let link = a.kind == FileKind::Symlink;
                if (a.uid, a.gid) != (uid, gid) {
                    let set = SetAttr {
                        uid: Some(uid),
                        gid: Some(gid),
                        ..SetAttr::default()
                    };
                    cl.setattr(&c, a.fid, set).await.map_err(what())?;
                }
                let set = SetAttr {
                    perm: (!link).then_some(perm),
                    atime: Some(SetTime::At(atime)),
                    mtime: Some(SetTime::At(mtime)),
                    ..SetAttr::default()
                };
                cl.setattr(&c, a.fid, set).await.map_err(what())?;
            }
        }
        Ok(())
    }

    /// A directory default's stripe counts cut to this file system's OSTs.
    fn fit_layout(&self, mut l: LayoutSpec) -> LayoutSpec {
        for comp in &mut l.components {
            if !comp.on_mdt && comp.stripe.count > self.osts as i32 {
                comp.stripe.count = self.osts as i32;
            }
        }
        l
    }
}

/// Remove everything under directory `dir`.
async fn remove_tree(client: &Client, c: &Caller, dir: Fid) -> Result<(), Errno> {
    loop {
        let (entries, _) = client.readdir(c, dir, 0, 1024).await?;
        let names: Vec<_> = entries
            .into_iter()
            .filter(|e| e.name.as_bytes() != b"." && e.name.as_bytes() != b"..")
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        for e in names {
            if e.attr.kind == FileKind::Dir {
                Box::pin(remove_tree(client, c, e.attr.fid)).await?;
                client.rmdir(c, dir, e.name.as_bytes()).await?;
            } else {
                client.unlink(c, dir, e.name.as_bytes()).await?;
            }
        }
    }
}

/// Directory `name` in `parent`, made if missing.
async fn ensure_dir(client: &Client, c: &Caller, parent: Fid, name: &[u8]) -> Result<Fid, Errno> {
    match client.mkdir(c, parent, name, 0o700).await {
        Ok(a) => Ok(a.fid),
        Err(Errno::EEXIST) => {
            let (a, _) = client.lookup(c, parent, name).await?;
            if a.kind != FileKind::Dir {
                return Err(Errno::ENOTDIR);
            }
            Ok(a.fid)
        }
        Err(e) => Err(e),
    }
}

/// A small file's contents, `None` if it is missing.
async fn read_small(
    client: &Arc<Client>,
    c: &Caller,
    dir: Fid,
    name: &str,
) -> Result<Option<String>, Errno> {
    let (a, layout) = match client.lookup(c, dir, name).await {
        Ok(x) => x,
        Err(Errno::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    };
    let layout = match layout {
        Some(l) => l,
        None => client.get_layout_as(c, a.fid).await?,
    };
    let f = client.open_as(c, a.fid, layout, a.size);
    let bytes = f.read(0, STATE_LEN.max(a.size as usize)).await?;
    Ok(Some(
        String::from_utf8_lossy(&bytes)
            .trim_end_matches(['\0', '\n', ' '])
            .to_string(),
    ))
}

/// Write `text` as small file `name` in `dir`, durably.
async fn write_small(
    client: &Arc<Client>,
    c: &Caller,
    dir: Fid,
    name: &str,
    text: &str,
) -> Result<(), Errno> {
    let a = match client
        .create(c, dir, name, FileKind::File, 0o600, 0, None)
        .await
    {
        Ok((a, _)) => a,
        Err(Errno::EEXIST) => client.lookup(c, dir, name).await?.0,
        Err(e) => return Err(e),
    };
    let mut bytes = text.as_bytes().to_vec();
    bytes.resize(bytes.len().max(STATE_LEN), 0);
    if a.size > bytes.len() as u64 {
        let set = SetAttr {
            size: Some(bytes.len() as u64),
            ..SetAttr::default()
        };
        client.setattr(c, a.fid, set).await?;
    }
    let layout = client.get_layout_as(c, a.fid).await?;
    let f = client.open_as(c, a.fid, layout, bytes.len() as u64);
    f.write(0, &bytes).await?;
    f.fsync().await
}

/// What tree `into` holds of the receives into it.
#[derive(Clone, Debug, Default)]
pub struct ReceiveState {
    /// The last snapshot received whole: its guid ([`SnapRef::guid`])
    /// and name.
    ///
    /// [`SnapRef::guid`]: super::format::SnapRef::guid
    pub last: Option<(String, String)>,
    /// A receive that stopped part way: its stream and records applied.
    pub unfinished: Option<(String, u64)>,
}

/// The receive state of tree `into` (a path of `client`'s file system).
pub async fn receive_state(
    client: &Arc<Client>,
    c: &Caller,
    into: &[u8],
) -> Result<ReceiveState, SendError> {
    let (keep, _) = keep_at(client, c, into).await?;
    let (last, state) = kept_state(client, c, &keep).await?;
    Ok(ReceiveState {
        last,
        unfinished: state.map(|cp| (cp.stream, cp.records)),
    })
}

/// The last snapshot received whole (guid and name) and the checkpoint
/// of a receive under way, as kept beside a tree.
async fn kept_state(
    client: &Arc<Client>,
    c: &Caller,
    keep: &Keep,
) -> Result<(Option<(String, String)>, Option<Checkpoint>), SendError> {
    let what = |x: &str| fs(format!("reading the receive's {x}"));
    let ledger = read_small(client, c, keep.dir, "ledger")
        .await
        .map_err(what("ledger"))?;
    let state = read_small(client, c, keep.dir, "state")
        .await
        .map_err(what("state"))?;
    let last = ledger.and_then(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["received", guid, name, ..] => Some((guid.to_string(), name.to_string())),
            _ => None,
        }
    });
    Ok((last, state.as_deref().and_then(Checkpoint::parse)))
}

/// Note `text` as `name` beside tree `into` (a replication's status).
pub async fn write_note(
    client: &Arc<Client>,
    c: &Caller,
    into: &[u8],
    name: &str,
    text: &str,
) -> Result<(), SendError> {
    let (keep, _) = keep_at(client, c, into).await?;
    write_small(client, c, keep.dir, &format!("note.{name}"), text)
        .await
        .map_err(fs(format!("writing the note {name}")))
}

/// The note `name` beside tree `into`, if any.
pub async fn read_note(
    client: &Arc<Client>,
    c: &Caller,
    into: &[u8],
    name: &str,
) -> Result<Option<String>, SendError> {
    let (keep, _) = keep_at(client, c, into).await?;
    read_small(client, c, keep.dir, &format!("note.{name}"))
        .await
        .map_err(fs(format!("reading the note {name}")))
}

/// The receive's files beside tree `into` (a path), and its attributes.
async fn keep_at(client: &Arc<Client>, c: &Caller, into: &[u8]) -> Result<(Keep, Attr), SendError> {
    let attr = client
        .resolve_path_as(c, into)
        .await
        .map_err(fs(format!("finding {}", show(into))))?;
    if attr.kind != FileKind::Dir {
        return Err(SendError::Refused(format!(
            "{} is not a directory",
            show(into)
        )));
    }
    let keep = keep_for(client, c, attr.fid)
        .await
        .map_err(fs(format!("making {}", String::from_utf8_lossy(STATE_DIR))))?;
    Ok((keep, attr))
}

/// The receive's files beside tree `into`.
struct Keep {
    dir: Fid,
    stage: Fid,
}

async fn keep_for(client: &Client, c: &Caller, into: Fid) -> Result<Keep, Errno> {
    let root = client.root().await?;
    let top = ensure_dir(client, c, root, STATE_DIR).await?;
    let dir = ensure_dir(client, c, top, staged(into).as_bytes()).await?;
    let stage = ensure_dir(client, c, dir, b"stage").await?;
    Ok(Keep { dir, stage })
}

/// Whether `dir` holds nothing but a receive's state.
async fn is_empty(client: &Client, c: &Caller, dir: Fid) -> Result<bool, Errno> {
    let (entries, _) = client.readdir(c, dir, 0, 8).await?;
    Ok(entries
        .iter()
        .all(|e| matches!(e.name.as_bytes(), b"." | b"..") || e.name.as_bytes() == STATE_DIR))
}

/// How a receive ends.
pub struct ReceiveOptions {
    /// The tree received into: a directory's path in the receiving file
    /// system ('/'-joined from its root).
    pub into: Vec<u8>,
    /// Take a snapshot of the sent one's name once applied.
    pub snapshot: bool,
    /// Longest write barrier of that snapshot.
    pub barrier: Duration,
}

/// Apply the stream on `input` to `opts.into`, as `c` (root), resuming a
/// receive of the same stream that stopped. `step` is told of progress.
pub async fn receive<R: Read>(
    client: &Arc<Client>,
    c: &Caller,
    input: R,
    opts: &ReceiveOptions,
    mut step: impl FnMut(Step, &Received),
) -> Result<Received, SendError> {
    let mut rd = Reader::new(input)?;
    let header = match rd.next_record()? {
        Some(Record::Header(h)) => h,
        _ => {
            return Err(StreamError::Damaged(0, "the first record is not the header".into()).into())
        }
    };
    if header.version > VERSION {
        return Err(SendError::Refused(format!(
            "the stream is of format {}, this build reads up to {VERSION}: upgrade the receiver",
            header.version
        )));
    }
    let mut got = Received {
        header: Some(header.clone()),
        ..Received::default()
    };
    let (keep, into) = keep_at(client, c, &opts.into).await?;
    let (last, state) = kept_state(client, c, &keep).await?;
    let last = last.map(|(guid, _)| guid);
    let id = stream_id(&header);
    let resume = match state {
        Some(cp) if cp.stream == id => Some(cp),
        Some(cp) => {
            return Err(SendError::Refused(format!(
                "another receive into {} stopped part way (stream {}): send that stream again to finish it",
                show(&opts.into),
                cp.stream
            )))
        }
        None => None,
    };
    if resume.is_none() {
        if last.as_deref() == Some(&header.snapshot.guid()) {
            // Applied whole before; only its snapshot may be missing. The
            // stream is read to its end (and checked), so a sender piped
            // here ends well too.
            while rd.next_record()?.is_some() {
                got.records = rd.records();
                step(Step::Skip, &got);
            }
            got.stream = rd.bytes();
            got.already = true;
            return finish(client, c, &keep, &header, opts, got).await;
        }
        match &header.base {
            Some(b) if last.as_deref() != Some(&b.guid()) => {
                return Err(SendError::Refused(format!(
                    "the stream builds on snapshot {} ({}), which {} did not receive last ({})",
                    b.name,
                    b.guid(),
                    show(&opts.into),
                    last.as_deref().unwrap_or("none received")
                )))
            }
            Some(_) => {}
            None => {
                if !is_empty(client, c, into.fid)
                    .await
                    .map_err(fs(format!("listing {}", show(&opts.into))))?
                {
                    return Err(SendError::Refused(format!(
                        "{} is not empty: a whole stream is received into an empty directory",
                        show(&opts.into)
                    )));
                }
            }
        }
    }
    let cfg = client.router().config();
    let mut ap = Applier {
        client,
        c: c.clone(),
        into: into.fid,
        stage: keep.stage,
        dirs: HashMap::from([(Vec::new(), into.fid)]),
        known: HashMap::new(),
        made_with: HashMap::new(),
        open: None,
        mdts: cfg.indices(Role::Mdt),
        osts: cfg.indices(Role::Ost).len().max(1),
        data: 0,
    };
    // Records applied before, read again and checked, not applied.
    let skip = resume.as_ref().map_or(0, |cp| cp.records);
    let mut reopen: Option<Record> = None;
    while rd.records() < skip {
        match rd.next_record()? {
            Some(r @ Record::Open { .. }) => reopen = Some(r),
            Some(Record::Phase(_)) => reopen = None,
            Some(_) => {}
            None => break,
        }
        got.records = rd.records();
        step(Step::Skip, &got);
    }
    if let Some(cp) = &resume {
        if rd.chain() != cp.chain {
            return Err(SendError::Refused(format!(
                "the stream differs from the one whose receive stopped at record {}",
                cp.records
            )));
        }
        got.resumed_at = cp.records;
        if let Some(r) = reopen {
            ap.apply(r).await?;
        }
    }
    if resume.is_none() {
        // A receive killed before its first pass ends resumes too, rather
        // than finding its tree no longer empty.
        checkpoint(&mut ap, &keep, &id, rd.records(), rd.chain()).await?;
    }
    let mut saved = Instant::now();
    loop {
        let r = match rd.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                // Keep what is applied: the same stream, sent again, resumes.
                let _ = checkpoint(&mut ap, &keep, &id, rd.records(), rd.chain()).await;
                return Err(e.into());
            }
        };
        let phase = match &r {
            Record::Phase(p) => Some(*p),
            _ => None,
        };
        ap.apply(r).await?;
        got.records = rd.records();
        got.stream = rd.bytes();
        got.data = ap.data;
        let stage = match phase {
            Some(Phase::Remove) | Some(Phase::Place) => Step::Names,
            _ => Step::Content,
        };
        step(stage, &got);
        // A pass begins only once the one before is committed: a resume
        // never runs a step of an earlier pass again.
        if phase.is_some() || saved.elapsed() >= CHECKPOINT_EVERY {
            checkpoint(&mut ap, &keep, &id, rd.records(), rd.chain()).await?;
            saved = Instant::now();
        }
    }
    ap.close_file().await?;
    client
        .sync_all()
        .await
        .map_err(fs("committing what was received"))?;
    // Staging is empty unless a resumed step moved a stray inode there.
    remove_tree(client, c, keep.stage)
        .await
        .map_err(fs("emptying the staging directory"))?;
    let line = format!(
        "received {} {}\n",
        header.snapshot.guid(),
        header.snapshot.name
    );
    write_small(client, c, keep.dir, "ledger", &line)
        .await
        .map_err(fs("recording the received snapshot"))?;
    match client.unlink(c, keep.dir, "state").await {
        Ok(()) | Err(Errno::ENOENT) => {}
        Err(e) => return Err(fs("removing the receive's state")(e)),
    }
    got.stream = rd.bytes();
    step(Step::Done, &got);
    finish(client, c, &keep, &header, opts, got).await
}

/// Commit what is applied and record how far: `records` of stream `id`,
/// whose chain there is `chain`.
async fn checkpoint(
    ap: &mut Applier<'_>,
    keep: &Keep,
    id: &str,
    records: u64,
    chain: u32,
) -> Result<(), SendError> {
    if let Some(o) = &mut ap.open {
        o.landed().await?;
        o.file.flush().await.map_err(fs("writing file data"))?;
    }
    ap.client
        .sync_all()
        .await
        .map_err(fs("committing what was received"))?;
    let cp = Checkpoint {
        stream: id.to_string(),
        records,
        chain,
    };
    write_small(ap.client, &ap.c, keep.dir, "state", &cp.line())
        .await
        .map_err(fs("recording the receive's progress"))
}

/// The received snapshot's own snapshot here, if asked and not taken yet.
async fn finish(
    client: &Arc<Client>,
    c: &Caller,
    _keep: &Keep,
    header: &Header,
    opts: &ReceiveOptions,
    got: Received,
) -> Result<Received, SendError> {
    if !opts.snapshot {
        return Ok(got);
    }
    let name = &header.snapshot.name;
    let have = client
        .snapshots(c)
        .await
        .map_err(fs("listing the snapshots"))?;
    if have.iter().any(|s| &s.name == name) {
        return Ok(got);
    }
    client
        .snapshot_create(c, name, opts.barrier)
        .await
        .map_err(fs(format!("taking snapshot {name} of the received tree")))?;
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::super::image::join;
    use super::*;

    #[test]
    fn a_checkpoint_reads_back_as_written() {
        let cp = Checkpoint {
            stream: "fs:3:1700000000+fs:2:1690000000".into(),
            records: 12345,
            chain: 0xdead_beef,
        };
        assert_eq!(Checkpoint::parse(&cp.line()), Some(cp));
        assert_eq!(Checkpoint::parse("garbage"), None);
    }

    #[test]
    fn paths_split_at_their_last_slash() {
        assert_eq!(split(b"a/b/c"), (&b"a/b"[..], &b"c"[..]));
        assert_eq!(split(b"c"), (&b""[..], &b"c"[..]));
        assert_eq!(join(b"", b"x"), b"x".to_vec());
    }
}
