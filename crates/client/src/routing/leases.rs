//! Leases: this client's subscription to each MDT's leases, and the answers
//! to what those MDTs send back on the same connection (recalls), and what
//! a lost connection voids.
//!
//! A subscription holds for one connection: the count of the connection's
//! losses when it was made is kept, and a lost connection (whose leases
//! the MDT dropped) makes the client subscribe again on the next call.

use super::{lock, Router};
use crate::fresh::Fresh;
use bytes::Bytes;
use loom_proto::msg::{
    ClientRequest, Envelope, Lease, MdtRequest, Reply, ReqCtx, Request, TargetId,
};
use loom_proto::WireError;
use loom_proto::{Errno, Fid};
use loom_rpc::{CallbackHandler, RpcClient};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a subscription waits for the MDT.
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a subscription waits for a server it cannot reach.
const SUBSCRIBE_UNREACHABLE: Duration = Duration::from_secs(1);

/// Which connection `rpc` has: its address and lost connections so far.
fn conn_of(rpc: &RpcClient) -> (String, u64) {
    (rpc.addr(), *rpc.losses().borrow())
}
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

/// The lease layer's state, and the hooks the client and the mount set.
#[derive(Default)]
pub(super) struct Subscriptions {
    /// The MDTs this client subscribed to leases with: the address (a
    /// replicated MDT's primary moves) and its count of lost connections
    /// when it did.
    subs: Mutex<HashMap<u32, (String, u64)>>,
    /// MDTs that refused leases on a connection (its address and losses
    /// count then): not asked again on it (a client whose ids a nodemap
    /// maps).
    subs_refused: Mutex<HashMap<u32, (String, u64)>>,
    /// One subscription at a time.
    subscribing: tokio::sync::Mutex<()>,
    /// Set by a mount: drops what the kernel caches under leases.
    pub(super) invalidator: Arc<OnceLock<Invalidator>>,
    /// Set by the client: reports sizes whose leases went.
    pub(super) reporter: Arc<OnceLock<Reporter>>,
    /// Set by the client: asks for the capabilities that files open here
    /// under a recalled lease still want (`Capas::wanted`).
    pub(super) capa_keeper: Arc<OnceLock<Reporter>>,
    /// Set by the write-back layer: sends what it has not sent of the
    /// directories whose write-back leases are recalled.
    pub(super) flusher: Arc<OnceLock<Reporter>>,
}

impl Subscriptions {
    /// Sets up a new connection: it answers recalls, and its loss drops
    /// everything known under leases.
    pub(super) fn on_connect(&self, fresh: Arc<Fresh>) -> super::addrs::OnConnect {
        let handler = self.recall_handler(fresh.clone());
        let (inval, reporter) = (self.invalidator.clone(), self.reporter.clone());
        let flusher = self.flusher.clone();
        Arc::new(move |c: &RpcClient| {
            c.set_callbacks(handler.clone());
            let hooks = (inval.clone(), reporter.clone(), flusher.clone());
            watch_losses(c, fresh.clone(), hooks);
        })
    }

    /// Whether answers from MDT `mdt` on `rpc`'s connection may be leased.
    pub(super) fn subscribed(&self, mdt: u32, rpc: &RpcClient) -> bool {
        lock(&self.subs).get(&mdt) == Some(&conn_of(rpc))
    }

    /// Answers an MDT's recall: what it covers is forgotten here, then
    /// dropped by the kernel (waited for up to [`KERNEL_DROP_WAIT`]); a
    /// recalled size is reported first, if this client wrote past it.
    fn recall_handler(&self, fresh: Arc<Fresh>) -> CallbackHandler {
        let inval = self.invalidator.clone();
        let reporter = self.reporter.clone();
        let keeper = self.capa_keeper.clone();
        let flusher = self.flusher.clone();
        Arc::new(move |env: Envelope| {
            let fresh = fresh.clone();
            let inval = inval.clone();
            let reporter = reporter.clone();
            let keeper = keeper.clone();
            let flusher = flusher.clone();
            Box::pin(async move {
                match env.req {
                    Request::Client(ClientRequest::Recall { leases }) => {
                        // Directories written back: what was not sent
                        // goes first; the recalling request then sees it.
                        let dirs: Vec<Fid> = leases
                            .iter()
                            .filter_map(|l| match l {
                                Lease::WriteBack(d) => Some(*d),
                                _ => None,
                            })
                            .collect();
                        if let (false, Some(f)) = (dirs.is_empty(), flusher.get()) {
                            f(dirs).await;
                        }
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
}

/// When a connection to `c`'s server dies, the leases granted on it
/// are void: drop everything known, in the kernel too.
fn watch_losses(c: &RpcClient, fresh: Arc<Fresh>, hooks: LossHooks) {
    let (inval, reporter, flusher) = hooks;
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut losses = c.losses();
    rt.spawn(async move {
        while losses.changed().await.is_ok() {
            // Write-back leases went too: nothing more is answered
            // locally, and what waits is sent once the MDT is back.
            if let Some(f) = flusher.get() {
                tokio::spawn(f(Vec::new()));
            }
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

impl Router {
    /// Subscribe to MDT `mdt`'s leases on the connection `rpc` has now, if
    /// not done on it yet. Best effort: without it, answers are simply
    /// not leased.
    pub(super) async fn subscribe(&self, mdt: u32, rpc: &RpcClient) {
        let now = conn_of(rpc);
        if lock(&self.leases.subs).get(&mdt) == Some(&now)
            || lock(&self.leases.subs_refused).get(&mdt) == Some(&now)
        {
            return;
        }
        // One at a time: a second subscription would void the leases
        // granted after the first.
        let _one = self.leases.subscribing.lock().await;
        let losses = conn_of(rpc);
        if lock(&self.leases.subs).get(&mdt) == Some(&losses) {
            return;
        }
        let (seq, low) = self.seqs.begin();
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
        let deadline = Instant::now() + SUBSCRIBE_TIMEOUT;
        // A server that cannot be reached is left to the call that
        // follows (which may find the MDT elsewhere, see `call`).
        match rpc
            .call_replied(&env, Bytes::new(), deadline, SUBSCRIBE_UNREACHABLE)
            .await
        {
            Ok(r) if r.result.is_ok() && conn_of(rpc) == losses => {
                lock(&self.leases.subs).insert(mdt, losses);
            }
            Ok(r) => {
                if let Err(e) = &r.result {
                    if e.errno == Errno::EOPNOTSUPP && conn_of(rpc) == losses {
                        // Refused for this connection: answers are not
                        // leased, and leases are not asked again on it.
                        lock(&self.leases.subs_refused).insert(mdt, losses);
                    }
                }
                tracing::debug!("subscribing to MDT{mdt:04x}: {:?}", r.result.err())
            }
            Err(e) => tracing::debug!("subscribing to MDT{mdt:04x}: {e}"),
        }
    }
}

/// The files whose size leases are among `leases`.
/// What a lost connection runs: the invalidator, the size reporter, the
/// write-back flusher.
type LossHooks = (
    Arc<OnceLock<Invalidator>>,
    Arc<OnceLock<Reporter>>,
    Arc<OnceLock<Reporter>>,
);

fn sized(leases: &[Lease]) -> Vec<Fid> {
    leases
        .iter()
        .filter_map(|l| match l {
            Lease::Size(f) => Some(*f),
            _ => None,
        })
        .collect()
}
