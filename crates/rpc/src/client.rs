//! The client side: one connection per server, many requests in flight.
//!
//! Each connection has a reader task (replies to waiting callers, matched
//! by request id) and a writer task that owns the socket's write half.
//! Callers queue whole frames to the writer, so a caller that gives up (or
//! is cancelled) mid-call never leaves half a frame on the stream.
//!
//! When is a request sent again? Only when its connection is gone: closed,
//! broken, or found dead by a liveness probe (a transport ping that gets no
//! answer). A slow reply on a live connection is waited for, never resent,
//! because the server may be executing it; a resend of a request the server
//! already applied is recognised by the server's reply cache, keyed by the
//! request's client id and sequence number, which a resend keeps.
//!
//! A call fails with [`RpcError::Timeout`] at its deadline, or with
//! [`RpcError::Unreachable`] when no connection could be made for the
//! `unreachable_after` the caller gave (so that it can look the server up
//! again, in case it moved); callers turn both into EIO eventually. An
//! operation issued while a server is down completes once it is back, or
//! fails after the configured timeout, and never hangs forever.

use crate::auth::{self, ClusterKey};
use crate::callback::{answer_frame, CallbackHandler};
use crate::conn::read_frame;
use crate::outbox::{Closed, Outbox};
use bytes::Bytes;
use loom_proto::frame::{flags, FrameHeader};
use loom_proto::msg::{self, Commit, Envelope, Reply, Request, TargetId};
use loom_proto::{Errno, WireError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

/// Tunables of a client.
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// How long one connection attempt (TCP connect plus handshake) may take.
    pub connect_timeout: Duration,
    /// How long a call may take in all, across resends, before it fails.
    pub call_timeout: Duration,
    /// How long a request may wait for its reply before the connection is
    /// probed with a ping.
    pub probe_after: Duration,
    /// How long a probe may take before the connection is declared dead
    /// (and its requests are resent on a new one).
    pub probe_timeout: Duration,
    /// How long one frame may take to write before the connection is
    /// declared dead (a peer that stopped reading).
    pub write_timeout: Duration,
    /// The local address connections leave from (a client node with
    /// several networks picks the one its servers know it by); `None`:
    /// the system's choice.
    pub source: Option<std::net::IpAddr>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connect_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(300),
            probe_after: Duration::from_secs(10),
            probe_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(60),
            source: None,
        }
    }
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// The server answered with an error.
    #[error("{0}")]
    Remote(WireError),
    /// No answer before the call's deadline (server down, stuck or
    /// unreachable).
    #[error("no reply from {addr} within {timeout:?}: {last}")]
    Timeout {
        /// Server address.
        addr: String,
        /// The deadline.
        timeout: Duration,
        /// The last failure seen.
        last: String,
    },
    /// No connection could be made for the caller's `unreachable_after`;
    /// the request is not outstanding anywhere. The caller may look the
    /// target's address up again and call again.
    #[error("cannot reach {addr}: {last}")]
    Unreachable {
        /// Server address.
        addr: String,
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
            RpcError::Timeout { .. } | RpcError::Unreachable { .. } => Errno::EIO,
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

/// A reply as the reader hands it to its caller.
type Incoming = (FrameHeader, Vec<u8>, Vec<u8>);

/// How many times in a row a call is sent again after its bulk data (or
/// its reply's) was damaged on the wire, before it fails: a link that
/// damages every transfer is broken, not noisy.
const MAX_DAMAGED: u32 = 5;
/// A reply, or why its bulk data cannot be used (damaged on the wire).
type Delivered = Result<Incoming, String>;
type Pending = Mutex<HashMap<u64, oneshot::Sender<Delivered>>>;

/// One live connection.
struct Conn {
    /// Serial number, for logs.
    serial: u64,
    state: Arc<ConnState>,
}

/// What the reader, the writer and the callers share.
struct ConnState {
    /// Where requests are written.
    out: Arc<Outbox>,
    pending: Pending,
    dead: AtomicBool,
    /// When a frame last arrived, as ms since `born`.
    last_rx_ms: AtomicU64,
    born: Instant,
    /// Serialises probes: one ping at a time per connection.
    probing: tokio::sync::Mutex<()>,
    tasks: OnceLock<[AbortHandle; 2]>,
    /// The client's count of lost connections, bumped when this one dies.
    losses: Arc<tokio::sync::watch::Sender<u64>>,
}

impl ConnState {
    /// Mark the connection dead, stop its tasks and wake every caller
    /// still waiting on it (they resend on a new connection).
    fn kill(&self) {
        if self.dead.swap(true, Ordering::AcqRel) {
            return;
        }
        self.out.close();
        if let Some(tasks) = self.tasks.get() {
            for t in tasks {
                t.abort();
            }
        }
        // Dropping the senders wakes the callers.
        lock(&self.pending).clear();
        self.losses.send_modify(|n| *n += 1);
    }

    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::Acquire)
    }

    fn touch(&self) {
        self.last_rx_ms
            .store(self.born.elapsed().as_millis() as u64, Ordering::Release);
    }

    fn quiet_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_rx_ms.load(Ordering::Acquire));
        self.born.elapsed().saturating_sub(last)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.state.kill();
    }
}

