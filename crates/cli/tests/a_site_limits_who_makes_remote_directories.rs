//! Issue #29, point 5 ("`mkdir -i/-c` where the site allows it"): root
//! sets who besides root may make remote and striped directories (`loom
//! set-param MOUNT remote_dir_gid=...`, as Lustre's
//! `enable_remote_dir_gid`); the MGS keeps it and the MDTs apply it
//! within seconds, live. A user (uid 65534) outside the group is refused
//! with a clear error and still makes plain directories; the group's
//! members and root are not; bad names and values, and users who try to
//! set it, get clear errors.
mod common;
use common::*;
use std::time::{Duration, Instant};

fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("utf-8")
}

/// `loom mkdir -i 1 DIR` as uid 65534: whether it made DIR, and stderr.
fn user_mkdir_remote(dir: &std::path::Path) -> (bool, String) {
    let bin = loom_bin();
    let o = as_nobody(&[s(&bin), "mkdir", "-i", "1", s(dir)]);
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Run `loom mkdir -i 1` as the user on new names until it `succeeds` (or
/// is refused), as the MDTs take the new setting within seconds; the last
/// stderr.
fn until_user_mkdir(c: &Cluster, succeeds: bool, tag: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    for i in 0.. {
        let d = c.path(&format!("pub/{tag}{i}"));
        let (ok, err) = user_mkdir_remote(&d);
        if ok == succeeds {
            if ok {
                assert_eq!(mdt_of(&d), 1, "{}", d.display());
            }
            return err;
        }
        assert!(
            Instant::now() < deadline,
            "the user's remote mkdir still {} 20 s after the change: {err}",
            if succeeds { "refused" } else { "allowed" }
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    unreachable!()
}

#[test]
fn remote_directories_are_made_by_whom_the_site_allows() {
    let c = Cluster::up(2, 1, &[]);
    c.open_dir("pub");
    let m = s(&c.mnt).to_string();
    // By default every user may.
    assert_eq!(loom_ok(&["get-param", &m]).trim(), "remote_dir_gid=-1");
    until_user_mkdir(&c, true, "before");

    // Root only.
    assert_eq!(
        loom_ok(&["set-param", &m, "remote_dir_gid=0"]).trim(),
        "remote_dir_gid=0"
    );
    assert_eq!(
        loom_ok(&["get-param", &m, "remote_dir_gid"]).trim(),
        "remote_dir_gid=0"
    );
    let err = until_user_mkdir(&c, false, "root-only");
    assert!(
        err.contains("Operation not permitted")
            && err.contains("the site reserves remote and striped directories")
            && err.contains("remote_dir_gid"),
        "{err}"
    );
    let o = sh_as_nobody(&format!("mkdir {}", s(&c.path("pub/plain"))))
        .output()
        .expect("mkdir");
    assert!(o.status.success(), "a plain mkdir by the user");
    loom_ok(&["mkdir", "-i", "1", s(&c.path("pub/roots"))]);
    assert_eq!(mdt_of(&c.path("pub/roots")), 1, "root may");

    // The user's group.
    loom_ok(&["set-param", &m, "remote_dir_gid=65534"]);
    until_user_mkdir(&c, true, "group");
    loom_ok(&["set-param", &m, "remote_dir_gid=all"]);
    assert_eq!(loom_ok(&["get-param", &m]).trim(), "remote_dir_gid=-1");

    // Clear errors.
    for (args, want) in [
        (vec!["set-param", &m, "remote_dir_gid=staff"], "neither -1"),
        (
            vec!["set-param", &m, "no_such=1"],
            "no parameter \"no_such\"",
        ),
        (vec!["set-param", &m, "remote_dir_gid"], "is not NAME=VALUE"),
        (vec!["get-param", &m, "no_such"], "no parameter \"no_such\""),
    ] {
        let o = loom(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{args:?}: {err}");
    }
    let bin = loom_bin();
    let o = as_nobody(&[s(&bin), "set-param", &m, "remote_dir_gid=-1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("key"),
        "a user cannot set it: {err}"
    );
}
