//! Snapshots of an OST's objects, copy-on-write by chunk.
//!
//! A snapshot is taken by number ([`crate::object::ObjectStore::
//! snapshot_take`]): from then on, the first change of an object keeps
//! what the change is about to overwrite in that snapshot's delta, a
//! [`CHUNK`] at a time, before the change is made. A snapshot therefore
//! costs nothing when it is taken, and then only the chunks changed
//! since (as LVM's snapshots, and unlike ZFS's, the old bytes move, not
//! the new ones: the live object stays where it is and reads as fast).
//!
//! On-disk layout, in the target directory `DIR`:
//!
//! ```text
//! DIR/snapshots/ID/XX/OID         chunks of OID kept for snapshot ID, at
//!                                 their own offsets (a sparse file)
//! DIR/snapshots/ID/XX/OID.sum     their checksum entries (`crate::sums`)
//! DIR/snapshots/ID/XX/OID.base    the object's files as they were when
//! DIR/snapshots/ID/XX/OID.base.sum  it was destroyed, or (compressed
//!                                 objects) first changed
//! DIR/snapshots/ID/XX/OID.map     what is kept: records, below
//! DIR/snapshots/ID/born           the first object id not handed out
//!                                 when it was taken (decimal): objects
//!                                 from there on are younger, and nothing
//!                                 is kept of them
//! DIR/snapshots/ID.dropping       the snapshot is being destroyed
//! ```
//!
//! `XX` is `OID % 256` in lower-case hex, as for the objects. A map is a
//! sequence of 16-byte records, each `kind u8 | 0 u8 x3 | crc32c u32 |
//! value u64` (little-endian; the crc covers kind and value), appended:
//! - `EXISTED(size)`: the object existed at the snapshot, `size` bytes
//!   long (first record, written at its first change since);
//! - `ABSENT`: it did not (made since): nothing is ever kept for it;
//! - `CHUNK(c)`: chunk `c`'s bytes and checksums are in the delta;
//! - `BASE`: `OID.base` holds every chunk not kept on its own.
//!
//! Objects are handed out in id order (`precreate`'s watermark), and only
//! objects handed out are written: an object at or past `born` was made
//! after the snapshot, so its changes keep nothing and write no record.
//!
//! A record whose crc fails (the last one, torn by a crash) is ignored:
//! the chunk it would have named was kept before the change started, and
//! is kept again by the next change.
//!
//! Reading object `O` as snapshot `Si` was: the first delta among `Si`,
//! `Si+1`, ... (the snapshots taken after it, oldest first) that holds a
//! record of `O` says whether it existed and its size then (nothing
//! changed it between `Si` and that snapshot); each chunk comes from the
//! first of those deltas that kept it, or its base, or else from the live
//! object (unchanged since `Si`).
//!
//! Destroying snapshot `Si` moves what only it kept into the delta of the
//! snapshot taken before it, `Si-1` (what `Si-1` had not kept of its own
//! is the same at `Si`), and removes its delta.
//!
//! Crash safety: the chunk's copy, then its record, then the change, in
//! that order, each under the object's lock; a process killed anywhere
//! leaves the snapshot's view whole. Deltas are made durable with the
//! object they were kept from ([`crate::object::ObjectStore::sync`]), so
//! after a power loss a snapshot keeps what the synced object shows.

use crate::sums::{self, read_full, BLOCK};
use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Bytes kept together: the unit of copy-on-write.
pub const CHUNK: u64 = 64 * 1024;
/// The directory of the snapshots, in a target's directory.
pub const SNAPSHOTS_DIR: &str = "snapshots";

/// In a delta: the first object id not handed out when it was taken.
const BORN_FILE: &str = "born";
const RECORD: usize = 16;
const EXISTED: u8 = 1;
const ABSENT: u8 = 2;
const KEPT_CHUNK: u8 = 3;
const BASE: u8 = 4;

