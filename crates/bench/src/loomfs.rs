//! [`LoomFs`]: the [`BenchFs`] backend that drives loomfs through its client
//! library (`loom-client`), with no FUSE and no kernel in between, so the
//! same workloads measure what the file system itself delivers.
//!
//! Each call is the library call the FUSE adapter (`crates/fuse/src/fs.rs`)
//! would make for the same system call, minus what only the kernel needs:
//!
//! | workload step | library calls |
//! | --- | --- |
//! | mkdir, rmdir, unlink | `mkdir` / `rmdir` / `unlink` in the parent's FID |
//! | create (mdtest) | `create` (on EEXIST: `lookup`, truncate to 0), then with data or fsync `open_as`, `write`, `fsync` or `flush` |
//! | read (mdtest) | `lookup` (which carries the layout), `open_as`, `read` |
//! | stat | `lookup` in the parent (`getattr` for the root) |
//! | readdir | `readdir` in batches until the end |
//! | open for IOR | `lookup` (read) or `create`-or-`lookup` (write), `open_as` |
//! | close | `flush`, which reports the size to the MDT (close-to-open) |
//!
//! **Paths are walked with leased lookups.** A workload names every file by
//! its path; the client takes leases, as a mount does, so each component's
//! lookup is answered by the library itself while its MDT has not recalled
//! it (as the kernel's dentry cache spares FUSE the walk), and asks the
//! MDT again after another client changed it. The backend keeps no paths
//! of its own. Symbolic links are not followed (the workloads make none).
//!
//! **Threads.** The library is async: the backend owns a tokio runtime and
//! each benchmark thread (`-p`) blocks on its own call with
//! [`tokio::runtime::Runtime::block_on`]. Benchmark threads are never
//! runtime threads, so no call ever blocks inside the runtime.

use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use loom_client::{Caller, Client, ClientOptions, ClusterKey, Errno, OpenFile};
use loom_proto::msg::{Attr, DirStripe, FileKind, SetAttr, Time};
use loom_proto::{Fid, Layout};

use crate::error::BenchError;
use crate::fs::{BenchFile, BenchFs, DirEntry, FileStat, OpenMode};

/// Entries asked for per readdir request.
const READDIR_BATCH: u32 = 256;
/// Permission bits of directories and files the workloads make.
const DIR_PERM: u32 = 0o755;
const FILE_PERM: u32 = 0o644;

/// Where a loomfs target is: the cluster, the file system and the directory
/// inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoomAddr {
    /// MGS address, `HOST:PORT`.
    pub mgs: String,
    /// File system name.
    pub fsname: String,
    /// The directory to run in, relative to the file system's root ("" is
    /// the root).
    pub dir: String,
    /// The cluster key file.
    pub key_file: PathBuf,
}

/// The error of a loomfs call, as the `io::Error` the workloads report: the
/// errno the server or client chose, unchanged.
pub fn io_error(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw())
}

fn to_system_time(t: Time) -> SystemTime {
    let d = Duration::new(t.sec.unsigned_abs(), t.nsec);
    if t.sec >= 0 {
        SystemTime::UNIX_EPOCH + d
    } else {
        SystemTime::UNIX_EPOCH - d
    }
}

fn file_stat(a: &Attr) -> FileStat {
    FileStat {
        size: a.size,
        is_dir: a.kind == FileKind::Dir,
        modified: to_system_time(a.mtime),
    }
}

/// The parent directory and the last name of a workload path.
fn split(path: &Path) -> Result<(&Path, &str), Errno> {
    let name = match path.components().next_back() {
        Some(Component::Normal(n)) => n.to_str().ok_or(Errno::EINVAL)?,
        _ => return Err(Errno::EINVAL),
    };
    Ok((path.parent().unwrap_or(Path::new("")), name))
}

/// The names of a workload path's components (no `..`, no root).
fn names(path: &Path) -> Result<Vec<&str>, Errno> {
    path.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .map(|c| match c {
            Component::Normal(n) => n.to_str().ok_or(Errno::EINVAL),
            _ => Err(Errno::EINVAL),
        })
        .collect()
}

/// A [`BenchFs`] on a directory of a loomfs file system, through the
/// client library.
pub struct LoomFs {
    rt: tokio::runtime::Runtime,
    client: Arc<Client>,
    caller: Caller,
    addr: LoomAddr,
    root: Fid,
}