/// Why one exchange on one connection did not produce a reply.
enum ExchangeError {
    /// The connection died; the request may or may not have been applied.
    Lost(String),
    /// The call's deadline passed.
    Deadline(String),
    /// The reply's bulk data was damaged on the wire.
    Damaged(String),
}

/// Counters of one [`RpcClient`], for statistics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RpcStats {
    /// Connections made (the first one included).
    pub connects: u64,
    /// Liveness probes sent on quiet connections.
    pub probes: u64,
    /// Requests sent again after their connection died, or after their
    /// bulk data (or their reply's) was damaged on the wire.
    pub resends: u64,
    /// Bulk transfers damaged on the wire (either way) and sent again.
    pub damaged: u64,
}

/// A server's whole answer to one call.
#[derive(Debug)]
pub struct Replied {
    /// The reply, or the error the server sent.
    pub result: Result<Reply, WireError>,
    /// Bulk data after the body.
    pub bulk: Vec<u8>,
    /// The MDT's commit state, when it sent one.
    pub commit: Option<Commit>,
}

/// A client of one server address.
pub struct RpcClient {
    addr: Mutex<String>,
    key: ClusterKey,
    opts: ClientOptions,
    conn: tokio::sync::Mutex<Option<Arc<Conn>>>,
    next_id: AtomicU64,
    next_serial: AtomicU64,
    probes: AtomicU64,
    resends: AtomicU64,
    damaged: AtomicU64,
    losses: Arc<tokio::sync::watch::Sender<u64>>,
    /// Answers the servers' calls back; without one they are refused.
    callbacks: Arc<Mutex<Option<CallbackHandler>>>,
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
            next_serial: AtomicU64::new(1),
            probes: AtomicU64::new(0),
            resends: AtomicU64::new(0),
            damaged: AtomicU64::new(0),
            losses: Arc::new(tokio::sync::watch::channel(0).0),
            callbacks: Arc::new(Mutex::new(None)),
        }
    }

    /// Answer the requests servers send on this client's connections
    /// with `h` (lease recalls).
    pub fn set_callbacks(&self, h: CallbackHandler) {
        *lock(&self.callbacks) = Some(h);
    }

    /// Drop the connection, if there is one, as if it had died: callers
    /// waiting on it send again on a new one, and watchers of
    /// [`RpcClient::losses`] learn of it (what they keep under it goes).
    /// For a server that stopped serving without closing its connections
    /// (a replicated target's primary replaced while stopped).
    pub async fn forget_connection(&self) {
        if let Some(c) = self.conn.lock().await.take() {
            c.state.kill();
        }
    }

    /// Counts the connections that died; a watcher learns at once that the
    /// server may have restarted (the MDT's clients reconnect to replay).
    pub fn losses(&self) -> tokio::sync::watch::Receiver<u64> {
        self.losses.subscribe()
    }

    /// What this client has done so far.
    pub fn stats(&self) -> RpcStats {
        RpcStats {
            connects: self.next_serial.load(Ordering::Relaxed) - 1,
            probes: self.probes.load(Ordering::Relaxed),
            resends: self.resends.load(Ordering::Relaxed),
            damaged: self.damaged.load(Ordering::Relaxed),
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

    /// The live connection, or a new one.
    async fn connection(&self) -> Result<Arc<Conn>, String> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.state.is_dead() {
                return Ok(c.clone());
            }
        }
        *slot = None;
        let addr = self.addr();
        let stream = tokio::time::timeout(self.opts.connect_timeout, async {
            let mut s = match self.opts.source {
                None => TcpStream::connect(&addr).await,
                Some(src) => connect_from(src, &addr).await,
            }
            .map_err(|e| format!("connect to {addr}: {e}"))?;
            auth::connect(&mut s, &self.key)
                .await
                .map_err(|e| format!("handshake with {addr}: {e}"))?;
            Ok::<_, String>(s)
        })
        .await
        .map_err(|_| format!("connect to {addr} timed out"))??;
        let _ = stream.set_nodelay(true);
        let (mut rd, wr) = stream.into_split();
        let out = Arc::new(Outbox::new(wr));
        let state = Arc::new(ConnState {
            out: out.clone(),
            pending: Mutex::new(HashMap::new()),
            dead: AtomicBool::new(false),
            last_rx_ms: AtomicU64::new(0),
            born: Instant::now(),
            probing: tokio::sync::Mutex::new(()),
            tasks: OnceLock::new(),
            losses: self.losses.clone(),
        });
        let st = state.clone();
        let raddr = addr.clone();
        let callbacks = self.callbacks.clone();
        let reader = tokio::spawn(async move {
            loop {
                match read_frame(&mut rd).await {
                    Ok(f) if f.header.is_reply() => {
                        st.touch();
                        let tx = lock(&st.pending).remove(&f.header.request_id);
                        if let Some(tx) = tx {
                            let _ = tx.send(match f.bad_bulk {
                                None => Ok((f.header, f.body, f.bulk)),
                                Some(bad) => Err(format!("reply bulk {bad}")),
                            });
                        }
                    }
                    Ok(f) => {
                        // A call back: answered in a task of its own, so
                        // replies keep flowing while it runs.
                        st.touch();
                        let handler = lock(&callbacks).clone();
                        let out = st.out.clone();
                        tokio::spawn(async move {
                            let result = match (msg::decode::<Envelope>(&f.body), handler) {
                                (Ok(env), Some(h)) => h(env).await,
                                (Ok(env), None) => Err(WireError::new(
                                    Errno::EOPNOTSUPP,
                                    format!("this client takes no {} calls", env.req.name()),
                                )),
                                (Err(e), _) => Err(e),
                            };
                            let (fl, body) = answer_frame(result);
                            let h = FrameHeader::new(
                                fl,
                                f.header.opcode,
                                f.header.request_id,
                                &body,
                                &[],
                            );
                            let _ = out.send(&h, &body, &Bytes::new()).await;
                        });
                    }
                    Err(e) => {
                        tracing::debug!(addr = %raddr, "connection lost: {e}");
                        break;
                    }
                }
            }
            st.kill();
        });
        let (st, write_timeout, waddr) = (state.clone(), self.opts.write_timeout, addr.clone());
        let w = tokio::spawn(async move {
            if let Err(e) = out.run(write_timeout).await {
                tracing::info!(addr = %waddr, "connection dropped: {e}");
            }
            st.kill();
        });
        let _ = state.tasks.set([reader.abort_handle(), w.abort_handle()]);
        let serial = self.next_serial.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%addr, serial, "connected");
        let c = Arc::new(Conn { serial, state });
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Queue one request on `c` and wait for its reply until `deadline`,
    /// probing the connection when the reply is slow.
    async fn exchange(
        &self,
        c: &Conn,
        (opcode, phase): (u16, u16),
        body: &[u8],
        bulk: &Bytes,
        deadline: Instant,
    ) -> Result<Incoming, ExchangeError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = oneshot::channel();
        lock(&c.state.pending).insert(id, tx);
        // Removes our slot however this function ends (reply, deadline,
        // or the caller dropping the future).
        struct Slot<'a>(&'a ConnState, u64);
        impl Drop for Slot<'_> {
            fn drop(&mut self) {
                lock(&self.0.pending).remove(&self.1);
            }
        }
        let _slot = Slot(&c.state, id);
        let header = FrameHeader::new(0, opcode, id, body, bulk).with_bulk_phase(phase);
        match tokio::time::timeout_at(deadline.into(), c.state.out.send(&header, body, bulk)).await
        {
            Ok(Ok(())) => {}
            Ok(Err(Closed)) => return Err(ExchangeError::Lost("connection closed".into())),
            Err(_) => return Err(ExchangeError::Deadline("send queue full".into())),
        }
        loop {
            let wake = (Instant::now() + self.opts.probe_after).min(deadline);
            match tokio::time::timeout_at(wake.into(), &mut rx).await {
                Ok(Ok(Ok(r))) => return Ok(r),
                Ok(Ok(Err(bad))) => return Err(ExchangeError::Damaged(bad)),
                Ok(Err(_)) => {
                    return Err(ExchangeError::Lost(
                        "connection lost before the reply".into(),
                    ))
                }
                Err(_) if Instant::now() >= deadline => {
                    return Err(ExchangeError::Deadline(
                        "timed out waiting for the reply".into(),
                    ))
                }
                Err(_) => self.probe(c).await,
            }
        }
    }

    /// Check that a quiet connection still has a live server behind it: a
    /// transport ping must come back within `probe_timeout`, else the
    /// connection is killed and its callers resend on a new one. A server
    /// busy with a long request still answers pings at once.
    async fn probe(&self, c: &Conn) {
        let _one = c.state.probing.lock().await;
        if c.state.is_dead() || c.state.quiet_for() < self.opts.probe_after {
            return;
        }
        let body = match msg::encode(&Envelope {
            target: TargetId::MGS,
            ctx: Default::default(),
            req: Request::Ping,
            capa: None,
            snapshot: None,
        }) {
            Ok(b) => b,
            Err(_) => return,
        };
        let deadline = Instant::now() + self.opts.probe_timeout;
        let opcode = Request::Ping.opcode();
        self.probes.fetch_add(1, Ordering::Relaxed);
        // A ping is never resent: it only asks whether this connection lives.
        let alive = self.exchange_once(c, opcode, &body, deadline).await.is_ok();
        if !alive {
            tracing::warn!(
                addr = %self.addr(),
                serial = c.serial,
                "no answer to a ping within {:?}; reconnecting",
                self.opts.probe_timeout
            );
            c.state.kill();
        }
    }

    /// One exchange with no probing (the probe's own ping).
    async fn exchange_once(
        &self,
        c: &Conn,
        opcode: u16,
        body: &[u8],
        deadline: Instant,
    ) -> Result<Incoming, String> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&c.state.pending).insert(id, tx);
        let header = FrameHeader::new(0, opcode, id, body, &[]);
        let res = tokio::time::timeout_at(deadline.into(), async {
            c.state
                .out
                .send(&header, body, &Bytes::new())
                .await
                .map_err(|_| "closed".to_string())?;
            rx.await.map_err(|_| "lost".to_string())
        })
        .await;
        lock(&c.state.pending).remove(&id);
        res.map_err(|_| "timed out".to_string())??
    }

    /// Send `env` with `bulk`; returns the reply and its bulk. See
    /// [`RpcClient::call_until`]; the deadline is the client's
    /// `call_timeout`.
    pub async fn call(&self, env: &Envelope, bulk: Bytes) -> Result<(Reply, Vec<u8>), RpcError> {
        self.call_with_timeout(env, bulk, self.opts.call_timeout)
            .await
    }

    /// As [`RpcClient::call`] with an explicit timeout.
    pub async fn call_with_timeout(
        &self,
        env: &Envelope,
        bulk: Bytes,
        timeout: Duration,
    ) -> Result<(Reply, Vec<u8>), RpcError> {
        self.call_until(env, bulk, Instant::now() + timeout, timeout)
            .await
    }

    /// Send `env` with `bulk` and wait for the reply until `deadline`.
    /// The request is sent again only on a new connection after its
    /// connection died. Fails with [`RpcError::Unreachable`] once no
    /// connection could be made for `unreachable_after` (nothing of this
    /// call is then outstanding), or [`RpcError::Timeout`] at the deadline.
    pub async fn call_until(
        &self,
        env: &Envelope,
        bulk: Bytes,
        deadline: Instant,
        unreachable_after: Duration,
    ) -> Result<(Reply, Vec<u8>), RpcError> {
        let r = self
            .call_replied(env, bulk, deadline, unreachable_after)
            .await?;
        match r.result {
            Ok(reply) => Ok((reply, r.bulk)),
            Err(e) => Err(RpcError::Remote(e)),
        }
    }

    /// As [`RpcClient::call_until`], with the server's answer whole: an
    /// error the server sent comes back as `Ok` with its commit state (an
    /// MDT's commit state rides on errors too).
    pub async fn call_replied(
        &self,
        env: &Envelope,
        bulk: Bytes,
        deadline: Instant,
        unreachable_after: Duration,
    ) -> Result<Replied, RpcError> {
        let body = msg::encode(env).map_err(RpcError::Remote)?;
        // A frame the server would drop (and this client would send
        // again and again): refused here, with its sizes.
        let (max_body, max_bulk) = (
            loom_proto::frame::MAX_BODY as usize,
            loom_proto::frame::MAX_BULK as usize,
        );
        if body.len() > max_body || bulk.len() > max_bulk {
            return Err(RpcError::Remote(WireError::new(
                Errno::EINVAL,
                format!(
                    "{}: a request of {} bytes and {} of bulk exceeds the frame's limits ({max_body} and {max_bulk})",
                    env.req.name(),
                    body.len(),
                    bulk.len()
                ),
            )));
        }
        let opcode = env.req.opcode();
        let start = Instant::now();
        let timeout = deadline.saturating_duration_since(start);
        let mut backoff = Duration::from_millis(20);
        let mut down_since: Option<Instant> = None;
        let mut damaged = 0;
        loop {
            let last = match self.connection().await {
                Ok(c) => {
                    down_since = None;
                    let sent = self
                        .exchange(&c, (opcode, env.req.bulk_phase()), &body, &bulk, deadline)
                        .await;
                    // Bulk data damaged on the wire, either way: send the
                    // request again on the same connection, a few times.
                    let bad = match &sent {
                        Err(ExchangeError::Damaged(why)) => Some(why.clone()),
                        Ok((h, rbody, _)) if !bulk.is_empty() && h.flags & flags::ERROR != 0 => {
                            match self.decode_reply(*h, rbody, Vec::new()) {
                                Ok(Replied { result: Err(w), .. }) if w.errno == Errno::EBADMSG => {
                                    Some(w.msg)
                                }
                                _ => None,
                            }
                        }
                        _ => None,
                    };
                    if let Some(why) = bad {
                        self.damaged.fetch_add(1, Ordering::Relaxed);
                        damaged += 1;
                        tracing::warn!(addr = %self.addr(), "{}: {why}; sending it again", env.req.name());
                        if damaged > MAX_DAMAGED {
                            return Err(RpcError::Protocol {
                                addr: self.addr(),
                                msg: format!(
                                    "bulk data damaged on the wire {damaged} times in a row: {why}"
                                ),
                            });
                        }
                        self.resends.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    match sent {
                        Ok((h, rbody, rbulk)) => return self.decode_reply(h, &rbody, rbulk),
                        Err(ExchangeError::Damaged(_)) => continue,
                        Err(ExchangeError::Deadline(last)) => {
                            return Err(RpcError::Timeout {
                                addr: self.addr(),
                                timeout,
                                last,
                            })
                        }
                        Err(ExchangeError::Lost(last)) => {
                            // Resend at once on a new connection: the
                            // server's reply cache answers a resend of
                            // something it already did.
                            backoff = Duration::from_millis(20);
                            self.resends.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(addr = %self.addr(), "{}: {last}; resending", env.req.name());
                            continue;
                        }
                    }
                }
                Err(e) => e,
            };
            let now = Instant::now();
            let since = *down_since.get_or_insert(now);
            if now >= deadline {
                return Err(RpcError::Timeout {
                    addr: self.addr(),
                    timeout,
                    last,
                });
            }
            if now.duration_since(since) >= unreachable_after {
                return Err(RpcError::Unreachable {
                    addr: self.addr(),
                    last,
                });
            }
            tracing::debug!(addr = %self.addr(), "{} waits for the server ({last})", env.req.name());
            // Back off between reconnect attempts so a down server is not
            // hammered; capped so recovery is noticed within a second.
            let pause = backoff.min(deadline.saturating_duration_since(now));
            tokio::time::sleep(pause).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }

    fn decode_reply(
        &self,
        h: FrameHeader,
        body: &[u8],
        bulk: Vec<u8>,
    ) -> Result<Replied, RpcError> {
        let bad = |e: WireError| RpcError::Protocol {
            addr: self.addr(),
            msg: e.to_string(),
        };
        let (commit, body) = if h.flags & flags::COMMIT != 0 {
            let (c, rest) = msg::decode_prefix::<Commit>(body).map_err(bad)?;
            (Some(c), rest)
        } else {
            (None, body)
        };
        let result = if h.flags & flags::ERROR != 0 {
            Err(msg::decode::<WireError>(body).map_err(bad)?)
        } else {
            Ok(msg::decode::<Reply>(body).map_err(bad)?)
        };
        Ok(Replied {
            result,
            bulk,
            commit,
        })
    }
}

/// Connect to `addr` from local address `src`.
async fn connect_from(src: std::net::IpAddr, addr: &str) -> std::io::Result<TcpStream> {
    let mut last = None;
    for to in tokio::net::lookup_host(addr).await? {
        if to.is_ipv4() != src.is_ipv4() {
            continue;
        }
        let sock = if src.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        sock.bind(std::net::SocketAddr::new(src, 0))?;
        match sock.connect(to).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            format!("{addr} has no address of the family of {src}"),
        )
    }))
}
