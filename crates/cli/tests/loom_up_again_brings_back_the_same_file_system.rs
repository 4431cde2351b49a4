//! `loom up` stopped with Ctrl-C unmounts and stops its servers; run again
//! on the same state directory it brings back the same file system: the
//! same files, bytes, striping, modes and names, and a usable mount.
mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;

#[test]
fn loom_up_again_brings_back_the_same_file_system() {
    let mut c = Cluster::up(2, 3, &[]);
    let f = c.path("kept/wide.bin");
    std::fs::create_dir(c.path("kept")).expect("mkdir");
    let fs = f.to_str().expect("utf8").to_string();
    loom_ok(&["setstripe", "-c", "3", "-S", "64K", &fs]);
    let data: Vec<u8> = (0..700_000u32).map(|i| (i * 13 % 251) as u8).collect();
    std::fs::write(&f, &data).expect("write");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    std::os::unix::fs::symlink("wide.bin", c.path("kept/link")).expect("symlink");
    let stripes_before = loom_ok(&["getstripe", &fs]);
    let pids_before: Vec<i32> = ["mgs", "mdt0", "ost0"].iter().map(|n| c.pid(n)).collect();

    c.stop_up();
    // Unmounted, and no server left running.
    let mounts = std::fs::read_to_string("/proc/mounts").expect("mounts");
    assert!(
        !mounts.contains(c.mnt.to_str().expect("utf8")),
        "still mounted after Ctrl-C"
    );
    for pid in pids_before {
        assert!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_err(),
            "server {pid} still running"
        );
    }

    c.up_again();
    assert!(std::fs::read(&f).expect("read after up again") == data);
    let meta = std::fs::metadata(&f).expect("stat");
    assert_eq!(meta.permissions().mode() & 0o777, 0o640);
    assert_eq!(
        std::fs::read_link(c.path("kept/link")).expect("readlink"),
        std::path::PathBuf::from("wide.bin")
    );
    assert_eq!(loom_ok(&["getstripe", &fs]), stripes_before);
    // And it is writable: new files get fresh objects, old ones are intact.
    std::fs::write(c.path("kept/new.txt"), b"after").expect("new file");
    assert_eq!(
        std::fs::read(c.path("kept/new.txt")).expect("read"),
        b"after"
    );
    assert!(std::fs::read(&f).expect("reread") == data);
}
