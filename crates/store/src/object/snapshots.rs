//! The object store's snapshots (see [`crate::snaps`] for the format):
//! taking one, keeping chunks before each change, reading an object as a
//! snapshot saw it, and destroying one.

use super::{lock, ObjectError, ObjectStore, View};
use crate::checked::{self, Files};
use crate::packed::{self, Packed};
use crate::snaps::{Delta, Kept, CHUNK, SNAPSHOTS_DIR};
use crate::sums::read_full;
use loom_proto::quota::Owner;
use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io;
use std::path::Path;

/// The snapshots of one store: their numbers, and what the newest holds
/// of the objects changed since it was taken (read once per object).
#[derive(Debug, Default)]
pub(super) struct Snaps {
    ids: Vec<u32>,
    /// Each snapshot's first object id not handed out when it was taken.
    born: HashMap<u32, u64>,
    newest: HashMap<u64, Kept>,
    /// Objects whose delta was written since their last sync.
    unsynced: HashSet<u64>,
}

/// What a change is about to do to an object.
pub(super) enum Change {
    /// Overwrite `[from, to)`.
    Range(u64, u64),
    /// Set its size.
    Resize(u64),
    /// Remove it.
    Destroy,
}

impl Snaps {
    /// The snapshots found in `dir` (a target directory).
    pub(super) fn load(dir: &Path) -> Result<Snaps, ObjectError> {
        let sd = dir.join(SNAPSHOTS_DIR);
        let mut ids = Vec::new();
        match fs::read_dir(&sd) {
            Ok(rd) => {
                for ent in rd {
                    let ent = ent.map_err(|e| ObjectError::io("readdir", None, &sd, e))?;
                    if let Some(id) = ent.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                        ids.push(id);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(ObjectError::io("readdir", None, &sd, e)),
        }
        ids.sort_unstable();
        let mut born = HashMap::new();
        for id in &ids {
            let d = Delta::of(dir, *id);
            // A snapshot from before the note: every object may be older.
            let b = match d.born() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::NotFound => u64::MAX,
                Err(e) => return Err(ObjectError::io("read", None, d.dir(), e)),
            };
            born.insert(*id, b);
        }
        Ok(Snaps {
            ids,
            born,
            ..Snaps::default()
        })
    }
}

fn snap_err(dir: &Path, e: io::Error) -> ObjectError {
    ObjectError::io("snapshot", None, dir, e)
}

impl ObjectStore {
    /// Take snapshot `id` (larger than every snapshot this store has):
    /// from now on, the first change of each chunk keeps its old bytes
    /// for it. Every object's lock is taken first, so no change is half
    /// done when it is taken. Taking one that exists is a no-op.
    pub fn snapshot_take(&self, id: u32) -> Result<(), ObjectError> {
        let _all: Vec<_> = self
            .locks
            .iter()
            .map(|l| l.write().unwrap_or_else(|p| p.into_inner()))
            .collect();
        let mut s = lock(&self.snaps);
        if s.ids.contains(&id) {
            return Ok(());
        }
        if s.ids.last().is_some_and(|n| *n > id) {
            return Err(ObjectError::io(
                "snapshot",
                None,
                &self.dir,
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("snapshot {id} is older than snapshot {:?}", s.ids.last()),
                ),
            ));
        }
        let d = Delta::of(&self.dir, id);
        let born = *lock(&self.next_id);
        d.make(born).map_err(|e| snap_err(d.dir(), e))?;
        s.ids.push(id);
        s.born.insert(id, born);
        s.newest.clear();
        Ok(())
    }

    /// The snapshots this store holds, oldest first.
    pub fn snapshots(&self) -> Vec<u32> {
        lock(&self.snaps).ids.clone()
    }

    /// Bytes snapshot `id`'s delta takes on disk.
    pub fn snapshot_taken(&self, id: u32) -> Result<u64, ObjectError> {
        let d = Delta::of(&self.dir, id);
        d.taken().map_err(|e| snap_err(d.dir(), e))
    }

