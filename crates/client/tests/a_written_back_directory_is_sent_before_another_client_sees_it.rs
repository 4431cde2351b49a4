//! Issue #32, point 2 (coherence), on the MDT's side: a client that
//! writes back an empty directory (`TakeWriteBack`) keeps its changes
//! (whole inodes under granted FIDs, here held by the test as the
//! write-back layer would) until another client's next access to the
//! directory recalls the lease: its flusher sends them before the recall
//! is answered, and that access sees every change, in order, with one
//! recall and no timeout (the holder's connection is not cut). A
//! directory it makes there is written back too. Other clients can take
//! neither lease; only an empty directory the caller may write is given.
//! As uid 1000, with a second leasing client and a plain one.
mod common;
use common::*;
use loom_client::Client;
use loom_proto::msg::{FileKind, MdtRequest, Time};
use loom_proto::{Errno, Fid};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

fn make_at(parent: Fid, name: &str, fid: Fid, kind: FileKind) -> MdtRequest {
    MdtRequest::MakeAt {
        parent,
        name: name.into(),
        fid,
        kind,
        perm: 0o755,
        rdev: 0,
        uid: 1000,
        gid: 1000,
        atime: Time { sec: 7, nsec: 0 },
        mtime: Time { sec: 7, nsec: 0 },
        ctime: Time { sec: 7, nsec: 0 },
        // Made now: the directory's mtime moves forward, as it would.
        made: Time::now(),
        target: None,
        data: Vec::new(),
    }
}

/// What the holder has not sent yet, by the directory it goes to.
type Pending = Arc<Mutex<Vec<(Fid, MdtRequest)>>>;

