//! Orphans: an unlink or rename that drops the last name of a file the
//! client may have open keeps the file (nlink 0, objects intact) until the
//! client releases it or its lease runs out; the record survives a restart.
mod common;
use common::*;
use loom_proto::msg::{MdtRequest, Reply};
use loom_proto::{Errno, Fid};
use std::time::Duration;

const ROOT: Fid = Fid::ROOT;
const CLIENT: u64 = 0x99;

fn unlink(name: &str, keep: bool) -> MdtRequest {
    MdtRequest::Unlink {
        parent: ROOT,
        name: name.into(),
        keep_orphan: keep,
    }
}

/// A file with one object holding data; its FID and object path.
async fn file_with_data(c: &Cluster, name: &str) -> (Fid, std::path::PathBuf) {
    let (attr, layout) = c.create_striped(ROOT, name, None).await;
    let obj = objects(&layout)[0];
    c.write_object(obj, b"still here").await;
    let path = c.object_path(obj);
    assert!(exists(&path));
    (attr.fid, path)
}

async fn gone(c: &Cluster, fid: Fid, obj: &std::path::Path) {
    assert_eq!(c.errno(MdtRequest::GetAttr { fid }).await, Errno::ENOENT);
    assert!(
        eventually(10, || !exists(obj)).await,
        "the object of {fid} was not destroyed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unlinking_an_open_file_keeps_it_until_it_is_released() {
    let c = Cluster::start().await;
    let (fid, obj) = file_with_data(&c, "tmp").await;
    let r = c.call_as(CLIENT, 1, 1, unlink("tmp", true)).await;
    assert_eq!(r, Ok(Reply::Orphaned { fid }));
    // Nameless but alive: attributes and data are there.
    assert_eq!(c.lookup_errno(ROOT, "tmp").await, Errno::ENOENT);
    assert!(c.readdir_all(ROOT).await.is_empty());
    assert_eq!(c.getattr(fid).await.nlink, 0);
    assert!(exists(&obj));
    assert_eq!(c.mdt().orphan_count(), 1);
    // Released by the client that holds it.
    let release = || MdtRequest::ReleaseOrphan { fid };
    assert_eq!(c.call_as(CLIENT, 2, 2, release()).await, Ok(Reply::Ok));
    gone(&c, fid, &obj).await;
    assert_eq!(c.mdt().orphan_count(), 0);
    // A repeated release (a resend) is harmless.
    assert_eq!(c.call_as(CLIENT, 3, 3, release()).await, Ok(Reply::Ok));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_another_client_holds_is_kept_until_that_client_lets_go() {
    let c = Cluster::start().await;
    let (fid, obj) = file_with_data(&c, "shared").await;
    // Another client has it open and said so (as after a recall, or a
    // reconnect).
    let other = CLIENT + 1;
    let hold = MdtRequest::RenewOrphans { fids: vec![fid] };
    assert_eq!(c.call_as(other, 1, 1, hold).await, Ok(Reply::Ok));
    // The unlinking client has no file open: kept all the same.
    let r = c.call_as(CLIENT, 1, 1, unlink("shared", false)).await;
    assert_eq!(r, Ok(Reply::Orphaned { fid }));
    assert_eq!(c.getattr(fid).await.nlink, 0);
    // The unlinker lets go of what it never held: still kept.
    let release = || MdtRequest::ReleaseOrphan { fid };
    assert_eq!(c.call_as(CLIENT, 2, 2, release()).await, Ok(Reply::Ok));
    assert!(exists(&obj));
    assert_eq!(c.mdt().orphan_count(), 1);
    // Its last holder closes it: gone.
    assert_eq!(c.call_as(other, 2, 2, release()).await, Ok(Reply::Ok));
    gone(&c, fid, &obj).await;
    assert_eq!(c.mdt().orphan_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_open_files_an_unlink_frees_at_once() {
    let c = Cluster::start().await;
    let (fid, obj) = file_with_data(&c, "f").await;
    assert_eq!(
        c.call_as(CLIENT, 1, 1, unlink("f", false)).await,
        Ok(Reply::Ok)
    );
    gone(&c, fid, &obj).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rename_over_an_open_file_keeps_the_replaced_file() {
    let c = Cluster::start().await;
    let (old, obj) = file_with_data(&c, "data").await;
    c.create(ROOT, "data.new").await;
    let r = c
        .call_as(
            CLIENT,
            2,
            2,
            MdtRequest::Rename {
                parent: ROOT,
                name: "data.new".into(),
                new_parent: ROOT,
                new_name: "data".into(),
                flags: 0,
                keep_orphan: true,
            },
        )
        .await;
    assert_eq!(r, Ok(Reply::Orphaned { fid: old }));
    assert!(exists(&obj));
    assert_eq!(c.getattr(old).await.nlink, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_orphan_survives_an_mdt_restart_and_expires_without_renewal() {
    let c = Cluster::start().await;
    let (fid, obj) = file_with_data(&c, "t").await;
    c.call_as(CLIENT, 1, 1, unlink("t", true))
        .await
        .expect("unlink");
    c.restart_mdt().await;
    assert_eq!(c.mdt().orphan_count(), 1);
    assert_eq!(c.getattr(fid).await.nlink, 0);
    // A renewal keeps it through a sweep with a long lease...
    c.ok(MdtRequest::RenewOrphans { fids: vec![fid] }).await;
    c.mdt().sweep_orphans(Duration::from_secs(3600)).await;
    assert_eq!(c.mdt().orphan_count(), 1);
    // ...and a lease that has run out destroys it.
    c.mdt().sweep_orphans(Duration::ZERO).await;
    gone(&c, fid, &obj).await;
    assert_eq!(c.mdt().orphan_count(), 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hard_link_gives_an_orphan_a_name_again() {
    let c = Cluster::start().await;
    let (fid, obj) = file_with_data(&c, "o").await;
    c.call_as(CLIENT, 1, 1, unlink("o", true))
        .await
        .expect("unlink");
    c.entry(MdtRequest::Link {
        fid,
        parent: ROOT,
        name: "back".into(),
    })
    .await;
    assert_eq!(c.mdt().orphan_count(), 0);
    assert_eq!(c.getattr(fid).await.nlink, 1);
    // A late release must not destroy a file that has a name.
    c.ok(MdtRequest::ReleaseOrphan { fid }).await;
    assert_eq!(c.lookup(ROOT, "back").await.fid, fid);
    assert!(exists(&obj));
}

#[tokio::test(flavor = "multi_thread")]
async fn only_regular_files_become_orphans() {
    let c = Cluster::start().await;
    c.call(MdtRequest::Symlink {
        parent: ROOT,
        name: "l".into(),
        target: "x".into(),
    })
    .await
    .expect("symlink");
    assert_eq!(
        c.call_as(CLIENT, 1, 1, unlink("l", true)).await,
        Ok(Reply::Ok)
    );
    assert_eq!(c.mdt().orphan_count(), 0);
}
