//! Issue #29, point 6 (filesets) through the library: a nodemap confines
//! the clients of 127.0.0.2 to /proj, a directory on the second MDT. A
//! library client from there, with only the client key, sees /proj as its
//! root and reaches everything under it (a striped directory's shards on
//! both MDTs too), but nothing outside, whatever FID it names: every such
//! request is refused (EACCES) by the MDTs, and the tree-wide ones
//! (changelog) are refused outright (EPERM). A file renamed out of the
//! fileset, on one MDT or across two, is out of reach from then on; the
//! fileset stays its clients' root when renamed. A client from 127.0.0.1
//! sees the whole tree.

mod common;
use common::*;
use loom_client::{Caller, Client, ClientOptions};
use loom_proto::msg::{access, DirStripe, FileKind};
use loom_proto::nodemap::{Fileset, Net, Nodemap};
use loom_proto::{Errno, Fid};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn root() -> Caller {
    user_in(0, 0, &[])
}

fn on_mdt(i: i32) -> DirStripe {
    DirStripe {
        count: 1,
        start_mdt: i,
    }
}

async fn file(c: &Arc<Client>, dir: Fid, name: &str, data: &[u8]) -> Fid {
    let (a, layout) = c
        .create(&root(), dir, name, FileKind::File, 0o644, 0, None)
        .await
        .expect("create");
    let f = c.open_as(&root(), a.fid, layout.expect("a layout"), 0);
    f.write(0, data).await.expect("write");
    f.flush().await.expect("flush");
    a.fid
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fileset_confines_its_clients_to_a_subtree_on_every_mdt() {
    let cluster = start_cluster_with_mdts("fset1", 2).await;
    let admin = connect(&cluster, "fset1").await;
    let proj = admin
        .mkdir_striped(&root(), Fid::ROOT, "proj", 0o755, on_mdt(1))
        .await
        .expect("mkdir proj on MDT1");
    let inside = file(&admin, proj.fid, "in", b"inside").await;
    let wide = admin
        .mkdir_striped(
            &root(),
            proj.fid,
            "wide",
            0o755,
            DirStripe {
                count: 2,
                start_mdt: 0,
            },
        )
        .await
        .expect("a striped directory in the fileset");
    let mut in_wide = Vec::new();
    for i in 0..8 {
        in_wide.push(file(&admin, wide.fid, &format!("w{i}"), b"w").await);
    }
    let sub = admin
        .mkdir(&root(), proj.fid, "sub", 0o755)
        .await
        .expect("mkdir proj/sub");
    let leaves_locally = file(&admin, sub.fid, "leaves-locally", b"l").await;
    let leaves_across = file(&admin, sub.fid, "leaves-across", b"a").await;
    let out = file(&admin, Fid::ROOT, "out", b"outside").await;
    // Outside, on the fileset's MDT: a rename there is local to MDT1.
    let out1 = admin
        .mkdir_striped(&root(), Fid::ROOT, "out1", 0o755, on_mdt(1))
        .await
        .expect("mkdir out1 on MDT1");

    let lab = Nodemap {
        admin: true,
        fileset: Some(Fileset {
            fid: proj.fid,
            path: "/proj".into(),
        }),
        ..Nodemap::new("lab", vec![Net::parse("127.0.0.2").expect("net")])
    };
    admin
        .set_nodemap(&root(), "lab", Some(lab.clone()))
        .await
        .expect("set lab");
    assert_eq!(admin.nodemaps().await.expect("list"), vec![lab]);

    let node = cluster.with_key(cluster.key.client_key());
    let from = |src: &str| ClientOptions {
        call_timeout: Duration::from_secs(20),
        source: Some(src.parse().expect("an address")),
        ..ClientOptions::default()
    };
    // Servers read the nodemaps within a second or two: a client that
    // connected before is asked again until its root is the fileset.
    let deadline = Instant::now() + Duration::from_secs(30);
    let confined = loop {
        let c = connect_with(&node, "fset1", from("127.0.0.2")).await;
        if c.root().await.expect("root") == proj.fid {
            break c;
        }
        assert!(Instant::now() < deadline, "the fileset never applied");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let plain = connect_with(&node, "fset1", from("127.0.0.1")).await;
    assert_eq!(plain.root().await.expect("root"), Fid::ROOT);

    // Inside: paths start at the fileset, and everything under it is
    // reached, on both MDTs and in every shard.
    let a = confined.resolve_path_as(&root(), "in").await.expect("in");
    assert_eq!(a.fid, inside);
    let (_, h) = confined
        .open_checked(&root(), inside, access::READ)
        .await
        .expect("open in");
    assert_eq!(h.read(0, 64).await.expect("read"), b"inside".to_vec());
    for (i, f) in in_wide.iter().enumerate() {
        let (a, _) = confined
            .lookup(&root(), wide.fid, format!("w{i}"))
            .await
            .expect("a name in a shard");
        assert_eq!(a.fid, *f);
        confined
            .getattr(&root(), *f)
            .await
            .expect("getattr in a shard");
    }
    let names: Vec<String> = confined
        .readdir(&root(), proj.fid, 0, 100)
        .await
        .expect("list the root")
        .0
        .iter()
        .map(|e| String::from_utf8_lossy(e.name.as_bytes()).into_owned())
        .collect();
    for n in ["in", "sub", "wide"] {
        assert!(names.iter().any(|x| x == n), "{n} in {names:?}");
    }
    confined
        .create(&root(), sub.fid, "made", FileKind::File, 0o644, 0, None)
        .await
        .expect("create inside");

    // Outside: refused, whatever FID is named, by the MDT that has it.
    let refused = |what: &str, r: Result<(), Errno>| {
        assert_eq!(r, Err(Errno::EACCES), "{what}");
    };
    refused(
        "getattr of the file system's root",
        confined.getattr(&root(), Fid::ROOT).await.map(|_| ()),
    );
    refused(
        "getattr of a file outside",
        confined.getattr(&root(), out).await.map(|_| ()),
    );
    refused(
        "a lookup in the root",
        confined.lookup(&root(), Fid::ROOT, "out").await.map(|_| ()),
    );
    refused(
        "an open outside",
        confined
            .open_checked(&root(), out, access::READ)
            .await
            .map(|_| ()),
    );
    refused(
        "a listing of the root",
        confined
            .readdir(&root(), Fid::ROOT, 0, 10)
            .await
            .map(|_| ()),
    );
    refused(
        "a rename out of the fileset",
        confined
            .rename(&root(), proj.fid, "in", Fid::ROOT, "stolen", 0)
            .await,
    );
    refused(
        "a link to a file outside",
        confined
            .link(&root(), out, proj.fid, "pulled-in")
            .await
            .map(|_| ()),
    );
    refused(
        "a link placed outside",
        confined
            .link(&root(), inside, out1.fid, "pushed-out")
            .await
            .map(|_| ()),
    );
    assert_eq!(
        confined
            .changelog_read(0, 0, 10, Duration::ZERO)
            .await
            .map(|_| ()),
        Err(Errno::EPERM),
        "the changelog shows names outside"
    );
    assert!(
        admin.getattr(&root(), inside).await.is_ok(),
        "nothing refused to the confined client was done"
    );

    // Files renamed out of the fileset are out of its reach: by a rename
    // within MDT1, and by one from MDT1 to MDT0.
    admin
        .rename(&root(), sub.fid, "leaves-locally", out1.fid, "l", 0)
        .await
        .expect("rename within MDT1");
    admin
        .rename(&root(), sub.fid, "leaves-across", Fid::ROOT, "a", 0)
        .await
        .expect("rename to MDT0");
    refused(
        "a file moved out on one MDT",
        confined.getattr(&root(), leaves_locally).await.map(|_| ()),
    );
    refused(
        "a file moved out across MDTs",
        confined.getattr(&root(), leaves_across).await.map(|_| ()),
    );
    // Everything stays reachable from a client outside any fileset.
    plain.getattr(&root(), out).await.expect("plain: out");
    plain
        .getattr(&root(), leaves_locally)
        .await
        .expect("plain: moved");

    // The fileset is a directory, not a path: renamed, it stays the root.
    admin
        .rename(&root(), Fid::ROOT, "proj", Fid::ROOT, "proj2", 0)
        .await
        .expect("rename proj");
    confined
        .getattr(&root(), inside)
        .await
        .expect("inside after the fileset was renamed");
}
