//! A file removed while a process has it open stays readable and writable
//! through that open file (POSIX), its objects stay on the OSTs, and they
//! go when the last handle closes. The same for a file replaced by a
//! rename, as editors and log rotation do.
mod common;
use common::*;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;

fn wait_gone(paths: &[PathBuf]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while paths.iter().any(|p| p.exists()) {
        assert!(
            std::time::Instant::now() < deadline,
            "objects not destroyed: {paths:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn an_unlinked_file_stays_usable_while_open() {
    let c = Cluster::up(1, 2, &[]);
    let f = c.path("scratch.tmp");
    let fs = f.to_str().expect("utf8");
    loom_ok(&["setstripe", "-c", "2", "-S", "64K", fs]);
    let data: Vec<u8> = (0..500_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(&f, &data).expect("write");
    let objs = c.object_files(fs);
    assert_eq!(objs.len(), 2);

    let mut fh = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&f)
        .expect("open");
    sh(&format!("rm {fs}"));
    assert!(!f.exists(), "the name is gone");
    assert_eq!(fh.metadata().expect("fstat").nlink(), 0);
    let mut back = Vec::new();
    fh.read_to_end(&mut back).expect("read after rm");
    assert!(back == data, "data read after rm differs");
    fh.write_all_at(b"still writable", 70_000)
        .expect("write after rm");
    let mut part = [0u8; 14];
    fh.seek(SeekFrom::Start(70_000)).expect("seek");
    fh.read_exact(&mut part).expect("read back");
    assert_eq!(&part, b"still writable");
    assert!(objs.iter().all(|p| p.exists()), "objects kept while open");
    drop(fh);
    wait_gone(&objs);
}

#[test]
fn a_file_replaced_by_rename_stays_readable_while_open() {
    let c = Cluster::up(1, 2, &[]);
    let (old, new) = (c.path("config"), c.path("config.new"));
    std::fs::write(&old, b"old contents").expect("old");
    std::fs::write(&new, b"new contents").expect("new");
    let objs = c.object_files(old.to_str().expect("utf8"));
    let mut reader = std::fs::File::open(&old).expect("open old");
    std::fs::rename(&new, &old).expect("rename over");
    assert_eq!(std::fs::read(&old).expect("read new"), b"new contents");
    let mut s = String::new();
    reader
        .read_to_string(&mut s)
        .expect("read the replaced file");
    assert_eq!(s, "old contents");
    drop(reader);
    wait_gone(&objs);
    // The new file's data is untouched.
    assert_eq!(std::fs::read(&old).expect("read new"), b"new contents");
}

#[test]
fn removing_a_file_nobody_has_open_frees_it_at_once() {
    let c = Cluster::up(1, 1, &[]);
    let f = c.path("plain");
    std::fs::write(&f, b"x").expect("write");
    let objs = c.object_files(f.to_str().expect("utf8"));
    std::fs::remove_file(&f).expect("rm");
    wait_gone(&objs);
}
