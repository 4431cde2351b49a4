//! Replies before commit (issue #8, point 3): an MDT answers a change
//! before it is on disk, and the clients replay what it had not committed
//! when it restarts.
//!
//! - kill -9 of MDTs at random moments while clients (two mounts, two
//!   workers each, one of them in a directory made on the other MDT by a
//!   cross-MDT mkdir, and one an unprivileged user) create and write,
//!   mkdir, rename, chmod and unlink, each worker
//!   keeping the list of what it was answered: after the restarts the
//!   namespace holds exactly that, seen from both mounts, and the MDTs'
//!   logs show changes were replayed.
//! - kill -9 of a client (a mount process) and the MDT together after an
//!   fsync, with commits held 30 s so that only what the client's fsyncs
//!   (of files and directories) and O_SYNC/O_DSYNC writes forced is on
//!   disk: what was fsync'd is intact; the restarted MDT waits for the
//!   dead client only for its recovery window, evicts it, and the other
//!   client, which replayed, carries on.
mod common;
use common::*;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

/// A worker: `ops` random namespace changes in DIR, each recorded once the
/// file system answered it; at the end, the state it expects, as JSON on
/// standard output.
const WORKER: &str = r#"
import json, os, random, sys
d, seed, ops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
files, dirs = {}, set()
for i in range(ops):
    r = rnd.random()
    if r < 0.4 or not files:
        n = "f%d" % i
        fd = os.open(os.path.join(d, n), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        os.write(fd, b"x" * (i % 97))
        os.close(fd)
        files[n] = [0o644, i % 97]
    elif r < 0.55:
        n = "d%d" % i
        os.mkdir(os.path.join(d, n), 0o755)
        dirs.add(n)
    elif r < 0.7:
        old = rnd.choice(sorted(files))
        n = "r%d" % i
        os.rename(os.path.join(d, old), os.path.join(d, n))
        files[n] = files.pop(old)
    elif r < 0.85:
        n = rnd.choice(sorted(files))
        m = rnd.choice([0o600, 0o640, 0o604, 0o700, 0o755])
        os.chmod(os.path.join(d, n), m)
        files[n][0] = m
    else:
        n = rnd.choice(sorted(files))
        os.unlink(os.path.join(d, n))
        del files[n]
json.dump({"files": files, "dirs": sorted(dirs)}, sys.stdout)
"#;

/// Start a worker in `dir`, as root or (`nobody`) as uid/gid 65534.
fn start_worker(dir: &Path, seed: u32, ops: u32, nobody: bool) -> Child {
    let mut cmd = if nobody {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            // The system's: a per-user install (pyenv) may be closed to
            // other users.
            "/usr/bin/python3",
        ]);
        c
    } else {
        Command::new("python3")
    };
    cmd.arg("-c")
        .arg(WORKER)
        .arg(dir)
        .arg(seed.to_string())
        .arg(ops.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3")
}

/// What a directory holds: files with their modes and sizes, and
/// subdirectories.
fn listing(dir: &Path) -> (BTreeMap<String, (u32, u64)>, Vec<String>) {
    let mut files = BTreeMap::new();
    let mut dirs = Vec::new();
    for e in std::fs::read_dir(dir).expect("readdir") {
        let e = e.expect("entry");
        let name = e.file_name().to_string_lossy().into_owned();
        let md = std::fs::symlink_metadata(e.path()).expect("stat");
        if md.is_dir() {
            dirs.push(name);
        } else {
            files.insert(name, (md.permissions().mode() & 0o7777, md.len()));
        }
    }
    dirs.sort();
    (files, dirs)
}

fn expected(out: &[u8]) -> (BTreeMap<String, (u32, u64)>, Vec<String>) {
    let v: serde_json::Value = serde_json::from_slice(out).expect("worker output, json");
    let files = v["files"]
        .as_object()
        .expect("files")
        .iter()
        .map(|(k, m)| {
            let mode = m[0].as_u64().expect("mode") as u32;
            (k.clone(), (mode, m[1].as_u64().expect("size")))
        })
        .collect();
    let dirs = v["dirs"]
        .as_array()
        .expect("dirs")
        .iter()
        .map(|d| d.as_str().expect("name").to_string())
        .collect();
    (files, dirs)
}

