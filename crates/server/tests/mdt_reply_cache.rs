//! The MDT's reply cache: a change resent by a client whose connection
//! died is answered with the reply of its first execution, never done
//! twice, also across an MDT restart; records the client has acknowledged
//! are forgotten.
mod common;
use common::*;
use loom_proto::msg::{FileKind, MdtRequest, Reply};
use loom_proto::{Errno, Fid};

const ROOT: Fid = Fid::ROOT;
const CLIENT: u64 = 0x77;

fn create(name: &str) -> MdtRequest {
    MdtRequest::Create {
        parent: ROOT,
        name: name.into(),
        kind: FileKind::File,
        perm: 0o644,
        rdev: 0,
        stripe: None,
    }
}

fn unlink(name: &str) -> MdtRequest {
    MdtRequest::Unlink {
        parent: ROOT,
        name: name.into(),
        keep_orphan: false,
    }
}

fn errno(r: Result<Reply, loom_proto::WireError>) -> Errno {
    r.expect_err("must fail").errno
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resent_create_gets_the_first_reply_not_eexist() {
    let c = Cluster::start().await;
    let first = c.call_as(CLIENT, 5, 5, create("f")).await.expect("create");
    let again = c.call_as(CLIENT, 5, 5, create("f")).await.expect("resend");
    assert_eq!(first, again);
    assert_eq!(c.readdir_all(ROOT).await.len(), 1);
    // A new request (another sequence number) for the same name: EEXIST.
    assert_eq!(
        errno(c.call_as(CLIENT, 6, 5, create("f")).await),
        Errno::EEXIST
    );
    // So is the same sequence number from another client.
    assert_eq!(
        errno(c.call_as(CLIENT + 1, 5, 5, create("f")).await),
        Errno::EEXIST
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_says_what_it_did_and_its_resend_says_nothing_more() {
    let c = Cluster::start().await;
    let r = c
        .call_as_full(CLIENT, 5, 5, create("f"))
        .await
        .expect("create");
    let (reply, effects) = r.split();
    let Reply::Entry { attr, .. } = reply else {
        panic!("create answered {reply:?}");
    };
    let e = effects.expect("a client's change comes with its effects");
    assert_eq!(e.names, vec![(ROOT, "f".into(), Some(attr.fid))]);
    let fids: Vec<Fid> = e.attrs.iter().map(|a| a.fid).collect();
    assert!(fids.contains(&attr.fid) && fids.contains(&ROOT), "{fids:?}");
    let root = e.attrs.iter().find(|a| a.fid == ROOT).expect("root");
    assert_eq!(
        root.mtime, attr.ctime,
        "the directory as the create left it"
    );
    assert!(e.removed.is_empty());
    // A resend is answered from the reply cache: the answer, no effects
    // (the client then drops what it knew).
    let again = c
        .call_as_full(CLIENT, 5, 5, create("f"))
        .await
        .expect("resend");
    assert!(again.split().1.is_none());

    let r = c
        .call_as_full(CLIENT, 6, 6, unlink("f"))
        .await
        .expect("unlink");
    let e = r.split().1.expect("effects");
    assert_eq!(e.names, vec![(ROOT, "f".into(), None)]);
    assert_eq!(e.removed, vec![attr.fid]);
    // A read has none.
    let r = c
        .call_as_full(CLIENT, 7, 7, MdtRequest::GetAttr { fid: ROOT })
        .await
        .expect("getattr");
    assert!(matches!(r, Reply::Attr(_)), "{r:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resent_unlink_answers_ok_not_enoent() {
    let c = Cluster::start().await;
    c.create(ROOT, "gone").await;
    assert_eq!(c.call_as(CLIENT, 8, 8, unlink("gone")).await, Ok(Reply::Ok));
    assert_eq!(c.call_as(CLIENT, 8, 8, unlink("gone")).await, Ok(Reply::Ok));
    assert_eq!(
        errno(c.call_as(CLIENT, 9, 8, unlink("gone")).await),
        Errno::ENOENT
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_recorded_reply_survives_an_mdt_restart() {
    let c = Cluster::start().await;
    let first = c
        .call_as(CLIENT, 11, 11, create("durable"))
        .await
        .expect("create");
    c.restart_mdt().await;
    let again = c
        .call_as(CLIENT, 11, 11, create("durable"))
        .await
        .expect("resend after the restart");
    assert_eq!(first, again);
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_copies_of_one_request_run_once_and_get_one_reply() {
    let c = std::sync::Arc::new(Cluster::start().await);
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let c = c.clone();
        set.spawn(async move { c.call_as(CLIENT, 21, 21, create("once")).await });
    }
    let mut replies = Vec::new();
    while let Some(r) = set.join_next().await {
        replies.push(r.expect("join").expect("every copy succeeds"));
    }
    assert!(replies.windows(2).all(|w| w[0] == w[1]), "{replies:?}");
    assert_eq!(c.readdir_all(ROOT).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn records_below_the_clients_acknowledgement_are_forgotten() {
    let c = Cluster::start().await;
    c.call_as(CLIENT, 30, 30, create("a")).await.expect("a");
    c.call_as(CLIENT, 31, 30, create("b")).await.expect("b");
    assert_eq!(c.mdt().recorded_replies(), 2);
    // The client says it has every reply below 32: both records may go,
    // and go with the next change it makes.
    c.call_as(CLIENT, 32, 32, create("c")).await.expect("c");
    assert_eq!(c.mdt().recorded_replies(), 1);
    // A (buggy) resend of 30 is now a new request.
    assert_eq!(
        errno(c.call_as(CLIENT, 30, 32, create("a")).await),
        Errno::EEXIST
    );
    // Failures record nothing.
    assert_eq!(c.mdt().recorded_replies(), 1);
    // Requests without a sequence number (the servers' own) never record.
    c.create(ROOT, "d").await;
    assert_eq!(c.mdt().recorded_replies(), 1);
}
