//! mdtest-style metadata workload (`loom bench md`).
//!
//! Layout of one iteration directory (`<name>/iter.<i>/`), as mdtest builds it:
//!
//! ```text
//! iter.0/
//!   mdtest_tree.0/                      tree root (shared tree; with -u one
//!     file.mdtest.<rank>.<j>              tree per process: mdtest_tree.<rank>.0)
//!     dir.mdtest.<rank>.<j>/
//!     mdtest_tree.1/                    node k's children are k*b+1 ..= k*b+b,
//!       mdtest_tree.3/ …                  nested, down to depth -z
//!     mdtest_tree.2/
//! ```
//!
//! The tree has `(b^(z+1) - 1) / (b - 1)` directories (`z + 1` when b = 1).
//! Each process owns `items_per_dir` items in every tree directory: its item
//! `j` lives in node `j / items_per_dir` and is named `file.mdtest.<rank>.<j>`
//! or `dir.mdtest.<rank>.<j>`. With `-n` alone, `items_per_dir = n / dirs`
//! and `n` is rounded down to a multiple of the tree's directories, as
//! mdtest does.
//!
//! With a stride `-N n`, process r stats the items of process (r+n) mod p,
//! reads those of (r+2n) and removes those of (r+3n), as mdtest does.
//!
//! Phases per iteration, each timed from the first process's start to the
//! last's end: Tree creation; Directory creation, stat, removal (unless -F);
//! File creation, stat, read, removal (unless -D); Tree removal. `--keep`
//! skips the removal phases.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{BenchError, Result};
use crate::fs::BenchFs;
use crate::options::MdOptions;
use crate::runner::{run_ranks, Ctx, Measurement, PhaseSample, Workload};

/// Most tree directories a plan may have.
pub const MAX_TREE_DIRS: u64 = 10_000_000;

/// Files or directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// Regular files (`file.mdtest.*`).
    File,
    /// Directories (`dir.mdtest.*`).
    Dir,
}

impl ItemKind {
    fn prefix(self) -> &'static str {
        match self {
            ItemKind::File => "file",
            ItemKind::Dir => "dir",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            ItemKind::File => "File",
            ItemKind::Dir => "Directory",
        }
    }
}

/// How many items each process created in a create phase (all of them,
/// unless a stonewall stopped it early).
pub type Counts = Vec<u64>;

/// The item phases, numbered as mdtest numbers them for the stride (-N).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Create: a process's own items.
    Create = 0,
    /// Stat: the items of process (rank + N) mod p.
    Stat = 1,
    /// Read: the items of process (rank + 2N) mod p.
    Read = 2,
    /// Remove: the items of process (rank + 3N) mod p.
    Remove = 3,
}

/// A checked mdtest configuration: tree shape and item placement.
#[derive(Debug, Clone)]
pub struct MdPlan {
    opts: MdOptions,
    /// Directories in one tree.
    pub tree_dirs: u64,
    /// Items of one process in each tree directory.
    pub items_per_dir: u64,
    /// Items of one process (after rounding to whole directories).
    pub items_per_proc: u64,
    /// Node paths of one tree relative to the tree's parent, by node index,
    /// for the shared tree (or rank 0's with -u).
    nodes: Vec<PathBuf>,
}

/// Number of directories in a tree of depth `z` and branching `b`.
pub fn tree_dirs(depth: u32, branch: u32) -> Option<u64> {
    let b = u64::from(branch);
    let mut total: u64 = 0;
    let mut level: u64 = 1;
    for _ in 0..=depth {
        total = total.checked_add(level)?;
        level = level.checked_mul(b)?;
    }
    Some(total)
}

