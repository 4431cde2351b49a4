//! On a real `loom up` cluster, `loom bench md` and `loom bench io -v` run
//! once through the FUSE mount (a plain path) and once through the client
//! library (`loom:PATH`, no FUSE) with the same options and `--keep`: both
//! make the same tree of the same names and sizes, the IOR file holds the
//! same bytes, and the JSON figures count the same operations and bytes.
//! What the library wrote reads back through FUSE (its sizes reached the
//! MDT at close), so the two paths see one file system.

mod bench_support;
mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use bench_support::{args, loom_bounded};

/// Relative path -> None for a directory, Some(size) for a file.
fn walk(root: &Path) -> BTreeMap<String, Option<u64>> {
    fn rec(root: &Path, dir: &Path, out: &mut BTreeMap<String, Option<u64>>) {
        for e in std::fs::read_dir(dir).expect("readdir") {
            let p = e.expect("entry").path();
            let rel = p
                .strip_prefix(root)
                .expect("below root")
                .to_string_lossy()
                .into_owned();
            let m = std::fs::metadata(&p).expect("metadata");
            if m.is_dir() {
                out.insert(rel, None);
                rec(root, &p, out);
            } else {
                out.insert(rel, Some(m.len()));
            }
        }
    }
    let mut out = BTreeMap::new();
    rec(root, root, &mut out);
    out
}

fn bench(a: &[&str]) -> serde_json::Value {
    let tmp = tempfile::tempdir().expect("tempdir");
    let json = tmp.path().join("r.json");
    let mut argv = args(&["bench"]);
    argv.extend(args(&a[..a.len() - 1]));
    argv.extend(args(&[
        "--no-progress",
        "--json",
        json.to_str().expect("utf8"),
    ]));
    argv.push(a[a.len() - 1].to_string());
    let out = loom_bounded(&argv, &[], Duration::from_secs(300));
    assert!(
        out.status.success(),
        "loom {argv:?}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("json")
}

/// (phase, ops, bytes) of the first target's first iteration.
fn figures(report: &serde_json::Value) -> Vec<(String, u64, u64)> {
    report["targets"][0]["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|p| {
            let s = &p["samples"][0];
            (
                p["phase"].as_str().expect("phase").to_string(),
                s["ops"].as_u64().expect("ops"),
                s["bytes"].as_u64().expect("bytes"),
            )
        })
        .collect()
}

#[test]
fn md_and_io_make_the_same_files_through_fuse_and_the_library() {
    let cluster = common::Cluster::up(1, 2, &[]);
    let mnt = cluster.mnt.to_str().expect("utf8").to_string();
    let lib = format!("loom:{mnt}");

    // mdtest: a 3-directory tree, 2 processes, 3901-byte files, stride 1.
    let md = |name: &str, target: &str| {
        bench(&[
            "md", "-n", "24", "-p", "2", "-z", "1", "-b", "2", "-w", "3901", "-e", "3901", "-N",
            "1", "--keep", "--name", name, target,
        ])
    };
    let via_fuse = md("md-fuse", &mnt);
    let via_lib = md("md-lib", &lib);
    assert_eq!(via_lib["targets"][0]["fs_type"], "loomfs-lib");
    assert_ne!(via_fuse["targets"][0]["fs_type"], "loomfs-lib");
    assert_eq!(figures(&via_fuse), figures(&via_lib));
    let (fuse_tree, lib_tree) = (
        walk(&cluster.path("md-fuse")),
        walk(&cluster.path("md-lib")),
    );
    // 1 iteration dir + 3 tree dirs + 2 x 24 directories + 2 x 24 files.
    assert_eq!(fuse_tree.len(), 1 + 3 + 48 + 48, "{fuse_tree:?}");
    assert_eq!(fuse_tree.values().filter(|v| **v == Some(3901)).count(), 48);
    assert_eq!(fuse_tree, lib_tree);

    // IOR: shared file, 2 segments, reordered and verified reads.
    let io = |name: &str, target: &str| {
        bench(&[
            "io", "-t", "64k", "-b", "256k", "-s", "2", "-p", "2", "-C", "-e", "-v", "--keep",
            "--name", name, target,
        ])
    };
    let via_fuse = io("io-fuse", &mnt);
    let via_lib = io("io-lib", &lib);
    assert_eq!(figures(&via_fuse), figures(&via_lib));
    let fuse_file = cluster.path("io-fuse/iter.0/testfile");
    let lib_file = cluster.path("io-lib/iter.0/testfile");
    let (a, b) = (
        std::fs::read(&fuse_file).expect("read"),
        std::fs::read(&lib_file).expect("read"),
    );
    assert_eq!(a.len(), 2 * 2 * 256 * 1024);
    assert!(a == b, "the two paths wrote different bytes");

    // The library reads back what FUSE wrote (and verifies every byte).
    let read = bench(&[
        "io", "-r", "-v", "-t", "64k", "-b", "256k", "-s", "2", "-p", "2", "--name", "io-fuse",
        &lib,
    ]);
    assert_eq!(
        figures(&read),
        [("read".to_string(), 2 * 2 * 4, 2 * 2 * 256 * 1024)]
    );
}
