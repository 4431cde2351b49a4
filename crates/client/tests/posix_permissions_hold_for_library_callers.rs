//! POSIX permission rules for users other than root, through the client
//! library (no kernel in between): the MDT checks them from the caller's
//! credentials carried in each request, and answers POSIX's errno.

mod common;
use common::*;
use loom_client::{Caller, Client};
use loom_proto::msg::{access, FileKind, SetAttr, SetTime, Time};
use loom_proto::{Errno, Fid};
use std::sync::Arc;

fn root() -> Caller {
    user_in(0, 0, &[])
}

/// Make `name` in `parent` as root, with mode `perm`, owned by `uid:gid`.
async fn made(
    client: &Arc<Client>,
    parent: Fid,
    name: &str,
    kind: FileKind,
    perm: u32,
    (uid, gid): (u32, u32),
) -> Fid {
    let r = root();
    let fid = if kind == FileKind::Dir {
        client
            .mkdir(&r, parent, name, perm)
            .await
            .expect("mkdir")
            .fid
    } else {
        client
            .create(&r, parent, name, kind, perm, 0, None)
            .await
            .expect("create")
            .0
            .fid
    };
    let set = SetAttr {
        uid: Some(uid),
        gid: Some(gid),
        perm: Some(perm),
        ..SetAttr::default()
    };
    client.setattr(&r, fid, set).await.expect("chown");
    fid
}

