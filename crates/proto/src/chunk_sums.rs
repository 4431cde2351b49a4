//! The crc32c of each 4 KiB piece of a bulk transfer, found in the same
//! pass that checks the frame's bulk checksum.
//!
//! An OST keeps a crc32c per 4 KiB block of each object. A write's bulk
//! was checked against the frame's crc32c on arrival and then summed
//! again block by block: two passes over every byte, the largest CPU cost
//! of an OST streaming writes. Here the receiver sums each 4 KiB piece
//! once and derives the whole bulk's crc32c from the pieces' (CRCs
//! combine: crc(A‖B) is a fixed linear map of crc(A), set by the length
//! of B, xor crc(B)). The frame's check is unchanged on the wire, and a
//! write takes the pieces' sums as its whole blocks' sums.
//!
//! The pieces line up with the object's blocks: the sender puts in the
//! frame header the *phase*, the length of a short first piece (the bytes
//! up to the write's first block boundary, 0 when it starts on one), and
//! 4 KiB pieces follow it. A ragged stream (IOR-hard's 47,008-byte
//! records) so needs no second pass either.

use std::sync::LazyLock;

/// Bytes of each piece: the OSTs' checksum block.
pub const CHUNK: usize = 4096;

/// The phase of a bulk written at `offset` of an object: the bytes up to
/// its next block boundary (0 on one).
pub const fn phase_for(offset: u64) -> u16 {
    ((CHUNK as u64 - offset % CHUNK as u64) % CHUNK as u64) as u16
}

/// crc32c of each piece of a bulk: a first piece of `phase` bytes (none
/// when 0), then [`CHUNK`]-byte pieces (the last may be shorter). Empty
/// when not known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkSums {
    sums: Vec<u32>,
    len: usize,
    phase: usize,
}

impl ChunkSums {
    /// The sums of `bulk`'s pieces from its start, and the crc32c of all
    /// of `bulk` (0 when empty, as the frame header has it), in one pass.
    pub fn of(bulk: &[u8]) -> (ChunkSums, u32) {
        ChunkSums::of_phased(bulk, 0)
    }

    /// [`ChunkSums::of`] with a first piece of `phase` bytes (a phase of
    /// a [`CHUNK`] or more, from a damaged or hostile header, is taken as
    /// 0: the sums are then only of less use, never wrong).
    pub fn of_phased(bulk: &[u8], phase: usize) -> (ChunkSums, u32) {
        let phase = if phase < CHUNK {
            phase.min(bulk.len())
        } else {
            0
        };
        let (head, rest) = bulk.split_at(phase);
        let mut sums = Vec::with_capacity(rest.len().div_ceil(CHUNK) + 1);
        let mut whole = 0u32;
        if !head.is_empty() {
            whole = crc32c::crc32c(head);
            sums.push(whole);
        }
        for (i, piece) in rest.chunks(CHUNK).enumerate() {
            let crc = crc32c::crc32c(piece);
            whole = if i == 0 && head.is_empty() {
                crc
            } else if piece.len() == CHUNK {
                shift_chunk(whole) ^ crc
            } else {
                // The short last piece: cheaper to extend than to combine
                // over an odd length (it is under 4 KiB).
                crc32c::crc32c_append(whole, piece)
            };
            sums.push(crc);
        }
        let len = bulk.len();
        (ChunkSums { sums, len, phase }, whole)
    }

    /// crc32c of `bulk[at..at + len]` if that is one whole piece; `None`
    /// otherwise, or when the sums are not known.
    pub fn of_range(&self, at: usize, len: usize) -> Option<u32> {
        if len == 0 || self.sums.is_empty() {
            return None;
        }
        if at < self.phase {
            return (at == 0 && len == self.phase).then(|| self.sums.first().copied())?;
        }
        let from = at - self.phase;
        if !from.is_multiple_of(CHUNK) {
            return None;
        }
        let index = from / CHUNK + usize::from(self.phase > 0);
        let piece = (self.len - at.min(self.len)).min(CHUNK);
        (len == piece).then(|| self.sums.get(index).copied())?
    }
}

