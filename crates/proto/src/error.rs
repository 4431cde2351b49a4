//! Wire error codes.
//!
//! Replies carry POSIX errno values so that the client can hand them to the
//! kernel unchanged. [`Errno`] names the ones the services produce; any other
//! value received is kept as `Other` and shown as a number.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An errno value as carried on the wire (Linux numbering).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Errno(pub i32);

impl Errno {
    /// Operation not permitted.
    pub const EPERM: Errno = Errno(1);
    /// No such file or directory.
    pub const ENOENT: Errno = Errno(2);
    /// Interrupted: the caller gave the call up.
    pub const EINTR: Errno = Errno(4);
    /// I/O error; also what the client reports after the RPC timeout.
    pub const EIO: Errno = Errno(5);
    /// Bad file handle.
    pub const EBADF: Errno = Errno(9);
    /// Try again.
    pub const EAGAIN: Errno = Errno(11);
    /// Permission denied.
    pub const EACCES: Errno = Errno(13);
    /// Device or resource busy.
    pub const EBUSY: Errno = Errno(16);
    /// File exists.
    pub const EEXIST: Errno = Errno(17);
    /// Cross-device link (an operation spanning MDTs that is not supported yet).
    pub const EXDEV: Errno = Errno(18);
    /// Not a directory.
    pub const ENOTDIR: Errno = Errno(20);
    /// Is a directory.
    pub const EISDIR: Errno = Errno(21);
    /// Invalid argument.
    pub const EINVAL: Errno = Errno(22);
    /// File too large.
    pub const EFBIG: Errno = Errno(27);
    /// No space left on device.
    pub const ENOSPC: Errno = Errno(28);
    /// Read-only file system.
    pub const EROFS: Errno = Errno(30);
    /// Too many links.
    pub const EMLINK: Errno = Errno(31);
    /// Result too large (xattr buffer).
    pub const ERANGE: Errno = Errno(34);
    /// Waiting for a lock would deadlock.
    pub const EDEADLK: Errno = Errno(35);
    /// File name too long.
    pub const ENAMETOOLONG: Errno = Errno(36);
    /// Function not implemented.
    pub const ENOSYS: Errno = Errno(38);
    /// Directory not empty.
    pub const ENOTEMPTY: Errno = Errno(39);
    /// No data available (missing xattr).
    pub const ENODATA: Errno = Errno(61);
    /// Protocol error: the peer sent something this version cannot read.
    pub const EPROTO: Errno = Errno(71);
    /// Bad message: bulk data damaged on the wire (the sender resends it).
    pub const EBADMSG: Errno = Errno(74);
    /// Operation not supported.
    pub const EOPNOTSUPP: Errno = Errno(95);
    /// Timed out.
    pub const ETIMEDOUT: Errno = Errno(110);
    /// Remote address changed: this server does not serve the target now
    /// (a replica that is not its primary, or one fenced off); the caller
    /// asks the MGS where it is and sends again.
    pub const EREMCHG: Errno = Errno(78);
    /// Stale handle: the FID no longer exists.
    pub const ESTALE: Errno = Errno(116);
    /// Over a quota: a hard limit, or a soft one past its grace.
    pub const EDQUOT: Errno = Errno(122);

    /// The raw errno value.
    pub fn raw(self) -> i32 {
        self.0
    }
}

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match *self {
            Errno::EPERM => "EPERM",
            Errno::ENOENT => "ENOENT",
            Errno::EIO => "EIO",
            Errno::EBADF => "EBADF",
            Errno::EAGAIN => "EAGAIN",
            Errno::EACCES => "EACCES",
            Errno::EEXIST => "EEXIST",
            Errno::EXDEV => "EXDEV",
            Errno::ENOTDIR => "ENOTDIR",
            Errno::EISDIR => "EISDIR",
            Errno::EINVAL => "EINVAL",
            Errno::EFBIG => "EFBIG",
            Errno::ENOSPC => "ENOSPC",
            Errno::EROFS => "EROFS",
            Errno::EMLINK => "EMLINK",
            Errno::ERANGE => "ERANGE",
            Errno::EDEADLK => "EDEADLK",
            Errno::EINTR => "EINTR",
            Errno::ENAMETOOLONG => "ENAMETOOLONG",
            Errno::ENOSYS => "ENOSYS",
            Errno::ENOTEMPTY => "ENOTEMPTY",
            Errno::ENODATA => "ENODATA",
            Errno::EPROTO => "EPROTO",
            Errno::EOPNOTSUPP => "EOPNOTSUPP",
            Errno::EBADMSG => "EBADMSG",
            Errno::ETIMEDOUT => "ETIMEDOUT",
            Errno::EDQUOT => "EDQUOT",
            Errno::ESTALE => "ESTALE",
            Errno::EREMCHG => "EREMCHG",
            _ => return write!(f, "errno {}", self.0),
        };
        f.write_str(name)
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The error half of a reply: an errno and a human-readable reason.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{errno}: {msg}")]
pub struct WireError {
    /// What the client returns to the caller.
    pub errno: Errno,
    /// Why, for logs and tools; never parsed.
    pub msg: String,
}

impl fmt::Debug for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.errno, self.msg)
    }
}

impl WireError {
    /// An error with a reason.
    pub fn new(errno: Errno, msg: impl Into<String>) -> WireError {
        WireError {
            errno,
            msg: msg.into(),
        }
    }
}

impl From<Errno> for WireError {
    fn from(errno: Errno) -> WireError {
        WireError {
            errno,
            msg: String::new(),
        }
    }
}

impl From<std::io::Error> for WireError {
    fn from(e: std::io::Error) -> WireError {
        WireError {
            errno: Errno(e.raw_os_error().unwrap_or(Errno::EIO.0)),
            msg: e.to_string(),
        }
    }
}
