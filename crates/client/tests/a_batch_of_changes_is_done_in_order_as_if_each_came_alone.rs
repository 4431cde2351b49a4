//! Issue #32, point 1 (the batch it names): many changes sent to an MDT
//! in one request (`MdtRequest::Batch`) are done in order, each as if it
//! had come alone: its own permission checks (here as uid 1000, in a
//! directory it may write and one it may not), its own answer, learned by
//! the sender's cache. The batch is one round trip. A change that fails
//! ends the batch and those after it are not made; a request that is not
//! a change is refused, and so is a batch larger than a frame. A second
//! client sees every change at its next access. Through the library
//! against real servers.
mod common;
use common::*;
use loom_client::Client;
use loom_proto::layout::LayoutSpec;
use loom_proto::msg::{Attr, FileKind, MdtRequest, Reply, SetAttr};
use loom_proto::{Errno, Fid};
use std::sync::Arc;

fn create(parent: Fid, name: &str, perm: u32) -> MdtRequest {
    MdtRequest::Create {
        parent,
        name: name.into(),
        kind: FileKind::File,
        perm,
        rdev: 0,
        stripe: None,
    }
}

fn made(r: &Result<Reply, Errno>) -> Attr {
    match r {
        Ok(Reply::Entry { attr, .. }) => attr.clone(),
        other => panic!("expected an entry, got {other:?}"),
    }
}

