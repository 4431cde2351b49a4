//! fio writes a file striped over 4 OSTs and verifies every block with
//! crc32c, both while writing and on a separate read pass.
mod common;
use common::*;

#[test]
fn fio_verify_on_four_stripes() {
    let c = Cluster::up(1, 4, &[]);
    let f = c.path("fio.dat");
    loom_ok(&[
        "setstripe",
        "-c",
        "4",
        "-S",
        "64K",
        f.to_str().expect("utf8"),
    ]);
    let out = loom_ok(&["getstripe", "-c", f.to_str().expect("utf8")]);
    assert_eq!(out.trim(), "4");
    let fio = |extra: &str| {
        sh(&format!(
            "fio --name=v --filename={} --size=24m --bs=128k --rw=randwrite --ioengine=psync \
             --verify=crc32c --verify_fatal=1 --do_verify=1 --randrepeat=1 --verify_state_save=0 {extra} --output-format=terse",
            f.display()
        ))
    };
    fio("");
    // A second run that only reads and verifies what is there.
    fio("--verify_only");
}
