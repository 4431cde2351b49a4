//! The mount registry: `/run/loom/mounts/*.toml`, one file per live mount,
//! so that tools given a path inside a mount (`loom setstripe`, `loom df`,
//! `loom bench loom:PATH`) can reach its cluster through this library.
//!
//! A file names the mount point (canonical), the MGS address, the file
//! system name, the cluster key file and the pid of the process serving the
//! mount. Entries whose process is gone are ignored: a mount killed with
//! `kill -9` leaves its file behind until `loom down` or the next mount of
//! the same directory replaces it.
//!
//! Lives in the client library (not the `loom` binary) so that every tool
//! built on the library, the benchmarks included, reads mounts the same way.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where the registry of root's mounts lives (readable by every user).
pub const DIR: &str = "/run/loom/mounts";

/// Where this process records its mounts: [`DIR`] for root; for another
/// user (who cannot write there), `$XDG_RUNTIME_DIR/loom/mounts`, or
/// `/tmp/loom-UID/mounts` without one.
pub fn own_dir() -> PathBuf {
    let uid = nix::unistd::geteuid().as_raw();
    if uid == 0 {
        return PathBuf::from(DIR);
    }
    // The runtime directory only if it is this user's (a user switched
    // to with su or setpriv may still carry root's).
    use std::os::unix::fs::MetadataExt;
    match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(d) if std::fs::metadata(&d).is_ok_and(|m| m.uid() == uid) => d.join("loom/mounts"),
        _ => PathBuf::from(format!("/tmp/loom-{uid}/mounts")),
    }
}

/// The registries this process reads: its own, and root's.
fn dirs() -> Vec<PathBuf> {
    let own = own_dir();
    let mut v = vec![own.clone()];
    if own != Path::new(DIR) {
        v.push(PathBuf::from(DIR));
    }
    v
}

/// One mount.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

/// Why the registry could not be read or written, or a path is not on a
/// loomfs mount.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A registry file or directory could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// An entry could not be encoded (a path that is not UTF-8).
    #[error("encoding mount entry for {mountpoint}: {reason}")]
    Encode {
        /// The mount point of the entry.
        mountpoint: PathBuf,
        /// What the encoder said.
        reason: String,
    },
    /// The path, or the directory it would be created in, does not exist.
    #[error("{path}: no such directory")]
    NoSuchDir {
        /// The directory that was looked for.
        path: PathBuf,
    },
    /// No live mount holds the path: mount the file system first, or
    /// check the path.
    #[error("{path} is not on a loomfs mount (no live mount in {dir} holds it)")]
    NotOnMount {
        /// The path asked about.
        path: PathBuf,
        /// The registry directory searched.
        dir: PathBuf,
    },
}

fn file_for(dir: &Path, mountpoint: &Path) -> PathBuf {
    let name: String = mountpoint
        .to_string_lossy()
        .chars()
        .map(|c| if c == '/' { '%' } else { c })
        .collect();
    dir.join(format!("{name}.toml"))
}

/// Record a mount (in [`own_dir`]).
pub fn add(e: &Entry) -> Result<(), RegistryError> {
    add_in(&own_dir(), e)
}

/// [`add`] in registry directory `dir`.
pub fn add_in(dir: &Path, e: &Entry) -> Result<(), RegistryError> {
    std::fs::create_dir_all(dir).map_err(|source| RegistryError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let p = file_for(dir, &e.mountpoint);
    let text = toml::to_string(e).map_err(|err| RegistryError::Encode {
        mountpoint: e.mountpoint.clone(),
        reason: err.to_string(),
    })?;
    std::fs::write(&p, text).map_err(|source| RegistryError::Io { path: p, source })
}

/// Forget a mount.
pub fn remove(mountpoint: &Path) {
    let _ = std::fs::remove_file(file_for(&own_dir(), mountpoint));
}

/// Whether the mount's process lives. EPERM says it does: a user asking
/// about root's mount may not signal it.
fn alive(pid: u32) -> bool {
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None) {
        Ok(()) | Err(nix::errno::Errno::EPERM) => true,
        Err(_) => false,
    }
}

fn read_entries(dir: &Path) -> Vec<(PathBuf, Entry)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            Some((e.path(), toml::from_str::<Entry>(&text).ok()?))
        })
        .collect()
}

/// Every live mount this process can see: its own and root's.
pub fn all() -> Vec<Entry> {
    dirs().iter().flat_map(|d| all_in(d)).collect()
}

