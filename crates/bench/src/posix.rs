//! [`PosixFs`]: the [`BenchFs`] backend for any mounted directory, through
//! plain POSIX calls (`open`, `pwrite`, `pread`, `fsync`, `close`, `stat`,
//! `mkdir`, `rmdir`, `unlink`, `readdir`).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::IntoRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::BenchError;
use crate::fs::{BenchFile, BenchFs, DirEntry, FileStat, OpenMode};

/// A [`BenchFs`] rooted at a directory of any mounted file system.
#[derive(Debug, Clone)]
pub struct PosixFs {
    root: PathBuf,
    fs_type: String,
}

impl PosixFs {
    /// Checks that `root` exists, is a directory and is writable (by creating
    /// and removing a probe file, which catches read-only mounts that
    /// `access(2)` would not), then returns the backend.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, BenchError> {
        let root = root.into();
        let target_err = |reason: String| BenchError::Target {
            path: root.clone(),
            reason,
        };
        let meta = fs::metadata(&root).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => target_err("does not exist".into()),
            _ => target_err(format!("cannot stat: {e}")),
        })?;
        if !meta.is_dir() {
            return Err(target_err("is not a directory".into()));
        }
        let probe = root.join(format!(".loom-bench-probe.{}", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&probe) {
            Ok(f) => {
                drop(f);
                fs::remove_file(&probe)
                    .map_err(|e| target_err(format!("cannot remove probe file: {e}")))?;
            }
            Err(e) if e.raw_os_error() == Some(libc::EROFS) => {
                return Err(target_err("is on a read-only file system".into()))
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                return Err(target_err("is not writable (permission denied)".into()))
            }
            Err(e) => return Err(target_err(format!("cannot create a file in it: {e}"))),
        }
        let fs_type = crate::machine::fs_type(&root);
        Ok(PosixFs { root, fs_type })
    }

    /// The directory this backend is rooted at.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file system type of the root (e.g. `ext4`, `tmpfs`, `fuse`).
    pub fn fs_type(&self) -> &str {
        &self.fs_type
    }

    fn full(&self, path: &Path) -> PathBuf {
        self.root.join(path)
    }
}

/// Closes `file` with `close(2)` so that its error is reported, where
/// `drop` would swallow it.
fn close_file(file: File) -> io::Result<()> {
    nix::unistd::close(file.into_raw_fd()).map_err(io::Error::from)
}

impl BenchFs for PosixFs {
    fn describe(&self) -> String {
        format!("posix:{} ({})", self.root.display(), self.fs_type)
    }

    fn mkdir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(self.full(path))
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(self.full(path))
    }

    fn create_file(&self, path: &Path, data: &[u8], fsync: bool) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.full(path))?;
        if !data.is_empty() {
            f.write_all(data)?;
        }
        if fsync {
            f.sync_all()?;
        }
        close_file(f)
    }

    fn read_file(&self, path: &Path, buf: &mut [u8]) -> io::Result<usize> {
        let mut f = File::open(self.full(path))?;
        let mut done = 0;
        while done < buf.len() {
            match f.read(&mut buf[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        close_file(f)?;
        Ok(done)
    }

    fn stat(&self, path: &Path) -> io::Result<FileStat> {
        let m = fs::metadata(self.full(path))?;
        Ok(FileStat {
            size: m.len(),
            is_dir: m.is_dir(),
            modified: m.modified()?,
        })
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(self.full(path))
    }

    fn readdir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        for entry in fs::read_dir(self.full(path))? {
            let entry = entry?;
            let is_dir = entry.file_type().ok().map(|t| t.is_dir());
            out.push(DirEntry {
                name: entry.file_name().to_string_lossy().into_owned(),
                is_dir,
            });
        }
        Ok(out)
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn BenchFile>> {
        let file = match mode {
            OpenMode::Read => File::open(self.full(path))?,
            OpenMode::Write => OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(self.full(path))?,
        };
        Ok(Box::new(PosixFile { file }))
    }
}

/// An open file of a [`PosixFs`].
#[derive(Debug)]
struct PosixFile {
    file: File,
}

impl BenchFile for PosixFile {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(buf, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn fsync(&self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn close(self: Box<Self>) -> io::Result<()> {
        close_file(self.file)
    }
}
