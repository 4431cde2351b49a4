//! Checked I/O on one object: reads verify every block they touch against
//! its checksum, and every change rewrites the checksums of the blocks it
//! touches before it touches the data (see [`crate::sums`] for why that
//! order is crash-safe).
//!
//! The caller holds the object's lock: shared for reads, exclusive for
//! changes, so that no read sees a block between its new checksum and its
//! new bytes, and no two changes of one block interleave.

use crate::sums::{self, read_full, Entry, BLOCK};
use loom_proto::chunk_sums::ChunkSums;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// What went wrong, without the object's name (the store adds it).
#[derive(Debug)]
pub enum Fault {
    /// The local file system failed `op`.
    Io(&'static str, io::Error),
    /// The block at `offset` holds bytes its checksum rejects.
    Corrupt {
        /// Offset of the block in the object.
        offset: u64,
        /// The checksum stored for it.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
}

/// A block that failed its checksum, as scrub reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadBlock {
    /// Offset of the block in the object.
    pub offset: u64,
    /// The checksum stored for it.
    pub stored: u32,
    /// The checksum of the bytes read.
    pub computed: u32,
}

/// An object's data file and, if it has one, its checksum file.
pub struct Files<'a> {
    /// The object's bytes.
    pub data: &'a File,
    /// Its checksums; `None` for an object written before checksums.
    pub sums: Option<&'a File>,
    /// Whether a block with no checksum entry is a hole (reads as zeros):
    /// true on a store made with checksums, where every block written
    /// carries one. On an older store it may hold bytes written before
    /// checksums, which must be read.
    pub unset_is_hole: bool,
}

fn entries(f: &Files<'_>, first: u64, n: usize) -> Result<Vec<Entry>, Fault> {
    match f.sums {
        Some(s) => sums::read_entries(s, first, n).map_err(|e| Fault::Io("read checksums", e)),
        None => Ok(vec![Entry::default(); n]),
    }
}

fn put_entries(f: &Files<'_>, first: u64, new: &[Entry]) -> Result<(), Fault> {
    match f.sums {
        Some(s) => sums::write_entries(s, first, new).map_err(|e| Fault::Io("write checksums", e)),
        None => Ok(()),
    }
}

/// The bytes of block `b` inside an object of `size` bytes, padded with
/// zeros to `len` (a block that grows).
fn block_bytes(f: &Files<'_>, b: u64, size: u64, len: u64) -> Result<Vec<u8>, Fault> {
    let start = b * BLOCK;
    let have = BLOCK.min(size.saturating_sub(start)).min(len);
    let mut buf = vec![0u8; len as usize];
    read_full(f.data, &mut buf[..have as usize], start).map_err(|e| Fault::Io("read", e))?;
    Ok(buf)
}

/// Check `bytes`, the whole of block `b` as stored, against its entry.
fn check(e: &Entry, b: u64, bytes: &[u8]) -> Result<u32, Fault> {
    let c = sums::crc(bytes);
    if e.accepts(c) {
        Ok(c)
    } else {
        Err(Fault::Corrupt {
            offset: b * BLOCK,
            stored: e.cur,
            computed: c,
        })
    }
}

/// Read `[offset, offset + len)` of an object of `size` bytes (short at its
/// end), verifying every block the range touches. Blocks are read whole,
/// so a small read in a large object reads up to two blocks.
pub fn read(f: &Files<'_>, offset: u64, len: u64, size: u64) -> Result<Vec<u8>, Fault> {
    let end = offset.saturating_add(len).min(size);
    if offset >= end {
        return Ok(Vec::new());
    }
    let (first, last) = (offset / BLOCK, (end - 1) / BLOCK);
    let (rs, re) = (first * BLOCK, ((last + 1) * BLOCK).min(size));
    let mut buf = vec![0u8; (re - rs) as usize];
    let got = read_full(f.data, &mut buf, rs).map_err(|e| Fault::Io("read", e))?;
    buf.truncate(got);
    let es = entries(f, first, (last - first + 1) as usize)?;
    for (i, e) in es.iter().enumerate() {
        let lo = i * BLOCK as usize;
        if lo >= buf.len() {
            break;
        }
        let hi = (lo + BLOCK as usize).min(buf.len());
        check(e, first + i as u64, &buf[lo..hi])?;
    }
    let want = ((offset - rs) as usize).min(buf.len())..((end - rs) as usize).min(buf.len());
    buf.truncate(want.end);
    buf.drain(..want.start);
    Ok(buf)
}