impl MdPlan {
    /// Checks the options together and computes the tree.
    pub fn new(opts: MdOptions) -> Result<Self> {
        let bad = |m: String| Err(BenchError::Options(m));
        if opts.files_only && opts.dirs_only {
            return bad("-F (files only) and -D (directories only) exclude each other".into());
        }
        if opts.branch == 0 {
            return bad("-b must be at least 1".into());
        }
        if opts.procs == 0 || opts.iterations == 0 {
            return bad("-p and -i must be at least 1".into());
        }
        if opts.name.is_empty() || opts.name.contains('/') || opts.name == "." || opts.name == ".."
        {
            return bad(format!(
                "--name {:?}: a plain directory name is needed",
                opts.name
            ));
        }
        if opts.dirs_only && (opts.write_bytes > 0 || opts.read_bytes > 0) {
            return bad("-w and -e need files; they make no sense with -D".into());
        }
        if opts.write_bytes > 1 << 30 || opts.read_bytes > 1 << 30 {
            return bad("-w and -e are limited to 1 GiB per file".into());
        }
        let dirs = match tree_dirs(opts.depth, opts.branch) {
            Some(d) if d <= MAX_TREE_DIRS => d,
            _ => {
                return bad(format!(
                    "-z {} -b {} makes a tree of more than {MAX_TREE_DIRS} directories",
                    opts.depth, opts.branch
                ))
            }
        };
        let (items_per_dir, items) = match (opts.items, opts.items_per_dir) {
            (None, None) => {
                return bad("give -n (items per process) or -I (items per directory)".into())
            }
            (None, Some(i)) => (
                i,
                i.checked_mul(dirs)
                    .ok_or_else(|| BenchError::Options("-I too large".into()))?,
            ),
            (Some(n), None) => {
                let per_dir = n / dirs;
                if per_dir == 0 && n > 0 {
                    return bad(format!(
                        "-n {n} is fewer than the {dirs} directories of the tree (-z {} -b {}); use at least -n {dirs} or -I",
                        opts.depth, opts.branch
                    ));
                }
                (per_dir, per_dir * dirs)
            }
            (Some(n), Some(i)) => {
                if i.checked_mul(dirs) != Some(n) {
                    return bad(format!(
                        "-n {n} and -I {i} disagree: the tree has {dirs} directories, so -n must be {} (or give only one of them)",
                        i.saturating_mul(dirs)
                    ));
                }
                (i, n)
            }
        };
        let nodes = node_paths("mdtest_tree", dirs, opts.branch);
        Ok(MdPlan {
            opts,
            tree_dirs: dirs,
            items_per_dir,
            items_per_proc: items,
            nodes,
        })
    }

    /// The options this plan was made from.
    pub fn options(&self) -> &MdOptions {
        &self.opts
    }

    /// Whether the directory phases run.
    pub fn does_dirs(&self) -> bool {
        !self.opts.files_only
    }

    /// Whether the file phases run.
    pub fn does_files(&self) -> bool {
        !self.opts.dirs_only
    }

    /// Path of tree node `node` of the tree `rank` works in, relative to the
    /// iteration directory.
    pub fn node_path(&self, rank: u32, node: u64) -> PathBuf {
        let shared = &self.nodes[node as usize];
        if !self.opts.unique_dir {
            return shared.clone();
        }
        // Same shape, names carry the rank: mdtest_tree.<rank>.<node>.
        shared
            .iter()
            .map(|c| {
                let s = c.to_string_lossy();
                let idx = s.rsplit('.').next().unwrap_or("0");
                format!("mdtest_tree.{rank}.{idx}")
            })
            .collect()
    }

    /// Path of item `j` of process `owner`, relative to the iteration directory.
    pub fn item_path(&self, kind: ItemKind, owner: u32, j: u64) -> PathBuf {
        let node = j.checked_div(self.items_per_dir).unwrap_or(0);
        self.node_path(owner, node)
            .join(format!("{}.mdtest.{owner}.{j}", kind.prefix()))
    }

    /// The process whose items `rank` works on in `step`, as mdtest's -N
    /// does: `(rank + k*N) mod p` with k = 0 to create, 1 to stat, 2 to
    /// read and 3 to remove (mdtest.c's mk_name, stat_name, read_name and
    /// rm_name), so with a stride no phase works on what the process itself
    /// just touched.
    pub fn owner(&self, rank: u32, step: Step) -> u32 {
        let k = step as u64;
        let (p, n) = (u64::from(self.opts.procs), u64::from(self.opts.stride));
        ((u64::from(rank) + k * n) % p) as u32
    }

    /// Ranks that build a tree: rank 0 for the shared tree, all with -u.
    fn tree_builders(&self) -> u32 {
        if self.opts.unique_dir {
            self.opts.procs
        } else {
            1
        }
    }

    /// Tree creation: parents before children.
    pub fn create_tree(&self, fs: &dyn BenchFs, dir: &Path, ctx: &Ctx) -> Result<Measurement> {
        let builders = self.tree_builders();
        let (seconds, made) = run_ranks(self.opts.procs, &ctx.cancel, |rank, stop, _| {
            if rank >= builders {
                return Ok(0u64);
            }
            for node in 0..self.tree_dirs {
                stop.check()?;
                let p = dir.join(self.node_path(rank, node));
                fs.mkdir(&p).map_err(|e| BenchError::io("mkdir", &p, e))?;
                ctx.progress.inc(1);
            }
            Ok(self.tree_dirs)
        })?;
        Ok(Measurement {
            ops: made.iter().sum(),
            bytes: 0,
            seconds,
        })
    }

