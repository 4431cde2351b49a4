//! Issue #31, point 3: a file data migration is crash-safe. The MDT dies
//! as by kill -9 once the new objects are recorded (before any byte is
//! copied) and once the layout is swapped (before its answer); an OST
//! dies as by kill -9 while the bytes are copied. Each time the file has
//! its old layout or its new, whole, with its bytes; `loom fsck` finds no
//! object that no file names; and a second run moves it.
mod common;
use common::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8")
}

fn osts(c: &Cluster, f: &Path) -> BTreeSet<u32> {
    c.stripes(s(f)).iter().map(|x| x.0).collect()
}

fn sum(f: &Path) -> String {
    sh(&format!("sha256sum < {}", s(f)))
}

#[test]
fn a_data_migration_cut_by_a_crash_leaves_one_layout() {
    let mut c = Cluster::up(1, 4, &[]);
    let mnt = s(&c.mnt).to_string();
    loom_ok(&["pool", "new", &mnt, "old"]);
    loom_ok(&["pool", "add", &mnt, "old", "0", "1"]);
    loom_ok(&["pool", "new", &mnt, "new"]);
    loom_ok(&["pool", "add", &mnt, "new", "2", "3"]);
    let d = c.path("d");
    std::fs::create_dir(&d).expect("mkdir");
    loom_ok(&["setstripe", "-p", "old", "-c", "2", s(&d)]);
    let (was, now) = (BTreeSet::from([0, 1]), BTreeSet::from([2, 3]));

    let mut restarted: Option<Server> = None;
    for (k, point) in ["datamig:begun", "datamig:swapped"].into_iter().enumerate() {
        let f = d.join(format!("f{k}"));
        sh(&format!("head -c 9000000 /dev/urandom > {}", s(&f)));
        let before = sum(&f);
        match restarted.take() {
            Some(s) => drop(s),
            None => c.kill9("mdt0"),
        }
        let mut armed = c.start_armed("mdt0", point, k as u32);
        let run = Command::new(loom_bin())
            .args(["migrate", "-q", "--retries", "0", "-p", "new", "-c", "2"])
            .arg(&f)
            .spawn()
            .expect("loom migrate");
        let status = armed.0.wait().expect("wait for the armed MDT");
        assert!(!status.success(), "the MDT did not crash at {point}");
        restarted = Some(c.start_armed("mdt0", "", 100 + k as u32));
        let first = within(move || {
            let mut run = run;
            run.wait().expect("wait for loom migrate")
        })
        .expect("loom migrate hung after the restart");
        let on = osts(&c, &f);
        // Cut before the swap, the migration was undone at the restart,
        // and the run's resent request began it again, or failed; cut
        // after, the swap was committed and the resent end finds it done.
        let want = if point == "datamig:begun" && !first.success() {
            &was
        } else {
            &now
        };
        assert_eq!(&on, want, "after a crash at {point} (first run: {first})");
        assert_eq!(
            sum(&f),
            before,
            "after a crash at {point} (first run: {first})"
        );
        let (code, report) = fsck(&c, &["--min-age", "0"]);
        assert_eq!(code, 0, "fsck after a crash at {point}:\n{report}");
        loom_ok(&["migrate", "-p", "new", "-c", "2", s(&f)]);
        assert_eq!(osts(&c, &f), now);
        assert_eq!(sum(&f), before);
    }

    // An OST of the new pool dies while the bytes are copied: the run
    // fails or finishes, and the file is whole on one pool or the other.
    let f = d.join("big");
    sh(&format!("head -c 400000000 /dev/urandom > {}", s(&f)));
    let before = sum(&f);
    let mut run = Command::new(loom_bin())
        .args([
            "migrate",
            "--progress",
            "0",
            "--retries",
            "0",
            "-p",
            "new",
            "-c",
            "2",
        ])
        .arg(&f)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("loom migrate");
    // Its first progress line: bytes are being copied.
    let mut err = std::io::BufReader::new(run.stderr.take().expect("stderr"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).expect("a progress line");
    assert!(line.contains("MiB"), "{line}");
    c.kill9("ost3");
    c.restart("ost3");
    let ended = within(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut rest);
        (run.wait().expect("wait"), rest)
    })
    .expect("loom migrate hung after the OST came back");
    let on = osts(&c, &f);
    assert!(
        on == was || on == now,
        "one layout or the other: {on:?} ({ended:?})"
    );
    assert_eq!(sum(&f), before, "({ended:?})");
    let (code, report) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 0, "fsck after an OST's kill -9:\n{report}");
    loom_ok(&["migrate", "-p", "new", "-c", "2", s(&f)]);
    assert_eq!(osts(&c, &f), now);
    assert_eq!(sum(&f), before);
    drop(restarted);
}
