//! Compressed objects: an object made under a compression setting keeps its
//! data in chunks of [`CHUNK`] (64 KiB) logical bytes, each compressed on
//! its own, so a random read or write touches one chunk, not the object.
//!
//! Where the bytes live. Chunk `i` has two slots in the object's data
//! file, at `(2 * i) * CHUNK` and `(2 * i + 1) * CHUNK`; its stored form
//! (compressed, or raw when compression would not save a 4 KiB block)
//! sits at the start of one of them and the rest of the pair is a hole,
//! so the file is sparse and takes about what its chunks' stored forms
//! take. A chunk of zeros is stored as a hole.
//!
//! The object's checksum file (`OID.sum`, version 2) says where:
//!
//! ```text
//! header (32 bytes): b"LSUM" | version u16 = 2 | log2(CHUNK) u8 = 16 |
//!     algorithm u8 = 1 (crc32c) | size u64 | method u8 | level i8 | 14 bytes 0
//! entry (32 bytes, chunk i at 32 + 32 * i):
//!     crc u32 | stored u32 | logical u32 | gen u32 | slot u8 | form u8 |
//!     2 bytes 0 | data_crc u32 | 8 bytes 0
//! ```
//!
//! All integers little-endian. `size` is the object's logical size; method
//! and level are the object's setting (`loom_proto::Compress`), fixed when
//! it is made. Per chunk: `crc` is the crc32c of the stored form, `stored`
//! its length (0: the chunk is a hole), `logical` the length of the data
//! it holds (the chunk reads as zeros past it, up to the chunk's end or
//! the object's), `slot` which of the two slots holds it, `form` how (0
//! raw, 1 lz4 block, 2 zstd frame), `data_crc` the crc32c of the data
//! after decompression (a second, end-to-end check), and `gen` the store
//! incarnation that wrote the entry (0: never written, a hole).
//!
//! Crash consistency, by copy-on-write: a change writes a chunk's new
//! stored form into its *other* slot, then the chunk's entry (one 32-byte
//! write inside one page, which a process crash cannot split), then
//! punches the old slot. A process killed before the entry leaves the old
//! chunk intact; after it, the new one. Unlike a plain object, no chunk
//! ever holds a mix of old and new bytes, which a partly written chunk
//! would (its stored form changes as a whole). A kill between the data
//! and the entry leaves the free slot holding bytes no entry names (at
//! most one chunk each), which the chunk's next-but-one change punches.
//! The size grows after the entries of a write and shrinks after the
//! entries a truncate drops. Power loss keeps what was synced; a chunk
//! changed since its last sync may come back with an entry whose slot
//! did not reach the disk and reads as corrupt (as plain objects' blocks).
//!
//! Reads verify the stored form's checksum before decompressing and the
//! data's after; either failing is a corrupt chunk at its logical offset.

use crate::checked::{BadBlock, Fault};
use crate::sums::{crc, read_full};
use loom_proto::compress::{Compress, Method};
use nix::fcntl::FallocateFlags;
use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

/// Logical bytes of one chunk.
pub const CHUNK: u64 = 64 * 1024;
/// Bytes of the checksum file's header.
pub const HEADER: u64 = 32;
/// Bytes of one chunk's entry.
pub const ENTRY: u64 = 32;
/// The checksum file version of compressed objects.
pub const VERSION: u16 = 2;
/// The allocation unit stored forms are counted in (a page, the usual
/// block of the file systems under targets).
pub const STORED_UNIT: u64 = 4096;

const MAGIC: &[u8; 4] = b"LSUM";
const ALGO_CRC32C: u8 = 1;

const FORM_RAW: u8 = 0;
const FORM_LZ4: u8 = 1;
const FORM_ZSTD: u8 = 2;

/// The header of a compressed object's checksum file.
pub fn header(c: Compress, size: u64) -> [u8; HEADER as usize] {
    let mut h = [0u8; HEADER as usize];
    h[..4].copy_from_slice(MAGIC);
    h[4..6].copy_from_slice(&VERSION.to_le_bytes());
    h[6] = CHUNK.trailing_zeros() as u8;
    h[7] = ALGO_CRC32C;
    h[8..16].copy_from_slice(&size.to_le_bytes());
    h[16] = match c.method {
        Method::Off => FORM_RAW,
        Method::Lz4 => FORM_LZ4,
        Method::Zstd => FORM_ZSTD,
    };
    h[17] = c.level as u8;
    h
}

