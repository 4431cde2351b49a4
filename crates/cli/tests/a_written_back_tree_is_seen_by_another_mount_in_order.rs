//! Issue #32, points 1 and 2, through real mounts: a mount with
//! `--write-back` answers what a user does in a directory it made (files
//! with their bytes, directories, symlinks, chmod, utimens, truncate,
//! removals) and sends it in batches; another mount's next access to the
//! directory sees all of it, as it was left, at once (one recall, no
//! wait). Run as uid 65534; root's chown in the user's directory is sent
//! as root's. The MDTs' per-client counters show the writer sent batches,
//! not one create per file.
mod common;
use common::*;
use serde_json::Value;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The operations the MDTs served the mount that took write-back leases,
/// summed over the MDTs.
fn writer_ops(mnt: &Path) -> HashMap<String, u64> {
    let stats: Value = serde_json::from_str(&loom_ok(&["stats", s(mnt), "--json"])).expect("JSON");
    let mut out = HashMap::new();
    let mut writers = std::collections::HashSet::new();
    for target in stats.as_array().expect("targets") {
        for client in target["clients"].as_array().into_iter().flatten() {
            let ops = client["ops"].as_object().expect("ops");
            if ops.contains_key("take_write_back") {
                writers.insert(client["id"].as_str().expect("id").to_string());
                for (op, n) in ops {
                    *out.entry(op.clone()).or_insert(0) += n.as_u64().expect("count");
                }
            }
        }
    }
    assert_eq!(writers.len(), 1, "one writing mount: {writers:?}");
    out
}

