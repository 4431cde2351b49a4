//! Workload directories placed on MDTs, for `loom bench sweep --param
//! dir-stripe`: the same mdtest-style workload with its tree roots made as
//! remote directories (`loom mkdir -i`) or as striped directories (`loom
//! setdirstripe -c`), everything else going through the target as usual.
//!
//! The tree roots are the directories mdtest's items hang from:
//! `mdtest_tree.0` (the shared tree) or `mdtest_tree.<rank>.0` (`-u`, one
//! tree per process). With N MDTs:
//!
//! - **remote**: rank r's root is a plain directory on MDT `r mod N`, as a
//!   site gives each job or user a directory on its own MDT; the shared
//!   tree stays on one MDT;
//! - **striped**: every root is striped over N MDTs, starting at MDT 0, so
//!   even one shared directory spreads its entries.

use crate::fs::{BenchFile, BenchFs, DirEntry, FileStat, OpenMode};
use crate::loomfs::LoomFs;
use loom_proto::msg::DirStripe;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// How tree roots are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Each process's root on one MDT, round-robin over `mdts`.
    Remote {
        /// MDTs used.
        mdts: u32,
    },
    /// Every root striped over `mdts` MDTs.
    Striped {
        /// Shards.
        mdts: u32,
    },
}

impl Placement {
    /// `remote` or `striped`.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Remote { .. } => "remote",
            Placement::Striped { .. } => "striped",
        }
    }

    /// Where the directory named `name` goes, if it is a tree root.
    pub fn of(self, name: &str) -> Option<DirStripe> {
        let rank = tree_root_rank(name)?;
        Some(match self {
            Placement::Remote { mdts } => DirStripe {
                count: 1,
                start_mdt: (rank % mdts.max(1)) as i32,
            },
            Placement::Striped { mdts } => DirStripe {
                count: mdts,
                start_mdt: 0,
            },
        })
    }
}

/// The rank of a tree root's name: `mdtest_tree.0` is the shared tree
/// (rank 0), `mdtest_tree.<rank>.0` a process's own.
fn tree_root_rank(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("mdtest_tree.")?;
    match rest.split_once('.') {
        None => (rest == "0").then_some(0),
        Some((rank, "0")) => rank.parse().ok(),
        Some(_) => None,
    }
}

/// A target whose tree roots are placed by a loomfs client of the same
/// directory (the mount's own library view, or the target itself).
pub struct PlacedFs {
    inner: Box<dyn BenchFs>,
    placer: Arc<LoomFs>,
    placement: Placement,
}

impl PlacedFs {
    /// `inner` with its tree roots made by `placer` as `placement` says;
    /// both see the same directory under the same relative paths.
    pub fn new(inner: Box<dyn BenchFs>, placer: Arc<LoomFs>, placement: Placement) -> PlacedFs {
        PlacedFs {
            inner,
            placer,
            placement,
        }
    }
}

impl BenchFs for PlacedFs {
    fn describe(&self) -> String {
        format!(
            "{} ({} tree roots)",
            self.inner.describe(),
            self.placement.name()
        )
    }

    fn mkdir(&self, path: &Path) -> io::Result<()> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        match self.placement.of(name) {
            Some(stripe) => self.placer.mkdir_placed(path, stripe),
            None => self.inner.mkdir(path),
        }
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        self.inner.rmdir(path)
    }

    fn create_file(&self, path: &Path, data: &[u8], fsync: bool) -> io::Result<()> {
        self.inner.create_file(path, data, fsync)
    }

    fn read_file(&self, path: &Path, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_file(path, buf)
    }

    fn stat(&self, path: &Path) -> io::Result<FileStat> {
        self.inner.stat(path)
    }

    fn unlink(&self, path: &Path) -> io::Result<()> {
        self.inner.unlink(path)
    }

    fn readdir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.inner.readdir(path)
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn BenchFile>> {
        self.inner.open(path, mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tree_roots_are_placed() {
        let remote = Placement::Remote { mdts: 3 };
        assert_eq!(
            remote.of("mdtest_tree.0"),
            Some(DirStripe {
                count: 1,
                start_mdt: 0
            })
        );
        assert_eq!(remote.of("mdtest_tree.4.0").map(|s| s.start_mdt), Some(1));
        for other in [
            "mdtest_tree.1",
            "mdtest_tree.4.2",
            "dir.mdtest.0.0",
            "iter.0",
            "x",
        ] {
            assert_eq!(remote.of(other), None, "{other}");
        }
        let striped = Placement::Striped { mdts: 4 };
        assert_eq!(
            striped.of("mdtest_tree.7.0"),
            Some(DirStripe {
                count: 4,
                start_mdt: 0
            })
        );
    }
}
