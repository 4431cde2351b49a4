//! A namespace transaction: the inodes an operation reads and changes,
//! gathered into one atomic batch.
//!
//! Operations run one at a time under the MDT's namespace lock, so a
//! transaction sees a stable store; it caches each inode it touches so that
//! one record changed twice (the same parent as source and target of a
//! rename) is written once, with both changes.

use super::records::{dentry_key, inode_key, DentryRec, InodeRec};
use super::remote::shown_attr;
use crate::error::ServerError;
use loom_proto::msg::{self, Effects, FileKind};
use loom_proto::Name;
use loom_proto::{Errno, Fid};
use loom_store::kv::{Batch, KvStore, Space};
use std::collections::BTreeMap;

/// A failure of the MDT's store (EIO), keeping the reason.
pub fn store_err(e: impl std::fmt::Display) -> ServerError {
    ServerError::store(format!("metadata store: {e}"))
}

/// Encode a record for the store.
pub fn encode_record<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, ServerError> {
    msg::encode(v).map_err(|e| store_err(format!("encoding a record: {}", e.msg)))
}

/// Decode a record read from the store; one that does not decode is
/// damage, not the caller's error.
pub fn decode_record<'a, T: serde::Deserialize<'a>>(b: &'a [u8]) -> Result<T, ServerError> {
    msg::decode(b).map_err(|e| store_err(format!("a stored record: {}", e.msg)))
}

/// Read an inode outside a transaction.
pub fn read_inode(store: &dyn KvStore, fid: Fid) -> Result<InodeRec, ServerError> {
    let v = store
        .get(Space::Inodes, &inode_key(fid))
        .map_err(store_err)?
        .ok_or_else(|| ServerError::refused(Errno::ENOENT, format!("no inode {fid}")))?;
    InodeRec::decode(&v).map_err(|e| store_err(format!("inode {fid}: {}", e.msg)))
}

/// Read a directory entry outside a transaction.
pub fn read_dentry(
    store: &dyn KvStore,
    dir: Fid,
    name: &Name,
) -> Result<Option<DentryRec>, ServerError> {
    match store
        .get(Space::Dentries, &dentry_key(dir, name))
        .map_err(store_err)?
    {
        None => Ok(None),
        Some(v) => {
            Ok(Some(msg::decode(&v).map_err(|e| {
                store_err(format!("entry {dir}/{name}: {}", e.msg))
            })?))
        }
    }
}

/// The changes of one operation, not yet applied.
pub struct Tx<'a> {
    store: &'a dyn KvStore,
    /// Writes that are not inode records.
    pub batch: Batch,
    inodes: BTreeMap<Fid, Option<InodeRec>>,
    /// Each touched inode as the store held it before this transaction
    /// (`None`: it did not exist): what the commit step counts against
    /// `inodes` (see `quota`).
    before: BTreeMap<Fid, Option<InodeRec>>,
    /// Names set (to an inode) or removed, in order.
    name_changes: Vec<(Fid, Name, Option<Fid>)>,
    /// Each name read or changed, as the store held it before this
    /// transaction (`None`: absent): the before-images of the names.
    names_before: BTreeMap<(Fid, Name), Option<DentryRec>>,
    /// Change in the number of inodes.
    pub inode_delta: i64,
    /// Inodes it makes.
    created: Vec<Fid>,
}

impl<'a> Tx<'a> {
    /// A new transaction on `store`.
    pub fn new(store: &'a dyn KvStore) -> Tx<'a> {
        Tx {
            store,
            batch: Batch::new(),
            inodes: BTreeMap::new(),
            before: BTreeMap::new(),
            name_changes: Vec::new(),
            names_before: BTreeMap::new(),
            inode_delta: 0,
            created: Vec::new(),
        }
    }

    /// The inode `fid`, as changed so far by this transaction.
    pub fn inode(&mut self, fid: Fid) -> Result<&mut InodeRec, ServerError> {
        if !self.inodes.contains_key(&fid) {
            let rec = read_inode(self.store, fid)?;
            self.before.entry(fid).or_insert_with(|| Some(rec.clone()));
            self.inodes.insert(fid, Some(rec));
        }
        match self.inodes.get_mut(&fid) {
            Some(Some(r)) => Ok(r),
            _ => Err(ServerError::refused(
                Errno::ENOENT,
                format!("inode {fid} was removed"),
            )),
        }
    }

    /// The directory `fid`, or ENOTDIR.
    pub fn dir(&mut self, fid: Fid) -> Result<&mut InodeRec, ServerError> {
        let r = self.inode(fid)?;
        if r.attr.kind != FileKind::Dir {
            return Err(ServerError::refused(
                Errno::ENOTDIR,
                format!("{fid} is not a directory"),
            ));
        }
        Ok(r)
    }

    /// A new inode.
    pub fn create_inode(&mut self, rec: InodeRec) {
        self.inode_delta += 1;
        self.created.push(rec.attr.fid);
        // New FIDs are never in use (an adopted inode left its old MDT).
        self.before.entry(rec.attr.fid).or_insert(None);
        self.inodes.insert(rec.attr.fid, Some(rec));
    }

    /// Remove inode `fid` (its xattrs go with it).
    pub fn delete_inode(&mut self, fid: Fid) -> Result<(), ServerError> {
        self.inode_delta -= 1;
        if !self.before.contains_key(&fid) {
            let rec = match read_inode(self.store, fid) {
                Ok(r) => Some(r),
                Err(ServerError::Refused {
                    errno: Errno::ENOENT,
                    ..
                }) => None,
                Err(e) => return Err(e),
            };
            self.before.insert(fid, rec);
        }
        self.inodes.insert(fid, None);
        let prefix = fid.to_key();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let page = self
                .store
                .scan(Space::Xattrs, &prefix, after.as_deref(), 256)
                .map_err(store_err)?;
            let done = page.len() < 256;
            for (k, _) in &page {
                self.batch.delete(Space::Xattrs, k.clone());
            }
            after = page.last().map(|(k, _)| k.clone());
            if done {
                return Ok(());
            }
        }
    }

