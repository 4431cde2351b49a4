//! Issue #9, point 2: under a lease on a file's attributes, the kernel
//! keeps the file's pages across opens (FOPEN_KEEP_CACHE): a second read
//! of a file is served from memory. Shown with the OST stopped (SIGSTOP):
//! a read that reached it would hang. What another mount rewrites, or
//! appends, and closes is read at the next open here: its change recalls
//! the lease, which drops the pages.
mod common;
use common::*;
use std::path::PathBuf;

/// Read `path` whole in a thread; None if it took more than 20 s.
fn read(path: PathBuf) -> Option<std::io::Result<Vec<u8>>> {
    within(move || std::fs::read(&path))
}

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn pages_stay_cached_under_a_lease() {
    let mut c = Cluster::up(1, 1, &[]);
    let m2 = c.second_mount("mnt2");
    let (mine, theirs) = (pattern(1, 256 << 10), pattern(2, 256 << 10));
    // Written here; written on the other mount and read here once.
    std::fs::write(c.path("mine"), &mine).expect("write");
    assert_eq!(std::fs::read(c.path("mine")).expect("read"), mine);
    std::fs::write(m2.join("theirs"), &theirs).expect("write on mount 2");
    assert_eq!(std::fs::read(c.path("theirs")).expect("read"), theirs);

    let ost = Stopped::new(c.pid("ost0"));
    for (name, want) in [("mine", &mine), ("theirs", &theirs)] {
        let got = read(c.path(name))
            .unwrap_or_else(|| panic!("the second read of {name} went to the stopped OST"))
            .expect("read");
        assert!(got == *want, "{name}: the cached pages differ");
    }
    drop(ost);

    // The other mount rewrites one in place (same size) and appends to
    // the other: this mount reads what it wrote.
    let rewritten = pattern(3, 256 << 10);
    std::fs::write(m2.join("theirs"), &rewritten).expect("rewrite on mount 2");
    let mut appended = mine.clone();
    appended.extend_from_slice(b"and more");
    std::fs::write(m2.join("mine"), &appended).expect("rewrite on mount 2");
    assert!(
        std::fs::read(c.path("theirs")).expect("read") == rewritten,
        "the rewrite"
    );
    assert!(
        std::fs::read(c.path("mine")).expect("read") == appended,
        "the append"
    );
}
