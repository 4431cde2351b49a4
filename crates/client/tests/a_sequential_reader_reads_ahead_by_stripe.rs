//! Issue #9, point 2: a library reader going through a file striped over
//! every OST in small reads gets whole stripe widths read ahead, from all
//! OSTs at once: 4 MiB read 16 KiB at a time costs a few dozen OST
//! requests, not 256, and every byte is right. What was read ahead is
//! never read stale: a write through another handle of the same client,
//! and another client's write (which recalls this client's lease), are
//! seen by the next read; a jump is read directly. All as a user other
//! than root.
mod common;
use common::*;
use loom_client::Caller;
use loom_proto::msg::{access, FileKind};
use loom_proto::{Fid, StripeSpec};

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| ((i / 7) as u8).wrapping_mul(13) ^ seed)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequential_reader_reads_ahead_by_stripe() {
    let c = start_cluster("ahead").await;
    let writer = connect_leasing(&c, "ahead").await;
    let reader = connect_leasing(&c, "ahead").await;
    assert!(
        reader.options().readahead,
        "the library reads ahead by default"
    );
    // A user other than root, in a directory open to all.
    let dir = writer
        .mkdir(&Caller::current(), Fid::ROOT, "w", 0o1777)
        .await
        .expect("mkdir");
    let me = user(1000);
    let stripe = StripeSpec {
        count: -1,
        size: 64 * 1024,
        ..StripeSpec::default()
    };
    let (attr, layout) = writer
        .create(
            &me,
            dir.fid,
            "striped",
            FileKind::File,
            0o644,
            0,
            Some(stripe),
        )
        .await
        .expect("create");
    let layout = layout.expect("layout");
    assert_eq!(
        layout.raid0_params().map(|(_, o)| o.len()),
        Some(OSTS as usize)
    );
    let mut data = pattern(4 << 20, 1);
    let w = writer.open_as(&me, attr.fid, layout.clone(), 0);
    w.write(0, &data).await.expect("write");
    w.flush().await.expect("close");

    // 16 KiB at a time, in order: windows of 256 KiB (4 stripes of 64
    // KiB), one request per OST each.
    let (_, h) = reader
        .open_checked(&me, attr.fid, access::READ)
        .await
        .expect("open");
    let before = reader.router().calls().1;
    let step = 16 * 1024;
    let mut pos = 0usize;
    while pos < 2 << 20 {
        let got = h.read(pos as u64, step).await.expect("read");
        assert!(got == data[pos..pos + step], "bytes at {pos}");
        pos += step;
    }
    let sent = reader.router().calls().1 - before;
    assert!(
        (8..=48).contains(&sent),
        "2 MiB in 16 KiB reads took {sent} OST requests (128 without reading ahead)"
    );

    // Another handle of this client writes just ahead of the reader: the
    // next read sees it, not what was read ahead.
    let (_, rw) = reader
        .open_checked(&me, attr.fid, access::WRITE)
        .await
        .expect("open for writing");
    let mine = pattern(3000, 9);
    rw.write(pos as u64 + 100, &mine).await.expect("write here");
    data[pos + 100..pos + 3100].copy_from_slice(&mine);
    let got = h.read(pos as u64, step).await.expect("read");
    assert!(
        got == data[pos..pos + step],
        "a write through this client is seen"
    );
    pos += step;

    // Another client rewrites what this one has read ahead, and closes:
    // the change recalls this client's lease, and the next read sees it.
    let theirs = pattern(50_000, 77);
    let w = writer.open_as(&me, attr.fid, layout.clone(), 0);
    w.write(pos as u64 + 10, &theirs)
        .await
        .expect("their write");
    w.flush().await.expect("their close");
    data[pos + 10..pos + 50_010].copy_from_slice(&theirs);
    let stat = reader.getattr(&me, attr.fid).await.expect("stat");
    assert_eq!(stat.size, 4 << 20);
    while pos < (2 << 20) + 200_000 {
        let got = h.read(pos as u64, step).await.expect("read");
        assert!(got == data[pos..pos + step], "their write is seen at {pos}");
        pos += step;
    }

    // A jump is read directly, and right; so is the rest to the end, with
    // a short last read.
    let got = h.read(100, 5000).await.expect("jump back");
    assert!(got == data[100..5100]);
    let mut pos = (3 << 20) + 5;
    let mut tail = Vec::new();
    loop {
        let got = h.read(pos as u64, step).await.expect("read");
        if got.is_empty() {
            break;
        }
        pos += got.len();
        tail.extend(got);
    }
    assert!(tail == data[(3 << 20) + 5..], "to the end of the file");
}