    /// Keep, for the newest snapshot, what `change` of `oid` is about to
    /// overwrite. The caller holds the object's lock exclusively.
    pub(super) fn preserve(&self, oid: u64, change: Change) -> Result<(), ObjectError> {
        let newest = {
            let s = lock(&self.snaps);
            match s.ids.last() {
                // Made since: nothing of it to keep.
                Some(n) if oid < s.born.get(n).copied().unwrap_or(u64::MAX) => *n,
                _ => return Ok(()),
            }
        };
        let d = Delta::of(&self.dir, newest);
        let failed =
            |e: io::Error| ObjectError::io("keep for snapshot", Some(oid), &d.path(oid, ""), e);
        let cached = lock(&self.snaps).newest.get(&oid).cloned();
        let mut kept = match cached {
            Some(k) => k,
            None => d.kept(oid).map_err(failed)?,
        };
        if !kept.recorded {
            let size = match self.handle(oid, false)? {
                Some(obj) => Some(
                    match self.view(&obj, self.sums_of(oid, &obj, false, None)?) {
                        View::Packed(p) => p.size().map_err(|f| self.fault(oid, f))?,
                        View::Plain(_) => self.size_of(oid, &obj)?,
                    },
                ),
                None => None,
            };
            d.note_first(oid, size).map_err(failed)?;
            kept.recorded = true;
            kept.existed = size.is_some();
            kept.size = size.unwrap_or(0);
        }
        if kept.existed && !kept.base {
            match change {
                Change::Destroy => {
                    // Its files go to the snapshot whole, as they are.
                    lock(&self.handles).map.remove(&oid);
                    d.keep_base(oid, &self.object_path(oid), &self.sums_path(oid), true)
                        .map_err(failed)?;
                    kept.base = true;
                }
                Change::Range(from, to) => {
                    // A change past the end pads the old last block,
                    // rewriting its checksum: that chunk is kept as it was
                    // (once per snapshot), whatever the change.
                    let from = from.min(kept.size.saturating_sub(1));
                    self.keep_chunks(oid, &d, &mut kept, from, to.max(from + 1))?;
                }
                Change::Resize(0) if kept.chunks.is_empty() => {
                    // Emptied (a rewrite from the start): the files move
                    // to the snapshot whole, none of their bytes copied,
                    // and the object starts again empty, its owner kept.
                    self.keep_moved(oid, &d, &mut kept)?;
                }
                Change::Resize(new) => {
                    let from = new.min(kept.size.saturating_sub(1));
                    self.keep_chunks(oid, &d, &mut kept, from, u64::MAX)?;
                }
            }
        }
        let mut s = lock(&self.snaps);
        if s.ids.last() == Some(&newest) {
            s.newest.insert(oid, kept);
            s.unsynced.insert(oid);
        }
        Ok(())
    }

    /// Move `oid`'s files into the delta as its base, and make it again,
    /// empty, under the same owner (its bytes leave the owner's count:
    /// they are the snapshot's now). A compressed object is copied whole.
    fn keep_moved(&self, oid: u64, d: &Delta, kept: &mut Kept) -> Result<(), ObjectError> {
        let failed =
            |e: io::Error| ObjectError::io("keep for snapshot", Some(oid), &d.path(oid, ""), e);
        let Some(obj) = self.handle(oid, false)? else {
            return Ok(());
        };
        if let View::Packed(_) = self.view(&obj, self.sums_of(oid, &obj, false, None)?) {
            return self.keep_chunks(oid, d, kept, 0, u64::MAX);
        }
        let (owner, taken) = (self.owner_of(oid, &obj)?, self.taken_by(oid, &obj)?);
        lock(&self.handles).map.remove(&oid);
        drop(obj);
        d.keep_base(oid, &self.object_path(oid), &self.sums_path(oid), true)
            .map_err(failed)?;
        kept.base = true;
        self.owners.moved(owner, taken, 0);
        let again = self.for_change(oid, None)?;
        // Counted from nothing: the new file is empty.
        *lock(&again.owner) = Some(Owner::default());
        self.own(oid, &again, owner)
    }

