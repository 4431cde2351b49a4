//! Sweeps over cluster shapes (`loom bench sweep`): for each value of the
//! swept parameter, start a cluster with `loom up --mdts N --osts M --dir
//! STATE --mount DIR`, wait for its `mounted at DIR` line, run the workload
//! on the mount, stop it with `loom down --dir STATE`, and finally draw the
//! figures against the parameter.
//!
//! Parameters: `mdts`, `osts` (cluster shape), `procs` (benchmark processes
//! on a fixed shape), `dir-stripe` (the workload runs in a directory made by
//! `loom setdirstripe -c N`, so remote and striped directories can be set
//! against each other). Anything else `loom up` accepts can be passed with
//! `--up-arg`.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};

use crate::cancel::Cancel;
use crate::chart::{write_lines, LineChart, Panel};
use crate::cli::{cli_ctx, open_target, OutputArgs};
use crate::error::BenchError;
use crate::io::IoPlan;
use crate::md::MdPlan;
use crate::options::{IoOptions, MdOptions};
use crate::report::{compare_table, summary_table, Report, TargetResult};
use crate::runner::{run_interleaved, Workload};

/// The parameter a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SweepParam {
    /// Number of MDTs of the cluster.
    Mdts,
    /// Number of OSTs of the cluster.
    Osts,
    /// Benchmark processes (-p) on one cluster shape.
    Procs,
    /// Stripe count of the directory the workload runs in (`loom setdirstripe -c N`).
    DirStripe,
}

impl SweepParam {
    fn name(self) -> &'static str {
        match self {
            SweepParam::Mdts => "mdts",
            SweepParam::Osts => "osts",
            SweepParam::Procs => "procs",
            SweepParam::DirStripe => "dir-stripe",
        }
    }
}

/// `loom bench sweep --param P --values A,B,C [OPTIONS] <md|io> [WORKLOAD OPTIONS]`
#[derive(Args, Debug, Clone)]
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
    /// The loom binary (default: this executable).
    #[arg(long, value_name = "PATH")]
    pub loom: Option<PathBuf>,
    /// Directory for cluster state and mount points (default: a new one under the temp dir).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Seconds to wait for `mounted at`.
    #[arg(long, default_value_t = 120.0)]
    pub up_timeout: f64,
    /// Extra argument for `loom up` (repeat for several).
    #[arg(long = "up-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub up_args: Vec<String>,
    /// Chart file name without extension (default loom-sweep-<param>).
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
    /// State directory (`--dir`).
    pub state: PathBuf,
    /// Mount point (`--mount`).
    pub mount: PathBuf,
    /// Extra arguments for `loom up`.
    pub extra: Vec<String>,
    /// How long to wait for `mounted at`.
    pub timeout: Duration,
}

