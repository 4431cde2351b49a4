//! The MDT's key-value store: a small trait, and its fjall backend.
//!
//! Writers apply a [`Batch`] atomically with [`KvStore::apply`], which makes
//! it visible at once and returns a ticket; [`KvStore::sync_through`] then
//! waits until everything up to that ticket is on stable storage. Many
//! requests share one fsync this way (grouped commits): the first waiter
//! syncs for all who applied before it started.
//!
//! Every value is stored followed by a crc32c of its key and itself, so a
//! record the disk damaged (or a value under the wrong key) reads as
//! [`KvError::Corrupt`], never as data. A store made before checksums is
//! sealed record by record when it is first opened.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The marker of a store whose values all carry checksums (in `Meta`).
const SEALED_KEY: &[u8] = b"format.record_crc";
/// Most damaged records remembered for scrub.
const MAX_SEEN: usize = 1000;

/// The keyspaces of an MDT. Names are part of the on-disk format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    /// FID -> inode record.
    Inodes,
    /// parent FID | name hash | name -> directory entry.
    Dentries,
    /// FID | name -> extended attribute value.
    Xattrs,
    /// Named counters and allocator state.
    Meta,
    /// FID -> objects still to destroy on OSTs (unlinked files).
    Destroy,
    /// Distributed-transaction intent log (reserved for cross-MDT operations).
    Intents,
    /// Ordered namespace change records (reserved for the changelog).
    Changelog,
    /// client id | sequence -> the reply to that request (the reply cache).
    Replies,
    /// FID -> an unlinked file kept while a client has it open.
    Orphans,
    /// FID | block number -> bytes of a file's Data-on-MDT component.
    Dom,
}

impl Space {
    /// Every keyspace, in a fixed order.
    pub const ALL: [Space; 10] = [
        Space::Inodes,
        Space::Dentries,
        Space::Xattrs,
        Space::Meta,
        Space::Destroy,
        Space::Intents,
        Space::Changelog,
        Space::Replies,
        Space::Orphans,
        Space::Dom,
    ];

    /// Its number: its place in [`Space::ALL`] (how replicas name it).
    pub fn number(self) -> u8 {
        Space::ALL.iter().position(|x| *x == self).unwrap_or(0) as u8
    }

    /// The keyspace numbered `n`.
    pub fn numbered(n: u8) -> Option<Space> {
        Space::ALL.get(usize::from(n)).copied()
    }

    /// On-disk keyspace name.
    pub fn name(self) -> &'static str {
        match self {
            Space::Inodes => "inodes",
            Space::Dentries => "dentries",
            Space::Xattrs => "xattrs",
            Space::Meta => "meta",
            Space::Destroy => "destroy",
            Space::Intents => "intents",
            Space::Changelog => "changelog",
            Space::Replies => "replies",
            Space::Orphans => "orphans",
            Space::Dom => "dom",
        }
    }
}

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    /// The backend failed; the path says which store.
    #[error("key-value store at {path}: {msg}")]
    Backend {
        /// Store directory.
        path: PathBuf,
        /// Backend's message.
        msg: String,
    },
    /// A record's bytes fail their checksum: the disk under the store
    /// damaged them.
    #[error("key-value store at {path}: record {space}/{key} fails its checksum")]
    Corrupt {
        /// Store directory.
        path: PathBuf,
        /// The keyspace's name.
        space: &'static str,
        /// The key, in hex.
        key: String,
    },
}

/// `key` in hex, as damaged records are named.
pub fn hex(key: &[u8]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// The checksum sealing `value` under `key`.
fn seal_crc(key: &[u8], value: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(key), value)
}

/// `value` as stored: followed by its seal.
fn sealed(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(value.len() + 4);
    v.extend_from_slice(value);
    v.extend_from_slice(&seal_crc(key, value).to_le_bytes());
    v
}

/// The value in `stored`, if its seal holds.
fn unsealed(key: &[u8], stored: &[u8]) -> Option<Vec<u8>> {
    let n = stored.len().checked_sub(4)?;
    let (value, crc) = stored.split_at(n);
    (seal_crc(key, value).to_le_bytes() == crc).then(|| value.to_vec())
}

/// One record as scrub verifies it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// Its key.
    pub key: Vec<u8>,
    /// Bytes stored.
    pub len: usize,
    /// Whether its checksum holds.
    pub good: bool,
}