    /// Keep the chunks of `[from, to)` the delta lacks (a compressed
    /// object whole).
    fn keep_chunks(
        &self,
        oid: u64,
        d: &Delta,
        kept: &mut Kept,
        from: u64,
        to: u64,
    ) -> Result<(), ObjectError> {
        let failed =
            |e: io::Error| ObjectError::io("keep for snapshot", Some(oid), &d.path(oid, ""), e);
        let Some(obj) = self.handle(oid, false)? else {
            return Ok(());
        };
        let sums = self.sums_of(oid, &obj, false, None)?;
        if let View::Packed(_) = self.view(&obj, sums) {
            d.keep_base(oid, &self.object_path(oid), &self.sums_path(oid), false)
                .map_err(failed)?;
            kept.base = true;
            return Ok(());
        }
        let last = to.saturating_sub(1).min(kept.size.saturating_sub(1)) / CHUNK;
        for c in from / CHUNK..=last {
            if kept.needs(c) {
                d.keep_chunk(oid, c, kept.size, &obj.data, sums.map(|s| &s.file))
                    .map_err(failed)?;
                kept.chunks.insert(c);
            }
        }
        Ok(())
    }

    /// Make what the newest snapshot keeps of `oid` durable, before the
    /// object itself is (see [`crate::snaps`]).
    pub(super) fn sync_kept(&self, oid: u64) -> Result<(), ObjectError> {
        let newest = {
            let mut s = lock(&self.snaps);
            if !s.unsynced.remove(&oid) {
                return Ok(());
            }
            s.ids.last().copied()
        };
        if let Some(n) = newest {
            let d = Delta::of(&self.dir, n);
            d.sync(oid)
                .map_err(|e| ObjectError::io("fdatasync", Some(oid), &d.path(oid, ""), e))?;
        }
        Ok(())
    }

    /// Object `oid` as snapshot `id` saw it: `None` if it did not exist
    /// then, else its size and the bytes of `[offset, offset + len)` (short
    /// at its end), every block verified.
    pub fn read_snapshot(
        &self,
        id: u32,
        oid: u64,
        offset: u64,
        len: u32,
    ) -> Result<Option<(u64, Vec<u8>)>, ObjectError> {
        let ids: Vec<u32> = {
            let s = lock(&self.snaps);
            if !s.ids.contains(&id) {
                return Err(ObjectError::io(
                    "snapshot",
                    Some(oid),
                    &self.dir,
                    io::Error::new(io::ErrorKind::NotFound, format!("no snapshot {id}")),
                ));
            }
            if oid >= s.born.get(&id).copied().unwrap_or(u64::MAX) {
                return Ok(None);
            }
            s.ids.iter().copied().filter(|i| *i >= id).collect()
        };
        let _g = self.lock_of(oid).read().unwrap_or_else(|p| p.into_inner());
        let deltas: Vec<(Delta, Kept)> = ids
            .iter()
            .map(|i| {
                let d = Delta::of(&self.dir, *i);
                let k = d
                    .kept(oid)
                    .map_err(|e| ObjectError::io("read", Some(oid), &d.path(oid, ".map"), e))?;
                Ok((d, k))
            })
            .collect::<Result<_, ObjectError>>()?;
        let first = deltas.iter().find(|(_, k)| k.recorded);
        let size = match first {
            Some((_, k)) if !k.existed => return Ok(None),
            Some((_, k)) => k.size,
            None => match self.handle(oid, false)? {
                None => return Ok(None),
                Some(obj) => match self.for_read(oid, &obj)? {
                    View::Packed(p) => p.size().map_err(|f| self.fault(oid, f))?,
                    View::Plain(_) => self.size_of(oid, &obj)?,
                },
            },
        };
        let end = offset.saturating_add(u64::from(len)).min(size);
        let mut out = Vec::new();
        let mut at = offset;
        while at < end {
            let c = at / CHUNK;
            let piece_end = ((c + 1) * CHUNK).min(end);
            let bytes = self.read_piece(oid, &deltas, c, at, piece_end - at, size)?;
            out.extend_from_slice(&bytes);
            at = piece_end;
        }
        Ok(Some((size, out)))
    }

