//! `loom policy`: the policy engine (`loom_policy`), what RobinHood does
//! for Lustre: a catalog of every inode filled by a scan of all MDTs and
//! kept current by their changelogs, reports from it, and rules that
//! purge, migrate and alert, run once or as a service. Root's: the
//! catalog sees every name.

use crate::registry;
use crate::tools::{connect, Session};
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use loom_policy::act::Actor;
use loom_policy::{follow, scan, Catalog, Report, Rules};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where a file system's catalog is kept unless `--catalog` says.
const DEFAULT_DIR: &str = "/var/lib/loom/policy";

/// `loom policy ...`.
#[derive(Subcommand, Debug)]
pub enum PolicyCmd {
    /// Fill the catalog from nothing with a scan of every MDT at once,
    /// and follow their changelogs from then on: `loom policy scan MOUNT`.
    Scan(CatalogArgs),
    /// Apply the changelog records not yet in the catalog: `loom policy
    /// follow MOUNT` (until caught up with --once, else for ever).
    Follow(FollowArgs),
    /// Usage per user, group and project, size and age histograms, and
    /// the largest directories, from the catalog: `loom policy report
    /// MOUNT [--json]`.
    Report(ReportArgs),
    /// Check a rules file (and its pools, given a mount): `loom policy
    /// check RULES [MOUNT]`.
    Check(CheckArgs),
    /// Run the rules: follow the changelogs, then purge, migrate and
    /// alert as the rules say, every --interval seconds (once with
    /// --once), at most --rate actions a second, each logged: `loom
    /// policy run MOUNT --rules RULES [--dry-run]`.
    Run(RunArgs),
    /// Stop following the changelogs (the MDTs then purge records for
    /// the catalog): `loom policy forget MOUNT`.
    Forget(CatalogArgs),
    /// Every row of the catalog as JSON lines, inodes by number then
    /// names (to export it, or to compare two): `loom policy dump MOUNT`.
    Dump(CatalogArgs),
}

/// A file system and its catalog.
#[derive(Args, Debug)]
#[command(after_help = "The catalog is an SQLite file (default: \
/var/lib/loom/policy/FSNAME.sqlite), or a PostgreSQL server given as \
postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE or as 'host=... user=... \
dbname=...'. Every loom policy command given the same catalog sees the \
same rows.")]
pub struct CatalogArgs {
    /// A path on the file system's mount.
    pub mount: PathBuf,
    /// The catalog: an SQLite file, or a postgres:// URL.
    #[arg(long)]
    pub catalog: Option<String>,
    /// No progress.
    #[arg(short, long)]
    pub quiet: bool,
}

/// `loom policy follow`.
#[derive(Args, Debug)]
pub struct FollowArgs {
    #[command(flatten)]
    pub c: CatalogArgs,
    /// Stop once every MDT's records are applied.
    #[arg(long)]
    pub once: bool,
}

/// `loom policy report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    #[command(flatten)]
    pub c: CatalogArgs,
    /// As JSON.
    #[arg(long)]
    pub json: bool,
    /// Also give it to the MGS, for the dashboard's Policy panel.
    #[arg(long)]
    pub publish: bool,
}

/// `loom policy check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The rules file (TOML).
    pub rules: PathBuf,
    /// A path on the mount, to check the rules' pools.
    pub mount: Option<PathBuf>,
}

/// `loom policy run`.
#[derive(Args, Debug)]
#[command(after_help = "Rules (TOML):\n\n\
[[purge]]            # remove files unused for N days\n\
name = \"scratch\"\n\
tree = \"/scratch\"    # from the file system's root\n\
unused_days = 30     # atime and mtime both older\n\n\
[[migrate]]          # move files unchanged for N days to a pool\n\
name = \"cold\"\n\
tree = \"/\"\n\
older_than_days = 90\n\
pool = \"archive\"\n\
stripe_count = 1     # optional\n\n\
[[alert]]            # say when a user, group or project passes a threshold\n\
name = \"big\"\n\
per = \"user\"         # user, group or project\n\
bytes = \"10T\"        # and/or: inodes = 1000000\n\n\
A rules file that does not parse, or names a pool that does not exist, \
is refused whole: no rule acts. Each candidate is checked against the \
file as it is now before anything is done to it. The service keeps its \
place in each MDT's changelog in the catalog, so a restart of it or of \
the servers misses no change.")]
pub struct RunArgs {
    #[command(flatten)]
    pub c: CatalogArgs,
    /// The rules file (TOML).
    #[arg(long)]
    pub rules: PathBuf,
    /// Say what would be done; do nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// One pass, then stop.
    #[arg(long)]
    pub once: bool,
    /// Most actions a second (0: no limit).
    #[arg(long, default_value_t = 10.0)]
    pub rate: f64,
    /// Seconds between passes.
    #[arg(long, default_value_t = 300)]
    pub interval: u64,
    /// Also append each action to this file.
    #[arg(long)]
    pub log: Option<PathBuf>,
}

