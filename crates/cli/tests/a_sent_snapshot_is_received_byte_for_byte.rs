//! Send and receive (issue #30, point 4): `loom send` of a snapshot and
//! `loom receive` on a second cluster recreate it byte for byte: names,
//! hard links, symbolic links, a FIFO, extended attributes, ACLs,
//! owners, modes, times, holes, file layouts (striping, components,
//! Data-on-MDT, compression) and directory placement (remote, striped,
//! default layouts). An incremental stream (renames, a swap, removals,
//! a name reused by another kind, a block rewritten in a large file)
//! carries only what changed, and brings the replica to the newer
//! snapshot. The replica's snapshots are taken as they arrive.
//!
//! Bad streams are refused: damaged, cut (then resumed by sending it
//! again), built on a base the receiver lacks, or sent to a non-empty
//! directory.
mod common;
use common::*;
use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8")
}

/// `getstripe` or `getdirstripe` output without what names particular
/// OSTs, objects or FIDs: what a layout is, not where it went.
fn layout_of(p: &Path, dir: bool) -> String {
    let out = if dir {
        [
            &["getdirstripe", s(p)][..],
            &["getdirstripe", "-D", s(p)],
            &["getstripe", s(p)],
            &["getstripe", "-Z", s(p)],
        ]
        .iter()
        .map(|a| loom_ok(a))
        .collect::<String>()
    } else {
        format!(
            "{}{}",
            loom_ok(&["getstripe", s(p)]),
            loom_ok(&["getstripe", "-Z", s(p)])
        )
    };
    out.lines()
        .map(|l| l.replace(s(p), "PATH"))
        .filter(|l| {
            let t = l.trim_start();
            !(t.starts_with("- ")
                || t.starts_with("l_ost_idx")
                || t.contains("obdidx")
                || t.contains("objid")
                || t.contains("fid")
                || t.contains("lmm_object")
                || t.starts_with("lmm_stripe_offset")
                || t.starts_with("lcme_id")
                || t.is_empty()
                || t.chars().next().is_some_and(|c| c.is_ascii_digit()))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `getfattr -d -m -` of `p`, without its first line (the path).
fn xattrs_of(p: &Path) -> String {
    let o = Command::new("getfattr")
        .args(["-h", "-d", "-m", "-", "-e", "hex", "--absolute-names"])
        .arg(p)
        .output()
        .expect("getfattr");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .skip(1)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `getfacl` of `p` (not following a symbolic link), without its
/// header's file name.
fn acl_of(p: &Path) -> String {
    let o = Command::new("getfacl")
        .args(["-P", "-p", "-n"])
        .arg(p)
        .output()
        .expect("getfacl");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.starts_with("# file:") && !l.is_empty())
        .collect::<Vec<_>>()
        .join(",")
}

/// Everything a tree holds that a byte-for-byte copy keeps, by path:
/// kind, mode, owner, size, modification time, link count, contents,
/// symbolic link targets, extended attributes and layouts; and which
/// names share an inode.
fn describe(root: &Path) -> (BTreeMap<String, String>, Vec<Vec<String>>) {
    let mut out = BTreeMap::new();
    let mut inodes: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let p = root.join(&rel);
        let md = std::fs::symlink_metadata(&p).expect("lstat");
        let ft = md.file_type();
        let key = rel.to_string_lossy().into_owned();
        let mut d = format!(
            "mode={:o} uid={} gid={} mtime={}.{}",
            md.mode(),
            md.uid(),
            md.gid(),
            md.mtime(),
            md.mtime_nsec()
        );
        if ft.is_dir() {
            let mut names: Vec<_> = std::fs::read_dir(&p)
                .expect("readdir")
                .map(|e| e.expect("entry").file_name())
                .filter(|n| n != ".loom-receive")
                .collect();
            names.sort();
            for n in names {
                stack.push(rel.join(n));
            }
            d += &format!(" dir {}", layout_of(&p, true));
        } else if ft.is_symlink() {
            d += &format!(" -> {:?}", std::fs::read_link(&p).expect("readlink"));
        } else if ft.is_fifo() {
            d += " fifo";
        } else {
            let bytes = std::fs::read(&p).expect("read");
            d += &format!(
                " size={} nlink={} sum={:08x} blocks>0={} {}",
                md.size(),
                md.nlink(),
                crc32(&bytes),
                md.blocks() > 0,
                layout_of(&p, false)
            );
            inodes.entry(md.ino()).or_default().push(key.clone());
        }
        d += &format!(" xattrs[{}] acl[{}]", xattrs_of(&p), acl_of(&p));
        out.insert(key, d);
    }
    let links = inodes.into_values().filter(|v| v.len() > 1).collect();
    (out, links)
}

fn crc32(b: &[u8]) -> u32 {
    // FNV-1a, enough to tell contents apart.
    b.iter().fold(0x811c_9dc5u32, |h, &x| {
        (h ^ u32::from(x)).wrapping_mul(0x0100_0193)
    })
}

/// The differences between two descriptions, for the assertion message.
fn compare(a: &Path, b: &Path) {
    let (da, la) = describe(a);
    let (db, lb) = describe(b);
    let mut diffs = Vec::new();
    for k in da
        .keys()
        .chain(db.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        if da.get(k) != db.get(k) {
            diffs.push(format!(
                "{k}:\n  sent:     {:?}\n  received: {:?}",
                da.get(k),
                db.get(k)
            ));
        }
    }
    assert!(diffs.is_empty(), "trees differ:\n{}", diffs.join("\n"));
    assert_eq!(la, lb, "hard links differ");
    assert!(!la.is_empty(), "the tree has hard links to compare");
}

/// `loom send ARGS > FILE`; the stream's size.
fn send(args: &[&str], file: &Path) -> u64 {
    let out = std::fs::File::create(file).expect("stream file");
    let o = Command::new(loom_bin())
        .arg("send")
        .args(args)
        .stdout(out)
        .stderr(Stdio::piped())
        .output()
        .expect("loom send");
    assert!(
        o.status.success(),
        "loom send {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("send: done"), "progress and summary: {err}");
    std::fs::metadata(file).expect("stat stream").len()
}

/// `loom receive DIR < FILE`: whether it succeeded, and what it said.
fn receive(dir: &Path, file: &Path) -> (bool, String) {
    let o = Command::new(loom_bin())
        .args(["receive", s(dir)])
        .stdin(std::fs::File::open(file).expect("stream"))
        .output()
        .expect("loom receive");
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn receive_ok(dir: &Path, file: &Path) -> String {
    let (ok, said) = receive(dir, file);
    assert!(ok, "loom receive: {said}");
    said
}

/// A file of `n` bytes that differ block to block.
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| ((i as u64 * 2_654_435_761) >> 13) as u8 ^ seed)
        .collect()
}

/// The first tree: every kind of thing a copy must keep.
fn populate(m: &Path) {
    let d = m.join("data");
    std::fs::create_dir(&d).expect("mkdir data");
    loom_ok(&["mkdir", "-i", "1", s(&m.join("remote"))]);
    loom_ok(&["setdirstripe", "-c", "2", s(&m.join("striped"))]);
    for i in 0..20 {
        std::fs::write(m.join("striped").join(format!("f{i}")), format!("{i}")).expect("write");
    }
    let wide = d.join("wide");
    loom_ok(&["setstripe", "-c", "2", "-S", "128K", s(&wide)]);
    std::fs::write(&wide, pattern(3 << 20, 1)).expect("write wide");
    std::fs::write(d.join("empty"), b"").expect("write empty");
    std::fs::write(d.join("small"), b"small file\n").expect("write small");
    // Holes: bytes at 0 and at 8 MiB only.
    sh(&format!(
        "printf head > {0} && printf tail | dd of={0} bs=1 seek=8388608 conv=notrunc status=none",
        s(&d.join("sparse"))
    ));
    std::fs::hard_link(d.join("small"), m.join("remote").join("small-link")).expect("link");
    std::os::unix::fs::symlink("../data/small", m.join("remote").join("sym")).expect("symlink");
    sh(&format!("mkfifo {}", s(&d.join("fifo"))));
    // Components with Data-on-MDT, and compression.
    let pfl = m.join("pfl");
    std::fs::create_dir(&pfl).expect("mkdir pfl");
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
        s(&pfl),
    ]);
    std::fs::write(pfl.join("dom"), pattern(200_000, 2)).expect("write dom");
    std::fs::write(pfl.join("tiny"), b"on the MDT").expect("write tiny");
    let z = m.join("zipped");
    std::fs::create_dir(&z).expect("mkdir zipped");
    loom_ok(&["setstripe", "--compress", "zstd", s(&z)]);
    std::fs::write(z.join("text"), "words words words\n".repeat(20_000)).expect("write text");
    // Owners, modes, ACLs, extended attributes, times.
    sh(&format!("chown 65534:65534 {0} && chmod 2750 {0}", s(&d)));
    sh(&format!("chmod 4755 {}", s(&d.join("small"))));
    sh(&format!("chmod 1777 {}", s(&m.join("remote"))));
    sh(&format!(
        "setfattr -n user.color -v blue {}",
        s(&d.join("small"))
    ));
    sh(&format!("setfattr -n user.bin -v 0x00ff00 {}", s(&wide)));
    sh(&format!("setfacl -m u:65534:rx,d:u:65534:rwx {}", s(&pfl)));
    sh(&format!("setfacl -m g:65534:r {}", s(&pfl.join("dom"))));
    sh(&format!(
        "touch -h -d '2001-02-03 04:05:06.789' {}",
        s(&m.join("remote").join("sym"))
    ));
    sh(&format!(
        "touch -d '1999-12-31 23:59:59.5' {}",
        s(&d.join("sparse"))
    ));
}

