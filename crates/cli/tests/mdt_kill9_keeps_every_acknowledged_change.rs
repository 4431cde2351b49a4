//! kill -9 of the MDT: every metadata change that was answered survives —
//! names, directories, renames, modes, and file sizes reported at close
//! (handed to the OS, not fsync'd: a process crash must not lose them) —
//! and operations issued while the MDT is down complete once it is back.
mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn mdt_kill9_keeps_every_acknowledged_change() {
    let mut c = Cluster::up(1, 2, &[]);
    std::fs::create_dir(c.path("dir")).expect("mkdir");
    for i in 0..50 {
        let data = vec![i as u8; 1000 + i * 37];
        std::fs::write(c.path(&format!("dir/f{i}")), &data).expect("write");
    }
    std::fs::rename(c.path("dir/f0"), c.path("renamed")).expect("rename");
    std::fs::set_permissions(c.path("dir/f1"), std::fs::Permissions::from_mode(0o600))
        .expect("chmod");
    std::fs::remove_file(c.path("dir/f2")).expect("unlink");

    c.kill9("mdt0");
    // Issued during the outage, by another process (see the OST kill test
    // for why not by a thread of ours): waits for the MDT; the client
    // resends on a new connection, and a change the MDT applied is
    // answered from its reply cache.
    let mut during = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf late > {f} && mkdir {d}",
            f = c.path("made-during-outage").display(),
            d = c.path("dir-during-outage").display()
        ))
        .spawn()
        .expect("sh");
    c.restart("mdt0");
    let status = during.wait().expect("wait");
    assert!(
        status.success(),
        "operations issued during the outage: {status}"
    );

    for i in 3..50 {
        let got = std::fs::read(c.path(&format!("dir/f{i}"))).expect("read after restart");
        assert_eq!(got.len(), 1000 + i * 37, "size of f{i}");
        assert!(got.iter().all(|&b| b == i as u8), "contents of f{i}");
    }
    assert_eq!(
        std::fs::read(c.path("renamed")).expect("renamed").len(),
        1000
    );
    assert!(!c.path("dir/f0").exists());
    assert!(!c.path("dir/f2").exists());
    let mode = std::fs::metadata(c.path("dir/f1"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(
        std::fs::read(c.path("made-during-outage")).expect("read"),
        b"late"
    );
    assert!(c.path("dir-during-outage").is_dir());
    let names = std::fs::read_dir(c.path("dir")).expect("readdir").count();
    assert_eq!(names, 48);
}
