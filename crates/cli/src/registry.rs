//! The mount registry: `/run/loom/mounts/*.toml`, one file per live mount,
//! so that tools given a path inside a mount can reach its cluster.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

const DIR: &str = "/run/loom/mounts";

/// One mount.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Entry {
    /// Mount point (canonical).
    pub mountpoint: PathBuf,
    /// MGS address.
    pub mgs: String,
    /// File system name.
    pub fsname: String,
    /// Cluster key file.
    pub key_file: PathBuf,
    /// The process serving the mount.
    pub pid: u32,
}

fn file_for(mountpoint: &Path) -> PathBuf {
    let name: String = mountpoint
        .to_string_lossy()
        .chars()
        .map(|c| if c == '/' { '%' } else { c })
        .collect();
    Path::new(DIR).join(format!("{name}.toml"))
}

/// Record a mount.
pub fn add(e: &Entry) -> anyhow::Result<()> {
    std::fs::create_dir_all(DIR).with_context(|| format!("creating {DIR}"))?;
    let p = file_for(&e.mountpoint);
    std::fs::write(&p, toml::to_string(e)?).with_context(|| format!("writing {}", p.display()))
}

/// Forget a mount.
pub fn remove(mountpoint: &Path) {
    let _ = std::fs::remove_file(file_for(mountpoint));
}

fn alive(pid: u32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
}

/// Every live mount.
pub fn all() -> Vec<Entry> {
    let Ok(rd) = std::fs::read_dir(DIR) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| toml::from_str::<Entry>(&std::fs::read_to_string(e.path()).ok()?).ok())
        .filter(|e| alive(e.pid))
        .collect()
}

/// The mount that holds `path`, and `path` relative to its root.
pub fn find(path: &Path) -> anyhow::Result<(Entry, String)> {
    let abs = std::path::absolute(path).with_context(|| format!("resolving {}", path.display()))?;
    // Canonicalise the parent (the leaf may not exist yet: setstripe of a new file).
    let canon = match abs.canonicalize() {
        Ok(c) => c,
        Err(_) => {
            let parent = abs.parent().unwrap_or(Path::new("/"));
            let leaf = abs.file_name().map(PathBuf::from).unwrap_or_default();
            parent
                .canonicalize()
                .with_context(|| format!("{}: no such directory", parent.display()))?
                .join(leaf)
        }
    };
    let best = all()
        .into_iter()
        .filter(|e| canon.starts_with(&e.mountpoint))
        .max_by_key(|e| e.mountpoint.as_os_str().len())
        .with_context(|| {
            format!(
                "{} is not on a loomfs mount (no live mount in {DIR} holds it)",
                path.display()
            )
        })?;
    let rel = canon
        .strip_prefix(&best.mountpoint)
        .map(|r| r.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((best, rel))
}

/// Detach the mounts whose key lives in `state` (their server is gone).
pub fn unmount_stale_for_state(state: &Path) {
    let Ok(rd) = std::fs::read_dir(DIR) else {
        return;
    };
    for e in rd.flatten() {
        let Some(entry) = std::fs::read_to_string(e.path())
            .ok()
            .and_then(|s| toml::from_str::<Entry>(&s).ok())
        else {
            continue;
        };
        if entry.key_file.starts_with(state) {
            let _ = nix::mount::umount2(&entry.mountpoint, nix::mount::MntFlags::MNT_DETACH);
            let _ = std::fs::remove_file(e.path());
        }
    }
}
