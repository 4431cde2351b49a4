//! Where a benchmark runs: the target syntax every command shares, and
//! opening a target as a backend.
//!
//! ```text
//! /some/dir                                 POSIX calls on a directory of any mount
//! loom:/mnt/loom/sub                        the same loomfs directory, through the
//!                                           client library (no FUSE): the mount's
//!                                           MGS, file system and key come from the
//!                                           mount registry (/run/loom/mounts)
//! loom://HOST:PORT/FSNAME/sub/dir?key=FILE  a loomfs directory through the client
//!                                           library, no mount needed; key defaults
//!                                           to /etc/loom/FSNAME.key
//! noop:                                     the no-op FUSE reference ("the FUSE
//!                                           ceiling"), mounted for the run on a
//!                                           temporary directory with a loomfs
//!                                           mount's FUSE settings (crate::noop);
//!                                           noop:?threads=N&attr-timeout=SECS
//!                                           matches a mount made with other options
//! ```
//!
//! `compare` names its targets `NAME=TARGET`; a bare target is named by its
//! last path component.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::BenchError;
use crate::loomfs::{LoomAddr, LoomFs};
use crate::noop::{NoopSettings, NoopTarget};
use crate::posix::PosixFs;
use crate::runner::Target;

/// The help text that explains the target syntax (shown by `--help`).
pub const TARGET_HELP: &str = "\
TARGETS:
  DIR                          a directory of any mounted file system, through POSIX calls
                               (local disk, tmpfs, NFS, a loomfs FUSE mount, ...)
  loom:DIR                     DIR must be inside a loomfs mount: the same directory, driven
                               through the loomfs client library with no FUSE (the mount's
                               MGS, file system name and key file come from /run/loom/mounts)
  loom://HOST:PORT/FSNAME[/SUB/DIR][?key=KEYFILE]
                               a loomfs directory through the client library, no mount needed;
                               KEYFILE defaults to /etc/loom/FSNAME.key
  noop:[?threads=N&attr-timeout=SECS]
                               the FUSE ceiling: a no-op in-memory FUSE file system mounted for the
                               run on a temporary directory with a loomfs mount's FUSE settings
                               (4 threads, 1 s attribute timeout unless given), driven through POSIX
                               calls, unmounted afterwards. Put beside a loomfs mount, it shows how
                               close loomfs comes to what FUSE allows on this machine";

/// A parsed target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetAddr {
    /// A directory, through POSIX calls.
    Posix(PathBuf),
    /// `loom:DIR`: a directory of a loomfs mount, through the library.
    LoomMount(PathBuf),
    /// `loom://…`: a loomfs directory through the library, no mount.
    LoomUrl(LoomAddr),
    /// `noop:`: the no-op FUSE reference, mounted for the run.
    Noop(NoopSettings),
}

impl FromStr for TargetAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err("empty target".into());
        }
        if let Some(rest) = s.strip_prefix("noop:") {
            return match rest.strip_prefix('?') {
                Some(query) => NoopSettings::parse(s, query).map(TargetAddr::Noop),
                None if rest.is_empty() => Ok(TargetAddr::Noop(NoopSettings::default())),
                None => Err(format!(
                    "target {s:?}: noop: takes no directory (it mounts its own); \
                     a directory named so is ./{s}"
                )),
            };
        }
        if let Some(rest) = s.strip_prefix("loom://") {
            return parse_url(s, rest).map(TargetAddr::LoomUrl);
        }
        if let Some(path) = s.strip_prefix("loom:") {
            if path.is_empty() {
                return Err(format!(
                    "target {s:?}: give a directory inside a loomfs mount, e.g. loom:/mnt/loom/dir"
                ));
            }
            return Ok(TargetAddr::LoomMount(PathBuf::from(path)));
        }
        Ok(TargetAddr::Posix(PathBuf::from(s)))
    }
}

