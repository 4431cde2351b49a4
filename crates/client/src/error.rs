//! Errors of the client library.
//!
//! Connecting can fail in ways a person must act on (wrong address, wrong
//! file system name, wrong key), so [`Client::connect`](crate::Client::connect)
//! returns a [`ClientError`] with a sentence that says which. Every operation
//! on a connected client returns a POSIX [`Errno`] instead: that is what the
//! kernel and the tools report, and the server already chose it.

use loom_proto::Errno;
use loom_rpc::RpcError;

/// Why a client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The MGS did not answer (down, wrong address, or wrong cluster key:
    /// the reason says which step failed).
    #[error("cannot reach MGS at {addr}: {reason}")]
    MgsUnreachable {
        /// The MGS address that was tried.
        addr: String,
        /// The last failure seen.
        reason: String,
    },
    /// The MGS serves another file system: check the name in the mount spec.
    #[error("file system '{asked}' not served by MGS at {addr} (it serves '{serves}')")]
    WrongFsname {
        /// The MGS address.
        addr: String,
        /// The name asked for.
        asked: String,
        /// The name the MGS serves.
        serves: String,
    },
    /// The MGS answered, but not with a configuration.
    #[error("MGS at {addr} refused the configuration request: {reason}")]
    BadConfig {
        /// The MGS address.
        addr: String,
        /// What it said.
        reason: String,
    },
}

/// The errno an RPC failure becomes: the server's own code for a remote
/// error, EIO when the server could not be reached before the deadline or
/// sent something unreadable.
pub fn errno_of(e: &RpcError) -> Errno {
    e.errno()
}
