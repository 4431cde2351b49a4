//! Snapshots (issue #30): `loom snapshot create` while writers run and
//! renames cross MDTs. Each snapshot, mounted read-only, is a state that
//! existed:
//! - every file striped over both OSTs, on both MDTs, holds a gap-free
//!   prefix of the numbered records its writer appended;
//! - every entry renamed back and forth between a directory on MDT0 and
//!   one on MDT1 sits in exactly one of them;
//! - permissions hold as uid 65534 sees them;
//! - nothing can be changed in it.
//!
//! Then: `list` shows what each holds, `destroy` frees it, and bad names,
//! taken names and unknown snapshots get clear errors.
mod common;
use common::*;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Record `n` of a writer's stream.
fn record(n: u64) -> String {
    format!("{n:08}\n")
}

/// Whether `bytes` are records 0, 1, 2, ... in order, whole but for the
/// last, with nothing but zeros after them (an append whose range was
/// reserved and whose bytes had not landed: the file's end as it was).
fn gap_free_prefix(bytes: &[u8]) -> Result<u64, String> {
    let end = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    let text = std::str::from_utf8(&bytes[..end]).map_err(|e| e.to_string())?;
    let mut n = 0u64;
    let mut rest = text;
    while rest.len() >= 9 {
        let want = record(n);
        if !rest.starts_with(&want) {
            return Err(format!("record {n} is {:?}", &rest[..9]));
        }
        rest = &rest[9..];
        n += 1;
    }
    if !record(n).starts_with(rest) {
        return Err(format!("a torn record {rest:?} after {n}"));
    }
    Ok(n)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

#[test]
fn snapshots_taken_under_load_are_states_that_existed() {
    let mut c = Cluster::up(2, 2, &[]);
    std::fs::set_permissions(c.tmp.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod tmp");
    let mnt = c.mnt.clone();
    let (d0, d1) = (mnt.join("d0"), mnt.join("d1"));
    std::fs::create_dir(&d0).expect("mkdir d0");
    loom_ok(&["mkdir", "-i", "1", s(&d1)]);
    for d in [&d0, &d1] {
        loom_ok(&["setstripe", "-c", "2", "-S", "64K", s(d)]);
    }
    // Root's private directory, and a public file in it.
    let private = mnt.join("private");
    std::fs::create_dir(&private).expect("mkdir private");
    std::fs::write(private.join("secret"), b"root's").expect("write secret");
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::write(mnt.join("public"), b"anyone's").expect("write public");
    for i in 0..8 {
        std::fs::write(d0.join(format!("x{i}")), format!("entry {i}")).expect("write x");
    }

    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    let logs: Vec<PathBuf> = vec![
        d0.join("log0"),
        d0.join("log1"),
        d1.join("log2"),
        d1.join("log3"),
    ];
    for log in logs.clone() {
        let stop = stop.clone();
        workers.push(std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .expect("open a log");
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) || n < 200 {
                f.write_all(record(n).as_bytes()).expect("append");
                n += 1;
            }
            n
        }));
    }
    {
        let (stop, d0, d1) = (stop.clone(), d0.clone(), d1.clone());
        workers.push(std::thread::spawn(move || {
            let mut moves = 0u64;
            while !stop.load(Ordering::Relaxed) || moves < 40 {
                let i = moves % 8;
                let (from, to) = match (moves / 8) % 2 {
                    0 => (&d0, &d1),
                    _ => (&d1, &d0),
                };
                std::fs::rename(from.join(format!("x{i}")), to.join(format!("x{i}")))
                    .expect("rename across MDTs");
                moves += 1;
            }
            moves
        }));
    }
    let names = ["s1", "s2", "s3"];
    for name in names {
        let out = loom_ok(&["snapshot", "create", s(&mnt), name]);
        assert!(out.contains(&format!("snapshot {name}")), "{out}");
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("a worker");
    }

    // Each snapshot, mounted, is a state that existed.
    let mut lengths = Vec::new();
    for name in names {
        let m = c.second_mount_with(&format!("snap-{name}"), &["--snapshot", name]);
        let mut total = 0;
        for log in &logs {
            let rel = log.strip_prefix(&mnt).expect("under the mount");
            let bytes = std::fs::read(m.join(rel)).unwrap_or_default();
            let n = gap_free_prefix(&bytes)
                .unwrap_or_else(|e| panic!("{name}: {}: {e}", rel.display()));
            total += n;
        }
        lengths.push(total);
        for i in 0..8 {
            let x = format!("x{i}");
            let here = [m.join("d0").join(&x), m.join("d1").join(&x)]
                .iter()
                .filter(|p| p.exists())
                .count();
            assert_eq!(here, 1, "{name}: {x} is in {here} places");
        }
        // Read-only, and permissions hold.
        let e = std::fs::write(m.join("new"), b"x").expect_err("a write in a snapshot");
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{name}");
        let e = std::fs::remove_file(m.join("public")).expect_err("a removal in a snapshot");
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{name}");
        let nobody = |cmd: String| {
            std::process::Command::new("setpriv")
                .args([
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    "sh",
                    "-c",
                    &cmd,
                ])
                .output()
                .expect("setpriv")
        };
        let o = nobody(format!("cat {}", m.join("public").display()));
        assert!(o.status.success(), "{name}: nobody reads public");
        assert_eq!(o.stdout, b"anyone's");
        let o = nobody(format!("cat {}", m.join("private/secret").display()));
        assert!(
            !o.status.success(),
            "{name}: nobody read root's private file"
        );
        assert_eq!(
            std::fs::read(m.join("private/secret")).expect("root reads it"),
            b"root's"
        );
    }
    assert!(
        lengths.windows(2).all(|w| w[0] <= w[1]),
        "later snapshots hold more records: {lengths:?}"
    );

    // What each holds, then destroyed.
    let list = loom_ok(&["snapshot", "list", s(&mnt)]);
    for name in names {
        assert!(list.contains(name), "{list}");
    }
    // Errors: a taken name, a bad name, an unknown snapshot.
    let o = loom(&["snapshot", "create", s(&mnt), "s1"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("File exists"));
    let o = loom(&["snapshot", "create", s(&mnt), "no/slash"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("a snapshot's name"));
    let o = loom(&["snapshot", "destroy", s(&mnt), "nonesuch"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("No such file"));
    let o = loom(&[
        "mount",
        &format!("{}:/loom", c.mgs()),
        s(&c.tmp.path().join("nowhere")),
        "--key-file",
        s(&c.state.join("client.key")),
        "--snapshot",
        "nonesuch",
        "--foreground",
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no snapshot \"nonesuch\""),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = as_nobody(&["snapshot", "create", s(&mnt), "mine"]);
    assert!(!o.status.success(), "a user took a snapshot");
}

/// Space: a snapshot holds what was overwritten since, chunk by chunk, and
/// destroying it frees that.
#[test]
fn a_snapshot_holds_what_changed_and_destroying_it_frees_that() {
    let mut c = Cluster::up(1, 2, &[]);
    let mnt = c.mnt.clone();
    let big = mnt.join("big");
    let data: Vec<u8> = (0..16u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&big, &data).expect("write 16 MiB");
    loom_ok(&["snapshot", "create", s(&mnt), "before"]);
    let holds = |list: &str| -> u64 {
        let line = list
            .lines()
            .find(|l| l.starts_with("before"))
            .unwrap_or_else(|| panic!("{list}"));
        let v = line.split_whitespace().nth(3).expect("HOLDS");
        let (num, unit) = v.split_at(v.len() - 1);
        let mult = match unit {
            "K" => 1u64 << 10,
            "M" => 1 << 20,
            "G" => 1 << 30,
            _ => panic!("{v}"),
        };
        (num.parse::<f64>().expect("a number") * mult as f64) as u64
    };
    let at_first = holds(&loom_ok(&["snapshot", "list", s(&mnt)]));
    assert!(at_first < 1 << 20, "a new snapshot holds {at_first} bytes");
    // 2 MiB overwritten: about 2 MiB held, not 16.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&big)
        .expect("open");
    std::os::unix::fs::FileExt::write_all_at(&f, &vec![7u8; 2 << 20], 4 << 20).expect("overwrite");
    f.sync_all().expect("fsync");
    let after = holds(&loom_ok(&["snapshot", "list", s(&mnt)]));
    let df = loom_ok(&["df", s(&mnt)]);
    assert!(df.contains("1 snapshots hold"), "{df}");
    assert!(
        (2 << 20..4 << 20).contains(&after),
        "2 MiB overwritten, the snapshot holds {after} bytes"
    );
    // The snapshot reads as the file was; the file reads as it is.
    let m = c.second_mount_with("snap-before", &["--snapshot", "before"]);
    assert!(std::fs::read(m.join("big")).expect("read the snapshot") == data);
    let now = std::fs::read(&big).expect("read");
    assert!(now[4 << 20..6 << 20].iter().all(|b| *b == 7));
    assert!(now[..4 << 20] == data[..4 << 20]);
    let o = std::process::Command::new("fusermount3")
        .args(["-u", s(&m)])
        .status()
        .expect("fusermount3");
    assert!(o.success());
    loom_ok(&["snapshot", "destroy", s(&mnt), "before"]);
    assert!(!loom_ok(&["snapshot", "list", s(&mnt)]).contains("before"));
    for t in ["ost0", "ost1", "mdt0"] {
        let dir = c.state.join("targets").join(t).join("snapshots");
        let left: Vec<_> = std::fs::read_dir(&dir)
            .map(|rd| rd.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{t} keeps {left:?}");
    }
    assert_eq!(std::fs::read(&big).expect("read").len(), 16 << 20);
}

/// `loom snapshot diff`: what changed from one snapshot to another, or to
/// the file system now, as `zfs diff` says it.
#[test]
fn a_diff_tells_what_changed_between_snapshots() {
    let c = Cluster::up(2, 1, &[]);
    let mnt = c.mnt.clone();
    for f in ["kept", "changed", "gone"] {
        std::fs::write(mnt.join(f), f).expect("write");
    }
    std::fs::create_dir(mnt.join("d")).expect("mkdir d");
    loom_ok(&["mkdir", "-i", "1", s(&mnt.join("e"))]);
    std::fs::write(mnt.join("d/moved"), b"m").expect("write");
    loom_ok(&["snapshot", "create", s(&mnt), "s1"]);
    std::fs::write(mnt.join("changed"), b"changed again").expect("rewrite");
    std::fs::remove_file(mnt.join("gone")).expect("rm");
    std::fs::rename(mnt.join("d/moved"), mnt.join("e/moved-here")).expect("mv across MDTs");
    std::fs::write(mnt.join("fresh"), b"f").expect("write");
    loom_ok(&["snapshot", "create", s(&mnt), "s2"]);
    let lines = |out: String| -> std::collections::BTreeSet<String> {
        out.lines().map(str::to_string).collect()
    };
    let want: std::collections::BTreeSet<String> = [
        "M\t/changed",
        "M\t/d",
        "M\t/e",
        "R\t/d/moved -> /e/moved-here",
        "+\t/fresh",
        "-\t/gone",
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    assert_eq!(
        lines(loom_ok(&["snapshot", "diff", s(&mnt), "s1", "s2"])),
        want
    );
    // Against the file system now.
    std::fs::write(mnt.join("later"), b"l").expect("write");
    assert_eq!(
        lines(loom_ok(&["snapshot", "diff", s(&mnt), "s2"])),
        ["+\t/later".to_string()].into_iter().collect()
    );
    let o = loom(&["snapshot", "diff", s(&mnt), "nonesuch"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no snapshot \"nonesuch\""));
}

/// What snapshots hold of layouts: a file whose first 64 KiB live on the
/// MDT (Data-on-MDT), the next on one OST and the rest on both (a
/// progressive layout), and a directory striped over both MDTs, read back
/// from the snapshot as they were after the file was overwritten and the
/// directory's names changed.
#[test]
fn data_on_mdt_progressive_layouts_and_striped_directories_are_in_snapshots() {
    let mut c = Cluster::up(2, 2, &[]);
    let mnt = c.mnt.clone();
    let pfl = mnt.join("pfl");
    std::fs::create_dir(&pfl).expect("mkdir pfl");
    loom_ok(&[
        "setstripe",
        "-E",
        "64K",
        "-L",
        "mdt",
        "-E",
        "1M",
        "-c",
        "1",
        "-E",
        "-1",
        "-c",
        "-1",
        s(&pfl),
    ]);
    let data: Vec<u8> = (0..3u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(pfl.join("f"), &data).expect("write f");
    let wide = mnt.join("wide");
    loom_ok(&["mkdir", "-c", "2", s(&wide)]);
    for i in 0..20 {
        std::fs::write(wide.join(format!("n{i}")), format!("name {i}")).expect("write");
    }
    loom_ok(&["snapshot", "create", s(&mnt), "layouts"]);
    std::fs::write(pfl.join("f"), vec![0u8; 3 << 20]).expect("overwrite f");
    for i in 0..10 {
        std::fs::remove_file(wide.join(format!("n{i}"))).expect("rm");
        std::fs::write(wide.join(format!("new{i}")), b"new").expect("write");
    }
    let m = c.second_mount_with("snap-layouts", &["--snapshot", "layouts"]);
    assert!(
        std::fs::read(m.join("pfl/f")).expect("read f") == data,
        "f as it was"
    );
    let mut names: Vec<String> = std::fs::read_dir(m.join("wide"))
        .expect("list wide")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = (0..20).map(|i| format!("n{i}")).collect();
    want.sort();
    assert_eq!(names, want, "the striped directory as it was");
    for i in 0..20 {
        assert_eq!(
            std::fs::read(m.join(format!("wide/n{i}"))).expect("read"),
            format!("name {i}").as_bytes()
        );
    }
}

/// Bytes of `len` that compress as text does.
fn text(len: usize) -> Vec<u8> {
    let words = ["snapshot ", "chunk ", "object ", "delta ", "kept "];
    let mut out = Vec::with_capacity(len);
    let mut i = 0usize;
    while out.len() < len {
        out.extend_from_slice(words[i * 7 % 5].as_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

#[test]
fn compressed_and_checksummed_data_reads_back_from_snapshots() {
    let mut c = Cluster::up(1, 2, &[]);
    let mnt = c.mnt.clone();
    let (z, p) = (mnt.join("z"), mnt.join("p"));
    std::fs::create_dir(&z).expect("mkdir z");
    std::fs::create_dir(&p).expect("mkdir p");
    loom_ok(&["setstripe", "-c", "1", "--compress", "zstd", s(&z)]);
    loom_ok(&["setstripe", "-c", "1", s(&p)]);
    let (zt, pf) = (z.join("t"), p.join("f"));
    let old_text = text(300_000);
    let old_data: Vec<u8> = (0..262_144u32).map(|i| ((i * 31) >> 3) as u8).collect();
    std::fs::write(&zt, &old_text).expect("write t");
    std::fs::write(&pf, &old_data).expect("write f");
    loom_ok(&["snapshot", "create", s(&mnt), "c1"]);
    // Overwritten in place after it: the snapshot keeps the old bytes.
    for f in [&zt, &pf] {
        sh(&format!(
            "printf NEWBYTES | dd of={} bs=1 seek=100 conv=notrunc status=none",
            s(f)
        ));
    }
    let snap = mnt.join(".snapshots/c1");
    assert_eq!(std::fs::read(snap.join("z/t")).expect("read t"), old_text);
    assert_eq!(std::fs::read(snap.join("p/f")).expect("read f"), old_data);
    assert_eq!(
        &std::fs::read(&pf).expect("read live f")[100..108],
        b"NEWBYTES"
    );
    // A byte flipped in what the OST kept for the snapshot is caught by
    // its checksum (read by a second mount, whose kernel has no pages of
    // it), and the live file is untouched.
    let (ost, oid) = c.stripes(s(&pf))[0];
    let kept = c.state.join(format!(
        "targets/ost{ost}/snapshots/1/{:02x}/{oid}",
        oid % 256
    ));
    let mut bytes = std::fs::read(&kept).expect("the kept chunk");
    bytes[150] ^= 0x20;
    std::fs::write(&kept, &bytes).expect("flip a byte");
    let m2 = c.second_mount("m2");
    let e = std::fs::read(m2.join(".snapshots/c1/p/f")).expect_err("a flipped byte is EIO");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert_eq!(
        std::fs::read(m2.join("p/f")).expect("the live file").len(),
        old_data.len()
    );
    assert_eq!(
        std::fs::read(m2.join(".snapshots/c1/z/t")).expect("the compressed file, intact"),
        old_text
    );
}
