//! Site parameters (`loom set-param`, `loom get-param`), nodemaps and OST
//! pools: kept by the MGS, read by every target with the cluster
//! configuration.

use crate::client::Client;
use crate::ctx::Caller;
use bytes::Bytes;
use loom_proto::msg::{ClusterConfig, MgsRequest, Reply, SiteParams, TargetId};
use loom_proto::nodemap::Nodemap;
use loom_proto::pool::{OstPool, PoolOp};
use loom_proto::Errno;
use std::time::Duration;

impl Client {
    /// Set site parameter `name` to `value` (root's: EPERM otherwise;
    /// EINVAL for an unknown name or a bad value).
    pub async fn set_param(&self, c: &Caller, name: &str, value: &str) -> Result<(), Errno> {
        let req = MgsRequest::SetParam {
            name: name.to_string(),
            value: value.to_string(),
        };
        self.mgs_change(c, req, "SetParam").await
    }

    /// Set nodemap `name` to `nodemap`, or remove it (`None`): root's
    /// (EPERM otherwise; EINVAL for one that cannot work, ENOENT to
    /// remove one that does not exist).
    pub async fn set_nodemap(
        &self,
        c: &Caller,
        name: &str,
        nodemap: Option<Nodemap>,
    ) -> Result<(), Errno> {
        let req = MgsRequest::SetNodemap {
            name: name.to_string(),
            nodemap,
        };
        self.mgs_change(c, req, "SetNodemap").await
    }

    /// Change OST pool `name` by `op` (root's: EPERM otherwise; EINVAL,
    /// EEXIST or ENOENT as `MgsRequest::PoolEdit` says).
    pub async fn pool_edit(&self, c: &Caller, name: &str, op: PoolOp) -> Result<(), Errno> {
        let req = MgsRequest::PoolEdit {
            name: name.to_string(),
            op,
        };
        self.mgs_change(c, req, "PoolEdit").await
    }

    /// Give the MGS the policy engine's report (JSON) for the dashboard
    /// (root's: EPERM otherwise; EFBIG past `MAX_POLICY_REPORT`).
    pub async fn policy_publish(&self, c: &Caller, report: String) -> Result<(), Errno> {
        self.mgs_change(c, MgsRequest::PolicyPublish { report }, "PolicyPublish")
            .await
    }

    /// Ask the MGS for a change as `c`; `op` names it in an unexpected
    /// answer.
    async fn mgs_change(&self, c: &Caller, req: MgsRequest, op: &str) -> Result<(), Errno> {
        match self
            .router()
            .call(TargetId::MGS, self.ctx(c), req, Bytes::new())
            .await?
            .0
        {
            Reply::Ok => Ok(()),
            other => Err(crate::io::file::unexpected(op, &other)),
        }
    }

    /// What `pick` takes of the configuration as the MGS has it now.
    async fn mgs_config<T>(&self, pick: impl FnOnce(&ClusterConfig) -> T) -> Result<T, Errno> {
        self.router()
            .fetch_config(Duration::from_secs(10))
            .await
            .map(|c| pick(&c))
            .map_err(|e| e.errno())
    }

    /// The OST pools as the MGS has them now.
    pub async fn pools(&self) -> Result<Vec<OstPool>, Errno> {
        self.mgs_config(|c| c.pools.clone()).await
    }

    /// The nodemaps as the MGS has them now.
    pub async fn nodemaps(&self) -> Result<Vec<Nodemap>, Errno> {
        self.mgs_config(|c| c.nodemaps.clone()).await
    }

    /// The site parameters as the MGS has them now.
    pub async fn site_params(&self) -> Result<SiteParams, Errno> {
        self.mgs_config(|c| c.params.clone()).await
    }
}
