//! How [`MdtService::handle`](super::MdtService::handle) takes a
//! client's request: the session's own requests first (before recovery
//! ends, and outside the reply cache), then those about the whole MDT,
//! then operations. Every request is placed in [`Staged::of`], one
//! exhaustive match, so one added later does not compile until it says
//! where it goes.

use super::locks::LockReq;
use loom_proto::lock::FileLock;
use loom_proto::msg::{Batched, MdtRequest, Replayed};
use loom_proto::Fid;

/// A client's request, by how it is taken.
pub(super) enum Staged {
    /// Answered at once, also while the MDT recovers.
    Session(Session),
    /// Changes each taken as a request of its own (`batch`).
    Batch(Vec<Batched>),
    /// Taken once recovery is over.
    Later(Later),
}

/// The session's own requests.
pub(super) enum Session {
    /// Where the MDT's commits stand.
    CommitState,
    /// Lease recalls for this client, on its connection.
    Subscribe,
    /// The client's replays after a restart.
    Replay { entries: Vec<Replayed>, last: bool },
    /// The locks the client held, again after its connection was lost
    /// (before new locks are granted: see `locks`).
    Reclaim {
        locks: Vec<(Fid, FileLock)>,
        held: Vec<Fid>,
    },
}

/// What is taken once recovery is over.
pub(super) enum Later {
    /// About the whole MDT, outside the reply cache.
    Whole(Whole),
    /// An operation: a read, or a change through the reply cache.
    Op(MdtRequest),
    /// About file locks: kept in memory, outside the reply cache.
    Lock(LockReq),
}

/// Requests about the whole MDT.
pub(super) enum Whole {
    /// Commit everything applied.
    Sync,
    /// The client leaves.
    Disconnect,
}

impl Staged {
    pub(super) fn of(req: MdtRequest) -> Staged {
        use MdtRequest as R;
        match req {
            R::CommitState => Staged::Session(Session::CommitState),
            R::Subscribe => Staged::Session(Session::Subscribe),
            R::Replay { entries, last, .. } => Staged::Session(Session::Replay { entries, last }),
            R::Batch { items } => Staged::Batch(items),
            R::Sync => Staged::Later(Later::Whole(Whole::Sync)),
            R::Disconnect => Staged::Later(Later::Whole(Whole::Disconnect)),
            R::ReclaimLocks { locks, held } => Staged::Session(Session::Reclaim { locks, held }),
            R::Lock { fid, lock, wait } => {
                Staged::Later(Later::Lock(LockReq::Lock { fid, lock, wait }))
            }
            R::Unlock {
                fid,
                owner,
                start,
                end,
            } => Staged::Later(Later::Lock(LockReq::Unlock {
                fid,
                owner,
                start,
                end,
            })),
            R::TestLock { fid, lock } => Staged::Later(Later::Lock(LockReq::Test { fid, lock })),
            r @ (R::Lookup { .. }
            | R::GetAttr { .. }
            | R::SetAttr { .. }
            | R::Create { .. }
            | R::Mkdir { .. }
            | R::Unlink { .. }
            | R::Rmdir { .. }
            | R::Rename { .. }
            | R::Link { .. }
            | R::Symlink { .. }
            | R::Readlink { .. }
            | R::Readdir { .. }
            | R::GetLayout { .. }
            | R::SetDefaultStripe { .. }
            | R::GetDefaultStripe { .. }
            | R::SetXattr { .. }
            | R::GetXattr { .. }
            | R::ListXattr { .. }
            | R::RemoveXattr { .. }
            | R::StatFs
            | R::UpdateSize { .. }
            | R::AppendReserve { .. }
            | R::ReleaseOrphan { .. }
            | R::RenewOrphans { .. }
            | R::Open { .. }
            | R::MkdirStriped { .. }
            | R::SetDefaultLayout { .. }
            | R::GetDefaultLayout { .. }
            | R::DomWrite { .. }
            | R::DomRead { .. }
            | R::DomPunch { .. }
            | R::SetDirDefault { .. }
            | R::GetDirDefault { .. }
            | R::OpStats
            | R::Scrub { .. }
            | R::ListObjects { .. }
            | R::ReclaimObjects { .. }
            | R::FsckScan { .. }
            | R::Find { .. }
            | R::CatalogScan { .. }
            | R::MigrateData { .. }
            | R::MigrateDataEnd { .. }
            | R::FsckRepair { .. }
            | R::JobStats
            | R::SetDefaultCompress { .. }
            | R::GetDefaultCompress { .. }
            | R::Migrate { .. }
            | R::Restripe { .. }
            | R::ReaddirShard { .. }
            | R::ChangelogRead { .. }
            | R::ChangelogRegister
            | R::ChangelogClear { .. }
            | R::ChangelogDeregister { .. }
            | R::ChangelogState
            | R::QuotaUsage { .. }
            | R::QuotaCheck
            | R::QuotaRoom { .. }
            | R::DomRoom { .. }
            | R::SetProject { .. }
            | R::GetProject { .. }
            | R::GetCapa { .. }
            | R::GetRoot
            | R::GrantFids { .. }
            | R::MakeAt { .. }
            | R::TakeWriteBack { .. }
            | R::SetQuota { .. }
            | R::GetQuota { .. }) => Staged::Later(Later::Op(r)),
        }
    }
}
