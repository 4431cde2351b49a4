//! IO500-style run (`loom bench io500`), sized for one machine. **Not an
//! official IO500 run**: sizes are chosen by options instead of the rules'
//! 300-second stonewalls, there is no MPI, and processes are threads.
//!
//! Phases in IO500's order and meaning, in `<name>/iter.<i>/`:
//!
//! | phase | what | figure |
//! | --- | --- | --- |
//! | ior-easy-write | file per process, large transfers (`--easy-transfer`, `--easy-block`), fsync | GiB/s |
//! | mdtest-easy-write | empty files, a unique directory per process (`--easy-items`) | kIOPS |
//! | ior-hard-write | one shared file, 47008-byte transfers = blocks, `--hard-segments` segments, fsync | GiB/s |
//! | mdtest-hard-write | 3901-byte files in one shared directory (`--hard-items`) | kIOPS |
//! | find | walk everything, match `-newer timestamp -size 3901c -name *01*` | kIOPS |
//! | ior-easy-read | read back, each process reads its neighbour's file (-C) | GiB/s |
//! | mdtest-easy-stat | stat the easy files | kIOPS |
//! | ior-hard-read | read back the shared file, neighbour's blocks (-C) | GiB/s |
//! | mdtest-hard-stat | stat the hard files | kIOPS |
//! | mdtest-easy-delete | remove the easy files | kIOPS |
//! | mdtest-hard-read | read the 3901 bytes of each hard file | kIOPS |
//! | mdtest-hard-delete | remove the hard files | kIOPS |
//!
//! Scoring as IO500: BW = geometric mean of the four ior phases in GiB/s,
//! MD = geometric mean of the eight metadata phases (find included) in
//! kIOPS, score = sqrt(BW × MD). The metadata phases run with mdtest's
//! `-N 1`, as IO500 runs mdtest: process r stats what process r+1 created,
//! reads r+2's and removes r+3's (mod p), so that with more than one
//! process no process is served from its own creations.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::SystemTime;

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::fs::BenchFs;
use crate::io::IoPlan;
use crate::md::{ItemKind, MdPlan};
use crate::options::{parse_size, IoOptions, MdOptions};
use crate::runner::{run_ranks, Ctx, Measurement, PhaseSample, Workload};
use crate::stats::geometric_mean;

/// Record size of ior-hard, as IO500 fixes it.
pub const IOR_HARD_TRANSFER: u64 = 47008;
/// File size of mdtest-hard, as IO500 fixes it.
pub const MDTEST_HARD_BYTES: u64 = 3901;

/// The ior phases that make up BW.
pub const BW_PHASES: [&str; 4] = [
    "ior-easy-write",
    "ior-hard-write",
    "ior-easy-read",
    "ior-hard-read",
];
/// The metadata phases that make up MD.
pub const MD_PHASES: [&str; 8] = [
    "mdtest-easy-write",
    "mdtest-hard-write",
    "find",
    "mdtest-easy-stat",
    "mdtest-hard-stat",
    "mdtest-easy-delete",
    "mdtest-hard-read",
    "mdtest-hard-delete",
];

/// Sizes of an IO500-style run.
#[derive(Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Io500Options {
    /// Processes (threads): IO500's MPI ranks.
    #[arg(short = 'p', long = "procs", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub procs: u32,
    /// ior-easy: bytes per process, IOR -b of its file-per-process run
    /// (IO500 sizes it to last 300 s).
    #[arg(long = "easy-block", default_value = "64m", value_parser = parse_size)]
    pub easy_block: u64,
    /// ior-easy: IOR -t, the transfer size (IO500 uses 2m).
    #[arg(long = "easy-transfer", default_value = "1m", value_parser = parse_size)]
    pub easy_transfer: u64,
    /// ior-hard: IOR -s, segments per process in the shared file, each one
    /// 47008-byte record (-t = -b = 47008, as IO500 fixes them).
    #[arg(long = "hard-segments", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub hard_segments: u64,
    /// mdtest-easy: mdtest -n, empty files per process, each process in
    /// its own directory (-u -F).
    #[arg(long = "easy-items", default_value_t = 2000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub easy_items: u64,
    /// mdtest-hard: mdtest -n, 3901-byte files per process, all in one
    /// shared directory (-F -w 3901 -e 3901).
    #[arg(long = "hard-items", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub hard_items: u64,
    /// Iterations (each one a full run with its own score).
    #[arg(short = 'i', long = "iterations", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub iterations: u32,
    /// Name of the working directory created in the target.
    #[arg(long = "name", default_value = "loom-io500")]
    pub name: String,
}

impl Default for Io500Options {
    fn default() -> Self {
        Io500Options {
            procs: 2,
            easy_block: 64 << 20,
            easy_transfer: 1 << 20,
            hard_segments: 1000,
            easy_items: 2000,
            hard_items: 1000,
            iterations: 1,
            name: "loom-io500".into(),
        }
    }
}

