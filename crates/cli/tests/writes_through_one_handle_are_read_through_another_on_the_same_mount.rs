//! Two open handles of one file on one mount: a reader opened before the
//! other handle's writes reads them (it does not stop at the size it saw
//! at open), and an O_APPEND writer appends after them instead of
//! overwriting them.
mod common;
use common::*;
use std::io::{Read, Seek, SeekFrom, Write};

#[test]
fn writes_through_one_handle_are_read_through_another_on_the_same_mount() {
    let c = Cluster::up(1, 2, &[]);
    let f = c.path("log.txt");
    std::fs::write(&f, b"first line\n").expect("create");
    let mut reader = std::fs::File::open(&f).expect("open reader");
    let mut first = String::new();
    reader.read_to_string(&mut first).expect("read");
    assert_eq!(first, "first line\n");

    let mut writer = std::fs::OpenOptions::new()
        .append(true)
        .open(&f)
        .expect("open writer");
    writer.write_all(b"second line\n").expect("append");
    // Like `tail -f`: the reader goes on from where it stopped.
    let mut more = String::new();
    reader.read_to_string(&mut more).expect("read on");
    assert_eq!(more, "second line\n");

    // A third handle appends; nothing written before is overwritten.
    let mut third = std::fs::OpenOptions::new()
        .append(true)
        .open(&f)
        .expect("open third");
    third.write_all(b"third line\n").expect("append");
    writer.write_all(b"fourth line\n").expect("append again");
    drop((writer, third));
    reader.seek(SeekFrom::Start(0)).expect("seek");
    let mut all = String::new();
    reader.read_to_string(&mut all).expect("read all");
    assert_eq!(all, "first line\nsecond line\nthird line\nfourth line\n");
    assert_eq!(std::fs::read_to_string(&f).expect("reread"), all);
}
