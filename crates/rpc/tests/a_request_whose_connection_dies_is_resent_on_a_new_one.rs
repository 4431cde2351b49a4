//! When the connection a request went out on dies, the request is sent
//! again, with the same sequence number, on a new connection, and the
//! caller gets the reply of the second sending.
mod common;
use common::*;
use loom_proto::msg::Reply;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_connection_dies_is_resent_on_a_new_one() {
    let srv = start_server().await;
    let relay = Relay::start(&srv.addr).await;
    let c = std::sync::Arc::new(client(&relay.addr));
    let (c2, env) = (c.clone(), readlink(9, 1));
    let call = tokio::spawn(async move { c2.call(&env, bytes::Bytes::new()).await });
    srv.svc.started.notified().await;
    relay.cut();
    // The resend reaches the server on a new connection and waits for
    // the release like the first one.
    wait_until(|| srv.svc.runs(9) == 2).await;
    srv.svc.release.notify_one();
    srv.svc.release.notify_one();
    let (reply, _) = call.await.expect("join").expect("reply");
    assert_eq!(reply, Reply::Link("seq 9".into()));
    let st = c.stats();
    assert_eq!(st.resends, 1, "{st:?}");
    assert_eq!(st.connects, 2, "{st:?}");
}
