//! DNE through the mount: `loom mkdir -i` puts a directory (and what is
//! made in it) on the MDT asked for; `loom setdirstripe -c` spreads one
//! directory's names over MDTs by name hash, and the directory still lists,
//! reads, and removes as one; rename and link cross MDTs (in full in
//! `renames_and_links_across_mdts_follow_posix`); removals of non-empty
//! remote or striped directories are refused; bad placements are clear
//! errors.
mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};

#[test]
fn remote_and_striped_directories_spread_names_over_mdts() {
    // Directories are made by `loom` beside the mount: its kernel must not
    // answer stat from attributes cached before.
    let c = Cluster::up(4, 2, &["--attr-timeout", "0"]);
    let p = |rel: &str| c.path(rel);
    let s = |rel: &str| p(rel).to_str().expect("utf-8").to_string();
    assert_eq!(inodes_per_mdt(&c.mnt), vec![1, 0, 0, 0], "only the root");

    // Remote directories: the directory and everything made in it live on
    // the MDT asked for.
    loom_ok(&["mkdir", "-i", "2", &s("r2")]);
    loom_ok(&["mkdir", "--mdt-index", "3", &s("r3"), &s("r3b")]);
    assert_eq!(loom_ok(&["getdirstripe", "-i", &s("r2")]).trim(), "2");
    assert_eq!(loom_ok(&["getdirstripe", "-c", &s("r2")]).trim(), "0");
    assert_eq!(
        (mdt_of(&p("r2")), mdt_of(&p("r3")), mdt_of(&p("r3b"))),
        (2, 3, 3)
    );
    std::fs::create_dir(p("r2/sub")).expect("mkdir in a remote dir");
    std::fs::write(p("r2/sub/file"), b"remote bytes").expect("write");
    assert_eq!((mdt_of(&p("r2/sub")), mdt_of(&p("r2/sub/file"))), (2, 2));
    assert_eq!(
        std::fs::read(p("r2/sub/file")).expect("read"),
        b"remote bytes"
    );
    // The root (MDT0) counts its remote subdirectories as links.
    assert_eq!(
        sh(&format!("stat -c %h {}", c.mnt.display())).trim(),
        "5",
        "root nlink: 2 + r2, r3, r3b"
    );

    // A striped directory: shards on MDTs 1, 2, 3; names spread by hash.
    loom_ok(&["setdirstripe", "-c", "3", "-i", "1", &s("wide")]);
    let shown = loom_ok(&["getdirstripe", &s("wide")]);
    assert!(
        shown.starts_with("lmv_stripe_count: 3 lmv_stripe_offset: 1"),
        "{shown}"
    );
    let shard_mdts: Vec<u32> = shown
        .lines()
        .skip_while(|l| !l.starts_with("mdtidx"))
        .skip(1)
        .map(|l| {
            l.split_whitespace()
                .next()
                .expect("idx")
                .parse()
                .expect("n")
        })
        .collect();
    assert_eq!(shard_mdts, vec![1, 2, 3], "{shown}");
    let names: Vec<String> = (0..300).map(|i| format!("f{i:03}")).collect();
    for n in &names {
        std::fs::write(p(&format!("wide/{n}")), n.as_bytes()).expect("create in striped dir");
    }
    for i in 0..6 {
        std::fs::create_dir(p(&format!("wide/d{i}"))).expect("mkdir in striped dir");
        std::fs::write(p(&format!("wide/d{i}/inner")), b"x").expect("file in subdir");
    }
    let mut per_mdt: BTreeMap<u32, usize> = BTreeMap::new();
    for n in &names {
        *per_mdt.entry(mdt_of(&p(&format!("wide/{n}")))).or_default() += 1;
    }
    assert_eq!(
        per_mdt.keys().copied().collect::<Vec<_>>(),
        vec![1, 2, 3],
        "{per_mdt:?}"
    );
    assert!(
        per_mdt.values().all(|n| *n >= 60),
        "uneven spread: {per_mdt:?}"
    );
    // A subdirectory lives with its shard, and its files with it.
    for i in 0..6 {
        let d = p(&format!("wide/d{i}"));
        assert_eq!(mdt_of(&d.join("inner")), mdt_of(&d));
    }

    // Listing merges the shards: every name exactly once, from ls and find
    // (readdir resumes across pages and shards by cookie).
    let listed: Vec<String> = std::fs::read_dir(p("wide"))
        .expect("readdir")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    let unique: BTreeSet<&String> = listed.iter().collect();
    assert_eq!(listed.len(), 306, "duplicates or misses");
    assert_eq!(unique.len(), 306);
    assert!(names.iter().all(|n| unique.contains(n)));
    let found = sh(&format!("find {} -type f | wc -l", s("wide")));
    assert_eq!(found.trim(), "306", "find walks the shards' subdirectories");
    for n in names.iter().step_by(37) {
        assert_eq!(
            std::fs::read(p(&format!("wide/{n}"))).expect("read"),
            n.as_bytes()
        );
    }

    // Striped and remote directories that are not empty stay.
    for d in ["wide", "r2"] {
        let e = std::fs::remove_dir(p(d)).expect_err("not empty");
        assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY), "{d}: {e}");
    }

    // Across MDTs: rename(2), link(2) and mv move names, not data.
    let on = |mdt: u32| {
        names
            .iter()
            .skip(2)
            .find(|n| mdt_of(&p(&format!("wide/{n}"))) == mdt)
            .expect("a name on that MDT")
            .clone()
    };
    let (elsewhere, on3) = (on(1), on(3));
    std::fs::rename(p(&format!("wide/{elsewhere}")), p("r3/x")).expect("rename across MDTs");
    assert_eq!(mdt_of(&p("r3/x")), 1, "the inode stays where it was");
    std::fs::rename(p(&format!("wide/{on3}")), p("r3/same-mdt")).expect("rename on one MDT");
    assert_eq!(
        std::fs::read(p("r3/same-mdt")).expect("read"),
        on3.as_bytes()
    );
    std::fs::hard_link(p("r2/sub/file"), p("r3/link")).expect("link across MDTs");
    assert_eq!(std::fs::read(p("r3/link")).expect("read"), b"remote bytes");
    std::fs::remove_file(p("r3/link")).expect("unlink the remote name");
    sh(&format!("mv {} {}", s("r3/x"), s("r3/moved")));
    assert_eq!(
        std::fs::read(p("r3/moved")).expect("moved"),
        elsewhere.as_bytes()
    );
    assert!(!p(&format!("wide/{elsewhere}")).exists());
    // A remote directory can be renamed within its parent.
    std::fs::rename(p("r2/sub/file"), p("r2/file2")).expect("rename in a remote dir");
    std::fs::rename(p("r3b"), p("r3c")).expect("rename a remote dir in place");
    assert_eq!(mdt_of(&p("r3c")), 3);

    // Bad placements are clear errors and make nothing.
    let bad = loom(&["mkdir", "-i", "9", &s("nowhere")]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("MDT index 9") || err.contains("invalid placement"),
        "{err}"
    );
    let bad = loom(&["setdirstripe", "-c", "5", &s("toowide")]);
    assert!(!bad.status.success(), "5 shards on 4 MDTs");
    assert!(!p("nowhere").exists() && !p("toowide").exists());
    let bad = loom(&["mkdir", "-i", "1", &s("r2")]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("File exists"));

    // Everything removes, and every MDT is back to what it held at first.
    sh(&format!(
        "rm -rf {} {} {} {}",
        s("wide"),
        s("r2"),
        s("r3"),
        s("r3c")
    ));
    assert_eq!(std::fs::read_dir(&c.mnt).expect("root").count(), 0);
    assert_eq!(
        inodes_per_mdt(&c.mnt),
        vec![1, 0, 0, 0],
        "objects left behind"
    );
}
