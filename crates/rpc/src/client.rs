//! The client side: one connection per server, many requests in flight.
//!
//! A call is resent on a new connection when its connection breaks, with
//! backoff, until the call's deadline; then it fails with
//! [`RpcError::Timeout`], which callers turn into EIO. So an operation issued
//! while a server is down completes once the server is back, or fails after
//! the configured timeout, and never hangs forever.

use crate::auth::{self, ClusterKey};
use crate::conn::{read_frame, write_frame};
use loom_proto::frame::{flags, FrameHeader};
use loom_proto::msg::{self, Envelope, Reply};
use loom_proto::{Errno, WireError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// Tunables of a client.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// How long one connection attempt may take.
    pub connect_timeout: Duration,
    /// How long a call may take in all, across resends, before it fails.
    pub call_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(3),
            call_timeout: Duration::from_secs(300),
        }
    }
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// The server answered with an error.
    #[error("{0}")]
    Remote(WireError),
    /// No answer before the call's deadline (server down or unreachable).
    #[error("no reply from {addr} within {timeout:?}: {last}")]
    Timeout {
        /// Server address.
        addr: String,
        /// The deadline.
        timeout: Duration,
        /// The last failure seen.
        last: String,
    },
    /// The reply could not be understood.
    #[error("protocol error from {addr}: {msg}")]
    Protocol {
        /// Server address.
        addr: String,
        /// What was wrong.
        msg: String,
    },
}

impl RpcError {
    /// The errno to report to the application.
    pub fn errno(&self) -> Errno {
        match self {
            RpcError::Remote(e) => e.errno,
            RpcError::Timeout { .. } => Errno::EIO,
            RpcError::Protocol { .. } => Errno::EIO,
        }
    }
}

impl From<RpcError> for WireError {
    fn from(e: RpcError) -> WireError {
        match e {
            RpcError::Remote(w) => w,
            other => WireError::new(other.errno(), other.to_string()),
        }
    }
}

type Pending = Mutex<HashMap<u64, oneshot::Sender<(FrameHeader, Vec<u8>, Vec<u8>)>>>;

struct Conn {
    wr: tokio::sync::Mutex<OwnedWriteHalf>,
    pending: Arc<Pending>,
    dead: Arc<AtomicBool>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// A client of one server address.
pub struct RpcClient {
    addr: Mutex<String>,
    key: ClusterKey,
    opts: ClientOptions,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for RpcClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RpcClient({})", self.addr())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding these locks cannot leave them inconsistent
    // (plain inserts and removes), so poisoning is ignored.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RpcClient {
    /// A client for `addr`; connects lazily on the first call.
    pub fn new(addr: impl Into<String>, key: ClusterKey, opts: ClientOptions) -> RpcClient {
        RpcClient {
            addr: Mutex::new(addr.into()),
            key,
            opts,
            conn: tokio::sync::Mutex::new(None),
            next_id: AtomicU64::new(1),
        }
    }

    /// The server address.
    pub fn addr(&self) -> String {
        lock(&self.addr).clone()
    }

    /// Point the client at a new address (the server moved); the next call
    /// reconnects.
    pub fn set_addr(&self, addr: &str) {
        let mut a = lock(&self.addr);
        if *a != addr {
            *a = addr.to_string();
        }
    }

    /// The options in force.
    pub fn options(&self) -> &ClientOptions {
        &self.opts
    }