/// An atomic group of writes.
#[derive(Default, Debug)]
pub struct Batch {
    ops: Vec<(Space, Vec<u8>, Option<Vec<u8>>)>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Batch {
        Batch::default()
    }
    /// Set `key` to `value`.
    pub fn put(&mut self, s: Space, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.ops.push((s, key.into(), Some(value.into())));
    }
    /// Remove `key`.
    pub fn delete(&mut self, s: Space, key: impl Into<Vec<u8>>) {
        self.ops.push((s, key.into(), None));
    }
    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    /// Its writes in order: keyspace, key, value (`None`: removed).
    pub fn ops(&self) -> impl Iterator<Item = (Space, &[u8], Option<&[u8]>)> {
        self.ops
            .iter()
            .map(|(s, k, v)| (*s, k.as_slice(), v.as_deref()))
    }
}

/// Key-value pairs in key order, as [`KvStore::scan`] returns them.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Identifies an applied batch for [`KvStore::sync_through`].
pub type Ticket = u64;

/// What an MDT needs of its store.
pub trait KvStore: Send + Sync {
    /// The value at `key`.
    fn get(&self, s: Space, key: &[u8]) -> Result<Option<Vec<u8>>, KvError>;
    /// Up to `limit` pairs whose key starts with `prefix` and is greater
    /// than `after` (or from the start of the prefix), in key order.
    fn scan(
        &self,
        s: Space,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Pairs, KvError>;
    /// Apply a batch atomically; visible to readers on return, durable only
    /// after `sync_through` of the returned ticket.
    fn apply(&self, b: Batch) -> Result<Ticket, KvError>;
    /// As [`KvStore::apply`], and hand the batch (with everything applied
    /// before it) to the operating system before returning: it survives a
    /// crash of this process, not a crash of the machine.
    fn apply_flushed(&self, b: Batch) -> Result<Ticket, KvError>;
    /// Block until every batch up to `t` is on stable storage.
    fn sync_through(&self, t: Ticket) -> Result<(), KvError>;
    /// Up to `limit` records of `s` after `after` (or from the first), in
    /// key order, each verified against its checksum (scrub).
    fn verify_scan(
        &self,
        _s: Space,
        _after: Option<&[u8]>,
        _limit: usize,
    ) -> Result<Vec<Checked>, KvError> {
        Ok(Vec::new())
    }
    /// Write a point-in-time image of the store to `dst`, a store of its
    /// own (see [`FjallStore::checkpoint`]); the caller applies nothing
    /// meanwhile.
    fn checkpoint(&self, dst: &Path) -> Result<(), KvError> {
        Err(KvError::Backend {
            path: dst.to_path_buf(),
            msg: "this store takes no checkpoints".into(),
        })
    }
    /// Whether the store is an MDT replicated on other servers: what
    /// [`KvStore::apply_flushed`] hands the operating system is then not
    /// enough for a change to survive the loss of this server; only a
    /// commit ([`KvStore::sync_through`]) puts it on the replicas.
    fn replicated(&self) -> bool {
        false
    }
    /// How many reads met a damaged record since the store was opened,
    /// and the records (keyspace, key) they met, oldest first, bounded.
    fn damage_seen(&self) -> (u64, Vec<(Space, Vec<u8>)>) {
        (0, Vec::new())
    }
}

/// Mirror directory `src` into `dst`: files hard-linked, journals
/// (`*.jnl`, written in place) copied, the lock file made anew.
fn link_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dst)?;
    for ent in std::fs::read_dir(src)? {
        let ent = ent?;
        let (from, to) = (ent.path(), dst.join(ent.file_name()));
        let name = ent.file_name();
        let name = name.to_string_lossy();
        if ent.file_type()?.is_dir() {
            link_tree(&from, &to)?;
        } else if name == "lock" {
            // Its own (the store's is locked while open; fjall needs one).
            std::fs::File::create(&to)?;
        } else if name.ends_with(".jnl") {
            std::fs::copy(&from, &to)?;
        } else {
            std::fs::hard_link(&from, &to)?;
        }
    }
    Ok(())
}

