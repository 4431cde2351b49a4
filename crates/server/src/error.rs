//! What a service's handlers fail with, and the one place where that
//! becomes the wire's error.
//!
//! Handlers say *why* a request failed: the caller was refused by POSIX's
//! rules, this target's own storage failed, another server failed a step,
//! or a task of this server died. [`answer`] turns it into the wire's
//! [`WireError`] at the service boundary (`Node`), the one place it is
//! converted, and logs a storage or internal failure there, once, with
//! the target's name; refusals (the everyday ENOENT, EACCES, EEXIST) are
//! not logged at all.

use loom_proto::msg::{Reply, ReplyResult, TargetId};
use loom_proto::{Errno, WireError};
use loom_rpc::RpcError;
use loom_store::kv::KvError;
use loom_store::object::ObjectError;
use std::fmt;

/// Why a handler failed.
#[derive(Debug)]
pub enum ServerError {
    /// POSIX's (or the protocol's) answer to this request: a missing
    /// name, a permission, a bad argument. The caller's concern, not the
    /// server's.
    Refused {
        /// What the caller gets.
        errno: Errno,
        /// Why, for the caller's logs and tools.
        msg: String,
    },
    /// This target's storage failed: the key-value store, an object file,
    /// a record that does not decode. The caller gets the errno (EIO
    /// unless the disk said more, e.g. ENOSPC); the server logs it.
    Store {
        /// What the caller gets.
        errno: Errno,
        /// What failed, and where.
        msg: String,
    },
    /// Another server (the MGS, a peer MDT, an OST) failed or refused a
    /// step. A refusal keeps its errno (a peer's ENOENT stays ENOENT); a
    /// peer that cannot be reached is EIO.
    Peer {
        /// What the caller gets.
        errno: Errno,
        /// The peer's reason, or why it could not be reached.
        msg: String,
    },
    /// A task or channel of this server failed (a panicked blocking task,
    /// a lost background worker): EIO, and logged.
    Internal(String),
    /// Not a failure: a change found that other clients hold leases on
    /// what it touches, and applied nothing. The MDT recalls them and
    /// runs the change again (`MdtService::handle`); it never reaches
    /// the wire (EAGAIN if it did).
    Recall(Vec<loom_proto::msg::Lease>),
    /// Not a failure: a client's change would take `who` past what this
    /// MDT was granted of its quota (or the MDT does not know yet whether
    /// `who` has limits), and applied nothing. The MDT asks the quota
    /// master for `need` more and runs the change again
    /// (`MdtService::handle`); EDQUOT if it reached the wire.
    QuotaShort {
        /// Whose quota.
        who: loom_proto::quota::QuotaId,
        /// How many inodes (bytes) more than granted.
        need: u64,
        /// Of which: inodes, or Data-on-MDT bytes.
        res: crate::quota::Res,
    },
    /// Not a failure: the request named a directory restriped since the
    /// client learned its layout, for a name of another shard; nothing
    /// was done. Answered `Reply::Restriped` (ESTALE where it cannot be,
    /// as to a peer).
    Restriped {
        /// The directory (its master).
        dir: loom_proto::Fid,
        /// Its layout now.
        layout: loom_proto::Layout,
    },
}

/// What a handler returns.
pub type Handled = Result<Reply, ServerError>;

impl ServerError {
    /// A refusal with POSIX's errno.
    pub fn refused(errno: Errno, msg: impl Into<String>) -> ServerError {
        ServerError::Refused {
            errno,
            msg: msg.into(),
        }
    }

    /// A failure of this target's storage (EIO).
    pub fn store(msg: impl fmt::Display) -> ServerError {
        ServerError::Store {
            errno: Errno::EIO,
            msg: msg.to_string(),
        }
    }

    /// A failure of this server's own machinery (EIO).
    pub fn internal(msg: impl fmt::Display) -> ServerError {
        ServerError::Internal(msg.to_string())
    }

    /// A peer's answer or failure.
    pub fn peer(errno: Errno, msg: impl fmt::Display) -> ServerError {
        ServerError::Peer {
            errno,
            msg: msg.to_string(),
        }
    }

