//! The regression suite (`loom bench suite`): a fixed list of small mdtest
//! and IOR patterns, like a site's daily IOR regression run. Each pattern runs
//! `--reps` times to measure its own run-to-run noise; the results go to JSON
//! and, with `--baseline`, are compared with an earlier run.
//!
//! A metric is flagged when its mean moved by more than `--sigma` times the
//! noise of a single run, `sqrt(sd_base² + sd_now²)` (sample standard
//! deviations of the two runs' repetitions), and by more than
//! `--min-change` of the baseline. Using one run's noise rather than the
//! standard error of the means is deliberately conservative: file-system
//! figures drift between runs more than their repetitions suggest.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::cli::{open_target, OutputArgs};
use crate::io::IoPlan;
use crate::machine::{Machine, Versions};
use crate::md::MdPlan;
use crate::options::{IoOptions, MdOptions};
use crate::report::{fmt_sig, write_json};
use crate::runner::{run_interleaved, Ctx, Workload};
use crate::stats::sample_stddev;
use crate::target::TargetAddr;

/// `loom bench suite [OPTIONS] TARGET`
#[derive(Args, Debug, Clone)]
pub struct SuiteArgs {
    /// Where to run (not needed with --list): a directory, loom:DIR or
    /// loom://HOST:PORT/FSNAME/DIR (see TARGETS below).
    #[arg(value_name = "TARGET", required_unless_present = "list")]
    pub target: Option<TargetAddr>,
    /// Where to write this run's JSON.
    #[arg(long, value_name = "FILE", default_value = "loom-suite.json")]
    pub out: PathBuf,
    /// A previous suite JSON to compare with.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Repetitions of each pattern (at least 2, to measure noise).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..))]
    pub reps: u32,
    /// Multiplies item counts and data sizes of every pattern.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Processes of the multi-process patterns.
    #[arg(short = 'p', long = "procs", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub procs: u32,
    /// Flag changes larger than this many times the run-to-run noise.
    #[arg(long, default_value_t = 3.0)]
    pub sigma: f64,
    /// ... and larger than this fraction of the baseline (0.05 = 5 %).
    #[arg(long, default_value_t = 0.05)]
    pub min_change: f64,
    /// Exit with an error when a metric regressed.
    #[arg(long)]
    pub fail_on_regression: bool,
    /// Run only the patterns whose name contains this text.
    #[arg(long, value_name = "TEXT")]
    pub only: Option<String>,
    /// List the patterns and exit.
    #[arg(long)]
    pub list: bool,
    /// Never draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

/// A pattern's workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Spec {
    /// mdtest-style.
    Md(MdOptions),
    /// IOR-style.
    Io(IoOptions),
}

/// One named pattern of the suite.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    /// Stable name; metrics are keyed `name/phase`.
    pub name: &'static str,
    /// What it stands for.
    pub about: &'static str,
    /// The workload.
    pub spec: Spec,
}

fn scaled(n: u64, scale: f64) -> u64 {
    ((n as f64 * scale).round() as u64).max(1)
}

