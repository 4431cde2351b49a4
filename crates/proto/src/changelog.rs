//! The changelog: each MDT's ordered record of the namespace changes it
//! committed, as Lustre's. Policy engines, replication and snapshots read
//! it; registered consumers acknowledge what they have read, and records
//! are purged up to the slowest of them.
//!
//! Record numbers are per MDT, from 1, in commit order, with no gaps
//! except where records were purged. A record is written in the same
//! batch as the change it describes: an acknowledged change is in the log,
//! a change lost to a crash is not.
//!
//! Format rules as for the wire: [`ChangeKind`] variants and record fields
//! are append-only (records are stored as they travel).

use crate::fid::Fid;
use crate::msg::Time;
use crate::name::Name;
use serde::{Deserialize, Serialize};

/// What kind of change a record describes, with Lustre's names for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ChangeKind {
    /// A regular file was created (`CREAT`).
    Create,
    /// A directory was made (`MKDIR`).
    Mkdir,
    /// A hard link was added (`HLINK`).
    Link,
    /// A symbolic link was made (`SLINK`).
    Symlink,
    /// A FIFO, socket or device was made (`MKNOD`).
    Mknod,
    /// A name of a non-directory was removed (`UNLNK`).
    Unlink,
    /// A directory was removed (`RMDIR`).
    Rmdir,
    /// A name was moved (`RENME`): `source` is where it came from.
    Rename,
    /// Mode, owner or times were set (`SATTR`); `flags` says which.
    SetAttr,
    /// The size was set (`TRUNC`), perhaps with other attributes.
    Truncate,
    /// An extended attribute was set or removed (`XATTR`); `name` is it.
    Xattr,
    /// A layout or a directory's default layout changed (`LYOUT`).
    Layout,
    /// A directory was migrated to another MDT (`MIGRT`).
    Migrate,
    /// A file that was written was closed (`CLOSE`).
    Close,
    /// Data written was made durable by an fsync (`MTIME`).
    Mtime,
}

impl ChangeKind {
    /// Every kind, in declaration order.
    pub const ALL: [ChangeKind; 15] = [
        ChangeKind::Create,
        ChangeKind::Mkdir,
        ChangeKind::Link,
        ChangeKind::Symlink,
        ChangeKind::Mknod,
        ChangeKind::Unlink,
        ChangeKind::Rmdir,
        ChangeKind::Rename,
        ChangeKind::SetAttr,
        ChangeKind::Truncate,
        ChangeKind::Xattr,
        ChangeKind::Layout,
        ChangeKind::Migrate,
        ChangeKind::Close,
        ChangeKind::Mtime,
    ];

    /// Lustre's name of the kind (`CREAT`, `UNLNK`, ...), as `loom
    /// changelog` prints it and `--mask` takes it.
    pub const fn name(self) -> &'static str {
        match self {
            ChangeKind::Create => "CREAT",
            ChangeKind::Mkdir => "MKDIR",
            ChangeKind::Link => "HLINK",
            ChangeKind::Symlink => "SLINK",
            ChangeKind::Mknod => "MKNOD",
            ChangeKind::Unlink => "UNLNK",
            ChangeKind::Rmdir => "RMDIR",
            ChangeKind::Rename => "RENME",
            ChangeKind::SetAttr => "SATTR",
            ChangeKind::Truncate => "TRUNC",
            ChangeKind::Xattr => "XATTR",
            ChangeKind::Layout => "LYOUT",
            ChangeKind::Migrate => "MIGRT",
            ChangeKind::Close => "CLOSE",
            ChangeKind::Mtime => "MTIME",
        }
    }

    /// The kind named `s` (case-insensitive), as [`ChangeKind::name`].
    pub fn parse(s: &str) -> Option<ChangeKind> {
        ChangeKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
    }
}

