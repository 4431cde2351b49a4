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
use super::{SendError, Step};
use crate::ctx::Caller;
use crate::Client;
use loom_proto::layout::{ComponentSpec, Layout, LayoutSpec, Pattern, StripeSpec};
use loom_proto::msg::{Attr, FileKind};
use loom_proto::{Errno, Fid};
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

fn fs(what: impl Into<String>) -> impl FnOnce(Errno) -> SendError {
    let what = what.into();
    move |errno| SendError::Fs { what, errno }
}

fn show(p: &[u8]) -> String {
    format!("/{}", String::from_utf8_lossy(p))
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
    for (fid, path) in &p.changed {
        let Some(node) = new_img.nodes.get(fid) else {
            continue;
        };
        let before = old_img.nodes.get(fid).map(|n| &n.attr);
        let a = &node.attr;
        match a.kind {
            FileKind::File => {
                let same_data = before.is_some_and(|b| b.size == a.size && b.mtime == a.mtime);
                if !same_data {
                    let prior = old.as_ref().zip(before);
                    file_data(new.client, prior, c, a, path, &mut w, &mut sent).await?;
                }
            }
            FileKind::Dir => {
                let cl = new.client;
                let what = || fs(format!("reading the defaults of {}", show(path)));
                w.put(&Record::DirDefaults {
                    path: path.clone(),
                    layout: cl.get_default_layout_as(c, *fid).await.map_err(what())?,
                    compress: cl.get_default_compress(c, *fid).await.map_err(what())?,
                    dirs: cl.get_dir_default(c, *fid).await.map_err(what())?,
                })?;
            }
            _ => {}
        }
        // Always, even empty: a new inode may have inherited a default
        // ACL on the receiver that it did not have here.
        let set = xattrs(new.client, c, *fid, path).await?;
        w.put(&Record::Xattrs {
            path: path.clone(),
            set,
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

/// Send regular file `a`'s bytes: all but its holes (blocks of zeros),
/// or, with `prior` (its older image's client and attributes), the blocks
/// that differ from it.
async fn file_data<W: Write>(
    client: &Arc<Client>,
    prior: Option<(&Source<'_>, &Attr)>,
    c: &Caller,
    a: &Attr,
    path: &[u8],
    w: &mut Writer<W>,
    sent: &mut Sent,
) -> Result<(), SendError> {
    let what = || fs(format!("reading {}", show(path)));
    w.put(&Record::Open {
        path: path.to_vec(),
        size: a.size,
    })?;
    let layout = client.get_layout_as(c, a.fid).await.map_err(what())?;
    let f = client.open_as(c, a.fid, layout, a.size);
    let before = match prior {
        Some((src, b)) => {
            let l = src.client.get_layout_as(c, b.fid).await.map_err(what())?;
            Some((src.client.open_as(c, b.fid, l, b.size), b.size))
        }
        None => None,
    };
    let mut off = 0u64;
    while off < a.size {
        let want = DATA_CHUNK.min((a.size - off) as usize);
        let now = f.read(off, want).await.map_err(what())?;
        let then = match &before {
            Some((g, size)) if off < *size => g.read(off, want).await.map_err(what())?,
            _ => Vec::new(),
        };
        // Runs of blocks to send: differing, and not zeros the receiver
        // already reads (a hole of a new file or past the older end).
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
        if now.len() < want {
            break;
        }
        off += now.len() as u64;
    }
    Ok(())
}
