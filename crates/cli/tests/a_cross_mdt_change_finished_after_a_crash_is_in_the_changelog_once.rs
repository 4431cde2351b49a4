//! The changelog across a coordinator's crash (issue #28): an
//! unprivileged user's cross-MDT rename is cut by a crash of the
//! coordinating MDT between two steps (`LOOM_FAIL_AT`); the restarted MDT
//! finishes it from its intent log and the user's resent request gets
//! its answer. It is then recorded exactly once on each MDT it touched,
//! as the user's change under the user's job. A cross-MDT mkdir given up
//! after its parts were made (a failure injected with `LOOM_FAIL_AT`)
//! records the undo of the part that recorded what it made.
mod common;
use common::*;
use std::time::{Duration, Instant};

/// The MDT (by `loom up` name) whose process dies first, of `names`.
fn wait_one_gone(c: &Cluster, names: &[&str]) -> String {
    let pids: Vec<(String, nix::unistd::Pid)> = names
        .iter()
        .map(|n| (n.to_string(), nix::unistd::Pid::from_raw(c.pid(n))))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for (n, pid) in &pids {
            if nix::sys::signal::kill(*pid, None).is_err() {
                return n.clone();
            }
        }
        assert!(Instant::now() < deadline, "no MDT reached its crash point");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Run `code` with python as uid 65534 under job `job`, in the
/// background.
fn as_user(code: &str, job: &str) -> std::process::Child {
    python3(true)
        .env("SLURM_JOB_ID", job)
        .arg("-c")
        .arg(code)
        .spawn()
        .expect("python3")
}

#[test]
fn cross_mdt_changes_cut_by_a_coordinator_crash_are_recorded_once_on_each_mdt() {
    // Every server of the first start is armed; only the coordinator of
    // a cross-MDT rename reaches this point.
    std::env::set_var("LOOM_FAIL_AT", "rename_distributed:target_set");
    let c = Cluster::up(2, 1, &[]);
    std::env::remove_var("LOOM_FAIL_AT");
    let (a, b) = (c.path("a"), c.path("b"));
    std::fs::create_dir(&a).expect("mkdir a");
    loom_ok(&["mkdir", "-i", "1", b.to_str().expect("utf-8")]);
    sh(&format!("chmod 1777 {} {}", a.display(), b.display()));
    assert_eq!((mdt_of(&a), mdt_of(&b)), (0, 1));
    let mnt = c.mnt.to_str().expect("utf-8").to_string();
    loom_ok(&["changelog", "register", &mnt]);
    let (f, g) = (a.join("f"), b.join("g"));
    let made = as_user(
        &format!("open({:?}, 'w').close()", f.display().to_string()),
        "crash-job",
    )
    .wait()
    .expect("create");
    assert!(made.success());

    // The rename: its coordinator dies after the target's name was set on
    // the other MDT, and is started again (without the crash point).
    let mut mv = as_user(
        &format!(
            "import os; os.rename({:?}, {:?})",
            f.display().to_string(),
            g.display().to_string()
        ),
        "crash-job",
    );
    let dead = wait_one_gone(&c, &["mdt0", "mdt1"]);
    let _restarted = c.start_armed(&dead, "", 1);
    assert!(
        mv.wait().expect("wait").success(),
        "the resent rename failed"
    );
    assert!(g.exists() && !f.exists());

    let all = changelog_records(&c, &[]);
    assert_numbered_from_one(&all, &[0, 1]);
    let fid = loom_proto::Fid::from_ino(std::os::unix::fs::MetadataExt::ino(
        &std::fs::metadata(&g).expect("stat g"),
    ))
    .to_string();
    for mdt in [0u64, 1] {
        let renames: Vec<&serde_json::Value> = all
            .iter()
            .filter(|r| r["mdt"] == mdt && r["type"] == "RENME")
            .collect();
        assert_eq!(renames.len(), 1, "MDT{mdt}'s RENME records: {all:#?}");
        let r = renames[0];
        assert_eq!(r["fid"].as_str(), Some(fid.as_str()), "{r}");
        assert_eq!(r["uid"], 65534, "{r}");
        assert_eq!(r["gid"], 65534, "{r}");
        assert_eq!(r["jobid"], "crash-job", "{r}");
    }
    // The MDT that finished the rename names both places.
    let coord = if dead == "mdt0" { 0u64 } else { 1 };
    let r = all
        .iter()
        .find(|r| r["mdt"] == coord && r["type"] == "RENME")
        .expect("the coordinator's record");
    assert_eq!(r["name"], "g", "{r}");
    assert_eq!(r["source_name"], "f", "{r}");
}

#[test]
fn a_cross_mdt_mkdir_given_up_after_its_parts_were_made_records_their_undo() {
    let c = Cluster::up(2, 1, &[]);
    let d = c.open_dir("d");
    // New directories of `d` (on MDT0) are striped over both MDTs, their
    // master on MDT1: MDT1 records the master it makes.
    loom_ok(&[
        "setdirstripe",
        "-D",
        "-c",
        "2",
        "-i",
        "1",
        d.to_str().expect("utf-8"),
    ]);
    let mnt = c.mnt.to_str().expect("utf-8").to_string();
    loom_ok(&["changelog", "register", &mnt]);
    // MDT0, the coordinator, fails once every part is made.
    c.kill9("mdt0");
    let _armed = c.start_armed("mdt0", "mkdir_striped:parts_made:error", 1);
    let s = d.join("s");
    let o = python3(true)
        .arg("-c")
        .arg(format!(
            "import os\ntry:\n    os.mkdir({:?})\n    print(0)\nexcept OSError as e:\n    print(e.errno)",
            s.display().to_string()
        ))
        .output()
        .expect("python3");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "5", "EIO");
    assert!(!s.exists(), "the given-up mkdir left nothing");
    let all = changelog_records(&c, &[]);
    assert_numbered_from_one(&all, &[0, 1]);
    let on = |mdt: u64, kind: &str| -> Vec<&serde_json::Value> {
        all.iter()
            .filter(|r| r["mdt"] == mdt && r["type"] == kind)
            .collect()
    };
    let (made, undone) = (on(1, "MKDIR"), on(1, "RMDIR"));
    assert_eq!((made.len(), undone.len()), (1, 1), "{all:#?}");
    assert_eq!(made[0]["fid"], undone[0]["fid"], "{all:#?}");
    assert!(made[0]["index"].as_u64() < undone[0]["index"].as_u64());
    for r in [made[0], undone[0]] {
        assert_eq!(r["uid"], 65534, "{r}");
    }
    // MDT0 made only a shard (an inner object) and no name: nothing.
    assert!(
        on(0, "MKDIR").is_empty() && on(0, "RMDIR").is_empty(),
        "{all:#?}"
    );
}
