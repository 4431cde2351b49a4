//! Filesets through the mount (issue #29, point 6): root confines the
//! clients of 127.0.0.2 to /proj (a directory on the second MDT) with
//! `loom nodemap set --fileset`. A mount from there shows /proj as its
//! root, to root and to uid 65534 alike, and what it makes lands in
//! /proj (and in its snapshots, /proj as it was); the first mount sees
//! the whole tree. A fileset that is not a directory, or not there, is
//! refused with a clear error.
mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_mount_from_a_confined_network_shows_its_fileset_as_root() {
    let mut c = Cluster::up(2, 2, &[]);
    std::fs::set_permissions(c.tmp.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod tmp");
    let mnt = c.mnt.to_str().expect("utf-8").to_string();
    let proj = c.path("proj");
    loom_ok(&["mkdir", "-i", "1", proj.to_str().expect("utf-8")]);
    std::fs::write(proj.join("in"), b"inside").expect("write in");
    std::fs::create_dir(proj.join("sub")).expect("mkdir sub");
    std::fs::set_permissions(&proj, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    std::fs::write(c.path("out"), b"outside").expect("write out");

    // Bad filesets: refused, nothing set.
    for (dir, says) in [
        (c.path("out"), "not a directory"),
        (c.path("nowhere/at/all"), ""),
    ] {
        let o = loom(&[
            "nodemap",
            "set",
            &mnt,
            "lab",
            "--net",
            "127.0.0.2",
            "--fileset",
            dir.to_str().expect("utf-8"),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{} taken as a fileset", dir.display());
        assert!(err.contains(says), "{err}");
    }
    assert_eq!(loom_ok(&["nodemap", "list", &mnt]).trim(), "");

    let shown = loom_ok(&[
        "nodemap",
        "set",
        &mnt,
        "lab",
        "--net",
        "127.0.0.2",
        "--admin",
        "--fileset",
        proj.to_str().expect("utf-8"),
    ]);
    assert!(shown.contains("fileset=/proj"), "{shown}");
    assert!(loom_ok(&["nodemap", "list", &mnt]).contains("fileset=/proj"));

    // Servers read the nodemaps within seconds: a mount made before
    // they did shows the whole tree, and is made again.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut n = 0;
    let m2: PathBuf = loop {
        n += 1;
        let m = c.second_mount_with(&format!("m2-{n}"), &["--source-addr", "127.0.0.2"]);
        if m.join("in").exists() {
            break m;
        }
        let _ = std::process::Command::new("fusermount3")
            .args(["-u", m.to_str().expect("utf-8")])
            .status();
        assert!(Instant::now() < deadline, "the fileset never applied");
    };
    assert_eq!(names(&m2), vec!["in", "sub"], "the fileset is the root");
    assert_eq!(std::fs::read(m2.join("in")).expect("read in"), b"inside");
    assert!(!m2.join("out").exists(), "nothing outside shows");
    // As an unprivileged user too.
    let o = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
            &format!("ls {0} && echo u > {0}/by-nobody", m2.display()),
        ])
        .output()
        .expect("setpriv");
    assert!(
        o.status.success(),
        "uid 65534 on the confined mount: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("sub"));
    std::fs::write(m2.join("sub/by-root"), b"r").expect("write in the fileset");
    assert_eq!(
        std::fs::read(proj.join("sub/by-root")).expect("seen at /proj"),
        b"r"
    );
    assert_eq!(
        std::fs::read(proj.join("by-nobody")).expect("seen at /proj"),
        b"u\n"
    );
    // The first mount sees the whole tree.
    assert!(names(&c.mnt).contains(&"out".to_string()));
    // Its snapshots too are confined to the fileset (issue #30's
    // `.snapshots`): the confined mount finds /proj as each one's root.
    loom_ok(&["snapshot", "create", &mnt, "confined"]);
    let snap = m2.join(".snapshots/confined");
    let shown = names(&snap);
    assert!(
        shown.contains(&"in".to_string()) && !shown.contains(&"out".to_string()),
        "the snapshot through the confined mount: {shown:?}"
    );
    assert_eq!(std::fs::read(snap.join("in")).expect("read in"), b"inside");
    assert!(names(&c.mnt.join(".snapshots/confined")).contains(&"out".to_string()));
}
