//! `loom find`: files and directories of a tree by name, type and
//! placement, as `lfs find` (`--stripe-count`, `--ost`, `--mdt`). It
//! walks the tree through the mount as the calling user and asks the
//! mount for layouts and MDTs (its `loom.` extended attributes), so any
//! user runs it on what they may list, without the cluster key.

use anyhow::bail;
use clap::Args;
use std::path::{Path, PathBuf};

/// Options of `loom find`.
#[derive(Args)]
pub struct FindArgs {
    /// Where to start.
    pub dir: PathBuf,
    /// Only regular files (`f`) or directories (`d`).
    #[arg(long = "type", short = 't', value_parser = ["f", "d"])]
    pub kind: Option<String>,
    /// Only names matching this pattern (`*` and `?`, as find -name).
    #[arg(long)]
    pub name: Option<String>,
    /// Only files striped over this many OSTs.
    #[arg(long = "stripe-count", short = 'c')]
    pub stripe_count: Option<usize>,
    /// Only files with an object on this OST.
    #[arg(long, short = 'O')]
    pub ost: Option<u32>,
    /// Only files and directories kept by this MDT.
    #[arg(long, short = 'm')]
    pub mdt: Option<u32>,
}

pub fn find(a: FindArgs) -> anyhow::Result<()> {
    let mut failed = false;
    walk(&a, &a.dir, &mut failed)?;
    if failed {
        bail!("some of the tree could not be read (see above)");
    }
    Ok(())
}

fn walk(a: &FindArgs, path: &Path, failed: &mut bool) -> anyhow::Result<()> {
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("loom find: {}: {e}", path.display());
            *failed = true;
            return Ok(());
        }
    };
    match matches(a, path, &m) {
        Ok(true) => println!("{}", path.display()),
        Ok(false) => {}
        Err(e) => {
            eprintln!("loom find: {}: {e:#}", path.display());
            *failed = true;
        }
    }
    if !m.is_dir() {
        return Ok(());
    }
    let entries = match std::fs::read_dir(path) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("loom find: {}: {e}", path.display());
            *failed = true;
            return Ok(());
        }
    };
    let mut names: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    names.sort();
    for p in names {
        walk(a, &p, failed)?;
    }
    Ok(())
}

fn matches(a: &FindArgs, path: &Path, m: &std::fs::Metadata) -> anyhow::Result<bool> {
    match a.kind.as_deref() {
        Some("f") if !m.is_file() => return Ok(false),
        Some("d") if !m.is_dir() => return Ok(false),
        _ => {}
    }
    if let Some(pattern) = &a.name {
        let name = path
            .file_name()
            .map(|n| n.as_encoded_bytes())
            .unwrap_or_default();
        if !glob(pattern.as_bytes(), name) {
            return Ok(false);
        }
    }
    if a.stripe_count.is_some() || a.ost.is_some() {
        if !m.is_file() {
            return Ok(false);
        }
        let layout: loom_proto::Layout = crate::via_mount::get_as(path, "loom.layout")?;
        let objs = layout.objects();
        if a.stripe_count.is_some_and(|n| objs.len() != n) {
            return Ok(false);
        }
        if a.ost.is_some_and(|o| !objs.iter().any(|x| x.ost == o)) {
            return Ok(false);
        }
    }
    if let Some(want) = a.mdt {
        if !(m.is_file() || m.is_dir()) {
            return Ok(false);
        }
        let mdt: u32 = crate::via_mount::get_as(path, "loom.mdt")?;
        if mdt != want {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether `name` matches `pattern` (`*`: any run, `?`: one byte).
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            glob(&pattern[1..], name) || (!name.is_empty() && glob(pattern, &name[1..]))
        }
        (Some(b'?'), Some(_)) => glob(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => glob(&pattern[1..], &name[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn names_match_as_find_does() {
        assert!(glob(b"*.dat", b"run1.dat"));
        assert!(!glob(b"*.dat", b"run1.data"));
        assert!(glob(b"f?", b"f1"));
        assert!(!glob(b"f?", b"f12"));
        assert!(glob(b"*", b""));
        assert!(glob(b"a*b*c", b"axxbyyc"));
    }
}