/// The setting a version 2 header records, or why it is not one.
pub fn check_header(h: &[u8]) -> Result<Compress, String> {
    if h.len() < HEADER as usize || &h[..4] != MAGIC {
        return Err("not a checksum file (bad magic)".into());
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    if version != VERSION {
        return Err(format!(
            "not a compressed object's header (version {version})"
        ));
    }
    if u64::from(h[6]) != u64::from(CHUNK.trailing_zeros()) || h[7] != ALGO_CRC32C {
        return Err(format!(
            "compressed object of 2^{}-byte chunks with checksum algorithm {}; this loomfs reads 2^{} and crc32c",
            h[6],
            h[7],
            CHUNK.trailing_zeros()
        ));
    }
    let c = Compress {
        method: match h[16] {
            FORM_LZ4 => Method::Lz4,
            FORM_ZSTD => Method::Zstd,
            m => return Err(format!("unknown compression method {m}")),
        },
        level: h[17] as i8,
    };
    c.validate()?;
    Ok(c)
}

/// One chunk's entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Entry {
    crc: u32,
    stored: u32,
    logical: u32,
    gen: u32,
    slot: u8,
    form: u8,
    data_crc: u32,
}

impl Entry {
    fn encode(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.crc.to_le_bytes());
        b[4..8].copy_from_slice(&self.stored.to_le_bytes());
        b[8..12].copy_from_slice(&self.logical.to_le_bytes());
        b[12..16].copy_from_slice(&self.gen.to_le_bytes());
        b[16] = self.slot;
        b[17] = self.form;
        b[18..20].fill(0);
        b[20..24].copy_from_slice(&self.data_crc.to_le_bytes());
        b[24..32].fill(0);
    }

    fn decode(b: &[u8]) -> Entry {
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Entry {
            crc: u(0),
            stored: u(4),
            logical: u(8),
            gen: u(12),
            slot: b[16],
            form: b[17],
            data_crc: u(20),
        }
    }

    /// What the chunk takes on disk, in whole allocation units.
    fn cost(&self) -> u64 {
        u64::from(self.stored).div_ceil(STORED_UNIT) * STORED_UNIT
    }
}

/// How a change moved an object's usage: logical bytes (its size) and
/// stored bytes (its chunks' stored forms in allocation units).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delta {
    /// Change of the logical size.
    pub logical: i64,
    /// Change of the stored bytes.
    pub stored: i64,
}

impl Delta {
    fn stored(old: &Entry, new: &Entry) -> i64 {
        new.cost() as i64 - old.cost() as i64
    }
}

/// The offset of chunk `i`'s slot `s` in the data file.
fn slot_offset(i: u64, s: u8) -> u64 {
    (2 * i + u64::from(s & 1)) * CHUNK
}

fn io(op: &'static str) -> impl FnOnce(io::Error) -> Fault {
    move |e| Fault::Io(op, e)
}

