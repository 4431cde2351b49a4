//! Issue #32, the MDT side of write-back: a client reserves FIDs of an
//! MDT (`GrantFids`) and makes whole inodes under them (`MakeAt`): a file
//! with its final mode, owner, times and first bytes in one change, a
//! directory, a symlink; a batch of them is one round trip. As uid 1000.
//! The MDT refuses a FID granted to another client or already in use, an
//! owner or group the caller may not give, bytes its layout does not keep
//! on the MDT, grants of 0 or too many FIDs, and an inode past its
//! owner's quota; its own creates never take a granted FID. A second client sees every inode as made.
mod common;
use common::*;
use loom_client::Client;
use loom_proto::layout::LayoutSpec;
use loom_proto::msg::{FileKind, MdtRequest, Reply, Time};
use loom_proto::{Errno, Fid};
use std::sync::Arc;

const T0: Time = Time {
    sec: 1_600_000_000,
    nsec: 5,
};

#[allow(clippy::too_many_arguments)]
fn make_at(
    parent: Fid,
    name: &str,
    fid: Fid,
    kind: FileKind,
    perm: u32,
    who: u32,
    data: &[u8],
) -> MdtRequest {
    MdtRequest::MakeAt {
        parent,
        name: name.into(),
        fid,
        kind,
        perm,
        rdev: 0,
        uid: who,
        gid: who,
        atime: T0,
        mtime: T0,
        ctime: T0,
        made: T0,
        target: (kind == FileKind::Symlink).then(|| "f000".into()),
        data: data.to_vec(),
    }
}

fn nth(first: Fid, i: u32) -> Fid {
    Fid::new(first.seq, first.oid + i)
}

