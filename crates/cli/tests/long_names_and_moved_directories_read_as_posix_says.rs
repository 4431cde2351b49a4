//! Issue #29, point 7: two regressions of the leases.
//!
//! - A name longer than 255 bytes is ENAMETOOLONG for every operation,
//!   also in a directory whose list this mount holds under a lease (where
//!   an absent name is answered without the MDT).
//! - After `mv a/x b/y` of a directory, on a file system of several MDTs,
//!   the mount that moved it counts the new subdirectory in b's link count
//!   at once, as a second mount does (it showed 2 until its lease ended:
//!   the MDT makes such a move a distributed rename even with both
//!   parents its own, and the mount kept the parents' old attributes).
//!
//! As root and as a user who is not root, in a plain and a striped
//! directory.
mod common;
use common::*;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const TOO_LONG: i32 = libc::ENAMETOOLONG;

fn errno<T>(r: std::io::Result<T>, what: &str) -> i32 {
    match r {
        Ok(_) => panic!("{what}: succeeded on a name of 256 bytes"),
        Err(e) => e.raw_os_error().unwrap_or(0),
    }
}

/// Every operation on `dir/<256 bytes>` as root: ENAMETOOLONG.
fn long_names_as_root(dir: &Path) {
    let long = dir.join("n".repeat(256));
    let other = dir.join("short");
    std::fs::write(&other, b"x").expect("create");
    // The directory's list is leased here once it is listed.
    std::fs::read_dir(dir).expect("list").for_each(drop);
    use std::os::unix::fs::PermissionsExt;
    let cases: Vec<(&str, i32)> = vec![
        ("stat", errno(std::fs::metadata(&long), "stat")),
        ("open", errno(std::fs::File::open(&long), "open")),
        ("create", errno(std::fs::File::create(&long), "create")),
        ("mkdir", errno(std::fs::create_dir(&long), "mkdir")),
        (
            "chmod",
            errno(
                std::fs::set_permissions(&long, std::fs::Permissions::from_mode(0o600)),
                "chmod",
            ),
        ),
        (
            "chown",
            errno(std::os::unix::fs::chown(&long, Some(1), None), "chown"),
        ),
        (
            "truncate",
            errno(
                nix::unistd::truncate(&long, 0).map_err(std::io::Error::from),
                "truncate",
            ),
        ),
        (
            "link from",
            errno(std::fs::hard_link(&long, dir.join("l")), "link"),
        ),
        ("link to", errno(std::fs::hard_link(&other, &long), "link")),
        (
            "rename from",
            errno(std::fs::rename(&long, dir.join("r")), "rename"),
        ),
        ("rename to", errno(std::fs::rename(&other, &long), "rename")),
        ("rmdir", errno(std::fs::remove_dir(&long), "rmdir")),
        ("unlink", errno(std::fs::remove_file(&long), "unlink")),
    ];
    for (op, e) in cases {
        assert_eq!(
            e,
            TOO_LONG,
            "{op} of a 256-byte name in {}: errno {e}",
            dir.display()
        );
    }
}

/// The same operations as uid 65534, through the tools a user runs.
fn long_names_as_nobody(dir: &Path) {
    let d = dir.display();
    let long = format!("{d}/{}", "n".repeat(256));
    let cmds = [
        format!("stat {long}"),
        format!("chmod 600 {long}"),
        format!("chown 65534 {long}"),
        format!("truncate -s 0 {long}"),
        format!("ln {d}/mine {long}"),
        format!("ln {long} {d}/l"),
        format!("mv {d}/mine {long}"),
        format!("mv {long} {d}/r"),
        format!("rmdir {long}"),
        format!("unlink {long}"),
        format!("mkdir {long}"),
        format!("touch {long}"),
    ];
    let o = as_nobody(&["sh", "-c", &format!("touch {d}/mine && ls {d} >/dev/null")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for cmd in cmds {
        let o = as_nobody(&["sh", "-c", &cmd]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("File name too long"),
            "as nobody, `{}`: {err}",
            cmd.replace(&"n".repeat(256), "<256 bytes>")
        );
    }
}

fn nlink(p: &Path) -> u64 {
    std::fs::metadata(p).expect("stat").nlink()
}

/// mv a/x b/y in `dir` by `mv_as` (a shell runner): the link counts of a
/// and b on this mount and on `m2dir` (the same directory on mount 2).
fn move_a_subdirectory(dir: &Path, m2dir: &Path, mv_as: impl Fn(&str)) {
    mv_as(&format!(
        "mkdir -p {0}/a/x {0}/b && ls -la {0} {0}/a {0}/b >/dev/null",
        dir.display()
    ));
    // What both mounts know before: a holds x.
    for d in [dir, m2dir] {
        assert_eq!((nlink(&d.join("a")), nlink(&d.join("b"))), (3, 2));
    }
    mv_as(&format!("mv {0}/a/x {0}/b/y", dir.display()));
    for (who, d) in [("the mount that moved it", dir), ("mount 2", m2dir)] {
        assert_eq!(
            (nlink(&d.join("a")), nlink(&d.join("b"))),
            (2, 3),
            "{who}: link counts of a and b after mv a/x b/y in {}",
            dir.display()
        );
        assert_eq!(nlink(&d.join("b/y")), 2);
    }
}

#[test]
fn long_names_and_moved_directories_read_as_posix_says() {
    let mut c = Cluster::up(2, 1, &[]);
    let m2 = c.second_mount("mnt2");
    std::fs::create_dir(c.path("plain")).expect("mkdir");
    loom_ok(&[
        "setdirstripe",
        "-c",
        "2",
        &c.path("striped").to_string_lossy(),
    ]);
    for d in ["plain", "striped"] {
        sh(&format!("chmod 0777 {}", c.path(d).display()));
        long_names_as_root(&c.path(d));
        let mine = c.path(&format!("{d}/user"));
        std::fs::create_dir(&mine).expect("mkdir");
        sh(&format!("chown 65534:65534 {}", mine.display()));
        long_names_as_nobody(&mine);

        let root_dir = c.path(&format!("{d}/moves-root"));
        std::fs::create_dir(&root_dir).expect("mkdir");
        move_a_subdirectory(&root_dir, &m2.join(format!("{d}/moves-root")), |cmd| {
            sh(cmd);
        });
        move_a_subdirectory(&mine, &m2.join(format!("{d}/user")), |cmd| {
            let o = as_nobody(&["sh", "-c", cmd]);
            assert!(
                o.status.success(),
                "as nobody `{cmd}`: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        });
    }
}
