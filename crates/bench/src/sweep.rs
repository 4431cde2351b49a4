//! Sweeps over cluster shapes (`loom bench sweep`): for each value of the
//! swept parameter, start a cluster with `loom up --mdts N --osts M
//! [--servers S] --dir STATE --mount DIR`, wait for its `mounted at DIR`
//! line, run the workload on the mount (through FUSE, or with `--library`
//! through the client library on the same directory), stop it with
//! `loom down --dir STATE`, and finally draw the figures against the
//! parameter.
//!
//! Parameters: `mdts`, `osts`, `servers` (cluster shape: targets packed
//! into that many server processes), `procs` (benchmark processes on a
//! fixed shape), and `dir-stripe`: remote against striped directories
//! on one cluster with as many MDTs as the largest value, the md workload's
//! tree roots placed per value N as remote directories over N MDTs and as
//! directories striped over N MDTs (see [`crate::placed`]), the two
//! interleaved iteration by iteration. Anything else `loom up` accepts can
//! be passed with `--up-arg`.
//!
//! Cleanup: `loom up` runs in a process group of its own, so a Ctrl-C at
//! the terminal reaches `loom bench` alone, which stops the workload,
//! removes its files and stops the cluster with `loom down` (a cluster is
//! also stopped when anything fails). The state and mount directories are
//! made under `--work-dir`, or under a new temporary directory that is
//! removed at the end, whatever the outcome.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::cancel::Cancel;
use crate::chart::{write_lines, LineChart, Panel};
use crate::cli::{cli_ctx, open_target, OutputArgs};
use crate::error::BenchError;
use crate::io::IoPlan;
use crate::md::MdPlan;
use crate::options::{IoOptions, MdOptions};
use crate::placed::{PlacedFs, Placement};
use crate::report::{compare_table, summary_table, Report, TargetResult};
use crate::runner::{run_interleaved, Target, Workload};
use crate::target::{loom_fs_of_mount, TargetAddr};

/// The parameter a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SweepParam {
    /// Number of MDTs of the cluster (`loom up --mdts`).
    Mdts,
    /// Number of OSTs of the cluster (`loom up --osts`).
    Osts,
    /// Number of server processes the targets are packed into (`loom up --servers`).
    Servers,
    /// Benchmark processes (-p) on one cluster shape.
    Procs,
    /// MDTs the md workload's directories are spread over, as remote
    /// directories (`loom mkdir -i`) against striped ones (`loom
    /// setdirstripe -c`), on one cluster.
    DirStripe,
}

impl SweepParam {
    fn name(self) -> &'static str {
        match self {
            SweepParam::Mdts => "mdts",
            SweepParam::Osts => "osts",
            SweepParam::Servers => "servers",
            SweepParam::Procs => "procs",
            SweepParam::DirStripe => "dir-stripe",
        }
    }
}

/// Why `--param dir-stripe` refuses an io workload.
pub const DIR_STRIPE_NEEDS_MD: &str = "--param dir-stripe places directories on MDTs: it sweeps an md workload (an io workload's data is on the OSTs; sweep --param osts)";

/// `loom bench sweep --param P --values A,B,C [OPTIONS] <md|io> [WORKLOAD OPTIONS]`
#[derive(Args, Debug, Clone)]
#[command(after_help = "\
Example: create and remove rates against the number of MDTs, 2 OSTs, 4 processes:
  loom bench sweep --param mdts --values 1,2,4 --osts 2 --chart mdts md -n 5000 -p 4 -F")]
