//! Send and receive of snapshots (`loom send`, `loom receive`), as ZFS's:
//! a snapshot of a tree, whole or as what changed since an older one,
//! becomes a checksummed stream ([`format`]) that recreates it on another
//! file system, byte for byte, names, links, attributes, extended
//! attributes, holes and layouts included.
//!
//! - [`image`]: one snapshot's tree, every inode by FID with its names;
//! - [`plan`]: the steps on names from one image to the other;
//! - [`sender`]: the stream from two images;
//! - [`receiver`]: the stream applied, resumable, and snapshotted;
//! - [`verify`]: checksums of a tree, to compare a replica with its source.

pub mod format;
pub mod image;
pub mod plan;
pub mod receiver;
pub mod sender;
pub mod verify;

use loom_proto::Errno;

/// What a send or receive is doing, for progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Reading an image's names.
    Scan,
    /// Records of a stopped receive read again, not applied.
    Skip,
    /// Names: removing, moving, making.
    Names,
    /// File data, extended attributes, owners, modes and times.
    Content,
    /// Finished.
    Done,
}

/// A failed operation's error, saying what was being done.
fn fs(what: impl Into<String>) -> impl FnOnce(Errno) -> SendError {
    let what = what.into();
    move |errno| SendError::Fs { what, errno }
}

/// A stream path as users see it, from the tree's top.
fn show(p: &[u8]) -> String {
    format!("/{}", String::from_utf8_lossy(p))
}

/// Why a send or receive stopped.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// A file-system operation failed.
    #[error("{what}: {errno}")]
    Fs {
        /// What was being done.
        what: String,
        /// How it failed.
        errno: Errno,
    },
    /// The stream cannot be read on.
    #[error(transparent)]
    Stream(#[from] format::StreamError),
    /// Writing the stream failed.
    #[error("writing the stream: {0}")]
    Io(#[from] std::io::Error),
    /// Refused, with the reason.
    #[error("{0}")]
    Refused(String),
}