/// [`all`] in registry directory `dir`.
pub fn all_in(dir: &Path) -> Vec<Entry> {
    read_entries(dir)
        .into_iter()
        .map(|(_, e)| e)
        .filter(|e| alive(e.pid))
        .collect()
}

/// The mount that holds `path`, and `path` relative to its root ("" for
/// the root itself). The last component of `path` need not exist (the
/// file `loom setstripe` is about to create).
pub fn find(path: &Path) -> Result<(Entry, PathBuf), RegistryError> {
    let mut last = None;
    for d in dirs() {
        match find_in(&d, path) {
            Ok(found) => return Ok(found),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(RegistryError::NotOnMount {
        path: path.to_path_buf(),
        dir: PathBuf::from(DIR),
    }))
}

/// [`find`] in registry directory `dir`.
pub fn find_in(dir: &Path, path: &Path) -> Result<(Entry, PathBuf), RegistryError> {
    let abs = std::path::absolute(path).map_err(|source| RegistryError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // Canonicalise the parent when the leaf does not exist yet.
    let canon = match abs.canonicalize() {
        Ok(c) => c,
        Err(_) => {
            let parent = abs.parent().unwrap_or(Path::new("/"));
            let leaf = abs.file_name().map(PathBuf::from).unwrap_or_default();
            parent
                .canonicalize()
                .map_err(|_| RegistryError::NoSuchDir {
                    path: parent.to_path_buf(),
                })?
                .join(leaf)
        }
    };
    let best = all_in(dir)
        .into_iter()
        .filter(|e| canon.starts_with(&e.mountpoint))
        .max_by_key(|e| e.mountpoint.as_os_str().len())
        .ok_or_else(|| RegistryError::NotOnMount {
            path: path.to_path_buf(),
            dir: dir.to_path_buf(),
        })?;
    // Relative to the mount's root, as the bytes the names have (a path
    // need not be UTF-8).
    let rel = canon
        .strip_prefix(&best.mountpoint)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Ok((best, rel))
}

/// Detach the mounts whose key lives in `state` (their server is gone).
pub fn unmount_stale_for_state(state: &Path) {
    for (file, entry) in read_entries(Path::new(DIR)) {
        if entry.key_file.starts_with(state) {
            let _ = nix::mount::umount2(&entry.mountpoint, nix::mount::MntFlags::MNT_DETACH);
            let _ = std::fs::remove_file(file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(mountpoint: &Path, pid: u32) -> Entry {
        Entry {
            mountpoint: mountpoint.to_path_buf(),
            mgs: "127.0.0.1:7000".into(),
            fsname: "loom".into(),
            key_file: "/state/cluster.key".into(),
            pid,
        }
    }

    #[test]
    fn the_deepest_live_mount_holding_a_path_is_found_with_the_relative_path() {
        let reg = tempfile::tempdir().expect("tempdir");
        let root = tempfile::tempdir().expect("tempdir");
        let outer = root.path().canonicalize().expect("canon");
        let inner = outer.join("a/inner");
        std::fs::create_dir_all(inner.join("sub")).expect("mkdir");
        let me = std::process::id();
        add_in(reg.path(), &entry(&outer, me)).expect("add");
        add_in(reg.path(), &entry(&inner, me)).expect("add");
        let (e, rel) = find_in(reg.path(), &inner.join("sub")).expect("found");
        assert_eq!((e.mountpoint, rel), (inner.clone(), PathBuf::from("sub")));
        let (e, rel) = find_in(reg.path(), &inner.join("sub/new-file")).expect("found");
        assert_eq!((e.mountpoint, rel), (inner, PathBuf::from("sub/new-file")));
        let (e, rel) = find_in(reg.path(), &outer).expect("found");
        assert_eq!((e.mountpoint, rel), (outer, PathBuf::new()));
    }

    #[test]
    fn a_mount_whose_process_is_gone_holds_nothing() {
        let reg = tempfile::tempdir().expect("tempdir");
        let root = tempfile::tempdir().expect("tempdir");
        let mp = root.path().canonicalize().expect("canon");
        // Pids above the kernel's pid_max (at most 2^22) never exist.
        add_in(reg.path(), &entry(&mp, (1 << 22) + 7)).expect("add");
        assert!(all_in(reg.path()).is_empty());
        let e = find_in(reg.path(), &mp).expect_err("dead mount");
        assert!(matches!(e, RegistryError::NotOnMount { .. }), "{e:?}");
    }
}
