//! Issue #11, full targets: new files avoid an OST as it fills (Lustre's
//! QOS allocator): with one of two equal OSTs four fifths full, the MDT
//! puts the first stripe of new files on the other far more often, but
//! not always (a fuller OST gets fewer, never none while it has room).
//! `loom df --warn-at` names a target past the fill level it is given.
//! Both OSTs live on 64 MiB tmpfs mounts this test makes and removes, and
//! the MDT on one of its own: on the host's disk its fill level is the
//! host's (a CI disk past 90% made `df` warn about the MDT).
mod common;
use common::*;

#[test]
fn new_files_avoid_a_filling_ost() {
    let c = Cluster::up_with(1, 2, &[], |state| {
        let mut disks: Vec<Tmpfs> = (0..2)
            .map(|i| Tmpfs::mount(&state.join(format!("targets/ost{i}")), "64m"))
            .collect();
        disks.push(Tmpfs::mount(&state.join("targets/mdt0"), "256m"));
        disks
    });
    // Fill OST0's disk behind loomfs's back: about 81% used.
    let filler = c.state.join("targets/ost0/filler");
    std::fs::write(&filler, vec![1u8; 52 << 20]).expect("fill OST0's disk");

    let o = loom(&["df", "--warn-at", "50", c.mnt.to_str().expect("utf8")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("loom-OST0000 is") && err.contains("% full (space), above --warn-at 50%"),
        "{err}"
    );
    assert!(!err.contains("OST0001"), "OST1 is nearly empty: {err}");
    let o = loom(&["df", c.mnt.to_str().expect("utf8")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.is_empty(), "no target is past 90%: {err}");
    let o = loom(&["df", "--warn-at", "0", c.mnt.to_str().expect("utf8")]);
    assert!(!o.status.success(), "--warn-at 0 is refused");

    let dir = c.path("d");
    std::fs::create_dir(&dir).expect("mkdir");
    loom_ok(&["setstripe", "-c", "1", dir.to_str().expect("utf8")]);
    let mut on = [0u32; 2];
    for i in 0..100 {
        let f = dir.join(format!("f{i}"));
        std::fs::File::create(&f).expect("create");
        let (ost, _) = c.stripes(f.to_str().expect("utf8"))[0];
        on[ost as usize] += 1;
    }
    assert!(
        on[1] >= 75,
        "the emptier OST got {} of 100 new files",
        on[1]
    );
    assert!(on[0] >= 1, "the fuller OST got no new file at all");
}
