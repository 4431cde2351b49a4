//! `loom up` and `loom down`: a whole cluster on one machine.
//!
//! State directory layout:
//!
//! ```text
//! STATE/cluster.toml        shape and ports, reused when `up` runs again
//! STATE/cluster.key         the cluster key, for servers (made on first run)
//! STATE/client.key          its client key, for mounts and tools (derived from it)
//! STATE/nodes/NODE.toml     one config per server process
//! STATE/targets/NAME/       the formatted target directories (mgs, mdt0, ost0, ...)
//! STATE/logs/NODE.log       each server process's log
//! STATE/pids/NODE.pid       each server process's pid; STATE/up.pid is `loom up` itself
//! ```
//!
//! By default every target runs in a server process of its own, and NODE
//! is the target's name (`mgs`, `mdt0`, `ost1`, ...). With `--servers N`
//! the targets are packed into N processes `server0` ... `server<N-1>`:
//! the list mgs, mdt0.., ost0.. is dealt round-robin, so the MGS is in
//! `server0`. The port of the process that hosts the MGS is kept under
//! `mgs` in `cluster.toml` whatever the packing, so the MGS address stays
//! the same from one `loom up` to the next.

use crate::mount::{self, MountPlan};
use anyhow::{bail, Context};
use clap::Args;
use loom_proto::msg::Role;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// How long a server may take to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a server may take to stop after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// Options of `loom up`.
#[derive(Args)]
pub struct UpArgs {
    /// Number of metadata targets.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub mdts: u32,
    /// Number of object storage targets.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub osts: u32,
    /// Keep each MDT and OST on N servers (2 or more; first run only): a
    /// replica of it in each, one the primary that serves it and copies
    /// every change to the others (an OST's before answering, an MDT's
    /// before it commits). When a primary's server dies, another replica
    /// takes over within seconds; one that comes back is brought up to
    /// date.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=8))]
    pub replicas: Option<u32>,
    /// Pack the MGS, MDTs and OSTs into N server processes (targets dealt
    /// round-robin, the MGS in the first) [default: one process per target].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub servers: Option<u32>,
    /// State directory: targets, configs, key, logs. Running `up` again on
    /// the same directory brings back the same file system with its data.
    #[arg(long, default_value = "/var/tmp/loom-up")]
    pub dir: PathBuf,
    /// Where to mount the file system.
    #[arg(long, default_value = "/mnt/loom")]
    pub mount: PathBuf,
    /// Start the servers only, without mounting.
    #[arg(long)]
    pub no_mount: bool,
    /// File system name (first run only).
    #[arg(long, default_value = "loom")]
    pub fsname: String,
    /// Seconds an operation waits for an unreachable server before failing with EIO.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Seconds a restarted MDT waits for the clients to replay the changes
    /// it acknowledged and had not committed; a client that does not come
    /// back within it is evicted and those changes are lost.
    #[arg(long, default_value_t = 60)]
    pub recovery_window: u64,
    /// Milliseconds an MDT may hold applied changes before it commits them
    /// (clients keep them for replay until then).
    #[arg(long, default_value_t = 5)]
    pub commit_interval_ms: u64,
    /// Milliseconds a mount holding a lease may take to answer its recall
    /// before another mount's change goes ahead without it (the silent
    /// mount loses its leases and drops its cache when it finds out).
    #[arg(long, default_value_t = loom_server::mdt::leases::DEFAULT_RECALL_TIMEOUT.as_millis() as u64)]
    pub recall_timeout_ms: u64,
    /// Directory auto-split: an MDT stripes a plain directory by itself,
    /// online, once it holds more than this many entries (Lustre's
    /// enable_dir_auto_split); 0: never.
    #[arg(long, default_value_t = 0)]
    pub dir_split_entries: u64,
    /// Shards an auto-split directory gets, on its MDT and the next ones
    /// (capped by the MDTs; at least 2).
    #[arg(long, default_value_t = loom_server::mdt::DEFAULT_SPLIT_COUNT, value_parser = clap::value_parser!(u32).range(2..))]
    pub dir_split_count: u32,
    /// Seconds the mount's kernel may cache attributes and names (see
    /// `loom mount --help`); 0: every stat asks the MDT.
    #[arg(long, default_value_t = 1.0, value_parser = crate::mount::parse_seconds)]
    pub attr_timeout: f64,
    /// Seconds the mount's kernel may keep what the MDTs lease it (see
    /// `loom mount --help`); 0: no leases.
    #[arg(long, default_value_t = crate::mount::DEFAULT_LEASE_TIME, value_parser = crate::mount::parse_seconds)]
    pub lease_time: f64,
    /// Kernel readahead for the mount, in KiB (0: keep the kernel's 128).
    #[arg(long, default_value_t = loom_fuse::DEFAULT_READAHEAD_KB)]
    pub readahead_kb: u32,
    /// Serve only the user who runs `loom up` (see `loom mount --help`); by
    /// default the mount serves every user of the machine.
    #[arg(long)]
    pub private: bool,
}