/// Verify blocks `first .. first + n` of an object of `size` bytes, as
/// scrub does: every block that fails its checksum, and the bytes read.
pub fn verify(f: &Files<'_>, first: u64, n: u64, size: u64) -> Result<(u64, Vec<BadBlock>), Fault> {
    let mut bad = Vec::new();
    let mut bytes = 0;
    let es = entries(f, first, n as usize)?;
    for (i, e) in es.iter().enumerate() {
        let b = first + i as u64;
        if b * BLOCK >= size {
            break;
        }
        let data = block_bytes(f, b, size, BLOCK.min(size - b * BLOCK))?;
        bytes += data.len() as u64;
        if let Err(Fault::Corrupt {
            offset,
            stored,
            computed,
        }) = check(e, b, &data)
        {
            bad.push(BadBlock {
                offset,
                stored,
                computed,
            });
        }
    }
    Ok((bytes, bad))
}

/// After a change failed part way, take what the blocks hold now as their
/// contents (the caller was told the change failed, so the range holds
/// old bytes, new ones or a mix, as POSIX allows).
fn reseal(f: &Files<'_>, first: u64, last: u64, gen: u32) {
    let Ok(size) = f.data.metadata().map(|m| m.len()) else {
        return;
    };
    let mut es = Vec::new();
    for b in first..=last {
        let len = BLOCK.min(size.saturating_sub(b * BLOCK));
        match block_bytes(f, b, size, len) {
            Ok(bytes) if len > 0 => {
                let c = sums::crc(&bytes);
                es.push(Entry::new(c, c, gen));
            }
            _ => es.push(Entry::default()),
        }
    }
    let _ = put_entries(f, first, &es);
}

/// Write `buf` at `offset` of an object of `size` bytes.
pub fn write(f: &Files<'_>, gen: u32, offset: u64, buf: &[u8], size: u64) -> Result<(), Fault> {
    write_summed(f, gen, offset, buf, &ChunkSums::default(), size)
}

/// [`write`], given `known`, the crc32c of each 4 KiB piece of `buf` (as
/// the frame that brought it found them, see
/// [`loom_proto::chunk_sums`]): a block the write covers whole, from a
/// piece's start, takes its sum from there instead of a second pass over
/// its bytes. Pieces line up with blocks when `offset` is on a block
/// boundary, as a stream's writes are.
pub fn write_summed(
    f: &Files<'_>,
    gen: u32,
    offset: u64,
    buf: &[u8],
    known: &ChunkSums,
    size: u64,
) -> Result<(), Fault> {
    let end = offset + buf.len() as u64;
    let new_size = size.max(end);
    let mut first = offset / BLOCK;
    if offset > size && !size.is_multiple_of(BLOCK) {
        // The old last block grows with zeros up to the write.
        first = first.min(size / BLOCK);
    }
    let last = (end - 1) / BLOCK;
    let old = entries(f, first, (last - first + 1) as usize)?;
    let mut new = Vec::with_capacity(old.len());
    for (e, b) in old.iter().zip(first..=last) {
        let start = b * BLOCK;
        let old_len = BLOCK.min(size.saturating_sub(start));
        let new_len = BLOCK.min(new_size - start);
        let (cs, ce) = (offset.max(start), end.min(start + BLOCK));
        if cs >= ce && old_len == 0 {
            // A hole between the old end and the write: no bytes, no sum.
            new.push(Entry::default());
            continue;
        }
        let whole = cs == start && ce == start + new_len;
        let written =
            || &buf[cs.saturating_sub(offset) as usize..ce.saturating_sub(offset) as usize];
        let written_crc = || {
            let at = cs.saturating_sub(offset) as usize;
            known
                .of_range(at, (ce - cs) as usize)
                .unwrap_or_else(|| sums::crc(written()))
        };
        let (cur, prev) = if whole && old_len == 0 {
            (written_crc(), sums::crc(&[]))
        } else if whole && e.is_set() && e.gen == gen {
            // This incarnation wrote the entry after its bytes landed, so
            // `cur` is what the block holds: no need to read it.
            (written_crc(), e.cur)
        } else if whole && !e.is_set() && f.unset_is_hole {
            // A hole below the end (parallel writes of a stream land out of
            // order): it holds zeros, so a whole-block write reads nothing.
            (written_crc(), sums::crc_zeros(old_len))
        } else if cs > start
            && cs == start + old_len
            && ce == start + new_len
            && e.is_set()
            && e.gen == gen
        {
            // Appended to the block's bytes (a ragged stream, each write
            // starting where the last ended): the sum goes on from the
            // one this incarnation stored, over the new bytes only. The
            // old bytes are not read, so not checked; but the new sum is
            // of the bytes they should be, so rot in them stays found.
            (crc32c::crc32c_append(e.cur, written()), e.cur)
        } else {
            let mut bytes = block_bytes(f, b, size, new_len)?;
            let held = sums::crc(&bytes[..old_len as usize]);
            if !whole && !e.accepts(held) {
                // Never stamp a fresh checksum over rotten bytes.
                return Err(Fault::Corrupt {
                    offset: start,
                    stored: e.cur,
                    computed: held,
                });
            }
            if cs < ce {
                bytes[(cs - start) as usize..(ce - start) as usize].copy_from_slice(written());
            }
            (sums::crc(&bytes), held)
        };
        new.push(Entry::new(cur, prev, gen));
    }
    put_entries(f, first, &new)?;
    if let Err(e) = f.data.write_all_at(buf, offset) {
        reseal(f, first, last, gen);
        return Err(Fault::Io("write", e));
    }
    Ok(())
}