    /// Tree removal: children before parents.
    pub fn remove_tree(&self, fs: &dyn BenchFs, dir: &Path, ctx: &Ctx) -> Result<Measurement> {
        let builders = self.tree_builders();
        let (seconds, removed) = run_ranks(self.opts.procs, &ctx.cancel, |rank, stop, _| {
            if rank >= builders {
                return Ok(0u64);
            }
            for node in (0..self.tree_dirs).rev() {
                stop.check()?;
                let p = dir.join(self.node_path(rank, node));
                fs.rmdir(&p).map_err(|e| BenchError::io("rmdir", &p, e))?;
                ctx.progress.inc(1);
            }
            Ok(self.tree_dirs)
        })?;
        Ok(Measurement {
            ops: removed.iter().sum(),
            bytes: 0,
            seconds,
        })
    }

    /// Create phase: each process creates its items in tree order, stopping
    /// early at the stonewall. Files get `-w` bytes.
    pub fn create_items(
        &self,
        fs: &dyn BenchFs,
        dir: &Path,
        kind: ItemKind,
        ctx: &Ctx,
    ) -> Result<(Measurement, Counts)> {
        let data = vec![b'x'; self.opts.write_bytes as usize];
        let stonewall = self.opts.stonewall;
        let (seconds, counts) = run_ranks(
            self.opts.procs,
            &ctx.cancel,
            |rank, stop, start: Instant| {
                let mut done = 0u64;
                for j in 0..self.items_per_proc {
                    stop.check()?;
                    if let Some(limit) = stonewall {
                        if start.elapsed().as_secs_f64() >= limit {
                            break;
                        }
                    }
                    let p = dir.join(self.item_path(kind, self.owner(rank, Step::Create), j));
                    match kind {
                        ItemKind::File => fs.create_file(&p, &data, self.opts.fsync),
                        ItemKind::Dir => fs.mkdir(&p),
                    }
                    .map_err(|e| BenchError::io("create", &p, e))?;
                    done += 1;
                    ctx.progress.inc(1);
                }
                Ok(done)
            },
        )?;
        let ops: u64 = counts.iter().sum();
        let bytes = if kind == ItemKind::File {
            ops * self.opts.write_bytes
        } else {
            0
        };
        Ok((
            Measurement {
                ops,
                bytes,
                seconds,
            },
            counts,
        ))
    }

    /// Runs `op` on every item of the process whose items each process
    /// handles in `step` (-N), as many as that process created.
    fn for_peer_items<F>(
        &self,
        dir: &Path,
        kind: ItemKind,
        step: Step,
        counts: &Counts,
        ctx: &Ctx,
        op: F,
    ) -> Result<(f64, Vec<(u64, u64)>)>
    where
        F: Fn(&Path, &mut Vec<u8>) -> Result<u64> + Sync,
    {
        run_ranks(self.opts.procs, &ctx.cancel, |rank, stop, _| {
            let owner = self.owner(rank, step);
            let n = counts.get(owner as usize).copied().unwrap_or(0);
            let mut buf = vec![0u8; self.opts.read_bytes as usize];
            let mut bytes = 0u64;
            for j in 0..n {
                stop.check()?;
                bytes += op(&dir.join(self.item_path(kind, owner, j)), &mut buf)?;
                ctx.progress.inc(1);
            }
            Ok((n, bytes))
        })
    }

    /// Stat phase.
    pub fn stat_items(
        &self,
        fs: &dyn BenchFs,
        dir: &Path,
        kind: ItemKind,
        counts: &Counts,
        ctx: &Ctx,
    ) -> Result<Measurement> {
        let (seconds, r) = self.for_peer_items(dir, kind, Step::Stat, counts, ctx, |p, _| {
            let st = fs.stat(p).map_err(|e| BenchError::io("stat", p, e))?;
            if st.is_dir != (kind == ItemKind::Dir) {
                return Err(BenchError::Verify(format!(
                    "{} has the wrong type",
                    p.display()
                )));
            }
            Ok(0)
        })?;
        Ok(Measurement {
            ops: r.iter().map(|x| x.0).sum(),
            bytes: 0,
            seconds,
        })
    }