pub struct SweepArgs {
    /// What to vary.
    #[arg(long, value_enum)]
    pub param: SweepParam,
    /// Its values, comma separated (e.g. 1,2,4).
    #[arg(long, value_delimiter = ',', required = true, num_args = 1..)]
    pub values: Vec<u32>,
    /// MDTs of every cluster (unless swept).
    #[arg(long, default_value_t = 1)]
    pub mdts: u32,
    /// OSTs of every cluster (unless swept).
    #[arg(long, default_value_t = 1)]
    pub osts: u32,
    /// Server processes of every cluster (unless swept) [default: one per target].
    #[arg(long, value_name = "N")]
    pub servers: Option<u32>,
    /// Run the workload through the loomfs client library on the mount's
    /// directory (loom:MOUNT) instead of through FUSE.
    #[arg(long)]
    pub library: bool,
    /// The loom binary (default: this executable).
    #[arg(long, value_name = "PATH")]
    pub loom: Option<PathBuf>,
    /// Directory for cluster state and mount points, kept afterwards (default:
    /// a new temporary directory, removed at the end).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Seconds to wait for `mounted at`.
    #[arg(long, default_value_t = 120.0)]
    pub up_timeout: f64,
    /// Extra argument for `loom up` (repeat for several).
    #[arg(long = "up-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub up_args: Vec<String>,
    /// Chart file name without extension; `<PATH>.svg` and `<PATH>.png` are
    /// written (default loom-sweep-<param>).
    #[arg(long, value_name = "PATH")]
    pub chart: Option<PathBuf>,
    /// Output.
    #[command(flatten)]
    pub out: OutputArgs,
    /// The workload run on each cluster.
    #[command(subcommand)]
    pub workload: SweepWorkload,
}

/// The workload of a sweep.
#[derive(Subcommand, Debug, Clone)]
pub enum SweepWorkload {
    /// mdtest-style workload.
    Md(MdOptions),
    /// IOR-style workload.
    Io(IoOptions),
}

/// How to start one cluster.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    /// The loom binary.
    pub loom: PathBuf,
    /// MDTs.
    pub mdts: u32,
    /// OSTs.
    pub osts: u32,
    /// Server processes (`None`: one per target).
    pub servers: Option<u32>,
    /// State directory (`--dir`).
    pub state: PathBuf,
    /// Mount point (`--mount`).
    pub mount: PathBuf,
    /// Extra arguments for `loom up`.
    pub extra: Vec<String>,
    /// How long to wait for `mounted at`.
    pub timeout: Duration,
}

impl ClusterSpec {
    /// The arguments of `loom up` for this cluster.
    pub fn up_args(&self) -> Vec<String> {
        let mut v = vec![
            "up".to_string(),
            "--mdts".into(),
            self.mdts.to_string(),
            "--osts".into(),
            self.osts.to_string(),
        ];
        if let Some(s) = self.servers {
            v.extend(["--servers".to_string(), s.to_string()]);
        }
        v.extend([
            "--dir".to_string(),
            self.state.display().to_string(),
            "--mount".into(),
            self.mount.display().to_string(),
        ]);
        v.extend(self.extra.iter().cloned());
        v
    }
}

/// A running `loom up`; stopped by [`Cluster::stop`] or, failing that, on drop.
pub struct Cluster {
    /// `loom up`'s pid while it may still run (`None` once stopped).
    pid: Option<Pid>,
    /// Gets `loom up`'s exit status once a thread has reaped it.
    exited: Receiver<std::io::Result<ExitStatus>>,
    spec: ClusterSpec,
    tail: Arc<Mutex<VecDeque<String>>>,
}

fn pump<R: Read + Send + 'static>(
    r: R,
    tx: mpsc::Sender<String>,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if let Ok(mut t) = tail.lock() {
                if t.len() == 20 {
                    t.pop_front();
                }
                t.push_back(line.clone());
            }
            // The receiver may be gone once the cluster is up; keep draining.
            let _ = tx.send(line);
        }
    });
}

/// Reaps `child` from a thread of its own and reports its exit status.
fn reap(mut child: Child) -> Receiver<std::io::Result<ExitStatus>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    rx
}

