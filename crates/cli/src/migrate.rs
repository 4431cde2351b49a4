//! `loom migrate -m MDT[,MDT...] DIR...`: move directory trees, their
//! entries and their files' inodes, to other MDTs while they are in use,
//! as Lustre's `lfs migrate -m`. No file data is copied: a file's objects
//! stay where they are and its inode, which names them, moves. Inodes
//! keep their FIDs, so open files stay usable. Without `-m`, files' data
//! moves to new objects instead (`datamigrate.rs`).

use crate::registry;
use crate::tools::{caller, connect, errno, Session};
use anyhow::bail;
use clap::Args;
use loom_proto::msg::FileKind;
use loom_proto::{Errno, Fid};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Options of `loom migrate`.
#[derive(Args)]
#[command(
    after_help = "Without -m, FILE|DIR... are files (or the regular files of trees) whose data \
moves onto new objects laid out as -c, -S, -i, -p or -E ... say (Lustre's lfs migrate), their FIDs \
kept: to a pool, to more or fewer stripes. A file open on another client waits (EBUSY) and is \
tried again --retries times; one opened or changed elsewhere while its bytes are copied is \
copied again. A crash of any server leaves each file with its old layout or its new. \
Examples:
  loom migrate -p archive /mnt/loom/old-runs     # every file of the tree to pool archive
  loom migrate -c 4 -S 4M /mnt/loom/big.dat      # one file over 4 OSTs
  loom migrate -E 1G -c 1 -E -1 -c -1 /mnt/loom/data

With -m, each directory of the tree moves, with its entries and the inodes of the \
files named only in it, to an MDT of the list (the directories taken in turn over the list), \
deepest first. Only root may run it. It runs while programs use the tree: a change that meets a \
directory being moved waits for it (milliseconds), and open files stay usable. \
A run cut short (Ctrl-C, a crash of a server) leaves every directory either moved or not: run \
it again to go on. Files in use under another client's lease at the moment their directory \
moves, files with several links, with Data-on-MDT bytes, or whose inode is on another MDT than \
their directory keep their inode where it is (their entry moves); they are counted as stayed, \
and a later run moves the ones that were in use. A striped directory is left as it is and \
reported; the tree under it is moved. With -c COUNT (2 or more), DIR itself (not its tree) is \
restriped instead: its names spread over the first COUNT MDTs of the list by name hash, online. \
Examples:
  loom migrate -m 1 /mnt/loom/proj        # the whole tree to MDT1
  loom migrate -m 1,2,3 /mnt/loom/scratch # its directories spread over MDTs 1, 2 and 3
  loom migrate -c 4 -m 0,1,2,3 /mnt/loom/shared  # one big directory's names over 4 MDTs"
)]
pub struct MigrateArgs {
    /// The MDT (or comma-separated MDTs) to move the trees to.
    #[arg(short = 'm', long = "mdt-index", value_delimiter = ',')]
    pub mdts: Vec<u32>,
    /// With -m: restripe each DIR itself (not its tree) over this many
    /// MDTs, the first COUNT of the -m list: its entries spread over
    /// shards by name hash, online (Lustre's `lfs migrate -m LIST -c
    /// COUNT`); DIR first moves to the list's first MDT if it is
    /// elsewhere. Without -m: the files' new stripe count (-1: all OSTs).
    #[arg(
        short = 'c',
        long = "stripe-count",
        visible_alias = "mdt-count",
        allow_negative_numbers = true
    )]
    pub count: Vec<i32>,
    /// The files' new stripe size (e.g. 1M, 4M; a multiple of 64K).
    #[arg(short = 'S', long = "stripe-size", value_parser = crate::tools::parse_size)]
    pub size: Vec<u64>,
    /// The files' first OST.
    #[arg(short = 'i', long = "stripe-index", allow_negative_numbers = true)]
    pub index: Vec<i32>,
    /// The OST pool the files' new objects come from.
    #[arg(short = 'p', long)]
    pub pool: Vec<String>,
    /// End of a component of the files' new layout, as `setstripe -E`
    /// (the -c, -S, -i and -p after it describe that component).
    #[arg(short = 'E', long = "component-end", allow_negative_numbers = true)]
    pub ends: Vec<String>,
    /// Files open elsewhere are tried again this many times, waiting
    /// longer each time (1 s, 2 s, 4 s, ... at most 30 s).
    #[arg(long, default_value_t = 5)]
    pub retries: u32,
    /// Print nothing but errors (no progress, no summary).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Seconds between progress lines on standard error (0: one after
    /// every directory).
    #[arg(long, default_value_t = 1.0, value_name = "SECS", value_parser = parse_secs)]
    pub progress: f64,
    /// Directories whose trees to move (with -m), or files and trees
    /// whose files' data to move (on a loomfs mount).
    #[arg(required = true, value_name = "FILE|DIR")]
    pub dirs: Vec<PathBuf>,
}

/// What a run did.
#[derive(Default)]
struct Tally {
    dirs: u64,
    total: u64,
    moved: u64,
    stayed: u64,
    striped: u64,
    gone: u64,
}

/// `--progress`: a number of seconds, 0 or more.
fn parse_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=86400.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds from 0 to 86400")),
    }
}

/// `loom migrate`.
pub fn migrate(a: MigrateArgs) -> anyhow::Result<()> {
    if a.mdts.is_empty() {
        return crate::datamigrate::run(&a);
    }
    if !(a.size.is_empty() && a.index.is_empty() && a.pool.is_empty() && a.ends.is_empty()) {
        bail!("-m moves directories to MDTs; -S, -i, -p and -E move files' data: give one or the other");
    }
    if a.count.len() > 1 || a.count.iter().any(|c| *c < 1) {
        bail!("with -m, -c is the number of MDTs to restripe a directory over (1 or more), given once");
    }
    let mut failed = false;
    for d in &a.dirs {
        if let Err(e) = migrate_tree(&a, d) {
            eprintln!("loom migrate: {e:#}");
            failed = true;
        }
    }
    if failed {
        bail!(
            "some trees were not moved whole (see above); a run cut short goes on when run again"
        );
    }
    Ok(())
}

