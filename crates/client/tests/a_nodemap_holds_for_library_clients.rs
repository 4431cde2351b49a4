//! Issue #29, point 6 (nodemaps) through the library: a library client
//! holding only the client key and connecting from 127.0.0.2 is served
//! under the nodemap root sets for that address, by the MDT and the OSTs
//! alike; a client from 127.0.0.1 is served as it says.

mod common;
use common::*;
use loom_client::{Caller, ClientOptions};
use loom_proto::msg::{access, FileKind, SetAttr};
use loom_proto::nodemap::{Net, Nodemap};
use loom_proto::{Errno, Fid};
use std::time::{Duration, Instant};

fn root() -> Caller {
    user_in(0, 0, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_network_is_squashed_and_made_read_only_for_library_callers() {
    let cluster = start_cluster("nmap1").await;
    let admin = connect(&cluster, "nmap1").await;
    // What a client node holds: the client key, not the cluster key; and
    // the address its connections leave from.
    let from = |src: &str| ClientOptions {
        call_timeout: Duration::from_secs(20),
        source: Some(src.parse().expect("an address")),
        ..ClientOptions::default()
    };
    let node = cluster.with_key(cluster.key.client_key());
    let (secret, layout) = admin
        .create(&root(), Fid::ROOT, "secret", FileKind::File, 0o600, 0, None)
        .await
        .expect("create secret");
    let f = admin.open_as(&root(), secret.fid, layout.expect("a layout"), 0);
    f.write(0, b"root's").await.expect("write");
    f.flush().await.expect("flush");
    let open_dir = admin
        .mkdir(&root(), Fid::ROOT, "pub", 0o777)
        .await
        .expect("mkdir pub");

    // Bad nodemaps are refused, and only root may set one.
    let lab = Nodemap::new("lab", vec![Net::parse("127.0.0.2").expect("net")]);
    let bad = Nodemap::new("lab", vec![]);
    assert_eq!(
        admin.set_nodemap(&root(), "lab", Some(bad)).await,
        Err(Errno::EINVAL)
    );
    assert_eq!(
        admin
            .set_nodemap(&user_in(1000, 1000, &[]), "lab", Some(lab.clone()))
            .await,
        Err(Errno::EPERM)
    );
    admin
        .set_nodemap(&root(), "lab", Some(lab.clone()))
        .await
        .expect("set lab");
    assert_eq!(admin.nodemaps().await.expect("list"), vec![lab.clone()]);

    let mapped = connect_with(&node, "nmap1", from("127.0.0.2")).await;
    let plain = connect_with(&node, "nmap1", from("127.0.0.1")).await;
    // The server reads the nodemaps within a second or two.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match mapped.open_checked(&root(), secret.fid, access::READ).await {
            Err(Errno::EACCES) => break,
            Ok(_) => assert!(Instant::now() < deadline, "root never squashed"),
            Err(e) => panic!("open as squashed root: {e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (made, _) = mapped
        .create(
            &root(),
            open_dir.fid,
            "by-root",
            FileKind::File,
            0o644,
            0,
            None,
        )
        .await
        .expect("squashed root creates in a 0777 directory");
    assert_eq!((made.uid, made.gid), (65534, 65534));
    let (_, h) = plain
        .open_checked(&root(), secret.fid, access::READ)
        .await
        .expect("root from another network opens");
    assert_eq!(h.read(0, 64).await.expect("read"), b"root's".to_vec());

    // Read-only: changes refused by the MDT and the OSTs; reads go on.
    let (_, mine) = mapped
        .open_checked(&root(), made.fid, access::WRITE)
        .await
        .expect("open for write");
    let ro = Nodemap {
        readonly: true,
        ..lab
    };
    admin
        .set_nodemap(&root(), "lab", Some(ro))
        .await
        .expect("set read-only");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let set = SetAttr {
            perm: Some(0o600),
            ..SetAttr::default()
        };
        match mapped.setattr(&root(), made.fid, set).await {
            Err(Errno::EROFS) => break,
            Ok(_) => assert!(Instant::now() < deadline, "never read-only"),
            Err(e) => panic!("chmod on a read-only client: {e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let w = match mine.write(0, b"x").await {
        Ok(_) => mine.flush().await,
        Err(e) => Err(e),
    };
    assert_eq!(
        w.err(),
        Some(Errno::EROFS),
        "an OST write from a read-only client"
    );
    assert_eq!(
        mapped.mkdir(&root(), open_dir.fid, "d", 0o755).await.err(),
        Some(Errno::EROFS)
    );
    let (_, h) = mapped
        .open_checked(&root(), made.fid, access::READ)
        .await
        .expect("reads go on");
    assert_eq!(h.read(0, 8).await.expect("read"), Vec::<u8>::new());
    plain
        .mkdir(&root(), open_dir.fid, "still", 0o755)
        .await
        .expect("another network still writes");
}

/// A leasing client answers a walk it made before from its leases, with
/// no request. When a nodemap comes to map its ids, the server closes the
/// connection it took leases on: its leases go, and its next walk is the
/// MDT's, as squashed root. When the nodemap goes, it takes leases again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_nodemap_takes_a_leasing_clients_cache_away() {
    let cluster = start_cluster("nmap2").await;
    let admin = connect(&cluster, "nmap2").await;
    let node = cluster.with_key(cluster.key.client_key());
    let opts = ClientOptions {
        call_timeout: Duration::from_secs(20),
        source: Some("127.0.0.2".parse().expect("an address")),
        caching: loom_client::routing::Caching {
            attr_timeout: Duration::from_secs(1),
            lease_time: Some(Duration::from_secs(300)),
        },
        ..ClientOptions::default()
    };
    let private = admin
        .mkdir(&root(), Fid::ROOT, "private", 0o700)
        .await
        .expect("mkdir private");
    admin
        .create(&root(), private.fid, "f", FileKind::File, 0o644, 0, None)
        .await
        .expect("create");
    let leasing = connect_with(&node, "nmap2", opts).await;
    let me = root();
    let walk = || leasing.resolve_path_as(&me, "private/f");
    walk().await.expect("root walks");
    let before = leasing.router().calls();
    walk().await.expect("root walks again");
    assert_eq!(leasing.router().calls(), before, "answered from its leases");

    let lab = Nodemap::new("lab", vec![Net::parse("127.0.0.2").expect("net")]);
    admin
        .set_nodemap(&root(), "lab", Some(lab))
        .await
        .expect("set lab");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match walk().await {
            Err(Errno::EACCES) => break,
            Ok(_) => assert!(Instant::now() < deadline, "still answered as root"),
            Err(e) => panic!("walk as squashed root: {e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    admin
        .set_nodemap(&root(), "lab", None)
        .await
        .expect("remove lab");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match walk().await {
            Ok(_) => break,
            Err(Errno::EACCES) => assert!(Instant::now() < deadline, "still squashed"),
            Err(e) => panic!("walk after the nodemap went: {e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    walk().await.expect("walks, and leases it");
    let before = leasing.router().calls();
    walk().await.expect("walks again");
    assert_eq!(
        leasing.router().calls(),
        before,
        "leased again once the nodemap went"
    );
}
