//! Issue #32, point 3, through real mounts with `--write-back`:
//! - fsync of a file, and of a directory, waits for the flush and the
//!   commit: kill -9 of the MDT right after loses nothing, nor does kill
//!   -9 of the MDT while an fsync's flush waits for it; a write to a file
//!   opened O_SYNC or O_DSYNC is as durable when it returns;
//! - kill -9 of the writing mount loses at most what was not fsynced, and
//!   leaves no file half made (a Data-on-MDT file comes with all its
//!   bytes or not at all) and nothing for `loom fsck` to find;
//! - a change the MDT refuses when it is sent (an inode quota) is
//!   reported by the next fsync, as uid 65534.
mod common;
use common::*;
use std::path::Path;
use std::process::Command;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Python that makes files `PREFIX0..PREFIX{N-1}` in `DIR`, each holding
/// "content-I" (several writes), then fsyncs the file named by argv[4]
/// (if any) and the directory, and prints "synced".
const MAKE: &str = r#"
import os, sys
d, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    with open(os.path.join(d, f"{prefix}{i}"), "w") as f:
        f.write("content-")
        f.write(str(i))
print("made", flush=True)
if len(sys.argv) > 4:
    fd = os.open(os.path.join(d, sys.argv[4]), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
dfd = os.open(d, os.O_RDONLY)
os.fsync(dfd)
os.close(dfd)
print("synced", flush=True)
"#;

/// Python that writes files "osync" and "odsync" in argv[1], opened
/// O_SYNC and O_DSYNC, and neither fsyncs nor syncs.
const SYNC_WRITES: &str = r#"
import os, sys
for name, flag in (("osync", os.O_SYNC), ("odsync", os.O_DSYNC)):
    fd = os.open(os.path.join(sys.argv[1], name), os.O_CREAT | os.O_WRONLY | flag, 0o644)
    os.write(fd, f"{name}-bytes".encode())
    os.close(fd)
"#;

fn make(d: &Path, prefix: &str, n: u32, fsync: Option<&str>) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg("-c")
        .arg(MAKE)
        .arg(d)
        .arg(prefix)
        .arg(n.to_string())
        .args(fsync);
    cmd
}