#[test]
fn kill9_of_mdts_at_random_moments_keeps_exactly_what_was_acknowledged() {
    // Commits held for 300 ms, so that kills find uncommitted changes.
    let mut c = Cluster::up(
        2,
        2,
        &["--recovery-window", "60", "--commit-interval-ms", "300"],
    );
    let other = c.second_mount("mnt2");
    // Worker directories: three on MDT0, one made on MDT1 by a cross-MDT
    // mkdir (committed before its reply; what is made in it is replayed).
    // Worker 1 is an unprivileged user in a directory open to all: its
    // changes are replayed with its credentials.
    for w in 0..3 {
        std::fs::create_dir(c.path(&format!("w{w}"))).expect("mkdir");
    }
    std::fs::set_permissions(c.path("w1"), std::fs::Permissions::from_mode(0o777)).expect("chmod");
    loom_ok(&["mkdir", "-i", "1", c.path("w3").to_str().expect("path")]);
    assert_eq!(mdt_of(&c.path("w3")), 1);
    // Markers: one change on each victim made just before its kill, so
    // that every kill finds at least that one not committed (commits are
    // held 300 ms) whether or not a worker was between changes.
    std::fs::create_dir(c.path("m0")).expect("mkdir m0");
    loom_ok(&["mkdir", "-i", "1", c.path("m1").to_str().expect("path")]);
    assert_eq!(mdt_of(&c.path("m1")), 1);
    // This mount's first change on each MDT registers it there and waits
    // for the commit: make it now, not with a marker.
    for m in ["m0", "m1"] {
        std::fs::write(c.path(&format!("{m}/registered")), b"").expect("first change");
    }
    let mut markers = Vec::new();
    let mut workers = Vec::new();
    for w in 0..4u32 {
        // Two workers on each mount.
        let base = if w % 2 == 0 {
            c.mnt.clone()
        } else {
            other.clone()
        };
        let dir = base.join(format!("w{w}"));
        workers.push(start_worker(&dir, 1000 + w, 1500, w == 1));
    }
    // Three kills, at random moments while the workers run, of MDT0,
    // MDT1, then both.
    let mut restarts = 0;
    for round in 0..3 {
        std::thread::sleep(Duration::from_millis(300 + rand::random::<u64>() % 700));
        let victims: &[&str] = match round {
            0 => &["mdt0"],
            1 => &["mdt1"],
            _ => &["mdt0", "mdt1"],
        };
        for v in victims {
            let m = c.path(&format!("m{}/round{round}", &v[3..]));
            std::fs::write(&m, b"acknowledged").expect("marker");
            markers.push(m);
        }
        for v in victims {
            c.kill9_latest(v);
        }
        for v in victims {
            c.restart(v);
            restarts += 1;
        }
    }
    let mut outs = Vec::new();
    for (w, child) in workers.into_iter().enumerate() {
        let out = child.wait_with_output().expect("wait worker");
        assert!(out.status.success(), "worker {w}: {}", out.status);
        outs.push(out.stdout);
    }
    for (w, out) in outs.iter().enumerate() {
        let want = expected(out);
        let rel = format!("w{w}");
        assert_eq!(
            listing(&c.path(&rel)),
            want,
            "{rel} seen from the first mount"
        );
        assert_eq!(
            listing(&other.join(&rel)),
            want,
            "{rel} seen from the second mount"
        );
    }
    assert_eq!(restarts, 4);
    for m in &markers {
        assert_eq!(
            std::fs::read(m).expect("an acknowledged marker is there"),
            b"acknowledged",
            "{}",
            m.display()
        );
    }
    let owner =
        std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(c.path("w1")).expect("stat w1"));
    assert_eq!(owner, 0);
    for e in std::fs::read_dir(c.path("w1"))
        .expect("readdir w1")
        .flatten()
    {
        let uid = std::os::unix::fs::MetadataExt::uid(&e.metadata().expect("stat"));
        assert_eq!(uid, 65534, "{:?} of the unprivileged worker", e.file_name());
    }
    // How many changes the restarts had to replay is reported, not
    // asserted: kill -9 leaves what the MDT had handed to the operating
    // system (only a power loss drops it), so which acknowledged changes
    // are missing at a restart depends on what its store had written by
    // then; on a loaded machine all four restarts found none (observed).
    // What is asserted above holds either way: exactly what was
    // acknowledged is there.
    let replayed = replayed_in_logs(&c);
    eprintln!("changes replayed over {restarts} restarts: {replayed}");
}