fn need_root() -> anyhow::Result<()> {
    if nix::unistd::getuid().as_raw() != 0 {
        bail!("only root may run the policy engine (its catalog shows every name)");
    }
    Ok(())
}

/// The catalog named, or the file system's default.
fn catalog_url(a: &CatalogArgs, fsname: &str) -> String {
    a.catalog
        .clone()
        .unwrap_or_else(|| format!("{DEFAULT_DIR}/{fsname}.sqlite"))
}

fn open(s: &Session, a: &CatalogArgs) -> anyhow::Result<Catalog> {
    let url = catalog_url(a, &s.entry.fsname);
    s.rt.block_on(Catalog::open(&url))
}

fn session(mount: &Path) -> anyhow::Result<Session> {
    let (entry, _) = registry::find(mount)?;
    connect(entry)
}

/// A line for the log: the time, then what.
fn stamped(line: &str) -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("{} {line}", crate::snapshot::when(t))
}

pub fn run(c: PolicyCmd) -> anyhow::Result<()> {
    match c {
        PolicyCmd::Check(a) => check(a),
        PolicyCmd::Scan(a) => {
            need_root()?;
            let s = session(&a.mount)?;
            let cat = open(&s, &a)?;
            let t0 = Instant::now();
            let quiet = a.quiet;
            let last = Mutex::new(Instant::now());
            let progress = |n: u64| {
                let mut l = last.lock().unwrap_or_else(|p| p.into_inner());
                if !quiet && l.elapsed() >= Duration::from_secs(1) {
                    *l = Instant::now();
                    eprintln!(
                        "loom policy scan: {n} names ({:.0}/s)",
                        n as f64 / t0.elapsed().as_secs_f64().max(1e-3)
                    );
                }
            };
            let r = s.rt.block_on(scan::scan(&s.client, &cat, &progress))?;
            // What changed during the scan.
            let caught =
                s.rt.block_on(follow::follow(&s.client, &cat, true, &|_, _| {}))?;
            println!(
                "{} names, {} inodes in {:.1} s ({:.0} inodes/s) into the {} catalog; {caught} changelog records applied since",
                r.names,
                r.inodes,
                r.seconds,
                r.inodes as f64 / r.seconds.max(1e-3),
                cat.db.kind()
            );
            Ok(())
        }
        PolicyCmd::Follow(a) => {
            need_root()?;
            let s = session(&a.c.mount)?;
            let cat = open(&s, &a.c)?;
            let quiet = a.c.quiet;
            let n =
                s.rt.block_on(follow::follow(&s.client, &cat, a.once, &|mdt, x| {
                    if !quiet && x.records > 0 {
                        eprintln!(
                            "loom policy follow: MDT{mdt}: {} records applied, up to {} of {}",
                            x.records,
                            x.last,
                            x.next.saturating_sub(1)
                        );
                    }
                }))?;
            println!("{n} changelog records applied");
            Ok(())
        }
        PolicyCmd::Report(a) => {
            need_root()?;
            let s = session(&a.c.mount)?;
            let cat = open(&s, &a.c)?;
            let r = s.rt.block_on(Report::of(&cat))?;
            if a.publish {
                s.rt.block_on(publish(&s, &r))?;
            }
            if a.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print!("{}", r.text());
            }
            Ok(())
        }
        PolicyCmd::Forget(a) => {
            need_root()?;
            let s = session(&a.mount)?;
            let cat = open(&s, &a)?;
            s.rt.block_on(follow::detach(&s.client, &cat))?;
            println!(
                "the catalog no longer follows the changelogs; `loom policy scan` to start again"
            );
            Ok(())
        }
        PolicyCmd::Run(a) => run_rules(a),
        PolicyCmd::Dump(a) => {
            need_root()?;
            let s = session(&a.mount)?;
            let cat = open(&s, &a)?;
            let (inodes, names) =
                s.rt.block_on(async { anyhow::Ok((cat.inodes().await?, cat.names().await?)) })?;
            let mut out = std::io::stdout().lock();
            for i in inodes {
                writeln!(out, "{}", serde_json::json!({ "inode": i }))?;
            }
            for n in names {
                let name = String::from_utf8_lossy(&n.name);
                writeln!(
                    out,
                    "{}",
                    serde_json::json!({ "name": { "parent": n.parent, "name": name, "ino": n.ino } })
                )?;
            }
            Ok(())
        }
    }
}

