//! `loom bench io` against fio on the same directory with the same pattern
//! (file per process, 1 MiB sequential transfers, 2 processes, write then
//! read): the bytes moved are equal and the bandwidths are within an order
//! of magnitude of each other. Both run on tmpfs when it has room (a disk's
//! dirty-page writeback makes back-to-back write rates swing tenfold), each
//! three times, best rate kept. fio must be installed (scripts/run.sh test
//! installs it); without it the test fails and says so.

mod common;

use std::path::Path;
use std::process::Command;

use loom_bench::io::IoPlan;
use loom_bench::options::IoOptions;
use loom_bench::runner::{run_interleaved, Ctx};

const PROCS: u32 = 2;
const BLOCK: u64 = 32 << 20;
const RUNS: u32 = 3;

/// A scratch directory on tmpfs if it has room for both runs, else on /var/tmp.
#[allow(clippy::unnecessary_cast)] // statvfs field widths differ between targets
fn scratch() -> tempfile::TempDir {
    let roomy = nix::sys::statvfs::statvfs("/dev/shm")
        .map(|s| {
            s.blocks_available() as u64 * s.fragment_size() as u64 > 8 * u64::from(PROCS) * BLOCK
        })
        .unwrap_or(false);
    let base = if roomy { "/dev/shm" } else { "/var/tmp" };
    tempfile::tempdir_in(base).expect("tempdir")
}
const TRANSFER: u64 = 1 << 20;

fn fio_bin() -> Option<&'static str> {
    ["/usr/bin/fio", "/usr/local/bin/fio"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

/// Runs one fio job and returns (bytes moved, bytes per second) of `dir_key`
/// ("write" or "read").
fn fio(bin: &str, dir: &Path, rw: &str) -> (u64, f64) {
    let out = Command::new(bin)
        .args([
            "--name=loomcheck",
            &format!("--directory={}", dir.display()),
            &format!("--rw={rw}"),
            &format!("--bs={TRANSFER}"),
            &format!("--size={BLOCK}"),
            &format!("--numjobs={PROCS}"),
            "--ioengine=psync",
            // fio drops the page cache of its files before a job by default;
            // loom bench does not (nor does IOR), so keep them comparable.
            "--invalidate=0",
            "--group_reporting",
            "--output-format=json",
        ])
        .output()
        .expect("fio runs");
    assert!(
        out.status.success(),
        "fio failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON document.
    let json = &text[text.find('{').expect("fio printed JSON")..];
    let v: serde_json::Value = serde_json::from_str(json).expect("fio JSON");
    let job = &v["jobs"][0][rw];
    (
        job["io_bytes"].as_u64().expect("io_bytes"),
        job["bw_bytes"].as_f64().expect("bw_bytes"),
    )
}

#[test]
fn same_pattern_moves_the_same_bytes_at_a_comparable_rate() {
    let bin = fio_bin().unwrap_or_else(|| {
        panic!("fio is not installed: apt-get install fio (scripts/run.sh test installs it)")
    });
    let ours_dir = scratch();
    let fio_dir = scratch();

    let plan = IoPlan::new(IoOptions {
        transfer: TRANSFER,
        block: BLOCK,
        procs: PROCS,
        file_per_proc: true,
        iterations: RUNS,
        ..IoOptions::default()
    })
    .expect("plan");
    let t = common::target("ours", ours_dir.path());
    let res = run_interleaved(std::slice::from_ref(&t), &plan, &Ctx::quiet()).expect("run");

    let (mut fio_w_bytes, mut fio_w_bw, mut fio_r_bytes, mut fio_r_bw) = (0, 0.0f64, 0, 0.0f64);
    for _ in 0..RUNS {
        let (wb, wbw) = fio(bin, fio_dir.path(), "write");
        let (rb, rbw) = fio(bin, fio_dir.path(), "read");
        (fio_w_bytes, fio_w_bw, fio_r_bytes, fio_r_bw) =
            (wb, fio_w_bw.max(wbw), rb, fio_r_bw.max(rbw));
    }

    for (phase, fio_bytes, fio_bw) in [
        ("write", fio_w_bytes, fio_w_bw),
        ("read", fio_r_bytes, fio_r_bw),
    ] {
        let samples = &res[0].phase(phase).expect(phase).samples;
        assert_eq!(samples.len(), RUNS as usize);
        for s in samples {
            assert_eq!(s.bytes, fio_bytes, "{phase}: bytes moved differ");
            assert_eq!(s.bytes, u64::from(PROCS) * BLOCK);
        }
        let ours_bw = samples
            .iter()
            .map(|s| s.bytes as f64 / s.seconds)
            .fold(0.0, f64::max);
        let ratio = ours_bw / fio_bw;
        println!(
            "{phase}: loom bench {:.0} MiB/s, fio {:.0} MiB/s, ratio {ratio:.2}",
            ours_bw / 1048576.0,
            fio_bw / 1048576.0
        );
        assert!(
            (0.1..=10.0).contains(&ratio),
            "{phase}: ours {ours_bw} B/s vs fio {fio_bw} B/s"
        );
    }
}