impl Cluster {
    /// Starts `loom up` and waits for its `mounted at` line.
    pub fn start(spec: ClusterSpec, cancel: &Cancel) -> Result<Cluster, BenchError> {
        for d in [&spec.state, &spec.mount] {
            std::fs::create_dir_all(d).map_err(|e| BenchError::io("mkdir", d, e))?;
        }
        let mut child = Command::new(&spec.loom)
            .args(spec.up_args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: Ctrl-C at the terminal reaches
            // `loom bench` only, which removes its files from the mount
            // before it stops the cluster.
            .process_group(0)
            .spawn()
            .map_err(|e| {
                BenchError::Cluster(format!(
                    "cannot run {} up: {e} (point --loom at the loom binary)",
                    spec.loom.display()
                ))
            })?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let (tx, rx) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            pump(out, tx.clone(), tail.clone());
        }
        if let Some(err) = child.stderr.take() {
            pump(err, tx, tail.clone());
        }
        let mut cluster = Cluster {
            pid: Some(Pid::from_raw(child.id() as i32)),
            exited: reap(child),
            spec,
            tail,
        };
        match cluster.wait_mounted(&rx, cancel) {
            Ok(()) => Ok(cluster),
            Err(e) => {
                let _ = cluster.stop();
                Err(e)
            }
        }
    }

    fn tail_text(&self) -> String {
        self.tail
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n  "))
            .unwrap_or_default()
    }

    fn wait_mounted(&mut self, rx: &Receiver<String>, cancel: &Cancel) -> Result<(), BenchError> {
        let deadline = Instant::now() + self.spec.timeout;
        loop {
            if cancel.is_cancelled() {
                return Err(BenchError::Interrupted);
            }
            // Wakes at each output line, or every 100 ms to check Ctrl-C.
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(line) if line.trim_start().starts_with("mounted at") => return Ok(()),
                Ok(_) | Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {}
            }
            if let Ok(status) = self.exited.try_recv() {
                self.pid = None;
                let status = status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|e| e.to_string());
                // Output lines still in flight would be lost: read what the
                // pumps have (they end with the process's pipes).
                while rx.recv_timeout(Duration::from_millis(200)).is_ok() {}
                return Err(BenchError::Cluster(format!(
                    "{} up exited ({status}) before printing 'mounted at'; its last lines:\n  {}",
                    self.spec.loom.display(),
                    self.tail_text()
                )));
            }
            if Instant::now() >= deadline {
                return Err(BenchError::Cluster(format!(
                    "no 'mounted at' line from {} up within {:?}; its last lines:\n  {}",
                    self.spec.loom.display(),
                    self.spec.timeout,
                    self.tail_text()
                )));
            }
        }
    }

    /// The mount point.
    pub fn mount(&self) -> &Path {
        &self.spec.mount
    }

    /// Waits up to `limit` for `loom up` to exit; true if it did.
    fn wait_exit(&mut self, limit: Duration) -> bool {
        match self.exited.recv_timeout(limit) {
            Ok(_) | Err(RecvTimeoutError::Disconnected) => {
                self.pid = None;
                true
            }
            Err(RecvTimeoutError::Timeout) => false,
        }
    }

    /// Stops the cluster: `loom down --dir STATE`, then waits for `loom up`
    /// to exit, sending SIGTERM and at last SIGKILL if it lingers. The
    /// figures measured before are valid whatever happens here, so a stop
    /// that needed more than `loom down` returns `Ok` with a warning to
    /// print; `Err` only when `loom up` could not be ended at all.
    pub fn stop(&mut self) -> Result<Option<String>, BenchError> {
        let Some(pid) = self.pid else {
            return Ok(None);
        };
        let down = Command::new(&self.spec.loom)
            .arg("down")
            .arg("--dir")
            .arg(&self.spec.state)
            .stdin(Stdio::null())
            .output();
        let down_note = match &down {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(format!(
                "loom down: {} {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Some(format!("loom down: {e}")),
        };
        if self.wait_exit(Duration::from_secs(30)) {
            return Ok(down_note.map(|n| format!("{n}; loom up exited after it")));
        }
        let _ = kill(pid, Signal::SIGTERM);
        let how = if self.wait_exit(Duration::from_secs(10)) {
            "stopped by SIGTERM"
        } else {
            kill(pid, Signal::SIGKILL).map_err(|e| {
                BenchError::Cluster(format!("cannot kill loom up (pid {pid}): {e}"))
            })?;
            self.wait_exit(Duration::from_secs(10));
            "killed"
        };
        Ok(Some(format!(
            "loom up did not exit after loom down{}; {how}",
            down_note.map(|n| format!(" ({n})")).unwrap_or_default()
        )))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.pid.is_some() {
            match self.stop() {
                Ok(None) => {}
                Ok(Some(w)) => tracing::warn!("stopping cluster: {w}"),
                Err(e) => tracing::warn!("stopping cluster: {e}"),
            }
        }
    }
}

/// Mount points at or below `dir`, from `/proc/self/mountinfo`.
fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(unescape_mountinfo(m)))
        .filter(|m| m.starts_with(dir))
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let digits = std::str::from_utf8(&b[i + 1..i + 4]).ok();
            if let Some(v) = digits.and_then(|d| u8::from_str_radix(d, 8).ok()) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The sweep's own temporary directory, removed when dropped (after every
