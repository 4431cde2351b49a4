//! Many requests in flight on one connection: a slow one does not hold up
//! the others, and every reply reaches its own caller.
mod common;
use common::*;
use loom_proto::msg::Reply;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_share_one_connection_and_replies_pair_by_id() {
    let srv = start_server().await;
    let c = Arc::new(client(&srv.addr));
    let slow = {
        let c = c.clone();
        tokio::spawn(async move { c.call(&readlink(1000, 1), bytes::Bytes::new()).await })
    };
    srv.svc.started.notified().await;
    let mut set = tokio::task::JoinSet::new();
    for seq in 1..=200u64 {
        let c = c.clone();
        set.spawn(async move {
            let bulk = bytes::Bytes::from(seq.to_le_bytes().repeat(1 + (seq as usize % 7) * 1000));
            let (r, back) = c
                .call(&readlink(seq, 0), bulk.clone())
                .await
                .expect("reply");
            assert_eq!(r, Reply::Link(format!("seq {seq}").into()));
            assert_eq!(back, bulk.to_vec(), "bulk of {seq} came back to its caller");
        });
    }
    while let Some(r) = set.join_next().await {
        r.expect("caller");
    }
    assert!(!slow.is_finished(), "the slow request is still waiting");
    srv.svc.release.notify_one();
    slow.await.expect("join").expect("slow reply");
    assert_eq!(c.stats().connects, 1, "all on one connection");
}
