//! Issue #9, point 1: a mount that does not answer a recall (frozen with
//! SIGSTOP) holds up another mount's change only for the recall timeout;
//! the MDT then closes its connection and drops every lease it held. When
//! it wakes, it drops everything it cached: a change made after it lost
//! its leases (no recall was sent for it) is seen too.
mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o7777
}

fn chmod(p: &Path, m: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod");
}

#[test]
fn a_frozen_mount_loses_its_leases_and_drops_its_cache() {
    let mut c = Cluster::up(1, 1, &["--recall-timeout-ms", "5000"]);
    let m2 = c.second_mount("mnt2");
    for f in ["f", "g"] {
        std::fs::write(c.path(f), b"x").expect("write");
        assert_eq!(mode(&m2.join(f)), 0o644, "mount 2 holds {f} under a lease");
    }
    let frozen = Stopped::new(c.mount_pid(&m2));

    // The change waits for the frozen holder, then goes ahead.
    let f = c.path("f");
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    std::thread::spawn(move || {
        chmod(&f, 0o600);
        let _ = tx.send(start.elapsed());
    });
    let took = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the change proceeds after the recall timeout");
    assert!(
        took >= Duration::from_millis(5000),
        "it waited for the recall ({took:?})"
    );
    // Mount 2 holds no lease any more: this change recalls nothing.
    let t = Instant::now();
    chmod(&c.path("g"), 0o640);
    assert!(
        t.elapsed() < Duration::from_millis(5000),
        "no recall waited for ({:?})",
        t.elapsed()
    );

    drop(frozen);
    // Awake, mount 2 finds its connection closed and drops its cache; its
    // kernel was told to keep these for the lease time (300 s), so
    // anything but that drop would show the old modes here.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (mf, mg) = (mode(&m2.join("f")), mode(&m2.join("g")));
        if (mf, mg) == (0o600, 0o640) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "mount 2 still shows f {mf:o}, g {mg:o} after waking"
        );
        std::thread::yield_now();
    }
    // And it takes leases again: a change is recalled from it, not waited
    // out.
    assert_eq!(mode(&m2.join("f")), 0o600);
    let t = Instant::now();
    chmod(&c.path("f"), 0o644);
    assert!(t.elapsed() < Duration::from_millis(5000), "answered recall");
    assert_eq!(mode(&m2.join("f")), 0o644);
}
