//! The loomfs services and the server process that hosts them.
//!
//! - [`mgs`]: management service: target registry, FLDB, configuration.
//! - [`mdt`]: metadata target: inodes, directory entries, layouts.
//! - [`ost`]: object storage target: file data objects.
//! - [`stats`]: per-target statistics: operations, latency, jobs, clients.
//! - [`dashboard`]: the live web dashboard the MGS's server serves.
//! - [`metrics`]: the Prometheus endpoint that serves them.
//! - [`scrub`]: a target's scrub, walking its objects or records.
//! - [`target`]: a formatted target directory's identity (`loom format`).
//! - [`peers`]: configuration and RPC clients for reaching other targets.
//! - [`node`]: one `loom server` process: config file, listener, dispatch.
//! - [`error`]: what handlers fail with; the one conversion to wire errors.
#![warn(missing_docs)]

pub mod barrier;
pub mod dashboard;
pub mod error;
pub mod fail;
pub mod mdt;
pub mod metrics;
pub mod mgs;
pub mod node;
pub mod nodemaps;
pub mod ost;
pub mod peers;
pub mod quota;
pub mod replica;
pub mod scrub;
pub mod stats;
pub mod target;
