//! `loom send`: a snapshot of a tree, whole or since an older snapshot,
//! as a stream ([`super::format`]). Both images are read through clients
//! mounted on the snapshots; what to do to names comes from
//! [`super::plan`], and only changed inodes' contents are sent: of a file
//! in both images whose size or modification time moved, only the 64 KiB
//! blocks that differ.

use super::format::{
    DirPlace, FileLayout, Header, Phase, Record, SnapRef, Writer, DATA_CHUNK, VERSION,
};
use super::image::{depth, Image};
use super::plan::{plan, NameOp};
use super::{fs, show, SendError, Step};
use crate::ctx::Caller;
use crate::Client;
use loom_proto::layout::{ComponentSpec, Layout, LayoutSpec, Pattern, StripeSpec};
use loom_proto::msg::{Attr, FileKind};
use loom_proto::{Errno, Fid};
use std::collections::VecDeque;
use std::io::Write;
use std::sync::Arc;

/// Blocks compared between two images of a file.
const BLOCK: usize = 64 << 10;

/// One image to send from: a client reading a snapshot, and its name.
pub struct Source<'a> {
    /// Reads the snapshot.
    pub client: &'a Arc<Client>,
    /// Which one.
    pub snap: SnapRef,
}

/// How far a send got.
#[derive(Clone, Debug, Default)]
pub struct Sent {
    /// Inodes sent (made or changed).
    pub inodes: u64,
    /// File bytes sent.
    pub data: u64,
    /// Stream bytes written.
    pub stream: u64,
    /// Records written.
    pub records: u64,
}

/// A file's layout as a spec a receiver can make again: stripe counts
/// and sizes per component, not which OSTs.
pub fn layout_spec(l: &Layout) -> LayoutSpec {
    LayoutSpec {
        components: l
            .components
            .iter()
            .map(|c| match &c.pattern {
                Pattern::Raid0 {
                    stripe_size,
                    objects,
                } => ComponentSpec {
                    end: c.end,
                    on_mdt: false,
                    stripe: StripeSpec {
                        count: objects.len() as i32,
                        size: *stripe_size,
                        start_ost: -1,
                        pool: None,
                    },
                },
                _ => ComponentSpec {
                    end: c.end,
                    on_mdt: true,
                    stripe: StripeSpec::default(),
                },
            })
            .collect(),
    }
}