/// Options of `loom down`.
#[derive(Args)]
pub struct DownArgs {
    /// The state directory given to `loom up`.
    #[arg(long, default_value = "/var/tmp/loom-up")]
    pub dir: PathBuf,
}

/// What `cluster.toml` records.
#[derive(Serialize, Deserialize)]
struct Shape {
    fsname: String,
    mdts: u32,
    osts: u32,
    /// Replicas of each MDT and OST (0: not replicated).
    #[serde(default)]
    replicas: u32,
    /// Port of each server, by name.
    ports: std::collections::BTreeMap<String, u16>,
}

/// Ports `loom up` gives its servers: below the kernel's ephemeral range,
/// so that no outgoing connection (a client's, another test's) can take a
/// port between the moment it is chosen and the moment the server binds
/// it, as happened with ports from `bind(:0)`.
const PORT_FLOOR: u16 = 20000;

/// The first port of the kernel's ephemeral range.
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// A free loopback port for a server, not among `taken` (given to this
/// cluster's other servers, which are not listening yet), chosen at random
/// below the ephemeral range (falling back to one the kernel picks if that
/// range is too small or full).
fn free_port(taken: &[u16]) -> anyhow::Result<u16> {
    let top = ephemeral_start();
    if top > PORT_FLOOR + 1000 {
        for _ in 0..200 {
            let port = PORT_FLOOR + (rand::random::<u16>() % (top - PORT_FLOOR));
            if !taken.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                return Ok(port);
            }
        }
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free loopback port")?;
    Ok(l.local_addr()?.port())
}

/// A server process of this `loom up`. A watcher thread waits on it, so a
/// server that dies (a crash, a `kill -9` in a test) is reaped at once and
/// reported, instead of lingering as a zombie until the cluster stops.
struct Server {
    name: String,
    pid: nix::unistd::Pid,
    /// Gets the exit status once the process has ended and been reaped.
    exited: mpsc::Receiver<ExitStatus>,
}

impl Server {
    /// Wait for the process to end, up to `deadline`; true if it did.
    fn wait_until(&self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        !matches!(
            self.exited.recv_timeout(left),
            Err(mpsc::RecvTimeoutError::Timeout)
        )
    }
}

/// Reap `child` from a thread of its own; report an exit that `loom up`
/// did not ask for (`stopping` is set before the servers are stopped).
fn watch(name: &str, dir: &Path, mut child: Child, stopping: Arc<AtomicBool>) -> Server {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (tx, rx) = mpsc::channel();
    let (name2, cfg) = (
        name.to_string(),
        dir.join("nodes").join(format!("{name}.toml")),
    );
    std::thread::spawn(move || {
        if let Ok(status) = child.wait() {
            if !stopping.load(Ordering::SeqCst) {
                eprintln!(
                    "loom up: server {name2} exited ({status}); start it again with `loom server --config {}`",
                    cfg.display()
                );
            }
            let _ = tx.send(status);
        }
    });
    Server {
        name: name.to_string(),
        pid,
        exited: rx,
    }
}

/// A target directory of the shape: its name, role, index, and which
/// replica it holds.
type Named = (String, Role, u32, Option<loom_proto::replica::ReplicaOf>);

/// Every target of the shape, the MGS first; a replicated target's
/// replicas one after the other (`mdt0`, `mdt0r1`, ..., `ost0`, `ost0r1`,
/// ...), so that packing them round-robin puts each in another process.
fn names(shape: &Shape) -> Vec<Named> {
    let mut v = vec![("mgs".to_string(), Role::Mgs, 0, None)];
    let each = (0..shape.mdts)
        .map(|i| ("mdt", Role::Mdt, i))
        .chain((0..shape.osts).map(|i| ("ost", Role::Ost, i)));
    for (kind, role, i) in each {
        if shape.replicas < 2 {
            v.push((format!("{kind}{i}"), role, i, None));
            continue;
        }
        for r in 0..shape.replicas {
            let name = if r == 0 {
                format!("{kind}{i}")
            } else {
                format!("{kind}{i}r{r}")
            };
            let of = loom_proto::replica::ReplicaOf {
                replica: r,
                of: shape.replicas,
            };
            v.push((name, role, i, Some(of)));
        }
    }
    v
}

