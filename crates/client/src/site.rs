//! Site parameters (`loom set-param`, `loom get-param`): kept by the MGS,
//! read by every target with the cluster configuration.

use crate::client::Client;
use crate::ctx::Caller;
use bytes::Bytes;
use loom_proto::msg::{MgsRequest, Reply, SiteParams, TargetId};
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

    /// The site parameters as the MGS has them now.
    pub async fn site_params(&self) -> Result<SiteParams, Errno> {
        self.router()
            .fetch_config(Duration::from_secs(10))
            .await
            .map(|c| c.params.clone())
            .map_err(|e| e.errno())
    }
}
