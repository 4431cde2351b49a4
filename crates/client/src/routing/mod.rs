//! Where requests go, and what their answers teach this client.
//!
//! The [`Router`] is the bottom of the client's metadata and data paths:
//! every request to a target goes through [`Router::call`]. It is made of
//! parts, each in its own module:
//!
//! - `addrs`: the cluster configuration fetched from the MGS, and one
//!   [`RpcClient`](loom_rpc::RpcClient) (one connection) per server
//!   address; a `loom server` hosts several targets on one address, and
//!   each envelope names its target.
//! - `moves`: where inodes moved (`loom migrate`) and directories were
//!   restriped, learned from the MDTs' `Moved` and `Restriped` answers.
//! - `leases`: the subscription to each MDT's leases on each connection,
//!   and the answers to its recalls.
//! - `learn`: what each MDT answer teaches the cache (`crate::fresh`).
//! - `recovery`: the replay of acknowledged, uncommitted changes to an MDT
//!   that restarted (the log is `crate::replay`), and the wait for commits.
//! - `counters`: sequence numbers and the counts `loom stats` shows.
//! - `call`: one call's path through the parts above.
//!
//! The operations of `crate::meta` and `crate::io` sit above the router and
//! decide what to send; a layer that answers some of them locally and
//! sends their changes later (write-back under a directory lease) sits
//! between those and the router, not inside it.
//!
//! Sequence numbers: every call takes the next number of this client and
//! carries the lowest number still waiting for a reply (`acked_below`), so
//! servers can forget cached replies that can no longer be asked for.

mod addrs;
mod call;
mod counters;
mod learn;
mod leases;
mod moves;
mod recovery;

pub use addrs::REFRESH_MIN_INTERVAL;
pub use call::RETRY_SLICE;
pub use leases::{Invalidator, Reporter};

