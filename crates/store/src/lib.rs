//! The storage layer under the services (Lustre's OSD).
//!
//! - [`kv`]: the MDT's key-value store trait and its fjall backend, with
//!   grouped commits.
//! - [`object`]: the OST's object store: one file per object in a local
//!   directory.
//! - [`checked`]: reads that verify checksums, changes that keep them.
//! - [`sums`]: per-block checksums of an object, beside it.
//! - [`packed`]: compressed objects, in chunks written copy-on-write.
//! - [`durable`]: small helpers for crash-safe file replacement.
#![warn(missing_docs)]

pub mod checked;
pub mod durable;
pub mod kv;
pub mod object;
pub mod packed;
pub mod sums;
