//! The mount registry lives in the client library
//! ([`loom_client::registry`]) so that the benchmarks' library backend reads
//! mounts the same way the tools do; this re-export keeps `crate::registry`
//! working for the commands.

pub use loom_client::registry::*;
