//! The files and directories `loom bench md` makes follow mdtest's tree rules
//! (-z depth, -b branching, -I items per directory, -n rounding, -u unique
//! directories), checked name by name and size by size with `--keep`, and
//! nothing is left behind without it.

mod common;

use std::collections::BTreeMap;

use loom_bench::md::MdPlan;
use loom_bench::options::MdOptions;
use loom_bench::runner::{run_interleaved, Ctx};

/// Tree node paths by mdtest's numbering, computed independently of the
/// crate: node k's children are k*b+1 ..= k*b+b, names `<base>.<k>`.
fn tree(base: &str, depth: u32, branch: u64) -> Vec<String> {
    fn rec(
        base: &str,
        k: u64,
        level: u32,
        depth: u32,
        b: u64,
        parent: &str,
        out: &mut Vec<(u64, String)>,
    ) {
        let path = if parent.is_empty() {
            format!("{base}.{k}")
        } else {
            format!("{parent}/{base}.{k}")
        };
        out.push((k, path.clone()));
        if level < depth {
            for c in 1..=b {
                rec(base, k * b + c, level + 1, depth, b, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    rec(base, 0, 0, depth, branch, "", &mut out);
    out.sort();
    out.into_iter().map(|(_, p)| p).collect()
}

fn run_keep(dir: &std::path::Path, opts: MdOptions) -> Vec<String> {
    let plan = MdPlan::new(MdOptions { keep: true, ..opts }).expect("valid options");
    let t = common::target("t", dir);
    let res = run_interleaved(std::slice::from_ref(&t), &plan, &Ctx::quiet()).expect("run");
    res[0].phases.iter().map(|p| p.phase.clone()).collect()
}

#[test]
fn shared_tree_holds_every_process_items_per_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let phases = run_keep(
        tmp.path(),
        MdOptions {
            items_per_dir: Some(3),
            depth: 2,
            branch: 2,
            procs: 2,
            write_bytes: 100,
            read_bytes: 100,
            ..MdOptions::default()
        },
    );
    assert_eq!(
        phases,
        [
            "Tree creation",
            "Directory creation",
            "Directory stat",
            "File creation",
            "File stat",
            "File read"
        ]
    );
    let nodes = tree("mdtest_tree", 2, 2);
    assert_eq!(nodes.len(), 7);
    let mut expected: BTreeMap<String, Option<u64>> = BTreeMap::new();
    let root = "loom-md/iter.0".to_string();
    expected.insert("loom-md".into(), None);
    expected.insert(root.clone(), None);
    for n in &nodes {
        expected.insert(format!("{root}/{n}"), None);
    }
    for rank in 0..2 {
        for j in 0..21u64 {
            let node = &nodes[(j / 3) as usize];
            expected.insert(format!("{root}/{node}/dir.mdtest.{rank}.{j}"), None);
            expected.insert(format!("{root}/{node}/file.mdtest.{rank}.{j}"), Some(100));
        }
    }
    let actual = common::walk(tmp.path());
    assert_eq!(actual.len(), 2 + 7 + 2 * 21 * 2);
    assert_eq!(actual, expected);
}

#[test]
fn unique_dir_gives_each_process_its_own_tree() {
    let tmp = tempfile::tempdir().expect("tempdir");
    run_keep(
        tmp.path(),
        MdOptions {
            items_per_dir: Some(2),
            depth: 1,
            branch: 3,
            procs: 3,
            unique_dir: true,
            files_only: true,
            write_bytes: 7,
            ..MdOptions::default()
        },
    );
    let root = "loom-md/iter.0";
    let mut expected: BTreeMap<String, Option<u64>> = BTreeMap::new();
    expected.insert("loom-md".into(), None);
    expected.insert(root.into(), None);
    for rank in 0..3 {
        let nodes = tree(&format!("mdtest_tree.{rank}"), 1, 3);
        assert_eq!(nodes.len(), 4);
        for n in &nodes {
            expected.insert(format!("{root}/{n}"), None);
        }
        for j in 0..8u64 {
            let node = &nodes[(j / 2) as usize];
            expected.insert(format!("{root}/{node}/file.mdtest.{rank}.{j}"), Some(7));
        }
    }
    assert_eq!(common::walk(tmp.path()), expected);
}

#[test]
fn n_alone_is_rounded_down_to_whole_directories_like_mdtest() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // 10 items over a 3-directory tree: 3 per directory, 9 in all.
    let phases = run_keep(
        tmp.path(),
        MdOptions {
            items: Some(10),
            depth: 1,
            branch: 2,
            dirs_only: true,
            ..MdOptions::default()
        },
    );
    assert_eq!(
        phases,
        ["Tree creation", "Directory creation", "Directory stat"]
    );
    let actual = common::walk(tmp.path());
    let items: Vec<_> = actual
        .keys()
        .filter(|k| k.contains("dir.mdtest."))
        .collect();
    assert_eq!(items.len(), 9);
    assert!(actual.contains_key("loom-md/iter.0/mdtest_tree.0/mdtest_tree.2/dir.mdtest.0.8"));
    assert!(!actual.keys().any(|k| k.ends_with("dir.mdtest.0.9")));
    assert!(actual.values().all(|v| v.is_none()), "-D makes no files");
}

#[test]
fn without_keep_every_phase_runs_and_nothing_is_left() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let plan = MdPlan::new(MdOptions {
        items_per_dir: Some(4),
        depth: 1,
        branch: 2,
        procs: 2,
        stride: 1,
        iterations: 2,
        write_bytes: 10,
        read_bytes: 10,
        ..MdOptions::default()
    })
    .expect("plan");
    let t = common::target("t", tmp.path());
    let res = run_interleaved(std::slice::from_ref(&t), &plan, &Ctx::quiet()).expect("run");
    let phases: Vec<_> = res[0]
        .phases
        .iter()
        .map(|p| (p.phase.as_str(), p.samples.len()))
        .collect();
    assert_eq!(
        phases,
        [
            ("Tree creation", 2),
            ("Directory creation", 2),
            ("Directory stat", 2),
            ("Directory removal", 2),
            ("File creation", 2),
            ("File stat", 2),
            ("File read", 2),
            ("File removal", 2),
            ("Tree removal", 2)
        ]
    );
    // 2 processes x 4 items x 3 directories per item phase; 3 tree directories.
    for p in &res[0].phases {
        let expect = if p.phase.starts_with("Tree") { 3 } else { 24 };
        assert!(
            p.samples.iter().all(|s| s.ops == expect),
            "{}: {:?}",
            p.phase,
            p.samples
        );
        assert!(p.samples.iter().all(|s| s.value > 0.0 && s.seconds > 0.0));
    }
    let read = res[0].phase("File read").expect("read phase");
    assert!(read.samples.iter().all(|s| s.bytes == 240));
    assert!(
        common::walk(tmp.path()).is_empty(),
        "left behind: {:?}",
        common::walk(tmp.path())
    );
}
