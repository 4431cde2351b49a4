//! The changelog across crashes (issue #28): MDTs are killed with -9 at
//! random moments while workers create, rename, chmod and unlink, with
//! commits held 300 ms so that each kill loses applied changes that the
//! clients then replay. Afterwards each MDT's changelog holds exactly the
//! changes the workers were answered, in the order they made them, once
//! each, with their callers; record numbers have no gap or repeat. The
//! quota counts, moved in the same commits, match a recount and a walk.
mod common;
use common::*;
use loom_proto::Fid;
use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Child;
use std::time::Duration;

/// A worker: `ops` random changes in DIR; once each is answered, the
/// record it must leave (type, name, rename's old name) is noted. At the
/// end, the notes as JSON on standard output.
const WORKER: &str = r#"
import json, os, random, sys
d, seed, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
files, done = [], []
for i in range(ops):
    r = rnd.random()
    if r < 0.4 or not files:
        n = "f%d" % i
        fd = os.open(os.path.join(d, n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.close(fd)
        files.append(n)
        done.append(["CREAT", n, None])
    elif r < 0.6:
        old = files.pop(rnd.randrange(len(files)))
        n = "r%d" % i
        os.rename(os.path.join(d, old), os.path.join(d, n))
        files.append(n)
        done.append(["RENME", n, old])
    elif r < 0.8:
        n = rnd.choice(files)
        os.chmod(os.path.join(d, n), rnd.choice([0o600, 0o640, 0o604]))
        done.append(["SATTR", None, None])
    else:
        n = files.pop(rnd.randrange(len(files)))
        os.unlink(os.path.join(d, n))
        done.append(["UNLNK", n, None])
json.dump(done, sys.stdout)
"#;

fn start_worker(dir: &Path, seed: u32, ops: u32, nobody: bool) -> Child {
    let mut cmd = python3(nobody);
    cmd.arg("-c")
        .arg(WORKER)
        .arg(dir)
        .arg(seed.to_string())
        .arg(ops.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3")
}

#[test]
fn mdt_kill9_loops_keep_exactly_the_acknowledged_changes_in_the_changelog() {
    let mut c = Cluster::up(
        2,
        2,
        &["--recovery-window", "60", "--commit-interval-ms", "300"],
    );
    let other = c.second_mount("mnt2");
    // Worker directories, made before a consumer registers: two on MDT0
    // (one open to all, for an unprivileged worker on the second mount),
    // one on MDT1.
    for w in ["w0", "w1"] {
        std::fs::create_dir(c.path(w)).expect("mkdir");
    }
    std::fs::set_permissions(c.path("w1"), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    loom_ok(&["mkdir", "-i", "1", c.path("w2").to_str().expect("path")]);
    assert_eq!(mdt_of(&c.path("w2")), 1);
    let mnt = c.mnt.to_str().expect("utf-8").to_string();
    loom_ok(&["changelog", "register", &mnt]);
    // Each mount's first change on an MDT waits for its commit: make it
    // before the kills (it is recorded; the checks below look at the
    // workers' directories only).
    for w in ["w0", "w2"] {
        std::fs::write(c.path(&format!("{w}/first")), b"").expect("first change");
    }
    std::fs::write(other.join("w1/first"), b"").expect("first change");
    // Markers: one change on each victim just before its kill, so that
    // every kill finds at least one not committed (commits are held
    // 300 ms) whether or not a worker was between changes.
    std::fs::create_dir(c.path("m0")).expect("mkdir m0");
    loom_ok(&["mkdir", "-i", "1", c.path("m1").to_str().expect("path")]);
    let mut markers = Vec::new();

    let mut workers = vec![
        (0u64, "w0", start_worker(&c.path("w0"), 7, 4000, false)),
        (65534, "w1", start_worker(&other.join("w1"), 8, 4000, true)),
        (0, "w2", start_worker(&c.path("w2"), 9, 4000, false)),
    ];
    for round in 0..3 {
        // A random moment while the workers run (not a synchronisation:
        // the kill may land anywhere).
        std::thread::sleep(Duration::from_millis(200 + rand::random::<u64>() % 500));
        let victims: &[&str] = match round {
            0 => &["mdt0"],
            1 => &["mdt1"],
            _ => &["mdt0", "mdt1"],
        };
        // The kills are to land in the middle of the workload.
        for (_, dir, w) in workers.iter_mut() {
            let running = w.try_wait().expect("try_wait").is_none();
            assert!(running, "the worker in {dir} ended before kill {round}");
        }
        for v in victims {
            let name = format!("round{round}");
            std::fs::write(c.path(&format!("m{}/{name}", &v[3..])), b"").expect("marker");
            markers.push((v[3..].parse::<u64>().expect("MDT index"), name));
        }
        for v in victims {
            c.kill9_latest(v);
        }
        for v in victims {
            c.restart(v);
        }
    }
    let mut done = Vec::new();
    for (uid, dir, child) in workers {
        let out = child.wait_with_output().expect("wait worker");
        assert!(out.status.success(), "worker in {dir}: {}", out.status);
        let v: Vec<Value> = serde_json::from_slice(&out.stdout).expect("worker JSON");
        done.push((uid, dir, v));
    }
    assert!(replayed_in_logs(&c) > 0, "no kill found a change to replay");

    let all = changelog_records(&c, &[]);
    assert_numbered_from_one(&all, &[0, 1]);
    // Each marker, acknowledged and not committed when its MDT was
    // killed, is recorded once (the client replayed it).
    for (mdt, name) in &markers {
        let n = all
            .iter()
            .filter(|r| r["mdt"] == *mdt && r["type"] == "CREAT" && r["name"] == name.as_str())
            .count();
        assert_eq!(n, 1, "CREAT records of marker {name} on MDT{mdt}");
    }
    for (uid, dir, want) in done {
        let fid = Fid::from_ino(std::fs::metadata(c.path(dir)).expect("stat").ino()).to_string();
        let mine: Vec<&Value> = all
            .iter()
            .filter(|r| {
                r["type"] != "CLOSE" && r["uid"].as_u64() == Some(uid) && {
                    // Names in the directory, and attribute changes of
                    // its files.
                    r["parent"].as_str() == Some(fid.as_str())
                }
            })
            .filter(|r| r["name"] != "first")
            .collect();
        let got: Vec<Value> = mine
            .iter()
            .map(|r| {
                let name = if r["type"] == "SATTR" {
                    Value::Null
                } else {
                    r["name"].clone()
                };
                serde_json::json!([r["type"], name, r["source_name"]])
            })
            .collect();
        if got != want {
            let first = got
                .iter()
                .zip(&want)
                .position(|(g, w)| g != w)
                .unwrap_or(got.len().min(want.len()));
            panic!(
                "{dir}: {} records for {} acknowledged changes; first difference at {first}: \
                 got {:?}, want {:?}",
                got.len(),
                want.len(),
                got.get(first),
                want.get(first)
            );
        }
        assert!(
            mine.iter().all(|r| r["gid"].as_u64() == Some(uid)),
            "{dir}: callers"
        );
    }

    // The quota counts moved in the same commits: each MDT's recount
    // agrees, and the unprivileged worker's inodes are what a walk finds.
    let mnt = c.mnt.to_str().expect("utf-8");
    let check = loom_ok(&["quota", "--check", mnt]);
    assert_eq!(
        check.matches("counts match the inodes").count(),
        2,
        "{check}"
    );
    let owned = std::fs::read_dir(c.path("w1"))
        .expect("readdir")
        .filter(|e| e.as_ref().expect("entry").metadata().expect("stat").uid() == 65534)
        .count() as u64;
    let out = loom_ok(&["quota", "-u", "65534", mnt]);
    let files: u64 = out
        .lines()
        .nth(3)
        .and_then(|l| l.split_whitespace().nth(4))
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("a files figure in {out}"));
    assert_eq!(files, owned, "inodes of uid 65534");
}
