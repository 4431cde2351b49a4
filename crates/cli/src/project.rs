//! `loom project`: project ids of files and directory trees, as Lustre's
//! `lfs project` (and ext4's `chattr -p`/`+P`). A directory that passes
//! its id on (`-s`) gives it to everything made in it, so a site caps a
//! home or project tree by its id (`loom quota -p ID`).

use crate::registry;
use crate::tools::{caller, connect, errno, Session};
use anyhow::{bail, Context};
use clap::Args;
use loom_proto::Fid;
use std::io::IsTerminal;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Options of `loom project`.
#[derive(Args)]
#[command(
    after_help = "Without -p or -C: list each path's project id and flag, as `lfs project`: \
`ID P PATH` (P: a directory whose new files and subdirectories take its id; -: not). A directory's \
entries are listed, or the directory itself with -d; -r goes down the tree.\n\n\
With -p ID: give the paths project id ID; with -s, directories pass it on to what is made in \
them from then on (ext4's and Lustre's PROJINHERIT). -r sets the whole tree, which is how an \
existing tree is brought into a project: `loom project -p 1000 -s -r /mnt/loom/home/alice`. -C \
clears (id 0, no passing on). Setting needs root. Each inode's usage moves to its new project in \
the commit of the change (`loom quota -p ID`)."
)]
pub struct ProjectArgs {
    /// Set this project id.
    #[arg(short = 'p', value_name = "ID", conflicts_with = "clear")]
    pub projid: Option<u32>,
    /// Directories pass the id on to new entries (with -p).
    #[arg(short = 's', requires = "projid")]
    pub inherit: bool,
    /// Clear: project id 0, nothing passed on.
    #[arg(short = 'C', long = "clear")]
    pub clear: bool,
    /// Whole trees.
    #[arg(short = 'r')]
    pub recursive: bool,
    /// List a directory itself, not its entries.
    #[arg(short = 'd', conflicts_with_all = ["projid", "clear", "recursive"])]
    pub dir_itself: bool,
    /// Files and directories on a loomfs mount.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
}

pub fn project(a: ProjectArgs) -> anyhow::Result<()> {
    let first = a.paths.first().context("a path is needed")?;
    let (entry, _) = registry::find(first)?;
    let s = connect(entry)?;
    let mut failed = false;
    for p in &a.paths {
        let r = match (a.projid, a.clear) {
            (Some(id), _) => set(&s, &a, p, id, a.inherit),
            (None, true) => set(&s, &a, p, 0, false),
            (None, false) => list(&s, &a, p),
        };
        if let Err(e) = r {
            eprintln!("loom project: {e:#}");
            failed = true;
        }
    }
    if failed {
        bail!("some paths were not done");
    }
    Ok(())
}

fn fid_of(p: &Path) -> anyhow::Result<(Fid, bool)> {
    let m = std::fs::symlink_metadata(p).with_context(|| format!("{}", p.display()))?;
    Ok((Fid::from_ino(m.ino()), m.is_dir()))
}

/// The entries of directory `p`, sorted.
fn entries(p: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(p)
        .and_then(|d| d.map(|e| e.map(|e| e.path())).collect())
        .with_context(|| format!("listing {}", p.display()))?;
    names.sort();
    Ok(names)
}

/// The paths under `p` (and `p`), depth first, directories before their
/// entries.
fn tree(p: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    out.push(p.to_path_buf());
    if fid_of(p)?.1 {
        for n in entries(p)? {
            tree(&n, out)?;
        }
    }
    Ok(())
}

fn set(s: &Session, a: &ProjectArgs, p: &Path, projid: u32, inherit: bool) -> anyhow::Result<()> {
    let (_, is_dir) = fid_of(p)?;
    if inherit && !is_dir && !a.recursive {
        bail!(
            "{}: not a directory: -s applies to directories (give files an id with -p alone)",
            p.display()
        );
    }
    let mut paths = Vec::new();
    if a.recursive {
        tree(p, &mut paths)?;
    } else {
        paths.push(p.to_path_buf());
    }
    let c = caller();
    // A large tree takes a while: progress on a terminal, every 2 s.
    let shown = std::io::stderr().is_terminal();
    let mut shown_at = std::time::Instant::now();
    let total = paths.len();
    for (done, path) in paths.into_iter().enumerate() {
        if shown && shown_at.elapsed() >= std::time::Duration::from_secs(2) {
            shown_at = std::time::Instant::now();
            eprintln!("loom project: {}: {done}/{total} set", p.display());
        }
        let (fid, dir) = fid_of(&path)?;
        s.rt.block_on(s.client.set_project_as(&c, fid, projid, inherit && dir))
            .map_err(|e| {
                if e == loom_proto::Errno::EPERM {
                    anyhow::anyhow!("{}: only root may set project ids", path.display())
                } else {
                    errno(e, &path.display().to_string())
                }
            })?;
    }
    Ok(())
}

fn list(s: &Session, a: &ProjectArgs, p: &Path) -> anyhow::Result<()> {
    let (_, is_dir) = fid_of(p)?;
    let mut paths = Vec::new();
    if a.recursive {
        tree(p, &mut paths)?;
    } else if is_dir && !a.dir_itself {
        paths = entries(p)?;
    } else {
        paths.push(p.to_path_buf());
    }
    let c = caller();
    for path in paths {
        let (fid, _) = fid_of(&path)?;
        let (projid, inherit) =
            s.rt.block_on(s.client.get_project(&c, fid))
                .map_err(|e| errno(e, &path.display().to_string()))?;
        println!(
            "{projid:>10} {} {}",
            if inherit { 'P' } else { '-' },
            path.display()
        );
    }
    Ok(())
}