fn parse_url(whole: &str, rest: &str) -> Result<LoomAddr, String> {
    let usage =
        || format!("target {whole:?}: expected loom://HOST:PORT/FSNAME[/SUB/DIR][?key=KEYFILE]");
    let (main, query) = match rest.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (rest, None),
    };
    let (mgs, path) = main.split_once('/').ok_or_else(usage)?;
    let (host, port) = mgs.rsplit_once(':').ok_or_else(usage)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(format!("{}: the MGS must be HOST:PORT", usage()));
    }
    let mut comps = path.split('/').filter(|c| !c.is_empty() && *c != ".");
    let fsname = comps.next().ok_or_else(usage)?.to_string();
    let dir: Vec<&str> = comps.collect();
    if dir.contains(&"..") {
        return Err(format!("{}: '..' is not allowed", usage()));
    }
    let mut key_file = None;
    for kv in query.into_iter().flat_map(|q| q.split('&')) {
        match kv.split_once('=') {
            Some(("key", v)) if !v.is_empty() => key_file = Some(PathBuf::from(v)),
            _ => return Err(format!("{}: unknown query {kv:?}", usage())),
        }
    }
    Ok(LoomAddr {
        key_file: key_file.unwrap_or_else(|| PathBuf::from(format!("/etc/loom/{fsname}.key"))),
        mgs: mgs.to_string(),
        fsname,
        dir: dir.join("/"),
    })
}

impl std::fmt::Display for TargetAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetAddr::Posix(p) => write!(f, "{}", p.display()),
            TargetAddr::LoomMount(p) => write!(f, "loom:{}", p.display()),
            TargetAddr::LoomUrl(a) => write!(
                f,
                "loom://{}/{}{}{}?key={}",
                a.mgs,
                a.fsname,
                if a.dir.is_empty() { "" } else { "/" },
                a.dir,
                a.key_file.display()
            ),
            TargetAddr::Noop(n) => write!(f, "{n}"),
        }
    }
}

impl TargetAddr {
    /// The name of a target given without `NAME=`: its last path component
    /// (the file system name for the root of a `loom://` target).
    pub fn default_name(&self) -> String {
        let last = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.display().to_string())
        };
        match self {
            TargetAddr::Posix(p) | TargetAddr::LoomMount(p) => last(p),
            TargetAddr::LoomUrl(a) => a
                .dir
                .rsplit('/')
                .next()
                .filter(|s| !s.is_empty())
                .unwrap_or(&a.fsname)
                .to_string(),
            TargetAddr::Noop(_) => "noop".to_string(),
        }
    }

    /// Checks the target and opens it as a backend named `name`.
    pub fn open(&self, name: &str) -> Result<Target, BenchError> {
        let label = self.to_string();
        match self {
            TargetAddr::Posix(p) => {
                let fs = PosixFs::new(p)?;
                Ok(Target {
                    name: name.to_string(),
                    location: p.display().to_string(),
                    fs_type: fs.fs_type().to_string(),
                    fs: Box::new(fs),
                })
            }
            TargetAddr::LoomMount(p) => {
                let fs = loom_fs_of_mount(p, &label)?;
                Ok(Target {
                    name: name.to_string(),
                    location: label,
                    fs_type: "loomfs-lib".into(),
                    fs: Box::new(fs),
                })
            }
            TargetAddr::LoomUrl(a) => {
                let fs = LoomFs::connect(a.clone(), &label)?;
                Ok(Target {
                    name: name.to_string(),
                    location: label,
                    fs_type: "loomfs-lib".into(),
                    fs: Box::new(fs),
                })
            }
            TargetAddr::Noop(n) => {
                let fs = NoopTarget::open(*n, &label)?;
                Ok(Target {
                    name: name.to_string(),
                    // The mount point, so that errors name real paths.
                    location: fs.dir().display().to_string(),
                    fs_type: format!("fuse.{}", loom_fuse::noop::NOOP_SUBTYPE),
                    fs: Box::new(fs),
                })
            }
        }
    }
}

/// A client-library view of the directory `mount` (on a loomfs mount),
/// named `label` in errors.
pub fn loom_fs_of_mount(mount: &Path, label: &str) -> Result<LoomFs, BenchError> {
    let (entry, rel) = loom_client::registry::find(mount).map_err(|e| BenchError::Target {
        path: PathBuf::from(label),
        reason: e.to_string(),
    })?;
    let addr = LoomAddr {
        mgs: entry.mgs,
        fsname: entry.fsname,
        // The workloads' directories are named in ASCII.
        dir: rel.to_string_lossy().into_owned(),
        key_file: entry.key_file,
    };
    LoomFs::connect(addr, label)
}

/// A named target of `compare`: `NAME=TARGET`, or a bare `TARGET` (named by
/// its last component).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSpec {
    /// The name shown in tables and charts.
    pub name: String,
    /// Where to run.
    pub addr: TargetAddr,
}

