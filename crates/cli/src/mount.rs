//! `loom mount` and `loom umount`, and the mount loop `loom up` shares.

use crate::registry;
use anyhow::{bail, Context};
use clap::Args;
use loom_client::{Client, ClientOptions};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Options of `loom mount`.
#[derive(Args)]
pub struct MountArgs {
    /// What to mount: MGS_ADDR:/FSNAME, e.g. 10.0.0.1:7000:/scratch.
    pub source: String,
    /// Where to mount it.
    pub dir: PathBuf,
    /// Cluster key file [default: /etc/loom/FSNAME.key].
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// Seconds an operation waits for an unreachable server before it fails with EIO.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Seconds the kernel may cache attributes and names (fractions allowed).
    /// Opens always see what other mounts wrote and closed (close-to-open);
    /// a stat may show another mount's change up to this late. Within it,
    /// stats and lookups of this mount's own changes need no server. 0:
    /// every stat asks the MDT.
    #[arg(long, default_value_t = 1.0, value_parser = parse_seconds)]
    pub attr_timeout: f64,
    /// Seconds the kernel may cache attributes and names the MDTs lease
    /// to this mount (fractions allowed). An MDT recalls a lease before
    /// another mount's change to what it covers, and this mount drops it
    /// first, so a stat shows other mounts' changes at once. Under a
    /// lease an open needs no server and a file's pages stay cached
    /// across opens. 0: take no leases (everything cached for
    /// --attr-timeout only, every open asks the MDT and drops the pages).
    #[arg(long, default_value_t = DEFAULT_LEASE_TIME, value_parser = parse_seconds)]
    pub lease_time: f64,
    /// Kernel readahead for the mount, in KiB (0: keep the kernel's 128).
    #[arg(long, default_value_t = loom_fuse::DEFAULT_READAHEAD_KB)]
    pub readahead_kb: u32,
    /// Stay in the foreground (otherwise `mount` returns once mounted and a
    /// background process serves the mount).
    #[arg(long, short)]
    pub foreground: bool,
    /// Log file of the background process [default: /var/log/loom/mount-<dir>.log,
    /// for a user other than root /tmp/loom-UID/mount-<dir>.log].
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// Serve only the user who mounts. By default the mount serves every
    /// user of the machine (FUSE's allow_other), as a Lustre client mount
    /// does, with POSIX permissions checked by the kernel and by the MDTs;
    /// a user other than root gets that only where /etc/fuse.conf has
    /// `user_allow_other` (otherwise its mount is private, and says so).
    #[arg(long)]
    pub private: bool,
    /// Environment variable naming a process's job (per-job statistics,
    /// `loom jobstats`); PBS_JOBID, LSB_JOBID and JOB_ID are tried after
    /// it, then PROCNAME.UID. Empty: requests carry no job id.
    #[arg(long, value_name = "VAR", default_value = "SLURM_JOB_ID")]
    pub jobid_var: String,
    /// Serve this mount's own metrics (requests by target kind, in
    /// flight, resends, damaged transfers, lookups answered from leases)
    /// in the Prometheus text format at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// The local address the mount's connections leave from: on a node
    /// with several networks, the one the servers know it by (and so the
    /// nodemap it is served under, see `loom nodemap`). Default: the
    /// system's choice.
    #[arg(long, value_name = "IP")]
    pub source_addr: Option<std::net::IpAddr>,
    /// Mount snapshot NAME of the file system instead (`loom snapshot
    /// list`), read-only.
    #[arg(long, value_name = "NAME")]
    pub snapshot: Option<String>,
    /// The hidden directory in the mount's root where users find every
    /// snapshot read-only, as it was (`ls MOUNT/.snapshots/NAME`);
    /// `none` for none.
    #[arg(long, value_name = "NAME", default_value = ".snapshots", value_parser = parse_snapdir)]
    pub snapdir: String,
    /// Write back the directories this mount makes (needs leases): in
    /// them, creates, mkdirs, symlinks, chmod/chown/utimens, small files'
    /// first bytes and removals are answered at once and sent to the MDTs
    /// in batches, within a second, at fsync, or as soon as another
    /// mount looks at the directory. A crash of this mount loses what was
    /// not sent or fsynced, as a local file system's crash does.
    #[arg(long)]
    pub write_back: bool,
    /// With --write-back: how long an MDT's answer on room is trusted
    /// before it is asked again: how many more inodes a user, group or
    /// project may own, and how many bytes of new files' Data-on-MDT
    /// bytes fit (its free space, their block quota). Creates and writes
    /// past it fail with EDQUOT or ENOSPC at once; within it, another
    /// mount may take the room first, and the MDT's refusal is then
    /// reported at the next fsync or close. 0 asks at every create.
    #[arg(long, default_value_t = 2.0, value_parser = parse_seconds, value_name = "SECONDS")]
    pub wb_quota_trust: f64,
}

