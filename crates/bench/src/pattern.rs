//! The data pattern IOR-style workloads write, so that `-v` can tell which
//! process wrote each byte and at which offset.
//!
//! The file is seen as 4 KiB sectors aligned to absolute file offsets. The
//! byte at absolute offset `o`, written by process `w`, is byte `o % 4096` of
//! the sector image of `w` for the sector starting at `o - o % 4096`:
//!
//! ```text
//! sector image (4096 bytes)
//! +--------------------+--------------------+--------------------------------+
//! | 0..8  sector offset| 8..12  b"LOOM"     | 16..4096  filler: xorshift64   |
//! |       (u64 LE)     | 12..16 writer (LE) |   stream seeded by the writer  |
//! +--------------------+--------------------+--------------------------------+
//! ```
//!
//! So every 4 KiB of a file says who wrote it and where it belongs, and every
//! byte is checked against its expected value; one flipped byte anywhere is
//! caught. Filling is a `memcpy` of the writer's image plus a 16-byte header
//! patch per sector, which keeps it far cheaper than the I/O it feeds.

/// Sector size of the pattern.
pub const SECTOR: u64 = 4096;
/// Bytes of header at the start of each sector.
pub const HEADER: usize = 16;
/// Magic at bytes 8..12 of each sector header.
pub const MAGIC: &[u8; 4] = b"LOOM";

/// The expected contents of data written by one process.
#[derive(Debug, Clone)]
pub struct Pattern {
    writer: u32,
    image: Vec<u8>,
}

/// Where verification found a byte that differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// Absolute file offset of the first differing byte.
    pub offset: u64,
    /// The byte the writer wrote there.
    pub expected: u8,
    /// The byte that was read.
    pub found: u8,
}

impl Pattern {
    /// The pattern of process (rank) `writer`.
    pub fn new(writer: u32) -> Self {
        let mut image = vec![0u8; SECTOR as usize];
        image[8..12].copy_from_slice(MAGIC);
        image[12..16].copy_from_slice(&writer.to_le_bytes());
        let mut x: u64 =
            0x9E37_79B9_7F4A_7C15 ^ (u64::from(writer) + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
        for chunk in image[HEADER..].chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let bytes = x.to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        Pattern { writer, image }
    }

    /// The writer this pattern belongs to.
    pub fn writer(&self) -> u32 {
        self.writer
    }

    /// Fills `buf` with what this writer puts at file offset `offset`.
    pub fn fill(&self, buf: &mut [u8], offset: u64) {
        let mut done = 0usize;
        while done < buf.len() {
            let abs = offset + done as u64;
            let in_sector = (abs % SECTOR) as usize;
            let sector_start = abs - in_sector as u64;
            let n = (SECTOR as usize - in_sector).min(buf.len() - done);
            let dst = &mut buf[done..done + n];
            dst.copy_from_slice(&self.image[in_sector..in_sector + n]);
            if in_sector < 8 {
                let hdr = sector_start.to_le_bytes();
                let end = 8.min(in_sector + n);
                dst[..end - in_sector].copy_from_slice(&hdr[in_sector..end]);
            }
            done += n;
        }
    }

    /// Checks `buf`, read from file offset `offset`, against this writer's
    /// pattern; `scratch` is reused to avoid an allocation per call.
    pub fn check(&self, buf: &[u8], offset: u64, scratch: &mut Vec<u8>) -> Result<(), Mismatch> {
        scratch.resize(buf.len(), 0);
        self.fill(scratch, offset);
        if scratch.as_slice() == buf {
            return Ok(());
        }
        let i = scratch
            .iter()
            .zip(buf)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        Err(Mismatch {
            offset: offset + i as u64,
            expected: scratch[i],
            found: buf[i],
        })
    }
}

/// Decodes the header of a sector read from a file: `(sector offset, writer)`
/// if the magic is there.
pub fn decode_header(sector: &[u8]) -> Option<(u64, u32)> {
    if sector.len() < HEADER || &sector[8..12] != MAGIC {
        return None;
    }
    let mut off = [0u8; 8];
    off.copy_from_slice(&sector[..8]);
    let mut w = [0u8; 4];
    w.copy_from_slice(&sector[12..16]);
    Some((u64::from_le_bytes(off), u32::from_le_bytes(w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filling_in_pieces_equals_filling_at_once() {
        let p = Pattern::new(3);
        let mut whole = vec![0u8; 3 * SECTOR as usize + 777];
        p.fill(&mut whole, 1000);
        // Unaligned pieces of odd sizes, like -t 3901 or 47008 transfers.
        let mut pieces = vec![0u8; whole.len()];
        let mut at = 0;
        for size in [1usize, 7, 3901, 5, 4096, 47, 9000] {
            let end = (at + size).min(pieces.len());
            p.fill(&mut pieces[at..end], 1000 + at as u64);
            at = end;
        }
        p.fill(&mut pieces[at..], 1000 + at as u64);
        assert_eq!(whole, pieces);
    }

    #[test]
    fn each_sector_names_its_offset_and_writer() {
        let p = Pattern::new(7);
        let mut buf = vec![0u8; 2 * SECTOR as usize];
        p.fill(&mut buf, 5 * SECTOR);
        assert_eq!(decode_header(&buf[..HEADER]), Some((5 * SECTOR, 7)));
        assert_eq!(
            decode_header(&buf[SECTOR as usize..SECTOR as usize + HEADER]),
            Some((6 * SECTOR, 7))
        );
    }

    #[test]
    fn check_finds_one_flipped_byte_anywhere() {
        let p = Pattern::new(1);
        let mut buf = vec![0u8; 10_000];
        p.fill(&mut buf, 123);
        let mut scratch = Vec::new();
        assert_eq!(p.check(&buf, 123, &mut scratch), Ok(()));
        for i in [0usize, 9, 15, 16, 4000, 9999] {
            let mut bad = buf.clone();
            bad[i] ^= 0x01;
            let m = p
                .check(&bad, 123, &mut scratch)
                .expect_err("flip must be caught");
            assert_eq!(m.offset, 123 + i as u64);
            assert_eq!(m.found, buf[i] ^ 0x01);
            assert_eq!(m.expected, buf[i]);
        }
    }

    #[test]
    fn different_writers_write_different_bytes() {
        let mut a = vec![0u8; SECTOR as usize];
        let mut b = vec![0u8; SECTOR as usize];
        Pattern::new(0).fill(&mut a, 0);
        Pattern::new(1).fill(&mut b, 0);
        let differing = a.iter().zip(&b).filter(|(x, y)| x != y).count();
        assert!(
            differing > SECTOR as usize / 2,
            "only {differing} bytes differ"
        );
        let mut scratch = Vec::new();
        assert!(Pattern::new(0).check(&b, 0, &mut scratch).is_err());
    }
}
