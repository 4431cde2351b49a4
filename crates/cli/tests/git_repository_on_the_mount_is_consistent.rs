//! git works on the mount: init, several commits, branches, and a clean
//! `git fsck --full`.
mod common;
use common::*;

#[test]
fn git_repository_on_the_mount_is_consistent() {
    let c = Cluster::up(1, 2, &[]);
    let repo = c.path("repo");
    let r = repo.display();
    sh(&format!(
        "set -e; mkdir {r}; cd {r}; git init -q; git config user.email t@example.org; git config user.name t; \
         cp -r /usr/include/linux src; git add -A; git commit -qm one; \
         for i in $(seq 1 20); do echo line $i >> notes.txt; git add notes.txt; git commit -qm \"note $i\"; done; \
         git checkout -qb side; rm -r src/netfilter; git commit -qam 'drop netfilter'; git checkout -q -; \
         git merge -q --no-edit side; git gc -q"
    ));
    let fsck = sh(&format!("cd {r} && git fsck --full --strict 2>&1"));
    assert!(
        !fsck.contains("error") && !fsck.contains("missing"),
        "git fsck: {fsck}"
    );
    let count = sh(&format!("cd {r} && git rev-list --count HEAD"));
    // one + 20 notes + the side commit (the merge fast-forwards).
    assert_eq!(count.trim(), "22");
    assert_eq!(sh(&format!("cd {r} && git status --porcelain")), "");
}
