//! Directory placement over MDTs, as `lfs mkdir -i`, `lfs setdirstripe`
//! and `lfs getdirstripe`: remote directories (made whole on a chosen MDT)
//! and striped directories (their names hashed over several MDTs).

use crate::registry;
use crate::tools::{caller, connect, errno};
use anyhow::bail;
use clap::Args;
use loom_proto::layout::DirHash;
use loom_proto::msg::{DirDefault, DirStripe, FileKind};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Options of `loom mkdir` and `loom setdirstripe`.
#[derive(Args)]
#[command(
    after_help = "With -D (setdirstripe only), DIR exists and the options set where its new \
subdirectories go, and theirs in turn (inherited down the tree, as Lustre's `lfs setdirstripe -D`); \
set on the root, it is the file system's default. -i -1: each new directory on the MDT chosen \
round robin, weighted by free inodes and space; -i N: on MDT N (shards on N, N+1, ...); \
-i a,b,c: round robin over those MDTs. Examples:
  loom setdirstripe -D -i -1 /mnt/loom             # spread every new directory over all MDTs
  loom setdirstripe -D -c 2 -i 0,2 /mnt/loom/proj  # new directories striped over MDTs 0 and 2
  loom getdirstripe -D /mnt/loom/proj"
)]
pub struct MkdirArgs {
    /// MDT that holds the new directory (its master inode, for a striped
    /// one); default: the parent directory's MDT. With -D: -1 (round
    /// robin), an index, or a list of indices (a,b,c).
    #[arg(short = 'i', long = "mdt-index", allow_negative_numbers = true, value_parser = parse_mdts)]
    pub mdt: Option<MdtList>,
    /// Set the default placement of DIR's new subdirectories (inherited),
    /// instead of making a directory (`setdirstripe` only).
    #[arg(short = 'D', long = "default")]
    pub default: bool,
    /// Hash of names over shards: only `name_hash_mod` (the default).
    #[arg(short = 'H', long = "mdt-hash", value_parser = ["name_hash_mod"])]
    pub hash: Option<String>,
    /// Remove DIR's default placement (with -D).
    #[arg(short = 'd', long = "delete")]
    pub delete: bool,
    /// Number of MDTs to stripe the directory's names over (1: not
    /// striped). The shards go on MDTs mdt-index, mdt-index+1, ...
    #[arg(short = 'c', long = "mdt-count", default_value_t = 1)]
    pub count: u32,
    /// Permission bits in octal (default: 0777 less the umask).
    #[arg(short = 'm', long = "mode", value_parser = parse_mode)]
    pub mode: Option<u32>,
    /// Directories to make (their parents must exist, on a loomfs mount).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
}

/// Options of `loom getdirstripe`.
#[derive(Args)]
pub struct GetdirstripeArgs {
    /// Print only the number of shards (0 for a directory that is not
    /// striped, as `lfs getdirstripe`).
    #[arg(short = 'c', long = "mdt-count")]
    pub count: bool,
    /// Print only the MDT of the directory (of its master inode).
    #[arg(short = 'i', long = "mdt-index")]
    pub index: bool,
    /// Show the default placement of new subdirectories instead (set
    /// with `setdirstripe -D`, on the directory or above).
    #[arg(short = 'D', long = "default")]
    pub default: bool,
    /// Directories.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
}

/// The value of `-i`: one index, -1, or a list.
#[derive(Clone, Debug)]
pub struct MdtList(pub Vec<i64>);

