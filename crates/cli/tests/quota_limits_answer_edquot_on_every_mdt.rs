//! Quota limits (issue #28): inode limits set with `loom setquota` are
//! enforced by every MDT against shares the master (MDT0) grants, so the
//! usage over all MDTs stops exactly at a hard limit; a soft limit holds
//! once its grace is spent; a project's tree is capped while another is
//! not; root is not limited; limits and grants survive kill -9 of the
//! MDTs. Run as uid 65534 through the mount, and through the library.
mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// As uid 65534: create files NAME0, NAME1, ... in the directories given,
/// in turn, until one answers EDQUOT or `max` are made; prints how many
/// were made, then the errno that stopped it (0: none).
const FILL: &str = r#"
import errno, os, sys
dirs, prefix, most = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
made, err = 0, 0
while made < most:
    d = dirs[made % len(dirs)]
    try:
        os.close(os.open(f"{d}/{prefix}{made}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except OSError as e:
        err = e.errno
        break
    made += 1
print(made, err)
"#;

fn fill(dirs: &[&Path], prefix: &str, most: u32) -> (u64, i32) {
    let list: Vec<&str> = dirs.iter().map(|d| s(d)).collect();
    let o = python3(true)
        .arg("-c")
        .arg(FILL)
        .arg(list.join(","))
        .arg(prefix)
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

/// As uid 65534, one call: its errno (0: done).
fn as_user(code: &str, path: &Path) -> i32 {
    let prog = format!(
        "import os, sys\np = sys.argv[1]\ntry:\n    {code}\n    print(0)\nexcept OSError as e:\n    print(e.errno)"
    );
    let o = python3(true)
        .arg("-c")
        .arg(prog)
        .arg(path)
        .output()
        .expect("python3");
    String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)))
}

const EDQUOT: i32 = 122;

/// The total files figure of `loom quota ARGS`, with its mark.
fn files(args: &[&str]) -> String {
    let out = loom_ok(&[&["quota"], args].concat());
    out.lines()
        .nth(3)
        .and_then(|l| l.split_whitespace().nth(4))
        .unwrap_or_else(|| panic!("a files figure in {out}"))
        .to_string()
}

fn open_dirs(c: &Cluster) -> (std::path::PathBuf, std::path::PathBuf) {
    let (a, b) = (c.path("a"), c.path("b"));
    std::fs::create_dir(&a).expect("mkdir a");
    loom_ok(&["mkdir", "-i", "1", s(&b)]);
    for d in [&a, &b] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    (a, b)
}

