//! Issue #8, shown by "a replayed cross-MDT mkdir": with commits held
//! 30 s, a client (a library client in this process, alive throughout)
//! makes a directory on MDT1 from MDT0 (the coordinator commits that
//! before its answer, intent and all), then a directory in it (on MDT1) and a
//! directory beside it (on MDT0), both acknowledged and not committed.
//! Both MDTs die (kill -9; a crash point at MDT0's next request). After
//! their restart the client replays what they lost, into and beside the
//! cross-MDT directory, and the namespace holds it all once: the
//! directory on MDT1 with its subdirectory, no second directory object. Seen
//! through the library and a mount.
mod common;
use common::*;
use loom_client::ClientOptions;
use loom_proto::msg::DirStripe;
use loom_proto::Fid;
use std::time::Duration;

#[test]
fn a_cross_mdt_mkdir_lost_in_a_crash_is_replayed() {
    let mut c = Cluster::up(
        2,
        1,
        &["--recovery-window", "60", "--commit-interval-ms", "30000"],
    );
    c.kill9("mdt0");
    let mut armed = c.start_armed("mdt0", "request:rmdir", 1);
    let opts = ClientOptions {
        call_timeout: Duration::from_secs(120),
        ..ClientOptions::default()
    };
    let (rt, client) = library_client(&c, opts);
    let me = root_caller();
    // The first change on this MDT instance registers the client and
    // waits for its commit.
    rt.block_on(client.mkdir(&me, Fid::ROOT, "registered", 0o755))
        .expect("first change");
    let before = inodes_per_mdt(&c.mnt);
    // Acknowledged, not committed on MDT0: the entry of a directory made
    // on MDT1, and a file made in it there.
    let remote = DirStripe {
        count: 1,
        start_mdt: 1,
    };
    let made = rt
        .block_on(client.mkdir_striped(&me, Fid::ROOT, "remote", 0o750, remote))
        .expect("cross-MDT mkdir");
    // The client's first change on MDT1 registers it there (committed).
    rt.block_on(client.mkdir(&me, made.fid, "registered", 0o755))
        .expect("first change on MDT1");
    // Acknowledged, not committed. Directory changes only: a new file's
    // objects can make the MDT refill its object pool, which commits.
    rt.block_on(client.mkdir(&me, made.fid, "inside", 0o755))
        .expect("mkdir in it");
    rt.block_on(client.mkdir(&me, Fid::ROOT, "beside", 0o755))
        .expect("mkdir beside it");
    let after_mkdir = inodes_per_mdt(&c.mnt);
    assert_eq!(
        after_mkdir[1],
        before[1] + 3,
        "the directory and its subdirectories on MDT1"
    );

    // MDT1 dies; the next request kills MDT0 and is answered after both
    // restarted.
    c.kill9("mdt1");
    let rmdir = {
        let client = client.clone();
        let me = me.clone();
        rt.spawn(async move { client.rmdir(&me, Fid::ROOT, "registered").await })
    };
    let status = armed.0.wait().expect("wait for the armed MDT");
    assert!(!status.success(), "the armed MDT died at the crash point");
    c.restart("mdt1");
    c.restart("mdt0");
    rt.block_on(rmdir)
        .expect("rmdir task")
        .expect("rmdir after recovery");

    // The directory is there once, on MDT1, with its subdirectory and mode.
    let (entries, eof) = rt
        .block_on(client.readdir(&me, Fid::ROOT, 0, 100))
        .expect("list the root");
    assert!(eof, "one page");
    let mut names: Vec<String> = entries
        .into_iter()
        .map(|e| String::from_utf8_lossy(e.name.as_bytes()).into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["beside", "remote"], "the root after recovery");
    let (found, _) = rt
        .block_on(client.lookup(&me, Fid::ROOT, "remote"))
        .expect("lookup remote");
    assert_eq!(found.fid, made.fid, "the same directory");
    assert_eq!(found.perm & 0o7777, 0o750);
    assert_eq!(mdt_of(&c.path("remote")), 1, "on MDT1");
    assert!(c.path("remote/inside").is_dir(), "seen through the mount");
    assert_eq!(
        inodes_per_mdt(&c.mnt)[1],
        after_mkdir[1],
        "no second directory object on MDT1"
    );
    let logs = replayed_in_logs(&c);
    assert!(
        logs >= 2,
        "the directories in it and beside it were replayed: {logs}"
    );
    // And it works as any directory: emptied and removed across MDTs.
    std::fs::remove_dir(c.path("remote/inside")).expect("rmdir inside");
    std::fs::remove_dir(c.path("remote/registered")).expect("rmdir registered");
    std::fs::remove_dir(c.path("remote")).expect("cross-MDT rmdir");
    rt.block_on(client.close());
}
