//! What a report says about where it ran: host, kernel, CPUs, memory, the
//! versions of the tool and compiler, and each target's file system type.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The machine a benchmark ran on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Machine {
    /// Host name.
    pub hostname: String,
    /// Operating system name (`uname -s`).
    pub os: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// CPU architecture (`uname -m`).
    pub arch: String,
    /// CPU model from /proc/cpuinfo, when known.
    pub cpu_model: String,
    /// CPUs this process may use (`nproc`).
    pub cpus: usize,
    /// Total memory in bytes (MemTotal of /proc/meminfo), 0 if unknown.
    pub mem_total_bytes: u64,
}

/// Versions of what produced a report.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Versions {
    /// `loom-bench` crate version.
    pub loom_bench: String,
    /// `rustc --version` of the compiler that built it.
    pub rustc: String,
}

impl Versions {
    /// The versions of this build.
    pub fn current() -> Self {
        Versions {
            loom_bench: env!("CARGO_PKG_VERSION").to_string(),
            rustc: env!("LOOM_BENCH_RUSTC").to_string(),
        }
    }
}

impl Machine {
    /// Describes the machine this process runs on.
    pub fn current() -> Self {
        let uts = nix::sys::utsname::uname().ok();
        let field = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
            uts.as_ref()
                .map(|u| f(u).to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_total_bytes = meminfo
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map(|kb| kb * 1024)
            .unwrap_or(0);
        Machine {
            hostname: nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            os: field(|u| u.sysname()),
            kernel: field(|u| u.release()),
            arch: field(|u| u.machine()),
            cpu_model,
            cpus: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            mem_total_bytes,
        }
    }
}

/// The file system type of `path` by its `statfs` magic number, e.g. `ext4`,
/// `tmpfs`, `fuse`, or `0x…` for one this table does not know.
pub fn fs_type(path: &Path) -> String {
    let Ok(st) = nix::sys::statfs::statfs(path) else {
        return "unknown".to_string();
    };
    // Magic numbers from linux/magic.h; fuse covers loomfs mounts.
    #[allow(clippy::unnecessary_cast)] // the field's width differs by libc target
    let magic = st.filesystem_type().0 as i64;
    let name = match magic {
        0xEF53 => "ext4",
        0x0102_1994 => "tmpfs",
        0x6573_5546 => "fuse",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x6969 => "nfs",
        0x794C_7630 => "overlayfs",
        0x2FC1_2FC1 => "zfs",
        0x0BD0_0BD0 => "lustre",
        0x6462_6720 => "debugfs",
        0x0000_9fa0 => "proc",
        0x0102_1997 => "9p",
        _ => return format!("{magic:#x}"),
    };
    name.to_string()
}
