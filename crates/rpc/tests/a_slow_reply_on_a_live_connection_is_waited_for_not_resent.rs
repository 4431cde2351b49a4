//! A request whose reply is slow, on a connection whose server still
//! answers pings, is waited for: it runs once on the server, however many
//! probe intervals pass.
mod common;
use common::*;
use loom_proto::msg::Reply;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reply_on_a_live_connection_is_waited_for_not_resent() {
    let srv = start_server().await;
    let c = std::sync::Arc::new(client(&srv.addr));
    let (c2, env) = (c.clone(), readlink(7, 1));
    let call = tokio::spawn(async move { c2.call(&env, bytes::Bytes::new()).await });
    srv.svc.started.notified().await;
    // Wait, however long it takes, until the client has probed the quiet
    // connection three times (a probe every 200 ms): each probe was a
    // chance to resend wrongly.
    wait_until(|| c.stats().probes >= 3).await;
    assert_eq!(srv.svc.runs(7), 1, "the slow request ran again");
    srv.svc.release.notify_one();
    let (reply, _) = call.await.expect("join").expect("reply");
    assert_eq!(reply, Reply::Link("seq 7".into()));
    assert_eq!(srv.svc.runs(7), 1);
}
