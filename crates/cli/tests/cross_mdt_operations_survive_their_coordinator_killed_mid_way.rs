//! Crash safety of cross-MDT operations: the coordinating MDT (MDT0, which
//! holds the root's entries) is killed, as by `kill -9`, at a crash point
//! between two steps (`LOOM_FAIL_AT`), and started again. Its intent log
//! must leave no orphan or doubled directory objects on the other MDTs, no
//! shard left sealed, and no half-removed directory; the client's request,
//! resent after the restart, must get the answer the finished operation
//! deserves.
mod common;
use common::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// Wait until process `pid` (a server `loom up` started, which reaps it)
/// has died at its crash point.
fn wait_gone(pid: i32) {
    let pid = nix::unistd::Pid::from_raw(pid);
    let deadline = Instant::now() + Duration::from_secs(60);
    while nix::sys::signal::kill(pid, None).is_ok() {
        assert!(
            Instant::now() < deadline,
            "MDT0 did not reach its crash point"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Wait for a server the test started to die at its crash point.
fn wait_crashed(s: &mut Server) {
    let status = s.0.wait().expect("wait for MDT0");
    assert!(!status.success(), "MDT0 exited cleanly instead of crashing");
}

#[test]
fn cross_mdt_operations_survive_their_coordinator_killed_mid_way() {
    // Every server of the first start is armed; only a coordinator
    // reaches a coordinator's crash point.
    std::env::set_var("LOOM_FAIL_AT", "mkdir_striped:parts_made");
    let c = Cluster::up(3, 1, &["--attr-timeout", "0"]);
    std::env::remove_var("LOOM_FAIL_AT");
    let dir = c.path("wide");
    let shown = dir.to_str().expect("utf-8").to_string();

    // 1. Killed after every shard and the master were made, before the
    // entry: the restart finishes the mkdir (no part made twice) and
    // records its answer, which the resent request gets.
    let first = c.pid("mdt0");
    let mut mkdir = Command::new(loom_bin())
        .args(["setdirstripe", "-c", "3", "-i", "1", &shown])
        .spawn()
        .expect("loom setdirstripe");
    wait_gone(first);
    let mut s1 = c.start_armed("mdt0", "rmdir_distributed:sealing", 1);
    assert!(
        mkdir.wait().expect("wait").success(),
        "the resent mkdir failed"
    );
    let layout = loom_ok(&["getdirstripe", &shown]);
    assert!(
        layout.starts_with("lmv_stripe_count: 3 lmv_stripe_offset: 1"),
        "{layout}"
    );
    // Root and one shard on MDT0, the master on MDT1, a shard on MDT2:
    // the objects of the interrupted attempt are gone.
    assert_eq!(
        inodes_per_mdt(&c.mnt),
        vec![2, 1, 1],
        "orphans of the first attempt"
    );

    // 2. Killed after sealing the first shard of a removal that the other
    // shards refuse: the restart unseals it; the resent rmdir answers
    // ENOTEMPTY and the shard takes new names again.
    for i in 0..40 {
        std::fs::write(dir.join(format!("f{i}")), b"x").expect("create");
    }
    for i in 0..40 {
        let f = dir.join(format!("f{i}"));
        if mdt_of(&f) == 1 {
            std::fs::remove_file(&f).expect("empty shard 0 (on the master's MDT)");
        }
    }
    let mut rmdir = Command::new("rmdir").arg(&dir).spawn().expect("rmdir");
    wait_crashed(&mut s1);
    let mut s2 = c.start_armed("mdt0", "rmdir_distributed:sealed", 2);
    assert!(
        !rmdir.wait().expect("wait").success(),
        "removed a non-empty directory"
    );
    assert!(dir.exists());
    let on_shard0 = (0..200)
        .map(|i| dir.join(format!("g{i}")))
        .find(|g| {
            std::fs::write(g, b"y").expect("create after the rolled-back removal");
            mdt_of(g) == 1
        })
        .expect("a name in shard 0");
    assert_eq!(std::fs::read(&on_shard0).expect("read"), b"y");

    // 3. Killed once every shard is sealed and their destruction began:
    // the restart finishes the removal and records its reply, so the
    // resent rmdir succeeds instead of answering ENOENT.
    sh(&format!("rm -f {shown}/*"));
    let mut rmdir = Command::new("rmdir").arg(&dir).spawn().expect("rmdir");
    wait_crashed(&mut s2);
    let _s3 = c.start_armed("mdt0", "", 3);
    assert!(
        rmdir.wait().expect("wait").success(),
        "the resent rmdir failed"
    );
    assert!(!dir.exists());
    assert_eq!(inodes_per_mdt(&c.mnt), vec![1, 0, 0], "shards left behind");
    // The namespace works on.
    loom_ok(&["setdirstripe", "-c", "2", &shown]);
    std::fs::write(dir.join("after"), b"z").expect("create");
    sh(&format!("rm -r {shown}"));
    assert_eq!(inodes_per_mdt(&c.mnt), vec![1, 0, 0]);
}
