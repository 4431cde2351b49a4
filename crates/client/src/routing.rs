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

use crate::fresh::{Fresh, Validity, XattrsChanged};
use crate::replay::{ReplayLog, ASK_AFTER, REPLAY_BATCH};
use bytes::Bytes;
use loom_proto::capa::Capa;
use loom_proto::lease;
use loom_proto::msg::{
    ClientRequest, ClusterConfig, Commit, Effect, Envelope, Lease, MdtRequest, MgsRequest, Reply,
    ReqCtx, Request, Role, TargetId,
};
use loom_proto::requests::Shows;
use loom_proto::WireError;
use loom_proto::{Errno, Fid};
use loom_rpc::{CallbackHandler, ClientOptions as RpcOptions, ClusterKey, RpcClient, RpcError};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};

/// How long a server may stay unreachable before the router fetches the
/// configuration again, in case its targets moved.
pub const RETRY_SLICE: Duration = Duration::from_secs(15);
/// Configuration fetches are at least this far apart.
pub const REFRESH_MIN_INTERVAL: Duration = Duration::from_millis(500);
/// How long a refresh waits for the MGS.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a recall waits for the kernel to drop what it caches before
/// it is answered anyway: the kernel takes a directory's lock to drop a
/// name, and a request of this mount in that directory may hold it while
/// it waits for the very change that recalls (see docs/ARCHITECTURE.md,
/// "Leases").
const KERNEL_DROP_WAIT: Duration = Duration::from_millis(500);

/// Makes the kernel drop what it caches under some leases; the receiver
/// resolves when it has.
pub type Invalidator = Arc<dyn Fn(Vec<Lease>) -> tokio::sync::oneshot::Receiver<()> + Send + Sync>;

/// Reports the sizes this client's open handles of some files wrote and
/// the MDT does not know yet (their size leases were recalled or lost);
/// resolves when the reports were answered.
pub type Reporter =
    Arc<dyn Fn(Vec<Fid>) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// Counts one request in a counter while it lives.
struct InFlight<'a>(&'a std::sync::atomic::AtomicU64);

impl<'a> InFlight<'a> {
    fn new(c: &'a std::sync::atomic::AtomicU64) -> InFlight<'a> {
        c.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        InFlight(c)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The files whose size leases are among `leases`.
fn sized(leases: &[Lease]) -> Vec<Fid> {
    leases
        .iter()
        .filter_map(|l| match l {
            Lease::Size(f) => Some(*f),
            _ => None,
        })
        .collect()
}

/// How long this client trusts what its MDTs answer.
#[derive(Clone, Copy, Debug)]
pub struct Caching {
    /// Without a lease (and with leases off, always).
    pub attr_timeout: Duration,
    /// With a lease; `None`: the client takes no leases.
    pub lease_time: Option<Duration>,
}

impl Default for Caching {
    fn default() -> Self {
        Caching {
            attr_timeout: Duration::from_secs(1),
            lease_time: None,
        }
    }
}

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
    /// Changes acknowledged by MDTs and not yet committed, for replay.
    pub replay: ReplayLog,
    /// What this client knows, and until when.
    pub fresh: Arc<Fresh>,
    caching: Caching,
    /// The MDTs this client subscribed to leases with, and the count of
    /// lost connections of their address when it did.
    subs: Mutex<HashMap<u32, u64>>,
    /// MDTs that refused leases on a connection (its losses count then):
    /// not asked again on it (a client whose ids a nodemap maps).
    subs_refused: Mutex<HashMap<u32, u64>>,
    /// The capabilities for files' objects this client holds.
    pub capas: crate::capas::Capas,
    subscribing: tokio::sync::Mutex<()>,
    /// Set by a mount: drops what the kernel caches under leases.
    invalidator: Arc<OnceLock<Invalidator>>,
    /// Set by the client: reports sizes whose leases went.
    reporter: Arc<OnceLock<Reporter>>,
    /// Set by the client: asks for the capabilities that files open here
    /// under a recalled lease still want (`Capas::wanted`).
    capa_keeper: Arc<OnceLock<Reporter>>,
    /// Changes on their way (see [`Router::changes_in_flight`]).
    changing: std::sync::atomic::AtomicU64,
    /// The snapshot this client reads (every MDT and OST request asks
    /// for its image), if any.
    snapshot: Option<u32>,
    /// Client id of the contexts this router sends its own requests with.
    client_id: std::sync::atomic::AtomicU64,
    /// Calls made, by target role (MGS, MDT, OST), resends not counted.
    calls: [std::sync::atomic::AtomicU64; 3],
    /// Lookups answered from leases, with no server asked.
    lease_hits: std::sync::atomic::AtomicU64,
    /// Requests sent, by opcode (resends not counted): lock-free, on
    /// every request's path.
    ops: [std::sync::atomic::AtomicU64; 256],
    /// Inodes `loom migrate` moved off the MDT their FID names, and
    /// where they are now (learned from `Reply::Moved`).
    moved: RwLock<HashMap<Fid, u32>>,
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
            replay: ReplayLog::default(),
            fresh: Arc::new(Fresh::default()),
            caching: Caching::default(),
            subs: Mutex::new(HashMap::new()),
            subs_refused: Mutex::new(HashMap::new()),
            capas: Default::default(),
            subscribing: tokio::sync::Mutex::new(()),
            invalidator: Arc::new(OnceLock::new()),
            reporter: Arc::new(OnceLock::new()),
            capa_keeper: Arc::new(OnceLock::new()),
            snapshot: None,
            changing: std::sync::atomic::AtomicU64::new(0),
            client_id: std::sync::atomic::AtomicU64::new(0),
            lease_hits: std::sync::atomic::AtomicU64::new(0),
            ops: std::array::from_fn(|_| std::sync::atomic::AtomicU64::new(0)),
            calls: Default::default(),
            moved: RwLock::new(HashMap::new()),
        }
    }