/// cluster in it has been stopped). A mount still below it is detached
/// first; if one cannot be, the directory is left (with a warning) rather
/// than deleting through a live mount.
struct TempWork(PathBuf);

impl Drop for TempWork {
    fn drop(&mut self) {
        for m in mounts_below(&self.0) {
            let _ = nix::mount::umount2(&m, nix::mount::MntFlags::MNT_DETACH);
        }
        let left = mounts_below(&self.0);
        if !left.is_empty() {
            eprintln!(
                "warning: leaving {}: still mounted below it: {left:?}",
                self.0.display()
            );
            return;
        }
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            eprintln!("warning: cannot remove {}: {e}", self.0.display());
        }
    }
}

/// Checks the options and builds one workload per swept value, before any
/// cluster starts.
fn workloads(a: &SweepArgs) -> anyhow::Result<Vec<Box<dyn Workload>>> {
    if a.values.is_empty() || a.values.contains(&0) {
        anyhow::bail!("bad option: --values must be positive numbers, e.g. --values 1,2,4");
    }
    if a.param == SweepParam::DirStripe && !matches!(a.workload, SweepWorkload::Md(_)) {
        anyhow::bail!("bad option: {DIR_STRIPE_NEEDS_MD}");
    }
    if a.up_timeout.is_nan() || a.up_timeout <= 0.0 {
        anyhow::bail!("bad option: --up-timeout must be positive");
    }
    if a.servers == Some(0) {
        anyhow::bail!("bad option: --servers must be at least 1");
    }
    a.values
        .iter()
        .map(|v| -> anyhow::Result<Box<dyn Workload>> {
            let procs = |p: u32| if a.param == SweepParam::Procs { *v } else { p };
            Ok(match &a.workload {
                SweepWorkload::Md(o) => Box::new(MdPlan::new(MdOptions {
                    procs: procs(o.procs),
                    ..o.clone()
                })?),
                SweepWorkload::Io(o) => Box::new(IoPlan::new(IoOptions {
                    procs: procs(o.procs),
                    ..o.clone()
                })?),
            })
        })
        .collect()
}

