//! Snapshots of a whole file system: what the MGS keeps of each, and the
//! steps it asks of every target to take one (see docs/ARCHITECTURE.md,
//! "Snapshots").
//!
//! Taking snapshot `id`, the MGS asks every target, in rounds that each
//! wait for all: `Freeze` (MDTs finish their cross-MDT operations and
//! start no new one), `Quiesce` (every target finishes the changes it is
//! making and starts no new one), `Take` (each keeps its image: an MDT
//! its store's, an OST its objects from now on copy-on-write), `Thaw`. A
//! target thaws by itself when the barrier's time ends, and a snapshot
//! not taken by every target is dropped by all.

use serde::{Deserialize, Serialize};

/// Where a snapshot stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SnapState {
    /// Being taken; dropped if the MGS restarts meanwhile.
    Creating,
    /// Whole: every target holds it.
    Ready,
    /// Being destroyed (finished if the MGS restarts meanwhile).
    Destroying,
}

/// One snapshot, as the MGS keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// Its number: larger for a later snapshot, never reused.
    pub id: u32,
    /// Its name (`loom snapshot create MOUNT NAME`).
    pub name: String,
    /// When it was taken, in seconds since the epoch.
    pub created: u64,
    /// Where it stands.
    pub state: SnapState,
    /// Bytes only it holds on the targets (what destroying it frees), as
    /// counted when listed; 0 in the MGS's own record.
    pub bytes: u64,
}

/// A step of taking or destroying snapshot `id`, asked of a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SnapStep {
    /// MDTs: finish every cross-MDT operation and start no new one, for
    /// at most `ms` milliseconds.
    Freeze {
        /// How long the barrier may hold.
        ms: u32,
    },
    /// Finish every change in progress and start no new one (until
    /// `Thaw`, or `ms` milliseconds).
    Quiesce {
        /// How long the barrier may hold.
        ms: u32,
    },
    /// Keep the image of now as the snapshot (under the barrier).
    Take,
    /// Lift the barrier.
    Thaw,
    /// Destroy the snapshot's image.
    Drop,
    /// Bytes only the snapshot holds (`Reply::Taken`).
    Usage,
}

/// Why `name` cannot name a snapshot, if it cannot: 1 to 64 bytes of
/// letters, digits, `-`, `_`, `.` and `@`, not starting with `.`.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'));
    match ok {
        true => Ok(()),
        false => Err(format!(
            "{name:?}: a snapshot's name is 1 to 64 letters, digits, '-', '_', '.' or '@', not starting with '.'"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["daily-2026-11-28", "a", "before_upgrade.v2", "x@1"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".hidden", "a/b", "with space", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
