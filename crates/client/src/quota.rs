//! What each target counts per user, group and project (see
//! [`loom_proto::quota`]): what `loom quota` shows, through the library.

use crate::ctx::Caller;
use crate::io::file::unexpected;
use crate::Client;
use loom_proto::msg::{MdtRequest, Reply, Time};
use loom_proto::quota::{QuotaDrift, QuotaId, QuotaLimits, QuotaUsage};
use loom_proto::{Errno, Fid};
use std::time::Duration;

/// A recount of one MDT (`loom quota --check`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaCheck {
    /// The MDT.
    pub mdt: u32,
    /// Ids it holds anything of.
    pub ids: u64,
    /// Where its counts differ from what it holds.
    pub drift: Vec<QuotaDrift>,
}

impl Client {
    /// What each MDT counts for `who`, in MDT order. Root may ask for
    /// anyone; a user for their own uid, their groups and any project
    /// (EPERM otherwise).
    pub async fn quota_usage(&self, who: QuotaId) -> Result<Vec<(u32, QuotaUsage)>, Errno> {
        let mut out = Vec::new();
        for mdt in self.mdts() {
            let req = MdtRequest::QuotaUsage { who };
            match self.mdt_admin_call(mdt, req, Duration::ZERO).await? {
                Reply::QuotaUsage(u) => out.push((mdt, u)),
                other => return Err(unexpected("QuotaUsage", &other)),
            }
        }
        Ok(out)
    }

    /// Recount every MDT and compare with its counts (root only). A scan
    /// of a large MDT takes a while, and its changes wait for it.
    pub async fn quota_check(&self) -> Result<Vec<QuotaCheck>, Errno> {
        let mut out = Vec::new();
        for mdt in self.mdts() {
            let r = self
                .mdt_admin_call(mdt, MdtRequest::QuotaCheck, Duration::from_secs(600))
                .await?;
            match r {
                Reply::QuotaCheck { ids, drift } => out.push(QuotaCheck { mdt, ids, drift }),
                other => return Err(unexpected("QuotaCheck", &other)),
            }
        }
        Ok(out)
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
    /// and enforced by every MDT from its next change for `who`. All zero
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

    /// `who`'s limits (all zero: none) and since when it is over its soft
    /// inode limit; who may ask as for [`Client::quota_usage`].
    pub async fn get_quota(&self, who: QuotaId) -> Result<(QuotaLimits, Option<Time>), Errno> {
        match self
            .mdt_admin_call(0, MdtRequest::GetQuota { who }, Duration::ZERO)
            .await?
        {
            Reply::QuotaLimits { limits, soft_since } => Ok((limits, soft_since)),
            other => Err(unexpected("GetQuota", &other)),
        }
    }
}
