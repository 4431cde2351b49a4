//! Issue #10, point 1: rename(2) and link(2) across MDTs, never EXDEV.
//! Through the mount (as root and as uid 65534), seen from a second mount
//! whose kernel held the old names, and through the library (the check
//! that a directory does not move into itself, which a kernel makes
//! before asking a file system, and rename flags): files and directories
//! between MDTs, between the shards of one striped directory, into and
//! out of a striped directory; replacing a file (kept open: an orphan) or
//! an empty directory; NOREPLACE and EXCHANGE; link counts and `..` after
//! each; hard links to inodes on other MDTs, and their unlink. Inodes
//! stay on their MDT (no data is copied). `loom fsck` is clean at the end.
mod common;
use common::*;
use loom_client::{Caller, ClientOptions};
use loom_proto::msg::rename_flags;
use loom_proto::Fid;
use nix::fcntl::{renameat2, RenameFlags};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn rename2(from: &Path, to: &Path, flags: RenameFlags) -> std::io::Result<()> {
    renameat2(None, from, None, to, flags).map_err(std::io::Error::from)
}

fn nlink(p: &Path) -> u64 {
    std::fs::metadata(p).expect("stat").nlink()
}

fn errno_of(r: std::io::Result<()>) -> i32 {
    r.expect_err("must fail").raw_os_error().unwrap_or(0)
}

