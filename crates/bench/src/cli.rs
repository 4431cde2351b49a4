//! The `loom bench` command line: [`BenchArgs`] (clap) and [`run`], which
//! dispatches to the workloads, prints the tables, writes JSON and charts.

use std::path::PathBuf;
use std::time::SystemTime;

use anyhow::Context as _;
use clap::{Args, Subcommand};

use crate::cancel::ctrlc_flag;
use crate::chart::{write_bars, BarChart};
use crate::io::IoPlan;
use crate::io500::{Io500Options, Io500Plan, NOT_OFFICIAL};
use crate::md::MdPlan;
use crate::options::{IoOptions, MdOptions};
use crate::progress::Progress;
use crate::report::{compare_table, summary_table, Report, TargetResult};
use crate::runner::{run_interleaved, Ctx, Target, Workload};
use crate::suite::SuiteArgs;
use crate::sweep::SweepArgs;
use crate::target::{TargetAddr, TargetSpec, TARGET_HELP};

const BENCH_LONG_ABOUT: &str = "\
mdtest-, IOR- and IO500-style benchmarks against any directory, side by side, with charts.

Processes (-p) are threads of this one process: no MPI is needed. Every phase starts its
processes together and is timed from the first one's start to the last one's end, as mdtest
and IOR time their ranks.

  md       mdtest: -n items per process, -I items per directory, -z tree depth, -b branching,
           -u unique directory per process, -F files only, -D directories only, -w bytes
           written at create, -e bytes read, -N stride (stat/read/remove what another process
           made), -i iterations, -p processes, --stonewall SECONDS
  io       IOR: -t transfer size, -b block size, -s segments, -F file per process (else one
           shared file laid out by segment), -w/-r write/read, -C read another process's data,
           -e fsync, -v verify every byte, -i iterations, -p processes
  io500    IO500's twelve phases and score, sized by options (not an official IO500 run)
  compare  one workload on several NAME=TARGET targets, interleaved; table, SVG and PNG charts
  sweep    starts `loom up` clusters of several shapes and charts a workload against the shape
  suite    24 fixed patterns written as JSON and compared with a baseline beyond measured noise

Every result can be written as JSON (--json): machine, versions, command line, per-iteration
figures. Ctrl-C stops cleanly and removes the run's files. See docs/BENCH.md.";

/// `loom bench`: metadata and bandwidth workloads against any directory.
#[derive(Args, Debug, Clone)]
#[command(
    about = "mdtest-, IOR- and IO500-style benchmarks against any directory, side by side, with charts",
    long_about = BENCH_LONG_ABOUT,
    after_help = TARGET_HELP,
)]
pub struct BenchArgs {
    /// What to run.
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The subcommands of `loom bench`.
#[derive(Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// mdtest-style metadata workload: create, stat, read and remove files and
    /// directories in mdtest's tree (-n -I -z -b -u -F -D -w -e -N -i -p).
    #[command(after_help = TARGET_HELP)]
    Md(MdArgs),
    /// IOR-style bandwidth workload: one shared file laid out by segment, or a
    /// file per process (-t -b -s -F -w -r -C -e -v -i -p).
    #[command(after_help = TARGET_HELP)]
    Io(IoArgs),
    /// IO500-style run sized for one machine (not an official IO500 run).
    #[command(after_help = TARGET_HELP)]
    Io500(Io500Args),
    /// The same workload on several targets, interleaved per iteration; table and charts.
    #[command(after_help = "\
Each iteration runs on every target in turn, so slow drifts of the machine fall on all alike.
Targets are NAME=TARGET; with several, each works in <--name>-<NAME>. Example, one loomfs
directory through FUSE and through the library, a local disk, and the no-op FUSE reference
(noop:, the FUSE ceiling: what FUSE allows on this machine with a loomfs mount's settings):
  loom bench compare md -n 2000 -p 2 -i 3 disk=/var/tmp/x fuse=/mnt/loom/d lib=loom:/mnt/loom/d noop:")]
    Compare(CompareArgs),
    /// Start `loom up` clusters of several shapes and run one workload on each; chart.
    Sweep(SweepArgs),
    /// A fixed regression suite of 24 patterns, compared with a baseline.
    #[command(after_help = TARGET_HELP)]
    Suite(SuiteArgs),
}

/// Output options shared by the workload commands.
#[derive(Args, Debug, Clone, Default)]
pub struct OutputArgs {
    /// Write the full results (machine, versions, command line, per-iteration figures) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Never draw a progress bar (it is hidden anyway when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,
}

/// `loom bench md [OPTIONS] TARGET`
#[derive(Args, Debug, Clone)]
pub struct MdArgs {
    /// mdtest options.
    #[command(flatten)]
    pub opts: MdOptions,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
    /// Where to run: a directory (POSIX), loom:DIR (a loomfs mount's
    /// directory through the client library), loom://HOST:PORT/FSNAME/DIR
    /// or noop: (the no-op FUSE reference, mounted for the run).
    #[arg(value_name = "TARGET")]
    pub target: TargetAddr,
}

/// `loom bench io [OPTIONS] TARGET`
#[derive(Args, Debug, Clone)]
pub struct IoArgs {
    /// IOR options.
    #[command(flatten)]
    pub opts: IoOptions,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
    /// Where to run (see TARGETS below).
    #[arg(value_name = "TARGET")]
    pub target: TargetAddr,
}

/// `loom bench io500 [OPTIONS] TARGET`
#[derive(Args, Debug, Clone)]
pub struct Io500Args {
    /// Sizes.
    #[command(flatten)]
    pub opts: Io500Options,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
    /// Where to run (see TARGETS below).
    #[arg(value_name = "TARGET")]
    pub target: TargetAddr,
}

/// `loom bench compare <md|io|io500> [OPTIONS] NAME=TARGET...`
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// The workload to run on every target.
    #[command(subcommand)]
    pub workload: CompareWorkload,
}

