//! IOR-style bandwidth workload (`loom bench io`).
//!
//! Files of one iteration directory (`<name>/iter.<i>/`): `testfile` shared
//! by all processes, or `testfile.<rank:08>` per process with -F.
//!
//! Offsets, as IOR lays them out, for process `rank` of `p`, segment `seg`
//! and transfer `k` of its block (`t` = -t, `b` = -b):
//!
//! ```text
//! shared file:      offset = seg*(b*p) + rank*b + k*t
//! file per process: offset = seg*b + k*t
//!
//! shared, p = 3, s = 2:  | r0 b | r1 b | r2 b | r0 b | r1 b | r2 b |
//!                        |     segment 0      |     segment 1      |
//! ```
//!
//! Every byte is written in the [`crate::pattern`] of its writer, so `-v`
//! checks each byte read against the process and offset that wrote it. A
//! phase's time runs from the first process's open to the last process's
//! close (including the fsync with -e), as in IOR.
//!
//! `-r` without `-w` reads what is there, as IOR does: the files an earlier
//! `-w --keep` run with the same -t, -b, -s, -p and -F left in
//! `<name>/iter.<i>/` (or `iter.0/` when there are fewer iterations on
//! disk). Missing or short files are a clear error, and the files are left
//! in place: the run did not create them.

use std::path::{Path, PathBuf};

use crate::error::{BenchError, Result};
use crate::fs::{BenchFs, OpenMode};
use crate::options::IoOptions;
use crate::pattern::Pattern;
use crate::runner::{run_ranks, Ctx, Measurement, PhaseSample, Workload};

/// Largest transfer size accepted (one buffer per process).
pub const MAX_TRANSFER: u64 = 1 << 30;

/// A checked IOR configuration.
#[derive(Debug, Clone)]
pub struct IoPlan {
    opts: IoOptions,
    /// The write phase runs (timed).
    pub write: bool,
    /// The read phase runs (timed).
    pub read: bool,
}

impl IoPlan {
    /// Checks the options together.
    pub fn new(opts: IoOptions) -> Result<Self> {
        let bad = |m: String| Err(BenchError::Options(m));
        if opts.transfer == 0 || opts.block == 0 {
            return bad("-t and -b must be positive".into());
        }
        if opts.transfer > MAX_TRANSFER {
            return bad(format!(
                "-t {} is larger than the 1 GiB limit",
                opts.transfer
            ));
        }
        if !opts.block.is_multiple_of(opts.transfer) {
            return bad(format!(
                "-b {} is not a multiple of -t {} (IOR needs whole transfers per block)",
                opts.block, opts.transfer
            ));
        }
        if opts.segments == 0 || opts.procs == 0 || opts.iterations == 0 {
            return bad("-s, -p and -i must be at least 1".into());
        }
        if opts.name.is_empty() || opts.name.contains('/') || opts.name == "." || opts.name == ".."
        {
            return bad(format!(
                "--name {:?}: a plain directory name is needed",
                opts.name
            ));
        }
        let total = opts
            .block
            .checked_mul(opts.segments)
            .and_then(|x| x.checked_mul(u64::from(opts.procs)));
        if total.is_none_or(|t| t > i64::MAX as u64) {
            return bad("-b x -s x -p overflows a file offset".into());
        }
        let (write, read) = match (opts.write, opts.read) {
            (false, false) => (true, true),
            other => other,
        };
        Ok(IoPlan { opts, write, read })
    }

    /// The options this plan was made from.
    pub fn options(&self) -> &IoOptions {
        &self.opts
    }

    /// Transfers per block.
    pub fn transfers_per_block(&self) -> u64 {
        self.opts.block / self.opts.transfer
    }

    /// Bytes one process moves in a phase.
    pub fn bytes_per_proc(&self) -> u64 {
        self.opts.block * self.opts.segments
    }

    /// Bytes all processes move in a phase.
    pub fn bytes_total(&self) -> u64 {
        self.bytes_per_proc() * u64::from(self.opts.procs)
    }

    /// The file process `rank`'s data lives in, relative to the target root.
    pub fn file_path(&self, dir: &Path, rank: u32) -> PathBuf {
        if self.opts.file_per_proc {
            dir.join(format!("testfile.{rank:08}"))
        } else {
            dir.join("testfile")
        }
    }

