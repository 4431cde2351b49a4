//! Command-line options of the workloads, with mdtest's and IOR's letters and
//! meanings, and the parsers for sizes (`4k`, `1m`, `2g`) and targets
//! (`NAME=PATH`). Checks that need several options at once live in
//! [`crate::md::MdPlan::new`] and [`crate::io::IoPlan::new`].

use std::path::PathBuf;

use clap::Args;
use serde::{Deserialize, Serialize};

/// mdtest's options (`loom bench md`).
#[derive(Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MdOptions {
    /// Items (files and/or directories) per process, spread over the tree.
    #[arg(short = 'n', long = "items")]
    pub items: Option<u64>,
    /// Items per tree directory (with -n, -n must equal -I times the tree's directories).
    #[arg(short = 'I', long = "items-per-dir")]
    pub items_per_dir: Option<u64>,
    /// Depth of the directory tree below its root (0 = the root only).
    #[arg(short = 'z', long = "depth", default_value_t = 0)]
    pub depth: u32,
    /// Branching factor of the tree: subdirectories per tree directory.
    #[arg(short = 'b', long = "branch", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub branch: u32,
    /// A unique working directory (own tree) per process.
    #[arg(short = 'u', long = "unique-dir")]
    pub unique_dir: bool,
    /// Files only (no directory phases).
    #[arg(short = 'F', long = "files-only", conflicts_with = "dirs_only")]
    pub files_only: bool,
    /// Directories only (no file phases).
    #[arg(short = 'D', long = "dirs-only")]
    pub dirs_only: bool,
    /// Bytes written to each file at create (e.g. 3901, 4k).
    #[arg(short = 'w', long = "write-bytes", default_value = "0", value_parser = parse_size)]
    pub write_bytes: u64,
    /// Bytes read from each file in the read phase.
    #[arg(short = 'e', long = "read-bytes", default_value = "0", value_parser = parse_size)]
    pub read_bytes: u64,
    /// Stride between processes: stat, read and remove what process (rank + N) mod p created.
    #[arg(short = 'N', long = "stride", default_value_t = 0)]
    pub stride: u32,
    /// Iterations.
    #[arg(short = 'i', long = "iterations", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub iterations: u32,
    /// Processes (threads), each doing its share of the work.
    #[arg(short = 'p', long = "procs", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub procs: u32,
    /// Stop the create phase after SECONDS; later phases handle what was created.
    #[arg(long = "stonewall", value_name = "SECONDS", value_parser = parse_seconds)]
    pub stonewall: Option<f64>,
    /// fsync each file after writing it at create.
    #[arg(long = "fsync")]
    pub fsync: bool,
    /// Keep the files: skip the remove phases (inspect the tree afterwards).
    #[arg(long = "keep")]
    pub keep: bool,
    /// Name of the working directory created in the target.
    #[arg(long = "name", default_value = "loom-md")]
    pub name: String,
}

impl Default for MdOptions {
    fn default() -> Self {
        MdOptions {
            items: None,
            items_per_dir: None,
            depth: 0,
            branch: 1,
            unique_dir: false,
            files_only: false,
            dirs_only: false,
            write_bytes: 0,
            read_bytes: 0,
            stride: 0,
            iterations: 1,
            procs: 1,
            stonewall: None,
            fsync: false,
            keep: false,
            name: "loom-md".to_string(),
        }
    }
}

/// IOR's options (`loom bench io`).
#[derive(Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IoOptions {
    /// Transfer size: bytes per read or write call.
    #[arg(short = 't', long = "transfer", default_value = "256k", value_parser = parse_size)]
    pub transfer: u64,
    /// Block size: contiguous bytes per process per segment (a multiple of -t).
    #[arg(short = 'b', long = "block", default_value = "1m", value_parser = parse_size)]
    pub block: u64,
    /// Segments: a shared file holds, per segment, one block of each process in rank order.
    #[arg(short = 's', long = "segments", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub segments: u64,
    /// File per process instead of one shared file.
    #[arg(short = 'F', long = "file-per-proc")]
    pub file_per_proc: bool,
    /// Write phase (with neither -w nor -r, both run).
    #[arg(short = 'w', long = "write")]
    pub write: bool,
    /// Read phase (alone, an untimed write prepares the data first).
    #[arg(short = 'r', long = "read")]
    pub read: bool,
    /// Reorder tasks: process r reads what process (r + 1) mod p wrote.
    #[arg(short = 'C', long = "reorder")]
    pub reorder: bool,
    /// fsync after the write phase, inside its time.
    #[arg(short = 'e', long = "fsync")]
    pub fsync: bool,
    /// Verify: check every byte read against the writer and offset pattern
    /// (with -w alone, an untimed read-back checks the written data).
    #[arg(short = 'v', long = "verify")]
    pub verify: bool,
    /// Iterations.
    #[arg(short = 'i', long = "iterations", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub iterations: u32,
    /// Processes (threads).
    #[arg(short = 'p', long = "procs", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub procs: u32,
    /// Keep the data files after the last iteration.
    #[arg(long = "keep")]
    pub keep: bool,
    /// Name of the working directory created in the target.
    #[arg(long = "name", default_value = "loom-io")]
    pub name: String,
}

