//! Issue #10 (`loom fsck`, the namespace part of LFSCK): a namespace with
//! a remote directory, a striped one, hard links and subdirectories
//! checks clean; then six inconsistencies are planted in the MDTs' stores
//! (as a bug or a lost write would leave them): an entry whose inode is
//! gone, an inode whose only entry is gone, a wrong link count, and a file
//! and a directory entry of the striped directory each in the other
//! shard (on the other MDT) than its name hashes to, and a remote
//! directory whose inode names another parent than the root that holds
//! its entry. fsck finds each
//! (exit 4), repairs each (exit 1: the entry removed, the orphan linked
//! into /lost+found/MDT0000 with its data, the count set, the misplaced
//! entries moved to their shards),
//! and then checks clean (exit 0); the data object of the inode that
//! went is found as an object no file refers to, and reclaimed. What
//! another mount sees afterwards agrees.
mod common;
use common::*;
use loom_proto::Fid;
use loom_server::mdt::records::{dentry_key, inode_key, DentryRec, InodeRec};
use loom_store::kv::{Batch, FjallStore, KvStore, Space};
use std::os::unix::fs::MetadataExt;

fn fid_of(p: &std::path::Path) -> Fid {
    Fid::from_ino(std::fs::metadata(p).expect("stat").ino())
}

