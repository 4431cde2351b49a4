//! Issue #9, point 2: a writer's lease lets small writes gather in the
//! client and go out as large requests. A file this client made (it holds
//! the file's size lease) and opened to defer its reports, as the mount
//! does at a create: 256 sequential writes of 4 KiB cost a handful of OST
//! requests, not 256. What waits in the handle is exact for everyone: a
//! read through another handle, a truncate, another client's stat (which
//! recalls the lease) and the close each see or send it first.
mod common;
use common::*;
use loom_client::Caller;
use loom_proto::msg::{access, FileKind, SetAttr};
use loom_proto::Fid;

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_writes_under_the_size_lease_go_out_together() {
    let c = start_cluster("gather").await;
    let client = connect_leasing(&c, "gather").await;
    let other = connect_leasing(&c, "gather").await;
    let me = user(1000);
    let dir = client
        .mkdir(&Caller::current(), Fid::ROOT, "w", 0o1777)
        .await
        .expect("mkdir");
    let (attr, layout) = client
        .create(&me, dir.fid, "f", FileKind::File, 0o644, 0, None)
        .await
        .expect("create");
    let f = client.open_as(&me, attr.fid, layout.expect("layout"), 0);
    assert!(f.defer_reports(), "the maker holds the size lease");

    // 1 MiB in 4 KiB writes: gathered, then sent at the close.
    let data = pattern(1 << 20, 7);
    let before = client.router().calls().1;
    for (i, chunk) in data.chunks(4096).enumerate() {
        f.write((i * 4096) as u64, chunk).await.expect("write");
    }
    f.flush().await.expect("close");
    let sent = client.router().calls().1 - before;
    assert!(
        sent <= 4,
        "256 writes of 4 KiB went out as {sent} OST requests"
    );

    // Gathered again, and read back through another handle of this
    // client before any close: sent first.
    let more = pattern(40_000, 9);
    for (i, chunk) in more.chunks(1000).enumerate() {
        f.write((1 << 20) + (i * 1000) as u64, chunk)
            .await
            .expect("write");
    }
    let (_, g) = client
        .open_checked(&me, attr.fid, access::READ)
        .await
        .expect("second handle");
    let back = g.read(1 << 20, 40_000).await.expect("read back");
    assert!(back == more, "a read sees what waits in the other handle");

    // Gathered, then another client's stat recalls the size lease: it sees
    // every byte written so far.
    let tail = pattern(10_000, 11);
    let at = (1 << 20) + 40_000u64;
    for (i, chunk) in tail.chunks(100).enumerate() {
        f.write(at + (i * 100) as u64, chunk).await.expect("write");
    }
    let seen = other.getattr(&me, attr.fid).await.expect("stat elsewhere");
    assert_eq!(seen.size, at + 10_000, "the recall sent and reported it");
    let (_, h) = other
        .open_checked(&me, attr.fid, access::READ)
        .await
        .expect("open elsewhere");
    let there = h.read(at, 10_000).await.expect("read elsewhere");
    assert!(there == tail, "the other client reads the recalled bytes");

    // Without the lease now: each write is sent and reported at once.
    f.write(at + 10_000, b"after").await.expect("write");
    assert_eq!(
        other.getattr(&me, attr.fid).await.expect("stat").size,
        at + 10_005
    );

    // A truncate by this client sends what waits first, then cuts it.
    let (a2, layout2) = client
        .create(&me, dir.fid, "cut", FileKind::File, 0o644, 0, None)
        .await
        .expect("create");
    let k = client.open_as(&me, a2.fid, layout2.expect("layout"), 0);
    assert!(k.defer_reports());
    for i in 0..50u64 {
        k.write(i * 100, &[b'x'; 100]).await.expect("write");
    }
    client
        .setattr(
            &me,
            a2.fid,
            SetAttr {
                size: Some(1000),
                ..SetAttr::default()
            },
        )
        .await
        .expect("truncate");
    k.flush().await.expect("close");
    let (a3, r) = other
        .open_checked(&me, a2.fid, access::READ)
        .await
        .expect("open elsewhere");
    assert_eq!(a3.size, 1000);
    let cut = r.read(0, 5000).await.expect("read");
    assert!(
        cut == vec![b'x'; 1000],
        "cut at 1000 bytes: {} read",
        cut.len()
    );
}
