//! The `noop:` target: the no-op FUSE reference file system
//! ([`loom_fuse::noop::NoopFs`], "the FUSE ceiling") mounted for one run.
//!
//! Opening the target mounts an empty `NoopFs` on a fresh temporary
//! directory with a loomfs mount's FUSE settings (threads, cloned fds,
//! mount options, `init` negotiation, readahead, attribute timeout); the
//! workload then runs there through POSIX calls, exactly as on any
//! directory ([`PosixFs`]). Dropping the target unmounts it and removes the
//! directory, whatever ended the run: success, an error, a failed open of
//! another target, or Ctrl-C (the workload stops, the driver returns, the
//! targets are dropped). Only a second Ctrl-C, which exits at once, leaves
//! the mount behind (`umount DIR` removes it).
//!
//! Since the reference does nothing behind each request, a phase's rate on
//! it is the most that FUSE passes on this machine with these settings; a
//! loomfs target's rate divided by it says how close loomfs comes.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::BenchError;
use crate::fs::{BenchFile, BenchFs, DirEntry, FileStat, OpenMode};
use crate::posix::PosixFs;

/// How the reference is mounted: what `noop:?threads=N&attr-timeout=SECS`
/// may change from a loomfs mount's defaults, to match a loomfs mount made
/// with other options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoopSettings {
    /// FUSE worker threads (`loom mount` uses 4).
    pub threads: usize,
    /// How long the kernel trusts attributes and entries (`loom mount
    /// --attr-timeout`, 1 s by default).
    pub attr_timeout: Duration,
}

impl Default for NoopSettings {
    fn default() -> Self {
        let d = loom_fuse::MountOptions::default();
        NoopSettings {
            threads: d.threads,
            attr_timeout: d.attr_timeout,
        }
    }
}

impl NoopSettings {
    /// Parses the query of `noop:?threads=N&attr-timeout=SECS` (empty: the
    /// defaults). `whole` names the target in errors.
    pub fn parse(whole: &str, query: &str) -> Result<NoopSettings, String> {
        let usage =
            || format!("target {whole:?}: expected noop: or noop:?threads=N&attr-timeout=SECS");
        let mut s = NoopSettings::default();
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            match kv.split_once('=') {
                Some(("threads", v)) => {
                    s.threads = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=1024).contains(n))
                        .ok_or_else(|| format!("{}: threads must be 1 to 1024", usage()))?;
                }
                Some(("attr-timeout", v)) => {
                    let secs: f64 = v
                        .parse()
                        .ok()
                        .filter(|s| (0.0..=3600.0).contains(s))
                        .ok_or_else(|| {
                            format!("{}: attr-timeout must be 0 to 3600 seconds", usage())
                        })?;
                    s.attr_timeout = Duration::from_secs_f64(secs);
                }
                _ => return Err(format!("{}: unknown option {kv:?}", usage())),
            }
        }
        Ok(s)
    }
}

impl std::fmt::Display for NoopSettings {
    /// `noop:`, with a query for what differs from the defaults.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = NoopSettings::default();
        let mut q = Vec::new();
        if self.threads != d.threads {
            q.push(format!("threads={}", self.threads));
        }
        if self.attr_timeout != d.attr_timeout {
            q.push(format!("attr-timeout={}", self.attr_timeout.as_secs_f64()));
        }
        if q.is_empty() {
            write!(f, "noop:")
        } else {
            write!(f, "noop:?{}", q.join("&"))
        }
    }
}

/// A mounted reference: unmounted, and its directory removed, on drop.
pub struct NoopMount {
    dir: PathBuf,
    session: Option<fuser::BackgroundSession>,
}