/// A running `loom up`; stopped by [`Cluster::stop`] or, failing that, on drop.
pub struct Cluster {
    child: Option<Child>,
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

impl Cluster {
    /// Starts `loom up` and waits for its `mounted at` line.
    pub fn start(spec: ClusterSpec, cancel: &Cancel) -> Result<Cluster, BenchError> {
        for d in [&spec.state, &spec.mount] {
            std::fs::create_dir_all(d).map_err(|e| BenchError::io("mkdir", d, e))?;
        }
        let mut cmd = Command::new(&spec.loom);
        cmd.arg("up")
            .args([
                "--mdts",
                &spec.mdts.to_string(),
                "--osts",
                &spec.osts.to_string(),
            ])
            .arg("--dir")
            .arg(&spec.state)
            .arg("--mount")
            .arg(&spec.mount)
            .args(&spec.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| {
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
            child: Some(child),
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
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(line) if line.trim_start().starts_with("mounted at") => return Ok(()),
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {}
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(BenchError::Cluster(format!(
                        "{} up exited ({status}) before printing 'mounted at'; its last lines:\n  {}",
                        self.spec.loom.display(),
                        self.tail_text()
                    )));
                }
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

    /// Stops the cluster: `loom down --dir STATE`, then waits for `loom up`
    /// to exit, sending SIGTERM and at last SIGKILL if it lingers. The
    /// figures measured before are valid whatever happens here, so a stop
    /// that needed more than `loom down` returns `Ok` with a warning to
    /// print; `Err` only when `loom up` could not be ended at all.
    pub fn stop(&mut self) -> Result<Option<String>, BenchError> {
        let Some(mut child) = self.child.take() else {
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
        if wait_exit(&mut child, Duration::from_secs(30)) {
            return Ok(down_note.map(|n| format!("{n}; loom up exited after it")));
        }
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let how = if wait_exit(&mut child, Duration::from_secs(10)) {
            "stopped by SIGTERM"
        } else {
            child.kill().map_err(|e| {
                BenchError::Cluster(format!("cannot kill loom up (pid {pid}): {e}"))
            })?;
            let _ = child.wait();
            "killed"
        };
        Ok(Some(format!(
            "loom up did not exit after loom down{}; {how}",
            down_note.map(|n| format!(" ({n})")).unwrap_or_default()
        )))
    }
}

/// Waits up to `limit` for `child` to exit; true if it did.
fn wait_exit(child: &mut Child, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return true,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => return false,
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.child.is_some() {
            match self.stop() {
                Ok(None) => {}
                Ok(Some(w)) => tracing::warn!("stopping cluster: {w}"),
                Err(e) => tracing::warn!("stopping cluster: {e}"),
            }
        }
    }
}

/// `loom bench sweep`.
pub fn run_sweep(a: SweepArgs) -> anyhow::Result<()> {
    if a.values.is_empty() || a.values.contains(&0) {
        anyhow::bail!("bad option: --values must be positive numbers, e.g. --values 1,2,4");
    }
    if a.up_timeout.is_nan() || a.up_timeout <= 0.0 {
        anyhow::bail!("bad option: --up-timeout must be positive");
    }
    // Check the workload's options before starting any cluster.
    let workloads: Vec<Box<dyn Workload>> = a
        .values
        .iter()
        .map(|v| -> anyhow::Result<Box<dyn Workload>> {
            Ok(match &a.workload {
                SweepWorkload::Md(o) => {
                    let mut o = o.clone();
                    if a.param == SweepParam::Procs {
                        o.procs = *v;
                    }
                    Box::new(MdPlan::new(o)?)
                }
                SweepWorkload::Io(o) => {
                    let mut o = o.clone();
                    if a.param == SweepParam::Procs {
                        o.procs = *v;
                    }
                    Box::new(IoPlan::new(o)?)
                }
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let loom = match &a.loom {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("finding the loom binary; give --loom")?,
    };
    let work = match &a.work_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("loom-sweep.{}", std::process::id())),
    };
    let total: u64 = workloads
        .iter()
        .map(|w| w.ops_per_iteration() * u64::from(w.iterations()))
        .sum();
    let ctx = cli_ctx(total, &a.out);
    let started = SystemTime::now();
    let mut results: Vec<TargetResult> = Vec::new();
    for (v, w) in a.values.iter().zip(&workloads) {
        let label = format!("{}={v}", a.param.name());
        let spec = ClusterSpec {
            loom: loom.clone(),
            mdts: if a.param == SweepParam::Mdts {
                *v
            } else {
                a.mdts
            },
            osts: if a.param == SweepParam::Osts {
                *v
            } else {
                a.osts
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
        let outcome = run_on_cluster(&cluster, &loom, a.param, *v, &label, w.as_ref(), &ctx);
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
    println!("{}", compare_table(&results));
    let kind = workloads.first().map_or("md", |w| w.kind());
    let chart = LineChart {
        title: format!(
            "loom bench sweep {kind}: figures against {}",
            a.param.name()
        ),
        x_label: a.param.name().to_string(),
        xs: a.values.iter().map(|v| f64::from(*v)).collect(),
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
                values: results
                    .iter()
                    .map(|r| r.phase(&phase).and_then(|p| p.summary()))
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
            "up_args": a.up_args,
            "workload": workloads.first().map(|w| w.options_json()),
        });
        Report::new("sweep", kind, options, results, started).write_json(path)?;
        println!("results: {}", path.display());
    }
    Ok(())
}

fn run_on_cluster(
    cluster: &Cluster,
    loom: &Path,
    param: SweepParam,
    value: u32,
    label: &str,
    w: &dyn Workload,
    ctx: &crate::runner::Ctx,
) -> anyhow::Result<TargetResult> {
    let mut dir = cluster.mount().to_path_buf();
    let striped = param == SweepParam::DirStripe;
    if striped {
        dir = dir.join("loom-sweep-striped");
        let out = Command::new(loom)
            .arg("setdirstripe")
            .args(["-c", &value.to_string()])
            .arg(&dir)
            .output()
            .context("running loom setdirstripe")?;
        if !out.status.success() || !dir.is_dir() {
            anyhow::bail!(
                "loom setdirstripe -c {value} {} failed ({}): {}",
                dir.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    let target = open_target(label, &crate::target::TargetAddr::Posix(dir.clone()))?;
    ctx.progress.set_message(label.to_string());
    let r = run_interleaved(std::slice::from_ref(&target), w, ctx)?;
    if striped {
        std::fs::remove_dir(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    r.into_iter().next().context("no result")
}