#[test]
fn a_written_back_tree_is_seen_by_another_mount_in_order() {
    let mut c = Cluster::up(2, 2, &[]);
    let shared = c.open_dir("shared");
    let wb = c.second_mount_with("wb", &["--write-back"]);
    let (mine, theirs) = (wb.join("shared/t"), shared.join("t"));

    // As a user: a tree made, changed and partly removed again.
    let script = format!(
        "set -e; mkdir {t}; cd {t}
         for i in $(seq 1 60); do printf \"v1-$i\" > f$i; done
         mkdir -p sub/deeper; printf leaf > sub/deeper/leaf
         ln -s f1 link
         chmod 0640 f2
         touch -d @1000000000 f3
         truncate -s 3 f4
         rm f5; printf again > f5
         rm f6
         rm sub/deeper/leaf; rmdir sub/deeper
         mkdir gone; rmdir gone
         head -c 1100000 /dev/zero | tr '\\0' z > big
         touch sub/x; rmdir sub 2>/dev/null && exit 10
         ls -a | wc -l",
        t = s(&mine)
    );
    let o = sh_as_nobody(&script).output().expect("sh");
    assert!(
        o.status.success(),
        "the user's script: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // 60 files (f6 gone), link, sub, big, ".", "..".
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "64");
    let before = writer_ops(&c.mnt);
    assert_eq!(
        before.get("create"),
        None,
        "no create went alone: {before:?}"
    );
    // Once all is sent, the writer still lists the directory itself
    // (every name known, attributes under the leases its MDT granted
    // with its answers), as the other mount will from the MDT below.
    // Names, sizes, modes, owners, links and mtimes to the nanosecond;
    // and the directories' own mtimes, ctimes and links. A directory's
    // times are those the writer showed (each `MakeAt` carries them), not
    // its MDT's clock when it applied them.
    let listing = |dir: &Path| {
        let o = sh_as_nobody(&format!(
            "cd {} && ls -ln --time-style=+%s.%N && stat -c '%n %.9Y %.9Z %h' . sub",
            s(dir)
        ))
        .output()
        .expect("ls");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // What the writer showed while it held everything (some may have
    // been sent by then; nothing is the same only by luck: times differ
    // by the microsecond).
    let shown_before = listing(&mine);
    let fsync = format!(
        "python3 -c 'import os, sys; os.fsync(os.open(sys.argv[1], os.O_RDONLY))' {}",
        s(&mine)
    );
    assert!(sh_as_nobody(&fsync).status().expect("fsync").success());
    let sent = writer_ops(&c.mnt);
    let writers_listing = listing(&mine);
    let listed = writer_ops(&c.mnt);
    assert_eq!(
        listed.get("readdir"),
        sent.get("readdir"),
        "listed by the writer itself"
    );

    // The other mount, at once: everything, as it was left.
    let mut names: Vec<String> = std::fs::read_dir(&theirs)
        .expect("list on the other mount")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = (1..=60)
        .filter(|i| *i != 6)
        .map(|i| format!("f{i}"))
        .collect();
    want.extend(["big", "link", "sub"].map(String::from));
    want.sort();
    assert_eq!(names, want);
    assert_eq!(listing(&theirs), writers_listing);
    assert_eq!(
        writers_listing, shown_before,
        "the writer shows the same before and after sending"
    );
    let read = |n: &str| std::fs::read_to_string(theirs.join(n)).expect("read");
    assert_eq!(read("f1"), "v1-1");
    assert_eq!(read("f60"), "v1-60");
    assert_eq!(read("f4"), "v1-");
    assert_eq!(read("f5"), "again");
    assert_eq!(
        read("big").len(),
        1_100_000,
        "past what a new file keeps here"
    );
    assert!(read("big").bytes().all(|b| b == b'z'));
    let meta = |n: &str| std::fs::symlink_metadata(theirs.join(n)).expect("stat");
    assert_eq!(meta("f2").mode() & 0o7777, 0o640);
    assert_eq!(meta("f3").mtime(), 1_000_000_000);
    assert_eq!((meta("f7").uid(), meta("f7").gid()), (65534, 65534));
    assert_eq!(
        std::fs::read_link(theirs.join("link")).expect("readlink"),
        Path::new("f1")
    );
    assert!(!theirs.join("sub/deeper").exists());
    assert!(theirs.join("sub/x").exists());
    assert_eq!(meta("sub").nlink(), 2);
    assert_eq!(meta(".").nlink(), 3, "t holds one directory");
    let after = writer_ops(&c.mnt);
    assert!(after["batch"] >= 1, "sent in batches: {after:?}");
    assert!(
        after["batch"] < 20,
        "about 70 changes in a few batches: {after:?}"
    );
    assert_eq!(after.get("create"), None, "{after:?}");

    // The writer goes on in a new directory: the reader sees each change
    // at its next access, also a change made after its last look.
    let (mine2, theirs2) = (wb.join("shared/t2"), shared.join("t2"));
    let o = sh_as_nobody(&format!(
        "mkdir {d} && cd {d} && for i in $(seq 1 20); do echo $i > n$i; done",
        d = s(&mine2)
    ))
    .output()
    .expect("sh");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_dir(&theirs2).expect("list").count(), 20);
    let o = sh_as_nobody(&format!("echo 21 > {}/n21", s(&mine2)))
        .output()
        .expect("sh");
    assert!(o.status.success());
    assert_eq!(
        std::fs::read_to_string(theirs2.join("n21")).expect("n21"),
        "21\n"
    );

    // Permissions hold where the writer answers: the user may not give a
    // file away; root may, in the user's directory, and that is sent too.
    let (mine3, theirs3) = (wb.join("shared/t3"), shared.join("t3"));
    let o = sh_as_nobody(&format!(
        "mkdir {d} && echo a > {d}/a && echo b > {d}/b && ! chown 0 {d}/a 2>/dev/null && chmod 0600 {d}/a",
        d = s(&mine3)
    ))
    .output()
    .expect("sh");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    sh(&format!("chown 0:0 {}/b", s(&mine3)));
    assert_eq!(std::fs::metadata(theirs3.join("b")).expect("b").uid(), 0);
    assert_eq!(
        std::fs::metadata(theirs3.join("a")).expect("a").uid(),
        65534
    );
    assert_eq!(
        std::fs::metadata(theirs3.join("a")).expect("a").mode() & 0o777,
        0o600
    );
    // The user may read root's file and no longer write it.
    let o = as_nobody(&["cat", s(&theirs3.join("b"))]);
    assert!(o.status.success(), "b is 0644");
    let o = sh_as_nobody(&format!("echo x >> {}/b", s(&mine3)))
        .output()
        .expect("sh");
    assert!(!o.status.success(), "b is root's now, 0644");

    // fsck: the namespace and the objects agree.
    let (code, out) = fsck(&c, &[]);
    assert_eq!(code, 0, "{out}");
}

