//! File locks held across clients: flock, POSIX record locks and OFD
//! locks, kept by the MDT of the file's inode (as Lustre's lock manager
//! keeps flock on the MDT).
//!
//! A lock is owned by a (client, owner) pair: the owner is the kernel's
//! lock owner (a process's file table for POSIX locks, an open file
//! description for flock and OFD locks), which only means something
//! together with the client that sent it. Ranges are inclusive, as the
//! kernel gives them: `end == u64::MAX` reaches past any end of file.

use serde::{Deserialize, Serialize};

/// Shared or exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LockKind {
    /// Shared (F_RDLCK, LOCK_SH).
    Read,
    /// Exclusive (F_WRLCK, LOCK_EX).
    Write,
}

/// Who holds a lock: a client and the kernel's owner on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LockOwner {
    /// The client's id (as in its requests' context).
    pub client: u64,
    /// The owner on that client.
    pub owner: u64,
}

/// One lock, held or asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileLock {
    /// Who holds it (the MDT sets `client` from the request's context).
    pub owner: LockOwner,
    /// The holder's process id on its client (what F_GETLK shows).
    pub pid: u32,
    /// Shared or exclusive.
    pub kind: LockKind,
    /// First byte.
    pub start: u64,
    /// Last byte (inclusive).
    pub end: u64,
}

impl FileLock {
    /// Whether the two ranges share a byte.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        self.start <= end && start <= self.end
    }

    /// Whether `other` (of another owner) may not be held beside this one.
    pub fn conflicts(&self, other: &FileLock) -> bool {
        self.owner != other.owner
            && (self.kind == LockKind::Write || other.kind == LockKind::Write)
            && self.overlaps(other.start, other.end)
    }
}

/// The MDT's answer to a lock request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockAnswer {
    /// Granted (or, for a test, nothing is in the way).
    Granted,
    /// Held by another owner: the first lock in the way.
    Conflict(FileLock),
    /// Still in the way after the MDT waited its while: ask again.
    Blocked,
}

/// Locks of one owner apply to the owner's own ranges: a new lock of the
/// same owner replaces what it held on its range (converting shared to
/// exclusive or back) and merges with adjacent ones of the same kind, as
/// POSIX says. `held` are one owner's locks on one file, sorted and not
/// overlapping; the result is again.
pub fn apply_own(held: &[FileLock], new: Option<FileLock>, start: u64, end: u64) -> Vec<FileLock> {
    let mut out: Vec<FileLock> = Vec::with_capacity(held.len() + 2);
    for l in held {
        if !l.overlaps(start, end) {
            out.push(*l);
            continue;
        }
        // The parts outside the range stay.
        if l.start < start {
            out.push(FileLock {
                end: start - 1,
                ..*l
            });
        }
        if l.end > end {
            out.push(FileLock {
                start: end + 1,
                ..*l
            });
        }
    }
    if let Some(n) = new {
        out.push(n);
    }
    out.sort_by_key(|l| l.start);
    // Merge touching or overlapping locks of the same kind.
    let mut merged: Vec<FileLock> = Vec::with_capacity(out.len());
    for l in out {
        match merged.last_mut() {
            Some(m) if m.kind == l.kind && m.end.checked_add(1).is_none_or(|e| e >= l.start) => {
                m.end = m.end.max(l.end);
                m.pid = l.pid;
            }
            _ => merged.push(l),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lk(kind: LockKind, start: u64, end: u64) -> FileLock {
        FileLock {
            owner: LockOwner {
                client: 1,
                owner: 2,
            },
            pid: 7,
            kind,
            start,
            end,
        }
    }

    #[test]
    fn an_unlock_in_the_middle_splits_a_lock() {
        let held = vec![lk(LockKind::Write, 0, 99)];
        let after = apply_own(&held, None, 40, 59);
        assert_eq!(
            after,
            vec![lk(LockKind::Write, 0, 39), lk(LockKind::Write, 60, 99)]
        );
    }

    #[test]
    fn adjacent_locks_of_one_kind_merge_and_a_conversion_replaces() {
        let held = vec![lk(LockKind::Read, 0, 9)];
        let after = apply_own(&held, Some(lk(LockKind::Read, 10, 19)), 10, 19);
        assert_eq!(after, vec![lk(LockKind::Read, 0, 19)]);
        let after = apply_own(&after, Some(lk(LockKind::Write, 5, 14)), 5, 14);
        assert_eq!(
            after,
            vec![
                lk(LockKind::Read, 0, 4),
                lk(LockKind::Write, 5, 14),
                lk(LockKind::Read, 15, 19)
            ]
        );
        let all = apply_own(&after, None, 0, u64::MAX);
        assert!(all.is_empty());
    }

    #[test]
    fn locks_to_the_end_of_file_merge_without_overflow() {
        let held = vec![lk(LockKind::Write, 0, u64::MAX)];
        let after = apply_own(&held, Some(lk(LockKind::Write, 10, u64::MAX)), 10, u64::MAX);
        assert_eq!(after, vec![lk(LockKind::Write, 0, u64::MAX)]);
    }

    #[test]
    fn only_other_owners_conflict() {
        let a = lk(LockKind::Write, 0, 9);
        let mut b = lk(LockKind::Read, 5, 5);
        assert!(!a.conflicts(&b), "one owner never conflicts with itself");
        b.owner.owner = 3;
        assert!(a.conflicts(&b));
        let mut c = lk(LockKind::Read, 0, 9);
        c.owner.owner = 4;
        assert!(!b.conflicts(&c), "shared locks coexist");
    }
}