#[test]
fn a_hard_limit_stops_creates_exactly_over_both_mdts_and_survives_kill9() {
    let mut c = Cluster::up(2, 1, &[]);
    let mnt = s(&c.mnt).to_string();
    let (a, b) = open_dirs(&c);
    // Bad input changes nothing.
    for (args, says) in [
        (vec!["-u", "no-such-user-here", "-I", "5"], "no user"),
        (
            vec!["-u", "65534", "-i", "9", "-I", "5"],
            "above the hard one",
        ),
        (vec!["-u", "65534"], "no limit given"),
    ] {
        let o = loom(&[&["setquota"], &args[..], &[&mnt]].concat());
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert!(!loom(&["setquota", "-u", "65534", "-I", "ten", &mnt])
        .status
        .success());
    assert_eq!(files(&["-u", "65534", &mnt]), "0");

    loom_ok(&["setquota", "-u", "65534", "-I", "30", &mnt]);
    let out = loom_ok(&["quota", "-u", "65534", &mnt]);
    assert!(
        out.lines().nth(3).expect("figures").contains(" 30 "),
        "{out}"
    );
    // New directories of `a` go to MDT1: a mkdir there is a cross-MDT
    // operation, whose part on MDT1 is held to the limit too.
    loom_ok(&["setdirstripe", "-D", "-i", "1", s(&a)]);
    assert_eq!(as_user("os.mkdir(p)", &a.join("sub")), 0);
    assert_eq!(mdt_of(&a.join("sub")), 1);
    // Files on both MDTs in turn: exactly 30 inodes, then EDQUOT.
    assert_eq!(fill(&[&a, &b], "f", 100), (29, EDQUOT));
    assert_eq!(as_user("os.mkdir(p)", &a.join("d")), EDQUOT);
    assert!(!a.join("d").exists(), "the refused mkdir left nothing");
    assert_eq!(as_user("os.symlink('x', p)", &b.join("l")), EDQUOT);
    assert_eq!(files(&["-u", "65534", &mnt]), "30*");
    // Root is not limited, and may give the user more than the limit.
    std::fs::write(a.join("root-made"), b"").expect("root creates");
    sh(&format!("chown 65534 {}", s(&a.join("root-made"))));
    assert_eq!(files(&["-u", "65534", &mnt]), "31*");
    // Five removed: four fit again (31 - 5 + 4 = 30).
    for i in 0..5 {
        std::fs::remove_file(if i % 2 == 0 { &a } else { &b }.join(format!("f{i}")))
            .expect("unlink");
    }
    assert_eq!(fill(&[&b, &a], "g", 100), (4, EDQUOT));

    // Both MDTs killed and restarted: the limit and the grants hold.
    c.kill9("mdt0");
    c.kill9("mdt1");
    c.restart("mdt0");
    c.restart("mdt1");
    assert_eq!(fill(&[&a, &b], "h", 100), (0, EDQUOT));
    for i in 5..8 {
        std::fs::remove_file(if i % 2 == 0 { &a } else { &b }.join(format!("f{i}")))
            .expect("unlink");
    }
    assert_eq!(fill(&[&a, &b], "k", 100), (3, EDQUOT));
    let check = loom_ok(&["quota", "--check", &mnt]);
    assert_eq!(
        check.matches("counts match the inodes").count(),
        2,
        "{check}"
    );

    // With room freed on MDT0, a create on MDT1 needs more than MDT1's
    // share: while the master is down it waits for it, and is made once
    // the master is back (neither refused nor let past the limit).
    std::fs::remove_file(a.join("f8")).expect("unlink");
    sh(&format!("sync {}", s(&a)));
    c.kill9_latest("mdt0");
    let waiting = python3(true)
        .arg("-c")
        .arg("import sys; open(sys.argv[1], 'w').close()")
        .arg(b.join("while-mdt0-was-down"))
        .spawn()
        .expect("python3");
    c.restart("mdt0");
    let o = waiting.wait_with_output().expect("wait");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(files(&["-u", "65534", &mnt]), "30*");
    assert_eq!(fill(&[&b, &a], "n", 10), (0, EDQUOT));

    // Through the library as the same user: refused alike.
    let key = c.state.join("client.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod key");
    let o = as_nobody(&[
        s(&loom_bin()),
        "bench",
        "md",
        "-n",
        "20",
        "-p",
        "1",
        "--no-progress",
        &format!("loom:{}", s(&b)),
    ]);
    assert!(!o.status.success(), "library creates past the limit");
    let err = String::from_utf8_lossy(&o.stderr).to_lowercase();
    assert!(err.contains("quota"), "{err}");
    // Setting limits is root's.
    let o = as_nobody(&[s(&loom_bin()), "setquota", "-u", "65534", "-I", "0", &mnt]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("only root may set quota limits"));
    // Removed, the limit stops holding.
    loom_ok(&["setquota", "-u", "65534", "-I", "0", &mnt]);
    assert_eq!(fill(&[&a, &b], "m", 10), (10, 0));
}

#[test]
fn a_soft_limit_holds_once_its_grace_is_spent() {
    let c = Cluster::up(2, 1, &[]);
    let mnt = s(&c.mnt).to_string();
    let (a, b) = open_dirs(&c);
    loom_ok(&[
        "setquota", "-g", "65534", "-i", "10", "-I", "1000", "--grace", "2", &mnt,
    ]);
    // Past the soft limit within the grace: allowed, marked, counting down.
    assert_eq!(fill(&[&a, &b], "f", 15), (15, 0));
    let over_at = Instant::now();
    let out = loom_ok(&["quota", "-g", "65534", &mnt]);
    let line = out.lines().nth(3).expect("figures").to_string();
    assert!(line.contains("15*"), "{out}");
    assert!(line.trim_end().ends_with('s'), "grace left: {out}");
    // The grace runs out: creates answer EDQUOT (polled, with a deadline).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut n = 0;
    let refused_at = loop {
        let e = as_user("open(p, 'w').close()", &a.join(format!("late{n}")));
        if e == EDQUOT {
            break Instant::now();
        }
        assert_eq!(e, 0);
        n += 1;
        assert!(Instant::now() < deadline, "still creating after 30 s");
    };
    assert!(
        refused_at - over_at >= Duration::from_secs(1),
        "refused within the grace"
    );
    assert!(loom_ok(&["quota", "-g", "65534", &mnt]).contains("none"));
    // Back under the soft limit: creates go on, the grace starts over.
    let o = as_nobody(&["sh", "-c", &format!("rm -f {}/* {}/*", s(&a), s(&b))]);
    assert!(o.status.success());
    assert_eq!(fill(&[&a, &b], "again", 5), (5, 0));
}

#[test]
fn a_project_tree_is_capped_and_another_is_not() {
    let c = Cluster::up(2, 1, &[]);
    let mnt = s(&c.mnt).to_string();
    let (capped, free) = (c.path("capped"), c.path("free"));
    for d in [&capped, &free] {
        std::fs::create_dir(d).expect("mkdir");
    }
    loom_ok(&["mkdir", "-i", "1", s(&capped.join("remote"))]);
    loom_ok(&["project", "-p", "77", "-s", "-r", s(&capped)]);
    loom_ok(&["setquota", "-p", "77", "-I", "20", &mnt]);
    for d in [&capped, &capped.join("remote"), &free] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
    // The tree already holds 2 inodes (itself and remote).
    assert_eq!(
        fill(&[&capped, &capped.join("remote")], "f", 100),
        (18, EDQUOT)
    );
    assert_eq!(files(&["-p", "77", &mnt]), "20*");
    assert_eq!(fill(&[&free], "f", 50), (50, 0));
    // Moving a file in by rename is EXDEV, so mv copies: refused too.
    assert_eq!(
        as_user(
            &format!("os.rename(p, '{}/moved')", s(&capped)),
            &free.join("f0")
        ),
        18
    );
    let o = as_nobody(&["mv", s(&free.join("f1")), s(&capped.join("moved"))]);
    assert!(!o.status.success(), "mv into a full project");
    assert!(String::from_utf8_lossy(&o.stderr)
        .to_lowercase()
        .contains("quota"));
}

#[test]
fn what_root_gives_a_user_past_its_limit_on_one_mdt_holds_the_user_back_on_the_other() {
    let c = Cluster::up(2, 1, &[]);
    let mnt = s(&c.mnt).to_string();
    let (a, b) = open_dirs(&c);
    loom_ok(&["setquota", "-u", "65534", "-I", "10", &mnt]);
    // The user's own creates on MDT1: it holds a share of the limit.
    assert_eq!(fill(&[&b], "u", 4), (4, 0));
    // Root gives the user 8 more there: 12, past the limit of 10. Root
    // is not held back, and the master hears of it.
    for i in 0..8 {
        let f = b.join(format!("root{i}"));
        std::fs::write(&f, b"").expect("root creates");
        nix::unistd::chown(&f, Some(65534.into()), None).expect("chown");
    }
    assert_eq!(files(&["-u", "65534", &mnt]), "12*");
    // So MDT0 grants the user nothing: the usage over both is past the
    // limit.
    assert_eq!(fill(&[&a], "v", 5), (0, EDQUOT));
    assert_eq!(files(&["-u", "65534", &mnt]), "12*");
}
