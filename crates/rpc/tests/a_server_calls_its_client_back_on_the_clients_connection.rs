//! Calls back: a server sends a request to a client on the connection the
//! client opened, the client's handler answers it, and a server that
//! closes the connection makes the client see it lost.
mod common;
use common::*;
use loom_proto::msg::{ClientRequest, Envelope, Lease, Reply, ReqCtx, Request, TargetId};
use loom_proto::{Errno, Fid};
use loom_rpc::{CallbackHandler, RpcError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn recall(n: u32) -> Envelope {
    Envelope {
        target: TargetId::mdt(0),
        ctx: ReqCtx::default(),
        req: ClientRequest::Recall {
            leases: vec![Lease::Attr(Fid::new(1, n))],
        }
        .into(),
        capa: None,
        snapshot: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_calls_its_client_back_on_the_clients_connection() {
    let srv = start_server().await;
    let c = client(&srv.addr);
    let seen: Arc<Mutex<Vec<Envelope>>> = Arc::default();
    let handler: CallbackHandler = {
        let seen = seen.clone();
        Arc::new(move |env: Envelope| {
            let seen = seen.clone();
            Box::pin(async move {
                let n = match &env.req {
                    Request::Client(ClientRequest::Recall { leases }) => leases.len(),
                    _ => 0,
                };
                seen.lock().expect("lock").push(env);
                Ok(Reply::Link(format!("dropped {n}").into()))
            })
        })
    };
    c.set_callbacks(handler);
    c.call(&readlink(1, 0), bytes::Bytes::new())
        .await
        .expect("a request opens the connection");
    let ch = srv.svc.channels.lock().expect("lock")[0].clone();

    // Many calls back at once, each answered to its own caller, while the
    // client's own requests go on.
    let mut set = tokio::task::JoinSet::new();
    for n in 0..20u32 {
        let ch = ch.clone();
        set.spawn(async move { (n, ch.call(&recall(n), Duration::from_secs(10)).await) });
    }
    let (r, _) = c
        .call(&readlink(2, 0), bytes::Bytes::new())
        .await
        .expect("requests flow while calls back run");
    assert_eq!(r, Reply::Link("seq 2".into()));
    while let Some(j) = set.join_next().await {
        let (n, r) = j.expect("task");
        assert_eq!(
            r.expect("answered"),
            Reply::Link("dropped 1".into()),
            "call {n}"
        );
    }
    assert_eq!(seen.lock().expect("lock").len(), 20);
    assert_eq!(c.stats().connects, 1, "on the client's one connection");

    // A client with no handler refuses, and says so.
    let other = client(&srv.addr);
    other
        .call(&readlink(3, 0), bytes::Bytes::new())
        .await
        .expect("reply");
    let ch2 = srv
        .svc
        .channels
        .lock()
        .expect("lock")
        .last()
        .cloned()
        .expect("channel");
    match ch2.call(&recall(0), Duration::from_secs(10)).await {
        Err(RpcError::Remote(e)) => assert_eq!(e.errno, Errno::EOPNOTSUPP),
        other => panic!("expected EOPNOTSUPP, got {other:?}"),
    }

    // The server closes the connection: the client sees it lost at once,
    // and its next call goes on a new one.
    let mut losses = c.losses();
    ch.close();
    tokio::time::timeout(Duration::from_secs(10), losses.changed())
        .await
        .expect("the loss is seen")
        .expect("watch");
    assert!(ch.is_dead());
    assert!(matches!(
        ch.call(&recall(0), Duration::from_secs(1)).await,
        Err(RpcError::Protocol { .. })
    ));
    c.call(&readlink(4, 0), bytes::Bytes::new())
        .await
        .expect("a new connection");
    assert_eq!(c.stats().connects, 2);
}
