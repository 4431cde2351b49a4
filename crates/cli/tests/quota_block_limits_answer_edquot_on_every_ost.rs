//! Block quotas (issue #28): each OST counts the bytes its objects take
//! per owner, group and project of their files, and enforces block limits
//! set with `loom setquota -b/-B` against shares the master (MDT0) grants.
//! Shown as uid 65534 through the mount on 2 MDTs and 4 OSTs: a hard
//! limit stops writes with EDQUOT at the limit; a chown moves the bytes;
//! removing files frees them; a project's tree is capped while another
//! is not; a soft limit holds once its grace is spent; the library is
//! refused alike; and the counts stay exact through kill -9 of an OST and
//! of an MDT in the middle of writes (`loom quota --check`, and the bytes
//! the object files take on disk).
mod common;
use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

const EDQUOT: i32 = 122;
const MIB: u64 = 1 << 20;

/// As uid 65534 (or root): write files PREFIX0, PREFIX1, ... of SIZE bytes
/// in the directories given, in turn, each written, fsynced and closed,
/// until one fails or `most` are made; prints how many were made whole,
/// then the errno that stopped it (0: none).
const FILL: &str = r#"
import os, sys
dirs, prefix, size, most = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
chunk = b"q" * min(size, 1 << 20)
made, err = 0, 0
while made < most:
    p = f"{dirs[made % len(dirs)]}/{prefix}{made}"
    try:
        fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        try:
            left = size
            while left > 0:
                n = os.write(fd, chunk[:left])
                left -= n
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        err = e.errno
        break
    made += 1
print(made, err)
"#;

fn fill_as(nobody: bool, dirs: &[&Path], prefix: &str, size: u64, most: u32) -> (u64, i32) {
    let list: Vec<&str> = dirs.iter().map(|d| s(d)).collect();
    let o = python3(nobody)
        .arg("-c")
        .arg(FILL)
        .arg(list.join(","))
        .arg(prefix)
        .arg(size.to_string())
        .arg(most.to_string())
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let mut w = out.split_whitespace();
    let made = w.next().expect("made").parse().expect("number");
    let err = w.next().expect("errno").parse().expect("number");
    (made, err)
}

fn fill(dirs: &[&Path], prefix: &str, size: u64, most: u32) -> (u64, i32) {
    fill_as(true, dirs, prefix, size, most)
}

