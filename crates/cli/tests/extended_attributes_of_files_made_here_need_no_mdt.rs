//! Issue #9: `ls -l` reads two extended attributes of every file it
//! lists (a security label, an ACL). A file this mount made has none
//! until someone sets one, so the mount answers those questions itself
//! while the file's attributes are leased, also after tar's chown, chmod
//! and utimens. Shown with the MDT stopped (SIGSTOP): a question that
//! reached it would hang. When another mount sets one, the lease is
//! recalled and the next question goes to the MDT again.
mod common;
use common::*;
use std::process::Command;

/// `getfattr ARGS`, run in a thread: (exit success, stdout, stderr), or
/// None if it did not answer within 20 s (it asked the stopped MDT).
fn getfattr(args: Vec<String>) -> Option<(bool, String, String)> {
    within(move || {
        let o = Command::new("getfattr")
            .args(&args)
            .output()
            .expect("getfattr");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    })
}

#[test]
fn extended_attributes_of_files_made_here_need_no_mdt() {
    let mut c = Cluster::up(1, 1, &[]);
    let m2 = c.second_mount("mnt2");
    let dir = c.path("t");
    std::fs::create_dir(&dir).expect("mkdir");
    // As tar leaves a file: written, times set, owner and mode restored.
    for i in 0..4 {
        let f = dir.join(format!("f{i}"));
        std::fs::write(&f, b"data").expect("write");
        sh(&format!(
            "touch -d 2001-01-01 {f} && chown 1234:1234 {f} && chmod 640 {f}",
            f = f.display()
        ));
    }

    let mdt = Stopped::new(c.pid("mdt0"));
    for i in 0..4 {
        let f = dir.join(format!("f{i}")).display().to_string();
        for name in ["security.selinux", "system.posix_acl_access"] {
            let (ok, _, err) = getfattr(vec!["-n".into(), name.into(), f.clone()])
                .unwrap_or_else(|| panic!("{name} of {f} went to the stopped MDT"));
            assert!(
                !ok && err.contains("No such attribute"),
                "{name} of {f}: {err}"
            );
        }
        // The names: none (listxattr).
        let (ok, out, err) = getfattr(vec!["-d".into(), "-m".into(), "-".into(), f.clone()])
            .unwrap_or_else(|| panic!("the list of {f} went to the stopped MDT"));
        assert!(ok && out.is_empty(), "names of {f}: {out} {err}");
    }
    drop(mdt);

    // Another mount labels f1: this mount's knowledge is recalled first.
    let f1 = dir.join("f1").display().to_string();
    sh(&format!(
        "setfattr -n security.loomtest -v label {}",
        m2.join("t/f1").display()
    ));
    let (ok, out, err) = getfattr(vec!["-n".into(), "security.loomtest".into(), f1.clone()])
        .expect("the MDT answers again");
    assert!(
        ok && out.contains("label"),
        "seen after the other mount set it: {out} {err}"
    );
    let (_, out, _) = getfattr(vec!["-d".into(), "-m".into(), "-".into(), f1.clone()])
        .expect("the MDT answers again");
    assert!(out.contains("security.loomtest"), "listed: {out}");
    // This mount sets one on f2 itself: read back, listed.
    let f2 = dir.join("f2").display().to_string();
    sh(&format!("setfattr -n security.mine -v own {f2}"));
    let (ok, out, _) =
        getfattr(vec!["-n".into(), "security.mine".into(), f2.clone()]).expect("answered");
    assert!(ok && out.contains("own"), "{out}");
    let (_, out, _) = getfattr(vec!["-d".into(), "-m".into(), "-".into(), f2]).expect("answered");
    assert!(out.contains("security.mine"), "listed: {out}");
    // The other mount sees both.
    let out = sh(&format!(
        "getfattr -d -m - {0}/f1 {0}/f2",
        m2.join("t").display()
    ));
    assert!(
        out.contains("security.loomtest") && out.contains("security.mine"),
        "{out}"
    );
}