/// The fjall backend.
pub struct FjallStore {
    path: PathBuf,
    db: fjall::Database,
    spaces: Vec<(Space, fjall::Keyspace)>,
    /// Serialises apply so tickets follow journal order.
    apply_lock: Mutex<()>,
    applied: AtomicU64,
    /// Held while an fsync runs; waiters queue here and most find their
    /// ticket already synced when they get it.
    sync_lock: Mutex<()>,
    synced: AtomicU64,
    /// Reads that met a damaged record, and the records.
    damaged: AtomicU64,
    seen: Mutex<Vec<(Space, Vec<u8>)>>,
}

impl FjallStore {
    /// Open or create the store in `dir`.
    pub fn open(dir: &Path) -> Result<FjallStore, KvError> {
        let err = |e: fjall::Error| KvError::Backend {
            path: dir.to_path_buf(),
            msg: e.to_string(),
        };
        // The journal is buffered in the process by `apply` (fjall writes
        // it to the OS when its 8 KiB buffer fills), written to the OS by
        // `apply_flushed` (a killed process loses nothing it applied) and
        // fsync'd by `sync_through` (a lost machine loses nothing synced).
        // The MDT answers most changes after `apply`: its clients keep them
        // and replay what a crash lost (see the MDT's `recovery`).
        let db = fjall::Database::builder(dir).open().map_err(err)?;
        let mut spaces = Vec::new();
        for s in Space::ALL {
            let ks = db
                .keyspace(s.name(), fjall::KeyspaceCreateOptions::default)
                .map_err(err)?;
            spaces.push((s, ks));
        }
        let store = FjallStore {
            path: dir.to_path_buf(),
            db,
            spaces,
            apply_lock: Mutex::new(()),
            applied: AtomicU64::new(0),
            sync_lock: Mutex::new(()),
            synced: AtomicU64::new(0),
            damaged: AtomicU64::new(0),
            seen: Mutex::new(Vec::new()),
        };
        if store
            .ks(Space::Meta)
            .get(SEALED_KEY)
            .map_err(err)?
            .is_none()
        {
            store.seal_all()?;
        }
        Ok(store)
    }

    /// Give every record of a store made before checksums its seal, then
    /// mark the store sealed; durable before the store is used. Cut by a
    /// crash, it starts again (no marker yet) and seals the raw records
    /// it finds, leaving those already sealed: a record is sealed when its
    /// last 4 bytes are its seal, which a raw record matches by chance 1
    /// in 2^32 times.
    fn seal_all(&self) -> Result<(), KvError> {
        let mut n = 0u64;
        for (s, ks) in &self.spaces {
            let mut batch = Batch::new();
            for g in ks.iter() {
                let (k, v) = g.into_inner().map_err(|e| self.err(e))?;
                if unsealed(&k, &v).is_none() {
                    batch.ops.push((*s, k.to_vec(), Some(v.to_vec())));
                }
                if batch.ops.len() >= 10_000 {
                    n += batch.ops.len() as u64;
                    self.commit(std::mem::take(&mut batch), None)?;
                }
            }
            n += batch.ops.len() as u64;
            if !batch.is_empty() {
                self.commit(batch, None)?;
            }
        }
        let mut b = Batch::new();
        b.put(Space::Meta, SEALED_KEY.to_vec(), b"crc32c".to_vec());
        let t = self.commit(b, None)?;
        self.sync_through(t)?;
        if n > 0 {
            tracing::info!(path = %self.path.display(), records = n, "sealed the records of a store made before record checksums");
        }
        Ok(())
    }

    /// `stored`'s value, or the damage it is (logged and remembered).
    fn open_record(&self, s: Space, key: &[u8], stored: &[u8]) -> Result<Vec<u8>, KvError> {
        if let Some(v) = unsealed(key, stored) {
            return Ok(v);
        }
        self.damaged.fetch_add(1, Ordering::Relaxed);
        let e = KvError::Corrupt {
            path: self.path.clone(),
            space: s.name(),
            key: hex(key),
        };
        tracing::error!("{e}; answered EIO and reported to scrub");
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if !seen.iter().any(|(x, k)| *x == s && k == key) {
            if seen.len() >= MAX_SEEN {
                seen.remove(0);
            }
            seen.push((s, key.to_vec()));
        }
        Err(e)
    }