/// The figures line of `loom quota ARGS`, split.
fn figures(args: &[&str]) -> Vec<String> {
    let out = loom_ok(&[&["quota"], args].concat());
    out.lines()
        .nth(3)
        .unwrap_or_else(|| panic!("figures in {out}"))
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// KiB `loom quota ARGS` shows, without its mark.
fn kbytes(args: &[&str]) -> u64 {
    figures(args)[0]
        .trim_end_matches('*')
        .parse()
        .expect("kbytes")
}

/// The bytes the object files of every OST take on disk (what `du`
/// counts), for files all of one owner.
fn on_disk(c: &Cluster, osts: u32) -> u64 {
    let mut n = 0;
    for ost in 0..osts {
        let objects = c.state.join(format!("targets/ost{ost}/objects"));
        for bucket in std::fs::read_dir(&objects).expect("objects") {
            for f in std::fs::read_dir(bucket.expect("bucket").path()).expect("bucket") {
                let f = f.expect("entry");
                if f.path().extension().is_none() {
                    n += f.metadata().expect("stat").blocks() * 512;
                }
            }
        }
    }
    n
}

/// `loom quota --check` passes and names every target.
fn check_clean(mnt: &str, osts: u32) {
    let out = loom_ok(&["quota", "--check", mnt]);
    for ost in 0..osts {
        assert!(
            out.contains(&format!("OST{ost:04x}: ")) && !out.contains("counted"),
            "{out}"
        );
    }
}

/// Wait (bounded) until `cond` holds; the objects of removed files are
/// destroyed in the background.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn striped_dirs(c: &Cluster) -> (std::path::PathBuf, std::path::PathBuf) {
    let (a, b) = (c.path("a"), c.path("b"));
    std::fs::create_dir(&a).expect("mkdir a");
    loom_ok(&["mkdir", "-i", "1", s(&b)]);
    for d in [&a, &b] {
        loom_ok(&["setstripe", "-c", "4", s(d)]);
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    (a, b)
}

#[test]
fn a_hard_block_limit_stops_writes_on_four_osts_and_the_counts_follow_chown_and_rm() {
    let c = Cluster::up(2, 4, &[]);
    let mnt = s(&c.mnt).to_string();
    let (a, b) = striped_dirs(&c);
    // Bad input changes nothing.
    for (args, says) in [
        (
            vec!["-u", "65534", "-b", "9M", "-B", "5M"],
            "above the hard one",
        ),
        (vec!["-u", "65534", "-B", "8X"], "unknown unit"),
        (vec!["-u", "65534", "-B", "lots"], "not a size"),
    ] {
        let o = loom(&[&["setquota"], &args[..], &[&mnt]].concat());
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(kbytes(&["-u", "65534", &mnt]), 0);

    // 1 MiB files over both MDTs' directories, striped over 4 OSTs.
    assert_eq!(fill(&[&a, &b], "f", MIB, 6), (6, 0));
    let used = kbytes(&["-u", "65534", &mnt]);
    assert_eq!(
        used * 1024,
        on_disk(&c, 4),
        "the count is what the disk holds"
    );
    assert!(used >= 6 * 1024, "{used} KiB for 6 MiB");
    check_clean(&mnt, 4);

    // A hard limit of 10 MiB: writes stop at it with EDQUOT, as the
    // write's own error (or fsync's). The client holds space grants from
    // the writes above, so its first write to an OST may go behind (its
    // program already told it was done): the OST stores it even past the
    // limit and says the owner is near it, and the client waits for every
    // later write there. Past the limit by at most one 1 MiB write per
    // OST, then: what the client had sent behind, within its grant.
    loom_ok(&["setquota", "-u", "65534", "-B", "10M", &mnt]);
    let f = figures(&["-u", "65534", &mnt]);
    assert_eq!(f[2], "10240", "{f:?}");
    let (made, err) = fill(&[&a, &b], "g", MIB, 20);
    assert_eq!(err, EDQUOT, "made {made}");
    assert!(
        (4..=8).contains(&made),
        "{made} more MiB files under 10 MiB"
    );
    let used = kbytes(&["-u", "65534", &mnt]);
    assert!(
        used <= 14 * 1024,
        "{used} KiB: past the limit by more than was sent behind"
    );
    assert_eq!(used * 1024, on_disk(&c, 4));
    assert!(figures(&["-u", "65534", &mnt])[0].ends_with('*'));
    // However often the user tries again, the overshoot stays within
    // that bound: once an OST said the owner is near, every later write
    // there waits, and is refused.
    for round in 0..4 {
        assert_eq!(fill(&[&a, &b], &format!("x{round}-"), MIB, 8).1, EDQUOT);
    }
    let used = kbytes(&["-u", "65534", &mnt]);
    assert!(used <= 14 * 1024, "{used} KiB after more tries");
    // Per OST with -v: the four OSTs' lines add up to the total.
    let out = loom_ok(&["quota", "-v", "-u", "65534", &mnt]);
    let per_ost: u64 = out
        .lines()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0].contains("-OST"))
        .map(|w| {
            w[1].split_whitespace()
                .next()
                .expect("kbytes")
                .parse::<u64>()
                .expect("n")
        })
        .sum();
    assert_eq!(per_ost, used, "{out}");
    check_clean(&mnt, 4);

    // Root is not limited; a chown to the user moves the bytes to it.
    let r = a.join("root-file");
    std::fs::write(&r, vec![7u8; 4 * MIB as usize]).expect("root writes");
    nix::unistd::chown(&r, Some(65534.into()), None).expect("chown");
    until("the chowned file's bytes count for uid 65534", || {
        kbytes(&["-u", "65534", &mnt]) >= used + 4 * 1024
    });
    assert_eq!(kbytes(&["-u", "0", &mnt]), 0);
    check_clean(&mnt, 4);

    // Removing files frees their bytes; writes go again.
    for e in std::fs::read_dir(&a)
        .expect("a")
        .chain(std::fs::read_dir(&b).expect("b"))
    {
        std::fs::remove_file(e.expect("entry").path()).expect("rm");
    }
    until("the removed files' objects are destroyed", || {
        kbytes(&["-u", "65534", &mnt]) == 0
    });
    assert_eq!(fill(&[&a, &b], "h", MIB, 4), (4, 0));

    // Through the library as the same user: refused alike past the limit.
    let key = c.state.join("client.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod key");
    let o = as_nobody(&[
        s(&loom_bin()),
        "bench",
        "io",
        "-w",
        "-b",
        "16M",
        "-t",
        "1M",
        "-p",
        "1",
        "--no-progress",
        &format!("loom:{}", s(&b)),
    ]);
    assert!(!o.status.success(), "library writes past the limit");
    let err = String::from_utf8_lossy(&o.stderr).to_lowercase();
    assert!(err.contains("quota"), "{err}");
    // Setting limits is root's; removed, the limit stops holding.
    let o = as_nobody(&[s(&loom_bin()), "setquota", "-u", "65534", "-B", "0", &mnt]);
    assert!(!o.status.success());
    loom_ok(&["setquota", "-u", "65534", "-B", "0", &mnt]);
    assert_eq!(fill(&[&a, &b], "k", MIB, 12), (12, 0));
    check_clean(&mnt, 4);
}