#[test]
fn fsynced_data_survives_kill9_of_its_client_and_the_mdt_together() {
    // Commits are held 30 s: nothing the doomed client did is on the
    // MDT's disk unless what it did (fsync of a file or a directory,
    // O_SYNC and O_DSYNC writes) forced a commit.
    let mut c = Cluster::up(
        1,
        2,
        &["--recovery-window", "3", "--commit-interval-ms", "30000"],
    );
    let doomed = c.second_mount("doomed");
    // The surviving client changes something too, so the MDT waits for it
    // after the restart and it has to replay.
    std::fs::create_dir(c.path("kept")).expect("mkdir");
    let py = format!(
        r#"
import os
d = "{d}"
os.mkdir(os.path.join(d, "safe"))
for i in range(20):
    p = os.path.join(d, "safe", "f%d" % i)
    with open(p, "wb") as f:
        f.write(bytes([i]) * (4096 + i))
        f.flush()
        os.fsync(f.fileno())
for name, flag in (("osync", os.O_SYNC), ("odsync", os.O_DSYNC)):
    fd = os.open(os.path.join(d, "safe", name), os.O_CREAT | os.O_WRONLY | flag, 0o644)
    os.write(fd, name.encode() * 100)
    os.close(fd)
# Changes to names and modes only from here: the last close above handed
# everything before it to the operating system of the MDT, nothing after
# it is on its disk but for the fsync of the directory.
os.rename(os.path.join(d, "safe", "f19"), os.path.join(d, "safe", "renamed"))
os.mkdir(os.path.join(d, "safe", "sub"))
os.chmod(os.path.join(d, "safe", "f0"), 0o600)
fd = os.open(os.path.join(d, "safe"), os.O_RDONLY)
os.fsync(fd)
os.close(fd)
"#,
        d = doomed.display()
    );
    sh(&format!("python3 -c '{py}'"));
    // Directories, not files: a written file's close would hand the
    // doomed client's unsynced changes to the MDT's operating system too.
    for i in 0..10 {
        std::fs::create_dir(c.path(&format!("kept/k{i}"))).expect("mkdir");
    }
    // The mount process and the MDT die together.
    let pid = c
        .extra
        .iter()
        .find(|(_, d)| d.as_deref() == Some(doomed.as_path()))
        .map(|(ch, _)| ch.id())
        .expect("second mount");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill mount");
    c.kill9("mdt0");
    let _ = nix::mount::umount2(&doomed, nix::mount::MntFlags::MNT_DETACH);
    c.restart("mdt0");
    // The first mount replays and goes on; the dead one is evicted when
    // the window ends.
    for i in 0..19 {
        let got = std::fs::read(c.path(&format!("safe/f{i}"))).expect("fsync'd file");
        assert_eq!(got, vec![i as u8; 4096 + i], "safe/f{i}");
    }
    // Renamed, made and chmod'ed, then their directory fsync'd.
    assert!(!c.path("safe/f19").exists(), "the rename was kept");
    assert!(c.path("safe/sub").is_dir(), "the mkdir was kept");
    assert_eq!(mode_of(&c.path("safe/f0")), 0o600, "the chmod was kept");
    assert_eq!(
        std::fs::read(c.path("safe/renamed")).expect("renamed file"),
        vec![19u8; 4096 + 19]
    );
    for name in ["osync", "odsync"] {
        assert_eq!(
            std::fs::read(c.path(&format!("safe/{name}"))).expect("O_SYNC file"),
            name.repeat(100).into_bytes(),
            "{name}: written with {name}, closed without fsync"
        );
    }
    for i in 0..10 {
        assert!(c.path(&format!("kept/k{i}")).is_dir(), "kept/k{i} replayed");
    }
    std::fs::write(c.path("after"), b"after").expect("write after recovery");
    assert_eq!(std::fs::read(c.path("after")).expect("read"), b"after");
    let log = std::fs::read_to_string(c.tmp.path().join("mdt0-restart.log")).expect("log");
    assert!(
        log.contains("evicted client"),
        "the dead client was not evicted:\n{log}"
    );
}

fn mode_of(p: &Path) -> u32 {
    std::fs::metadata(p).expect("stat").permissions().mode() & 0o7777
}

/// Replay, shown every run: a change the MDT acknowledged and then lost.
/// Commits are held 30 s, so the MDT keeps its latest changes in the
/// process (its store's journal buffer) as after any change that nobody
/// waits a commit for; it is killed (crash point `request:rmdir`) when
/// the next request arrives, which loses them as a power cut would. The
/// restarted MDT waits for the mount, the mount replays, and the
/// interrupted request is then sent again and done.
#[test]
fn a_change_the_mdt_lost_in_a_crash_is_replayed() {
    let mut c = Cluster::up(
        1,
        1,
        &["--recovery-window", "60", "--commit-interval-ms", "30000"],
    );
    // Start the MDT again with the crash point armed.
    c.kill9("mdt0");
    let mut armed = c.start_armed("mdt0", "request:rmdir", 1);
    // The mount's first change on this instance registers it and waits
    // for the commit: it survives the crash on its own.
    std::fs::create_dir(c.path("registered")).expect("first change");
    // Acknowledged, not committed: directory changes only (a new file's
    // objects can make the MDT refill its object pool, which commits).
    std::fs::create_dir(c.path("replayed")).expect("mkdir");
    std::fs::create_dir(c.path("replayed/sub")).expect("mkdir sub");
    std::fs::set_permissions(c.path("replayed"), std::fs::Permissions::from_mode(0o705))
        .expect("chmod");
    // The rmdir waits while the MDT is down and is done after the replay.
    let rmdir = {
        let p = c.path("registered");
        std::thread::spawn(move || std::fs::remove_dir(p))
    };
    let status = armed.0.wait().expect("wait for the armed MDT");
    assert!(!status.success(), "the armed MDT died at the crash point");
    c.restart("mdt0");
    rmdir
        .join()
        .expect("rmdir thread")
        .expect("rmdir after recovery");
    assert!(c.path("replayed/sub").is_dir(), "the replayed mkdirs");
    let mode = std::fs::metadata(c.path("replayed"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o705, "the replayed chmod");
    assert!(!c.path("registered").exists(), "the resent rmdir was done");
    let log = std::fs::read_to_string(c.tmp.path().join("mdt0-restart.log")).expect("log");
    let replayed = replayed_in_logs(&c);
    assert!(
        replayed >= 3,
        "two mkdirs and a chmod were lost and replayed: {replayed}\n{log}"
    );
}
