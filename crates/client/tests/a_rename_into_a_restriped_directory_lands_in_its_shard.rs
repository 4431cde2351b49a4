//! Issue #10: a client that learned a directory as plain renames names
//! into it from a directory on another MDT after root's client restriped
//! it. The cross-MDT rename's coordinator is not the directory's MDT, so
//! that MDT refuses a name of another shard (ESTALE) and the client
//! learns the new layout and renames again: every name lands in the shard
//! it hashes to, where a fresh client finds it.
mod common;
use common::*;
use loom_proto::msg::{DirStripe, FileKind};
use loom_proto::Fid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_into_a_restriped_directory_lands_in_its_shard() {
    let c = start_cluster_with_mdts("reshard", 2).await;
    let admin = connect_leasing(&c, "reshard").await;
    let client = connect_leasing(&c, "reshard").await;
    let root = me();
    let on = |mdt| DirStripe {
        count: 1,
        start_mdt: mdt,
    };
    let late = admin
        .mkdir_striped(&root, Fid::ROOT, "late", 0o777, on(0))
        .await
        .expect("mkdir late");
    let from = admin
        .mkdir_striped(&root, Fid::ROOT, "from", 0o777, on(1))
        .await
        .expect("mkdir from");
    for i in 0..20 {
        client
            .create(
                &root,
                from.fid,
                format!("m{i}"),
                FileKind::File,
                0o644,
                0,
                None,
            )
            .await
            .expect("create");
    }
    // The client learns it as plain.
    assert!(client
        .dir_shards(&root, late.fid)
        .await
        .expect("layout")
        .is_none());
    let moved = admin
        .restripe_dir(&root, late.fid, vec![0, 1])
        .await
        .expect("restripe");
    assert_eq!(moved, 0, "it was empty");
    for i in 0..20 {
        client
            .rename(
                &root,
                from.fid,
                format!("m{i}"),
                late.fid,
                format!("moved{i}"),
                0,
            )
            .await
            .unwrap_or_else(|e| panic!("rename m{i}: {e:?}"));
    }
    let fresh = connect(&c, "reshard").await;
    assert_eq!(
        fresh
            .dir_shards(&root, late.fid)
            .await
            .expect("layout")
            .map(|s| s.len()),
        Some(2)
    );
    for i in 0..20 {
        fresh
            .lookup(&root, late.fid, format!("moved{i}"))
            .await
            .unwrap_or_else(|e| panic!("moved{i} is not in the shard it hashes to: {e:?}"));
    }
    let (entries, eof) = fresh.readdir(&root, late.fid, 0, 100).await.expect("list");
    assert!(eof);
    assert_eq!(entries.len(), 20);
}
