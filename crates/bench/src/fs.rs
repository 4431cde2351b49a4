//! The backend seam: every workload talks to a [`BenchFs`], never to
//! `std::fs`, so the same code measures a POSIX directory ([`crate::PosixFs`])
//! or loomfs through its client library with no FUSE in between.
//!
//! Paths given to a backend are relative to the backend's root (the target
//! directory) and use `/` separators; they never start with `/` or contain
//! `..`. A backend must be usable from many threads at once: the workloads
//! run one thread per benchmark process (`-p`).
//!
//! The traits are object safe: workloads hold `&dyn BenchFs` and
//! `Box<dyn BenchFile>`.

use std::io;
use std::path::Path;
use std::time::SystemTime;

/// How [`BenchFs::open`] opens a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only; the file must exist.
    Read,
    /// Write only; created if missing, never truncated (several writers of
    /// one shared file open it concurrently, as IOR's ranks do).
    Write,
}

/// What a workload needs to know about a file or directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    /// Size in bytes.
    pub size: u64,
    /// True for a directory.
    pub is_dir: bool,
    /// Last modification time, for IO500's `find -newer`.
    pub modified: SystemTime,
}

/// One directory entry returned by [`BenchFs::readdir`] (never `.` or `..`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The entry's name within its directory.
    pub name: String,
    /// Whether it is a directory, when the backend knows without a stat
    /// (POSIX `d_type`); `None` means "stat it to find out".
    pub is_dir: Option<bool>,
}

/// A file system the benchmarks can run against.
///
/// Implementations: [`crate::PosixFs`] here; the loomfs client library
/// implements it in its own crate. Every method is one logical operation of
/// the workload and is timed as such, so a backend must not add work that a
/// real application would not do (no extra stats, no hidden fsyncs).
pub trait BenchFs: Send + Sync {
    /// A short human description of the target, e.g. `posix:/mnt/x (ext4)`.
    fn describe(&self) -> String;

    /// Creates one directory; its parent exists. `EEXIST` if it exists.
    fn mkdir(&self, path: &Path) -> io::Result<()>;

    /// Removes one empty directory.
    fn rmdir(&self, path: &Path) -> io::Result<()>;

    /// Creates (or opens and truncates) a file, writes `data` at offset 0,
    /// fsyncs it when `fsync` is true, and closes it: mdtest's create step.
    fn create_file(&self, path: &Path, data: &[u8], fsync: bool) -> io::Result<()>;

    /// Opens a file, reads up to `buf.len()` bytes from offset 0 and closes
    /// it: mdtest's read step. Returns the number of bytes read (short only
    /// at end of file).
    fn read_file(&self, path: &Path, buf: &mut [u8]) -> io::Result<usize>;

    /// Attributes of a file or directory (follows symbolic links).
    fn stat(&self, path: &Path) -> io::Result<FileStat>;

    /// Removes one file.
    fn unlink(&self, path: &Path) -> io::Result<()>;

    /// Lists a directory, without `.` and `..`, in no particular order.
    fn readdir(&self, path: &Path) -> io::Result<Vec<DirEntry>>;

    /// Opens a file for positional I/O (IOR's phases).
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn BenchFile>>;
}

/// An open file of a [`BenchFs`], used for positional reads and writes.
pub trait BenchFile: Send {
    /// Writes all of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Reads into `buf` from `offset` until `buf` is full or the file ends;
    /// returns the number of bytes read.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Makes everything written so far durable (`fsync`).
    fn fsync(&self) -> io::Result<()>;

    /// Closes the file and reports any error the close returns (FUSE and
    /// network file systems report write-back errors there).
    fn close(self: Box<Self>) -> io::Result<()>;
}

/// Removes `path` and everything below it, depth first; returns the number of
/// entries removed (files and directories, `path` included). A missing
/// `path` removes nothing and is not an error. Used to leave no files behind
/// after Ctrl-C or an error.
pub fn remove_tree(fs: &dyn BenchFs, path: &Path) -> io::Result<u64> {
    let st = match fs.stat(path) {
        Ok(st) => st,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    if !st.is_dir {
        fs.unlink(path)?;
        return Ok(1);
    }
    let mut removed = 0;
    for entry in fs.readdir(path)? {
        let child = path.join(&entry.name);
        let is_dir = match entry.is_dir {
            Some(d) => d,
            None => fs.stat(&child)?.is_dir,
        };
        if is_dir {
            removed += remove_tree(fs, &child)?;
        } else {
            match fs.unlink(&child) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    fs.rmdir(path)?;
    Ok(removed + 1)
}
