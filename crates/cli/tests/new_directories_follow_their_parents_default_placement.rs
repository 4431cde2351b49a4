//! Issue #10, point 2: placement by default. `loom setdirstripe -D` sets
//! where a directory's new subdirectories go, inherited down the tree:
//! - `-i -1`: round robin over the MDTs (weighted by free inodes and
//!   space; equal here): an mdtest-style tree made through the mount, one
//!   per process (`loom bench md -u -D`), spreads within 10% over 3 MDTs;
//! - `-i a,b`: round robin over those MDTs only;
//! - `-c 2 -i 1`: each new directory striped over MDTs 1 and 2;
//! - `getdirstripe -D` shows the default, on the directory and below it;
//! - an unprivileged user's mkdirs follow it; bad placements are refused
//!   with a reason. (Who may set it, the directory's owner or root, is
//!   tested through the library: the tools need the mount's key.)
//!
//! And point 6: `loom df -i` shows each MDT's operations by type; files
//! made in a directory placed on MDT2 count there, and only there.
mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// Inodes used on each MDT.
fn used(c: &Cluster) -> Vec<u64> {
    inodes_per_mdt(&c.mnt)
}

/// Each MDT's count of creates, from `loom df -i`.
fn creates(c: &Cluster) -> Vec<u64> {
    let out = loom_ok(&["df", "-i", s(&c.mnt)]);
    let lines: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("operations since"))
        .filter(|l| l.contains("-MDT") && l.contains("total="))
        .collect();
    assert_eq!(lines.len(), 3, "{out}");
    lines
        .iter()
        .map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("create="))
                .map_or(0, |n| n.parse().expect("a count"))
        })
        .collect()
}

#[test]
fn new_directories_follow_their_parents_default_placement() {
    let c = Cluster::up(3, 1, &[]);
    let tree = c.path("tree");
    std::fs::create_dir(&tree).expect("mkdir tree");
    loom_ok(&["setdirstripe", "-D", "-i", "-1", s(&tree)]);
    let shown = loom_ok(&["getdirstripe", "-D", s(&tree)]);
    assert!(
        shown.contains("lmv_stripe_count: 1 lmv_stripe_offset: -1"),
        "{shown}"
    );

    // An mdtest-style tree per process, directories only, kept.
    let before = used(&c);
    loom_ok(&[
        "bench",
        "md",
        "-u",
        "-D",
        "-z",
        "2",
        "-b",
        "3",
        "-n",
        "117",
        "-p",
        "3",
        "--keep",
        "--no-progress",
        s(&tree),
    ]);
    let after = used(&c);
    let made: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    let total: u64 = made.iter().sum();
    assert!(total >= 3 * 117, "directories made: {made:?}");
    let mean = total as f64 / 3.0;
    for (m, n) in made.iter().enumerate() {
        assert!(
            (*n as f64 - mean).abs() <= 0.1 * mean,
            "MDT{m} got {n} of {total} new directories: {made:?}"
        );
    }
    // Inherited down the tree: a directory three levels down shows it.
    let deep = c.path("tree/a/b/c");
    std::fs::create_dir_all(&deep).expect("mkdir -p");
    let shown = loom_ok(&["getdirstripe", "-D", s(&deep)]);
    assert!(shown.contains("lmv_stripe_offset: -1"), "{shown}");

    // A list of MDTs: new directories take only those.
    let listed = c.path("listed");
    std::fs::create_dir(&listed).expect("mkdir");
    loom_ok(&["setdirstripe", "-D", "-i", "0,2", s(&listed)]);
    let mut on = [0u32; 3];
    for i in 0..12 {
        let d = listed.join(format!("d{i}"));
        std::fs::create_dir(&d).expect("mkdir");
        on[mdt_of(&d) as usize] += 1;
    }
    assert_eq!(on, [6, 0, 6], "round robin over MDTs 0 and 2");

    // Striped by default: shards on MDTs 1 and 2.
    let wide = c.path("wide");
    std::fs::create_dir(&wide).expect("mkdir");
    loom_ok(&["setdirstripe", "-D", "-c", "2", "-i", "1", s(&wide)]);
    std::fs::create_dir(wide.join("sub")).expect("mkdir");
    let shards = loom_ok(&["getdirstripe", s(&wide.join("sub"))]);
    assert!(
        shards.contains("lmv_stripe_count: 2 lmv_stripe_offset: 1"),
        "{shards}"
    );
    std::fs::write(wide.join("sub/f"), b"x").expect("a file in it");

    // A user's directory: their mkdirs follow its default too.
    let home = c.path("home");
    std::fs::create_dir(&home).expect("mkdir");
    std::os::unix::fs::chown(&home, Some(65534), Some(65534)).expect("chown");
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    loom_ok(&["setdirstripe", "-D", "-i", "2", s(&home)]);
    let o = as_nobody(&["mkdir", "-p", s(&home.join("mine/deeper"))]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        mdt_of(&home.join("mine")),
        2,
        "the user's mkdir followed it"
    );
    assert_eq!(mdt_of(&home.join("mine/deeper")), 2, "and below");

    // Bad placements: refused, with the reason; nothing changes.
    for (args, reason) in [
        (vec!["setdirstripe", "-D", "-i", "7"], "invalid placement"),
        (vec!["setdirstripe", "-D", "-c", "4"], "invalid placement"),
        (
            vec!["setdirstripe", "-D", "-c", "3", "-i", "0,1"],
            "invalid placement",
        ),
        (
            vec!["setdirstripe", "-D", "-i", "0,-1"],
            "cannot be part of a list",
        ),
        (vec!["setdirstripe", "-d"], "use it with -D"),
        (vec!["mkdir", "-i", "-1"], "for -D defaults"),
        (vec!["mkdir", "-i", "0,1"], "for -D defaults"),
    ] {
        let mut full = args.clone();
        full.push(s(&listed));
        let o = loom(&full);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(reason),
            "{args:?}: {err}"
        );
    }
    let shown = loom_ok(&["getdirstripe", "-D", s(&listed)]);
    assert!(shown.contains("lmv_stripe_offset: 0,2"), "{shown}");
    // Operations per MDT: 7 creates in a directory on MDT2.
    let before = creates(&c);
    for i in 0..7 {
        std::fs::write(home.join(format!("mine/f{i}")), b"x").expect("create");
    }
    let after = creates(&c);
    assert_eq!(after[2] - before[2], 7, "{before:?} -> {after:?}");
    assert_eq!((after[0], after[1]), (before[0], before[1]), "elsewhere");

    // A directory placed on another MDT is leased whole to the mount that
    // made it, as a local one is: a lookup of a name it lacks (the one
    // before every create) needs no MDT.
    let absent = home.join("mine/not-there.h");
    let _mdt2 = Stopped::new(c.pid("mdt2"));
    let seen = within(move || absent.exists()).expect("the lookup went to the stopped MDT2");
    assert!(!seen);
    drop(_mdt2);

    // Removed: new directories stay on their parent's MDT again.
    loom_ok(&["setdirstripe", "-D", "-d", s(&listed)]);
    let here = mdt_of(&listed);
    for i in 0..4 {
        let d = listed.join(format!("after{i}"));
        std::fs::create_dir(&d).expect("mkdir");
        assert_eq!(mdt_of(&d), here);
    }
}