/// Set the size of an object of `size` bytes to `new`: the block the new
/// end falls in gets the checksum of its new bytes, blocks past it lose
/// theirs.
pub fn resize(f: &Files<'_>, gen: u32, size: u64, new: u64) -> Result<(), Fault> {
    let grow_tail = new > size && !size.is_multiple_of(BLOCK);
    let cut_tail = new < size && !new.is_multiple_of(BLOCK);
    if grow_tail || cut_tail {
        let b = if grow_tail { size / BLOCK } else { new / BLOCK };
        let start = b * BLOCK;
        let old_len = BLOCK.min(size - start);
        let new_len = BLOCK.min(new - start);
        let e = entries(f, b, 1)?[0];
        let bytes = block_bytes(f, b, size, old_len.max(new_len))?;
        let held = check(&e, b, &bytes[..old_len as usize])?;
        let cur = sums::crc(&bytes[..new_len as usize]);
        put_entries(f, b, &[Entry::new(cur, held, gen)])?;
    }
    if new < size {
        if let Some(s) = f.sums {
            sums::keep_entries(s, new.div_ceil(BLOCK))
                .map_err(|e| Fault::Io("cut checksums", e))?;
        }
    }
    f.data.set_len(new).map_err(|e| Fault::Io("truncate", e))
}