impl std::fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Bits of [`ChangeRec::flags`] of a `SATTR` or `TRUNC` record: which
/// attributes the change set.
pub mod set {
    /// Permission bits.
    pub const MODE: u32 = 1;
    /// Owner.
    pub const UID: u32 = 1 << 1;
    /// Group.
    pub const GID: u32 = 1 << 2;
    /// Size.
    pub const SIZE: u32 = 1 << 3;
    /// Access time.
    pub const ATIME: u32 = 1 << 4;
    /// Modification time.
    pub const MTIME: u32 = 1 << 5;
    /// Project id, or whether a directory passes it on.
    pub const PROJID: u32 = 1 << 6;
}

/// Bits of [`ChangeRec::flags`] of namespace records.
pub mod ns {
    /// `UNLNK`, `RMDIR`, `RENME`: the change removed the last name of an
    /// inode (the target of a rename that replaced it).
    pub const LAST_LINK: u32 = 1 << 8;
    /// `RENME`: the two names were exchanged (`RENAME_EXCHANGE`).
    pub const EXCHANGE: u32 = 1 << 9;
    /// `XATTR`: the attribute was removed, not set.
    pub const REMOVED: u32 = 1 << 10;
    /// The record is one MDT's part of a change that spans MDTs: the
    /// other MDTs it touched have records of their own.
    pub const PART: u32 = 1 << 11;
}

/// One changelog record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeRec {
    /// Record number on its MDT (from 1, in commit order).
    pub index: u64,
    /// When the change was applied.
    pub time: Time,
    /// What kind of change.
    pub kind: ChangeKind,
    /// Details by kind: [`set`] bits for attribute changes, [`ns`] bits.
    pub flags: u32,
    /// The inode changed (made, removed, renamed, whose attributes were
    /// set).
    pub fid: Fid,
    /// The directory of `name` (for attribute changes: the inode's
    /// parent as the MDT knows it).
    pub parent: Fid,
    /// The name made, removed or renamed to; the attribute of `XATTR`.
    pub name: Option<Name>,
    /// `RENME`: the directory and name it had before.
    pub source: Option<(Fid, Name)>,
    /// `RENME`: the inode the new name replaced, if any.
    pub replaced: Option<Fid>,
    /// Caller's uid.
    pub uid: u32,
    /// Caller's gid.
    pub gid: u32,
    /// The caller's job.
    pub jobid: String,
    /// The client that made the change (0: the MDT's own work).
    pub client: u64,
}

/// A registered changelog consumer of one MDT.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangelogUser {
    /// Its id (printed `cl<id>`, as Lustre's).
    pub id: u32,
    /// Every record up to this one was acknowledged (0: none).
    pub cleared: u64,
    /// When it registered.
    pub registered: Time,
}

/// One MDT's changelog state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangelogState {
    /// The MDT.
    pub mdt: u32,
    /// The oldest record kept (`next` when none is).
    pub first: u64,
    /// The number the next record will get.
    pub next: u64,
    /// Its registered consumers.
    pub users: Vec<ChangelogUser>,
}

impl ChangelogState {
    /// How many records `user` has not acknowledged yet.
    pub fn lag(&self, user: &ChangelogUser) -> u64 {
        self.next.saturating_sub(1).saturating_sub(user.cleared)
    }

    /// Whether the MDT records changes: while a consumer is registered.
    pub fn recording(&self) -> bool {
        !self.users.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_back_from_their_names_in_any_case() {
        for k in ChangeKind::ALL {
            assert_eq!(ChangeKind::parse(k.name()), Some(k));
            assert_eq!(ChangeKind::parse(&k.name().to_lowercase()), Some(k));
        }
        assert_eq!(ChangeKind::parse("CREATE"), None);
        let mut names: Vec<_> = ChangeKind::ALL.iter().map(|k| k.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ChangeKind::ALL.len(), "names are distinct");
    }

    #[test]
    fn lag_counts_records_not_acknowledged() {
        let u = |cleared| ChangelogUser {
            id: 1,
            cleared,
            registered: Time { sec: 0, nsec: 0 },
        };
        let s = ChangelogState {
            mdt: 0,
            first: 4,
            next: 11,
            users: vec![u(3), u(10)],
        };
        assert_eq!(s.lag(&s.users[0]), 7);
        assert_eq!(s.lag(&s.users[1]), 0);
        assert!(s.recording());
        assert!(!ChangelogState::default().recording());
    }
}