thread_local! {
    /// zstd contexts of this thread (the OST's blocking pool), kept so a
    /// chunk does not pay for setting one up.
    static ZSTD: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> = const { RefCell::new(None) };
    static UNZSTD: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// `data` compressed under `c`: the form and the bytes. Raw when that
/// saves no allocation unit (incompressible data is stored as it is).
fn compress(c: Compress, data: &[u8]) -> (u8, Vec<u8>) {
    let packed = match c.method {
        Method::Off => None,
        Method::Lz4 => Some((FORM_LZ4, lz4_flex::block::compress(data))),
        Method::Zstd => ZSTD.with(|z| {
            let mut z = z.borrow_mut();
            let level = i32::from(c.level);
            if z.as_ref().is_none_or(|(l, _)| *l != level) {
                *z = zstd::bulk::Compressor::new(level).ok().map(|x| (level, x));
            }
            z.as_mut()
                .and_then(|(_, x)| x.compress(data).ok())
                .map(|b| (FORM_ZSTD, b))
        }),
    };
    let units = |n: usize| (n as u64).div_ceil(STORED_UNIT);
    match packed {
        Some((form, b)) if units(b.len()) < units(data.len()) => (form, b),
        _ => (FORM_RAW, data.to_vec()),
    }
}

/// The data of a stored form, `logical` bytes long, or `None` if it does
/// not decompress to that.
fn decompress(form: u8, stored: Vec<u8>, logical: usize) -> Option<Vec<u8>> {
    let out = match form {
        FORM_RAW => stored,
        FORM_LZ4 => lz4_flex::block::decompress(&stored, logical).ok()?,
        FORM_ZSTD => UNZSTD.with(|z| {
            let mut z = z.borrow_mut();
            if z.is_none() {
                *z = zstd::bulk::Decompressor::new().ok();
            }
            z.as_mut()?.decompress(&stored, logical).ok()
        })?,
        _ => return None,
    };
    (out.len() == logical).then_some(out)
}

/// A compressed object's files, for one operation under its lock.
pub struct Packed<'a> {
    /// The chunks' slots.
    pub data: &'a File,
    /// The header and entries.
    pub sums: &'a File,
    /// The object's setting.
    pub compress: Compress,
    /// The store incarnation stamped on new entries.
    pub gen: u32,
}

/// A new chunk's entry and its stored form, before they are written.
struct Staged {
    i: u64,
    old: Entry,
    new: Entry,
    bytes: Vec<u8>,
}

