//! The one entry point of a change to this MDT's namespace.
//!
//! Every change, a client's or a step of the MDT's own (a peer's part of
//! a cross-MDT operation, the resolver, migrate, restripe, quota and
//! changelog bookkeeping), begins with [`MdtService::begin`]: it waits
//! for the namespace lock and opens the transaction the change reads and
//! writes through. The guards every change on a name shares run here,
//! not in each handler:
//! - [`Change::name`] for a name the change removes or renames: its
//!   directory is on this MDT, the name belongs in this shard (a
//!   restripe may have moved it), and no unfinished cross-MDT operation
//!   holds it;
//! - [`Change::new_name`] for a name the change adds: its directory is
//!   here and takes entries (not sealed by a removal under way), the
//!   name belongs in this shard, the caller may write the directory,
//!   and the name is free;
//! - [`Change::target`] for a name a rename or link may replace: as a
//!   new name, without the caller's check (the handler's rules say who
//!   may replace what) and without EEXIST.
//!
//! The guards every request shares run before it reaches a handler:
//! a moved or restriped inode is answered where it went
//! ([`MdtService::handle`], `dispatch`), and client changes wait for the
//! recovery and the resolver.
//!
//! A change ends in [`Change::commit`] (a client's change: applied,
//! the lock released, then the reply waits as its commit state requires)
//! or [`Change::into_parts`] for tails that need the lock a little
//! longer (an orphan noted, objects queued for destruction). Either way
//! the commit step (`MdtService::apply_as`) is handed the operation
//! (`Rq::op`), the caller (`Rq::ctx`: uid, gid, groups, job id and
//! client) and the transaction, which keeps the before- and after-image
//! of every inode it changes and every name it sets or removes.

use super::namespace::{belongs_here, exists};
use super::perm::{self, Cred};
use super::records::InodeRec;
use super::remote::being_removed;
use super::request::Rq;
use super::tx::Tx;
use super::MdtService;
use crate::error::{Handled, ServerError};
use loom_proto::msg::Reply;
use loom_proto::{Fid, Name};
use tokio::sync::MutexGuard;

/// The namespace lock, held by one change at a time.
pub(super) type Locked<'m> = MutexGuard<'m, ()>;

/// A change under way: the namespace lock and its transaction.
pub(super) struct Change<'m> {
    mdt: &'m MdtService,
    lock: Locked<'m>,
    /// What the change reads and writes.
    pub t: Tx<'m>,
}

impl MdtService {
    /// Begin a change: wait for the namespace lock and open its
    /// transaction.
    pub(super) async fn begin(&self) -> Change<'_> {
        let lock = self.names.ns.lock().await;
        Change {
            mdt: self,
            lock,
            t: Tx::new(&*self.names.store),
        }
    }
}

impl<'m> Change<'m> {
    /// Directory `dir` of a name this change removes or renames, after
    /// the guards of that name (see the module's documentation).
    pub fn name(&mut self, dir: Fid, name: &Name) -> Result<InodeRec, ServerError> {
        let d = self.t.dir(dir)?.clone();
        belongs_here(&d, dir, name)?;
        self.mdt.not_pending(dir, name)?;
        Ok(d)
    }

    /// Directory `dir` of a name this change adds for caller `c`, after
    /// the guards of that name (see the module's documentation).
    pub fn new_name(
        &mut self,
        c: &Cred<'_>,
        dir: Fid,
        name: &Name,
    ) -> Result<InodeRec, ServerError> {
        let d = self.target(dir, name)?;
        perm::may_change_dir(c, &d)?;
        if self.t.dentry(dir, name)?.is_some() {
            return Err(exists(name));
        }
        Ok(d)
    }

    /// Directory `dir` of a name this change may replace (a rename's or
    /// link's target), after the guards of that name.
    pub fn target(&mut self, dir: Fid, name: &Name) -> Result<InodeRec, ServerError> {
        let d = self.t.dir(dir)?.clone();
        if self.mdt.is_sealed(dir) {
            return Err(being_removed(dir));
        }
        belongs_here(&d, dir, name)?;
        Ok(d)
    }

    /// A client's change done: applied (see `MdtService::apply`), the
    /// lock released, and `reply` returned once the change's commit
    /// state allows (at once, or after the commit for a first change).
    pub async fn commit(self, rq: &Rq<'_>, reply: Reply) -> Handled {
        let ticket = self.mdt.apply(rq, self.t, &reply)?;
        drop(self.lock);
        self.mdt.settle(rq, ticket).await?;
        Ok(reply)
    }

    /// The transaction and the lock, for a tail that applies the change
    /// another way (flushed, final, as a step) or holds the lock after.
    pub fn into_parts(self) -> (Tx<'m>, Locked<'m>) {
        (self.t, self.lock)
    }
}
