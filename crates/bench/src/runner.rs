//! Running workloads: the [`Workload`] trait every benchmark implements, the
//! per-phase thread runner ([`run_ranks`]) that times a phase the way mdtest
//! and IOR do (from the first process's start to the last one's end), and the
//! driver that interleaves targets within each iteration and cleans up after
//! errors and Ctrl-C.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use crate::cancel::Cancel;
use crate::error::{BenchError, Result};
use crate::fs::{remove_tree, BenchFs};
use crate::progress::Progress;
use crate::report::{PhaseResult, Sample, TargetResult};

/// What a phase did: operations, bytes moved and wall time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Measurement {
    /// Operations done by all processes (creates, stats, transfers, …).
    pub ops: u64,
    /// Bytes moved by all processes (0 for metadata phases).
    pub bytes: u64,
    /// From the earliest process start to the latest process end.
    pub seconds: f64,
}

impl Measurement {
    /// Operations per second.
    pub fn ops_per_sec(&self) -> f64 {
        rate(self.ops as f64, self.seconds)
    }

    /// MiB per second.
    pub fn mib_per_sec(&self) -> f64 {
        rate(self.bytes as f64 / (1u64 << 20) as f64, self.seconds)
    }
}

fn rate(amount: f64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        amount / seconds
    } else {
        0.0
    }
}

/// One phase's figure for one iteration, as a workload reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseSample {
    /// Phase name, e.g. `File creation` or `write`.
    pub phase: String,
    /// Unit of `value`, e.g. `ops/s`, `MiB/s`, `GiB/s`, `kIOPS`.
    pub unit: String,
    /// The figure.
    pub value: f64,
    /// What was measured.
    pub measurement: Measurement,
}

/// What every running workload gets: the stop flag and the progress bar.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Set by Ctrl-C; checked between operations.
    pub cancel: Cancel,
    /// Counts operations.
    pub progress: Progress,
}

impl Ctx {
    /// A context with no Ctrl-C handling and no progress bar (tests, library use).
    pub fn quiet() -> Self {
        Ctx {
            cancel: Cancel::new(),
            progress: Progress::hidden(),
        }
    }
}

/// Checked by each process between operations: stops on Ctrl-C and when
/// another process of the same phase failed.
#[derive(Debug)]
pub struct Stop<'a> {
    cancel: &'a Cancel,
    failed: &'a AtomicBool,
}

impl Stop<'_> {
    /// `Err(Interrupted)` when the run must stop.
    pub fn check(&self) -> Result<()> {
        if self.cancel.is_cancelled() || self.failed.load(Ordering::Relaxed) {
            Err(BenchError::Interrupted)
        } else {
            Ok(())
        }
    }
}

/// Prefix of the name of the thread that runs a process (rank) of a phase:
/// `loom-bench-rank-<rank>`.
pub const RANK_THREAD_PREFIX: &str = "loom-bench-rank-";

fn rank_thread_name(rank: u32) -> String {
    format!("{RANK_THREAD_PREFIX}{rank}")
}

/// The benchmark process (rank) the calling thread runs, if it is one of
/// [`run_ranks`]'s threads. Lets a backend wrapper attribute each call to a
/// process (tests record who touched what with it).
pub fn current_rank() -> Option<u32> {
    std::thread::current()
        .name()?
        .strip_prefix(RANK_THREAD_PREFIX)?
        .parse()
        .ok()
}

/// Opens once: every rank waits for it, so that they start together, and
/// none starts if not all of them could be spawned.
#[derive(Default)]
struct StartGate {
    /// `None` until decided; `Some(true)` = go, `Some(false)` = give up.
    state: Mutex<Option<bool>>,
    opened: Condvar,
}