/// BW, MD and score of one run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    /// Geometric mean of the ior phases, GiB/s.
    pub bw_gib: f64,
    /// Geometric mean of the metadata phases, kIOPS.
    pub md_kiops: f64,
    /// sqrt(BW × MD).
    pub score: f64,
}

/// IO500's scoring: geometric means, then the square root of their product.
/// A phase with no positive figure scores the whole run 0, as IO500 does.
pub fn score(bw_gib: &[f64], md_kiops: &[f64]) -> Scores {
    let bw = geometric_mean(bw_gib).unwrap_or(0.0);
    let md = geometric_mean(md_kiops).unwrap_or(0.0);
    Scores {
        bw_gib: bw,
        md_kiops: md,
        score: (bw * md).sqrt(),
    }
}

/// Scores of one iteration's samples, looked up by phase name.
pub fn score_samples(samples: &[PhaseSample]) -> Scores {
    let pick = |names: &[&str]| -> Vec<f64> {
        names
            .iter()
            .map(|n| {
                samples
                    .iter()
                    .find(|s| s.phase == *n)
                    .map_or(0.0, |s| s.value)
            })
            .collect()
    };
    score(&pick(&BW_PHASES), &pick(&MD_PHASES))
}

/// A checked IO500-style configuration.
#[derive(Debug, Clone)]
pub struct Io500Plan {
    opts: Io500Options,
    ior_easy: IoPlan,
    ior_hard: IoPlan,
    md_easy: MdPlan,
    md_hard: MdPlan,
}

impl Io500Plan {
    /// Checks the sizes and builds the four sub-workloads.
    pub fn new(opts: Io500Options) -> Result<Self> {
        if opts.name.is_empty() || opts.name.contains('/') || opts.name == "." || opts.name == ".."
        {
            return Err(BenchError::Options(format!(
                "--name {:?}: a plain directory name is needed",
                opts.name
            )));
        }
        let ior_easy = IoPlan::new(IoOptions {
            transfer: opts.easy_transfer,
            block: opts.easy_block,
            segments: 1,
            file_per_proc: true,
            reorder: true,
            fsync: true,
            procs: opts.procs,
            ..IoOptions::default()
        })
        .map_err(|e| {
            BenchError::Options(format!(
                "ior-easy: {e} (check --easy-block and --easy-transfer)"
            ))
        })?;
        let ior_hard = IoPlan::new(IoOptions {
            transfer: IOR_HARD_TRANSFER,
            block: IOR_HARD_TRANSFER,
            segments: opts.hard_segments,
            reorder: true,
            fsync: true,
            procs: opts.procs,
            ..IoOptions::default()
        })?;
        let stride = u32::from(opts.procs > 1);
        let md_easy = MdPlan::new(MdOptions {
            items: Some(opts.easy_items),
            unique_dir: true,
            files_only: true,
            stride,
            procs: opts.procs,
            ..MdOptions::default()
        })?;
        let md_hard = MdPlan::new(MdOptions {
            items: Some(opts.hard_items),
            files_only: true,
            write_bytes: MDTEST_HARD_BYTES,
            read_bytes: MDTEST_HARD_BYTES,
            stride,
            procs: opts.procs,
            ..MdOptions::default()
        })?;
        Ok(Io500Plan {
            opts,
            ior_easy,
            ior_hard,
            md_easy,
            md_hard,
        })
    }

    /// The options this plan was made from.
    pub fn options(&self) -> &Io500Options {
        &self.opts
    }