fn run(mut cmd: Command) {
    let o = cmd.output().expect("python3");
    assert!(
        o.status.success() && String::from_utf8_lossy(&o.stdout).ends_with("made\nsynced\n"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Every file `PREFIXi` present in `d` holds "content-i"; how many are.
fn whole_files(d: &Path, prefix: &str, n: u32) -> u32 {
    let mut present = 0;
    for i in 0..n {
        match std::fs::read_to_string(d.join(format!("{prefix}{i}"))) {
            Ok(text) => {
                assert_eq!(text, format!("content-{i}"), "{prefix}{i} is half made");
                present += 1;
            }
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
        }
    }
    present
}

#[test]
fn an_fsynced_written_back_tree_survives_kill_9_of_its_mdt() {
    // Commits held back: what survives is what fsync made durable (or
    // what the client replays), not what the MDT happened to commit.
    let mut c = Cluster::up(
        1,
        1,
        &["--recovery-window", "60", "--commit-interval-ms", "30000"],
    );
    let wb = c.second_mount_with("wb", &["--write-back"]);
    // kill -9 of the MDT while an fsync's flush waits for it: files made
    // while the MDT is stopped (answered by the mount, under FIDs granted
    // by a first file), then an fsync; the MDT dies, comes back, and the
    // fsync returns with everything there.
    let d2 = wb.join("d2");
    std::fs::create_dir(&d2).expect("mkdir d2");
    run(make(&d2, "first", 1, None));
    let mdt = Stopped::new(c.pid("mdt0"));
    let mut fsyncing = make(&d2, "b", 50, Some("b3"))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let out = fsyncing.stdout.take().expect("stdout");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(out));
    let first = lines.next().expect("a line").expect("read");
    assert_eq!(first, "made", "the files are answered with the MDT stopped");
    c.kill9("mdt0");
    drop(mdt);
    c.restart("mdt0");
    let rest: Vec<String> = lines.map(|l| l.expect("read")).collect();
    assert!(fsyncing.wait().expect("wait").success());
    assert_eq!(rest, ["synced"]);
    let theirs = c.mnt.join("d2");
    assert_eq!(whole_files(&theirs, "b", 50), 50);
    let d = wb.join("d");
    std::fs::create_dir(&d).expect("mkdir on the writing mount");
    run(make(&d, "a", 100, Some("a7")));
    c.kill9_latest("mdt0");
    c.restart("mdt0");
    let theirs = c.mnt.join("d");
    assert_eq!(whole_files(&theirs, "a", 100), 100);

    // O_SYNC and O_DSYNC: each file's name and bytes are durable when
    // its write returns, with no fsync (the files are made in a directory
    // written back, after others that wait to be sent).
    let d3 = wb.join("d3");
    std::fs::create_dir(&d3).expect("mkdir d3");
    run(make(&d3, "c", 20, None));
    let o = Command::new("python3")
        .arg("-c")
        .arg(SYNC_WRITES)
        .arg(&d3)
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Neither the mount (which would send, then replay, what it holds)
    // nor the MDT's held-back commits are left to keep them.
    let pid = nix::unistd::Pid::from_raw(c.mount_pid(&wb));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).expect("kill -9");
    let _ = nix::mount::umount2(&wb, nix::mount::MntFlags::MNT_DETACH);
    c.kill9_latest("mdt0");
    c.restart("mdt0");
    let theirs = c.mnt.join("d3");
    for name in ["osync", "odsync"] {
        let text = std::fs::read_to_string(theirs.join(name)).expect("read");
        assert_eq!(text, format!("{name}-bytes"), "{name}");
    }

    let (code, out) = fsck(&c, &[]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn kill_9_of_a_writing_mount_loses_only_what_was_not_fsynced() {
    let mut c = Cluster::up(1, 1, &[]);
    // One directory whose files keep their first 64 KiB on the MDT (they
    // go whole in one change), one with plain striping.
    loom_ok(&[
        "setstripe",
        "-E",
        "64K",
        "-L",
        "mdt",
        "-E",
        "-1",
        "-c",
        "1",
        s(&c.mnt),
    ]);
    let wb = c.second_mount_with("wb", &["--write-back"]);
    let (dom, plain) = (wb.join("dom"), wb.join("plain"));
    std::fs::create_dir(&dom).expect("mkdir dom");
    std::fs::create_dir(&plain).expect("mkdir plain");
    loom_ok(&["setstripe", "-c", "1", s(&plain)]);
    run(make(&dom, "kept", 20, Some("kept3")));
    // More, not fsynced; the mount dies as soon as they are answered.
    run_unsynced(&dom, "lost", 300);
    run_unsynced(&plain, "p", 100);
    let pid = nix::unistd::Pid::from_raw(c.mount_pid(&wb));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).expect("kill -9");
    let _ = nix::mount::umount2(&wb, nix::mount::MntFlags::MNT_DETACH);

    let theirs = c.mnt.join("dom");
    assert_eq!(whole_files(&theirs, "kept", 20), 20, "fsynced");
    let lost = whole_files(&theirs, "lost", 300);
    eprintln!("{lost} of 300 files not fsynced were sent before the kill");
    // Nothing half made, no object leaked.
    let (code, out) = fsck(&c, &[]);
    assert_eq!(code, 0, "{out}");
}

/// As [`make`] without any fsync: exits once the files are answered.
fn run_unsynced(d: &Path, prefix: &str, n: u32) {
    let prog = format!(
        "import os\nfor i in range({n}):\n    with open(os.path.join({d:?}, f'{prefix}{{i}}'), 'w') as f:\n        f.write('content-')\n        f.write(str(i))\nprint('made')\nprint('synced')",
        d = s(d)
    );
    let mut cmd = Command::new("python3");
    cmd.arg("-c").arg(prog);
    run(cmd);
}

#[test]
fn a_change_refused_at_its_flush_is_reported_by_the_next_fsync() {
    let mut c = Cluster::up(1, 1, &[]);
    let shared = c.open_dir("shared");
    let wb = c.second_mount_with("wb", &["--write-back"]);
    // The user may own 10 inodes: its directory and 9 files.
    loom_ok(&["setquota", "-u", "65534", "-I", "10", s(&c.mnt)]);
    let d = wb.join("shared/q");
    let prog = r#"
import os, sys
d = sys.argv[1]
os.mkdir(d)
for i in range(30):
    with open(os.path.join(d, f"f{i}"), "w") as f:
        f.write("x")
dfd = os.open(d, os.O_RDONLY)
try:
    os.fsync(dfd)
    print(0)
except OSError as e:
    print(e.errno)
try:
    os.fsync(dfd)
    print(0)
except OSError as e:
    print(e.errno)
"#;
    let o = python3(true)
        .arg("-c")
        .arg(prog)
        .arg(&d)
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    let errnos: Vec<&str> = out.split_whitespace().collect();
    // EDQUOT once, at the first fsync after the refusal; then clean.
    assert_eq!(errnos, ["122", "0"], "the fsyncs' errnos");
    let made = std::fs::read_dir(shared.join("q")).expect("list").count();
    assert_eq!(made, 9, "what the quota allowed, seen by the other mount");
    let (code, out) = fsck(&c, &[]);
    assert_eq!(code, 0, "{out}");
}