/// Users, groups and projects a published report lists (the most
/// bytes first): the MGS keeps a bounded report.
const PUBLISHED_IDS: usize = 100;

/// Give report `r` to the MGS for the dashboard.
async fn publish(s: &Session, r: &Report) -> anyhow::Result<()> {
    let mut r = r.clone();
    for l in [&mut r.users, &mut r.groups, &mut r.projects] {
        l.truncate(PUBLISHED_IDS);
    }
    let json = serde_json::to_string(&r)?;
    s.client
        .policy_publish(&crate::tools::caller(), json)
        .await
        .map_err(|e| crate::tools::errno(e, "publishing the report to the MGS"))
}

fn check(a: CheckArgs) -> anyhow::Result<()> {
    let pools = match &a.mount {
        Some(m) => Some(
            crate::pool::list(m)?
                .into_iter()
                .map(|p| p.name)
                .collect::<Vec<_>>(),
        ),
        None => None,
    };
    let r = Rules::load(&a.rules, pools.as_deref())?;
    println!(
        "{}: {} purge, {} migrate and {} alert rules",
        a.rules.display(),
        r.purge.len(),
        r.migrate.len(),
        r.alert.len()
    );
    Ok(())
}

fn run_rules(a: RunArgs) -> anyhow::Result<()> {
    need_root()?;
    // The rules first: a file that does not parse acts on nothing.
    let pools: Vec<String> = crate::pool::list(&a.c.mount)?
        .into_iter()
        .map(|p| p.name)
        .collect();
    let rules = Rules::load(&a.rules, Some(&pools))?;
    if !(a.rate >= 0.0 && a.rate.is_finite()) {
        bail!("--rate must be a number of actions a second, 0 for no limit");
    }
    if a.interval == 0 {
        bail!("--interval must be at least 1 second");
    }
    let s = session(&a.c.mount)?;
    let cat = open(&s, &a.c)?;
    let logfile = match &a.log {
        Some(p) => Some(Mutex::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("cannot open the log {}", p.display()))?,
        )),
        None => None,
    };
    let log = |line: &str| {
        let l = stamped(line);
        println!("{l}");
        if let Some(f) = &logfile {
            let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = writeln!(f, "{l}").and_then(|_| f.flush()) {
                eprintln!("loom policy: writing the log: {e}");
            }
        }
    };
    let mut actor = Actor {
        client: &s.client,
        cat: &cat,
        dry_run: a.dry_run,
        rate: a.rate,
        log: &log,
        last: None,
    };
    let mut wait = Duration::from_secs(1);
    loop {
        let pass = s.rt.block_on(async {
            let n = follow::follow(&s.client, &cat, true, &|_, _| {}).await?;
            let p = actor.pass(&rules).await?;
            // The dashboard shows the catalog as this pass left it.
            publish(&s, &Report::of(&cat).await?).await?;
            anyhow::Ok((n, p))
        });
        match pass {
            Ok((n, p)) => {
                wait = Duration::from_secs(1);
                log(&format!(
                    "pass: {n} changelog records applied; {} {}, {} left as they were, {} failed, {} alerts",
                    p.done,
                    if a.dry_run { "would be acted on" } else { "acted on" },
                    p.skipped,
                    p.failed,
                    p.alerts
                ));
                if a.once {
                    if p.failed > 0 {
                        bail!("{} actions failed (see above)", p.failed);
                    }
                    return Ok(());
                }
                // Follow the changelogs between passes.
                let until = Instant::now() + Duration::from_secs(a.interval);
                while Instant::now() < until {
                    let r = s.rt.block_on(async {
                        tokio::time::timeout(
                            until.saturating_duration_since(Instant::now()),
                            follow::follow(&s.client, &cat, true, &|_, _| {}),
                        )
                        .await
                    });
                    if let Ok(Err(e)) = r {
                        log(&format!("following the changelogs: {e:#}"));
                        break;
                    }
                    std::thread::sleep(
                        Duration::from_secs(1).min(until.saturating_duration_since(Instant::now())),
                    );
                }
            }
            // A server restarting, the catalog's database away: try
            // again; a once-only run reports it.
            Err(e) if !a.once => {
                log(&format!(
                    "pass failed: {e:#}; trying again in {} s",
                    wait.as_secs()
                ));
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_secs(60));
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_catalog_is_per_file_system() {
        let a = CatalogArgs {
            mount: "/mnt".into(),
            catalog: None,
            quiet: false,
        };
        assert_eq!(catalog_url(&a, "lfs1"), "/var/lib/loom/policy/lfs1.sqlite");
    }
}
