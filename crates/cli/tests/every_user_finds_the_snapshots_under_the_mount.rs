//! Snapshots under the mount (issue #30, point 2): every user finds each
//! snapshot in `MOUNT/.snapshots/NAME/` (hidden from the root's listing),
//! read-only, under the permissions the snapshot holds, and restores
//! their own files from it with `cp`. A snapshot taken after the mount
//! shows up; the same file in two snapshots is two inodes; a site may
//! name the directory otherwise (`--snapdir`).
mod common;
use common::*;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// `sh -c CMD` as uid 65534: (success, stdout + stderr).
fn nobody(cmd: &str) -> (bool, String) {
    let o = sh_as_nobody(cmd).output().expect("setpriv");
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

#[test]
fn users_restore_their_files_from_the_snapshot_directory() {
    let mut c = Cluster::up(2, 2, &[]);
    let m = c.mnt.clone();
    let home = c.open_dir("home");
    let mine = home.join("u");
    std::fs::create_dir(&mine).expect("mkdir u");
    std::fs::write(mine.join("notes"), b"version 1\n").expect("write notes");
    sh(&format!(
        "chown -R 65534:65534 {0} && chmod 700 {0} && chmod 600 {0}/notes",
        s(&mine)
    ));
    let private = m.join("private");
    std::fs::create_dir(&private).expect("mkdir private");
    std::fs::write(private.join("secret"), b"root only").expect("write secret");
    sh(&format!("chmod 700 {}", s(&private)));
    loom_ok(&["snapshot", "create", s(&m), "monday"]);

    // The user loses the file.
    let (ok, out) = nobody(&format!(
        "echo version 2 > {0}/notes && rm {0}/notes",
        s(&mine)
    ));
    assert!(ok, "{out}");

    let snaps = m.join(".snapshots");
    let listed: Vec<String> = std::fs::read_dir(&m)
        .expect("ls root")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !listed.contains(&".snapshots".to_string()),
        "hidden: {listed:?}"
    );
    let (ok, out) = nobody(&format!("ls {}", s(&snaps)));
    assert!(ok && out.contains("monday"), "{out}");
    let old = snaps.join("monday/home/u/notes");
    let (ok, out) = nobody(&format!("cat {}", s(&old)));
    assert!(ok && out == "version 1\n", "{out}");
    // Restored with cp, by the user.
    let (ok, out) = nobody(&format!(
        "cp -p {} {}/notes && cat {}/notes",
        s(&old),
        s(&mine),
        s(&mine)
    ));
    assert!(ok && out == "version 1\n", "{out}");
    // Root's private directory stays closed to them; nothing can change.
    let (ok, out) = nobody(&format!("cat {}", s(&snaps.join("monday/private/secret"))));
    assert!(!ok && out.contains("Permission denied"), "{out}");
    assert_eq!(
        std::fs::read(snaps.join("monday/private/secret")).expect("root reads it"),
        b"root only"
    );
    for cmd in [
        format!("echo x > {}", s(&snaps.join("monday/home/u/new"))),
        format!("rm {}", s(&old)),
        format!("touch {}", s(&old)),
        format!("mkdir {}", s(&snaps.join("monday/home/u/d"))),
        format!("mv {} {}", s(&old), s(&snaps.join("monday/home/u/moved"))),
    ] {
        let (ok, out) = nobody(&cmd);
        assert!(!ok && out.contains("Read-only file system"), "{cmd}: {out}");
    }
    let e = std::fs::create_dir(&snaps).expect_err("the name is taken");
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
    let e = std::fs::write(snaps.join("monday").join("x"), b"x").expect_err("read-only");
    assert_eq!(e.raw_os_error(), Some(libc::EROFS));

    // A snapshot taken now shows up; the same file in both is two inodes.
    std::fs::write(mine.join("notes"), b"version 3\n").expect("write");
    loom_ok(&["snapshot", "create", s(&m), "tuesday"]);
    let newer = snaps.join("tuesday/home/u/notes");
    assert_eq!(std::fs::read(&newer).expect("read tuesday"), b"version 3\n");
    assert_eq!(std::fs::read(&old).expect("read monday"), b"version 1\n");
    let (a, b) = (
        std::fs::metadata(&old).expect("stat"),
        std::fs::metadata(&newer).expect("stat"),
    );
    assert_ne!(a.ino(), b.ino());
    let listed: Vec<String> = std::fs::read_dir(&snaps)
        .expect("ls snapshots")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, vec!["monday", "tuesday"]);

    // Another name, on a second mount.
    let m2 = c.second_mount_with("m2", &["--snapdir", "zfs"]);
    assert_eq!(
        std::fs::read(m2.join("zfs/monday/home/u/notes")).expect("read via --snapdir"),
        b"version 1\n"
    );
    assert!(!m2.join(".snapshots").exists());
    // Destroyed: gone from the directory.
    loom_ok(&["snapshot", "destroy", s(&m), "monday"]);
    let listed: Vec<String> = std::fs::read_dir(m2.join("zfs"))
        .expect("ls snapshots")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, vec!["tuesday"]);
}