/// The suite's fixed patterns for `procs` processes, sizes times `scale`.
pub fn patterns(procs: u32, scale: f64) -> Vec<Pattern> {
    let md = |f: &dyn Fn(&mut MdOptions)| {
        let mut o = MdOptions {
            procs,
            name: "loom-suite".into(),
            ..MdOptions::default()
        };
        f(&mut o);
        o.items = o.items.map(|n| scaled(n, scale));
        o.items_per_dir = o.items_per_dir.map(|n| scaled(n, scale));
        Spec::Md(o)
    };
    let io = |t: u64, b: u64, f: &dyn Fn(&mut IoOptions)| {
        let block = (scaled(b / t, scale)) * t;
        let mut o = IoOptions {
            transfer: t,
            block,
            procs,
            name: "loom-suite".into(),
            ..IoOptions::default()
        };
        f(&mut o);
        Spec::Io(o)
    };
    const K: u64 = 1024;
    const M: u64 = 1024 * 1024;
    vec![
        Pattern {
            name: "md-files-empty-shared",
            about: "empty files, one shared directory",
            spec: md(&|o| {
                o.items = Some(400);
                o.files_only = true;
            }),
        },
        Pattern {
            name: "md-files-empty-unique",
            about: "empty files, a directory per process (-u)",
            spec: md(&|o| {
                o.items = Some(400);
                o.files_only = true;
                o.unique_dir = true;
            }),
        },
        Pattern {
            name: "md-dirs-shared",
            about: "directories in one shared directory",
            spec: md(&|o| {
                o.items = Some(400);
                o.dirs_only = true;
            }),
        },
        Pattern {
            name: "md-dirs-unique",
            about: "directories, a directory per process",
            spec: md(&|o| {
                o.items = Some(400);
                o.dirs_only = true;
                o.unique_dir = true;
            }),
        },
        Pattern {
            name: "md-files-4k",
            about: "4 KiB files written and read",
            spec: md(&|o| {
                o.items = Some(300);
                o.files_only = true;
                o.write_bytes = 4 * K;
                o.read_bytes = 4 * K;
            }),
        },
        Pattern {
            name: "md-files-3901-hard",
            about: "IO500 mdtest-hard files (3901 bytes), stride 1",
            spec: md(&|o| {
                o.items = Some(300);
                o.files_only = true;
                o.write_bytes = 3901;
                o.read_bytes = 3901;
                o.stride = 1;
            }),
        },
        Pattern {
            name: "md-files-64k",
            about: "64 KiB files (DoM-sized)",
            spec: md(&|o| {
                o.items = Some(100);
                o.files_only = true;
                o.write_bytes = 64 * K;
                o.read_bytes = 64 * K;
            }),
        },
        Pattern {
            name: "md-tree-z2-b3",
            about: "tree of 13 directories, files in each",
            spec: md(&|o| {
                o.items_per_dir = Some(20);
                o.depth = 2;
                o.branch = 3;
                o.files_only = true;
            }),
        },
        Pattern {
            name: "md-tree-unique-z1-b4",
            about: "a 5-directory tree per process, files and dirs",
            spec: md(&|o| {
                o.items_per_dir = Some(20);
                o.depth = 1;
                o.branch = 4;
                o.unique_dir = true;
            }),
        },
        Pattern {
            name: "md-stride-1k",
            about: "1 KiB files, stat/read/remove the neighbour's",
            spec: md(&|o| {
                o.items = Some(300);
                o.files_only = true;
                o.write_bytes = K;
                o.read_bytes = K;
                o.stride = 1;
            }),
        },
        Pattern {
            name: "md-mixed",
            about: "files and directories, shared directory",
            spec: md(&|o| {
                o.items = Some(200);
            }),
        },
        Pattern {
            name: "md-single-proc",
            about: "one process, empty files",
            spec: md(&|o| {
                o.items = Some(600);
                o.files_only = true;
                o.procs = 1;
            }),
        },
        Pattern {
            name: "io-fpp-1m",
            about: "file per process, 1 MiB transfers",
            spec: io(M, 16 * M, &|o| o.file_per_proc = true),
        },
        Pattern {
            name: "io-fpp-64k",
            about: "file per process, 64 KiB transfers",
            spec: io(64 * K, 8 * M, &|o| o.file_per_proc = true),
        },
        Pattern {
            name: "io-fpp-4k",
            about: "file per process, 4 KiB transfers",
            spec: io(4 * K, M, &|o| o.file_per_proc = true),
        },
        Pattern {
            name: "io-shared-1m",
            about: "shared file, 1 MiB transfers",
            spec: io(M, 16 * M, &|_| {}),
        },
        Pattern {
            name: "io-shared-64k-seg16",
            about: "shared file, 64 KiB transfers, 16 segments",
            spec: io(64 * K, 512 * K, &|o| o.segments = 16),
        },
        Pattern {
            name: "io-hard-47008",
            about: "IO500 ior-hard: 47008-byte records, shared file",
            spec: io(47008, 47008, &|o| {
                o.segments = scaled(200, scale);
            }),
        },
        Pattern {
            name: "io-fpp-fsync",
            about: "file per process with fsync (-e)",
            spec: io(M, 16 * M, &|o| {
                o.file_per_proc = true;
                o.fsync = true;
            }),
        },
        Pattern {
            name: "io-shared-fsync",
            about: "shared file with fsync (-e)",
            spec: io(256 * K, 8 * M, &|o| o.fsync = true),
        },
        Pattern {
            name: "io-reorder",
            about: "file per process, read the neighbour's (-C)",
            spec: io(256 * K, 8 * M, &|o| {
                o.file_per_proc = true;
                o.reorder = true;
            }),
        },
        Pattern {
            name: "io-verify",
            about: "shared file, every byte verified (-v)",
            spec: io(256 * K, 4 * M, &|o| {
                o.verify = true;
                o.segments = 2;
            }),
        },
        Pattern {
            name: "io-shared-4k-seg16",
            about: "shared file, 4 KiB transfers, 16 segments",
            spec: io(4 * K, 64 * K, &|o| o.segments = 16),
        },
        Pattern {
            name: "io-single-proc",
            about: "one process, 1 MiB transfers",
            spec: io(M, 32 * M, &|o| o.procs = 1),
        },
    ]
}