impl Drop for LoomFs {
    fn drop(&mut self) {
        // Commit what the run changed and leave the MDTs' recovery.
        self.rt.block_on(self.client.close());
    }
}

impl std::fmt::Debug for LoomFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoomFs")
            .field("addr", &self.addr)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl LoomFs {
    /// Connects to the cluster, finds the directory and checks that it is
    /// writable (by creating and removing a probe file, as [`crate::PosixFs`]
    /// does). `label` names the target in errors (what the user typed).
    pub fn connect(addr: LoomAddr, label: &str) -> Result<LoomFs, BenchError> {
        let target_err = |reason: String| BenchError::Target {
            path: PathBuf::from(label),
            reason,
        };
        let text = std::fs::read_to_string(&addr.key_file).map_err(|e| {
            target_err(format!(
                "cannot read cluster key {}: {e}",
                addr.key_file.display()
            ))
        })?;
        let key = ClusterKey::from_hex(&text)
            .map_err(|e| target_err(format!("{}: {e}", addr.key_file.display())))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("loom-bench-client")
            .enable_all()
            .build()
            .map_err(|e| target_err(format!("cannot start the client runtime: {e}")))?;
        let client = rt
            .block_on(Client::connect(
                &addr.mgs,
                &addr.fsname,
                key,
                ClientOptions {
                    // Leases, as a mount takes them: path walks are
                    // answered here until another client changes them.
                    caching: loom_client::routing::Caching {
                        attr_timeout: Duration::from_secs(1),
                        lease_time: Some(Duration::from_secs(300)),
                    },
                    ..ClientOptions::default()
                },
            ))
            .map_err(|e| target_err(e.to_string()))?;
        let caller = Caller::current();
        let attr = match rt.block_on(client.resolve_path_as(&caller, &addr.dir)) {
            Ok(a) => a,
            Err(e) if e == Errno::ENOENT => return Err(target_err("does not exist".into())),
            Err(e) => return Err(target_err(format!("cannot look it up: {}", io_error(e)))),
        };
        if attr.kind != FileKind::Dir {
            return Err(target_err("is not a directory".into()));
        }
        let fs = LoomFs {
            rt,
            client,
            caller,
            addr,
            root: attr.fid,
        };
        let probe = PathBuf::from(format!(".loom-bench-probe.{}", std::process::id()));
        match fs.create_file(&probe, &[], false) {
            Ok(()) => fs
                .unlink(&probe)
                .map_err(|e| target_err(format!("cannot remove probe file: {e}")))?,
            Err(e) if e.raw_os_error() == Some(libc::EROFS) => {
                return Err(target_err("is on a read-only file system".into()))
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                return Err(target_err("is not writable (permission denied)".into()))
            }
            Err(e) => return Err(target_err(format!("cannot create a file in it: {e}"))),
        }
        Ok(fs)
    }

    /// Where this backend runs.
    pub fn addr(&self) -> &LoomAddr {
        &self.addr
    }

    /// The FID of directory `path`: one lookup per component, each
    /// answered by the library under its lease, or by the MDT.
    fn dir_fid(&self, path: &Path) -> Result<Fid, Errno> {
        let mut fid = self.root;
        for name in names(path)? {
            let (attr, _) = self
                .rt
                .block_on(self.client.lookup(&self.caller, fid, name))?;
            if attr.kind != FileKind::Dir {
                return Err(Errno::ENOTDIR);
            }
            fid = attr.fid;
        }
        Ok(fid)
    }

    /// Runs `op(parent FID, name)` for `path`; on ESTALE (the parent was
    /// removed and maybe made again by someone else between the walk and
    /// the operation) walks again and tries once more.
    fn at_parent<T>(
        &self,
        path: &Path,
        op: impl Fn(Fid, &str) -> Result<T, Errno>,
    ) -> io::Result<T> {
        let (parent, name) = split(path).map_err(io_error)?;
        let fid = self.dir_fid(parent).map_err(io_error)?;
        match op(fid, name) {
            Err(e) if e == Errno::ESTALE => {
                let fid = self.dir_fid(parent).map_err(io_error)?;
                op(fid, name).map_err(io_error)
            }
            r => r.map_err(io_error),
        }
    }

    /// Creates regular file `name` in `parent`, or finds the existing one
    /// (truncated to 0 with `truncate`); its attributes and layout.
    async fn create_or_open(
        &self,
        parent: Fid,
        name: &str,
        truncate: bool,
    ) -> Result<(Attr, Layout), Errno> {
        let c = &self.caller;
        let (mut attr, layout) = match self
            .client
            .create(c, parent, name, FileKind::File, FILE_PERM, 0, None)
            .await
        {
            Ok(r) => r,
            Err(e) if e == Errno::EEXIST => {
                let (attr, layout) = self.client.lookup(c, parent, name).await?;
                if attr.kind == FileKind::Dir {
                    return Err(Errno::EISDIR);
                }
                (attr, layout)
            }
            Err(e) => return Err(e),
        };
        if attr.kind != FileKind::File {
            return Err(Errno::EINVAL);
        }
        if truncate && attr.size > 0 {
            let set = SetAttr {
                size: Some(0),
                ..SetAttr::default()
            };
            attr = self.client.setattr(c, attr.fid, set).await?;
        }
        let layout = match layout {
            Some(l) => l,
            None => self.client.get_layout_as(c, attr.fid).await?,
        };
        Ok((attr, layout))
    }

    /// Looks up regular file `name` in `parent` for reading.
    async fn open_existing(&self, parent: Fid, name: &str) -> Result<Arc<OpenFile>, Errno> {
        let c = &self.caller;
        let (attr, layout) = self.client.lookup(c, parent, name).await?;
        match attr.kind {
            FileKind::File => {}
            FileKind::Dir => return Err(Errno::EISDIR),
            _ => return Err(Errno::EINVAL),
        }
        let layout = match layout {
            Some(l) => l,
            None => self.client.get_layout_as(c, attr.fid).await?,
        };
        let f = self.client.open_as(c, attr.fid, layout, attr.size);
        f.note_attr(&attr);
        Ok(f)
    }
}

