//! `loom`: the one binary of loomfs.
//!
//! Servers (`server`, `format`), a whole local cluster (`up`, `down`),
//! client mounts (`mount`, `umount`), the no-op FUSE reference file
//! system (`mount-noop`), lfs-style tools (`setstripe`, `getstripe`, `df`)
//! and the benchmark suite (`bench`).

mod balance;
mod changelog;
mod cluster;
mod datamigrate;
mod dirtools;
mod find;
mod fsck;
mod jobstats;
mod migrate;
mod mount;
mod nodemap;
mod noop;
mod params;
mod policy;
mod pool;
mod project;
mod quota;
mod registry;
mod replicate;
mod scrub;
mod sendrecv;
mod snapshot;
mod stats;
mod target;
mod tools;
mod up;
mod via_mount;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// loomfs: a parallel file system in user space.
#[derive(Parser)]
#[command(name = "loom", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start a whole cluster on this machine (MGS, MDTs, OSTs as separate
    /// server processes on loopback) and mount it; Ctrl-C stops it all.
    Up(up::UpArgs),
    /// Stop a cluster started by `loom up --dir STATE`.
    Down(up::DownArgs),
    /// Run a server hosting the targets listed in its config file.
    Server {
        /// The node's config file (see docs/OPERATIONS.md).
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Initialise a target directory (MGS, MDT or OST) for a file system.
    Format(cluster::FormatArgs),
    /// Write a new random cluster key file (for servers), or with
    /// `--client-from` the client key of a cluster key (for client nodes:
    /// it mounts and runs the tools, but cannot act as a server).
    Keygen {
        /// Where to write the key (refuses to overwrite).
        path: PathBuf,
        /// Derive the client key of this cluster key file instead.
        #[arg(long, value_name = "CLUSTER_KEY")]
        client_from: Option<PathBuf>,
    },
    /// Mount a file system: `loom mount MGS_ADDR:/FSNAME DIR`.
    Mount(mount::MountArgs),
    /// Mount the no-op in-memory FUSE file system, a benchmark reference
    /// ("the FUSE ceiling"): `loom mount-noop DIR`.
    #[command(long_about = noop::LONG_ABOUT)]
    MountNoop(noop::MountNoopArgs),
    /// Unmount a loomfs mount.
    Umount {
        /// The mount point.
        dir: PathBuf,
    },
    /// Set the striping of a new file, or the default of a directory.
    Setstripe(tools::SetstripeArgs),
    /// Show the striping of a file (and where every stripe lives) or the
    /// default striping of a directory.
    Getstripe(tools::GetstripeArgs),
    /// Show space (or inode) usage per target and in total, like `lfs df`.
    Df(tools::DfArgs),
    /// Make directories on a chosen MDT (`-i`, a remote directory) or
    /// striped over several (`-c`), like `lfs mkdir`.
    Mkdir(dirtools::MkdirArgs),
    /// Make a directory striped over MDTs: `loom setdirstripe -c N [-i S]
    /// DIR` (the same as `loom mkdir -c N [-i S] DIR`).
    Setdirstripe(dirtools::MkdirArgs),
    /// Show where a directory lives: its MDT and, if striped, its shards.
    Getdirstripe(dirtools::GetdirstripeArgs),
    /// Find files and directories by name, type, size, times, owner,
    /// project, pool, striping, layout, MDT and OST, as `lfs find` and GNU
    /// find: `loom find PATH... [TESTS]`. The MDTs scan their entries in
    /// parallel; any user, on what they may list.
    Find(find::FindArgs),
    /// Move files' data onto new objects of another layout (`loom migrate
    /// [-c N] [-S SIZE] [-p POOL] [-E ...] FILE|DIR...`), or directory
    /// trees (entries and inodes, no file data) to other MDTs (`loom
    /// migrate -m MDT[,MDT...] DIR...`), while they are in use, like
    /// `lfs migrate`.
    Migrate(migrate::MigrateArgs),
    /// Move files off the fullest OSTs onto the emptiest, while in use,
    /// until every OST's fill is within a tolerance of the others': `loom
    /// balance MOUNT [--tolerance PCT] [--max-fill PCT] [--rate MB/s]`
    /// (root).
    Balance(balance::BalanceArgs),
    /// Verify every block of every object against its checksum, in the
    /// servers, and list the bad ones: `loom scrub MOUNT [--rate MB/s]`.
    Scrub(scrub::ScrubArgs),
    /// Find OST objects no file refers to (left by crashes), report them
    /// with their sizes, and with --repair reclaim them: `loom fsck
    /// [--repair] MOUNT`.
    Fsck(fsck::FsckArgs),
    /// The jobs (or clients) each MDT and OST served recently, busiest
    /// first, as Lustre's job_stats: `loom jobstats MOUNT [--by bytes]`.
    Jobstats(jobstats::JobstatsArgs),
    /// Every target's counters: operations (samples, errors, latency,
    /// bytes), jobs and clients, in YAML or JSON, as `lctl get_param
    /// *.*.stats`: `loom stats MOUNT [--target T] [--job J] [--json]`.
    Stats(stats::StatsArgs),
    /// A live view of the busiest targets, jobs and clients, refreshed
    /// every few seconds, as iotop: `loom top MOUNT`.
    Top(stats::TopArgs),
    /// Read each MDT's record of namespace changes, and register, clear
    /// and remove its consumers, as Lustre's changelog: `loom changelog
    /// MOUNT [--mdt N] [--since REC] [--follow] [--mask TYPES] [--json]`,
    /// `loom changelog register|clear|deregister|users ...`.
    Changelog(changelog::ChangelogArgs),
    /// Inodes held per user, group and project, as `lfs quota`:
    /// `loom quota [-u USER|-g GROUP|-p PROJID] [-v] MOUNT`; `loom quota
    /// --check MOUNT` recounts every MDT and reports drift.
    Quota(quota::QuotaArgs),
    /// Set inode limits of a user, group or project, as `lfs setquota`:
    /// `loom setquota -u USER|-g GROUP|-p PROJID [-i SOFT] [-I HARD]
    /// [--grace SECS] MOUNT` (root).
    Setquota(quota::SetquotaArgs),
    /// Project ids of files and directory trees, as `lfs project`: `loom
    /// project -p ID [-s] [-r] PATH...` sets (root), `loom project [-d]
    /// [-r] PATH...` lists, `-C` clears.
    Project(project::ProjectArgs),
    /// Set site parameters on the MGS, read by every target within
    /// seconds (root): `loom set-param MOUNT NAME=VALUE...`.
    SetParam(params::SetParamArgs),
    /// Show the site parameters: `loom get-param MOUNT [NAME...]`.
    GetParam(params::GetParamArgs),
    /// Nodemaps: what the servers make of each client network's requests
    /// (root squash, id maps, read-only), as Lustre's: `loom nodemap
    /// set|del|list MOUNT ...` (root).
    #[command(subcommand)]
    Nodemap(nodemap::NodemapCmd),
    /// OST pools, named sets of OSTs that `setstripe -p POOL` draws new
    /// files' objects from, as Lustre's `lctl pool_*`: `loom pool
    /// new|add|remove|destroy MOUNT POOL [OST...]` (root), `loom pool
    /// list MOUNT [POOL]`.
    #[command(subcommand)]
    Pool(pool::PoolCmd),
    /// The policy engine, as RobinHood for Lustre: a catalog of every
    /// inode (SQLite, or PostgreSQL) filled by a scan of every MDT and
    /// kept current by their changelogs, reports from it, and rules that
    /// purge, migrate and alert (root): `loom policy scan MOUNT`, then
    /// `follow`, `report`, `check`, `run`, `dump` or `forget`.
    #[command(subcommand)]
    Policy(policy::PolicyCmd),
    /// Snapshots of the whole file system, copy-on-write, taken on every
    /// target at once under a write barrier: `loom snapshot
    /// create|list|destroy MOUNT ...` (create and destroy are root's).
    #[command(subcommand)]
    Snapshot(snapshot::SnapshotCmd),
    /// The targets and, of replicated ones (`loom up --replicas N`,
    /// `loom format --replica R --replicas N`), each replica's role,
    /// state and lag: `loom target status MOUNT`.
    #[command(subcommand)]
    Target(target::TargetCmd),
    /// Write snapshot NAME of the tree at PATH to standard output as a
    /// checksummed stream, whole or (--from OLD) only what changed since
    /// OLD: `loom send [--from OLD] PATH NAME > STREAM` (root). Progress
    /// goes to standard error.
    Send(sendrecv::SendArgs),
    /// Recreate a stream of `loom send` in directory PATH of another (or
    /// the same) loomfs, byte for byte, then take a snapshot of the sent
    /// one's name: `loom receive PATH < STREAM` (root). A receive that
    /// stopped resumes when the same stream is sent again.
    Receive(sendrecv::ReceiveArgs),
    /// Keep a tree replicated on another loomfs by periodic snapshots and
    /// incremental sends, changes younger than --min-age waiting: `loom
    /// replicate run SOURCE DEST`, `loom replicate status DEST` (root).
    #[command(subcommand)]
    Replicate(replicate::ReplicateCmd),
    // Benchmarks (mdtest, IOR, IO500; compare, sweep, suite). No doc
    // comment here: it would replace the long help of loom_bench::BenchArgs.
    Bench(loom_bench::BenchArgs),
}

fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LOOM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only for a person: server logs go to files, and grep.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let done = match cli.cmd {
        Cmd::Up(a) => up::up(a),
        Cmd::Down(a) => up::down(a),
        Cmd::Server { config } => runtime()?.block_on(loom_server::node::run(&config)),
        Cmd::Format(a) => cluster::format(a),
        Cmd::Keygen { path, client_from } => match client_from {
            Some(cluster) => cluster::client_keygen(&cluster, &path),
            None => cluster::keygen(&path),
        },
        Cmd::Mount(a) => mount::mount(a),
        Cmd::MountNoop(a) => noop::mount_noop(a),
        Cmd::Umount { dir } => mount::umount(&dir),
        Cmd::Setstripe(a) => tools::setstripe(a),
        Cmd::Getstripe(a) => tools::getstripe(a),
        Cmd::Df(a) => tools::df(a),
        Cmd::Mkdir(a) | Cmd::Setdirstripe(a) => dirtools::mkdir(a),
        Cmd::Getdirstripe(a) => dirtools::getdirstripe(a),
        Cmd::Find(a) => find::find(a),
        Cmd::Migrate(a) => migrate::migrate(a),
        Cmd::Balance(a) => balance::balance(a),
        Cmd::Scrub(a) => scrub::scrub(a),
        Cmd::Jobstats(a) => jobstats::jobstats(a),
        Cmd::Stats(a) => stats::stats(a),
        Cmd::Top(a) => stats::top(a),
        Cmd::Changelog(a) => changelog::changelog(a),
        Cmd::Quota(a) => quota::quota(a),
        Cmd::Setquota(a) => quota::setquota(a),
        Cmd::Project(a) => project::project(a),
        Cmd::SetParam(a) => params::set_param(a),
        Cmd::GetParam(a) => params::get_param(a),
        Cmd::Nodemap(c) => nodemap::run(c),
        Cmd::Pool(c) => pool::run(c),
        Cmd::Policy(c) => policy::run(c),
        Cmd::Snapshot(c) => snapshot::run(c),
        Cmd::Target(c) => target::run(c),
        Cmd::Send(a) => sendrecv::send(a),
        Cmd::Receive(a) => sendrecv::receive(a),
        Cmd::Replicate(c) => replicate::run(c),
        // Its own exit codes, as e2fsck's.
        Cmd::Fsck(a) => return Ok(fsck::fsck(a)),
        Cmd::Bench(a) => loom_bench::run(a),
    };
    done.map(|()| ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    init_logs();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("loom: {e:#}");
            // As a shell reports a job stopped by SIGINT: 128 + 2.
            let interrupted = e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<loom_bench::BenchError>(),
                    Some(loom_bench::BenchError::Interrupted)
                )
            });
            if interrupted {
                ExitCode::from(130)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
