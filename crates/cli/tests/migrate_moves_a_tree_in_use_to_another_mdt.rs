//! Issue #10 point 3: `loom migrate -m` moves a directory tree's entries
//! and inodes to another MDT while a create/stat/write/unlink workload
//! (mdtest-like, through the mount) runs in it: no file data is copied
//! (the objects stay), an open file stays usable, every user and a
//! second mount see the same tree afterwards, and `loom fsck` is clean.
//! It then moves the tree back.
mod common;
use common::*;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

fn s(p: &Path) -> String {
    p.to_str().expect("utf-8").to_string()
}

/// Checksums of every regular file under `dir`, with modes, owners and
/// symlink targets: what must not change when the tree moves.
fn tree_sums(dir: &Path) -> String {
    sh(&format!(
        "cd {} && find . \\( -path ./load -o -path ./d5/open \\) -prune -o -printf '%p %y %m %u %l\\n' | sort && \
         find . \\( -path ./load -o -path ./d5/open \\) -prune -o -type f -print0 | sort -z | xargs -0 md5sum",
        s(dir)
    ))
}

/// The lines of `a` and `b` that differ (for a readable failure).
fn differ(a: &str, b: &str) -> String {
    let (x, y): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let only_a: Vec<_> = x.iter().filter(|l| !y.contains(l)).collect();
    let only_b: Vec<_> = y.iter().filter(|l| !x.contains(l)).collect();
    format!("before only: {only_a:?}\nafter only: {only_b:?}")
}

/// An mdtest-like load in `dir` through the mount until `stop`: create
/// and write a file, stat it, unlink every other one. Returns the files
/// it kept with their contents; panics on any error.
fn load(dir: PathBuf, stop: Arc<AtomicBool>, done: Arc<AtomicU64>) -> Vec<(PathBuf, String)> {
    let mut kept = Vec::new();
    let mut i = 0u64;
    while !stop.load(Ordering::Acquire) {
        let p = dir.join(format!("load.{i}"));
        let body = format!("load file {i}\n");
        std::fs::write(&p, &body).unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
        let m = std::fs::metadata(&p).unwrap_or_else(|e| panic!("stat {}: {e}", p.display()));
        if m.len() != body.len() as u64 {
            let again: Vec<u64> = (0..3)
                .map(|_| std::fs::metadata(&p).map(|m| m.len()).unwrap_or(u64::MAX))
                .collect();
            panic!("size of {}: {} (then {again:?})", p.display(), m.len());
        }
        if i.is_multiple_of(2) {
            std::fs::remove_file(&p).unwrap_or_else(|e| panic!("unlink {}: {e}", p.display()));
        } else {
            kept.push((p, body));
        }
        i += 1;
        done.fetch_add(1, Ordering::Release);
    }
    kept
}

