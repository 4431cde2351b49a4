//! Command-line options of the workloads, with mdtest's and IOR's letters and
//! meanings, and the parser for sizes (`4k`, `1m`, `2g`); targets are in
//! [`crate::target`]. Checks that need several options at once live in
//! [`crate::md::MdPlan::new`] and [`crate::io::IoPlan::new`].

use clap::Args;
use serde::{Deserialize, Serialize};

/// mdtest's options (`loom bench md`).
#[derive(Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MdOptions {
    /// mdtest -n: items (files and/or directories) per process, spread over
    /// the tree's directories (rounded down to a whole number per directory).
    #[arg(short = 'n', long = "items")]
    pub items: Option<u64>,
    /// mdtest -I: items per tree directory, per process (with -n too, -n must
    /// equal -I times the tree's directories).
    #[arg(short = 'I', long = "items-per-dir")]
    pub items_per_dir: Option<u64>,
    /// mdtest -z: depth of the directory tree below its root (0 = the root only).
    #[arg(short = 'z', long = "depth", default_value_t = 0)]
    pub depth: u32,
    /// mdtest -b: branching factor, subdirectories per tree directory.
    #[arg(short = 'b', long = "branch", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub branch: u32,
    /// mdtest -u: a unique working directory (own tree) per process instead
    /// of one tree shared by all.
    #[arg(short = 'u', long = "unique-dir")]
    pub unique_dir: bool,
    /// mdtest -F: files only (no directory phases).
    #[arg(short = 'F', long = "files-only", conflicts_with = "dirs_only")]
    pub files_only: bool,
    /// mdtest -D: directories only (no file phases).
    #[arg(short = 'D', long = "dirs-only")]
    pub dirs_only: bool,
    /// mdtest -w: bytes written to each file at create (e.g. 3901, 4k).
    #[arg(short = 'w', long = "write-bytes", default_value = "0", value_parser = parse_size)]
    pub write_bytes: u64,
    /// mdtest -e: bytes read from each file in the read phase.
    #[arg(short = 'e', long = "read-bytes", default_value = "0", value_parser = parse_size)]
    pub read_bytes: u64,
    /// mdtest -N: stride between processes; process r stats what process
    /// (r+N) mod p created, reads (r+2N)'s and removes (r+3N)'s, as mdtest does.
    #[arg(short = 'N', long = "stride", default_value_t = 0)]
    pub stride: u32,
    /// mdtest/IOR -i: iterations (repetitions of every phase).
    #[arg(short = 'i', long = "iterations", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub iterations: u32,
    /// Processes (threads), each doing its share: what mdtest's MPI ranks are
    /// (mpirun -np).
    #[arg(short = 'p', long = "procs", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub procs: u32,
    /// mdtest -W: stonewall; each process stops creating after SECONDS, and
    /// stat, read and remove handle exactly what was created.
    #[arg(long = "stonewall", value_name = "SECONDS", value_parser = parse_seconds)]
    pub stonewall: Option<f64>,
    /// mdtest -y: fsync each file after writing it at create.
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
    /// IOR -t: transfer size, bytes per read or write call.
    #[arg(short = 't', long = "transfer", default_value = "256k", value_parser = parse_size)]
    pub transfer: u64,
    /// IOR -b: block size, contiguous bytes per process per segment (a
    /// multiple of -t).
    #[arg(short = 'b', long = "block", default_value = "1m", value_parser = parse_size)]
    pub block: u64,
    /// IOR -s: segments; a shared file holds, per segment, one block of each
    /// process in rank order.
    #[arg(short = 's', long = "segments", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub segments: u64,
    /// IOR -F: file per process instead of one shared file.
    #[arg(short = 'F', long = "file-per-proc")]
    pub file_per_proc: bool,
    /// IOR -w: write phase (with neither -w nor -r, both run).
    #[arg(short = 'w', long = "write")]
    pub write: bool,
    /// IOR -r: read phase. Alone, it reads the files an earlier
    /// `-w --keep` run with the same -t -b -s -p -F left (an error if
    /// they are missing), and never removes them.
    #[arg(short = 'r', long = "read")]
    pub read: bool,
    /// IOR -C: reorder tasks, process r reads what process (r+1) mod p wrote.
    #[arg(short = 'C', long = "reorder")]
    pub reorder: bool,
    /// IOR -e: fsync at the end of the write phase, inside its time.
    #[arg(short = 'e', long = "fsync")]
    pub fsync: bool,
    /// IOR -R/-W: verify every byte read against the writer-and-offset
    /// pattern (with -w alone, an untimed read-back checks what was written).
    #[arg(short = 'v', long = "verify")]
    pub verify: bool,
    /// mdtest/IOR -i: iterations (repetitions of every phase).
    #[arg(short = 'i', long = "iterations", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub iterations: u32,
    /// IOR -N (number of tasks, mpirun -np): processes (threads).
    #[arg(short = 'p', long = "procs", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub procs: u32,
    /// IOR -k: keep the data files after the run.
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

    proptest::proptest! {
        #[test]
        fn any_plain_number_parses_to_itself(n in 0u64..u64::MAX / 2) {
            proptest::prop_assert_eq!(parse_size(&n.to_string()), Ok(n));
        }
    }
}
