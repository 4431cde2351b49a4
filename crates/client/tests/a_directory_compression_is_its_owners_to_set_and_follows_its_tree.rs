//! Issue #11, compression, through the library: a directory's default
//! compression is set by its owner or root (EPERM for anyone else; a bad
//! level EINVAL), inherited by new subdirectories on this MDT and on
//! another one (a remote directory copies it), taken by new files in their
//! layouts, and switched off below with `off`; a compressed file's bytes
//! read back as written, also from a second client.
mod common;
use common::*;
use loom_proto::layout::DirHash;
use loom_proto::msg::{DirDefault, FileKind};
use loom_proto::{Compress, Errno, Fid};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_compression_is_its_owners_to_set_and_follows_its_tree() {
    let c = start_cluster_with_mdts("packed", 2).await;
    let client = connect(&c, "packed").await;
    let (root, alice, bob) = (user(0), user(1000), user(1001));
    let shared = client
        .mkdir(&root, Fid::ROOT, "shared", 0o1777)
        .await
        .expect("mkdir");
    let home = client
        .mkdir(&alice, shared.fid, "alice", 0o755)
        .await
        .expect("alice's mkdir");

    // The file system's default is root's to set.
    assert_eq!(
        client
            .set_default_compress_as(&alice, Fid::ROOT, Some(Compress::LZ4))
            .await,
        Err(Errno::EPERM)
    );
    client
        .set_default_compress_as(&root, Fid::ROOT, Some(Compress::zstd(3)))
        .await
        .expect("root's default");
    assert_eq!(
        client.get_default_compress(&bob, home.fid).await,
        Ok(Some(Compress::zstd(3))),
        "inherited from the root"
    );
    // Hers to change on her directory, not Bob's; levels are checked.
    assert_eq!(
        client
            .set_default_compress_as(&bob, home.fid, Some(Compress::LZ4))
            .await,
        Err(Errno::EPERM)
    );
    assert_eq!(
        client
            .set_default_compress_as(&alice, home.fid, Some(Compress::zstd(30)))
            .await,
        Err(Errno::EINVAL)
    );
    client
        .set_default_compress_as(&alice, home.fid, Some(Compress::LZ4))
        .await
        .expect("her own");

    // Her subdirectories follow, here and on MDT1 (placed there by her
    // default placement: a cross-MDT mkdir that must carry it).
    let near = client
        .mkdir(&alice, home.fid, "near", 0o755)
        .await
        .expect("mkdir");
    client
        .set_dir_default_as(
            &alice,
            home.fid,
            Some(DirDefault {
                count: 1,
                mdts: vec![1],
                hash: DirHash::NameHashMod,
            }),
        )
        .await
        .expect("placement");
    let far = client
        .mkdir(&alice, home.fid, "far", 0o755)
        .await
        .expect("mkdir");
    assert_eq!(client.router().mdt_of(far.fid).await.expect("mdt").index, 1);
    let mut files = Vec::new();
    for dir in [near.fid, far.fid] {
        assert_eq!(
            client.get_default_compress(&alice, dir).await,
            Ok(Some(Compress::LZ4))
        );
        let (attr, layout) = client
            .create(&alice, dir, "f", FileKind::File, 0o644, 0, None)
            .await
            .expect("create");
        assert_eq!(layout.expect("a layout").compress, Some(Compress::LZ4));
        files.push(attr.fid);
    }

    // `off` below stops it; removing her default brings back the root's.
    let plain = client
        .mkdir(&alice, home.fid, "plain", 0o755)
        .await
        .expect("mkdir");
    client
        .set_default_compress_as(&alice, plain.fid, Some(Compress::OFF))
        .await
        .expect("off");
    let (_, layout) = client
        .create(&alice, plain.fid, "g", FileKind::File, 0o644, 0, None)
        .await
        .expect("create");
    assert_eq!(layout.expect("a layout").compress, None);
    client
        .set_default_compress_as(&alice, home.fid, None)
        .await
        .expect("remove");
    assert_eq!(
        client.get_default_compress(&alice, home.fid).await,
        Ok(Some(Compress::zstd(3)))
    );

    // A compressed file's bytes, written at odd offsets, read back the
    // same through this client and a second one.
    let data: Vec<u8> = (0..700_000u32)
        .map(|i| b"loomfs packs chunks "[(i % 20) as usize] ^ ((i / 65_536) as u8))
        .collect();
    let (attr, f) = client
        .open_checked(&alice, files[1], loom_proto::msg::access::WRITE)
        .await
        .expect("open");
    assert_eq!(attr.kind, FileKind::File);
    f.write(0, &data[..300_001]).await.expect("write");
    f.write(300_001, &data[300_001..]).await.expect("write");
    f.write(70_000, &data[70_000..70_100])
        .await
        .expect("rewrite");
    f.fsync().await.expect("fsync");
    for cl in [client.clone(), connect(&c, "packed").await] {
        let (_, g) = cl
            .open_checked(&alice, files[1], loom_proto::msg::access::READ)
            .await
            .expect("open");
        let got = g.read(0, 1 << 20).await.expect("read");
        assert!(got == data, "{} bytes read back differ", got.len());
    }
}
