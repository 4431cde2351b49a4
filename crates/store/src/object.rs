//! The OST's object store: one file per object in a local directory.
//!
//! On-disk layout of a target directory `DIR`:
//!
//! ```text
//! DIR/precreate            high watermark: the next object id never handed
//!                          out, decimal text ending in a newline
//! DIR/objects/XX/OID       object OID, XX = OID % 256 as two lower-case hex
//!                          digits, OID in decimal
//! DIR/objects/XX/OID.sum   its per-block checksums (see `crate::sums`)
//! DIR/checksums            present on targets made with checksums: every
//!                          object with data must have a `.sum` file
//! DIR/incarnation          how many times the store was opened, decimal
//! DIR/quota-shares         the OST's shares of limited quota ids (kept by
//!                          the server's `ost::quota`, not by this store)
//! ```
//!
//! Each object's data file carries its owner in the xattr
//! `user.loom.owner` (see `crate::owners`).
//!
//! Every read verifies the checksum of each block it touches and answers a
//! block that fails with [`ObjectError::Corrupt`], never with its bytes;
//! every change rewrites the checksums of the blocks it touches, then the
//! data (`crate::checked`). A change holds its object's lock exclusively,
//! a read holds it shared.
//!
//! Objects are created logically by [`ObjectStore::precreate`], which only
//! moves the watermark; the file appears on the first write or truncate.
//! A missing file therefore reads as an empty object. Holes read as zeros.
//!
//! Invariants:
//! - Every id handed out by `precreate` is below the persisted watermark
//!   before the call returns, so after a crash no id is handed out twice.
//! - Ids start at 1; 0 is never a valid object id.
//! - A cached file handle exists only for an object whose file exists;
//!   `destroy` evicts the handle under the same lock that opens handles, so
//!   no handle to a destroyed file is cached after `destroy` returns.
//!
//! Durability: writes land in the page cache; [`ObjectStore::sync`] makes an
//! object's data durable, and also its directory entry if the file was
//! created since the last sync (or is the first synced in its directory
//! since the store was opened, which covers names made before a crash of
//! the process). Truncate and punch are durable when they return. Data and
//! checksums are synced together. A process killed at any point leaves
//! every block readable (old or new bytes). A machine that loses power
//! keeps what was synced, checksums included; a block written since its
//! last sync may come back with bytes its checksum rejects (the page
//! cache wrote one file and not the other): it reads as corrupt, as ZFS
//! would not, until it is rewritten.
//!
//! The API is blocking; the OST service calls it through
//! `tokio::task::spawn_blocking`.

use loom_proto::chunk_sums::ChunkSums;
use loom_proto::msg::{ObjInfo, StatFs};
use loom_proto::{Errno, WireError};
use nix::fcntl::FallocateFlags;
use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

use crate::checked::{self, BadBlock, Fault, Files};
use crate::owners::{self, Owners};
use crate::packed::{self, Delta, Packed};
use crate::sums::{self, read_full};
use loom_proto::quota::Owner;
use loom_proto::Compress;
use std::sync::atomic::{AtomicI64, Ordering};

mod copies;
mod snapshots;
pub use copies::{DIGEST_CHUNKS, MAX_DIGEST};
use snapshots::{Change, Snaps};

/// Most open file handles kept in the cache.
pub const HANDLE_CACHE_CAPACITY: usize = 512;

/// Name of the watermark file inside the target directory.
const WATERMARK_FILE: &str = "precreate";
/// Name of the object directory inside the target directory.
const OBJECTS_DIR: &str = "objects";
/// Marker of a store whose objects all carry checksums.
const CHECKSUMS_FILE: &str = "checksums";
/// The store's incarnation counter.
const INCARNATION_FILE: &str = "incarnation";
/// Stripes of object locks.
const LOCK_STRIPES: usize = 64;

