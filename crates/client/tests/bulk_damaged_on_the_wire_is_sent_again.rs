//! Issue #11: a bulk transfer damaged on the wire is caught by its crc32c
//! and sent again from its source, either way: a write's data the OST
//! receives damaged is refused (EBADMSG, nothing written) and the client
//! resends it; a read's reply the client receives damaged is asked for
//! again. Nothing damaged reaches a file or an application, and a link
//! that damages every transfer fails the call instead of looping.
//! (Servers and client share this process, so the failpoint damages
//! whichever side sends bulk next: the client for writes, the OST for
//! read replies.)
mod common;
use common::*;
use loom_client::Caller;
use loom_proto::msg::FileKind;
use loom_proto::Fid;
use loom_rpc::fail::corrupt_next;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_damaged_on_the_wire_is_sent_again() {
    let c = start_cluster("wire").await;
    let client = connect(&c, "wire").await;
    let me = Caller::current();
    let (attr, layout) = client
        .create(&me, Fid::ROOT, "f", FileKind::File, 0o644, 0, None)
        .await
        .expect("create");
    let f = client.open(attr.fid, layout.expect("layout"), 0);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 + i / 251) as u8).collect();

    // Writes: the first two frames of data go out damaged.
    corrupt_next(2);
    f.write(0, &data).await.expect("write");
    f.flush().await.expect("flush");
    let after_writes = client.router().rpc_stats();
    assert!(
        after_writes.damaged >= 2,
        "damaged writes not noticed: {after_writes:?}"
    );

    // Reads from a fresh handle: the first two replies come back damaged.
    let g = client.open(attr.fid, f.layout().clone(), data.len() as u64);
    corrupt_next(2);
    let back = g.read(0, data.len()).await.expect("read");
    assert!(back == data, "the data read back differs");
    let after_reads = client.router().rpc_stats();
    assert!(
        after_reads.damaged >= after_writes.damaged + 2,
        "damaged replies not noticed: {after_reads:?}"
    );

    // A link that damages everything: the call fails, it does not loop.
    corrupt_next(1000);
    let r = g.read(0, 4096).await;
    corrupt_next(0);
    assert!(
        r.is_err(),
        "a read over a link that damages every reply succeeded"
    );
    assert_eq!(
        g.read(0, 4096).await.expect("read once the link is good"),
        data[..4096].to_vec()
    );
}
