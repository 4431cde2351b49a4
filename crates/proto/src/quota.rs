//! Quotas: what each target counts per user, group and project.
//!
//! Usage is counted where a change commits, in the batch of the change:
//! an MDT counts the inodes it holds by owner, group and project id, so
//! the count is exact whenever the change is (across a crash, a replay,
//! a migrate). Block usage is the OSTs' to count; limits and their
//! enforcement build on the same counts (see docs/OPERATIONS.md).
//!
//! Format rules as for the wire: variants and fields are append-only.

use serde::{Deserialize, Serialize};

/// Whose usage: a user's, a group's or a project's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum QuotaKind {
    /// By owner (uid).
    User,
    /// By group (gid).
    Group,
    /// By project id (a directory tree's, see `loom project`).
    Project,
}

impl QuotaKind {
    /// Every kind, in the order `loom quota` shows them.
    pub const ALL: [QuotaKind; 3] = [QuotaKind::User, QuotaKind::Group, QuotaKind::Project];

    /// One letter, as `lfs quota -u/-g/-p` and the store's keys name it.
    pub fn letter(self) -> char {
        match self {
            QuotaKind::User => 'u',
            QuotaKind::Group => 'g',
            QuotaKind::Project => 'p',
        }
    }

    /// The kind a letter names.
    pub fn from_letter(c: char) -> Option<QuotaKind> {
        QuotaKind::ALL.into_iter().find(|k| k.letter() == c)
    }

    /// Its name in messages ("user", "group", "project").
    pub fn name(self) -> &'static str {
        match self {
            QuotaKind::User => "user",
            QuotaKind::Group => "group",
            QuotaKind::Project => "project",
        }
    }
}

/// One user, group or project.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct QuotaId {
    /// Which kind of id.
    pub kind: QuotaKind,
    /// The uid, gid or project id.
    pub id: u32,
}

impl QuotaId {
    /// User `id`.
    pub fn user(id: u32) -> QuotaId {
        QuotaId {
            kind: QuotaKind::User,
            id,
        }
    }
    /// Group `id`.
    pub fn group(id: u32) -> QuotaId {
        QuotaId {
            kind: QuotaKind::Group,
            id,
        }
    }
    /// Project `id`.
    pub fn project(id: u32) -> QuotaId {
        QuotaId {
            kind: QuotaKind::Project,
            id,
        }
    }
}

impl std::fmt::Display for QuotaId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind.name(), self.id)
    }
}

/// Whom an object's bytes count against: its file's owner, group and
/// project id, as the MDT holds them. Clients send it with the writes
/// that may make or grow an object, and the MDT sends it to the objects
/// of a file whose owner, group or project changes (`ObjSetOwner`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct Owner {
    /// The file's uid.
    pub uid: u32,
    /// The file's gid.
    pub gid: u32,
    /// The file's project id.
    pub projid: u32,
}

impl Owner {
    /// The three ids the bytes count against.
    pub fn ids(self) -> [QuotaId; 3] {
        [
            QuotaId::user(self.uid),
            QuotaId::group(self.gid),
            QuotaId::project(self.projid),
        ]
    }
}

/// What one target counts for one id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaUsage {
    /// Inodes (MDTs).
    pub inodes: u64,
    /// Bytes of data (OSTs; an MDT's Data-on-MDT bytes once counted).
    pub bytes: u64,
}

/// Limits of one id; 0 is no limit. Soft limits may be passed for the
/// grace time, after which they hold as hard ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaLimits {
    /// Inodes: soft limit.
    pub inode_soft: u64,
    /// Inodes: hard limit.
    pub inode_hard: u64,
    /// Bytes: soft limit.
    pub block_soft: u64,
    /// Bytes: hard limit.
    pub block_hard: u64,
    /// How long a soft limit may be passed, in seconds (0: the default,
    /// [`DEFAULT_GRACE_SECS`]).
    pub grace_secs: u64,
}

/// Grace of a soft limit when none is set: one week, as Lustre's.
pub const DEFAULT_GRACE_SECS: u64 = 7 * 24 * 3600;

impl QuotaLimits {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.inode_soft | self.inode_hard | self.block_soft | self.block_hard != 0
    }

    /// The grace in effect.
    pub fn grace(&self) -> u64 {
        if self.grace_secs == 0 {
            DEFAULT_GRACE_SECS
        } else {
            self.grace_secs
        }
    }
}

/// Where a target's count and a recount of what it holds differ
/// (`loom quota --check`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaDrift {
    /// Whose.
    pub who: QuotaId,
    /// What the target counted as changes committed.
    pub counted: QuotaUsage,
    /// What a scan of the target found.
    pub scanned: QuotaUsage,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_name_each_kind_once() {
        for k in QuotaKind::ALL {
            assert_eq!(QuotaKind::from_letter(k.letter()), Some(k));
        }
        assert_eq!(QuotaKind::from_letter('x'), None);
        assert_eq!(QuotaId::project(7).to_string(), "project 7");
    }
}
