//! Issue #9, point 4: the library resolves paths with leased lookups. A
//! client that takes leases walks a path it has walked before with no MDT
//! request (the client's call counters), still refuses a caller without
//! search permission on a directory (EACCES, as the MDT would), and sees
//! another client's rename and removal at its next walk (the leases were
//! recalled).
mod common;
use common::*;
use loom_proto::msg::FileKind;
use loom_proto::{Errno, Fid};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_lookups_walk_paths_without_the_mdt() {
    let c = start_cluster("walk").await;
    let client = connect_leasing(&c, "walk").await;
    let other = connect_leasing(&c, "walk").await;
    let root = user(0);
    let alice = user(1000);
    let a = client
        .mkdir(&root, Fid::ROOT, "a", 0o755)
        .await
        .expect("mkdir");
    let b = client.mkdir(&root, a.fid, "b", 0o755).await.expect("mkdir");
    let secret = client
        .mkdir(&root, b.fid, "secret", 0o700)
        .await
        .expect("mkdir");
    client
        .create(&root, secret.fid, "f", FileKind::File, 0o644, 0, None)
        .await
        .expect("create");

    // Walked once (its answers leased), then again with no MDT request.
    let first = client
        .resolve_path_as(&root, "a/b/secret/f")
        .await
        .expect("walk");
    let before = client.router().calls();
    for _ in 0..10 {
        let again = client
            .resolve_path_as(&root, "a/b/secret/f")
            .await
            .expect("walk again");
        assert_eq!(again.fid, first.fid);
        assert_eq!(
            client.resolve_path_as(&root, "a/b/missing").await,
            Err(Errno::ENOENT),
            "known absent"
        );
    }
    assert_eq!(
        client.router().calls(),
        before,
        "no request for leased walks"
    );

    // The permission the MDT would check is checked here too.
    assert_eq!(
        client.resolve_path_as(&alice, "a/b/secret/f").await,
        Err(Errno::EACCES)
    );
    assert!(client.resolve_path_as(&alice, "a/b").await.is_ok());

    // Another client renames and removes: seen at the next walk.
    other
        .rename(&root, b.fid, "secret", b.fid, "moved", 0)
        .await
        .expect("rename elsewhere");
    assert_eq!(
        client.resolve_path_as(&root, "a/b/secret/f").await,
        Err(Errno::ENOENT)
    );
    assert_eq!(
        client
            .resolve_path_as(&root, "a/b/moved/f")
            .await
            .expect("the new name")
            .fid,
        first.fid
    );
    other
        .unlink(&root, secret.fid, "f")
        .await
        .expect("unlink elsewhere");
    assert_eq!(
        client.resolve_path_as(&root, "a/b/moved/f").await,
        Err(Errno::ENOENT)
    );
}