    /// `[at, at + len)` of chunk `c` of `oid` as the first of `deltas`
    /// saw it, the object `size` bytes long then.
    fn read_piece(
        &self,
        oid: u64,
        deltas: &[(Delta, Kept)],
        c: u64,
        at: u64,
        len: u64,
        size: u64,
    ) -> Result<Vec<u8>, ObjectError> {
        let unset_is_hole = self.require_sums;
        let plain = |data: &File, sums: Option<&File>, path: &Path| {
            let files = Files {
                data,
                sums,
                unset_is_hole,
            };
            checked::read(&files, at, len, size).map_err(|f| match f {
                checked::Fault::Io(op, e) => ObjectError::io(op, Some(oid), path, e),
                other => self.fault(oid, other),
            })
        };
        for (d, k) in deltas {
            if k.chunks.contains(&c) {
                let path = d.path(oid, "");
                let Some((data, sums)) = d
                    .chunk_files(oid)
                    .map_err(|e| ObjectError::io("open", Some(oid), &path, e))?
                else {
                    break;
                };
                return plain(&data, sums.as_ref(), &path);
            }
            if k.base {
                let path = d.path(oid, ".base");
                let Some((data, sums)) = d
                    .base_files(oid)
                    .map_err(|e| ObjectError::io("open", Some(oid), &path, e))?
                else {
                    break;
                };
                return match sums.as_ref().map(packed_header).transpose()? {
                    Some(Some(compress)) => {
                        let p = Packed {
                            data: &data,
                            sums: sums.as_ref().unwrap_or(&data),
                            compress,
                            gen: self.gen,
                        };
                        p.read(at, len).map_err(|f| self.fault(oid, f))
                    }
                    _ => plain(&data, sums.as_ref(), &path),
                };
            }
        }
        // Unchanged since: the live object's bytes.
        let Some(obj) = self.handle(oid, false)? else {
            return Ok(vec![0; len as usize]);
        };
        match self.for_read(oid, &obj)? {
            View::Packed(p) => p.read(at, len).map_err(|f| self.fault(oid, f)),
            View::Plain(files) => {
                checked::read(&files, at, len, size).map_err(|f| self.fault(oid, f))
            }
        }
    }

    /// Destroy snapshot `id`: what only it kept moves to the snapshot
    /// taken before it, the rest goes. Resumed if a crash cut it short
    /// (call it again).
    pub fn snapshot_drop(&self, id: u32) -> Result<(), ObjectError> {
        let (older, newest) = {
            let s = lock(&self.snaps);
            if !s.ids.contains(&id) {
                return Ok(());
            }
            (
                s.ids.iter().copied().filter(|i| *i < id).max(),
                s.ids.last() == Some(&id),
            )
        };
        let d = Delta::of(&self.dir, id);
        let marker = self.dir.join(SNAPSHOTS_DIR).join(format!("{id}.dropping"));
        fs::write(&marker, b"").map_err(|e| snap_err(&marker, e))?;
        let older = older.map(|o| Delta::of(&self.dir, o));
        for oid in d.objects().map_err(|e| snap_err(d.dir(), e))? {
            let _g = self.lock_of(oid).write().unwrap_or_else(|p| p.into_inner());
            let failed =
                |e: io::Error| ObjectError::io("drop snapshot", Some(oid), &d.path(oid, ""), e);
            if let Some(o) = &older {
                let ok = o.kept(oid).map_err(failed)?;
                if !ok.recorded {
                    d.move_into(o, oid).map_err(failed)?;
                } else {
                    d.merge_into(o, oid, &ok).map_err(failed)?;
                }
            }
            d.forget(oid).map_err(failed)?;
        }
        {
            let mut s = lock(&self.snaps);
            s.ids.retain(|i| *i != id);
            s.born.remove(&id);
            if newest {
                s.newest.clear();
            }
        }
        fs::remove_dir_all(d.dir()).map_err(|e| snap_err(d.dir(), e))?;
        fs::remove_file(&marker).map_err(|e| snap_err(&marker, e))?;
        Ok(())
    }

