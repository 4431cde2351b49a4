//! Issue #31, point 2: `loom find`, which the MDTs answer by scanning
//! their own entries in parallel, finds what GNU find finds through the
//! mount, test by test, on one tree spread over two MDTs (a remote and a
//! striped directory among plain ones), as root through the library and
//! as uid 65534 through the mount: the user sees what they may list and
//! "Permission denied" for the rest, as find says. The tests find cannot
//! ask (pools, stripes, layouts, MDTs, OSTs, project ids) are checked
//! against each file's layout and MDT as the mount shows them
//! (`loom.layout`, `loom.mdt`), read by a walk of the tree.
mod common;
use common::*;
use std::collections::BTreeSet;
use std::process::Command;

fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("utf8")
}

/// The lines of a command's stdout, as a set, and whether it succeeded.
fn lines(c: &mut Command) -> (BTreeSet<String>, bool, String) {
    let o = c.output().expect("run");
    let out = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    (
        out,
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn as_user(nobody: bool, prog: &str, args: &[&str]) -> Command {
    let mut c = if nobody {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", prog]);
        c
    } else {
        Command::new(prog)
    };
    c.args(args);
    c
}

/// The tree: plain, remote and striped directories; files of several
/// sizes, ages and owners; symlinks and a fifo; a directory only root may
/// list; striped, pooled, Data-on-MDT and progressive files; a project.
fn make_tree(t: &std::path::Path, loom: &str) {
    let t = s(t);
    sh(&format!(
        r#"set -e
        cd {t}
        {loom} pool new $(dirname {t}) fast
        {loom} pool add $(dirname {t}) fast 1
        {loom} mkdir -i 1 remote
        {loom} mkdir -c 2 striped
        mkdir -p plain/a/b/c secret open/deep wide dom pfl pooled proj
        for d in plain plain/a plain/a/b/c remote striped open/deep; do
          for i in 0 1 2 3 4 5 6 7 8 9; do
            head -c $((i * i * 700)) /dev/zero > $d/f$i.dat
            echo x > $d/note$i.TXT
          done
          ln -s f1.dat $d/link
          mkdir $d/sub
        done
        mkfifo plain/pipe
        for i in 0 1 2; do echo s > secret/s$i; done
        mkdir secret/inner; echo t > secret/inner/t
        chmod 700 secret
        chown -R 65534:65534 open
        chgrp -R 100 remote
        chmod 600 plain/f3.dat
        touch -m -d '5 days ago' plain/f1.dat remote/f2.dat striped/f3.dat
        touch -m -d '40 hours ago' plain/f4.dat striped/f4.dat
        touch -a -d '10 days ago' plain/f5.dat open/deep/f5.dat
        touch -m -d '90 minutes ago' remote/f6.dat
        {loom} setstripe -c 2 -S 2M wide
        {loom} setstripe -E 64K -L mdt -E -1 -c 1 dom
        {loom} setstripe -E 1M -c 1 -E -1 -c 2 pfl
        {loom} setstripe -p fast -c 1 pooled
        for d in wide dom pfl pooled; do
          for i in 0 1 2; do head -c $((i * 1500000 + 10)) /dev/urandom > $d/g$i; done
        done
        {loom} project -p 7 -s -r proj
        for i in 0 1 2; do echo p > proj/p$i; done
        mkdir proj/sub; echo q > proj/sub/q
        "#
    ));
}

#[test]
fn loom_find_answers_as_gnu_find_does() {
    let c = Cluster::up(2, 2, &[]);
    let loom_bin = loom_bin();
    let lb = s(&loom_bin);
    let t = c.path("t");
    std::fs::create_dir(&t).expect("mkdir");
    make_tree(&t, lb);
    let ts = s(&t);

    // Tests GNU find knows: each as root and as uid 65534, the same
    // paths. Two sets of tests by whoever runs them.
    let gnu: &[&[&str]] = &[
        &[],
        &["-name", "f*.dat"],
        &["-iname", "NOTE?.txt"],
        &["!", "-name", "*.dat"],
        &["-name", "[fn]o*"],
        &["-type", "f"],
        &["-type", "d"],
        &["-type", "l"],
        &["-type", "p"],
        &["-type", "f,l"],
        &["-size", "+10k"],
        &["-size", "-2k", "-type", "f"],
        &["-size", "13"],
        &["-size", "0"],
        &["-size", "-1M"],
        &["-size", "+1M"],
        &["-mtime", "+3"],
        &["-mtime", "1"],
        &["-mtime", "-1", "-type", "f"],
        &["-mmin", "+60", "-mmin", "-120"],
        &["-atime", "+7"],
        &["-ctime", "0", "-name", "*.dat"],
        &["-user", "nobody"],
        &["-uid", "65534", "-type", "d"],
        &["-group", "100"],
        &["-gid", "0", "-name", "link"],
        &["-not", "-user", "root", "-type", "f"],
    ];
    for nobody in [false, true] {
        let who = if nobody { "uid 65534" } else { "root" };
        for tests in gnu {
            let mut args = vec![ts];
            args.extend_from_slice(tests);
            let (want, want_ok, _) = lines(&mut as_user(nobody, "find", &args));
            let mut largs = vec!["find", ts];
            largs.extend_from_slice(tests);
            let (got, got_ok, err) = lines(&mut as_user(nobody, lb, &largs));
            assert!(
                !want.is_empty() || tests.contains(&"p"),
                "{tests:?} finds something"
            );
            assert_eq!(got, want, "{who}: loom find {tests:?} against find\n{err}");
            assert_eq!(got_ok, want_ok, "{who}: exit status of {tests:?}: {err}");
            if nobody {
                assert!(
                    err.contains(&format!("'{ts}/secret': Permission denied")),
                    "{who}: {err}"
                );
                assert!(!got.iter().any(|p| p.contains("/secret/")), "{got:?}");
            }
        }
    }
    // -print0, and paths from a start given with a trailing slash.
    let o = Command::new(lb)
        .args([
            "find",
            &format!("{ts}/plain/"),
            "-name",
            "note1.TXT",
            "-print0",
        ])
        .output()
        .expect("run");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("{ts}/plain/a/b/c/note1.TXT\0{ts}/plain/a/note1.TXT\0{ts}/plain/note1.TXT\0")
    );

    // Tests find does not know, against each file's layout and MDT as the
    // mount shows them, read by a walk as root.
    let oracle = r#"
import json, os, sys
top = sys.argv[1]
rows = []
for d, dirs, files in os.walk(top):
    for n in [d] + [os.path.join(d, x) for x in dirs + files]:
        if n == d and d != top:
            continue
        st = os.lstat(n)
        mdt = json.loads(os.getxattr(n, "loom.mdt", follow_symlinks=False))
        lay = None
        if os.path.isfile(n) and not os.path.islink(n):
            lay = json.loads(os.getxattr(n, "loom.layout"))
        isdir = os.path.isdir(n) and not os.path.islink(n)
        rows.append({"path": n, "mdt": mdt, "layout": lay, "dir": isdir})
print(json.dumps(rows))
"#;
    let o = python3(false)
        .args(["-c", oracle, ts])
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).expect("json");
    let raid0 = |l: &serde_json::Value| -> Vec<(u64, Vec<u64>)> {
        l["components"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let r = &c["pattern"]["Raid0"];
                let objs = r["objects"].as_array()?;
                Some((
                    r["stripe_size"].as_u64()?,
                    objs.iter().filter_map(|o| o["ost"].as_u64()).collect(),
                ))
            })
            .collect()
    };
    type Pick = Box<dyn Fn(&serde_json::Value) -> bool>;
    let layout_tests: Vec<(&[&str], Pick)> = vec![
        (
            &["-stripe-count", "2"],
            Box::new(move |r| raid0(&r["layout"]).iter().any(|(_, o)| o.len() == 2)),
        ),
        (
            &["--stripe-count", "+1"],
            Box::new(move |r| raid0(&r["layout"]).iter().any(|(_, o)| o.len() > 1)),
        ),
        (
            &["-stripe-size", "2M"],
            Box::new(move |r| raid0(&r["layout"]).iter().any(|(s, _)| *s == 2 << 20)),
        ),
        (
            &["-ost", "OST0001", "-name", "g*"],
            Box::new(move |r| {
                raid0(&r["layout"]).iter().any(|(_, o)| o.contains(&1))
                    && r["path"]
                        .as_str()
                        .is_some_and(|p| p.rsplit('/').next().is_some_and(|n| n.starts_with('g')))
            }),
        ),
        (
            &["-pool", "fast"],
            Box::new(|r| {
                r["layout"]["components"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["pool"] == "fast")
            }),
        ),
        (
            &["-layout", "dom"],
            Box::new(|r| {
                r["layout"]["components"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["pattern"] == "Mdt")
            }),
        ),
        (
            &["-layout", "pfl"],
            Box::new(|r| {
                r["layout"]["components"]
                    .as_array()
                    .is_some_and(|c| c.len() > 1)
            }),
        ),
        (&["-mdt", "1"], Box::new(|r| r["mdt"] == 1)),
        (
            &["!", "-mdt", "1", "-type", "d"],
            Box::new(|r| r["mdt"] != 1 && r["dir"] == true),
        ),
    ];
    let (visible, _, _) = lines(&mut as_user(true, "find", &[ts]));
    for (tests, pick) in &layout_tests {
        let want_root: BTreeSet<String> = rows
            .iter()
            .filter(|r| pick(r))
            .filter_map(|r| r["path"].as_str().map(str::to_string))
            .collect();
        assert!(!want_root.is_empty(), "{tests:?} finds something");
        for nobody in [false, true] {
            let mut largs = vec!["find", ts];
            largs.extend_from_slice(tests);
            let (got, _, err) = lines(&mut as_user(nobody, lb, &largs));
            let want: BTreeSet<String> = if nobody {
                want_root.intersection(&visible).cloned().collect()
            } else {
                want_root.clone()
            };
            assert_eq!(got, want, "nobody={nobody}: loom find {tests:?}\n{err}");
        }
    }
    // Project ids: what `loom project -s -r` marked.
    let (want, _, _) = lines(Command::new("find").arg(t.join("proj")));
    let (got, ok, err) = lines(Command::new(lb).args(["find", ts, "-projid", "7"]));
    assert!(ok, "{err}");
    assert_eq!(got, want, "-projid 7");

    // Bad input: a clear error, nothing printed.
    for (args, why) in [
        (&["-bogus"][..], "unknown test"),
        (&["-size", "3q"], "unknown unit"),
        (&["-user", "no-such-user-here"], "no such user"),
        (&["-ost", "OSTzz"], "hexadecimal"),
    ] {
        let mut largs = vec!["find", ts];
        largs.extend_from_slice(args);
        let o = loom(&largs);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(why), "{args:?}: {err}");
        assert!(o.stdout.is_empty());
    }
    let o = loom(&["find", &format!("{ts}/nonesuch"), "-type", "f"]);
    assert!(!o.status.success(), "a missing start");
}
