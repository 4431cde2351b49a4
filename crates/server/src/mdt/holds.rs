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
//! A client's `Held` answer and its last close race: the close's release
//! may arrive before the answer that listed the file (the client answers
//! only once the kernel dropped what was recalled). A release of a file
//! the client does not hold, while a recall to it is out, is remembered
//! for that recall, and its `Held` does not hold that file again (else
//! the file would stay held until the client left: never migrated, and
//! kept as an orphan when unlinked).
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
    recalls: Mutex<Recalls>,
}

/// Recalls out per client, and the files each such client released
/// without holding them meanwhile, with when (see the module's
/// documentation).
#[derive(Default)]
struct Recalls {
    seq: u64,
    out: HashMap<u64, (usize, HashMap<Fid, u64>)>,
}

impl Holds {
    fn files(&self) -> std::sync::MutexGuard<'_, HashMap<Fid, HashSet<u64>>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `client` has `fid` open.
    pub fn hold(&self, fid: Fid, client: u64) {
        self.files().entry(fid).or_default().insert(client);
    }

    fn recalls(&self) -> std::sync::MutexGuard<'_, Recalls> {
        self.recalls.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A recall is sent to `client`: its answer is given, with the mark
    /// returned, to [`Holds::recall_answered`] (always, also when none
    /// came).
    pub fn recall_sent(&self, client: u64) -> u64 {
        let mut r = self.recalls();
        r.seq += 1;
        let seq = r.seq;
        r.out.entry(client).or_default().0 += 1;
        seq
    }

    /// The recall sent to `client` at `sent` is over, the client holding
    /// `fids`: those it released since are not held again.
    pub fn recall_answered(&self, client: u64, sent: u64, fids: &[Fid]) {
        let mut r = self.recalls();
        let Some((n, released)) = r.out.get_mut(&client) else {
            return;
        };
        for f in fids {
            if released.get(f).is_none_or(|at| *at < sent) {
                self.hold(*f, client);
            }
        }
        *n -= 1;
        if *n == 0 {
            r.out.remove(&client);
        }
    }

    /// `client` closed `fid` (or never had it); whether others hold it.
    pub fn release(&self, fid: Fid, client: u64) -> bool {
        // In recall_answered's order: recalls, then files.
        let mut r = self.recalls();
        let mut f = self.files();
        let Some(hs) = f.get_mut(&fid).filter(|hs| hs.contains(&client)) else {
            r.seq += 1;
            let seq = r.seq;
            if let Some((_, released)) = r.out.get_mut(&client) {
                released.insert(fid, seq);
            }
            return f.contains_key(&fid);
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

    #[test]
    fn a_release_before_the_recalls_answer_is_not_undone_by_it() {
        let h = Holds::default();
        let (f, g) = (Fid::new(1, 7), Fid::new(1, 8));
        let early = h.recall_sent(1);
        let late = h.recall_sent(1);
        // The client listed both, then closed f before its answers came.
        assert!(!h.release(f, 1));
        h.recall_answered(1, early, &[f, g]);
        assert!(!h.held(f), "released after the recall listed it");
        assert!(h.held(g));
        // Opened again and recalled again: a recall sent after the
        // release holds it.
        let again = h.recall_sent(1);
        h.recall_answered(1, late, &[f]);
        assert!(!h.held(f));
        h.recall_answered(1, again, &[f]);
        assert!(h.held(f), "held by the recall sent after the release");
        assert!(!h.release(f, 1));
        assert!(!h.held(f));
        // With no recall out, nothing is remembered.
        assert!(h.release(g, 2), "client 1 holds it");
        let r = h.recall_sent(2);
        h.recall_answered(2, r, &[g]);
        assert!(h.held_by_other(g, Some(1)));
        assert!(h.recalls().out.is_empty(), "nothing kept once answered");
    }
}