    /// The entry `name` in `dir`.
    pub fn dentry(&mut self, dir: Fid, name: &Name) -> Result<Option<DentryRec>, ServerError> {
        let d = read_dentry(self.store, dir, name)?;
        self.names_before
            .entry((dir, name.clone()))
            .or_insert_with(|| d.clone());
        Ok(d)
    }

    /// Note the before-image of entry `name` of `dir` if this
    /// transaction has not read it (a change it makes without a look).
    fn name_before(&mut self, dir: Fid, name: &Name) -> Result<(), ServerError> {
        if !self.names_before.contains_key(&(dir, name.clone())) {
            self.dentry(dir, name)?;
        }
        Ok(())
    }

    /// The before- and after-image of every name this transaction sets
    /// or removes (the entry it replaced, and what it names now), in the
    /// order of the changes (a name changed twice appears twice).
    pub fn name_images(
        &self,
    ) -> impl Iterator<Item = (Fid, &Name, Option<&DentryRec>, Option<Fid>)> {
        self.name_changes.iter().map(|(dir, name, after)| {
            let before = self
                .names_before
                .get(&(*dir, name.clone()))
                .and_then(|b| b.as_ref());
            (*dir, name, before, *after)
        })
    }

    /// Set entry `name` in `dir`.
    pub fn put_dentry(&mut self, dir: Fid, name: &Name, d: &DentryRec) -> Result<(), ServerError> {
        self.name_before(dir, name)?;
        self.batch
            .put(Space::Dentries, dentry_key(dir, name), encode_record(d)?);
        self.name_changes.push((dir, name.clone(), Some(d.fid)));
        Ok(())
    }

    /// Directory `dir`'s entries changed at `now`: its mtime and ctime
    /// move, and `nlink` is added to its link count.
    pub fn dir_changed(&mut self, dir: Fid, nlink: i32, now: msg::Time) -> Result<(), ServerError> {
        let r = self.inode(dir)?;
        r.attr.nlink = r.attr.nlink.saturating_add_signed(nlink);
        r.attr.mtime = now;
        r.attr.ctime = now;
        Ok(())
    }

    /// Remove entry `name` from `dir`.
    pub fn delete_dentry(&mut self, dir: Fid, name: &Name) -> Result<(), ServerError> {
        self.name_before(dir, name)?;
        self.batch.delete(Space::Dentries, dentry_key(dir, name));
        self.name_changes.push((dir, name.clone(), None));
        Ok(())
    }

    /// What this transaction does, as its client is told: every inode it
    /// touched as a stat will show it, the inodes it removes, and the
    /// names it sets and removes.
    /// (The names are taken: called once, before `into_batch`.)
    pub fn take_effects(&mut self) -> Effects {
        let mut e = Effects {
            names: std::mem::take(&mut self.name_changes),
            ..Effects::default()
        };
        for (fid, rec) in &self.inodes {
            match rec {
                Some(r) => {
                    e.attrs.push(shown_attr(r));
                    if r.acl.is_some() || r.default_acl.is_some() {
                        e.with_acls.push(*fid);
                    }
                }
                None => e.removed.push(*fid),
            }
        }
        e
    }