    /// Flip a bit of the value stored at `key`, keeping its checksum, as a
    /// disk fault would (for tests of detection); false if there is none.
    #[doc(hidden)]
    pub fn damage(&self, s: Space, key: &[u8]) -> Result<bool, KvError> {
        let Some(v) = self.ks(s).get(key).map_err(|e| self.err(e))? else {
            return Ok(false);
        };
        let mut v = v.to_vec();
        v[0] ^= 0x01;
        let _g = self.apply_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.ks(s).insert(key, v).map_err(|e| self.err(e))?;
        self.db
            .persist(fjall::PersistMode::SyncData)
            .map_err(|e| self.err(e))?;
        Ok(true)
    }

    fn ks(&self, s: Space) -> &fjall::Keyspace {
        // Every Space was opened in `open`, in ALL's order.
        &self.spaces[Space::ALL.iter().position(|x| *x == s).unwrap_or(0)].1
    }

    /// Apply `b` as one atomic batch; with `persist`, write the journal
    /// out that far before returning.
    fn commit(&self, b: Batch, persist: Option<fjall::PersistMode>) -> Result<Ticket, KvError> {
        let _g = self.apply_lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut wb = self.db.batch().durability(persist);
        for (s, k, v) in b.ops {
            match v {
                Some(v) => {
                    let v = sealed(&k, &v);
                    wb.insert(self.ks(s), k, v)
                }
                None => wb.remove(self.ks(s), k),
            }
        }
        wb.commit().map_err(|e| self.err(e))?;
        Ok(self.applied.fetch_add(1, Ordering::AcqRel) + 1)
    }

    fn err(&self, e: impl std::fmt::Display) -> KvError {
        KvError::Backend {
            path: self.path.clone(),
            msg: e.to_string(),
        }
    }
}

