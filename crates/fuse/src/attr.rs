//! Conversions between the wire's attributes and fuser's.

use fuser::{FileAttr, FileType, INodeNo};
use loom_proto::layout::DEFAULT_STRIPE_SIZE;
use loom_proto::msg::{Attr, FileKind, Time};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The kernel's file type of a kind.
pub fn file_type(k: FileKind) -> FileType {
    match k {
        FileKind::File => FileType::RegularFile,
        FileKind::Dir => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
        FileKind::Fifo => FileType::NamedPipe,
        FileKind::CharDev => FileType::CharDevice,
        FileKind::BlockDev => FileType::BlockDevice,
        FileKind::Socket => FileType::Socket,
    }
}

/// A wire time as a `SystemTime` (times before 1970 included).
pub fn system_time(t: Time) -> SystemTime {
    let nsec = Duration::from_nanos(u64::from(t.nsec.min(999_999_999)));
    if t.sec >= 0 {
        UNIX_EPOCH + Duration::from_secs(t.sec as u64) + nsec
    } else {
        UNIX_EPOCH - Duration::from_secs(t.sec.unsigned_abs()) + nsec
    }
}

/// A `SystemTime` as a wire time.
pub fn wire_time(t: SystemTime) -> Time {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Time {
            sec: d.as_secs() as i64,
            nsec: d.subsec_nanos(),
        },
        Err(e) => {
            // Before the epoch: floor to whole seconds, positive nanoseconds.
            let d = e.duration();
            let (mut sec, mut nsec) = (-(d.as_secs() as i64), d.subsec_nanos());
            if nsec > 0 {
                sec -= 1;
                nsec = 1_000_000_000 - nsec;
            }
            Time { sec, nsec }
        }
    }
}

/// The kernel's view of `a`. `st_blocks` counts 512-byte units of the size
/// (holes are not known without asking the OSTs); `st_blksize` is the
/// default stripe size, the unit in which I/O is best issued.
pub fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.fid.ino()),
        size: a.size,
        blocks: a.size.div_ceil(512),
        atime: system_time(a.atime),
        mtime: system_time(a.mtime),
        ctime: system_time(a.ctime),
        crtime: system_time(a.ctime),
        kind: file_type(a.kind),
        perm: (a.perm & 0o7777) as u16,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: DEFAULT_STRIPE_SIZE,
        flags: 0,
    }
}

/// What a negative entry is answered with: node 0 (FUSE's "no such
/// name"), which the kernel keeps for the entry's time.
pub fn negative_attr() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: std::time::UNIX_EPOCH,
        mtime: std::time::UNIX_EPOCH,
        ctime: std::time::UNIX_EPOCH,
        crtime: std::time::UNIX_EPOCH,
        kind: fuser::FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 0,
        flags: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loom_proto::Fid;

    #[test]
    fn times_round_trip_on_both_sides_of_the_epoch() {
        for t in [
            Time { sec: 0, nsec: 0 },
            Time {
                sec: 1_700_000_000,
                nsec: 123,
            },
            Time {
                sec: -1,
                nsec: 500_000_000,
            },
            Time {
                sec: -86_400,
                nsec: 0,
            },
        ] {
            assert_eq!(wire_time(system_time(t)), t);
        }
    }

    #[test]
    fn attributes_map_kind_perm_blocks_and_inode() {
        let a = Attr {
            fid: Fid::new(0x200000401, 7),
            kind: FileKind::File,
            perm: 0o4755,
            nlink: 2,
            uid: 10,
            gid: 20,
            size: 1025,
            atime: Time::default(),
            mtime: Time::default(),
            ctime: Time::default(),
            rdev: 0,
            projid: 0,
        };
        let f = file_attr(&a);
        assert_eq!(f.ino, INodeNo(a.fid.ino()));
        assert_eq!(f.kind, FileType::RegularFile);
        assert_eq!(f.perm, 0o4755);
        assert_eq!(f.blocks, 3);
        assert_eq!((f.uid, f.gid, f.nlink), (10, 20, 2));
    }
}
