//! The management service: target registry, FID location database (FLDB)
//! and the cluster configuration that clients and servers fetch.
//!
//! State lives in memory and in `DIR/mgs_state`, a TOML file replaced with
//! `write_atomic` on every change. Every mutation is applied to a copy,
//! persisted, and only then made visible and acknowledged, so a reply the
//! caller saw is never lost by a crash and a failed write changes nothing.
//! Mutations are serialized by one async mutex held across the write.
//!
//! Invariants kept by this module:
//! - at most one registration per `TargetId`; its uuid never changes;
//! - `targets` is sorted by id;
//! - sequence 0 belongs to MDT0 implicitly (it holds the root); allocated
//!   sequences start at 1, never repeat, and never exceed
//!   `loom_proto::fid::MAX_INO_SEQ`;
//! - the FLDB ranges are disjoint and sorted, adjacent ranges of the same
//!   MDT merged;
//! - `generation` grows by one with every change.

use crate::error::{Handled, ServerError};
use loom_proto::fid::MAX_INO_SEQ;
use loom_proto::msg::{
    ClusterConfig, MgsRequest, Reply, ReqCtx, SeqRange, SiteParams, TargetId, TargetInfo,
};
use loom_proto::nodemap::Nodemap;
use loom_proto::pool::{self, PoolOp, PoolRefusal};
use loom_proto::Errno;
use loom_store::durable::write_atomic;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::Mutex;

mod members;
mod snapshots;

/// Name of the state file inside the MGS directory.
pub const STATE_FILE: &str = "mgs_state";
/// Version of the state file's format; bump on incompatible changes.
const STATE_FORMAT: u32 = 1;

/// Everything the MGS remembers. Field order matters for TOML: plain values
/// before arrays of tables.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct MgsState {
    format: u32,
    fsname: String,
    generation: u64,
    /// The next sequence to hand out (>= 1).
    next_seq: u64,
    /// The number the next snapshot takes (absent in older state files).
    #[serde(default)]
    next_snapshot: u32,
    targets: Vec<TargetInfo>,
    fldb: Vec<SeqRange>,
    /// A table: after the arrays of tables (absent in older state files).
    #[serde(default)]
    params: SiteParams,
    /// Arrays of tables, last (absent in older state files).
    #[serde(default)]
    nodemaps: Vec<Nodemap>,
    /// The snapshots, oldest first (absent in older state files).
    #[serde(default)]
    snapshots: Vec<loom_proto::snapshot::SnapshotInfo>,
    /// The OST pools, by name (absent in older state files).
    #[serde(default)]
    pools: Vec<loom_proto::pool::OstPool>,
}

impl MgsState {
    fn new(fsname: &str) -> MgsState {
        MgsState {
            format: STATE_FORMAT,
            fsname: fsname.to_string(),
            generation: 1,
            next_seq: 1,
            targets: Vec::new(),
            fldb: Vec::new(),
            params: SiteParams::default(),
            nodemaps: Vec::new(),
            next_snapshot: 1,
            snapshots: Vec::new(),
            pools: Vec::new(),
        }
    }

    fn config(&self) -> ClusterConfig {
        ClusterConfig {
            fsname: self.fsname.clone(),
            generation: self.generation,
            targets: self.targets.clone(),
            fldb: self.fldb.clone(),
            params: self.params.clone(),
            nodemaps: self.nodemaps.clone(),
            pools: self.pools.clone(),
        }
    }

    /// Insert or update `t`. `Ok(false)` if nothing changed.
    fn register(&mut self, t: TargetInfo) -> Result<bool, ServerError> {
        match self.targets.binary_search_by_key(&t.id, |x| x.id) {
            Ok(i) => {
                let cur = &mut self.targets[i];
                if !cur.replicas.is_empty() {
                    return Err(ServerError::refused(
                        Errno::EEXIST,
                        format!(
                            "{} is registered with replicas, but one without asked",
                            t.id
                        ),
                    ));
                }
                if cur.uuid != t.uuid {
                    return Err(ServerError::refused(
                        Errno::EEXIST,
                        format!(
                            "{} index {} is already registered with uuid {} but uuid {} asked: \
                             two targets were formatted with the same index",
                            t.id.role, t.id.index, cur.uuid, t.uuid
                        ),
                    ));
                }
                if cur.addr == t.addr {
                    return Ok(false);
                }
                cur.addr = t.addr;
            }
            Err(i) => self.targets.insert(i, t),
        }
        self.generation += 1;
        Ok(true)
    }

