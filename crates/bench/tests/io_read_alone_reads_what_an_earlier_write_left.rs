//! `loom bench io -r` without `-w` reads what is there, as IOR does: the
//! files an earlier `-w --keep` run left, verified with -v, without
//! writing, creating or removing anything. With nothing there, or files
//! that are too short for the options, it fails and says what to run.

mod common;

use std::path::Path;

use loom_bench::io::IoPlan;
use loom_bench::options::IoOptions;
use loom_bench::runner::{run_interleaved, Ctx};
use loom_bench::{BenchError, PosixFs};

fn opts(f: impl FnOnce(&mut IoOptions)) -> IoPlan {
    let mut o = IoOptions {
        transfer: 4096,
        block: 16384,
        segments: 2,
        procs: 2,
        ..IoOptions::default()
    };
    f(&mut o);
    IoPlan::new(o).expect("plan")
}

fn run(dir: &Path, plan: &IoPlan) -> (Result<Vec<String>, BenchError>, common::Calls) {
    let fs = common::RecordingFs::new(PosixFs::new(dir).expect("target"));
    let calls = fs.calls();
    let t = common::target_on("t", dir, fs);
    let res = run_interleaved(std::slice::from_ref(&t), plan, &Ctx::quiet())
        .map(|r| r[0].phases.iter().map(|p| p.phase.clone()).collect());
    (res, calls)
}

#[test]
fn read_alone_reads_and_verifies_the_files_of_an_earlier_write() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (w, _) = run(
        tmp.path(),
        &opts(|o| {
            o.write = true;
            o.keep = true;
        }),
    );
    assert_eq!(w.expect("write"), ["write"]);
    let before = common::walk(tmp.path());
    assert_eq!(
        before.get("loom-io/iter.0/testfile"),
        Some(&Some(2 * 16384 * 2))
    );

    let (r, calls) = run(
        tmp.path(),
        &opts(|o| {
            o.read = true;
            o.verify = true;
            o.reorder = true;
            o.iterations = 2;
        }),
    );
    assert_eq!(r.expect("read"), ["read"]);
    let calls = calls.lock().expect("calls");
    let reads = calls.iter().filter(|c| c.op == "read_at").count();
    assert_eq!(reads, 2 * (2 * 2 * 4), "2 iterations of every transfer");
    let changes: Vec<_> = calls
        .iter()
        .filter(|c| {
            matches!(
                c.op,
                "write_at" | "create_file" | "mkdir" | "unlink" | "rmdir"
            )
        })
        .collect();
    assert!(
        changes.is_empty(),
        "-r alone changed the target: {changes:?}"
    );
    assert_eq!(
        common::walk(tmp.path()),
        before,
        "files must stay as they were"
    );
}

#[test]
fn read_alone_with_nothing_written_says_what_to_run() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (r, _) = run(tmp.path(), &opts(|o| o.read = true));
    let e = r.expect_err("nothing to read").to_string();
    assert!(
        e.contains("nothing to read") && e.contains("-w --keep"),
        "{e}"
    );
    assert!(common::walk(tmp.path()).is_empty(), "created something");
}

#[test]
fn read_alone_refuses_files_too_short_or_missing_for_its_options() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (w, _) = run(
        tmp.path(),
        &opts(|o| {
            o.write = true;
            o.keep = true;
        }),
    );
    w.expect("write");
    let before = common::walk(tmp.path());
    let (r, _) = run(
        tmp.path(),
        &opts(|o| {
            o.read = true;
            o.segments = 3;
        }),
    );
    let e = r.expect_err("too short").to_string();
    assert!(
        e.contains("holds 65536 bytes") && e.contains("read 98304") && e.contains("-s 3"),
        "{e}"
    );
    let (r, _) = run(
        tmp.path(),
        &opts(|o| {
            o.read = true;
            o.file_per_proc = true;
        }),
    );
    let e = r.expect_err("no per-process files").to_string();
    assert!(
        e.contains("testfile.00000000") && e.contains("missing"),
        "{e}"
    );
    assert_eq!(common::walk(tmp.path()), before);
}