/// Zero `[offset, offset + len)` of an object of `size` bytes, inside it,
/// by `punch` (which deallocates or writes zeros): whole blocks become
/// holes with no checksum, partly zeroed ones get the checksum of their
/// new bytes.
pub fn punch(
    f: &Files<'_>,
    gen: u32,
    offset: u64,
    len: u64,
    size: u64,
    punch: impl FnOnce() -> Result<(), Fault>,
) -> Result<(), Fault> {
    let end = offset.saturating_add(len).min(size);
    if offset >= end {
        return punch();
    }
    let (first, last) = (offset / BLOCK, (end - 1) / BLOCK);
    let old = entries(f, first, (last - first + 1) as usize)?;
    let mut new = Vec::with_capacity(old.len());
    for (e, b) in old.iter().zip(first..=last) {
        let start = b * BLOCK;
        let blen = BLOCK.min(size - start);
        let (cs, ce) = (offset.max(start), end.min(start + blen));
        if cs == start && ce == start + blen {
            new.push(Entry::default());
            continue;
        }
        let mut bytes = block_bytes(f, b, size, blen)?;
        let held = check(e, b, &bytes)?;
        bytes[(cs - start) as usize..(ce - start) as usize].fill(0);
        new.push(Entry::new(sums::crc(&bytes), held, gen));
    }
    put_entries(f, first, &new)?;
    punch().inspect_err(|_| reseal(f, first, last, gen))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Obj {
        _d: tempfile::TempDir,
        data: File,
        sums: File,
    }

    fn obj() -> Obj {
        let (_d, data, sums) = crate::scratch_object(&sums::header());
        Obj { _d, data, sums }
    }

    impl Obj {
        fn files(&self) -> Files<'_> {
            Files {
                data: &self.data,
                sums: Some(&self.sums),
                unset_is_hole: true,
            }
        }
        fn size(&self) -> u64 {
            self.data.metadata().expect("stat").len()
        }
        fn write(&self, gen: u32, offset: u64, buf: &[u8]) {
            write(&self.files(), gen, offset, buf, self.size()).expect("write");
        }
        fn read_all(&self) -> Result<Vec<u8>, Fault> {
            read(&self.files(), 0, u64::MAX / 2, self.size())
        }
    }

    #[test]
    fn a_block_appended_to_without_reading_still_shows_the_rot_in_it() {
        let o = obj();
        o.write(1, 0, &[5u8; 100]);
        // Rot in the block's first bytes, then a write appended to them:
        // it does not read them, and its sum is of the bytes they were.
        o.data.write_all_at(&[6], 10).expect("rot");
        write_summed(
            &o.files(),
            1,
            100,
            &[7u8; 50],
            &ChunkSums::default(),
            o.size(),
        )
        .expect("an append reads nothing");
        assert!(matches!(
            o.read_all(),
            Err(Fault::Corrupt { offset: 0, .. })
        ));
        // Put back, the block reads as both writes left it.
        o.data.write_all_at(&[5], 10).expect("unrot");
        let mut want = vec![5u8; 100];
        want.extend([7u8; 50]);
        assert_eq!(o.read_all().expect("verified"), want);
    }

    #[test]
    fn a_flipped_byte_is_caught_in_the_block_it_lies_in() {
        let o = obj();
        let data: Vec<u8> = (0..3 * BLOCK + 100).map(|i| (i % 251) as u8).collect();
        o.write(1, 0, &data);
        assert_eq!(o.read_all().expect("clean read"), data);
        o.data
            .write_all_at(&[data[(BLOCK + 7) as usize] ^ 0x10], BLOCK + 7)
            .expect("flip");
        match read(&o.files(), 10, 100, o.size()) {
            Ok(got) => assert_eq!(got, data[10..110].to_vec(), "block 0 is intact"),
            Err(e) => panic!("block 0 read: {e:?}"),
        }
        assert!(matches!(
            read(&o.files(), BLOCK * 2 - 1, 2, o.size()),
            Err(Fault::Corrupt { offset, .. }) if offset == BLOCK
        ));
        let (bytes, bad) = verify(&o.files(), 0, 10, o.size()).expect("verify");
        assert_eq!(bytes, data.len() as u64);
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].offset, BLOCK);
        // A partial write over the rotten block is refused too.
        assert!(matches!(
            write(&o.files(), 1, BLOCK + 1, b"x", o.size()),
            Err(Fault::Corrupt { .. })
        ));
        // A whole-block overwrite replaces it.
        o.write(1, BLOCK, &vec![9u8; BLOCK as usize]);
        assert!(verify(&o.files(), 0, 10, o.size())
            .expect("verify")
            .1
            .is_empty());
    }

    #[test]
    fn sums_found_on_the_wire_give_the_checksums_a_second_pass_gives() {
        // Sums from the frame's start, and phased: lined up with blocks.
        let (plain, summed, phased) = (obj(), obj(), obj());
        // Aligned streams, a short last piece at the end, unaligned
        // writes, an overwrite by a later incarnation, a write past a hole.
        // Writes appended to a block's bytes at the end, by the same
        // incarnation and by another.
        let writes: [(u32, u64, usize); 9] = [
            (1, 0, 3 * BLOCK as usize),
            (1, 3 * BLOCK, 2 * BLOCK as usize + 100),
            (1, 7, BLOCK as usize + 9),
            (2, BLOCK, BLOCK as usize),
            (2, 9 * BLOCK, BLOCK as usize + 1),
            (2, 5 * BLOCK + 100, 3 * BLOCK as usize),
            (2, 10 * BLOCK + 1, 100),
            (2, 10 * BLOCK + 101, 2 * BLOCK as usize),
            (3, 12 * BLOCK + 101, 50),
        ];
        for (i, &(gen, at, len)) in writes.iter().enumerate() {
            let buf: Vec<u8> = (0..len).map(|j| (j * 7 + i) as u8).collect();
            plain.write(gen, at, &buf);
            let known = ChunkSums::of(&buf).0;
            write_summed(&summed.files(), gen, at, &buf, &known, summed.size()).expect("write");
            let phase = loom_proto::chunk_sums::phase_for(at).into();
            let known = ChunkSums::of_phased(&buf, phase).0;
            write_summed(&phased.files(), gen, at, &buf, &known, phased.size()).expect("write");
        }
        let bytes = |f: &File| {
            let mut v = vec![0u8; f.metadata().expect("stat").len() as usize];
            f.read_exact_at(&mut v, 0).expect("read");
            v
        };
        for o in [&summed, &phased] {
            assert_eq!(bytes(&o.sums), bytes(&plain.sums));
            assert_eq!(
                o.read_all().expect("verified"),
                plain.read_all().expect("verified")
            );
        }
    }

    #[test]
    fn a_change_cut_short_after_its_checksums_leaves_readable_old_bytes() {
        for gen in [1, 2] {
            let o = obj();
            o.write(1, 0, &vec![1u8; 100_000]);
            // What a kill between the checksum write and the data write
            // leaves: the new checksums, the old bytes.
            let size = o.size();
            let files = o.files();
            let keep = o.data.try_clone().expect("dup");
            let before = o.read_all().expect("read");
            write(&files, gen, 5, &vec![2u8; 70_000], size).expect("write");
            keep.write_all_at(&before[5..70_005], 5)
                .expect("undo the data");
            assert_eq!(o.read_all().expect("old bytes pass"), before);
            // And a write after it (a new incarnation) still works from the
            // bytes actually there.
            o.write(gen + 1, 0, &vec![3u8; BLOCK as usize]);
            let mut want = before.clone();
            want[..BLOCK as usize].fill(3);
            assert_eq!(o.read_all().expect("read after"), want);
        }
    }

    #[test]
    fn whole_blocks_written_over_a_hole_below_the_end_read_nothing() {
        let o = obj();
        // Blocks 2..4 written first, as a stream's later write that lands
        // before an earlier one: blocks 0 and 1 are a hole below the end.
        o.write(1, 2 * BLOCK, &vec![7u8; 2 * BLOCK as usize]);
        // The earlier write lands through a handle that cannot read: a
        // read-back of the hole would fail it.
        let path = o._d.path().join("o");
        let wo = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open write-only");
        let files = Files {
            data: &wo,
            sums: Some(&o.sums),
            unset_is_hole: true,
        };
        write(&files, 1, 0, &vec![3u8; 2 * BLOCK as usize], o.size())
            .expect("whole blocks over a hole need no read");
        let mut want = vec![3u8; 2 * BLOCK as usize];
        want.extend(vec![7u8; 2 * BLOCK as usize]);
        assert_eq!(o.read_all().expect("read"), want);
        // A write cut short after its checksums leaves the hole's zeros,
        // which the entries still accept.
        o.write(1, 6 * BLOCK, b"end");
        let size = o.size();
        write(&files, 2, 4 * BLOCK, &vec![9u8; BLOCK as usize], size).expect("write");
        wo.write_all_at(&vec![0u8; BLOCK as usize], 4 * BLOCK)
            .expect("undo the data");
        assert!(verify(&o.files(), 0, 7, o.size())
            .expect("verify")
            .1
            .is_empty());
        // Without the store's word that unset means a hole, the block is read.
        let old = Files {
            data: &wo,
            sums: Some(&o.sums),
            unset_is_hole: false,
        };
        assert!(matches!(
            write(&old, 2, 5 * BLOCK, &vec![1u8; BLOCK as usize], o.size()),
            Err(Fault::Io("read", _))
        ));
    }

    #[test]
    fn growing_cutting_and_punching_keep_every_block_checked() {
        let o = obj();
        o.write(1, 0, &vec![5u8; 1000]);
        // A write past the end: the old last block grows with zeros.
        o.write(1, 3 * BLOCK + 10, b"far");
        let mut want = vec![5u8; 1000];
        want.resize((3 * BLOCK + 13) as usize, 0);
        want[(3 * BLOCK + 10) as usize..].copy_from_slice(b"far");
        assert_eq!(o.read_all().expect("read"), want);
        resize(&o.files(), 1, o.size(), 500).expect("cut");
        resize(&o.files(), 1, o.size(), BLOCK + 3).expect("grow");
        let mut want = vec![5u8; 500];
        want.resize((BLOCK + 3) as usize, 0);
        assert_eq!(o.read_all().expect("read"), want);
        let size = o.size();
        punch(&o.files(), 1, 100, BLOCK, size, || {
            o.data
                .write_all_at(&vec![0u8; (size - 100) as usize], 100)
                .map_err(|e| Fault::Io("zero", e))
        })
        .expect("punch");
        want[100..].fill(0);
        assert_eq!(o.read_all().expect("read"), want);
        assert!(verify(&o.files(), 0, 4, o.size())
            .expect("verify")
            .1
            .is_empty());
    }
}
