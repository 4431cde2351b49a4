//! Issues #8 (point 4) and #9 (point 1): before every create the kernel
//! looks the new name up. In a directory whose whole list the mount holds
//! under a lease (one it made, or listed whole), the mount answers that
//! lookup itself: the create costs the MDT one round trip, the CREATE.
//! Shown with the MDT stopped (SIGSTOP): the lookups of absent names are
//! answered; a question that reached the MDT would hang. Once another
//! mount adds a name, the list is recalled and the MDT is asked again.
mod common;
use common::*;
use std::path::PathBuf;

/// Whether each of `paths` exists, asked in a thread; None if the answer
/// did not come within 20 s (the question went to the stopped MDT).
fn exist(paths: Vec<PathBuf>) -> Option<Vec<bool>> {
    within(move || paths.iter().map(|p| p.exists()).collect())
}

#[test]
fn a_create_in_a_leased_directory_needs_no_lookup_round_trip() {
    let mut c = Cluster::up(1, 1, &[]);
    let m2 = c.second_mount("mnt2");
    let made = c.path("made");
    std::fs::create_dir(&made).expect("mkdir");
    for i in 0..10 {
        std::fs::write(made.join(format!("f{i}")), b"x").expect("create");
    }
    // A directory made elsewhere and listed whole by this mount.
    std::fs::create_dir(m2.join("listed")).expect("mkdir on mount 2");
    std::fs::write(m2.join("listed/a"), b"a").expect("create on mount 2");
    let listed = c.path("listed");
    assert_eq!(std::fs::read_dir(&listed).expect("readdir").count(), 1);

    let mdt = Stopped::new(c.pid("mdt0"));
    let asked: Vec<PathBuf> = (0..10)
        .map(|i| made.join(format!("new{i}")))
        .chain([made.join("f3"), listed.join("b"), listed.join("a")])
        .collect();
    let seen = exist(asked).expect("lookups in leased directories need no MDT");
    let mut want = vec![false; 10];
    want.extend([true, false, true]);
    assert_eq!(seen, want);
    drop(mdt);

    // Another mount adds a name: the list is recalled, and the name is
    // found.
    std::fs::write(m2.join("made/new0"), b"y").expect("create on mount 2");
    assert_eq!(
        std::fs::read(made.join("new0")).expect("read the other mount's file"),
        b"y"
    );
    // The mount's own create keeps working, and its lookup answers again
    // once it holds the list anew (it lists the directory whole).
    assert_eq!(std::fs::read_dir(&made).expect("readdir").count(), 11);
    std::fs::write(made.join("new1"), b"z").expect("create");
    let _mdt = Stopped::new(c.pid("mdt0"));
    let seen = exist(vec![made.join("new2"), made.join("new1")])
        .expect("the list is held again after a whole listing");
    assert_eq!(seen, vec![false, true]);
}