#[test]
fn fsck_finds_and_repairs_a_broken_namespace() {
    let mut c = Cluster::up(2, 1, &[]);
    let a = c.path("a");
    std::fs::create_dir_all(a.join("sub/deeper")).expect("mkdir");
    loom_ok(&["mkdir", "-i", "1", c.path("remote").to_str().expect("utf8")]);
    std::fs::create_dir(c.path("remote/inside")).expect("mkdir in remote");
    loom_ok(&[
        "mkdir",
        "-c",
        "2",
        c.path("striped").to_str().expect("utf8"),
    ]);
    for i in 0..8 {
        std::fs::write(c.path(&format!("striped/f{i}")), b"s").expect("file in striped");
        std::fs::create_dir(c.path(&format!("striped/d{i}"))).expect("dir in striped");
    }
    for name in ["f1", "orph", "dang"] {
        std::fs::write(a.join(name), format!("{name} data")).expect("file");
    }
    std::fs::hard_link(a.join("f1"), a.join("f1-link")).expect("link");
    std::fs::hard_link(a.join("f1"), a.join("f1-link2")).expect("link");
    std::fs::remove_file(a.join("f1-link2")).expect("unlink a link");
    // Committed before the MDT is killed: an fsync commits every change
    // this client made.
    let o = sh(&format!(
        "dd if=/dev/null of={} conv=fsync status=none && echo ok",
        a.join("sync").display()
    ));
    assert!(o.contains("ok"), "{o}");
    let (code, out) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 0, "a consistent namespace:\n{out}");

    let (dir, f1, orph, dang) = (
        fid_of(&a),
        fid_of(&a.join("f1")),
        fid_of(&a.join("orph")),
        fid_of(&a.join("dang")),
    );
    let striped = fid_of(&c.path("striped"));
    let remote = fid_of(&c.path("remote"));
    c.kill9("mdt0");
    c.kill9("mdt1");
    let misplaced = {
        let open = |m: u32| {
            FjallStore::open(&c.state.join(format!("targets/mdt{m}/db")))
                .expect("open an MDT store")
        };
        let stores = [open(0), open(1)];
        let read = |m: usize, fid: Fid| {
            let raw = stores[m]
                .get(Space::Inodes, &inode_key(fid))
                .expect("get")
                .expect("an inode");
            InodeRec::decode(&raw).expect("decode")
        };
        let layout = read(0, striped)
            .layout
            .expect("the striped directory's layout");
        let shards = layout.dir_shards().expect("shards").to_vec();
        assert_eq!(shards.len(), 2);
        assert!(
            read(1, shards[1]).attr.kind == loom_proto::msg::FileKind::Dir,
            "shard 1 on MDT1"
        );
        // The first file whose name hashes to shard 0 goes to shard 1, and
        // the first directory of shard 1 to shard 0, as if each had been
        // made in the wrong shard (the shards' link counts follow).
        let pick = |prefix: &str, shard: usize| {
            (0..8)
                .map(|i| format!("{prefix}{i}"))
                .find(|n| layout.shard_for(n.as_bytes()) == Some(shards[shard]))
                .expect("a name of that shard")
        };
        let (file, subdir) = (pick("f", 0), pick("d", 1));
        let mut b = [Batch::new(), Batch::new()];
        for (name, from, to) in [(&file, 0usize, 1usize), (&subdir, 1, 0)] {
            let key = dentry_key(shards[from], &name.as_str().into());
            let raw = stores[from]
                .get(Space::Dentries, &key)
                .expect("get")
                .expect("the entry");
            let d: DentryRec = loom_proto::msg::decode(&raw).expect("an entry");
            b[from].delete(Space::Dentries, key);
            b[to].put(
                Space::Dentries,
                dentry_key(shards[to], &name.as_str().into()),
                loom_proto::msg::encode(&d).expect("encode"),
            );
            if d.kind == loom_proto::msg::FileKind::Dir {
                for (m, up) in [(from, false), (to, true)] {
                    let mut r = read(m, shards[m]);
                    r.attr.nlink = if up {
                        r.attr.nlink + 1
                    } else {
                        r.attr.nlink - 1
                    };
                    b[m].put(
                        Space::Inodes,
                        inode_key(shards[m]),
                        loom_proto::msg::encode(&r).expect("encode"),
                    );
                }
            }
        }
        // The remote directory's inode (on MDT1) names another parent
        // than the root, whose entry names it.
        let mut r = read(1, remote);
        r.parent = dir;
        b[1].put(
            Space::Inodes,
            inode_key(remote),
            loom_proto::msg::encode(&r).expect("encode"),
        );
        let [b0, b1] = b;
        let t = stores[1].apply(b1).expect("apply");
        stores[1].sync_through(t).expect("sync");
        drop(stores);
        let store = open(0);
        let mut b = b0;
        // The inode of "dang" goes, its entry stays.
        b.delete(Space::Inodes, inode_key(dang));
        // The entry of "orph" goes, its inode stays.
        b.delete(Space::Dentries, dentry_key(dir, &"orph".into()));
        // f1 has 2 names; its count says 5.
        let raw = store
            .get(Space::Inodes, &inode_key(f1))
            .expect("get")
            .expect("f1's inode");
        let mut rec = InodeRec::decode(&raw).expect("decode");
        rec.attr.nlink = 5;
        b.put(
            Space::Inodes,
            inode_key(f1),
            loom_proto::msg::encode(&rec).expect("encode"),
        );
        let t = store.apply(b).expect("apply");
        store.sync_through(t).expect("sync");
        [file, subdir]
    };
    c.restart("mdt0");
    c.restart("mdt1");

    let (code, out) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 4, "{out}");
    assert!(
        out.contains(&format!(
            "dangling entry: \"dang\" in directory {dir} (MDT0000) names {dang}"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "orphan inode: {orph} on MDT0000, a file of 9 bytes, has no name"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "wrong link count: {f1} on MDT0000 has nlink 5, its names say 2"
        )),
        "{out}"
    );
    // The inode that went took the only reference to its data's object.
    assert!(out.contains("orphan object: loom-OST0000 object"), "{out}");
    assert!(
        out.contains("fsck: 1 objects no file refers to, 9 bytes"),
        "{out}"
    );
    for name in &misplaced {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("entry in the wrong shard: {name:?} ")))
            .unwrap_or_else(|| panic!("{name} is not reported:\n{out}"));
        assert!(
            line.contains(&format!("of striped directory {striped} is in shard")),
            "{line}"
        );
    }
    assert!(
        out.contains(&format!(
            "wrong parent: directory {remote} on MDT0001 says its parent is {dir}, its entry is in "
        )),
        "{out}"
    );
    let problems = [
        "dangling entry:",
        "orphan inode:",
        "wrong link count:",
        "orphan object:",
        "entry in the wrong shard:",
        "wrong parent:",
    ];
    assert_eq!(
        out.lines()
            .filter(|l| problems.iter().any(|p| l.starts_with(p)))
            .count(),
        7,
        "{out}"
    );

    let (code, out) = fsck(&c, &["--min-age", "0", "--repair"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(out.matches("repaired: ").count(), 7, "{out}");
    assert_eq!(out.matches("repaired: moved entry").count(), 2, "{out}");
    let (code, out) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 0, "after the repairs:\n{out}");

    let m2 = c.second_mount("m2");
    assert!(
        !m2.join("a/dang").exists(),
        "the dangling entry is still listed"
    );
    let adopted = m2.join(format!("lost+found/MDT0000/{orph}"));
    assert_eq!(
        std::fs::read(&adopted).expect("the adopted orphan"),
        b"orph data"
    );
    assert_eq!(
        std::fs::metadata(m2.join("a/f1")).expect("stat f1").nlink(),
        2
    );
    assert_eq!(
        std::fs::read(m2.join("a/f1-link")).expect("f1's link"),
        b"f1 data"
    );
    // The moved entries are found by name again (a lookup asks the shard
    // the name hashes to) and listed once.
    let listed: Vec<String> = std::fs::read_dir(m2.join("striped"))
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed.len(), 16, "{listed:?}");
    for name in &misplaced {
        assert_eq!(
            listed.iter().filter(|n| *n == name).count(),
            1,
            "{listed:?}"
        );
        assert!(
            m2.join("striped").join(name).exists(),
            "{name} is not found by name"
        );
    }
    assert_eq!(
        std::fs::read(m2.join("striped").join(&misplaced[0])).expect("the moved file"),
        b"s"
    );
}
