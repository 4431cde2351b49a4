//! What a receiver holding image `old` must do to its names to hold
//! image `new` (as btrfs send orders its operations, by inode identity:
//! the FID). Names are edges (directory, name, inode); an edge only in
//! `old` goes, one only in `new` comes. Two passes make every step valid
//! on the receiver's tree as it then is, and make each pass safe to run
//! again from any point (a resumed receive):
//!
//! * **Remove**, deepest old path first. An inode that lives on under
//!   another name and has no name left in place is moved aside to the
//!   staging directory (named by its FID) rather than removed; any other
//!   name is removed. Deepest first, so a path's parents are where
//!   `old` has them when the step runs. In this pass names only go (or
//!   go to staging): a step run again finds its name gone, or still its
//!   own inode.
//! * **Place**, shallowest new path first: a staged inode comes back at
//!   its new name, a new inode is made, and last, every further name of
//!   an inode is linked to one already in place. Names only come in
//!   this pass: a step run again finds its name taken by its own inode.
//!
//! A renamed directory is one edge gone and one come: its subtree
//! travels with it, untouched.

use super::image::{depth, Image};
use loom_proto::msg::{Attr, FileKind};
use loom_proto::Fid;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// One step on names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameOp {
    /// Move `path` to staging as `fid`.
    Stage(Vec<u8>, Fid),
    /// Remove non-directory `path`.
    Unlink(Vec<u8>),
    /// Remove directory `path` (empty by then).
    Rmdir(Vec<u8>),
    /// Move staged `fid` to `path`.
    Unstage(Fid, Vec<u8>),
    /// Make new inode `fid` at `path`.
    Make(Fid, Vec<u8>),
    /// Name `path` the inode already at the second path.
    Link(Vec<u8>, Vec<u8>),
}

/// The two passes' steps, and what to do to inodes after them.
#[derive(Debug, Default)]
pub struct Plan {
    /// The first pass.
    pub remove: Vec<NameOp>,
    /// The second.
    pub place: Vec<NameOp>,
    /// Inodes whose contents or attributes to send, with a path each
    /// has in `new`, in path order.
    pub changed: Vec<(Fid, Vec<u8>)>,
}

type Edge = (Fid, Vec<u8>, Fid);

fn edges(img: &Image) -> HashSet<Edge> {
    img.nodes
        .iter()
        .flat_map(|(fid, n)| n.names.iter().map(|(d, name)| (*d, name.clone(), *fid)))
        .collect()
}

/// Whether an inode in both images changed: any change of contents,
/// names of it, attributes or extended attributes moves its ctime.
fn differs(a: &Attr, b: &Attr) -> bool {
    (
        a.kind, a.size, a.perm, a.uid, a.gid, a.mtime, a.ctime, a.atime,
    ) != (
        b.kind, b.size, b.perm, b.uid, b.gid, b.mtime, b.ctime, b.atime,
    )
}

