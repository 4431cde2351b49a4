//! A client holding another key cannot complete the handshake: its call
//! fails at the deadline and the server keeps serving others.
mod common;
use common::*;
use loom_rpc::{ClusterKey, RpcClient, RpcError};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_the_wrong_key_is_refused() {
    let srv = start_server().await;
    let wrong = ClusterKey::from_bytes(b"another key of sixteen+ bytes".to_vec()).expect("key");
    let bad = RpcClient::new(&srv.addr, wrong, quick_opts());
    let e = bad
        .call_with_timeout(&readlink(1, 0), bytes::Bytes::new(), Duration::from_secs(1))
        .await
        .expect_err("wrong key");
    assert!(matches!(e, RpcError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("handshake"), "{e}");
    assert_eq!(srv.svc.total.load(std::sync::atomic::Ordering::SeqCst), 0);
    client(&srv.addr)
        .call(&readlink(2, 0), bytes::Bytes::new())
        .await
        .expect("the right key still works");
}
