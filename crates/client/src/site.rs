//! Site parameters (`loom set-param`, `loom get-param`), nodemaps and OST
//! pools: kept by the MGS, read by every target with the cluster
//! configuration.

use crate::client::Client;
use crate::ctx::Caller;
use bytes::Bytes;
use loom_proto::msg::{MgsRequest, Reply, SiteParams, TargetId};
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
        match self
            .router()
            .call(TargetId::MGS, self.ctx(c), req, Bytes::new())
            .await?
            .0
        {
            Reply::Ok => Ok(()),
            other => Err(crate::io::file::unexpected("SetParam", &other)),
        }
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
        match self
            .router()
            .call(TargetId::MGS, self.ctx(c), req, Bytes::new())
            .await?
            .0
        {
            Reply::Ok => Ok(()),
            other => Err(crate::io::file::unexpected("SetNodemap", &other)),
        }
    }

    /// Change OST pool `name` by `op` (root's: EPERM otherwise; EINVAL,
    /// EEXIST or ENOENT as `MgsRequest::PoolEdit` says).
    pub async fn pool_edit(&self, c: &Caller, name: &str, op: PoolOp) -> Result<(), Errno> {
        let req = MgsRequest::PoolEdit {
            name: name.to_string(),
            op,
        };
        match self
            .router()
            .call(TargetId::MGS, self.ctx(c), req, Bytes::new())
            .await?
            .0
        {
            Reply::Ok => Ok(()),
            other => Err(crate::io::file::unexpected("PoolEdit", &other)),
        }
    }

    /// The OST pools as the MGS has them now.
    pub async fn pools(&self) -> Result<Vec<OstPool>, Errno> {
        self.router()
            .fetch_config(Duration::from_secs(10))
            .await
            .map(|c| c.pools.clone())
            .map_err(|e| e.errno())
    }

    /// The nodemaps as the MGS has them now.
    pub async fn nodemaps(&self) -> Result<Vec<Nodemap>, Errno> {
        self.router()
            .fetch_config(Duration::from_secs(10))
            .await
            .map(|c| c.nodemaps.clone())
            .map_err(|e| e.errno())
    }

    /// The site parameters as the MGS has them now.
    pub async fn site_params(&self) -> Result<SiteParams, Errno> {
        self.router()
            .fetch_config(Duration::from_secs(10))
            .await
            .map(|c| c.params.clone())
            .map_err(|e| e.errno())
    }
}