/// One server process: its name and the targets it hosts.
struct Node {
    name: String,
    targets: Vec<String>,
}

impl Node {
    /// The key of this process's port in `cluster.toml`: `mgs` for the one
    /// that hosts the MGS, so the MGS keeps its address across packings.
    fn port_key(&self) -> &str {
        if self.targets.iter().any(|t| t == "mgs") {
            "mgs"
        } else {
            &self.name
        }
    }
}

/// The server processes: one per target (named as the target), or with
/// `servers` = N the targets dealt round-robin into `server0..N-1`.
fn nodes(shape: &Shape, servers: Option<u32>) -> anyhow::Result<Vec<Node>> {
    let targets: Vec<String> = names(shape).into_iter().map(|(n, ..)| n).collect();
    let Some(n) = servers else {
        return Ok(targets
            .into_iter()
            .map(|t| Node {
                name: t.clone(),
                targets: vec![t],
            })
            .collect());
    };
    if shape.replicas >= 2 && n < shape.replicas {
        bail!(
            "--servers {n}: each MDT and OST has {} replicas, each in a server process of its own, so at least {} processes",
            shape.replicas,
            shape.replicas
        );
    }
    if n == 0 || n as usize > targets.len() {
        bail!(
            "--servers {n}: the cluster has {} targets (1 MGS, {} MDTs, {} OSTs), so 1 to {} server processes",
            targets.len(),
            shape.mdts,
            shape.osts,
            targets.len()
        );
    }
    let mut nodes: Vec<Node> = (0..n)
        .map(|i| Node {
            name: format!("server{i}"),
            targets: Vec::new(),
        })
        .collect();
    for (i, t) in targets.into_iter().enumerate() {
        nodes[i % n as usize].targets.push(t);
    }
    Ok(nodes)
}

