//! The loomfs client library: everything a client does to the file system,
//! so that the FUSE adapter, the `loom` tools and the benchmarks share one
//! implementation.
//!
//! Layout of the crate:
//! - [`error`]: [`ClientError`] for connecting; every file-system operation
//!   returns a POSIX [`Errno`] that the FUSE layer hands to the kernel.
//! - [`ctx`]: [`Caller`] (who asks) and the [`loom_proto::msg::ReqCtx`] built
//!   from it: client id, request sequence, uid/gid/groups, jobid.
//! - [`routing`]: the cluster configuration from the MGS, one RPC client per
//!   server address, target and FID routing, refresh on failure.
//! - [`meta`]: metadata operations (lookup, create, rename, xattrs, statfs...).
//! - [`io`]: striped file data: pure request planning in [`io::plan`] and
//!   [`OpenFile`] in [`io::file`].
//! - [`inode`]: one object per inode the client holds anything of: what
//!   it knows of it (attributes, lease, layout, size; a directory's
//!   names, list and shards), its open handles and its writes in flight.
//! - [`fresh`]: the table of those objects, and until when what they know
//!   is valid: under a lease until recalled, else the attribute timeout.
//! - [`locks`]: file locks (flock, POSIX, OFD) held across clients.
//! - [`replay`]: changes MDTs acknowledged and have not committed, kept
//!   and replayed to a restarted MDT.
//! - [`send`]: send and receive of snapshots: a checksummed stream that
//!   recreates one on another file system.
//! - [`registry`]: the live mounts of this machine (`/run/loom/mounts`), so
//!   tools given a path on a mount can reach its cluster.
//!
//! Every operation is async and needs a tokio runtime.
#![warn(missing_docs)]

pub mod capas;
pub mod changelog;
pub mod ctx;
mod datamig;
mod dirs;
pub mod error;
pub mod find;
pub mod fresh;
pub mod inode;
pub mod io;
pub mod locks;
pub mod meta;
pub mod quota;
pub mod registry;
pub mod replay;
pub mod routing;
pub mod send;
mod site;
pub mod snapdiff;
mod snapshots;
pub mod writeback;

mod client;

pub use client::{Client, ClientOptions};
pub use ctx::Caller;
pub use error::ClientError;
pub use io::file::{Allocation, OpenFile};
pub use loom_proto::Errno;
pub use loom_rpc::ClusterKey;
