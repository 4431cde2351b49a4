//! The bytes of an IOR-style file sit where IOR puts them: in a shared file,
//! segment by segment, one block per process in rank order
//! (offset = seg*(b*p) + rank*b + k*t); with -F, one file per process.
//! Each 4 KiB sector's header names its writer and offset, so the layout is
//! read back from the file itself.

mod common;

use loom_bench::io::IoPlan;
use loom_bench::options::IoOptions;
use loom_bench::pattern::{decode_header, SECTOR};
use loom_bench::runner::{run_interleaved, Ctx};

const T: u64 = 4096;
const B: u64 = 16384;
const S: u64 = 2;
const P: u32 = 3;

fn run(dir: &std::path::Path, file_per_proc: bool) {
    let plan = IoPlan::new(IoOptions {
        transfer: T,
        block: B,
        segments: S,
        procs: P,
        file_per_proc,
        write: true,
        keep: true,
        ..IoOptions::default()
    })
    .expect("plan");
    let t = common::target("t", dir);
    let res = run_interleaved(std::slice::from_ref(&t), &plan, &Ctx::quiet()).expect("run");
    let w = &res[0].phase("write").expect("write phase").samples[0];
    assert_eq!(w.bytes, S * B * u64::from(P));
    assert_eq!(w.ops, S * (B / T) * u64::from(P));
}

#[test]
fn shared_file_holds_each_process_block_in_rank_order_per_segment() {
    let tmp = tempfile::tempdir().expect("tempdir");
    run(tmp.path(), false);
    let files = common::walk(tmp.path());
    let file = "loom-io/iter.0/testfile";
    assert_eq!(files.get(file), Some(&Some(S * B * u64::from(P))));
    assert_eq!(
        files.values().filter(|v| v.is_some()).count(),
        1,
        "{files:?}"
    );
    let data = std::fs::read(tmp.path().join(file)).expect("read");
    assert_eq!(data.len() as u64, S * B * u64::from(P));
    // Walk IOR's layout (segments, then ranks in order, then the sectors of
    // each block) and read, at each place, which process wrote it and where
    // it meant to write: both are recorded in the sector's header.
    let mut checked = 0u64;
    for seg in 0..S {
        for rank in 0..P {
            for sector in 0..B / SECTOR {
                let at = (seg * B * u64::from(P) + u64::from(rank) * B + sector * SECTOR) as usize;
                assert_eq!(
                    decode_header(&data[at..at + SECTOR as usize]),
                    Some((at as u64, rank)),
                    "segment {seg}, process {rank}, sector {sector}"
                );
                checked += SECTOR;
            }
        }
    }
    assert_eq!(checked, data.len() as u64, "every sector was checked");
}

#[test]
fn file_per_process_gives_each_process_its_own_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    run(tmp.path(), true);
    let files = common::walk(tmp.path());
    for rank in 0..P {
        let name = format!("loom-io/iter.0/testfile.{rank:08}");
        assert_eq!(files.get(&name), Some(&Some(S * B)), "{files:?}");
        let data = std::fs::read(tmp.path().join(&name)).expect("read");
        for (i, sector) in data.chunks(SECTOR as usize).enumerate() {
            assert_eq!(decode_header(sector), Some((i as u64 * SECTOR, rank)));
        }
    }
    assert_eq!(files.values().filter(|v| v.is_some()).count(), P as usize);
}

#[test]
fn reordered_verified_reads_pass_and_nothing_is_left() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let plan = IoPlan::new(IoOptions {
        transfer: 47008,
        block: 2 * 47008,
        segments: 3,
        procs: 3,
        reorder: true,
        verify: true,
        fsync: true,
        iterations: 2,
        ..IoOptions::default()
    })
    .expect("plan");
    let t = common::target("t", tmp.path());
    let res = run_interleaved(std::slice::from_ref(&t), &plan, &Ctx::quiet()).expect("run");
    let phases: Vec<_> = res[0]
        .phases
        .iter()
        .map(|p| (p.phase.as_str(), p.samples.len()))
        .collect();
    assert_eq!(phases, [("write", 2), ("read", 2)]);
    for p in &res[0].phases {
        assert!(p
            .samples
            .iter()
            .all(|s| s.bytes == 3 * 2 * 47008 * 3 && s.value > 0.0));
    }
    assert!(common::walk(tmp.path()).is_empty());
}
