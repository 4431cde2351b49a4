//! Issue #31, point 3: `loom migrate [-c] [-S] [-p] [-E] FILE|DIR` moves
//! files' data onto new objects of another layout, their FIDs (inode
//! numbers), sizes, times and bytes kept, the old objects destroyed (fsck
//! finds none left). A file open on another mount is left as it was
//! (retried, then reported); files written by a user through a second
//! mount, and read there, while they migrate again and again read back
//! exactly what was written.
mod common;
use common::*;
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8")
}

fn osts(c: &Cluster, f: &Path) -> BTreeSet<u32> {
    c.stripes(s(f)).iter().map(|x| x.0).collect()
}

/// sha256 of every file under `dir`, with its size and mtime.
fn sums(dir: &Path) -> String {
    sh(&format!(
        "cd {} && find . -type f -printf '%p %s %T@\\n' | sort && find . -type f -print0 | sort -z | xargs -0 sha256sum",
        s(dir)
    ))
}

#[test]
fn file_data_migrates_onto_new_objects_while_in_use() {
    let mut c = Cluster::up(2, 4, &[]);
    let mnt = s(&c.mnt).to_string();
    loom_ok(&["pool", "new", &mnt, "fast"]);
    loom_ok(&["pool", "add", &mnt, "fast", "2", "3"]);
    loom_ok(&["pool", "new", &mnt, "slow"]);
    loom_ok(&["pool", "add", &mnt, "slow", "0", "1"]);

    // A tree of every kind of file: empty, small, striped, sparse,
    // compressed, Data-on-MDT, on both MDTs.
    let d = c.path("d");
    std::fs::create_dir(&d).expect("mkdir");
    loom_ok(&["mkdir", "-i", "1", s(&d.join("remote"))]);
    std::fs::create_dir(d.join("packed")).expect("mkdir");
    loom_ok(&["setstripe", "-Z", "lz4", s(&d.join("packed"))]);
    std::fs::create_dir(d.join("dom")).expect("mkdir");
    data_on_mdt(&d.join("dom"));
    sh(&format!(
        r#"set -e; cd {}
        : > empty; echo one > small
        head -c 5000000 /dev/urandom > big
        truncate -s 30M sparse; echo tail >> sparse; printf mid | dd of=sparse bs=1 seek=9000000 conv=notrunc 2>/dev/null
        for i in 1 2 3; do head -c $((i * 700000)) /dev/urandom > remote/r$i; done
        for i in 1 2; do yes loomfs | head -c 3000000 > packed/p$i; done
        head -c 30000 /dev/urandom > dom/small; head -c 300000 /dev/urandom > dom/large
        touch -d '3 days ago' small remote/r2
        "#,
        s(&d)
    ));
    let files = [
        "empty",
        "small",
        "big",
        "sparse",
        "remote/r1",
        "remote/r2",
        "remote/r3",
        "packed/p1",
        "packed/p2",
        "dom/small",
        "dom/large",
    ];
    let inos: Vec<u64> = files
        .iter()
        .map(|f| std::fs::metadata(d.join(f)).expect("stat").ino())
        .collect();
    let before = sums(&d);
    let old_objects: Vec<(u32, u64)> = files
        .iter()
        .flat_map(|f| c.stripes(s(&d.join(f))))
        .collect();

    // Each swap is in the changelog (LYOUT, as root's).
    loom_ok(&["changelog", "register", &mnt]);
    let lyout = |c: &Cluster| {
        changelog_records(c, &[])
            .into_iter()
            .filter(|r| r["type"] == "LYOUT" && r["uid"] == 0)
            .count()
    };
    let out = loom_ok(&["migrate", "-p", "fast", "-c", "2", s(&d)]);
    assert!(out.contains("11 files migrated"), "{out}");
    assert_eq!(lyout(&c), 11, "a LYOUT record per file migrated");
    for (f, ino) in files.iter().zip(&inos) {
        let p = d.join(f);
        assert_eq!(
            std::fs::metadata(&p).expect("stat").ino(),
            *ino,
            "{f}: the same inode"
        );
        let on = osts(&c, &p);
        assert_eq!(on, BTreeSet::from([2, 3]), "{f} now on pool fast");
        let l = loom_ok(&["getstripe", s(&p)]);
        assert!(
            l.contains("lmm_pool:          fast") && !l.contains("pattern:       mdt"),
            "{f}: {l}"
        );
    }
    assert_eq!(sums(&d), before, "bytes, sizes and times kept");
    // The old objects are destroyed; no object is left that no file names.
    let (code, report) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 0, "{report}");
    for (ost, oid) in &old_objects {
        let gone = within({
            let p = c.object_file(*ost, *oid);
            move || {
                while p.exists() {
                    std::thread::yield_now();
                }
            }
        });
        assert!(gone.is_some(), "old object {ost}:{oid} left");
    }
    // A plain file back, with components this time.
    loom_ok(&[
        "migrate",
        "-E",
        "1M",
        "-c",
        "1",
        "-p",
        "slow",
        "-E",
        "-1",
        "-c",
        "2",
        "-p",
        "fast",
        s(&d.join("big")),
    ]);
    let l = loom_ok(&["getstripe", s(&d.join("big"))]);
    assert!(l.contains("lcm_entry_count:   2"), "{l}");
    assert_eq!(lyout(&c), 12);
    assert_eq!(sums(&d), before);

    // Bad input: a clear error, nothing moved.
    for (args, why) in [
        (
            &["migrate", "-p", "nosuch", s(&d)][..],
            "no OST pool nosuch",
        ),
        (
            &["migrate", "-p", "fast", "-m", "1", s(&d)],
            "give one or the other",
        ),
        (
            &["migrate", "-p", "fast", "-S", "1000", s(&d.join("big"))],
            "multiple",
        ),
        (
            &["migrate", "-c", "1", s(&c.path("nonesuch"))],
            "No such file",
        ),
    ] {
        let o = loom(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(why), "{args:?}: {err}");
    }
    let o = as_nobody(&[s(&loom_bin()), "migrate", "-c", "1", s(&d.join("big"))]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("Permission denied"),
        "a user migrated root's file: {err}"
    );

    // A file another mount holds open is left as it was, and said so.
    let m2 = c.second_mount("m2");
    let held = d.join("small");
    let mut holder = Command::new("sleep")
        .arg("600")
        .stdin(std::fs::File::open(m2.join("d/small")).expect("open on the second mount"))
        .spawn()
        .expect("hold it open");
    let on = osts(&c, &held);
    let o = loom(&["migrate", "--retries", "1", "-p", "slow", s(&held)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("in use on another client"),
        "{err}"
    );
    assert_eq!(osts(&c, &held), on, "a held file keeps its layout");
    holder.kill().expect("kill");
    holder.wait().expect("wait");
    loom_ok(&["migrate", "-p", "slow", s(&held)]);
    assert!(osts(&c, &held).is_subset(&BTreeSet::from([0, 1])));

    // A user writes one file and reads another through the second mount
    // while both migrate between the pools over and over: every read
    // sees what was written, and the file ends as the writer left it.
    let w = c.path("w");
    std::fs::create_dir(&w).expect("mkdir");
    sh(&format!("chown 65534:65534 {}", s(&w)));
    let steady = w.join("steady");
    sh(&format!(
        "head -c 2000000 /dev/urandom > {0}; chown 65534 {0}",
        s(&steady)
    ));
    let steady_sum = sh(&format!("sha256sum < {}", s(&steady)));
    let script = r#"
import hashlib, os, sys
w, steady, want, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
path = os.path.join(w, "moving")
for r in range(rounds):
    block = bytes([r % 251]) * 65536
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.pwrite(fd, block, (r % 40) * 65536)
    os.close(fd)
    with open(steady, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    if got != want:
        print("round", r, "steady read", got, "want", want); sys.exit(1)
    with open(path, "rb") as f:
        f.seek((r % 40) * 65536); b = f.read(65536)
    if b != block:
        print("round", r, "read back a different block"); sys.exit(1)
print("ok")
"#;
    let want = steady_sum
        .split_whitespace()
        .next()
        .expect("sum")
        .to_string();
    let user = python3(true)
        .args([
            "-c",
            script,
            s(&m2.join("w")),
            s(&m2.join("w/steady")),
            &want,
            "200",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the user's program");
    let moving = w.join("moving");
    let mut migrations = 0;
    let mut rounds = 0;
    let mut user = user;
    let status = loop {
        if let Some(st) = user.try_wait().expect("wait") {
            break st;
        }
        assert!(rounds < 5000, "the user's program did not end");
        let pool = if rounds % 2 == 0 { "fast" } else { "slow" };
        rounds += 1;
        for f in [&steady, &moving] {
            if f.exists()
                && loom(&["migrate", "-q", "--retries", "0", "-p", pool, s(f)])
                    .status
                    .success()
            {
                migrations += 1;
            }
        }
    };
    let o = user.wait_with_output().expect("output");
    assert!(
        status.success(),
        "the user's program saw wrong bytes: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    eprintln!("{rounds} rounds, {migrations} migrations while the user's program ran");
    // Each file whole on one pool, its bytes as written.
    for f in [&steady, &moving] {
        let on = osts(&c, f);
        assert!(
            on.is_subset(&BTreeSet::from([0, 1])) || on.is_subset(&BTreeSet::from([2, 3])),
            "{f:?} on {on:?}"
        );
    }
    assert_eq!(sh(&format!("sha256sum < {}", s(&steady))), steady_sum);
    let expect: Vec<u8> = {
        let mut v = vec![0u8; 40 * 65536];
        for r in 0..200usize {
            v[(r % 40) * 65536..(r % 40 + 1) * 65536].fill((r % 251) as u8);
        }
        v
    };
    assert!(
        std::fs::read(&moving).expect("read") == expect,
        "the written file as written"
    );
    loom_ok(&["migrate", "-p", "fast", s(&moving)]);
    assert!(
        std::fs::read(m2.join("w/moving")).expect("read") == expect,
        "and after one more"
    );
    // A user migrates their own file, without the cluster key: through
    // the mount, which copies it as them.
    let to = if osts(&c, &steady).is_subset(&BTreeSet::from([0, 1])) {
        ("fast", BTreeSet::from([2, 3]))
    } else {
        ("slow", BTreeSet::from([0, 1]))
    };
    let o = as_nobody(&[s(&loom_bin()), "migrate", "-p", to.0, s(&steady)]);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        osts(&c, &steady).is_subset(&to.1),
        "the user's file on {}",
        to.0
    );
    assert_eq!(sh(&format!("sha256sum < {}", s(&steady))), steady_sum);
    let (code, report) = fsck(&c, &["--min-age", "0"]);
    assert_eq!(code, 0, "{report}");
}