    /// Snapshots whose destruction a crash cut short: finish them.
    pub fn snapshot_resume_drops(&self) -> Result<(), ObjectError> {
        let sd = self.dir.join(SNAPSHOTS_DIR);
        let rd = match fs::read_dir(&sd) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(snap_err(&sd, e)),
        };
        let mut ids = Vec::new();
        for ent in rd {
            let ent = ent.map_err(|e| snap_err(&sd, e))?;
            if let Some(id) = ent
                .file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".dropping"))
                .and_then(|n| n.parse::<u32>().ok())
            {
                ids.push(id);
            }
        }
        for id in ids {
            self.snapshot_drop(id)?;
            // A marker left after the delta went.
            let _ = fs::remove_file(sd.join(format!("{id}.dropping")));
        }
        Ok(())
    }
}

/// The compression a checksum file's header names, if it is a compressed
/// object's.
fn packed_header(f: &File) -> Result<Option<loom_proto::Compress>, ObjectError> {
    let mut h = [0u8; packed::HEADER as usize];
    let n = read_full(f, &mut h, 0)
        .map_err(|e| ObjectError::io("read", None, Path::new("snapshot base"), e))?;
    Ok(packed::check_header(&h[..n]).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_proto::compress::{Compress, Method};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    const LZ4: Option<Compress> = Some(Compress {
        method: Method::Lz4,
        level: 0,
    });

    /// Object 3 is compressed; 1 and 2 are plain.
    fn pack_of(oid: u64) -> Option<Compress> {
        (oid == 3).then_some(LZ4).flatten()
    }

    #[derive(Clone, Debug)]
    enum Op {
        Write(u64, u64, u64, u8),
        Truncate(u64, u64),
        Punch(u64, u64, u64),
        Destroy(u64),
        Take,
        Drop(usize),
        Reopen,
    }

    fn op() -> impl Strategy<Value = Op> {
        let oid = 1u64..4;
        prop_oneof![
            4 => (oid.clone(), 0u64..300_000, 1u64..90_000, any::<u8>())
                .prop_map(|(o, off, len, b)| Op::Write(o, off, len, b)),
            1 => (oid.clone(), 0u64..350_000).prop_map(|(o, s)| Op::Truncate(o, s)),
            1 => (oid.clone(), 0u64..300_000, 1u64..150_000).prop_map(|(o, off, l)| Op::Punch(o, off, l)),
            1 => oid.prop_map(Op::Destroy),
            2 => Just(Op::Take),
            1 => (0usize..4).prop_map(Op::Drop),
            1 => Just(Op::Reopen),
        ]
    }

    type State = BTreeMap<u64, Vec<u8>>;

    fn check(s: &ObjectStore, live: &State, snaps: &BTreeMap<u32, State>) {
        for oid in 1..4 {
            let want = live.get(&oid).cloned().unwrap_or_default();
            assert_eq!(
                s.read(oid, 0, 1 << 20).expect("read live"),
                want,
                "live {oid}"
            );
            for (id, st) in snaps {
                let got = s
                    .read_snapshot(*id, oid, 0, 1 << 20)
                    .expect("read a snapshot");
                let want = st.get(&oid).map(|v| (v.len() as u64, v.clone()));
                assert_eq!(got, want, "object {oid} as snapshot {id} saw it");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Every snapshot reads as the objects were when it was taken,
        /// through writes, truncates, punches and destroys after it, other
        /// snapshots taken and destroyed, and the store reopened.
        #[test]
        fn every_snapshot_reads_as_its_objects_were(ops in proptest::collection::vec(op(), 1..40)) {
            let d = tempfile::tempdir().expect("tempdir");
            let mut s = ObjectStore::open(d.path()).expect("open");
            s.precreate(10).expect("precreate");
            let mut live: State = BTreeMap::new();
            let mut snaps: BTreeMap<u32, State> = BTreeMap::new();
            let mut next = 1u32;
            for o in ops {
                match o {
                    Op::Write(oid, off, len, b) => {
                        s.write(oid, off, &vec![b; len as usize], pack_of(oid)).expect("write");
                        let v = live.entry(oid).or_default();
                        let end = (off + len) as usize;
                        if v.len() < end {
                            v.resize(end, 0);
                        }
                        v[off as usize..end].fill(b);
                    }
                    Op::Truncate(oid, size) => {
                        s.truncate(oid, size, pack_of(oid)).expect("truncate");
                        if size > 0 || live.contains_key(&oid) {
                            live.entry(oid).or_default().resize(size as usize, 0);
                        }
                    }
                    Op::Punch(oid, off, len) => {
                        s.punch(oid, off, len).expect("punch");
                        if let Some(v) = live.get_mut(&oid) {
                            let end = ((off + len) as usize).min(v.len());
                            if (off as usize) < end {
                                v[off as usize..end].fill(0);
                            }
                        }
                    }
                    Op::Destroy(oid) => {
                        s.destroy(oid).expect("destroy");
                        live.remove(&oid);
                    }
                    Op::Take => {
                        s.snapshot_take(next).expect("take");
                        snaps.insert(next, live.clone());
                        next += 1;
                    }
                    Op::Drop(i) => {
                        if let Some(id) = snaps.keys().nth(i).copied() {
                            s.snapshot_drop(id).expect("drop");
                            snaps.remove(&id);
                        }
                    }
                    Op::Reopen => {
                        drop(s);
                        s = ObjectStore::open(d.path()).expect("reopen");
                    }
                }
            }
            check(&s, &live, &snaps);
            prop_assert_eq!(s.snapshots(), snaps.keys().copied().collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_snapshot_costs_only_the_chunks_changed_since() {
        let d = tempfile::tempdir().expect("tempdir");
        let s = ObjectStore::open(d.path()).expect("open");
        s.precreate(10).expect("precreate");
        let big = vec![7u8; 8 << 20];
        s.write(1, 0, &big, None).expect("write 8 MiB");
        s.snapshot_take(1).expect("take");
        assert!(
            s.snapshot_taken(1).expect("taken") < 64 * 1024,
            "free when taken"
        );
        // One 4 KiB write in the middle: one chunk kept.
        s.write(1, 4 << 20, &[9u8; 4096], None).expect("write");
        let taken = s.snapshot_taken(1).expect("taken");
        assert!(
            (CHUNK..4 * CHUNK).contains(&taken),
            "a 4 KiB write kept {taken} bytes"
        );
        assert_eq!(
            s.read_snapshot(1, 1, 4 << 20, 8)
                .expect("read")
                .map(|(_, b)| b),
            Some(vec![7u8; 8])
        );
        // Destroyed: its files move to the snapshot, none copied.
        s.destroy(1).expect("destroy");
        assert_eq!(s.read(1, 0, 8).expect("live"), Vec::<u8>::new());
        let (size, head) = s
            .read_snapshot(1, 1, 0, 8)
            .expect("read")
            .expect("it existed");
        assert_eq!((size, head), (8 << 20, vec![7u8; 8]));
        // Destroying the snapshot frees what it held.
        s.snapshot_drop(1).expect("drop");
        assert!(!d.path().join("snapshots/1").exists());
        assert!(s.snapshots().is_empty());
    }

    /// An object emptied after a snapshot (a rewrite from the start)
    /// moves to it whole, no byte copied; it reads as it was in the
    /// snapshot, and as new, under its owner, outside.
    #[test]
    fn an_object_emptied_after_a_snapshot_moves_to_it_whole() {
        let d = tempfile::tempdir().expect("tempdir");
        let s = ObjectStore::open(d.path()).expect("open");
        s.precreate(10).expect("precreate");
        let owner = Owner {
            uid: 1000,
            gid: 100,
            projid: 7,
        };
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 241) as u8).collect();
        s.write_as(2, 0, &data, None, Some(owner)).expect("write");
        s.sync(2).expect("sync");
        s.snapshot_take(1).expect("take");
        s.truncate(2, 0, None).expect("empty it");
        s.write(2, 0, b"rewritten", None).expect("write again");
        assert_eq!(s.read(2, 0, 64).expect("read"), b"rewritten");
        assert_eq!(s.owner(2).expect("owner"), owner);
        assert_eq!(
            s.read_snapshot(1, 2, 0, 3_000_000)
                .expect("read")
                .map(|(_, b)| b),
            Some(data)
        );
        let chunks = Delta::of(d.path(), 1).path(2, "");
        assert!(!chunks.exists(), "bytes were copied");
        assert_eq!(s.owner_usage().get(&owner).copied().unwrap_or(0), 4096);
    }

    /// Objects handed out after a snapshot cost it nothing: no record,
    /// and they read as absent in it.
    #[test]
    fn objects_made_since_a_snapshot_leave_nothing_in_it() {
        let d = tempfile::tempdir().expect("tempdir");
        let s = ObjectStore::open(d.path()).expect("open");
        assert_eq!(s.precreate(10).expect("precreate"), 1);
        s.write(3, 0, b"old", None).expect("write");
        s.snapshot_take(1).expect("take");
        let first_new = s.precreate(10).expect("precreate");
        s.write(first_new, 0, b"new", None)
            .expect("write a new object");
        s.write(3, 0, b"NEW", None).expect("write an old one");
        let delta = Delta::of(d.path(), 1);
        assert!(
            !delta.path(first_new, ".map").exists(),
            "a record of a new object"
        );
        assert!(delta.path(3, ".map").exists(), "no record of an old object");
        assert_eq!(s.read_snapshot(1, first_new, 0, 8).expect("read"), None);
        assert_eq!(
            s.read_snapshot(1, 3, 0, 8).expect("read"),
            Some((3, b"old".to_vec()))
        );
    }

    /// Writes past a short last block and a grow, which rewrite the
    /// block's checksum, leave the snapshot's view of it whole.
    #[test]
    fn writes_past_the_end_keep_the_last_block_as_it_was() {
        let d = tempfile::tempdir().expect("tempdir");
        let s = ObjectStore::open(d.path()).expect("open");
        s.precreate(10).expect("precreate");
        s.write(1, 0, &[5u8; 100], None).expect("write");
        s.snapshot_take(1).expect("take");
        s.write(1, 150, &[6u8; 10], None)
            .expect("write past the end");
        s.write(1, 250, &[7u8; 10], None)
            .expect("write past it again");
        s.truncate(1, 3000, None).expect("grow");
        assert_eq!(
            s.read_snapshot(1, 1, 0, 4096).expect("read"),
            Some((100, vec![5u8; 100]))
        );
    }

    #[test]
    fn a_destroy_cut_short_by_a_crash_is_finished_at_the_next_open() {
        let d = tempfile::tempdir().expect("tempdir");
        let s = ObjectStore::open(d.path()).expect("open");
        s.precreate(10).expect("precreate");
        s.write(1, 0, &[1u8; 200_000], None).expect("write");
        s.snapshot_take(1).expect("take 1");
        s.write(1, 0, &[2u8; 100_000], None).expect("write");
        s.snapshot_take(2).expect("take 2");
        s.write(1, 0, &[3u8; 200_000], None).expect("write");
        drop(s);
        // As if killed right after it began destroying snapshot 2.
        fs::write(d.path().join("snapshots/2.dropping"), b"").expect("marker");
        let s = ObjectStore::open(d.path()).expect("reopen");
        s.snapshot_resume_drops().expect("resume");
        assert_eq!(s.snapshots(), vec![1]);
        let (_, b) = s
            .read_snapshot(1, 1, 0, 200_000)
            .expect("read")
            .expect("existed");
        assert_eq!(b, vec![1u8; 200_000], "snapshot 1 as it was");
        assert!(!d.path().join("snapshots/2.dropping").exists());
    }
}