impl StartGate {
    fn open(&self, go: bool) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *st = Some(go);
        self.opened.notify_all();
    }

    fn wait(&self) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(go) = *st {
                return go;
            }
            st = self.opened.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Runs `work(rank, stop, start)` on `procs` threads (named by
/// [`RANK_THREAD_PREFIX`]) released together once all exist; returns the
/// phase's wall time (latest end minus earliest start) and each rank's
/// result in rank order. `start` is the rank's own start time, for
/// stonewalling. The first real error wins over the `Interrupted` of the
/// ranks it stopped.
pub fn run_ranks<T, F>(procs: u32, cancel: &Cancel, work: F) -> Result<(f64, Vec<T>)>
where
    T: Send,
    F: Fn(u32, &Stop<'_>, Instant) -> Result<T> + Sync,
{
    let gate = StartGate::default();
    let failed = AtomicBool::new(false);
    let outcomes: Vec<(Instant, Instant, Result<T>)> = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(procs as usize);
        let mut spawn_error = None;
        for rank in 0..procs {
            let (gate, failed, work) = (&gate, &failed, &work);
            let spawned = std::thread::Builder::new()
                .name(rank_thread_name(rank))
                .spawn_scoped(s, move || {
                    if !gate.wait() {
                        let now = Instant::now();
                        return (now, now, Err(BenchError::Interrupted));
                    }
                    let stop = Stop { cancel, failed };
                    let start = Instant::now();
                    let r = work(rank, &stop, start);
                    if r.is_err() {
                        failed.store(true, Ordering::SeqCst);
                    }
                    (start, Instant::now(), r)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    spawn_error = Some(e);
                    break;
                }
            }
        }
        gate.open(spawn_error.is_none());
        let mut outcomes: Vec<_> = handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(o) => o,
                Err(_) => {
                    let now = Instant::now();
                    (
                        now,
                        now,
                        Err(BenchError::Verify("a worker thread panicked".into())),
                    )
                }
            })
            .collect();
        if let Some(e) = spawn_error {
            let now = Instant::now();
            outcomes.push((now, now, Err(BenchError::Threads(e.to_string()))));
        }
        outcomes
    });
    let start = outcomes.iter().map(|o| o.0).min();
    let end = outcomes.iter().map(|o| o.1).max();
    let seconds = match (start, end) {
        (Some(s), Some(e)) => e.duration_since(s).as_secs_f64(),
        _ => 0.0,
    };
    let mut results = Vec::with_capacity(outcomes.len());
    let mut interrupted = false;
    let mut first_error = None;
    for (_, _, r) in outcomes {
        match r {
            Ok(v) => results.push(v),
            Err(BenchError::Interrupted) => interrupted = true,
            Err(e) => {
                if first_error.is_none() {
                    first_error = Some(e);
                }
            }
        }
    }
    if let Some(e) = first_error {
        return Err(e);
    }
    if interrupted {
        return Err(BenchError::Interrupted);
    }
    Ok((seconds, results))
}

/// A benchmark that runs iteration by iteration on one target at a time.
pub trait Workload: Sync {
    /// `md`, `io`, `io500`.
    fn kind(&self) -> &'static str;
    /// Number of iterations.
    fn iterations(&self) -> u32;
    /// The working directory it creates in each target (relative to the root).
    fn work_dir(&self) -> PathBuf;
    /// Whether to leave the files in place after the run.
    fn keep(&self) -> bool;
    /// Operations of one iteration, for the progress bar.
    fn ops_per_iteration(&self) -> u64;
    /// The options, for the JSON report.
    fn options_json(&self) -> serde_json::Value;
    /// Runs iteration `iter` in `dir` (`work_dir()/iter.N`, not yet created
    /// unless [`Workload::reads_existing`]).
    fn run_iteration(&self, fs: &dyn BenchFs, dir: &Path, ctx: &Ctx) -> Result<Vec<PhaseSample>>;
    /// True when the workload only reads files an earlier run left in its
    /// working directory (IOR's `-r` without `-w`): the driver then needs
    /// that directory to exist, and neither creates nor removes anything.
    fn reads_existing(&self) -> bool {
        false
    }
}

/// A target to run on: a name and a backend.
pub struct Target {
    /// Name in tables and charts.
    pub name: String,
    /// Where it is (a path, or a loomfs address).
    pub location: String,
    /// File system type (`ext4`, `tmpfs`, `fuse`, `loomfs`, …).
    pub fs_type: String,
    /// The backend.
    pub fs: Box<dyn BenchFs>,
}

/// The directory of iteration `iter` inside the workload's working directory.
pub fn iteration_dir(work_dir: &Path, iter: u32) -> PathBuf {
    work_dir.join(format!("iter.{iter}"))
}

