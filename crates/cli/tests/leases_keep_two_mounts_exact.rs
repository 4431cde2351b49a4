//! Issue #9, point 1: leases. Two mounts with an attribute timeout of 0:
//! without a lease every stat would ask the MDT. Mount 2's kernel keeps
//! what the MDT leased it (shown by stopping the MDT: stats still answer),
//! and every change mount 1 makes (chmod, rename, unlink, rewrite,
//! truncate, append, new names, mkdir, rmdir) is seen by mount 2 at its
//! very next operation: the MDT recalled the lease before applying it.
mod common;
use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

/// Continues a stopped process when dropped, also when the test fails.
fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o7777
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("readdir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn leases_keep_two_mounts_exact() {
    let mut c = Cluster::up(1, 1, &["--attr-timeout", "0"]);
    let m2 = c.second_mount_with("mnt2", &["--attr-timeout", "0"]);
    let (a, b) = (c.path("t"), m2.join("t"));
    std::fs::create_dir(&a).expect("mkdir");
    for i in 0..20 {
        std::fs::write(a.join(format!("f{i}")), b"0123456789").expect("write");
    }

    // Mount 2 learns the tree; then the MDT stops. Stats, lookups and a
    // listing's attributes on mount 2 are answered by its kernel or
    // itself under the leases (with a 0 s timeout and no lease, each
    // would hang on the stopped MDT).
    let before: Vec<u32> = (0..20).map(|i| mode(&b.join(format!("f{i}")))).collect();
    assert!(before.iter().all(|m| *m == 0o644));
    let stopped = Stopped::new(c.pid("mdt0"));
    let bb = b.clone();
    let cached = within(move || {
        (0..20)
            .map(|i| std::fs::metadata(bb.join(format!("f{i}"))).map(|m| m.size()))
            .collect::<Result<Vec<u64>, _>>()
    });
    let cached = cached.expect("stats under a lease need no MDT");
    assert_eq!(cached.expect("stat"), vec![10; 20]);
    drop(stopped);

    // Each change on mount 1 is seen by mount 2 at its next operation.
    for round in 0..3 {
        let f = format!("f{round}");
        let (fa, fb) = (a.join(&f), b.join(&f));
        assert_eq!(mode(&fb), 0o644, "round {round}: cached first");
        std::fs::set_permissions(&fa, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(mode(&fb), 0o600, "round {round}: chmod seen");

        std::fs::write(&fa, b"rewritten, longer").expect("rewrite");
        assert_eq!(
            std::fs::metadata(&fb).expect("stat").len(),
            17,
            "rewrite seen"
        );
        assert_eq!(std::fs::read(&fb).expect("read"), b"rewritten, longer");

        let fd = std::fs::OpenOptions::new()
            .write(true)
            .open(&fa)
            .expect("open");
        fd.set_len(3).expect("truncate");
        drop(fd);
        assert_eq!(
            std::fs::metadata(&fb).expect("stat").len(),
            3,
            "truncate seen"
        );

        use std::io::Write;
        let mut fd = std::fs::OpenOptions::new()
            .append(true)
            .open(&fa)
            .expect("open");
        fd.write_all(b"+more").expect("append");
        drop(fd);
        assert_eq!(
            std::fs::read(&fb).expect("read"),
            b"rew+more",
            "append seen"
        );

        let g = format!("g{round}");
        std::fs::rename(&fa, a.join(&g)).expect("rename");
        assert!(!fb.exists(), "round {round}: renamed away, seen");
        assert_eq!(
            std::fs::read(b.join(&g)).expect("new name"),
            b"rew+more",
            "the new name leads to the file"
        );

        // A name mount 2 looked up and found absent, then made on mount 1.
        let n = format!("new{round}");
        assert!(!b.join(&n).exists());
        std::fs::write(a.join(&n), b"n").expect("create");
        assert!(b.join(&n).exists(), "round {round}: new name seen");

        std::fs::remove_file(a.join(&g)).expect("unlink");
        assert!(!b.join(&g).exists(), "round {round}: unlink seen");

        let d = format!("d{round}");
        std::fs::create_dir(a.join(&d)).expect("mkdir");
        assert!(b.join(&d).is_dir(), "mkdir seen");
        std::fs::remove_dir(a.join(&d)).expect("rmdir");
        assert!(!b.join(&d).exists(), "rmdir seen");
    }

    // Extended attributes every user may read (what `ls -l` asks of each
    // file) are kept with the leased attributes, and recalled with them.
    let x = a.join("f9");
    let ask = |p: &Path| {
        sh(&format!(
            "getfattr --absolute-names --only-values -n security.loomtest {} 2>&1 || true",
            p.display()
        ))
    };
    assert!(ask(&b.join("f9")).contains("No such attribute"));
    assert!(ask(&b.join("f9")).contains("No such attribute"), "kept");
    sh(&format!(
        "setfattr -n security.loomtest -v one {}",
        x.display()
    ));
    assert_eq!(ask(&b.join("f9")).trim(), "one", "set on mount 1, seen");
    sh(&format!(
        "setfattr -n security.loomtest -v two {}",
        x.display()
    ));
    assert_eq!(ask(&b.join("f9")).trim(), "two", "changed, seen");
    sh(&format!("setfattr -x security.loomtest {}", x.display()));
    assert!(
        ask(&b.join("f9")).contains("No such attribute"),
        "removed, seen"
    );

    // Both ways: a directory mount 2 made (and so knows whole) gets a name
    // from mount 1; mount 2 finds it, by lookup and in its listing.
    std::fs::create_dir(m2.join("mine")).expect("mkdir on mount 2");
    assert!(!m2.join("mine/x").exists());
    std::fs::write(c.path("mine/x"), b"x").expect("create on mount 1");
    assert!(m2.join("mine/x").exists(), "lookup after the recall");
    assert_eq!(names(&m2.join("mine")), vec!["x".to_string()]);
    std::fs::write(m2.join("mine/y"), b"y").expect("create on mount 2");
    assert_eq!(
        names(&c.path("mine")),
        vec!["x".to_string(), "y".to_string()]
    );
}