/// Create or extend the state directory; returns the shape to run and its
/// server processes.
fn prepare(a: &UpArgs) -> anyhow::Result<(Shape, Vec<Node>)> {
    let dir = &a.dir;
    for sub in ["nodes", "targets", "logs", "pids"] {
        std::fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("creating {}", dir.join(sub).display()))?;
    }
    let shape_path = dir.join("cluster.toml");
    let mut shape = if shape_path.exists() {
        let s: Shape = toml::from_str(&std::fs::read_to_string(&shape_path)?)
            .with_context(|| format!("reading {}", shape_path.display()))?;
        if s.fsname != a.fsname && a.fsname != "loom" {
            bail!(
                "{} holds file system '{}', not '{}'",
                dir.display(),
                s.fsname,
                a.fsname
            );
        }
        if let Some(r) = a.replicas.filter(|&r| r != s.replicas) {
            bail!(
                "{} holds a file system whose targets have {} replicas, not {r}; replicas are set at the first run",
                dir.display(),
                s.replicas.max(1)
            );
        }
        if a.mdts < s.mdts || a.osts < s.osts {
            eprintln!(
                "loom up: {} already has {} MDTs and {} OSTs; keeping them all",
                dir.display(),
                s.mdts,
                s.osts
            );
        }
        Shape {
            mdts: s.mdts.max(a.mdts),
            osts: s.osts.max(a.osts),
            ..s
        }
    } else {
        loom_server::target::check_fsname(&a.fsname)?;
        Shape {
            fsname: a.fsname.clone(),
            mdts: a.mdts,
            osts: a.osts,
            replicas: a.replicas.unwrap_or(0),
            ports: Default::default(),
        }
    };
    let key = dir.join("cluster.key");
    if !key.exists() {
        crate::cluster::keygen(&key)?;
    }
    // The mount holds the client key, as a client node would.
    let client_key = dir.join("client.key");
    if !client_key.exists() {
        crate::cluster::client_keygen(&key, &client_key)?;
    }
    let nodes = nodes(&shape, a.servers)?;
    for node in &nodes {
        // Each server's port, its metrics endpoint's, and the MGS's
        // dashboard's.
        let mut keys = vec![node.port_key().to_string(), metrics_key(node)];
        if node.port_key() == "mgs" {
            keys.push("dashboard".to_string());
        }
        for key in keys {
            if !shape.ports.contains_key(&key) {
                let taken: Vec<u16> = shape.ports.values().copied().collect();
                shape.ports.insert(key, free_port(&taken)?);
            }
        }
    }
    for (name, role, index, replica) in names(&shape) {
        loom_server::target::format(
            &dir.join("targets").join(&name),
            &shape.fsname,
            role,
            index,
            replica,
            false,
        )?;
    }
    let mgs_port = shape.ports.get("mgs").copied().unwrap_or_default();
    // Configs of another packing (an earlier `--servers`) would start
    // targets twice if run by hand: only this run's nodes keep a config.
    for e in std::fs::read_dir(dir.join("nodes"))?.flatten() {
        let stem = e
            .path()
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned());
        if !nodes.iter().any(|n| Some(&n.name) == stem.as_ref()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    for node in &nodes {
        let port = shape
            .ports
            .get(node.port_key())
            .copied()
            .unwrap_or_default();
        let cfg = loom_server::node::NodeConfig {
            fsname: shape.fsname.clone(),
            listen: format!("127.0.0.1:{port}"),
            advertise: None,
            mgs: format!("127.0.0.1:{mgs_port}"),
            key_file: PathBuf::from("../cluster.key"),
            targets: node
                .targets
                .iter()
                .map(|t| PathBuf::from("../targets").join(t))
                .collect(),
            timeout_secs: a.timeout,
            recovery_window_secs: a.recovery_window,
            commit_interval_ms: a.commit_interval_ms,
            recall_timeout_ms: a.recall_timeout_ms,
            dir_split_entries: a.dir_split_entries,
            dir_split_count: a.dir_split_count,
            metrics_listen: shape
                .ports
                .get(&metrics_key(node))
                .map(|p| format!("127.0.0.1:{p}")),
            stats_expiry_secs: loom_server::stats::DEFAULT_EXPIRY.as_secs(),
            dashboard_listen: (node.port_key() == "mgs")
                .then(|| {
                    shape
                        .ports
                        .get("dashboard")
                        .map(|p| format!("127.0.0.1:{p}"))
                })
                .flatten(),
        };
        // Atomic (temporary file, fsync, rename): a crash while writing
        // must not leave a half file that stops the next `loom up`.
        let path = dir.join("nodes").join(format!("{}.toml", node.name));
        loom_store::durable::write_atomic(&path, toml::to_string(&cfg)?.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    loom_store::durable::write_atomic(&shape_path, toml::to_string(&shape)?.as_bytes())
        .with_context(|| format!("writing {}", shape_path.display()))?;
    Ok((shape, nodes))
}

/// The key of `node`'s metrics endpoint in the state's ports.
fn metrics_key(node: &Node) -> String {
    format!("metrics-{}", node.port_key())
}

/// A server could not listen on a port `loom up` chose: another process
/// (another cluster, a test's own server) took it between the choice and
/// the bind. New ports are chosen and the servers started again.
#[derive(Debug)]
struct PortTaken(String);

impl std::fmt::Display for PortTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "server {}: a port chosen for it was taken meanwhile",
            self.0
        )
    }
}

impl std::error::Error for PortTaken {}

/// How many times `loom up` chooses new ports when one was taken.
const PORT_RETRIES: u32 = 3;

