//! Issue #9: an open asks the MDT for fresh attributes and the layout
//! (close-to-open), unless the mount holds a lease on the file's
//! attributes and knows its layout: another mount's change would have
//! recalled the lease first. Shown with the MDT stopped (SIGSTOP): files
//! this mount wrote, or opened once, open and read; the kernel still
//! refuses a user the mode does not let in. After another mount rewrites
//! or chmods a file, the next open sees it.
mod common;
use common::*;
use std::path::PathBuf;
use std::process::Command;

/// `cat PATH` as uid and gid 65534, in a thread: (success, stdout,
/// stderr), or None if it did not answer within 20 s.
fn cat_as_nobody(path: PathBuf) -> Option<(bool, String, String)> {
    within(move || {
        let o = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat"])
            .arg(&path)
            .output()
            .expect("setpriv");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    })
}

#[test]
fn an_open_under_a_lease_needs_no_mdt() {
    let mut c = Cluster::up(1, 2, &[]);
    let m2 = c.second_mount("mnt2");
    // Written here: leased by its create.
    std::fs::write(c.path("mine"), b"mine").expect("write");
    // Written by the other mount, opened here once by the user (who
    // is not its owner: its ACL, which the kernel checks, is asked then,
    // and the root directory's for the path walk; both are leased).
    std::fs::write(m2.join("theirs"), b"theirs").expect("write on mount 2");
    let (ok, out, err) = cat_as_nobody(c.path("theirs")).expect("answered");
    assert!(ok && out == "theirs", "{out} {err}");
    // Readable by its owner only.
    std::fs::write(c.path("private"), b"secret").expect("write");
    std::fs::set_permissions(
        c.path("private"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .expect("chmod");

    let mdt = Stopped::new(c.pid("mdt0"));
    for (name, want) in [("mine", "mine"), ("theirs", "theirs")] {
        let (ok, out, err) =
            cat_as_nobody(c.path(name)).unwrap_or_else(|| panic!("open of {name} asked the MDT"));
        assert!(ok && out == want, "{name}: {out} {err}");
    }
    let (ok, _, err) = cat_as_nobody(c.path("private")).expect("refused without the MDT");
    assert!(!ok && err.contains("Permission denied"), "{err}");
    drop(mdt);

    // The other mount rewrites one and closes the other: seen at the next
    // open here.
    std::fs::write(m2.join("theirs"), b"rewritten, longer").expect("rewrite");
    std::fs::set_permissions(
        m2.join("mine"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .expect("chmod on mount 2");
    let (ok, out, _) = cat_as_nobody(c.path("theirs")).expect("answered");
    assert!(ok && out == "rewritten, longer", "{out}");
    let (ok, _, err) = cat_as_nobody(c.path("mine")).expect("answered");
    assert!(!ok && err.contains("Permission denied"), "{err}");
}
