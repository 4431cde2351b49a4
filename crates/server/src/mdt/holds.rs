//! Who has each file open, as far as this MDT must know: a file whose
//! last name goes while a client has it open is kept (an orphan, see
//! `orphans`) until every such client closed it.
//!
//! A client opens a file under a lease on its attributes without asking
//! the MDT, so the MDT learns of its opens when it recalls that lease:
//! every change of the inode does, the removal of its last name too. A
//! client answers a recall of a file it has open with `Held`, and from
//! then on holds it here until its last close there (`ReleaseOrphan`),
//! renewing it with the orphans it holds (`RenewOrphans`). After its
//! connection was lost (the MDT restarted, or the network), it holds
//! every file it has open here again with its locks (`ReclaimLocks`),
//! since its leases went with the connection.
//!
//! Holds live in memory. After a restart, until the recorded clients
//! reclaimed or the grace period ended (the locks' grace, see `locks`),
//! a file losing its last name is kept and no orphan is destroyed for
//! want of holders: one of them may not have told yet. A client whose
//! connection stays dead loses its holds with its locks.

use loom_proto::Fid;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// See the module documentation.
#[derive(Default)]
pub struct Holds {
    files: Mutex<HashMap<Fid, HashSet<u64>>>,
}

impl Holds {
    fn files(&self) -> std::sync::MutexGuard<'_, HashMap<Fid, HashSet<u64>>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `client` has `fid` open.
    pub fn hold(&self, fid: Fid, client: u64) {
        self.files().entry(fid).or_default().insert(client);
    }

    /// `client` closed `fid` (or never had it); whether others hold it.
    pub fn release(&self, fid: Fid, client: u64) -> bool {
        let mut f = self.files();
        let Some(hs) = f.get_mut(&fid) else {
            return false;
        };
        hs.remove(&client);
        if hs.is_empty() {
            f.remove(&fid);
            return false;
        }
        true
    }

    /// Whether a client other than `but` holds `fid`.
    pub fn held_by_other(&self, fid: Fid, but: Option<u64>) -> bool {
        self.files()
            .get(&fid)
            .is_some_and(|hs| hs.iter().any(|c| Some(*c) != but))
    }

    /// Whether anyone holds `fid`.
    pub fn held(&self, fid: Fid) -> bool {
        self.held_by_other(fid, None)
    }

    /// `fid` is gone: no one holds it.
    pub fn forget(&self, fid: Fid) {
        self.files().remove(&fid);
    }

    /// `client` left or died: it holds nothing. The files it was the last
    /// holder of.
    pub fn drop_client(&self, client: u64) -> Vec<Fid> {
        let mut f = self.files();
        let mut last = Vec::new();
        f.retain(|fid, hs| {
            if hs.remove(&client) && hs.is_empty() {
                last.push(*fid);
            }
            !hs.is_empty()
        });
        last
    }

    /// Files held, for the metrics.
    pub fn len(&self) -> usize {
        self.files().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_held_until_its_last_holder_lets_go() {
        let h = Holds::default();
        let f = Fid::new(1, 7);
        h.hold(f, 1);
        h.hold(f, 2);
        assert!(h.held_by_other(f, Some(1)));
        assert!(h.release(f, 2), "1 holds it still");
        assert!(!h.held_by_other(f, Some(1)));
        assert!(h.held(f));
        h.hold(f, 3);
        assert_eq!(h.drop_client(3), Vec::<Fid>::new());
        assert_eq!(h.drop_client(1), vec![f], "the last holder died");
        assert!(!h.held(f));
        assert!(!h.release(f, 1), "a release of nothing is harmless");
    }
}
