//! One image of a tree (a snapshot's, as a client mounted on it reads
//! it) as the sender compares it: every inode by FID, with its names.
//! A directory has one name; a file one per hard link.

use crate::ctx::Caller;
use crate::Client;
use loom_proto::msg::{Attr, FileKind};
use loom_proto::{Errno, Fid};
use std::collections::{BTreeMap, HashMap};

/// The name at the top of a tree received into that holds a receive's
/// state (`send::receiver`): never sent, so a replica can be sent on.
pub const STATE_DIR: &[u8] = b".loom-receive";

/// An inode of the image.
#[derive(Clone, Debug)]
pub struct Node {
    /// Its attributes.
    pub attr: Attr,
    /// Its names: parent directory and name, in the order found.
    pub names: Vec<(Fid, Vec<u8>)>,
}

/// A tree's image.
#[derive(Clone, Debug)]
pub struct Image {
    /// The tree's top directory.
    pub root: Fid,
    /// Every inode under it (the root included), by FID.
    pub nodes: BTreeMap<Fid, Node>,
    /// Each directory's path from the root ('/'-joined; empty for it).
    dir_paths: HashMap<Fid, Vec<u8>>,
}

/// `dir`'s path joined with `name`.
pub fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = dir.to_vec();
    if !p.is_empty() {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// How deep `path` is: the root is 0.
pub fn depth(path: &[u8]) -> usize {
    if path.is_empty() {
        0
    } else {
        1 + path.iter().filter(|&&b| b == b'/').count()
    }
}

impl Image {
    /// An image with only its root (what a full send builds on).
    pub fn empty(root: Fid, attr: Attr) -> Image {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            root,
            Node {
                attr,
                names: Vec::new(),
            },
        );
        Image {
            root,
            nodes,
            dir_paths: HashMap::from([(root, Vec::new())]),
        }
    }

    /// Walk `client`'s image of the tree under directory `root`, as `c`
    /// (leaving out a receive's state directory at its top). `seen` is
    /// told each inode found, for progress.
    pub async fn walk(
        client: &Client,
        c: &Caller,
        root: Fid,
        mut seen: impl FnMut(u64),
    ) -> Result<Image, Errno> {
        let attr = client.getattr(c, root).await?;
        if attr.kind != FileKind::Dir {
            return Err(Errno::ENOTDIR);
        }
        let mut img = Image::empty(root, attr);
        let mut dirs = vec![root];
        let mut found = 0u64;
        while let Some(dir) = dirs.pop() {
            let path = img.dir_paths.get(&dir).cloned().unwrap_or_default();
            let mut cookie = 0;
            loop {
                let (entries, eof) = client.readdir(c, dir, cookie, 1024).await?;
                for e in &entries {
                    let name = e.name.as_bytes();
                    if name == b"." || name == b".." || (dir == root && name == STATE_DIR) {
                        continue;
                    }
                    let fid = e.attr.fid;
                    if e.attr.kind == FileKind::Dir {
                        img.dir_paths.insert(fid, join(&path, name));
                        dirs.push(fid);
                    }
                    img.nodes
                        .entry(fid)
                        .or_insert_with(|| Node {
                            attr: e.attr.clone(),
                            names: Vec::new(),
                        })
                        .names
                        .push((dir, name.to_vec()));
                    found += 1;
                    seen(found);
                }
                match (eof, entries.last()) {
                    (false, Some(last)) => cookie = last.cookie,
                    _ => break,
                }
            }
        }
        for n in img.nodes.values_mut() {
            n.names.sort();
        }
        Ok(img)
    }

    /// The path of name `name` in directory `dir` of this image.
    pub fn path(&self, dir: Fid, name: &[u8]) -> Vec<u8> {
        join(
            self.dir_paths.get(&dir).map(Vec::as_slice).unwrap_or(b""),
            name,
        )
    }

    /// `fid`'s first path (the root's is empty).
    pub fn first_path(&self, fid: Fid) -> Option<Vec<u8>> {
        if fid == self.root {
            return Some(Vec::new());
        }
        let n = self.nodes.get(&fid)?;
        n.names.first().map(|(d, name)| self.path(*d, name))
    }

    /// Add `node` under `dir` as `name` (for tests of the plan).
    #[cfg(test)]
    pub fn add(&mut self, dir: Fid, name: &[u8], attr: Attr) {
        let fid = attr.fid;
        if attr.kind == FileKind::Dir {
            let p = self.path(dir, name);
            self.dir_paths.insert(fid, p);
        }
        let n = self.nodes.entry(fid).or_insert_with(|| Node {
            attr,
            names: Vec::new(),
        });
        n.names.push((dir, name.to_vec()));
        n.names.sort();
    }
}
