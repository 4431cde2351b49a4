//! Issue #29, point 3: a file open on one mount stays usable (read and
//! written) after its last name is removed through another, until its
//! last close; then its objects are destroyed and `loom fsck` finds
//! nothing left over. This holds across a kill -9 of the MDT (the mount
//! holds its open files again when it reconnects), and a mount killed
//! with the file open loses its hold: the file goes about 5 s later.
//! The process holding the file runs as uid 65534 on the second mount.
mod common;
use common::locker::*;
use common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SIZE: usize = 1 << 20;

/// A file of SIZE random bytes at `rel` on mount 1, writable by all:
/// its path, the SHA-256 of its bytes and its object files.
fn a_file(c: &Cluster, d1: &Path) -> (PathBuf, String, Vec<PathBuf>) {
    let f = d1.join("f");
    let p = f.to_str().expect("utf-8");
    sh(&format!(
        "head -c {SIZE} /dev/urandom > {p} && chmod 666 {p}"
    ));
    let sum = sha256(&std::fs::read(&f).expect("read"));
    let objs = c.object_files(p);
    assert!(
        !objs.is_empty() && objs.iter().all(|o| o.exists()),
        "{objs:?}"
    );
    (f, sum, objs)
}

fn sha256(b: &[u8]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("b");
    std::fs::write(&p, b).expect("write");
    let out = sh(&format!("sha256sum {}", p.display()));
    out.split_whitespace().next().expect("a sum").to_string()
}

/// Wait (up to 60 s: a restarted MDT's grace period may run) until
/// every one of `objs` is gone from its OST.
fn destroyed(objs: &[PathBuf], why: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while objs.iter().any(|o| o.exists()) {
        assert!(Instant::now() < deadline, "{why}: objects left: {objs:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn fsck_clean(c: &Cluster, when: &str) {
    let (code, out) = fsck(c, &[]);
    assert_eq!(code, 0, "fsck {when}:\n{out}");
}

/// A process of uid 65534 with `d2/f` open, which it read whole.
fn reading(ev: &std::rc::Rc<Events>, name: &str, d2: &Path, sum: &str) -> Locker {
    let mut reader = Locker::start(ev, name);
    reader.open(d2, "f");
    reader.expect(
        &format!("pread 0 {SIZE}"),
        &format!("data {SIZE} {sum}"),
        "before",
    );
    reader
}

/// The holder closes the file: its objects go, and nothing is left over.
fn last_close(reader: &mut Locker, c: &Cluster, objs: &[PathBuf], ev: &Events) {
    reader.ok("close", "the last close");
    destroyed(objs, "after the last close");
    fsck_clean(c, "after the last close");
    ev.quiet("every answer was read");
}

/// The holder reads the whole file and writes past its end, through
/// mount 2, after the name is gone on both mounts.
fn still_usable(reader: &mut Locker, f1: &Path, d2: &Path, sum: &str) {
    assert!(!f1.exists(), "removed on mount 1");
    assert!(!d2.join("f").exists(), "mount 2 sees the name gone");
    reader.expect(
        &format!("pread 0 {SIZE}"),
        &format!("data {SIZE} {sum}"),
        "the whole file, read after its removal",
    );
    reader.ok(&format!("pwrite {SIZE} tail"), "written after its removal");
    reader.expect(
        &format!("pread {SIZE} 10"),
        &format!("data 4 {}", sha256(b"tail")),
        "what it wrote",
    );
}

#[test]
fn a_file_open_on_one_mount_outlives_its_removal_on_another() {
    let (c, d1, d2) = two_mounts(1, 0);
    let (f1, sum, objs) = a_file(&c, &d1);
    let ev = Events::new(&c);
    let mut reader = reading(&ev, "a reader on mount 2", &d2, &sum);
    std::fs::remove_file(&f1).expect("rm on mount 1");
    still_usable(&mut reader, &f1, &d2, &sum);
    assert!(objs.iter().all(|o| o.exists()), "kept while open");
    fsck_clean(&c, "while the unlinked file is open");
    last_close(&mut reader, &c, &objs, &ev);
}

#[test]
fn an_open_file_is_held_again_after_an_mdt_kill9() {
    let (mut c, d1, d2) = two_mounts(1, 0);
    let (f1, sum, objs) = a_file(&c, &d1);
    let ev = Events::new(&c);
    let mut reader = reading(&ev, "a reader on mount 2", &d2, &sum);
    c.kill9("mdt0");
    c.restart("mdt0");
    // Mount 2's leases went with the MDT: it holds its open file again
    // as it reconnects; until it has, no file losing its name goes.
    std::fs::remove_file(&f1).expect("rm on mount 1 after the restart");
    still_usable(&mut reader, &f1, &d2, &sum);
    assert!(objs.iter().all(|o| o.exists()), "kept while open");
    last_close(&mut reader, &c, &objs, &ev);
}

#[test]
fn a_killed_mount_lets_go_of_the_files_it_had_open() {
    let (c, d1, d2) = two_mounts(1, 0);
    let (f1, sum, objs) = a_file(&c, &d1);
    let ev = Events::new(&c);
    let mut reader = reading(&ev, "a reader on mount 2", &d2, &sum);
    std::fs::remove_file(&f1).expect("rm on mount 1");
    still_usable(&mut reader, &f1, &d2, &sum);
    let m2 = d2.parent().expect("mount 2").to_path_buf();
    let daemon = nix::unistd::Pid::from_raw(c.mount_pid(&m2));
    nix::sys::signal::kill(daemon, nix::sys::signal::Signal::SIGKILL)
        .expect("SIGKILL mount 2's daemon");
    reader.kill();
    destroyed(&objs, "after the mount that held it died");
    fsck_clean(&c, "after the holder died");
    ev.quiet("every answer was read");
}

#[test]
fn a_mount_without_leases_holds_the_files_it_opens_too() {
    // No recall reaches a client without leases: its opens tell the MDT.
    let mut c = Cluster::up(1, 1, &[]);
    let d1 = c.open_dir("locks");
    let m2 = c.second_mount_with("m2", &["--lease-time", "0", "--attr-timeout", "0"]);
    let d2 = m2.join("locks");
    let (f1, sum, objs) = a_file(&c, &d1);
    let ev = Events::new(&c);
    let mut reader = reading(&ev, "a reader on a mount without leases", &d2, &sum);
    std::fs::remove_file(&f1).expect("rm on mount 1");
    still_usable(&mut reader, &f1, &d2, &sum);
    last_close(&mut reader, &c, &objs, &ev);
}
