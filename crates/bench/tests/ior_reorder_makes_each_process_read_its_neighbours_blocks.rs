//! With -C, process r reads exactly the blocks process (r+1) mod p wrote
//! (in a shared file: the neighbour's offsets; with -F: the neighbour's
//! file); without -C, its own. A recording wrapper around a real directory
//! says which process read what, so -C being ignored cannot pass.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use loom_bench::io::IoPlan;
use loom_bench::options::IoOptions;
use loom_bench::runner::{run_interleaved, Ctx};
use loom_bench::PosixFs;

const T: u64 = 4096;
const B: u64 = 3 * T;
const S: u64 = 2;
const P: u32 = 3;

/// (process, file name) -> offsets read.
type Reads = BTreeMap<(u32, String), BTreeSet<u64>>;

fn reads(file_per_proc: bool, reorder: bool) -> Reads {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fs = common::RecordingFs::new(PosixFs::new(tmp.path()).expect("target"));
    let calls = fs.calls();
    let t = common::target_on("t", tmp.path(), fs);
    let plan = IoPlan::new(IoOptions {
        transfer: T,
        block: B,
        segments: S,
        procs: P,
        file_per_proc,
        reorder,
        verify: true,
        ..IoOptions::default()
    })
    .expect("plan");
    run_interleaved(std::slice::from_ref(&t), &plan, &Ctx::quiet()).expect("run");
    let mut out = Reads::new();
    for c in calls
        .lock()
        .expect("calls")
        .iter()
        .filter(|c| c.op == "read_at")
    {
        assert_eq!(c.len as u64, T, "one transfer per read");
        let file = PathBuf::from(&c.path)
            .file_name()
            .expect("file")
            .to_string_lossy()
            .into_owned();
        out.entry((c.rank.expect("a process read"), file))
            .or_default()
            .insert(c.offset);
    }
    out
}

/// What process `src` wrote: IOR's offsets, computed here on their own.
fn written_by(src: u32, file_per_proc: bool) -> BTreeSet<u64> {
    let mut v = BTreeSet::new();
    for seg in 0..S {
        for k in 0..B / T {
            v.insert(if file_per_proc {
                seg * B + k * T
            } else {
                seg * B * u64::from(P) + u64::from(src) * B + k * T
            });
        }
    }
    v
}

fn expected(file_per_proc: bool, reorder: bool) -> Reads {
    (0..P)
        .map(|r| {
            let src = if reorder { (r + 1) % P } else { r };
            let file = if file_per_proc {
                format!("testfile.{src:08}")
            } else {
                "testfile".to_string()
            };
            ((r, file), written_by(src, file_per_proc))
        })
        .collect()
}

#[test]
fn reorder_makes_each_process_read_its_neighbours_blocks_in_a_shared_file() {
    assert_eq!(reads(false, true), expected(false, true));
}

#[test]
fn reorder_makes_each_process_read_its_neighbours_file() {
    assert_eq!(reads(true, true), expected(true, true));
}

#[test]
fn without_reorder_each_process_reads_what_it_wrote() {
    assert_eq!(reads(false, false), expected(false, false));
    assert_ne!(expected(false, false), expected(false, true));
}
