//! A mount made by root serves every user of the machine, with POSIX's
//! permission rules, as users meet them: real programs run as other users
//! (`setpriv`), through the mount and through a second mount; and a user
//! other than root mounts the file system for itself.
mod common;
use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

/// Run `cmd` with bash as `uid:gid` with supplementary `groups`.
fn as_user(uid: u32, gid: u32, groups: &[u32], cmd: &str) -> Output {
    let groups = if groups.is_empty() {
        "--clear-groups".to_string()
    } else {
        format!(
            "--groups={}",
            groups
                .iter()
                .map(|g| g.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    Command::new("setpriv")
        .arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg(groups)
        .args(["bash", "-c", cmd])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("setpriv")
}

/// As [`as_user`], insisting it succeeds.
fn ok_as(uid: u32, gid: u32, groups: &[u32], cmd: &str) -> String {
    let o = as_user(uid, gid, groups, cmd);
    assert!(
        o.status.success(),
        "as {uid}:{gid}: `{cmd}` failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// As [`as_user`], insisting it fails saying `why` (the text of the
/// errno, as coreutils print it).
fn refused_as(uid: u32, gid: u32, groups: &[u32], cmd: &str, why: &str) {
    let o = as_user(uid, gid, groups, cmd);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains(why),
        "as {uid}:{gid}: `{cmd}` should fail with {why:?}: status {}, stderr {err}",
        o.status
    );
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("stat").mode() & 0o7777
}

const ALICE: (u32, u32) = (1000, 1000);
const BOB: (u32, u32) = (1001, 1001);

#[test]
fn every_user_is_served_under_posix_permissions() {
    let mut c = Cluster::up(2, 2, &[]);
    // Let other users reach the mount point inside the test's directory.
    std::fs::set_permissions(c.tmp.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let m = c.mnt.display().to_string();
    let (a, b) = (ALICE, BOB);

    // A user with a home directory of its own; others cannot look in.
    sh(&format!(
        "mkdir -m 0700 {m}/alice && chown 1000:1000 {m}/alice"
    ));
    ok_as(
        a.0,
        a.1,
        &[],
        &format!("echo hello > {m}/alice/note && mkdir {m}/alice/d"),
    );
    assert_eq!(
        ok_as(a.0, a.1, &[], &format!("cat {m}/alice/note")),
        "hello\n"
    );
    refused_as(b.0, b.1, &[], &format!("ls {m}/alice"), "Permission denied");
    refused_as(
        b.0,
        b.1,
        &[],
        &format!("cat {m}/alice/note"),
        "Permission denied",
    );
    refused_as(
        b.0,
        b.1,
        &[],
        &format!("touch {m}/newfile"),
        "Permission denied",
    );
    let note = c.path("alice/note");
    let st = std::fs::metadata(&note).expect("stat");
    assert_eq!((st.uid(), st.gid(), mode(&note)), (1000, 1000, 0o644));

    // Group read through a supplementary group, not write; others nothing.
    sh(&format!(
        "mkdir -m 0750 {m}/team && chown 1000:2000 {m}/team && \
         echo plan > {m}/team/plan && chown 1000:2000 {m}/team/plan && chmod 0640 {m}/team/plan"
    ));
    assert_eq!(
        ok_as(b.0, b.1, &[2000], &format!("cat {m}/team/plan")),
        "plan\n"
    );
    refused_as(
        b.0,
        b.1,
        &[2000],
        &format!("echo x >> {m}/team/plan"),
        "Permission denied",
    );
    refused_as(
        b.0,
        b.1,
        &[],
        &format!("cat {m}/team/plan"),
        "Permission denied",
    );

    // Sticky directory: only the owner of the entry (or of the directory,
    // or root) unlinks or renames it.
    sh(&format!("mkdir -m 1777 {m}/tmp"));
    ok_as(a.0, a.1, &[], &format!("echo a > {m}/tmp/a"));
    refused_as(
        b.0,
        b.1,
        &[],
        &format!("rm -f {m}/tmp/a"),
        "Operation not permitted",
    );
    refused_as(
        b.0,
        b.1,
        &[],
        &format!("mv {m}/tmp/a {m}/tmp/b"),
        "Operation not permitted",
    );
    ok_as(
        a.0,
        a.1,
        &[],
        &format!("mv {m}/tmp/a {m}/tmp/a2 && rm {m}/tmp/a2"),
    );

    // Setgid directory: new entries take its group, subdirectories its bit.
    sh(&format!("mkdir -m 2777 {m}/proj && chgrp 3000 {m}/proj"));
    ok_as(
        a.0,
        a.1,
        &[],
        &format!("touch {m}/proj/f && mkdir {m}/proj/sub"),
    );
    assert_eq!(
        std::fs::metadata(c.path("proj/f")).expect("stat").gid(),
        3000
    );
    let sub = c.path("proj/sub");
    assert_eq!(std::fs::metadata(&sub).expect("stat").gid(), 3000);
    assert_eq!(mode(&sub) & 0o2000, 0o2000, "subdirectory keeps setgid");

    // chown: the owner only to one of its groups, never to another user.
    ok_as(a.0, a.1, &[2000], &format!("chgrp 2000 {m}/alice/note"));
    assert_eq!(std::fs::metadata(&note).expect("stat").gid(), 2000);
    refused_as(
        a.0,
        a.1,
        &[2000],
        &format!("chgrp 5000 {m}/alice/note"),
        "Operation not permitted",
    );
    refused_as(
        a.0,
        a.1,
        &[],
        &format!("chown 1001 {m}/alice/note"),
        "Operation not permitted",
    );
    refused_as(
        b.0,
        b.1,
        &[],
        &format!("chmod 777 {m}/tmp"),
        "Operation not permitted",
    );

    // SUID and SGID go on a write by a user other than root.
    sh(&format!(
        "echo '#!/bin/sh' > {m}/team/tool && chown 1000:2000 {m}/team/tool && \
         chmod 6777 {m}/team/tool && chmod 0755 {m}/team"
    ));
    ok_as(
        b.0,
        b.1,
        &[2000],
        &format!("echo 'exit 0' >> {m}/team/tool"),
    );
    assert_eq!(mode(&c.path("team/tool")), 0o0777);
    // and on a chown by its owner.
    sh(&format!("chmod 6755 {m}/team/tool"));
    ok_as(a.0, a.1, &[2000], &format!("chgrp 1000 {m}/team/tool"));
    assert_eq!(mode(&c.path("team/tool")), 0o0755);

    // utimensat: a writer may set times to now; only the owner given times.
    sh(&format!(
        "touch {m}/tmp/shared && chmod 666 {m}/tmp/shared && chown 1000:1000 {m}/tmp/shared"
    ));
    ok_as(b.0, b.1, &[], &format!("touch {m}/tmp/shared"));
    refused_as(
        b.0,
        b.1,
        &[],
        &format!("touch -d 2001-01-01 {m}/tmp/shared"),
        "Operation not permitted",
    );
    ok_as(
        a.0,
        a.1,
        &[],
        &format!("touch -d 2001-01-01 {m}/tmp/shared"),
    );
    assert_eq!(
        std::fs::metadata(c.path("tmp/shared"))
            .expect("stat")
            .mtime(),
        978307200
    );
    refused_as(
        b.0,
        b.1,
        &[],
        &format!("touch {m}/alice/note"),
        "Permission denied",
    );
    // Neither owner nor writer: not even times set to now (utimensat
    // with no times, without an open that would be refused first).
    sh(&format!(
        "touch {m}/tmp/hers && chmod 644 {m}/tmp/hers && chown 1000:1000 {m}/tmp/hers"
    ));
    refused_as(
        b.0,
        b.1,
        &[],
        &format!("python3 -c 'import os; os.utime(\"{m}/tmp/hers\")'"),
        "Permission denied",
    );

    // The same rules hold on a second mount, where nothing is cached.
    let m2 = c.second_mount("mnt2").display().to_string();
    refused_as(
        b.0,
        b.1,
        &[],
        &format!("cat {m2}/alice/note"),
        "Permission denied",
    );
    refused_as(
        b.0,
        b.1,
        &[],
        &format!("rm -f {m2}/tmp/shared"),
        "Operation not permitted",
    );
    assert_eq!(
        ok_as(a.0, a.1, &[], &format!("cat {m2}/alice/note")),
        "hello\n"
    );
    ok_as(a.0, a.1, &[], &format!("rm {m2}/tmp/shared"));
    // (Checked on the mount that removed it: the first mount's kernel may
    // keep the name for its 1 s entry timeout.)
    assert!(!Path::new(&m2).join("tmp/shared").exists());

    // A user other than root mounts the file system for itself: private,
    // since /etc/fuse.conf does not say user_allow_other here. Debian's
    // udev makes /dev/fuse 0666 for exactly this; a container may not have.
    let dev = std::fs::metadata("/dev/fuse").expect("/dev/fuse");
    if dev.mode() & 0o666 != 0o666 {
        std::fs::set_permissions("/dev/fuse", std::fs::Permissions::from_mode(0o666))
            .expect("chmod /dev/fuse");
    }
    let nobody = c.tmp.path().join("nobody");
    std::fs::create_dir_all(nobody.join("mnt")).expect("mkdir");
    std::fs::copy(c.state.join("client.key"), nobody.join("key")).expect("key");
    sh(&format!(
        "chown -R 65534:65534 {0} && chmod 0600 {0}/key",
        nobody.display()
    ));
    sh(&format!("mkdir -m 0777 {m}/scratch"));
    let n = nobody.display().to_string();
    let mounted = ok_as(
        65534,
        65534,
        &[],
        &format!(
            "{} mount {}:/loom {n}/mnt --key-file {n}/key --log {n}/mount.log",
            loom_bin().display(),
            c.mgs()
        ),
    );
    assert!(mounted.starts_with("mounted at"), "{mounted}");
    let log = std::fs::read_to_string(nobody.join("mount.log")).unwrap_or_default();
    assert!(log.contains("serves only its own user"), "log: {log}");
    ok_as(
        65534,
        65534,
        &[],
        &format!("echo mine > {n}/mnt/scratch/x && cat {n}/mnt/scratch/x"),
    );
    assert_eq!(
        std::fs::read_to_string(c.path("scratch/x")).expect("read"),
        "mine\n"
    );
    assert_eq!(
        std::fs::metadata(c.path("scratch/x")).expect("stat").uid(),
        65534
    );
    refused_as(
        65534,
        65534,
        &[],
        &format!("cat {n}/mnt/alice/note"),
        "Permission denied",
    );
    // Private: no one else gets in, not even root (FUSE without
    // allow_other), though the same directory is open to all.
    let e = std::fs::read_dir(nobody.join("mnt/scratch")).expect_err("root in a private mount");
    assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
    refused_as(
        a.0,
        a.1,
        &[],
        &format!("ls {n}/mnt/scratch"),
        "Permission denied",
    );
    ok_as(
        65534,
        65534,
        &[],
        &format!("{} umount {n}/mnt", loom_bin().display()),
    );
    // Root's mount with --private serves root only.
    let private = c.second_mount_with("private", &["--private"]);
    assert!(
        private.join("scratch/x").exists(),
        "root reads its own mount"
    );
    refused_as(
        65534,
        65534,
        &[],
        &format!("ls {}/scratch", private.display()),
        "Permission denied",
    );
    ok_as(65534, 65534, &[], &format!("ls {m}/scratch"));
    let mounts = std::fs::read_to_string("/proc/mounts").expect("mounts");
    assert!(
        !mounts.contains(&format!("{n}/mnt")),
        "user mount left behind"
    );
}