/// Changes between the first snapshot and the second.
fn change(m: &Path) {
    let d = m.join("data");
    // A block rewritten in the middle of the large file.
    sh(&format!(
        "printf XXXXXXXX | dd of={} bs=1 seek=1500000 conv=notrunc status=none",
        s(&d.join("wide"))
    ));
    // A swap of two files through a third name.
    std::fs::write(d.join("a"), b"A").ok();
    std::fs::rename(d.join("small"), d.join("tmp")).expect("rename");
    std::fs::rename(d.join("empty"), d.join("small")).expect("rename");
    std::fs::rename(d.join("tmp"), d.join("empty")).expect("rename");
    // A directory renamed under another, with a file moved out of it.
    std::fs::rename(m.join("pfl"), m.join("remote").join("pfl2")).expect("rename dir");
    std::fs::rename(m.join("remote").join("pfl2").join("tiny"), m.join("tiny")).expect("rename");
    // Removals, a new link, a link gone, a name reused as a directory.
    std::fs::remove_file(m.join("striped").join("f3")).expect("unlink");
    std::fs::remove_file(m.join("remote").join("small-link")).expect("unlink link");
    std::fs::hard_link(d.join("wide"), m.join("striped").join("wide-link")).expect("link");
    std::fs::remove_file(d.join("fifo")).expect("unlink fifo");
    std::fs::create_dir(d.join("fifo")).expect("mkdir in its place");
    std::fs::write(d.join("fifo").join("inside"), b"new").expect("write");
    // Shorter, attributes, an extended attribute changed and one removed.
    sh(&format!("truncate -s 4 {}", s(&d.join("sparse"))));
    sh(&format!("chmod 600 {}", s(&m.join("zipped").join("text"))));
    sh(&format!(
        "setfattr -n user.color -v red {}",
        s(&d.join("empty"))
    ));
    sh(&format!("setfattr -x user.bin {}", s(&d.join("wide"))));
}