#[test]
fn renames_and_links_across_mdts_follow_posix() {
    let mut c = Cluster::up(3, 1, &[]);
    let other = c.second_mount("other");
    let p = |rel: &str| c.path(rel);
    let s = |rel: &str| p(rel).to_str().expect("utf-8").to_string();
    loom_ok(&["mkdir", "-i", "1", &s("a1")]);
    loom_ok(&["mkdir", "-i", "2", &s("a2")]);
    loom_ok(&["setdirstripe", "-c", "3", "-i", "0", &s("wide")]);
    let o = |rel: &str| other.join(rel);

    // A file between MDTs: the name moves, the inode (and its data) stays.
    std::fs::write(p("a1/f"), b"file bytes").expect("write");
    let ino = std::fs::metadata(p("a1/f")).expect("stat").ino();
    // The other mount's kernel holds the old name and the empty target.
    assert!(o("a1/f").exists() && !o("a2/g").exists());
    std::fs::rename(p("a1/f"), p("a2/g")).expect("rename across MDTs");
    assert_eq!(std::fs::read(p("a2/g")).expect("read"), b"file bytes");
    assert_eq!(std::fs::metadata(p("a2/g")).expect("stat").ino(), ino);
    assert_eq!(mdt_of(&p("a2/g")), 1, "the inode stays on MDT1");
    assert!(!p("a1/f").exists());
    assert!(
        !o("a1/f").exists(),
        "the other mount still sees the old name"
    );
    assert_eq!(std::fs::read(o("a2/g")).expect("read there"), b"file bytes");

    // Replacing a file on another MDT, which this mount has open: it stays
    // readable until closed (an orphan on its MDT).
    std::fs::write(p("a1/x"), b"new").expect("write");
    std::fs::write(p("a2/y"), b"old contents").expect("write");
    let held = std::fs::File::open(p("a2/y")).expect("open");
    std::fs::rename(p("a1/x"), p("a2/y")).expect("replace across MDTs");
    assert_eq!(std::fs::read(p("a2/y")).expect("read"), b"new");
    assert_eq!(std::fs::read(o("a2/y")).expect("read there"), b"new");
    let mut old = String::new();
    std::io::Read::read_to_string(&mut &held, &mut old).expect("read the replaced file");
    assert_eq!(old, "old contents");
    drop(held);

    // NOREPLACE and EXCHANGE across MDTs.
    std::fs::write(p("a1/e1"), b"one").expect("write");
    std::fs::write(p("a2/e2"), b"two").expect("write");
    let noreplace = rename2(&p("a1/e1"), &p("a2/e2"), RenameFlags::RENAME_NOREPLACE);
    assert_eq!(errno_of(noreplace), libc::EEXIST);
    rename2(&p("a1/e1"), &p("a2/e2"), RenameFlags::RENAME_EXCHANGE).expect("exchange");
    assert_eq!(std::fs::read(p("a1/e1")).expect("read"), b"two");
    assert_eq!(std::fs::read(o("a2/e2")).expect("read there"), b"one");
    let missing = rename2(&p("a1/e1"), &p("a2/none"), RenameFlags::RENAME_EXCHANGE);
    assert_eq!(errno_of(missing), libc::ENOENT);

    // A directory tree between MDTs: link counts, `..`, and its contents.
    std::fs::create_dir_all(p("a1/d/sub")).expect("mkdir");
    for i in 0..5 {
        std::fs::write(p(&format!("a1/d/sub/f{i}")), format!("{i}")).expect("write");
    }
    let (n1, n2) = (nlink(&p("a1")), nlink(&p("a2")));
    assert!(o("a1/d/sub/f3").exists());
    sh(&format!("mv {} {}", s("a1/d"), s("a2/d")));
    assert_eq!((nlink(&p("a1")), nlink(&p("a2"))), (n1 - 1, n2 + 1));
    assert_eq!((nlink(&o("a1")), nlink(&o("a2"))), (n1 - 1, n2 + 1));
    assert_eq!(
        std::fs::metadata(p("a2/d/..")).expect("..").ino(),
        std::fs::metadata(p("a2")).expect("a2").ino(),
        "the moved directory's .. is its new parent"
    );
    assert_eq!(mdt_of(&p("a2/d")), 1, "the directory's inode stays");
    assert_eq!(std::fs::read(o("a2/d/sub/f3")).expect("read"), b"3");
    assert!(!o("a1/d").exists());

    // Replacing a directory: an empty one goes, a full one stays.
    std::fs::create_dir(p("a1/empty")).expect("mkdir");
    let e = std::fs::rename(p("a2/d"), p("a1/empty"));
    assert!(e.is_ok(), "onto an empty directory: {e:?}");
    assert_eq!(std::fs::read(p("a1/empty/sub/f0")).expect("read"), b"0");
    std::fs::create_dir_all(p("a2/full/x")).expect("mkdir");
    assert_eq!(
        errno_of(std::fs::rename(p("a1/empty"), p("a2/full"))),
        libc::ENOTEMPTY
    );
    std::fs::write(p("a2/plain"), b"p").expect("write");
    assert_eq!(
        errno_of(std::fs::rename(p("a1/empty"), p("a2/plain"))),
        libc::ENOTDIR
    );
    assert_eq!(
        errno_of(std::fs::rename(p("a2/plain"), p("a1/empty"))),
        libc::EISDIR
    );
    // Exchanging a directory and a file across MDTs.
    rename2(&p("a1/empty"), &p("a2/plain"), RenameFlags::RENAME_EXCHANGE).expect("exchange");
    assert!(p("a1/empty").is_file() && p("a2/plain/sub/f4").is_file());
    assert_eq!(
        std::fs::metadata(p("a2/plain/..")).expect("..").ino(),
        std::fs::metadata(p("a2")).expect("a2").ino()
    );

    // Into and out of a striped directory, and between its shards.
    let names: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
    for n in &names {
        std::fs::write(p(&format!("wide/{n}")), n).expect("write");
    }
    let on = |m: u32| {
        names
            .iter()
            .find(|n| mdt_of(&p(&format!("wide/{n}"))) == m)
            .expect("a name on that MDT")
            .clone()
    };
    let (n0, n1, n2) = (on(0), on(1), on(2));
    std::fs::remove_file(p(&format!("wide/{n2}"))).expect("unlink");
    std::fs::rename(p(&format!("wide/{n0}")), p(&format!("wide/{n2}"))).expect("between shards");
    assert_eq!(
        std::fs::read(p(&format!("wide/{n2}"))).expect("read"),
        n0.as_bytes()
    );
    assert_eq!(mdt_of(&p(&format!("wide/{n2}"))), 0);
    std::fs::rename(p("a2/g"), p("wide/from-a2")).expect("into a striped directory");
    std::fs::rename(p(&format!("wide/{n1}")), p("a2/out")).expect("out of it");
    let listed = std::fs::read_dir(o("wide")).expect("ls").count();
    assert_eq!(listed, names.len() - 1 - 1 + 1, "each name once");

    // Hard links to inodes on other MDTs.
    std::fs::write(p("a1/h"), b"linked").expect("write");
    std::fs::hard_link(p("a1/h"), p("a2/h2")).expect("link across MDTs");
    std::fs::hard_link(p("a1/h"), p("wide/h3")).expect("link into a striped dir");
    assert_eq!(nlink(&p("a1/h")), 3);
    assert_eq!(nlink(&o("a2/h2")), 3);
    std::fs::remove_file(p("a1/h")).expect("unlink the inode's own name");
    assert_eq!(std::fs::read(o("a2/h2")).expect("read"), b"linked");
    std::fs::remove_file(p("a2/h2")).expect("unlink a remote name");
    assert_eq!(nlink(&p("wide/h3")), 1);
    let before = inodes_per_mdt(&c.mnt);
    std::fs::remove_file(p("wide/h3")).expect("unlink the last name");
    let after = inodes_per_mdt(&c.mnt);
    assert_eq!(before[1] - 1, after[1], "the inode went with its last name");
    let e = std::fs::hard_link(p("a2/plain"), p("a1/dirlink"));
    assert_eq!(errno_of(e), libc::EPERM, "no hard links to directories");

    // Another user, under POSIX's rules: its own directories on two MDTs,
    // and a sticky directory whose other files it may not move.
    loom_ok(&["mkdir", "-i", "1", &s("u1")]);
    loom_ok(&["mkdir", "-i", "2", &s("u2")]);
    sh(&format!("chown 65534:65534 {} {}", s("u1"), s("u2")));
    loom_ok(&["mkdir", "-i", "2", &s("sticky")]);
    sh(&format!("chmod 1777 {}", s("sticky")));
    std::fs::write(p("sticky/roots"), b"r").expect("write");
    let nobody = |cmd: &str| as_nobody(&["sh", "-c", cmd]);
    let r = nobody(&format!(
        "set -e; echo mine > {u1}/f; mkdir -p {u1}/d/e; mv {u1}/f {u2}/f; mv {u1}/d {u2}/d; \
         ln {u2}/f {u1}/again; mv {u2}/f {sticky}/mine; cat {sticky}/mine {u1}/again",
        u1 = s("u1"),
        u2 = s("u2"),
        sticky = s("sticky")
    ));
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(String::from_utf8_lossy(&r.stdout), "mine\nmine\n");
    let r = nobody(&format!("mv {} {}/stolen", s("sticky/roots"), s("u1")));
    assert!(!r.status.success(), "moved root's file out of a sticky dir");
    assert!(p("sticky/roots").exists());
    assert!(p("u2/d/e").is_dir());

    // The library: a directory cannot move into itself across MDTs (the
    // kernel would refuse before asking), and flags are checked.
    let (rt, client) = library_client(&c, ClientOptions::default());
    let me = Caller {
        uid: 0,
        gid: 0,
        groups: Vec::new(),
        pid: 0,
        umask: None,
    };
    loom_ok(&["mkdir", "-i", "0", &s("a2/plain/sub/deep")]);
    let look = |dir: Fid, name: &str| {
        rt.block_on(client.lookup(&me, dir, name))
            .expect("lookup")
            .0
            .fid
    };
    let a2 = look(Fid::ROOT, "a2");
    let moved = look(a2, "plain");
    let deep = look(look(moved, "sub"), "deep");
    let r = rt.block_on(client.rename(&me, a2, "plain", deep, "loop", 0));
    assert_eq!(r.err().map(|e| e.0), Some(libc::EINVAL), "into itself");
    let r = rt.block_on(client.rename(&me, a2, "out", Fid::ROOT, "a1", rename_flags::NOREPLACE));
    assert_eq!(r.err().map(|e| e.0), Some(libc::EEXIST));
    rt.block_on(client.rename(&me, a2, "out", look(Fid::ROOT, "a1"), "back", 0))
        .expect("a file through the library");
    rt.block_on(client.close());
    assert_eq!(std::fs::read(o("a1/back")).expect("read"), n1.as_bytes());

    let (code, out) = fsck(&c, &[]);
    assert_eq!(code, 0, "fsck after the renames and links:\n{out}");
}
