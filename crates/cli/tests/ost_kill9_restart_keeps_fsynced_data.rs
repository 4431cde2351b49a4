//! kill -9 of an OST: data fsync'd before the kill reads back identical
//! after a restart, and an operation issued during the outage completes
//! once the OST is back.
mod common;
use common::*;
use std::io::{Read, Write};

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

    // Issued during the outage, by another process (a process of ours
    // holding a file open on the mount would make the exec of the
    // restarted server wait on that file's flush: every exec closes
    // inherited copies of descriptors, and a close waits for the file's
    // writes in flight, which wait for this very server). dd's fsync
    // blocks until the OST is back.
    let (tx, rx) = std::sync::mpsc::channel();
    let path = f.clone();
    let during = std::thread::spawn(move || {
        let mut child = std::process::Command::new("dd")
            .arg(format!("of={}", path.display()))
            .args(["bs=1", "seek=65536", "conv=notrunc,fsync", "status=none"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("dd");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"written during the outage")
            .expect("feed dd");
        tx.send(()).expect("send");
        child.wait().expect("wait for dd")
    });
    rx.recv().expect("writer started");
    c.restart("ost1");
    let status = during.join().expect("join");
    assert!(
        status.success(),
        "the write issued during the outage failed: {status}"
    );

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
