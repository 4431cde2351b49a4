//! Issue #8, point 4, through the library: a create is one round trip to
//! one MDT (its objects were precreated; no OST is asked), and the chmod,
//! chown and utimens that tar and `cp -a` send after each file cost one
//! round trip each. Counted by the client's own call counters, against
//! real servers.
mod common;
use common::*;
use loom_client::Caller;
use loom_proto::msg::{FileKind, SetAttr, SetTime, Time};
use loom_proto::Fid;

fn root() -> Caller {
    Caller {
        uid: 0,
        gid: 0,
        groups: Vec::new(),
        pid: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_chmod_chown_utimens_cost_one_mdt_round_trip_each() {
    let c = start_cluster("rtt").await;
    let client = connect(&c, "rtt").await;
    let me = root();
    let calls = || client.router().calls();
    // A first change registers the client (and waits for its commit):
    // measure after it.
    client
        .create(&me, Fid::ROOT, "warm", FileKind::File, 0o644, 0, None)
        .await
        .expect("create warm");
    for i in 0..20 {
        let before = calls();
        let (attr, layout) = client
            .create(
                &me,
                Fid::ROOT,
                format!("f{i}"),
                FileKind::File,
                0o644,
                0,
                None,
            )
            .await
            .expect("create");
        assert!(layout.is_some(), "a create answers with the layout");
        assert_eq!(calls(), (before.0 + 1, before.1), "create f{i}");
        let fid = attr.fid;
        for (what, set) in [
            (
                "chmod",
                SetAttr {
                    perm: Some(0o600),
                    ..SetAttr::default()
                },
            ),
            (
                "chown",
                SetAttr {
                    uid: Some(1000),
                    gid: Some(1000),
                    ..SetAttr::default()
                },
            ),
            (
                "utimens",
                SetAttr {
                    atime: Some(SetTime::At(Time { sec: 1000, nsec: 0 })),
                    mtime: Some(SetTime::At(Time { sec: 2000, nsec: 0 })),
                    ..SetAttr::default()
                },
            ),
        ] {
            let before = calls();
            client.setattr(&me, fid, set).await.expect(what);
            assert_eq!(calls(), (before.0 + 1, before.1), "{what} of f{i}");
        }
        let a = client.getattr(&me, fid).await.expect("stat");
        assert_eq!(
            (a.perm & 0o7777, a.uid, a.gid, a.mtime.sec),
            (0o600, 1000, 1000, 2000)
        );
    }
}