fn migrate_tree(a: &MigrateArgs, path: &Path) -> anyhow::Result<()> {
    if nix::unistd::getuid().as_raw() != 0 {
        bail!("only root may migrate directories");
    }
    if let Some(&count) = a.count.iter().find(|c| **c > 1) {
        return restripe(a, path, count as u32);
    }
    let (entry, rel) = registry::find(path)?;
    let s = connect(entry)?;
    let shown = path.display().to_string();
    s.rt.block_on(async {
        let mdts = s.client.router().config().indices(loom_proto::msg::Role::Mdt);
        if let Some(bad) = a.mdts.iter().find(|m| !mdts.contains(m)) {
            bail!("MDT index {bad} is not in the file system (MDTs: {mdts:?}; see `loom df -i`)");
        }
        let attr = crate::dirtools::directory(&s, &rel, path).await?;
        if attr.fid == Fid::ROOT {
            bail!("{shown} is the root, which stays on MDT0000: migrate the directories under it");
        }
        let order = depth_first(&s, attr.fid, &shown).await?;
        let mut t = Tally {
            total: order.len() as u64,
            ..Tally::default()
        };
        let mut shown_at = Instant::now();
        for (k, (fid, name)) in order.iter().enumerate() {
            let to = a.mdts[k % a.mdts.len()];
            match s.client.migrate_dir(&caller(), *fid, to).await {
                Ok((moved, stayed)) => {
                    t.moved += moved;
                    t.stayed += stayed;
                }
                Err(Errno::EOPNOTSUPP) => {
                    t.striped += 1;
                    eprintln!("loom migrate: {name}: striped, left as it is (a striped directory is not restriped again)");
                }
                // Removed since the walk.
                Err(Errno::ENOENT) => t.gone += 1,
                Err(e) => return Err(errno(e, name)),
            }
            t.dirs += 1;
            if !a.quiet && shown_at.elapsed() >= Duration::from_secs_f64(a.progress) {
                shown_at = Instant::now();
                eprintln!(
                    "loom migrate: {shown}: {}/{} directories, {} inodes moved, {} stayed",
                    t.dirs, t.total, t.moved, t.stayed
                );
            }
        }
        if !a.quiet {
            println!(
                "{shown}: {} directories done, {} inodes moved, {} stayed where they were{}{}",
                t.dirs,
                t.moved,
                t.stayed,
                if t.striped > 0 {
                    format!(", {} striped directories left as they are", t.striped)
                } else {
                    String::new()
                },
                if t.gone > 0 {
                    format!(", {} removed meanwhile", t.gone)
                } else {
                    String::new()
                }
            );
        }
        Ok(())
    })
}

/// `-c COUNT` (2 or more): DIR striped over the first COUNT MDTs of -m.
fn restripe(a: &MigrateArgs, path: &Path, count: u32) -> anyhow::Result<()> {
    let Some(mdts) = a.mdts.get(..count as usize) else {
        bail!(
            "-c {count} needs {count} MDTs in -m, got {} ({:?})",
            a.mdts.len(),
            a.mdts
        );
    };
    let (entry, rel) = registry::find(path)?;
    let s = connect(entry)?;
    let shown = path.display().to_string();
    s.rt.block_on(async {
        let c = caller();
        let attr = crate::dirtools::directory(&s, &rel, path).await?;
        if s.client.dir_shards(&c, attr.fid).await.map_err(|e| errno(e, &shown))?.is_some() {
            bail!("{shown} is striped already (restriping a striped directory is not supported yet)");
        }
        // The master stays where the directory is: bring it there first.
        s.client
            .migrate_dir(&c, attr.fid, mdts[0])
            .await
            .map_err(|e| errno(e, &shown))?;
        let moved = s
            .client
            .restripe_dir(&c, attr.fid, mdts.to_vec())
            .await
            .map_err(|e| match e {
                Errno::EINVAL => anyhow::anyhow!(
                    "{shown}: invalid MDT list {mdts:?} (distinct MDTs of the file system; see `loom df -i`)"
                ),
                e => errno(e, &shown),
            })?;
        if !a.quiet {
            println!("{shown}: striped over MDTs {mdts:?}, {moved} entries moved to other shards");
        }
        Ok(())
    })
}

/// Every directory of the tree at `top`, each after those under it, with
/// a path to name it in messages.
async fn depth_first(s: &Session, top: Fid, shown: &str) -> anyhow::Result<Vec<(Fid, String)>> {
    let c = caller();
    let mut order = Vec::new();
    // (directory, its path, listed already)
    let mut stack = vec![(top, shown.to_string(), false)];
    while let Some((dir, path, listed)) = stack.pop() {
        if listed {
            order.push((dir, path));
            continue;
        }
        stack.push((dir, path.clone(), true));
        let mut cookie = 0;
        loop {
            let (entries, eof) = match s.client.readdir(&c, dir, cookie, 1024).await {
                Ok(r) => r,
                // Removed since its parent was listed.
                Err(Errno::ENOENT) => break,
                Err(e) => return Err(errno(e, &path)),
            };
            for e in &entries {
                cookie = e.cookie;
                if e.attr.kind == FileKind::Dir {
                    let name = String::from_utf8_lossy(e.name.as_bytes());
                    stack.push((e.attr.fid, format!("{path}/{name}"), false));
                }
            }
            if eof || entries.is_empty() {
                break;
            }
        }
    }
    Ok(order)
}
