//! File identifiers.
//!
//! A FID is {seq: u64, oid: u32, ver: u32}. The sequence is handed out by the
//! MGS to exactly one MDT (the FLDB records which), so the owner of any FID
//! is found without asking anyone but the FLDB. Sequence 0 is reserved for
//! MDT0 and holds the root directory at oid 1.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A 128-bit file identifier.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
pub struct Fid {
    /// Sequence: names the owning MDT through the FLDB.
    pub seq: u64,
    /// Object id within the sequence.
    pub oid: u32,
    /// Version; always 0 for now, reserved for snapshots.
    pub ver: u32,
}

/// Sequences from here on are never handed out: a mount numbers inodes
/// that are not the file system's own there (its snapshot directory's,
/// whose FIDs repeat from one snapshot to the next).
pub const VIRT_INO_SEQ: u64 = 0xffff_0000;

/// The highest sequence the MGS hands out: its FIDs map one-to-one onto
/// 64-bit inode numbers, below those of [`VIRT_INO_SEQ`].
pub const MAX_INO_SEQ: u64 = VIRT_INO_SEQ - 1;

impl Fid {
    /// The root directory of every loomfs file system (on MDT0).
    pub const ROOT: Fid = Fid {
        seq: 0,
        oid: 1,
        ver: 0,
    };

    /// A FID from its parts, version 0.
    pub const fn new(seq: u64, oid: u32) -> Fid {
        Fid { seq, oid, ver: 0 }
    }

    /// The inode number that the client shows for this FID:
    /// `seq << 32 | oid`, one-to-one while `seq <= MAX_INO_SEQ`, which the
    /// MGS guarantees by never handing out larger sequences. The root maps
    /// to 1, which is what FUSE expects.
    pub fn ino(&self) -> u64 {
        (self.seq << 32) | u64::from(self.oid)
    }

    /// The FID behind an inode number made by [`Fid::ino`].
    pub fn from_ino(ino: u64) -> Fid {
        Fid::new(ino >> 32, (ino & 0xffff_ffff) as u32)
    }

    /// Fixed-width big-endian key bytes: FIDs sort by (seq, oid, ver).
    pub fn to_key(&self) -> [u8; 16] {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&self.seq.to_be_bytes());
        k[8..12].copy_from_slice(&self.oid.to_be_bytes());
        k[12..].copy_from_slice(&self.ver.to_be_bytes());
        k
    }

    /// Inverse of [`Fid::to_key`]; `None` if `k` is not 16 bytes.
    pub fn from_key(k: &[u8]) -> Option<Fid> {
        let k: &[u8; 16] = k.get(..16)?.try_into().ok()?;
        let seq = u64::from_be_bytes(k[..8].try_into().ok()?);
        let oid = u32::from_be_bytes(k[8..12].try_into().ok()?);
        let ver = u32::from_be_bytes(k[12..].try_into().ok()?);
        Some(Fid { seq, oid, ver })
    }
}

impl fmt::Display for Fid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Lustre's [seq:oid:ver] notation, which admins know.
        write!(f, "[{:#x}:{:#x}:{:#x}]", self.seq, self.oid, self.ver)
    }
}

impl fmt::Debug for Fid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The hash of a directory entry name: orders entries on disk, serves as
/// the readdir cookie, and (with striped directories) picks a name's shard.
/// FNV-1a 64, top bit cleared and values below 3 moved up, so cookies 0, 1
/// and 2 stay free for "start", "." and "..". Part of the on-disk format.
pub fn name_hash(name: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let h = h >> 1;
    if h < 3 {
        h + 3
    } else {
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn root_is_inode_one() {
        assert_eq!(Fid::ROOT.ino(), 1);
        assert_eq!(Fid::from_ino(1), Fid::ROOT);
    }

    proptest! {
        #[test]
        fn ino_round_trips_for_allocatable_sequences(seq in 0..=MAX_INO_SEQ, oid: u32) {
            let f = Fid::new(seq, oid);
            prop_assert_eq!(Fid::from_ino(f.ino()), f);
        }

        #[test]
        fn key_round_trips_and_sorts_like_fid(a: (u64, u32, u32), b: (u64, u32, u32)) {
            let fa = Fid { seq: a.0, oid: a.1, ver: a.2 };
            let fb = Fid { seq: b.0, oid: b.1, ver: b.2 };
            prop_assert_eq!(Fid::from_key(&fa.to_key()), Some(fa));
            prop_assert_eq!(fa.cmp(&fb), fa.to_key().cmp(&fb.to_key()));
        }
    }
}