    async fn connection(&self) -> Result<Arc<Conn>, String> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.dead.load(Ordering::Acquire) {
                return Ok(c.clone());
            }
        }
        *slot = None;
        let addr = self.addr();
        let mut stream = tokio::time::timeout(self.opts.connect_timeout, TcpStream::connect(&addr))
            .await
            .map_err(|_| format!("connect to {addr} timed out"))?
            .map_err(|e| format!("connect to {addr}: {e}"))?;
        let _ = stream.set_nodelay(true);
        auth::connect(&mut stream, &self.key)
            .await
            .map_err(|e| format!("handshake with {addr}: {e}"))?;
        let (mut rd, wr) = stream.into_split();
        let pending: Arc<Pending> = Arc::new(Mutex::new(HashMap::new()));
        let dead = Arc::new(AtomicBool::new(false));
        let (p2, d2) = (pending.clone(), dead.clone());
        let reader = tokio::spawn(async move {
            loop {
                match read_frame(&mut rd).await {
                    Ok(f) if f.header.is_reply() => {
                        let tx = lock(&p2).remove(&f.header.request_id);
                        if let Some(tx) = tx {
                            let _ = tx.send((f.header, f.body, f.bulk));
                        }
                    }
                    Ok(_) => {
                        tracing::warn!(
                            "server sent a request frame to a client; dropping connection"
                        );
                        break;
                    }
                    Err(e) => {
                        tracing::debug!("connection lost: {e}");
                        break;
                    }
                }
            }
            d2.store(true, Ordering::Release);
            // Dropping the senders wakes every caller still waiting.
            lock(&p2).clear();
        });
        let c = Arc::new(Conn {
            wr: tokio::sync::Mutex::new(wr),
            pending,
            dead,
            reader,
        });
        *slot = Some(c.clone());
        Ok(c)
    }

    async fn try_once(
        &self,
        body: &[u8],
        opcode: u16,
        bulk: &[u8],
        remaining: Duration,
    ) -> Result<(FrameHeader, Vec<u8>, Vec<u8>), String> {
        let c = self.connection().await?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&c.pending).insert(id, tx);
        let h = FrameHeader::new(0, opcode, id, body, bulk);
        {
            let mut wr = c.wr.lock().await;
            if let Err(e) = write_frame(&mut *wr, &h, body, bulk).await {
                c.dead.store(true, Ordering::Release);
                lock(&c.pending).remove(&id);
                return Err(format!("send: {e}"));
            }
        }
        match tokio::time::timeout(remaining, rx).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(_)) => Err("connection lost before the reply".into()),
            Err(_) => {
                lock(&c.pending).remove(&id);
                Err("timed out waiting for the reply".into())
            }
        }
    }

    /// Send `env` with `bulk`; returns the reply and its bulk. Resends on
    /// a fresh connection after a failure until `call_timeout` has passed.
    pub async fn call(&self, env: &Envelope, bulk: &[u8]) -> Result<(Reply, Vec<u8>), RpcError> {
        self.call_with_timeout(env, bulk, self.opts.call_timeout)
            .await
    }

    /// As [`RpcClient::call`] with an explicit deadline.
    pub async fn call_with_timeout(
        &self,
        env: &Envelope,
        bulk: &[u8],
        timeout: Duration,
    ) -> Result<(Reply, Vec<u8>), RpcError> {
        let body = msg::encode(env).map_err(RpcError::Remote)?;
        let opcode = env.req.opcode();
        let start = Instant::now();
        let mut backoff = Duration::from_millis(20);
        loop {
            let remaining = timeout.saturating_sub(start.elapsed());
            let last = match self.try_once(&body, opcode, bulk, remaining).await {
                Ok((h, rbody, rbulk)) => return self.decode_reply(h, &rbody, rbulk),
                Err(e) => e,
            };
            let remaining = timeout.saturating_sub(start.elapsed());
            if remaining.is_zero() {
                return Err(RpcError::Timeout {
                    addr: self.addr(),
                    timeout,
                    last,
                });
            }
            tracing::debug!(addr = %self.addr(), "{} failed ({last}); retrying", env.req.name());
            // Back off between reconnect attempts so a down server is not
            // hammered; capped so recovery is noticed within a second.
            tokio::time::sleep(backoff.min(remaining)).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }

    fn decode_reply(
        &self,
        h: FrameHeader,
        body: &[u8],
        bulk: Vec<u8>,
    ) -> Result<(Reply, Vec<u8>), RpcError> {
        if h.flags & flags::ERROR != 0 {
            let e: WireError = msg::decode(body).map_err(|e| RpcError::Protocol {
                addr: self.addr(),
                msg: e.to_string(),
            })?;
            return Err(RpcError::Remote(e));
        }
        let r: Reply = msg::decode(body).map_err(|e| RpcError::Protocol {
            addr: self.addr(),
            msg: e.to_string(),
        })?;
        Ok((r, bulk))
    }
}
