//! Writes return before the OSTs answer (write-behind), so the mount must
//! keep what callers rely on: overlapping writes land in the order they
//! were made, through one handle or several; and a write that fails is
//! reported by fsync or close, never silently dropped.
mod common;
use common::*;
use std::os::unix::fs::FileExt;
use std::os::unix::io::IntoRawFd;

const BLOCK: usize = 64 * 1024;

fn block(round: u32, i: u32) -> Vec<u8> {
    let seed = round * 1000 + i;
    (0..BLOCK as u32)
        .map(|k| (k.wrapping_mul(2654435761) ^ seed) as u8)
        .collect()
}

#[test]
fn overlapping_writes_land_in_the_order_they_were_made() {
    let c = Cluster::up(1, 4, &[]);
    let f = c.path("rewritten");
    loom_ok(&[
        "setstripe",
        "-c",
        "4",
        "-S",
        "64K",
        f.to_str().expect("utf8"),
    ]);
    let a = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&f)
        .expect("open a");
    let b = std::fs::OpenOptions::new()
        .write(true)
        .open(&f)
        .expect("open b");
    // 8 blocks rewritten 40 times, alternating handles, each write also
    // overlapping the next block by half (so no two rounds are disjoint).
    let rounds = 40u32;
    for round in 0..rounds {
        for i in 0..8u32 {
            let h = if (round + i) % 2 == 0 { &a } else { &b };
            let mut data = block(round, i);
            data.extend_from_slice(&block(round, i + 1)[..BLOCK / 2]);
            h.write_all_at(&data, u64::from(i) * BLOCK as u64)
                .expect("write");
        }
    }
    drop((a, b));
    let back = std::fs::read(&f).expect("read");
    assert_eq!(back.len(), 8 * BLOCK + BLOCK / 2);
    for i in 0..8u32 {
        let at = i as usize * BLOCK;
        assert!(
            back[at..at + BLOCK] == block(rounds - 1, i)[..],
            "block {i} is not the last write's"
        );
    }
}

#[test]
fn a_write_that_fails_is_reported_by_fsync_and_by_close() {
    let c = Cluster::up(1, 1, &["--timeout", "3"]);
    let (f1, f2) = (c.path("one"), c.path("two"));
    let h1 = std::fs::File::create(&f1).expect("create one");
    let h2 = std::fs::File::create(&f2).expect("create two");
    c.kill9("ost0");
    let data = vec![1u8; 1 << 20];
    // Each failure is reported by the write itself or, if the write
    // returned before the OST was found dead, by the fsync or close that
    // follows: never lost, even when another thread's fork and exec closes
    // copies of these descriptors first (the other test in this binary
    // spawns processes, and each exec flushes every descriptor it closes).
    let w = h1.write_all_at(&data, 0);
    let s = h1.sync_all();
    assert!(
        w.is_err() || s.is_err(),
        "a write to a dead OST and its fsync both succeeded"
    );
    if let Err(e) = &s {
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    }
    let w = h2.write_all_at(&data, 0);
    let closed = nix::unistd::close(h2.into_raw_fd());
    assert!(
        w.is_err() || closed.is_err(),
        "a write to a dead OST and its close both succeeded"
    );
    if let Err(e) = closed {
        assert_eq!(e, nix::errno::Errno::EIO);
    }
}