/// Runs `workload` on every target: for each iteration, every target in
/// turn, so that they share the machine's noise. Creates the working
/// directory ([`work_dir_for`]) first (refusing one that exists, so that no user file is ever
/// removed), and removes it at the end unless the workload keeps its files.
/// On an error or Ctrl-C it removes the working directory from every target
/// (always on Ctrl-C, also with `--keep`) and returns the error. A workload
/// that [reads existing files](Workload::reads_existing) needs the working
/// directory to exist instead, and nothing is created or removed.
pub fn run_interleaved(
    targets: &[Target],
    workload: &dyn Workload,
    ctx: &Ctx,
) -> Result<Vec<TargetResult>> {
    let existing = workload.reads_existing();
    // Each target's working directory: with several targets it carries the
    // target's name, since two of them may be one directory seen two ways
    // (`fuse=/mnt/x lib=loom:/mnt/x`).
    let works: Vec<PathBuf> = targets
        .iter()
        .map(|t| work_dir_for(workload, t, targets.len()))
        .collect();
    for (t, work) in targets.iter().zip(&works) {
        match t.fs.stat(work) {
            Ok(st) if existing && st.is_dir => {}
            Ok(_) if existing => {
                return Err(BenchError::Options(format!(
                    "{} in target {} ({}) is not a directory",
                    work.display(),
                    t.name,
                    t.location
                )))
            }
            Ok(_) => {
                return Err(BenchError::Options(format!(
                    "{} already exists in target {} ({}); remove it (left by an earlier --keep run?) or choose another --name",
                    work.display(),
                    t.name,
                    t.location
                )))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound && existing => {
                return Err(BenchError::Options(format!(
                    "nothing to read: {} does not exist in target {} ({}); -r without -w reads the files of an earlier `-w --keep` run",
                    work.display(),
                    t.name,
                    t.location
                )))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(BenchError::io("stat", work, e)),
        }
    }
    let mut created: Vec<(&Target, &PathBuf)> = Vec::new();
    let outcome = (|| {
        for (t, work) in targets.iter().zip(&works).filter(|_| !existing) {
            t.fs.mkdir(work)
                .map_err(|e| on_target(BenchError::io("mkdir", work, e), t))?;
            created.push((t, work));
        }
        let mut results: Vec<TargetResult> = targets
            .iter()
            .map(|t| TargetResult {
                name: t.name.clone(),
                location: t.location.clone(),
                fs_type: t.fs_type.clone(),
                phases: Vec::new(),
            })
            .collect();
        for iter in 0..workload.iterations() {
            for ((t, work), result) in targets.iter().zip(&works).zip(results.iter_mut()) {
                ctx.progress
                    .set_message(format!("{} iteration {}", t.name, iter + 1));
                let dir = iteration_dir(work, iter);
                let samples = workload
                    .run_iteration(t.fs.as_ref(), &dir, ctx)
                    .map_err(|e| on_target(e, t))?;
                for s in samples {
                    result.push(iter, s);
                }
            }
        }
        Ok(results)
    })();
    let keep_files = workload.keep() && !matches!(outcome, Err(BenchError::Interrupted));
    if !keep_files {
        for (t, work) in &created {
            match remove_tree(t.fs.as_ref(), work) {
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!("cleanup of {} in {}: {e}", work.display(), t.location);
                    if outcome.is_ok() {
                        return Err(on_target(BenchError::io("remove", *work, e), t));
                    }
                }
            }
        }
    }
    if matches!(outcome, Err(BenchError::Interrupted)) && !created.is_empty() {
        eprintln!("loom bench: interrupted; removed the run's files from every target");
    }
    outcome
}

/// The working directory of `target`: the workload's (`--name`) when it
/// runs alone, `<name>-<target name>` when several targets run together.
pub fn work_dir_for(workload: &dyn Workload, target: &Target, targets: usize) -> PathBuf {
    let work = workload.work_dir();
    if targets > 1 {
        let mut name = work.into_os_string();
        name.push(format!("-{}", target.name));
        PathBuf::from(name)
    } else {
        work
    }
}

fn on_target(e: BenchError, t: &Target) -> BenchError {
    match e {
        BenchError::Io { op, path, source } => BenchError::Io {
            op,
            path: PathBuf::from(format!(
                "{}:{}",
                t.name,
                Path::new(&t.location).join(path).display()
            )),
            source,
        },
        other => other,
    }
}

impl TargetResult {
    /// Adds one iteration's sample to the phase it belongs to, keeping the
    /// phases in the order they first ran.
    pub fn push(&mut self, iteration: u32, s: PhaseSample) {
        let sample = Sample {
            iteration,
            value: s.value,
            ops: s.measurement.ops,
            bytes: s.measurement.bytes,
            seconds: s.measurement.seconds,
        };
        match self.phases.iter_mut().find(|p| p.phase == s.phase) {
            Some(p) => p.samples.push(sample),
            None => self.phases.push(PhaseResult {
                phase: s.phase,
                unit: s.unit,
                samples: vec![sample],
            }),
        }
    }
}
