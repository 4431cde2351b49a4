//! Issue #8, point 4: a stat or lookup of what this mount has just made or
//! changed never asks a server. After a create, a write and an unlink the
//! kernel has dropped what it knew of the directory, of the written file
//! and of the removed name, and asks the mount again; the mount answers
//! from what the changes' replies said. Shown with the MDT stopped
//! (SIGSTOP): a question that reached it would hang until the timeout.
mod common;
use common::*;
use std::process::Command;

/// Continues a stopped server when dropped, also when the test fails.
/// `stat` of `paths` (as `user`, if given): (exit status, output). Fails
/// the test if no answer comes within 20 s: the question went to the
/// stopped MDT. (The `stat` then waits in the kernel until the MDT is
/// continued, which the caller's `Stopped` guard does.)
fn stat(paths: &[&std::path::Path], user: Option<u32>) -> (i32, String) {
    let mut cmd = match user {
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
                "stat",
            ]);
            c
        }
        None => Command::new("stat"),
    };
    cmd.args(["-c", "%n %s %h %a %Y"]);
    cmd.args(paths);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(cmd.output());
    });
    let out = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("no answer within 20 s: the question went to the stopped MDT")
        .expect("run stat");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn stats_and_lookups_of_this_mounts_changes_need_no_server() {
    // A long attribute timeout: the answers below must not depend on how
    // fast this machine runs them.
    let c = Cluster::up(1, 1, &["--attr-timeout", "120"]);
    let d = c.path("d");
    std::fs::create_dir(&d).expect("mkdir");
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    // The root directory was not made here: its ACL, which the kernel
    // checks a user's path walk against, is asked once (then leased).
    let root = c.mnt.to_str().expect("utf-8");
    let o = sh_as_nobody(&format!("test -x {root}"))
        .output()
        .expect("a user's search of the root");
    assert!(o.status.success());
    std::fs::write(d.join("kept"), b"twelve bytes").expect("write kept");
    std::fs::write(d.join("gone"), b"").expect("create gone");
    std::fs::remove_file(d.join("gone")).expect("unlink gone");
    // No stat in between: the kernel holds nothing valid for `d` (the
    // create and unlink in it dropped its attributes), for `kept` (the
    // write dropped its size) or for `gone`, so each question below
    // reaches the mount.
    let stopped = Stopped::new(c.pid("mdt0"));
    // Asked by a user other than the one who made them (the kernel checks
    // permissions from the attributes it is given).
    let (code, seen) = stat(&[&d, &d.join("kept")], Some(65534));
    assert_eq!(code, 0, "stat with the MDT stopped: {seen}");
    let lines: Vec<&str> = seen.lines().collect();
    assert!(lines[0].contains(" 2 755 "), "{seen}");
    assert!(lines[1].contains("kept 12 1 644 "), "{seen}");
    // The removed name: absent, without asking.
    let (code, out) = stat(&[&d.join("gone")], None);
    assert_eq!(code, 1, "stat of the removed name: {out}");
    assert!(out.contains("No such file"), "{out}");
    drop(stopped);

    // What the MDT says, asked through a second mount: the same.
    let mut c = c;
    let other = c.second_mount("mnt2");
    let (code, theirs) = stat(&[&other.join("d"), &other.join("d/kept")], Some(65534));
    assert_eq!(code, 0, "{theirs}");
    let tails = |s: &str| -> Vec<String> {
        s.lines()
            .map(|l| l.split_once(' ').map(|x| x.1).unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(
        tails(&seen),
        tails(&theirs),
        "mine: {seen}\ntheirs: {theirs}"
    );
}