/// Send `new` (the tree at `tree` in it), whole or, with `old`, what
/// changed since, to `out`, as `c`. `step` is told of progress.
pub async fn send<W: Write>(
    new: Source<'_>,
    old: Option<Source<'_>>,
    tree: &[u8],
    c: &Caller,
    out: W,
    mut step: impl FnMut(Step, &Sent),
) -> Result<Sent, SendError> {
    let mut sent = Sent::default();
    let root = new
        .client
        .resolve_path_as(c, tree)
        .await
        .map_err(fs(format!(
            "finding {} in snapshot {}",
            show(tree),
            new.snap.name
        )))?;
    if root.kind != FileKind::Dir {
        return Err(SendError::Refused(format!(
            "{} is not a directory",
            show(tree)
        )));
    }
    let new_img = scan(new.client, c, root.fid, &new.snap.name, &mut step).await?;
    let old_img = match &old {
        Some(o) => {
            let at = o.client.resolve_path_as(c, tree).await.map_err(fs(format!(
                "finding {} in snapshot {}",
                show(tree),
                o.snap.name
            )))?;
            if at.fid != root.fid {
                return Err(SendError::Refused(format!(
                    "{} is not the same directory in snapshots {} and {}",
                    show(tree),
                    o.snap.name,
                    new.snap.name
                )));
            }
            scan(o.client, c, root.fid, &o.snap.name, &mut step).await?
        }
        None => Image::empty(root.fid, root.clone()),
    };
    let p = plan(&old_img, &new_img, old.is_none());

    let mut w = Writer::new(out)?;
    w.put(&Record::Header(Header {
        version: VERSION,
        snapshot: new.snap.clone(),
        base: old.as_ref().map(|o| o.snap.clone()),
        tree: tree.to_vec(),
    }))?;
    let sync = |w: &Writer<W>, sent: &mut Sent| {
        sent.records = w.records();
        sent.stream = w.bytes();
    };
    w.put(&Record::Phase(Phase::Remove))?;
    for op in &p.remove {
        let r = match op {
            NameOp::Stage(path, fid) => Record::Stage {
                path: path.clone(),
                fid: *fid,
            },
            NameOp::Unlink(path) => Record::Unlink { path: path.clone() },
            NameOp::Rmdir(path) => Record::Rmdir { path: path.clone() },
            _ => continue,
        };
        w.put(&r)?;
    }
    w.put(&Record::Phase(Phase::Place))?;
    for op in &p.place {
        let r = match op {
            NameOp::Unstage(fid, path) => Record::Unstage {
                fid: *fid,
                path: path.clone(),
            },
            NameOp::Link(path, to) => Record::Link {
                path: path.clone(),
                to: to.clone(),
            },
            NameOp::Make(fid, path) => {
                let Some(node) = new_img.nodes.get(fid) else {
                    continue;
                };
                make(new.client, c, &node.attr, path).await?
            }
            _ => continue,
        };
        w.put(&r)?;
        sync(&w, &mut sent);
        step(Step::Names, &sent);
    }

    w.put(&Record::Phase(Phase::Content))?;
    // What each changed inode needs read is fetched ahead, WINDOW inodes
    // at a time, while the records go out in order: one round trip after
    // another per inode would leave the servers idle.
    let mut ahead: VecDeque<tokio::task::JoinHandle<Result<Fetched, SendError>>> = VecDeque::new();
    let mut next = 0;
    for (fid, path) in &p.changed {
        while next < p.changed.len() && ahead.len() < WINDOW {
            let (f, pth) = &p.changed[next];
            next += 1;
            let (Some(node), before) = (
                new_img.nodes.get(f),
                old_img.nodes.get(f).map(|n| n.attr.clone()),
            ) else {
                ahead.push_back(tokio::spawn(async { Ok(Fetched::default()) }));
                continue;
            };
            let job = FetchJob {
                client: new.client.clone(),
                prior: old.as_ref().map(|o| o.client.clone()),
                c: c.clone(),
                attr: node.attr.clone(),
                before,
                path: pth.clone(),
            };
            ahead.push_back(tokio::spawn(job.run()));
        }
        let fetched = match ahead.pop_front() {
            Some(h) => h
                .await
                .map_err(|e| SendError::Refused(format!("a read ahead failed: {e}")))??,
            None => Fetched::default(),
        };
        let Some(node) = new_img.nodes.get(fid) else {
            continue;
        };
        let before = old_img.nodes.get(fid).map(|n| &n.attr);
        let a = &node.attr;
        if let Some(l) = fetched.layout {
            w.put(&Record::Open {
                path: path.clone(),
                size: a.size,
            })?;
            match fetched.data {
                Some((now, then)) => emit_blocks(0, &now, &then, &mut w, &mut sent)?,
                None => {
                    let prior = old.as_ref().zip(before);
                    file_data(new.client, l, prior, c, a, path, &mut w, &mut sent).await?
                }
            }
        }
        if let Some(r) = fetched.defaults {
            w.put(&r)?;
        }
        // Always, even empty: a new inode may have inherited a default
        // ACL on the receiver that it did not have here.
        w.put(&Record::Xattrs {
            path: path.clone(),
            set: fetched.xattrs,
        })?;
        sent.inodes += 1;
        sync(&w, &mut sent);
        step(Step::Content, &sent);
    }

    w.put(&Record::Phase(Phase::Attrs))?;
    let mut by_depth: Vec<&(Fid, Vec<u8>)> = p.changed.iter().collect();
    by_depth.sort_by(|a, b| depth(&b.1).cmp(&depth(&a.1)).then_with(|| a.1.cmp(&b.1)));
    for (fid, path) in by_depth {
        let Some(node) = new_img.nodes.get(fid) else {
            continue;
        };
        let a = &node.attr;
        w.put(&Record::Attr {
            path: path.clone(),
            uid: a.uid,
            gid: a.gid,
            perm: a.perm,
            atime: a.atime,
            mtime: a.mtime,
        })?;
    }
    sync(&w, &mut sent);
    w.finish()?;
    sent.records += 1;
    step(Step::Done, &sent);
    Ok(sent)
}

/// Walk `client`'s image of the tree at `root`, telling `step`.
async fn scan(
    client: &Client,
    c: &Caller,
    root: Fid,
    name: &str,
    step: &mut impl FnMut(Step, &Sent),
) -> Result<Image, SendError> {
    let mut scanned = Sent::default();
    Image::walk(client, c, root, |n| {
        scanned.inodes = n;
        step(Step::Scan, &scanned);
    })
    .await
    .map_err(fs(format!("reading snapshot {name}")))
}

