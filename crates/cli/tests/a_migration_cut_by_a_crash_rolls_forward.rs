//! Issue #10 point 3: `loom migrate` is crash-safe and resumable. At each
//! crash point of moving a directory (the coordinator once its intent is
//! logged and once the target adopted the inodes, the target while
//! adopting them), that MDT dies as by kill -9 and starts again; the
//! interrupted directory is rolled forward by the coordinator's resolver,
//! a second `loom migrate` finishes the tree, nothing is lost or doubled,
//! and `loom fsck` is clean.
mod common;
use common::*;
use std::path::Path;

fn s(p: &Path) -> String {
    p.to_str().expect("utf-8").to_string()
}

fn sums(dir: &Path) -> String {
    sh(&format!(
        "cd {} && find . -printf '%p %y %m %s\\n' | sort && find . -type f -print0 | sort -z | xargs -0 md5sum",
        s(dir)
    ))
}

#[test]
fn a_migration_cut_by_a_crash_rolls_forward() {
    let c = Cluster::up(2, 1, &[]);
    // Servers this test started again (the first time, `loom up`'s is
    // killed instead).
    let mut started: std::collections::HashMap<&str, Server> = Default::default();
    for (k, (server, point)) in [
        ("mdt0", "migrate:logged"),
        ("mdt0", "migrate:adopted"),
        ("mdt1", "adopt_inodes"),
    ]
    .into_iter()
    .enumerate()
    {
        let tree = c.path(&format!("t{k}"));
        loom_ok(&["mkdir", "-i", "0", &s(&tree)]);
        loom_ok(&["setdirstripe", "-D", "-i", "0", &s(&tree)]);
        sh(&format!(
            "set -e; cd {}; for d in a b c; do mkdir -p $d/sub; for i in $(seq 1 30); do echo $d$i > $d/f$i; done; \
             echo deep > $d/sub/leaf; done; setfattr -n user.k -v v{k} a/f1",
            s(&tree)
        ));
        let before = sums(&tree);
        let counts = inodes_per_mdt(&c.mnt);

        match started.remove(server) {
            // Dropping it kills it and waits.
            Some(s) => drop(s),
            None => c.kill9(server),
        }
        let mut armed = c.start_armed(server, point, k as u32);
        // The run meets the crash; whether it ends in an error or its
        // resend is answered, a second run must finish the tree.
        let run = std::process::Command::new(loom_bin())
            .args(["migrate", "-q", "-m", "1"])
            .arg(&tree)
            .spawn()
            .expect("loom migrate");
        let status = armed.0.wait().expect("wait for the armed server");
        assert!(!status.success(), "{server} did not crash at {point}");
        started.insert(server, c.start_armed(server, "", 100 + k as u32));
        let first = within(move || {
            let mut run = run;
            run.wait().expect("wait for loom migrate")
        })
        .expect("loom migrate hung after the restart");
        let again = loom_ok(&["migrate", "-m", "1", &s(&tree)]);
        assert!(again.contains("inodes moved"), "second run: {again}");

        for rel in ["", "a", "a/f1", "b/f30", "c/sub", "c/sub/leaf"] {
            assert_eq!(
                mdt_of(&tree.join(rel)),
                1,
                "after a crash at {point} (first run {first}): MDT of {rel}"
            );
        }
        assert_eq!(sums(&tree), before, "after a crash at {point}");
        assert_eq!(
            sh(&format!(
                "getfattr --only-values -n user.k {}",
                s(&tree.join("a/f1"))
            )),
            format!("v{k}")
        );
        let now = inodes_per_mdt(&c.mnt);
        let moved = counts[0] - now[0];
        assert_eq!(
            now[1] - counts[1],
            moved,
            "after a crash at {point}: inodes per MDT {counts:?} -> {now:?}"
        );
        assert_eq!(moved, 1 + 3 * (1 + 30 + 1 + 1), "inodes moved");
        let (code, report) = fsck(&c, &["--min-age", "0"]);
        assert_eq!(code, 0, "fsck after a crash at {point}:\n{report}");
    }
}
