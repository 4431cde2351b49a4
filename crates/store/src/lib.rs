//! The storage layer under the services (Lustre's OSD).
//!
//! - [`kv`]: the MDT's key-value store trait and its fjall backend, with
//!   grouped commits.
//! - [`object`]: the OST's object store: one file per object in a local
//!   directory.
//! - [`checked`]: reads that verify checksums, changes that keep them.
//! - [`sums`]: per-block checksums of an object, beside it.
//! - [`packed`]: compressed objects, in chunks written copy-on-write.
//! - [`snaps`]: snapshots of an OST's objects, copy-on-write by chunk.
//! - [`durable`]: small helpers for crash-safe file replacement.
#![warn(missing_docs)]

pub mod checked;
pub mod durable;
pub mod kv;
pub mod object;
pub mod owners;
pub mod packed;
pub mod snaps;
pub mod sums;

/// A scratch object for the unit tests of the object formats: its data
/// file and its checksum file (holding `header`), in a directory removed
/// with the returned guard.
#[cfg(test)]
pub(crate) fn scratch_object(header: &[u8]) -> (tempfile::TempDir, std::fs::File, std::fs::File) {
    use std::os::unix::fs::FileExt;
    let d = tempfile::tempdir().expect("tempdir");
    let open = |n: &str| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(d.path().join(n))
            .expect("create")
    };
    let (data, sums) = (open("o"), open("o.sum"));
    sums.write_all_at(header, 0).expect("header");
    (d, data, sums)
}