#[test]
fn a_snapshot_sent_and_its_increment_are_received_byte_for_byte() {
    let a = Cluster::up(2, 2, &[]);
    let b = Cluster::up(2, 3, &[]);
    let streams = a.tmp.path().join("streams");
    std::fs::create_dir(&streams).expect("mkdir streams");
    populate(&a.mnt);
    loom_ok(&["snapshot", "create", s(&a.mnt), "s1"]);
    let full = streams.join("s1");
    let full_len = send(&[s(&a.mnt), "s1"], &full);

    // Root's tools: a user is told so, and gets no stream.
    std::fs::set_permissions(a.tmp.path(), std::fs::Permissions::from_mode(0o755))
        .expect("chmod tmp");
    for cmd in [
        format!("{} send {} s1 > /dev/null", s(&loom_bin()), s(&a.mnt)),
        format!("{} receive {} < /dev/null", s(&loom_bin()), s(&b.mnt)),
        format!(
            "{} replicate run {} {} --once",
            s(&loom_bin()),
            s(&a.mnt),
            s(&b.mnt)
        ),
    ] {
        let o = sh_as_nobody(&cmd).output().expect("setpriv");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("needs the mount's key"),
            "{cmd} as uid 65534: {err}"
        );
    }

    // Refused: not a stream, a damaged one, and into a non-empty directory.
    let into = b.mnt.join("replica");
    std::fs::create_dir(&into).expect("mkdir replica");
    let junk = streams.join("junk");
    std::fs::write(&junk, b"this is not a stream at all").expect("write junk");
    let (ok, said) = receive(&into, &junk);
    assert!(!ok && said.contains("not a loomfs send stream"), "{said}");
    let mut bytes = std::fs::read(&full).expect("read stream");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    let damaged = streams.join("damaged");
    std::fs::write(&damaged, &bytes).expect("write damaged");
    let busy = b.mnt.join("busy");
    std::fs::create_dir(&busy).expect("mkdir busy");
    std::fs::write(busy.join("x"), b"x").expect("write x");
    let (ok, said) = receive(&busy, &full);
    assert!(!ok && said.contains("is not empty"), "{said}");

    // A cut stream stops, and the same stream sent again resumes it.
    let (ok, said) = receive(&into, &damaged);
    assert!(!ok && said.contains("damaged"), "{said}");
    let said = receive_ok(&into, &full);
    assert!(said.contains("resumed at record"), "{said}");
    compare(&a.mnt, &into);
    // Holes stay holes: what the OSTs hold of the sparse file.
    let sparse = into.join("data/sparse");
    let held: u64 = b
        .object_files(s(&sparse))
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.blocks() * 512))
        .sum();
    let size = std::fs::metadata(&sparse).expect("stat sparse").size();
    assert!(
        size > 8 << 20 && held < 1 << 20,
        "holes stay holes: {size} bytes held in {held} bytes of objects"
    );
    let listed = loom_ok(&["snapshot", "list", s(&b.mnt)]);
    assert!(
        listed.contains("s1"),
        "the replica's own snapshot: {listed}"
    );

    // The increment.
    change(&a.mnt);
    loom_ok(&["snapshot", "create", s(&a.mnt), "s2"]);
    let inc = streams.join("s1-s2");
    let inc_len = send(&["--from", "s1", s(&a.mnt), "s2"], &inc);
    assert!(
        inc_len * 10 < full_len,
        "the increment ({inc_len} bytes) carries only what changed, the whole is {full_len}"
    );
    // Without its base, it is refused.
    let fresh = b.mnt.join("fresh");
    std::fs::create_dir(&fresh).expect("mkdir fresh");
    let (ok, said) = receive(&fresh, &inc);
    assert!(!ok && said.contains("builds on snapshot s1"), "{said}");
    // Cut short in its names, again later, and in its data: each receive
    // resumes the last and runs its pass's steps again, then the whole
    // stream finishes it.
    let cut = streams.join("cut");
    let part = std::fs::read(&inc).expect("read increment");
    for at in [300, 700, 1200, part.len() / 2, part.len() - 40] {
        std::fs::write(&cut, &part[..at.min(part.len() - 1)]).expect("write cut");
        let (ok, said) = receive(&into, &cut);
        assert!(!ok && said.contains("ends early"), "cut at {at}: {said}");
    }
    let said = receive_ok(&into, &inc);
    assert!(said.contains("resumed at record"), "{said}");
    compare(&a.mnt, &into);
    let listed = loom_ok(&["snapshot", "list", s(&b.mnt)]);
    assert!(listed.contains("s2"), "{listed}");
    // Received once: the same stream again changes nothing.
    receive_ok(&into, &inc);
    compare(&a.mnt, &into);
    let (code, out) = fsck(&b, &[]);
    assert_eq!(code, 0, "fsck of the replica's file system: {out}");
}
