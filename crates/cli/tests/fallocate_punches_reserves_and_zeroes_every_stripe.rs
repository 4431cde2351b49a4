//! fallocate(2) through the mount acts on every object of a striped file:
//! a punched hole reads as zeros and frees the objects' blocks where the
//! layout puts them; a reservation allocates blocks on every object without
//! changing their data, and grows the file unless KEEP_SIZE (another mount
//! sees the new size after its open); a zeroed range reads as zeros; a
//! punch issued right after writes in flight is not undone by them; modes
//! that would move data between objects say EOPNOTSUPP.
mod common;
use common::*;
use nix::fcntl::{fallocate, FallocateFlags as F};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

const UNIT: usize = 64 * 1024;

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 13 + seed) % 251) as u8).collect()
}

fn allocated(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.blocks() * 512).unwrap_or(0)
}

fn read_all(f: &File, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    f.read_exact_at(&mut buf, 0).expect("read back");
    buf
}

#[test]
fn fallocate_punches_reserves_and_zeroes_every_stripe() {
    let mut c = Cluster::up(1, 4, &[]);
    let path = c.path("falloc.bin");
    let p = path.to_str().expect("utf8").to_string();
    loom_ok(&["setstripe", "-c", "4", "-S", "64K", &p]);
    let mut model = pattern(16 * UNIT, 1);
    std::fs::write(&path, &model).expect("write 1 MiB");
    let objs = c.object_files(&p);
    assert_eq!(objs.len(), 4);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .expect("open");
    f.sync_all().expect("fsync");

    // Punch [100000, 400000): units 2..=5 whole (one on each object) and
    // parts of units 1 and 6.
    let before: Vec<u64> = objs.iter().map(|o| allocated(o)).collect();
    let (off, len) = (100_000usize, 300_000usize);
    fallocate(
        f.as_raw_fd(),
        F::FALLOC_FL_PUNCH_HOLE | F::FALLOC_FL_KEEP_SIZE,
        off as i64,
        len as i64,
    )
    .expect("punch");
    model[off..off + len].fill(0);
    assert_eq!(read_all(&f, model.len()), model, "the hole reads as zeros");
    assert_eq!(f.metadata().expect("stat").len(), model.len() as u64);
    for (i, o) in objs.iter().enumerate() {
        let freed = before[i].saturating_sub(allocated(o));
        assert!(
            freed >= UNIT as u64,
            "object {i} freed {freed} bytes of blocks; its whole unit was punched"
        );
        // Each object's bytes are still where the layout puts them.
        let bytes = std::fs::read(o).expect("object");
        for (k, b) in bytes.iter().enumerate() {
            let file_off = (k / UNIT * 4 + i) * UNIT + k % UNIT;
            assert_eq!(*b, model[file_off], "object {i} offset {k}");
        }
    }

    // Reserve 3 MiB past the end: the file grows, each object gets the
    // blocks of its share (768 KiB) but keeps its size and data.
    let sizes: Vec<u64> = objs
        .iter()
        .map(|o| std::fs::metadata(o).expect("object").len())
        .collect();
    let before: Vec<u64> = objs.iter().map(|o| allocated(o)).collect();
    fallocate(
        f.as_raw_fd(),
        F::empty(),
        (1 << 20) as i64,
        (3 << 20) as i64,
    )
    .expect("reserve");
    assert_eq!(f.metadata().expect("stat").len(), 4 << 20);
    for (i, o) in objs.iter().enumerate() {
        let m = std::fs::metadata(o).expect("object");
        assert_eq!(m.len(), sizes[i], "object {i} keeps its size");
        assert!(
            allocated(o) >= before[i] + (768 << 10),
            "object {i}: {} bytes allocated, was {}",
            allocated(o),
            before[i]
        );
    }
    model.resize(4 << 20, 0);
    assert_eq!(read_all(&f, model.len()), model);
    // KEEP_SIZE past the end: no growth.
    fallocate(
        f.as_raw_fd(),
        F::FALLOC_FL_KEEP_SIZE,
        (4 << 20) as i64,
        (1 << 20) as i64,
    )
    .expect("reserve, keeping the size");
    assert_eq!(f.metadata().expect("stat").len(), 4 << 20);

    // Zero a range inside the data, then one running past the end.
    fallocate(f.as_raw_fd(), F::FALLOC_FL_ZERO_RANGE, 5000, 70_000).expect("zero range");
    model[5000..75_000].fill(0);
    fallocate(f.as_raw_fd(), F::FALLOC_FL_ZERO_RANGE, (4 << 20) - 10, 4106)
        .expect("zero past the end");
    model.resize((4 << 20) + 4096, 0);
    assert_eq!(f.metadata().expect("stat").len(), model.len() as u64);
    assert_eq!(read_all(&f, model.len()), model);

    // Writes still in flight when the punch is asked for land before it.
    for round in 0..8 {
        let data = pattern(4 << 20, round + 2);
        f.write_all_at(&data, 0).expect("write 4 MiB");
        fallocate(
            f.as_raw_fd(),
            F::FALLOC_FL_PUNCH_HOLE | F::FALLOC_FL_KEEP_SIZE,
            0,
            4 << 20,
        )
        .expect("punch after write");
        let back = read_all(&f, 4 << 20);
        assert!(
            back.iter().all(|&b| b == 0),
            "round {round}: a write landed after the punch"
        );
    }
    model[..4 << 20].fill(0);

    // Moving data between objects is not offered.
    let err = fallocate(f.as_raw_fd(), F::FALLOC_FL_COLLAPSE_RANGE, 0, UNIT as i64)
        .expect_err("collapse");
    assert_eq!(err, nix::errno::Errno::EOPNOTSUPP);
    drop(f);

    // The size reached the MDT: another mount sees it after its open.
    let other = c.second_mount("m2");
    let f2 = File::open(other.join("falloc.bin")).expect("open on the second mount");
    assert_eq!(f2.metadata().expect("stat").len(), model.len() as u64);
    assert_eq!(read_all(&f2, model.len()), model);
}