impl KvStore for FjallStore {
    /// Write a point-in-time image of the store to `dst` (a directory
    /// that must not exist), which [`FjallStore::open`] opens as a store
    /// of its own: a snapshot of an MDT. Every batch applied before the
    /// call is in it, none after. It costs what the store's files number,
    /// not what they hold: the store's tables never change once written,
    /// so they are hard-linked; only its journals, which grow in place,
    /// are copied (the memtables are flushed first, which keeps them
    /// short). A table that compaction removed while it was being
    /// linked makes it start again.
    fn checkpoint(&self, dst: &Path) -> Result<(), KvError> {
        let _g = self.apply_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.db
            .persist(fjall::PersistMode::SyncAll)
            .map_err(|e| self.err(e))?;
        for (_, ks) in &self.spaces {
            ks.rotate_memtable_and_wait().map_err(|e| self.err(e))?;
        }
        let io_err = |what: &str, p: &Path, e: std::io::Error| KvError::Backend {
            path: self.path.clone(),
            msg: format!("checkpoint: {what} {}: {e}", p.display()),
        };
        const TRIES: usize = 5;
        for attempt in 1..=TRIES {
            if dst.exists() {
                std::fs::remove_dir_all(dst).map_err(|e| io_err("clearing", dst, e))?;
            }
            match link_tree(&self.path, dst) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && attempt < TRIES => continue,
                Err(e) => return Err(io_err("linking into", dst, e)),
            }
            crate::durable::sync_tree(dst).map_err(|e| io_err("syncing", dst, e))?;
            // A table a concurrent compaction replaced may be missing from
            // the image: opening it says so.
            match FjallStore::open(dst) {
                Ok(_) => return Ok(()),
                Err(e) if attempt < TRIES => {
                    tracing::debug!("checkpoint attempt {attempt} did not open ({e}); again");
                }
                Err(e) => return Err(e),
            }
        }
        Err(io_err("making", dst, std::io::ErrorKind::Other.into()))
    }

    fn get(&self, s: Space, key: &[u8]) -> Result<Option<Vec<u8>>, KvError> {
        match self.ks(s).get(key).map_err(|e| self.err(e))? {
            Some(v) => self.open_record(s, key, &v).map(Some),
            None => Ok(None),
        }
    }

    fn scan(
        &self,
        s: Space,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, KvError> {
        let mut out = Vec::new();
        let iter: Box<dyn Iterator<Item = fjall::Guard>> = match after {
            Some(a) => {
                let start = std::ops::Bound::Excluded(a.to_vec());
                Box::new(
                    self.ks(s)
                        .range::<Vec<u8>, _>((start, std::ops::Bound::Unbounded)),
                )
            }
            None => Box::new(self.ks(s).prefix(prefix)),
        };
        for g in iter {
            let (k, v) = g.into_inner().map_err(|e| self.err(e))?;
            if !k.starts_with(prefix) {
                break;
            }
            let v = self.open_record(s, &k, &v)?;
            out.push((k.to_vec(), v));
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    fn apply(&self, b: Batch) -> Result<Ticket, KvError> {
        self.commit(b, None)
    }

    fn apply_flushed(&self, b: Batch) -> Result<Ticket, KvError> {
        self.commit(b, Some(fjall::PersistMode::Buffer))
    }

    fn sync_through(&self, t: Ticket) -> Result<(), KvError> {
        if self.synced.load(Ordering::Acquire) >= t {
            return Ok(());
        }
        let _g = self.sync_lock.lock().unwrap_or_else(|p| p.into_inner());
        if self.synced.load(Ordering::Acquire) >= t {
            return Ok(());
        }
        // Everything applied before this point is in the journal; one fsync
        // covers all of it.
        let upto = self.applied.load(Ordering::Acquire);
        self.db
            .persist(fjall::PersistMode::SyncData)
            .map_err(|e| self.err(e))?;
        self.synced.fetch_max(upto, Ordering::AcqRel);
        Ok(())
    }

    fn verify_scan(
        &self,
        s: Space,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Checked>, KvError> {
        let start = match after {
            Some(a) => std::ops::Bound::Excluded(a.to_vec()),
            None => std::ops::Bound::Unbounded,
        };
        let mut out = Vec::new();
        for g in self
            .ks(s)
            .range::<Vec<u8>, _>((start, std::ops::Bound::Unbounded))
        {
            let (k, v) = g.into_inner().map_err(|e| self.err(e))?;
            out.push(Checked {
                good: unsealed(&k, &v).is_some(),
                key: k.to_vec(),
                len: v.len(),
            });
            if out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    fn damage_seen(&self) -> (u64, Vec<(Space, Vec<u8>)>) {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        (self.damaged.load(Ordering::Relaxed), seen.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applied_batches_are_visible_and_survive_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let s = FjallStore::open(dir.path()).expect("open");
            let mut b = Batch::new();
            b.put(Space::Inodes, b"a".to_vec(), b"1".to_vec());
            b.put(Space::Dentries, b"p/x".to_vec(), b"2".to_vec());
            let t = s.apply(b).expect("apply");
            s.sync_through(t).expect("sync");
            assert_eq!(
                s.get(Space::Inodes, b"a").expect("get"),
                Some(b"1".to_vec())
            );
        }
        let s = FjallStore::open(dir.path()).expect("reopen");
        assert_eq!(
            s.get(Space::Dentries, b"p/x").expect("get"),
            Some(b"2".to_vec())
        );
        assert_eq!(s.get(Space::Inodes, b"p/x").expect("get"), None);
    }

    fn count(s: &FjallStore, space: Space) -> usize {
        s.scan(space, b"", None, usize::MAX).expect("scan").len()
    }

    /// A checkpoint holds every batch applied before it and none after,
    /// opens as a store of its own, and leaves the store it was taken of
    /// working: also while compactions run, and with batches that never
    /// reached a table (only the journal).
    #[test]
    fn a_checkpoint_is_the_store_as_it_was() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = std::sync::Arc::new(FjallStore::open(&dir.path().join("live")).expect("open"));
        let put = |from: u32, to: u32, tag: &[u8]| {
            for chunk in (from..to).collect::<Vec<_>>().chunks(500) {
                let mut b = Batch::new();
                for i in chunk {
                    b.put(Space::Inodes, i.to_be_bytes().to_vec(), tag.to_vec());
                }
                s.apply(b).expect("apply");
            }
        };
        put(0, 20_000, b"old");
        // Compactions in the background while images are taken.
        let compacting = {
            let s = s.clone();
            std::thread::spawn(move || {
                for _ in 0..5 {
                    for (_, ks) in &s.spaces {
                        ks.major_compact().expect("compact");
                    }
                }
            })
        };
        let mut images = Vec::new();
        for round in 0..4u32 {
            let img = dir.path().join(format!("img{round}"));
            s.checkpoint(&img).expect("checkpoint");
            images.push((img, 20_000 + round * 1000));
            put(20_000 + round * 1000, 21_000 + round * 1000, b"new");
        }
        compacting.join().expect("compactions");
        // Changed and removed after every image.
        let mut b = Batch::new();
        b.put(
            Space::Inodes,
            0u32.to_be_bytes().to_vec(),
            b"changed".to_vec(),
        );
        b.delete(Space::Inodes, 1u32.to_be_bytes().to_vec());
        s.apply(b).expect("apply");
        for (img, n) in &images {
            let c = FjallStore::open(img).expect("open the image");
            assert_eq!(count(&c, Space::Inodes), *n as usize, "{}", img.display());
            assert_eq!(
                c.get(Space::Inodes, &0u32.to_be_bytes()).expect("get"),
                Some(b"old".to_vec())
            );
            assert!(c
                .get(Space::Inodes, &1u32.to_be_bytes())
                .expect("get")
                .is_some());
        }
        assert_eq!(count(&s, Space::Inodes), 23_999, "the store goes on");
        drop(s);
        let again = FjallStore::open(&dir.path().join("live")).expect("reopen");
        assert_eq!(
            again.get(Space::Inodes, &0u32.to_be_bytes()).expect("get"),
            Some(b"changed".to_vec())
        );
    }

    #[test]
    fn a_damaged_record_reads_as_corrupt_and_scrub_finds_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = FjallStore::open(dir.path()).expect("open");
        let mut b = Batch::new();
        for k in ["a", "b", "c"] {
            b.put(Space::Inodes, k.as_bytes().to_vec(), b"record".to_vec());
        }
        s.apply(b).expect("apply");
        assert!(s.damage(Space::Inodes, b"b").expect("damage"));
        assert_eq!(
            s.get(Space::Inodes, b"a").expect("a"),
            Some(b"record".to_vec())
        );
        assert!(matches!(
            s.get(Space::Inodes, b"b"),
            Err(KvError::Corrupt { space: "inodes", ref key, .. }) if key == "62"
        ));
        assert!(s.scan(Space::Inodes, b"", None, 10).is_err());
        let (n, seen) = s.damage_seen();
        assert_eq!((n, seen), (2, vec![(Space::Inodes, b"b".to_vec())]));
        let v = s.verify_scan(Space::Inodes, None, 10).expect("verify");
        assert_eq!(
            v.iter().map(|c| c.good).collect::<Vec<_>>(),
            vec![true, false, true]
        );
        let rest = s.verify_scan(Space::Inodes, Some(b"a"), 1).expect("verify");
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].key, b"b".to_vec());
    }

    #[test]
    fn a_store_made_before_record_checksums_is_sealed_at_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            // What an older loomfs left: raw values, no marker.
            let db = fjall::Database::builder(dir.path()).open().expect("db");
            let ks = db
                .keyspace("dentries", fjall::KeyspaceCreateOptions::default)
                .expect("ks");
            ks.insert(b"k", b"old value").expect("insert");
            db.persist(fjall::PersistMode::SyncAll).expect("persist");
        }
        let s = FjallStore::open(dir.path()).expect("open");
        assert_eq!(
            s.get(Space::Dentries, b"k").expect("get"),
            Some(b"old value".to_vec())
        );
        drop(s);
        let s = FjallStore::open(dir.path()).expect("reopen");
        assert_eq!(
            s.get(Space::Dentries, b"k").expect("get"),
            Some(b"old value".to_vec()),
            "sealed once, not twice"
        );
    }

    #[test]
    fn scan_resumes_after_a_key_and_stops_at_the_prefix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = FjallStore::open(dir.path()).expect("open");
        let mut b = Batch::new();
        for k in ["a1", "a2", "a3", "b1"] {
            b.put(
                Space::Dentries,
                k.as_bytes().to_vec(),
                k.as_bytes().to_vec(),
            );
        }
        s.apply(b).expect("apply");
        let all = s.scan(Space::Dentries, b"a", None, 10).expect("scan");
        assert_eq!(all.len(), 3);
        let rest = s
            .scan(Space::Dentries, b"a", Some(b"a1"), 10)
            .expect("scan");
        assert_eq!(
            rest.iter().map(|x| x.0.clone()).collect::<Vec<_>>(),
            vec![b"a2".to_vec(), b"a3".to_vec()]
        );
        let one = s.scan(Space::Dentries, b"a", None, 1).expect("scan");
        assert_eq!(one.len(), 1);
    }
}