/// `loom bench sweep`.
pub fn run_sweep(a: SweepArgs) -> anyhow::Result<()> {
    let workloads = workloads(&a)?;
    let loom = match &a.loom {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("finding the loom binary; give --loom")?,
    };
    let (work, _temp) = match &a.work_dir {
        Some(d) => (d.clone(), None),
        None => {
            let d = std::env::temp_dir().join(format!("loom-sweep.{}", std::process::id()));
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
            (d.clone(), Some(TempWork(d)))
        }
    };
    let total: u64 = workloads
        .iter()
        .map(|w| w.ops_per_iteration() * u64::from(w.iterations()))
        .sum();
    let started = SystemTime::now();
    if a.param == SweepParam::DirStripe {
        // Two placements per value.
        let ctx = cli_ctx(total * 2, &a.out);
        let results = dir_stripe_sweep(&a, &loom, &work, &workloads, &ctx)?;
        return finish_sweep(&a, &workloads, results, started, &["remote", "striped"]);
    }
    let ctx = cli_ctx(total, &a.out);
    let mut results: Vec<TargetResult> = Vec::new();
    for (v, w) in a.values.iter().zip(&workloads) {
        let label = format!("{}={v}", a.param.name());
        let pick = |param, fixed| if a.param == param { *v } else { fixed };
        let spec = ClusterSpec {
            loom: loom.clone(),
            mdts: pick(SweepParam::Mdts, a.mdts),
            osts: pick(SweepParam::Osts, a.osts),
            servers: if a.param == SweepParam::Servers {
                Some(*v)
            } else {
                a.servers
            },
            state: work.join(&label).join("state"),
            mount: work.join(&label).join("mnt"),
            extra: a.up_args.clone(),
            timeout: Duration::from_secs_f64(a.up_timeout),
        };
        ctx.progress
            .set_message(format!("starting cluster {label}"));
        let mut cluster =
            Cluster::start(spec, &ctx.cancel).with_context(|| format!("sweep {label}"))?;
        let outcome = run_on_cluster(&cluster, a.library, &label, w.as_ref(), &ctx);
        ctx.progress
            .set_message(format!("stopping cluster {label}"));
        let stopped = cluster.stop();
        let mut r = outcome.with_context(|| format!("sweep {label}"))?;
        if let Some(w) = stopped.with_context(|| format!("stopping cluster {label}"))? {
            eprintln!("warning: cluster {label}: {w}");
        }
        r.name = label;
        println!("{}", summary_table(&r));
        results.push(r);
    }
    ctx.progress.finish();
    finish_sweep(&a, &workloads, results, started, &[])
}

/// Prints the comparison, draws the chart (a line per name of `series`,
/// whose results follow one another value by value) and writes the JSON.
fn finish_sweep(
    a: &SweepArgs,
    workloads: &[Box<dyn Workload>],
    results: Vec<TargetResult>,
    started: SystemTime,
    series: &[&str],
) -> anyhow::Result<()> {
    println!("{}", compare_table(&results));
    let kind = workloads.first().map_or("md", |w| w.kind());
    let lines = series.len().max(1);
    // Results come value by value, each value's series in order; the
    // chart wants each series' values in order.
    let order: Vec<usize> = (0..lines)
        .flat_map(|s| (0..a.values.len()).map(move |i| i * lines + s))
        .collect();
    let chart = LineChart {
        title: format!(
            "loom bench sweep {kind}: figures against {}",
            a.param.name()
        ),
        x_label: a.param.name().to_string(),
        xs: a.values.iter().map(|v| f64::from(*v)).collect(),
        series: series.iter().map(|s| s.to_string()).collect(),
        panels: results
            .first()
            .map(|r| {
                r.phases
                    .iter()
                    .map(|p| (p.phase.clone(), p.unit.clone()))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
            .into_iter()
            .map(|(phase, unit)| Panel {
                values: order
                    .iter()
                    .map(|i| {
                        results
                            .get(*i)
                            .and_then(|r| r.phase(&phase))
                            .and_then(|p| p.summary())
                    })
                    .collect(),
                title: phase,
                unit,
            })
            .collect(),
    };
    let base = a
        .chart
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("loom-sweep-{}", a.param.name())));
    for c in write_lines(&base, &chart)? {
        println!("chart: {}", c.display());
    }
    if let Some(path) = &a.out.json {
        let options = serde_json::json!({
            "param": a.param.name(),
            "values": a.values,
            "mdts": a.mdts,
            "osts": a.osts,
            "servers": a.servers,
            "library": a.library,
            "up_args": a.up_args,
            "workload": workloads.first().map(|w| w.options_json()),
        });
        Report::new("sweep", kind, options, results, started).write_json(path)?;
        println!("results: {}", path.display());
    }
    Ok(())
}

