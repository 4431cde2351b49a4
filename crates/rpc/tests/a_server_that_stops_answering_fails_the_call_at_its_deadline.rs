//! A server that accepts connections but never answers (a stopped
//! process, a hung machine) fails the call with Timeout at its deadline:
//! the probe finds the connection dead, reconnecting fails the handshake,
//! and nothing hangs.
mod common;
use common::*;
use loom_rpc::RpcError;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_answering_fails_the_call_at_its_deadline() {
    // Accepts and reads, never writes: not even the handshake greeting.
    let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    let sink = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut s, _)) = l.accept().await {
            held.push(tokio::spawn(async move {
                let mut b = [0u8; 4096];
                while matches!(s.read(&mut b).await, Ok(n) if n > 0) {}
            }));
        }
    });
    let c = client(&addr);
    let start = Instant::now();
    let e = c
        .call_with_timeout(&readlink(1, 0), bytes::Bytes::new(), Duration::from_secs(3))
        .await
        .expect_err("no reply can come");
    assert!(matches!(e, RpcError::Timeout { .. }), "{e}");
    assert!(start.elapsed() >= Duration::from_secs(3));
    assert!(c.stats().connects == 0, "no handshake can complete");
    sink.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_hangs_after_the_handshake_is_found_dead_by_the_probe() {
    let srv = start_server().await;
    let relay = Relay::start(&srv.addr).await;
    let c = std::sync::Arc::new(client(&relay.addr));
    // Connect through the relay, then make the relay a black hole for
    // this connection: the server side is cut, the client side stays open.
    c.call(&readlink(1, 0), bytes::Bytes::new())
        .await
        .expect("first call");
    let env = readlink(2, 1);
    let c2 = c.clone();
    let call = tokio::spawn(async move {
        c2.call_with_timeout(&env, bytes::Bytes::new(), Duration::from_secs(20))
            .await
    });
    srv.svc.started.notified().await;
    relay.freeze();
    // No reset, no close: only the probe can tell the connection is dead.
    // The resend on a new connection must reach the server.
    wait_until(|| srv.svc.runs(2) == 2).await;
    assert!(c.stats().probes >= 1, "{:?}", c.stats());
    srv.svc.release.notify_one();
    srv.svc.release.notify_one();
    call.await.expect("join").expect("reply after the resend");
}