/// Forget the ports `cluster.toml` records, so that `prepare` chooses new
/// ones.
fn forget_ports(dir: &Path) -> anyhow::Result<()> {
    let path = dir.join("cluster.toml");
    let mut shape: Shape = toml::from_str(&std::fs::read_to_string(&path)?)
        .with_context(|| format!("reading {}", path.display()))?;
    shape.ports.clear();
    loom_store::durable::write_atomic(&path, toml::to_string(&shape)?.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// Start `loom server` for node `name`; returns once it serves.
fn start_server(dir: &Path, name: &str, stopping: &Arc<AtomicBool>) -> anyhow::Result<Server> {
    let exe = std::env::current_exe().context("finding the loom binary")?;
    let log_path = dir.join("logs").join(format!("{name}.log"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    // What this start writes to the log begins here (it is appended to).
    let log_from = log.metadata().map(|m| m.len()).unwrap_or(0);
    let mut child = Command::new(exe)
        .arg("server")
        .arg("--config")
        .arg(dir.join("nodes").join(format!("{name}.toml")))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        // Own process group: Ctrl-C reaches `loom up` only, which then
        // unmounts before it stops the servers.
        .process_group(0)
        .spawn()
        .with_context(|| format!("starting server {name}"))?;
    std::fs::write(
        dir.join("pids").join(format!("{name}.pid")),
        child.id().to_string(),
    )?;
    let out = child.stdout.take().context("server stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.starts_with("loom server: serving") {
                let _ = tx.send(line);
            }
        }
    });
    match rx.recv_timeout(START_TIMEOUT) {
        Ok(line) => {
            println!("{name}: {}", line.trim_start_matches("loom server: "));
            Ok(watch(name, dir, child, stopping.clone()))
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            let said = std::fs::read(&log_path).unwrap_or_default();
            let said = String::from_utf8_lossy(said.get(log_from as usize..).unwrap_or_default());
            if said.contains("Address already in use") {
                return Err(PortTaken(name.to_string()).into());
            }
            bail!(
                "server {name} did not start; see {}",
                dir.join("logs").join(format!("{name}.log")).display()
            )
        }
    }
}

fn stop_servers(servers: &[Server], stopping: &AtomicBool) {
    stopping.store(true, Ordering::SeqCst);
    let ended = |s: &Server| !matches!(s.exited.try_recv(), Err(mpsc::TryRecvError::Empty));
    // Signal only processes not yet reaped: a reaped pid may be reused.
    let running: Vec<&Server> = servers.iter().filter(|s| !ended(s)).collect();
    for s in &running {
        let _ = nix::sys::signal::kill(s.pid, nix::sys::signal::Signal::SIGTERM);
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    for s in running {
        if !s.wait_until(deadline) {
            eprintln!("loom up: {} did not stop; killing it", s.name);
            let _ = nix::sys::signal::kill(s.pid, nix::sys::signal::Signal::SIGKILL);
            s.wait_until(Instant::now() + STOP_TIMEOUT);
        }
    }
}

pub fn up(a: UpArgs) -> anyhow::Result<()> {
    if let Some(pid) = read_pid(&a.dir.join("up.pid")) {
        if alive(pid) {
            bail!("a `loom up` (pid {pid}) is already running on {}; stop it with `loom down --dir {}`", a.dir.display(), a.dir.display());
        }
    }
    let (mut shape, mut nodes) = prepare(&a)?;
    std::fs::write(a.dir.join("up.pid"), std::process::id().to_string())?;
    let mut servers = Vec::new();
    let stopping = Arc::new(AtomicBool::new(false));
    let result = (|| -> anyhow::Result<()> {
        let mut tries = 0;
        loop {
            let started = nodes.iter().try_for_each(|node| {
                servers.push(start_server(&a.dir, &node.name, &stopping)?);
                Ok::<_, anyhow::Error>(())
            });
            match started {
                Ok(()) => break,
                Err(e) if tries < PORT_RETRIES && e.downcast_ref::<PortTaken>().is_some() => {
                    tries += 1;
                    eprintln!("loom up: {e}; choosing new ports");
                    stop_servers(&servers, &stopping);
                    servers.clear();
                    stopping.store(false, Ordering::SeqCst);
                    forget_ports(&a.dir)?;
                    (shape, nodes) = prepare(&a)?;
                }
                Err(e) => return Err(e),
            }
        }
        let mgs = format!(
            "127.0.0.1:{}",
            shape.ports.get("mgs").copied().unwrap_or_default()
        );
        println!(
            "file system '{}' is up: MGS at {mgs}, {}, {} in {} (state in {})",
            shape.fsname,
            counted(shape.mdts as usize, "MDT"),
            counted(shape.osts as usize, "OST"),
            counted(nodes.len(), "server process"),
            a.dir.display()
        );
        let plan = MountPlan {
            mgs,
            fsname: shape.fsname.clone(),
            key_file: a.dir.join("client.key"),
            mountpoint: a.mount.clone(),
            timeout: Duration::from_secs(a.timeout),
            attr_timeout: Duration::from_secs_f64(a.attr_timeout),
            lease_time: mount::lease_time(a.lease_time),
            readahead_kb: a.readahead_kb,
            allow_other: mount::serves_everyone(a.private).0,
            jobid_var: loom_client::ClientOptions::default().jobid_var,
            metrics_listen: None,
            source: None,
            snapshot: None,
            snapdir: Some(".snapshots".to_string()),
            write_back: false,
            wb_quota_trust: loom_client::ClientOptions::default().wb_quota_trust,
        };
        if a.no_mount {
            println!(
                "servers running; stop with Ctrl-C or `loom down --dir {}`",
                a.dir.display()
            );
            mount::wait_for_signal_blocking()
        } else {
            mount::mount_and_serve(&plan, || {
                println!("mounted at {}", a.mount.display());
                println!("stop with Ctrl-C or `loom down --dir {}`", a.dir.display());
            })
        }
    })();
    stop_servers(&servers, &stopping);
    let _ = std::fs::remove_file(a.dir.join("up.pid"));
    for s in &servers {
        let _ = std::fs::remove_file(a.dir.join("pids").join(format!("{}.pid", s.name)));
    }
    result
}

fn read_pid(p: &Path) -> Option<i32> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// Whether `pid` still runs. A zombie (ended, not yet reaped by a parent
/// that is not `loom down`) does not: `kill(pid, 0)` alone would wait for
/// it forever.
fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok() && !zombie(pid)
}

/// The process state in `/proc/PID/stat` is `Z` (the field after the
/// command name, which is in parentheses and may hold spaces).
fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let after = &s[s.rfind(')')? + 1..];
            after.split_whitespace().next().map(|st| st == "Z")
        })
        .unwrap_or(false)
}

