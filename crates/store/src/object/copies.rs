//! What a replicated OST's primary needs of the store to keep a replica
//! the same as itself: the object id watermark, an object's compression,
//! and digests of its bytes to send only what differs.

use super::{lock, ObjectError, ObjectStore};
use loom_proto::Compress;

/// Most bytes one digest covers: its sums fit a small answer.
pub const MAX_DIGEST: u64 = 256 << 20;
/// Bounds of the bytes one sum of a digest covers.
pub const DIGEST_CHUNKS: std::ops::RangeInclusive<u32> = 4096..=(4 << 20);

impl ObjectStore {
    /// The first object id not handed out yet.
    pub fn watermark(&self) -> u64 {
        *lock(&self.next_id)
    }

    /// Raise the watermark to `to` (a primary's), durably; lower is kept.
    pub fn raise_watermark(&self, to: u64) -> Result<(), ObjectError> {
        let mut next = lock(&self.next_id);
        if to <= *next {
            return Ok(());
        }
        let path = self.watermark_path();
        crate::durable::write_atomic(&path, format!("{to}\n").as_bytes())
            .map_err(|e| ObjectError::io("write watermark", None, &path, e))?;
        *next = to;
        Ok(())
    }

    /// The compression object `oid` was made with (`None`: plain, or no
    /// object).
    pub fn compression(&self, oid: u64) -> Result<Option<Compress>, ObjectError> {
        let _g = self.lock_of(oid).read().unwrap_or_else(|p| p.into_inner());
        let Some(obj) = self.handle(oid, false)? else {
            return Ok(None);
        };
        Ok(self.sums_of(oid, &obj, false, None)?.and_then(|s| s.packed))
    }

    /// Object `oid`'s size and the crc32c of each `chunk` bytes of
    /// `[offset, offset + len)` up to its end (its bytes as a read sees
    /// them, so a compressed object and a plain one holding the same
    /// bytes agree). Every block read is verified.
    pub fn digest(
        &self,
        oid: u64,
        offset: u64,
        len: u64,
        chunk: u32,
    ) -> Result<(u64, Vec<u32>), ObjectError> {
        let size = self.size(oid)?;
        let end = offset.saturating_add(len.min(MAX_DIGEST)).min(size);
        let mut sums = Vec::new();
        let mut at = offset;
        while at < end {
            let n = (end - at).min(u64::from(chunk)) as u32;
            sums.push(crc32c::crc32c(&self.read(oid, at, n)?));
            at += u64::from(n);
        }
        Ok((size, sums))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_agree_on_equal_bytes_and_the_watermark_only_rises() {
        let d = tempfile::tempdir().expect("tempdir");
        let s = ObjectStore::open(d.path()).expect("open");
        let z = ObjectStore::open(&d.path().join("z")).expect("open");
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        s.write(1, 0, &data, None).expect("write");
        z.write(1, 0, &data, Some(Compress::LZ4))
            .expect("write packed");
        assert_eq!(z.compression(1).expect("pack"), Some(Compress::LZ4));
        assert_eq!(s.compression(1).expect("plain"), None);
        let a = s.digest(1, 0, 1 << 20, 65536).expect("digest");
        assert_eq!(a.0, 300_000);
        assert_eq!(a.1.len(), 5);
        assert_eq!(a, z.digest(1, 0, 1 << 20, 65536).expect("digest packed"));
        z.write(1, 70_000, b"x", None).expect("write");
        let b = z.digest(1, 0, 1 << 20, 65536).expect("digest");
        let differ: Vec<usize> = (0..5).filter(|&i| a.1[i] != b.1[i]).collect();
        assert_eq!(differ, vec![1]);
        let first = s.precreate(10).expect("precreate");
        s.raise_watermark(first + 100).expect("raise");
        s.raise_watermark(first + 5).expect("lower is kept");
        assert_eq!(s.watermark(), first + 100);
        let again = ObjectStore::open(d.path()).expect("reopen");
        assert_eq!(again.watermark(), first + 100);
    }
}
