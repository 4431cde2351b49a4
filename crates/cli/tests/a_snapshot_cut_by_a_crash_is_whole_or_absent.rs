//! Snapshots and crashes (issue #30, point 6): a server killed as by
//! `kill -9` while a snapshot is taken leaves it absent, every target
//! thawed (writes go on once the barrier's time is up), nothing of it on
//! any target once the next snapshot operation ran, and `loom fsck`
//! clean; the next snapshot is whole.
//! - the MGS dies after every target took the snapshot, before it
//!   recorded it whole;
//! - the OSTs die when asked to take it;
//! - the MDTs die when asked to take it (acknowledged changes survive);
//! - the MGS dies as it destroys one: finished by the next operation.
mod common;
use common::*;
use std::process::Command;

fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("utf-8")
}

fn fsck_clean(c: &Cluster) {
    let o = Command::new(loom_bin())
        .args(["fsck", "--min-age", "0"])
        .arg(&c.mnt)
        .output()
        .expect("loom fsck");
    assert!(
        o.status.success(),
        "fsck:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The snapshot numbers each target keeps.
fn kept(c: &Cluster) -> Vec<(String, Vec<String>)> {
    ["mdt0", "mdt1", "ost0", "ost1"]
        .iter()
        .map(|t| {
            let dir = c.state.join("targets").join(t).join("snapshots");
            let mut v: Vec<String> = std::fs::read_dir(&dir)
                .map(|rd| {
                    rd.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default();
            v.sort();
            (t.to_string(), v)
        })
        .collect()
}

/// A cluster of 2 MDTs and 2 OSTs whose servers all run with crash point
/// `point` armed (only those that reach it die).
fn up_armed(point: &str) -> Cluster {
    std::env::set_var("LOOM_FAIL_AT", point);
    let c = Cluster::up(2, 2, &[]);
    std::env::remove_var("LOOM_FAIL_AT");
    c
}

/// Wait until server `name` is gone (it killed itself at its crash point).
fn gone(c: &Cluster, name: &str) {
    let pid = nix::unistd::Pid::from_raw(c.pid(name));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while nix::sys::signal::kill(pid, None).is_ok() {
        assert!(std::time::Instant::now() < deadline, "{name} did not die");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn only(c: &Cluster, id: &str) {
    for (t, v) in kept(c) {
        assert_eq!(v, vec![id.to_string()], "{t} keeps {v:?}");
    }
}

/// One test, the cases in turn: each arms its servers through the
/// environment (`LOOM_FAIL_AT`), which tests running in parallel would share.
#[test]
fn a_snapshot_cut_by_a_crash_is_absent_and_the_next_is_whole() {
    an_mgs_killed_mid_snapshot_leaves_it_absent();
    an_ost_killed_as_it_takes_a_snapshot_leaves_it_absent();
    an_mdt_killed_as_it_takes_a_snapshot_leaves_it_absent();
    an_mgs_killed_mid_destroy_leaves_it_to_be_finished();
}

fn an_mgs_killed_mid_destroy_leaves_it_to_be_finished() {
    let mut c = up_armed("snapshot_destroy:marked");
    let mnt = c.mnt.clone();
    std::fs::write(mnt.join("f"), vec![3u8; 200_000]).expect("write");
    loom_ok(&["snapshot", "create", s(&mnt), "s1"]);
    std::fs::write(mnt.join("f"), vec![4u8; 200_000]).expect("overwrite");
    let o = loom(&["snapshot", "destroy", s(&mnt), "s1"]);
    assert!(!o.status.success(), "the MGS died, yet s1 was destroyed");
    gone(&c, "mgs");
    c.restart("mgs");
    let list = loom_ok(&["snapshot", "list", s(&mnt)]);
    assert!(list.contains("destroying"), "{list}");
    // Finished by the next operation.
    loom_ok(&["snapshot", "create", s(&mnt), "s2"]);
    let list = loom_ok(&["snapshot", "list", s(&mnt)]);
    assert!(!list.contains("s1") && list.contains("s2"), "{list}");
    only(&c, "2");
    fsck_clean(&c);
}

fn an_mdt_killed_as_it_takes_a_snapshot_leaves_it_absent() {
    // Only the MDTs reach this point: both die when asked to take it,
    // holding their barriers, with a cross-MDT rename just done.
    let mut c = up_armed("mdt_snapshot:take");
    let mnt = c.mnt.clone();
    loom_ok(&["mkdir", "-i", "1", s(&mnt.join("d1"))]);
    std::fs::write(mnt.join("f"), b"acknowledged").expect("write");
    std::fs::rename(mnt.join("f"), mnt.join("d1/f")).expect("rename across MDTs");
    let o = loom(&[
        "snapshot",
        "create",
        s(&mnt),
        "s1",
        "--barrier-timeout",
        "3",
    ]);
    assert!(!o.status.success(), "the MDTs died, yet s1 was taken");
    for mdt in ["mdt0", "mdt1"] {
        gone(&c, mdt);
        c.restart(mdt);
    }
    // Nothing acknowledged was lost, and changes go on.
    assert_eq!(
        std::fs::read(mnt.join("d1/f")).expect("read"),
        b"acknowledged"
    );
    std::fs::write(mnt.join("g"), b"after").expect("a write after the crash");
    loom_ok(&["snapshot", "create", s(&mnt), "s2"]);
    let list = loom_ok(&["snapshot", "list", s(&mnt)]);
    assert!(!list.contains("s1") && list.contains("s2"), "{list}");
    only(&c, "2");
    let m = c.second_mount_with("snap-s2", &["--snapshot", "s2"]);
    assert_eq!(
        std::fs::read(m.join("d1/f")).expect("read"),
        b"acknowledged"
    );
    assert_eq!(std::fs::read(m.join("g")).expect("read"), b"after");
    fsck_clean(&c);
}

fn an_mgs_killed_mid_snapshot_leaves_it_absent() {
    let mut c = up_armed("snapshot_create:taken");
    let mnt = c.mnt.clone();
    std::fs::write(mnt.join("f"), b"before").expect("write");
    let o = loom(&[
        "snapshot",
        "create",
        s(&mnt),
        "s1",
        "--barrier-timeout",
        "3",
    ]);
    assert!(!o.status.success(), "the MGS died, yet s1 was taken");
    gone(&c, "mgs");
    // Every target thaws when the barrier's time is up.
    std::fs::write(mnt.join("f"), b"after").expect("a write after the crash");
    c.restart("mgs");
    let list = loom_ok(&["snapshot", "list", s(&mnt)]);
    assert!(list.contains("creating"), "{list}");
    // The next snapshot operation drops what the crash left.
    loom_ok(&["snapshot", "create", s(&mnt), "s2"]);
    let list = loom_ok(&["snapshot", "list", s(&mnt)]);
    assert!(!list.contains("s1") && list.contains("s2"), "{list}");
    only(&c, "2");
    let m = c.second_mount_with("snap-s2", &["--snapshot", "s2"]);
    assert_eq!(std::fs::read(m.join("f")).expect("read"), b"after");
    fsck_clean(&c);
}

fn an_ost_killed_as_it_takes_a_snapshot_leaves_it_absent() {
    // Only the OSTs reach this point: both die when asked to take it.
    let mut c = up_armed("ost_snapshot:take");
    let mnt = c.mnt.clone();
    std::fs::write(mnt.join("f"), vec![1u8; 300_000]).expect("write");
    let o = loom(&[
        "snapshot",
        "create",
        s(&mnt),
        "s1",
        "--barrier-timeout",
        "3",
    ]);
    assert!(!o.status.success(), "an OST died, yet s1 was taken");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("snapshot"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for ost in ["ost0", "ost1"] {
        gone(&c, ost);
        c.restart(ost);
    }
    std::fs::write(mnt.join("f"), vec![2u8; 300_000]).expect("a write after the crash");
    loom_ok(&["snapshot", "create", s(&mnt), "s2"]);
    let list = loom_ok(&["snapshot", "list", s(&mnt)]);
    assert!(!list.contains("s1") && list.contains("s2"), "{list}");
    only(&c, "2");
    fsck_clean(&c);
}