/// One figure of the suite with its repetitions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// `pattern/phase`.
    pub key: String,
    /// Unit (higher is better for all of them).
    pub unit: String,
    /// One value per repetition.
    pub values: Vec<f64>,
    /// Mean of the values.
    pub mean: f64,
    /// Sample standard deviation of the values (run-to-run noise).
    pub stddev: f64,
}

/// The JSON of one suite run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteReport {
    /// Always `loom bench suite`.
    pub tool: String,
    /// Seconds since the Unix epoch at the start.
    pub started_unix: u64,
    /// Command line.
    pub command_line: Vec<String>,
    /// Where it ran.
    pub machine: Machine,
    /// What ran it.
    pub versions: Versions,
    /// Target path and file system type.
    pub target: String,
    /// File system type of the target.
    pub fs_type: String,
    /// Repetitions, scale and processes.
    pub reps: u32,
    /// Scale of the sizes.
    pub scale: f64,
    /// Processes.
    pub procs: u32,
    /// The figures.
    pub metrics: Vec<Metric>,
    /// The comparison with `--baseline`, if one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineComparison>,
}

/// How a suite run compared with its baseline (in the run's JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineComparison {
    /// The baseline JSON file.
    pub file: String,
    /// `--sigma` in force.
    pub sigma: f64,
    /// `--min-change` in force.
    pub min_change: f64,
    /// One line per metric of either run.
    pub changes: Vec<Change>,
}

/// How a metric moved against the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// Within noise (or below --min-change).
    Same,
    /// Faster beyond noise.
    Improved,
    /// Slower beyond noise.
    Regressed,
    /// Not in the baseline.
    New,
    /// In the baseline, not in this run.
    Missing,
}

/// One line of a baseline comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// `pattern/phase`.
    pub key: String,
    /// Baseline mean.
    pub base: Option<f64>,
    /// This run's mean.
    pub now: Option<f64>,
    /// (now - base) / base.
    pub change: f64,
    /// Single-run noise relative to the baseline mean.
    pub noise: f64,
    /// The verdict.
    pub verdict: Verdict,
}

/// Compares `now` with `base`, metric by metric (see the module doc).
pub fn compare(base: &[Metric], now: &[Metric], sigma: f64, min_change: f64) -> Vec<Change> {
    let mut out = Vec::new();
    for n in now {
        let Some(b) = base.iter().find(|b| b.key == n.key) else {
            out.push(Change {
                key: n.key.clone(),
                base: None,
                now: Some(n.mean),
                change: 0.0,
                noise: 0.0,
                verdict: Verdict::New,
            });
            continue;
        };
        let delta = n.mean - b.mean;
        let noise = (b.stddev.powi(2) + n.stddev.powi(2)).sqrt();
        let rel = if b.mean > 0.0 { delta / b.mean } else { 0.0 };
        let rel_noise = if b.mean > 0.0 { noise / b.mean } else { 0.0 };
        let beyond = delta.abs() > sigma * noise && rel.abs() > min_change;
        let verdict = match (beyond, delta > 0.0) {
            (false, _) => Verdict::Same,
            (true, true) => Verdict::Improved,
            (true, false) => Verdict::Regressed,
        };
        out.push(Change {
            key: n.key.clone(),
            base: Some(b.mean),
            now: Some(n.mean),
            change: rel,
            noise: rel_noise,
            verdict,
        });
    }
    for b in base {
        if !now.iter().any(|n| n.key == b.key) {
            out.push(Change {
                key: b.key.clone(),
                base: Some(b.mean),
                now: None,
                change: 0.0,
                noise: 0.0,
                verdict: Verdict::Missing,
            });
        }
    }
    out
}