    /// Offset of transfer `k` of segment `seg` of process `rank`.
    pub fn offset(&self, rank: u32, seg: u64, k: u64) -> u64 {
        let (t, b) = (self.opts.transfer, self.opts.block);
        if self.opts.file_per_proc {
            seg * b + k * t
        } else {
            seg * (b * u64::from(self.opts.procs)) + u64::from(rank) * b + k * t
        }
    }

    /// The process whose data `rank` reads: itself, or its neighbour with -C.
    pub fn read_source(&self, rank: u32) -> u32 {
        if self.opts.reorder {
            (rank + 1) % self.opts.procs
        } else {
            rank
        }
    }

    /// Write phase: every process writes its blocks, fsyncs with -e, closes.
    pub fn write_phase(&self, fs: &dyn BenchFs, dir: &Path, ctx: &Ctx) -> Result<Measurement> {
        let (seconds, _) = run_ranks(self.opts.procs, &ctx.cancel, |rank, stop, _| {
            let path = self.file_path(dir, rank);
            let file = fs
                .open(&path, OpenMode::Write)
                .map_err(|e| BenchError::io("open", &path, e))?;
            let pattern = Pattern::new(rank);
            let mut buf = vec![0u8; self.opts.transfer as usize];
            for seg in 0..self.opts.segments {
                for k in 0..self.transfers_per_block() {
                    stop.check()?;
                    let off = self.offset(rank, seg, k);
                    pattern.fill(&mut buf, off);
                    file.write_at(&buf, off)
                        .map_err(|e| BenchError::io("write", &path, e))?;
                    ctx.progress.inc(1);
                }
            }
            if self.opts.fsync {
                file.fsync()
                    .map_err(|e| BenchError::io("fsync", &path, e))?;
            }
            file.close().map_err(|e| BenchError::io("close", &path, e))
        })?;
        Ok(self.measurement(seconds))
    }

    /// Read phase: every process reads the blocks of its source (-C), and
    /// with `verify` checks every byte against the writer's pattern.
    pub fn read_phase(
        &self,
        fs: &dyn BenchFs,
        dir: &Path,
        verify: bool,
        ctx: &Ctx,
    ) -> Result<Measurement> {
        let (seconds, _) = run_ranks(self.opts.procs, &ctx.cancel, |rank, stop, _| {
            let source = self.read_source(rank);
            let path = self.file_path(dir, source);
            let file = fs
                .open(&path, OpenMode::Read)
                .map_err(|e| BenchError::io("open", &path, e))?;
            let pattern = Pattern::new(source);
            let mut buf = vec![0u8; self.opts.transfer as usize];
            let mut scratch = Vec::new();
            for seg in 0..self.opts.segments {
                for k in 0..self.transfers_per_block() {
                    stop.check()?;
                    let off = self.offset(source, seg, k);
                    let n = file
                        .read_at(&mut buf, off)
                        .map_err(|e| BenchError::io("read", &path, e))?;
                    if n != buf.len() {
                        return Err(BenchError::Verify(format!(
                            "{}: short read at offset {off}: {n} of {} bytes",
                            path.display(),
                            buf.len()
                        )));
                    }
                    if verify {
                        if let Err(m) = pattern.check(&buf, off, &mut scratch) {
                            return Err(BenchError::Verify(format!(
                                "{}: byte at offset {} is {:#04x}, process {source} wrote {:#04x} (read by process {rank})",
                                path.display(),
                                m.offset,
                                m.found,
                                m.expected
                            )));
                        }
                    }
                    ctx.progress.inc(1);
                }
            }
            file.close().map_err(|e| BenchError::io("close", &path, e))
        })?;
        Ok(self.measurement(seconds))
    }

    /// True for `-r` without `-w`: the run reads files that are already
    /// there and neither creates nor removes any.
    pub fn reads_existing(&self) -> bool {
        self.read && !self.write
    }

    /// The files of the layout and the size each must have at least.
    fn data_files(&self, dir: &Path) -> Vec<(PathBuf, u64)> {
        if self.opts.file_per_proc {
            (0..self.opts.procs)
                .map(|r| (self.file_path(dir, r), self.bytes_per_proc()))
                .collect()
        } else {
            vec![(self.file_path(dir, 0), self.bytes_total())]
        }
    }