    /// The store this transaction reads (not yet changed by it).
    pub fn store(&self) -> &'a dyn KvStore {
        self.store
    }

    /// The inode `name` in `dir` is set to by this transaction, if it
    /// sets it (last change wins).
    pub fn name_set(&self, dir: Fid, name: &Name) -> Option<Fid> {
        self.last_name_change(dir, name).flatten()
    }

    /// Whether this transaction removes `name` from `dir`.
    pub fn name_removed(&self, dir: Fid, name: &Name) -> bool {
        matches!(self.last_name_change(dir, name), Some(None))
    }

    fn last_name_change(&self, dir: Fid, name: &Name) -> Option<Option<Fid>> {
        self.name_changes
            .iter()
            .rev()
            .find(|(d, n, _)| *d == dir && n == name)
            .map(|(_, _, f)| *f)
    }

    /// The inodes this transaction makes.
    pub fn created(&self) -> &[Fid] {
        &self.created
    }

    /// Inode `fid` as this transaction leaves it: `None` if it does not
    /// touch it, `Some(None)` if it removes it.
    pub fn touched(&self, fid: Fid) -> Option<Option<&InodeRec>> {
        self.inodes.get(&fid).map(|r| r.as_ref())
    }

    /// The inodes this transaction removes, as the store held them.
    pub fn removed(&self) -> impl Iterator<Item = (Fid, &InodeRec)> {
        self.inodes
            .iter()
            .filter(|(_, after)| after.is_none())
            .filter_map(|(fid, _)| Some((*fid, self.before.get(fid)?.as_ref()?)))
    }

    /// Every inode this transaction touches: as the store held it before
    /// (`None`: it did not exist) and as the transaction leaves it
    /// (`None`: removed).
    pub fn images(&self) -> impl Iterator<Item = (Option<&InodeRec>, Option<&InodeRec>)> {
        self.inodes.iter().map(|(fid, after)| {
            let before = self.before.get(fid).and_then(|b| b.as_ref());
            (before, after.as_ref())
        })
    }

    /// Whether directory `dir` has no entries.
    pub fn dir_is_empty(&self, dir: Fid) -> Result<bool, ServerError> {
        Ok(self
            .store
            .scan(Space::Dentries, &dir.to_key(), None, 1)
            .map_err(store_err)?
            .is_empty())
    }

    /// The batch with every inode change added.
    pub fn into_batch(mut self) -> Result<(Batch, i64), ServerError> {
        for (fid, rec) in std::mem::take(&mut self.inodes) {
            match rec {
                Some(r) => self
                    .batch
                    .put(Space::Inodes, inode_key(fid), encode_record(&r)?),
                None => self.batch.delete(Space::Inodes, inode_key(fid)),
            }
        }
        Ok((self.batch, self.inode_delta))
    }

    /// Record a meta value in the batch.
    pub fn put_meta<T: serde::Serialize>(&mut self, key: &str, v: &T) -> Result<(), ServerError> {
        self.batch
            .put(Space::Meta, key.as_bytes().to_vec(), encode_record(v)?);
        Ok(())
    }
}

/// Read a meta value.
pub fn read_meta<T: serde::de::DeserializeOwned>(
    store: &dyn KvStore,
    key: &str,
) -> Result<Option<T>, ServerError> {
    match store.get(Space::Meta, key.as_bytes()).map_err(store_err)? {
        None => Ok(None),
        Some(v) => {
            Ok(Some(msg::decode(&v).map_err(|e| {
                store_err(format!("meta {key}: {}", e.msg))
            })?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_store::kv::FjallStore;

    /// What the commit step is handed: before- and after-images of every
    /// inode and name a transaction changes, also of names it never read.
    #[test]
    fn a_transaction_keeps_the_images_of_what_it_changes() {
        let d = tempfile::tempdir().expect("tmp");
        let store = FjallStore::open(d.path()).expect("open");
        let (dir, a, b) = (Fid::new(9, 1), Fid::new(9, 2), Fid::new(9, 3));
        let file = |fid| DentryRec {
            fid,
            kind: FileKind::File,
        };
        let mut t = Tx::new(&store);
        t.put_dentry(dir, &Name::from("x"), &file(a)).expect("put");
        let (batch, _) = t.into_batch().expect("batch");
        store.apply(batch).expect("apply");

        let mut t = Tx::new(&store);
        // "x" read first, then replaced; "y" changed without a look.
        assert_eq!(
            t.dentry(dir, &Name::from("x")).expect("read"),
            Some(file(a))
        );
        t.put_dentry(dir, &Name::from("x"), &file(b)).expect("put");
        t.delete_dentry(dir, &Name::from("y")).expect("delete");
        let images: Vec<_> = t
            .name_images()
            .map(|(d, n, before, after)| (d, n.to_string(), before.map(|r| r.fid), after))
            .collect();
        assert_eq!(
            images,
            vec![
                (dir, "x".to_string(), Some(a), Some(b)),
                (dir, "y".to_string(), None, None),
            ]
        );
    }
}