impl LoomFs {
    /// Creates one directory placed on MDTs by `stripe` (`loom mkdir -i`,
    /// `loom setdirstripe`); its parent exists.
    pub fn mkdir_placed(&self, path: &Path, stripe: DirStripe) -> io::Result<()> {
        self.at_parent(path, |parent, name| {
            self.rt.block_on(self.client.mkdir_striped(
                &self.caller,
                parent,
                name,
                DIR_PERM,
                stripe,
            ))
        })?;
        Ok(())
    }
}

impl BenchFs for LoomFs {
    fn describe(&self) -> String {
        format!(
            "loomfs library: {}:/{}/{}",
            self.addr.mgs, self.addr.fsname, self.addr.dir
        )
    }

    fn mkdir(&self, path: &Path) -> io::Result<()> {
        self.at_parent(path, |parent, name| {
            self.rt
                .block_on(self.client.mkdir(&self.caller, parent, name, DIR_PERM))
        })?;
        Ok(())
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        self.at_parent(path, |parent, name| {
            self.rt
                .block_on(self.client.rmdir(&self.caller, parent, name))
        })?;
        Ok(())
    }

    fn create_file(&self, path: &Path, data: &[u8], fsync: bool) -> io::Result<()> {
        let (attr, layout) = self.at_parent(path, |parent, name| {
            self.rt.block_on(self.create_or_open(parent, name, true))
        })?;
        if data.is_empty() && !fsync {
            return Ok(());
        }
        let f = self
            .client
            .open_as(&self.caller, attr.fid, layout, attr.size);
        f.note_attr(&attr);
        self.rt
            .block_on(async {
                f.write(0, data).await?;
                if fsync {
                    f.fsync().await
                } else {
                    // close(2): the MDT learns the size.
                    f.flush().await
                }
            })
            .map_err(io_error)
    }

    fn read_file(&self, path: &Path, buf: &mut [u8]) -> io::Result<usize> {
        let f = self.at_parent(path, |parent, name| {
            self.rt.block_on(self.open_existing(parent, name))
        })?;
        let data = self.rt.block_on(f.read(0, buf.len())).map_err(io_error)?;
        let n = data.len().min(buf.len());
        buf[..n].copy_from_slice(&data[..n]);
        Ok(n)
    }

