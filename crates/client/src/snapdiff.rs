//! What changed between two images of a file system (`loom snapshot
//! diff`): each image walked from its root through a client reading it
//! (a snapshot's, or the file system's own), then compared by FID, as
//! `zfs diff` does: a name whose inode is the same but whose path
//! changed was renamed; one only in the newer image was added; one only
//! in the older was removed; one whose attributes differ was modified.

use crate::ctx::Caller;
use crate::Client;
use loom_proto::msg::Attr;
use loom_proto::{Errno, Fid};
use std::collections::BTreeMap;

/// Every name of an image: path (from the root, '/'-joined bytes) and
/// what it names.
#[derive(Debug, Default)]
pub struct Tree {
    /// Path to attributes.
    pub paths: BTreeMap<Vec<u8>, Attr>,
}

/// One difference, as `zfs diff` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Only in the newer image.
    Added(Vec<u8>),
    /// Only in the older image.
    Removed(Vec<u8>),
    /// In both, attributes or contents changed.
    Modified(Vec<u8>),
    /// The same inode under another path.
    Renamed(Vec<u8>, Vec<u8>),
}

impl Change {
    /// `zfs diff`'s line: `+ PATH`, `- PATH`, `M PATH`, `R OLD -> NEW`.
    pub fn line(&self) -> String {
        let s = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
        match self {
            Change::Added(p) => format!("+\t/{}", s(p)),
            Change::Removed(p) => format!("-\t/{}", s(p)),
            Change::Modified(p) => format!("M\t/{}", s(p)),
            Change::Renamed(a, b) => format!("R\t/{} -> /{}", s(a), s(b)),
        }
    }
}

/// Whether `a` and `b`, the same inode in two images, differ.
fn modified(a: &Attr, b: &Attr) -> bool {
    (
        a.kind, a.size, a.perm, a.uid, a.gid, a.nlink, a.mtime, a.ctime,
    ) != (
        b.kind, b.size, b.perm, b.uid, b.gid, b.nlink, b.mtime, b.ctime,
    )
}

/// Walk `client`'s image from its root, as `c` (every name of every
/// inode, as `send::image` reads it).
pub async fn walk(client: &Client, c: &Caller) -> Result<Tree, Errno> {
    let root = client.root().await?;
    let img = crate::send::image::Image::walk(client, c, root, |_| {}).await?;
    let mut t = Tree::default();
    for n in img.nodes.values() {
        for (dir, name) in &n.names {
            t.paths.insert(img.path(*dir, name), n.attr.clone());
        }
    }
    Ok(t)
}

/// Each inode's paths in `t`.
fn by_fid(t: &Tree) -> BTreeMap<Fid, Vec<&Vec<u8>>> {
    let mut m: BTreeMap<Fid, Vec<&Vec<u8>>> = BTreeMap::new();
    for (p, a) in &t.paths {
        m.entry(a.fid).or_default().push(p);
    }
    m
}

/// What changed from `old` to `new`, in path order of the newer names
/// (removals by their old path).
pub fn diff(old: &Tree, new: &Tree) -> Vec<Change> {
    let (of, nf) = (by_fid(old), by_fid(new));
    let mut out = Vec::new();
    for (p, a) in &new.paths {
        match old.paths.get(p) {
            Some(o) if o.fid == a.fid => {
                if modified(o, a) {
                    out.push(Change::Modified(p.clone()));
                }
            }
            _ => {
                // A path new for this inode: a rename if the inode had one
                // path in the older image that it no longer has.
                let gone: Vec<&&Vec<u8>> = of
                    .get(&a.fid)
                    .map(|ps| {
                        ps.iter()
                            .filter(|q| new.paths.get(**q).is_none_or(|x| x.fid != a.fid))
                            .collect()
                    })
                    .unwrap_or_default();
                match gone.as_slice() {
                    [q] if nf.get(&a.fid).is_some_and(|v| v.len() == 1) => {
                        out.push(Change::Renamed((**q).clone(), p.clone()))
                    }
                    _ => out.push(Change::Added(p.clone())),
                }
            }
        }
    }
    let renamed_from: Vec<Vec<u8>> = out
        .iter()
        .filter_map(|c| match c {
            Change::Renamed(a, _) => Some(a.clone()),
            _ => None,
        })
        .collect();
    for (p, a) in &old.paths {
        let still = new.paths.get(p).is_some_and(|x| x.fid == a.fid);
        if !still && !renamed_from.contains(p) {
            out.push(Change::Removed(p.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_proto::msg::{FileKind, Time};

    fn attr(fid: u32, size: u64) -> Attr {
        Attr {
            fid: Fid::new(1, fid),
            kind: FileKind::File,
            perm: 0o644,
            nlink: 1,
            uid: 0,
            gid: 0,
            size,
            atime: Time::default(),
            mtime: Time::default(),
            ctime: Time::default(),
            rdev: 0,
            projid: 0,
        }
    }

    fn tree(v: &[(&str, Attr)]) -> Tree {
        Tree {
            paths: v
                .iter()
                .map(|(p, a)| (p.as_bytes().to_vec(), a.clone()))
                .collect(),
        }
    }

    #[test]
    fn adds_removes_modifications_and_renames_are_told_apart() {
        let old = tree(&[
            ("kept", attr(1, 5)),
            ("changed", attr(2, 5)),
            ("gone", attr(3, 5)),
            ("d/moved", attr(4, 5)),
        ]);
        let new = tree(&[
            ("kept", attr(1, 5)),
            ("changed", attr(2, 9)),
            ("e/moved-here", attr(4, 5)),
            ("fresh", attr(5, 1)),
        ]);
        let lines: Vec<String> = diff(&old, &new).iter().map(Change::line).collect();
        assert_eq!(
            lines,
            vec![
                "M\t/changed",
                "R\t/d/moved -> /e/moved-here",
                "+\t/fresh",
                "-\t/gone",
            ]
        );
        assert!(diff(&new, &new).is_empty());
    }
}