impl Packed<'_> {
    /// The object's logical size.
    pub fn size(&self) -> Result<u64, Fault> {
        let mut b = [0u8; 8];
        let n = read_full(self.sums, &mut b, 8).map_err(io("read size"))?;
        if n < 8 {
            return Err(Fault::Io(
                "read size",
                io::Error::new(io::ErrorKind::UnexpectedEof, "short header"),
            ));
        }
        Ok(u64::from_le_bytes(b))
    }

    fn set_size(&self, size: u64) -> Result<(), Fault> {
        self.sums
            .write_all_at(&size.to_le_bytes(), 8)
            .map_err(io("write size"))
    }

    /// How many chunks have entries.
    pub fn chunks(&self) -> Result<u64, Fault> {
        let len = self.sums.metadata().map_err(io("stat checksums"))?.len();
        Ok(len.saturating_sub(HEADER) / ENTRY)
    }

    fn entries(&self, first: u64, n: u64) -> Result<Vec<Entry>, Fault> {
        let mut buf = vec![0u8; (n * ENTRY) as usize];
        // Past the end stays zero: never written, a hole.
        read_full(self.sums, &mut buf, HEADER + first * ENTRY).map_err(io("read checksums"))?;
        Ok(buf.chunks(ENTRY as usize).map(Entry::decode).collect())
    }

    /// Write the entries of chunks `first ..` in one write.
    fn put_entries(&self, first: u64, es: &[Entry]) -> Result<(), Fault> {
        let mut buf = vec![0u8; es.len() * ENTRY as usize];
        for (e, b) in es.iter().zip(buf.chunks_mut(ENTRY as usize)) {
            e.encode(b);
        }
        self.sums
            .write_all_at(&buf, HEADER + first * ENTRY)
            .map_err(io("write checksums"))
    }

    /// The data chunk `i` holds (its `logical` bytes), verified.
    fn load(&self, i: u64, e: &Entry) -> Result<Vec<u8>, Fault> {
        if e.stored == 0 {
            return Ok(Vec::new());
        }
        let corrupt = |stored, computed| Fault::Corrupt {
            offset: i * CHUNK,
            stored,
            computed,
        };
        // A stored form fits its slot and holds at most a chunk: lengths
        // past that are damage, not sizes to allocate (up to 4 GiB each).
        if u64::from(e.stored) > CHUNK || u64::from(e.logical) > CHUNK {
            return Err(corrupt(e.crc, 0));
        }
        let mut buf = vec![0u8; e.stored as usize];
        read_full(self.data, &mut buf, slot_offset(i, e.slot)).map_err(io("read"))?;
        let c = crc(&buf);
        if c != e.crc {
            return Err(corrupt(e.crc, c));
        }
        let out = decompress(e.form, buf, e.logical as usize).ok_or(corrupt(e.data_crc, 0))?;
        let d = crc(&out);
        if d != e.data_crc {
            return Err(corrupt(e.data_crc, d));
        }
        Ok(out)
    }

    /// Chunk `i`'s new contents `data` (trailing bytes past it read as
    /// zeros), staged into the slot the old entry does not use.
    fn stage(&self, i: u64, old: Entry, data: &[u8]) -> Staged {
        let slot = if old.gen == 0 { 0 } else { 1 - (old.slot & 1) };
        let keep = data.len() - data.iter().rev().take_while(|&&b| b == 0).count();
        if keep == 0 {
            let new = Entry {
                gen: self.gen,
                slot,
                ..Entry::default()
            };
            return Staged {
                i,
                old,
                new,
                bytes: Vec::new(),
            };
        }
        let data = &data[..keep];
        let (form, bytes) = compress(self.compress, data);
        let new = Entry {
            crc: crc(&bytes),
            stored: bytes.len() as u32,
            logical: data.len() as u32,
            gen: self.gen,
            slot,
            form,
            data_crc: crc(data),
        };
        Staged { i, old, new, bytes }
    }

    /// Write staged chunks (consecutive, from `first`): their stored forms,
    /// then their entries in one write, then punch the slots they left.
    fn commit(&self, first: u64, staged: &[Staged]) -> Result<i64, Fault> {
        for s in staged {
            if !s.bytes.is_empty() {
                self.data
                    .write_all_at(&s.bytes, slot_offset(s.i, s.new.slot))
                    .map_err(io("write"))?;
            }
        }
        let es: Vec<Entry> = staged.iter().map(|s| s.new).collect();
        self.put_entries(first, &es)?;
        let mut stored = 0;
        for s in staged {
            stored += Delta::stored(&s.old, &s.new);
            if s.new.stored == 0 {
                // A hole: free both slots (the free one may hold what a
                // change cut by a crash left).
                self.punch_range(slot_offset(s.i, 0), 2 * CHUNK);
            } else if s.old.gen != 0 {
                self.punch_range(slot_offset(s.i, s.old.slot), CHUNK);
            }
        }
        Ok(stored)
    }

    /// Free `[offset, offset + len)` of the data file. Best effort: the
    /// entries no longer name those bytes, so failing to free them costs
    /// space, not correctness (and a file system that cannot punch keeps
    /// them until the file shrinks or goes).
    fn punch_range(&self, offset: u64, len: u64) {
        let mode = FallocateFlags::FALLOC_FL_PUNCH_HOLE | FallocateFlags::FALLOC_FL_KEEP_SIZE;
        let (Ok(o), Ok(l)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        let _ = nix::fcntl::fallocate(self.data.as_raw_fd(), mode, o, l);
    }

    /// The part of `[offset, offset + len)` inside the object: its end,
    /// and the first chunk it touches with the entries of all it touches;
    /// `None` if it is empty.
    fn inside(&self, offset: u64, len: u64) -> Result<Option<(u64, u64, Vec<Entry>)>, Fault> {
        let end = offset.saturating_add(len).min(self.size()?);
        if offset >= end {
            return Ok(None);
        }
        let (first, last) = (offset / CHUNK, (end - 1) / CHUNK);
        Ok(Some((end, first, self.entries(first, last - first + 1)?)))
    }

    /// Read `[offset, offset + len)`, short at the object's end.
    pub fn read(&self, offset: u64, len: u64) -> Result<Vec<u8>, Fault> {
        let Some((end, first, es)) = self.inside(offset, len)? else {
            return Ok(Vec::new());
        };
        let last = first + es.len() as u64 - 1;
        let mut out = vec![0u8; (end - offset) as usize];
        for (e, i) in es.iter().zip(first..=last) {
            let data = self.load(i, e)?;
            let start = i * CHUNK;
            let (cs, ce) = (offset.max(start), end.min(start + data.len() as u64));
            if cs < ce {
                out[(cs - offset) as usize..(ce - offset) as usize]
                    .copy_from_slice(&data[(cs - start) as usize..(ce - start) as usize]);
            }
        }
        Ok(out)
    }

    /// Write `buf` at `offset`.
    pub fn write(&self, offset: u64, buf: &[u8]) -> Result<Delta, Fault> {
        if buf.is_empty() {
            return Ok(Delta::default());
        }
        let size = self.size()?;
        let end = offset + buf.len() as u64;
        let (first, last) = (offset / CHUNK, (end - 1) / CHUNK);
        let old = self.entries(first, last - first + 1)?;
        let mut staged = Vec::with_capacity(old.len());
        for (e, i) in old.into_iter().zip(first..=last) {
            let start = i * CHUNK;
            let (cs, ce) = (offset.max(start), end.min(start + CHUNK));
            let held = CHUNK.min(size.saturating_sub(start));
            // A write from the chunk's start past all it held needs none of
            // its old bytes.
            let mut data = if cs == start && ce >= start + held {
                Vec::new()
            } else {
                let mut d = self.load(i, &e)?;
                d.truncate(held as usize);
                d
            };
            if (data.len() as u64) < ce - start {
                data.resize((ce - start) as usize, 0);
            }
            data[(cs - start) as usize..(ce - start) as usize]
                .copy_from_slice(&buf[(cs - offset) as usize..(ce - offset) as usize]);
            staged.push(self.stage(i, e, &data));
        }
        let stored = self.commit(first, &staged)?;
        let mut logical = 0;
        if end > size {
            self.set_size(end)?;
            logical = (end - size) as i64;
        }
        Ok(Delta { logical, stored })
    }

    /// Set the size to `new`: a chunk the new end cuts keeps its prefix,
    /// chunks past it go; growing adds zeros.
    pub fn resize(&self, new: u64) -> Result<Delta, Fault> {
        let size = self.size()?;
        if new >= size {
            if new > size {
                self.set_size(new)?;
            }
            return Ok(Delta {
                logical: (new - size) as i64,
                stored: 0,
            });
        }
        let mut stored = 0;
        let keep = new.div_ceil(CHUNK);
        if !new.is_multiple_of(CHUNK) {
            let i = new / CHUNK;
            let e = self.entries(i, 1)?[0];
            let cut = (new % CHUNK) as usize;
            if e.stored != 0 && e.logical as usize > cut {
                let mut d = self.load(i, &e)?;
                d.truncate(cut);
                stored += self.commit(i, &[self.stage(i, e, &d)])?;
            }
        }
        let n = self.chunks()?;
        if n > keep {
            stored -= self
                .entries(keep, n - keep)?
                .iter()
                .map(|e| e.cost() as i64)
                .sum::<i64>();
            self.sums
                .set_len(HEADER + keep * ENTRY)
                .map_err(io("cut checksums"))?;
        }
        self.data
            .set_len(slot_offset(keep, 0))
            .map_err(io("truncate"))?;
        self.set_size(new)?;
        Ok(Delta {
            logical: new as i64 - size as i64,
            stored,
        })
    }

    /// Zero `[offset, offset + len)` inside the object: chunks it covers
    /// become holes, chunks it cuts are rewritten with zeros.
    pub fn punch(&self, offset: u64, len: u64) -> Result<Delta, Fault> {
        let Some((end, first, old)) = self.inside(offset, len)? else {
            return Ok(Delta::default());
        };
        let last = first + old.len() as u64 - 1;
        let mut staged = Vec::with_capacity(old.len());
        for (e, i) in old.into_iter().zip(first..=last) {
            let start = i * CHUNK;
            let (cs, ce) = (offset.max(start), end.min(start + CHUNK));
            let mut data = if cs == start && ce >= start + u64::from(e.logical) {
                Vec::new()
            } else {
                self.load(i, &e)?
            };
            let hi = ((ce - start) as usize).min(data.len());
            let lo = ((cs - start) as usize).min(hi);
            data[lo..hi].fill(0);
            staged.push(self.stage(i, e, &data));
        }
        let stored = self.commit(first, &staged)?;
        Ok(Delta { logical: 0, stored })
    }

    /// Verify chunks `first .. first + n`: the logical bytes they cover
    /// and the chunks that fail.
    pub fn verify(&self, first: u64, n: u64) -> Result<(u64, Vec<BadBlock>), Fault> {
        let size = self.size()?;
        let mut bytes = 0;
        let mut bad = Vec::new();
        for (e, i) in self.entries(first, n)?.iter().zip(first..) {
            if i * CHUNK >= size {
                break;
            }
            bytes += CHUNK.min(size - i * CHUNK);
            match self.load(i, e) {
                Ok(_) => {}
                Err(Fault::Corrupt {
                    offset,
                    stored,
                    computed,
                }) => bad.push(BadBlock {
                    offset,
                    stored,
                    computed,
                }),
                Err(f) => return Err(f),
            }
        }
        Ok((bytes, bad))
    }

    /// The object's usage: (logical size, stored bytes).
    pub fn usage(&self) -> Result<(u64, u64), Fault> {
        let n = self.chunks()?;
        let stored = self.entries(0, n)?.iter().map(Entry::cost).sum();
        Ok((self.size()?, stored))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Obj {
        _d: tempfile::TempDir,
        data: File,
        sums: File,
        c: Compress,
    }

    fn obj(c: Compress) -> Obj {
        let (_d, data, sums) = crate::scratch_object(&header(c, 0));
        Obj { _d, data, sums, c }
    }

    impl Obj {
        fn p(&self, gen: u32) -> Packed<'_> {
            Packed {
                data: &self.data,
                sums: &self.sums,
                compress: self.c,
                gen,
            }
        }
        fn all(&self) -> Vec<u8> {
            self.p(1).read(0, u64::MAX / 2).expect("read")
        }
    }

    fn text(n: usize) -> Vec<u8> {
        b"pressure 1013.25 temperature 288.15 step "
            .iter()
            .cycle()
            .take(n)
            .copied()
            .collect()
    }

    #[test]
    fn headers_round_trip_and_refuse_what_they_do_not_describe() {
        for c in [Compress::LZ4, Compress::zstd(1), Compress::zstd(19)] {
            assert_eq!(check_header(&header(c, 77)), Ok(c));
        }
        let mut h = header(Compress::LZ4, 0);
        h[16] = 9;
        assert!(check_header(&h).is_err());
        let mut h = header(Compress::LZ4, 0);
        h[4] = 1;
        assert!(check_header(&h).is_err());
    }

    #[test]
    fn text_takes_less_and_reads_back() {
        for c in [Compress::LZ4, Compress::zstd(3)] {
            let o = obj(c);
            let data = text(1 << 20);
            let d = o.p(1).write(0, &data).expect("write");
            assert_eq!(o.all(), data);
            assert_eq!(d.logical, 1 << 20);
            assert!(d.stored > 0 && d.stored < (1 << 18), "{c}: {d:?}");
            assert_eq!(o.p(1).usage().expect("usage"), (1 << 20, d.stored as u64));
        }
    }

    #[test]
    fn incompressible_chunks_are_stored_raw_and_zeros_as_holes() {
        let o = obj(Compress::zstd(3));
        let mut x = 0x1234_5678_u64;
        let noise: Vec<u8> = (0..CHUNK)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        o.p(1).write(0, &noise).expect("write");
        o.p(1)
            .write(CHUNK, &vec![0u8; CHUNK as usize])
            .expect("zeros");
        let es = o.p(1).entries(0, 2).expect("entries");
        assert_eq!((es[0].form, es[0].stored), (FORM_RAW, CHUNK as u32));
        assert_eq!(es[1].stored, 0, "a chunk of zeros is a hole");
        let mut want = noise.clone();
        want.resize(2 * CHUNK as usize, 0);
        assert_eq!(o.all(), want);
    }

    #[test]
    fn a_flipped_byte_of_a_stored_form_is_a_corrupt_chunk() {
        let o = obj(Compress::LZ4);
        o.p(1).write(0, &text(3 * CHUNK as usize)).expect("write");
        let e = o.p(1).entries(1, 1).expect("entry")[0];
        let at = slot_offset(1, e.slot) + 5;
        let mut b = [0u8];
        o.data.read_at(&mut b, at).expect("read");
        o.data.write_all_at(&[b[0] ^ 4], at).expect("flip");
        assert!(o.p(1).read(0, 100).is_ok(), "chunk 0 is intact");
        assert!(matches!(
            o.p(1).read(CHUNK + 10, 10),
            Err(Fault::Corrupt { offset, .. }) if offset == CHUNK
        ));
        let (bytes, bad) = o.p(1).verify(0, 10).expect("verify");
        assert_eq!(bytes, 3 * CHUNK);
        assert_eq!(bad.iter().map(|b| b.offset).collect::<Vec<_>>(), [CHUNK]);
        // A partial write over it is refused; a whole rewrite mends it.
        assert!(o.p(1).write(CHUNK + 1, b"x").is_err());
        o.p(1).write(CHUNK, &text(CHUNK as usize)).expect("rewrite");
        assert!(o.p(1).verify(0, 10).expect("verify").1.is_empty());
    }

    #[test]
    fn an_entry_claiming_more_than_a_chunk_is_damage_not_an_allocation() {
        let o = obj(Compress::LZ4);
        o.p(1).write(0, &text(CHUNK as usize)).expect("write");
        let good = o.p(1).entries(0, 1).expect("entry")[0];
        for (stored, logical) in [(u32::MAX, good.logical), (good.stored, u32::MAX)] {
            let bad = Entry {
                stored,
                logical,
                ..good
            };
            o.p(1).put_entries(0, &[bad]).expect("damage the entry");
            assert!(matches!(
                o.p(1).read(0, 10),
                Err(Fault::Corrupt { offset: 0, .. })
            ));
            let (_, found) = o.p(1).verify(0, 1).expect("verify");
            assert_eq!(found.len(), 1, "{stored} {logical}");
        }
    }

    #[test]
    fn a_change_cut_before_its_entry_leaves_the_old_chunk() {
        let o = obj(Compress::zstd(3));
        let old = text(100_000);
        o.p(1).write(0, &old).expect("write");
        let before = o.p(1).entries(0, 2).expect("entries");
        // What a kill after the stored forms and before the entries leaves:
        // the new forms in the free slots, the old entries.
        let staged: Vec<Staged> = (0..2)
            .map(|i| {
                o.p(2)
                    .stage(i, before[i as usize], &vec![7u8; CHUNK as usize])
            })
            .collect();
        for s in &staged {
            o.data
                .write_all_at(&s.bytes, slot_offset(s.i, s.new.slot))
                .expect("stored form");
        }
        assert_eq!(o.all(), old, "the old bytes, whole");
        // The next changes reuse those slots and read right.
        o.p(2).write(10, b"new").expect("write");
        let mut want = old.clone();
        want[10..13].copy_from_slice(b"new");
        assert_eq!(o.all(), want);
        assert!(o.p(2).verify(0, 4).expect("verify").1.is_empty());
    }

    #[test]
    fn resizing_and_punching_keep_every_chunk_right() {
        let o = obj(Compress::LZ4);
        let mut want = text(5 * CHUNK as usize + 123);
        o.p(1).write(0, &want).expect("write");
        o.p(1).resize(2 * CHUNK + 7).expect("cut");
        want.truncate((2 * CHUNK + 7) as usize);
        assert_eq!(o.all(), want);
        o.p(1).resize(4 * CHUNK).expect("grow");
        want.resize((4 * CHUNK) as usize, 0);
        assert_eq!(o.all(), want, "the cut chunk's old bytes stay gone");
        o.p(1).punch(100, CHUNK + 50).expect("punch");
        want[100..(CHUNK + 150) as usize].fill(0);
        assert_eq!(o.all(), want);
        o.p(1).write(6 * CHUNK, b"far").expect("write past the end");
        want.resize((6 * CHUNK) as usize, 0);
        want.extend_from_slice(b"far");
        assert_eq!(o.all(), want);
        // Usage follows the changes: the deltas add up to a fresh count.
        let (logical, _) = o.p(1).usage().expect("usage");
        assert_eq!(logical, want.len() as u64);
        o.p(1).resize(0).expect("empty");
        assert_eq!(o.p(1).usage().expect("usage"), (0, 0));
        assert_eq!(o.data.metadata().expect("stat").len(), 0);
    }
}
