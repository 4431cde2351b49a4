//! Issue #11, orphan objects: a client writes a new file and dies with its
//! MDT before the create was committed. The MDT comes back without the
//! file (its client never replays it), but the file's data is on the
//! OSTs, in objects no file refers to. `loom fsck` finds them online and
//! reports them with their sizes (exit 4, as e2fsck's "left"), leaves
//! alone objects younger than --min-age, reclaims them with --repair
//! (exit 1, "repaired"), and then finds nothing (exit 0). Files that
//! exist keep every byte.
mod common;
use common::*;

#[test]
fn fsck_finds_and_reclaims_objects_no_file_refers_to() {
    // Commits held a minute: the second mount's create stays uncommitted.
    // The dead client is evicted after 2 s.
    let mut c = Cluster::up(
        1,
        2,
        &["--commit-interval-ms", "60000", "--recovery-window", "2"],
    );
    let dir = c.path("d");
    std::fs::create_dir(&dir).expect("mkdir");
    loom_ok(&[
        "setstripe",
        "-c",
        "2",
        "-S",
        "64K",
        dir.to_str().expect("utf8"),
    ]);
    let kept: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
    {
        use std::io::Write;
        let mut f = std::fs::File::create(dir.join("kept")).expect("create");
        f.write_all(&kept).expect("write");
        f.sync_all().expect("fsync: committed");
    }
    let (code, out) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 0, "a clean file system:\n{out}");
    assert!(out.contains("no problems found"), "{out}");

    // An MDT that dies as the size report of the next file arrives: what
    // it applied and had not committed (that file's create) is lost with
    // it, as in a power cut.
    c.kill9("mdt0");
    let mut armed = c.start_armed("mdt0", "request:update_size", 1);
    let m2 = c.second_mount("m2");
    // A client's first change is committed before its reply (see the
    // MDT's recovery); the create after it is not.
    std::fs::create_dir(m2.join("d/first")).expect("a first change");
    let o = sh(&format!(
        "dd if=/dev/zero of={} bs=64k count=32 status=none && echo written",
        m2.join("d/lost").display()
    ));
    assert!(o.contains("written"), "{o}");
    // Its data landed at the close; its release's size report kills the
    // MDT. The client dies too, so nobody replays the create.
    armed.0.wait().expect("the armed MDT dies");
    let pid = nix::unistd::Pid::from_raw(c.mount_pid(&m2));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).expect("kill the mount");
    c.restart("mdt0");
    // Listing waits out the MDT's recovery; the dead client never replays.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["first", "kept"], "the lost create came back");

    // Young objects are left alone by default.
    let (code, out) = fsck(&c, &[]);
    assert_eq!(
        code, 0,
        "objects written a moment ago are not orphans yet:\n{out}"
    );
    let (code, out) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 4, "{out}");
    let orphans: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("orphan object:"))
        .collect();
    assert_eq!(orphans.len(), 2, "{out}");
    assert!(
        orphans.iter().all(|l| l.contains(", 1048576 bytes,")),
        "each stripe holds 1 MiB of the 2 MiB file:\n{out}"
    );
    assert!(
        out.contains("2 objects no file refers to, 2097152 bytes"),
        "{out}"
    );

    let (code, out) = fsck(&c, &["--min-age", "0", "--repair"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("reclaimed 2 objects, 2097152 bytes"), "{out}");
    let (code, out) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 0, "after the repair:\n{out}");
    let back = std::fs::read(dir.join("kept")).expect("read kept");
    assert!(back == kept, "the kept file changed");
}