/// The record that makes inode `a` at `path`.
async fn make(
    client: &Arc<Client>,
    c: &Caller,
    a: &Attr,
    path: &[u8],
) -> Result<Record, SendError> {
    let path = path.to_vec();
    let what = || fs(format!("reading {}", show(&path)));
    Ok(match a.kind {
        FileKind::Dir => {
            let count = match client.dir_shards(c, a.fid).await.map_err(what())? {
                Some(s) => s.len() as u32,
                None => 1,
            };
            let mdt = client.router().mdt_of(a.fid).await.map_err(what())?.index;
            Record::Mkdir {
                perm: a.perm,
                place: DirPlace { count, mdt },
                path,
            }
        }
        FileKind::Symlink => Record::Symlink {
            target: client
                .readlink(c, a.fid)
                .await
                .map_err(what())?
                .as_bytes()
                .to_vec(),
            path,
        },
        FileKind::File => {
            let l = client.get_layout_as(c, a.fid).await.map_err(what())?;
            Record::Create {
                kind: a.kind,
                perm: a.perm,
                rdev: 0,
                layout: Some(FileLayout {
                    spec: layout_spec(&l),
                    compress: l.compress,
                }),
                path,
            }
        }
        kind => Record::Create {
            kind,
            perm: a.perm,
            rdev: a.rdev,
            layout: None,
            path,
        },
    })
}

/// `fid`'s extended attributes, ACLs among them, by name.
async fn xattrs(
    client: &Client,
    c: &Caller,
    fid: Fid,
    path: &[u8],
) -> Result<Vec<(Vec<u8>, Vec<u8>)>, SendError> {
    let what = || fs(format!("reading the extended attributes of {}", show(path)));
    let mut names = client.listxattr(c, fid).await.map_err(what())?;
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        match client.getxattr(c, fid, n.as_bytes()).await {
            Ok(v) => out.push((n.as_bytes().to_vec(), v)),
            // Gone between the list and the read: not in the image.
            Err(Errno::ENODATA) => {}
            Err(e) => return Err(what()(e)),
        }
    }
    Ok(out)
}

/// Inodes whose reads run ahead of the records being written.
const WINDOW: usize = 32;
/// A chunk of a file read ahead: its bytes now and in the older image.
type ChunkRead = tokio::task::JoinHandle<Result<(Vec<u8>, Vec<u8>), Errno>>;

/// Chunks of a large file read at once.
const CHUNKS_AHEAD: usize = 4;
/// Files up to this size are read whole ahead.
const SMALL: u64 = 1 << 20;

