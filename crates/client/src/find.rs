//! `loom find` as a client runs it: every MDT scans its own directory
//! entries at once (`MdtRequest::Find`, see `server/src/mdt/find.rs`),
//! testing names and the inodes it keeps; the client tests the few
//! entries whose inode is on another MDT, then builds each match's path
//! from the directories the scans returned, keeping only what hangs from
//! the start through directories the caller was shown. Nothing walks the
//! tree: the cost is one pass over each MDT's entries, in parallel.

use crate::client::Client;
use crate::ctx::Caller;
use crate::io::file::unexpected;
use bytes::Bytes;
use loom_proto::find::{Candidate, FindQuery};
use loom_proto::msg::{FileKind, Found, MdtRequest, Reply, Scanned, TargetId};
use loom_proto::{Errno, Fid};
use std::collections::HashMap;

/// Entries each page of a scan reads.
const PAGE: u32 = 4096;
/// Deepest tree a path is built through (a deeper one is a loop).
const MAX_DEPTH: usize = 4096;
/// Inodes on other MDTs tested at once.
const LOOKUPS_AT_ONCE: usize = 32;

/// What a find found: paths relative to its start (empty: the start
/// itself), in byte order.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FindResult {
    /// The entries every test held for.
    pub matches: Vec<Vec<u8>>,
    /// Directories below the start (or the start) the caller may not
    /// list: what is in them was not looked at, as find's "Permission
    /// denied".
    pub denied: Vec<Vec<u8>>,
    /// The inode of each match, in the same order (for the library's
    /// callers; not carried through the mount).
    #[serde(skip)]
    pub fids: Vec<Fid>,
}

/// One MDT's scan.
#[derive(Default)]
struct Scan {
    items: Vec<Found>,
    denied: Vec<Fid>,
}

impl Client {
    /// Find, as `c`, what `q` holds for at and below directory (or file)
    /// `start`, whose own name is `start_name`.
    pub async fn find_as(
        &self,
        c: &Caller,
        start: Fid,
        start_name: &[u8],
        q: &FindQuery,
    ) -> Result<FindResult, Errno> {
        let mut out = FindResult::default();
        let attr = self.getattr(c, start).await?;
        let mut found: Vec<(Vec<u8>, Fid)> = Vec::new();
        if self.test_inode(c, start, start_name, attr.kind, q).await? {
            found.push((Vec::new(), start));
        }
        if attr.kind != FileKind::Dir {
            (out.matches, out.fids) = found.into_iter().unzip();
            return Ok(out);
        }
        let scans = futures_join(self.mdts().into_iter().map(|m| self.scan(c, m, q))).await;
        let mut items = Vec::new();
        let mut denied = Vec::new();
        for s in scans {
            let s = s?;
            items.extend(s.items);
            denied.extend(s.denied);
        }
        self.test_elsewhere(c, q, &mut items).await?;
        let tree = Tree::of(&items, start);
        for it in &items {
            if it.matched != Some(true) {
                continue;
            }
            if let Some(p) = tree.path_in(it.dir, &it.name) {
                found.push((p, it.fid));
            }
        }
        for d in denied {
            if let Some(p) = tree.path(tree.master(d)) {
                out.denied.push(p);
            }
        }
        found.sort_unstable();
        (out.matches, out.fids) = found.into_iter().unzip();
        out.denied.sort_unstable();
        out.denied.dedup();
        Ok(out)
    }

    /// A page of MDT `mdt`'s catalog scan after `after` (empty: from the
    /// start): its entries with the inodes it keeps, and the cursor of
    /// the next page (`None`: the last). Root only (EPERM).
    pub async fn catalog_scan_page(
        &self,
        mdt: u32,
        after: Vec<u8>,
        max: u32,
    ) -> Result<(Vec<Scanned>, Option<Vec<u8>>), Errno> {
        let req = MdtRequest::CatalogScan { after, max };
        match self
            .mdt_admin_call(mdt, req, std::time::Duration::ZERO)
            .await?
        {
            Reply::Scanned { items, next } => Ok((items, next)),
            other => Err(unexpected("Scanned", &other)),
        }
    }

    /// Every page of MDT `mdt`'s scan.
    async fn scan(&self, c: &Caller, mdt: u32, q: &FindQuery) -> Result<Scan, Errno> {
        let mut s = Scan::default();
        let mut after = Vec::new();
        loop {
            let req = MdtRequest::Find {
                query: q.clone(),
                after: std::mem::take(&mut after),
                max: PAGE,
            };
            let (r, _) = self
                .router()
                .call(TargetId::mdt(mdt), self.ctx(c), req, Bytes::new())
                .await?;
            let Reply::Found {
                items,
                denied,
                next,
            } = r
            else {
                return Err(unexpected("Found", &r));
            };
            s.items.extend(items);
            s.denied.extend(denied);
            match next {
                Some(n) => after = n,
                None => return Ok(s),
            }
        }
    }

