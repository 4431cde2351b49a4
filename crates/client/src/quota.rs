//! What each target counts per user, group and project (see
//! [`loom_proto::quota`]): what `loom quota` shows, through the library.

use crate::changelog::CALL_TIMEOUT;
use crate::ctx::Caller;
use crate::io::file::unexpected;
use crate::Client;
use loom_proto::msg::{MdtRequest, OstRequest, Reply, Request, Role, TargetId, Time};
use loom_proto::quota::{QuotaDrift, QuotaId, QuotaLimits, QuotaUsage};
use loom_proto::{Errno, Fid};
use std::time::Duration;

/// A recount of one target (`loom quota --check`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaCheck {
    /// The MDT or OST.
    pub target: TargetId,
    /// Ids it holds anything of.
    pub ids: u64,
    /// Where its counts differ from what it holds.
    pub drift: Vec<QuotaDrift>,
}

/// An id's limits and the grace its soft limits run on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QuotaState {
    /// The limits (all zero: none).
    pub limits: QuotaLimits,
    /// Since when the usage is over the soft inode limit, if it is.
    pub inode_soft_since: Option<Time>,
    /// Since when the usage is over the soft block limit, if it is.
    pub block_soft_since: Option<Time>,
}

/// Every answer, or the first failure.
fn all<T>(v: Vec<(TargetId, Result<T, Errno>)>) -> Result<Vec<(TargetId, T)>, Errno> {
    v.into_iter().map(|(t, r)| r.map(|x| (t, x))).collect()
}

impl Client {
    /// What each target counts for `who`: the MDTs their inodes, the OSTs
    /// their bytes, MDTs first, in index order. Root may ask for anyone;
    /// a user for their own uid, their groups and any project (EPERM
    /// otherwise). Any target that does not answer fails the whole.
    pub async fn quota_usage(&self, who: QuotaId) -> Result<Vec<(TargetId, QuotaUsage)>, Errno> {
        self.quota_usage_as(&Caller::current(), who).await
    }

    /// [`Client::quota_usage`], asked as `c` (a mount answering a user's
    /// `loom quota`).
    pub async fn quota_usage_as(
        &self,
        c: &Caller,
        who: QuotaId,
    ) -> Result<Vec<(TargetId, QuotaUsage)>, Errno> {
        all(self
            .ask_targets_as(
                c,
                None,
                CALL_TIMEOUT,
                |id| match id.role {
                    Role::Mdt => Request::Mdt(MdtRequest::QuotaUsage { who }),
                    _ => Request::Ost(OstRequest::QuotaUsage { who }),
                },
                |_, r| match r {
                    Reply::QuotaUsage(u) => Ok(u),
                    other => Err(unexpected("QuotaUsage", &other)),
                },
            )
            .await)
    }

    /// Recount every MDT and OST and compare with its counts (root only),
    /// all at once. A scan of a large target takes a while, and its
    /// changes wait for it.
    pub async fn quota_check(&self) -> Result<Vec<QuotaCheck>, Errno> {
        let v = all(self
            .ask_targets_within(
                None,
                CALL_TIMEOUT + Duration::from_secs(600),
                |id| match id.role {
                    Role::Mdt => Request::Mdt(MdtRequest::QuotaCheck),
                    _ => Request::Ost(OstRequest::QuotaCheck),
                },
                |_, r| match r {
                    Reply::QuotaCheck { ids, drift } => Ok((ids, drift)),
                    other => Err(unexpected("QuotaCheck", &other)),
                },
            )
            .await)?;
        Ok(v.into_iter()
            .map(|(target, (ids, drift))| QuotaCheck { target, ids, drift })
            .collect())
    }
}

impl Client {
    /// Give inode `fid` project id `projid` as `c` (root only, EPERM
    /// otherwise); with `inherit`, a directory passes both to what is made
    /// in it from then on (ENOTDIR for a non-directory). A striped
    /// directory's every shard is set, last the master, so each places
    /// its new entries in the project.
    pub async fn set_project_as(
        &self,
        c: &Caller,
        fid: Fid,
        projid: u32,
        inherit: bool,
    ) -> Result<(), Errno> {
        let req = |dir| MdtRequest::SetProject {
            fid: dir,
            projid,
            inherit,
        };
        let done = |r: &Reply| matches!(r, Reply::Project { .. });
        self.on_every_shard_answered(c, fid, "SetProject", req, done)
            .await
    }

    /// Inode `fid`'s project id and whether it passes it on.
    pub async fn get_project(&self, c: &Caller, fid: Fid) -> Result<(u32, bool), Errno> {
        match self
            .mdt_call(c, fid, MdtRequest::GetProject { fid })
            .await?
        {
            Reply::Project { projid, inherit } => Ok((projid, inherit)),
            other => Err(unexpected("GetProject", &other)),
        }
    }
}

impl Client {
    /// Set `who`'s limits (root only): kept by MDT0, the quota master,
    /// and enforced by every MDT (inodes) and OST (bytes) from its next
    /// change for `who`. All zero
    /// removes them. EINVAL for a soft limit above its hard one.
    pub async fn set_quota(&self, who: QuotaId, limits: QuotaLimits) -> Result<(), Errno> {
        match self
            .mdt_admin_call(0, MdtRequest::SetQuota { who, limits }, Duration::ZERO)
            .await?
        {
            Reply::Ok => Ok(()),
            other => Err(unexpected("SetQuota", &other)),
        }
    }

    /// `who`'s limits and since when it is over its soft limits; who may
    /// ask as for [`Client::quota_usage`].
    pub async fn get_quota(&self, who: QuotaId) -> Result<QuotaState, Errno> {
        self.get_quota_as(&Caller::current(), who).await
    }

    /// [`Client::get_quota`], asked as `c`.
    pub async fn get_quota_as(&self, c: &Caller, who: QuotaId) -> Result<QuotaState, Errno> {
        match self
            .mdt_admin_call_as(c, 0, MdtRequest::GetQuota { who }, Duration::ZERO)
            .await?
        {
            Reply::QuotaLimits {
                limits,
                soft_since,
                block_soft_since,
            } => Ok(QuotaState {
                limits,
                inode_soft_since: soft_since,
                block_soft_since,
            }),
            other => Err(unexpected("GetQuota", &other)),
        }
    }
}