/// What the Content pass sends of one inode, read ahead.
#[derive(Default)]
struct Fetched {
    /// A regular file whose data goes: its layout.
    layout: Option<Layout>,
    /// A small file's bytes now and in the older image, read whole.
    data: Option<(Vec<u8>, Vec<u8>)>,
    /// A directory's defaults record.
    defaults: Option<Record>,
    /// Its extended attributes.
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// One inode to read ahead.
struct FetchJob {
    client: Arc<Client>,
    prior: Option<Arc<Client>>,
    c: Caller,
    attr: Attr,
    before: Option<Attr>,
    path: Vec<u8>,
}

impl FetchJob {
    async fn run(self) -> Result<Fetched, SendError> {
        let (a, c, cl, path) = (&self.attr, &self.c, &self.client, &self.path);
        let mut out = Fetched {
            xattrs: xattrs(cl, c, a.fid, path).await?,
            ..Fetched::default()
        };
        let what = || fs(format!("reading {}", show(path)));
        match a.kind {
            FileKind::File => {
                let same = self
                    .before
                    .as_ref()
                    .is_some_and(|b| b.size == a.size && b.mtime == a.mtime);
                if same {
                    return Ok(out);
                }
                let layout = cl.get_layout_as(c, a.fid).await.map_err(what())?;
                if a.size <= SMALL {
                    let now = cl
                        .open_as(c, a.fid, layout.clone(), a.size)
                        .read(0, a.size as usize)
                        .await
                        .map_err(what())?;
                    let then = match (&self.prior, &self.before) {
                        (Some(p), Some(b)) if b.size > 0 => {
                            let l = p.get_layout_as(c, b.fid).await.map_err(what())?;
                            p.open_as(c, b.fid, l, b.size)
                                .read(0, b.size.min(SMALL) as usize)
                                .await
                                .map_err(what())?
                        }
                        _ => Vec::new(),
                    };
                    out.data = Some((now, then));
                }
                out.layout = Some(layout);
            }
            FileKind::Dir => {
                let what = || fs(format!("reading the defaults of {}", show(path)));
                out.defaults = Some(Record::DirDefaults {
                    path: path.clone(),
                    layout: cl.get_default_layout_as(c, a.fid).await.map_err(what())?,
                    compress: cl.get_default_compress(c, a.fid).await.map_err(what())?,
                    dirs: cl.get_dir_default(c, a.fid).await.map_err(what())?,
                });
            }
            _ => {}
        }
        Ok(out)
    }
}

/// The records for bytes `now` at `off` of a file whose older image held
/// `then` there: runs of blocks that differ, and not zeros the receiver
/// already reads (a hole of a new file, or past the older end), which a
/// block of zeros that was not is punched to.
fn emit_blocks<W: Write>(
    off: u64,
    now: &[u8],
    then: &[u8],
    w: &mut Writer<W>,
    sent: &mut Sent,
) -> Result<(), SendError> {
    let mut i = 0;
    while i < now.len() {
        let end = (i + BLOCK).min(now.len());
        let block = &now[i..end];
        let old = then.get(i..end.min(then.len())).unwrap_or(&[]);
        let zero = block.iter().all(|&b| b == 0);
        let same = old == block || (zero && old.iter().all(|&b| b == 0));
        if same {
            i = end;
            continue;
        }
        if zero {
            w.put(&Record::Zero {
                offset: off + i as u64,
                len: (end - i) as u64,
            })?;
            i = end;
            continue;
        }
        // Extend the run over the following differing, non-zero blocks.
        let mut j = end;
        while j < now.len() {
            let e = (j + BLOCK).min(now.len());
            let b = &now[j..e];
            let o = then.get(j..e.min(then.len())).unwrap_or(&[]);
            if b == o || b.iter().all(|&x| x == 0) {
                break;
            }
            j = e;
        }
        w.put(&Record::Data {
            offset: off + i as u64,
            bytes: now[i..j].to_vec(),
        })?;
        sent.data += (j - i) as u64;
        i = j;
    }
    Ok(())
}

/// Send regular file `a`'s bytes: all but its holes (blocks of zeros),
/// or, with `prior` (its older image's client and attributes), the blocks
/// that differ from it.
#[allow(clippy::too_many_arguments)]
async fn file_data<W: Write>(
    client: &Arc<Client>,
    layout: Layout,
    prior: Option<(&Source<'_>, &Attr)>,
    c: &Caller,
    a: &Attr,
    path: &[u8],
    w: &mut Writer<W>,
    sent: &mut Sent,
) -> Result<(), SendError> {
    let what = || fs(format!("reading {}", show(path)));
    let f = client.open_as(c, a.fid, layout, a.size);
    let before = match prior {
        Some((src, b)) => {
            let l = src.client.get_layout_as(c, b.fid).await.map_err(what())?;
            Some((src.client.open_as(c, b.fid, l, b.size), b.size))
        }
        None => None,
    };
    // Chunks read CHUNKS_AHEAD at a time, handled in order.
    let mut reads: VecDeque<ChunkRead> = VecDeque::new();
    let mut next = 0u64;
    let mut off = 0u64;
    while off < a.size {
        while next < a.size && reads.len() < CHUNKS_AHEAD {
            let want = DATA_CHUNK.min((a.size - next) as usize);
            let (now, then) = (f.clone(), before.clone());
            let at = next;
            reads.push_back(tokio::spawn(async move {
                let n = now.read(at, want).await?;
                let t = match then {
                    Some((g, size)) if at < size => g.read(at, want).await?,
                    _ => Vec::new(),
                };
                Ok((n, t))
            }));
            next += want as u64;
        }
        let Some(h) = reads.pop_front() else {
            break;
        };
        let (now, then) = h
            .await
            .map_err(|e| SendError::Refused(format!("a read failed: {e}")))?
            .map_err(what())?;
        let want = DATA_CHUNK.min((a.size - off) as usize);
        emit_blocks(off, &now, &then, w, sent)?;
        if now.len() < want {
            break;
        }
        off += now.len() as u64;
    }
    Ok(())
}