/// A snapshot directory's name: one name, not `.` or `..`.
fn parse_snapdir(s: &str) -> Result<String, String> {
    if s.is_empty() || s == "." || s == ".." || s.contains('/') || s.len() > 255 {
        return Err(format!("{s:?}: one name (no '/'), or none"));
    }
    Ok(s.to_string())
}

/// Seconds a mount keeps what its MDTs lease it, by default.
pub const DEFAULT_LEASE_TIME: f64 = 300.0;

/// Whether a mount serves every user: unless asked to be private, root's
/// mounts do, and another user's where /etc/fuse.conf allows it
/// (fusermount3 refuses `allow_other` to users otherwise). The reason is
/// returned when a mount ends up private without being asked.
pub fn serves_everyone(private: bool) -> (bool, Option<String>) {
    if private {
        return (false, None);
    }
    if nix::unistd::geteuid().is_root() {
        return (true, None);
    }
    let conf = std::fs::read_to_string("/etc/fuse.conf").unwrap_or_default();
    let allowed = conf
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .any(|l| l == "user_allow_other");
    if allowed {
        (true, None)
    } else {
        (
            false,
            Some(
                "this mount serves only its own user: /etc/fuse.conf does not have \
                 user_allow_other (add it, or mount as root, to serve every user)"
                    .to_string(),
            ),
        )
    }
}

/// Everything needed to serve one mount.
pub struct MountPlan {
    /// MGS address.
    pub mgs: String,
    /// File system name.
    pub fsname: String,
    /// Cluster key file.
    pub key_file: PathBuf,
    /// Mount point.
    pub mountpoint: PathBuf,
    /// RPC deadline.
    pub timeout: Duration,
    /// How long the kernel may cache attributes and names.
    pub attr_timeout: Duration,
    /// How long the kernel may keep what is leased (`None`: no leases).
    pub lease_time: Option<Duration>,
    /// Kernel readahead in KiB (0: the kernel's default).
    pub readahead_kb: u32,
    /// Serve every user of the machine (allow_other), not only the mounter.
    pub allow_other: bool,
    /// The environment variable that names a process's job.
    pub jobid_var: String,
    /// Where to serve the mount's metrics, if anywhere.
    pub metrics_listen: Option<String>,
    /// The local address connections leave from.
    pub source: Option<std::net::IpAddr>,
    /// The snapshot to mount (read-only) instead of the file system.
    pub snapshot: Option<String>,
    /// Where users find the snapshots (`None`: nowhere).
    pub snapdir: Option<String>,
    /// Write back the directories the mount makes.
    pub write_back: bool,
    /// How long the write-back layer trusts a quota answer.
    pub wb_quota_trust: Duration,
}

/// Seconds, 0 to one hour, fractions allowed.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.0..=3600.0).contains(&v) {
        return Err(format!("{v} s is out of range (0 to 3600)"));
    }
    Ok(v)
}