    /// Hand the next sequence to `mdt` and record it in the FLDB.
    fn alloc_seq(&mut self, mdt: u32) -> Result<SeqRange, ServerError> {
        let start = self.next_seq;
        if start > MAX_INO_SEQ {
            return Err(ServerError::refused(
                Errno::ENOSPC,
                format!("FID sequences exhausted: all {MAX_INO_SEQ} are allocated"),
            ));
        }
        let range = SeqRange {
            start,
            end: start + 1,
            mdt,
        };
        match self.fldb.last_mut() {
            Some(last) if last.end == start && last.mdt == mdt => last.end = range.end,
            _ => self.fldb.push(range),
        }
        self.next_seq = range.end;
        self.generation += 1;
        Ok(range)
    }
}

/// The management service.
pub struct MgsService {
    dir: PathBuf,
    state: Mutex<MgsState>,
    /// How the MGS reaches the targets (snapshots), once set.
    peers: std::sync::OnceLock<Arc<crate::peers::Peers>>,
    /// One snapshot operation at a time.
    snapshotting: Mutex<()>,
    /// The policy engine's latest report (`POLICY_FILE`), for the
    /// dashboard.
    policy: Mutex<String>,
    /// When each replica's server last renewed (see `members.rs`).
    heard: std::sync::Mutex<members::Heard>,
}

/// Where the MGS keeps the policy engine's latest report.
const POLICY_FILE: &str = "policy-report.json";

