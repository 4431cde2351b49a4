//! One `loom server` process: reads its config file, opens the targets it
//! hosts, serves them on one TCP address and registers them with the MGS.

use crate::error::{answer, ServerError};
use crate::mdt::MdtService;
use crate::mgs::MgsService;
use crate::ost::OstService;
use crate::peers::Peers;
use crate::stats::{Served, TargetStats};
use crate::target;
use anyhow::{bail, Context};
use loom_proto::msg::{
    Envelope, MdtRequest, MgsRequest, OstRequest, Reply, Request, Role, TargetId, TargetInfo,
};
use loom_proto::requests::Effect;
use loom_proto::Errno;
use loom_rpc::{Answer, Bulk, Channel, ClientOptions, ClusterKey, Service};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The server's config file (`node.toml`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// File system name; every target must be formatted for it.
    pub fsname: String,
    /// Address to listen on, e.g. "127.0.0.1:7001".
    pub listen: String,
    /// Address other nodes and clients use to reach this one (default: listen).
    #[serde(default)]
    pub advertise: Option<String>,
    /// Address of the MGS (this node's own if it hosts the MGS).
    pub mgs: String,
    /// File holding the cluster key in hex (relative to the config file).
    pub key_file: PathBuf,
    /// Target directories made by `loom format` (relative to the config file).
    pub targets: Vec<PathBuf>,
    /// Seconds a request to another server may take before it fails.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Seconds a restarted MDT waits for its clients to replay the changes
    /// it acknowledged but had not committed; clients that miss it are
    /// evicted.
    #[serde(default = "default_recovery_window")]
    pub recovery_window_secs: u64,
    /// Milliseconds an MDT may hold applied changes before it commits
    /// them (clients keep them for replay meanwhile). Longer batches more
    /// changes per fsync; what a crash of a client and its MDT together
    /// can lose grows with it.
    #[serde(default = "default_commit_interval")]
    pub commit_interval_ms: u64,
    /// Milliseconds a client holding a lease may take to answer its
    /// recall before the change goes ahead without it (the client loses
    /// its leases on this server's MDTs, and drops its cache when it
    /// finds out).
    #[serde(default = "default_recall_timeout")]
    pub recall_timeout_ms: u64,
    /// Address of the HTTP endpoint that serves this server's metrics in
    /// the Prometheus text format at `/metrics`, e.g. "127.0.0.1:9100";
    /// none when unset.
    #[serde(default)]
    pub metrics_listen: Option<String>,
    /// Address of the live web dashboard, served by the server that hosts
    /// the MGS (ignored elsewhere), e.g. "127.0.0.1:8080"; none when
    /// unset.
    #[serde(default)]
    pub dashboard_listen: Option<String>,
    /// An MDT stripes a plain directory by itself once it holds more than
    /// this many entries, online (Lustre's `enable_dir_auto_split`); 0:
    /// never.
    #[serde(default)]
    pub dir_split_entries: u64,
    /// Into this many shards, on its own MDT and the next ones (capped by
    /// the MDTs).
    #[serde(default = "default_split_count")]
    pub dir_split_count: u32,
    /// Seconds a job or client that sent nothing is kept in the
    /// statistics.
    #[serde(default = "default_stats_expiry")]
    pub stats_expiry_secs: u64,
}

fn default_stats_expiry() -> u64 {
    crate::stats::DEFAULT_EXPIRY.as_secs()
}

fn default_split_count() -> u32 {
    crate::mdt::DEFAULT_SPLIT_COUNT
}

fn default_recall_timeout() -> u64 {
    crate::mdt::leases::DEFAULT_RECALL_TIMEOUT.as_millis() as u64
}

fn default_commit_interval() -> u64 {
    crate::mdt::MdtOptions::default()
        .commit_interval
        .as_millis() as u64
}

fn default_recovery_window() -> u64 {
    crate::mdt::recovery::DEFAULT_WINDOW.as_secs()
}

fn default_timeout() -> u64 {
    300
}