/// `-i`: "-1", "N" or "a,b,c".
fn parse_mdts(s: &str) -> Result<MdtList, String> {
    s.split(',')
        .map(|p| {
            p.trim()
                .parse::<i64>()
                .ok()
                .filter(|v| *v >= -1 && *v <= i64::from(u32::MAX))
                .ok_or_else(|| format!("{p:?} is not an MDT index (N, -1, or a list a,b,c)"))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(MdtList)
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| format!("{s:?} is not an octal mode (e.g. 755)"))
}

/// `loom mkdir` / `loom setdirstripe`.
pub fn mkdir(a: MkdirArgs) -> anyhow::Result<()> {
    if a.count == 0 {
        bail!("--mdt-count must be at least 1");
    }
    if a.default || a.delete {
        return set_default(&a);
    }
    let start_mdt = match a.mdt.as_ref().map(|l| l.0.as_slice()) {
        None => -1,
        Some([i]) if *i >= 0 => *i as i32,
        Some([_]) => bail!("-i -1 (round robin) is for -D defaults; without -i the directory goes on its parent's MDT"),
        Some(_) => bail!("a list of MDTs (-i a,b,c) is for -D defaults; give one index"),
    };
    let stripe = DirStripe {
        count: a.count,
        start_mdt,
    };
    let perm = a.mode.unwrap_or_else(|| {
        let umask = nix::sys::stat::umask(nix::sys::stat::Mode::empty());
        nix::sys::stat::umask(umask);
        0o777 & !umask.bits()
    });
    let mut failed = false;
    for d in &a.dirs {
        if let Err(e) = mkdir_one(d, perm, stripe) {
            eprintln!("loom mkdir: {e:#}");
            failed = true;
        }
    }
    if failed {
        bail!("some directories were not made");
    }
    Ok(())
}

fn mkdir_one(path: &Path, perm: u32, stripe: DirStripe) -> anyhow::Result<()> {
    let (entry, rel) = registry::find(path)?;
    let Some(name) = rel.file_name() else {
        bail!("{}: names no new directory", path.display());
    };
    if !crate::via_mount::key_readable(&entry) {
        return crate::via_mount::mkdir(path, perm, stripe);
    }
    let s = connect(entry)?;
    let shown = path.display();
    let dir = rel.parent().unwrap_or(Path::new(""));
    s.rt.block_on(async {
        let parent = s
            .client
            .resolve_path(dir.as_os_str().as_bytes())
            .await
            .map_err(|e| errno(e, &format!("{shown}")))?;
        s.client
            .mkdir_striped(&caller(), parent.fid, name.as_bytes(), perm, stripe)
            .await
            .map_err(|e| match e {
                loom_proto::Errno::EINVAL => anyhow::anyhow!(
                    "{shown}: invalid placement (MDT index {} with {} shards; see `loom df -i` for the MDTs)",
                    stripe.start_mdt,
                    stripe.count
                ),
                e => errno(e, &format!("{shown}")),
            })?;
        Ok(())
    })
}

/// `loom setdirstripe -D`: where each directory's new subdirectories go.
fn set_default(a: &MkdirArgs) -> anyhow::Result<()> {
    if !a.default {
        bail!("-d removes a default placement: use it with -D");
    }
    let spec = if a.delete {
        None
    } else {
        let mdts = match a.mdt.as_ref().map(|l| l.0.as_slice()) {
            None | Some([-1]) => Vec::new(),
            Some(list) if list.iter().all(|i| *i >= 0) => list.iter().map(|i| *i as u32).collect(),
            Some(_) => bail!("-i -1 (round robin) cannot be part of a list"),
        };
        Some(DirDefault {
            count: a.count,
            mdts,
            hash: DirHash::NameHashMod,
        })
    };
    let mut failed = false;
    for d in &a.dirs {
        if let Err(e) = set_default_one(d, spec.clone()) {
            eprintln!("loom setdirstripe: {e:#}");
            failed = true;
        }
    }
    if failed {
        bail!("some defaults were not set");
    }
    Ok(())
}

fn set_default_one(path: &Path, spec: Option<DirDefault>) -> anyhow::Result<()> {
    let (entry, rel) = registry::find(path)?;
    if !crate::via_mount::key_readable(&entry) {
        let value = spec.map(|d| serde_json::to_vec(&d)).transpose()?;
        return crate::via_mount::set_on_directory(
            path,
            "placement defaults are set on directories",
            "loom.dir_default",
            value,
        );
    }
    let s = connect(entry)?;
    let shown = path.display();
    s.rt.block_on(async {
        let attr = directory(&s, &rel, path).await?;
        s.client
            .set_dir_default_as(&caller(), attr.fid, spec)
            .await
            .map_err(|e| match e {
                loom_proto::Errno::EINVAL => anyhow::anyhow!(
                    "{shown}: invalid placement (see `loom df -i` for the MDTs; a count of shards at most the MDTs listed)"
                ),
                e => errno(e, &format!("{shown}")),
            })
    })
}

/// The attributes of directory `rel` on the session's mount (`path` as
/// the user gave it, for errors).
pub(crate) async fn directory(
    s: &crate::tools::Session,
    rel: &Path,
    path: &Path,
) -> anyhow::Result<loom_proto::msg::Attr> {
    let attr = s
        .client
        .resolve_path(rel.as_os_str().as_bytes())
        .await
        .map_err(|e| errno(e, &format!("{}", path.display())))?;
    if attr.kind != FileKind::Dir {
        bail!("{} is not a directory", path.display());
    }
    Ok(attr)
}

/// `loom getdirstripe`.
pub fn getdirstripe(a: GetdirstripeArgs) -> anyhow::Result<()> {
    let mut failed = false;
    for d in &a.dirs {
        if let Err(e) = getdirstripe_one(&a, d) {
            eprintln!("loom getdirstripe: {e:#}");
            failed = true;
        }
    }
    if failed {
        bail!("some directories could not be shown");
    }
    Ok(())
}

/// What `getdirstripe` shows of one directory.
pub(crate) enum DirShown {
    /// `-D`: where its new subdirectories go.
    Default(Option<DirDefault>),
    /// Its MDT, and its shards with theirs.
    Placed(loom_fuse::tools::DirStripeShown),
}

fn getdirstripe_one(a: &GetdirstripeArgs, path: &Path) -> anyhow::Result<()> {
    let (entry, rel) = registry::find(path)?;
    let shown = if crate::via_mount::key_readable(&entry) {
        getdirstripe_with_key(a, entry, &rel, path)?
    } else {
        crate::via_mount::getdirstripe(a.default, path)?
    };
    print_dirstripe(a, path, shown);
    Ok(())
}

fn getdirstripe_with_key(
    a: &GetdirstripeArgs,
    entry: crate::registry::Entry,
    rel: &Path,
    path: &Path,
) -> anyhow::Result<DirShown> {
    let s = connect(entry)?;
    let shown = path.display();
    s.rt.block_on(async {
        let c = caller();
        let fail = |e| errno(e, &format!("{shown}"));
        let attr = directory(&s, rel, path).await?;
        if a.default {
            let d = s.client.get_dir_default(&c, attr.fid).await.map_err(fail)?;
            return Ok(DirShown::Default(d));
        }
        let router = s.client.router();
        let mdt = s.client.locate(attr.fid).await.map_err(fail)?;
        let shards = match s.client.dir_shards(&c, attr.fid).await.map_err(fail)? {
            None => None,
            Some(shards) => {
                let mut v = Vec::with_capacity(shards.len());
                for f in shards.iter() {
                    v.push((router.mdt_of(*f).await.map_err(fail)?.index, *f));
                }
                Some(v)
            }
        };
        Ok(DirShown::Placed(loom_fuse::tools::DirStripeShown {
            mdt,
            shards,
        }))
    })
}

fn print_dirstripe(a: &GetdirstripeArgs, path: &Path, shown: DirShown) {
    let name = path.display();
    match shown {
        DirShown::Default(None) => {
            println!("{name}: no default (new subdirectories go on its MDT)")
        }
        DirShown::Default(Some(d)) => {
            let at = match d.mdts.as_slice() {
                [] => "-1".to_string(),
                l => l.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
            };
            println!(
                "lmv_stripe_count: {} lmv_stripe_offset: {at} lmv_hash_type: name_hash_mod",
                d.count
            );
        }
        DirShown::Placed(p) => {
            let count = p.shards.as_ref().map_or(0, Vec::len);
            if a.count || a.index {
                if a.count {
                    println!("{count}");
                }
                if a.index {
                    println!("{}", p.mdt);
                }
                return;
            }
            let hash = if count > 0 { "name_hash_mod" } else { "none" };
            println!(
                "lmv_stripe_count: {count} lmv_stripe_offset: {} lmv_hash_type: {hash}",
                p.mdt
            );
            if let Some(shards) = p.shards {
                println!("mdtidx\t\t FID[seq:oid:ver]");
                for (m, f) in shards {
                    println!("{m:>6}\t\t {f}");
                }
            }
        }
    }
}
