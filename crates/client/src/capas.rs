//! The capabilities this client holds (`loom_proto::capa`): one per file,
//! from the MDT's answer to a create or an open, or asked for
//! (`GetCapa`) when a file's I/O finds none that holds, or when the
//! lease of a file opened under it is recalled. Each OST request on a
//! file's objects carries it.

use crate::ctx::Caller;
use loom_proto::capa::Capa;
use loom_proto::Fid;
use std::collections::HashMap;
use std::sync::Mutex;

/// Files whose capabilities are kept; past it the table starts again
/// (a file without one asks its MDT at its next I/O).
const MAX_KEPT: usize = 1 << 18;

/// How long before its end a capability is renewed, in seconds.
pub const RENEW_BEFORE_SECS: u64 = 300;

/// The capabilities held, by file.
#[derive(Debug, Default)]
pub struct Capas {
    held: Mutex<HashMap<Fid, Capa>>,
    /// Files opened under a lease, with no round trip to the MDT, that
    /// have no capability yet: for writing or not, and who opened them.
    /// The permission was checked at the open, so when the file's lease
    /// is recalled (a chmod, say), the capability is asked for before the
    /// recall is answered, while the MDT still grants what the open was
    /// allowed (POSIX: permissions are checked at open only).
    wanted: Mutex<HashMap<Fid, (bool, Caller)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Capas {
    /// Keep `capa`, unless one held for its file allows more for longer.
    pub fn remember(&self, capa: Capa) {
        let mut held = lock(&self.held);
        if held.len() >= MAX_KEPT && !held.contains_key(&capa.fid) {
            held.clear();
        }
        match held.get(&capa.fid) {
            // A write capability that holds a while yet is not traded
            // for a read one (an open for reading after one for writing),
            // unless the file's objects changed (its data migrated).
            Some(h)
                if h.write
                    && !capa.write
                    && h.objs == capa.objs
                    && h.good_for(true, RENEW_BEFORE_SECS) => {}
            _ => {
                held.insert(capa.fid, capa);
            }
        }
    }

    /// `fid` was opened under a lease by `caller` (for writing if
    /// `write`): unless a capability that allows it is held, one is
    /// wanted (see [`Capas::wanted`]).
    pub fn want(&self, fid: Fid, write: bool, caller: &Caller) {
        if self.holds(fid, write) {
            return;
        }
        let mut w = lock(&self.wanted);
        if w.len() >= MAX_KEPT && !w.contains_key(&fid) {
            w.clear();
        }
        match w.get(&fid) {
            Some((true, _)) if !write => {}
            _ => {
                w.insert(fid, (write, caller.clone()));
            }
        }
    }

    /// The capability `fid` wants and has not got: for writing or not,
    /// and as whom to ask for it. Taken: asked once.
    pub fn wanted(&self, fid: Fid) -> Option<(bool, Caller)> {
        let (write, c) = lock(&self.wanted).remove(&fid)?;
        (!self.holds(fid, write)).then_some((write, c))
    }

    /// Whether a capability is held for `fid` that allows writing if
    /// `write`, and holds a while yet (no copy made: every open under a
    /// lease asks).
    fn holds(&self, fid: Fid, write: bool) -> bool {
        lock(&self.held)
            .get(&fid)
            .is_some_and(|c| c.good_for(write, RENEW_BEFORE_SECS))
    }

    /// The capability held for `fid` that allows writing if `write`, and
    /// holds a while yet.
    pub fn get(&self, fid: Fid, write: bool) -> Option<Capa> {
        lock(&self.held)
            .get(&fid)
            .filter(|c| c.good_for(write, RENEW_BEFORE_SECS))
            .cloned()
    }
}
