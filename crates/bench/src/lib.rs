//! `loom bench`: mdtest-, IOR- and IO500-style workloads against any
//! directory or, through the [`BenchFs`] trait, against loomfs's client
//! library with no FUSE; comparisons of several targets side by side,
//! sweeps over cluster shapes, a regression suite, JSON results and charts.
//!
//! Layout of the crate:
//!
//! - [`fs`]: the backend trait ([`BenchFs`], [`BenchFile`]); [`posix`]: its
//!   POSIX implementation ([`PosixFs`]); [`loomfs`]: loomfs through its
//!   client library with no FUSE ([`LoomFs`]); [`noop`]: the no-op FUSE
//!   reference ("the FUSE ceiling") mounted for a run.
//! - [`target`]: the target syntax (`DIR`, `loom:DIR`,
//!   `loom://HOST:PORT/FSNAME/DIR`, `noop:`) and opening a target as a
//!   backend.
//! - [`options`]: mdtest's and IOR's options and the size parser.
//! - [`md`], [`io`], [`io500`]: the workloads; [`pattern`]: IOR's
//!   verifiable data pattern.
//! - [`runner`]: processes as threads, phase timing, the interleaving driver
//!   with cleanup; [`cancel`]: Ctrl-C; [`progress`]: progress bars.
//! - [`stats`]: max, min, mean, standard deviation, geometric mean.
//! - [`report`]: JSON results and text tables; [`machine`]: host facts;
//!   [`chart`]: SVG and PNG charts.
//! - [`suite`], [`sweep`]: the regression suite and cluster sweeps.
//! - [`cli`]: [`BenchArgs`] and [`run`], which the `loom` binary calls.
//!
//! Processes (`-p`) are threads of one process: the workloads need no MPI and
//! no re-exec, and a phase's threads start together behind a barrier.

#![warn(missing_docs)]

pub mod cancel;
pub mod chart;
pub mod cli;
pub mod error;
pub mod fs;
pub mod io;
pub mod io500;
pub mod loomfs;
pub mod machine;
pub mod md;
pub mod noop;
pub mod options;
pub mod pattern;
pub mod placed;
pub mod posix;
pub mod progress;
pub mod report;
pub mod runner;
pub mod stats;
pub mod suite;
pub mod sweep;
pub mod target;

pub use cli::{run, BenchArgs, BenchCommand};
pub use error::BenchError;
pub use fs::{remove_tree, BenchFile, BenchFs, DirEntry, FileStat, OpenMode};
pub use loomfs::LoomFs;
pub use posix::PosixFs;
pub use target::{TargetAddr, TargetSpec};
