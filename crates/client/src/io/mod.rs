//! File data: striped reads and writes.
//!
//! - [`plan`]: pure functions that turn a file range into per-object
//!   requests and put the answers back together (no I/O, property-tested
//!   against a model).
//! - [`file`]: [`OpenFile`](file::OpenFile), which sends those requests to
//!   the OSTs in parallel and reports sizes to the MDT.
//! - [`writeback`]: writes in flight per file: ordering of overlapping
//!   writes, a bounded window, errors reported at the next call.
//! - [`grant`]: the space each OST keeps for this client's writes sent
//!   behind; a write it does not cover is waited for.
//! - [`readahead`]: whole stripe widths read ahead for a sequential reader
//!   of the library.

pub mod file;
pub mod grant;
pub mod plan;
pub mod readahead;
pub mod writeback;
