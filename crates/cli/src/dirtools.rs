//! Directory placement over MDTs, as `lfs mkdir -i`, `lfs setdirstripe`
//! and `lfs getdirstripe`: remote directories (made whole on a chosen MDT)
//! and striped directories (their names hashed over several MDTs).

use crate::registry;
use crate::tools::{caller, connect, errno};
use anyhow::bail;
use clap::Args;
use loom_proto::msg::{DirStripe, FileKind};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Options of `loom mkdir` and `loom setdirstripe`.
#[derive(Args)]
pub struct MkdirArgs {
    /// MDT that holds the new directory (its master inode, for a striped
    /// one); default: the parent directory's MDT.
    #[arg(short = 'i', long = "mdt-index")]
    pub mdt: Option<u32>,
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
    /// Directories.
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
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
    let stripe = DirStripe {
        count: a.count,
        start_mdt: a.mdt.map(|i| i as i32).unwrap_or(-1),
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

fn getdirstripe_one(a: &GetdirstripeArgs, path: &Path) -> anyhow::Result<()> {
    let (entry, rel) = registry::find(path)?;
    let s = connect(entry)?;
    let shown = path.display();
    s.rt.block_on(async {
        let c = caller();
        let fail = |e| errno(e, &format!("{shown}"));
        let attr = s
            .client
            .resolve_path(rel.as_os_str().as_bytes())
            .await
            .map_err(fail)?;
        if attr.kind != FileKind::Dir {
            bail!("{shown} is not a directory");
        }
        let router = s.client.router();
        let mdt = router.mdt_of(attr.fid).await.map_err(fail)?.index;
        let shards = s.client.dir_shards(&c, attr.fid).await.map_err(fail)?;
        let count = shards.as_ref().map_or(0, |s| s.len());
        if a.count || a.index {
            if a.count {
                println!("{count}");
            }
            if a.index {
                println!("{mdt}");
            }
            return Ok(());
        }
        let hash = if count > 0 { "name_hash_mod" } else { "none" };
        println!("lmv_stripe_count: {count} lmv_stripe_offset: {mdt} lmv_hash_type: {hash}");
        if let Some(shards) = shards {
            println!("mdtidx\t\t FID[seq:oid:ver]");
            for f in shards.iter() {
                let m = router.mdt_of(*f).await.map_err(fail)?.index;
                println!("{m:>6}\t\t {f}");
            }
        }
        Ok(())
    })
}
