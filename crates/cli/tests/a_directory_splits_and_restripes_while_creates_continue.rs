//! Issue #10 point 4 (directory auto-split) and point 3's restripe: a
//! plain directory that passes the configured number of entries becomes
//! striped over more MDTs by itself while two mounts keep creating in it
//! and a third client lists it; `loom migrate -c` restripes another one
//! under the same load. Every file made is there once, with its bytes,
//! for root and for nobody, from both mounts; every listing taken during
//! the split holds each file whose create had finished before it began,
//! once; and `loom fsck` is clean.
mod common;
use common::*;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

fn s(p: &Path) -> String {
    p.to_str().expect("utf-8").to_string()
}

/// Create `n` files `{tag}{i}` in `dir`, noting each once made.
fn writer(dir: PathBuf, tag: &'static str, n: u32, made: Arc<Mutex<HashSet<String>>>) {
    for i in 0..n {
        let name = format!("{tag}{i}");
        std::fs::write(dir.join(&name), format!("{name}\n"))
            .unwrap_or_else(|e| panic!("create {name}: {e}"));
        made.lock().expect("lock").insert(name);
    }
}

/// List `dir` until `stop`, checking each listing against what was made
/// before it began; the number of listings.
fn lister(dir: PathBuf, made: Arc<Mutex<HashSet<String>>>, stop: Arc<AtomicBool>) -> u32 {
    let mut n = 0;
    while !stop.load(Ordering::Acquire) {
        let before: HashSet<String> = made.lock().expect("lock").clone();
        let mut seen = HashSet::new();
        for e in std::fs::read_dir(&dir).expect("readdir") {
            let name = e.expect("entry").file_name().to_string_lossy().to_string();
            assert!(seen.insert(name.clone()), "{name} listed twice");
        }
        let missing: Vec<_> = before.difference(&seen).collect();
        assert!(missing.is_empty(), "listing {n} misses {missing:?}");
        n += 1;
    }
    n
}

fn stripe_count(dir: &Path) -> u32 {
    loom_ok(&["getdirstripe", "-c", &s(dir)])
        .trim()
        .parse()
        .expect("count")
}

#[test]
fn a_directory_splits_and_restripes_while_creates_continue() {
    let mut c = Cluster::up(
        3,
        2,
        &["--dir-split-entries", "300", "--dir-split-count", "3"],
    );
    let second = c.second_mount("second");
    let shared = c.path("shared");
    loom_ok(&["mkdir", "-i", "0", &s(&shared)]);
    loom_ok(&["setstripe", "-c", "1", &s(&shared)]);
    assert_eq!(stripe_count(&shared), 0);

    let made = Arc::new(Mutex::new(HashSet::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let list = {
        let (d, m, st) = (shared.clone(), made.clone(), stop.clone());
        std::thread::spawn(move || lister(d, m, st))
    };
    let w1 = {
        let (d, m) = (shared.clone(), made.clone());
        std::thread::spawn(move || writer(d, "one", 700, m))
    };
    let w2 = {
        let (d, m) = (second.join("shared"), made.clone());
        std::thread::spawn(move || writer(d, "two", 700, m))
    };
    w1.join().expect("writer on the first mount");
    w2.join().expect("writer on the second mount");
    stop.store(true, Ordering::Release);
    let listings = list.join().expect("lister");
    assert!(listings > 0, "no listing ran");

    // It split by itself, over 3 MDTs.
    assert_eq!(stripe_count(&shared), 3, "auto-split");
    let mdts: HashSet<String> = loom_ok(&["getdirstripe", &s(&shared)])
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert_eq!(mdts.len(), 3, "shards on 3 MDTs: {mdts:?}");
    let df = loom_ok(&["df", "-i", &s(&c.mnt)]);
    assert!(df.contains("restriped_dirs"), "counters:\n{df}");

    // Every file, once, with its bytes, from both mounts and for nobody.
    let want = made.lock().expect("lock").clone();
    assert_eq!(want.len(), 1400);
    for root in [&c.mnt, &second] {
        let dir = root.join("shared");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .expect("readdir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
            .collect();
        let set: HashSet<String> = names.iter().cloned().collect();
        assert_eq!(names.len(), set.len(), "duplicates in {}", dir.display());
        assert_eq!(set, want, "listing of {}", dir.display());
        for n in ["one0", "one699", "two350", "two699"] {
            assert_eq!(
                std::fs::read_to_string(dir.join(n)).expect("read"),
                format!("{n}\n")
            );
        }
    }
    let out = as_nobody(&[
        "sh",
        "-c",
        &format!("ls {0} | wc -l; cat {0}/one5", s(&shared)),
    ]);
    assert!(out.status.success(), "nobody: {out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1400\none5\n");

    // `loom migrate -c`: another directory restriped by hand, from MDT0
    // to MDTs 1, 2, 0, while a mount creates in it.
    // Its files' striping comes from above it: its shards must keep it.
    let wide = c.path("wide");
    loom_ok(&["mkdir", "-i", "0", &s(&wide)]);
    let manual = wide.join("manual");
    loom_ok(&["mkdir", "-i", "0", &s(&manual)]);
    // Set above it after it was made: inherited, not copied into it.
    loom_ok(&["setstripe", "-c", "2", &s(&wide)]);
    let made2 = Arc::new(Mutex::new(HashSet::new()));
    writer(manual.clone(), "a", 150, made2.clone());
    let w = {
        let (d, m) = (second.join("wide/manual"), made2.clone());
        std::thread::spawn(move || writer(d, "b", 250, m))
    };
    let out = loom_ok(&["migrate", "-c", "3", "-m", "1,2,0", &s(&manual)]);
    assert!(out.contains("striped over MDTs [1, 2, 0]"), "{out}");
    w.join().expect("writer during the restripe");
    assert_eq!(stripe_count(&manual), 3);
    assert_eq!(mdt_of(&manual), 1, "the master moved to MDT1 first");
    let names: HashSet<String> = std::fs::read_dir(&manual)
        .expect("readdir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(names, *made2.lock().expect("lock"));
    assert_eq!(names.len(), 400);
    for i in 0..12 {
        let f = manual.join(format!("late{i}"));
        std::fs::write(&f, b"x").expect("create after the restripe");
        let count = loom_ok(&["getstripe", "-c", &s(&f)]);
        assert_eq!(
            count.trim(),
            "2",
            "striping of {} (MDT {})",
            f.display(),
            mdt_of(&f)
        );
    }
    let out = as_nobody(&[
        &s(&loom_bin()),
        "migrate",
        "-c",
        "2",
        "-m",
        "0,1",
        &s(&shared),
    ]);
    assert!(!out.status.success(), "nobody may not restripe");

    let (code, report) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 0, "fsck after the splits:\n{report}");
}