    /// For `-r` alone: the directory holding iteration `dir`'s data
    /// (`dir` itself, or `iter.0` beside it when this iteration was not
    /// written), checked to hold every file of the layout, large enough.
    pub fn existing_data(&self, fs: &dyn BenchFs, dir: &Path) -> Result<PathBuf> {
        let first = dir
            .parent()
            .map(|w| crate::runner::iteration_dir(w, 0))
            .unwrap_or_else(|| dir.to_path_buf());
        let dir = match fs.stat(dir) {
            Ok(st) if st.is_dir => dir.to_path_buf(),
            Ok(_) | Err(_) => first,
        };
        let hint = format!(
            "write it first with `loom bench io -w --keep` and the same -t {} -b {} -s {} -p {}{} --name {}",
            self.opts.transfer,
            self.opts.block,
            self.opts.segments,
            self.opts.procs,
            if self.opts.file_per_proc { " -F" } else { "" },
            self.opts.name
        );
        for (file, need) in self.data_files(&dir) {
            match fs.stat(&file) {
                Ok(st) if st.is_dir => {
                    return Err(BenchError::Options(format!(
                        "-r without -w reads {}, which is a directory",
                        file.display()
                    )))
                }
                Ok(st) if st.size < need => {
                    return Err(BenchError::Options(format!(
                        "-r without -w: {} holds {} bytes, these options read {need}; {hint}",
                        file.display(),
                        st.size
                    )))
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(BenchError::Options(format!(
                        "-r without -w reads existing files, and {} is missing; {hint}",
                        file.display()
                    )))
                }
                Err(e) => return Err(BenchError::io("stat", &file, e)),
            }
        }
        Ok(dir)
    }

    /// Removes the data files of an iteration (untimed).
    pub fn remove_files(&self, fs: &dyn BenchFs, dir: &Path) -> Result<()> {
        let files: Vec<PathBuf> = if self.opts.file_per_proc {
            (0..self.opts.procs)
                .map(|r| self.file_path(dir, r))
                .collect()
        } else {
            vec![self.file_path(dir, 0)]
        };
        for f in files {
            fs.unlink(&f).map_err(|e| BenchError::io("unlink", &f, e))?;
        }
        Ok(())
    }

    fn measurement(&self, seconds: f64) -> Measurement {
        Measurement {
            ops: self.transfers_per_block() * self.opts.segments * u64::from(self.opts.procs),
            bytes: self.bytes_total(),
            seconds,
        }
    }

    /// Runs the phases in an existing directory `dir`, naming samples with
    /// `prefix` (e.g. `ior-easy-`) and giving bandwidth in `unit` (`MiB/s`
    /// or `GiB/s`). Returns (write sample, read sample) as they ran.
    pub fn run_phases(
        &self,
        fs: &dyn BenchFs,
        dir: &Path,
        prefix: &str,
        unit: &str,
        ctx: &Ctx,
    ) -> Result<Vec<PhaseSample>> {
        let scale = if unit == "GiB/s" { 1024.0 } else { 1.0 };
        let sample = |phase: &str, m: Measurement| PhaseSample {
            phase: format!("{prefix}{phase}"),
            unit: unit.to_string(),
            value: m.mib_per_sec() / scale,
            measurement: m,
        };
        let mut out = Vec::new();
        if self.write {
            out.push(sample("write", self.write_phase(fs, dir, ctx)?));
            if self.opts.verify && !self.read {
                // -w -v: an untimed read-back checks what was written.
                self.read_phase(fs, dir, true, ctx)?;
            }
        }
        if self.read {
            out.push(sample(
                "read",
                self.read_phase(fs, dir, self.opts.verify, ctx)?,
            ));
        }
        Ok(out)
    }
}