impl Default for IoOptions {
    fn default() -> Self {
        IoOptions {
            transfer: 256 * 1024,
            block: 1024 * 1024,
            segments: 1,
            file_per_proc: false,
            write: false,
            read: false,
            reorder: false,
            fsync: false,
            verify: false,
            iterations: 1,
            procs: 1,
            keep: false,
            name: "loom-io".to_string(),
        }
    }
}

/// A named target of `compare`: `NAME=PATH`, or a bare `PATH` (named by its
/// last component).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSpec {
    /// The name shown in tables and charts.
    pub name: String,
    /// The directory to run in.
    pub path: PathBuf,
}

impl std::str::FromStr for TargetSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, path) = match s.split_once('=') {
            Some((n, p)) => (n.trim().to_string(), p.to_string()),
            None => {
                let name = std::path::Path::new(s)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| s.to_string());
                (name, s.to_string())
            }
        };
        if name.is_empty() {
            return Err(format!("target {s:?}: empty name (use NAME=PATH)"));
        }
        if path.is_empty() {
            return Err(format!("target {s:?}: empty path (use NAME=PATH)"));
        }
        Ok(TargetSpec {
            name,
            path: PathBuf::from(path),
        })
    }
}

/// Parses a size like IOR does: a number with an optional binary suffix
/// `k`, `m`, `g`, `t` (also `KiB`, `MB`, … all taken as powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "{s:?} is not a size (examples: 4096, 47008, 4k, 1m, 2g)"
        ));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: number too large"))?;
    let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "{s:?}: unknown size suffix {other:?} (use k, m, g or t)"
            ))
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?}: size too large"))
}

/// Parses a positive number of seconds (fractions allowed).
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if v.is_nan() || v <= 0.0 || !v.is_finite() {
        return Err(format!("{s:?}: seconds must be positive"));
    }
    Ok(v)
}

/// Formats a byte count with a binary suffix, the inverse of [`parse_size`]
/// for exact multiples (`1048576` → `1m`).
pub fn format_size(n: u64) -> String {
    for (mult, suffix) in [
        (1u64 << 40, "t"),
        (1 << 30, "g"),
        (1 << 20, "m"),
        (1 << 10, "k"),
    ] {
        if n >= mult && n.is_multiple_of(mult) {
            return format!("{}{suffix}", n / mult);
        }
    }
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("47008"), Ok(47008));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        assert_eq!(parse_size("3g"), Ok(3 << 30));
        assert_eq!(parse_size("1t"), Ok(1 << 40));
        assert_eq!(parse_size("0"), Ok(0));
    }

    #[test]
    fn bad_sizes_are_refused_with_the_input_named() {
        for bad in ["", "k", "1x", "1.5m", "-4k", "99999999999999999999"] {
            let e = parse_size(bad).expect_err(bad);
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
        assert!(parse_size("20000000t").is_err());
    }

    #[test]
    fn format_size_inverts_parse_size() {
        for n in [0, 1, 3901, 4096, 47008, 1 << 20, 3 << 30, 1 << 40, 1536] {
            assert_eq!(parse_size(&format_size(n)), Ok(n));
        }
        assert_eq!(format_size(1 << 20), "1m");
    }

    #[test]
    fn seconds_must_be_positive() {
        assert_eq!(parse_seconds("2.5"), Ok(2.5));
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("soon").is_err());
    }

    #[test]
    fn targets_parse_as_name_equals_path() {
        let t: TargetSpec = "ext4=/var/tmp/a".parse().expect("spec");
        assert_eq!(t.name, "ext4");
        assert_eq!(t.path, PathBuf::from("/var/tmp/a"));
        let bare: TargetSpec = "/dev/shm/b".parse().expect("spec");
        assert_eq!(bare.name, "b");
        assert!("=/x".parse::<TargetSpec>().is_err());
        assert!("x=".parse::<TargetSpec>().is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_plain_number_parses_to_itself(n in 0u64..u64::MAX / 2) {
            proptest::prop_assert_eq!(parse_size(&n.to_string()), Ok(n));
        }
    }
}