/// Installs on `client` the flusher a write-back layer would: on a recall
/// it sends everything pending, in order, in one batch per directory.
fn install_flusher(client: &Arc<Client>, pending: &Pending, flushes: &Arc<AtomicU64>) {
    let weak = Arc::downgrade(client);
    let (pending, flushes) = (pending.clone(), flushes.clone());
    client
        .router()
        .set_flusher(Arc::new(move |_dirs: Vec<Fid>| {
            let (weak, pending, flushes) = (weak.clone(), pending.clone(), flushes.clone());
            Box::pin(async move {
                let Some(client) = weak.upgrade() else { return };
                let todo: Vec<(Fid, MdtRequest)> =
                    std::mem::take(&mut *pending.lock().expect("lock"));
                flushes.fetch_add(1, Ordering::SeqCst);
                let Some((dir, _)) = todo.first() else { return };
                let reqs: Vec<MdtRequest> = todo.iter().map(|(_, r)| r.clone()).collect();
                let r = client.batch(&user(1000), *dir, reqs).await.expect("flush");
                assert!(r.iter().all(|r| r.is_ok()), "flushed: {r:?}");
            })
        }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_written_back_directory_is_sent_before_another_client_sees_it() {
    let c = start_cluster("wback").await;
    let a = connect_leasing(&c, "wback").await;
    let b = connect_leasing(&c, "wback").await;
    let plain = connect(&c, "wback").await;
    let (root, alice) = (user(0), user(1000));
    let home = a
        .mkdir(&root, Fid::ROOT, "home", 0o1777)
        .await
        .expect("home");
    let closed = a
        .mkdir(&root, Fid::ROOT, "closed", 0o755)
        .await
        .expect("closed");
    let w = a.mkdir(&alice, home.fid, "w", 0o755).await.expect("w");
    let w2 = a.mkdir(&alice, home.fid, "w2", 0o755).await.expect("w2");

    // Who may write back what.
    assert_eq!(
        a.take_write_back(&alice, home.fid).await.err(),
        Some(Errno::ENOTEMPTY)
    );
    assert_eq!(
        a.take_write_back(&alice, closed.fid).await.err(),
        Some(Errno::EACCES)
    );
    a.take_write_back(&alice, w.fid)
        .await
        .expect("write back w");
    assert_eq!(
        b.take_write_back(&alice, w.fid).await.err(),
        Some(Errno::EBUSY),
        "one client writes back a directory"
    );

    // A's changes, made and not sent: 100 files and a directory in w.
    let pending: Pending = Arc::new(Mutex::new(Vec::new()));
    let flushes = Arc::new(AtomicU64::new(0));
    install_flusher(&a, &pending, &flushes);
    let (first, _) = a.grant_fids(w.fid, 200).await.expect("grant");
    let at = |i: u32| Fid::new(first.seq, first.oid + i);
    {
        let mut p = pending.lock().expect("lock");
        for i in 0..100 {
            p.push((
                w.fid,
                make_at(w.fid, &format!("f{i:02}"), at(i), FileKind::File),
            ));
        }
        p.push((w.fid, make_at(w.fid, "sub", at(100), FileKind::Dir)));
    }
    let connects = a.router().rpc_stats().connects;

    // B's next access to w recalls the lease: here a lookup of w's name
    // in its parent, which shows w's attributes: its links count the
    // directory A made in it.
    let (seen_w, _) = b.lookup(&alice, home.fid, "w").await.expect("lookup w");
    assert_eq!(flushes.load(Ordering::SeqCst), 1, "one recall");
    assert_eq!(seen_w.nlink, 3, "w with the directory made in it");
    assert!(seen_w.mtime >= w.mtime);
    let (f42, _) = b.lookup(&alice, w.fid, "f42").await.expect("lookup f42");
    assert_eq!(f42.fid, at(42));
    assert_eq!(flushes.load(Ordering::SeqCst), 1, "sent once");
    let (entries, eof) = b.readdir(&alice, w.fid, 0, 1000).await.expect("readdir");
    assert!(eof);
    let mut names: Vec<String> = entries
        .iter()
        .map(|e| String::from_utf8_lossy(e.name.as_bytes()).into_owned())
        .filter(|n| n != "." && n != "..")
        .collect();
    names.sort();
    let mut want: Vec<String> = (0..100).map(|i| format!("f{i:02}")).collect();
    want.push("sub".into());
    assert_eq!(names, want);
    assert_eq!(flushes.load(Ordering::SeqCst), 1, "nothing more to recall");

    // A directory A makes in one it writes back, and sends while it
    // holds that one, is written back by A too: a change in it stays with
    // A until B reaches it. (One sent on a recall is not: A lost the
    // parent's lease first.)
    a.take_write_back(&alice, w2.fid)
        .await
        .expect("write back w2");
    let r = a
        .batch(
            &alice,
            w2.fid,
            vec![make_at(w2.fid, "sub2", at(110), FileKind::Dir)],
        )
        .await
        .expect("sent while held");
    assert!(r.iter().all(|r| r.is_ok()), "{r:?}");
    assert_eq!(
        b.take_write_back(&alice, at(110)).await.err(),
        Some(Errno::EBUSY),
        "inherited by its maker"
    );
    assert_eq!(
        b.take_write_back(&alice, at(100)).await.err(),
        None,
        "not inherited when sent on a recall"
    );
    pending
        .lock()
        .expect("lock")
        .push((at(110), make_at(at(110), "late", at(111), FileKind::File)));
    let (late, _) = b.lookup(&alice, at(110), "late").await.expect("late");
    assert_eq!(late.fid, at(111));
    assert_eq!(flushes.load(Ordering::SeqCst), 2, "one recall for sub2");

    // A client that takes no leases recalls too.
    let w4 = a.mkdir(&alice, home.fid, "w4", 0o755).await.expect("w4");
    a.take_write_back(&alice, w4.fid)
        .await
        .expect("write back w4");
    pending
        .lock()
        .expect("lock")
        .push((w4.fid, make_at(w4.fid, "seen", at(112), FileKind::File)));
    let (seen, _) = plain
        .lookup(&alice, w4.fid, "seen")
        .await
        .expect("seen by a plain client");
    assert_eq!(seen.fid, at(112));
    assert_eq!(flushes.load(Ordering::SeqCst), 3);
    // A change that touches the directory itself recalls too: B's rmdir
    // of a directory A made something in finds it not empty.
    let w5 = a.mkdir(&alice, home.fid, "w5", 0o755).await.expect("w5");
    a.take_write_back(&alice, w5.fid)
        .await
        .expect("write back w5");
    pending
        .lock()
        .expect("lock")
        .push((w5.fid, make_at(w5.fid, "kept", at(113), FileKind::File)));
    assert_eq!(
        b.rmdir(&alice, home.fid, "w5").await.err(),
        Some(Errno::ENOTEMPTY),
        "what A made in it was sent first"
    );
    assert_eq!(flushes.load(Ordering::SeqCst), 4);
    // Answered each time: no recall timed out (that would cut A's
    // connection).
    assert_eq!(
        a.router().rpc_stats().connects,
        connects,
        "A kept its connection"
    );
    // Once recalled, the lease is free for another client.
    let w3 = b.mkdir(&alice, home.fid, "w3", 0o755).await.expect("w3");
    b.take_write_back(&alice, w3.fid)
        .await
        .expect("B writes back w3");
    a.close().await;
    b.close().await;
    plain.close().await;
}
