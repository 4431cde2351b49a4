//! The FUSE adapter: mounts a [`loom_client::Client`] with fuser.
//!
//! It holds no file-system logic. Each callback converts the kernel's
//! arguments, runs one client operation to completion on the tokio runtime
//! (`Handle::block_on`: fuser's workers are plain threads), and maps the
//! `Result<T, Errno>` onto the reply. The helpers in [`fs`] return results;
//! the trait methods only reply.
//!
//! - [`attr`]: proto attributes to `fuser::FileAttr`, times both ways.
//! - [`fs`]: the `Filesystem` implementation and its open-file table.
//! - [`settings`]: the FUSE settings every mount shares (threads, mount
//!   options, what `init` negotiates, readahead).
//! - [`notify`]: the thread that makes the kernel drop what it caches
//!   when an MDT recalls a lease, and the one that stores kept bytes.
//! - [`kept`]: bytes of ragged writes the kernel holds in folios it does
//!   not count as up to date, answered and stored back from the mount.
//! - [`tools`]: the `loom.` extended attributes through which users'
//!   lfs-style tools work without the cluster key.
//! - [`noop`]: a no-op in-memory file system mounted with the same
//!   settings, the reference `loom bench` measures "the FUSE ceiling" with.
//!
//! Inode numbers are FIDs ([`loom_proto::Fid::ino`]); the root is inode 1.
//! Per inode, what the kernel was last told (size, mtime, and whether the
//! file has capabilities) is kept until the kernel forgets the inode, and
//! the bytes of ragged writes until they are stored back ([`kept`]).
#![warn(missing_docs)]

pub mod attr;
pub mod finds;
pub mod fs;
pub mod kept;
pub mod noop;
pub mod notify;
pub mod pagestore;
pub mod settings;
pub mod snapdir;
pub mod tools;

use loom_client::Client;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How to mount.
#[derive(Clone, Debug)]
pub struct MountOptions {
    /// FUSE worker threads (each with its own cloned /dev/fuse fd).
    pub threads: usize,
    /// How long the kernel may trust attributes and entries it was given
    /// (1 s by default). Opens always fetch fresh attributes (close-to-open);
    /// a stat may show another mount's change up to this late. 0 makes
    /// every stat ask the MDT.
    pub attr_timeout: Duration,
    /// Let other users than the mounter use the mount (`allow_other`).
    pub allow_other: bool,
    /// Source name shown in /proc/mounts (e.g. `mgs:port:/fsname`).
    pub fsname: String,
    /// Kernel readahead for the mount, in KiB (the kernel starts a FUSE
    /// mount at 128 KiB whatever the file system asks; `None` leaves it).
    pub readahead_kb: Option<u32>,
    /// The directory the mount shows as its root (`Client::root`: the
    /// file system's, or a nodemap's fileset).
    pub root: loom_proto::Fid,
    /// Mounted read-only (a snapshot).
    pub read_only: bool,
    /// The hidden directory in the root where every snapshot is found
    /// read-only (`.snapshots`; `None`: none). Not in a snapshot's mount.
    pub snapdir: Option<Vec<u8>>,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            threads: 4,
            attr_timeout: DEFAULT_ATTR_TIMEOUT,
            allow_other: false,
            fsname: "loomfs".to_string(),
            readahead_kb: Some(DEFAULT_READAHEAD_KB),
            root: loom_proto::Fid::ROOT,
            read_only: false,
            snapdir: Some(b".snapshots".to_vec()),
        }
    }
}

/// Mount `client`'s file system on `mountpoint` and serve it from
/// background threads until the returned session is dropped or unmounted.
pub fn mount(
    client: Arc<Client>,
    rt: tokio::runtime::Handle,
    mountpoint: &Path,
    opts: MountOptions,
) -> std::io::Result<fuser::BackgroundSession> {
    let cfg = settings::fuser_config(&opts, "loom");
    let notifier = Arc::new(OnceLock::new());
    let inos = fs::Inos::new(opts.root);
    let mut fs = fs::LoomFs::new(
        client.clone(),
        rt,
        opts.attr_timeout,
        notifier.clone(),
        opts.threads.max(1),
        inos,
    )?;
    if let Some(name) = opts.snapdir.clone().filter(|_| !opts.read_only) {
        fs.set_snapdir(name);
    }
    let kept = fs.kept();
    let pages = fs.pages();
    let session = fuser::Session::new(fs, mountpoint, &cfg)?;
    let _ = notifier.set(session.notifier());
    let _ = pages.set(pagestore::PageStore::new(std::os::fd::AsFd::as_fd(
        &session,
    ))?);
    client.set_invalidator(notify::spawn(session.notifier(), kept, inos)?);
    let bg = session.spawn()?;
    settings::apply_readahead(mountpoint, &opts);
    Ok(bg)
}

/// Readahead of a mount by default: 4 MiB, the largest read the client
/// sends in one request, and the size of 4 default stripes.
pub const DEFAULT_READAHEAD_KB: u32 = 4096;

/// Set the kernel's readahead for the mount at `mountpoint`: its backing
/// device info, `/sys/class/bdi/MAJOR:MINOR/read_ahead_kb`. The kernel
/// caps a new FUSE mount at 128 KiB, which made streaming reads arrive as
/// 128 KiB requests, one OST round trip each (384 MiB/s against 868 MiB/s
/// at 4 MiB in docs/BENCHMARKS.md).
pub fn set_readahead(mountpoint: &Path, kb: u32) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(mountpoint)?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let path = format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb");
    std::fs::write(&path, kb.to_string())
        .map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")))
}

/// How long the kernel trusts attributes and entries by default.
pub const DEFAULT_ATTR_TIMEOUT: Duration = Duration::from_secs(1);
