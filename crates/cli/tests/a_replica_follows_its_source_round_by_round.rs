//! Replication by policy (issue #30, point 5): `loom replicate run`
//! keeps a tree of one cluster on another by snapshots and incremental
//! sends. Changes younger than `--min-age` wait; each round sends only
//! what changed; `--verify` compares checksums and catches a replica
//! changed behind its back; `status` shows lag, bytes and the last
//! verified point; the source's older snapshots go; the replica is read
//! read-only through its snapshots.
mod common;
use common::*;
use std::path::Path;
use std::process::Command;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// `loom replicate run SRC DST --once ARGS`: success and what it said.
fn round(src: &Path, dst: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new(loom_bin())
        .args(["replicate", "run", s(src), s(dst), "--once"])
        .args(args)
        .output()
        .expect("loom replicate");
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn snapshots(mnt: &Path) -> Vec<String> {
    loom_ok(&["snapshot", "list", s(mnt)])
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn a_replica_follows_its_source_round_by_round() {
    let a = Cluster::up(2, 2, &[]);
    let b = Cluster::up(1, 2, &[]);
    let src = a.mnt.join("proj");
    std::fs::create_dir(&src).expect("mkdir proj");
    for i in 0..10 {
        std::fs::write(
            src.join(format!("f{i}")),
            format!("file {i}\n").repeat(1000),
        )
        .expect("write");
    }
    std::fs::create_dir(src.join("sub")).expect("mkdir sub");
    std::fs::write(src.join("sub/big"), vec![7u8; 2 << 20]).expect("write big");
    let dst = b.mnt.join("dr");
    std::fs::create_dir(&dst).expect("mkdir dr");

    // The first round takes a snapshot, but it is younger than --min-age.
    let (ok, said) = round(&src, &dst, &["--min-age", "1h"]);
    assert!(ok && said.contains("waiting"), "{said}");
    assert_eq!(std::fs::read_dir(&dst).expect("ls dr").count(), 0);
    let first: Vec<String> = snapshots(&a.mnt);
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(first[0].starts_with("repl-"));
    let st = loom_ok(&["replicate", "status", s(&dst)]);
    assert!(st.contains("nothing received yet"), "{st}");

    // Without the age limit it goes whole, verified.
    let (ok, said) = round(&src, &dst, &["--verify"]);
    assert!(
        ok && said.contains("whole") && said.contains("files match"),
        "{said}"
    );
    assert_eq!(
        sh(&format!("diff -r {} {} && echo same", s(&src), s(&dst))),
        "same\n"
    );
    let st = loom_ok(&["replicate", "status", s(&dst)]);
    assert!(
        st.contains(&format!("holds:          {}", first[0])),
        "{st}"
    );
    assert!(
        st.contains("lag:") && st.contains("last verified:  repl-"),
        "{st}"
    );

    // Changes, and the next snapshot: only they travel.
    std::fs::write(src.join("f3"), b"changed\n").expect("write f3");
    std::fs::remove_file(src.join("f4")).expect("rm f4");
    std::fs::rename(src.join("sub"), src.join("moved")).expect("mv sub");
    loom_ok(&["snapshot", "create", s(&a.mnt), "repl-second"]);
    let (ok, said) = round(&src, &dst, &["--verify"]);
    assert!(
        ok && said.contains(&format!("since {}", first[0])),
        "{said}"
    );
    assert!(said.contains("files match"), "{said}");
    assert_eq!(
        sh(&format!("diff -r {} {} && echo same", s(&src), s(&dst))),
        "same\n"
    );
    let st = loom_ok(&["replicate", "status", s(&dst)]);
    let data_line = st
        .lines()
        .find(|l| l.starts_with("last round:"))
        .expect("last round");
    assert!(
        !data_line.contains("M of data"),
        "a 2 MiB file renamed is not sent again: {data_line}"
    );
    // The source keeps only the base of the next increment.
    assert_eq!(snapshots(&a.mnt), vec!["repl-second"]);
    // The replica reads read-only through its snapshots.
    let held = b.mnt.join(".snapshots/repl-second/dr/f3");
    assert_eq!(
        std::fs::read(&held).expect("read the replica's snapshot"),
        b"changed\n"
    );

    // A replica changed behind its back fails verification, and says so.
    std::fs::write(dst.join("f5"), b"tampered\n").expect("tamper");
    std::fs::write(src.join("f6"), b"six\n").expect("write f6");
    loom_ok(&["snapshot", "create", s(&a.mnt), "repl-third"]);
    let (ok, said) = round(&src, &dst, &["--verify"]);
    assert!(!ok && said.contains("/f5"), "{said}");
    let st = loom_ok(&["replicate", "status", s(&dst)]);
    assert!(st.contains("VERIFY FAILED"), "{st}");

    // Bad arguments.
    let (ok, said) = round(&src, &dst, &["--every", "3w"]);
    assert!(!ok && said.contains("unit"), "{said}");
    let (ok, said) = round(&src, &dst, &["--keep", "0"]);
    assert!(!ok && said.contains("--keep"), "{said}");
}
