//! File data: striped reads and writes.
//!
//! - [`plan`]: pure functions that turn a file range into per-object
//!   requests and put the answers back together (no I/O, property-tested
//!   against a model).
//! - [`file`]: [`OpenFile`](file::OpenFile), which sends those requests to
//!   the OSTs in parallel and reports sizes to the MDT.

pub mod file;
pub mod plan;