#[test]
fn a_project_tree_is_capped_while_another_is_not_and_a_soft_limit_holds_after_its_grace() {
    let mut c = Cluster::up(1, 4, &[]);
    let mnt = s(&c.mnt).to_string();
    let (capped, open) = (c.path("capped"), c.path("open"));
    for d in [&capped, &open] {
        std::fs::create_dir(d).expect("mkdir");
        loom_ok(&["setstripe", "-c", "2", s(d)]);
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    // Set from a second mount of the file system; enforced on the first.
    let m2 = c.second_mount("m2");
    loom_ok(&["project", "-p", "77", "-s", s(&m2.join("capped"))]);
    loom_ok(&["setquota", "-p", "77", "-B", "4M", s(&m2)]);
    let (made, err) = fill(&[&capped], "p", MIB, 10);
    assert_eq!((made, err), (4, EDQUOT), "a 4 MiB project cap");
    assert_eq!(
        fill(&[&open], "o", MIB, 8),
        (8, 0),
        "the other tree is open"
    );
    assert!(kbytes(&["-p", "77", &mnt]) <= 4 * 1024);
    // A user sees any project's usage.
    let key = c.state.join("client.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod key");
    let o = as_nobody(&[s(&loom_bin()), "quota", "-p", "77", &mnt]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // A soft limit of 2 MiB with a 1 s grace for group 65534: passed
    // within the grace, then it holds as a hard one.
    loom_ok(&["setquota", "-g", "65534", "-b", "2M", "--grace", "1", &mnt]);
    let used = kbytes(&["-g", "65534", &mnt]);
    assert!(used > 2 * 1024, "over the soft limit already: {used}");
    let start = Instant::now();
    let mut refused = false;
    let mut i = 0;
    while !refused {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the grace never ran out"
        );
        let (_, err) = fill(&[&open], &format!("s{i}-"), 256 << 10, 1);
        refused = err == EDQUOT;
        assert!(refused || err == 0, "errno {err}");
        i += 1;
    }
    let grace = &figures(&["-g", "65534", &mnt])[3];
    assert_eq!(grace, "none", "the soft limit's grace is spent");
    // The second mount sees the same usage and limits.
    assert_eq!(
        figures(&["-g", "65534", s(&m2)]),
        figures(&["-g", "65534", &mnt])
    );
    check_clean(&mnt, 4);
}

#[test]
fn data_on_mdt_bytes_count_and_are_limited_with_the_osts_bytes() {
    let c = Cluster::up(2, 2, &[]);
    let mnt = s(&c.mnt).to_string();
    let d = c.path("dom");
    std::fs::create_dir(&d).expect("mkdir");
    // The first 64 KiB of each file on its MDT, the rest on both OSTs.
    loom_ok(&[
        "setstripe",
        "-E",
        "64K",
        "-L",
        "mdt",
        "-E",
        "-1",
        "-c",
        "2",
        s(&d),
    ]);
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    // Small files live on the MDT alone: their bytes count there.
    assert_eq!(fill(&[&d], "small", 40 << 10, 10), (10, 0));
    let out = loom_ok(&["quota", "-v", "-u", "65534", &mnt]);
    assert_eq!(kbytes(&["-u", "65534", &mnt]), 400, "{out}");
    assert_eq!(on_disk(&c, 2), 0, "nothing on the OSTs");
    // A larger file: 64 KiB on the MDT, the rest on the OSTs.
    assert_eq!(fill(&[&d], "big", MIB, 1), (1, 0));
    let used = kbytes(&["-u", "65534", &mnt]);
    assert_eq!(used * 1024, 400 * 1024 + 64 * 1024 + on_disk(&c, 2));
    check_clean(&mnt, 2);
    // One block limit holds over the MDT's bytes and the OSTs' alike.
    loom_ok(&[
        "setquota",
        "-u",
        "65534",
        "-B",
        &format!("{}k", used + 200),
        &mnt,
    ]);
    let (made, err) = fill(&[&d], "more", 40 << 10, 20);
    assert_eq!((made, err), (5, EDQUOT), "200 KiB left: five 40 KiB files");
    assert!(kbytes(&["-u", "65534", &mnt]) <= used + 200);
    check_clean(&mnt, 2);
}

#[test]
fn block_counts_stay_exact_through_kill9_of_an_ost_and_an_mdt_mid_write() {
    let mut c = Cluster::up(1, 2, &[]);
    let mnt = s(&c.mnt).to_string();
    let d = c.path("d");
    std::fs::create_dir(&d).expect("mkdir");
    loom_ok(&["setstripe", "-c", "2", s(&d)]);
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    loom_ok(&["setquota", "-u", "65534", "-B", "1G", &mnt]);
    for (round, server) in ["ost1", "mdt0", "ost0"].iter().enumerate() {
        let writer = python3(true)
            .arg("-c")
            .arg(FILL)
            .arg(s(&d))
            .arg(format!("r{round}-"))
            .arg((256u64 << 10).to_string())
            .arg("40")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        // Mid-write: once some of this round's files are there.
        until("the writer started", || {
            std::fs::read_dir(&d)
                .expect("d")
                .filter_map(Result::ok)
                .any(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("r{round}-"))
                })
        });
        c.kill9_latest(server);
        c.restart(server);
        let o = writer.wait_with_output().expect("writer");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout).trim(),
            "40 0",
            "round {round}"
        );
        check_clean(&mnt, 2);
        assert_eq!(
            kbytes(&["-u", "65534", &mnt]) * 1024,
            on_disk(&c, 2),
            "after kill -9 of {server}"
        );
    }
}

