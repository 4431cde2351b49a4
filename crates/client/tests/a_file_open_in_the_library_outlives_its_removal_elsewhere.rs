//! Issue #29, point 3, through the library: a file a library client has
//! open stays readable and writable after another client removes its
//! last name, whether the holder takes leases (it is asked, when the
//! removal recalls its lease) or not (its `Open` told the MDT); after
//! the holder's last close the inode is gone.

mod common;
use common::*;
use loom_client::Client;
use loom_proto::msg::{access, FileKind};
use loom_proto::{Errno, Fid};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `holder` opens "NAME" (made and written by `other`), `other` removes
/// it, `holder` reads it whole and writes past its end; after the
/// holder's close the inode goes.
async fn outlives(holder: &Arc<Client>, other: &Arc<Client>, name: &str) {
    let me = user(0);
    let data = vec![0x5au8; 300_000];
    let (attr, layout) = other
        .create(&me, Fid::ROOT, name, FileKind::File, 0o644, 0, None)
        .await
        .expect("create");
    let f = other.open_as(&me, attr.fid, layout.expect("layout"), 0);
    f.write(0, &data).await.expect("write");
    f.flush().await.expect("close");
    drop(f);

    let fid = holder
        .lookup(&me, Fid::ROOT, name)
        .await
        .expect("lookup")
        .0
        .fid;
    let (_, h) = holder
        .open_checked(&me, fid, access::READ | access::WRITE)
        .await
        .expect("open");
    other.unlink(&me, Fid::ROOT, name).await.expect("unlink");
    assert_eq!(
        holder.lookup(&me, Fid::ROOT, name).await.err(),
        Some(Errno::ENOENT),
        "the name is gone"
    );
    assert_eq!(
        h.read(0, data.len()).await.expect("read after the removal"),
        data
    );
    h.write(data.len() as u64, b"tail")
        .await
        .expect("write after the removal");
    h.flush().await.expect("flush");
    assert_eq!(
        h.read(data.len() as u64, 10)
            .await
            .expect("read what it wrote"),
        b"tail"
    );
    assert_eq!(
        other.getattr(&me, fid).await.expect("stat").nlink,
        0,
        "an orphan"
    );
    drop(h);
    // Released in the background at the last close: gone soon after.
    holder.tells_sent().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match other.getattr(&me, fid).await {
            Err(Errno::ENOENT) | Err(Errno::ESTALE) => break,
            r => assert!(
                Instant::now() < deadline,
                "{name}: still there after the last close: {r:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_client_without_leases_keeps_its_open_file() {
    let cluster = start_cluster("opened").await;
    let holder = connect(&cluster, "opened").await;
    let other = connect(&cluster, "opened").await;
    outlives(&holder, &other, "plain").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_client_with_leases_keeps_its_open_file() {
    let cluster = start_cluster("leased").await;
    let holder = connect_leasing(&cluster, "leased").await;
    let other = connect(&cluster, "leased").await;
    outlives(&holder, &other, "leased").await;
}
