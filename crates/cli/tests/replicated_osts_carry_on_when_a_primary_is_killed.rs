//! OSTs kept on two servers each (`loom up --replicas 2`): kill -9 of a
//! primary during a workload that two mounts run as uid 65534 loses no
//! acknowledged byte and fails no operation; the replica that took over
//! serves alone, the killed one rejoins and is brought up to date, and
//! then serves every byte itself when the other is killed in turn.
mod common;
use common::replicas::{ask_replica, wait_for_roles};
use common::*;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

/// Writes `count` files of 1 MiB into DIR_A and DIR_B by turns (one
/// directory, seen through two mounts), each fsync'd: a line per file
/// once acknowledged, with the seconds its write and fsync took.
const WRITER: &str = r#"
import hashlib, os, sys, time
dirs, count = sys.argv[1:3], int(sys.argv[3])
for i in range(count):
    name = "f%03d" % i
    seed = hashlib.sha256(name.encode()).digest()
    data = seed * (1048576 // len(seed))
    t0 = time.monotonic()
    fd = os.open(os.path.join(dirs[i % 2], name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    print("acked", name, "%.3f" % (time.monotonic() - t0), flush=True)
"#;

/// The bytes file `name` must hold.
fn content(name: &str) -> Vec<u8> {
    use sha2::Digest;
    let seed = sha2::Sha256::digest(name.as_bytes());
    seed.repeat(1048576 / seed.len())
}

fn wait_for(mnt: &Path, ost: u32, want: &[(u32, &str, &str)], secs: u64) {
    wait_for_roles(mnt, ost, want, secs);
}

/// Every file `f000`..`f{count-1}` in `dir` holds its bytes.
fn check_all(dir: &Path, count: usize) {
    for i in 0..count {
        let name = format!("f{i:03}");
        let got = std::fs::read(dir.join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            got == content(&name),
            "{name} differs ({} bytes)",
            got.len()
        );
    }
}

#[test]
fn a_workload_keeps_every_acknowledged_byte_through_a_primary_kill_and_a_rejoin() {
    const FILES: usize = 60;
    let mut c = Cluster::up(1, 2, &["--replicas", "2"]);
    let dir = c.open_dir("work");
    // Every file on both OSTs.
    loom_ok(&[
        "setstripe",
        "-c",
        "2",
        "-S",
        "256K",
        dir.to_str().expect("utf8"),
    ]);
    let other = c.second_mount("second").join("work");
    for ost in 0..2 {
        wait_for(
            &c.mnt,
            ost,
            &[(0, "primary", "in-sync"), (1, "secondary", "in-sync")],
            30,
        );
    }

    let mut writer = python3(true)
        .args(["-c", WRITER])
        .arg(&dir)
        .arg(&other)
        .arg(FILES.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("writer");
    let mut lines = BufReader::new(writer.stdout.take().expect("stdout")).lines();
    let mut acked = Vec::new();
    // Some files in, then the primary of OST0 dies under the writer.
    for _ in 0..5 {
        acked.push(lines.next().expect("a line").expect("read"));
    }
    c.kill9("ost0");
    acked.extend(lines.map(|l| l.expect("read")));
    let out = writer.wait_with_output().expect("writer");
    assert!(
        out.status.success(),
        "the workload failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(acked.len(), FILES, "{acked:?}");
    let pause = acked
        .iter()
        .filter_map(|l| l.split_whitespace().nth(2)?.parse::<f64>().ok())
        .fold(0.0, f64::max);
    println!("longest write+fsync of a file across the failover: {pause:.2} s");

    // Replica 1 took over; the killed one is stale.
    wait_for(
        &c.mnt,
        0,
        &[(0, "secondary", "stale"), (1, "primary", "in-sync")],
        5,
    );
    // Every byte, read through the mount that did not write it, and by a
    // user.
    check_all(&dir, FILES);
    let cat = as_nobody(&["cat", other.join("f001").to_str().expect("utf8")]);
    assert!(cat.status.success() && cat.stdout == content("f001"));

    // While it is down, a block of its copy of f000 rots: bringing it up
    // to date replaces that copy whole (it cannot be read to compare).
    let f000 = dir.join("f000");
    let (_, oid) = c
        .stripes(f000.to_str().expect("utf8"))
        .into_iter()
        .find(|(ost, _)| *ost == 0)
        .expect("a stripe on OST0");
    let obj = c.object_file(0, oid);
    let mut bytes = std::fs::read(&obj).expect("the object's file");
    bytes[100] ^= 0xff;
    std::fs::write(&obj, bytes).expect("rot");
    // The killed replica comes back and is brought up to date.
    c.restart("ost0");
    wait_for(
        &c.mnt,
        0,
        &[(0, "secondary", "in-sync"), (1, "primary", "in-sync")],
        60,
    );
    // Then the other dies: the rejoined one serves every byte alone, to
    // a mount that never saw them.
    c.kill9("ost0r1");
    wait_for(
        &c.mnt,
        0,
        &[(0, "primary", "in-sync"), (1, "secondary", "stale")],
        30,
    );
    let third = c.second_mount("third").join("work");
    check_all(&third, FILES);
}

#[test]
fn a_stopped_primary_is_replaced_and_once_woken_serves_nothing() {
    let c = Cluster::up(1, 1, &["--replicas", "2"]);
    let dir = c.open_dir("work");
    wait_for(
        &c.mnt,
        0,
        &[(0, "primary", "in-sync"), (1, "secondary", "in-sync")],
        30,
    );
    std::fs::write(dir.join("before"), b"written before").expect("write");
    let old = format!("127.0.0.1:{}", c.port("ost0").expect("ost0's port"));
    let stopped = Stopped::new(c.pid("ost0"));
    // A user's write and fsync carry on with the other replica: the one
    // stopped holds its connections open and answers nothing.
    let t0 = Instant::now();
    let during = dir.join("during");
    let w = sh_as_nobody(&format!(
        "printf 'written while stopped' > {0} && sync {0}",
        during.display()
    ))
    .output()
    .expect("writer");
    assert!(
        w.status.success(),
        "the write failed: {}",
        String::from_utf8_lossy(&w.stderr)
    );
    println!(
        "write+fsync with the primary stopped: {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    wait_for(
        &c.mnt,
        0,
        &[(0, "secondary", "stale"), (1, "primary", "in-sync")],
        5,
    );
    // Woken, the old primary serves nothing: its lease ran out, and the
    // MGS gave its role to the other.
    drop(stopped);
    for r in ask_replica(&old, key(&c, "cluster.key")) {
        assert_eq!(r, Err(loom_proto::Errno::EREMCHG));
    }
    assert_eq!(
        std::fs::read(&during).expect("read"),
        b"written while stopped"
    );
    assert_eq!(
        std::fs::read(dir.join("before")).expect("read"),
        b"written before"
    );
}
