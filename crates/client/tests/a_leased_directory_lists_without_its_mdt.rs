//! Issue #9 (`find`, `du` and `ls -lR` of a tree): a directory whose whole
//! list, names and inodes' attributes this client holds leases on (it made
//! them, or listed them once) is listed without its MDT, with what the MDT
//! would answer: the same entries, order and cookies, in batches that
//! resume from any cookie. Another client's create or unlink recalls the
//! list, and the next listing asks the MDT. Callers the mode bits do not
//! let read get the MDT's EACCES.
mod common;
use common::*;
use loom_client::{Caller, Client, Errno};
use loom_proto::msg::FileKind;
use loom_proto::Fid;
use std::sync::Arc;

/// Every (name, cookie, FID) of `dir` as `who` lists it, `batch` at a
/// time, and the MDT requests it took.
async fn listing(
    client: &Arc<Client>,
    who: &Caller,
    dir: Fid,
    batch: u32,
) -> Result<(Vec<(String, u64, Fid)>, u64), Errno> {
    let before = client.router().calls().0;
    let (mut all, mut cookie) = (Vec::new(), 0);
    loop {
        let (entries, eof) = client.readdir(who, dir, cookie, batch).await?;
        assert!(entries.len() <= batch as usize, "a batch holds at most max");
        for e in &entries {
            all.push((e.name.to_string(), e.cookie, e.attr.fid));
            cookie = e.cookie;
        }
        if eof {
            break;
        }
        assert!(!entries.is_empty(), "not at its end, yet nothing listed");
    }
    Ok((all, client.router().calls().0 - before))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_directory_lists_without_its_mdt() {
    let c = start_cluster("lists").await;
    let client = connect_leasing(&c, "lists").await;
    let other = connect_leasing(&c, "lists").await;
    let root = Caller::current();
    let d = client
        .mkdir(&root, Fid::ROOT, "d", 0o1777)
        .await
        .expect("mkdir");
    let u = user(1000);
    for i in 0..300 {
        client
            .create(&u, d.fid, format!("f{i}"), FileKind::File, 0o644, 0, None)
            .await
            .expect("create");
    }
    client.mkdir(&u, d.fid, "sub", 0o755).await.expect("mkdir");

    // What the MDT answers: the other client's first listing.
    let (want, asked) = listing(&other, &root, d.fid, 64).await.expect("list");
    assert!(asked > 0, "the other client holds no lease on the list");
    assert_eq!(want.len(), 301);

    // This client made it all: listed from its leases, as the MDT would,
    // by root and by a user who may read it; in any batch size.
    for (who, batch) in [(&root, 64), (&user(65534), 7), (&u, 1000)] {
        let (got, asked) = listing(&client, who, d.fid, batch).await.expect("list");
        assert_eq!(got, want, "batches of {batch}");
        assert_eq!(asked, 0, "listed without the MDT");
    }

    // A directory only its owner may read: the MDT refuses the others.
    let p = client.mkdir(&root, d.fid, "p", 0o700).await.expect("mkdir");
    assert_eq!(
        listing(&client, &user(65534), p.fid, 64).await.map(|_| ()),
        Err(Errno::EACCES)
    );
    assert_eq!(
        listing(&client, &root, p.fid, 64)
            .await
            .map(|(l, _)| l.len()),
        Ok(0)
    );

    // The other client adds a name and removes one: this client's list is
    // recalled, the next listing asks the MDT and sees both.
    other
        .create(&u, d.fid, "new", FileKind::File, 0o644, 0, None)
        .await
        .expect("create on the other client");
    other.unlink(&u, d.fid, "f0").await.expect("unlink");
    let (got, asked) = listing(&client, &root, d.fid, 64).await.expect("list");
    assert!(asked > 0, "the recalled list was asked of the MDT");
    let names: Vec<&str> = got.iter().map(|(n, _, _)| n.as_str()).collect();
    assert!(
        names.contains(&"new") && !names.contains(&"f0"),
        "{names:?}"
    );
    assert_eq!(got.len(), 302, "300 files, sub, p, new, less f0");
    // A listing the MDT answers whole in one reply leases the list again
    // (one in batches does not: the MDT leases a list it sent whole), and
    // the next needs no MDT once the directory's own attributes (changed
    // by those names, so recalled too; the read permission is checked on
    // them) are leased again, as the kernel's stat at opendir does.
    client.getattr(&root, d.fid).await.expect("stat");
    let (whole, asked) = listing(&client, &root, d.fid, 1000).await.expect("list");
    assert_eq!((&whole, asked), (&got, 1));
    let (again, asked) = listing(&client, &root, d.fid, 64).await.expect("list");
    assert_eq!((again, asked), (got, 0));
}
