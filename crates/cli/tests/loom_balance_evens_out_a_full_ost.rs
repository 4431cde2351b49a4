//! Issue #31, point 4: `loom balance` brings two OSTs, one about 80% full
//! and one empty, within 10 points of each other by moving files while
//! they stay readable, at a rate limit, with progress shown; `--dry-run`
//! moves nothing; a run killed part way goes on when run again. Both
//! OSTs live on 256 MiB tmpfs mounts the test makes (smaller ones are
//! taken up by the clients' space grants).
mod common;
use common::*;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8")
}

/// Each OST's Use% as `loom df` shows it.
fn fills(c: &Cluster) -> Vec<u32> {
    let out = loom_ok(&["df", s(&c.mnt)]);
    out.lines()
        .filter(|l| l.contains("OST"))
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.ends_with('%'))
                .and_then(|w| w.trim_end_matches('%').parse().ok())
        })
        .collect()
}

fn sums(dir: &Path) -> String {
    sh(&format!("cd {} && sha256sum *", s(dir)))
}

#[test]
fn loom_balance_evens_out_a_full_ost() {
    let c = Cluster::up_with(1, 2, &[], |state| {
        let mut disks: Vec<Tmpfs> = (0..2)
            .map(|i| Tmpfs::mount(&state.join(format!("targets/ost{i}")), "256m"))
            .collect();
        disks.push(Tmpfs::mount(&state.join("targets/mdt0"), "256m"));
        disks
    });
    let d = c.path("d");
    std::fs::create_dir(&d).expect("mkdir");
    loom_ok(&["setstripe", "-i", "0", "-c", "1", s(&d)]);
    sh(&format!(
        "cd {} && for i in $(seq 1 24); do head -c 8388608 /dev/urandom > f$i; done",
        s(&d)
    ));
    let before = sums(&d);
    let f = fills(&c);
    assert!(
        f.len() == 2 && f[0] >= 70 && f[1] <= 5,
        "OST0 full, OST1 empty: {f:?}"
    );

    // A dry run says what it would move and moves nothing.
    let o = loom(&["balance", "--dry-run", s(&c.mnt)]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("would move /d/f"), "{out}");
    assert_eq!(fills(&c), f, "a dry run moved something");

    // Killed part way (a slow rate), then run again: it goes on.
    let mut first = Command::new(loom_bin())
        .args(["balance", "--rate", "16", "--progress", "0", s(&c.mnt)])
        .stderr(Stdio::piped())
        .spawn()
        .expect("loom balance");
    let mut err = std::io::BufReader::new(first.stderr.take().expect("stderr"));
    let mut lines = Vec::new();
    for _ in 0..3 {
        let mut l = String::new();
        err.read_line(&mut l).expect("a progress line");
        lines.push(l);
    }
    assert!(
        lines
            .iter()
            .all(|l| l.contains("OST0000") && l.contains("files moved")),
        "{lines:?}"
    );
    first.kill().expect("kill");
    first.wait().expect("wait");
    let part = fills(&c);
    assert!(
        part[1] > f[1],
        "the first run moved something: {f:?} -> {part:?}"
    );
    assert_eq!(sums(&d), before, "bytes after the killed run");

    let out = loom_ok(&["balance", "--tolerance", "10", s(&c.mnt)]);
    assert!(out.starts_with("balanced:"), "{out}");
    let after = fills(&c);
    assert!(
        after[0].abs_diff(after[1]) <= 10,
        "within 10 points: {f:?} -> {after:?} ({out})"
    );
    assert_eq!(sums(&d), before, "every file's bytes");
    let on1 = (1..=24)
        .filter(|i| c.stripes(s(&d.join(format!("f{i}"))))[0].0 == 1)
        .count();
    assert!((8..=16).contains(&on1), "{on1} of 24 files on OST1");
    let (code, report) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 0, "{report}");
    // Balanced already: nothing moves.
    let out = loom_ok(&["balance", s(&c.mnt)]);
    assert!(out.contains("0 files moved"), "{out}");
    // Bad input.
    let o = loom(&["balance", "--tolerance", "150", s(&c.mnt)]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("percentage"));
}
