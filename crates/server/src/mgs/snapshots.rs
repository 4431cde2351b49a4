//! Snapshots of the whole file system, coordinated by the MGS (see
//! `loom_proto::snapshot` for the steps). The MGS records a snapshot as
//! `Creating` before it asks anything of the targets, and `Ready` once
//! every target took it; a snapshot found `Creating` or `Destroying`
//! (the MGS stopped part way) is dropped from every target before the
//! next snapshot operation runs.

use super::{MgsService, MgsState};
use crate::error::{Handled, ServerError};
use loom_proto::msg::{OstRequest, PeerRequest, Reply, ReqCtx, Role, TargetId};
use loom_proto::requests::Request;
use loom_proto::snapshot::{check_name, SnapState, SnapStep, SnapshotInfo};
use loom_proto::Errno;
use std::time::Duration;

/// The barrier's time when none is asked: Lustre's default.
pub const DEFAULT_BARRIER_MS: u32 = 30_000;

fn root_only(ctx: &ReqCtx, what: &str) -> Result<(), ServerError> {
    match ctx.uid {
        0 => Ok(()),
        _ => Err(ServerError::refused(
            Errno::EPERM,
            format!("{what}: snapshots are root's"),
        )),
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl MgsService {
    fn peers(&self) -> Result<&std::sync::Arc<crate::peers::Peers>, ServerError> {
        self.peers.get().ok_or_else(|| {
            ServerError::refused(Errno::EAGAIN, "the MGS cannot reach the targets yet")
        })
    }

    /// The MDTs and OSTs of the file system.
    async fn data_targets(&self) -> Vec<TargetId> {
        let st = self.state.lock().await;
        st.targets
            .iter()
            .map(|t| t.id)
            .filter(|t| t.role != Role::Mgs)
            .collect()
    }

    /// Ask `step` of snapshot `id` of every target in `targets`, all at
    /// once; the first failure, naming its target.
    async fn each(
        &self,
        targets: &[TargetId],
        id: u32,
        step: SnapStep,
        timeout: Duration,
    ) -> Result<Vec<Reply>, ServerError> {
        let peers = self.peers()?.clone();
        let mut set = tokio::task::JoinSet::new();
        for t in targets {
            let (t, peers) = (*t, peers.clone());
            let req: Request = match t.role {
                Role::Mdt => PeerRequest::Snapshot { id, step }.into(),
                _ => OstRequest::Snapshot { id, step }.into(),
            };
            set.spawn(async move {
                let r = peers.call(t, req, bytes::Bytes::new(), timeout).await;
                (t, r)
            });
        }
        let mut out = Vec::new();
        let mut first = None;
        while let Some(j) = set.join_next().await {
            match j {
                Ok((_, Ok((r, _)))) => out.push(r),
                Ok((t, Err(e))) => {
                    first.get_or_insert(ServerError::refused(
                        e.errno(),
                        format!("snapshot {id}: {step:?} on {t}: {e}"),
                    ));
                }
                Err(e) => {
                    first.get_or_insert(ServerError::internal(format!("snapshot task: {e}")));
                }
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Drop what a stopped MGS left half made or half destroyed.
    async fn finish_left(&self) -> Result<(), ServerError> {
        let left: Vec<SnapshotInfo> = {
            let st = self.state.lock().await;
            st.snapshots
                .iter()
                .filter(|s| s.state != SnapState::Ready)
                .cloned()
                .collect()
        };
        let targets = self.data_targets().await;
        for s in left {
            tracing::warn!(
                id = s.id,
                name = s.name,
                "snapshot left {:?} by a stop: dropping it from every target",
                s.state
            );
            // A target left frozen thaws by itself; thawing now is quicker.
            let _ = self
                .each(&targets, s.id, SnapStep::Thaw, Duration::from_secs(30))
                .await;
            self.each(&targets, s.id, SnapStep::Drop, Duration::from_secs(600))
                .await?;
            self.forget(s.id).await?;
        }
        Ok(())
    }

    async fn mark(&self, id: u32, state: SnapState) -> Result<(), ServerError> {
        self.mutate(|st: &mut MgsState| {
            for s in st.snapshots.iter_mut().filter(|s| s.id == id) {
                s.state = state;
            }
            Ok(((), true))
        })
        .await
    }

    async fn forget(&self, id: u32) -> Result<(), ServerError> {
        self.mutate(|st: &mut MgsState| {
            st.snapshots.retain(|s| s.id != id);
            Ok(((), true))
        })
        .await
    }

    /// `SnapshotCreate`.
    pub(super) async fn snapshot_create(
        &self,
        ctx: &ReqCtx,
        name: &str,
        barrier_ms: u32,
    ) -> Handled {
        root_only(ctx, "snapshot create")?;
        check_name(name).map_err(|e| ServerError::refused(Errno::EINVAL, e))?;
        let barrier_ms = match barrier_ms {
            0 => DEFAULT_BARRIER_MS,
            ms => ms,
        };
        let _one = self.snapshotting.lock().await;
        self.finish_left().await?;
        let created = now_secs();
        let info = self
            .mutate(|st: &mut MgsState| {
                if st.snapshots.iter().any(|s| s.name == name) {
                    return Err(ServerError::refused(
                        Errno::EEXIST,
                        format!("snapshot {name:?} exists"),
                    ));
                }
                let id = st.next_snapshot.max(1);
                st.next_snapshot = id + 1;
                let info = SnapshotInfo {
                    id,
                    name: name.to_string(),
                    created,
                    state: SnapState::Creating,
                    bytes: 0,
                };
                st.snapshots.push(info.clone());
                Ok((info, true))
            })
            .await?;
        let id = info.id;
        let targets = self.data_targets().await;
        let t0 = std::time::Instant::now();
        let barrier = Duration::from_millis(u64::from(barrier_ms));
        let mdts: Vec<TargetId> = targets
            .iter()
            .copied()
            .filter(|t| t.role == Role::Mdt)
            .collect();
        let osts: Vec<TargetId> = targets
            .iter()
            .copied()
            .filter(|t| t.role != Role::Mdt)
            .collect();
        let taken = async {
            self.each(&mdts, id, SnapStep::Freeze { ms: barrier_ms }, barrier)
                .await?;
            // MDTs before OSTs: an MDT's quiesce recalls size leases, and a
            // client reports a size once the writes below it have landed,
            // which a quiesced OST would hold until the barrier ends.
            self.each(&mdts, id, SnapStep::Quiesce { ms: barrier_ms }, barrier)
                .await?;
            self.each(&osts, id, SnapStep::Quiesce { ms: barrier_ms }, barrier)
                .await?;
            crate::fail::point("snapshot_create:quiesced");
            self.each(&targets, id, SnapStep::Take, barrier).await
        }
        .await;
        crate::fail::point("snapshot_create:taken");
        let thawed = self
            .each(&targets, id, SnapStep::Thaw, Duration::from_secs(30))
            .await;
        if let Err(e) = taken.and(thawed) {
            tracing::warn!(id, name, "snapshot not taken: {e}");
            match self
                .each(&targets, id, SnapStep::Drop, Duration::from_secs(600))
                .await
            {
                Ok(_) => self.forget(id).await?,
                // A target that could not drop it yet does at the next
                // snapshot operation.
                Err(d) => {
                    tracing::warn!(id, "dropping the snapshot not taken: {d}");
                    self.mark(id, SnapState::Destroying).await?;
                }
            }
            return Err(e);
        }
        let ready = self
            .mutate(|st: &mut MgsState| {
                let s = st
                    .snapshots
                    .iter_mut()
                    .find(|s| s.id == id)
                    .ok_or_else(|| ServerError::internal(format!("snapshot {id} vanished")))?;
                s.state = SnapState::Ready;
                Ok((s.clone(), true))
            })
            .await?;
        tracing::info!(
            id,
            name,
            targets = targets.len(),
            took_ms = t0.elapsed().as_millis() as u64,
            "snapshot taken"
        );
        Ok(Reply::Snapshots(vec![ready]))
    }

    /// `SnapshotDestroy`.
    pub(super) async fn snapshot_destroy(&self, ctx: &ReqCtx, name: &str) -> Handled {
        root_only(ctx, "snapshot destroy")?;
        let _one = self.snapshotting.lock().await;
        let id = self
            .mutate(|st: &mut MgsState| {
                let s = st
                    .snapshots
                    .iter_mut()
                    .find(|s| s.name == name && s.state == SnapState::Ready)
                    .ok_or_else(|| {
                        ServerError::refused(Errno::ENOENT, format!("no snapshot {name:?}"))
                    })?;
                s.state = SnapState::Destroying;
                Ok((s.id, true))
            })
            .await?;
        crate::fail::point("snapshot_destroy:marked");
        self.finish_left().await?;
        tracing::info!(id, name, "snapshot destroyed");
        Ok(Reply::Ok)
    }

    /// `SnapshotList`: every snapshot, with what each holds now.
    pub(super) async fn snapshot_list(&self) -> Handled {
        let mut snaps = self.state.lock().await.snapshots.clone();
        let targets = self.data_targets().await;
        if self.peers.get().is_some() {
            for s in snaps.iter_mut().filter(|s| s.state == SnapState::Ready) {
                if let Ok(rs) = self
                    .each(&targets, s.id, SnapStep::Usage, Duration::from_secs(30))
                    .await
                {
                    s.bytes = rs
                        .iter()
                        .map(|r| match r {
                            Reply::Taken(n) => *n,
                            _ => 0,
                        })
                        .sum();
                }
            }
        }
        Ok(Reply::Snapshots(snaps))
    }
}
