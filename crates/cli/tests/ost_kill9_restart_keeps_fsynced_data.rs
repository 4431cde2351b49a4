//! kill -9 of an OST: data fsync'd before the kill reads back identical
//! after a restart, and an operation issued during the outage completes
//! once the OST is back.
mod common;
use common::*;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;

#[test]
fn ost_kill9_restart_keeps_fsynced_data() {
    let mut c = Cluster::up(1, 2, &[]);
    let f = c.path("precious.bin");
    loom_ok(&[
        "setstripe",
        "-c",
        "2",
        "-S",
        "64K",
        f.to_str().expect("utf8"),
    ]);
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    {
        let mut fh = std::fs::File::create(&f).expect("create");
        fh.write_all(&data).expect("write");
        fh.sync_all().expect("fsync");
    }
    c.kill9("ost1");

    // Issued during the outage: blocks until the OST is back.
    let path = f.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let during = std::thread::spawn(move || {
        let fh = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open");
        tx.send(()).expect("send");
        // Offset 64K lands on the second stripe, on the killed OST.
        fh.write_all_at(b"written during the outage", 65536)
            .expect("write during outage");
        fh.sync_all().expect("fsync during outage");
    });
    rx.recv().expect("writer started");
    c.restart("ost1");
    during
        .join()
        .expect("the write issued during the outage completed");

    let mut expect = data.clone();
    expect[65536..65536 + 25].copy_from_slice(b"written during the outage");
    let mut back = Vec::new();
    std::fs::File::open(&f)
        .expect("open")
        .read_to_end(&mut back)
        .expect("read");
    assert_eq!(back.len(), expect.len());
    assert!(back == expect, "data read back after the restart differs");
}

#[test]
fn operation_on_a_dead_ost_fails_with_eio_after_the_timeout() {
    let c = Cluster::up(1, 1, &["--timeout", "3"]);
    let f = c.path("f");
    std::fs::write(&f, b"hello").expect("write");
    c.kill9("ost0");
    let err = std::fs::read(&f).expect_err("read from a dead OST must fail");
    assert_eq!(err.raw_os_error(), Some(libc::EIO), "{err}");
}
