//! `loom pool`: named sets of OSTs that layouts draw their objects from
//! (`loom setstripe -p POOL`), as Lustre's `lctl pool_new|add|remove|
//! destroy|list`. Kept by the MGS; every MDT places new files by them
//! within seconds. Changing them is root's; anyone lists them.

use crate::registry;
use crate::tools::{caller, connect, errno};
use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use loom_proto::pool::{self, OstPool, PoolOp, PoolRefusal};
use std::path::{Path, PathBuf};

/// `loom pool ...`.
#[derive(Subcommand, Debug)]
pub enum PoolCmd {
    /// Make an empty pool (root): `loom pool new MOUNT POOL`.
    New(NameArgs),
    /// Add OSTs to a pool (root): `loom pool add MOUNT POOL OST...`.
    Add(OstArgs),
    /// Take OSTs out of a pool (root): `loom pool remove MOUNT POOL
    /// OST...`. Files already placed there stay where they are.
    Remove(OstArgs),
    /// Destroy an empty pool (root): `loom pool destroy MOUNT POOL`.
    Destroy(NameArgs),
    /// Show every pool, or one, with its OSTs: `loom pool list MOUNT
    /// [POOL]`.
    List(ListArgs),
}

/// A pool by name.
#[derive(Args, Debug)]
pub struct NameArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
    /// The pool's name (1 to 15 letters, digits, '_', '-', '.').
    pub pool: String,
}

/// A pool and OSTs.
#[derive(Args, Debug)]
#[command(after_help = "OSTs are given as indices (3), names (OST0003) or \
ranges of either (0-3, OST0000-OST0003).")]
pub struct OstArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
    /// The pool's name.
    pub pool: String,
    /// The OSTs.
    #[arg(required = true)]
    pub osts: Vec<String>,
}

/// `loom pool list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// A path on the file system's mount.
    pub path: PathBuf,
    /// Only this pool.
    pub pool: Option<String>,
}

pub fn run(c: PoolCmd) -> anyhow::Result<()> {
    match c {
        PoolCmd::New(a) => edit(&a.path, &a.pool, PoolOp::New),
        PoolCmd::Destroy(a) => edit(&a.path, &a.pool, PoolOp::Destroy),
        PoolCmd::Add(a) => edit(&a.path, &a.pool, PoolOp::Add(parse_osts(&a.osts)?)),
        PoolCmd::Remove(a) => edit(&a.path, &a.pool, PoolOp::Remove(parse_osts(&a.osts)?)),
        PoolCmd::List(a) => {
            let pools = list(&a.path)?;
            let shown: Vec<&OstPool> = match &a.pool {
                None => pools.iter().collect(),
                Some(name) => match pool::find(&pools, name) {
                    Some(p) => vec![p],
                    None => bail!("no pool {name} on {}", a.path.display()),
                },
            };
            for p in shown {
                println!("{} {}", p.name, pool::list_osts(&p.osts));
            }
            Ok(())
        }
    }
}

/// The pools of the file system at `path`: through the library with the
/// mount's key, or through the mount (`loom.pools`) for a user.
pub(crate) fn list(path: &Path) -> anyhow::Result<Vec<OstPool>> {
    let (entry, _) = registry::find(path)?;
    if !crate::via_mount::key_readable(&entry) {
        return crate::via_mount::get_as(&entry.mountpoint, "loom.pools");
    }
    let s = connect(entry)?;
    s.rt.block_on(s.client.pools())
        .map_err(|e| errno(e, "reading the pools"))
}

fn edit(path: &Path, name: &str, op: PoolOp) -> anyhow::Result<()> {
    pool::check_name(name).map_err(anyhow::Error::msg)?;
    let (entry, _) = registry::find(path)?;
    let s = connect(entry)?;
    // Tried here first on what the MGS has, for the reason in words (the
    // MGS refuses the same with an errno).
    // One copy of the configuration: its OSTs and its pools.
    let cfg =
        s.rt.block_on(
            s.client
                .router()
                .fetch_config(std::time::Duration::from_secs(10)),
        )
        .map_err(|e| errno(e.errno(), "reading the configuration"))?;
    let osts = cfg.indices(loom_proto::msg::Role::Ost);
    let mut pools = cfg.pools.clone();
    if let Err(r) = pool::apply(&mut pools, name, &op, &osts) {
        let (PoolRefusal::Invalid(m) | PoolRefusal::Exists(m) | PoolRefusal::Missing(m)) = r;
        bail!(m);
    }
    s.rt.block_on(s.client.pool_edit(&caller(), name, op.clone()))
        .map_err(|e| errno(e, &format!("changing pool {name} (root only)")))?;
    // Every MDT reads the pools again before it places a file in one once
    // its copy is this old: from now on, every new file follows the change.
    std::thread::sleep(loom_server::peers::CONFIG_MAX_AGE);
    match op {
        PoolOp::New => println!("pool {name} made"),
        PoolOp::Destroy => println!("pool {name} destroyed"),
        PoolOp::Add(_) | PoolOp::Remove(_) => {
            let p = pool::find(&pools, name).map(|p| pool::list_osts(&p.osts));
            println!("{name} {}", p.unwrap_or_default());
        }
    }
    Ok(())
}

/// OSTs as given: `3`, `OST0003`, `fs-OST0003`, or a range of them.
pub(crate) fn parse_osts(args: &[String]) -> anyhow::Result<Vec<u32>> {
    let mut out = Vec::new();
    for a in args {
        for part in a.split(',').filter(|p| !p.is_empty()) {
            let (lo, hi) = match part.split_once('-') {
                // `fs-OST0003` names one OST, as `loom df` shows it.
                Some((_, r)) if r.starts_with("OST") && !part.starts_with("OST") => (part, part),
                Some((lo, hi)) => (lo, hi),
                None => (part, part),
            };
            let (lo, hi) = (ost_index(lo)?, ost_index(hi)?);
            if lo > hi {
                bail!("OST range {part:?}: its first OST is after its last");
            }
            out.extend(lo..=hi);
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// One OST: `3`, `OST0003` (hexadecimal, as Lustre names them), or
/// `fs-OST0003`.
fn ost_index(s: &str) -> anyhow::Result<u32> {
    let name = s.rsplit_once('-').map_or(s, |(_, n)| n);
    match name.strip_prefix("OST") {
        Some(hex) => u32::from_str_radix(hex.trim_end_matches("_UUID"), 16)
            .with_context(|| format!("OST {s:?}: not OSTxxxx (hexadecimal)")),
        None => name
            .parse()
            .with_context(|| format!("OST {s:?}: give an index (3), a name (OST0003) or a range")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osts_are_read_as_lustre_names_them() {
        let v = |a: &[&str]| parse_osts(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(v(&["3"]).ok(), Some(vec![3]));
        assert_eq!(v(&["OST000a", "1"]).ok(), Some(vec![1, 10]));
        assert_eq!(
            v(&["0-2", "OST0004-OST0005"]).ok(),
            Some(vec![0, 1, 2, 4, 5])
        );
        assert_eq!(v(&["loom-OST0002"]).ok(), Some(vec![2]));
        assert_eq!(v(&["1,3"]).ok(), Some(vec![1, 3]));
        assert!(v(&["3-1"]).is_err());
        assert!(v(&["ost"]).is_err());
        assert!(v(&["OSTzz"]).is_err());
    }
}