/// Options of a comparison besides the workload's.
#[derive(Args, Debug, Clone)]
pub struct CompareOutput {
    /// Chart file name without extension; `<PATH>.svg` and `<PATH>.png` are written.
    #[arg(long, value_name = "PATH")]
    pub chart: Option<PathBuf>,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
    /// Targets as NAME=TARGET (at least two; the first is the reference of
    /// the ratios). TARGET is a directory, loom:DIR, loom://HOST:PORT/FSNAME/DIR
    /// or noop: (the no-op FUSE reference, mounted for the run).
    #[arg(value_name = "NAME=TARGET", required = true, num_args = 2..)]
    pub targets: Vec<TargetSpec>,
}

/// The workload of a comparison.
#[derive(Subcommand, Debug, Clone)]
pub enum CompareWorkload {
    /// mdtest-style workload on every target.
    #[command(after_help = TARGET_HELP)]
    Md {
        /// mdtest options.
        #[command(flatten)]
        opts: MdOptions,
        /// Targets and outputs.
        #[command(flatten)]
        cmp: CompareOutput,
    },
    /// IOR-style workload on every target.
    #[command(after_help = TARGET_HELP)]
    Io {
        /// IOR options.
        #[command(flatten)]
        opts: IoOptions,
        /// Targets and outputs.
        #[command(flatten)]
        cmp: CompareOutput,
    },
    /// IO500-style run on every target.
    #[command(after_help = TARGET_HELP)]
    Io500 {
        /// Sizes.
        #[command(flatten)]
        opts: Io500Options,
        /// Targets and outputs.
        #[command(flatten)]
        cmp: CompareOutput,
    },
}

/// Runs `loom bench` as parsed; prints tables on stdout, writes the files
/// asked for, and returns an error (non-zero exit) on bad options, an
/// unusable target, a failed verification or Ctrl-C.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Md(a) => {
            let plan = MdPlan::new(a.opts)?;
            run_single("md", &plan, &a.target, &a.out, &[])
        }
        BenchCommand::Io(a) => {
            let plan = IoPlan::new(a.opts)?;
            run_single("io", &plan, &a.target, &a.out, &[])
        }
        BenchCommand::Io500(a) => {
            let plan = Io500Plan::new(a.opts)?;
            println!("{NOT_OFFICIAL}");
            run_single("io500", &plan, &a.target, &a.out, &[NOT_OFFICIAL])
        }
        BenchCommand::Compare(c) => match c.workload {
            CompareWorkload::Md { opts, cmp } => {
                run_compare(&MdPlan::new(opts)?, &cmp, &[]).map(|_| ())
            }
            CompareWorkload::Io { opts, cmp } => {
                run_compare(&IoPlan::new(opts)?, &cmp, &[]).map(|_| ())
            }
            CompareWorkload::Io500 { opts, cmp } => {
                println!("{NOT_OFFICIAL}");
                run_compare(&Io500Plan::new(opts)?, &cmp, &[NOT_OFFICIAL]).map(|_| ())
            }
        },
        BenchCommand::Sweep(a) => crate::sweep::run_sweep(a),
        BenchCommand::Suite(a) => crate::suite::run_suite(a),
    }
}