/// crc(A) to the crc(A‖Z) part that A contributes when [`CHUNK`] bytes
/// follow it: a linear map over GF(2), applied by byte with four tables.
fn shift_chunk(crc: u32) -> u32 {
    let t = &*SHIFT;
    t[0][(crc & 0xff) as usize]
        ^ t[1][((crc >> 8) & 0xff) as usize]
        ^ t[2][((crc >> 16) & 0xff) as usize]
        ^ t[3][(crc >> 24) as usize]
}

/// The tables of [`shift_chunk`], built from the map's 32 columns (the
/// crc32c crate's own combine, slow but run once per bit).
static SHIFT: LazyLock<[[u32; 256]; 4]> = LazyLock::new(|| {
    let col: Vec<u32> = (0..32)
        .map(|bit| crc32c::crc32c_combine(1 << bit, 0, CHUNK))
        .collect();
    let mut t = [[0u32; 256]; 4];
    for (k, table) in t.iter_mut().enumerate() {
        for (b, entry) in table.iter_mut().enumerate() {
            *entry = (0..8)
                .filter(|j| b & (1 << j) != 0)
                .fold(0, |acc, j| acc ^ col[8 * k + j]);
        }
    }
    t
});

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_whole_crc_is_the_bulks_and_each_piece_its_own(
            data in proptest::collection::vec(any::<u8>(), 0..5 * CHUNK + 100)
        ) {
            let (sums, whole) = ChunkSums::of(&data);
            let expect = if data.is_empty() { 0 } else { crc32c::crc32c(&data) };
            prop_assert_eq!(whole, expect);
            for (i, piece) in data.chunks(CHUNK).enumerate() {
                prop_assert_eq!(sums.of_range(i * CHUNK, piece.len()), Some(crc32c::crc32c(piece)));
            }
        }
    }

    proptest! {
        #[test]
        fn phased_pieces_start_after_the_phase(
            data in proptest::collection::vec(any::<u8>(), 0..3 * CHUNK + 100),
            phase in 0usize..CHUNK,
        ) {
            let (sums, whole) = ChunkSums::of_phased(&data, phase);
            let expect = if data.is_empty() { 0 } else { crc32c::crc32c(&data) };
            prop_assert_eq!(whole, expect);
            let head = phase.min(data.len());
            if head > 0 {
                prop_assert_eq!(sums.of_range(0, head), Some(crc32c::crc32c(&data[..head])));
            }
            for (i, piece) in data[head..].chunks(CHUNK).enumerate() {
                let at = head + i * CHUNK;
                prop_assert_eq!(sums.of_range(at, piece.len()), Some(crc32c::crc32c(piece)));
                prop_assert_eq!(sums.of_range(at + 1, piece.len() - 1), None);
            }
        }
    }

    #[test]
    fn a_write_off_its_block_boundary_has_its_pieces_on_them() {
        assert_eq!(phase_for(0), 0);
        assert_eq!(phase_for(8192), 0);
        assert_eq!(phase_for(47_008), 4096 - 47_008 % 4096);
        // The piece after the phase starts on the next block boundary.
        let off = 47_008u64;
        assert!((off + phase_for(off) as u64).is_multiple_of(CHUNK as u64));
        let data = vec![3u8; 10];
        let (s, _) = ChunkSums::of_phased(&data, 9999);
        assert_eq!(
            s.of_range(0, 10),
            Some(crc32c::crc32c(&data)),
            "phase refused"
        );
    }

    #[test]
    fn only_whole_pieces_are_known() {
        let data = vec![7u8; 2 * CHUNK + 10];
        let (s, _) = ChunkSums::of(&data);
        assert_eq!(s.of_range(0, CHUNK), Some(crc32c::crc32c(&data[..CHUNK])));
        assert_eq!(
            s.of_range(2 * CHUNK, 10),
            Some(crc32c::crc32c(&data[2 * CHUNK..]))
        );
        assert_eq!(s.of_range(1, CHUNK), None, "not on a boundary");
        assert_eq!(s.of_range(0, CHUNK - 1), None, "part of a piece");
        assert_eq!(s.of_range(2 * CHUNK, 9), None, "part of the last piece");
        assert_eq!(s.of_range(3 * CHUNK, CHUNK), None, "past the end");
        assert_eq!(s.of_range(0, 0), None);
        assert_eq!(ChunkSums::default().of_range(0, CHUNK), None, "unknown");
    }
}