/// Why an object store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The local file system refused an operation. ENOSPC means the target is
    /// full: the caller should pick another OST or report it; other errnos
    /// mean the disk or the directory is damaged.
    #[error("{op} of object {oid:?} at {}: {source}", path.display())]
    Io {
        /// What was being done ("write", "open", ...).
        op: &'static str,
        /// The object involved, if any.
        oid: Option<u64>,
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The byte range does not fit in a file offset: a client bug.
    #[error("object {oid}: range at {offset} of {len} bytes exceeds the largest file offset")]
    OutOfRange {
        /// The object.
        oid: u64,
        /// Start of the range.
        offset: u64,
        /// Length of the range.
        len: u64,
    },
    /// The watermark file holds something other than a number: the target
    /// directory is damaged and needs an administrator.
    #[error("precreate watermark {} is corrupt: {reason}", path.display())]
    CorruptWatermark {
        /// The watermark file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A block of an object holds bytes its checksum rejects: the disk
    /// under the target lost or changed them.
    #[error("object {oid}: block at offset {offset} fails its checksum (stored {stored:#010x}, read {computed:#010x})")]
    Corrupt {
        /// The object.
        oid: u64,
        /// Offset of the block in the object.
        offset: u64,
        /// The checksum stored for the block.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
    /// An object's checksum file is missing or unreadable.
    #[error("object {oid}: checksums {}: {reason}", path.display())]
    BadSums {
        /// The object.
        oid: u64,
        /// Its checksum file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Object ids are exhausted (the 64-bit space is used up).
    #[error("object ids exhausted: {next} + {count} overflows")]
    IdsExhausted {
        /// The next free id.
        next: u64,
        /// How many were asked for.
        count: u32,
    },
}

impl ObjectError {
    fn io(op: &'static str, oid: Option<u64>, path: &Path, source: io::Error) -> ObjectError {
        // Not logged here: the OST logs it once, where it answers with it.
        ObjectError::Io {
            op,
            oid,
            path: path.to_path_buf(),
            source,
        }
    }

    /// The errno this error carries on the wire.
    pub fn errno(&self) -> Errno {
        match self {
            ObjectError::Io { source, .. } => Errno(source.raw_os_error().unwrap_or(Errno::EIO.0)),
            ObjectError::OutOfRange { .. } => Errno::EFBIG,
            ObjectError::CorruptWatermark { .. } => Errno::EIO,
            ObjectError::Corrupt { .. } | ObjectError::BadSums { .. } => Errno::EIO,
            ObjectError::IdsExhausted { .. } => Errno::ENOSPC,
        }
    }
}

impl From<ObjectError> for WireError {
    fn from(e: ObjectError) -> WireError {
        WireError::new(e.errno(), e.to_string())
    }
}

/// An object's open files.
struct Obj {
    data: File,
    /// Its checksum file, once opened or made.
    sums: OnceLock<Sums>,
    /// Whom its bytes count against, once read (see `crate::owners`).
    owner: Mutex<Option<Owner>>,
}

/// An object's checksum file and what its header says.
struct Sums {
    file: File,
    /// The object's compression, for a compressed object (version 2).
    packed: Option<Compress>,
}

/// How to reach an object's bytes: plain, or in compressed chunks.
enum View<'a> {
    Plain(Files<'a>),
    Packed(Packed<'a>),
}

/// What the store's compressed objects hold and take (see
/// [`ObjectStore::packed_usage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PackedUsage {
    /// Their logical bytes (sizes).
    pub logical: u64,
    /// The bytes their chunks' stored forms take, in 4 KiB units.
    pub stored: u64,
    /// Whether the objects found at opening have all been counted.
    pub counted: bool,
}

/// The running usage figures, and where the count at opening is.
#[derive(Default)]
struct Usage {
    logical: AtomicI64,
    stored: AtomicI64,
    count: Mutex<Counting>,
}

/// The count of compressed objects at opening: once `started`, buckets
/// below `bucket` are counted, and in bucket `bucket` every object but
/// those in `pending`.
#[derive(Default)]
struct Counting {
    started: bool,
    bucket: u32,
    pending: HashSet<u64>,
}

impl Usage {
    /// Count a change of object `oid`, unless the count at opening has
    /// yet to read it (it will then read the changed object).
    fn add(&self, oid: u64, d: Delta) {
        if d == Delta::default() {
            return;
        }
        let c = lock(&self.count);
        let bucket = (oid % 256) as u32;
        if c.started && (bucket < c.bucket || (bucket == c.bucket && !c.pending.contains(&oid))) {
            self.logical.fetch_add(d.logical, Ordering::Relaxed);
            self.stored.fetch_add(d.stored, Ordering::Relaxed);
        }
    }
}

/// One cached open object.
struct Handle {
    file: Arc<Obj>,
    /// Logical time of the last use, for eviction.
    last_use: u64,
}

/// Open handles by object id, plus the objects whose directory entry is not
/// yet known to be durable.
#[derive(Default)]
struct HandleCache {
    map: HashMap<u64, Handle>,
    tick: u64,
    /// Objects created since their directory was last fsynced.
    unsynced_names: HashSet<u64>,
    /// Object directories fsynced since the store was opened, one bit per
    /// directory: names created before a crash of the process are in the
    /// page cache but not in `unsynced_names`, so the first sync in each
    /// directory after a restart fsyncs the directory too.
    dirs_synced: [u64; 4],
}

impl HandleCache {
    fn get(&mut self, oid: u64) -> Option<Arc<Obj>> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(&oid).map(|h| {
            h.last_use = tick;
            h.file.clone()
        })
    }

    fn insert(&mut self, oid: u64, file: Arc<Obj>) {
        if self.map.len() >= HANDLE_CACHE_CAPACITY && !self.map.contains_key(&oid) {
            // Evict the least recently used handle; a scan of a few hundred
            // entries costs far less than the open it saves.
            if let Some(victim) = self
                .map
                .iter()
                .min_by_key(|(_, h)| h.last_use)
                .map(|(k, _)| *k)
            {
                self.map.remove(&victim);
            }
        }
        self.tick += 1;
        let last_use = self.tick;
        self.map.insert(oid, Handle { file, last_use });
    }
}

/// The objects of one OST. Send + Sync; share it behind an `Arc`.
pub struct ObjectStore {
    dir: PathBuf,
    objects: PathBuf,
    handles: Mutex<HandleCache>,
    /// The next id `precreate` hands out; equal to the persisted watermark.
    next_id: Mutex<u64>,
    /// Object locks, striped by id: changes exclusive, reads shared.
    locks: Vec<RwLock<()>>,
    /// This opening's incarnation, stamped on the checksums it writes.
    gen: u32,
    /// Whether an object with data and no checksum file is corrupt (a
    /// store made with checksums) or merely old.
    require_sums: bool,
    /// What compressed objects hold and take.
    usage: Usage,
    /// The bytes held per owner (see `crate::owners`).
    owners: Owners,
    /// Owners could not be stored (no extended attributes): said once.
    owners_unkept: std::sync::atomic::AtomicBool,
    /// Its snapshots (see `crate::snaps`).
    snaps: Mutex<Snaps>,
}

impl std::fmt::Debug for ObjectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStore")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// Lock a mutex, ignoring poisoning: the protected state is kept consistent
/// at every step, so a panic elsewhere leaves it usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `offset + len` as a file offset (`off_t`), or an error naming the object.
fn end_of(oid: u64, offset: u64, len: u64) -> Result<u64, ObjectError> {
    match offset.checked_add(len) {
        Some(end) if end <= i64::MAX as u64 => Ok(end),
        _ => Err(ObjectError::OutOfRange { oid, offset, len }),
    }
}

impl ObjectStore {
    /// Open the object store in target directory `dir`, creating its
    /// subdirectories if missing.
    pub fn open(dir: &Path) -> Result<ObjectStore, ObjectError> {
        let objects = dir.join(OBJECTS_DIR);
        let fresh = !objects.exists();
        for i in 0..256u32 {
            let sub = objects.join(format!("{i:02x}"));
            fs::create_dir_all(&sub).map_err(|e| ObjectError::io("mkdir", None, &sub, e))?;
        }
        let store = ObjectStore {
            dir: dir.to_path_buf(),
            objects,
            handles: Mutex::new(HandleCache::default()),
            next_id: Mutex::new(1),
            locks: (0..LOCK_STRIPES).map(|_| RwLock::new(())).collect(),
            gen: next_incarnation(dir)?,
            require_sums: false,
            usage: Usage::default(),
            owners: Owners::default(),
            owners_unkept: Default::default(),
            snaps: Mutex::new(Snaps::load(dir)?),
        };
        let marker = dir.join(CHECKSUMS_FILE);
        if fresh {
            crate::durable::write_atomic(&marker, b"crc32c per 4096-byte block\n")
                .map_err(|e| ObjectError::io("write", None, &marker, e))?;
        }
        let store = ObjectStore {
            require_sums: marker.exists(),
            ..store
        };
        let next = store.load_watermark()?;
        *lock(&store.next_id) = next;
        let store = ObjectStore {
            owners: Owners::of(store.count_owners()?),
            ..store
        };
        tracing::debug!(dir = %dir.display(), next_id = next, "object store opened");
        Ok(store)
    }

    /// The target directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of object `oid`'s file.
    pub fn object_path(&self, oid: u64) -> PathBuf {
        self.objects
            .join(format!("{:02x}", oid % 256))
            .join(oid.to_string())
    }

    fn watermark_path(&self) -> PathBuf {
        self.dir.join(WATERMARK_FILE)
    }

    /// Read the watermark; if the file is missing (a fresh target, or one
    /// whose watermark was lost), start above every object file present so
    /// that no existing object is handed out again.
    fn load_watermark(&self) -> Result<u64, ObjectError> {
        let path = self.watermark_path();
        match fs::read_to_string(&path) {
            Ok(s) => {
                let next: u64 = s
                    .trim()
                    .parse()
                    .map_err(|e| ObjectError::CorruptWatermark {
                        path: path.clone(),
                        reason: format!("{e} in {:?}", s.trim()),
                    })?;
                if next == 0 {
                    return Err(ObjectError::CorruptWatermark {
                        path,
                        reason: "watermark is 0 but ids start at 1".into(),
                    });
                }
                Ok(next)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let next = self.highest_object_id()?.map_or(1, |m| m.saturating_add(1));
                if next > 1 {
                    tracing::warn!(path = %path.display(), next,
                        "precreate watermark missing; recovered it from the object files");
                }
                Ok(next)
            }
            Err(e) => Err(ObjectError::io("read", None, &path, e)),
        }
    }

    /// The largest object id with a file, if any.
    fn highest_object_id(&self) -> Result<Option<u64>, ObjectError> {
        let mut max = None;
        for i in 0..256u32 {
            let sub = self.objects.join(format!("{i:02x}"));
            let entries =
                fs::read_dir(&sub).map_err(|e| ObjectError::io("readdir", None, &sub, e))?;
            for ent in entries {
                let ent = ent.map_err(|e| ObjectError::io("readdir", None, &sub, e))?;
                if let Some(oid) = ent.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) {
                    max = max.max(Some(oid));
                }
            }
        }
        Ok(max)
    }

    /// The path of object `oid`'s checksum file.
    pub fn sums_path(&self, oid: u64) -> PathBuf {
        self.object_path(oid).with_extension("sum")
    }

    fn lock_of(&self, oid: u64) -> &RwLock<()> {
        // Object ids are dense: spread neighbours over different stripes.
        let i = (oid.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % self.locks.len();
        &self.locks[i]
    }

    /// The cached or newly opened files of `oid`. With `create`, a missing
    /// object is created; without it, a missing object gives `Ok(None)`.
    fn handle(&self, oid: u64, create: bool) -> Result<Option<Arc<Obj>>, ObjectError> {
        let mut cache = lock(&self.handles);
        if let Some(f) = cache.get(oid) {
            return Ok(Some(f));
        }
        // Open under the lock so that `destroy` (which unlinks under it too)
        // never races with a handle being cached for the old file.
        let Some((file, made)) = open_file(&self.object_path(oid), oid, create)? else {
            return Ok(None);
        };
        if made {
            // The new name is not durable until its directory is fsynced.
            cache.unsynced_names.insert(oid);
        }
        let file = Arc::new(Obj {
            data: file,
            sums: OnceLock::new(),
            owner: Mutex::new(None),
        });
        cache.insert(oid, file.clone());
        Ok(Some(file))
    }

    /// The checksum file of `oid`: opened if it exists, made if `create`
    /// (every change makes it, so an object written before checksums gets
    /// them for the blocks changed from then on). A new, empty object made
    /// with `pack` gets a compressed object's header: an object keeps the
    /// form it was made in.
    fn sums_of<'a>(
        &self,
        oid: u64,
        obj: &'a Obj,
        create: bool,
        pack: Option<Compress>,
    ) -> Result<Option<&'a Sums>, ObjectError> {
        if let Some(f) = obj.sums.get() {
            return Ok(Some(f));
        }
        let path = self.sums_path(oid);
        let bad = |reason: String| ObjectError::BadSums {
            oid,
            path: path.clone(),
            reason,
        };
        let Some((f, made)) = open_file(&path, oid, create)? else {
            return Ok(None);
        };
        if made {
            lock(&self.handles).unsynced_names.insert(oid);
        }
        let mut h = [0u8; packed::HEADER as usize];
        let n =
            read_full(&f, &mut h, 0).map_err(|e| ObjectError::io("read", Some(oid), &path, e))?;
        let packed = if n == 0 {
            // New, or made by a process killed before its header: no
            // entries yet.
            let empty = self.size_of(oid, obj)? == 0;
            match pack.filter(|c| c.is_on() && empty) {
                Some(c) => {
                    f.write_all_at(&packed::header(c, 0), 0)
                        .map_err(|e| ObjectError::io("write", Some(oid), &path, e))?;
                    Some(c)
                }
                None => {
                    f.write_all_at(&sums::header(), 0)
                        .map_err(|e| ObjectError::io("write", Some(oid), &path, e))?;
                    None
                }
            }
        } else if n >= 6 && u16::from_le_bytes([h[4], h[5]]) == packed::VERSION {
            Some(packed::check_header(&h[..n]).map_err(bad)?)
        } else {
            sums::check_header(&h[..n]).map_err(bad)?;
            None
        };
        let _ = obj.sums.set(Sums { file: f, packed });
        Ok(obj.sums.get())
    }

    /// How to reach `obj`'s bytes, its checksum file opened (or `None`).
    fn view<'a>(&self, obj: &'a Obj, sums: Option<&'a Sums>) -> View<'a> {
        match sums {
            Some(Sums {
                file,
                packed: Some(c),
            }) => View::Packed(Packed {
                data: &obj.data,
                sums: file,
                compress: *c,
                gen: self.gen,
            }),
            _ => View::Plain(Files {
                data: &obj.data,
                sums: sums.map(|s| &s.file),
                unset_is_hole: self.require_sums && sums.is_some(),
            }),
        }
    }

    fn fault(&self, oid: u64, f: Fault) -> ObjectError {
        match f {
            Fault::Io(op, e) => ObjectError::io(op, Some(oid), &self.object_path(oid), e),
            Fault::Corrupt {
                offset,
                stored,
                computed,
            } => ObjectError::Corrupt {
                oid,
                offset,
                stored,
                computed,
            },
        }
    }

    /// The length of `obj`'s data file (a plain object's size).
    fn size_of(&self, oid: u64, obj: &Obj) -> Result<u64, ObjectError> {
        obj.data
            .metadata()
            .map(|m| m.len())
            .map_err(|e| ObjectError::io("stat", Some(oid), &self.object_path(oid), e))
    }

    /// The bytes `obj`'s data file takes on disk.
    fn taken_by(&self, oid: u64, obj: &Obj) -> Result<u64, ObjectError> {
        self.taken_and_len(oid, obj).map(|(taken, _)| taken)
    }

    /// [`Self::taken_by`], and the data file's length, from one `fstat`.
    fn taken_and_len(&self, oid: u64, obj: &Obj) -> Result<(u64, u64), ObjectError> {
        obj.data
            .metadata()
            .map(|m| (owners::taken(&m), m.len()))
            .map_err(|e| ObjectError::io("stat", Some(oid), &self.object_path(oid), e))
    }

    /// Whom `obj`'s bytes count against (read once per handle).
    fn owner_of(&self, oid: u64, obj: &Obj) -> Result<Owner, ObjectError> {
        let mut o = lock(&obj.owner);
        if let Some(o) = *o {
            return Ok(o);
        }
        let found = owners::read(&obj.data)
            .map_err(|e| ObjectError::io("getxattr", Some(oid), &self.object_path(oid), e))?;
        *o = Some(found);
        Ok(found)
    }

    /// Run `change` of `obj` (its lock held) and count the bytes it moved
    /// against the object's owner, also when it fails part way. `change`
    /// is given the data file's length before it, from the same `fstat`
    /// (a plain object's size: one call fewer per write).
    fn charged<T>(
        &self,
        oid: u64,
        obj: &Obj,
        change: impl FnOnce(u64) -> Result<T, ObjectError>,
    ) -> Result<T, ObjectError> {
        let (before, len) = self.taken_and_len(oid, obj)?;
        let r = change(len);
        let after = self.taken_by(oid, obj)?;
        self.owners.moved(self.owner_of(oid, obj)?, before, after);
        r
    }

    /// Make `owner` the owner of object `oid`'s bytes, moving what it
    /// takes from its old owner's count. A missing object is made only
    /// with `create` (a write that carries the owner is about to make it).
    pub fn set_owner(&self, oid: u64, owner: Owner, create: bool) -> Result<(), ObjectError> {
        let _g = self.lock_of(oid).write().unwrap_or_else(|p| p.into_inner());
        match self.handle(oid, create)? {
            Some(obj) => self.own(oid, &obj, owner),
            None => Ok(()),
        }
    }

    /// [`ObjectStore::set_owner`] of an open object, its lock held.
    fn own(&self, oid: u64, obj: &Obj, owner: Owner) -> Result<(), ObjectError> {
        let old = self.owner_of(oid, obj)?;
        if old == owner {
            return Ok(());
        }
        match owners::write(&obj.data, owner) {
            Ok(()) => {}
            // A file system without extended attributes: the data is not
            // refused for it; the owner is kept while the handle is.
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                if !self
                    .owners_unkept
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    tracing::error!(dir = %self.dir.display(), "{e}: this OST counts bytes per owner only until it restarts");
                }
            }
            Err(e) => {
                return Err(ObjectError::io(
                    "setxattr",
                    Some(oid),
                    &self.object_path(oid),
                    e,
                ))
            }
        }
        *lock(&obj.owner) = Some(owner);
        let n = self.taken_by(oid, obj)?;
        self.owners.moved(old, n, 0);
        self.owners.moved(owner, 0, n);
        Ok(())
    }

    /// Whom object `oid`'s bytes count against ((0, 0, 0) for an object
    /// not made yet).
    pub fn owner(&self, oid: u64) -> Result<Owner, ObjectError> {
        let _g = self.lock_of(oid).read().unwrap_or_else(|p| p.into_inner());
        match self.handle(oid, false)? {
            Some(obj) => self.owner_of(oid, &obj),
            None => Ok(Owner::default()),
        }
    }

    /// The bytes held per owner, as counted.
    pub fn owner_usage(&self) -> HashMap<Owner, u64> {
        self.owners.snapshot()
    }

    /// The bytes held for `who`, as counted.
    pub fn id_usage(&self, who: loom_proto::quota::QuotaId) -> u64 {
        self.owners.of_id(who)
    }

    /// Count the bytes held per owner from every object's file (at
    /// opening; and for `loom quota --check`, whose caller compares it
    /// with [`ObjectStore::owner_usage`] while no change runs).
    pub fn count_owners(&self) -> Result<HashMap<Owner, u64>, ObjectError> {
        let mut m: HashMap<Owner, u64> = HashMap::new();
        for b in 0..=255u8 {
            for oid in self.objects_in(b)? {
                let path = self.object_path(oid);
                let n = match fs::metadata(&path) {
                    Ok(md) => owners::taken(&md),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(ObjectError::io("stat", Some(oid), &path, e)),
                };
                let o = match owners::read_at(&path) {
                    Ok(o) => o,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(ObjectError::io("getxattr", Some(oid), &path, e)),
                };
                if n > 0 {
                    *m.entry(o).or_default() += n;
                }
            }
        }
        Ok(m)
    }

    /// The files of `oid` for a change, made if missing (compressed under
    /// `pack` if this makes it).
    fn for_change(&self, oid: u64, pack: Option<Compress>) -> Result<Arc<Obj>, ObjectError> {
        let obj = self.handle(oid, true)?.ok_or_else(|| {
            ObjectError::io(
                "open",
                Some(oid),
                &self.object_path(oid),
                io::ErrorKind::NotFound.into(),
            )
        })?;
        self.sums_of(oid, &obj, true, pack)?;
        Ok(obj)
    }

    /// The files of `oid` for reading. An object with bytes and no
    /// checksums is corrupt on a store made with checksums.
    fn for_read<'a>(&self, oid: u64, obj: &'a Obj) -> Result<View<'a>, ObjectError> {
        let sums = self.sums_of(oid, obj, false, None)?;
        if sums.is_none() && self.require_sums && self.size_of(oid, obj)? > 0 {
            return Err(ObjectError::BadSums {
                oid,
                path: self.sums_path(oid),
                reason: "missing, but the object has data".into(),
            });
        }
        Ok(self.view(obj, sums))
    }

    /// Count a change of compressed object `oid` in the usage figures.
    fn moved(&self, oid: u64, d: Result<Delta, Fault>) -> Result<(), ObjectError> {
        let d = d.map_err(|f| self.fault(oid, f))?;
        self.usage.add(oid, d);
        Ok(())
    }

    /// Write `data` at `offset` of object `oid`, creating its file if
    /// needed, compressed under `pack` if this write makes it.
    pub fn write(
        &self,
        oid: u64,
        offset: u64,
        data: &[u8],
        pack: Option<Compress>,
    ) -> Result<(), ObjectError> {
        self.write_as(oid, offset, data, pack, None)
    }

    /// [`ObjectStore::write`], the object taking `owner` first if given
    /// (as [`ObjectStore::set_owner`], under the same lock).
    pub fn write_as(
        &self,
        oid: u64,
        offset: u64,
        data: &[u8],
        pack: Option<Compress>,
        owner: Option<Owner>,
    ) -> Result<(), ObjectError> {
        self.write_summed(oid, offset, data, &ChunkSums::default(), pack, owner)
    }

    /// [`ObjectStore::write_as`], given the crc32c of each 4 KiB piece of
    /// `data` (see [`checked::write_summed`]).
    pub fn write_summed(
        &self,
        oid: u64,
        offset: u64,
        data: &[u8],
        known: &ChunkSums,
        pack: Option<Compress>,
        owner: Option<Owner>,
    ) -> Result<(), ObjectError> {
        end_of(oid, offset, data.len() as u64)?;
        if data.is_empty() {
            return Ok(());
        }
        let _g = self.lock_of(oid).write().unwrap_or_else(|p| p.into_inner());
        self.preserve(oid, Change::Range(offset, offset + data.len() as u64))?;
        let obj = self.for_change(oid, pack)?;
        if let Some(o) = owner {
            self.own(oid, &obj, o)?;
        }
        self.charged(oid, &obj, |size| match self.view(&obj, obj.sums.get()) {
            View::Packed(p) => self.moved(oid, p.write(offset, data)),
            View::Plain(files) => {
                checked::write_summed(&files, self.gen, offset, data, known, size)
                    .map_err(|f| self.fault(oid, f))
            }
        })
    }

    /// Read up to `len` bytes at `offset` of object `oid`: short at the
    /// object's end, empty past it or if the object has no file. Every
    /// block the range touches is verified.
    pub fn read(&self, oid: u64, offset: u64, len: u32) -> Result<Vec<u8>, ObjectError> {
        end_of(oid, offset, u64::from(len))?;
        let _g = self.lock_of(oid).read().unwrap_or_else(|p| p.into_inner());
        let Some(obj) = self.handle(oid, false)? else {
            return Ok(Vec::new());
        };
        match self.for_read(oid, &obj)? {
            View::Packed(p) => p.read(offset, u64::from(len)),
            View::Plain(files) => {
                let size = self.size_of(oid, &obj)?;
                checked::read(&files, offset, u64::from(len), size)
            }
        }
        .map_err(|f| self.fault(oid, f))
    }

    /// Verify every block (or chunk) of object `oid`, a few at a time so
    /// that writers wait for one slice only: the bytes checked and the
    /// blocks that fail.
    pub fn verify(&self, oid: u64) -> Result<(u64, Vec<BadBlock>), ObjectError> {
        const SLICE: u64 = 16;
        let (mut bytes, mut bad) = (0, Vec::new());
        let mut first = 0;
        loop {
            let _g = self.lock_of(oid).read().unwrap_or_else(|p| p.into_inner());
            let Some(obj) = self.handle(oid, false)? else {
                break;
            };
            let (b, mut v) = match self.for_read(oid, &obj)? {
                View::Packed(p) => {
                    // A chunk is 16 blocks: one per slice.
                    let size = p.size().map_err(|f| self.fault(oid, f))?;
                    let entries = p.chunks().map_err(|f| self.fault(oid, f))?;
                    if first >= entries || first * packed::CHUNK >= size {
                        // Past the last entry the object is holes: nothing
                        // to read (and a damaged size of 2^63 bytes is not
                        // walked a chunk at a time).
                        bytes += size.saturating_sub(first * packed::CHUNK);
                        break;
                    }
                    let r = p.verify(first, 1);
                    first += 1;
                    r
                }
                View::Plain(files) => {
                    let size = self.size_of(oid, &obj)?;
                    if first * sums::BLOCK >= size {
                        break;
                    }
                    let r = checked::verify(&files, first, SLICE, size);
                    first += SLICE;
                    r
                }
            }
            .map_err(|f| self.fault(oid, f))?;
            bytes += b;
            bad.append(&mut v);
        }
        Ok((bytes, bad))
    }

    /// The ids of the objects with a file in bucket `bucket` (0..256, the
    /// `XX` directory), in increasing order: how scrub walks the store.
    pub fn objects_in(&self, bucket: u8) -> Result<Vec<u64>, ObjectError> {
        let sub = self.objects.join(format!("{bucket:02x}"));
        let mut oids = Vec::new();
        for ent in fs::read_dir(&sub).map_err(|e| ObjectError::io("readdir", None, &sub, e))? {
            let ent = ent.map_err(|e| ObjectError::io("readdir", None, &sub, e))?;
            if let Some(oid) = ent.file_name().to_str().and_then(|n| n.parse::<u64>().ok()) {
                oids.push(oid);
            }
        }
        oids.sort_unstable();
        Ok(oids)
    }

    /// The objects in bucket `bucket` with their sizes and the seconds
    /// since each was last written, in id order (for `loom fsck`).
    pub fn list(&self, bucket: u8) -> Result<Vec<ObjInfo>, ObjectError> {
        let now = std::time::SystemTime::now();
        let mut out = Vec::new();
        for oid in self.objects_in(bucket)? {
            let path = self.object_path(oid);
            let m = match fs::metadata(&path) {
                Ok(m) => m,
                // Destroyed meanwhile.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(ObjectError::io("stat", Some(oid), &path, e)),
            };
            let idle = m
                .modified()
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .map_or(0, |d| d.as_secs());
            let size = {
                let _g = self.lock_of(oid).read().unwrap_or_else(|p| p.into_inner());
                self.packed_size_of(oid)?.unwrap_or(m.len())
            };
            out.push(ObjInfo {
                oid,
                size,
                idle_secs: idle,
            });
        }
        Ok(out)
    }

    /// Set object `oid`'s size, creating its file if missing and `size > 0`
    /// (compressed under `pack` if this makes it).
    pub fn truncate(&self, oid: u64, size: u64, pack: Option<Compress>) -> Result<(), ObjectError> {
        end_of(oid, size, 0)?;
        {
            let _g = self.lock_of(oid).write().unwrap_or_else(|p| p.into_inner());
            if size == 0 && self.handle(oid, false)?.is_none() {
                return Ok(());
            }
            self.preserve(oid, Change::Resize(size))?;
            let obj = self.for_change(oid, pack)?;
            self.charged(oid, &obj, |old| match self.view(&obj, obj.sums.get()) {
                View::Packed(p) => self.moved(oid, p.resize(size)),
                View::Plain(files) => {
                    checked::resize(&files, self.gen, old, size).map_err(|f| self.fault(oid, f))
                }
            })?;
        }
        // Durable before the reply: the MDT records the new size next, and
        // a lost truncate would let old bytes reappear when the file grows.
        self.sync(oid)
    }

    /// Deallocate [offset, offset + len) of object `oid`, keeping its size:
    /// the range reads as zeros afterwards. A missing object is left alone.
    pub fn punch(&self, oid: u64, offset: u64, len: u64) -> Result<(), ObjectError> {
        end_of(oid, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        {
            let _g = self.lock_of(oid).write().unwrap_or_else(|p| p.into_inner());
            if self.handle(oid, false)?.is_none() {
                return Ok(());
            }
            self.preserve(oid, Change::Range(offset, offset + len))?;
            let obj = self.for_change(oid, None)?;
            self.charged(oid, &obj, |_| self.punch_in(oid, &obj, offset, len))?;
        }
        // Durable before the reply, as truncate.
        self.sync(oid)
    }

    /// Deallocate [offset, offset + len) of `obj`, its lock held.
    fn punch_in(&self, oid: u64, obj: &Obj, offset: u64, len: u64) -> Result<(), ObjectError> {
        let files = match self.view(obj, obj.sums.get()) {
            View::Packed(p) => return self.moved(oid, p.punch(offset, len)),
            View::Plain(files) => files,
        };
        let size = self.size_of(oid, obj)?;
        let f = &obj.data;
        let mode = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
        checked::punch(&files, self.gen, offset, len, size, || {
            // Both fit in off_t: checked by end_of in `punch`.
            match nix::fcntl::fallocate(f.as_raw_fd(), mode, offset as i64, len as i64) {
                Ok(()) => Ok(()),
                Err(nix::errno::Errno::EOPNOTSUPP) => zero_range(f, offset, len, size),
                Err(e) => Err(Fault::Io("punch", io::Error::from_raw_os_error(e as i32))),
            }
        })
        .map_err(|f| self.fault(oid, f))
    }

    /// Reserve the blocks of [offset, offset + len) of object `oid`,
    /// creating its file if needed and keeping its size (the MDT holds the
    /// file's size): writes there cannot then fail for lack of space.
    /// ENOSPC when the target cannot hold them; EOPNOTSUPP from a backing
    /// file system that cannot preallocate, and for a compressed object
    /// (what its data will take is not known before it is written).
    pub fn allocate(&self, oid: u64, offset: u64, len: u64) -> Result<(), ObjectError> {
        end_of(oid, offset, len)?;
        if len == 0 {
            return Ok(());
        }
        {
            let _g = self.lock_of(oid).write().unwrap_or_else(|p| p.into_inner());
            let obj = self.for_change(oid, None)?;
            let failed =
                |e: io::Error| ObjectError::io("allocate", Some(oid), &self.object_path(oid), e);
            if let View::Packed(_) = self.view(&obj, obj.sums.get()) {
                return Err(failed(io::Error::from_raw_os_error(libc::EOPNOTSUPP)));
            }
            let mode = FallocateFlags::FALLOC_FL_KEEP_SIZE;
            self.charged(oid, &obj, |_| {
                nix::fcntl::fallocate(obj.data.as_raw_fd(), mode, offset as i64, len as i64)
                    // ENOSPC and EOPNOTSUPP are expected outcomes, the
                    // caller's to report.
                    .map_err(|e| failed(io::Error::from_raw_os_error(e as i32)))
            })?;
        }
        // A reservation lost in a crash would let a later write fail.
        self.sync(oid)
    }

    /// Make object `oid`'s data and checksums durable (and its names, if
    /// new). A missing object is fine: there is nothing to sync.
    pub fn sync(&self, oid: u64) -> Result<(), ObjectError> {
        // What a snapshot keeps of it first: the object's new bytes must
        // not be on disk without the old ones kept.
        self.sync_kept(oid)?;
        let Some(obj) = self.handle(oid, false)? else {
            return Ok(());
        };
        let path = self.object_path(oid);
        obj.data
            .sync_data()
            .map_err(|e| ObjectError::io("fdatasync", Some(oid), &path, e))?;
        if let Some(s) = self.sums_of(oid, &obj, false, None)? {
            s.file
                .sync_data()
                .map_err(|e| ObjectError::io("fdatasync", Some(oid), &self.sums_path(oid), e))?;
        }
        let (word, bit) = ((oid % 256 / 64) as usize, 1u64 << (oid % 64));
        let need_dir = {
            let mut h = lock(&self.handles);
            let first_in_dir = h.dirs_synced[word] & bit == 0;
            h.unsynced_names.remove(&oid) || first_in_dir
        };
        if need_dir {
            // fsync the directory: the new object's names must survive a
            // crash.
            let sub = path.parent().unwrap_or(&self.objects);
            if let Err(e) = File::open(sub).and_then(|d| d.sync_all()) {
                lock(&self.handles).unsynced_names.insert(oid);
                return Err(ObjectError::io("fsync dir", Some(oid), sub, e));
            }
            lock(&self.handles).dirs_synced[word] |= bit;
        }
        Ok(())
    }

    /// The size of object `oid` (a compressed object's logical size); 0 if
    /// it has no file.
    pub fn size(&self, oid: u64) -> Result<u64, ObjectError> {
        let _g = self.lock_of(oid).read().unwrap_or_else(|p| p.into_inner());
        let path = self.object_path(oid);
        let len = match fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(ObjectError::io("stat", Some(oid), &path, e)),
        };
        Ok(self.packed_size_of(oid)?.unwrap_or(len))
    }

    /// What `look` finds in compressed object `oid`, read from its files
    /// without caching them (scans and listings visit every object once);
    /// `None` for a plain or missing object. The caller holds the
    /// object's lock.
    fn with_packed<T>(
        &self,
        oid: u64,
        look: impl FnOnce(&Packed<'_>) -> Result<T, Fault>,
    ) -> Result<Option<T>, ObjectError> {
        let path = self.sums_path(oid);
        let open = |p: &Path| match File::open(p) {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ObjectError::io("open", Some(oid), p, e)),
        };
        let Some(sums) = open(&path)? else {
            return Ok(None);
        };
        let mut h = [0u8; packed::HEADER as usize];
        let n = read_full(&sums, &mut h, 0)
            .map_err(|e| ObjectError::io("read", Some(oid), &path, e))?;
        let Ok(compress) = packed::check_header(&h[..n]) else {
            return Ok(None);
        };
        let Some(data) = open(&self.object_path(oid))? else {
            return Ok(None);
        };
        let p = Packed {
            data: &data,
            sums: &sums,
            compress,
            gen: self.gen,
        };
        look(&p).map(Some).map_err(|f| self.fault(oid, f))
    }

    /// A compressed object's (logical size, stored bytes), from all its
    /// entries; `None` for a plain or missing object.
    fn packed_usage_of(&self, oid: u64) -> Result<Option<(u64, u64)>, ObjectError> {
        self.with_packed(oid, |p| p.usage())
    }

    /// A compressed object's logical size, from its header alone; `None`
    /// for a plain or missing object.
    fn packed_size_of(&self, oid: u64) -> Result<Option<u64>, ObjectError> {
        self.with_packed(oid, |p| p.size())
    }

    /// Remove object `oid` and its checksums. A missing object is fine
    /// (destroy is resent after reconnects).
    pub fn destroy(&self, oid: u64) -> Result<(), ObjectError> {
        let _g = self.lock_of(oid).write().unwrap_or_else(|p| p.into_inner());
        let gone = self.packed_usage_of(oid).ok().flatten();
        let path = self.object_path(oid);
        let held = match fs::metadata(&path) {
            Ok(m) => Some((owners::taken(&m), owners::read_at(&path))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(ObjectError::io("stat", Some(oid), &path, e)),
        };
        {
            let mut cache = lock(&self.handles);
            cache.map.remove(&oid);
            cache.unsynced_names.remove(&oid);
        }
        // A snapshot that saw it keeps its files (moved, not copied).
        self.preserve(oid, Change::Destroy)?;
        self.sync_kept(oid)?;
        for path in [self.object_path(oid), self.sums_path(oid)] {
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(ObjectError::io("unlink", Some(oid), &path, e)),
            }
        }
        match held {
            Some((n, Ok(o))) => self.owners.moved(o, n, 0),
            Some((_, Err(e))) => tracing::warn!(oid, "destroyed an object whose owner did not read ({e}): its owner's count is off until the OST restarts"),
            None => {}
        }
        if let Some((logical, stored)) = gone {
            // A damaged header may claim any size (2^63 negated overflows).
            let neg = |n: u64| -i64::try_from(n).unwrap_or(i64::MAX);
            self.usage.add(
                oid,
                Delta {
                    logical: neg(logical),
                    stored: neg(stored),
                },
            );
        }
        Ok(())
    }

    /// Count what the compressed objects already in the store hold and
    /// take, once, after opening (it reads every object's checksum file,
    /// so the OST runs it in the background); until it is done
    /// [`ObjectStore::packed_usage`] is partial. Changes made meanwhile
    /// are counted exactly once: an object's changes count from the
    /// moment the count has read it (or from its creation, for one made
    /// after its bucket was listed).
    pub fn count_packed(&self) {
        for b in 0..=255u8 {
            let oids = {
                // Listed with the count's lock held: an object made after
                // this counts its own changes from its first.
                let mut c = lock(&self.usage.count);
                c.started = true;
                match self.objects_in(b) {
                    Ok(oids) => {
                        c.bucket = u32::from(b);
                        c.pending = oids.iter().copied().collect();
                        oids
                    }
                    Err(e) => {
                        tracing::warn!(dir = %self.dir.display(), bucket = b, "counting compressed objects: {e}");
                        c.bucket = u32::from(b);
                        c.pending.clear();
                        continue;
                    }
                }
            };
            for oid in oids {
                let _g = self.lock_of(oid).read().unwrap_or_else(|p| p.into_inner());
                let found = self.packed_usage_of(oid).unwrap_or_else(|e| {
                    tracing::warn!(oid, "counting a compressed object: {e}");
                    None
                });
                let mut c = lock(&self.usage.count);
                c.pending.remove(&oid);
                if let Some((logical, stored)) = found {
                    self.usage
                        .logical
                        .fetch_add(logical as i64, Ordering::Relaxed);
                    self.usage
                        .stored
                        .fetch_add(stored as i64, Ordering::Relaxed);
                }
            }
        }
        let mut c = lock(&self.usage.count);
        c.bucket = 256;
        c.pending.clear();
    }

    /// What the compressed objects hold (logical bytes) and take (their
    /// chunks' stored forms, in 4 KiB units), and whether the count of
    /// those found at opening is done.
    pub fn packed_usage(&self) -> PackedUsage {
        let c = lock(&self.usage.count);
        PackedUsage {
            logical: self.usage.logical.load(Ordering::Relaxed).max(0) as u64,
            stored: self.usage.stored.load(Ordering::Relaxed).max(0) as u64,
            counted: c.bucket >= 256,
        }
    }

    /// Reserve `count` fresh object ids and return the first: the caller
    /// owns [start, start + count). The new watermark is on stable storage
    /// before this returns.
    pub fn precreate(&self, count: u32) -> Result<u64, ObjectError> {
        let mut next = lock(&self.next_id);
        let start = *next;
        let end = start
            .checked_add(u64::from(count))
            .ok_or(ObjectError::IdsExhausted { next: start, count })?;
        let path = self.watermark_path();
        // Persist before handing the range out: after a crash the watermark
        // is at or above every id anyone was given.
        crate::durable::write_atomic(&path, format!("{end}\n").as_bytes())
            .map_err(|e| ObjectError::io("write watermark", None, &path, e))?;
        *next = end;
        Ok(start)
    }

    /// Space and object usage of the file system holding the target.
    pub fn statfs(&self) -> Result<StatFs, ObjectError> {
        statfs_of(&self.dir)
    }
}

