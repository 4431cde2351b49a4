//! Issue #10, point 2, through the library: a directory's default
//! placement of new subdirectories is set by its owner or root (EPERM for
//! anyone else), checked by the MDT against the file system's MDTs
//! (EINVAL), and a user's mkdir follows it, down the tree.
mod common;
use common::*;
use loom_proto::layout::DirHash;
use loom_proto::msg::DirDefault;
use loom_proto::{Errno, Fid};

fn on(mdts: &[u32]) -> DirDefault {
    DirDefault {
        count: 1,
        mdts: mdts.to_vec(),
        hash: DirHash::NameHashMod,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_placement_is_its_owners_to_set() {
    let c = start_cluster_with_mdts("placed", 2).await;
    let client = connect(&c, "placed").await;
    let (root, alice, bob) = (user(0), user(1000), user(1001));
    let shared = client
        .mkdir(&root, Fid::ROOT, "shared", 0o1777)
        .await
        .expect("mkdir");
    let home = client
        .mkdir(&alice, shared.fid, "alice", 0o755)
        .await
        .expect("alice's mkdir");
    assert_eq!(
        client.router().mdt_of(home.fid).await.expect("mdt").index,
        0
    );

    // Not hers to set on root's directory, nor Bob's on hers.
    for (who, dir) in [(&alice, shared.fid), (&bob, home.fid)] {
        assert_eq!(
            client.set_dir_default_as(who, dir, Some(on(&[1]))).await,
            Err(Errno::EPERM)
        );
    }
    // MDTs that do not exist.
    assert_eq!(
        client
            .set_dir_default_as(&alice, home.fid, Some(on(&[5])))
            .await,
        Err(Errno::EINVAL)
    );
    client
        .set_dir_default_as(&alice, home.fid, Some(on(&[1])))
        .await
        .expect("her own");
    assert_eq!(
        client.get_dir_default(&bob, home.fid).await.expect("get"),
        Some(on(&[1]))
    );

    // Her mkdirs go to MDT1, and theirs below.
    let a = client
        .mkdir(&alice, home.fid, "a", 0o755)
        .await
        .expect("mkdir");
    let b = client
        .mkdir(&alice, a.fid, "b", 0o755)
        .await
        .expect("mkdir");
    for d in [a.fid, b.fid] {
        assert_eq!(client.router().mdt_of(d).await.expect("mdt").index, 1);
    }
    assert_eq!(
        client.get_dir_default(&alice, b.fid).await.expect("get"),
        Some(on(&[1])),
        "inherited"
    );
    // Removed by root: back to the parent's MDT.
    client
        .set_dir_default_as(&root, home.fid, None)
        .await
        .expect("root may");
    let c2 = client
        .mkdir(&alice, home.fid, "c", 0o755)
        .await
        .expect("mkdir");
    assert_eq!(client.router().mdt_of(c2.fid).await.expect("mdt").index, 0);
}
