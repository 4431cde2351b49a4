//! `--stonewall SECONDS` stops each process's create phase at the wall, in
//! the middle of its items, and the stat, read and remove phases then
//! handle exactly the items that were created, no more and no fewer. Each
//! create is slowed down (by a wrapper around a real directory) so that
//! the wall falls well inside the phase.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use loom_bench::md::MdPlan;
use loom_bench::options::MdOptions;
use loom_bench::runner::{run_interleaved, Ctx};
use loom_bench::PosixFs;

const ITEMS: u64 = 100_000;
const PROCS: u32 = 2;

#[test]
fn stonewall_cuts_the_create_phase_and_later_phases_use_its_count() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fs = common::RecordingFs::new(PosixFs::new(tmp.path()).expect("target"))
        .with_create_delay(Duration::from_millis(2));
    let calls = fs.calls();
    let t = common::target_on("t", tmp.path(), fs);
    let plan = MdPlan::new(MdOptions {
        items: Some(ITEMS),
        files_only: true,
        procs: PROCS,
        write_bytes: 16,
        read_bytes: 16,
        stonewall: Some(0.3),
        ..MdOptions::default()
    })
    .expect("plan");
    let res = run_interleaved(std::slice::from_ref(&t), &plan, &Ctx::quiet()).expect("run");
    assert!(common::walk(tmp.path()).is_empty(), "files left behind");

    // Which item paths each operation touched, per process.
    let mut by_op: BTreeMap<&str, BTreeMap<u32, BTreeSet<PathBuf>>> = BTreeMap::new();
    for c in calls.lock().expect("calls").iter() {
        if let Some(rank) = c.rank {
            if c.path.to_string_lossy().contains("file.mdtest.") {
                by_op
                    .entry(c.op)
                    .or_default()
                    .entry(rank)
                    .or_default()
                    .insert(c.path.clone());
            }
        }
    }
    let created = &by_op["create_file"];
    let mut total = 0;
    for rank in 0..PROCS {
        let n = created.get(&rank).map_or(0, |s| s.len()) as u64;
        assert!(
            n > 0 && n < ITEMS,
            "process {rank} created {n} of {ITEMS}: the wall did not cut the phase"
        );
        total += n;
    }
    let ops = |phase: &str| res[0].phase(phase).expect(phase).samples[0].ops;
    assert_eq!(ops("File creation"), total);
    for (op, phase) in [
        ("stat", "File stat"),
        ("read_file", "File read"),
        ("unlink", "File removal"),
    ] {
        assert_eq!(ops(phase), total, "{phase} handled another count");
        // Without -N every process handles exactly what it created.
        assert_eq!(
            &by_op[op], created,
            "{op} touched other items than were created"
        );
    }
    assert_eq!(
        res[0].phase("File read").expect("read").samples[0].bytes,
        total * 16
    );
}
