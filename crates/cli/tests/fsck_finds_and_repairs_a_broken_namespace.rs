//! Issue #10 (`loom fsck`, the namespace part of LFSCK): a namespace with
//! a remote directory, a striped one, hard links and subdirectories
//! checks clean; then three inconsistencies are planted in an MDT's store
//! (as a bug or a lost write would leave them): an entry whose inode is
//! gone, an inode whose only entry is gone, a wrong link count. fsck
//! finds each (exit 4), repairs each (exit 1: the entry removed, the
//! orphan linked into /lost+found/MDT0000 with its data, the count set),
//! and then checks clean (exit 0); the data object of the inode that
//! went is found as an object no file refers to, and reclaimed. What
//! another mount sees afterwards agrees.
mod common;
use common::*;
use loom_proto::Fid;
use loom_server::mdt::records::{dentry_key, inode_key, InodeRec};
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
    c.kill9("mdt0");
    {
        let store = FjallStore::open(&c.state.join("targets/mdt0/db")).expect("open the MDT store");
        let mut b = Batch::new();
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
    }
    c.restart("mdt0");

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
    let problems = [
        "dangling entry:",
        "orphan inode:",
        "wrong link count:",
        "orphan object:",
    ];
    assert_eq!(
        out.lines()
            .filter(|l| problems.iter().any(|p| l.starts_with(p)))
            .count(),
        4,
        "{out}"
    );

    let (code, out) = fsck(&c, &["--min-age", "0", "--repair"]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(out.matches("repaired: ").count(), 4, "{out}");
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
}
