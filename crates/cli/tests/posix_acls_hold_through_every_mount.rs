//! Issue #29, point 4: POSIX ACLs through FUSE mounts, with the tools
//! users run (`setfacl`, `getfacl`), as an unprivileged user (uid 65534):
//! owner, named user, named group and mask entries; chmod's effect on the
//! mask; default ACLs inherited (in place of the umask) by files and
//! directories, on the directory's MDT, on another MDT and across a
//! striped directory's shards. Every check runs on the first mount,
//! which caches under leases, and on a second that caches nothing: the
//! answers must be the same, and each mount must see the other's change
//! at once.
mod common;
use common::*;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// The ACL of `p` as `getfacl` prints it, ids numeric, without effective
/// rights comments or the header.
fn facl(p: &Path) -> Vec<String> {
    sh(&format!("getfacl -nE --omit-header -p {}", s(p)))
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// The default ACL of directory `p`, as [`facl`].
fn default_facl(p: &Path) -> Vec<String> {
    sh(&format!("getfacl -dnE --omit-header -p {}", s(p)))
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// The mode column of `ls -l` (a `+` at its end marks an ACL).
fn ls_mode(p: &Path) -> String {
    let l = sh(&format!("ls -ld {}", s(p)));
    l.split_whitespace().next().unwrap_or_default().to_string()
}

fn mode(p: &Path) -> String {
    sh(&format!("stat -c %a {}", s(p))).trim().to_string()
}

/// Whether `cmd` succeeds as uid 65534 (gid 65534, no other groups).
fn nobody_can(cmd: &str) -> bool {
    sh_as_nobody(cmd)
        .output()
        .expect("setpriv")
        .status
        .success()
}

fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|l| l.to_string()).collect()
}

#[test]
fn named_entries_and_the_mask_decide_on_every_mount() {
    let mut c = Cluster::up(1, 1, &[]);
    let m2 = c.second_mount_with("m2", &["--lease-time", "0", "--attr-timeout", "0"]);
    let dir = c.open_dir("acl");
    let f = dir.join("f");
    sh(&format!("echo secret > {0} && chmod 600 {0}", s(&f)));
    let mounts = [f.clone(), m2.join("acl/f")];
    // Before any ACL: no access; the kernels of both mounts cache that.
    for p in &mounts {
        assert!(!nobody_can(&format!("cat {}", s(p))), "{}", p.display());
    }

    sh(&format!("setfacl -m u:65534:r {}", s(&f)));
    let want = lines(&[
        "user::rw-",
        "user:65534:r--",
        "group::---",
        "mask::r--",
        "other::---",
    ]);
    for p in &mounts {
        assert_eq!(facl(p), want, "getfacl on {}", p.display());
        assert_eq!(mode(p), "640", "the mask shows as group bits");
        assert_eq!(ls_mode(p), "-rw-r-----+", "ls -l marks the ACL");
        assert!(
            nobody_can(&format!("cat {}", s(p))),
            "the named user reads through {}",
            p.display()
        );
        assert!(!nobody_can(&format!("echo x >> {}", s(p))));
    }

    // The mask limits the named user: chmod g= on mount 2, seen on both.
    sh(&format!("chmod g= {}", s(&mounts[1])));
    for p in &mounts {
        assert!(
            facl(p).contains(&"mask::---".to_string()),
            "{}",
            p.display()
        );
        assert!(facl(p).contains(&"user:65534:r--".to_string()));
        assert!(
            !nobody_can(&format!("cat {}", s(p))),
            "masked on {}",
            p.display()
        );
    }

    // A named group grants write, but a matching named user entry wins.
    sh(&format!("setfacl -m g:65534:rw,m::rw {}", s(&mounts[1])));
    for p in &mounts {
        assert!(nobody_can(&format!("cat {}", s(p))));
        assert!(
            !nobody_can(&format!("echo x >> {}", s(p))),
            "the user entry (r) decides, not the group's (rw)"
        );
    }
    sh(&format!("setfacl -x u:65534 {}", s(&f)));
    for p in &mounts {
        assert!(
            nobody_can(&format!("echo from-{} >> {}", p.display(), s(p))),
            "the group entry grants write through {}",
            p.display()
        );
    }

    // Only the owner sets an ACL; the user owns nothing here.
    let o = sh_as_nobody(&format!("setfacl -m u:65534:rwx {}", s(&f)))
        .output()
        .expect("setfacl");
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Operation not permitted"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // ... and on their own file they may.
    let mine = dir.join("mine");
    assert!(nobody_can(&format!(
        "umask 022; echo mine > {0} && chmod 600 {0} && setfacl -m u:0:r,u:1:rw {0}",
        s(&mine)
    )));
    assert!(facl(&m2.join("acl/mine")).contains(&"user:1:rw-".to_string()));
    // setfacl -b keeps the owner, owning group and other entries: the
    // group bits are the owning group's again, no longer the mask's.
    sh(&format!("setfacl -b {}", s(&f)));
    for p in &mounts {
        assert_eq!(facl(p), lines(&["user::rw-", "group::---", "other::---"]));
        assert_eq!(ls_mode(p), "-rw-------", "no ACL left");
    }

    // Kept across a kill -9 of the MDT.
    sh(&format!("setfacl -m u:65534:r {}", s(&mine)));
    c.kill9("mdt0");
    c.restart("mdt0");
    for p in [mine.clone(), m2.join("acl/mine")] {
        assert!(
            facl(&p).contains(&"user:65534:r--".to_string()),
            "{:?}",
            facl(&p)
        );
        assert!(facl(&p).contains(&"user:1:rw-".to_string()));
    }
}