#[test]
fn migrate_moves_a_tree_in_use_to_another_mdt() {
    let mut c = Cluster::up(2, 2, &[]);
    let proj = c.path("proj");
    // Everything starts on MDT0, whatever the file system's default.
    loom_ok(&["mkdir", "-i", "0", &s(&proj)]);
    loom_ok(&["setdirstripe", "-D", "-i", "0", &s(&proj)]);
    // A tree on MDT0: 8 directories of 100 files, a nested one, a file
    // with data on both OSTs, a symlink, a hard link, an xattr, a
    // directory of nobody's, and the workload's directory.
    sh(&format!(
        "set -e; cd {p}; for d in $(seq 0 7); do mkdir -p d$d; \
         for i in $(seq 0 99); do echo \"file $d/$i\" > d$d/f$i; done; done; \
         mkdir -p d0/deep/deeper load pub; echo deep > d0/deep/deeper/leaf; \
         dd if=/dev/urandom of=big bs=1M count=3 status=none; \
         ln -s d1/f1 sym; ln d2/f2 d3/hard; setfattr -n user.colour -v blue d4/f4; \
         chmod 1777 pub; chown 65534:65534 pub",
        p = s(&proj)
    ));
    // A striped directory is left as it is; the tree under it moves.
    loom_ok(&["setdirstripe", "-c", "2", "-i", "0", &s(&proj.join("wide"))]);
    sh(&format!(
        "set -e; cd {}/wide; mkdir sub; for i in $(seq 0 9); do echo w$i > w$i; echo s$i > sub/s$i; done",
        s(&proj)
    ));
    loom_ok(&["setstripe", "-c", "2", &s(&proj.join("striped"))]);
    sh(&format!(
        "dd if=/dev/urandom of={} bs=1M count=2 status=none",
        s(&proj.join("striped"))
    ));
    let out = as_nobody(&["sh", "-c", &format!("echo mine > {}/pub/nobodys", s(&proj))]);
    assert!(out.status.success(), "nobody writes in pub: {out:?}");
    assert_eq!(mdt_of(&proj.join("d0/f0")), 0);
    let objects_before = c.object_files(&s(&proj.join("striped")));
    let sums = tree_sums(&proj);
    let before = inodes_per_mdt(&c.mnt);

    // A file held open across the move.
    let mut open = std::fs::OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(proj.join("d5/open"))
        .expect("open");
    open.write_all(b"before;").expect("write before");

    // The workload runs before, during and after the move.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let worker = {
        let (dir, stop, done) = (proj.join("load"), stop.clone(), done.clone());
        std::thread::spawn(move || load(dir, stop, done))
    };
    while done.load(Ordering::Acquire) < 50 {
        std::thread::yield_now();
    }
    let at_start = done.load(Ordering::Acquire);
    let o = loom(&["migrate", "-m", "1", &s(&proj)]);
    let at_end = done.load(Ordering::Acquire);
    stop.store(true, Ordering::Release);
    let kept = worker.join().expect("the workload failed");
    assert!(
        at_end > at_start,
        "the workload made no progress during the migration ({at_start} ops before, {at_end} after)"
    );
    assert!(o.status.success(), "loom migrate: {o:?}");
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.contains("inodes moved"), "summary: {out}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("wide: striped, left as it is")
            && out.contains("1 striped directories left as they are"),
        "the striped directory is reported: {o:?}"
    );

    // Every inode moved but the hard link's; the data objects did not.
    for rel in [
        "",
        "d0",
        "d0/f0",
        "d7/f99",
        "d0/deep",
        "d0/deep/deeper/leaf",
        "big",
        "sym",
        "pub",
        "pub/nobodys",
        "load",
        "striped",
        "d5/open",
        "wide/sub",
        "wide/sub/s3",
    ] {
        assert_eq!(mdt_of(&proj.join(rel)), 1, "MDT of proj/{rel}");
    }
    assert_eq!(
        mdt_of(&proj.join("d3/hard")),
        0,
        "a file with two links stays"
    );
    assert_eq!(
        c.object_files(&s(&proj.join("striped"))),
        objects_before,
        "objects moved"
    );
    let df = loom_ok(&["df", "-i", &s(&c.mnt)]);
    assert!(df.contains("migrated_dirs"), "per-MDT counters:\n{df}");
    let after = inodes_per_mdt(&c.mnt);
    assert!(
        before[0] - after[0] >= 800 && after[1] - before[1] >= 800,
        "inodes per MDT before {before:?}, after {after:?}"
    );

    // The open file still works, through the same handle.
    open.write_all(b"after").expect("write after the move");
    open.sync_all().expect("fsync after the move");
    open.seek(SeekFrom::Start(0)).expect("seek");
    let mut back = String::new();
    open.read_to_string(&mut back)
        .expect("read through the handle");
    assert_eq!(back, "before;after");
    drop(open);
    assert_eq!(
        std::fs::read_to_string(proj.join("d5/open")).expect("read"),
        "before;after"
    );

    // The same tree, for root, for nobody, and from a second mount.
    let now = tree_sums(&proj);
    assert!(now == sums, "the tree changed: {}", differ(&sums, &now));
    for (p, body) in &kept {
        assert_eq!(&std::fs::read_to_string(p).expect("a kept load file"), body);
    }
    assert_eq!(
        sh(&format!(
            "getfattr --only-values -n user.colour {}",
            s(&proj.join("d4/f4"))
        )),
        "blue"
    );
    let out = as_nobody(&[
        "cat",
        &s(&proj.join("d6/f6")),
        &s(&proj.join("pub/nobodys")),
    ]);
    assert!(out.status.success(), "nobody reads: {out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "file 6/6\nmine\n");
    let out = as_nobody(&[
        "sh",
        "-c",
        &format!("echo new > {0}/pub/new && rm {0}/pub/nobodys", s(&proj)),
    ]);
    assert!(out.status.success(), "nobody changes pub: {out:?}");
    let out = as_nobody(&[&s(&loom_bin()), "migrate", "-m", "0", &s(&proj)]);
    assert!(!out.status.success(), "nobody may not migrate");
    let second = c.second_mount("second");
    let listing = |root: &Path| sh(&format!("cd {} && find proj | sort", s(root)));
    assert_eq!(listing(&c.mnt), listing(&second));
    let now = tree_sums(&proj);
    let there = tree_sums(&second.join("proj"));
    assert!(
        there == now,
        "the second mount differs: {}",
        differ(&now, &there)
    );

    let (code, report) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 0, "fsck after the migration:\n{report}");

    // Again: nothing left to move. Then back to MDT0.
    let out = loom_ok(&["migrate", "-m", "1", &s(&proj)]);
    assert!(out.contains(" 0 inodes moved"), "second run: {out}");
    // Progress after every directory, on standard error.
    let o = loom(&["migrate", "--progress", "0", "-m", "0", &s(&proj)]);
    assert!(o.status.success(), "moving back: {o:?}");
    let progress = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = progress
        .lines()
        .filter(|l| l.contains(" directories, "))
        .collect();
    let total = lines.len();
    assert!(
        total >= 15
            && lines
                .last()
                .is_some_and(|l| l.contains(&format!("{total}/{total} directories"))),
        "progress lines:\n{progress}"
    );
    let out = loom(&["migrate", "--progress", "-1", "-m", "0", &s(&proj)]);
    assert!(!out.status.success(), "a negative interval is refused");
    for rel in [
        "",
        "d0/f0",
        "d7/f99",
        "d0/deep/deeper/leaf",
        "striped",
        "load",
    ] {
        assert_eq!(
            mdt_of(&proj.join(rel)),
            0,
            "MDT of proj/{rel} after moving back"
        );
    }
    let back = tree_sums(&proj);
    assert!(
        back == now,
        "moved back, the tree changed: {}",
        differ(&now, &back)
    );
    let there = tree_sums(&second.join("proj"));
    assert!(
        there == back,
        "the second mount differs: {}",
        differ(&back, &there)
    );
    let (code, report) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 0, "fsck after moving back:\n{report}");
}
