//! How a service reaches other targets: the cluster configuration from the
//! MGS and one RPC client per server address.

use crate::error::ServerError;
use bytes::Bytes;
use loom_proto::msg::{ClusterConfig, Envelope, MgsRequest, Reply, ReqCtx, Request, TargetId};
use loom_proto::Errno;
use loom_rpc::{ClientOptions, ClusterKey, RpcClient};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Configuration older than this is fetched again, in the background.
pub const CONFIG_MAX_AGE: Duration = Duration::from_secs(2);
/// Moves followed for one request (an inode migrated several times).
const MAX_MOVED_HOPS: u32 = 8;
/// How long a replicated target's server may stay unreachable before
/// the MGS is asked whether another replica took over.
pub const FAILOVER_PROBE: Duration = Duration::from_secs(1);
/// How long the first fetch of the configuration (none cached yet) waits.
const FIRST_FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// A service's view of the rest of the cluster.
pub struct Peers {
    mgs: Arc<RpcClient>,
    key: ClusterKey,
    opts: ClientOptions,
    clients: Mutex<HashMap<String, Arc<RpcClient>>>,
    /// The configuration and when it was fetched.
    config: Mutex<Option<(ClusterConfig, Instant)>>,
    /// Set while a background refresh runs: at most one at a time.
    refreshing: Arc<AtomicBool>,
    ctx: ReqCtx,
    /// The snapshot whose targets' images these peers are (an MDT
    /// serving a snapshot asks the other MDTs' images of it).
    snapshot: Option<u32>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Peers {
    /// Peers reached through the MGS at `mgs_addr`.
    pub fn new(mgs_addr: &str, key: ClusterKey, opts: ClientOptions) -> Peers {
        Peers {
            mgs: Arc::new(RpcClient::new(mgs_addr, key.clone(), opts.clone())),
            key,
            opts,
            clients: Mutex::new(HashMap::new()),
            config: Mutex::new(None),
            refreshing: Arc::new(AtomicBool::new(false)),
            ctx: ReqCtx {
                client_id: rand::random(),
                ..ReqCtx::default()
            },
            snapshot: None,
        }
    }

    /// The same peers, reached as their images in snapshot `id`.
    pub fn for_snapshot(&self, id: u32) -> Peers {
        Peers {
            mgs: self.mgs.clone(),
            key: self.key.clone(),
            opts: self.opts.clone(),
            clients: Mutex::new(HashMap::new()),
            config: Mutex::new(None),
            refreshing: Arc::new(AtomicBool::new(false)),
            ctx: self.ctx.clone(),
            snapshot: Some(id),
        }
    }

    /// Send a request to the MGS.
    pub async fn call_mgs(&self, req: MgsRequest) -> Result<Reply, ServerError> {
        self.call_mgs_within(req, self.opts.call_timeout).await
    }

    /// Send a request to the MGS, giving up after `timeout`.
    pub async fn call_mgs_within(
        &self,
        req: MgsRequest,
        timeout: Duration,
    ) -> Result<Reply, ServerError> {
        let env = Envelope {
            target: TargetId::MGS,
            ctx: self.ctx.clone(),
            req: req.into(),
            capa: None,
            snapshot: None,
        };
        Ok(self
            .mgs
            .call_with_timeout(&env, Bytes::new(), timeout)
            .await?
            .0)
    }

    /// Send `env` to the server at `addr` (a replica of a target, where
    /// the configuration names its primary), giving up after `timeout`.
    pub async fn call_at(
        &self,
        addr: &str,
        env: &Envelope,
        bulk: Bytes,
        timeout: Duration,
    ) -> Result<(Reply, Vec<u8>), ServerError> {
        Ok(self
            .client(addr)
            .call_with_timeout(env, bulk, timeout)
            .await?)
    }

    /// The connection to the server at `addr`.
    fn client(&self, addr: &str) -> Arc<RpcClient> {
        lock(&self.clients)
            .entry(addr.to_string())
            .or_insert_with(|| {
                Arc::new(RpcClient::new(
                    addr.to_string(),
                    self.key.clone(),
                    self.opts.clone(),
                ))
            })
            .clone()
    }

    /// The configuration. Once one has been fetched this never waits for
    /// the MGS: a stale copy is answered at once and a fresh one fetched in
    /// the background, so an MGS outage does not stall the services (the
    /// configuration changes only when targets register).
    pub async fn config(self: &Arc<Self>) -> Result<ClusterConfig, ServerError> {
        let cached = lock(&self.config).clone();
        match cached {
            Some((c, at)) => {
                if at.elapsed() >= CONFIG_MAX_AGE && !self.refreshing.swap(true, Ordering::AcqRel) {
                    let me = self.clone();
                    tokio::spawn(async move {
                        if let Err(e) = me.refresh_within(CONFIG_MAX_AGE * 5).await {
                            tracing::debug!("configuration refresh: {e}");
                        }
                        me.refreshing.store(false, Ordering::Release);
                    });
                }
                Ok(c)
            }
            None => self.refresh_within(FIRST_FETCH_TIMEOUT).await,
        }
    }

    /// The configuration, fetched again from the MGS first if the copy
    /// kept does not satisfy `holds` (a target registered since: a copy
    /// read while the cluster was starting lacks it for a while).
    pub async fn config_where(
        self: &Arc<Self>,
        holds: impl Fn(&ClusterConfig) -> bool,
    ) -> Result<ClusterConfig, ServerError> {
        let c = self.config().await?;
        if holds(&c) {
            return Ok(c);
        }
        self.refresh().await
    }

    /// The configuration, fetched again from the MGS first if the copy
    /// kept is [`CONFIG_MAX_AGE`] old or more: what holds for a change the
    /// MGS acknowledged that long ago (the OST pools a new file's
    /// objects are drawn from).
    pub async fn config_fresh(self: &Arc<Self>) -> Result<ClusterConfig, ServerError> {
        if let Some((c, at)) = lock(&self.config).clone() {
            if at.elapsed() < CONFIG_MAX_AGE {
                return Ok(c);
            }
        }
        self.refresh().await
    }

    /// The key capabilities are signed and checked with.
    pub fn capa_key(&self) -> [u8; 32] {
        self.key.capa_key()
    }

    /// Fetch the configuration from the MGS now.
    pub async fn refresh(&self) -> Result<ClusterConfig, ServerError> {
        self.refresh_within(self.opts.call_timeout).await
    }

    async fn refresh_within(&self, timeout: Duration) -> Result<ClusterConfig, ServerError> {
        let env = Envelope {
            target: TargetId::MGS,
            ctx: self.ctx.clone(),
            req: MgsRequest::GetConfig.into(),
            capa: None,
            snapshot: None,
        };
        match self
            .mgs
            .call_with_timeout(&env, Bytes::new(), timeout)
            .await?
            .0
        {
            Reply::Config(c) => {
                *lock(&self.config) = Some((c.clone(), Instant::now()));
                Ok(c)
            }
            other => Err(ServerError::peer(
                Errno::EPROTO,
                format!("MGS answered GetConfig with {other:?}"),
            )),
        }
    }

    /// Send a request (with bulk) to `target`, with a deadline.
    pub async fn call(
        self: &Arc<Self>,
        target: TargetId,
        req: impl Into<Request>,
        bulk: Bytes,
        timeout: Duration,
    ) -> Result<(Reply, Vec<u8>), ServerError> {
        self.call_as(target, self.ctx.clone(), req, bulk, timeout)
            .await
    }

    /// As [`Peers::call`], under context `ctx` (a client's, for a step of
    /// its change) rather than the server's own.
    pub async fn call_as(
        self: &Arc<Self>,
        target: TargetId,
        ctx: ReqCtx,
        req: impl Into<Request>,
        bulk: Bytes,
        timeout: Duration,
    ) -> Result<(Reply, Vec<u8>), ServerError> {
        let mut env = Envelope {
            target,
            ctx,
            req: req.into(),
            capa: None,
            snapshot: self.snapshot,
        };
        let mut hops = 0;
        let deadline = Instant::now() + timeout;
        loop {
            let cfg = self.config().await?;
            let (addr, replicated) = cfg
                .target(env.target)
                .map(|t| (t.addr.clone(), !t.replicas.is_empty()))
                .ok_or_else(|| {
                    ServerError::peer(Errno::EIO, format!("{} is not registered", env.target))
                })?;
            let client = self.client(&addr);
            if !replicated {
                let r = client
                    .call_with_timeout(&env, bulk.clone(), timeout)
                    .await?;
                match r.0 {
                    Reply::Moved { mdt, .. } if hops < MAX_MOVED_HOPS => {
                        hops += 1;
                        env.target = TargetId::mdt(mdt);
                        continue;
                    }
                    _ => return Ok(r),
                }
            }
            // A replicated target's primary may be changing: a server that
            // cannot be reached for a moment, or that does not serve it
            // now, sends the caller to the MGS for where it went.
            let r = match client
                .call_until(&env, bulk.clone(), deadline, FAILOVER_PROBE)
                .await
            {
                Ok(r) => r,
                Err(e) if Instant::now() < deadline && moved_on(&e) => {
                    tracing::debug!(target = %env.target, addr, "{e}; asking the MGS where it is");
                    tokio::time::sleep(FAILOVER_PROBE / 4).await;
                    if let Err(e) = self.refresh_within(FAILOVER_PROBE).await {
                        tracing::debug!("configuration refresh: {e}");
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            match r.0 {
                // `loom migrate` moved the inode the request names: ask
                // the MDT it went to (a chain of moves is followed).
                Reply::Moved { mdt, .. } if hops < MAX_MOVED_HOPS => {
                    hops += 1;
                    env.target = TargetId::mdt(mdt);
                }
                _ => return Ok(r),
            }
        }
    }
}

/// The target did not answer where it was: its primary may have moved.
fn moved_on(e: &loom_rpc::RpcError) -> bool {
    match e {
        loom_rpc::RpcError::Remote(w) => w.errno == Errno::EREMCHG,
        loom_rpc::RpcError::Unreachable { .. } => true,
        _ => false,
    }
}
