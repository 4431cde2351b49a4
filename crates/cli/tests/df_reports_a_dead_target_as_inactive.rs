//! With one OST killed, `loom df` still answers, showing that OST as an
//! inactive device and summing the others, and statfs on the mount (df)
//! works; after the OST restarts it is counted again.
mod common;
use common::*;

#[test]
fn df_reports_a_dead_target_as_inactive() {
    let mut c = Cluster::up(1, 2, &[]);
    let mnt = c.mnt.to_str().expect("utf8").to_string();
    let before = loom_ok(&["df", &mnt]);
    assert!(!before.contains("inactive"), "{before}");
    // Sizes in 1 KiB blocks, as lfs df; the summary's blocks are the OSTs'.
    assert!(before
        .lines()
        .next()
        .is_some_and(|h| h.contains("1K-blocks")));
    let blocks = |l: &str| -> u64 {
        let f: Vec<&str> = l.split_whitespace().collect();
        f[1].parse()
            .unwrap_or_else(|_| panic!("no block count in {l:?}"))
    };
    let osts: u64 = before
        .lines()
        .filter(|l| l.contains("-OST"))
        .map(blocks)
        .sum();
    let summary = before
        .lines()
        .find(|l| l.starts_with("filesystem_summary"))
        .unwrap_or_else(|| panic!("no summary:\n{before}"));
    assert_eq!(blocks(summary), osts, "{before}");
    let human = loom_ok(&["df", "-H", &mnt]);
    assert!(
        human.lines().next().is_some_and(|h| h.contains("bytes")),
        "{human}"
    );
    c.kill9("ost1");
    let during = loom_ok(&["df", &mnt]);
    let line = during
        .lines()
        .find(|l| l.contains("OST0001"))
        .unwrap_or_else(|| panic!("no OST0001 line:\n{during}"));
    assert!(line.contains("inactive device"), "{during}");
    assert!(
        during
            .lines()
            .any(|l| l.contains("OST0000") && !l.contains("inactive")),
        "{during}"
    );
    // The kernel's statfs through the mount is answered too.
    let st = nix::sys::statvfs::statvfs(c.mnt.as_path()).expect("statfs on the mount");
    assert!(st.blocks() > 0);
    c.restart("ost1");
    let after = loom_ok(&["df", &mnt]);
    assert!(!after.contains("inactive"), "{after}");
}
