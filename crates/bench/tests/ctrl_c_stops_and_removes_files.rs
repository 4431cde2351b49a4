//! Ctrl-C (a real SIGINT to this process) stops a run in the middle of its
//! create phase and leaves no file of the run behind, even with --keep.
//! The backend used here wraps `PosixFs` from outside the crate, as the
//! loomfs client backend will, which also shows the trait is object safe.

mod common;

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use loom_bench::cancel::{ctrlc_flag, Cancel};
use loom_bench::md::MdPlan;
use loom_bench::options::MdOptions;
use loom_bench::progress::Progress;
use loom_bench::runner::{run_interleaved, Ctx, Target};
use loom_bench::{BenchError, BenchFile, BenchFs, DirEntry, FileStat, OpenMode, PosixFs};

/// Delegates to a PosixFs; after `trigger` creates it raises SIGINT and
/// waits until the handler has set the flag, so the interruption lands in
/// the middle of the create phase deterministically.
struct InterruptingFs {
    inner: PosixFs,
    creates: AtomicU64,
    trigger: u64,
    flag: Cancel,
}

impl BenchFs for InterruptingFs {
    fn describe(&self) -> String {
        format!("interrupting {}", self.inner.describe())
    }
    fn mkdir(&self, p: &Path) -> io::Result<()> {
        self.inner.mkdir(p)
    }
    fn rmdir(&self, p: &Path) -> io::Result<()> {
        self.inner.rmdir(p)
    }
    fn create_file(&self, p: &Path, data: &[u8], fsync: bool) -> io::Result<()> {
        self.inner.create_file(p, data, fsync)?;
        if self.creates.fetch_add(1, Ordering::SeqCst) + 1 == self.trigger {
            nix::sys::signal::raise(nix::sys::signal::Signal::SIGINT).map_err(io::Error::from)?;
            // The handler runs on ctrlc's own thread; wait for its flag.
            let deadline = Instant::now() + Duration::from_secs(20);
            while !self.flag.is_cancelled() {
                assert!(Instant::now() < deadline, "SIGINT handler never ran");
                std::thread::yield_now();
            }
        }
        Ok(())
    }
    fn read_file(&self, p: &Path, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_file(p, buf)
    }
    fn stat(&self, p: &Path) -> io::Result<FileStat> {
        self.inner.stat(p)
    }
    fn unlink(&self, p: &Path) -> io::Result<()> {
        self.inner.unlink(p)
    }
    fn readdir(&self, p: &Path) -> io::Result<Vec<DirEntry>> {
        self.inner.readdir(p)
    }
    fn open(&self, p: &Path, mode: OpenMode) -> io::Result<Box<dyn BenchFile>> {
        self.inner.open(p, mode)
    }
}

#[test]
fn sigint_mid_run_stops_and_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let flag = ctrlc_flag();
    let fs = InterruptingFs {
        inner: PosixFs::new(tmp.path()).expect("target"),
        creates: AtomicU64::new(0),
        trigger: 150,
        flag: flag.clone(),
    };
    let target = Target {
        name: "t".into(),
        location: tmp.path().display().to_string(),
        fs_type: "test".into(),
        fs: Box::new(fs),
    };
    let plan = MdPlan::new(MdOptions {
        items: Some(100_000),
        files_only: true,
        procs: 2,
        write_bytes: 10,
        keep: true,
        ..MdOptions::default()
    })
    .expect("plan");
    let ctx = Ctx {
        cancel: flag,
        progress: Progress::hidden(),
    };
    let err = run_interleaved(std::slice::from_ref(&target), &plan, &ctx).expect_err("interrupted");
    assert!(matches!(err, BenchError::Interrupted), "{err:?}");
    assert!(
        common::walk(tmp.path()).is_empty(),
        "left behind: {} entries",
        common::walk(tmp.path()).len()
    );
}
