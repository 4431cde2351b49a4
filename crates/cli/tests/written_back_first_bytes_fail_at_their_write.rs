//! Issue #32, point 3: a mount that writes back keeps new files' first
//! bytes only within the room it knows for them, so that a write past a
//! block quota, past the free space of the MDT that holds the bytes
//! (Data-on-MDT), or past what the OSTs granted (bytes for objects),
//! fails at the write itself, as on a local file system, and not later
//! at the fsync. Everything written before it is kept and
//! seen whole by another mount; once space is freed, files are written
//! again. As uid 65534, through a `--write-back` mount.
mod common;
use common::*;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Python: the bytes of file `fI`, which nothing compresses (the MDT's
/// store would shrink repeated bytes to nothing).
const CONTENT: &str = r#"
import hashlib
def content(i, size):
    return b"".join(hashlib.sha256(f"{i}:{k}".encode()).digest() for k in range(size // 32))
"#;

/// Python that makes directory argv[1] and files `f0`, `f1`, ... in it of
/// argv[3] bytes each (at most argv[2] of them) until a write fails, then
/// fsyncs the directory. Prints "write I ERRNO" for the failed write (if
/// any), "fsync ERRNO", and "made N".
const FILL: &str = r#"
import os, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.mkdir(d)
made = 0
for i in range(n):
    fd = os.open(os.path.join(d, f"f{i}"), os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.write(fd, content(i, size))
    except OSError as e:
        print("write", i, e.errno)
        os.close(fd)
        break
    os.close(fd)
    made += 1
dfd = os.open(d, os.O_RDONLY)
try:
    os.fsync(dfd)
    print("fsync 0")
except OSError as e:
    print("fsync", e.errno)
print("made", made)
"#;

/// Run [`FILL`] as uid 65534 in `dir` (made by it); returns the errno of
/// the failed write and how many files were made, after checking that the
/// fsync passed.
fn fill(dir: &Path, n: u32, size: usize) -> (Option<i32>, usize) {
    let o = python3(true)
        .arg("-c")
        .arg(format!("{CONTENT}{FILL}"))
        .arg(dir)
        .arg(n.to_string())
        .arg(size.to_string())
        .output()
        .expect("python3");
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("fsync 0\n"),
        "nothing answered was refused later: {out}"
    );
    let failed = out
        .lines()
        .find_map(|l| l.strip_prefix("write "))
        .map(|l| l.split(' ').nth(1).expect("errno").parse().expect("errno"));
    let made = out
        .lines()
        .find_map(|l| l.strip_prefix("made "))
        .expect("made")
        .parse()
        .expect("count");
    (failed, made)
}

/// Python that checks what this mount sees in argv[1]: files `f0` ..
/// `f{argv[2]-1}` whole, the one after them (whose write failed) empty
/// if it was made, nothing else. Prints "seen".
const SEEN: &str = r#"
import os, sys
d, made, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(made):
    with open(os.path.join(d, f"f{i}"), "rb") as f:
        assert f.read() == content(i, size), f"f{i}"
failed = os.path.join(d, f"f{made}")
if os.path.exists(failed):
    assert os.stat(failed).st_size == 0, "the failed write left nothing"
assert len(os.listdir(d)) == made + os.path.exists(failed), sorted(os.listdir(d))
print("seen")
"#;

/// What another mount sees in `dir`: every file made whole, the one whose
/// write failed empty.
fn check_seen(dir: &Path, made: usize, size: usize) {
    let o = python3(false)
        .arg("-c")
        .arg(format!("{CONTENT}{SEEN}"))
        .arg(dir)
        .arg(made.to_string())
        .arg(size.to_string())
        .output()
        .expect("python3");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "seen\n",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn data_on_mdt_bytes_past_a_block_quota_fail_at_their_write() {
    let mut c = Cluster::up(1, 1, &[]);
    let shared = c.open_dir("shared");
    data_on_mdt(&shared);
    let wb = c.second_mount_with("wb", &["--write-back"]);
    // 1 MiB: sixteen files of 64 KiB.
    loom_ok(&["setquota", "-u", "65534", "-B", "1M", s(&c.mnt)]);
    let (failed, made) = fill(&wb.join("shared/q"), 40, 64 << 10);
    assert_eq!(failed, Some(122), "EDQUOT at the write");
    assert!((1..=16).contains(&made), "{made} files made");
    check_seen(&shared.join("q"), made, 64 << 10);
    let (code, out) = fsck(&c, &[]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn data_on_mdt_bytes_past_a_full_mdt_fail_at_their_write_and_fit_once_it_is_freed() {
    let mut c = Cluster::up_with(1, 1, &[], |state| {
        vec![Tmpfs::mount(&state.join("targets/mdt0"), "128m")]
    });
    let shared = c.open_dir("shared");
    data_on_mdt(&shared);
    let wb = c.second_mount_with("wb", &["--write-back"]);
    // Fill the MDT's disk behind loomfs's back, leaving about 3 MiB above
    // the 5% it keeps from Data-on-MDT bytes.
    let mdt = c.state.join("targets/mdt0");
    let v = nix::sys::statvfs::statvfs(&mdt).expect("statvfs");
    let frsize = v.fragment_size() as u64;
    let (total, avail) = (
        v.blocks() as u64 * frsize,
        v.blocks_available() as u64 * frsize,
    );
    let filler = mdt.join("filler");
    std::fs::write(
        &filler,
        vec![1u8; (avail - total / 20 - (3 << 20)) as usize],
    )
    .expect("fill the MDT's disk");
    let (failed, made) = fill(&wb.join("shared/q"), 200, 64 << 10);
    assert_eq!(failed, Some(libc::ENOSPC), "ENOSPC at the write");
    assert!((1..48).contains(&made), "{made} files made");
    check_seen(&shared.join("q"), made, 64 << 10);
    // Space freed: written again, by the same mount.
    std::fs::remove_file(&filler).expect("free the MDT's disk");
    let (failed, made) = fill(&wb.join("shared/r"), 4, 64 << 10);
    assert_eq!((failed, made), (None, 4), "written once the MDT has room");
    let (code, out) = fsck(&c, &[]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn first_bytes_for_objects_past_a_full_ost_fail_at_their_write() {
    let mut c = Cluster::up_with(1, 1, &[], |state| {
        vec![Tmpfs::mount(&state.join("targets/ost0"), "32m")]
    });
    let shared = c.open_dir("shared");
    loom_ok(&["setstripe", "-c", "1", s(&shared)]);
    let wb = c.second_mount_with("wb", &["--write-back"]);
    // 256 KiB files, each kept whole with its inode until it is sent.
    let (failed, made) = fill(&wb.join("shared/q"), 400, 256 << 10);
    assert_eq!(failed, Some(libc::ENOSPC), "ENOSPC at the write");
    assert!((1..128).contains(&made), "{made} files made");
    check_seen(&shared.join("q"), made, 256 << 10);
    let (code, out) = fsck(&c, &[]);
    assert_eq!(code, 0, "{out}");
}