/// Four writers at once in their own directories use several FID runs
/// (4096 FIDs each) of one grant: every file is made, none refused, and
/// the other mount sees them all.
#[test]
fn concurrent_writers_share_the_mounts_fid_grants() {
    let mut c = Cluster::up(1, 1, &[]);
    let wb = c.second_mount_with("wb", &["--write-back"]);
    let prog = r#"
import os, sys, threading
root = sys.argv[1]
def work(t):
    d = os.path.join(root, f"w{t}")
    os.mkdir(d)
    for i in range(3000):
        open(os.path.join(d, f"f{i}"), "w").close()
ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
fd = os.open(root, os.O_RDONLY)
os.fsync(fd)
print("done")
"#;
    let o = std::process::Command::new("python3")
        .arg("-c")
        .arg(prog)
        .arg(&wb)
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for t in 0..4 {
        let n = std::fs::read_dir(c.mnt.join(format!("w{t}")))
            .expect("list")
            .count();
        assert_eq!(n, 3000, "w{t} on the other mount");
    }
    let ops = writer_ops(&c.mnt);
    assert!(ops["grant_fids"] >= 3, "several runs: {ops:?}");
}

/// The batches MDT0 served, all clients.
fn mdt0_batches(mnt: &Path) -> u64 {
    let stats: Value =
        serde_json::from_str(&loom_ok(&["stats", s(mnt), "--target", "mdt0", "--json"]))
            .expect("JSON");
    let ops = stats[0]["ops"].as_array().expect("ops");
    ops.iter()
        .find(|o| o["op"] == "batch")
        .map_or(0, |o| o["samples"].as_u64().expect("samples"))
}

#[test]
fn a_file_on_its_way_to_its_objects_reads_whole_where_it_was_written() {
    // A new file's first bytes go to its OST after its MDT made it (with
    // size 0): in between, the writing mount still answers it itself.
    let mut c = Cluster::up(1, 1, &[]);
    let wb = c.second_mount_with("wb", &["--write-back"]);
    // A file made the usual way first (the root is not written back): the
    // MDT then holds objects made ahead on the OST, and makes the next
    // file without it; and the OST's answer to its write gives the mount
    // the space grant that new files' first bytes are kept under.
    std::fs::write(wb.join("warm"), "x").expect("write");
    let d = wb.join("d");
    std::fs::create_dir(&d).expect("mkdir");
    std::fs::write(d.join("a"), "first bytes").expect("write");
    std::fs::write(d.join("b"), "b's bytes").expect("write");
    let before = mdt0_batches(&c.mnt);
    let ost = Stopped::new(c.pid("ost0"));
    // An fsync of b sends both (not of the directory: the kernel holds
    // a directory's lock through its fsync, and lookups in it wait).
    let b = d.join("b");
    let syncing = std::thread::spawn(move || {
        std::fs::File::open(&b)
            .and_then(|f| f.sync_all())
            .expect("fsync of b")
    });
    // The MDT made it; its bytes wait for the stopped OST.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while mdt0_batches(&c.mnt) == before {
        assert!(std::time::Instant::now() < deadline, "no batch sent");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let file = d.join("a");
    let read = within(move || std::fs::read_to_string(file));
    drop(ost);
    syncing.join().expect("fsync thread");
    let read = read.expect("the read waited for the OST");
    assert_eq!(read.expect("read"), "first bytes");
    assert_eq!(
        std::fs::read_to_string(c.mnt.join("d/a")).expect("read on the other mount"),
        "first bytes"
    );
}

/// While another mount's access recalls a directory's lease and the
/// batch of what the writing mount made there is on its way (held up 3 s
/// at the MDT by `batch:delay`), the writing mount still finds every
/// name it made: a lookup it no longer answers itself waits for the
/// batch instead of asking the MDT first, which would answer ENOENT.
#[test]
fn names_made_here_are_found_here_while_their_batch_is_on_its_way() {
    let mut c = Cluster::up(1, 1, &[]);
    c.kill9("mdt0");
    let _mdt0 = c.start_armed("mdt0", "batch:delay", 1);
    // No kernel cache of names: every lookup reaches the mount.
    let wb = c.second_mount_with("wb", &["--write-back", "--attr-timeout", "0"]);
    let mine = wb.join("d");
    std::fs::create_dir(&mine).expect("mkdir");
    const N: usize = 20;
    for i in 0..N {
        std::fs::write(mine.join(format!("f{i}")), "x").expect("create");
    }
    let theirs = c.mnt.join("d");
    let listing = std::thread::spawn(move || std::fs::read_dir(theirs).map(|d| d.count()));
    let mut rounds = 0;
    while !listing.is_finished() {
        for i in 0..N {
            if let Err(e) = std::fs::metadata(mine.join(format!("f{i}"))) {
                panic!("f{i} not found on the mount that made it (round {rounds}): {e}");
            }
        }
        rounds += 1;
    }
    let seen = listing.join().expect("the listing thread").expect("list");
    assert_eq!(seen, N, "the other mount sees every name");
    assert!(rounds > 0, "looked up while the batch was on its way");
}