    /// The errno the caller will get.
    pub fn errno(&self) -> Errno {
        match self {
            ServerError::Refused { errno, .. }
            | ServerError::Store { errno, .. }
            | ServerError::Peer { errno, .. } => *errno,
            ServerError::Internal(_) => Errno::EIO,
            ServerError::Recall(_) => Errno::EAGAIN,
            ServerError::QuotaShort { .. } => Errno::EDQUOT,
            ServerError::Restriped { .. } => Errno::ESTALE,
        }
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::Refused { errno, msg } => write!(f, "{errno}: {msg}"),
            ServerError::Store { errno, msg } => write!(f, "{errno}: storage: {msg}"),
            ServerError::Peer { errno, msg } => write!(f, "{errno}: peer: {msg}"),
            ServerError::Internal(msg) => write!(f, "EIO: internal: {msg}"),
            ServerError::Recall(l) => write!(f, "EAGAIN: {} leases to recall first", l.len()),
            ServerError::QuotaShort { who, need, res } => {
                let unit = res.unit();
                write!(f, "EDQUOT: {need} {unit} of {who} beyond this MDT's grant")
            }
            ServerError::Restriped { dir, .. } => {
                write!(f, "ESTALE: directory {dir} was restriped: ask its shard")
            }
        }
    }
}

impl std::error::Error for ServerError {}

/// A handler's outcome as the wire carries it: the service boundary
/// (`Node`) passes every answer of `target` through here, and a storage
/// or internal failure is logged here, once, with the target's name.
pub fn answer<X>(target: TargetId, (r, x): (Handled, X)) -> (ReplyResult, X) {
    let r = r.map_err(|e| {
        match &e {
            ServerError::Store { errno, msg } => {
                tracing::error!("{target}: storage failure answered with {errno}: {msg}")
            }
            ServerError::Internal(msg) => {
                tracing::error!("{target}: internal failure answered with EIO: {msg}")
            }
            ServerError::Recall(_) => {
                tracing::error!("{target}: a change waiting for a recall was answered")
            }
            ServerError::QuotaShort { .. } => {
                tracing::error!("{target}: a change waiting for a quota grant was answered")
            }
            ServerError::Refused { .. }
            | ServerError::Peer { .. }
            | ServerError::Restriped { .. } => {}
        }
        WireError::from(e)
    });
    (r, x)
}

impl From<ServerError> for WireError {
    fn from(e: ServerError) -> WireError {
        match e {
            ServerError::Refused { errno, msg }
            | ServerError::Store { errno, msg }
            | ServerError::Peer { errno, msg } => WireError::new(errno, msg),
            ServerError::Internal(msg) => WireError::new(Errno::EIO, msg),
            e @ ServerError::Recall(_) => WireError::new(Errno::EAGAIN, e.to_string()),
            e @ ServerError::Restriped { .. } => WireError::new(Errno::ESTALE, e.to_string()),
            e @ ServerError::QuotaShort { .. } => WireError::new(Errno::EDQUOT, e.to_string()),
        }
    }
}

impl From<KvError> for ServerError {
    fn from(e: KvError) -> ServerError {
        ServerError::store(e)
    }
}

impl From<ObjectError> for ServerError {
    fn from(e: ObjectError) -> ServerError {
        ServerError::Store {
            errno: e.errno(),
            msg: e.to_string(),
        }
    }
}

impl From<RpcError> for ServerError {
    fn from(e: RpcError) -> ServerError {
        match e {
            RpcError::Remote(w) => ServerError::peer(w.errno, w.msg),
            other => ServerError::peer(other.errno(), other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_keeps_its_errno_on_the_wire() {
        let cases = [
            (
                ServerError::refused(Errno::ENOENT, "no entry a"),
                Errno::ENOENT,
            ),
            (
                ServerError::Store {
                    errno: Errno::ENOSPC,
                    msg: "full".into(),
                },
                Errno::ENOSPC,
            ),
            (ServerError::store("bad record"), Errno::EIO),
            (ServerError::peer(Errno::EACCES, "MDT0001"), Errno::EACCES),
            (ServerError::internal("task panicked"), Errno::EIO),
        ];
        for (e, errno) in cases {
            assert_eq!(e.errno(), errno, "{e}");
            let msg = e.to_string();
            let w = WireError::from(e);
            assert_eq!(w.errno, errno, "{msg}");
            assert!(msg.contains(&w.msg), "{msg} / {}", w.msg);
        }
    }

    #[test]
    fn a_peer_refusal_keeps_the_peer_errno() {
        let e = ServerError::from(RpcError::Remote(WireError::new(Errno::ENOTEMPTY, "x")));
        assert!(matches!(e, ServerError::Peer { .. }));
        assert_eq!(e.errno(), Errno::ENOTEMPTY);
        let e = ServerError::from(RpcError::Unreachable {
            addr: "127.0.0.1:1".into(),
            last: "refused".into(),
        });
        assert_eq!(e.errno(), Errno::EIO);
    }
}