async fn one(client: &Arc<Client>, uid: u32, dir: Fid, req: MdtRequest) -> Result<Reply, Errno> {
    let mut r = client
        .batch(&user(uid), dir, vec![req])
        .await
        .expect("answered");
    assert_eq!(r.len(), 1);
    r.remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_makes_whole_inodes_under_fids_granted_to_it() {
    let c = start_cluster("makeat").await;
    let client = connect_leasing(&c, "makeat").await;
    let other = connect_leasing(&c, "makeat").await;
    let root = user(0);
    let home = client
        .mkdir(&root, Fid::ROOT, "home", 0o1777)
        .await
        .expect("mkdir home");
    let plain = client
        .mkdir(&root, Fid::ROOT, "plain", 0o1777)
        .await
        .expect("mkdir plain");
    client
        .set_default_layout_as(&root, home.fid, Some(LayoutSpec::dom_first(64 << 10)))
        .await
        .expect("default layout");

    // Grants: bounded, disjoint, in this MDT's sequence.
    for bad in [0, 4097] {
        assert_eq!(
            client.grant_fids(home.fid, bad).await.err(),
            Some(Errno::EINVAL),
            "a grant of {bad}"
        );
    }
    let (first, n) = client.grant_fids(home.fid, 300).await.expect("grant");
    assert_eq!(n, 300);
    let (theirs, _) = other.grant_fids(home.fid, 10).await.expect("grant");
    assert!(
        theirs.seq != first.seq || theirs.oid >= first.oid + 300,
        "disjoint: {first} + 300 and {theirs}"
    );
    // The MDT's own creates never take a granted FID.
    let (plain_file, _) = client
        .create(
            &user(1000),
            plain.fid,
            "made-by-mdt",
            FileKind::File,
            0o644,
            0,
            None,
        )
        .await
        .expect("create");
    let f = plain_file.fid;
    assert!(
        f.seq != first.seq || f.oid >= first.oid + 300 || f.oid < first.oid,
        "{f} is inside the grant"
    );

    // One batch: 200 files with their bytes, a directory, a symlink.
    let mut batch: Vec<MdtRequest> = (0..200)
        .map(|i| {
            let data = format!("file number {i}\n");
            make_at(
                home.fid,
                &format!("f{i:03}"),
                nth(first, i),
                FileKind::File,
                0o640,
                1000,
                data.as_bytes(),
            )
        })
        .collect();
    batch.push(make_at(
        home.fid,
        "sub",
        nth(first, 200),
        FileKind::Dir,
        0o750,
        1000,
        b"",
    ));
    batch.push(make_at(
        home.fid,
        "link",
        nth(first, 201),
        FileKind::Symlink,
        0,
        1000,
        b"",
    ));
    let before = client.router().calls();
    let results = client
        .batch(&user(1000), home.fid, batch)
        .await
        .expect("the batch");
    assert_eq!(
        client.router().calls(),
        (before.0 + 1, before.1),
        "one round trip"
    );
    assert_eq!(results.len(), 202);
    for (i, r) in results.iter().enumerate() {
        match r {
            Ok(Reply::Entry { attr, .. }) => assert_eq!(attr.fid, nth(first, i as u32)),
            other => panic!("make {i}: {other:?}"),
        }
    }

    // The second client sees each inode as made.
    let alice = user(1000);
    for i in [0u32, 77, 199] {
        let (a, layout) = other
            .lookup(&alice, home.fid, format!("f{i:03}"))
            .await
            .expect("lookup");
        let want = format!("file number {i}\n");
        assert_eq!(a.fid, nth(first, i));
        assert_eq!(
            (a.kind, a.uid, a.gid, a.perm & 0o7777),
            (FileKind::File, 1000, 1000, 0o640)
        );
        assert_eq!((a.mtime, a.atime), (T0, T0), "the times it was made with");
        assert_eq!(a.size, want.len() as u64);
        let f = other.open_as(&alice, a.fid, layout.expect("layout"), a.size);
        assert_eq!(f.read(0, 100).await.expect("read"), want.as_bytes());
    }
    let (sub, _) = other.lookup(&alice, home.fid, "sub").await.expect("sub");
    assert_eq!(
        (sub.kind, sub.perm & 0o7777, sub.nlink),
        (FileKind::Dir, 0o750, 2)
    );
    other
        .create(&alice, sub.fid, "inside", FileKind::File, 0o644, 0, None)
        .await
        .expect("a directory made under a grant works as any");
    let (link, _) = other.lookup(&alice, home.fid, "link").await.expect("link");
    assert_eq!(
        other
            .readlink(&alice, link.fid)
            .await
            .expect("readlink")
            .as_bytes(),
        b"f000"
    );

    // Refusals.
    let fresh = nth(first, 250);
    let cases: Vec<(&str, u32, Fid, MdtRequest, Errno)> = vec![
        (
            "another client's FID",
            1000,
            home.fid,
            make_at(home.fid, "x1", theirs, FileKind::File, 0o644, 1000, b""),
            Errno::EPERM,
        ),
        (
            "a FID in use",
            1000,
            home.fid,
            make_at(
                home.fid,
                "x2",
                nth(first, 5),
                FileKind::File,
                0o644,
                1000,
                b"",
            ),
            Errno::EEXIST,
        ),
        (
            "another owner",
            1000,
            home.fid,
            make_at(home.fid, "x3", fresh, FileKind::File, 0o644, 0, b""),
            Errno::EPERM,
        ),
        (
            "bytes without Data-on-MDT",
            1000,
            plain.fid,
            make_at(
                plain.fid,
                "x4",
                fresh,
                FileKind::File,
                0o644,
                1000,
                b"bytes",
            ),
            Errno::EINVAL,
        ),
        (
            "a name in use",
            1000,
            home.fid,
            make_at(home.fid, "f001", fresh, FileKind::File, 0o644, 1000, b""),
            Errno::EEXIST,
        ),
    ];
    for (what, uid, dir, req, errno) in cases {
        assert_eq!(
            one(&client, uid, dir, req).await.err(),
            Some(errno),
            "{what}"
        );
    }
    // A group the caller is not in.
    let mut req = make_at(home.fid, "x5", fresh, FileKind::File, 0o644, 1000, b"");
    if let MdtRequest::MakeAt { gid, .. } = &mut req {
        *gid = 4242;
    }
    assert_eq!(
        one(&client, 1000, home.fid, req).await.err(),
        Some(Errno::EPERM)
    );
    // None of the refused was made; the FID refused stays usable.
    for name in ["x1", "x2", "x3", "x5"] {
        assert_eq!(
            other.lookup(&alice, home.fid, name).await.err(),
            Some(Errno::ENOENT),
            "{name}"
        );
    }
    one(
        &client,
        1000,
        home.fid,
        make_at(home.fid, "x6", fresh, FileKind::File, 0o644, 1000, b"ok"),
    )
    .await
    .expect("the FID refused before");

    // The MDT counts each inode against its owner's quota: a batch stops
    // at the first that would pass the hard limit.
    use loom_proto::quota::{QuotaId, QuotaLimits};
    client
        .set_quota(
            QuotaId::user(2000),
            QuotaLimits {
                inode_hard: 5,
                ..QuotaLimits::default()
            },
        )
        .await
        .expect("set the quota");
    let bob: Vec<MdtRequest> = (0..8)
        .map(|i| {
            make_at(
                home.fid,
                &format!("bob{i}"),
                nth(first, 260 + i),
                FileKind::File,
                0o644,
                2000,
                b"",
            )
        })
        .collect();
    let r = client
        .batch(&user(2000), home.fid, bob)
        .await
        .expect("answered");
    assert_eq!(r.len(), 6, "{r:?}");
    assert!(r[..5].iter().all(|r| r.is_ok()), "{r:?}");
    assert_eq!(r[5].as_ref().err(), Some(&Errno::EDQUOT), "the sixth inode");
    client.close().await;
    other.close().await;
}