/// `--lease-time` as the client takes it: 0 is no leases.
pub fn lease_time(secs: f64) -> Option<Duration> {
    (secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

/// Split "ADDR:/FSNAME" (the address may itself hold colons).
pub fn parse_source(s: &str) -> anyhow::Result<(String, String)> {
    let Some((addr, fs)) = s.rsplit_once(":/") else {
        bail!("mount source {s:?} must look like MGS_ADDR:/FSNAME, e.g. 127.0.0.1:7000:/loom");
    };
    if addr.is_empty() || fs.is_empty() || fs.contains('/') {
        bail!("mount source {s:?} must look like MGS_ADDR:/FSNAME, e.g. 127.0.0.1:7000:/loom");
    }
    Ok((addr.to_string(), fs.to_string()))
}

/// A client's own metrics, in the Prometheus text format.
fn client_metrics(c: &Client) -> String {
    use loom_server::metrics::help;
    use std::fmt::Write as _;
    let r = c.router();
    let (mdt, ost) = r.calls();
    let rpc = r.rpc_stats();
    let mut out = String::new();
    help(
        &mut out,
        "loom_client_requests_total",
        "counter",
        "Requests this mount sent, by kind of target (resends not counted).",
    );
    let _ = writeln!(out, "loom_client_requests_total{{role=\"mdt\"}} {mdt}");
    let _ = writeln!(out, "loom_client_requests_total{{role=\"ost\"}} {ost}");
    help(
        &mut out,
        "loom_client_operations_total",
        "counter",
        "Requests this mount sent, by operation (resends not counted).",
    );
    for (op, n) in r.ops_sent() {
        let _ = writeln!(out, "loom_client_operations_total{{op=\"{op}\"}} {n}");
    }
    for (name, kind, text, v) in [
        ("loom_client_requests_in_flight", "gauge", "Requests sent and not answered yet.", r.requests_in_flight()),
        ("loom_client_resends_total", "counter", "Requests sent again (a connection lost, a transfer damaged).", rpc.resends),
        ("loom_client_damaged_transfers_total", "counter", "Bulk transfers damaged on the wire and sent again.", rpc.damaged),
        ("loom_client_connects_total", "counter", "Connections made to servers.", rpc.connects),
        ("loom_client_probes_total", "counter", "Liveness probes of quiet connections.", rpc.probes),
        ("loom_client_lease_hits_total", "counter", "Lookups and stats this mount answered from its leases and own changes, with no server asked (the kernel answers more from its own cache, unseen).", r.lease_hits()),
    ] {
        help(&mut out, name, kind, text);
        let _ = writeln!(out, "{name} {v}");
    }
    out
}

enum Event {
    Signal,
    Ended,
}

/// The number of snapshot `name` of the plan's file system.
async fn snapshot_id(
    plan: &MountPlan,
    key: &loom_rpc::ClusterKey,
    opts: &ClientOptions,
    name: &str,
) -> anyhow::Result<u32> {
    let c = Client::connect(&plan.mgs, &plan.fsname, key.clone(), opts.clone())
        .await
        .with_context(|| format!("connecting to {}:/{}", plan.mgs, plan.fsname))?;
    let snaps = c
        .snapshots(&loom_client::Caller::current())
        .await
        .map_err(|e| crate::tools::errno(e, "listing the snapshots"))?;
    match snaps
        .iter()
        .find(|s| s.name == name && s.state == loom_proto::snapshot::SnapState::Ready)
    {
        Some(s) => Ok(s.id),
        None => bail!(
            "{}:/{} has no snapshot {name:?} (loom snapshot list shows them)",
            plan.mgs,
            plan.fsname
        ),
    }
}

/// Mount, call `ready`, and serve until SIGINT/SIGTERM or an external
/// unmount; then unmount and return.
pub fn mount_and_serve(plan: &MountPlan, ready: impl FnOnce()) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let key = loom_server::node::load_key(&plan.key_file)?;
    let opts = ClientOptions {
        call_timeout: plan.timeout,
        jobid_var: plan.jobid_var.clone(),
        caching: loom_client::routing::Caching {
            attr_timeout: plan.attr_timeout,
            lease_time: plan.lease_time,
        },
        // The kernel reads ahead for the mount.
        readahead: false,
        source: plan.source,
        write_back: plan.write_back,
        wb_quota_trust: plan.wb_quota_trust,
        ..ClientOptions::default()
    };
    let snapshot = match &plan.snapshot {
        None => None,
        Some(name) => Some(rt.block_on(snapshot_id(plan, &key, &opts, name))?),
    };
    let opts = ClientOptions { snapshot, ..opts };
    let client = rt
        .block_on(Client::connect(&plan.mgs, &plan.fsname, key, opts))
        .with_context(|| format!("connecting to {}:/{}", plan.mgs, plan.fsname))?;
    if let Some(m) = &plan.metrics_listen {
        let l = rt
            .block_on(tokio::net::TcpListener::bind(m))
            .with_context(|| format!("metrics endpoint: listening on {m}"))?;
        let c = client.clone();
        rt.spawn(loom_server::metrics::serve_text(
            l,
            std::sync::Arc::new(move || client_metrics(&c)),
        ));
    }
    std::fs::create_dir_all(&plan.mountpoint)
        .with_context(|| format!("creating mount point {}", plan.mountpoint.display()))?;
    let mountpoint = plan.mountpoint.canonicalize()?;
    // The file system's root, or the fileset this client's nodemap
    // confines it to.
    let root = rt
        .block_on(client.root())
        .map_err(|e| crate::tools::errno(e, "asking the MDT for this client's root"))?;
    let fopts = loom_fuse::MountOptions {
        root,
        fsname: format!("{}:/{}", plan.mgs, plan.fsname),
        attr_timeout: plan.attr_timeout,
        readahead_kb: (plan.readahead_kb > 0).then_some(plan.readahead_kb),
        allow_other: plan.allow_other,
        read_only: snapshot.is_some(),
        snapdir: plan.snapdir.as_ref().map(|n| n.as_bytes().to_vec()),
        ..loom_fuse::MountOptions::default()
    };
    let ours = client.clone();
    let session = loom_fuse::mount(client, rt.handle().clone(), &mountpoint, fopts)
        .with_context(|| format!("mounting on {}", mountpoint.display()))?;
    registry::add(&registry::Entry {
        mountpoint: mountpoint.clone(),
        mgs: plan.mgs.clone(),
        fsname: plan.fsname.clone(),
        key_file: plan
            .key_file
            .canonicalize()
            .unwrap_or_else(|_| plan.key_file.clone()),
        pid: std::process::id(),
    })?;
    let (tx, rx) = mpsc::channel();
    let tx2 = tx.clone();
    rt.spawn(async move {
        if wait_for_signal().await.is_ok() {
            let _ = tx.send(Event::Signal);
        }
    });
    let joiner = std::thread::spawn(move || {
        let _ = session.join();
        let _ = tx2.send(Event::Ended);
    });
    ready();
    let first = rx.recv();
    if matches!(first, Ok(Event::Signal)) {
        unmount(&mountpoint)?;
        // The session ends once the kernel lets go of the mount.
        let _ = rx.recv_timeout(Duration::from_secs(30));
    }
    let _ = joiner.join();
    registry::remove(&mountpoint);
    // Commit what the mount changed and leave the MDTs' recovery.
    rt.block_on(ours.close());
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}

fn unmount(dir: &Path) -> anyhow::Result<()> {
    match nix::mount::umount2(dir, nix::mount::MntFlags::empty()) {
        Ok(()) => Ok(()),
        // A user other than root unmounts its own mounts through the
        // setuid fusermount3, as it mounted them (lazily if busy).
        Err(nix::errno::Errno::EPERM) if !nix::unistd::geteuid().is_root() => {
            let out = Command::new("fusermount3")
                .arg("-u")
                .arg("-z")
                .arg(dir)
                .output()
                .context("running fusermount3 -u (is the fuse3 package installed?)")?;
            if out.status.success() {
                Ok(())
            } else {
                bail!(
                    "unmounting {}: {}",
                    dir.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                )
            }
        }
        // Busy (a shell sits in it): detach now, the kernel finishes when
        // the last user leaves.
        Err(nix::errno::Errno::EBUSY) => nix::mount::umount2(dir, nix::mount::MntFlags::MNT_DETACH)
            .with_context(|| format!("unmounting {}", dir.display())),
        Err(e) => Err(e).with_context(|| format!("unmounting {}", dir.display())),
    }
}

async fn wait_for_signal() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}