fn workload_of(spec: &Spec, reps: u32) -> anyhow::Result<Box<dyn Workload>> {
    Ok(match spec {
        Spec::Md(o) => Box::new(MdPlan::new(MdOptions {
            iterations: reps,
            ..o.clone()
        })?),
        Spec::Io(o) => Box::new(IoPlan::new(IoOptions {
            iterations: reps,
            ..o.clone()
        })?),
    })
}

/// Runs the suite on `target` and returns its report (no printing).
pub fn run_patterns(
    target: &TargetAddr,
    pats: &[Pattern],
    reps: u32,
    scale: f64,
    procs: u32,
    ctx: &Ctx,
) -> anyhow::Result<SuiteReport> {
    let t = open_target("suite", target)?;
    let started = SystemTime::now();
    let mut metrics = Vec::new();
    for p in pats {
        let w = workload_of(&p.spec, reps).with_context(|| format!("pattern {}", p.name))?;
        ctx.progress.set_message(p.name.to_string());
        let results = run_interleaved(std::slice::from_ref(&t), w.as_ref(), ctx)
            .with_context(|| format!("pattern {} on {target}", p.name))?;
        for phase in results.iter().flat_map(|r| &r.phases) {
            let values = phase.values();
            metrics.push(Metric {
                key: format!("{}/{}", p.name, phase.phase),
                unit: phase.unit.clone(),
                mean: values.iter().sum::<f64>() / values.len().max(1) as f64,
                stddev: sample_stddev(&values),
                values,
            });
        }
    }
    Ok(SuiteReport {
        tool: "loom bench suite".into(),
        started_unix: started
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        command_line: std::env::args().collect(),
        machine: Machine::current(),
        versions: Versions::current(),
        target: t.location.clone(),
        fs_type: t.fs_type.clone(),
        reps,
        scale,
        procs,
        metrics,
        baseline: None,
    })
}

