//! Issue #9, point 1, through the library: a directory the client made
//! is leased to it whole, so a lookup of a name it lacks (the kernel's
//! lookup before a create) is answered without a server, and the create
//! costs one MDT round trip. Another client's create there recalls the
//! list first.
mod common;
use common::*;
use loom_client::Caller;
use loom_proto::msg::FileKind;
use loom_proto::Fid;

fn root() -> Caller {
    Caller {
        uid: 0,
        gid: 0,
        groups: Vec::new(),
        pid: 0,
        umask: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_lists_answer_lookups_of_absent_names() {
    let c = start_cluster("lists").await;
    let a = connect_leasing(&c, "lists").await;
    let b = connect_leasing(&c, "lists").await;
    let me = root();
    // `b` holds the root's attributes: `a`'s mkdir recalls them first.
    b.getattr(&me, Fid::ROOT).await.expect("stat /");
    let d = a.mkdir(&me, Fid::ROOT, "d", 0o755).await.expect("mkdir");
    for i in 0..20 {
        let name = format!("f{i}");
        let before = a.router().calls();
        let known = a.recent_entry(d.fid, name.as_bytes());
        assert!(
            matches!(known, Some((None, _))),
            "{name}: known absent, no server asked ({known:?})"
        );
        a.create(&me, d.fid, &name, FileKind::File, 0o644, 0, None)
            .await
            .expect("create");
        assert_eq!(
            a.router().calls(),
            (before.0 + 1, before.1),
            "{name}: one round trip"
        );
        assert!(
            matches!(a.recent_entry(d.fid, name.as_bytes()), Some((Some(_), _))),
            "{name}: known made"
        );
    }
    // Another client makes a name there: the list is recalled from `a`
    // before the create is applied.
    b.create(&me, d.fid, "theirs", FileKind::File, 0o644, 0, None)
        .await
        .expect("create on b");
    assert!(
        a.recent_entry(d.fid, b"theirs").is_none(),
        "no longer answered from the list"
    );
    assert!(a.recent_entry(d.fid, b"f1").is_some(), "its own names stay");
    a.lookup(&me, d.fid, "theirs")
        .await
        .expect("found at the MDT");
}