async fn names(client: &Arc<Client>, dir: Fid) -> Vec<String> {
    let (entries, eof) = client
        .readdir(&user(1000), dir, 0, 1000)
        .await
        .expect("readdir");
    assert!(eof, "one page");
    let mut v: Vec<String> = entries
        .iter()
        .map(|e| String::from_utf8_lossy(e.name.as_bytes()).into_owned())
        .filter(|n| n != "." && n != "..")
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_changes_is_done_in_order_as_if_each_came_alone() {
    let c = start_cluster("batch").await;
    let client = connect_leasing(&c, "batch").await;
    let other = connect_leasing(&c, "batch").await;
    let root = user(0);
    let alice = user(1000);
    let home = client
        .mkdir(&root, Fid::ROOT, "home", 0o1777)
        .await
        .expect("mkdir home");
    let closed = client
        .mkdir(&root, Fid::ROOT, "closed", 0o755)
        .await
        .expect("mkdir closed");
    // Small files keep their first 64 KiB on the MDT: their first bytes
    // travel in the batch too.
    client
        .set_default_layout_as(&root, home.fid, Some(LayoutSpec::dom_first(64 << 10)))
        .await
        .expect("default layout");
    let (kept, _) = client
        .create(&alice, home.fid, "kept", FileKind::File, 0o644, 0, None)
        .await
        .expect("create kept");
    client
        .create(&alice, home.fid, "old", FileKind::File, 0o644, 0, None)
        .await
        .expect("create old");

    // One batch: 40 creates, a directory, a symlink, a chmod and the first
    // bytes of a file made before, an unlink, and a name made, removed
    // and made again (order matters).
    let mut batch: Vec<MdtRequest> = (0..40)
        .map(|i| create(home.fid, &format!("f{i:02}"), 0o640))
        .collect();
    batch.push(MdtRequest::Mkdir {
        parent: home.fid,
        name: "sub".into(),
        perm: 0o750,
    });
    batch.push(MdtRequest::Symlink {
        parent: home.fid,
        name: "link".into(),
        target: "f00".into(),
    });
    batch.push(MdtRequest::SetAttr {
        fid: kept.fid,
        set: SetAttr {
            perm: Some(0o600),
            ..SetAttr::default()
        },
    });
    batch.push(MdtRequest::DomWrite {
        fid: kept.fid,
        offset: 0,
        data: b"written in a batch".to_vec(),
    });
    batch.push(MdtRequest::Unlink {
        parent: home.fid,
        name: "old".into(),
        keep_orphan: false,
    });
    batch.push(create(home.fid, "again", 0o644));
    batch.push(MdtRequest::Unlink {
        parent: home.fid,
        name: "again".into(),
        keep_orphan: false,
    });
    batch.push(create(home.fid, "again", 0o604));
    let n = batch.len();
    let before = client.router().calls();
    let results = client
        .batch(&alice, home.fid, batch)
        .await
        .expect("the batch is answered");
    assert_eq!(
        client.router().calls(),
        (before.0 + 1, before.1),
        "a batch is one round trip to one MDT"
    );
    assert_eq!(results.len(), n, "every change answered");
    for (i, r) in results.iter().enumerate() {
        assert!(r.is_ok(), "change {i}: {r:?}");
    }
    let f00 = made(&results[0]);
    assert_eq!(
        (f00.uid, f00.perm & 0o7777),
        (1000, 0o640),
        "made as the caller"
    );
    // The sender learned what it made: its lookups need no MDT.
    let before = client.router().calls();
    let (seen, _) = client
        .lookup(&alice, home.fid, "f39")
        .await
        .expect("lookup f39");
    assert_eq!(seen.fid, made(&results[39]).fid);
    assert_eq!(client.router().calls(), before, "learned from the answer");

    // The second client sees all of it, in the order it was done.
    let mut want: Vec<String> = (0..40).map(|i| format!("f{i:02}")).collect();
    want.extend(["again", "kept", "link", "sub"].map(String::from));
    want.sort();
    assert_eq!(names(&other, home.fid).await, want);
    let (again, _) = other
        .lookup(&alice, home.fid, "again")
        .await
        .expect("lookup again");
    assert_eq!(again.perm & 0o7777, 0o604, "the last create of the name");
    assert_eq!(again.fid, made(&results[n - 1]).fid);
    let (sub, _) = other.lookup(&alice, home.fid, "sub").await.expect("sub");
    assert_eq!((sub.kind, sub.perm & 0o7777), (FileKind::Dir, 0o750));
    let (link, _) = other.lookup(&alice, home.fid, "link").await.expect("link");
    let target = other.readlink(&alice, link.fid).await.expect("readlink");
    assert_eq!(target.as_bytes(), b"f00");
    let (k, layout) = other.lookup(&alice, home.fid, "kept").await.expect("kept");
    assert_eq!(k.perm & 0o7777, 0o600, "chmod in the batch");
    assert_eq!(k.size, 18, "the write's size");
    let f = other.open_as(&alice, k.fid, layout.expect("layout"), k.size);
    assert_eq!(
        f.read(0, 100).await.expect("read"),
        b"written in a batch",
        "the bytes written in the batch"
    );
    assert_eq!(
        other.lookup(&alice, home.fid, "old").await.err(),
        Some(Errno::ENOENT),
        "unlinked in the batch"
    );

    // A change that fails ends the batch: the one after it is not made.
    let results = client
        .batch(
            &alice,
            home.fid,
            vec![
                create(home.fid, "g0", 0o644),
                create(home.fid, "f00", 0o644),
                create(home.fid, "g1", 0o644),
            ],
        )
        .await
        .expect("answered");
    assert_eq!(results.len(), 2, "ended at the failure: {results:?}");
    assert!(results[0].is_ok());
    assert_eq!(results[1].as_ref().err(), Some(&Errno::EEXIST));
    other
        .lookup(&alice, home.fid, "g0")
        .await
        .expect("made before the failure");
    assert_eq!(
        other.lookup(&alice, home.fid, "g1").await.err(),
        Some(Errno::ENOENT),
        "not made after it"
    );

    // Each change is checked as the caller: none in a directory it may
    // not write.
    let results = client
        .batch(&alice, closed.fid, vec![create(closed.fid, "no", 0o644)])
        .await
        .expect("answered");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].as_ref().err(), Some(&Errno::EACCES));
    assert_eq!(
        other.lookup(&alice, closed.fid, "no").await.err(),
        Some(Errno::ENOENT)
    );

    // Only changes travel in a batch.
    let results = client
        .batch(
            &alice,
            home.fid,
            vec![
                MdtRequest::GetAttr { fid: home.fid },
                create(home.fid, "g2", 0o644),
            ],
        )
        .await
        .expect("answered");
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].as_ref().err(), Some(&Errno::EINVAL));
    assert_eq!(
        other.lookup(&alice, home.fid, "g2").await.err(),
        Some(Errno::ENOENT)
    );

    // A batch larger than a frame may carry is refused before it is sent
    // (not sent again and again), and nothing of it is made.
    let long = "n".repeat(240);
    let too_big: Vec<MdtRequest> = (0..5000)
        .map(|i| create(home.fid, &format!("{long}{i:05}"), 0o644))
        .collect();
    assert_eq!(
        client.batch(&alice, home.fid, too_big).await.err(),
        Some(Errno::EINVAL),
        "a batch over the frame's limit"
    );
    assert_eq!(
        other
            .lookup(&alice, home.fid, format!("{long}00000"))
            .await
            .err(),
        Some(Errno::ENOENT)
    );
    client.close().await;
    other.close().await;
}
