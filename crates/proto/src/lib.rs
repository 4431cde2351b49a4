//! The loomfs wire vocabulary: everything two loomfs processes say to each
//! other, and nothing that does I/O.
//!
//! - [`fid`]: 128-bit file identifiers whose sequence names the owning MDT.
//! - [`frame`]: the fixed 40-byte frame header and its pure codec.
//! - [`chunk_sums`]: the crc32c of each 4 KiB piece of a bulk, found while
//!   checking the frame's.
//! - [`msg`]: request and reply bodies (serde + postcard).
//! - [`requests`]: each service's requests, declared once with opcode, name,
//!   effect and who may send them.
//! - [`lease`]: what an MDT's answer lets a client keep knowing until
//!   recalled; one rule for both sides.
//! - [`layout`]: file layouts (components, RAID-0 striping) and their maths.
//! - [`changelog`]: each MDT's ordered record of the changes it committed.
//! - [`compress`]: how a file's data is compressed on the OSTs.
//! - [`quota`]: what each target counts per user, group and project.
//! - [`acl`]: POSIX access control lists, as the xattrs that carry them.
//! - [`lock`]: file locks (flock, POSIX, OFD) held across clients.
//! - [`grant`]: the space an OST reserves for a client's writes sent behind.
//! - [`error`]: the wire's error codes, which are POSIX errno values.
//! - [`find`]: what `loom find` asks, and its evaluation on an inode.
//! - [`pool`]: OST pools, named sets of OSTs that layouts draw from.
//! - [`name`]: file names, symlink targets and xattr names as bytes.
//! - [`replica`]: replicated targets: roles, terms, leases.
//!
//! Format rules: opcodes and enum variants are append-only; an id is never
//! renumbered or reused, only retired. See `docs/PROTOCOL.md`.
#![warn(missing_docs)]

pub mod acl;
pub mod capa;
pub mod changelog;
pub mod chunk_sums;
pub mod compress;
pub mod error;
pub mod fid;
pub mod find;
pub mod frame;
pub mod grant;
pub mod layout;
pub mod lease;
pub mod lock;
pub mod msg;
pub mod name;
pub mod nodemap;
pub mod pool;
pub mod quota;
pub mod replica;
pub mod requests;
pub mod snapshot;

pub use compress::Compress;
pub use error::{Errno, WireError};
pub use fid::{Fid, MAX_INO_SEQ, VIRT_INO_SEQ};
pub use layout::{Layout, ObjRef, StripeSpec};
pub use name::Name;
