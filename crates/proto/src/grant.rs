//! Space grants: what lets a client acknowledge a write before its OST has
//! stored it (Lustre's grants).
//!
//! A write sent behind (`write(2)` returns before the OST answers) must not
//! fail later for lack of space: nothing would be left to report it to
//! once the file is closed. So each OST reserves space for each client that
//! writes to it, and tops the reservation up in its answers to writes
//! ([`crate::msg::Reply::Written`]). A client spends its grant on the
//! writes it sends behind, and sends a write it holds no grant for as one
//! it waits for, whose `ENOSPC` then reaches `write(2)` itself.
//!
//! Both sides charge a write the same [`cost`]: an upper bound of the space
//! it can take on the OST's disk, so a write within a grant always fits.

use std::time::Duration;

/// The most space an OST keeps granted to one client.
pub const TARGET: u64 = 64 << 20;

/// An OST forgets the grant of a client it has not heard from for this
/// long (a client that went away would otherwise hold space forever).
pub const OST_FORGETS_AFTER: Duration = Duration::from_secs(600);

/// A client stops trusting a grant it has not had an answer about for
/// this long (half of [`OST_FORGETS_AFTER`], so it never spends one the
/// OST forgot).
pub const CLIENT_DROPS_AFTER: Duration = Duration::from_secs(300);

/// Block size the cost is counted in (the OST's checksum block).
const BLOCK: u64 = 4096;

/// A compressed object's unit of change (`loom_store::packed::CHUNK`):
/// changing any byte of a chunk writes a whole new stored form of it
/// before the old one is freed.
pub const PACKED_CHUNK: u64 = 64 << 10;

/// An upper bound of the bytes a write of `len` bytes at object offset
/// `offset` adds to the OST's disk: every 4 KiB block it touches, the
/// checksums of those blocks, and a block for what the file system around
/// them needs; for a compressed object (`packed`), every 64 KiB chunk it
/// touches, whole. An overwrite is charged as a new write.
pub fn cost(offset: u64, len: u64, packed: bool) -> u64 {
    if len == 0 {
        return 0;
    }
    let end = offset.saturating_add(len);
    let unit = if packed { PACKED_CHUNK } else { BLOCK };
    let units = end.div_ceil(unit) - offset / unit;
    let bytes = units * unit;
    // Checksums: 4 bytes per block plain, a 32-byte entry per chunk.
    let sums = if packed { units * 32 } else { units * 4 };
    bytes + sums.div_ceil(BLOCK) * BLOCK + BLOCK
}

/// The bytes of data a write of `len` bytes at object offset `offset`
/// may add to its object: every block (or compressed chunk) it touches,
/// without the checksums and overhead [`cost`] adds. What a block quota
/// charges a write before it runs (the OST then counts what it took).
pub fn data_cost(offset: u64, len: u64, packed: bool) -> u64 {
    if len == 0 {
        return 0;
    }
    let end = offset.saturating_add(len);
    let unit = if packed { PACKED_CHUNK } else { BLOCK };
    (end.div_ceil(unit) - offset / unit) * unit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_costs_every_block_it_touches_and_more() {
        assert_eq!(cost(0, 0, false), 0);
        // One byte: its block, a block of checksums, a block of overhead.
        assert_eq!(cost(0, 1, false), 3 * BLOCK);
        // Straddling two blocks.
        assert_eq!(cost(4095, 2, false), 4 * BLOCK);
        // 1 MiB aligned: 256 blocks, 1 KiB of checksums.
        assert_eq!(cost(1 << 20, 1 << 20, false), (1 << 20) + 2 * BLOCK);
        // Compressed: whole chunks.
        assert_eq!(cost(10, 10, true), PACKED_CHUNK + 2 * BLOCK);
        assert_eq!(
            cost(PACKED_CHUNK - 1, 2, true),
            2 * PACKED_CHUNK + 2 * BLOCK
        );
    }

    #[test]
    fn a_write_charges_a_quota_its_blocks_only() {
        assert_eq!(data_cost(0, 0, false), 0);
        assert_eq!(data_cost(1 << 20, 1 << 20, false), 1 << 20);
        assert_eq!(data_cost(4095, 2, false), 2 * BLOCK);
        assert_eq!(data_cost(10, 10, true), PACKED_CHUNK);
    }

    #[test]
    fn writes_merged_never_cost_more_than_their_parts() {
        // A client gathers small writes and sends them as one: the grant
        // taken for the parts must cover the whole.
        for packed in [false, true] {
            let mut off = 1234u64;
            let mut parts = 0;
            for len in [1u64, 100, 4096, 5000, 70_000, 3] {
                parts += cost(off, len, packed);
                off += len;
            }
            assert!(cost(1234, off - 1234, packed) <= parts);
        }
    }
}