/// The bytes the objects of `file` take on disk.
fn object_bytes(c: &Cluster, file: &Path) -> u64 {
    c.object_files(s(file))
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.blocks() * 512))
        .sum()
}

#[test]
fn a_chown_reaches_an_ost_that_was_down_also_across_kill9_of_the_mdt() {
    let mut c = Cluster::up(1, 2, &[]);
    let mnt = s(&c.mnt).to_string();
    let d = c.path("d");
    std::fs::create_dir(&d).expect("mkdir");
    loom_ok(&["setstripe", "-c", "2", "-S", "1M", s(&d)]);
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    // Two 2 MiB files by uid 65534, 1 MiB on each OST.
    assert_eq!(fill(&[&d], "f", 2 * MIB, 2), (2, 0));
    let (f0, f1) = (d.join("f0"), d.join("f1"));
    let (b0, b1) = (object_bytes(&c, &f0), object_bytes(&c, &f1));
    assert_eq!(kbytes(&["-u", "65534", &mnt]) * 1024, b0 + b1);

    // A chown while OST1 is down: answered at once; OST0 has it, OST1
    // once it is back.
    c.kill9_latest("ost1");
    nix::unistd::chown(&f0, Some(4242.into()), None).expect("chown with an OST down");
    c.restart("ost1");
    until("OST1 learned f0's new owner", || {
        kbytes(&["-u", "4242", &mnt]) * 1024 == b0
    });

    // Again, and the MDT killed before it could tell OST1: the record
    // kept in the chown's own batch brings it back after the restart.
    c.kill9_latest("ost1");
    nix::unistd::chown(&f1, Some(4242.into()), None).expect("chown with an OST down");
    c.kill9_latest("mdt0");
    c.restart("mdt0");
    c.restart("ost1");
    until(
        "OST1 learned f1's new owner after the MDT's restart",
        || kbytes(&["-u", "4242", &mnt]) * 1024 == b0 + b1,
    );
    assert_eq!(kbytes(&["-u", "65534", &mnt]), 0);
    check_clean(&mnt, 2);
}

#[test]
fn what_root_writes_for_a_user_on_one_ost_holds_the_user_back_on_the_other() {
    let c = Cluster::up(1, 2, &[]);
    let mnt = s(&c.mnt).to_string();
    let (d0, d1) = (c.path("on0"), c.path("on1"));
    for (d, ost) in [(&d0, "0"), (&d1, "1")] {
        std::fs::create_dir(d).expect("mkdir");
        loom_ok(&["setstripe", "-c", "1", "-i", ost, s(d)]);
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    // A limit far enough that a share carries room beyond each write.
    loom_ok(&["setquota", "-u", "65534", "-B", "200M", &mnt]);
    // The user's own 1 MiB on OST0: OST0 holds a share of the limit.
    assert_eq!(fill(&[&d0], "u", MIB, 1), (1, 0));
    // Root writes 190 MiB more into a file of the user's there: 191 MiB.
    // Root is not held back, and the master hears of it.
    assert_eq!(fill(&[&d0], "r", 0, 1), (1, 0));
    std::fs::write(d0.join("r0"), vec![9u8; 190 * MIB as usize]).expect("root writes");
    assert!(kbytes(&["-u", "65534", &mnt]) >= 191 * 1024);
    // So OST1 grants the user no more than the 9 MiB left of the limit.
    let (made, err) = fill(&[&d1], "v", MIB, 40);
    assert_eq!(err, EDQUOT, "made {made}");
    assert!(made <= 9, "{made} MiB past what the limit leaves");
    assert!(kbytes(&["-u", "65534", &mnt]) <= 200 * 1024);
}
