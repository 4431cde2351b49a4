//! The no-op FUSE reference ("the FUSE ceiling"): `loom mount-noop`
//! mounts a file system that keeps what is written (read back
//! identical), lists, renames, links and unlinks, makes new files the
//! caller's (and a set-group-ID directory's group), lets the kernel check
//! permissions, truncates at open(O_TRUNC), clears set-ID bits on another
//! user's write and on chown, and leaves nothing mounted once stopped; `loom bench
//! compare ... noop:` mounts one for the run, shows it as a column like
//! any target, and unmounts it afterwards, also on Ctrl-C.

mod bench_support;
mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bench_support::{args, loom_bounded, mounts_below, StopClustersBelow};

const NOBODY: u32 = 65534;

/// Whether something is mounted exactly on `dir`.
fn mounted(dir: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(dir.to_str().expect("utf8")))
}

/// Runs `sh -c script` as user and group 65534 with no supplementary
/// groups; returns whether it succeeded, and its stderr.
fn as_nobody(script: &str) -> (bool, String) {
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
            script,
        ])
        .output()
        .expect("setpriv");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A `loom mount-noop` process; stopped (SIGTERM, then SIGKILL and a lazy
/// unmount) on drop if the test did not stop it.
struct NoopMount {
    child: Option<Child>,
    dir: PathBuf,
}

impl NoopMount {
    fn start(dir: &Path, log: &Path, extra: &[&str]) -> NoopMount {
        let mut cmd = Command::new(common::loom_bin());
        cmd.arg("mount-noop").arg(dir).args(extra);
        let child = common::spawn_until(cmd, "mounted at", "loom mount-noop", log);
        NoopMount {
            child: Some(child),
            dir: dir.to_path_buf(),
        }
    }

    /// Sends SIGTERM and returns whether the process exited successfully.
    fn stop(&mut self) -> bool {
        let mut child = self.child.take().expect("running");
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        child.wait().expect("wait").success()
    }
}

impl Drop for NoopMount {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if mounted(&self.dir) {
            let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// Deterministic bytes that differ at every offset of a 4 KiB page.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[i % 4] ^ seed)
        .collect()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("readdir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn mount_noop_keeps_data_names_and_ownership_and_unmounts_cleanly() {
    let help = common::loom_ok(&["mount-noop", "--help"]);
    for needed in ["benchmark reference", "memory", "FUSE ceiling", "--private"] {
        assert!(help.contains(needed), "--help lacks {needed:?}:\n{help}");
    }

    let tmp = tempfile::tempdir().expect("tempdir");
    // User 65534 must reach the mount point.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let dir = tmp.path().join("noop");
    let mut mount = NoopMount::start(&dir, &tmp.path().join("noop.log"), &[]);
    assert!(mounted(&dir), "not in the mount table after `mounted at`");
    let root = std::fs::metadata(&dir).expect("stat root");
    assert_eq!(
        (root.uid(), root.gid(), root.mode() & 0o7777),
        (0, 0, 0o755)
    );

    // Data reads back identical, also after overwriting the middle, past
    // the end and truncating.
    let small = pattern(3901, 1);
    let big = pattern(5 << 20, 2);
    std::fs::write(dir.join("small"), &small).expect("write small");
    std::fs::write(dir.join("big"), &big).expect("write big");
    assert_eq!(std::fs::read(dir.join("small")).expect("read small"), small);
    assert_eq!(std::fs::read(dir.join("big")).expect("read big"), big);
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("small"))
            .expect("open small");
        f.write_all_at(b"MIDDLE", 1000).expect("overwrite");
        f.write_all_at(b"END", 5000).expect("write past the end");
        f.set_len(5002).expect("truncate");
        f.sync_all().expect("fsync");
    }
    let mut expected = small.clone();
    expected[1000..1006].copy_from_slice(b"MIDDLE");
    expected.resize(5000, 0);
    expected.extend_from_slice(b"EN");
    assert_eq!(std::fs::read(dir.join("small")).expect("reread"), expected);
    assert_eq!(
        std::fs::metadata(dir.join("small")).expect("stat").len(),
        5002
    );

    // Names: list, rename (also refused with RENAME_NOREPLACE), links, unlink.
    std::fs::create_dir(dir.join("sub")).expect("mkdir");
    assert_eq!(names(&dir), ["big", "small", "sub"]);
    std::fs::rename(dir.join("small"), dir.join("sub/moved")).expect("rename");
    assert_eq!(names(&dir), ["big", "sub"]);
    assert_eq!(
        std::fs::read(dir.join("sub/moved")).expect("read moved"),
        expected
    );
    let refused = nix::fcntl::renameat2(
        None,
        &dir.join("big"),
        None,
        &dir.join("sub/moved"),
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    );
    assert_eq!(refused, Err(nix::errno::Errno::EEXIST));
    std::fs::hard_link(dir.join("big"), dir.join("sub/hard")).expect("link");
    std::os::unix::fs::symlink("../big", dir.join("sub/soft")).expect("symlink");
    assert_eq!(std::fs::metadata(dir.join("big")).expect("stat").nlink(), 2);
    assert_eq!(
        std::fs::read_link(dir.join("sub/soft")).expect("readlink"),
        Path::new("../big")
    );
    assert_eq!(
        std::fs::read(dir.join("sub/soft")).expect("through the symlink"),
        big
    );
    std::fs::remove_file(dir.join("big")).expect("unlink");
    assert!(!dir.join("big").exists());
    assert_eq!(
        std::fs::read(dir.join("sub/hard")).expect("other name"),
        big
    );
    assert_eq!(
        std::fs::metadata(dir.join("sub/hard"))
            .expect("stat")
            .nlink(),
        1
    );
    assert_eq!(names(&dir.join("sub")), ["hard", "moved", "soft"]);
    for n in ["hard", "moved", "soft"] {
        std::fs::remove_file(dir.join("sub").join(n)).expect("unlink");
    }
    std::fs::remove_dir(dir.join("sub")).expect("rmdir");
    assert!(names(&dir).is_empty());

    // Ownership: a new file is its creator's; the kernel checks modes.
    std::fs::create_dir(dir.join("open")).expect("mkdir open");
    std::fs::set_permissions(dir.join("open"), std::fs::Permissions::from_mode(0o777))
        .expect("chmod 777");
    let made = dir.join("open/by-nobody");
    let (ok, err) = as_nobody(&format!("echo nobody > {}", made.display()));
    assert!(ok, "nobody cannot create in a 0777 directory: {err}");
    let st = std::fs::metadata(&made).expect("stat");
    assert_eq!((st.uid(), st.gid()), (NOBODY, NOBODY));
    assert_eq!(std::fs::read(&made).expect("read"), b"nobody\n");
    let (ok, _) = as_nobody(&format!("touch {}", dir.join("in-root").display()));
    assert!(!ok, "nobody created a file in root's 0755 directory");
    assert!(!dir.join("in-root").exists());
    // A set-group-ID directory gives its group, and its bit to directories.
    std::fs::create_dir(dir.join("sgid")).expect("mkdir sgid");
    nix::unistd::chown(
        &dir.join("sgid"),
        None,
        Some(nix::unistd::Gid::from_raw(4242)),
    )
    .expect("chgrp");
    std::fs::set_permissions(dir.join("sgid"), std::fs::Permissions::from_mode(0o2777))
        .expect("chmod 2777");
    let (ok, err) = as_nobody(&format!(
        "touch {0}/f && mkdir {0}/d",
        dir.join("sgid").display()
    ));
    assert!(
        ok,
        "nobody cannot create in the set-group-ID directory: {err}"
    );
    let f = std::fs::metadata(dir.join("sgid/f")).expect("stat f");
    let d = std::fs::metadata(dir.join("sgid/d")).expect("stat d");
    assert_eq!((f.uid(), f.gid()), (NOBODY, 4242));
    assert_eq!((d.uid(), d.gid()), (NOBODY, 4242));
    assert_ne!(
        d.mode() & libc::S_ISGID,
        0,
        "the new directory lost the set-group-ID bit"
    );

    // open(O_TRUNC) of an existing file truncates it (done by the open).
    std::fs::write(dir.join("open/again"), b"a longer first content").expect("write");
    std::fs::write(dir.join("open/again"), b"short").expect("rewrite");
    assert_eq!(
        std::fs::read(dir.join("open/again")).expect("read"),
        b"short"
    );
    // Set-ID bits: cleared by another user's write and by any chown.
    let suid = dir.join("open/suid");
    std::fs::write(&suid, b"#!/bin/sh\n").expect("write suid");
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o6777)).expect("chmod");
    let (ok, err) = as_nobody(&format!("echo more >> {}", suid.display()));
    assert!(ok, "nobody cannot append to a 0777 file: {err}");
    let mode = std::fs::metadata(&suid).expect("stat").mode() & 0o7777;
    assert_eq!(
        mode, 0o777,
        "a write by another user left set-ID bits: {mode:o}"
    );
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o6755)).expect("chmod");
    nix::unistd::chown(&suid, Some(nix::unistd::Uid::from_raw(NOBODY)), None).expect("chown");
    let st = std::fs::metadata(&suid).expect("stat");
    assert_eq!((st.uid(), st.mode() & 0o7777), (NOBODY, 0o755));

    assert!(
        mount.stop(),
        "loom mount-noop did not exit cleanly on SIGTERM"
    );
    assert!(!mounted(&dir), "still mounted after SIGTERM");
    let mounts = std::fs::read_to_string("/proc/mounts").expect("mounts");
    assert!(
        !mounts
            .lines()
            .any(|l| l.contains(dir.to_str().expect("utf8"))),
        "{mounts}"
    );
    assert!(
        names(&dir).is_empty(),
        "the mount point shows files after unmount"
    );
}