/// The steps from `old` to `new` (two images of the same tree; `old`
/// may be [`Image::empty`], for a full send, whose root is then sent as
/// changed).
pub fn plan(old: &Image, new: &Image, full: bool) -> Plan {
    let (eo, en) = (edges(old), edges(new));
    let mut gone: Vec<(Vec<u8>, &Edge)> = eo
        .difference(&en)
        .map(|e| (old.path(e.0, &e.1), e))
        .collect();
    gone.sort_by(|a, b| depth(&b.0).cmp(&depth(&a.0)).then_with(|| a.0.cmp(&b.0)));
    let mut staged: BTreeSet<Fid> = BTreeSet::new();
    let mut out = Plan::default();
    for (path, (_, _, fid)) in gone {
        let kind = old.nodes.get(fid).map(|n| n.attr.kind);
        match new.nodes.get(fid) {
            Some(_) if kind == Some(FileKind::Dir) => {
                staged.insert(*fid);
                out.remove.push(NameOp::Stage(path, *fid));
            }
            Some(_) => {
                let kept = old.nodes.get(fid).is_some_and(|n| {
                    n.names
                        .iter()
                        .any(|(d, name)| en.contains(&(*d, name.clone(), *fid)))
                });
                if kept || staged.contains(fid) {
                    out.remove.push(NameOp::Unlink(path));
                } else {
                    staged.insert(*fid);
                    out.remove.push(NameOp::Stage(path, *fid));
                }
            }
            None if kind == Some(FileKind::Dir) => out.remove.push(NameOp::Rmdir(path)),
            None => out.remove.push(NameOp::Unlink(path)),
        }
    }

    let mut come: Vec<(Vec<u8>, &Edge)> = en
        .difference(&eo)
        .map(|e| (new.path(e.0, &e.1), e))
        .collect();
    come.sort_by(|a, b| depth(&a.0).cmp(&depth(&b.0)).then_with(|| a.0.cmp(&b.0)));
    let mut placed: BTreeMap<Fid, Vec<u8>> = BTreeMap::new();
    let mut links = Vec::new();
    for (path, (_, _, fid)) in come {
        if placed.contains_key(fid) {
            links.push((path, *fid));
        } else if staged.contains(fid) {
            placed.insert(*fid, path.clone());
            out.place.push(NameOp::Unstage(*fid, path));
        } else if !old.nodes.contains_key(fid) {
            placed.insert(*fid, path.clone());
            out.place.push(NameOp::Make(*fid, path));
        } else {
            links.push((path, *fid));
        }
    }
    let link_paths: HashSet<&Vec<u8>> = links.iter().map(|(p, _)| p).collect();
    let mut tail = Vec::new();
    for (path, fid) in &links {
        // An inode kept a name in place, or was placed above.
        let to = placed.get(fid).cloned().or_else(|| {
            new.nodes.get(fid).and_then(|n| {
                n.names
                    .iter()
                    .map(|(d, name)| new.path(*d, name))
                    .find(|p| !link_paths.contains(p))
            })
        });
        if let Some(to) = to {
            tail.push(NameOp::Link(path.clone(), to));
        }
    }
    out.place.extend(tail);

    for (fid, n) in &new.nodes {
        let changed = match old.nodes.get(fid) {
            None => true,
            Some(o) => (full && *fid == new.root) || differs(&o.attr, &n.attr),
        };
        if changed {
            if let Some(p) = new.first_path(*fid) {
                out.changed.push((*fid, p));
            }
        }
    }
    out.changed.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_proto::msg::Time;
    use std::collections::BTreeMap as Map;

    fn attr(oid: u32, kind: FileKind, ctime: i64) -> Attr {
        Attr {
            fid: Fid::new(1, oid),
            kind,
            perm: 0o755,
            nlink: 1,
            uid: 0,
            gid: 0,
            size: 0,
            atime: Time::default(),
            mtime: Time::default(),
            ctime: Time {
                sec: ctime,
                nsec: 0,
            },
            rdev: 0,
            projid: 0,
        }
    }

    const ROOT: u32 = 1;

    /// An image from (path, oid, is dir) triples, parents first.
    fn image(v: &[(&str, u32, bool)]) -> Image {
        let mut img = Image::empty(Fid::new(1, ROOT), attr(ROOT, FileKind::Dir, 0));
        let mut by_path: Map<String, Fid> = Map::new();
        by_path.insert(String::new(), Fid::new(1, ROOT));
        for (p, oid, dir) in v {
            let (parent, name) = match p.rsplit_once('/') {
                Some((d, n)) => (d.to_string(), n),
                None => (String::new(), *p),
            };
            let kind = if *dir { FileKind::Dir } else { FileKind::File };
            img.add(by_path[&parent], name.as_bytes(), attr(*oid, kind, 0));
            by_path.insert(p.to_string(), Fid::new(1, *oid));
        }
        img
    }

    /// Apply `ops` to a model of the receiver's tree (path to oid), each
    /// checked valid as it runs: parents present, names free.
    fn apply(
        tree: &mut Map<String, u32>,
        ops: &[NameOp],
        staging: &mut Map<Fid, Vec<(String, u32)>>,
    ) {
        let s = |p: &Vec<u8>| String::from_utf8(p.clone()).expect("utf8");
        let parent_ok = |t: &Map<String, u32>, p: &str| match p.rsplit_once('/') {
            Some((d, _)) => t.contains_key(d),
            None => true,
        };
        for op in ops {
            match op {
                NameOp::Stage(p, fid) => {
                    let p = s(p);
                    assert!(tree.contains_key(&p), "stage of missing {p}");
                    let moved: Vec<(String, u32)> = tree
                        .iter()
                        .filter(|(k, _)| **k == p || k.starts_with(&format!("{p}/")))
                        .map(|(k, v)| (k[p.len()..].to_string(), *v))
                        .collect();
                    tree.retain(|k, _| !(*k == p || k.starts_with(&format!("{p}/"))));
                    staging.insert(*fid, moved);
                }
                NameOp::Unlink(p) | NameOp::Rmdir(p) => {
                    let p = s(p);
                    assert!(tree.remove(&p).is_some(), "removal of missing {p}");
                    assert!(
                        !tree.keys().any(|k| k.starts_with(&format!("{p}/"))),
                        "rmdir of non-empty {p}"
                    );
                }
                NameOp::Unstage(fid, p) => {
                    let p = s(p);
                    assert!(
                        parent_ok(tree, &p) && !tree.contains_key(&p),
                        "unstage to {p}"
                    );
                    for (rest, v) in staging.remove(fid).expect("staged") {
                        tree.insert(format!("{p}{rest}"), v);
                    }
                }
                NameOp::Make(fid, p) => {
                    let p = s(p);
                    assert!(parent_ok(tree, &p) && !tree.contains_key(&p), "make at {p}");
                    tree.insert(p, fid.oid);
                }
                NameOp::Link(p, to) => {
                    let (p, to) = (s(p), s(to));
                    assert!(parent_ok(tree, &p) && !tree.contains_key(&p), "link at {p}");
                    let v = *tree.get(&to).expect("link target in place");
                    tree.insert(p, v);
                }
            }
        }
    }

    fn model(v: &[(&str, u32, bool)]) -> Map<String, u32> {
        v.iter().map(|(p, o, _)| (p.to_string(), *o)).collect()
    }

    fn check(old: &[(&str, u32, bool)], new: &[(&str, u32, bool)]) -> Plan {
        let p = plan(&image(old), &image(new), false);
        let mut tree = model(old);
        let mut staging = Map::new();
        apply(&mut tree, &p.remove, &mut staging);
        apply(&mut tree, &p.place, &mut staging);
        assert_eq!(tree, model(new));
        assert!(staging.is_empty(), "left in staging: {staging:?}");
        p
    }

    #[test]
    fn renames_swaps_moves_under_moved_directories_and_links_replay_to_the_new_tree() {
        // A swap of two files, a directory renamed with a child moved out
        // of it, a name reused by a new inode, a dead directory holding a
        // survivor, a new hard link and a link that goes.
        let old = [
            ("a", 2, false),
            ("b", 3, false),
            ("d", 4, true),
            ("d/x", 5, false),
            ("d/y", 6, false),
            ("dead", 7, true),
            ("dead/keep", 8, false),
            ("dead/drop", 9, false),
            ("l1", 10, false),
            ("l2", 10, false),
            ("reused", 11, false),
        ];
        let new = [
            ("a", 3, false),
            ("b", 2, false),
            ("e", 4, true),
            ("e/y", 6, false),
            ("e/sub", 12, true),
            ("e/sub/x", 5, false),
            ("keep", 8, false),
            ("l1", 10, false),
            ("l3", 10, false),
            ("reused", 13, false),
            ("z", 14, false),
            ("z2", 14, false),
        ];
        let p = check(&old, &new);
        // Only what moved was touched: e/y travelled with its directory.
        let touched = |path: &str| {
            let path = path.as_bytes();
            p.remove.iter().chain(&p.place).any(|op| match op {
                NameOp::Stage(a, _)
                | NameOp::Unlink(a)
                | NameOp::Rmdir(a)
                | NameOp::Unstage(_, a)
                | NameOp::Make(_, a)
                | NameOp::Link(a, _) => a == path,
            })
        };
        assert!(touched("e/sub/x") && touched("reused"));
        assert!(!touched("e/y") && !touched("d/y") && !touched("l1"));
        // And the reverse, and a full send from nothing.
        check(&new, &old);
        check(&[], &new);
        check(&old, &[]);
    }

    #[test]
    fn a_full_plan_makes_everything_and_sends_the_root() {
        let new = image(&[("d", 2, true), ("d/f", 3, false), ("g", 3, false)]);
        let empty = Image::empty(new.root, attr(ROOT, FileKind::Dir, 0));
        let p = plan(&empty, &new, true);
        assert!(p.remove.is_empty());
        assert_eq!(
            p.place,
            vec![
                NameOp::Make(Fid::new(1, 2), b"d".to_vec()),
                NameOp::Make(Fid::new(1, 3), b"g".to_vec()),
                NameOp::Link(b"d/f".to_vec(), b"g".to_vec()),
            ]
        );
        let fids: Vec<u32> = p.changed.iter().map(|(f, _)| f.oid).collect();
        assert_eq!(fids, vec![ROOT, 2, 3]);
        // Unchanged since: nothing to send at all.
        let again = plan(&new, &new, false);
        assert!(again.remove.is_empty() && again.place.is_empty() && again.changed.is_empty());
    }
}