    /// One full run in `dir` (created here); returns the twelve phases in
    /// IO500's order followed by `BW`, `MD` and `SCORE`.
    pub fn run_in(&self, fs: &dyn BenchFs, dir: &Path, ctx: &Ctx) -> Result<Vec<PhaseSample>> {
        let mkdir = |p: &Path| fs.mkdir(p).map_err(|e| BenchError::io("mkdir", p, e));
        mkdir(dir)?;
        let (easy, hard) = (dir.join("ior-easy"), dir.join("ior-hard"));
        let (md_easy_dir, md_hard_dir) = (dir.join("mdtest-easy"), dir.join("mdtest-hard"));
        for d in [&easy, &hard, &md_easy_dir, &md_hard_dir] {
            mkdir(d)?;
        }
        // The timestamp find compares with: made before any phase's files.
        let stamp = dir.join("timestamp");
        fs.create_file(&stamp, &[], false)
            .map_err(|e| BenchError::io("create", &stamp, e))?;
        let since = fs
            .stat(&stamp)
            .map_err(|e| BenchError::io("stat", &stamp, e))?
            .modified;

        let gib = |phase: &str, m: Measurement| PhaseSample {
            phase: phase.to_string(),
            unit: "GiB/s".into(),
            value: m.mib_per_sec() / 1024.0,
            measurement: m,
        };
        let kiops = |phase: &str, m: Measurement| PhaseSample {
            phase: phase.to_string(),
            unit: "kIOPS".into(),
            value: m.ops_per_sec() / 1000.0,
            measurement: m,
        };
        let mut out = Vec::new();
        let f = ItemKind::File;

        out.push(gib(
            "ior-easy-write",
            self.ior_easy.write_phase(fs, &easy, ctx)?,
        ));
        self.md_easy.create_tree(fs, &md_easy_dir, ctx)?;
        let (m, easy_counts) = self.md_easy.create_items(fs, &md_easy_dir, f, ctx)?;
        out.push(kiops("mdtest-easy-write", m));
        out.push(gib(
            "ior-hard-write",
            self.ior_hard.write_phase(fs, &hard, ctx)?,
        ));
        self.md_hard.create_tree(fs, &md_hard_dir, ctx)?;
        let (m, hard_counts) = self.md_hard.create_items(fs, &md_hard_dir, f, ctx)?;
        out.push(kiops("mdtest-hard-write", m));
        out.push(kiops("find", find(fs, dir, since, self.opts.procs, ctx)?.0));
        out.push(gib(
            "ior-easy-read",
            self.ior_easy.read_phase(fs, &easy, false, ctx)?,
        ));
        out.push(kiops(
            "mdtest-easy-stat",
            self.md_easy
                .stat_items(fs, &md_easy_dir, f, &easy_counts, ctx)?,
        ));
        out.push(gib(
            "ior-hard-read",
            self.ior_hard.read_phase(fs, &hard, false, ctx)?,
        ));
        out.push(kiops(
            "mdtest-hard-stat",
            self.md_hard
                .stat_items(fs, &md_hard_dir, f, &hard_counts, ctx)?,
        ));
        out.push(kiops(
            "mdtest-easy-delete",
            self.md_easy
                .remove_items(fs, &md_easy_dir, f, &easy_counts, ctx)?,
        ));
        out.push(kiops(
            "mdtest-hard-read",
            self.md_hard
                .read_items(fs, &md_hard_dir, &hard_counts, ctx)?,
        ));
        out.push(kiops(
            "mdtest-hard-delete",
            self.md_hard
                .remove_items(fs, &md_hard_dir, f, &hard_counts, ctx)?,
        ));

        let s = score_samples(&out);
        for (phase, unit, value) in [
            ("BW", "GiB/s", s.bw_gib),
            ("MD", "kIOPS", s.md_kiops),
            ("SCORE", "score", s.score),
        ] {
            out.push(PhaseSample {
                phase: phase.into(),
                unit: unit.into(),
                value,
                measurement: Measurement::default(),
            });
        }

        // Untimed cleanup of this iteration.
        self.md_easy.remove_tree(fs, &md_easy_dir, ctx)?;
        self.md_hard.remove_tree(fs, &md_hard_dir, ctx)?;
        self.ior_easy.remove_files(fs, &easy)?;
        self.ior_hard.remove_files(fs, &hard)?;
        fs.unlink(&stamp)
            .map_err(|e| BenchError::io("unlink", &stamp, e))?;
        for d in [&easy, &hard, &md_easy_dir, &md_hard_dir, &dir.to_path_buf()] {
            fs.rmdir(d).map_err(|e| BenchError::io("rmdir", d, e))?;
        }
        Ok(out)
    }
}

/// What `find` looked at and matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FindCount {
    /// Entries examined (files and directories).
    pub scanned: u64,
    /// Files matching `-newer -size 3901c -name *01*`.
    pub matched: u64,
}