    /// Read phase (files): open, read `-e` bytes, close.
    pub fn read_items(
        &self,
        fs: &dyn BenchFs,
        dir: &Path,
        counts: &Counts,
        ctx: &Ctx,
    ) -> Result<Measurement> {
        let expect = self.opts.read_bytes.min(self.opts.write_bytes) as usize;
        let (seconds, r) =
            self.for_peer_items(dir, ItemKind::File, Step::Read, counts, ctx, |p, buf| {
                let n = fs
                    .read_file(p, buf)
                    .map_err(|e| BenchError::io("read", p, e))?;
                if n != expect {
                    return Err(BenchError::Verify(format!(
                        "{}: read {n} bytes, expected {expect}",
                        p.display()
                    )));
                }
                Ok(n as u64)
            })?;
        Ok(Measurement {
            ops: r.iter().map(|x| x.0).sum(),
            bytes: r.iter().map(|x| x.1).sum(),
            seconds,
        })
    }

    /// Removal phase.
    pub fn remove_items(
        &self,
        fs: &dyn BenchFs,
        dir: &Path,
        kind: ItemKind,
        counts: &Counts,
        ctx: &Ctx,
    ) -> Result<Measurement> {
        let (seconds, r) = self.for_peer_items(dir, kind, Step::Remove, counts, ctx, |p, _| {
            match kind {
                ItemKind::File => fs.unlink(p),
                ItemKind::Dir => fs.rmdir(p),
            }
            .map_err(|e| BenchError::io("remove", p, e))?;
            Ok(0)
        })?;
        Ok(Measurement {
            ops: r.iter().map(|x| x.0).sum(),
            bytes: 0,
            seconds,
        })
    }

    /// Operations of one iteration (for progress bars).
    pub fn ops_per_iteration(&self) -> u64 {
        let trees = self.tree_dirs * u64::from(self.tree_builders()) * 2;
        let items = self.items_per_proc * u64::from(self.opts.procs);
        let mut ops = trees;
        if self.does_dirs() {
            ops += 3 * items;
        }
        if self.does_files() {
            ops += 4 * items;
        }
        ops
    }
}

/// Paths of the nodes of a tree with `dirs` directories and branching `b`,
/// each relative to the tree's parent: node k's parent is (k - 1) / b.
fn node_paths(base: &str, dirs: u64, branch: u32) -> Vec<PathBuf> {
    let b = u64::from(branch);
    let mut nodes: Vec<PathBuf> = Vec::with_capacity(dirs as usize);
    for k in 0..dirs {
        let name = format!("{base}.{k}");
        let path = if k == 0 {
            PathBuf::from(name)
        } else {
            nodes[((k - 1) / b) as usize].join(name)
        };
        nodes.push(path);
    }
    nodes
}

fn sample(phase: String, m: Measurement) -> PhaseSample {
    PhaseSample {
        phase,
        unit: "ops/s".to_string(),
        value: m.ops_per_sec(),
        measurement: m,
    }
}

impl MdPlan {
    /// One full mdtest iteration in `dir` (created here): tree, directory
    /// phases, file phases, tree removal; returns one sample per phase.
    pub fn run_in(&self, fs: &dyn BenchFs, dir: &Path, ctx: &Ctx) -> Result<Vec<PhaseSample>> {
        fs.mkdir(dir).map_err(|e| BenchError::io("mkdir", dir, e))?;
        let mut out = Vec::new();
        out.push(sample(
            "Tree creation".into(),
            self.create_tree(fs, dir, ctx)?,
        ));
        let keep = self.opts.keep;
        let mut kinds = Vec::new();
        if self.does_dirs() {
            kinds.push(ItemKind::Dir);
        }
        if self.does_files() {
            kinds.push(ItemKind::File);
        }
        for kind in kinds {
            let noun = kind.noun();
            let (m, counts) = self.create_items(fs, dir, kind, ctx)?;
            out.push(sample(format!("{noun} creation"), m));
            out.push(sample(
                format!("{noun} stat"),
                self.stat_items(fs, dir, kind, &counts, ctx)?,
            ));
            if kind == ItemKind::File {
                out.push(sample(
                    "File read".into(),
                    self.read_items(fs, dir, &counts, ctx)?,
                ));
            }
            if !keep {
                out.push(sample(
                    format!("{noun} removal"),
                    self.remove_items(fs, dir, kind, &counts, ctx)?,
                ));
            }
        }
        if !keep {
            out.push(sample(
                "Tree removal".into(),
                self.remove_tree(fs, dir, ctx)?,
            ));
            fs.rmdir(dir).map_err(|e| BenchError::io("rmdir", dir, e))?;
        }
        Ok(out)
    }
}

