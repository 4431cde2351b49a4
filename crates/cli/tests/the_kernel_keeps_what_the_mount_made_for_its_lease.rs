//! Issue #9 (stats of files just made): the entries and attributes of
//! what this mount makes (create, mkdir, symlink, mknod) are leased to
//! it by the change, so the kernel keeps them for the lease, not only
//! for the attribute timeout. Shown on a mount with `--attr-timeout 0`
//! whose own process is then stopped (SIGSTOP): a stat the kernel could
//! not answer itself would wait for it. (What was written, or linked,
//! since is not in this test: the kernel drops the attributes of an
//! inode it wrote or linked and asks again, whatever it was told.) Names
//! the mount knows absent (in a directory whose list it holds) are kept
//! too, as negative entries: a compiler's search of an include path for
//! a header that is not there asks nothing.
mod common;
use common::*;
use std::os::unix::fs::MetadataExt;

#[test]
fn the_kernel_keeps_what_the_mount_made_for_its_lease() {
    let mut c = Cluster::up(1, 1, &[]);
    let m = c.second_mount_with("mnt2", &["--attr-timeout", "0"]);
    let d = m.join("d");
    std::fs::create_dir(&d).expect("mkdir");
    for i in 0..20 {
        std::fs::File::create(d.join(format!("f{i}"))).expect("create");
    }
    std::fs::create_dir(d.join("sub")).expect("mkdir sub");
    std::os::unix::fs::symlink("f0", d.join("ln")).expect("symlink");
    sh(&format!("mkfifo {}", d.join("fifo").display()));

    // The kernel drops a directory's attributes after each change in it
    // and asks again before the next path walk through it (its
    // permission check): asked here, while the mount runs.
    std::fs::metadata(&m).expect("stat the root");
    std::fs::metadata(&d).expect("stat d");
    // Looked up once while the mount runs: absent.
    for i in 0..5 {
        assert!(!d.join(format!("missing{i}.h")).exists());
    }
    let _frozen = Stopped::new(c.mount_pid(&m));
    let dm = d.clone();
    let absent = within(move || (0..5).all(|i| !dm.join(format!("missing{i}.h")).exists()))
        .expect("a lookup of a name known absent went to the stopped process");
    assert!(absent);
    let dd = d.clone();
    let seen = within(move || {
        let mut names: Vec<String> = (0..20).map(|i| format!("f{i}")).collect();
        names.extend(["sub", "ln", "fifo"].map(String::from));
        names
            .iter()
            .map(|n| std::fs::symlink_metadata(dd.join(n)).map(|m| (m.nlink(), m.file_type())))
            .collect::<std::io::Result<Vec<_>>>()
    })
    .expect("a stat of what this mount made went to its stopped process")
    .expect("stat");
    assert_eq!(seen.len(), 23);
    assert!(seen[..20].iter().all(|(n, t)| *n == 1 && t.is_file()));
    assert!(seen[20].1.is_dir() && seen[21].1.is_symlink());
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&seen[22].1));
}
