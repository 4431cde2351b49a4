//! `io500` runs IO500's twelve phases in IO500's order on a directory, with
//! find matching exactly the mdtest-hard files whose names contain "01"
//! and that are strictly newer than the timestamp,
//! scores them as IO500 does from its own figures, and removes everything.

mod common;

use std::path::Path;

use loom_bench::io500::{find, score, Io500Options, Io500Plan, BW_PHASES, MD_PHASES};
use loom_bench::runner::{run_interleaved, Ctx};
use loom_bench::{BenchFs, PosixFs};

#[test]
fn io500_phases_run_in_order_and_the_score_follows_from_them() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let plan = Io500Plan::new(Io500Options {
        procs: 2,
        easy_block: 2 << 20,
        easy_transfer: 1 << 20,
        hard_segments: 20,
        easy_items: 50,
        hard_items: 120,
        ..Io500Options::default()
    })
    .expect("plan");
    let t = common::target("t", tmp.path());
    let res = run_interleaved(std::slice::from_ref(&t), &plan, &Ctx::quiet()).expect("run");
    let names: Vec<&str> = res[0].phases.iter().map(|p| p.phase.as_str()).collect();
    assert_eq!(
        names,
        [
            "ior-easy-write",
            "mdtest-easy-write",
            "ior-hard-write",
            "mdtest-hard-write",
            "find",
            "ior-easy-read",
            "mdtest-easy-stat",
            "ior-hard-read",
            "mdtest-hard-stat",
            "mdtest-easy-delete",
            "mdtest-hard-read",
            "mdtest-hard-delete",
            "BW",
            "MD",
            "SCORE"
        ]
    );
    let v = |n: &str| res[0].phase(n).expect(n).samples[0].value;
    let s = score(&BW_PHASES.map(v), &MD_PHASES.map(v));
    assert!(s.score > 0.0);
    assert!(
        (v("BW") - s.bw_gib).abs() < 1e-12
            && (v("MD") - s.md_kiops).abs() < 1e-12
            && (v("SCORE") - s.score).abs() < 1e-12
    );
    let hard = res[0].phase("ior-hard-write").expect("hard").samples[0].bytes;
    assert_eq!(hard, 2 * 20 * 47008);
    assert_eq!(
        res[0].phase("mdtest-hard-write").expect("w").samples[0].bytes,
        2 * 120 * 3901
    );
    assert!(common::walk(tmp.path()).is_empty());
}

#[test]
fn find_matches_newer_3901_byte_files_named_with_01() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fs = PosixFs::new(tmp.path()).expect("target");
    let since = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    fs.mkdir(Path::new("a")).expect("mkdir");
    fs.mkdir(Path::new("a/b")).expect("mkdir");
    let files = [
        ("a/file.01", 3901, true),
        ("a/b/x01y", 3901, true),
        ("a/b/x01z", 3900, false),
        ("a/b/x02", 3901, false),
        ("top01", 3901, true),
    ];
    for (p, size, _) in files {
        fs.create_file(Path::new(p), &vec![0u8; size], false)
            .expect("create");
    }
    let (m, c) = find(&fs, Path::new(""), since, 3, &Ctx::quiet()).expect("find");
    assert_eq!(c.matched, files.iter().filter(|f| f.2).count() as u64);
    assert_eq!(c.scanned, 7, "5 files and 2 directories");
    assert_eq!(m.ops, 7);
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    let (_, none) = find(&fs, Path::new(""), later, 1, &Ctx::quiet()).expect("find");
    assert_eq!(none.matched, 0, "-newer excludes older files");

    // -newer is strict: with the time of a/file.01 itself, that file is not
    // newer; files made in the same clock tick are not either.
    let stamp = fs.stat(Path::new("a/file.01")).expect("stat").modified;
    let newer = files
        .iter()
        .filter(|f| f.2)
        .filter(|f| fs.stat(Path::new(f.0)).expect("stat").modified > stamp)
        .count() as u64;
    let (_, strict) = find(&fs, Path::new(""), stamp, 2, &Ctx::quiet()).expect("find");
    assert_eq!(strict.matched, newer);
    assert!(strict.matched < c.matched, "a/file.01 must not match");
}