fn wait_gone(pid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

pub fn down(a: DownArgs) -> anyhow::Result<()> {
    if !a.dir.join("cluster.toml").exists() {
        bail!("{} is not a `loom up` state directory", a.dir.display());
    }
    let term = |pid: i32| {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    };
    if let Some(pid) = read_pid(&a.dir.join("up.pid")).filter(|p| alive(*p)) {
        term(pid);
        if !wait_gone(pid, STOP_TIMEOUT * 2) {
            bail!(
                "`loom up` (pid {pid}) did not stop within {:?}",
                STOP_TIMEOUT * 2
            );
        }
        println!("stopped");
        return Ok(());
    }
    // `loom up` is gone (killed?): stop whatever it left behind.
    let mut n = 0;
    for e in std::fs::read_dir(a.dir.join("pids"))?.flatten() {
        if let Some(pid) = read_pid(&e.path()).filter(|p| alive(*p)) {
            term(pid);
            if !wait_gone(pid, STOP_TIMEOUT) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            n += 1;
        }
        let _ = std::fs::remove_file(e.path());
    }
    crate::registry::unmount_stale_for_state(&a.dir);
    println!("stopped {n} leftover server(s)");
    Ok(())
}

/// "1 MDT", "2 MDTs", "3 server processes".
fn counted(n: usize, what: &str) -> String {
    match (n, what.ends_with('s')) {
        (1, _) => format!("1 {what}"),
        (_, true) => format!("{n} {what}es"),
        _ => format!("{n} {what}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::{counted, names, nodes, Shape};

    #[test]
    fn every_replica_of_a_target_runs_in_a_process_of_its_own() {
        let shape = Shape {
            fsname: "loom".into(),
            mdts: 2,
            osts: 3,
            replicas: 2,
            ports: Default::default(),
        };
        let named: Vec<String> = names(&shape).into_iter().map(|n| n.0).collect();
        assert_eq!(
            named,
            [
                "mgs", "mdt0", "mdt0r1", "mdt1", "mdt1r1", "ost0", "ost0r1", "ost1", "ost1r1",
                "ost2", "ost2r1"
            ]
        );
        for servers in [2, 3, 5, 11] {
            for node in nodes(&shape, Some(servers)).expect("packed") {
                let bases: Vec<&str> = node
                    .targets
                    .iter()
                    .map(|t| t.split('r').next().unwrap_or(t))
                    .collect();
                let mut unique = bases.clone();
                unique.sort_unstable();
                unique.dedup();
                assert_eq!(
                    unique.len(),
                    bases.len(),
                    "{servers} processes: {:?}",
                    node.targets
                );
            }
        }
        assert!(
            nodes(&shape, Some(1)).is_err(),
            "two replicas need two processes"
        );
    }

    #[test]
    fn counts_read_as_english() {
        assert_eq!(counted(1, "MDT"), "1 MDT");
        assert_eq!(counted(4, "OST"), "4 OSTs");
        assert_eq!(counted(1, "server process"), "1 server process");
        assert_eq!(counted(7, "server process"), "7 server processes");
    }
}
