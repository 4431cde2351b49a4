//! Where requests go: the cluster configuration and one RPC client per
//! server address.
//!
//! A `loom server` process hosts several targets on one address, so the
//! router keeps one [`RpcClient`] (one connection) per address and names the
//! target in each envelope. The address of a target comes from the
//! [`ClusterConfig`] fetched from the MGS; it is fetched again (at most
//! every [`REFRESH_MIN_INTERVAL`]) when a target keeps failing to answer, in
//! case its server came back on another address, when a target is not in
//! the configuration yet, and when a FID's sequence is not in the FLDB.
//!
//! Deadlines: a call waits for its reply until the client's `call_timeout`,
//! then fails with EIO. It is sent again only on a new connection after its
//! connection died (the MDTs' reply caches recognise such a resend by the
//! request's client id and sequence number). When a target's server cannot
//! be reached for [`RETRY_SLICE`], the configuration is fetched again and
//! the call goes on, to the new address if the target moved.
//!
//! Sequence numbers: every call takes the next number of this client and
//! carries the lowest number still waiting for a reply (`acked_below`), so
//! servers can forget cached replies that can no longer be asked for.

use bytes::Bytes;
use loom_proto::msg::{ClusterConfig, Envelope, Reply, ReqCtx, Request, TargetId};
use loom_proto::{Errno, Fid};
use loom_rpc::{ClientOptions as RpcOptions, ClusterKey, RpcClient, RpcError};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How long a server may stay unreachable before the router fetches the
/// configuration again, in case its targets moved.
pub const RETRY_SLICE: Duration = Duration::from_secs(15);
/// Configuration fetches are at least this far apart.
pub const REFRESH_MIN_INTERVAL: Duration = Duration::from_millis(500);
/// How long a refresh waits for the MGS.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(5);

/// Routes requests to targets.
pub struct Router {
    mgs_addr: String,
    key: ClusterKey,
    rpc_opts: RpcOptions,
    call_timeout: Duration,
    config: RwLock<Arc<ClusterConfig>>,
    conns: Mutex<HashMap<String, Arc<RpcClient>>>,
    /// Serialises refreshes; holds when the last one finished.
    refreshing: tokio::sync::Mutex<Option<Instant>>,
    inflight: Mutex<Inflight>,
}

/// This client's request sequence numbers and those still waiting.
#[derive(Default)]
struct Inflight {
    next: u64,
    waiting: BTreeSet<u64>,
}

/// A call's sequence number, released when the call ends however it ends.
struct SeqGuard<'a>(&'a Router, u64);