#[test]
fn default_acls_are_inherited_across_mdts_and_shards() {
    let mut c = Cluster::up(2, 1, &[]);
    let m2 = c.second_mount_with("m2", &["--lease-time", "0", "--attr-timeout", "0"]);
    let top = c.open_dir("top");
    let proj = top.join("proj");
    // The user's own project directory, shared with uid 1 by default ACL.
    assert!(nobody_can(&format!(
        "umask 077; mkdir {0} && setfacl -m u:1:rwx {0} && setfacl -d -m u:1:rwx,g::r-x,o::- {0}",
        s(&proj)
    )));
    let want_default = lines(&[
        "user::rwx",
        "user:1:rwx",
        "group::r-x",
        "mask::rwx",
        "other::---",
    ]);
    let strip =
        |v: Vec<String>| -> Vec<String> { v.into_iter().filter(|l| !l.starts_with('#')).collect() };
    assert_eq!(strip(default_facl(&proj)), want_default);

    // Made through each mount with umask 077: the default ACL, not the
    // umask, cuts the mode (0666 & rw-,rw-,--- = 660).
    let remote = proj.join("remote");
    let striped = proj.join("striped");
    let loom = loom_bin();
    assert!(nobody_can(&format!(
        "{0} mkdir -i 1 {1} && {0} mkdir -c 2 {2}",
        s(&loom),
        s(&remote),
        s(&striped)
    )));
    assert_eq!(mdt_of(&remote), 1);
    for (m, base) in [("1", proj.clone()), ("2", m2.join("top/proj"))] {
        for d in [".", "remote", "striped"] {
            let dir = base.join(d);
            let sub = dir.join(format!("sub{m}"));
            assert!(nobody_can(&format!(
                "umask 077; for i in 0 1 2 3 4 5; do echo x > {0}/f{m}$i || exit 1; done; mkdir {1}",
                s(&dir),
                s(&sub)
            )));
            for i in 0..6 {
                let f = dir.join(format!("f{m}{i}"));
                assert_eq!(mode(&f), "660", "{}", f.display());
                assert_eq!(
                    strip(facl(&f)),
                    lines(&[
                        "user::rw-",
                        "user:1:rwx",
                        "group::r-x",
                        "mask::rw-",
                        "other::---"
                    ]),
                    "{}",
                    f.display()
                );
            }
            assert_eq!(mode(&sub), "770", "{}", sub.display());
            assert_eq!(strip(default_facl(&sub)), want_default, "{}", sub.display());
        }
    }
    // Without a default ACL, the umask applies as before.
    let plain = top.join("plain");
    assert!(nobody_can(&format!(
        "umask 027; mkdir {0} && echo x > {0}/f",
        s(&plain)
    )));
    assert_eq!(mode(&plain), "750");
    assert_eq!(mode(&plain.join("f")), "640");
    assert_eq!(
        facl(&plain.join("f")).len(),
        3,
        "no ACL: owner, group, other"
    );

    // The default ACL set on a striped directory reaches all its shards.
    sh(&format!(
        "setfacl -d -m u:2:r-x {0} && for i in $(seq 0 9); do touch {0}/late$i; done",
        s(&striped)
    ));
    for i in 0..10 {
        let f = striped.join(format!("late{i}"));
        assert!(
            facl(&f).contains(&"user:2:r-x".to_string()),
            "{}: {:?}",
            f.display(),
            facl(&f)
        );
    }
}
