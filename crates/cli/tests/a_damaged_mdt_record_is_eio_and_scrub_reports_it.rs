//! Issue #11: every MDT record carries a checksum. A file's inode record
//! damaged on the MDT's disk (one bit, with the store's own framing
//! intact, as a disk fault its journal does not catch) is never handed
//! out: a user's stat of the file gets EIO, the MDT logs the record and
//! counts the read, and `loom scrub` lists the record and exits non-zero.
//! Other files are untouched.
mod common;
use common::*;
use loom_proto::Fid;
use loom_server::mdt::records::inode_key;
use loom_store::kv::{hex, FjallStore, Space};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

#[test]
fn a_damaged_mdt_record_is_eio_and_scrub_reports_it() {
    let mut c = Cluster::up(1, 1, &[]);
    let dir = c.open_dir("u");
    for name in ["f", "g"] {
        // fsync: the create is committed on the MDT before it is killed.
        let o = as_nobody(&[
            "sh",
            "-c",
            &format!(
                "echo {name} | dd of={} conv=fsync status=none",
                dir.join(name).display()
            ),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let ino = std::fs::metadata(dir.join("f")).expect("stat").ino();
    let key = inode_key(Fid::from_ino(ino));
    let (clean, out) = {
        let o = loom(&["scrub", c.mnt.to_str().expect("utf8")]);
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
        )
    };
    assert!(clean, "scrub of a clean file system:\n{out}");
    assert!(out.contains("-MDT0000: idle, pass checked"), "{out}");

    c.kill9("mdt0");
    {
        let store = FjallStore::open(&c.state.join("targets/mdt0/db")).expect("open the MDT store");
        assert!(
            store.damage(Space::Inodes, &key).expect("damage"),
            "no inode record for f"
        );
    }
    c.restart("mdt0");

    let m2 = c.second_mount("m2");
    std::fs::set_permissions(&m2, std::fs::Permissions::from_mode(0o755)).ok();
    let o = as_nobody(&["stat", m2.join("u/f").to_str().expect("utf8")]);
    assert!(
        !o.status.success(),
        "stat of a file whose inode record is damaged succeeded"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("Input/output error"), "stat said: {err}");
    let o = as_nobody(&["cat", m2.join("u/g").to_str().expect("utf8")]);
    assert!(o.status.success() && o.stdout == b"g\n", "the other file");

    let record = format!("inodes/{}", hex(&key));
    let log = std::fs::read_to_string(c.tmp.path().join("mdt0-restart.log")).expect("MDT log");
    assert!(
        log.lines()
            .any(|l| l.contains(&record) && l.contains("fails its checksum")),
        "no damaged record in the MDT log:\n{log}"
    );
    let o = loom(&["scrub", "--status", c.mnt.to_str().expect("utf8")]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        !o.status.success(),
        "scrub --status passed with a damaged record:\n{out}"
    );
    assert!(
        out.contains(&format!(
            "bad record: loom-MDT0000 record {record} (found by a read"
        )),
        "{out}"
    );
    let line = out
        .lines()
        .find(|l| l.contains("-MDT0000:"))
        .unwrap_or_default();
    let counted: u64 = line
        .rsplit("since start: ")
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(counted >= 1, "the read was not counted: {line}");

    let o = loom(&["scrub", c.mnt.to_str().expect("utf8")]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        !o.status.success(),
        "scrub passed with a damaged record:\n{out}"
    );
    assert_eq!(out.matches("bad record:").count(), 1, "{out}");
    assert_eq!(out.matches("bad block:").count(), 0, "{out}");
}