/// `loom bench suite`.
pub fn run_suite(a: SuiteArgs) -> anyhow::Result<()> {
    if !(a.scale > 0.0 && a.scale.is_finite()) {
        anyhow::bail!("bad option: --scale must be a positive number");
    }
    let all = patterns(a.procs, a.scale);
    let pats: Vec<Pattern> = all
        .into_iter()
        .filter(|p| a.only.as_ref().is_none_or(|o| p.name.contains(o.as_str())))
        .collect();
    if a.list {
        for p in &pats {
            println!("{:<24} {}", p.name, p.about);
        }
        return Ok(());
    }
    if pats.is_empty() {
        anyhow::bail!("bad option: --only matches no pattern (see --list)");
    }
    let Some(target) = &a.target else {
        anyhow::bail!("bad option: a target directory is needed");
    };
    let baseline: Option<SuiteReport> = match &a.baseline {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("reading baseline {}", p.display()))?;
            Some(
                serde_json::from_str(&text)
                    .with_context(|| format!("baseline {} is not a suite JSON", p.display()))?,
            )
        }
        None => None,
    };
    let total: u64 = pats
        .iter()
        .filter_map(|p| workload_of(&p.spec, a.reps).ok())
        .map(|w| w.ops_per_iteration() * u64::from(a.reps))
        .sum();
    let out_args = OutputArgs {
        json: None,
        no_progress: a.no_progress,
    };
    let ctx = crate::cli::cli_ctx(total, &out_args);
    let report = run_patterns(target, &pats, a.reps, a.scale, a.procs, &ctx);
    ctx.progress.finish();
    let report = report?;
    println!(
        "{:<44} {:>12} {:>10} {:<7}",
        "metric", "mean", "noise", "unit"
    );
    for m in &report.metrics {
        let noise = if m.mean > 0.0 {
            100.0 * m.stddev / m.mean
        } else {
            0.0
        };
        println!(
            "{:<44} {:>12} {:>9.1}% {:<7}",
            m.key,
            fmt_sig(m.mean),
            noise,
            m.unit
        );
    }
    let Some(base) = baseline else {
        write_json(&a.out, &report)?;
        println!("results: {}", a.out.display());
        return Ok(());
    };
    if (base.scale, base.procs) != (report.scale, report.procs) {
        println!(
            "warning: baseline ran with --scale {} -p {}, this run with --scale {} -p {}",
            base.scale, base.procs, report.scale, report.procs
        );
    }
    if base.machine.hostname != report.machine.hostname || base.machine.cpus != report.machine.cpus
    {
        println!(
            "warning: baseline ran on {} ({} CPUs), this run on {} ({} CPUs)",
            base.machine.hostname, base.machine.cpus, report.machine.hostname, report.machine.cpus
        );
    }
    let changes = compare(&base.metrics, &report.metrics, a.sigma, a.min_change);
    let mut report = report;
    report.baseline = Some(BaselineComparison {
        file: a
            .baseline
            .as_deref()
            .unwrap_or(Path::new(""))
            .display()
            .to_string(),
        sigma: a.sigma,
        min_change: a.min_change,
        changes: changes.clone(),
    });
    write_json(&a.out, &report)?;
    println!("results: {}", a.out.display());
    println!(
        "\ncompared with {} (flag: change > {} x noise and > {:.0}%)",
        a.baseline.as_deref().unwrap_or(Path::new("")).display(),
        a.sigma,
        a.min_change * 100.0
    );
    println!(
        "{:<44} {:>12} {:>12} {:>9} {:>8}  verdict",
        "metric", "baseline", "now", "change", "noise"
    );
    for c in &changes {
        let f = |v: Option<f64>| v.map_or("-".to_string(), fmt_sig);
        println!(
            "{:<44} {:>12} {:>12} {:>8.1}% {:>7.1}%  {:?}",
            c.key,
            f(c.base),
            f(c.now),
            100.0 * c.change,
            100.0 * c.noise,
            c.verdict
        );
    }
    let regressed = changes
        .iter()
        .filter(|c| c.verdict == Verdict::Regressed)
        .count();
    let improved = changes
        .iter()
        .filter(|c| c.verdict == Verdict::Improved)
        .count();
    println!(
        "{regressed} regressed, {improved} improved, {} within noise",
        changes
            .iter()
            .filter(|c| c.verdict == Verdict::Same)
            .count()
    );
    if a.fail_on_regression && regressed > 0 {
        anyhow::bail!("{regressed} metric(s) regressed beyond noise");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metric(key: &str, values: &[f64]) -> Metric {
        Metric {
            key: key.into(),
            unit: "ops/s".into(),
            values: values.to_vec(),
            mean: values.iter().sum::<f64>() / values.len() as f64,
            stddev: sample_stddev(values),
        }
    }

    #[test]
    fn suite_has_at_least_twenty_distinct_valid_patterns() {
        let pats = patterns(2, 1.0);
        assert!(pats.len() >= 20, "{}", pats.len());
        let mut names: Vec<_> = pats.iter().map(|p| p.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), pats.len(), "pattern names must be unique");
        for p in &pats {
            assert!(workload_of(&p.spec, 2).is_ok(), "{} is invalid", p.name);
        }
        for p in patterns(3, 0.1) {
            assert!(
                workload_of(&p.spec, 2).is_ok(),
                "{} invalid at scale 0.1",
                p.name
            );
        }
    }

    #[test]
    fn a_change_within_noise_is_not_flagged() {
        let base = [metric("a/x", &[100.0, 110.0, 90.0])];
        let now = [metric("a/x", &[95.0, 105.0, 85.0])];
        let c = compare(&base, &now, 2.0, 0.0);
        assert_eq!(c[0].verdict, Verdict::Same);
    }

    #[test]
    fn a_change_beyond_noise_is_flagged_both_ways() {
        let base = [metric("a/x", &[100.0, 101.0, 99.0])];
        let slower = [metric("a/x", &[80.0, 81.0, 79.0])];
        let faster = [metric("a/x", &[120.0, 121.0, 119.0])];
        assert_eq!(
            compare(&base, &slower, 3.0, 0.05)[0].verdict,
            Verdict::Regressed
        );
        assert_eq!(
            compare(&base, &faster, 3.0, 0.05)[0].verdict,
            Verdict::Improved
        );
        // Beyond noise but under --min-change: not flagged.
        assert_eq!(compare(&base, &faster, 3.0, 0.5)[0].verdict, Verdict::Same);
    }

    #[test]
    fn new_and_missing_metrics_are_reported() {
        let c = compare(
            &[metric("old/x", &[1.0, 1.0])],
            &[metric("new/x", &[1.0, 1.0])],
            3.0,
            0.0,
        );
        assert!(c
            .iter()
            .any(|c| c.key == "new/x" && c.verdict == Verdict::New));
        assert!(c
            .iter()
            .any(|c| c.key == "old/x" && c.verdict == Verdict::Missing));
    }
}
