//! The client library against real MGS, MDT and OST services, hosted by
//! one in-process server node on loopback (no FUSE, no mocks).

mod common;
use common::*;
use loom_client::{Client, ClientError, ClientOptions, ClusterKey};
use loom_proto::layout::object_size_for;
use loom_proto::msg::{rename_flags, FileKind, SetAttr, Time};
use loom_proto::{Errno, Fid, Layout, ObjRef, StripeSpec};
use std::time::Duration;

/// Deterministic pseudo-random bytes.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn striped_writes_read_back_across_reopen_with_holes_and_truncate() {
    let cluster = start_cluster("iotest").await;
    let client = connect(&cluster, "iotest").await;
    let c = me();
    let spec = StripeSpec {
        count: 4,
        size: 64 << 10,
        start_ost: -1,
        pool: None,
    };
    let (attr, layout) = client
        .create(
            &c,
            Fid::ROOT,
            "striped",
            FileKind::File,
            0o644,
            0,
            Some(spec),
        )
        .await
        .expect("create");
    let layout = layout.expect("a regular file has a layout");
    let (ss, objs) = layout.raid0_params().expect("raid0");
    assert_eq!((ss, objs.len()), (64 << 10, 4));

    // Write 1 MiB + 100 in uneven pieces, some larger than a stripe row.
    let data = pattern((1 << 20) + 100, 7);
    let f = client.open_as(&c, attr.fid, layout.clone(), attr.size);
    let mut off = 0usize;
    for (i, step) in [1000usize, 300_000, 5, 65_536, 700_000]
        .iter()
        .cycle()
        .enumerate()
    {
        if off >= data.len() || i > 100 {
            break;
        }
        let end = (off + step).min(data.len());
        f.write(off as u64, &data[off..end]).await.expect("write");
        off = end;
    }
    assert_eq!(f.size(), data.len() as u64);
    // Before close, a stat through this client sees the written size.
    assert_eq!(
        client.getattr(&c, attr.fid).await.expect("getattr").size,
        data.len() as u64
    );
    f.flush().await.expect("flush");
    drop(f);

    // The MDT has the size now; reopen and read in odd chunks.
    let a = client.getattr(&c, attr.fid).await.expect("getattr");
    assert_eq!(a.size, data.len() as u64);
    let f = client.open_as(&c, a.fid, layout.clone(), a.size);
    let mut got = Vec::new();
    while (got.len() as u64) < a.size {
        let chunk = f.read(got.len() as u64, 77_777).await.expect("read");
        assert!(!chunk.is_empty());
        got.extend_from_slice(&chunk);
    }
    assert_eq!(got, data);
    assert!(f.read(a.size, 10).await.expect("read at eof").is_empty());

    // A write far past the end leaves a hole of zeros.
    let far = 5u64 << 20;
    f.write(far, b"tail").await.expect("write far");
    f.fsync().await.expect("fsync");
    let mid = f.read(3 << 20, 1000).await.expect("read hole");
    assert_eq!(mid, vec![0u8; 1000]);
    assert_eq!(
        f.read(far - 2, 10).await.expect("read tail"),
        b"\0\0tail".to_vec()
    );
    assert_eq!(
        client.getattr(&c, a.fid).await.expect("getattr").size,
        far + 4
    );

    // Truncate through the client: objects shrink, open handle learns it.
    let t = 100_000u64;
    let a = client
        .setattr(
            &c,
            a.fid,
            SetAttr {
                size: Some(t),
                ..SetAttr::default()
            },
        )
        .await
        .expect("truncate");
    assert_eq!(a.size, t);
    assert_eq!(f.size(), t);
    for (i, o) in objs.iter().enumerate() {
        assert_eq!(
            client.object_size(a.fid, *o).await.expect("object size"),
            object_size_for(ss, objs.len(), i, t),
            "object {i}"
        );
    }
    let all = f.read(0, 1 << 20).await.expect("read after truncate");
    assert_eq!(all, data[..t as usize].to_vec());
    f.flush().await.expect("flush");
    assert_eq!(client.getattr(&c, a.fid).await.expect("getattr").size, t);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_operations_behave_like_posix() {
    let cluster = start_cluster("nstest").await;
    let client = connect(&cluster, "nstest").await;
    let c = me();
    let d = client
        .mkdir(&c, Fid::ROOT, "dir", 0o755)
        .await
        .expect("mkdir");
    assert_eq!(d.kind, FileKind::Dir);
    assert_eq!(
        client.mkdir(&c, Fid::ROOT, "dir", 0o755).await.map(|_| ()),
        Err(Errno::EEXIST)
    );
    // Enough entries for several readdir pages.
    for i in 0..50 {
        client
            .create(
                &c,
                d.fid,
                &format!("f{i:02}"),
                FileKind::File,
                0o600,
                0,
                None,
            )
            .await
            .expect("create");
    }
    let mut names = Vec::new();
    let mut cookie = 0;
    loop {
        let (entries, eof) = client.readdir(&c, d.fid, cookie, 7).await.expect("readdir");
        assert!(entries.len() <= 7);
        if let Some(last) = entries.last() {
            cookie = last.cookie;
        }
        names.extend(entries.into_iter().map(|e| e.name));
        if eof {
            break;
        }
    }
    names.sort();
    let want: Vec<String> = (0..50).map(|i| format!("f{i:02}")).collect();
    assert_eq!(names, want);

    // Rename with and without NOREPLACE, links, symlinks.
    client
        .rename(&c, d.fid, "f00", Fid::ROOT, "moved", 0)
        .await
        .expect("rename");
    assert_eq!(
        client
            .rename(&c, d.fid, "f01", d.fid, "f02", rename_flags::NOREPLACE)
            .await,
        Err(Errno::EEXIST)
    );
    assert_eq!(
        client.rename(&c, d.fid, "f01", d.fid, "f02", 4).await,
        Err(Errno::EINVAL)
    );
    let (moved, _) = client.lookup(&c, Fid::ROOT, "moved").await.expect("lookup");
    let l = client
        .link(&c, moved.fid, d.fid, "hard")
        .await
        .expect("link");
    assert_eq!(l.nlink, 2);
    let s = client
        .symlink(&c, Fid::ROOT, "sym", "dir/f03")
        .await
        .expect("symlink");
    assert_eq!(s.kind, FileKind::Symlink);
    assert_eq!(
        client.readlink(&c, s.fid).await.expect("readlink"),
        "dir/f03"
    );
    let fifo = client
        .create(&c, d.fid, "pipe", FileKind::Fifo, 0o644, 0, None)
        .await
        .expect("mkfifo");
    assert_eq!(fifo.0.kind, FileKind::Fifo);
    assert!(fifo.1.is_none());

    // Paths resolve component by component.
    assert_eq!(client.resolve_path("").await.expect("root").fid, Fid::ROOT);
    assert_eq!(
        client.resolve_path("/dir/hard").await.expect("path").fid,
        moved.fid
    );
    assert_eq!(
        client.resolve_path("dir/../moved").await.expect("path").fid,
        moved.fid
    );
    assert_eq!(
        client.resolve_path("dir/nope").await.map(|_| ()),
        Err(Errno::ENOENT)
    );

    // Attributes: chmod, utimes.
    let t = Time {
        sec: 1_000_000,
        nsec: 5,
    };
    let a = client
        .setattr(
            &c,
            moved.fid,
            SetAttr {
                perm: Some(0o640),
                mtime: Some(loom_proto::msg::SetTime::At(t)),
                ..SetAttr::default()
            },
        )
        .await
        .expect("setattr");
    assert_eq!((a.perm, a.mtime), (0o640, t));

    // Extended attributes.
    client
        .setxattr(&c, moved.fid, "user.k", b"v", 0)
        .await
        .expect("setxattr");
    assert_eq!(
        client
            .getxattr(&c, moved.fid, "user.k")
            .await
            .expect("getxattr"),
        b"v"
    );
    assert_eq!(
        client.listxattr(&c, moved.fid).await.expect("listxattr"),
        vec!["user.k".to_string()]
    );
    assert_eq!(
        client.getxattr(&c, moved.fid, "user.none").await,
        Err(Errno::ENODATA)
    );
    client
        .removexattr(&c, moved.fid, "user.k")
        .await
        .expect("removexattr");

    // Default striping of a directory.
    let spec = StripeSpec {
        count: 2,
        size: 128 << 10,
        start_ost: -1,
        pool: None,
    };
    client
        .set_default_stripe(d.fid, Some(spec))
        .await
        .expect("setstripe");
    let got = client
        .get_default_stripe(d.fid)
        .await
        .expect("getstripe")
        .expect("set");
    assert_eq!((got.count, got.size), (2, 128 << 10));
    let (_, lay) = client
        .create(&c, d.fid, "inherits", FileKind::File, 0o644, 0, None)
        .await
        .expect("create");
    let lay = lay.expect("layout");
    assert_eq!(
        lay.raid0_params().map(|(s, o)| (s, o.len())),
        Some((128 << 10, 2))
    );
    assert_eq!(
        client
            .get_layout(
                client
                    .lookup(&c, d.fid, "inherits")
                    .await
                    .expect("lookup")
                    .0
                    .fid
            )
            .await
            .expect("getlayout"),
        lay
    );

    // Removal.
    assert_eq!(
        client.rmdir(&c, Fid::ROOT, "dir").await,
        Err(Errno::ENOTEMPTY)
    );
    client.unlink(&c, Fid::ROOT, "moved").await.expect("unlink");
    assert_eq!(
        client.lookup(&c, Fid::ROOT, "moved").await.map(|_| ()),
        Err(Errno::ENOENT)
    );

    // Usage: every target answers; the sum has bytes and files.
    let per = client.target_statfs().await;
    assert_eq!(per.len(), 1 + OSTS as usize);
    for u in &per {
        let s = u.usage.as_ref().expect("every target answers");
        assert_eq!(s.target, Some(u.target));
    }
    let sum = client.statfs().await.expect("statfs");
    assert!(sum.bytes_total > 0 && sum.files_total > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_with_the_wrong_fsname_says_which_one_is_served() {
    let cluster = start_cluster("right").await;
    let _ = connect(&cluster, "right").await;
    let e = Client::connect(
        &cluster.mgs,
        "wrong",
        cluster.key.clone(),
        ClientOptions::default(),
    )
    .await
    .expect_err("wrong fsname must fail");
    assert!(matches!(e, ClientError::WrongFsname { .. }), "{e}");
    assert!(e.to_string().contains("it serves 'right'"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_nothing_fails_quickly_with_the_address() {
    let addr = format!("127.0.0.1:{}", free_port());
    let opts = ClientOptions {
        connect_timeout: Duration::from_secs(1),
        ..ClientOptions::default()
    };
    let e = Client::connect(&addr, "x", ClusterKey::generate(), opts)
        .await
        .expect_err("nothing listens there");
    assert!(matches!(e, ClientError::MgsUnreachable { .. }), "{e}");
    assert!(e.to_string().contains(&addr), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn io_to_a_target_that_never_appears_fails_with_eio_after_the_call_timeout() {
    let cluster = start_cluster("eiotest").await;
    let client = connect_with_timeout(&cluster, "eiotest", Duration::from_secs(2)).await;
    let layout = Layout::raid0(64 << 10, vec![ObjRef { ost: 77, oid: 1 }]);
    let f = client.open(Fid::new(0x400, 1), layout, 10);
    let t = std::time::Instant::now();
    assert_eq!(f.read(0, 10).await, Err(Errno::EIO));
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_secs(2) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_striped_directory_lists_every_name_once_in_small_pages() {
    let cl = start_cluster_with_mdts("dne", 3).await;
    let client = connect(&cl, "dne").await;
    let c = me();
    let stripe = loom_proto::msg::DirStripe {
        count: 3,
        start_mdt: 1,
    };
    let d = client
        .mkdir_striped(&c, Fid::ROOT, "wide", 0o755, stripe)
        .await
        .expect("mkdir striped");
    let shards = client
        .dir_shards(&c, d.fid)
        .await
        .expect("layout")
        .expect("striped");
    let mut owners = Vec::new();
    for s in shards.iter() {
        owners.push(client.router().mdt_of(*s).await.expect("owner").index);
    }
    assert_eq!(owners, vec![1, 2, 0]);
    let mut per_mdt = [0usize; 3];
    for i in 0..120 {
        let (attr, _) = client
            .create(
                &c,
                d.fid,
                format!("f{i:03}"),
                FileKind::File,
                0o600,
                0,
                None,
            )
            .await
            .expect("create");
        per_mdt[client.router().mdt_of(attr.fid).await.expect("mdt").index as usize] += 1;
    }
    assert!(per_mdt.iter().all(|n| *n >= 20), "uneven: {per_mdt:?}");
    // Pages smaller than a shard's share, and cookies that resume across
    // shards: every name exactly once, in cookie order.
    for page in [1u32, 7, 50, 1000] {
        let (mut names, mut cookie, mut last) = (Vec::new(), 0, 0);
        loop {
            let (entries, eof) = client
                .readdir(&c, d.fid, cookie, page)
                .await
                .expect("readdir");
            assert!(entries.len() <= page as usize, "page {page}");
            for e in &entries {
                assert!(e.cookie > last, "cookies must rise: page {page}");
                last = e.cookie;
            }
            if let Some(e) = entries.last() {
                cookie = e.cookie;
            }
            names.extend(entries.into_iter().map(|e| e.name.to_string()));
            if eof {
                break;
            }
        }
        names.sort();
        let want: Vec<String> = (0..120).map(|i| format!("f{i:03}")).collect();
        assert_eq!(names, want, "page {page}");
    }
    // A name is found (and removed) in its shard.
    let (a, _) = client.lookup(&c, d.fid, "f042").await.expect("lookup");
    client.unlink(&c, d.fid, "f042").await.expect("unlink");
    assert_eq!(client.getattr(&c, a.fid).await.err(), Some(Errno::ENOENT));
    let e = client
        .rmdir(&c, Fid::ROOT, "wide")
        .await
        .expect_err("not empty");
    assert_eq!(e, Errno::ENOTEMPTY);
}
