//! Calls from a server to a client, on the connection the client opened
//! (lease recalls). A client behind a firewall or NAT can be called back,
//! and a call back can never overtake a reply sent before it.
//!
//! Server side: every request reaches its service with the [`Channel`] of
//! its connection; the service keeps it to call the client later, or to
//! close the connection (a client that does not answer a recall loses its
//! leases by losing the connection they were granted on, and learns it
//! when it next reads from the socket).
//!
//! Client side: an [`RpcClient`](crate::RpcClient) answers the requests
//! its servers send with the [`CallbackHandler`] set on it.

use crate::client::RpcError;
use crate::outbox::Outbox;
use bytes::Bytes;
use loom_proto::frame::{flags, FrameHeader};
use loom_proto::msg::{self, Envelope, Reply, ReplyResult};
use loom_proto::WireError;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, Notify};

/// Answers a server's request to this client.
pub type CallbackHandler =
    Arc<dyn Fn(Envelope) -> Pin<Box<dyn Future<Output = ReplyResult> + Send>> + Send + Sync>;

/// A reply frame: header, body, bulk.
pub(crate) type Incoming = (FrameHeader, Vec<u8>, Vec<u8>);

/// Serial numbers of channels, unique in the process.
static SERIALS: AtomicU64 = AtomicU64::new(1);

/// The server's end of one client connection. See the module documentation.
pub struct Channel {
    serial: u64,
    out: Arc<Outbox>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Incoming>>>,
    next_id: AtomicU64,
    dead: AtomicBool,
    /// Wakes the connection's reader to end the connection.
    closing: Notify,
    /// Where the connection comes from, and whether it proved only the
    /// client key (a client's, not a server's): what nodemaps look at.
    peer: Option<(SocketAddr, bool)>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Channel({})", self.serial)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain inserts and removes: a panic cannot leave the map inconsistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Channel {
    pub(crate) fn new(out: Arc<Outbox>) -> Channel {
        Channel {
            serial: SERIALS.fetch_add(1, Ordering::Relaxed),
            out,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            dead: AtomicBool::new(false),
            closing: Notify::new(),
            peer: None,
        }
    }

    /// A server's channel to a connection accepted from `peer`; `client`
    /// if it proved only the client key.
    pub(crate) fn accepted(out: Arc<Outbox>, peer: SocketAddr, client: bool) -> Channel {
        Channel {
            peer: Some((peer, client)),
            ..Channel::new(out)
        }
    }

    /// The address of a client connection (one that proved only the
    /// client key); `None` for a server's or a tool's with the cluster
    /// key.
    pub fn client_addr(&self) -> Option<SocketAddr> {
        self.peer.and_then(|(a, client)| client.then_some(a))
    }

    /// A channel writing to `wr`, with no connection reading answers
    /// (calls through it get none): for tests of what keeps channels.
    pub fn for_tests(wr: tokio::net::tcp::OwnedWriteHalf) -> Channel {
        Channel::new(Arc::new(Outbox::new(wr)))
    }

    /// Unique in this process: tells two connections of one client apart.
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// The connection is gone (closed by either side).
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    /// Close the connection: callers waiting on it fail at once, the
    /// client finds the connection gone and resends what it waits for on
    /// a new one.
    pub fn close(&self) {
        self.ended();
        self.closing.notify_one();
    }

    /// Resolves once [`Channel::close`] was called.
    pub(crate) async fn closed(&self) {
        self.closing.notified().await
    }

    /// The connection ended: nothing more can be sent on it.
    fn ended(&self) {
        self.out.shutdown();
        self.reader_gone();
    }

    /// No answer can arrive any more: wake every caller still waiting.
    pub(crate) fn reader_gone(&self) {
        self.dead.store(true, Ordering::Release);
        lock(&self.pending).clear();
    }

    /// A reply frame from the client.
    pub(crate) fn deliver(&self, frame: Incoming) {
        let tx = lock(&self.pending).remove(&frame.0.request_id);
        if let Some(tx) = tx {
            let _ = tx.send(frame);
        }
    }

    /// Send `env` to the client and wait up to `timeout` for its answer.
    /// Never resent: the connection is the client's, and a client whose
    /// connection died has dropped whatever a callback is about.
    pub async fn call(&self, env: &Envelope, timeout: Duration) -> Result<Reply, RpcError> {
        let lost = |msg: &str| RpcError::Protocol {
            addr: format!("client channel {}", self.serial),
            msg: msg.to_string(),
        };
        if self.is_dead() {
            return Err(lost("connection closed"));
        }
        let body = msg::encode(env).map_err(RpcError::Remote)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        struct Slot<'a>(&'a Channel, u64);
        impl Drop for Slot<'_> {
            fn drop(&mut self) {
                lock(&self.0.pending).remove(&self.1);
            }
        }
        let _slot = Slot(self, id);
        let header = FrameHeader::new(0, env.req.opcode(), id, &body, &[]);
        let exchange = async {
            self.out
                .send(&header, &body, &Bytes::new())
                .await
                .map_err(|_| lost("connection closed"))?;
            rx.await
                .map_err(|_| lost("connection lost before the answer"))
        };
        let (h, rbody, _) = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| RpcError::Timeout {
                addr: format!("client channel {}", self.serial),
                timeout,
                last: "no answer".into(),
            })??;
        if h.flags & flags::ERROR != 0 {
            let e = msg::decode::<WireError>(&rbody).map_err(RpcError::Remote)?;
            return Err(RpcError::Remote(e));
        }
        msg::decode::<Reply>(&rbody).map_err(RpcError::Remote)
    }
}

/// The body of an answer and its flags (no commit state): the reply or,
/// under the ERROR flag, the error.
pub(crate) fn answer_frame(result: ReplyResult) -> (u8, Vec<u8>) {
    match result.and_then(|r| msg::encode(&r)) {
        Ok(b) => (flags::REPLY, b),
        Err(e) => (
            flags::REPLY | flags::ERROR,
            msg::encode(&e).unwrap_or_default(),
        ),
    }
}
