//! Where targets are: the cluster configuration fetched from the MGS, and
//! one RPC client (one connection) per server address.
//!
//! The configuration is fetched again (at most every
//! [`REFRESH_MIN_INTERVAL`]) when a target keeps failing to answer, in case
//! its server came back on another address, when a target is not in the
//! configuration yet, and when a FID's sequence is not in the FLDB.

use super::lock;
use bytes::Bytes;
use loom_proto::msg::{ClusterConfig, Envelope, MgsRequest, Reply, ReqCtx, Role, TargetId};
use loom_proto::{Errno, Fid};
use loom_rpc::{ClientOptions as RpcOptions, ClusterKey, RpcClient, RpcError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Configuration fetches are at least this far apart.
pub const REFRESH_MIN_INTERVAL: Duration = Duration::from_millis(500);
/// How long a refresh waits for the MGS.
pub(super) const REFRESH_TIMEOUT: Duration = Duration::from_secs(5);

/// The MGS, the configuration in force and the connections.
pub(super) struct Addresses {
    mgs_addr: String,
    key: ClusterKey,
    pub(super) rpc_opts: RpcOptions,
    config: RwLock<Arc<ClusterConfig>>,
    conns: Mutex<HashMap<String, Arc<RpcClient>>>,
    /// Serialises refreshes; holds when the last one finished.
    refreshing: tokio::sync::Mutex<Option<Instant>>,
    /// Sets up each new connection (the lease layer's recall handler).
    pub(super) on_connect: Option<OnConnect>,
}

/// Sets up a new connection before anyone uses it.
pub(super) type OnConnect = Arc<dyn Fn(&RpcClient) + Send + Sync>;

impl Addresses {
    /// Knowing only the MGS.
    pub(super) fn new(mgs_addr: &str, key: ClusterKey, rpc_opts: RpcOptions) -> Addresses {
        Addresses {
            mgs_addr: mgs_addr.to_string(),
            key,
            rpc_opts,
            config: RwLock::new(Arc::new(ClusterConfig::default())),
            conns: Mutex::new(HashMap::new()),
            refreshing: tokio::sync::Mutex::new(None),
            on_connect: None,
        }
    }

    pub(super) fn mgs_addr(&self) -> &str {
        &self.mgs_addr
    }

    pub(super) fn key(&self) -> &ClusterKey {
        &self.key
    }

    /// The configuration in force.
    pub(super) fn config(&self) -> Arc<ClusterConfig> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_config(&self, c: ClusterConfig) {
        let mut cur = self.config.write().unwrap_or_else(|p| p.into_inner());
        // An older generation (a slow reply overtaken) never replaces a newer.
        if c.generation >= cur.generation || cur.targets.is_empty() {
            // A replicated MDT's primary that moved may have stopped
            // without closing its connections (SIGSTOP, a cut link): what
            // this client keeps under its leases goes as if its
            // connection were lost, for the new primary knows nothing of
            // them and will recall none.
            let moved: Vec<String> = cur
                .targets
                .iter()
                .filter(|t| t.id.role == Role::Mdt && !t.replicas.is_empty())
                .filter(|t| c.target(t.id).is_some_and(|n| n.addr != t.addr))
                .map(|t| t.addr.clone())
                .collect();
            *cur = Arc::new(c);
            drop(cur);
            for addr in moved {
                let conn = lock(&self.conns).get(&addr).cloned();
                if let (Some(conn), Ok(rt)) = (conn, tokio::runtime::Handle::try_current()) {
                    tracing::info!(%addr, "an MDT's primary moved away from it: its connection and leases are dropped");
                    rt.spawn(async move { conn.forget_connection().await });
                }
            }
        }
    }

    /// The address of `target` (its primary's, if replicated) and
    /// whether it is replicated, if the configuration has it.
    pub(super) fn addr_of(&self, target: TargetId) -> Option<(String, bool)> {
        self.config()
            .target(target)
            .map(|t| (t.addr.clone(), !t.replicas.is_empty()))
    }

    /// The connection to `addr`, made and set up on first use. (The MGS
    /// may share its server's address with MDTs, so its connection is set
    /// up alike.)
    pub(super) fn connection(&self, addr: &str) -> Arc<RpcClient> {
        let mut conns = lock(&self.conns);
        if let Some(c) = conns.get(addr) {
            return c.clone();
        }
        let c = Arc::new(RpcClient::new(
            addr,
            self.key.clone(),
            self.rpc_opts.clone(),
        ));
        if let Some(f) = &self.on_connect {
            f(&c);
        }
        conns.insert(addr.to_string(), c.clone());
        c
    }

    /// Connection losses so far of the connection to `addr`, if one was
    /// made.
    pub(super) fn losses_of(&self, addr: &str) -> Option<u64> {
        lock(&self.conns).get(addr).map(|c| *c.losses().borrow())
    }

    /// The transport's counters, summed over the connections.
    pub(super) fn rpc_stats(&self) -> loom_rpc::RpcStats {
        let mut sum = loom_rpc::RpcStats::default();
        for c in lock(&self.conns).values() {
            let s = c.stats();
            sum.connects += s.connects;
            sum.probes += s.probes;
            sum.resends += s.resends;
            sum.damaged += s.damaged;
        }
        sum
    }

    /// Ask the MGS for the configuration, waiting at most `timeout`, and
    /// install it.
    pub(super) async fn fetch_config(
        &self,
        timeout: Duration,
    ) -> Result<Arc<ClusterConfig>, RpcError> {
        let env = Envelope {
            target: TargetId::MGS,
            ctx: ReqCtx::default(),
            req: MgsRequest::GetConfig.into(),
            capa: None,
            snapshot: None,
        };
        let (reply, _) = self
            .connection(&self.mgs_addr)
            .call_with_timeout(&env, Bytes::new(), timeout)
            .await?;
        match reply {
            Reply::Config(c) => {
                self.set_config(c);
                Ok(self.config())
            }
            other => Err(RpcError::Protocol {
                addr: self.mgs_addr.clone(),
                msg: format!("GetConfig answered with {other:?}"),
            }),
        }
    }

    /// Fetch the configuration again unless that was done very recently
    /// (many failing calls share one fetch). Failures are logged and the
    /// old configuration stays.
    pub(super) async fn refresh(&self) {
        let mut last = self.refreshing.lock().await;
        if last.is_some_and(|t| t.elapsed() < REFRESH_MIN_INTERVAL) {
            return;
        }
        let before = self.config().generation;
        match self.fetch_config(REFRESH_TIMEOUT).await {
            Ok(c) if c.generation != before => {
                tracing::info!(generation = c.generation, "cluster configuration refreshed")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(mgs = %self.mgs_addr, "configuration refresh failed: {e}"),
        }
        *last = Some(Instant::now());
    }

    /// The MDT the FLDB gives `fid`, refreshing it once if its sequence is
    /// unknown. ESTALE if it stays unknown: no MDT can own that FID.
    pub(super) async fn fldb_mdt(&self, fid: Fid) -> Result<u32, Errno> {
        if let Some(i) = self.config().mdt_of(fid) {
            return Ok(i);
        }
        self.refresh().await;
        if self.config().mdt_of(fid).is_none() {
            // An MDT takes a new sequence when it first makes an inode
            // (a shard of a striped directory made a moment ago): a refresh
            // skipped as too recent may predate it, so ask now.
            let _serialised = self.refreshing.lock().await;
            if self.config().mdt_of(fid).is_none() {
                if let Err(e) = self.fetch_config(REFRESH_TIMEOUT).await {
                    tracing::warn!(mgs = %self.mgs_addr, "configuration fetch failed: {e}");
                }
            }
        }
        self.config().mdt_of(fid).ok_or_else(|| {
            tracing::warn!(%fid, "FID sequence not in the FLDB");
            Errno::ESTALE
        })
    }
}