/// Block until SIGINT or SIGTERM.
pub fn wait_for_signal_blocking() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(wait_for_signal())?;
    Ok(())
}

pub fn mount(a: MountArgs) -> anyhow::Result<()> {
    let (mgs, fsname) = parse_source(&a.source)?;
    let key_file = a
        .key_file
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("/etc/loom/{fsname}.key")));
    if !key_file.exists() {
        bail!(
            "cluster key file {} does not exist (give it with --key-file)",
            key_file.display()
        );
    }
    if a.foreground {
        let (allow_other, why_private) = serves_everyone(a.private);
        if let Some(why) = why_private {
            eprintln!("loom mount: {why}");
        }
        let plan = MountPlan {
            mgs,
            fsname,
            key_file,
            mountpoint: a.dir.clone(),
            timeout: Duration::from_secs(a.timeout),
            attr_timeout: Duration::from_secs_f64(a.attr_timeout),
            lease_time: lease_time(a.lease_time),
            readahead_kb: a.readahead_kb,
            allow_other,
            jobid_var: a.jobid_var.clone(),
            metrics_listen: a.metrics_listen.clone(),
            source: a.source_addr,
            snapshot: a.snapshot.clone(),
            snapdir: (a.snapdir != "none").then(|| a.snapdir.clone()),
            write_back: a.write_back,
            wb_quota_trust: Duration::from_secs_f64(a.wb_quota_trust),
        };
        if a.write_back && plan.lease_time.is_none() {
            anyhow::bail!("--write-back needs leases: give --lease-time above 0");
        }
        return mount_and_serve(&plan, || println!("mounted at {}", a.dir.display()));
    }
    // Background: run ourselves in the foreground as a child, in its own
    // process group, and return once it reports the mount is up.
    let log = a.log.clone().unwrap_or_else(|| {
        let name: String = a
            .dir
            .to_string_lossy()
            .chars()
            .map(|c| if c == '/' { '_' } else { c })
            .collect();
        let uid = nix::unistd::geteuid();
        if uid.is_root() {
            PathBuf::from(format!("/var/log/loom/mount{name}.log"))
        } else {
            PathBuf::from(format!("/tmp/loom-{uid}/mount{name}.log"))
        }
    });
    if let Some(d) = log.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let logf = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)?;
    let mut child = Command::new(std::env::current_exe()?)
        .arg("mount")
        .arg(&a.source)
        .arg(&a.dir)
        .arg("--key-file")
        .arg(&key_file)
        .arg("--timeout")
        .arg(a.timeout.to_string())
        .arg("--attr-timeout")
        .arg(a.attr_timeout.to_string())
        .arg("--lease-time")
        .arg(a.lease_time.to_string())
        .arg("--readahead-kb")
        .arg(a.readahead_kb.to_string())
        .args(a.private.then_some("--private"))
        .arg(format!("--jobid-var={}", a.jobid_var))
        .args(
            a.metrics_listen
                .iter()
                .map(|m| format!("--metrics-listen={m}")),
        )
        .args(a.source_addr.iter().map(|s| format!("--source-addr={s}")))
        .args(a.snapshot.iter().map(|s| format!("--snapshot={s}")))
        .arg(format!("--snapdir={}", a.snapdir))
        .args(a.write_back.then_some("--write-back"))
        .arg(format!("--wb-quota-trust={}", a.wb_quota_trust))
        .arg("--foreground")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(logf)
        .process_group(0)
        .spawn()?;
    let out = child.stdout.take().context("child stdout")?;
    let mut lines = BufReader::new(out).lines();
    match lines.next() {
        Some(Ok(l)) if l.starts_with("mounted at") => {
            println!("{l} (served by pid {}, log {})", child.id(), log.display());
            Ok(())
        }
        _ => {
            let _ = child.wait();
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = tail.lines().rev().take(5).collect();
            bail!(
                "mount failed: {}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        }
    }
}

pub fn umount(dir: &Path) -> anyhow::Result<()> {
    let canon = dir
        .canonicalize()
        .with_context(|| format!("{}", dir.display()))?;
    let entry = registry::all().into_iter().find(|e| e.mountpoint == canon);
    unmount(&canon)?;
    if let Some(e) = entry {
        // Wait for the serving process to finish so that a following
        // command sees everything settled.
        let pid = nix::unistd::Pid::from_raw(e.pid as i32);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while nix::sys::signal::kill(pid, None).is_ok() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_split_at_the_last_colon_slash() {
        assert_eq!(
            parse_source("127.0.0.1:7000:/loom").expect("ok"),
            ("127.0.0.1:7000".to_string(), "loom".to_string())
        );
        assert!(parse_source("127.0.0.1:7000").is_err());
        assert!(parse_source(":/x").is_err());
        assert!(parse_source("a:/b/c").is_err());
    }
}