use crate::fresh::Fresh;
use crate::replay::ReplayLog;
use loom_proto::msg::{ClusterConfig, ReqCtx};
use loom_rpc::{ClientOptions as RpcOptions, ClusterKey};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    addrs: addrs::Addresses,
    moves: moves::Moves,
    leases: leases::Subscriptions,
    seqs: counters::Sequences,
    counters: counters::Counters,
    call_timeout: Duration,
    caching: Caching,
    /// Changes acknowledged by MDTs and not yet committed, for replay.
    pub replay: ReplayLog,
    /// What this client knows, and until when.
    pub fresh: Arc<Fresh>,
    /// The capabilities for files' objects this client holds.
    pub capas: crate::capas::Capas,
    /// The snapshot this client reads (every MDT and OST request asks
    /// for its image), if any.
    snapshot: Option<u32>,
    /// Client id of the contexts this router sends its own requests with.
    client_id: AtomicU64,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Router(mgs {})", self.addrs.mgs_addr())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain inserts and lookups cannot leave the map inconsistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Router {
    /// A router that knows only the MGS; see [`Router::fetch_config`].
    pub fn new(mgs_addr: &str, key: ClusterKey, call_timeout: Duration) -> Router {
        let rpc_opts = RpcOptions {
            call_timeout,
            ..RpcOptions::default()
        };
        Router {
            addrs: addrs::Addresses::new(mgs_addr, key, rpc_opts),
            moves: Default::default(),
            leases: Default::default(),
            seqs: Default::default(),
            counters: Default::default(),
            call_timeout,
            caching: Caching::default(),
            replay: ReplayLog::default(),
            fresh: Arc::new(Fresh::default()),
            capas: Default::default(),
            snapshot: None,
            client_id: AtomicU64::new(0),
        }
    }

    /// The MGS address.
    pub fn mgs_addr(&self) -> &str {
        self.addrs.mgs_addr()
    }

    /// The MGS's address and the cluster key (for another client of the
    /// same file system).
    pub fn mgs_and_key(&self) -> (String, ClusterKey) {
        (self.addrs.mgs_addr().to_string(), self.addrs.key().clone())
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<ClusterConfig> {
        self.addrs.config()
    }

    /// Ask the MGS for the configuration, waiting at most `timeout`, and
    /// install it.
    pub async fn fetch_config(
        &self,
        timeout: Duration,
    ) -> Result<Arc<ClusterConfig>, loom_rpc::RpcError> {
        self.addrs.fetch_config(timeout).await
    }

    /// Fetch the configuration again unless that was done very recently
    /// (many failing calls share one fetch). Failures are logged and the
    /// old configuration stays.
    pub async fn refresh(&self) {
        self.addrs.refresh().await
    }

    /// How long to trust answers; set before the first call. With leases,
    /// every connection answers recalls, and its loss drops everything
    /// known.
    pub fn set_caching(&mut self, c: Caching) {
        self.caching = c;
        self.addrs.on_connect = c
            .lease_time
            .map(|_| self.leases.on_connect(self.fresh.clone()));
    }

    /// Make connections leave from local address `src`.
    pub fn set_source(&mut self, src: Option<std::net::IpAddr>) {
        self.addrs.rpc_opts.source = src;
    }

    /// The caching in force.
    pub fn caching(&self) -> Caching {
        self.caching
    }

    /// Drop what the kernel caches with `f` when leases are recalled or
    /// lost (set once, by a mount).
    pub fn set_invalidator(&self, f: Invalidator) {
        let _ = self.leases.invalidator.set(f);
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
        self.counters.changes_in_flight()
    }

    /// Read snapshot `id` (before any request): every MDT and OST request
    /// asks for that image, and the servers refuse changes (EROFS).
    pub fn set_snapshot(&mut self, id: Option<u32>) {
        self.snapshot = id;
    }

    /// Report sizes whose leases went with `f` (set once, by the client).
    pub(crate) fn set_reporter(&self, f: Reporter) {
        let _ = self.leases.reporter.set(f);
    }

    /// Ask for the capabilities of files open here whose leases are
    /// recalled with `f` (set once, by the client).
    pub(crate) fn set_capa_keeper(&self, f: Reporter) {
        let _ = self.leases.capa_keeper.set(f);
    }

    /// Send what is not sent yet of directories written back when their
    /// leases are recalled, with `f` (set once, by the write-back layer;
    /// the recall is answered when it resolves).
    pub fn set_flusher(&self, f: Reporter) {
        let _ = self.leases.flusher.set(f);
    }

    /// Connection losses so far of the connection to `addr`, if one was
    /// made.
    pub fn losses_of(&self, addr: &str) -> Option<u64> {
        self.addrs.losses_of(addr)
    }

    /// A lookup or a stat was answered from what this client knows
    /// (leases, its own changes), with no server asked.
    pub fn lease_hit(&self) {
        self.counters.lease_hit()
    }

    /// Lookups and stats answered with no server asked so far (a mount's
    /// kernel answers more itself, from its own cache, unseen).
    pub fn lease_hits(&self) -> u64 {
        self.counters.lease_hits()
    }

    /// Requests sent so far, by operation, sorted (resends not counted).
    pub fn ops_sent(&self) -> Vec<(&'static str, u64)> {
        self.counters.ops_sent()
    }

    /// Requests sent and not answered yet.
    pub fn requests_in_flight(&self) -> u64 {
        self.seqs.waiting()
    }

    /// The transport's counters, summed over this client's connections.
    pub fn rpc_stats(&self) -> loom_rpc::RpcStats {
        self.addrs.rpc_stats()
    }

    /// Calls this client made to MDTs and to OSTs so far (each counted
    /// once, however often it was resent): what an operation costs in
    /// round trips.
    pub fn calls(&self) -> (u64, u64) {
        self.counters.calls()
    }

    fn own_ctx(&self) -> ReqCtx {
        ReqCtx {
            client_id: self.client_id.load(Ordering::Relaxed),
            ..ReqCtx::default()
        }
    }
}
