//! The crate's error type: one enum, each variant carrying what the caller
//! needs to report or react (the path, the option, the offset).

use std::io;
use std::path::PathBuf;

/// Everything a benchmark can fail with.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An option or combination of options makes no sense; fix the command line.
    #[error("bad option: {0}")]
    Options(String),
    /// The target directory cannot be used (missing, not a directory, read-only).
    #[error("target {path}: {reason}")]
    Target {
        /// The directory the user named.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
    /// A file-system call failed; `path` is relative to the target's root.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation, e.g. "create" or "read".
        op: &'static str,
        /// The path relative to the target root.
        path: PathBuf,
        /// The error the backend returned.
        #[source]
        source: io::Error,
    },
    /// `-v` found bytes that differ from what the writer wrote.
    #[error("verify failed: {0}")]
    Verify(String),
    /// The user pressed Ctrl-C (or the run was cancelled); files were removed.
    #[error("interrupted")]
    Interrupted,
    /// A chart could not be drawn or written.
    #[error("chart {path}: {reason}")]
    Chart {
        /// The chart file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The threads of a phase could not all be started (too many -p for
    /// this machine's limits); use fewer processes.
    #[error("cannot start the benchmark threads: {0}")]
    Threads(String),
    /// Starting, using or stopping a `loom up` cluster failed (sweep).
    #[error("cluster: {0}")]
    Cluster(String),
}

impl BenchError {
    /// Wraps an `io::Error` from `op` on `path` (relative to the target).
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        BenchError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;
