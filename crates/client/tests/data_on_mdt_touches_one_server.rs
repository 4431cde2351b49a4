//! Issue #9, point 3, through the library: in a directory whose default
//! layout keeps the first 64 KiB on the MDT, a small file's create,
//! write, read and stat go to the MDT alone (the client's per-role call
//! counters: no OST request), as an unprivileged caller. A second client
//! sees each change at its next operation; a write past 64 KiB goes to
//! the OSTs and reads back across the boundary.
mod common;
use common::*;
use loom_proto::layout::{ComponentSpec, LayoutSpec};
use loom_proto::msg::{access, FileKind, SetAttr};
use loom_proto::{Fid, StripeSpec};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_file_on_the_mdt_touches_one_server() {
    let c = start_cluster("dom").await;
    let client = connect_leasing(&c, "dom").await;
    let other = connect_leasing(&c, "dom").await;
    let root = user(0);
    let user = user(1000);
    let dir = client
        .mkdir(&root, Fid::ROOT, "home", 0o1777)
        .await
        .expect("mkdir");
    let spec = LayoutSpec {
        components: vec![
            ComponentSpec {
                end: 64 << 10,
                on_mdt: true,
                stripe: StripeSpec::default(),
            },
            ComponentSpec {
                end: u64::MAX,
                on_mdt: false,
                stripe: StripeSpec {
                    count: -1,
                    ..StripeSpec::default()
                },
            },
        ],
    };
    client
        .set_default_layout_as(&root, dir.fid, Some(spec.clone()))
        .await
        .expect("set the default layout");
    assert_eq!(
        client.get_default_layout(dir.fid).await.expect("get"),
        Some(spec)
    );

    let before = client.router().calls();
    let (attr, layout) = client
        .create(&user, dir.fid, "small", FileKind::File, 0o644, 0, None)
        .await
        .expect("create");
    let layout = layout.expect("a file's layout");
    assert_eq!(layout.dom_end(), 64 << 10);
    let f = client.open_as(&user, attr.fid, layout.clone(), attr.size);
    f.write(0, b"four kilobytes or so").await.expect("write");
    f.flush().await.expect("close");
    assert_eq!(f.read(0, 100).await.expect("read"), b"four kilobytes or so");
    let seen = client.getattr(&user, attr.fid).await.expect("stat");
    assert_eq!(seen.size, 20);
    let after = client.router().calls();
    assert_eq!(after.1, before.1, "no OST request for a small file");
    assert!(after.0 > before.0, "the MDT answered");

    // The other client reads it, then sees an overwrite and a truncate.
    let (_, g) = other
        .open_checked(&user, attr.fid, access::READ)
        .await
        .expect("open on the other client");
    assert_eq!(g.read(0, 100).await.expect("read"), b"four kilobytes or so");
    f.write(5, b"KILO").await.expect("overwrite");
    let (a2, g) = other
        .open_checked(&user, attr.fid, access::READ)
        .await
        .expect("reopen");
    assert_eq!(a2.size, 20);
    assert_eq!(g.read(0, 100).await.expect("read"), b"four KILObytes or so");
    client
        .setattr(
            &user,
            attr.fid,
            SetAttr {
                size: Some(4),
                ..SetAttr::default()
            },
        )
        .await
        .expect("truncate");
    assert_eq!(other.getattr(&user, attr.fid).await.expect("stat").size, 4);

    // Past the MDT's part: on the OSTs, read back across the boundary.
    let tail: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    f.write(60_000, &tail).await.expect("write across 64 KiB");
    f.flush().await.expect("close");
    assert!(
        client.router().calls().1 > after.1,
        "the OSTs took the rest"
    );
    let (a3, g) = other
        .open_checked(&user, attr.fid, access::READ)
        .await
        .expect("reopen");
    assert_eq!(a3.size, 160_000);
    let all = g.read(0, 200_000).await.expect("read all");
    assert_eq!(&all[..4], b"four");
    assert!(
        all[4..60_000].iter().all(|&b| b == 0),
        "truncated, then a hole"
    );
    assert_eq!(&all[60_000..], &tail[..]);
}