/// IO500's find: walks `root` with `procs` threads sharing a queue of
/// directories, stats every file, and counts those modified strictly after
/// `since` (`find -newer`), of 3901 bytes, whose name contains `01`. Its rate is entries examined per
/// second.
pub fn find(
    fs: &dyn BenchFs,
    root: &Path,
    since: SystemTime,
    procs: u32,
    ctx: &Ctx,
) -> Result<(Measurement, FindCount)> {
    // (directories to read, directories being read by a worker)
    let queue = Mutex::new((vec![root.to_path_buf()], 0usize));
    let wake = Condvar::new();
    let (seconds, counts) = run_ranks(procs, &ctx.cancel, |_, stop, _| {
        let mut count = FindCount::default();
        loop {
            let dir: PathBuf = {
                let mut q = queue
                    .lock()
                    .map_err(|_| BenchError::Verify("find queue poisoned".into()))?;
                loop {
                    if let Some(d) = q.0.pop() {
                        q.1 += 1;
                        break d;
                    }
                    if q.1 == 0 {
                        wake.notify_all();
                        return Ok(count);
                    }
                    q = wake
                        .wait(q)
                        .map_err(|_| BenchError::Verify("find queue poisoned".into()))?;
                }
            };
            let result = (|| -> Result<Vec<PathBuf>> {
                stop.check()?;
                let mut subdirs = Vec::new();
                let entries = fs
                    .readdir(&dir)
                    .map_err(|e| BenchError::io("readdir", &dir, e))?;
                for e in entries {
                    let p = dir.join(&e.name);
                    count.scanned += 1;
                    ctx.progress.inc(1);
                    if e.is_dir == Some(true) {
                        subdirs.push(p);
                        continue;
                    }
                    let st = fs.stat(&p).map_err(|err| BenchError::io("stat", &p, err))?;
                    if st.is_dir {
                        subdirs.push(p);
                    } else if st.size == MDTEST_HARD_BYTES
                        // find -newer is strict: a file made in the same
                        // clock tick as the timestamp is not newer.
                        && st.modified > since
                        && e.name.contains("01")
                    {
                        count.matched += 1;
                    }
                }
                Ok(subdirs)
            })();
            let mut q = queue
                .lock()
                .map_err(|_| BenchError::Verify("find queue poisoned".into()))?;
            q.1 -= 1;
            match result {
                Ok(subdirs) => q.0.extend(subdirs),
                Err(e) => {
                    q.0.clear();
                    wake.notify_all();
                    return Err(e);
                }
            }
            wake.notify_all();
        }
    })?;
    let total = counts.iter().fold(FindCount::default(), |a, c| FindCount {
        scanned: a.scanned + c.scanned,
        matched: a.matched + c.matched,
    });
    Ok((
        Measurement {
            ops: total.scanned,
            bytes: 0,
            seconds,
        },
        total,
    ))
}

impl Workload for Io500Plan {
    fn kind(&self) -> &'static str {
        "io500"
    }
    fn iterations(&self) -> u32 {
        self.opts.iterations
    }
    fn work_dir(&self) -> PathBuf {
        PathBuf::from(&self.opts.name)
    }
    fn keep(&self) -> bool {
        false
    }
    fn ops_per_iteration(&self) -> u64 {
        let p = u64::from(self.opts.procs);
        let io = |plan: &IoPlan| plan.transfers_per_block() * plan.options().segments * p * 2;
        io(&self.ior_easy)
            + io(&self.ior_hard)
            + (self.opts.easy_items * 4 + self.opts.hard_items * 5) * p
    }
    fn options_json(&self) -> serde_json::Value {
        serde_json::json!({ "options": self.opts, "official": false })
    }
    fn run_iteration(&self, fs: &dyn BenchFs, dir: &Path, ctx: &Ctx) -> Result<Vec<PhaseSample>> {
        self.run_in(fs, dir, ctx)
    }
}

/// The sentence every io500 report carries.
pub const NOT_OFFICIAL: &str = "This is not an official IO500 run: sizes are set by options, not by the IO500 rules (no 300 s stonewall, threads instead of MPI ranks); the figures are comparable only with runs of the same options.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_is_sqrt_of_geometric_means() {
        // BW: gm(1, 4, 2, 8) = (64)^(1/4) = 2*sqrt(2); MD: all 2 -> 2.
        let s = score(&[1.0, 4.0, 2.0, 8.0], &[2.0; 8]);
        assert!((s.bw_gib - 8f64.sqrt()).abs() < 1e-9);
        assert!((s.md_kiops - 2.0).abs() < 1e-9);
        assert!((s.score - (8f64.sqrt() * 2.0).sqrt()).abs() < 1e-9);
    }

    #[test]
    fn a_zero_phase_scores_zero() {
        let s = score(&[1.0, 0.0, 1.0, 1.0], &[1.0; 8]);
        assert_eq!(s.score, 0.0);
    }

    #[test]
    fn phases_are_named_in_io500_order() {
        assert_eq!(BW_PHASES.len(), 4);
        assert_eq!(MD_PHASES.len(), 8);
        assert!(MD_PHASES.contains(&"find"));
    }

    #[test]
    fn dot_names_are_refused() {
        for name in [".", "..", "", "a/b"] {
            let e = Io500Plan::new(Io500Options {
                name: name.into(),
                ..Io500Options::default()
            })
            .expect_err(name);
            assert!(e.to_string().contains("--name"), "{e}");
        }
    }

    #[test]
    fn bad_easy_sizes_are_refused_with_the_option_named() {
        let e = Io500Plan::new(Io500Options {
            easy_block: 3 << 20,
            easy_transfer: 2 << 20,
            ..Io500Options::default()
        })
        .expect_err("3m is not a multiple of 2m");
        assert!(e.to_string().contains("--easy-block"), "{e}");
    }
}