/// Open `path`, a file of object `oid`, for reading and writing: made if
/// missing and `create` (then the bool is true), `None` if missing and not.
fn open_file(path: &Path, oid: u64, create: bool) -> Result<Option<(File, bool)>, ObjectError> {
    match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => Ok(Some((f, false))),
        Err(e) if e.kind() == io::ErrorKind::NotFound && !create => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map(|f| Some((f, true)))
            .map_err(|e| ObjectError::io("create", Some(oid), path, e)),
        Err(e) => Err(ObjectError::io("open", Some(oid), path, e)),
    }
}

/// Punch for file systems without hole punching: write zeros over the
/// part of the range inside an object of `size` bytes.
fn zero_range(f: &File, offset: u64, len: u64, size: u64) -> Result<(), Fault> {
    let end = offset.saturating_add(len).min(size);
    let zeros = vec![0u8; 1 << 20];
    let mut pos = offset;
    while pos < end {
        let n = (end - pos).min(zeros.len() as u64) as usize;
        f.write_all_at(&zeros[..n], pos)
            .map_err(|e| Fault::Io("zero", e))?;
        pos += n as u64;
    }
    Ok(())
}

/// Count this opening of the store in `dir` and return its number (never
/// 0, which marks a block with no checksum). Durable before use, so two
/// openings never share one.
fn next_incarnation(dir: &Path) -> Result<u32, ObjectError> {
    let path = dir.join(INCARNATION_FILE);
    let last: u32 = match fs::read_to_string(&path) {
        Ok(s) => s.trim().parse().map_err(|e| {
            let e = io::Error::new(io::ErrorKind::InvalidData, format!("{e} in {:?}", s.trim()));
            ObjectError::io("parse", None, &path, e)
        })?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(ObjectError::io("read", None, &path, e)),
    };
    let next = last.checked_add(1).unwrap_or(1);
    crate::durable::write_atomic(&path, format!("{next}\n").as_bytes())
        .map_err(|e| ObjectError::io("write", None, &path, e))?;
    Ok(next)
}

