//! Issue #11: a byte flipped inside an object file on an OST's disk is
//! never handed to an application. A user's read of it gets EIO, the OST
//! logs the target, object and offset and counts it, and `loom scrub`
//! lists the block and exits non-zero; it also finds a bad block nobody
//! has read. Once the files are rewritten or removed, scrub passes again.
mod common;
use common::*;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::Path;

/// Flip one bit of `path` at `at`, as a failing disk would.
fn flip(path: &Path, at: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open the object file");
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).expect("read the byte");
    f.write_all_at(&[b[0] ^ 0x20], at).expect("flip it");
}

fn scrub(args: &[&str]) -> (bool, String) {
    let o = loom(&[&["scrub"], args].concat());
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    (o.status.success(), format!("{out}{err}"))
}

#[test]
fn a_flipped_byte_on_an_ost_is_eio_and_scrub_reports_it() {
    let mut c = Cluster::up(1, 2, &[]);
    let dir = c.open_dir("u");
    loom_ok(&[
        "setstripe",
        "-c",
        "2",
        "-S",
        "64K",
        dir.to_str().expect("utf8"),
    ]);
    let src = c.tmp.path().join("src.bin");
    let data: Vec<u8> = (0..400_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 11) as u8)
        .collect();
    std::fs::write(&src, &data).expect("source");
    std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o644)).expect("chmod src");
    for name in ["read", "unread", "good"] {
        let to = dir.join(name);
        let o = as_nobody(&[
            "dd",
            &format!("if={}", src.display()),
            &format!("of={}", to.display()),
            "bs=64k",
            "conv=fsync",
            "status=none",
        ]);
        assert!(
            o.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let (clean, out) = scrub(&[c.mnt.to_str().expect("utf8")]);
    assert!(clean, "a clean file system fails scrub:\n{out}");

    // Stripe 1 of "read" is its object on the second OST of its layout;
    // file bytes 64K..128K are that object's bytes 0..64K, 192K..256K its
    // bytes 64K..128K: flip one of its bytes 69632..73728 (a 4 KiB block).
    let stripes = c.stripes(dir.join("read").to_str().expect("utf8"));
    let (ost, oid) = stripes[1];
    flip(&c.object_file(ost, oid), 70_000);
    let (uost, uoid) = c.stripes(dir.join("unread").to_str().expect("utf8"))[0];
    flip(&c.object_file(uost, uoid), 123);

    // A user reading through another mount (nothing cached there).
    let m2 = c.second_mount("m2");
    std::fs::set_permissions(&m2, std::fs::Permissions::from_mode(0o755)).ok();
    let bad = m2.join("u/read");
    let o = as_nobody(&["cat", bad.to_str().expect("utf8")]);
    assert!(!o.status.success(), "the corrupt file read back whole");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("Input/output error"), "cat said: {err}");
    assert!(
        // The bad block is the object's bytes 69632..73728: file bytes
        // 200704..204800.
        o.stdout.len() <= 200_704,
        "bytes past the bad block were returned ({} bytes)",
        o.stdout.len()
    );
    assert_eq!(
        o.stdout[..],
        data[..o.stdout.len()],
        "the bytes before the bad block"
    );
    let good = as_nobody(&["cat", m2.join("u/good").to_str().expect("utf8")]);
    assert!(
        good.status.success() && good.stdout == data,
        "the good file"
    );

    // Logged with target, object and offset; counted; listed by scrub.
    let log = std::fs::read_to_string(c.state.join(format!("logs/ost{ost}.log"))).expect("OST log");
    let line = log
        .lines()
        .find(|l| l.contains("fails its checksum"))
        .unwrap_or_else(|| panic!("no checksum error in the OST log:\n{log}"));
    assert!(
        line.contains(&format!("OST{ost:04x}"))
            && line.contains(&format!("oid={oid}"))
            && line.contains("offset=69632"),
        "{line}"
    );
    let (clean, out) = scrub(&["--status", c.mnt.to_str().expect("utf8")]);
    assert!(
        !clean,
        "scrub --status passed with a bad block known:\n{out}"
    );
    assert!(
        out.contains(&format!("object {oid} offset 69632 (found by a read")),
        "{out}"
    );
    let counted = out
        .lines()
        .find(|l| l.contains(&format!("OST{ost:04x}:")))
        .and_then(|l| l.rsplit("since start: ").next())
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(counted >= 1, "no read counted as refused:\n{out}");

    // A pass finds the block nobody read, and only the bad ones.
    let (clean, out) = scrub(&[c.mnt.to_str().expect("utf8")]);
    assert!(!clean, "scrub passed with two bad blocks:\n{out}");
    assert!(
        out.contains(&format!(
            "OST{uost:04x} object {uoid} offset 0 (found by scrub"
        )),
        "{out}"
    );
    assert!(out.contains(&format!("object {oid} offset 69632")), "{out}");
    assert_eq!(out.matches("bad block:").count(), 2, "{out}");

    // Rewriting one file and removing the other makes scrub pass again.
    let o = as_nobody(&[
        "dd",
        &format!("if={}", src.display()),
        &format!("of={}", dir.join("read").display()),
        "bs=64k",
        "conv=fsync",
        "status=none",
    ]);
    assert!(
        o.status.success(),
        "rewrite: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::remove_file(dir.join("unread")).expect("rm");
    // The MDT destroys the objects of an unlinked file once the unlink is
    // committed, behind the unlink's reply.
    let gone = c.object_file(uost, uoid);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while gone.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the removed file's object stays"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (clean, out) = scrub(&[c.mnt.to_str().expect("utf8")]);
    assert!(
        clean,
        "scrub still fails after the rewrite and removal:\n{out}"
    );
    let back = as_nobody(&["cat", m2.join("u/read").to_str().expect("utf8")]);
    assert!(
        back.status.success() && back.stdout == data,
        "the rewritten file"
    );
}
