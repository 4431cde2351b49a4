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
        let status = within(move || {
            let mut run = run;
            run.wait().expect("wait for loom migrate")
        })
        .expect("loom migrate hung after the restart");
        assert!(
            status.success(),
            "after a crash at {point}: loom migrate failed"
        );
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

/// The restripe's resend after the coordinator's restart is not started
/// over beside the one its resolver finishes. The restarted coordinator's
/// resolver is held up (`resolve:delay`) while the `loom migrate -c` whose
/// answer the crash cut resends its request. The resend used to run at
/// once (a restripe is not answered from the reply cache), make a second
/// set of shards and move the entries there: the first shard was left
/// with no name and its 60 entries named twice (seen once in the suite,
/// where nothing held the resolver up). Now a change waits for the
/// resolver, and a restripe of a directory striped so is answered done.
#[test]
fn a_restripe_resent_after_the_crash_is_not_done_twice() {
    let c = Cluster::up(2, 1, &[]);
    let dir = c.path("r");
    loom_ok(&["mkdir", "-i", "0", &s(&dir)]);
    sh(&format!(
        "set -e; cd {}; for i in $(seq 1 120); do echo f$i > f$i; done",
        s(&dir)
    ));
    c.kill9("mdt0");
    let mut armed = c.start_armed("mdt0", "restripe:entries_put", 1);
    let run = std::process::Command::new(loom_bin())
        .args(["migrate", "-q", "-c", "2", "-m", "0,1"])
        .arg(&dir)
        .spawn()
        .expect("loom migrate -c");
    let status = armed.0.wait().expect("wait for the armed server");
    assert!(
        !status.success(),
        "mdt0 did not crash at restripe:entries_put"
    );
    let _mdt0 = c.start_armed("mdt0", "resolve:delay", 2);
    let status = within(move || {
        let mut run = run;
        run.wait().expect("wait for loom migrate")
    })
    .expect("loom migrate hung after the restart");
    assert!(status.success(), "the resent restripe is answered as done");
    sh(&format!("echo new > {}/after", s(&dir)));
    let count: u32 = loom_ok(&["getdirstripe", "-c", &s(&dir)])
        .trim()
        .parse()
        .expect("count");
    assert_eq!(count, 2, "striped");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .expect("readdir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(
        names.iter().collect::<HashSet<_>>().len(),
        names.len(),
        "duplicates"
    );
    assert_eq!(names.len(), 121, "{names:?}");
    let (code, report) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 0, "fsck:\n{report}");
}