impl Workload for MdPlan {
    fn kind(&self) -> &'static str {
        "md"
    }
    fn iterations(&self) -> u32 {
        self.opts.iterations
    }
    fn work_dir(&self) -> PathBuf {
        PathBuf::from(&self.opts.name)
    }
    fn keep(&self) -> bool {
        self.opts.keep
    }
    fn ops_per_iteration(&self) -> u64 {
        MdPlan::ops_per_iteration(self)
    }
    fn options_json(&self) -> serde_json::Value {
        serde_json::json!({
            "options": self.opts,
            "tree_dirs": self.tree_dirs,
            "items_per_dir": self.items_per_dir,
            "items_per_proc": self.items_per_proc,
        })
    }
    fn run_iteration(&self, fs: &dyn BenchFs, dir: &Path, ctx: &Ctx) -> Result<Vec<PhaseSample>> {
        self.run_in(fs, dir, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(f: impl FnOnce(&mut MdOptions)) -> MdOptions {
        let mut o = MdOptions::default();
        f(&mut o);
        o
    }

    #[test]
    fn tree_sizes_follow_mdtest() {
        assert_eq!(tree_dirs(0, 1), Some(1));
        assert_eq!(tree_dirs(3, 1), Some(4));
        assert_eq!(tree_dirs(2, 2), Some(7));
        assert_eq!(tree_dirs(2, 3), Some(13));
        assert_eq!(tree_dirs(200, 1000), None);
    }

    #[test]
    fn n_alone_is_rounded_down_to_whole_directories() {
        let p = MdPlan::new(opts(|o| {
            o.items = Some(20);
            o.depth = 1;
            o.branch = 2;
        }))
        .expect("plan");
        assert_eq!((p.tree_dirs, p.items_per_dir, p.items_per_proc), (3, 6, 18));
    }

    #[test]
    fn items_per_dir_alone_sets_n() {
        let p = MdPlan::new(opts(|o| {
            o.items_per_dir = Some(5);
            o.depth = 2;
            o.branch = 2;
        }))
        .expect("plan");
        assert_eq!(p.items_per_proc, 35);
    }

    #[test]
    fn contradicting_or_missing_counts_are_refused() {
        let e = MdPlan::new(opts(|o| {
            o.items = Some(10);
            o.items_per_dir = Some(3);
            o.depth = 1;
            o.branch = 2;
        }))
        .expect_err("n != I * dirs");
        assert!(e.to_string().contains("must be 9"), "{e}");
        assert!(MdPlan::new(opts(|_| {})).is_err());
        assert!(MdPlan::new(opts(|o| {
            o.items = Some(2);
            o.depth = 2;
            o.branch = 2;
        }))
        .is_err());
        assert!(MdPlan::new(opts(|o| {
            o.items = Some(2);
            o.files_only = true;
            o.dirs_only = true;
        }))
        .is_err());
        assert!(MdPlan::new(opts(|o| {
            o.items = Some(2);
            o.dirs_only = true;
            o.write_bytes = 10;
        }))
        .is_err());
    }

    #[test]
    fn items_live_in_the_right_node_with_mdtest_names() {
        let p = MdPlan::new(opts(|o| {
            o.items_per_dir = Some(2);
            o.depth = 2;
            o.branch = 2;
            o.procs = 3;
        }))
        .expect("plan");
        assert_eq!(
            p.item_path(ItemKind::File, 1, 0),
            PathBuf::from("mdtest_tree.0/file.mdtest.1.0")
        );
        // Item 9 is in node 4 = second child of node 1.
        assert_eq!(
            p.item_path(ItemKind::Dir, 2, 9),
            PathBuf::from("mdtest_tree.0/mdtest_tree.1/mdtest_tree.4/dir.mdtest.2.9")
        );
        let u = MdPlan::new(opts(|o| {
            o.items_per_dir = Some(2);
            o.depth = 1;
            o.branch = 2;
            o.unique_dir = true;
        }))
        .expect("plan");
        assert_eq!(
            u.node_path(3, 2),
            PathBuf::from("mdtest_tree.3.0/mdtest_tree.3.2")
        );
    }

    #[test]
    fn stride_moves_one_more_step_per_phase_like_mdtest() {
        let p = MdPlan::new(opts(|o| {
            o.items = Some(1);
            o.procs = 5;
            o.stride = 2;
        }))
        .expect("plan");
        let row = |step| (0..5).map(|r| p.owner(r, step)).collect::<Vec<_>>();
        assert_eq!(row(Step::Create), [0, 1, 2, 3, 4]);
        assert_eq!(row(Step::Stat), [2, 3, 4, 0, 1]);
        assert_eq!(row(Step::Read), [4, 0, 1, 2, 3]);
        assert_eq!(row(Step::Remove), [1, 2, 3, 4, 0]);
    }
}