impl NodeConfig {
    /// Read and check a config file.
    pub fn load(path: &Path) -> anyhow::Result<NodeConfig> {
        let s =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut c: NodeConfig =
            toml::from_str(&s).with_context(|| format!("parsing {}", path.display()))?;
        target::check_fsname(&c.fsname).with_context(|| format!("in {}", path.display()))?;
        if c.targets.is_empty() {
            bail!("{}: `targets` lists no target directories", path.display());
        }
        let base = path.parent().unwrap_or(Path::new("."));
        c.key_file = base.join(&c.key_file);
        c.targets = c.targets.iter().map(|t| base.join(t)).collect();
        Ok(c)
    }
}

/// Read a cluster key file.
pub fn load_key(path: &Path) -> anyhow::Result<ClusterKey> {
    let s = std::fs::read_to_string(path)
        .with_context(|| format!("reading cluster key {}", path.display()))?;
    ClusterKey::from_hex(&s).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The targets one process hosts, answering requests by target id.
/// Targets are opened and closed while it runs: a closed target's
/// requests are answered EAGAIN, so that its clients wait and try again
/// (failover will open it on another server).
pub struct Node {
    hosted: std::sync::RwLock<Hosted>,
    /// The nodemaps applied to clients' requests.
    pub clients: crate::nodemaps::ClientMaps,
    /// The key capabilities are checked with (`loom_proto::capa`); unset,
    /// OSTs take clients' requests without one (a node not started by
    /// [`run`]).
    capa_key: std::sync::OnceLock<[u8; 32]>,
    /// How long a job's or client's statistics stay after its last request.
    stats_expiry: Duration,
    /// The replicated targets hosted here, once any is.
    replicas: std::sync::OnceLock<Arc<crate::replica::Replicas>>,
}

#[derive(Default)]
struct Hosted {
    mgs: Option<Arc<MgsService>>,
    mdts: HashMap<u32, Arc<MdtService>>,
    osts: HashMap<u32, Arc<OstService>>,
    /// Every MDT's and OST's statistics, kept across a close and reopen.
    stats: HashMap<TargetId, Arc<TargetStats>>,
    /// Targets closed while running.
    closed: HashSet<TargetId>,
}

impl Node {
    /// A node hosting nothing yet.
    pub fn new(stats_expiry: Duration) -> Node {
        Node {
            hosted: std::sync::RwLock::default(),
            clients: Default::default(),
            capa_key: std::sync::OnceLock::new(),
            stats_expiry,
            replicas: std::sync::OnceLock::new(),
        }
    }

    /// Serve the replicated targets `r` holds as their roles say.
    pub fn serve_replicas(&self, r: Arc<crate::replica::Replicas>) {
        let _ = self.replicas.set(r);
    }

    /// The replica of `t` hosted here, if `t` is replicated.
    fn replica_of(&self, t: TargetId) -> Option<Arc<crate::replica::Held>> {
        self.replicas.get().and_then(|r| r.of(t))
    }

    /// Check clients' OST requests against capabilities signed with `key`.
    pub fn check_capabilities(&self, key: [u8; 32]) {
        let _ = self.capa_key.set(key);
    }

    /// EACCES unless a client's request on an OST object carries a
    /// capability for it (servers, with the cluster key, need none).
    fn capable(&self, ch: &Arc<Channel>, env: &Envelope) -> Result<(), ServerError> {
        let (Some(key), Some(_), Request::Ost(req)) =
            (self.capa_key.get(), ch.client_addr(), &env.req)
        else {
            return Ok(());
        };
        let Some(obj) = req.object() else {
            return Ok(());
        };
        let op = req.op();
        let write = op.effect != loom_proto::requests::Effect::Reads && !op.session;
        let why = match &env.capa {
            None => format!("{}: no capability", op.name),
            Some(c) => match c.allows(key, obj, write, loom_proto::capa::now_secs()) {
                Ok(()) => return Ok(()),
                Err(why) => format!("{}: {why}", op.name),
            },
        };
        Err(ServerError::refused(Errno::EACCES, why))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Hosted> {
        self.hosted.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Hosted> {
        self.hosted.write().unwrap_or_else(|p| p.into_inner())
    }

    fn opened(&self, h: &mut Hosted, id: TargetId) {
        h.closed.remove(&id);
        if id.role != Role::Mgs {
            let expiry = self.stats_expiry;
            h.stats
                .entry(id)
                .or_insert_with(|| Arc::new(TargetStats::new(id, expiry)));
        }
    }

    /// Serve the MGS from now on.
    pub fn open_mgs(&self, m: Arc<MgsService>) {
        let mut h = self.write();
        self.opened(&mut h, TargetId::MGS);
        h.mgs = Some(m);
    }

    /// Serve MDT `index` from now on (started by the caller).
    pub fn open_mdt(&self, index: u32, m: Arc<MdtService>) {
        let mut h = self.write();
        self.opened(&mut h, TargetId::mdt(index));
        h.mdts.insert(index, m);
    }

    /// Serve OST `index` from now on.
    pub fn open_ost(&self, index: u32, o: Arc<OstService>) {
        let mut h = self.write();
        self.opened(&mut h, TargetId::ost(index));
        h.osts.insert(index, o);
    }

    /// Stop serving the MGS; its requests are answered EAGAIN. The
    /// service, for the caller to drop once the requests in flight end.
    pub fn close_mgs(&self) -> Option<Arc<MgsService>> {
        let mut h = self.write();
        h.closed.insert(TargetId::MGS);
        h.mgs.take()
    }

    /// Stop serving MDT `index`, as [`Node::close_mgs`].
    pub fn close_mdt(&self, index: u32) -> Option<Arc<MdtService>> {
        let mut h = self.write();
        h.closed.insert(TargetId::mdt(index));
        h.mdts.remove(&index)
    }

    /// Stop serving OST `index`, as [`Node::close_mgs`].
    pub fn close_ost(&self, index: u32) -> Option<Arc<OstService>> {
        let mut h = self.write();
        h.closed.insert(TargetId::ost(index));
        h.osts.remove(&index)
    }

    /// The MGS, if served.
    pub fn mgs(&self) -> Option<Arc<MgsService>> {
        self.read().mgs.clone()
    }

    /// MDT `index`, if served.
    pub fn mdt(&self, index: u32) -> Option<Arc<MdtService>> {
        self.read().mdts.get(&index).cloned()
    }

    /// OST `index`, if served.
    pub fn ost(&self, index: u32) -> Option<Arc<OstService>> {
        self.read().osts.get(&index).cloned()
    }

    /// Every served MDT, by index.
    pub fn mdts(&self) -> Vec<(u32, Arc<MdtService>)> {
        let mut v: Vec<_> = self
            .read()
            .mdts
            .iter()
            .map(|(i, m)| (*i, m.clone()))
            .collect();
        v.sort_by_key(|(i, _)| *i);
        v
    }

    /// The statistics of every MDT and OST opened here, MDTs first.
    pub fn stats(&self) -> Vec<Arc<TargetStats>> {
        let mut v: Vec<_> = self.read().stats.values().cloned().collect();
        v.sort_by_key(|s| s.target);
        v
    }

    /// Each served MDT's changelog bounds and consumers.
    pub fn changelog_states(&self) -> Vec<(TargetId, loom_proto::changelog::ChangelogState)> {
        self.mdts()
            .into_iter()
            .map(|(i, m)| (TargetId::mdt(i), m.changelog_state()))
            .collect()
    }

    /// Counters a service keeps itself (checksums, scrub), by target.
    pub fn service_counters(&self) -> Vec<(TargetId, Vec<(String, u64)>)> {
        let h = self.read();
        let mut v: Vec<(TargetId, Vec<(String, u64)>)> = h
            .osts
            .iter()
            .map(|(i, o)| (TargetId::ost(*i), o.stats()))
            .chain(
                h.mdts
                    .iter()
                    .map(|(i, m)| (TargetId::mdt(*i), m.scrub_counters())),
            )
            .collect();
        v.sort_by_key(|(t, _)| *t);
        v
    }
}

impl Service for Node {
    async fn handle(self: Arc<Self>, env: Envelope, bulk: Bulk, ch: &Arc<Channel>) -> Answer {
        let stats = self.read().stats.get(&env.target).cloned();
        let Some(stats) = stats else {
            return self.dispatch(env, bulk, ch).await;
        };
        if env.req.op().by_process {
            let snap = stats.snapshot();
            let ops = snap
                .ops
                .iter()
                .map(|(op, f)| loom_proto::msg::OpUsage {
                    op: op.to_string(),
                    count: f.count,
                    errors: f.errors,
                    bytes_in: f.bytes_in,
                    bytes_out: f.bytes_out,
                    micros: (f.seconds * 1e6) as u64,
                })
                .collect();
            let reply = Reply::JobStats {
                ops,
                jobs: snap.jobs,
                clients: snap.clients,
            };
            return (Ok(reply), Vec::new()).into();
        }
        let (op, client, bytes_in) = (env.req.name(), env.ctx.client_id, bulk.len() as u64);
        let job = env.ctx.jobid.clone();
        let t0 = std::time::Instant::now();
        let a = {
            let _in = stats.enter();
            self.dispatch(env, bulk, ch).await
        };
        stats.record(Served {
            op,
            job: &job,
            client,
            bytes_in,
            bytes_out: a.bulk.len() as u64,
            failed: a.result.is_err(),
            took: t0.elapsed(),
        });
        a
    }
}

impl Node {
    /// A request for snapshot `id`'s image of its target: reads only (an
    /// MDT's image is a service of its own, an OST reads its objects as
    /// the snapshot saw them); every change is refused (EROFS), leases
    /// too (nothing in a snapshot changes).
    async fn dispatch_snapshot(
        self: Arc<Self>,
        id: u32,
        env: Envelope,
        bulk: Bulk,
        ch: &Arc<Channel>,
    ) -> Answer {
        let t = env.target;
        let refused = |errno, msg: String| -> Answer {
            answer(t, (Err(ServerError::refused(errno, msg)), Vec::new())).into()
        };
        let op = env.req.op();
        let read_only = || format!("{}: snapshot {id} is read-only", op.name);
        match (t.role, env.req) {
            (_, Request::Ping) => (Ok(Reply::Ok), Vec::new()).into(),
            (Role::Mdt, Request::Mdt(MdtRequest::Subscribe)) => refused(
                Errno::EOPNOTSUPP,
                format!("snapshot {id} changes no more: no leases"),
            ),
            (Role::Mdt, Request::Mdt(MdtRequest::Sync | MdtRequest::Disconnect)) => {
                (Ok(Reply::Ok), Vec::new()).into()
            }
            (Role::Mdt, req) if op.effect != Effect::Reads => {
                let _ = req;
                refused(Errno::EROFS, read_only())
            }
            (Role::Mdt, req) => {
                let Some(live) = self.mdt(t.index) else {
                    return refused(Errno::EINVAL, format!("this server does not host {t}"));
                };
                let img = match live.snapshot_image(id) {
                    Ok(m) => m,
                    Err(e) => return answer(t, (Err(e), Vec::new())).into(),
                };
                match req {
                    Request::Mdt(r) => answer(t, img.handle(&env.ctx, r, Some(ch)).await).into(),
                    Request::Peer(r) => {
                        answer(t, (img.handle_peer(&env.ctx, r).await, Vec::new())).into()
                    }
                    other => refused(
                        Errno::EPROTO,
                        format!("{t} does not serve {}", other.name()),
                    ),
                }
            }
            (Role::Ost, Request::Ost(req)) => {
                let Some(o) = self.ost(t.index) else {
                    return refused(Errno::EINVAL, format!("this server does not host {t}"));
                };
                match req {
                    OstRequest::ObjRead { obj, offset, len } => {
                        match o.read_snapshot(id, obj, offset, len).await {
                            Ok(data) => (Ok(Reply::Data), data).into(),
                            Err(e) => answer(t, (Err(e), Vec::new())).into(),
                        }
                    }
                    OstRequest::ObjGetSize { obj } => {
                        answer(t, (o.size_in_snapshot(id, obj).await, Vec::new())).into()
                    }
                    r if op.effect == Effect::Reads => {
                        answer(t, o.handle(&env.ctx, r, bulk).await).into()
                    }
                    _ => refused(Errno::EROFS, read_only()),
                }
            }
            (_, req) => refused(
                Errno::EPROTO,
                format!("{t} does not serve {} of a snapshot", req.name()),
            ),
        }
    }

    async fn dispatch(self: Arc<Self>, mut env: Envelope, bulk: Bulk, ch: &Arc<Channel>) -> Answer {
        let t = env.target;
        if let Err(e) = self.capable(ch, &env) {
            return answer(t, (Err(e), Vec::new())).into();
        }
        // Every target serves a client as its nodemap makes it.
        if let Err(e) = self.clients.admit(ch, &mut env) {
            return answer(t, (Err(e), Vec::new())).into();
        }
        if let Some(id) = env.snapshot {
            return self.dispatch_snapshot(id, env, bulk, ch).await;
        }
        let refused = |errno, msg: String| -> Answer {
            answer(t, (Err(ServerError::refused(errno, msg)), Vec::new())).into()
        };
        let missing = || {
            if self.read().closed.contains(&t) {
                refused(Errno::EAGAIN, format!("{t} is closed on this server"))
            } else {
                refused(Errno::EINVAL, format!("this server does not host {t}"))
            }
        };
        // Each request type goes to its own service; a target of another
        // role does not serve it. The service is taken out of the table
        // first: no lock is held while it runs.
        match (t.role, env.req) {
            (_, Request::Ping) => (Ok(Reply::Ok), Vec::new()).into(),
            (Role::Mgs, Request::Mgs(req)) => match self.mgs() {
                Some(m) => answer(t, m.handle(&env.ctx, req, bulk.data).await).into(),
                None => missing(),
            },
            (Role::Mdt, Request::KvReplica { term, req }) => {
                match (self.replica_of(t), self.replicas.get()) {
                    (Some(h), Some(r)) => {
                        answer(t, (r.take_kv(&h, term, req, bulk).await, Vec::new())).into()
                    }
                    _ => refused(
                        Errno::EINVAL,
                        format!("{t} is not replicated on this server"),
                    ),
                }
            }
            (Role::Mdt, req) => {
                // A replicated MDT is served by its primary alone, while
                // its lease holds.
                if let (Some(h), Some(r)) = (self.replica_of(t), self.replicas.get()) {
                    if let Err(e) = r.serving_now(&h) {
                        return answer(t, (Err(e), Vec::new())).into();
                    }
                }
                let Some(m) = self.mdt(t.index) else {
                    return match self.replica_of(t) {
                        // Named its primary a moment ago: the caller asks
                        // the MGS again and comes back (an EAGAIN would
                        // reach applications).
                        Some(_) => refused(
                            Errno::EREMCHG,
                            format!("{t}: this server is taking over as its primary"),
                        ),
                        None => missing(),
                    };
                };
                match req {
                    Request::Mdt(req) => answer(t, m.handle(&env.ctx, req, Some(ch)).await).into(),
                    Request::Peer(req) => {
                        answer(t, (m.handle_peer(&env.ctx, req).await, Vec::new())).into()
                    }
                    req => refused(Errno::EPROTO, format!("{t} does not serve {}", req.name())),
                }
            }
            (Role::Ost, Request::Ost(req)) => match (self.ost(t.index), self.replica_of(t)) {
                (Some(o), None) => answer(t, o.handle(&env.ctx, req, bulk).await).into(),
                (Some(o), Some(h)) => match self.replicas.get() {
                    Some(r) => answer(t, r.serve(&h, &o, &env.ctx, req, bulk).await).into(),
                    None => missing(),
                },
                (None, _) => missing(),
            },
            (Role::Ost, Request::Replica { term, req }) => {
                match (self.ost(t.index), self.replica_of(t), self.replicas.get()) {
                    (Some(o), Some(h), Some(r)) => {
                        answer(t, r.apply(&h, &o, term, &env.ctx, req, bulk).await).into()
                    }
                    (Some(_), None, _) => refused(
                        Errno::EINVAL,
                        format!("{t} is not replicated on this server"),
                    ),
                    _ => missing(),
                }
            }
            (_, req) => refused(Errno::EPROTO, format!("{t} does not serve {}", req.name())),
        }
    }
}

/// How often a server asks the MGS for the nodemaps.
const NODEMAP_POLL: Duration = Duration::from_secs(1);

/// Keep `node`'s nodemaps as the MGS has them. Asked of the MGS itself,
/// not through the configuration the targets share (`Peers::config`),
/// whose first copy is kept for a while.
async fn follow_nodemaps(node: Arc<Node>, peers: Arc<Peers>) {
    loop {
        match peers.call_mgs(MgsRequest::GetConfig).await {
            Ok(Reply::Config(c)) => node.clients.set(c.nodemaps),
            Ok(other) => tracing::warn!("nodemaps: the MGS answered {other:?}"),
            Err(e) => tracing::debug!("nodemaps: configuration not read: {e}"),
        }
        tokio::time::sleep(NODEMAP_POLL).await;
    }
}

/// Run a server until SIGINT or SIGTERM.
pub async fn run(config_path: &Path) -> anyhow::Result<()> {
    let cfg = NodeConfig::load(config_path)?;
    raise_fd_limit();
    let key = load_key(&cfg.key_file)?;
    let opts = ClientOptions {
        call_timeout: Duration::from_secs(cfg.timeout_secs),
        ..ClientOptions::default()
    };
    let peers = Arc::new(Peers::new(&cfg.mgs, key.clone(), opts));
    let node = Node::new(Duration::from_secs(cfg.stats_expiry_secs));
    node.check_capabilities(key.capa_key());
    let mdt_opts = crate::mdt::MdtOptions {
        recovery_window: Duration::from_secs(cfg.recovery_window_secs),
        commit_interval: Duration::from_millis(cfg.commit_interval_ms.max(1)),
        recall_timeout: Duration::from_millis(cfg.recall_timeout_ms.max(1)),
        split_entries: cfg.dir_split_entries,
        split_count: cfg.dir_split_count,
    };
    let replicas = crate::replica::Replicas::new(peers.clone());
    // Replicated MDTs: opened as a service when this server is their
    // primary, by their store's directory.
    let mut replicated_mdts = HashMap::new();
    let mut infos = Vec::new();
    for dir in &cfg.targets {
        let id = target::load(dir)?;
        if id.fsname != cfg.fsname {
            bail!(
                "{} is formatted for file system '{}' but {} serves '{}'",
                dir.display(),
                id.fsname,
                config_path.display(),
                cfg.fsname
            );
        }
        match id.role {
            Role::Mgs => {
                let m = MgsService::open(dir, &cfg.fsname)?;
                m.use_peers(peers.clone());
                node.open_mgs(m)
            }
            Role::Mdt => match id.replica {
                Some(r) => {
                    let h = replicas.hold(id.id(), r.replica);
                    let kv = crate::replica::ReplicatedKv::open(dir, h.clone(), replicas.clone())?;
                    let _ = h.kv.set(kv);
                    replicated_mdts.insert(id.index, dir.clone());
                }
                None => node.open_mdt(
                    id.index,
                    MdtService::open_with(id.index, dir, peers.clone(), mdt_opts.clone())?,
                ),
            },
            Role::Ost => {
                let o = OstService::open(id.index, dir)?;
                o.use_peers(peers.clone());
                node.open_ost(id.index, o)
            }
        }
        infos.push(id);
    }
    let listener = tokio::net::TcpListener::bind(&cfg.listen)
        .await
        .with_context(|| format!("listening on {}", cfg.listen))?;
    let addr = match &cfg.advertise {
        Some(a) => a.clone(),
        None => listener.local_addr()?.to_string(),
    };
    let node = Arc::new(node);
    if let Some(m) = &cfg.metrics_listen {
        let l = tokio::net::TcpListener::bind(m)
            .await
            .with_context(|| format!("metrics endpoint: listening on {m}"))?;
        tokio::spawn(crate::metrics::serve(l, node.clone()));
    }
    let dashboard = match (&cfg.dashboard_listen, node.mgs()) {
        (Some(d), Some(_)) => {
            let l = tokio::net::TcpListener::bind(d)
                .await
                .with_context(|| format!("dashboard: listening on {d}"))?;
            tokio::spawn(crate::dashboard::serve(l, peers.clone()));
            format!("; dashboard at http://{d}/")
        }
        _ => String::new(),
    };
    for id in infos.iter().filter(|i| i.role == Role::Ost) {
        if let Some(r) = id.replica {
            replicas.hold(id.id(), r.replica);
        }
    }
    if infos.iter().any(|i| i.replica.is_some()) {
        node.serve_replicas(replicas.clone());
    }
    let mdts: Vec<_> = node.mdts().into_iter().map(|(_, m)| m).collect();
    let maps = node.clone();
    let hosting = node.clone();
    let stopping = node.clone();
    let server = tokio::spawn(loom_rpc::serve(listener, key, node));
    for id in &infos {
        let req = MgsRequest::Register {
            fsname: cfg.fsname.clone(),
            target: TargetInfo::single(id.id(), &id.uuid, &addr),
            replica: id.replica,
        };
        peers.call_mgs(req).await.map_err(|e| {
            anyhow::anyhow!("registering {} with the MGS at {}: {e}", id.id(), cfg.mgs)
        })?;
    }
    for m in &mdts {
        m.start();
    }
    if let Some(m) = hosting.mgs() {
        tokio::spawn(m.watch_primaries());
    }
    if infos.iter().any(|i| i.replica.is_some()) {
        let roles = Roles {
            node: hosting,
            replicas: replicas.clone(),
            peers: peers.clone(),
            opts: mdt_opts,
            mdt_dirs: replicated_mdts,
        };
        tokio::spawn(replicas.renew(addr.clone(), move |h| roles.follow(h)));
    }
    tokio::spawn(follow_nodemaps(maps, peers.clone()));
    let names: Vec<String> = infos.iter().map(|i| i.id().to_string()).collect();
    let metrics = match &cfg.metrics_listen {
        Some(m) => format!("; metrics at http://{m}/metrics"),
        None => String::new(),
    };
    // Scripts and `loom up` wait for this line.
    println!(
        "loom server: serving {} on {addr}{metrics}{dashboard}",
        names.join(", ")
    );
    tracing::info!("serving {} on {addr}", names.join(", "));
    wait_for_signal().await?;
    tracing::info!("stopping");
    server.abort();
    for (_, m) in stopping.mdts() {
        m.stop();
    }
    Ok(())
}

/// What a server does when the MGS tells it its replicas' roles.
struct Roles {
    node: Arc<Node>,
    replicas: Arc<crate::replica::Replicas>,
    peers: Arc<Peers>,
    opts: crate::mdt::MdtOptions,
    mdt_dirs: HashMap<u32, PathBuf>,
}

impl Roles {
    /// Serve the MDTs this server became the primary of (as after a
    /// restart: clients replay what was not committed), stop serving
    /// those another replica took over, and bring the replicas of the
    /// targets it is primary of up to date.
    fn follow(&self, h: &Arc<crate::replica::Held>) {
        let i = h.id.index;
        if h.id.role == Role::Ost {
            if let Some(o) = self.node.ost(i) {
                self.replicas.bring_up(h, Some(&o));
            }
            return;
        }
        let (Some(dir), Some(kv)) = (self.mdt_dirs.get(&i), h.kv.get()) else {
            return;
        };
        let serving = self.replicas.serving_now(h).is_ok();
        let open = self.node.mdt(i);
        if self.replicas.replaced(h) {
            if let Some(m) = self.node.close_mdt(i) {
                tracing::warn!(target = %h.id, "another replica is the primary now: this server stops serving it");
                m.stop();
            }
            return;
        }
        if !serving {
            return;
        }
        if open.as_ref().is_some_and(|m| m.failed()) {
            // A commit failed (its lease ran out meanwhile): serve it
            // afresh, as after a restart.
            if let Some(m) = self.node.close_mdt(i) {
                m.stop();
            }
        } else if open.is_some() {
            self.replicas.bring_up(h, None);
            return;
        }
        let store: Arc<dyn loom_store::kv::KvStore> = kv.clone();
        match MdtService::open_on(i, dir, store, self.peers.clone(), self.opts.clone()) {
            Ok(m) => {
                tracing::info!(target = %h.id, "serving as its primary");
                self.node.open_mdt(i, m.clone());
                m.start();
            }
            Err(e) => tracing::error!(target = %h.id, "opening as its primary: {e:#}"),
        }
    }
}

/// Raise the soft limit on open files to the hard limit: a server holds a
/// socket per client connection and, on an OST, cached object files.
fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::warn!("raising the open-file limit from {soft} to {hard}: {e}");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("reading the open-file limit: {e}"),
    }
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}