/// `--param dir-stripe`: one cluster with MDTs enough for the largest
/// value; for each value N the workload with remote tree roots over N
/// MDTs and with tree roots striped over N MDTs, interleaved.
fn dir_stripe_sweep(
    a: &SweepArgs,
    loom: &Path,
    work: &Path,
    workloads: &[Box<dyn Workload>],
    ctx: &crate::runner::Ctx,
) -> anyhow::Result<Vec<TargetResult>> {
    let widest = a.values.iter().copied().max().unwrap_or(1);
    let spec = ClusterSpec {
        loom: loom.to_path_buf(),
        mdts: a.mdts.max(widest),
        osts: a.osts,
        servers: a.servers,
        state: work.join("dir-stripe").join("state"),
        mount: work.join("dir-stripe").join("mnt"),
        extra: a.up_args.clone(),
        timeout: Duration::from_secs_f64(a.up_timeout),
    };
    ctx.progress
        .set_message(format!("starting a cluster with {} MDTs", spec.mdts));
    let mut cluster = Cluster::start(spec, &ctx.cancel).context("sweep dir-stripe")?;
    let outcome = (|| -> anyhow::Result<Vec<TargetResult>> {
        let mount = cluster.mount().to_path_buf();
        let placer = Arc::new(loom_fs_of_mount(&mount, "dir-stripe")?);
        let mut results = Vec::new();
        for (v, w) in a.values.iter().zip(workloads) {
            let targets = [
                Placement::Remote { mdts: *v },
                Placement::Striped { mdts: *v },
            ]
            .into_iter()
            .map(|p| -> anyhow::Result<Target> {
                let name = format!("{} dir-stripe={v}", p.name());
                let addr = if a.library {
                    TargetAddr::LoomMount(mount.clone())
                } else {
                    TargetAddr::Posix(mount.clone())
                };
                let t = open_target(&name, &addr)?;
                Ok(Target {
                    fs: Box::new(PlacedFs::new(t.fs, placer.clone(), p)),
                    ..t
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
            ctx.progress.set_message(format!("dir-stripe={v}"));
            for r in run_interleaved(&targets, w.as_ref(), ctx)? {
                println!("{}", summary_table(&r));
                results.push(r);
            }
        }
        Ok(results)
    })();
    ctx.progress.set_message("stopping the cluster".to_string());
    let stopped = cluster.stop();
    ctx.progress.finish();
    let results = outcome.context("sweep dir-stripe")?;
    if let Some(w) = stopped.context("stopping the cluster")? {
        eprintln!("warning: cluster: {w}");
    }
    Ok(results)
}

fn run_on_cluster(
    cluster: &Cluster,
    library: bool,
    label: &str,
    w: &dyn Workload,
    ctx: &crate::runner::Ctx,
) -> anyhow::Result<TargetResult> {
    let dir = cluster.mount().to_path_buf();
    let addr = if library {
        TargetAddr::LoomMount(dir)
    } else {
        TargetAddr::Posix(dir)
    };
    let target = open_target(label, &addr)?;
    ctx.progress.set_message(label.to_string());
    let r = run_interleaved(std::slice::from_ref(&target), w, ctx)?;
    r.into_iter().next().context("no result")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape_mountinfo("/a\\040b/c"), "/a b/c");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
        assert_eq!(unescape_mountinfo("/end\\"), "/end\\");
    }

    #[test]
    fn up_arguments_name_the_shape_and_the_packing() {
        let spec = ClusterSpec {
            loom: "loom".into(),
            mdts: 2,
            osts: 3,
            servers: Some(2),
            state: "/s".into(),
            mount: "/m".into(),
            extra: vec!["--timeout".into(), "30".into()],
            timeout: Duration::from_secs(1),
        };
        assert_eq!(
            spec.up_args().join(" "),
            "up --mdts 2 --osts 3 --servers 2 --dir /s --mount /m --timeout 30"
        );
        let one_each = ClusterSpec {
            servers: None,
            ..spec
        };
        assert!(!one_each.up_args().contains(&"--servers".to_string()));
    }
}
