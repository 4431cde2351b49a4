//! Issue #10: crash tests at every failpoint of every cross-MDT operation,
//! each followed by a clean `loom fsck`. For each crash point of a
//! striped mkdir, a striped rmdir, a rename, a hard link and an unlink
//! across MDTs (the coordinator's steps, and the participants' parts:
//! shard destroy, entry, link count, tree lock), the MDT that reaches it dies
//! as by kill -9 and starts again; the operation, resent by its client,
//! completes; and fsck then finds nothing: no shard without its master,
//! no entry without its inode, no wrong link count, no object without a
//! file.
mod common;
use common::*;
use std::collections::HashMap;
use std::process::Command;

fn fsck_clean(c: &Cluster, after: &str) {
    let o = Command::new(loom_bin())
        .args(["fsck", "--min-age", "0"])
        .arg(&c.mnt)
        .output()
        .expect("loom fsck");
    assert!(
        o.status.success(),
        "fsck after a crash at {after}:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Run `op` (which blocks until the operation is answered) while `name`
/// runs armed with crash point `point`; once it died there, start it
/// again unarmed; `op` must then succeed. `servers` holds the servers
/// this test started (the first time, `loom up`'s is killed instead).
fn crash_during(
    c: &mut Cluster,
    servers: &mut HashMap<String, Server>,
    name: &str,
    point: &str,
    n: u32,
    mut op: Command,
) {
    match servers.remove(name) {
        // Dropping it kills it and waits.
        Some(s) => drop(s),
        None => c.kill9(name),
    }
    let mut armed = c.start_armed(name, point, n);
    let mut child = op.spawn().expect("the operation");
    let status = armed.0.wait().expect("wait for the armed server");
    assert!(!status.success(), "{name} did not crash at {point}");
    servers.insert(name.to_string(), c.start_armed(name, "", n + 100));
    let done = child.wait().expect("wait for the operation");
    assert!(
        done.success(),
        "the operation resent after a crash at {point} failed"
    );
}

#[test]
fn every_cross_mdt_crash_point_leaves_a_clean_fsck() {
    let mut c = Cluster::up(3, 1, &["--attr-timeout", "0"]);
    let mut servers = HashMap::new();
    let mut n = 0;
    for point in ["mkdir_striped:logged", "mkdir_striped:parts_made"] {
        n += 1;
        let dir = c.path(&format!("made{n}"));
        let mut op = Command::new(loom_bin());
        op.args(["setdirstripe", "-c", "3", "-i", "1"]).arg(&dir);
        crash_during(&mut c, &mut servers, "mdt0", point, n, op);
        std::fs::write(dir.join("f"), b"x").expect("a file in the new directory");
        fsck_clean(&c, point);
    }
    for (who, point) in [
        ("mdt0", "rmdir_distributed:logged"),
        ("mdt0", "rmdir_distributed:sealing"),
        ("mdt0", "rmdir_distributed:sealed"),
        ("mdt0", "rmdir_distributed:destroyed"),
        ("mdt1", "destroy_dir"),
        ("mdt2", "destroy_dir"),
    ] {
        n += 1;
        let dir = c.path(&format!("gone{n}"));
        loom_ok(&["setdirstripe", "-c", "3", dir.to_str().expect("utf8")]);
        let mut op = Command::new("rmdir");
        op.arg(&dir);
        crash_during(&mut c, &mut servers, who, point, n, op);
        assert!(
            !dir.exists(),
            "the directory stayed after a crash at {point}"
        );
        fsck_clean(&c, point);
    }
    assert_eq!(
        inodes_per_mdt(&c.mnt).iter().sum::<u64>(),
        1 + 2 * 3 + 2,
        "the root, two striped directories of three objects, their files"
    );
}

/// Renames, links and unlinks across MDTs: a directory moved from MDT1
/// onto an empty directory of MDT2 (the tree lock on MDT0, the seal and
/// destroy of the replaced directory), a hard link on MDT1 to a file of
/// MDT2, and that link's unlink. Each crash point of the coordinator
/// (MDT1) and of the participants; the operation, resent, completes.
#[test]
fn every_cross_mdt_rename_and_link_crash_point_leaves_a_clean_fsck() {
    let mut c = Cluster::up(3, 1, &["--attr-timeout", "0"]);
    let s = |p: std::path::PathBuf| p.to_str().expect("utf-8").to_string();
    loom_ok(&["mkdir", "-i", "1", &s(c.path("m1"))]);
    loom_ok(&["mkdir", "-i", "2", &s(c.path("m2"))]);
    let mut servers = HashMap::new();
    let mut n = 0;
    for (who, point) in [
        ("mdt1", "rename_distributed:logged"),
        ("mdt1", "rename_distributed:locked"),
        ("mdt1", "rename_distributed:target_set"),
        ("mdt1", "rename_distributed:inode_moved"),
        ("mdt1", "rename_distributed:replaced"),
        ("mdt1", "relink"),
        ("mdt2", "set_entry"),
        ("mdt2", "destroy_dir"),
        ("mdt0", "tree_lock"),
    ] {
        n += 1;
        let (from, to) = (c.path(&format!("m1/d{n}")), c.path(&format!("m2/t{n}")));
        std::fs::create_dir_all(from.join("sub")).expect("mkdir");
        std::fs::write(from.join("sub/f"), format!("{n}")).expect("write");
        std::fs::create_dir(&to).expect("the directory to replace");
        let mut op = Command::new("mv");
        op.arg("-T").arg(&from).arg(&to);
        crash_during(&mut c, &mut servers, who, point, n, op);
        assert!(
            !from.exists(),
            "the old name stayed after a crash at {point}"
        );
        assert_eq!(
            std::fs::read(to.join("sub/f")).expect("moved tree"),
            format!("{n}").as_bytes(),
            "after a crash at {point}"
        );
        assert_eq!(mdt_of(&to), 1, "the directory's inode stays on MDT1");
        fsck_clean(&c, point);
    }
    for (who, point) in [
        ("mdt1", "link_distributed:logged"),
        ("mdt1", "link_distributed:linked"),
        ("mdt2", "relink"),
    ] {
        n += 1;
        let (file, link) = (c.path(&format!("m2/f{n}")), c.path(&format!("m1/l{n}")));
        std::fs::write(&file, b"linked").expect("write");
        let mut op = Command::new("ln");
        op.arg(&file).arg(&link);
        crash_during(&mut c, &mut servers, who, point, n, op);
        assert_eq!(std::fs::read(&link).expect("read the link"), b"linked");
        assert_eq!(
            std::os::unix::fs::MetadataExt::nlink(&std::fs::metadata(&file).expect("stat")),
            2,
            "one link counted after a crash at {point}"
        );
        fsck_clean(&c, point);
    }
    for (who, point) in [
        ("mdt1", "unlink_distributed:logged"),
        ("mdt1", "unlink_distributed:dropped"),
        ("mdt2", "relink"),
    ] {
        n += 1;
        let (file, link) = (c.path(&format!("m2/u{n}")), c.path(&format!("m1/v{n}")));
        std::fs::write(&file, b"kept").expect("write");
        std::fs::hard_link(&file, &link).expect("link across MDTs");
        let mut op = Command::new("rm");
        op.arg(&link);
        crash_during(&mut c, &mut servers, who, point, n, op);
        assert!(!link.exists(), "the name stayed after a crash at {point}");
        assert_eq!(
            std::os::unix::fs::MetadataExt::nlink(&std::fs::metadata(&file).expect("stat")),
            1,
            "one link dropped after a crash at {point}"
        );
        fsck_clean(&c, point);
    }
}