fn perm_of(set: impl FnOnce(&mut SetAttr)) -> SetAttr {
    let mut s = SetAttr::default();
    set(&mut s);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posix_permissions_hold_for_library_callers() {
    let cluster = start_cluster("perms").await;
    let client = connect(&cluster, "perms").await;
    let (alice, bob, carol) = (
        user_in(1000, 1000, &[2000]),
        user_in(1001, 1001, &[2000, 3000]),
        user_in(1002, 1002, &[]),
    );

    // Search, read and write bits along the path.
    let private = made(
        &client,
        Fid::ROOT,
        "private",
        FileKind::Dir,
        0o700,
        (1000, 1000),
    )
    .await;
    made(&client, private, "f", FileKind::File, 0o644, (1000, 1000)).await;
    assert!(client.lookup(&alice, private, "f").await.is_ok());
    assert_eq!(
        client.lookup(&bob, private, "f").await.err(),
        Some(Errno::EACCES)
    );
    assert_eq!(
        client.readdir(&bob, private, 0, 100).await.err(),
        Some(Errno::EACCES)
    );
    assert_eq!(
        client
            .create(&bob, private, "g", FileKind::File, 0o644, 0, None)
            .await
            .err(),
        Some(Errno::EACCES)
    );
    let shared = made(
        &client,
        Fid::ROOT,
        "shared",
        FileKind::Dir,
        0o750,
        (1000, 2000),
    )
    .await;
    let doc = made(&client, shared, "doc", FileKind::File, 0o640, (1000, 2000)).await;
    // bob is in group 2000 through a supplementary group: read, not write.
    assert!(client.open_checked(&bob, doc, access::READ).await.is_ok());
    assert_eq!(
        client.open_checked(&bob, doc, access::WRITE).await.err(),
        Some(Errno::EACCES)
    );
    assert_eq!(
        client.open_checked(&carol, doc, access::READ).await.err(),
        Some(Errno::EACCES)
    );
    assert_eq!(
        client.lookup(&carol, shared, "doc").await.err(),
        Some(Errno::EACCES),
        "no search bit for others"
    );
    // Truncate needs write permission, checked before any object is cut.
    let (_, f) = client
        .open_checked(&alice, doc, access::WRITE)
        .await
        .expect("owner opens for write");
    f.write(0, b"hello").await.expect("write");
    f.flush().await.expect("flush");
    assert_eq!(
        client
            .setattr(&bob, doc, perm_of(|s| s.size = Some(0)))
            .await
            .err(),
        Some(Errno::EACCES)
    );
    let (_, f) = client
        .open_checked(&bob, doc, access::READ)
        .await
        .expect("read");
    assert_eq!(f.read(0, 100).await.expect("read"), b"hello");

    // Sticky directories: only the owner of the entry or of the directory,
    // or root, may unlink or rename.
    let tmp = made(&client, Fid::ROOT, "tmp", FileKind::Dir, 0o1777, (0, 0)).await;
    client
        .create(&alice, tmp, "a", FileKind::File, 0o666, 0, None)
        .await
        .expect("alice creates");
    assert_eq!(
        client.unlink(&bob, tmp, "a").await.err(),
        Some(Errno::EPERM)
    );
    assert_eq!(
        client.rename(&bob, tmp, "a", tmp, "b", 0).await.err(),
        Some(Errno::EPERM)
    );
    client
        .create(&bob, tmp, "bobs", FileKind::File, 0o666, 0, None)
        .await
        .expect("bob creates");
    assert_eq!(
        client.rename(&alice, tmp, "a", tmp, "bobs", 0).await.err(),
        Some(Errno::EPERM),
        "replacing another user's entry"
    );
    client
        .rename(&alice, tmp, "a", tmp, "a2", 0)
        .await
        .expect("own rename");
    client.unlink(&alice, tmp, "a2").await.expect("own unlink");
    client
        .unlink(&root(), tmp, "bobs")
        .await
        .expect("root unlinks");

    // Setgid directories pass on their group, and their bit to new
    // subdirectories.
    let proj = made(&client, Fid::ROOT, "proj", FileKind::Dir, 0o2777, (0, 3000)).await;
    let (f, _) = client
        .create(&alice, proj, "file", FileKind::File, 0o2755, 0, None)
        .await
        .expect("create in setgid dir");
    assert_eq!(f.gid, 3000);
    assert_eq!(
        f.perm & 0o2000,
        0,
        "not in group 3000: no setgid on the file"
    );
    let d = client
        .mkdir(&alice, proj, "sub", 0o755)
        .await
        .expect("mkdir");
    assert_eq!((d.gid, d.perm), (3000, 0o2755));

    // chown by a non-root owner only to one of its groups.
    let mine = made(
        &client,
        Fid::ROOT,
        "mine",
        FileKind::File,
        0o644,
        (1000, 1000),
    )
    .await;
    assert_eq!(
        client
            .setattr(&alice, mine, perm_of(|s| s.uid = Some(1001)))
            .await
            .err(),
        Some(Errno::EPERM)
    );
    assert_eq!(
        client
            .setattr(&alice, mine, perm_of(|s| s.gid = Some(3000)))
            .await
            .err(),
        Some(Errno::EPERM)
    );
    let a = client
        .setattr(&alice, mine, perm_of(|s| s.gid = Some(2000)))
        .await
        .expect("chgrp to own group");
    assert_eq!(a.gid, 2000);
    assert_eq!(
        client
            .setattr(&bob, mine, perm_of(|s| s.perm = Some(0o777)))
            .await
            .err(),
        Some(Errno::EPERM),
        "chmod by another user"
    );

    // SUID and SGID are cleared by a write and by a chown by a non-root user.
    let prog = made(
        &client,
        Fid::ROOT,
        "prog",
        FileKind::File,
        0o6777,
        (1000, 2000),
    )
    .await;
    let (_, f) = client
        .open_checked(&bob, prog, access::WRITE)
        .await
        .expect("bob may write");
    f.write(0, b"x").await.expect("write");
    f.flush().await.expect("flush");
    assert_eq!(
        client.getattr(&root(), prog).await.expect("stat").perm,
        0o0777
    );
    client
        .setattr(&root(), prog, perm_of(|s| s.perm = Some(0o6755)))
        .await
        .expect("root sets the bits again");
    let (_, f) = client
        .open_checked(&root(), prog, access::WRITE)
        .await
        .expect("open");
    f.write(0, b"y").await.expect("root writes");
    f.flush().await.expect("flush");
    assert_eq!(
        client.getattr(&root(), prog).await.expect("stat").perm,
        0o6755,
        "root's write keeps them"
    );
    let a = client
        .setattr(&alice, prog, perm_of(|s| s.gid = Some(2000)))
        .await
        .expect("chgrp");
    assert_eq!(a.perm, 0o6755, "a chgrp to the same group changes nothing");
    let a = client
        .setattr(&alice, prog, perm_of(|s| s.gid = Some(1000)))
        .await
        .expect("chgrp to own group");
    assert_eq!(a.perm, 0o0755);

    // utimensat: only the owner or a writer may set times to now; only the
    // owner may set given times.
    let open = made(
        &client,
        Fid::ROOT,
        "open",
        FileKind::File,
        0o666,
        (1000, 1000),
    )
    .await;
    let closed = made(
        &client,
        Fid::ROOT,
        "closed",
        FileKind::File,
        0o644,
        (1000, 1000),
    )
    .await;
    let given = Time {
        sec: 946684798,
        nsec: 0,
    };
    assert!(client
        .setattr(&bob, open, perm_of(|s| s.mtime = Some(SetTime::Now)))
        .await
        .is_ok());
    assert_eq!(
        client
            .setattr(&bob, open, perm_of(|s| s.mtime = Some(SetTime::At(given))))
            .await
            .err(),
        Some(Errno::EPERM)
    );
    assert_eq!(
        client
            .setattr(&bob, closed, perm_of(|s| s.atime = Some(SetTime::Now)))
            .await
            .err(),
        Some(Errno::EACCES)
    );
    let a = client
        .setattr(
            &alice,
            closed,
            perm_of(|s| s.mtime = Some(SetTime::At(given))),
        )
        .await
        .expect("owner sets a given time");
    assert_eq!(a.mtime, given);

    // ctime and mtime of the inode and its parent move with every change.
    let work = made(
        &client,
        Fid::ROOT,
        "work",
        FileKind::Dir,
        0o777,
        (1000, 1000),
    )
    .await;
    let before = client.getattr(&alice, work).await.expect("stat");
    // Times are the MDT's clock in nanoseconds: each change below is a
    // round trip later than the one before, so times strictly grow.
    let (f, _) = client
        .create(&alice, work, "x", FileKind::File, 0o644, 0, None)
        .await
        .expect("create");
    let after_create = client.getattr(&alice, work).await.expect("stat");
    assert!(after_create.mtime > before.mtime && after_create.ctime > before.ctime);
    client.link(&alice, f.fid, work, "y").await.expect("link");
    let linked = client.getattr(&alice, f.fid).await.expect("stat");
    assert!(linked.ctime > f.ctime, "link changes the inode's ctime");
    client.unlink(&alice, work, "x").await.expect("unlink");
    let unlinked = client.getattr(&alice, f.fid).await.expect("stat");
    assert!(
        unlinked.ctime > linked.ctime,
        "unlink changes the inode's ctime"
    );
    let dir_after_unlink = client.getattr(&alice, work).await.expect("stat");
    assert!(dir_after_unlink.mtime > after_create.mtime);
    assert_eq!(
        client
            .rename(&alice, work, "y", Fid::ROOT, "y", 0)
            .await
            .err(),
        Some(Errno::EACCES),
        "into a directory alice may not write"
    );
    let sub = client
        .mkdir(&alice, work, "sub", 0o755)
        .await
        .expect("mkdir");
    client
        .rename(&alice, work, "y", sub.fid, "z", 0)
        .await
        .expect("rename");
    let (src, dst, moved) = (
        client.getattr(&alice, work).await.expect("stat"),
        client.getattr(&alice, sub.fid).await.expect("stat"),
        client.getattr(&alice, f.fid).await.expect("stat"),
    );
    assert!(src.mtime > dir_after_unlink.mtime && dst.mtime > sub.mtime);
    assert!(
        moved.ctime > unlinked.ctime,
        "rename changes the inode's ctime"
    );
}
