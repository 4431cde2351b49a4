//! Per-block checksums of an object, kept in a file beside it.
//!
//! `objects/XX/OID.sum` holds a 16-byte header, then one 16-byte entry per
//! [`BLOCK`] (4 KiB) of the object, entry `b` at `HEADER + b * ENTRY`:
//!
//! ```text
//! header: b"LSUM" | version u16 = 1 | log2(BLOCK) u8 = 12 | algorithm u8 = 1 (crc32c) | 8 bytes 0
//! entry:  cur u32 | prev u32 | gen u32 | flags u32 (0; room for per-block compression)
//! ```
//!
//! All integers little-endian. `cur` is the crc32c of the block's bytes
//! inside the object (the last block is short); `prev` that of what the
//! block held before the write that set `cur`; `gen` the store incarnation
//! that wrote the entry, 0 for "no checksum" (a hole, a punched block, or a
//! block written before the object had checksums). Entries past the end
//! of the file read as 0.
//!
//! Crash consistency: a change writes the block's new entry (keeping the
//! old checksum as `prev`) before it writes the data, under the object's
//! lock. A process killed between the two leaves the old data with an
//! entry that still accepts it, and a reader accepts either checksum. A
//! block whose bytes match neither is corrupt. fsync makes data and
//! entries durable together; see the object store's docs for what a power
//! loss can leave of writes never synced.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Bytes of object data one checksum covers.
pub const BLOCK: u64 = 4 * 1024;
/// Bytes of the header.
pub const HEADER: u64 = 16;
/// Bytes of one entry.
pub const ENTRY: u64 = 16;

const MAGIC: &[u8; 4] = b"LSUM";
const VERSION: u16 = 1;
const ALGO_CRC32C: u8 = 1;

/// The header a checksum file starts with.
pub fn header() -> [u8; HEADER as usize] {
    let mut h = [0u8; HEADER as usize];
    h[..4].copy_from_slice(MAGIC);
    h[4..6].copy_from_slice(&VERSION.to_le_bytes());
    h[6] = BLOCK.trailing_zeros() as u8;
    h[7] = ALGO_CRC32C;
    h
}

/// Why a header is not one this code reads, if it is not.
pub fn check_header(h: &[u8]) -> Result<(), String> {
    if h.len() < HEADER as usize || &h[..4] != MAGIC {
        return Err("not a checksum file (bad magic)".into());
    }
    let version = u16::from_le_bytes([h[4], h[5]]);
    if version != VERSION {
        return Err(format!(
            "checksum file version {version}, this loomfs reads {VERSION}"
        ));
    }
    if u64::from(h[6]) != u64::from(BLOCK.trailing_zeros()) || h[7] != ALGO_CRC32C {
        return Err(format!(
            "checksum file of 2^{}-byte blocks with algorithm {}; this loomfs writes 2^{} and crc32c",
            h[6],
            h[7],
            BLOCK.trailing_zeros()
        ));
    }
    Ok(())
}

/// The checksum state of one block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// crc32c of the block's bytes.
    pub cur: u32,
    /// crc32c of the bytes before the last change.
    pub prev: u32,
    /// Incarnation of the store that wrote this entry; 0 = no checksum.
    pub gen: u32,
    /// Reserved, 0.
    pub flags: u32,
}

impl Entry {
    /// The entry of a block holding bytes with checksum `cur`, which held
    /// bytes with checksum `prev` before, written by incarnation `gen`.
    pub fn new(cur: u32, prev: u32, gen: u32) -> Entry {
        Entry {
            cur,
            prev,
            gen,
            flags: 0,
        }
    }

    /// Whether the block has a checksum.
    pub fn is_set(&self) -> bool {
        self.gen != 0
    }

    /// Whether bytes with checksum `crc` are what the block may hold: its
    /// current bytes, or its previous ones if a change was cut short.
    pub fn accepts(&self, crc: u32) -> bool {
        !self.is_set() || crc == self.cur || crc == self.prev
    }

    fn encode(&self) -> [u8; ENTRY as usize] {
        let mut b = [0u8; ENTRY as usize];
        b[0..4].copy_from_slice(&self.cur.to_le_bytes());
        b[4..8].copy_from_slice(&self.prev.to_le_bytes());
        b[8..12].copy_from_slice(&self.gen.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Entry {
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Entry {
            cur: u(0),
            prev: u(4),
            gen: u(8),
            flags: u(12),
        }
    }
}

/// crc32c of `data`.
pub fn crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// crc32c of `len` zero bytes (`len` at most [`BLOCK`]): what a hole
/// of that length holds.
pub fn crc_zeros(len: u64) -> u32 {
    static ZEROS: [u8; BLOCK as usize] = [0; BLOCK as usize];
    crc(&ZEROS[..len.min(BLOCK) as usize])
}

/// Read up to `buf.len()` bytes of `f` at `at`; fewer only at the end
/// of the file.
pub(crate) fn read_full(f: &File, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], at + done as u64) {
            Ok(0) => break,
            Ok(k) => done += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// The entries of blocks `first .. first + n`; blocks past the file's end
/// have none.
pub fn read_entries(f: &File, first: u64, n: usize) -> io::Result<Vec<Entry>> {
    let mut buf = vec![0u8; n * ENTRY as usize];
    // Past the end stays zero: no checksum.
    read_full(f, &mut buf, HEADER + first * ENTRY)?;
    Ok(buf.chunks(ENTRY as usize).map(Entry::decode).collect())
}

/// Write the entries of blocks `first .. first + entries.len()`.
pub fn write_entries(f: &File, first: u64, entries: &[Entry]) -> io::Result<()> {
    let mut buf = Vec::with_capacity(entries.len() * ENTRY as usize);
    for e in entries {
        buf.extend_from_slice(&e.encode());
    }
    f.write_all_at(&buf, HEADER + first * ENTRY)
}

/// Drop the entries of blocks `blocks ..` (the object now ends before).
pub fn keep_entries(f: &File, blocks: u64) -> io::Result<()> {
    let len = f.metadata()?.len();
    let want = HEADER + blocks * ENTRY;
    if len > want {
        f.set_len(want)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_read_as_unset_past_the_end() {
        let d = tempfile::tempdir().expect("tempdir");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(d.path().join("x.sum"))
            .expect("create");
        f.write_all_at(&header(), 0).expect("header");
        let e = [Entry::new(1, 2, 3), Entry::new(4, 5, 6)];
        write_entries(&f, 2, &e).expect("write");
        let got = read_entries(&f, 0, 6).expect("read");
        assert_eq!(got[..2], [Entry::default(), Entry::default()]);
        assert_eq!(got[2..4], e);
        assert_eq!(got[4..], [Entry::default(), Entry::default()]);
        keep_entries(&f, 3).expect("cut");
        assert_eq!(read_entries(&f, 3, 1).expect("read")[0], Entry::default());
        let mut h = [0u8; 16];
        f.read_at(&mut h, 0).expect("read header");
        check_header(&h).expect("header reads back");
        h[4] = 9;
        assert!(check_header(&h).is_err());
    }

    #[test]
    fn an_entry_accepts_its_current_and_previous_bytes_only() {
        let e = Entry::new(crc(b"new"), crc(b"old"), 1);
        assert!(e.accepts(crc(b"new")) && e.accepts(crc(b"old")));
        assert!(!e.accepts(crc(b"rot")));
        assert!(Entry::default().accepts(crc(b"anything")));
    }
}
