//! Issue #29, point 5 (in part): a user who cannot read the mount's key
//! runs `loom getstripe`, `loom setstripe` on their own directory,
//! `loom df`, `loom quota`, `loom getdirstripe`, `loom mkdir -i/-c` and
//! `loom find`, as
//! Lustre users run `lfs`: the tools ask the mount, through its `loom.`
//! extended attributes, and the MDT checks each under the user's own
//! credentials. A directory the user does not own is refused (EPERM);
//! commands reserved to root, or that need the key, say so; the key
//! stays root's.
mod common;
use common::*;
use std::os::unix::fs::PermissionsExt;

/// `loom ARGS` as uid 65534.
fn user(args: &[&str]) -> std::process::Output {
    let bin = loom_bin();
    let mut all = vec![bin.to_str().expect("utf-8")];
    all.extend_from_slice(args);
    as_nobody(&all)
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("utf-8")
}

#[test]
fn a_user_sets_and_reads_striping_through_the_mount() {
    let c = Cluster::up(2, 4, &[]);
    let key = c.state.join("client.key");
    let mode = std::fs::metadata(&key)
        .expect("the key")
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "the client key is root's only: {mode:o}");
    let mine = c.path("mine");
    std::fs::create_dir(&mine).expect("mkdir");
    sh(&format!("chown 65534:65534 {}", s(&mine)));
    let roots = c.path("roots");
    std::fs::create_dir(&roots).expect("mkdir");
    std::fs::set_permissions(&roots, std::fs::Permissions::from_mode(0o777)).expect("chmod");

    // The user's own directory: set, read back, inherited by new files.
    let o = user(&["setstripe", "-c", "2", "-S", "1M", s(&mine)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = user(&["getstripe", s(&mine)]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        out.contains("stripe_count:  2 stripe_size:   1048576"),
        "getstripe of the directory as the user: {out}"
    );
    let f = mine.join("f");
    let o = sh_as_nobody(&format!("echo data > {}", s(&f)))
        .output()
        .expect("a file made by the user");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = user(&["getstripe", "-c", s(&f)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "2",
        "the new file took 2 stripes"
    );
    let o = user(&["getstripe", s(&f)]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("lmm_stripe_count:  2") && out.contains("lmm_stripe_size:   1048576"),
        "{out}"
    );
    // The same as root with the key, for comparison.
    assert_eq!(
        loom_ok(&["getstripe", s(&f)]),
        out,
        "the user sees what root sees"
    );
    let o = user(&["getstripe", "-m", s(&f)]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "0",
        "the file's MDT"
    );

    // DNE: a remote and a striped directory in the user's own, where
    // the user's new subdirectories go, and what getdirstripe shows.
    let remote = mine.join("remote");
    let o = user(&["mkdir", "-i", "1", s(&remote)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(mdt_of(&remote), 1, "the remote directory is on MDT1");
    let o = user(&["getdirstripe", "-i", s(&remote)]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "1", "{o:?}");
    let wide = mine.join("wide");
    let o = user(&["mkdir", "-c", "2", s(&wide)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = user(&["getdirstripe", s(&wide)]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(out, loom_ok(&["getdirstripe", s(&wide)]), "as root sees it");
    assert!(out.starts_with("lmv_stripe_count: 2 "), "{out}");
    let o = user(&["setdirstripe", "-D", "-i", "1", s(&mine)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = user(&["getdirstripe", "-D", s(&mine)]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("lmv_stripe_offset: 1 "),
        "{o:?}"
    );
    std::fs::create_dir(mine.join("next")).expect("mkdir");
    assert_eq!(
        mdt_of(&mine.join("next")),
        1,
        "a new subdirectory follows the default"
    );
    // find: by stripe count, by MDT, by type and name, as the user.
    let o = user(&["find", s(&mine), "--stripe-count", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        s(&f),
        "the one 2-stripe file"
    );
    let o = user(&["find", s(&mine), "--type", "d", "--mdt", "1"]);
    let got: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        got,
        vec![s(&mine.join("next")).to_string(), s(&remote).to_string()],
        "the directories on MDT1"
    );
    let o = user(&["find", s(&mine), "--name", "w*"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), s(&wide));
    let theirs = c.path("private");
    std::fs::create_dir(&theirs).expect("mkdir");
    let o = user(&["mkdir", "-i", "1", s(&theirs.join("x"))]);
    assert!(
        !o.status.success(),
        "a user made a directory in root's 755 one"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Removing the default: new files take the file system's again.
    let o = user(&["setstripe", "-d", s(&mine)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = user(&["getstripe", s(&mine)]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("stripe_count:  1 "),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    // Not the user's directory (though open to all): refused by the MDT.
    let o = user(&["setstripe", "-c", "2", s(&roots)]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "a user set the default of root's directory"
    );
    assert!(err.contains("Operation not permitted"), "{err}");
    assert!(
        loom_ok(&["getstripe", s(&roots)]).contains("stripe_count:  1 "),
        "nothing changed"
    );
    // A new file with its own striping, made by the user: theirs, with
    // 3 stripes of 64 KiB; in root's directory, refused; an existing file
    // keeps its striping (a clear error).
    let new = mine.join("new");
    let o = user(&["setstripe", "-c", "3", "-S", "64k", s(&new)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = user(&["getstripe", s(&new)]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        out.contains("lmm_stripe_count:  3") && out.contains("lmm_stripe_size:   65536"),
        "{out}"
    );
    let meta = std::fs::metadata(&new).expect("the new file, seen at once");
    assert_eq!(
        std::os::unix::fs::MetadataExt::uid(&meta),
        65534,
        "the user's"
    );
    let o = user(&["setstripe", "-c", "2", s(&new)]);
    assert!(!o.status.success(), "an existing file was restriped");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot be changed"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let private = c.path("private-files");
    std::fs::create_dir(&private).expect("mkdir");
    let o = user(&["setstripe", "-c", "2", s(&private.join("f"))]);
    assert!(
        !o.status.success(),
        "a user made a file in root's 755 directory"
    );
    assert!(!private.join("f").exists(), "no file was made");
    // df: the same table as root's, through the mount.
    let o = user(&["df", s(&c.mnt)]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let rows = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("loom-"))
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(
        rows(&out),
        rows(&loom_ok(&["df", s(&c.mnt)])),
        "the user's df lists every target as root's: {out}"
    );
    assert_eq!(rows(&out).len(), 6, "2 MDTs and 4 OSTs: {out}");
    // quota: the user's own usage as root's `loom quota -u 65534` shows
    // it; another user's is refused.
    loom_ok(&["setquota", "-u", "65534", "-I", "1000", s(&c.mnt)]);
    let o = user(&["quota", "-v", s(&c.mnt)]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let root_view = loom_ok(&["quota", "-v", "-u", "65534", s(&c.mnt)]);
    assert!(
        out.starts_with(&root_view),
        "the user's own quota as root sees it:\n{out}\nroot:\n{root_view}"
    );
    assert!(root_view.contains("1000"), "the limit shows: {root_view}");
    let o = user(&["quota", "-u", "0", s(&c.mnt)]);
    assert!(!o.status.success(), "a user saw root's usage");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("only root may see"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = user(&["migrate", "-m", "0", s(&mine)]);
    assert!(!o.status.success(), "a user migrated a tree");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("only root may migrate"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = user(&["fsck", s(&c.mnt)]);
    assert!(!o.status.success(), "a user ran fsck");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("needs the mount's key"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
