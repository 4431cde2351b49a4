//! Helpers shared by the integration tests: targets on temporary
//! directories and a walk of what a workload left on disk.

#![allow(dead_code)] // each test binary uses a different subset

use std::collections::BTreeMap;
use std::path::Path;

use loom_bench::runner::Target;
use loom_bench::PosixFs;

/// A POSIX target on `dir`.
pub fn target(name: &str, dir: &Path) -> Target {
    let fs = PosixFs::new(dir).expect("temp dir is a usable target");
    Target {
        name: name.into(),
        location: dir.display().to_string(),
        fs_type: fs.fs_type().into(),
        fs: Box::new(fs),
    }
}

/// What is on disk below `root`: relative path -> None for a directory,
/// Some(size) for a file.
pub fn walk(root: &Path) -> BTreeMap<String, Option<u64>> {
    let mut out = BTreeMap::new();
    fn rec(root: &Path, dir: &Path, out: &mut BTreeMap<String, Option<u64>>) {
        for e in std::fs::read_dir(dir).expect("readdir") {
            let e = e.expect("entry");
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .expect("below root")
                .to_string_lossy()
                .into_owned();
            let m = e.metadata().expect("metadata");
            if m.is_dir() {
                out.insert(rel, None);
                rec(root, &p, out);
            } else {
                out.insert(rel, Some(m.len()));
            }
        }
    }
    rec(root, root, &mut out);
    out
}