impl NoopMount {
    /// Mounts an empty reference on a new directory in the system's
    /// temporary directory (`loom-bench-noop.XXXXXX`). `label` names the
    /// target in errors.
    pub fn mount(settings: NoopSettings, label: &str) -> Result<NoopMount, BenchError> {
        let target_err = |reason: String| BenchError::Target {
            path: PathBuf::from(label),
            reason,
        };
        let template = std::env::temp_dir().join("loom-bench-noop.XXXXXX");
        let dir = nix::unistd::mkdtemp(&template).map_err(|e| {
            target_err(format!(
                "cannot make a mount point like {}: {e}",
                template.display()
            ))
        })?;
        let opts = loom_fuse::MountOptions {
            threads: settings.threads,
            attr_timeout: settings.attr_timeout,
            // As `loom mount` does by default: root's mount serves everyone.
            allow_other: nix::unistd::geteuid().is_root(),
            fsname: loom_fuse::noop::NOOP_SUBTYPE.to_string(),
            ..loom_fuse::MountOptions::default()
        };
        match loom_fuse::noop::mount_noop(&dir, opts) {
            Ok(session) => Ok(NoopMount {
                dir,
                session: Some(session),
            }),
            Err(e) => {
                // Nothing is mounted on it: an empty directory to remove.
                if let Err(re) = std::fs::remove_dir(&dir) {
                    tracing::warn!("removing {}: {re}", dir.display());
                }
                Err(target_err(format!(
                    "cannot mount the no-op FUSE reference on {} (is /dev/fuse usable?): {e}",
                    dir.display()
                )))
            }
        }
    }

    /// The mount point.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for NoopMount {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        // Unmount, then wait for fuser's threads to see the end.
        if let Err(e) = session.umount_and_join() {
            // Busy (an fd or a process still in it) or already gone:
            // detach, so that nothing is left in the mount table; fuser's
            // threads end when the last user leaves.
            tracing::warn!("unmounting {}: {e}; detaching it", self.dir.display());
            if let Err(e) = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH) {
                if e != nix::errno::Errno::EINVAL {
                    tracing::warn!("detaching {}: {e}", self.dir.display());
                }
            }
        }
        // Not recursive: an empty mount point is removed, a directory
        // that is somehow still mounted (or not empty) is left alone.
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            tracing::warn!("removing {}: {e}", self.dir.display());
        }
    }
}

/// The `noop:` backend: POSIX calls on a mounted reference. Its mount
/// lives as long as it does.
pub struct NoopTarget {
    // Declared first, dropped first: nothing refers to the mount when it
    // is unmounted.
    posix: PosixFs,
    mount: NoopMount,
}

impl NoopTarget {
    /// Mounts a reference and checks it as any directory target.
    pub fn open(settings: NoopSettings, label: &str) -> Result<NoopTarget, BenchError> {
        let mount = NoopMount::mount(settings, label)?;
        // On an error the mount is dropped: unmounted and removed.
        let posix = PosixFs::new(mount.dir())?;
        Ok(NoopTarget { posix, mount })
    }

    /// Where the reference is mounted.
    pub fn dir(&self) -> &Path {
        self.mount.dir()
    }
}

impl BenchFs for NoopTarget {
    fn describe(&self) -> String {
        format!("noop:{} (the no-op FUSE reference)", self.dir().display())
    }

    fn mkdir(&self, path: &Path) -> io::Result<()> {
        self.posix.mkdir(path)
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        self.posix.rmdir(path)
    }

    fn create_file(&self, path: &Path, data: &[u8], fsync: bool) -> io::Result<()> {
        self.posix.create_file(path, data, fsync)
    }

    fn read_file(&self, path: &Path, buf: &mut [u8]) -> io::Result<usize> {
        self.posix.read_file(path, buf)
    }

    fn stat(&self, path: &Path) -> io::Result<FileStat> {
        self.posix.stat(path)
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        self.posix.unlink(path)
    }

    fn readdir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.posix.readdir(path)
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn BenchFile>> {
        self.posix.open(path, mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_default_to_a_loomfs_mounts_and_print_only_what_differs() {
        let d = NoopSettings::parse("noop:", "").expect("defaults");
        assert_eq!(d, NoopSettings::default());
        assert_eq!((d.threads, d.attr_timeout), (4, Duration::from_secs(1)));
        assert_eq!(d.to_string(), "noop:");
        let s = NoopSettings::parse("x", "threads=8&attr-timeout=0.5").expect("both");
        assert_eq!((s.threads, s.attr_timeout), (8, Duration::from_millis(500)));
        assert_eq!(s.to_string(), "noop:?threads=8&attr-timeout=0.5");
        for bad in [
            "threads=0",
            "threads=x",
            "attr-timeout=-1",
            "color=red",
            "threads",
        ] {
            assert!(NoopSettings::parse("x", bad).is_err(), "{bad} parsed");
        }
    }
}
