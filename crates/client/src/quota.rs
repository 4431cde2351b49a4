//! What each target counts per user, group and project (see
//! [`loom_proto::quota`]): what `loom quota` shows, through the library.

use crate::io::file::unexpected;
use crate::Client;
use loom_proto::msg::{MdtRequest, Reply};
use loom_proto::quota::{QuotaDrift, QuotaId, QuotaUsage};
use loom_proto::Errno;
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