    /// The MDT that keeps `fid` as far as this client knows: where it was
    /// moved to, else what the FLDB says.
    fn located(&self, cfg: &ClusterConfig, fid: Fid) -> Option<u32> {
        let moved = self.moved.read().unwrap_or_else(|p| p.into_inner());
        if !moved.is_empty() {
            if let Some(m) = moved.get(&fid) {
                return Some(*m);
            }
        }
        cfg.mdt_of(fid)
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

    /// The MGS's address and the cluster key (for another client of the
    /// same file system).
    pub fn mgs_and_key(&self) -> (String, ClusterKey) {
        (self.mgs_addr.clone(), self.key.clone())
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

    /// How long to trust answers; set before the first call.
    pub fn set_caching(&mut self, c: Caching) {
        self.caching = c;
    }

    /// Make connections leave from local address `src`.
    pub fn set_source(&mut self, src: Option<std::net::IpAddr>) {
        self.rpc_opts.source = src;
    }

    /// The caching in force.
    pub fn caching(&self) -> Caching {
        self.caching
    }

    /// Drop what the kernel caches with `f` when leases are recalled or
    /// lost (set once, by a mount).
    pub fn set_invalidator(&self, f: Invalidator) {
        let _ = self.invalidator.set(f);
    }

    /// Whether this client takes leases (a mount, or a library client
    /// configured so).
    pub fn takes_leases(&self) -> bool {
        self.caching.lease_time.is_some()
    }

    /// This client's changes on their way to MDTs. While one is, what
    /// `fresh` knows may lag behind what an MDT already applied for this
    /// client (its own changes recall nothing from it): a lookup not
    /// serialised with them by a kernel asks the MDT.
    pub fn changes_in_flight(&self) -> u64 {
        self.changing.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Read snapshot `id` (before any request): every MDT and OST request
    /// asks for that image, and the servers refuse changes (EROFS).
    pub fn set_snapshot(&mut self, id: Option<u32>) {
        self.snapshot = id;
    }

    /// Report sizes whose leases went with `f` (set once, by the client).
    pub(crate) fn set_reporter(&self, f: Reporter) {
        let _ = self.reporter.set(f);
    }

    /// Ask for the capabilities of files open here whose leases are
    /// recalled with `f` (set once, by the client).
    pub(crate) fn set_capa_keeper(&self, f: Reporter) {
        let _ = self.capa_keeper.set(f);
    }

    /// Connection losses so far of the connection to `addr`, if one was
    /// made.
    pub fn losses_of(&self, addr: &str) -> Option<u64> {
        lock(&self.conns).get(addr).map(|c| *c.losses().borrow())
    }

    /// The RPC client of `addr`, made on first use; with leases on, it
    /// answers recalls, and a lost connection drops everything known.
    pub fn rpc(&self, addr: &str) -> Arc<RpcClient> {
        let mut conns = lock(&self.conns);
        if let Some(c) = conns.get(addr) {
            return c.clone();
        }
        let c = Arc::new(RpcClient::new(
            addr,
            self.key.clone(),
            self.rpc_opts.clone(),
        ));
        if self.caching.lease_time.is_some() {
            c.set_callbacks(self.recall_handler());
            self.watch_losses(&c);
        }
        conns.insert(addr.to_string(), c.clone());
        c
    }

    /// Answers an MDT's recall: what it covers is forgotten here, then
    /// dropped by the kernel (waited for up to [`KERNEL_DROP_WAIT`]); a
    /// recalled size is reported first, if this client wrote past it.
    fn recall_handler(&self) -> CallbackHandler {
        let fresh = self.fresh.clone();
        let inval = self.invalidator.clone();
        let reporter = self.reporter.clone();
        let keeper = self.capa_keeper.clone();
        Arc::new(move |env: Envelope| {
            let fresh = fresh.clone();
            let inval = inval.clone();
            let reporter = reporter.clone();
            let keeper = keeper.clone();
            Box::pin(async move {
                match env.req {
                    Request::Client(ClientRequest::Recall { leases }) => {
                        // Files open here whose lease goes are held at the
                        // MDT from now on (until their last close here):
                        // one whose last name is removed meanwhile is kept.
                        let mut held: Vec<Fid> = leases
                            .iter()
                            .filter_map(|l| match l {
                                Lease::Attr(f) | Lease::Size(f) => Some(*f),
                                _ => None,
                            })
                            .filter(|f| fresh.get(*f).is_some_and(|i| i.hold_orphan()))
                            .collect();
                        held.sort_unstable();
                        held.dedup();
                        // Before the change that recalls them is made:
                        // the MDT grants what the opens were allowed.
                        if let (false, Some(k)) = (held.is_empty(), keeper.get()) {
                            k(held.clone()).await;
                        }
                        // Forgotten first: a write from now on reports
                        // its size itself.
                        fresh.recall(&leases);
                        let sizes = sized(&leases);
                        if let (false, Some(r)) = (sizes.is_empty(), reporter.get()) {
                            r(sizes).await;
                        }
                        if let Some(f) = inval.get() {
                            let done = f(leases);
                            if tokio::time::timeout(KERNEL_DROP_WAIT, done).await.is_err() {
                                tracing::debug!("recall answered before the kernel dropped all");
                            }
                        }
                        Ok(match held.is_empty() {
                            true => Reply::Ok,
                            false => Reply::Held { fids: held },
                        })
                    }
                    other => Err(WireError::new(
                        Errno::EOPNOTSUPP,
                        format!("a client does not serve {}", other.name()),
                    )),
                }
            })
        })
    }

    /// When a connection to `c`'s server dies, the leases granted on it
    /// are void: drop everything known, in the kernel too.
    fn watch_losses(&self, c: &RpcClient) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut losses = c.losses();
        let fresh = self.fresh.clone();
        let inval = self.invalidator.clone();
        let reporter = self.reporter.clone();
        rt.spawn(async move {
            while losses.changed().await.is_ok() {
                let all = fresh.take_all();
                let sizes = sized(&all);
                if let (false, Some(r)) = (sizes.is_empty(), reporter.get()) {
                    // In the background: the reports wait for the
                    // connection to come back.
                    tokio::spawn(r(sizes));
                }
                if let Some(f) = inval.get() {
                    let _ = f(all).await;
                }
            }
        });
    }

    /// Subscribe to MDT `mdt`'s leases on the connection `rpc` has now, if
    /// not done on it yet. Best effort: without it, answers are simply
    /// not leased.
    async fn subscribe(&self, mdt: u32, rpc: &RpcClient) {
        let now = *rpc.losses().borrow();
        if lock(&self.subs).get(&mdt) == Some(&now)
            || lock(&self.subs_refused).get(&mdt) == Some(&now)
        {
            return;
        }
        // One at a time: a second subscription would void the leases
        // granted after the first.
        let _one = self.subscribing.lock().await;
        let losses = *rpc.losses().borrow();
        if lock(&self.subs).get(&mdt) == Some(&losses) {
            return;
        }
        let (seq, low) = self.begin();
        let env = Envelope {
            target: TargetId::mdt(mdt),
            ctx: ReqCtx {
                client_id: self.client_id.load(std::sync::atomic::Ordering::Relaxed),
                seq: seq.1,
                acked_below: low,
                ..ReqCtx::default()
            },
            req: MdtRequest::Subscribe.into(),
            capa: None,
            snapshot: self.snapshot,
        };
        let deadline = Instant::now() + REFRESH_TIMEOUT;
        match rpc
            .call_replied(&env, Bytes::new(), deadline, REFRESH_TIMEOUT)
            .await
        {
            Ok(r) if r.result.is_ok() && *rpc.losses().borrow() == losses => {
                lock(&self.subs).insert(mdt, losses);
            }
            Ok(r) => {
                if let Err(e) = &r.result {
                    if e.errno == Errno::EOPNOTSUPP && *rpc.losses().borrow() == losses {
                        // Refused for this connection: answers are not
                        // leased, and leases are not asked again on it.
                        lock(&self.subs_refused).insert(mdt, losses);
                    }
                }
                tracing::debug!("subscribing to MDT{mdt:04x}: {:?}", r.result.err())
            }
            Err(e) => tracing::debug!("subscribing to MDT{mdt:04x}: {e}"),
        }
    }

    /// Whether answers from MDT `mdt` on `rpc`'s connection may be leased.
    fn subscribed(&self, mdt: u32, rpc: &RpcClient) -> bool {
        lock(&self.subs).get(&mdt) == Some(&*rpc.losses().borrow())
    }

    /// Ask the MGS for the configuration, waiting at most `timeout`, and
    /// install it.
    pub async fn fetch_config(&self, timeout: Duration) -> Result<Arc<ClusterConfig>, RpcError> {
        let env = Envelope {
            target: TargetId::MGS,
            ctx: ReqCtx::default(),
            req: MgsRequest::GetConfig.into(),
            capa: None,
            snapshot: None,
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
        if let Some(i) = self.located(&self.config(), fid) {
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
        req: impl Into<Request>,
        bulk: Bytes,
    ) -> Result<(Reply, Vec<u8>), Errno> {
        self.call_within(target, ctx, req, bulk, self.call_timeout)
            .await
    }

    /// As [`Router::call`], with the capability of the object an OST
    /// request touches.
    pub async fn call_capa(
        &self,
        target: TargetId,
        ctx: ReqCtx,
        req: impl Into<Request>,
        bulk: Bytes,
        capa: Option<Capa>,
    ) -> Result<(Reply, Vec<u8>), Errno> {
        self.call_full(target, ctx, req.into(), bulk, self.call_timeout, capa)
            .await
    }

    /// As [`Router::call`], giving up after `timeout` (for questions such
    /// as statfs that must not wait the full call timeout for one target).
    pub async fn call_within(
        &self,
        target: TargetId,
        ctx: ReqCtx,
        req: impl Into<Request>,
        bulk: Bytes,
        timeout: Duration,
    ) -> Result<(Reply, Vec<u8>), Errno> {
        self.call_full(target, ctx, req.into(), bulk, timeout, None)
            .await
    }

    async fn call_full(
        &self,
        mut target: TargetId,
        mut ctx: ReqCtx,
        req: Request,
        bulk: Bytes,
        timeout: Duration,
        capa: Option<Capa>,
    ) -> Result<(Reply, Vec<u8>), Errno> {
        let (seq, low) = self.begin();
        ctx.seq = seq.1;
        ctx.acked_below = low;
        self.calls[role_slot(target.role)].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let snapshot = match target.role {
            Role::Mgs => None,
            _ => self.snapshot,
        };
        let mut env = Envelope {
            target,
            ctx,
            req,
            capa,
            snapshot,
        };
        if let Some(n) = self.ops.get(usize::from(env.req.opcode())) {
            n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        // A change of names or inodes on its way (until its answer is noted
        // in `fresh`): see [`Router::changes_in_flight`].
        let _changing = matches!(&env.req, Request::Mdt(r) if r.op().effect != Effect::Reads)
            .then(|| InFlight::new(&self.changing));
        // Every request the mount makes, for counting them per operation
        // (LOOM_LOG=loom_client::routing=trace).
        tracing::trace!(%target, op = %env.req.name(), "call");
        let deadline = Instant::now() + timeout;
        let mut moves = 0;
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
            let leasing = target.role == Role::Mdt && self.caching.lease_time.is_some();
            if leasing {
                self.subscribe(target.index, &rpc).await;
            }
            let since = self.fresh.recalls();
            let changes = self.fresh.changes();
            match rpc
                .call_replied(&env, bulk.clone(), deadline, RETRY_SLICE)
                .await
            {
                Ok(mut r) => {
                    if let (Role::Mdt, Ok(Reply::Moved { fid, mdt })) = (target.role, &r.result) {
                        // `loom migrate` moved the inode this request is
                        // routed by: remember, and ask there (nothing was
                        // done where it was).
                        let (fid, mdt) = (*fid, *mdt);
                        tracing::debug!(%fid, from = %target, to = mdt, "inode moved");
                        if moves >= MAX_MOVED_HOPS {
                            return Err(Errno::EIO);
                        }
                        moves += 1;
                        self.moved
                            .write()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(fid, mdt);
                        self.fresh.moved(fid);
                        target = TargetId::mdt(mdt);
                        env.target = target;
                        continue;
                    }
                    if let (Role::Mdt, Ok(Reply::Restriped { dir, layout })) =
                        (target.role, &r.result)
                    {
                        // The directory was striped since this client
                        // learned its layout: send the request to the
                        // shard of its name (a listing: the caller lists
                        // the shards).
                        let (dir, layout) = (*dir, layout.clone());
                        let shards = layout.dir_shards().map(Arc::<[Fid]>::from);
                        self.fresh.set_shards(dir, shards);
                        if moves >= MAX_MOVED_HOPS {
                            return Err(Errno::EIO);
                        }
                        moves += 1;
                        let Request::Mdt(req) = &mut env.req else {
                            return Err(Errno::EPROTO);
                        };
                        let Some(parent) = reshard(req, dir, &layout) else {
                            return Err(Errno::ESTALE);
                        };
                        target = self.mdt_of(parent).await?;
                        env.target = target;
                        continue;
                    }
                    // A created or opened file's capability: kept for its
                    // I/O; the caller sees the answer alone.
                    r.result = match r.result {
                        Ok(Reply::WithCapa { reply, capa }) => {
                            self.capas.remember(capa);
                            Ok(*reply)
                        }
                        other => other,
                    };
                    if target.role == Role::Mdt {
                        let now = Instant::now();
                        let leased = leasing
                            && r.commit.is_some_and(|c| c.leased)
                            && self.subscribed(target.index, &rpc);
                        let v = Validity {
                            leased: self.caching.lease_time.filter(|_| leased).map(|t| now + t),
                            short: now + self.caching.attr_timeout,
                            since,
                            changes,
                            stamp: r.commit.map_or(0, |c| c.transno),
                        };
                        // Only the answer itself is kept for replay.
                        r.result = self.learn(target.index, &env, r.result, leased, v);
                        if let Some(c) = r.commit {
                            self.replay
                                .note(target.index, c, &env, r.result.as_ref().ok());
                        }
                    }
                    return match r.result {
                        Ok(reply) => Ok((reply, r.bulk)),
                        Err(e) => {
                            tracing::debug!(%target, op = env.req.name(), "{e}");
                            Err(e.errno)
                        }
                    };
                }
                Err(RpcError::Remote(e)) => {
                    tracing::debug!(%target, op = env.req.name(), "{e}");
                    return Err(e.errno);
                }
                Err(e @ RpcError::Unreachable { .. }) => {
                    // Not sent: nothing was changed.
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
                    if env.req.op().effect == Effect::Once {
                        // A change to names or inodes may have been
                        // applied, unseen.
                        self.fresh.clear();
                    }
                    return Err(e.errno());
                }
            }
        }
    }

    /// MDT `mdt`'s answer to `env`, with what it says taken note of (under
    /// the leases it grants when `leased`).
    fn learn(
        &self,
        mdt: u32,
        env: &Envelope,
        result: Result<Reply, WireError>,
        leased: bool,
        v: Validity,
    ) -> Result<Reply, WireError> {
        let Request::Mdt(req) = &env.req else {
            return result;
        };
        let result = result.map(Reply::split);
        match &result {
            Ok((reply, Some(e))) => {
                let granted: HashSet<Lease> = if leased {
                    lease::granted_by_change(reply, e).into_iter().collect()
                } else {
                    HashSet::new()
                };
                self.fresh
                    .learn(e.clone(), &granted, v, xattrs_changed(req, reply));
                if let Reply::Entry {
                    attr,
                    layout: Some(l),
                } = reply
                {
                    self.fresh.seen_layout(attr.fid, l);
                }
            }
            // A change to names or inodes answered without its effects (a
            // resend answered from the reply cache): what it did is not
            // known here. (Sync, replay and the like change neither.)
            Ok((_, None)) if req.op().effect == Effect::Once => self.fresh.clear(),
            _ => {
                let cfg = self.config();
                let r = result.as_ref().map(|(r, _)| r).map_err(|e| e.errno);
                let granted: HashSet<Lease> = if leased {
                    lease::granted_by_read(req, r, |f| self.located(&cfg, f) == Some(mdt))
                        .into_iter()
                        .collect()
                } else {
                    HashSet::new()
                };
                self.learn_read(req, r, &granted, v);
            }
        }
        result.map(|(r, _)| r)
    }

    /// Note what an answer to read `req` says, under `granted`.
    fn learn_read(
        &self,
        req: &MdtRequest,
        r: Result<&Reply, Errno>,
        granted: &HashSet<Lease>,
        v: Validity,
    ) {
        let f = &self.fresh;
        // What the answer shows is declared with each operation.
        match req.op().shows {
            Shows::Nothing | Shows::Attrs => {}
            Shows::Entry => {
                for (parent, name) in req.dir_names() {
                    let Some(name) = name else { continue };
                    let g = granted.contains(&Lease::Name(parent, name.clone()));
                    match r {
                        Ok(Reply::Entry { attr, .. }) => {
                            f.seen_name(parent, name, Some(attr.fid), g, v)
                        }
                        Err(Errno::ENOENT) => f.seen_name(parent, name, None, g, v),
                        _ => {}
                    }
                }
                if let Ok(Reply::Entry { attr, layout }) = r {
                    f.seen(attr, granted.contains(&Lease::Attr(attr.fid)), v);
                    if let Some(l) = layout {
                        f.seen_layout(attr.fid, l);
                    }
                }
            }
            Shows::Attr => match r {
                Ok(Reply::Attr(a)) => f.seen(a, granted.contains(&Lease::Attr(a.fid)), v),
                Ok(Reply::Entry { attr: a, layout }) => {
                    f.seen(a, granted.contains(&Lease::Attr(a.fid)), v);
                    if let Some(l) = layout {
                        f.seen_layout(a.fid, l);
                    }
                }
                _ => {}
            },
            Shows::List => {
                let (Some((fid, _)), Ok(Reply::Dir { entries, .. })) = (req.listing(), r) else {
                    return;
                };
                for e in entries {
                    let g = granted.contains(&Lease::Name(fid, e.name.clone()));
                    f.seen_name(fid, &e.name, Some(e.attr.fid), g, v);
                    f.seen(&e.attr, granted.contains(&Lease::Attr(e.attr.fid)), v);
                }
                if granted.contains(&Lease::List(fid)) {
                    f.seen_list(fid, entries.iter().map(|e| e.name.clone()).collect(), v);
                }
            }
        }
    }
}

/// Point `req`'s names in directory `dir` at the shards of `layout` they
/// hash to; the directory object the request now goes to (`None` for a
/// listing, which the caller must redo over the shards).
fn reshard(req: &mut MdtRequest, dir: Fid, layout: &loom_proto::Layout) -> Option<Fid> {
    if req.listing().is_some() {
        return None;
    }
    req.reroute_names(|d, name| {
        if d == dir {
            layout.shard_for(name.as_bytes()).unwrap_or(dir)
        } else {
            d
        }
    });
    req.dir_names().first().map(|(d, _)| *d)
}

/// Moves followed for one request (an inode migrated several times).
const MAX_MOVED_HOPS: u32 = 8;

/// How often the recovery task looks for lost connections and old
/// uncommitted changes.
const RECOVERY_TICK: Duration = Duration::from_millis(50);
/// How long a leaving client tries to tell an MDT.
const DISCONNECT_TIMEOUT: Duration = Duration::from_secs(2);

impl Router {
    /// Start the task that keeps this client's uncommitted changes safe:
    /// when a connection to an MDT it changed something on is lost, or a
    /// change stays uncommitted for [`ASK_AFTER`], it asks the MDT
    /// (`CommitState`) and replays to it if it restarted. Ends with the router.
    pub fn spawn_recovery(self: &Arc<Router>, client_id: u64) {
        self.client_id
            .store(client_id, std::sync::atomic::Ordering::Relaxed);
        let weak: Weak<Router> = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(RECOVERY_TICK).await;
                let Some(r) = weak.upgrade() else { return };
                for mdt in r.replay.mdts() {
                    if r.needs_check(mdt) {
                        let r = r.clone();
                        tokio::spawn(async move { r.check_mdt(mdt).await });
                    }
                }
            }
        });
    }

    /// Whether MDT `mdt` may have restarted or owes us a commit notice.
    fn needs_check(&self, mdt: u32) -> bool {
        let Some(addr) = self
            .config()
            .target(TargetId::mdt(mdt))
            .map(|t| t.addr.clone())
        else {
            return false;
        };
        let losses = *self.rpc(&addr).losses().borrow();
        self.replay.with(mdt, |l| {
            if l.checking || !l.registered {
                return false;
            }
            let lost = losses != l.losses_seen;
            let old =
                !l.entries.is_empty() && l.last_reply.is_none_or(|t| t.elapsed() >= ASK_AFTER);
            if lost || old {
                l.losses_seen = losses;
                l.checking = true;
                true
            } else {
                false
            }
        })
    }

    /// One request to MDT `mdt` on this client's behalf (commit state, a replay,
    /// a sync): its result and commit state, without taking note of them.
    async fn mdt_exchange(
        &self,
        mdt: u32,
        req: MdtRequest,
    ) -> Result<(Result<Reply, loom_proto::WireError>, Option<Commit>), Errno> {
        let target = TargetId::mdt(mdt);
        let addr = self
            .config()
            .target(target)
            .map(|t| t.addr.clone())
            .ok_or(Errno::EIO)?;
        let (seq, low) = self.begin();
        let ctx = ReqCtx {
            client_id: self.client_id.load(std::sync::atomic::Ordering::Relaxed),
            seq: seq.1,
            acked_below: low,
            ..ReqCtx::default()
        };
        let env = Envelope {
            target,
            ctx,
            req: req.into(),
            capa: None,
            snapshot: None,
        };
        let deadline = Instant::now() + self.call_timeout;
        match self
            .rpc(&addr)
            .call_replied(&env, Bytes::new(), deadline, self.call_timeout)
            .await
        {
            Ok(r) => Ok((r.result, r.commit)),
            Err(e) => Err(e.errno()),
        }
    }

    /// Ask MDT `mdt` how far it committed; replay to it if it restarted.
    async fn check_mdt(&self, mdt: u32) {
        let r = self.mdt_exchange(mdt, MdtRequest::CommitState).await;
        if r.is_err() {
            // Ask again at the next tick.
            self.replay.with(mdt, |l| l.losses_seen = u64::MAX);
        }
        if let Ok((_, Some(c))) = r {
            let known = self.replay.with(mdt, |l| l.boot);
            if c.boot == known {
                let env = Envelope {
                    target: TargetId::mdt(mdt),
                    ctx: ReqCtx::default(),
                    req: MdtRequest::CommitState.into(),
                    capa: None,
                    snapshot: None,
                };
                self.replay
                    .note(mdt, Commit { transno: 0, ..c }, &env, None);
            } else {
                self.replay_to(mdt, c).await;
            }
        }
        self.replay.with(mdt, |l| l.checking = false);
    }

    /// Send MDT `mdt`, restarted as instance `boot`, every change it
    /// acknowledged and did not commit, in transaction order, and end the
    /// replay (also with nothing to send: the MDT waits for every client
    /// it knew). The last request returns when the MDT has applied every
    /// client's replays and committed them.
    async fn replay_to(&self, mdt: u32, now: Commit) {
        let boot = now.boot;
        let (old_boot, entries) = self.replay.with(mdt, |l| {
            l.replaying_to = Some(boot);
            // What the old instance committed survived its end.
            l.entries.retain(|t, _| *t > now.started_at);
            (l.boot, l.entries.values().cloned().collect::<Vec<_>>())
        });
        let total = entries.len();
        tracing::info!("MDT{mdt:04x} restarted: replaying {total} uncommitted changes");
        let mut chunks: Vec<Vec<_>> = entries.chunks(REPLAY_BATCH).map(|c| c.to_vec()).collect();
        if chunks.is_empty() {
            chunks.push(Vec::new());
        }
        let n = chunks.len();
        for (i, chunk) in chunks.into_iter().enumerate() {
            let req = MdtRequest::Replay {
                boot: old_boot,
                entries: chunk,
                last: i + 1 == n,
            };
            match self.mdt_exchange(mdt, req).await {
                Ok((Ok(_), _)) => {}
                Ok((Err(e), c)) if e.errno == Errno::ESTALE => {
                    // Too late: the MDT closed its window without us.
                    let lost = self.replay.with(mdt, |l| {
                        let n = l.entries.len();
                        l.entries.clear();
                        l.replaying_to = None;
                        l.registered = false;
                        l.boot = c.map(|c| c.boot).unwrap_or(boot);
                        l.last_committed = c.map(|c| c.last_committed).unwrap_or(0);
                        n
                    });
                    if lost > 0 {
                        self.replay.evicted(mdt, lost);
                    } else {
                        tracing::info!("MDT{mdt:04x}: {e}");
                    }
                    return;
                }
                other => {
                    let why = match other {
                        Ok((Err(e), _)) => e.to_string(),
                        Err(e) => e.to_string(),
                        Ok((Ok(_), _)) => String::new(),
                    };
                    tracing::warn!("replay to MDT{mdt:04x}: {why}; trying again");
                    // Ask again at the next tick.
                    self.replay.with(mdt, |l| {
                        l.replaying_to = None;
                        l.losses_seen = u64::MAX;
                    });
                    return;
                }
            }
        }
        // Applied and committed by the MDT before it answered the last.
        self.replay.with(mdt, |l| {
            l.entries.clear();
            l.boot = boot;
            l.replaying_to = None;
        });
        tracing::info!("MDT{mdt:04x}: replayed {total} changes");
    }

    /// Wait until every change this client made is committed on every MDT
    /// (fsync, syncfs): one `Sync` to each MDT that holds some.
    pub async fn commit_all(&self) -> Result<(), Errno> {
        let waiting: Vec<u32> = self
            .replay
            .mdts()
            .into_iter()
            .filter(|m| self.replay.kept(*m) > 0)
            .collect();
        for mdt in waiting {
            self.call(
                TargetId::mdt(mdt),
                self.own_ctx(),
                MdtRequest::Sync,
                Bytes::new(),
            )
            .await?;
        }
        Ok(())
    }

    /// Leave every MDT this client changed something on: each commits and
    /// stops counting on this client in its recovery (unmount, the end of
    /// a tool).
    pub async fn disconnect_all(&self) {
        let mdts: Vec<u32> = self
            .replay
            .mdts()
            .into_iter()
            .filter(|m| self.replay.with(*m, |l| l.registered))
            .collect();
        for mdt in mdts {
            // Best effort, briefly: an MDT that is down when the client
            // leaves waits for it only until its recovery window ends.
            let r = self
                .call_within(
                    TargetId::mdt(mdt),
                    self.own_ctx(),
                    MdtRequest::Disconnect,
                    Bytes::new(),
                    DISCONNECT_TIMEOUT,
                )
                .await;
            match r {
                Ok(_) => self.replay.with(mdt, |l| {
                    l.registered = false;
                    l.entries.clear();
                }),
                Err(e) => tracing::warn!("disconnecting from MDT{mdt:04x}: {e}"),
            }
        }
    }

    /// A lookup or a stat was answered from what this client knows
    /// (leases, its own changes), with no server asked.
    pub fn lease_hit(&self) {
        self.lease_hits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Lookups and stats answered with no server asked so far (a mount's
    /// kernel answers more itself, from its own cache, unseen).
    pub fn lease_hits(&self) -> u64 {
        self.lease_hits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Requests sent so far, by operation, sorted (resends not counted).
    pub fn ops_sent(&self) -> Vec<(&'static str, u64)> {
        let mut v: Vec<(&'static str, u64)> = loom_proto::requests::all_ops()
            .filter_map(|op| {
                let n = self
                    .ops
                    .get(usize::from(op.opcode))?
                    .load(std::sync::atomic::Ordering::Relaxed);
                (n > 0).then_some((op.name, n))
            })
            .collect();
        // An opcode that several services declare counts once.
        v.sort();
        v.dedup();
        v
    }

    /// Requests sent and not answered yet.
    pub fn requests_in_flight(&self) -> u64 {
        lock(&self.inflight).waiting.len() as u64
    }

    /// The transport's counters, summed over this client's connections.
    pub fn rpc_stats(&self) -> loom_rpc::RpcStats {
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

    /// Calls this client made to MDTs and to OSTs so far (each counted
    /// once, however often it was resent): what an operation costs in
    /// round trips.
    pub fn calls(&self) -> (u64, u64) {
        let n = |r: Role| self.calls[role_slot(r)].load(std::sync::atomic::Ordering::Relaxed);
        (n(Role::Mdt), n(Role::Ost))
    }

    fn own_ctx(&self) -> ReqCtx {
        ReqCtx {
            client_id: self.client_id.load(std::sync::atomic::Ordering::Relaxed),
            ..ReqCtx::default()
        }
    }
}

fn role_slot(r: Role) -> usize {
    match r {
        Role::Mgs => 0,
        Role::Mdt => 1,
        Role::Ost => 2,
    }
}

/// What change `req`, answered `reply`, did to extended attributes
/// (matched over every operation: a new one must say).
fn xattrs_changed(req: &MdtRequest, reply: &Reply) -> XattrsChanged {
    use MdtRequest as R;
    // Declared with the operation: it makes an inode.
    if req.op().makes {
        return match reply {
            Reply::Entry { attr, .. } => XattrsChanged::Made(attr.fid),
            _ => XattrsChanged::Nothing,
        };
    }
    match req {
        R::SetXattr { fid, .. } | R::RemoveXattr { fid, .. } => XattrsChanged::Set(*fid),
        R::SetAttr { fid, set } => {
            if set.uid.is_some() || set.gid.is_some() || set.size.is_some() || set.kill_suid {
                XattrsChanged::KillPriv(*fid)
            } else {
                XattrsChanged::Nothing
            }
        }
        R::Create { .. }
        | R::Mkdir { .. }
        | R::Symlink { .. }
        | R::MkdirStriped { .. }
        | R::Lookup { .. }
        | R::GetAttr { .. }
        | R::Unlink { .. }
        | R::Rmdir { .. }
        | R::Rename { .. }
        | R::Link { .. }
        | R::Readlink { .. }
        | R::Readdir { .. }
        | R::GetLayout { .. }
        | R::SetDefaultStripe { .. }
        | R::GetDefaultStripe { .. }
        | R::GetXattr { .. }
        | R::ListXattr { .. }
        | R::StatFs
        | R::UpdateSize { .. }
        | R::ReleaseOrphan { .. }
        | R::RenewOrphans { .. }
        | R::Open { .. }
        | R::Replay { .. }
        | R::Sync
        | R::Disconnect
        | R::CommitState
        | R::Subscribe
        | R::SetDefaultLayout { .. }
        | R::GetDefaultLayout { .. }
        | R::DomWrite { .. }
        | R::DomRead { .. }
        | R::DomPunch { .. }
        | R::SetDirDefault { .. }
        | R::GetDirDefault { .. }
        | R::OpStats
        | R::Scrub { .. }
        | R::ListObjects { .. }
        | R::ReclaimObjects { .. }
        | R::FsckScan { .. }
        | R::Find { .. }
        | R::CatalogScan { .. }
        | R::MigrateData { .. }
        | R::MigrateDataEnd { .. }
        | R::FsckRepair { .. }
        | R::JobStats
        | R::SetDefaultCompress { .. }
        | R::GetDefaultCompress { .. }
        | R::Migrate { .. }
        | R::Restripe { .. }
        | R::ReaddirShard { .. }
        | R::ChangelogRead { .. }
        | R::ChangelogRegister
        | R::ChangelogClear { .. }
        | R::ChangelogDeregister { .. }
        | R::ChangelogState
        | R::QuotaUsage { .. }
        | R::QuotaCheck
        | R::SetProject { .. }
        | R::GetProject { .. }
        | R::SetQuota { .. }
        | R::GetQuota { .. }
        | R::Lock { .. }
        | R::Unlock { .. }
        | R::TestLock { .. }
        | R::ReclaimLocks { .. }
        | R::AppendReserve { .. }
        | R::GetCapa { .. }
        | R::GetRoot => XattrsChanged::Nothing,
    }
}
