//! A file this mount made reports its size at the release, which the
//! kernel sends after close(2) without waiting and without ordering it
//! with what the program does next. tar and `cp -p` chmod, chown and
//! utimens right after the close: those changes wait for a release's
//! report on its way, so the mount never keeps the attributes the report
//! answered after the ones the chmod answered. Shown with 300 files
//! written, closed and chmodded at once, then the kernel's caches dropped
//! so that every stat is answered by the mount: each shows the chmod.
mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;

const WRITE_CLOSE_CHMOD: &str = r#"
import os, sys
d = sys.argv[1]
for i in range(300):
    p = os.path.join(d, "f%d" % i)
    fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, b"x" * (1 + i % 5000))
    os.close(fd)
    os.chmod(p, 0o600)
"#;

#[test]
fn a_chmod_right_after_close_is_not_undone_by_the_release() {
    let c = Cluster::up(1, 2, &[]);
    let d = c.path("d");
    std::fs::create_dir(&d).expect("mkdir");
    let o = std::process::Command::new("python3")
        .args(["-c", WRITE_CLOSE_CHMOD])
        .arg(&d)
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Dentries and inodes dropped: the mount answers every stat.
    std::fs::write("/proc/sys/vm/drop_caches", b"2").expect("drop caches");
    let wrong: Vec<(usize, u32)> = (0..300)
        .map(|i| {
            let m = std::fs::metadata(d.join(format!("f{i}"))).expect("stat");
            (i, m.permissions().mode() & 0o7777)
        })
        .filter(|(_, mode)| *mode != 0o600)
        .collect();
    assert!(
        wrong.is_empty(),
        "modes the chmod set were undone: {wrong:?}"
    );
    for i in [0usize, 137, 299] {
        let len = std::fs::metadata(d.join(format!("f{i}")))
            .expect("stat")
            .len();
        assert_eq!(len, (1 + i % 5000) as u64, "f{i}'s size");
    }
}
