//! The accept loop and per-connection request dispatch.
//!
//! Each connection is authenticated first; a connection that proved only
//! the client key is refused every operation declared for servers only
//! (EPERM), before any service sees it. Frames are then read in a loop;
//! each request runs as its own task and its reply is queued to a writer
//! task, so replies may leave in any order (the request id pairs them). A
//! malformed frame closes only its connection, with the reason logged.

use crate::auth::{self, ClusterKey, Standing};
use crate::callback::{answer_frame, Channel};
use crate::conn::{read_frame, Bulk, ReadError};
use crate::outbox::Outbox;
use bytes::Bytes;
use loom_proto::frame::{flags, FrameHeader};
use loom_proto::msg::{self, Commit, Envelope, Reply, ReplyResult, Request};
use loom_proto::{Errno, WireError};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Requests one connection may have in flight at once: bounds the memory a
/// single peer can pin (each may carry up to 8 MiB of bulk).
pub const MAX_IN_FLIGHT_PER_CONN: usize = 64;
/// Connections served at once (authenticated or not); more wait in the
/// kernel's accept queue. Keeps a flood of connections from using up the
/// process's file descriptors, which the targets need too.
pub const MAX_CONNECTIONS: usize = 4096;
/// How long one reply may take to write: a peer that stops reading is
/// dropped rather than pinning its replies' memory forever.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(60);

const PING: u16 = Request::Ping.opcode();

/// Why a client's connection is refused an operation.
fn peers_only(req: &Request) -> WireError {
    WireError::new(
        Errno::EPERM,
        format!(
            "{} is an operation between servers; this connection holds the client key",
            req.name()
        ),
    )
}

/// What a service answers: the reply or error, the bulk that goes out
/// after the reply body (file data for reads), and for an MDT's answer to
/// a client the commit state (sent before the body, under the COMMIT flag).
#[derive(Debug)]
pub struct Answer {
    /// The reply or the error.
    pub result: ReplyResult,
    /// Bulk data after the body.
    pub bulk: Vec<u8>,
    /// Transaction number and last committed, if the service keeps them.
    pub commit: Option<Commit>,
}

impl From<(ReplyResult, Vec<u8>)> for Answer {
    fn from((result, bulk): (ReplyResult, Vec<u8>)) -> Answer {
        Answer {
            result,
            bulk,
            commit: None,
        }
    }
}

impl From<(ReplyResult, Option<Commit>)> for Answer {
    /// An MDT's answer: no bulk, and its commit state.
    fn from((result, commit): (ReplyResult, Option<Commit>)) -> Answer {
        Answer {
            result,
            bulk: Vec::new(),
            commit,
        }
    }
}

/// A service that answers requests.
pub trait Service: Send + Sync + 'static {
    /// Handle one request that came on connection `ch` (which the service
    /// may keep, to call the client back on it).
    fn handle(
        self: Arc<Self>,
        env: Envelope,
        bulk: Bulk,
        ch: &Arc<Channel>,
    ) -> impl Future<Output = Answer> + Send;
}

/// The body of an answer and its flags: the commit state first when there
/// is one, then the reply or the error.
fn answer_body(result: ReplyResult, commit: Option<Commit>) -> (u8, Vec<u8>) {
    let (fl, body) = answer_frame(result);
    match commit.map(|c| msg::encode(&c)) {
        Some(Ok(mut prefix)) => {
            prefix.extend_from_slice(&body);
            (fl | flags::COMMIT, prefix)
        }
        _ => (fl, body),
    }
}

/// Accept connections on `listener` until the task is dropped.
pub async fn serve<S: Service>(listener: TcpListener, key: ClusterKey, svc: Arc<S>) {
    let conns = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = conns.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors and the like: log, back off, go on.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let key = key.clone();
        let svc = svc.clone();
        tokio::spawn(async move {
            match connection(stream, peer, key, svc).await {
                Ok(()) => tracing::debug!(%peer, "connection closed"),
                Err(reason) => tracing::warn!(%peer, "connection dropped: {reason}"),
            }
            drop(slot);
        });
    }
}

