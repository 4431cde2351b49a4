//! Snapshots of the whole file system (`loom snapshot`): taken,
//! listed and destroyed by the MGS (`loom_proto::snapshot`).

use crate::client::Client;
use crate::ctx::Caller;
use bytes::Bytes;
use loom_proto::msg::{MgsRequest, Reply, TargetId};
use loom_proto::snapshot::SnapshotInfo;
use loom_proto::Errno;
use std::time::Duration;

impl Client {
    /// Take snapshot `name` of every target at once, under a barrier
    /// that holds at most `barrier` (root's: EPERM otherwise; EEXIST for a
    /// name taken, EINVAL for a bad one, ETIMEDOUT if the barrier was not
    /// reached in time, and then nothing is kept).
    pub async fn snapshot_create(
        &self,
        c: &Caller,
        name: &str,
        barrier: Duration,
    ) -> Result<SnapshotInfo, Errno> {
        let req = MgsRequest::SnapshotCreate {
            name: name.to_string(),
            barrier_ms: u32::try_from(barrier.as_millis()).unwrap_or(u32::MAX),
        };
        match self
            .router()
            .call(TargetId::MGS, self.ctx(c), req, Bytes::new())
            .await?
            .0
        {
            Reply::Snapshots(mut v) if v.len() == 1 => Ok(v.remove(0)),
            other => Err(crate::io::file::unexpected("SnapshotCreate", &other)),
        }
    }

    /// Destroy snapshot `name` (root's; ENOENT if there is none).
    pub async fn snapshot_destroy(&self, c: &Caller, name: &str) -> Result<(), Errno> {
        let req = MgsRequest::SnapshotDestroy {
            name: name.to_string(),
        };
        match self
            .router()
            .call(TargetId::MGS, self.ctx(c), req, Bytes::new())
            .await?
            .0
        {
            Reply::Ok => Ok(()),
            other => Err(crate::io::file::unexpected("SnapshotDestroy", &other)),
        }
    }

    /// The snapshots, oldest first, each with the bytes only it holds.
    pub async fn snapshots(&self, c: &Caller) -> Result<Vec<SnapshotInfo>, Errno> {
        match self
            .router()
            .call(
                TargetId::MGS,
                self.ctx(c),
                MgsRequest::SnapshotList,
                Bytes::new(),
            )
            .await?
            .0
        {
            Reply::Snapshots(v) => Ok(v),
            other => Err(crate::io::file::unexpected("SnapshotList", &other)),
        }
    }
}
