//! Issue #9 (`find`, `du`, `ls -lR`): a program lists a directory with
//! getdents(2) until it returns nothing. When the MDT's page said the
//! listing ends there, the mount answers that last call itself: a small
//! directory costs one READDIR round trip, not two. Shown with the MDT
//! stopped (SIGSTOP) between the first call and the end: a question
//! that reached it would hang.
mod common;
use common::*;
use std::collections::BTreeSet;

#[test]
fn a_listing_ends_without_another_round_trip() {
    let mut c = Cluster::up(1, 1, &[]);
    // Made through another mount: this one holds nothing of it.
    let m2 = c.second_mount("mnt2");
    std::fs::create_dir(m2.join("d")).expect("mkdir");
    let want: BTreeSet<String> = (0..20).map(|i| format!("file{i}")).collect();
    for n in &want {
        std::fs::write(m2.join("d").join(n), b"x").expect("create");
    }

    // The first getdents(2) asks the MDT for a page, which holds it all.
    let mut it = std::fs::read_dir(c.path("d")).expect("opendir");
    let first = it
        .next()
        .expect("an entry")
        .expect("readdir")
        .file_name()
        .into_string()
        .expect("utf-8");
    let mdt = Stopped::new(c.pid("mdt0"));
    // The rest are in the C library's buffer; the call after them, which
    // returns nothing, is answered by the mount.
    let rest = within(move || {
        it.map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<Vec<String>>>()
    })
    .expect("the end of the listing went to the stopped MDT")
    .expect("readdir");
    drop(mdt);
    let mut got: BTreeSet<String> = rest.into_iter().collect();
    got.insert(first);
    assert_eq!(got, want);

    // A listing opened again asks the MDT again: a name added since is
    // seen.
    std::fs::write(m2.join("d/late"), b"x").expect("create");
    let again: BTreeSet<String> = std::fs::read_dir(c.path("d"))
        .expect("opendir")
        .map(|e| {
            e.expect("readdir")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert!(again.contains("late") && again.len() == 21, "{again:?}");
}
