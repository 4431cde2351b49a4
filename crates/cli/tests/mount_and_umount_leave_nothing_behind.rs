//! `loom mount` in the background and `loom umount`, `loom mount
//! --foreground` stopped with SIGTERM or SIGINT: each leaves no mount and
//! no process behind; bad sources, keys and file system names fail with a
//! clear error and mount nothing.
mod common;
use common::*;
use std::path::Path;
use std::time::{Duration, Instant};

fn mounted(dir: &Path) -> bool {
    let canon = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    std::fs::read_to_string("/proc/mounts")
        .expect("mounts")
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(canon.to_str().expect("utf8")))
}

fn gone(pid: i32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    let p = nix::unistd::Pid::from_raw(pid);
    while nix::sys::signal::kill(p, None).is_ok() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn background_mount_then_umount() {
    let c = Cluster::up(1, 1, &[]);
    let dir = c.tmp.path().join("bg");
    let key = c.state.join("client.key");
    let log = c.tmp.path().join("bg.log");
    let out = loom_ok(&[
        "mount",
        &format!("{}:/loom", c.mgs()),
        dir.to_str().expect("utf8"),
        "--key-file",
        key.to_str().expect("utf8"),
        "--log",
        log.to_str().expect("utf8"),
    ]);
    assert!(out.starts_with("mounted at"), "{out}");
    let pid: i32 = out
        .split("served by pid ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {out:?}"));
    assert!(mounted(&dir));
    std::fs::write(dir.join("via-bg"), b"background").expect("write");
    assert_eq!(
        std::fs::read(c.path("via-bg")).expect("read"),
        b"background"
    );
    loom_ok(&["umount", dir.to_str().expect("utf8")]);
    assert!(!mounted(&dir), "still mounted after loom umount");
    assert!(gone(pid), "the serving process is still running");
}

#[test]
fn foreground_mount_stops_cleanly_on_sigterm_and_sigint() {
    let mut c = Cluster::up(1, 1, &[]);
    for (name, sig) in [
        ("term", nix::sys::signal::Signal::SIGTERM),
        ("int", nix::sys::signal::Signal::SIGINT),
    ] {
        let dir = c.second_mount(name);
        assert!(mounted(&dir));
        std::fs::write(dir.join(name), name).expect("write");
        let (child, _) = c.extra.pop().expect("the mount process");
        let mut child = child;
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).expect("kill");
        let status = child.wait().expect("wait");
        assert!(status.success(), "{name}: exited with {status}");
        assert!(!mounted(&dir), "{name}: still mounted");
        assert_eq!(std::fs::read(c.path(name)).expect("read"), name.as_bytes());
    }
}

#[test]
fn bad_sources_keys_and_names_fail_clearly_and_mount_nothing() {
    let c = Cluster::up(1, 1, &[]);
    let dir = c.tmp.path().join("never");
    let key = c.state.join("client.key");
    let d = dir.to_str().expect("utf8");
    let k = key.to_str().expect("utf8");
    let mgs = c.mgs();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "mount".into(),
                "no-colon-slash".into(),
                d.into(),
                "--key-file".into(),
                k.into(),
            ],
            "must look like MGS_ADDR:/FSNAME",
        ),
        (
            vec![
                "mount".into(),
                format!("{mgs}:/loom"),
                d.into(),
                "--key-file".into(),
                "/nonexistent/key".into(),
            ],
            "does not exist",
        ),
        (
            vec![
                "mount".into(),
                format!("{mgs}:/other"),
                d.into(),
                "--key-file".into(),
                k.into(),
                "--foreground".into(),
            ],
            "serves 'loom'",
        ),
    ];
    for (args, want) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = loom(&args);
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!mounted(&dir), "{args:?} left a mount");
    }
}
