//! Whom each object's bytes count against, and the bytes per owner.
//!
//! An object's owner (the uid, gid and project id of the file it belongs
//! to) is kept with its data file, in the extended attribute
//! [`OWNER_XATTR`] (12 bytes: uid, gid, projid, little-endian); an object
//! without it belongs to (0, 0, 0). What an object takes is what its data
//! file has allocated on the local file system (`st_blocks`): the bytes a
//! quota charges, holes and compression included, as `du` shows them.
//!
//! The counts per owner live in memory. They are made by a scan of every
//! object when the store opens, and moved by every change under the
//! object's lock, from the blocks before and after it: what is on disk is
//! the truth, so the counts are exact after any crash of the process.

use loom_proto::quota::{Owner, QuotaId};
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;

/// The extended attribute holding an object's owner.
pub const OWNER_XATTR: &str = "user.loom.owner";

fn encode(o: Owner) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&o.uid.to_le_bytes());
    b[4..8].copy_from_slice(&o.gid.to_le_bytes());
    b[8..].copy_from_slice(&o.projid.to_le_bytes());
    b
}

fn decode(b: &[u8]) -> Option<Owner> {
    let n = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
    (b.len() == 12).then_some(())?;
    Some(Owner {
        uid: n(0)?,
        gid: n(4)?,
        projid: n(8)?,
    })
}

/// What `getxattr` answered, as an owner: none set is (0, 0, 0).
fn answered(r: rustix::io::Result<usize>, buf: &[u8]) -> io::Result<Owner> {
    let n = match r {
        Ok(n) => n,
        // None set, or a file system that keeps none (see `write`).
        Err(rustix::io::Errno::NODATA | rustix::io::Errno::OPNOTSUPP) => {
            return Ok(Owner::default())
        }
        Err(e) => return Err(e.into()),
    };
    decode(&buf[..n]).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{OWNER_XATTR} holds {n} bytes, not an owner's 12"),
        )
    })
}

/// The owner stored with an open data file.
pub fn read(f: &File) -> io::Result<Owner> {
    let mut buf = [0u8; 16];
    let r = rustix::fs::fgetxattr(f, OWNER_XATTR, &mut buf);
    answered(r, &buf)
}

/// The owner stored with the data file at `path` (for scans, which do
/// not open the objects).
pub fn read_at(path: &Path) -> io::Result<Owner> {
    let mut buf = [0u8; 16];
    let r = rustix::fs::getxattr(path, OWNER_XATTR, &mut buf);
    answered(r, &buf)
}

/// Store `o` as the owner of an open data file.
pub fn write(f: &File, o: Owner) -> io::Result<()> {
    match rustix::fs::fsetxattr(f, OWNER_XATTR, &encode(o), rustix::fs::XattrFlags::empty()) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::OPNOTSUPP) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "the OST's file system keeps no extended attributes ({OWNER_XATTR}), \
                 which quotas need"
            ),
        )),
        Err(e) => Err(e.into()),
    }
}

/// The bytes a data file takes on disk.
pub fn taken(m: &std::fs::Metadata) -> u64 {
    m.blocks() * 512
}

/// The bytes held per owner, and per id (their sums).
#[derive(Debug, Default)]
pub struct Owners {
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    by_owner: HashMap<Owner, u64>,
    by_id: HashMap<QuotaId, u64>,
}

fn shift(n: &mut u64, before: u64, after: u64) {
    *n = (*n + after).saturating_sub(before);
}

impl Owners {
    /// Counts made by a scan.
    pub fn of(by_owner: HashMap<Owner, u64>) -> Owners {
        let c = Owners::default();
        for (o, n) in by_owner {
            c.moved(o, 0, n);
        }
        c
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `o`'s objects went from `before` to `after` bytes taken.
    pub fn moved(&self, o: Owner, before: u64, after: u64) {
        if before == after {
            return;
        }
        let mut c = self.lock();
        let n = c.by_owner.entry(o).or_default();
        shift(n, before, after);
        if *n == 0 {
            c.by_owner.remove(&o);
        }
        for who in o.ids() {
            let n = c.by_id.entry(who).or_default();
            shift(n, before, after);
            if *n == 0 {
                c.by_id.remove(&who);
            }
        }
    }

    /// The bytes counted for `who`.
    pub fn of_id(&self, who: QuotaId) -> u64 {
        self.lock().by_id.get(&who).copied().unwrap_or(0)
    }

    /// A copy of the counts per owner.
    pub fn snapshot(&self) -> HashMap<Owner, u64> {
        self.lock().by_owner.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_round_trip_and_a_damaged_value_is_an_error() {
        let o = Owner {
            uid: 65534,
            gid: 7,
            projid: u32::MAX,
        };
        assert_eq!(decode(&encode(o)), Some(o));
        assert_eq!(decode(&[1, 2, 3]), None);
        let d = tempfile::tempdir().expect("tempdir");
        let f = File::create(d.path().join("x")).expect("create");
        assert_eq!(read(&f).expect("unset"), Owner::default());
        write(&f, o).expect("set");
        assert_eq!(read(&f).expect("read"), o);
        assert_eq!(read_at(&d.path().join("x")).expect("read"), o);
    }

    #[test]
    fn counts_move_and_drop_an_owner_at_zero() {
        let c = Owners::default();
        let a = Owner::default();
        c.moved(a, 0, 8192);
        c.moved(a, 4096, 0);
        assert_eq!(c.snapshot().get(&a), Some(&4096));
        assert_eq!(c.of_id(QuotaId::project(0)), 4096);
        c.moved(a, 4096, 0);
        assert!(c.snapshot().is_empty());
        assert_eq!(c.of_id(QuotaId::user(0)), 0);
    }
}