impl std::fmt::Debug for MgsService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MgsService")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl MgsService {
    /// Open the MGS in `dir` for file system `fsname`, creating its state on
    /// first use. Refuses a directory that holds another file system.
    pub fn open(dir: &Path, fsname: &str) -> anyhow::Result<Arc<MgsService>> {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("creating MGS directory {}: {e}", dir.display()))?;
        let path = dir.join(STATE_FILE);
        let state = match std::fs::read_to_string(&path) {
            Ok(s) => {
                let st: MgsState = toml::from_str(&s)
                    .map_err(|e| anyhow::anyhow!("MGS state {} is corrupt: {e}", path.display()))?;
                if st.format != STATE_FORMAT {
                    anyhow::bail!(
                        "MGS state {} has format {} but this version reads {STATE_FORMAT}",
                        path.display(),
                        st.format
                    );
                }
                if st.fsname != fsname {
                    anyhow::bail!(
                        "MGS directory {} serves file system {:?}, not {fsname:?}",
                        dir.display(),
                        st.fsname
                    );
                }
                st
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let st = MgsState::new(fsname);
                persist(&path, &st).map_err(|e| anyhow::anyhow!("creating MGS state: {e}"))?;
                st
            }
            Err(e) => anyhow::bail!("reading MGS state {}: {e}", path.display()),
        };
        tracing::info!(dir = %dir.display(), fsname, generation = state.generation,
            targets = state.targets.len(), "MGS opened");
        Ok(Arc::new(MgsService {
            dir: dir.to_path_buf(),
            state: Mutex::new(state),
            peers: std::sync::OnceLock::new(),
            snapshotting: Mutex::new(()),
            // A report is only shown: one unreadable is left out.
            policy: Mutex::new(std::fs::read_to_string(dir.join(POLICY_FILE)).unwrap_or_default()),
            heard: std::sync::Mutex::new(members::Heard::new()),
        }))
    }

    /// Reach the targets through `peers` from now on (snapshots need it).
    pub fn use_peers(&self, peers: Arc<crate::peers::Peers>) {
        let _ = self.peers.set(peers);
    }

    /// The current configuration, with when each replica was last heard
    /// from.
    pub async fn config(&self) -> ClusterConfig {
        let mut c = self.state.lock().await.config();
        let heard = self.heard();
        let now = std::time::Instant::now();
        for t in &mut c.targets {
            if !t.replicas.is_empty() {
                *t = heard.fill(t.clone(), now);
            }
        }
        c
    }

    fn heard(&self) -> std::sync::MutexGuard<'_, members::Heard> {
        self.heard.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hand the role of each primary that went quiet to another replica,
    /// checking every quarter of a second, until the process ends.
    pub async fn watch_primaries(self: Arc<Self>) {
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            let moved = self
                .mutate(|st| {
                    let moved = st.fail_over(&self.heard(), std::time::Instant::now());
                    let changed = !moved.is_empty();
                    Ok((moved, changed))
                })
                .await;
            match moved {
                Ok(moved) => {
                    for (t, old, new) in moved {
                        tracing::warn!(target = %t, old, new, "primary silent: replica {new} is the primary now");
                    }
                }
                Err(e) => tracing::error!("handing over quiet primaries: {e}"),
            }
        }
    }

    /// `Heartbeat`: the server at `addr` renews its replicas' roles.
    async fn heartbeat(&self, addr: String, hosted: Vec<loom_proto::replica::Hosted>) -> Handled {
        {
            let st = self.state.lock().await;
            self.heard()
                .note(&st, &addr, &hosted, std::time::Instant::now());
        }
        self.mutate(|st| {
            let changed = st.renewed(&addr, &hosted, &self.heard(), std::time::Instant::now());
            Ok(((), changed))
        })
        .await?;
        Ok(Reply::Members(
            self.members(hosted.iter().map(|h| h.target)).await,
        ))
    }

    /// `SetReplica`: a primary says where one of its replicas stands.
    async fn set_replica(
        &self,
        target: TargetId,
        term: u64,
        replica: u32,
        state: loom_proto::replica::ReplicaState,
    ) -> Handled {
        let changed = self
            .mutate(|st| {
                let changed = st.set_replica(target, term, replica, state)?;
                Ok((changed, changed))
            })
            .await?;
        if changed {
            tracing::info!(%target, replica, state = state.name(), "replica state set by its primary");
        }
        Ok(Reply::Members(self.members(std::iter::once(target)).await))
    }

    /// The targets `ids`, as [`MgsService::config`] has them.
    async fn members(&self, ids: impl Iterator<Item = TargetId>) -> Vec<TargetInfo> {
        let c = self.config().await;
        let mut out: Vec<TargetInfo> = Vec::new();
        for id in ids {
            if out.iter().any(|t| t.id == id) {
                continue;
            }
            if let Some(t) = c.target(id) {
                out.push(t.clone());
            }
        }
        out
    }

    /// Handle one request.
    pub async fn handle(
        self: &Arc<Self>,
        ctx: &ReqCtx,
        req: MgsRequest,
        _bulk: Vec<u8>,
    ) -> (Handled, Vec<u8>) {
        let res = match req {
            MgsRequest::Register {
                fsname,
                target,
                replica,
            } => self.register(fsname, target, replica).await,
            MgsRequest::Heartbeat { addr, hosted } => self.heartbeat(addr, hosted).await,
            MgsRequest::SetReplica {
                target,
                term,
                replica,
                state,
            } => self.set_replica(target, term, replica, state).await,
            MgsRequest::GetConfig => Ok(Reply::Config(self.config().await)),
            MgsRequest::SnapshotCreate { name, barrier_ms } => {
                self.snapshot_create(ctx, &name, barrier_ms).await
            }
            MgsRequest::SnapshotDestroy { name } => self.snapshot_destroy(ctx, &name).await,
            MgsRequest::SnapshotList => self.snapshot_list().await,
            MgsRequest::AllocSeq { mdt } => self.alloc_seq(mdt).await,
            MgsRequest::StatFs => self.statfs().await,
            MgsRequest::SetParam { name, value } => self.set_param(ctx, &name, &value).await,
            MgsRequest::SetNodemap { name, nodemap } => self.set_nodemap(ctx, &name, nodemap).await,
            MgsRequest::PoolEdit { name, op } => self.pool_edit(ctx, &name, op).await,
            MgsRequest::PolicyPublish { report } => self.policy_publish(ctx, report).await,
            MgsRequest::PolicyReport => Ok(Reply::PolicyReport(self.policy.lock().await.clone())),
        };
        (res, Vec::new())
    }

    /// Apply `f` to a copy of the state, persist the copy if `f` says it
    /// changed something, then install it.
    async fn mutate<T, F>(&self, f: F) -> Result<T, ServerError>
    where
        F: FnOnce(&mut MgsState) -> Result<(T, bool), ServerError>,
    {
        let mut state = self.state.lock().await;
        let mut next = state.clone();
        let (out, changed) = f(&mut next)?;
        if changed {
            let path = self.dir.join(STATE_FILE);
            let copy = next.clone();
            tokio::task::spawn_blocking(move || persist(&path, &copy))
                .await
                .map_err(|e| ServerError::internal(format!("MGS persist task failed: {e}")))??;
            *state = next;
        }
        Ok(out)
    }

    async fn register(
        &self,
        fsname: String,
        target: TargetInfo,
        replica: Option<loom_proto::replica::ReplicaOf>,
    ) -> Handled {
        let id = target.id;
        let addr = target.addr.clone();
        let changed = self
            .mutate(|st| {
                if fsname != st.fsname {
                    return Err(ServerError::refused(
                        Errno::EINVAL,
                        format!(
                            "target {id} formatted for file system {fsname} but this MGS serves {}",
                            st.fsname
                        ),
                    ));
                }
                let changed = match replica {
                    Some(of) => st.register_replica(target, of)?,
                    None => st.register(target)?,
                };
                Ok((changed, changed))
            })
            .await?;
        if changed {
            tracing::info!(target = %id, addr, ?replica, "target registered");
        }
        Ok(Reply::Ok)
    }

    /// `loom set-param`: root's, persisted, and a new generation.
    async fn set_param(&self, ctx: &ReqCtx, name: &str, value: &str) -> Handled {
        if ctx.uid != 0 {
            return Err(ServerError::refused(
                Errno::EPERM,
                format!("setting {name}: site parameters are root's"),
            ));
        }
        self.mutate(|st| {
            let mut params = st.params.clone();
            params
                .set(name, value)
                .map_err(|m| ServerError::refused(Errno::EINVAL, m))?;
            let changed = params != st.params;
            if changed {
                st.params = params;
                st.generation += 1;
            }
            Ok(((), changed))
        })
        .await?;
        tracing::info!(name, value, "site parameter set");
        Ok(Reply::Ok)
    }

    /// `loom pool`: root's, persisted, and a new generation.
    async fn pool_edit(&self, ctx: &ReqCtx, name: &str, op: PoolOp) -> Handled {
        if ctx.uid != 0 {
            return Err(ServerError::refused(
                Errno::EPERM,
                format!("changing pool {name}: OST pools are root's"),
            ));
        }
        self.mutate(|st| {
            let osts: Vec<u32> = st
                .targets
                .iter()
                .filter(|t| t.id.role == loom_proto::msg::Role::Ost)
                .map(|t| t.id.index)
                .collect();
            pool::apply(&mut st.pools, name, &op, &osts).map_err(|r| match r {
                PoolRefusal::Invalid(m) => ServerError::refused(Errno::EINVAL, m),
                PoolRefusal::Exists(m) => ServerError::refused(Errno::EEXIST, m),
                PoolRefusal::Missing(m) => ServerError::refused(Errno::ENOENT, m),
            })?;
            st.generation += 1;
            Ok(((), true))
        })
        .await?;
        tracing::info!(name, ?op, "OST pool changed");
        Ok(Reply::Ok)
    }

    /// `PolicyPublish`: keep the policy engine's report, durably.
    async fn policy_publish(&self, ctx: &ReqCtx, report: String) -> Handled {
        if ctx.uid != 0 {
            return Err(ServerError::refused(
                Errno::EPERM,
                "publishing a policy report is root's",
            ));
        }
        if report.len() > loom_proto::msg::MAX_POLICY_REPORT {
            return Err(ServerError::refused(
                Errno::EFBIG,
                format!(
                    "a policy report of {} bytes is larger than the {} the MGS keeps",
                    report.len(),
                    loom_proto::msg::MAX_POLICY_REPORT
                ),
            ));
        }
        if serde_json::from_str::<serde_json::Value>(&report).is_err() {
            return Err(ServerError::refused(
                Errno::EINVAL,
                "a policy report is JSON",
            ));
        }
        let mut kept = self.policy.lock().await;
        let path = self.dir.join(POLICY_FILE);
        let text = report.clone();
        tokio::task::spawn_blocking(move || write_atomic(&path, text.as_bytes()))
            .await
            .map_err(|e| ServerError::internal(format!("MGS persist task failed: {e}")))?
            .map_err(|e| ServerError::Store {
                errno: Errno(e.raw_os_error().unwrap_or(Errno::EIO.0)),
                msg: format!("writing the policy report: {e}"),
            })?;
        *kept = report;
        Ok(Reply::Ok)
    }

    /// Set or remove nodemap `name`: root's (a squashed root is not),
    /// pushed to every server with the configuration.
    async fn set_nodemap(&self, ctx: &ReqCtx, name: &str, nodemap: Option<Nodemap>) -> Handled {
        if ctx.uid != 0 {
            return Err(ServerError::refused(
                Errno::EPERM,
                format!("setting nodemap {name}: nodemaps are root's"),
            ));
        }
        if let Some(m) = &nodemap {
            if m.name != name {
                return Err(ServerError::refused(
                    Errno::EINVAL,
                    format!("nodemap {:?} sent as {name:?}", m.name),
                ));
            }
            m.validate()
                .map_err(|e| ServerError::refused(Errno::EINVAL, e))?;
        }
        let removing = nodemap.is_none();
        self.mutate(|st| {
            let at = st.nodemaps.iter().position(|m| m.name == name);
            let changed = match (at, nodemap) {
                (None, None) => {
                    return Err(ServerError::refused(
                        Errno::ENOENT,
                        format!("no nodemap {name:?}"),
                    ))
                }
                (Some(i), None) => {
                    st.nodemaps.remove(i);
                    true
                }
                (Some(i), Some(m)) => {
                    let changed = st.nodemaps[i] != m;
                    st.nodemaps[i] = m;
                    changed
                }
                (None, Some(m)) => {
                    st.nodemaps.push(m);
                    true
                }
            };
            if changed {
                st.generation += 1;
            }
            Ok(((), changed))
        })
        .await?;
        tracing::info!(name, removed = removing, "nodemap set");
        Ok(Reply::Ok)
    }

    async fn alloc_seq(&self, mdt: u32) -> Handled {
        let range = self.mutate(|st| Ok((st.alloc_seq(mdt)?, true))).await?;
        tracing::info!(mdt, seq = range.start, "FID sequence allocated");
        Ok(Reply::Seq(range))
    }

    async fn statfs(&self) -> Handled {
        let dir = self.dir.clone();
        let st = tokio::task::spawn_blocking(move || loom_store::object::statfs_of(&dir))
            .await
            .map_err(|e| ServerError::internal(format!("MGS statfs task failed: {e}")))??;
        Ok(Reply::StatFs(loom_proto::msg::StatFs {
            target: Some(TargetId::MGS),
            ..st
        }))
    }
}

/// Write `st` to `path` crash-safely.
fn persist(path: &Path, st: &MgsState) -> Result<(), ServerError> {
    let text =
        toml::to_string(st).map_err(|e| ServerError::store(format!("encoding MGS state: {e}")))?;
    write_atomic(path, text.as_bytes()).map_err(|e| ServerError::Store {
        errno: Errno(e.raw_os_error().unwrap_or(Errno::EIO.0)),
        msg: format!("writing MGS state {}: {e}", path.display()),
    })
}

#[cfg(test)]
mod tests;