impl FromStr for TargetSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // NAME= only when what precedes the first '=' is a plain name: a
        // path or a loom:// target may hold '=' itself (?key=...).
        let named = s
            .split_once('=')
            .filter(|(n, _)| !n.contains(['/', ':', '?']));
        let (name, target) = match named {
            Some((n, t)) => (n.trim().to_string(), t),
            None => (String::new(), s),
        };
        if named.is_some() && name.is_empty() {
            return Err(format!("target {s:?}: empty name (use NAME=TARGET)"));
        }
        if target.is_empty() {
            return Err(format!("target {s:?}: empty target (use NAME=TARGET)"));
        }
        let addr: TargetAddr = target.parse()?;
        let name = if name.is_empty() {
            addr.default_name()
        } else {
            name
        };
        Ok(TargetSpec { name, addr })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_are_posix_and_loom_prefixes_are_the_library() {
        assert_eq!(
            "/tmp/x".parse::<TargetAddr>(),
            Ok(TargetAddr::Posix("/tmp/x".into()))
        );
        assert_eq!(
            "loom:/mnt/loom/d".parse::<TargetAddr>(),
            Ok(TargetAddr::LoomMount("/mnt/loom/d".into()))
        );
        assert!("loom:".parse::<TargetAddr>().is_err());
        assert!("".parse::<TargetAddr>().is_err());
    }

    #[test]
    fn noop_is_the_fuse_reference_with_optional_settings() {
        let t: TargetAddr = "noop:".parse().expect("noop");
        assert_eq!(t, TargetAddr::Noop(NoopSettings::default()));
        assert_eq!(
            (t.default_name(), t.to_string()),
            ("noop".into(), "noop:".into())
        );
        let t: TargetAddr = "noop:?threads=2".parse().expect("noop");
        let TargetAddr::Noop(s) = t else {
            panic!("not noop: {t:?}")
        };
        assert_eq!(s.threads, 2);
        assert!("noop:/tmp/x".parse::<TargetAddr>().is_err());
        assert!("noop:?x=1".parse::<TargetAddr>().is_err());
        let named: TargetSpec = "ceiling=noop:".parse().expect("spec");
        assert_eq!(named.name, "ceiling");
        let bare: TargetSpec = "noop:?attr-timeout=0".parse().expect("spec");
        assert_eq!(bare.name, "noop");
    }

    #[test]
    fn loom_urls_carry_mgs_fsname_directory_and_key() {
        let t: TargetAddr = "loom://10.0.0.1:7000/scratch/a/b?key=/k/s.key"
            .parse()
            .expect("url");
        assert_eq!(
            t,
            TargetAddr::LoomUrl(LoomAddr {
                mgs: "10.0.0.1:7000".into(),
                fsname: "scratch".into(),
                dir: "a/b".into(),
                key_file: "/k/s.key".into(),
            })
        );
        assert_eq!(t.default_name(), "b");
        assert_eq!(
            t.to_string(),
            "loom://10.0.0.1:7000/scratch/a/b?key=/k/s.key"
        );
        let root: TargetAddr = "loom://h:1/fs".parse().expect("url");
        let TargetAddr::LoomUrl(a) = &root else {
            panic!("not a url: {root:?}")
        };
        assert_eq!(
            (a.dir.as_str(), a.key_file.as_path()),
            ("", Path::new("/etc/loom/fs.key"))
        );
        assert_eq!(root.default_name(), "fs");
        for bad in [
            "loom://h/fs",
            "loom://h:x/fs",
            "loom://h:1",
            "loom://h:1/",
            "loom://h:1/fs/../x",
            "loom://h:1/fs?color=red",
        ] {
            assert!(bad.parse::<TargetAddr>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn targets_parse_as_name_equals_target() {
        let t: TargetSpec = "ext4=/var/tmp/a".parse().expect("spec");
        assert_eq!(t.name, "ext4");
        assert_eq!(t.addr, TargetAddr::Posix("/var/tmp/a".into()));
        let bare: TargetSpec = "/dev/shm/b".parse().expect("spec");
        assert_eq!(bare.name, "b");
        let lib: TargetSpec = "lib=loom:/mnt/l/d".parse().expect("spec");
        assert_eq!(
            (lib.name.as_str(), lib.addr),
            ("lib", TargetAddr::LoomMount("/mnt/l/d".into()))
        );
        // The '=' of ?key= is not a name.
        let url: TargetSpec = "loom://h:1/fs/d?key=/k".parse().expect("spec");
        assert_eq!(url.name, "d");
        let named: TargetSpec = "x=loom://h:1/fs/d?key=/k".parse().expect("spec");
        assert_eq!(named.name, "x");
        assert!("=/x".parse::<TargetSpec>().is_err());
        assert!("x=".parse::<TargetSpec>().is_err());
    }
}
