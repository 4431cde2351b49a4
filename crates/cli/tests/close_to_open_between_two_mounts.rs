//! Two mounts of one cluster: what one writes and closes, the other reads
//! after its open, including size changes and new names.
mod common;
use common::*;

#[test]
fn close_to_open_between_two_mounts() {
    let mut c = Cluster::up(1, 2, &[]);
    let other = c.second_mount("mnt2");
    let a = c.path("shared.txt");
    let b = other.join("shared.txt");
    for round in 0..5u8 {
        let data: Vec<u8> = (0..(100_000 + round as usize * 77_777))
            .map(|i| (i as u8) ^ round)
            .collect();
        // Mount 2 caches the file's attributes (entry and attribute TTLs)
        // before mount 1 rewrites it: its open must not trust them.
        if round > 0 {
            std::fs::metadata(&b).expect("stat on mount 2");
        }
        std::fs::write(&a, &data).expect("write on mount 1");
        let seen = std::fs::read(&b).expect("read on mount 2");
        assert_eq!(
            seen.len(),
            data.len(),
            "round {round}: size seen by mount 2"
        );
        assert!(
            seen == data,
            "round {round}: contents seen by mount 2 differ"
        );
    }
    // Shrinking is seen too.
    std::fs::metadata(&a).expect("stat on mount 1");
    std::fs::write(&b, b"short").expect("write on mount 2");
    assert_eq!(std::fs::read(&a).expect("read on mount 1"), b"short");
    // A name removed and made again on one mount, while the other has it
    // in its dentry cache: an open on the other finds the new file (the
    // vanished inode answers ESTALE and the kernel looks the name up again).
    let r = c.path("replaced");
    std::fs::write(&r, b"first inode").expect("write");
    assert_eq!(
        std::fs::read(other.join("replaced")).expect("read"),
        b"first inode"
    );
    std::fs::remove_file(other.join("replaced")).expect("rm on mount 2");
    std::fs::write(other.join("replaced"), b"second inode").expect("recreate");
    assert_eq!(std::fs::read(&r).expect("read on mount 1"), b"second inode");
    // A directory made on one mount is listed on the other.
    std::fs::create_dir(other.join("d")).expect("mkdir on mount 2");
    std::fs::write(other.join("d/f"), b"x").expect("write");
    let names: Vec<_> = std::fs::read_dir(c.path("d"))
        .expect("readdir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("f")]);
}