/// What one snapshot's delta holds of one object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Kept {
    /// The object was changed since the snapshot (there is a record).
    pub recorded: bool,
    /// It existed at the snapshot.
    pub existed: bool,
    /// Its size then (bytes; the logical size of a compressed object).
    pub size: u64,
    /// Its files as they were are in the delta as a whole (`.base`).
    pub base: bool,
    /// The chunks kept on their own.
    pub chunks: BTreeSet<u64>,
}

impl Kept {
    /// Whether chunk `c` must be kept before a change: the object existed,
    /// the chunk held bytes then, and neither it nor a base is kept yet.
    pub fn needs(&self, c: u64) -> bool {
        self.existed && !self.base && c * CHUNK < self.size && !self.chunks.contains(&c)
    }

    fn apply(&mut self, kind: u8, value: u64) {
        match kind {
            EXISTED => {
                self.recorded = true;
                self.existed = true;
                self.size = value;
            }
            ABSENT => self.recorded = true,
            KEPT_CHUNK => {
                self.chunks.insert(value);
            }
            BASE => self.base = true,
            _ => {}
        }
    }
}

fn record(kind: u8, value: u64) -> [u8; RECORD] {
    let mut r = [0u8; RECORD];
    r[0] = kind;
    r[8..].copy_from_slice(&value.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&r[..1]), &r[8..]);
    r[4..8].copy_from_slice(&crc.to_le_bytes());
    r
}

/// The records of a map file's bytes; torn or damaged ones skipped.
pub fn decode(bytes: &[u8]) -> Kept {
    let mut k = Kept::default();
    for r in bytes.chunks_exact(RECORD) {
        let crc = crc32c::crc32c_append(crc32c::crc32c(&r[..1]), &r[8..]);
        if r[4..8] == crc.to_le_bytes() {
            let mut v = [0u8; 8];
            v.copy_from_slice(&r[8..]);
            k.apply(r[0], u64::from_le_bytes(v));
        }
    }
    k
}

/// The files of one snapshot's delta.
#[derive(Clone, Debug)]
pub struct Delta {
    dir: PathBuf,
}

fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

