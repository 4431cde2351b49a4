//! A participant MDT dies while a cross-MDT rmdir destroys its directory:
//! the coordinator answers EIO once its step times out, keeps the entry
//! where it is (a rename fails: the kernel cannot look the directory up
//! while its MDT is down, and the coordinator refuses to move a name it is
//! removing), and finishes the removal by itself once the participant is
//! back: nothing is left on either MDT.
mod common;
use common::*;
use std::time::{Duration, Instant};

#[test]
fn a_cross_mdt_removal_waits_out_a_dead_participant() {
    let c = Cluster::up(2, 1, &["--attr-timeout", "0"]);
    let dir = c.path("x");
    loom_ok(&["mkdir", "-i", "1", dir.to_str().expect("utf-8")]);
    assert_eq!(inodes_per_mdt(&c.mnt), vec![1, 1]);
    c.kill9("mdt1");
    let mut armed = c.start_armed("mdt1", "destroy_dir", 1);

    // MDT1 seals its directory, then dies destroying it.
    let e = std::fs::remove_dir(&dir).expect_err("the participant died");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    let status = armed.0.wait().expect("wait for MDT1");
    assert!(!status.success(), "MDT1 did not crash at its point");
    std::fs::rename(&dir, c.path("y")).expect_err("a name being removed moved");

    // Back, MDT1 lets the coordinator finish the removal on its own.
    let _back = c.start_armed("mdt1", "", 2);
    // The name is free again once the removal is finished (until then
    // a mkdir of it finds the entry: EEXIST).
    let deadline = Instant::now() + Duration::from_secs(90);
    let x = dir.to_str().expect("utf-8");
    loop {
        let again = loom(&["mkdir", "-i", "1", x]);
        if again.status.success() {
            break;
        }
        let err = String::from_utf8_lossy(&again.stderr);
        assert!(err.contains("File exists"), "{err}");
        assert!(
            Instant::now() < deadline,
            "the coordinator did not finish the removal"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!c.path("y").exists(), "the name moved");
    assert_eq!(mdt_of(&dir), 1);
    // The new directory is the only object left on MDT1.
    assert_eq!(inodes_per_mdt(&c.mnt), vec![1, 1], "objects left behind");
    std::fs::remove_dir(&dir).expect("rmdir");
    assert_eq!(inodes_per_mdt(&c.mnt), vec![1, 0]);
}
