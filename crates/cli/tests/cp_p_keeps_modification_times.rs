//! `cp -p` (write, then set the times, then close) keeps the source's
//! modification time: the size report at close must not stamp its own.
mod common;
use common::*;
use std::os::unix::fs::MetadataExt;

#[test]
fn cp_p_keeps_modification_times() {
    let c = Cluster::up(1, 2, &[]);
    let src = c.tmp.path().join("src.bin");
    std::fs::write(&src, vec![7u8; 300_000]).expect("source");
    sh(&format!(
        "touch -d '2001-02-03 04:05:06.789' {}",
        src.display()
    ));
    let dst = c.path("copy.bin");
    sh(&format!("cp -p {} {}", src.display(), dst.display()));
    let (a, b) = (
        std::fs::metadata(&src).expect("stat src"),
        std::fs::metadata(&dst).expect("stat dst"),
    );
    assert_eq!(b.len(), 300_000);
    assert_eq!((b.mtime(), b.mtime_nsec()), (a.mtime(), a.mtime_nsec()));
    // And a plain write afterwards moves it forward again.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&dst)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"x"))
        .expect("append");
    let after = std::fs::metadata(&dst).expect("stat again");
    assert!(after.mtime() > a.mtime(), "a write sets the mtime");
}