fn open_existing(path: &Path) -> io::Result<Option<File>> {
    match File::open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl Delta {
    /// Snapshot `id`'s delta in target directory `target`.
    pub fn of(target: &Path, id: u32) -> Delta {
        Delta {
            dir: target.join(SNAPSHOTS_DIR).join(id.to_string()),
        }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The first object id not handed out when it was taken: objects
    /// from there on were made since, and it keeps nothing of them.
    pub fn born(&self) -> io::Result<u64> {
        let path = self.dir.join(BORN_FILE);
        let text = fs::read_to_string(&path)?;
        text.trim().parse().map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e} in {:?}", path.display(), text.trim()),
            )
        })
    }

    /// Make its directories, durably, noting `born` (see [`Delta::born`]).
    pub fn make(&self, born: u64) -> io::Result<()> {
        fs::create_dir_all(&self.dir)?;
        crate::durable::write_atomic(&self.dir.join(BORN_FILE), format!("{born}\n").as_bytes())?;
        for i in 0..256u32 {
            fs::create_dir_all(self.dir.join(format!("{i:02x}")))?;
        }
        for d in [
            Some(self.dir.as_path()),
            self.dir.parent(),
            self.dir.parent().and_then(Path::parent),
        ]
        .into_iter()
        .flatten()
        {
            File::open(d)?.sync_all()?;
        }
        Ok(())
    }

    /// The path of `oid`'s file with `suffix` ("" for the kept chunks).
    pub fn path(&self, oid: u64, suffix: &str) -> PathBuf {
        self.dir
            .join(format!("{:02x}", oid % 256))
            .join(format!("{oid}{suffix}"))
    }

    /// What it holds of `oid`.
    pub fn kept(&self, oid: u64) -> io::Result<Kept> {
        match fs::read(self.path(oid, ".map")) {
            Ok(b) => Ok(decode(&b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Kept::default()),
            Err(e) => Err(e),
        }
    }

    fn append(&self, oid: u64, recs: &[[u8; RECORD]]) -> io::Result<()> {
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path(oid, ".map"))?;
        let mut buf = Vec::with_capacity(recs.len() * RECORD);
        for r in recs {
            buf.extend_from_slice(r);
        }
        use std::io::Write;
        (&f).write_all(&buf)
    }

    /// Record that `oid` existed at the snapshot with `size` bytes, or not.
    pub fn note_first(&self, oid: u64, existed: Option<u64>) -> io::Result<()> {
        match existed {
            Some(size) => self.append(oid, &[record(EXISTED, size)]),
            None => self.append(oid, &[record(ABSENT, 0)]),
        }
    }

    /// Keep chunk `c` of an object whose data is `data` and checksums
    /// `sums` (if it has them), `size` bytes long at the snapshot; then
    /// record it.
    pub fn keep_chunk(
        &self,
        oid: u64,
        c: u64,
        size: u64,
        data: &File,
        sums: Option<&File>,
    ) -> io::Result<()> {
        let start = c * CHUNK;
        let len = CHUNK.min(size.saturating_sub(start));
        if len > 0 {
            let mut buf = vec![0u8; len as usize];
            let got = read_full(data, &mut buf, start)?;
            let to = open_rw(&self.path(oid, ""))?;
            to.write_all_at(&buf[..got], start)?;
            if let Some(s) = sums {
                let (first, n) = (start / BLOCK, len.div_ceil(BLOCK));
                let es = sums::read_entries(s, first, n as usize)?;
                let to = self.sums_file(oid, "")?;
                sums::write_entries(&to, first, &es)?;
            }
        }
        self.append(oid, &[record(KEPT_CHUNK, c)])
    }

    /// The checksum file of the kept chunks (or of the base), made with
    /// its header if new.
    fn sums_file(&self, oid: u64, base: &str) -> io::Result<File> {
        let path = self.path(oid, &format!("{base}.sum"));
        let f = open_rw(&path)?;
        if f.metadata()?.len() == 0 {
            f.write_all_at(&sums::header(), 0)?;
        }
        Ok(f)
    }

    /// Keep the object's files `data` and `sums` as its base: moved there
    /// (`rename`, the object being destroyed) or copied (a compressed
    /// object about to change). Then record it.
    pub fn keep_base(&self, oid: u64, data: &Path, sums: &Path, moved: bool) -> io::Result<()> {
        for (from, suffix) in [(data, ".base"), (sums, ".base.sum")] {
            let to = self.path(oid, suffix);
            let r = if moved {
                fs::rename(from, &to)
            } else {
                fs::copy(from, &to).map(|_| ())
            };
            match r {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        self.append(oid, &[record(BASE, 0)])
    }

    /// The kept chunks' files of `oid` (data, checksums), if any.
    pub fn chunk_files(&self, oid: u64) -> io::Result<Option<(File, Option<File>)>> {
        self.files(oid, "")
    }

    /// The base's files of `oid` (data, checksums), if any.
    pub fn base_files(&self, oid: u64) -> io::Result<Option<(File, Option<File>)>> {
        self.files(oid, ".base")
    }

    fn files(&self, oid: u64, suffix: &str) -> io::Result<Option<(File, Option<File>)>> {
        let Some(d) = open_existing(&self.path(oid, suffix))? else {
            return Ok(None);
        };
        let s = open_existing(&self.path(oid, &format!("{suffix}.sum")))?;
        Ok(Some((d, s)))
    }

    /// Make what is kept of `oid` durable (with the object's own sync).
    pub fn sync(&self, oid: u64) -> io::Result<()> {
        for suffix in ["", ".sum", ".base", ".base.sum", ".map"] {
            if let Some(f) = open_existing(&self.path(oid, suffix))? {
                f.sync_data()?;
            }
        }
        let sub = self.dir.join(format!("{:02x}", oid % 256));
        File::open(sub)?.sync_all()
    }

    /// The objects it holds records of, in bucket order.
    pub fn objects(&self) -> io::Result<Vec<u64>> {
        let mut v = Vec::new();
        for i in 0..256u32 {
            let sub = self.dir.join(format!("{i:02x}"));
            let rd = match fs::read_dir(&sub) {
                Ok(rd) => rd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for ent in rd {
                let name = ent?.file_name();
                if let Some(oid) = name
                    .to_str()
                    .and_then(|n| n.strip_suffix(".map"))
                    .and_then(|n| n.parse::<u64>().ok())
                {
                    v.push(oid);
                }
            }
        }
        v.sort_unstable();
        Ok(v)
    }

    /// Bytes its files take on disk.
    pub fn taken(&self) -> io::Result<u64> {
        use std::os::unix::fs::MetadataExt;
        let mut n = 0;
        for i in 0..256u32 {
            let sub = self.dir.join(format!("{i:02x}"));
            let rd = match fs::read_dir(&sub) {
                Ok(rd) => rd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for ent in rd {
                n += ent?.metadata()?.blocks() * 512;
            }
        }
        Ok(n)
    }

    /// Move everything this delta holds of `oid` into `older`'s (the
    /// snapshot taken before it), where `older` has no record of it.
    pub fn move_into(&self, older: &Delta, oid: u64) -> io::Result<()> {
        // The map last: until it moves, `older` has no record and the
        // files moved before it are not read.
        for suffix in ["", ".sum", ".base", ".base.sum", ".map"] {
            match fs::rename(self.path(oid, suffix), older.path(oid, suffix)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Copy into `older` (which holds a record of `oid` saying it existed,
    /// `older_kept`) what it needs of this delta: the chunks it did not
    /// keep, and the base if it has none.
    pub fn merge_into(&self, older: &Delta, oid: u64, older_kept: &Kept) -> io::Result<()> {
        let mine = self.kept(oid)?;
        if !older_kept.existed || older_kept.base {
            return Ok(());
        }
        if let Some((d, s)) = self.chunk_files(oid)? {
            for &c in &mine.chunks {
                if older_kept.needs(c) {
                    older.keep_chunk(oid, c, older_kept.size, &d, s.as_ref())?;
                }
            }
        }
        if mine.base {
            // What `older` did not keep, and this delta did not keep on its
            // own, is in the base: keep it whole (its own chunks win).
            for suffix in [".base", ".base.sum"] {
                match fs::rename(self.path(oid, suffix), older.path(oid, suffix)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            // Chunks this delta kept on its own, which the base does not
            // hold as they were, were copied above.
            older.append(oid, &[record(BASE, 0)])?;
        }
        Ok(())
    }

    /// Remove everything it holds of `oid`.
    pub fn forget(&self, oid: u64) -> io::Result<()> {
        for suffix in ["", ".sum", ".base", ".base.sum", ".map"] {
            match fs::remove_file(self.path(oid, suffix)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_map_reads_back_and_skips_a_torn_record() {
        let mut b = Vec::new();
        b.extend_from_slice(&record(EXISTED, 200_000));
        b.extend_from_slice(&record(KEPT_CHUNK, 1));
        b.extend_from_slice(&record(KEPT_CHUNK, 3));
        let mut torn = record(KEPT_CHUNK, 2);
        torn[9] ^= 1;
        b.extend_from_slice(&torn);
        b.extend_from_slice(&record(BASE, 0)[..7]);
        let k = decode(&b);
        assert!(k.recorded && k.existed && !k.base);
        assert_eq!(k.size, 200_000);
        assert_eq!(k.chunks.iter().copied().collect::<Vec<_>>(), vec![1, 3]);
        assert!(
            k.needs(0) && !k.needs(1) && k.needs(2) && !k.needs(4),
            "{k:?}"
        );
        let absent = decode(&record(ABSENT, 0));
        assert!(absent.recorded && !absent.existed && !absent.needs(0));
    }
}
