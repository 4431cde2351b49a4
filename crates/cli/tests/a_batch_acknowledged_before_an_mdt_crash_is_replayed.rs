//! Issue #32, point 3 for the batch it names ("kill -9 of the MDT during
//! a flush loses nothing that was acknowledged"): with commits held 30 s,
//! a library client sends one batch of 40 changes (directories, symlinks,
//! a chmod, an unlink) and gets its answer: every change acknowledged, not
//! committed, kept by the client for replay one by one. The MDT dies
//! (kill -9) and restarts; the client replays each change the restarted
//! MDT does not have (those its journal had not handed to the OS), and
//! the namespace holds them all, in order, seen through a mount; `loom
//! fsck` finds it clean.
mod common;
use common::*;
use loom_client::ClientOptions;
use loom_proto::msg::{MdtRequest, SetAttr};
use loom_proto::Fid;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

#[test]
fn a_batch_acknowledged_before_an_mdt_crash_is_replayed() {
    let mut c = Cluster::up(
        1,
        1,
        &["--recovery-window", "60", "--commit-interval-ms", "30000"],
    );
    let opts = ClientOptions {
        call_timeout: Duration::from_secs(120),
        ..ClientOptions::default()
    };
    let (rt, client) = library_client(&c, opts);
    let me = root_caller();
    // The first change registers the client and waits for its commit.
    let d = rt
        .block_on(client.mkdir(&me, Fid::ROOT, "d", 0o755))
        .expect("first change");
    rt.block_on(client.mkdir(&me, d.fid, "gone", 0o755))
        .expect("mkdir gone");
    let kept_before = client.uncommitted(0);

    // Directory changes only: a new file's objects can make the MDT
    // refill its object pool, which commits.
    let mut batch: Vec<MdtRequest> = (0..30)
        .map(|i| MdtRequest::Mkdir {
            parent: d.fid,
            name: format!("m{i:02}").into(),
            perm: 0o750,
        })
        .collect();
    batch.extend((0..8).map(|i| MdtRequest::Symlink {
        parent: d.fid,
        name: format!("l{i}").into(),
        target: format!("m{i:02}").into(),
    }));
    batch.push(MdtRequest::Rmdir {
        parent: d.fid,
        name: "gone".into(),
    });
    batch.push(MdtRequest::SetAttr {
        fid: d.fid,
        set: SetAttr {
            perm: Some(0o700),
            ..SetAttr::default()
        },
    });
    let n = batch.len();
    let results = rt
        .block_on(client.batch(&me, d.fid, batch))
        .expect("the batch is answered");
    assert_eq!(results.len(), n);
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    assert!(
        client.uncommitted(0) >= kept_before + n,
        "each change kept for replay until committed: {} kept",
        client.uncommitted(0)
    );

    c.kill9("mdt0");
    c.restart("mdt0");
    // Answered once the MDT has taken every client's replays.
    rt.block_on(client.mkdir(&me, Fid::ROOT, "after", 0o755))
        .expect("a change after the restart");

    let mut names: Vec<String> = std::fs::read_dir(c.path("d"))
        .expect("list d")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = (0..30).map(|i| format!("m{i:02}")).collect();
    want.extend((0..8).map(|i| format!("l{i}")));
    want.sort();
    assert_eq!(names, want, "every change of the batch, after the crash");
    let mode = std::fs::metadata(c.path("d"))
        .expect("stat d")
        .permissions();
    assert_eq!(mode.mode() & 0o7777, 0o700, "the chmod at the batch's end");
    assert_eq!(
        std::fs::read_link(c.path("d/l3")).expect("readlink"),
        std::path::PathBuf::from("m03")
    );
    // What the killed process had written to the OS (its journal) is
    // still there for the restarted one; the rest came back by replay.
    let replayed = replayed_in_logs(&c);
    assert!(replayed >= 1, "some of the batch was replayed: {replayed}");
    let (code, out) = fsck(&c, &[]);
    assert_eq!(code, 0, "fsck clean after the crash:\n{out}");
    rt.block_on(client.close());
}

/// FIDs granted before a crash stay granted to their client (the grant
/// was committed before its answer), and whole inodes made under them in
/// a batch, acknowledged and not committed, come back by replay with
/// their bytes; the restarted MDT's own creates take none of the granted
/// FIDs.
#[test]
fn inodes_made_under_granted_fids_survive_an_mdt_crash() {
    use loom_proto::layout::LayoutSpec;
    use loom_proto::msg::{FileKind, Reply, Time};
    let mut c = Cluster::up(
        1,
        1,
        &["--recovery-window", "60", "--commit-interval-ms", "30000"],
    );
    let opts = ClientOptions {
        call_timeout: Duration::from_secs(120),
        ..ClientOptions::default()
    };
    let (rt, client) = library_client(&c, opts);
    let me = root_caller();
    let d = rt
        .block_on(client.mkdir(&me, Fid::ROOT, "d", 0o777))
        .expect("first change");
    let spec = LayoutSpec::dom_first(64 << 10);
    rt.block_on(client.set_default_layout_as(&me, d.fid, Some(spec)))
        .expect("default layout");
    let (first, _) = rt.block_on(client.grant_fids(d.fid, 100)).expect("grant");
    let at = |i: u32| Fid::new(first.seq, first.oid + i);
    let t0 = Time {
        sec: 1_500_000_000,
        nsec: 0,
    };
    let make = |i: u32| MdtRequest::MakeAt {
        parent: d.fid,
        name: format!("f{i:02}").into(),
        fid: at(i),
        kind: FileKind::File,
        perm: 0o644,
        rdev: 0,
        uid: 0,
        gid: 0,
        atime: t0,
        mtime: t0,
        ctime: t0,
        made: t0,
        target: None,
        data: format!("bytes of f{i:02}\n").into_bytes(),
    };
    let results = rt
        .block_on(client.batch(&me, d.fid, (0..50).map(make).collect()))
        .expect("the batch");
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");

    c.kill9("mdt0");
    c.restart("mdt0");
    // Still this client's: a FID of the grant makes an inode after the
    // restart (answered once recovery is over).
    let r = rt
        .block_on(client.batch(&me, d.fid, vec![make(60)]))
        .expect("after the restart");
    assert!(matches!(r.as_slice(), [Ok(Reply::Entry { .. })]), "{r:?}");
    let (mine, _) = rt
        .block_on(client.create(&me, d.fid, "by-mdt", FileKind::File, 0o644, 0, None))
        .expect("create");
    assert!(
        mine.fid.seq != first.seq || mine.fid.oid >= first.oid + 100,
        "the MDT gave {} from the grant",
        mine.fid
    );
    let mut names: Vec<String> = std::fs::read_dir(c.path("d"))
        .expect("list d")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want: Vec<String> = (0..50).chain([60]).map(|i| format!("f{i:02}")).collect();
    want.push("by-mdt".into());
    want.sort();
    assert_eq!(names, want);
    for i in [0, 31, 49] {
        let p = c.path(&format!("d/f{i:02}"));
        assert_eq!(
            std::fs::read_to_string(&p).expect("read"),
            format!("bytes of f{i:02}\n"),
            "{p:?}"
        );
        let m = std::fs::metadata(&p).expect("stat");
        assert_eq!(
            std::os::unix::fs::MetadataExt::mtime(&m),
            1_500_000_000,
            "its time"
        );
    }
    let (code, out) = fsck(&c, &[]);
    assert_eq!(code, 0, "fsck clean after the crash:\n{out}");
    rt.block_on(client.close());
}
