//! Issue #10 point 3, through the library: a user's client keeps working
//! on a directory that root's client moves to another MDT while the user
//! has a file open in it. Its handle writes, fsyncs and reads on; its
//! stats, creates, unlinks and listings are answered by the new MDT
//! (its requests are redirected once, then routed there); POSIX
//! permissions still hold; and only root may migrate.
mod common;
use common::*;
use loom_client::Errno;
use loom_proto::msg::{access, DirStripe, FileKind};
use loom_proto::Fid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_library_client_follows_a_migrated_tree() {
    let c = start_cluster_with_mdts("follow", 2).await;
    let admin = connect_leasing(&c, "follow").await;
    let client = connect_leasing(&c, "follow").await;
    let root = me();
    let alice = user(1000);
    let bob = user(2000);
    let on0 = DirStripe {
        count: 1,
        start_mdt: 0,
    };
    let proj = admin
        .mkdir_striped(&root, Fid::ROOT, "proj", 0o777, on0)
        .await
        .expect("mkdir");
    let mine = client
        .mkdir(&alice, proj.fid, "mine", 0o755)
        .await
        .expect("mkdir mine");
    let mut files = Vec::new();
    for i in 0..20 {
        let a = client
            .create(
                &alice,
                mine.fid,
                format!("f{i}"),
                FileKind::File,
                0o644,
                0,
                None,
            )
            .await
            .expect("create");
        files.push(a.0.fid);
    }
    assert_eq!(client.locate(mine.fid).await.expect("locate"), 0);
    let (_, open) = client
        .open_checked(&alice, files[0], access::READ | access::WRITE)
        .await
        .expect("open");
    open.write(0, b"abc").await.expect("write before");

    // Only root may move it; root's client moves it.
    assert_eq!(
        client.migrate_dir(&alice, mine.fid, 1).await.map(|_| ()),
        Err(Errno::EPERM)
    );
    let (moved, stayed) = admin
        .migrate_dir(&root, mine.fid, 1)
        .await
        .expect("migrate");
    assert_eq!((moved, stayed), (21, 0), "the directory and its 20 files");

    // The open handle goes on.
    open.write(3, b"def").await.expect("write after the move");
    open.fsync().await.expect("fsync after the move");
    assert_eq!(open.read(0, 6).await.expect("read"), b"abcdef");
    let a = client.getattr(&alice, files[0]).await.expect("stat");
    assert_eq!(a.size, 6);
    // The user's requests now go to MDT1.
    let before = client.router().calls().0;
    let n = client
        .create(&alice, mine.fid, "new", FileKind::File, 0o644, 0, None)
        .await
        .expect("create after the move");
    assert_eq!(client.locate(n.0.fid).await.expect("locate"), 1);
    assert_eq!(client.locate(files[7]).await.expect("locate"), 1);
    assert_eq!(
        client.router().mdt_of(mine.fid).await.expect("route").index,
        1
    );
    assert!(client.router().calls().0 > before);
    client
        .unlink(&alice, mine.fid, "f1")
        .await
        .expect("unlink after the move");
    let (entries, eof) = client
        .readdir(&alice, mine.fid, 0, 100)
        .await
        .expect("list");
    assert!(eof);
    let mut names: Vec<String> = entries.iter().map(|e| e.name.to_string()).collect();
    names.sort();
    let mut want: Vec<String> = (0..20)
        .filter(|i| *i != 1)
        .map(|i| format!("f{i}"))
        .chain(["new".to_string()])
        .collect();
    want.sort();
    assert_eq!(names, want);
    // Permissions hold on the new MDT: bob may not write in alice's 0755
    // directory, and may read her 0644 file.
    assert_eq!(
        client
            .create(&bob, mine.fid, "bobs", FileKind::File, 0o644, 0, None)
            .await
            .map(|_| ()),
        Err(Errno::EACCES)
    );
    let (_, theirs) = client
        .open_checked(&bob, files[0], access::READ)
        .await
        .expect("bob opens alice's file");
    assert_eq!(theirs.read(0, 6).await.expect("bob reads"), b"abcdef");
    // The other client, which moved it, sees the user's changes.
    let seen = admin.getattr(&root, files[0]).await.expect("stat");
    assert_eq!(seen.size, 6);
}