/// Opens `addr` as a target named `name`, checked for use.
pub fn open_target(name: &str, addr: &TargetAddr) -> anyhow::Result<Target> {
    if let TargetAddr::Noop(_) = addr {
        // The Ctrl-C handler before the mount: a Ctrl-C from now on stops
        // the run and drops the target, which unmounts it, rather than
        // killing the process with the mount left behind.
        let _ = ctrlc_flag();
    }
    Ok(addr.open(name)?)
}

/// The context of a command-line run: Ctrl-C handler and progress bar.
pub fn cli_ctx(total_ops: u64, out: &OutputArgs) -> Ctx {
    Ctx {
        cancel: ctrlc_flag(),
        progress: Progress::new(total_ops, !out.no_progress),
    }
}

fn run_single(
    kind: &str,
    w: &dyn Workload,
    addr: &TargetAddr,
    out: &OutputArgs,
    notes: &[&str],
) -> anyhow::Result<()> {
    let target = open_target(&addr.default_name(), addr)?;
    let started = SystemTime::now();
    let ctx = cli_ctx(w.ops_per_iteration() * u64::from(w.iterations()), out);
    let results = run_interleaved(std::slice::from_ref(&target), w, &ctx);
    ctx.progress.finish();
    let results = results.with_context(|| format!("loom bench {kind} on {addr}"))?;
    for t in &results {
        println!("{}", summary_table(t));
    }
    finish_report(kind, kind, w, results, started, out, notes)
}

fn finish_report(
    command: &str,
    kind: &str,
    w: &dyn Workload,
    results: Vec<TargetResult>,
    started: SystemTime,
    out: &OutputArgs,
    notes: &[&str],
) -> anyhow::Result<()> {
    if let Some(path) = &out.json {
        let mut report = Report::new(command, kind, w.options_json(), results, started);
        report.notes.extend(notes.iter().map(|s| s.to_string()));
        report.write_json(path)?;
        println!("results: {}", path.display());
    }
    Ok(())
}

/// Runs a comparison: checks every target first, runs the workload
/// interleaved, prints each target's summary and the side-by-side table,
/// draws the charts. Returns the chart paths.
pub fn run_compare(
    w: &dyn Workload,
    cmp: &CompareOutput,
    notes: &[&str],
) -> anyhow::Result<Vec<PathBuf>> {
    let mut names = std::collections::HashSet::new();
    for t in &cmp.targets {
        if !names.insert(t.name.as_str()) {
            anyhow::bail!(
                "bad option: two targets are named {:?}; name them NAME=TARGET",
                t.name
            );
        }
    }
    let targets = cmp
        .targets
        .iter()
        .map(|t| open_target(&t.name, &t.addr))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let started = SystemTime::now();
    let total = w.ops_per_iteration() * u64::from(w.iterations()) * targets.len() as u64;
    let ctx = cli_ctx(total, &cmp.out);
    let results = run_interleaved(&targets, w, &ctx);
    ctx.progress.finish();
    let results = results.context("loom bench compare")?;
    for t in &results {
        println!("{}", summary_table(t));
    }
    println!("{}", compare_table(&results));
    let kind = w.kind();
    let base = cmp
        .chart
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("loom-compare-{kind}")));
    let title = format!(
        "loom bench compare {kind}: {} ({} iteration{})",
        results
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(" vs "),
        w.iterations(),
        if w.iterations() == 1 { "" } else { "s" }
    );
    let charts = write_bars(&base, &BarChart::from_results(&title, &results))?;
    for c in &charts {
        println!("chart: {}", c.display());
    }
    finish_report("compare", kind, w, results, started, &cmp.out, notes)?;
    Ok(charts)
}
