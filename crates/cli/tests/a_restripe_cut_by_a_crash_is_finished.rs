//! Issue #10 points 3 and 4: restriping a directory is crash-safe. At each
//! crash point (the coordinator once the shards are made and once the
//! entries are put in them, the shard's MDT while it takes them) that MDT
//! dies as by kill -9 and starts again; the restripe is finished by the
//! coordinator's resolver; every entry is listed once, every file reads
//! back, and `loom fsck` is clean.
mod common;
use common::*;
use std::collections::HashSet;
use std::path::Path;

fn s(p: &Path) -> String {
    p.to_str().expect("utf-8").to_string()
}

#[test]
fn a_restripe_cut_by_a_crash_is_finished() {
    let c = Cluster::up(2, 1, &[]);
    let mut started: std::collections::HashMap<&str, Server> = Default::default();
    for (k, (server, point)) in [
        ("mdt0", "restripe:shards_made"),
        ("mdt0", "restripe:entries_put"),
        ("mdt1", "put_entries"),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = c.path(&format!("r{k}"));
        loom_ok(&["mkdir", "-i", "0", &s(&dir)]);
        sh(&format!(
            "set -e; cd {}; for i in $(seq 1 120); do echo f$i > f$i; done; mkdir -p sub/deeper; echo x > sub/deeper/leaf",
            s(&dir)
        ));
        match started.remove(server) {
            Some(s) => drop(s),
            None => c.kill9(server),
        }
        let mut armed = c.start_armed(server, point, k as u32);
        let run = std::process::Command::new(loom_bin())
            .args(["migrate", "-q", "-c", "2", "-m", "0,1"])
            .arg(&dir)
            .spawn()
            .expect("loom migrate -c");
        let status = armed.0.wait().expect("wait for the armed server");
        assert!(!status.success(), "{server} did not crash at {point}");
        started.insert(server, c.start_armed(server, "", 100 + k as u32));
        within(move || {
            let mut run = run;
            run.wait().expect("wait for loom migrate")
        })
        .expect("loom migrate hung after the restart");
        // A change waits until the coordinator resolved its intents.
        sh(&format!("echo new > {}/after", s(&dir)));

        let count: u32 = loom_ok(&["getdirstripe", "-c", &s(&dir)])
            .trim()
            .parse()
            .expect("count");
        assert_eq!(count, 2, "after a crash at {point}: striped");
        let names: Vec<String> = std::fs::read_dir(&dir)
            .expect("readdir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
            .collect();
        let set: HashSet<&String> = names.iter().collect();
        assert_eq!(
            set.len(),
            names.len(),
            "after a crash at {point}: duplicates"
        );
        assert_eq!(names.len(), 122, "after a crash at {point}: {names:?}");
        for i in [1, 60, 120] {
            assert_eq!(
                std::fs::read_to_string(dir.join(format!("f{i}"))).expect("read"),
                format!("f{i}\n")
            );
        }
        assert_eq!(
            std::fs::read_to_string(dir.join("sub/deeper/leaf")).expect("read"),
            "x\n"
        );
        let (code, report) = fsck(&c, &["--min-age", "0"]);
        assert_eq!(code, 0, "fsck after a crash at {point}:\n{report}");
    }
}
