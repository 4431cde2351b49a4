//! A real RPC server (over loopback TCP) with a test service, and a relay
//! between client and server that a test can cut: the fault seam for the
//! transport. Nothing here stands in for a loomfs server; these tests are
//! about the transport itself.
#![allow(dead_code)]

use loom_proto::msg::{Envelope, MdtRequest, Reply, ReqCtx, Request, TargetId};
use loom_proto::Fid;
use loom_rpc::{serve, Answer, ClientOptions, ClusterKey, RpcClient, Service};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The test key.
pub fn key() -> ClusterKey {
    ClusterKey::from_bytes(b"0123456789abcdef-test-key".to_vec()).expect("key")
}

/// Counts executions per request sequence number; a request for
/// `Readlink { fid }` with `fid.oid == 1` waits until `release` is
/// notified (a slow operation).
#[derive(Default)]
pub struct TestService {
    pub executions: Mutex<HashMap<u64, u32>>,
    pub total: AtomicU64,
    pub release: Notify,
    pub started: Notify,
    /// The connection of every request, in arrival order.
    pub channels: Mutex<Vec<Arc<loom_rpc::Channel>>>,
}

impl Service for TestService {
    async fn handle(
        self: Arc<Self>,
        env: Envelope,
        bulk: loom_rpc::Bulk,
        ch: &Arc<loom_rpc::Channel>,
    ) -> Answer {
        // The sums handed on are those of the bytes that came.
        if bulk.sums != loom_proto::chunk_sums::ChunkSums::of(&bulk.data).0 {
            return (Ok(Reply::Link("wrong chunk sums".into())), Vec::new()).into();
        }
        let bulk = bulk.data;
        self.channels.lock().expect("lock").push(ch.clone());
        *self
            .executions
            .lock()
            .expect("lock")
            .entry(env.ctx.seq)
            .or_insert(0) += 1;
        self.total.fetch_add(1, Ordering::SeqCst);
        match env.req {
            Request::Mdt(MdtRequest::Readlink { fid }) => {
                if fid.oid == 1 {
                    self.started.notify_one();
                    self.release.notified().await;
                }
                (Ok(Reply::Link(format!("seq {}", env.ctx.seq).into())), bulk).into()
            }
            _ => (Ok(Reply::Ok), bulk).into(),
        }
    }
}

impl TestService {
    pub fn runs(&self, seq: u64) -> u32 {
        self.executions
            .lock()
            .expect("lock")
            .get(&seq)
            .copied()
            .unwrap_or(0)
    }
}

/// A server on a loopback port.
pub struct TestServer {
    pub addr: String,
    pub svc: Arc<TestService>,
    task: JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn start_server() -> TestServer {
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    let svc = Arc::new(TestService::default());
    let task = tokio::spawn(serve(l, key(), svc.clone()));
    TestServer { addr, svc, task }
}

/// Relayed connections: their tasks and their "frozen" flags.
type Relayed = Arc<Mutex<Vec<(JoinHandle<()>, Arc<AtomicBool>)>>>;

/// A TCP relay to `to`. `cut()` drops every relayed connection at once;
/// `freeze()` makes them black holes: bytes are swallowed and both sockets
/// stay open, as with a hung peer. New connections are relayed again.
pub struct Relay {
    pub addr: String,
    conns: Relayed,
    task: JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
        self.cut();
    }
}

/// Copy `from` to `to` until either closes; once `frozen`, swallow.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, frozen: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if frozen.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

impl Relay {
    pub async fn start(to: &str) -> Relay {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let conns: Relayed = Arc::default();
        let (to, c2) = (to.to_string(), conns.clone());
        let task = tokio::spawn(async move {
            while let Ok((a, _)) = l.accept().await {
                let to = to.clone();
                let frozen = Arc::new(AtomicBool::new(false));
                let f2 = frozen.clone();
                let h = tokio::spawn(async move {
                    if let Ok(b) = TcpStream::connect(&to).await {
                        let (ar, aw) = a.into_split();
                        let (br, bw) = b.into_split();
                        tokio::join!(pump(ar, bw, f2.clone()), pump(br, aw, f2));
                    }
                });
                c2.lock().expect("lock").push((h, frozen));
            }
        });
        Relay { addr, conns, task }
    }

    /// Drop every relayed connection.
    pub fn cut(&self) {
        for (h, _) in self.conns.lock().expect("lock").drain(..) {
            h.abort();
        }
    }

    /// Make every relayed connection a black hole.
    pub fn freeze(&self) {
        for (_, f) in self.conns.lock().expect("lock").iter() {
            f.store(true, Ordering::SeqCst);
        }
    }
}

/// Client options with short probes, for tests.
pub fn quick_opts() -> ClientOptions {
    ClientOptions {
        connect_timeout: Duration::from_secs(2),
        call_timeout: Duration::from_secs(30),
        probe_after: Duration::from_millis(200),
        probe_timeout: Duration::from_millis(500),
        write_timeout: Duration::from_secs(5),
        source: None,
    }
}

/// An envelope with sequence `seq` asking for `Readlink` of oid `oid`.
pub fn readlink(seq: u64, oid: u32) -> Envelope {
    Envelope {
        target: TargetId::mdt(0),
        ctx: ReqCtx {
            client_id: 42,
            seq,
            ..ReqCtx::default()
        },
        req: MdtRequest::Readlink {
            fid: Fid::new(0, oid),
        }
        .into(),
        capa: None,
        snapshot: None,
    }
}

pub fn client(addr: &str) -> RpcClient {
    RpcClient::new(addr, key(), quick_opts())
}

/// Wait (up to a minute, else panic) until `cond` holds, checking every
/// few milliseconds: waiting for a condition, not for time to pass.
pub async fn wait_until(cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "condition not reached in a minute"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