async fn connection<S: Service>(
    mut stream: TcpStream,
    peer: SocketAddr,
    key: ClusterKey,
    svc: Arc<S>,
) -> Result<(), String> {
    let standing = auth::accept(&mut stream, &key)
        .await
        .map_err(|e| format!("handshake failed: {e}"))?;
    let (mut rd, wr) = stream.into_split();
    // Replies are written by their handler's task when the socket takes
    // them (see `outbox`), by this writer when it does not.
    let out = Arc::new(Outbox::new(wr));
    let writer = {
        let out = out.clone();
        tokio::spawn(async move {
            if let Err(e) = out.run(WRITE_TIMEOUT).await {
                tracing::warn!(%peer, "replies not written ({e}); dropping the connection");
            }
        })
    };
    let ch = Arc::new(Channel::accepted(
        out.clone(),
        peer,
        standing == Standing::Client,
    ));
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT_PER_CONN));
    let result = loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break Ok(());
        };
        let frame = tokio::select! {
            f = read_frame(&mut rd) => match f {
                Ok(f) => f,
                Err(ReadError::Closed) => break Ok(()),
                Err(e) => break Err(e.to_string()),
            },
            _ = ch.closed() => break Err("closed by the service".into()),
        };
        if frame.header.is_reply() {
            // The client's answer to a call back.
            ch.deliver((frame.header, frame.body, frame.bulk));
            continue;
        }
        let opcode = frame.header.opcode;
        let id = frame.header.request_id;
        if opcode == PING {
            // A transport-level liveness probe: answered here, at once,
            // whatever the services are busy with.
            let body = msg::encode(&Reply::Ok).unwrap_or_default();
            let h = FrameHeader::new(flags::REPLY, opcode, id, &body, &[]);
            drop(permit);
            if out.send(&h, &body, &Bytes::new()).await.is_err() {
                break Ok(());
            }
            continue;
        }
        let out = out.clone();
        let svc = svc.clone();
        let ch = ch.clone();
        if let Some(bad) = &frame.bad_bulk {
            // Damaged on the way: nothing of it runs, and the client sends
            // it again (a resend of a change is answered from the reply
            // cache, if this one ever ran).
            tracing::warn!(%peer, opcode, "request bulk {bad}; asking for it again");
            let (fl, body) = answer_body(
                Err(WireError::new(
                    Errno::EBADMSG,
                    format!("bulk data damaged on the wire ({bad}); resend"),
                )),
                None,
            );
            let h = FrameHeader::new(fl, opcode, id, &body, &[]);
            drop(permit);
            if out.send(&h, &body, &Bytes::new()).await.is_err() {
                break Ok(());
            }
            continue;
        }
        tokio::spawn(async move {
            let a: Answer = match msg::decode::<Envelope>(&frame.body) {
                Ok(env) if env.req.opcode() != opcode => (
                    Err(WireError::new(
                        Errno::EPROTO,
                        format!("header opcode {opcode} but body is {}", env.req.name()),
                    )),
                    Vec::new(),
                )
                    .into(),
                Ok(env) if standing == Standing::Client && env.req.peers_only() => {
                    tracing::warn!(%peer, "refused {} from a client connection", env.req.name());
                    (Err(peers_only(&env.req)), Vec::new()).into()
                }
                Ok(env) => {
                    let bulk = Bulk {
                        data: frame.bulk,
                        sums: frame.sums,
                    };
                    svc.handle(env, bulk, &ch).await
                }
                Err(e) => (Err(e), Vec::new()).into(),
            };
            let bulk = a.bulk;
            let (fl, body) = answer_body(a.result, a.commit);
            let h = FrameHeader::new(fl, opcode, id, &body, &bulk);
            let _ = out.send(&h, &body, &Bytes::from(bulk)).await;
            drop(permit);
        });
    };
    // Calls back on this connection fail from now on (no answer can be
    // read any more).
    let closed_by_service = ch.is_dead();
    ch.reader_gone();
    if closed_by_service {
        writer.abort();
        return result;
    }
    // Let the requests still running answer, and their replies go out,
    // before the socket closes.
    if out.is_closed() {
        writer.abort();
    } else {
        let _ = slots.acquire_many(MAX_IN_FLIGHT_PER_CONN as u32).await;
        out.close();
        let _ = writer.await;
    }
    result
}