impl Workload for IoPlan {
    fn kind(&self) -> &'static str {
        "io"
    }
    fn iterations(&self) -> u32 {
        self.opts.iterations
    }
    fn work_dir(&self) -> PathBuf {
        PathBuf::from(&self.opts.name)
    }
    fn keep(&self) -> bool {
        self.opts.keep
    }
    fn ops_per_iteration(&self) -> u64 {
        let per_phase =
            self.transfers_per_block() * self.opts.segments * u64::from(self.opts.procs);
        // The timed phases, plus the untimed read-back of -w -v.
        let read_back = self.write && self.opts.verify && !self.read;
        let phases = u64::from(self.write) + u64::from(self.read) + u64::from(read_back);
        per_phase * phases
    }
    fn reads_existing(&self) -> bool {
        self.reads_existing()
    }
    fn options_json(&self) -> serde_json::Value {
        serde_json::json!({
            "options": self.opts,
            "write": self.write,
            "read": self.read,
            "bytes_per_phase": self.bytes_total(),
        })
    }
    fn run_iteration(&self, fs: &dyn BenchFs, dir: &Path, ctx: &Ctx) -> Result<Vec<PhaseSample>> {
        if self.reads_existing() {
            let dir = self.existing_data(fs, dir)?;
            return self.run_phases(fs, &dir, "", "MiB/s", ctx);
        }
        fs.mkdir(dir).map_err(|e| BenchError::io("mkdir", dir, e))?;
        let out = self.run_phases(fs, dir, "", "MiB/s", ctx)?;
        if !self.opts.keep {
            self.remove_files(fs, dir)?;
            fs.rmdir(dir).map_err(|e| BenchError::io("rmdir", dir, e))?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(f: impl FnOnce(&mut IoOptions)) -> Result<IoPlan> {
        let mut o = IoOptions::default();
        f(&mut o);
        IoPlan::new(o)
    }

    #[test]
    fn shared_file_offsets_are_laid_out_by_segment() {
        let p = plan(|o| {
            o.transfer = 4;
            o.block = 8;
            o.segments = 2;
            o.procs = 3;
        })
        .expect("plan");
        // seg*(b*p) + rank*b + k*t
        assert_eq!(p.offset(0, 0, 0), 0);
        assert_eq!(p.offset(0, 0, 1), 4);
        assert_eq!(p.offset(1, 0, 0), 8);
        assert_eq!(p.offset(2, 0, 1), 20);
        assert_eq!(p.offset(0, 1, 0), 24);
        assert_eq!(p.offset(2, 1, 1), 44);
        assert_eq!(p.bytes_total(), 48);
    }

    #[test]
    fn file_per_process_offsets_ignore_the_rank() {
        let p = plan(|o| {
            o.transfer = 4;
            o.block = 8;
            o.segments = 2;
            o.procs = 3;
            o.file_per_proc = true;
        })
        .expect("plan");
        assert_eq!(p.offset(2, 1, 1), 12);
        assert_eq!(
            p.file_path(Path::new("d"), 2),
            PathBuf::from("d/testfile.00000002")
        );
    }

    #[test]
    fn progress_counts_the_phases_that_run() {
        let count = |f: &dyn Fn(&mut IoOptions)| {
            let p = plan(|o| {
                o.transfer = 4;
                o.block = 8;
                o.procs = 3;
                f(o);
            })
            .expect("plan");
            p.ops_per_iteration() / 6
        };
        assert_eq!(count(&|_| {}), 2, "write and read");
        assert_eq!(count(&|o| o.write = true), 1, "-w");
        assert_eq!(count(&|o| o.read = true), 1, "-r reads what is there");
        assert_eq!(
            count(&|o| {
                o.write = true;
                o.verify = true
            }),
            2,
            "-w -v reads back"
        );
        assert_eq!(
            count(&|o| {
                o.write = true;
                o.read = true;
                o.verify = true
            }),
            2,
            "-w -r -v verifies in the read phase"
        );
    }

    #[test]
    fn neither_w_nor_r_means_both() {
        let p = plan(|_| {}).expect("plan");
        assert!(p.write && p.read);
        let w = plan(|o| o.write = true).expect("plan");
        assert!(w.write && !w.read);
    }

    #[test]
    fn block_must_hold_whole_transfers() {
        let e = plan(|o| {
            o.transfer = 3000;
            o.block = 4096;
        })
        .expect_err("4096 % 3000 != 0");
        assert!(e.to_string().contains("multiple"), "{e}");
        assert!(plan(|o| o.transfer = 0).is_err());
        assert!(plan(|o| o.name = "a/b".into()).is_err());
    }

    #[test]
    fn reorder_reads_the_neighbours_data() {
        let p = plan(|o| {
            o.procs = 3;
            o.reorder = true;
        })
        .expect("plan");
        assert_eq!(
            (0..3).map(|r| p.read_source(r)).collect::<Vec<_>>(),
            vec![1, 2, 0]
        );
    }
}