/// Rates of every phase of the target named `name` in a compare report.
fn rates(report: &serde_json::Value, name: &str) -> Vec<(String, u64, f64)> {
    let t = report["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no target {name} in {report}"));
    t["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .flat_map(|p| {
            p["samples"].as_array().expect("samples").iter().map(|s| {
                (
                    p["phase"].as_str().expect("phase").to_string(),
                    s["ops"].as_u64().expect("ops"),
                    s["value"].as_f64().expect("value"),
                )
            })
        })
        .collect()
}

#[test]
fn bench_compare_shows_the_noop_reference_as_a_column_and_unmounts_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Where the bench makes its mount point (TMPDIR), watched by this test.
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir(&scratch).expect("mkdir scratch");
    let _guard = StopClustersBelow(scratch.clone());
    let local = tmp.path().join("local");
    std::fs::create_dir(&local).expect("mkdir local");
    let json = tmp.path().join("cmp.json");
    let argv = args(&[
        "bench",
        "compare",
        "md",
        "-n",
        "200",
        "-p",
        "2",
        "-i",
        "1",
        "--no-progress",
        "--json",
        json.to_str().expect("utf8"),
        "--chart",
        tmp.path().join("cmp").to_str().expect("utf8"),
        local.to_str().expect("utf8"),
        "noop:",
    ]);
    let o = loom_bounded(&argv, &[("TMPDIR", &scratch)], Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "compare failed: {}\n{stdout}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("noop/local"), "no noop column:\n{stdout}");
    assert!(
        stdout.contains("SUMMARY noop ("),
        "no noop summary:\n{stdout}"
    );

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("json");
    let targets = report["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 2);
    assert_eq!(targets[1]["name"], "noop");
    assert_eq!(targets[1]["fs_type"], "fuse.loom-noop");
    let location = PathBuf::from(targets[1]["location"].as_str().expect("location"));
    assert!(
        location.starts_with(&scratch),
        "mounted on {location:?}, not in TMPDIR"
    );
    let noop = rates(&report, "noop");
    let local_rates = rates(&report, "local");
    assert_eq!(noop.len(), 9, "{noop:?}");
    for (phase, ops, rate) in &noop {
        assert!(*rate > 0.0, "{phase}: rate {rate}");
        assert!(*ops > 0, "{phase}: no operations");
    }
    // The same work as on the local directory.
    let work = |r: &[(String, u64, f64)]| -> Vec<(String, u64)> {
        r.iter().map(|(p, o, _)| (p.clone(), *o)).collect()
    };
    assert_eq!(work(&noop), work(&local_rates));

    assert!(!mounted(&location), "the noop mount is left");
    assert!(
        mounts_below(&scratch).is_empty(),
        "{:?}",
        mounts_below(&scratch)
    );
    assert!(
        names(&scratch).is_empty(),
        "left in TMPDIR: {:?}",
        names(&scratch)
    );
    assert!(
        names(&local).is_empty(),
        "left in the local target: {:?}",
        names(&local)
    );
}

#[test]
fn ctrl_c_during_a_noop_run_unmounts_it_and_exits_130() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let scratch = tmp.path().to_path_buf();
    let _guard = StopClustersBelow(scratch.clone());
    let mut child = Command::new(common::loom_bin())
        .args([
            "bench",
            "md",
            "-n",
            "500000",
            "-p",
            "2",
            "-i",
            "3",
            "-F",
            "--no-progress",
            "noop:",
        ])
        .env("TMPDIR", &scratch)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn loom bench");
    // Wait (bounded) until the run works in its mount: mounted, with the
    // workload's directory in it.
    let deadline = Instant::now() + Duration::from_secs(60);
    let working = loop {
        let work = mounts_below(&scratch)
            .into_iter()
            .map(|m| m.join("loom-md"))
            .find(|w| w.exists());
        if let Some(w) = work {
            break w;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run never worked in a noop mount below {scratch:?}");
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("loom bench exited early: {status}");
        }
        // A bounded poll of the mount table, not a wait in place of an event.
        std::thread::sleep(Duration::from_millis(10));
    };
    let mount = working.parent().expect("mount point").to_path_buf();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(!mounted(&mount), "the noop mount is left after Ctrl-C");
    assert!(mounts_below(&scratch).is_empty());
    assert!(names(&scratch).is_empty(), "left: {:?}", names(&scratch));
}