    fn stat(&self, path: &Path) -> io::Result<FileStat> {
        if names(path).map_err(io_error)?.is_empty() {
            let attr = self
                .rt
                .block_on(self.client.getattr(&self.caller, self.root))
                .map_err(io_error)?;
            return Ok(file_stat(&attr));
        }
        let attr = self.at_parent(path, |parent, name| {
            self.rt
                .block_on(self.client.lookup(&self.caller, parent, name))
                .map(|(a, _)| a)
        })?;
        Ok(file_stat(&attr))
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        self.at_parent(path, |parent, name| {
            self.rt
                .block_on(self.client.unlink(&self.caller, parent, name))
        })
    }

    fn readdir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let fid = self.dir_fid(path).map_err(io_error)?;
        let mut out = Vec::new();
        let mut cookie = 0;
        loop {
            let (entries, eof) = self
                .rt
                .block_on(
                    self.client
                        .readdir(&self.caller, fid, cookie, READDIR_BATCH),
                )
                .map_err(io_error)?;
            let Some(last) = entries.last() else { break };
            cookie = last.cookie;
            for e in entries {
                let is_dir = e.attr.kind == FileKind::Dir;
                out.push(DirEntry {
                    // The workloads make ASCII names only.
                    name: e.name.to_string(),
                    is_dir: Some(is_dir),
                });
            }
            if eof {
                break;
            }
        }
        Ok(out)
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn BenchFile>> {
        let file = match mode {
            OpenMode::Read => self.at_parent(path, |parent, name| {
                self.rt.block_on(self.open_existing(parent, name))
            })?,
            OpenMode::Write => {
                let (attr, layout) = self.at_parent(path, |parent, name| {
                    self.rt.block_on(self.create_or_open(parent, name, false))
                })?;
                let f = self
                    .client
                    .open_as(&self.caller, attr.fid, layout, attr.size);
                f.note_attr(&attr);
                f
            }
        };
        Ok(Box::new(LoomFile {
            rt: self.rt.handle().clone(),
            file,
        }))
    }
}

/// An open file of a [`LoomFs`].
struct LoomFile {
    rt: tokio::runtime::Handle,
    file: Arc<OpenFile>,
}

impl BenchFile for LoomFile {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.rt
            .block_on(self.file.write(offset, buf))
            .map_err(io_error)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let data = self
                .rt
                .block_on(self.file.read(offset + done as u64, buf.len() - done))
                .map_err(io_error)?;
            if data.is_empty() {
                break;
            }
            let n = data.len().min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&data[..n]);
            done += n;
        }
        Ok(done)
    }

    fn fsync(&self) -> io::Result<()> {
        self.rt.block_on(self.file.fsync()).map_err(io_error)
    }

    fn close(self: Box<Self>) -> io::Result<()> {
        // As close(2) through FUSE: report the size to the MDT.
        self.rt.block_on(self.file.flush()).map_err(io_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_into_parent_and_name() {
        assert_eq!(split(Path::new("a/b/c")), Ok((Path::new("a/b"), "c")));
        assert_eq!(split(Path::new("c")), Ok((Path::new(""), "c")));
        assert_eq!(split(Path::new("")), Err(Errno::EINVAL));
        assert_eq!(split(Path::new("a/..")), Err(Errno::EINVAL));
        assert_eq!(names(Path::new("./a/b")), Ok(vec!["a", "b"]));
        assert_eq!(names(Path::new("a/../b")), Err(Errno::EINVAL));
        assert_eq!(names(Path::new("/a")), Err(Errno::EINVAL));
    }

    #[test]
    fn errnos_become_the_same_os_errors() {
        let e = io_error(Errno::ENOENT);
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert_eq!(io_error(Errno::EROFS).raw_os_error(), Some(libc::EROFS));
        assert_eq!(
            io_error(Errno::ENOTEMPTY).raw_os_error(),
            Some(libc::ENOTEMPTY)
        );
    }

    #[test]
    fn wire_times_become_system_times() {
        let t = to_system_time(Time { sec: 5, nsec: 7 });
        assert_eq!(
            t.duration_since(SystemTime::UNIX_EPOCH).ok(),
            Some(Duration::new(5, 7))
        );
    }
}
