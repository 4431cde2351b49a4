//! `-N n` makes process r create its own items, stat those of process
//! (r+n) mod p, read those of (r+2n) and remove those of (r+3n), as mdtest's
//! mk_name, stat_name, read_name and rm_name do; without -N every process
//! works on its own items. A recording wrapper around a real directory says
//! which process touched which item.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use loom_bench::md::MdPlan;
use loom_bench::options::MdOptions;
use loom_bench::runner::{run_interleaved, Ctx};
use loom_bench::PosixFs;

/// For each operation on items and each process: the owners (the rank in
/// the item's name) of the items it touched, and how many it touched.
type Touched = BTreeMap<(&'static str, u32), (BTreeSet<u32>, usize)>;

fn run(opts: MdOptions) -> Touched {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fs = common::RecordingFs::new(PosixFs::new(tmp.path()).expect("target"));
    let calls = fs.calls();
    let t = common::target_on("t", tmp.path(), fs);
    let plan = MdPlan::new(opts).expect("plan");
    run_interleaved(std::slice::from_ref(&t), &plan, &Ctx::quiet()).expect("run");
    assert!(common::walk(tmp.path()).is_empty(), "files left behind");
    let mut touched = Touched::new();
    for c in calls.lock().expect("calls").iter() {
        let name = c
            .path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        // file.mdtest.<owner>.<j> / dir.mdtest.<owner>.<j>
        let parts: Vec<&str> = name.split('.').collect();
        if parts.len() != 4 || parts[1] != "mdtest" {
            continue;
        }
        let owner: u32 = parts[2].parse().expect("owner");
        let rank = c.rank.expect("item calls come from a process");
        let e = touched.entry((c.op, rank)).or_default();
        e.0.insert(owner);
        e.1 += 1;
    }
    touched
}

/// Checks that in `op`, every process r touched exactly the `items` items
/// of process (r + k*stride) mod p.
fn assert_step(t: &Touched, op: &'static str, k: u32, stride: u32, procs: u32, items: usize) {
    for r in 0..procs {
        let want = (r + k * stride) % procs;
        let got = t
            .get(&(op, r))
            .unwrap_or_else(|| panic!("{op}: process {r} did nothing"));
        assert_eq!(
            got,
            &(BTreeSet::from([want]), items),
            "{op} by process {r} (stride {stride}, {procs} processes)"
        );
    }
}

#[test]
fn with_a_stride_each_phase_works_on_the_next_process_along() {
    let (p, n, items) = (4, 1, 6);
    let t = run(MdOptions {
        items: Some(items),
        procs: p,
        stride: n,
        files_only: true,
        write_bytes: 8,
        read_bytes: 8,
        ..MdOptions::default()
    });
    assert_step(&t, "create_file", 0, n, p, items as usize);
    assert_step(&t, "stat", 1, n, p, items as usize);
    assert_step(&t, "read_file", 2, n, p, items as usize);
    assert_step(&t, "unlink", 3, n, p, items as usize);
}

#[test]
fn a_stride_of_two_over_three_processes_wraps_around_for_directories() {
    let (p, n, items) = (3, 2, 5);
    let t = run(MdOptions {
        items: Some(items),
        procs: p,
        stride: n,
        dirs_only: true,
        ..MdOptions::default()
    });
    assert_step(&t, "mkdir", 0, n, p, items as usize);
    assert_step(&t, "stat", 1, n, p, items as usize);
    assert_step(&t, "rmdir", 3, n, p, items as usize);
}

#[test]
fn without_a_stride_every_process_works_on_its_own_items() {
    let (p, items) = (3, 4);
    let t = run(MdOptions {
        items: Some(items),
        procs: p,
        files_only: true,
        write_bytes: 4,
        read_bytes: 4,
        ..MdOptions::default()
    });
    for op in ["create_file", "stat", "read_file", "unlink"] {
        assert_step(&t, op, 0, 0, p, items as usize);
    }
}
