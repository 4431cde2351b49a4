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
        umask: None,
    }
}

/// A client of a new cluster `fsname` whose first change is made: it
/// registers the client (and waits for its commit), so measure after it.
async fn warm_client(fsname: &str) -> (Cluster, std::sync::Arc<loom_client::Client>) {
    let c = start_cluster(fsname).await;
    let client = connect(&c, fsname).await;
    client
        .create(&root(), Fid::ROOT, "warm", FileKind::File, 0o644, 0, None)
        .await
        .expect("create warm");
    (c, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_chmod_chown_utimens_cost_one_mdt_round_trip_each() {
    let (_c, client) = warm_client("rtt").await;
    let me = root();
    let calls = || client.router().calls();
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

/// tar and `cp -p` set the times of a file while its writes are not yet
/// reported to the MDT: the report rides in the setattr (one round trip,
/// not two), and the close has nothing left to report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_set_on_a_file_just_written_carry_its_size_in_one_round_trip() {
    let (c, client) = warm_client("rttw").await;
    let me = root();
    let calls = || client.router().calls();
    for i in 0..10u64 {
        let (attr, layout) = client
            .create(
                &me,
                Fid::ROOT,
                format!("w{i}"),
                FileKind::File,
                0o644,
                0,
                None,
            )
            .await
            .expect("create");
        let f = client.open_as(&me, attr.fid, layout.expect("layout"), 0);
        let data = vec![7u8; 5000 + i as usize];
        f.write(0, &data).await.expect("write");
        // A client without leases tells the MDT of the file it opened,
        // in the background (see `Client::hold_unleased`): not counted.
        client.tells_sent().await;
        let before = calls();
        client
            .setattr(
                &me,
                attr.fid,
                SetAttr {
                    mtime: Some(SetTime::At(Time { sec: 2000, nsec: 0 })),
                    ..SetAttr::default()
                },
            )
            .await
            .expect("utimens");
        assert_eq!(calls().0, before.0 + 1, "utimens of w{i}: one MDT call");
        let before = calls();
        f.flush().await.expect("close");
        assert_eq!(calls().0, before.0, "close of w{i}: nothing to report");
        drop(f);
        // Another client sees the size and the time set.
        let other = connect(&c, "rttw").await;
        let a = other.getattr(&me, attr.fid).await.expect("stat");
        assert_eq!((a.size, a.mtime.sec), (5000 + i, 2000), "w{i}");
        other.close().await;
    }
}
