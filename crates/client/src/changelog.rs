//! Reading each MDT's changelog, and naming and advancing its consumers
//! (see [`loom_proto::changelog`]): what `loom changelog` uses, and what
//! the policy engine and replication will.
//!
//! Record numbers are per MDT, so every call names its MDT. A consumer
//! reads from the record after the last it acknowledged, handles what it
//! got, then acknowledges the last one with [`Client::changelog_clear`];
//! records every consumer acknowledged are purged.

use crate::ctx::Caller;
use crate::io::file::unexpected;
use crate::Client;
use bytes::Bytes;
use loom_proto::changelog::{ChangeRec, ChangelogState};
use loom_proto::msg::{MdtRequest, Reply, Role, TargetId};
use loom_proto::{Errno, Fid};
use std::time::Duration;

/// How long a call may take beyond the time the MDT waits for a record.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(10);

impl Client {
    /// The MDTs of the file system, in index order.
    pub fn mdts(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .router
            .config()
            .targets
            .iter()
            .filter(|t| t.id.role == Role::Mdt)
            .map(|t| t.id.index)
            .collect();
        v.sort();
        v
    }

    /// The MDT that keeps inode `fid`, as the configuration says.
    pub fn mdt_index_of(&self, fid: Fid) -> Option<u32> {
        self.router.config().mdt_of(fid)
    }

    /// One request to MDT `mdt` as the current caller, allowed `extra`
    /// beyond the usual time (EINVAL for an MDT that does not exist).
    pub(crate) async fn mdt_admin_call(
        &self,
        mdt: u32,
        req: MdtRequest,
        extra: Duration,
    ) -> Result<Reply, Errno> {
        self.mdt_admin_call_as(&Caller::current(), mdt, req, extra)
            .await
    }

    /// [`Client::mdt_admin_call`], asked as `c`.
    pub(crate) async fn mdt_admin_call_as(
        &self,
        c: &Caller,
        mdt: u32,
        req: MdtRequest,
        extra: Duration,
    ) -> Result<Reply, Errno> {
        if !self.mdts().contains(&mdt) {
            return Err(Errno::EINVAL);
        }
        self.router_handle()
            .call_within(
                TargetId::mdt(mdt),
                self.ctx(c),
                req,
                Bytes::new(),
                CALL_TIMEOUT + extra,
            )
            .await
            .map(|(r, _)| r)
    }

    /// Records of MDT `mdt` from `since` on (from its oldest kept when
    /// that is later), at most `max`; when there are none yet, the MDT
    /// waits up to `wait` for one. Also the log's state as it was read.
    /// Root only (EPERM); EINVAL for an MDT that does not exist.
    pub async fn changelog_read(
        &self,
        mdt: u32,
        since: u64,
        max: u32,
        wait: Duration,
    ) -> Result<(Vec<ChangeRec>, ChangelogState), Errno> {
        let wait_ms = u32::try_from(wait.as_millis()).unwrap_or(u32::MAX);
        let req = MdtRequest::ChangelogRead {
            since,
            max,
            wait_ms,
        };
        match self.mdt_admin_call(mdt, req, wait).await? {
            Reply::Changelog { records, state } => Ok((records, state)),
            other => Err(unexpected("ChangelogRead", &other)),
        }
    }

    /// Register a consumer of MDT `mdt`'s changelog; its id. The MDT
    /// records changes from now on.
    pub async fn changelog_register(&self, mdt: u32) -> Result<u32, Errno> {
        let req = MdtRequest::ChangelogRegister;
        match self.mdt_admin_call(mdt, req, Duration::ZERO).await? {
            Reply::ChangelogUser(id) => Ok(id),
            other => Err(unexpected("ChangelogRegister", &other)),
        }
    }

    /// Consumer `user` of MDT `mdt` has read every record up to `upto`
    /// (0: every record so far). ENOENT for a consumer that is not
    /// registered, EINVAL for a record not written yet.
    pub async fn changelog_clear(&self, mdt: u32, user: u32, upto: u64) -> Result<(), Errno> {
        let req = MdtRequest::ChangelogClear { user, upto };
        match self.mdt_admin_call(mdt, req, Duration::ZERO).await? {
            Reply::Ok => Ok(()),
            other => Err(unexpected("ChangelogClear", &other)),
        }
    }

    /// Forget consumer `user` of MDT `mdt`.
    pub async fn changelog_deregister(&self, mdt: u32, user: u32) -> Result<(), Errno> {
        let req = MdtRequest::ChangelogDeregister { user };
        match self.mdt_admin_call(mdt, req, Duration::ZERO).await? {
            Reply::Ok => Ok(()),
            other => Err(unexpected("ChangelogDeregister", &other)),
        }
    }

    /// MDT `mdt`'s changelog: oldest and next record, consumers and
    /// their lag.
    pub async fn changelog_state(&self, mdt: u32) -> Result<ChangelogState, Errno> {
        let req = MdtRequest::ChangelogState;
        match self.mdt_admin_call(mdt, req, Duration::ZERO).await? {
            Reply::ChangelogState(s) => Ok(s),
            other => Err(unexpected("ChangelogState", &other)),
        }
    }
}
