//! Issue #32, point 3, through real mounts with `--write-back`:
//! - fsync of a file, and of a directory, waits for the flush and the
//!   commit: kill -9 of the MDT right after loses nothing, nor does kill
//!   -9 of the MDT while an fsync's flush waits for it; a write to a file
//!   opened O_SYNC or O_DSYNC is as durable when it returns;
//! - kill -9 of the writing mount loses at most what was not fsynced, and
//!   leaves no file half made (a Data-on-MDT file comes with all its
//!   bytes or not at all) and nothing for `loom fsck` to find;
//! - creates past an inode quota fail at once on the writing mount (it
//!   knows the room its MDT leaves); a create the MDT refuses when it is
//!   sent (another mount took the room) is reported by the next fsync
//!   and by the close of the refused file, as uid 65534.
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
        .stderr(std::process::Stdio::piped())
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
    if !fsyncing.wait().expect("wait").success() {
        let mut err = String::new();
        if let Some(mut e) = fsyncing.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        panic!("the writer failed after {rest:?}: {err}");
    }
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
    data_on_mdt(&c.mnt);
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
fn creates_past_an_inode_quota_fail_at_once_on_a_writing_mount() {
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
made = 0
for i in range(30):
    try:
        with open(os.path.join(d, f"f{i}"), "w") as f:
            f.write("x")
        made += 1
    except OSError as e:
        print("create", i, e.errno)
        break
dfd = os.open(d, os.O_RDONLY)
try:
    os.fsync(dfd)
    print("fsync 0")
except OSError as e:
    print("fsync", e.errno)
"#;
    let o = python3(true)
        .arg("-c")
        .arg(prog)
        .arg(&d)
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The tenth file's create fails with EDQUOT (122) itself, and nothing
    // answered was refused afterwards.
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "create 9 122\nfsync 0\n",
        "what the writer saw"
    );
    let made = std::fs::read_dir(shared.join("q")).expect("list").count();
    assert_eq!(made, 9, "what the quota allowed, seen by the other mount");
    let (code, out) = fsck(&c, &[]);
    assert_eq!(code, 0, "{out}");
}

/// The writing mount trusts the room it was told of (for ten minutes
/// here); another mount takes that room meanwhile. The creates the
/// writer answered within it are refused when they reach the MDT: the
/// next fsync reports it, and so does the close of a refused file still
/// open then; nothing is half made.
#[test]
fn a_create_refused_at_its_flush_is_reported_by_fsync_and_close() {
    use std::io::{BufRead, BufReader, Write};
    let mut c = Cluster::up(1, 1, &[]);
    let shared = c.open_dir("shared");
    let wb = c.second_mount_with("wb", &["--write-back", "--wb-quota-trust=600"]);
    // 100 inodes: far enough from the limit that the writer is told of
    // room for dozens at its first create.
    loom_ok(&["setquota", "-u", "65534", "-I", "100", s(&c.mnt)]);
    let prog = r#"
import os, sys
d = sys.argv[1]
os.mkdir(d)
with open(os.path.join(d, "a0"), "w") as f:
    f.write("a0")
print("ready", flush=True)
sys.stdin.readline()
for i in range(1, 5):
    with open(os.path.join(d, f"a{i}"), "w") as f:
        f.write(f"a{i}")
held = os.open(os.path.join(d, "a5"), os.O_CREAT | os.O_WRONLY, 0o644)
os.write(held, b"a5")
dfd = os.open(d, os.O_RDONLY)
for what, call in (("fsync", lambda: os.fsync(dfd)), ("close", lambda: os.close(held)),
                   ("again", lambda: os.fsync(dfd))):
    try:
        call()
        print(what, 0)
    except OSError as e:
        print(what, e.errno)
"#;
    let mut child = python3(true)
        .arg("-c")
        .arg(prog)
        .arg(wb.join("shared/q"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert_eq!(line, "ready\n", "the writer made q and a0");
    // The other mount takes all the room the writer's q and a0 leave: 98
    // inodes (a directory and 97 files).
    let o = sh_as_nobody(&format!(
        "mkdir {0} && for i in $(seq 1 97); do echo $i > {0}/o$i || exit 1; done",
        s(&shared.join("other"))
    ))
    .output()
    .expect("sh");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("go");
    let o = child.wait_with_output().expect("python3");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("read");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // EDQUOT (122) at the fsync, at the close of the refused file held
    // open, then clean.
    assert_eq!(
        rest, "fsync 122\nclose 122\nagain 0\n",
        "what the writer saw"
    );
    let names = sh(&format!("ls {}", s(&shared.join("q"))));
    assert_eq!(names, "a0\n", "only what the quota allowed was made");
    let (code, out) = fsck(&c, &[]);
    assert_eq!(code, 0, "{out}");
}