    /// Test the entries whose inode the scanning MDT did not keep, and
    /// learn the shards of such directories.
    async fn test_elsewhere(
        &self,
        c: &Caller,
        q: &FindQuery,
        items: &mut [Found],
    ) -> Result<(), Errno> {
        let todo: Vec<usize> = (0..items.len())
            .filter(|&i| items[i].matched.is_none())
            .collect();
        for chunk in todo.chunks(LOOKUPS_AT_ONCE) {
            let asked = chunk.iter().map(|&i| {
                let it = &items[i];
                let (fid, kind, name) = (it.fid, it.kind, it.name.clone());
                async move {
                    // Gone since the scan: as if it had not been there.
                    let hit = match self.test_inode(c, fid, name.as_bytes(), kind, q).await {
                        Ok(h) => h,
                        Err(Errno::ENOENT) => return Ok((false, Vec::new())),
                        Err(e) => return Err(e),
                    };
                    let shards = match kind {
                        FileKind::Dir => self
                            .dir_shards(c, fid)
                            .await?
                            .map(|s| s.to_vec())
                            .unwrap_or_default(),
                        _ => Vec::new(),
                    };
                    Ok((hit, shards))
                }
            });
            let answers = futures_join(asked).await;
            for (&i, a) in chunk.iter().zip(answers) {
                let (hit, shards) = a?;
                items[i].matched = Some(hit);
                items[i].shards = shards;
            }
        }
        Ok(())
    }

    /// Whether `q` holds for inode `fid`, named `name`.
    async fn test_inode(
        &self,
        c: &Caller,
        fid: Fid,
        name: &[u8],
        kind: FileKind,
        q: &FindQuery,
    ) -> Result<bool, Errno> {
        let attr = self.getattr(c, fid).await?;
        let layout = match kind {
            FileKind::File if q.needs_inode() => Some(self.get_layout_as(c, fid).await?),
            _ => None,
        };
        let mdt = self.router().mdt_of(fid).await?.index;
        Ok(q.matches(&Candidate {
            name,
            kind: attr.kind,
            attr: Some(&attr),
            layout: layout.as_ref(),
            mdt,
        }))
    }
}

/// Run futures at once on this task (they wait on the MDTs, which work
/// in parallel), their outputs in the order given.
async fn futures_join<F: std::future::Future>(fs: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut set: Vec<_> = fs.into_iter().map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = set.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (f, out) in set.iter_mut().zip(done.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *out = Some(v),
                    std::task::Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

/// The directories the scans returned: where each hangs, and the master
/// of each shard.
struct Tree<'a> {
    start: Fid,
    /// A directory: the directory object its entry is in, and its name.
    entry_of: HashMap<Fid, (Fid, &'a [u8])>,
    /// A shard: its striped directory.
    master_of: HashMap<Fid, Fid>,
    /// Paths built so far (`None`: not below the start as shown).
    paths: std::cell::RefCell<HashMap<Fid, Option<Vec<u8>>>>,
}

impl<'a> Tree<'a> {
    fn of(items: &'a [Found], start: Fid) -> Tree<'a> {
        let mut entry_of = HashMap::new();
        let mut master_of = HashMap::new();
        for it in items.iter().filter(|i| i.kind == FileKind::Dir) {
            entry_of.insert(it.fid, (it.dir, it.name.as_bytes()));
            for s in &it.shards {
                master_of.insert(*s, it.fid);
            }
        }
        Tree {
            start,
            entry_of,
            master_of,
            paths: Default::default(),
        }
    }

    /// The directory a directory object belongs to.
    fn master(&self, obj: Fid) -> Fid {
        self.master_of.get(&obj).copied().unwrap_or(obj)
    }

    /// The path of entry `name` in directory object `obj`.
    fn path_in(&self, obj: Fid, name: &loom_proto::Name) -> Option<Vec<u8>> {
        let mut p = self.path(self.master(obj))?;
        if !p.is_empty() {
            p.push(b'/');
        }
        p.extend_from_slice(name.as_bytes());
        Some(p)
    }

    /// The path of directory `dir` from the start, if it hangs from it
    /// through directories the caller was shown.
    fn path(&self, dir: Fid) -> Option<Vec<u8>> {
        // Walk up to the start or a directory already placed.
        let mut chain = Vec::new();
        let mut at = dir;
        let base = loop {
            if at == self.start {
                break Some(Vec::new());
            }
            if let Some(p) = self.paths.borrow().get(&at) {
                break p.clone();
            }
            if chain.len() > MAX_DEPTH || chain.contains(&at) {
                break None;
            }
            chain.push(at);
            match self.entry_of.get(&at) {
                Some((obj, _)) => at = self.master(*obj),
                None => break None,
            }
        };
        // Place every directory of the chain, top down.
        let mut paths = self.paths.borrow_mut();
        let mut cur = base;
        for d in chain.into_iter().rev() {
            cur = cur.map(|mut p| {
                if !p.is_empty() {
                    p.push(b'/');
                }
                if let Some((_, name)) = self.entry_of.get(&d) {
                    p.extend_from_slice(name);
                }
                p
            });
            paths.insert(d, cur.clone());
        }
        cur
    }
}