impl Drop for SeqGuard<'_> {
    fn drop(&mut self) {
        lock(&self.0.inflight).waiting.remove(&self.1);
    }
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Router(mgs {})", self.mgs_addr)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain inserts and lookups cannot leave the map inconsistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Router {
    /// A router that knows only the MGS; see [`Router::fetch_config`].
    pub fn new(mgs_addr: &str, key: ClusterKey, call_timeout: Duration) -> Router {
        Router {
            mgs_addr: mgs_addr.to_string(),
            key,
            rpc_opts: RpcOptions {
                call_timeout,
                ..RpcOptions::default()
            },
            call_timeout,
            config: RwLock::new(Arc::new(ClusterConfig::default())),
            conns: Mutex::new(HashMap::new()),
            refreshing: tokio::sync::Mutex::new(None),
            inflight: Mutex::new(Inflight {
                next: 1,
                waiting: BTreeSet::new(),
            }),
        }
    }

    /// Take the next sequence number; returns it with the lowest number
    /// still waiting (itself included). A number taken later is always
    /// higher, so no request at or above the mark can be one a server
    /// still has to answer from its cache.
    fn begin(&self) -> (SeqGuard<'_>, u64) {
        let mut f = lock(&self.inflight);
        let seq = f.next;
        f.next += 1;
        f.waiting.insert(seq);
        let low = f.waiting.first().copied().unwrap_or(seq);
        (SeqGuard(self, seq), low)
    }

    /// The MGS address.
    pub fn mgs_addr(&self) -> &str {
        &self.mgs_addr
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<ClusterConfig> {
        self.config
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set_config(&self, c: ClusterConfig) {
        let mut cur = self.config.write().unwrap_or_else(|p| p.into_inner());
        // An older generation (a slow reply overtaken) never replaces a newer.
        if c.generation >= cur.generation || cur.targets.is_empty() {
            *cur = Arc::new(c);
        }
    }

    /// The RPC client of `addr`, made on first use.
    pub fn rpc(&self, addr: &str) -> Arc<RpcClient> {
        lock(&self.conns)
            .entry(addr.to_string())
            .or_insert_with(|| {
                Arc::new(RpcClient::new(
                    addr,
                    self.key.clone(),
                    self.rpc_opts.clone(),
                ))
            })
            .clone()
    }

    /// Ask the MGS for the configuration, waiting at most `timeout`, and
    /// install it.
    pub async fn fetch_config(&self, timeout: Duration) -> Result<Arc<ClusterConfig>, RpcError> {
        let env = Envelope {
            target: TargetId::MGS,
            ctx: ReqCtx::default(),
            req: Request::GetConfig,
        };
        let (reply, _) = self
            .rpc(&self.mgs_addr)
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
    pub async fn refresh(&self) {
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

    /// The MDT that owns `fid`, refreshing the FLDB once if its sequence is
    /// unknown. ESTALE if it stays unknown: no MDT can own that FID.
    pub async fn mdt_of(&self, fid: Fid) -> Result<TargetId, Errno> {
        if let Some(i) = self.config().mdt_of(fid) {
            return Ok(TargetId::mdt(i));
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
        match self.config().mdt_of(fid) {
            Some(i) => Ok(TargetId::mdt(i)),
            None => {
                tracing::warn!(%fid, "FID sequence not in the FLDB");
                Err(Errno::ESTALE)
            }
        }
    }

    /// Send `req` to `target` as `ctx` with `bulk`; the reply and its bulk.
    /// Fails with the server's errno, or EIO once `call_timeout` has passed
    /// without an answer. The call's sequence number is set here.
    pub async fn call(
        &self,
        target: TargetId,
        ctx: ReqCtx,
        req: Request,
        bulk: Bytes,
    ) -> Result<(Reply, Vec<u8>), Errno> {
        self.call_within(target, ctx, req, bulk, self.call_timeout)
            .await
    }

    /// As [`Router::call`], giving up after `timeout` (for questions such
    /// as statfs that must not wait the full call timeout for one target).
    pub async fn call_within(
        &self,
        target: TargetId,
        mut ctx: ReqCtx,
        req: Request,
        bulk: Bytes,
        timeout: Duration,
    ) -> Result<(Reply, Vec<u8>), Errno> {
        let (seq, low) = self.begin();
        ctx.seq = seq.1;
        ctx.acked_below = low;
        let env = Envelope { target, ctx, req };
        let deadline = Instant::now() + timeout;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let addr = self.config().target(target).map(|t| t.addr.clone());
            let Some(addr) = addr else {
                // Not registered (yet): its server may still be starting.
                if remaining.is_zero() {
                    tracing::warn!(%target, "target is not in the cluster configuration");
                    return Err(Errno::EIO);
                }
                self.refresh().await;
                if self.config().target(target).is_none() {
                    tokio::time::sleep(Duration::from_secs(1).min(remaining)).await;
                }
                continue;
            };
            let rpc = self.rpc(&addr);
            match rpc
                .call_until(&env, bulk.clone(), deadline, RETRY_SLICE)
                .await
            {
                Ok(r) => return Ok(r),
                Err(RpcError::Remote(e)) => {
                    tracing::debug!(%target, op = env.req.name(), "{e}");
                    return Err(e.errno);
                }
                Err(e @ RpcError::Unreachable { .. }) => {
                    if Instant::now() >= deadline {
                        tracing::warn!(%target, op = env.req.name(), "giving up: {e}");
                        return Err(Errno::EIO);
                    }
                    // The server may have moved: ask the MGS, then go on.
                    tracing::info!(%target, op = env.req.name(), "{e}; checking the configuration");
                    self.refresh().await;
                }
                Err(e) => {
                    tracing::warn!(%target, op = env.req.name(), "giving up: {e}");
                    return Err(e.errno());
                }
            }
        }
    }
}
