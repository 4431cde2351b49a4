//! `-v` checks every byte read against the writer and offset that wrote it:
//! one byte changed on disk between the write and the read phase fails the
//! read phase with that byte's offset, while the same read without -v passes.

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;

use loom_bench::io::IoPlan;
use loom_bench::options::IoOptions;
use loom_bench::runner::Ctx;
use loom_bench::{BenchError, BenchFs, PosixFs};

fn corrupt_and_check(file_per_proc: bool, offset: u64) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fs = PosixFs::new(tmp.path()).expect("target");
    let plan = IoPlan::new(IoOptions {
        transfer: 8192,
        block: 32768,
        segments: 2,
        procs: 2,
        file_per_proc,
        verify: true,
        ..IoOptions::default()
    })
    .expect("plan");
    let dir = Path::new("d");
    fs.mkdir(dir).expect("mkdir");
    let ctx = Ctx::quiet();
    plan.write_phase(&fs, dir, &ctx).expect("write");
    plan.read_phase(&fs, dir, true, &ctx)
        .expect("intact data verifies");

    let victim = tmp.path().join(plan.file_path(dir, 1));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&victim)
        .expect("open");
    let mut byte = [0u8; 1];
    f.read_exact_at(&mut byte, offset).expect("read byte");
    f.write_all_at(&[byte[0] ^ 0x20], offset)
        .expect("write byte");
    drop(f);

    let err = plan
        .read_phase(&fs, dir, true, &ctx)
        .expect_err("corruption must be caught");
    assert!(matches!(err, BenchError::Verify(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains(&format!("offset {offset}")), "{msg}");
    assert!(msg.contains(&format!("{:#04x}", byte[0] ^ 0x20)), "{msg}");
    plan.read_phase(&fs, dir, false, &ctx)
        .expect("without -v the read itself succeeds");
}

#[test]
fn one_flipped_byte_in_a_shared_file_is_reported_with_its_offset() {
    // Inside process 1's block of segment 1: 1*(32768*2) + 32768 + 5000.
    corrupt_and_check(false, 65536 + 32768 + 5000);
}

#[test]
fn one_flipped_byte_in_a_sector_header_is_caught() {
    corrupt_and_check(true, 8192 + 3);
}