/// Space and inode usage of the file system holding `dir`, from statvfs.
/// The `target` field is left `None` for the caller to fill.
pub fn statfs_of(dir: &Path) -> Result<StatFs, ObjectError> {
    let v = nix::sys::statvfs::statvfs(dir).map_err(|e| {
        ObjectError::io("statvfs", None, dir, io::Error::from_raw_os_error(e as i32))
    })?;
    let frag = v.fragment_size() as u64;
    Ok(StatFs {
        target: None,
        bytes_total: (v.blocks() as u64).saturating_mul(frag),
        bytes_free: (v.blocks_free() as u64).saturating_mul(frag),
        bytes_avail: (v.blocks_available() as u64).saturating_mul(frag),
        files_total: v.files() as u64,
        files_free: v.files_free() as u64,
        ..StatFs::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn tmp() -> tempfile::TempDir {
        tempfile::tempdir().expect("tempdir")
    }

    #[test]
    fn object_files_live_in_hex_subdirectories() {
        let d = tmp();
        let s = ObjectStore::open(d.path()).expect("open");
        s.write(0x1ff, 0, b"x", None).expect("write");
        assert!(d.path().join("objects/ff/511").is_file());
        assert!(d.path().join("objects/00").is_dir());
    }

    #[test]
    fn a_compressed_object_with_a_damaged_size_verifies_what_it_holds() {
        let d = tmp();
        let s = ObjectStore::open(d.path()).expect("open");
        let data = vec![7u8; 200_000];
        s.write(3, 0, &data, Some(Compress::LZ4)).expect("write");
        drop(s);
        // The header's size (bytes 8..16) says 2^63: past the last entry
        // the object is holes, not chunks to walk one by one.
        let f = OpenOptions::new()
            .write(true)
            .open(d.path().join("objects/03/3.sum"))
            .expect("open the checksum file");
        f.write_all_at(&(1u64 << 63).to_le_bytes(), 8)
            .expect("damage the size");
        let s = ObjectStore::open(d.path()).expect("reopen");
        let (bytes, bad) = s.verify(3).expect("verify");
        assert!(bad.is_empty());
        assert_eq!(bytes, 1 << 63, "the holes past the entries are counted");
        assert_eq!(s.read(3, 0, 100).expect("read"), data[..100].to_vec());
        // Its destruction counts what it held without overflowing (the
        // fuzzer's `ost_object` found the negation of 2^63).
        s.destroy(3).expect("destroy");
        assert_eq!(s.size(3).expect("size"), 0);
    }

    #[test]
    fn a_flipped_byte_on_disk_reads_as_corrupt_never_as_data() {
        let d = tmp();
        let s = ObjectStore::open(d.path()).expect("open");
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        s.write(7, 0, &data, None).expect("write");
        s.sync(7).expect("sync");
        drop(s);
        let f = OpenOptions::new()
            .write(true)
            .open(d.path().join("objects/07/7"))
            .expect("open the object file");
        f.write_all_at(&[data[70_000] ^ 1], 70_000)
            .expect("flip a bit");
        let s = ObjectStore::open(d.path()).expect("reopen");
        assert_eq!(s.read(7, 0, 1000).expect("block 0"), data[..1000].to_vec());
        match s.read(7, 69_000, 2000) {
            Err(
                e @ ObjectError::Corrupt {
                    oid: 7,
                    offset: 69_632,
                    ..
                },
            ) => {
                assert_eq!(e.errno(), Errno::EIO);
            }
            other => panic!("read of the flipped block: {other:?}"),
        }
        let (bytes, bad) = s.verify(7).expect("verify");
        assert_eq!(bytes, 200_000);
        assert_eq!(
            bad.iter().map(|b| b.offset).collect::<Vec<_>>(),
            vec![69_632]
        );
        // Losing the checksum file is corruption too, on a store made with
        // checksums.
        std::fs::remove_file(s.sums_path(7)).expect("rm sums");
        drop(s);
        let s = ObjectStore::open(d.path()).expect("reopen");
        assert!(matches!(
            s.read(7, 0, 10),
            Err(ObjectError::BadSums { oid: 7, .. })
        ));
    }

    #[test]
    fn objects_of_a_store_made_before_checksums_still_read() {
        let d = tmp();
        let s = ObjectStore::open(d.path()).expect("open");
        s.write(9, 0, b"old bytes", None).expect("write");
        drop(s);
        std::fs::remove_file(d.path().join(CHECKSUMS_FILE)).expect("rm marker");
        std::fs::remove_file(d.path().join("objects/09/9.sum")).expect("rm sums");
        let s = ObjectStore::open(d.path()).expect("reopen");
        assert_eq!(s.read(9, 0, 100).expect("read"), b"old bytes".to_vec());
        // Its next change gives the blocks it touches checksums.
        s.write(9, 4, b"NEW", None).expect("write");
        assert_eq!(s.read(9, 0, 100).expect("read"), b"old NEWes".to_vec());
        assert!(s.sums_path(9).is_file());
        assert!(s.verify(9).expect("verify").1.is_empty());
    }

    #[test]
    fn allocate_reserves_blocks_and_keeps_size_and_data() {
        use std::os::unix::fs::MetadataExt;
        let d = tmp();
        let s = ObjectStore::open(d.path()).expect("open");
        s.write(3, 0, b"data", None).expect("write");
        s.allocate(3, 0, 1 << 20).expect("allocate");
        let m = std::fs::metadata(s.object_path(3)).expect("stat");
        assert_eq!(m.len(), 4, "the size is the MDT's business");
        assert!(m.blocks() * 512 >= 1 << 20, "{} blocks", m.blocks());
        assert_eq!(s.read(3, 0, 8).expect("read"), b"data".to_vec());
        // A new object is created by its allocation.
        s.allocate(4, 4096, 4096).expect("allocate a new object");
        assert_eq!(s.size(4).expect("size"), 0);
        assert!(matches!(
            s.allocate(5, u64::MAX - 1, 2),
            Err(ObjectError::OutOfRange { .. })
        ));
    }

    #[test]
    fn missing_object_reads_empty_and_has_size_zero() {
        let d = tmp();
        let s = ObjectStore::open(d.path()).expect("open");
        assert_eq!(s.read(7, 0, 100).expect("read"), Vec::<u8>::new());
        assert_eq!(s.size(7).expect("size"), 0);
        s.sync(7).expect("sync of a missing object");
        s.destroy(7).expect("destroy of a missing object");
        s.punch(7, 0, 10).expect("punch of a missing object");
        s.truncate(7, 0, None).expect("truncate to 0");
        assert!(!s.object_path(7).exists());
    }

    #[test]
    fn holes_read_as_zeros_and_reads_are_short_at_the_end() {
        let d = tmp();
        let s = ObjectStore::open(d.path()).expect("open");
        s.write(3, 10, b"abc", None).expect("write");
        s.sync(3).expect("sync");
        let mut want = vec![0u8; 10];
        want.extend_from_slice(b"abc");
        assert_eq!(s.read(3, 0, 100).expect("read"), want);
        assert_eq!(s.read(3, 13, 5).expect("read"), Vec::<u8>::new());
        assert_eq!(s.read(3, 100, 5).expect("read"), Vec::<u8>::new());
    }

    #[test]
    fn destroy_evicts_the_cached_handle() {
        let d = tmp();
        let s = ObjectStore::open(d.path()).expect("open");
        s.write(5, 0, b"hello", None).expect("write");
        s.destroy(5).expect("destroy");
        assert!(!s.object_path(5).exists());
        assert_eq!(s.read(5, 0, 10).expect("read"), Vec::<u8>::new());
        s.write(5, 0, b"x", None).expect("write again");
        assert_eq!(s.read(5, 0, 10).expect("read"), b"x".to_vec());
    }

    #[test]
    fn more_objects_than_the_cache_holds_stay_correct() {
        let d = tmp();
        let s = ObjectStore::open(d.path()).expect("open");
        let n = HANDLE_CACHE_CAPACITY as u64 + 50;
        for oid in 1..=n {
            s.write(oid, 0, &oid.to_le_bytes(), None).expect("write");
        }
        assert!(lock(&s.handles).map.len() <= HANDLE_CACHE_CAPACITY);
        for oid in 1..=n {
            assert_eq!(s.read(oid, 0, 8).expect("read"), oid.to_le_bytes().to_vec());
        }
    }

    #[test]
    fn ranges_beyond_the_largest_offset_are_refused() {
        let d = tmp();
        let s = ObjectStore::open(d.path()).expect("open");
        let e = s.write(1, u64::MAX - 1, b"ab", None).expect_err("overflow");
        assert!(matches!(e, ObjectError::OutOfRange { oid: 1, .. }));
        assert_eq!(WireError::from(e).errno, Errno::EFBIG);
    }

    #[test]
    fn precreate_ranges_never_overlap_across_reopen() {
        let d = tmp();
        let mut seen: Vec<(u64, u64)> = Vec::new();
        for _ in 0..4 {
            let s = ObjectStore::open(d.path()).expect("open");
            for count in [1u32, 10, 1000, 0, 7] {
                let start = s.precreate(count).expect("precreate");
                assert!(start >= 1);
                seen.push((start, start + u64::from(count)));
            }
        }
        seen.retain(|(a, b)| a < b);
        seen.sort_unstable();
        for w in seen.windows(2) {
            assert!(w[0].1 <= w[1].0, "overlap: {:?} and {:?}", w[0], w[1]);
        }
        assert_eq!(seen[0].0, 1);
    }

    #[test]
    fn lost_watermark_is_recovered_above_existing_objects() {
        let d = tmp();
        let s = ObjectStore::open(d.path()).expect("open");
        let start = s.precreate(100).expect("precreate");
        s.write(start + 41, 0, b"data", None).expect("write");
        drop(s);
        fs::remove_file(d.path().join(WATERMARK_FILE)).expect("rm watermark");
        let s = ObjectStore::open(d.path()).expect("reopen");
        assert!(s.precreate(1).expect("precreate") > start + 41);
    }

    #[test]
    fn corrupt_watermark_is_an_error_naming_the_file() {
        let d = tmp();
        fs::write(d.path().join(WATERMARK_FILE), "banana").expect("write");
        let e = ObjectStore::open(d.path()).expect_err("corrupt");
        assert!(matches!(e, ObjectError::CorruptWatermark { .. }));
        assert!(e.to_string().contains("precreate"));
    }

    #[test]
    fn statfs_reports_nonzero_space() {
        let d = tmp();
        let s = ObjectStore::open(d.path()).expect("open");
        let st = s.statfs().expect("statfs");
        assert!(st.bytes_total > 0);
        assert!(st.bytes_free <= st.bytes_total);
        assert!(st.bytes_avail <= st.bytes_total);
    }

    #[test]
    fn io_errors_keep_their_errno_on_the_wire() {
        let e = ObjectError::Io {
            op: "write",
            oid: Some(1),
            path: PathBuf::from("/x"),
            source: io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert_eq!(WireError::from(e).errno, Errno::ENOSPC);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Write {
            oid: u64,
            offset: u64,
            len: usize,
            byte: u8,
        },
        Truncate {
            oid: u64,
            size: u64,
        },
        Punch {
            oid: u64,
            offset: u64,
            len: u64,
        },
        Read {
            oid: u64,
            offset: u64,
            len: u32,
        },
        Sync {
            oid: u64,
        },
        Destroy {
            oid: u64,
        },
        Reopen,
    }

    fn op() -> impl Strategy<Value = Op> {
        let oid = 1u64..4;
        prop_oneof![
            // Ranges span many 4 KiB checksum blocks.
            4 => (oid.clone(), 0u64..200_000, 0usize..90_000, any::<u8>())
                .prop_map(|(oid, offset, len, byte)| Op::Write { oid, offset, len, byte }),
            2 => (oid.clone(), 0u64..250_000).prop_map(|(oid, size)| Op::Truncate { oid, size }),
            2 => (oid.clone(), 0u64..250_000, 0u64..150_000)
                .prop_map(|(oid, offset, len)| Op::Punch { oid, offset, len }),
            4 => (oid.clone(), 0u64..250_000, 0u32..150_000)
                .prop_map(|(oid, offset, len)| Op::Read { oid, offset, len }),
            1 => oid.clone().prop_map(|oid| Op::Sync { oid }),
            1 => oid.prop_map(|oid| Op::Destroy { oid }),
            1 => Just(Op::Reopen),
        ]
    }

    /// Object 1 is plain, 2 and 3 are compressed (made so by their first
    /// write or truncate).
    fn pack_of(oid: u64) -> Option<Compress> {
        match oid {
            2 => Some(Compress::zstd(1)),
            3 => Some(Compress::LZ4),
            _ => None,
        }
    }

    fn model_read(m: &[u8], offset: u64, len: u32) -> Vec<u8> {
        let start = (offset as usize).min(m.len());
        let end = (offset as usize + len as usize).min(m.len());
        m[start..end].to_vec()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn store_matches_an_in_memory_model(ops in proptest::collection::vec(op(), 1..40)) {
            let d = tmp();
            let mut s = ObjectStore::open(d.path()).expect("open");
            s.count_packed();
            let mut model: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Write { oid, offset, len, byte } => {
                        // Runs of one byte and a counter: chunks that
                        // compress, and chunks that do not.
                        let data: Vec<u8> = (0..len)
                            .map(|i| if byte % 2 == 0 { byte } else { (i as u8).wrapping_mul(byte) })
                            .collect();
                        s.write(oid, offset, &data, pack_of(oid)).expect("write");
                        if len > 0 {
                            let m = model.entry(oid).or_default();
                            let end = offset as usize + len;
                            if m.len() < end {
                                m.resize(end, 0);
                            }
                            m[offset as usize..end].copy_from_slice(&data);
                        }
                    }
                    Op::Truncate { oid, size } => {
                        s.truncate(oid, size, pack_of(oid)).expect("truncate");
                        model.entry(oid).or_default().resize(size as usize, 0);
                    }
                    Op::Punch { oid, offset, len } => {
                        s.punch(oid, offset, len).expect("punch");
                        if let Some(m) = model.get_mut(&oid) {
                            let start = (offset as usize).min(m.len());
                            let end = (offset as usize + len as usize).min(m.len());
                            m[start..end].fill(0);
                        }
                    }
                    Op::Read { oid, offset, len } => {
                        let got = s.read(oid, offset, len).expect("read");
                        let m = model.get(&oid).map(Vec::as_slice).unwrap_or(&[]);
                        prop_assert_eq!(got, model_read(m, offset, len));
                    }
                    Op::Sync { oid } => s.sync(oid).expect("sync"),
                    Op::Destroy { oid } => {
                        s.destroy(oid).expect("destroy");
                        model.remove(&oid);
                    }
                    Op::Reopen => {
                        drop(s);
                        s = ObjectStore::open(d.path()).expect("reopen");
                        s.count_packed();
                    }
                }
                for oid in 1u64..4 {
                    let want = model.get(&oid).map_or(0, |m| m.len() as u64);
                    prop_assert_eq!(s.size(oid).expect("size"), want, "size of {}", oid);
                }
            }
            for (oid, m) in &model {
                let got = s.read(*oid, 0, 1 << 20).expect("read");
                prop_assert_eq!(&got, m, "final contents of {}", oid);
                let (bytes, bad) = s.verify(*oid).expect("verify");
                prop_assert_eq!(bytes, m.len() as u64);
                prop_assert!(bad.is_empty(), "{:?}", bad);
            }
            // The running usage of compressed objects is what a count from
            // scratch finds.
            let running = s.packed_usage();
            let fresh = ObjectStore::open(d.path()).expect("reopen");
            fresh.count_packed();
            prop_assert_eq!(running, fresh.packed_usage());
            let logical: u64 = [2u64, 3].iter().map(|o| model.get(o).map_or(0, |m| m.len() as u64)).sum();
            prop_assert_eq!(running.logical, logical);
        }
    }
}
